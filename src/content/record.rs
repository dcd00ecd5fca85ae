//! What deploy-by-content learned in a run, kept in the run's state for
//! the outputs and the summary.

use super::diff::{self, Change};

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ByContent {
    /// The `unchanged` output: `Some` only with `skip-unchanged`.
    pub(crate) unchanged: Option<bool>,
    /// The `reused` output: `Some` only with `skip-unchanged`; `true` when
    /// an older deployment made from this source was promoted instead of
    /// building (`content::reuse`).
    pub(crate) reused: Option<bool>,
    /// This truss's content hash, once computed.
    pub(crate) hash: Option<String>,
    /// What the deploy changes in the serving deployment's config.
    pub(crate) change: Option<Change>,
}

impl ByContent {
    /// The summary's section, when there is something to say.
    pub(crate) fn markdown(&self) -> Option<String> {
        self.change.as_ref().map(diff::markdown)
    }
}
