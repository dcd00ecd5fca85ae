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

/// What `command: drift` found, kept in the run's state for the outputs,
/// the exit code and the summary (`drift::run` fills it).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DriftFound {
    /// Any target drifted (`source-changed`, `changed-outside`,
    /// `not-deployed`): the `drift` output, and exit 7 when every read
    /// succeeded.
    pub(crate) drifted: bool,
    /// The `drift-report` output: a JSON array, one object per target.
    pub(crate) report: String,
    /// The summary's table.
    pub(crate) heading: String,
    pub(crate) rows: Vec<Vec<crate::ci::Cell>>,
    pub(crate) details: Vec<String>,
}

/// The drift summary's columns.
pub(crate) const DRIFT_COLUMNS: &[&str] = &["Target", "State", "Serving", "Why"];
