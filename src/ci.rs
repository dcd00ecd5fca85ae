//! stub (ci) — being written
