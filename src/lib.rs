//! truss-push: deploy a Truss model or chain to Baseten from CI and report
//! the truth about it.

pub mod archive;
pub mod ci;
pub mod s3;
