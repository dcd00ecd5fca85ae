//! stub (s3) — being written
