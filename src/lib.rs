//! truss-push: deploy a Truss model or chain to Baseten from CI and report
//! the truth about it.

pub mod archive;
pub mod baseten;
pub mod chain;
pub mod ci;
pub mod cli;
pub mod config;
pub mod env_vars;
mod files;
pub mod flow;
pub mod git;
pub mod model;
pub mod net;
pub mod outcome;
pub mod promotion;
pub mod retry;
pub mod run;
pub mod s3;
pub mod secret;
pub mod status;

pub use run::{Io, run};
