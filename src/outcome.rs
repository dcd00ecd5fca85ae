//! How a run ends: the status word users branch on, and the exit code.

use std::fmt;

/// The `status` output. The five words are the Python action's and must not
/// change meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Success,
    DeployFailed,
    DeployTimeout,
    PredictFailed,
    CleanupFailed,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::DeployFailed => "deploy_failed",
            Status::DeployTimeout => "deploy_timeout",
            Status::PredictFailed => "predict_failed",
            Status::CleanupFailed => "cleanup_failed",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a run did not succeed. A caller branches on the kind (status word and
/// exit code); the message chain is for people.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    /// An input was wrong; nothing was uploaded or created.
    #[error("{0}")]
    InvalidInput(String),
    /// The platform said the deploy failed, or a step before it did.
    #[error("{0:#}")]
    Deploy(anyhow::Error),
    /// The deadline passed while the deploy was still in progress.
    #[error("{0}")]
    Timeout(String),
    /// The smoke-test predict failed.
    #[error("{0:#}")]
    Predict(anyhow::Error),
    /// Deactivating the deployment failed after everything else succeeded.
    #[error("{0:#}")]
    Cleanup(anyhow::Error),
    /// A signal stopped the run, or fail-fast called this target off.
    #[error("cancelled by {0}")]
    Cancelled(CancelReason),
    /// A signal stopped the run (or came during its cleanup) and cleanup
    /// could not finish: `left` names what is left running (or may be),
    /// `why` what stopped cleanup.
    #[error("cancelled by {reason}, and cleanup did not finish ({why}): {left}")]
    CleanupUnfinished {
        reason: CancelReason,
        why: String,
        left: String,
    },
}

/// Why a run was cancelled. Callers branch on the kind (a signal halts the
/// whole several-target run; fail-fast only calls off the targets not yet
/// started), never on the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CancelReason {
    /// SIGINT, SIGTERM or SIGHUP, by name.
    Signal(&'static str),
    /// Another target failed and `fail-fast` is on.
    FailFast,
}

impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CancelReason::Signal(name) => f.write_str(name),
            CancelReason::FailFast => f.write_str("fail-fast (another target failed)"),
        }
    }
}

impl Failure {
    pub(crate) fn status(&self) -> Status {
        match self {
            Failure::InvalidInput(_)
            | Failure::Deploy(_)
            | Failure::Cancelled(_)
            | Failure::CleanupUnfinished { .. } => Status::DeployFailed,
            Failure::Timeout(_) => Status::DeployTimeout,
            Failure::Predict(_) => Status::PredictFailed,
            Failure::Cleanup(_) => Status::CleanupFailed,
        }
    }

    /// Distinct exit codes so shell users can branch without parsing
    /// outputs. Documented in docs/reference.md, generated from the constants below.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Failure::Deploy(_) => EXIT_DEPLOY_FAILED,
            Failure::InvalidInput(_) => EXIT_INVALID_INPUT,
            Failure::Timeout(_) => EXIT_DEPLOY_TIMEOUT,
            Failure::Predict(_) => EXIT_PREDICT_FAILED,
            Failure::Cleanup(_) => EXIT_CLEANUP_FAILED,
            Failure::Cancelled(_) => EXIT_CANCELLED,
            Failure::CleanupUnfinished { .. } => EXIT_CLEANUP_UNFINISHED,
        }
    }

    /// The same failure (same status word and exit code) with `context`
    /// said first, the one way a failure gains context: one that carries a
    /// cause keeps it whole (`{:#}` prints "context: cause", and the chain
    /// still reaches the cause); a message-only one reads "context: message".
    /// A cancellation says only what cancelled it.
    pub(crate) fn context<C>(self, context: C) -> Failure
    where
        C: fmt::Display + Send + Sync + 'static,
    {
        match self {
            Failure::Deploy(e) => Failure::Deploy(e.context(context)),
            Failure::Predict(e) => Failure::Predict(e.context(context)),
            Failure::Cleanup(e) => Failure::Cleanup(e.context(context)),
            Failure::InvalidInput(m) => Failure::InvalidInput(format!("{context}: {m}")),
            Failure::Timeout(m) => Failure::Timeout(format!("{context}: {m}")),
            cancelled @ (Failure::Cancelled(_) | Failure::CleanupUnfinished { .. }) => cancelled,
        }
    }
}

pub(crate) const EXIT_SUCCESS: u8 = 0;
pub(crate) const EXIT_DEPLOY_FAILED: u8 = 1;
pub(crate) const EXIT_INVALID_INPUT: u8 = 2;
pub(crate) const EXIT_DEPLOY_TIMEOUT: u8 = 3;
pub(crate) const EXIT_PREDICT_FAILED: u8 = 4;
pub(crate) const EXIT_CLEANUP_FAILED: u8 = 5;
/// Exit code of a run whose deploy succeeded but whose requested outputs
/// (`$GITHUB_OUTPUT` or the outputs file) could not be written: later steps
/// would read nothing, so the step must not pass. A run that already failed
/// keeps its own exit code.
pub(crate) const EXIT_OUTPUTS_NOT_WRITTEN: u8 = 6;
/// Exit code of `command: drift` when every read succeeded (status
/// `success`) and some target's environment does not serve what the
/// repository says (`drift: true`), as `terraform plan
/// -detailed-exitcode` answers 2: a scheduled job fails on drift and
/// only on drift. A read that failed is exit 1 instead, never 0 or 7.
pub(crate) const EXIT_DRIFTED: u8 = 7;
/// Exit code of a cancelled run whose cleanup could not finish (its
/// deactivate hung past the signal's seconds, a second signal came, or
/// what a create in flight made could not be looked up): `deployment-id`
/// names what is left running.
pub(crate) const EXIT_CLEANUP_UNFINISHED: u8 = 8;
pub(crate) const EXIT_CANCELLED: u8 = 130;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_is_said_first_and_keeps_the_cause_and_the_kind() {
        let cause = std::io::Error::other("connection reset");
        let f = Failure::Predict(anyhow::Error::new(cause).context("the smoke test failed"))
            .context("traffic stays on v1");
        assert_eq!(f.exit_code(), EXIT_PREDICT_FAILED);
        assert_eq!(
            f.to_string(),
            "traffic stays on v1: the smoke test failed: connection reset"
        );
        let Failure::Predict(e) = &f else {
            panic!("{f:?}")
        };
        assert!(e.chain().any(|c| c.is::<std::io::Error>()), "{e:?}");
        let t = Failure::Timeout("the deadline passed".into()).context("nothing was promoted");
        assert_eq!(t.status(), Status::DeployTimeout);
        assert_eq!(t.to_string(), "nothing was promoted: the deadline passed");
        let c = Failure::Cancelled(CancelReason::FailFast).context("ignored");
        assert_eq!(
            c.to_string(),
            Failure::Cancelled(CancelReason::FailFast).to_string()
        );
    }

    #[test]
    fn statuses_and_exit_codes() {
        let cases = [
            (Failure::InvalidInput("x".into()), "deploy_failed", 2),
            (Failure::Deploy(anyhow::anyhow!("x")), "deploy_failed", 1),
            (Failure::Timeout("x".into()), "deploy_timeout", 3),
            (Failure::Predict(anyhow::anyhow!("x")), "predict_failed", 4),
            (Failure::Cleanup(anyhow::anyhow!("x")), "cleanup_failed", 5),
            (
                Failure::Cancelled(CancelReason::Signal("SIGINT")),
                "deploy_failed",
                130,
            ),
            (
                Failure::Cancelled(CancelReason::FailFast),
                "deploy_failed",
                130,
            ),
            (
                Failure::CleanupUnfinished {
                    reason: CancelReason::Signal("SIGTERM"),
                    why: "x".into(),
                    left: "y".into(),
                },
                "deploy_failed",
                8,
            ),
        ];
        for (f, status, code) in cases {
            assert_eq!(f.status().as_str(), status);
            assert_eq!(f.exit_code(), code);
        }
        assert_eq!(Status::Success.as_str(), "success");
    }

    /// The texts users and snapshots see.
    #[test]
    fn cancel_reasons_read_as_before() {
        let cases = [
            (CancelReason::Signal("SIGTERM"), "cancelled by SIGTERM"),
            (
                CancelReason::FailFast,
                "cancelled by fail-fast (another target failed)",
            ),
        ];
        for (why, text) in cases {
            assert_eq!(Failure::Cancelled(why).to_string(), text);
        }
    }
}
