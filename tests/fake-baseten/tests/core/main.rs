//! End-to-end tests of the fake Baseten through HTTP, with reqwest as the
//! client: one test binary, one module per concern.

mod common;
#[path = "../support/signed_put.rs"]
mod signed_put;

mod auth;
mod binary;
mod faults;
mod flow;
mod graphql;
mod inference;
mod lifecycle;
mod metrics;
mod preflight;
mod promotion;
mod published;
mod request_log;
mod timeline;
