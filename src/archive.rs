//! stub (archive) — being written
