//! truss-push: deploy a Truss model or chain to Baseten from CI and report
//! the truth about it.

pub mod archive;
pub mod ci;
pub mod env_vars;
pub mod retry;
pub mod s3;
pub mod secret;
pub mod status;
pub mod cli;
pub mod config;
pub mod git;
pub mod outcome;
