//! The labels truss-push writes on every deployment it makes. A leaf:
//! `content` writes and reads it, `settings` refuses it in the user's
//! labels, and neither has to reach the other for it.

/// The label every deployment this tool creates carries: its source's
/// content hash (64 hex digits). Documented in docs/deploy-by-content.md.
pub(crate) const LABEL_KEY: &str = "truss_push_content_hash";

/// The label every model deployment this tool creates carries beside the
/// content hash: a value unique to the run (`flow::run_label`), by which a
/// run whose create answer was lost, or that was cancelled while the create
/// was in flight, tells its own deployment from another run's of the same
/// name. Documented in docs/deploy-by-content.md and docs/internals.md.
pub(crate) const RUN_LABEL_KEY: &str = "truss_push_run";
