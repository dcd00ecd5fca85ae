//! The label truss-push writes on every deployment it makes. A leaf:
//! `content` writes and reads it, `settings` refuses it in the user's
//! labels, and neither has to reach the other for it.

/// The label every deployment this tool creates carries: its source's
/// content hash (64 hex digits). Documented in docs/deploy-by-content.md.
pub(crate) const LABEL_KEY: &str = "truss_push_content_hash";
