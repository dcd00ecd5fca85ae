//! truss-push: deploy a Truss model or chain to Baseten from CI and report
//! the truth about it.

// Items are pub(crate) unless the binary or the tests need them, so the
// compiler sees dead code.
#![warn(unreachable_pub)]
// Unit tests write scratch files, read the clock and build clients as they
// need: the architecture rules of clippy.toml hold for product code.
#![cfg_attr(
    test,
    allow(
        clippy::disallowed_methods,
        clippy::disallowed_types,
        reason = "test code, not the product"
    )
)]

mod archive;
mod baseten;
mod budget;
mod chain;
mod changes;
mod ci;
mod ci_context;
pub mod cli;
mod config;
mod content;
mod drift;
pub mod env_vars;
mod evidence;
mod execute;
mod files;
mod flow;
mod git;
mod github;
mod handles;
mod history;
mod kind;
mod label;
mod lifecycle;
mod model;
mod multi;
mod net;
mod outcome;
mod plan;
mod promotion;
mod report;
mod retry;
mod rollback;
mod run;
mod s3;
mod secret;
mod settings;
mod status;
mod targets;
pub mod truss_config;

pub use ci::{EXTRA_OUTPUT_NAMES, PYTHON_ACTION_OUTPUT_NAMES, dotenv_variables};
pub use run::run;
pub use secret::RedactedStderr;
