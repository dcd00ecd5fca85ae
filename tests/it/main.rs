//! Black-box tests: the `truss-push` binary against the fake Baseten.
//! One test binary (links once); modules per capability.

// clippy.toml's architecture rules are the product's: the tests write
// files, read the clock and the environment, and build clients.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code, not the product"
)]

mod harness;

mod bad_input;
mod bounded;
mod budget;
mod cancel;
mod cancel_windows;
mod chain_deploy;
mod chain_harness;
mod ci_reads;
mod cli;
mod complete_window;
mod config_parity;
mod deadline_cuts;
mod docs_reference;
mod dotenv_limits;
mod drift;
mod drift_hostile;
mod environment;
mod every_output;
mod evidence;
mod fanout;
mod faults;
mod first_screen;
mod gated;
mod github;
mod informing;
mod layers;
mod lifecycle;
mod messages;
mod model_deploy;
mod network;
mod official_client;
mod outputs;
mod preflight;
mod props;
mod proxy_matrix;
mod published_api;
mod reuse;
mod rollback;
mod rollback_hostile;
mod s3_answers;
mod same_name;
mod scope;
mod ship;
mod skip_unchanged;
mod snapshots;
mod stream;
mod structure;
mod untrusted;
mod upload;
mod upload_expect;
mod wire;
mod workflow_scripts;
