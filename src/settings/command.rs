//! `command`: what the step does, and the inputs each command reads.
//!
//! One input selects the command (`deploy` by default; `plan: true` is
//! `command: plan`). Every command reads the same key, hosts, outputs and
//! budget; the rest depends on the command, and [`Command::reads`] is the
//! one table of it. An input given a value other than its default to a
//! command that does not read it is an input error, never silently
//! ignored: a `cleanup: true` under `prune` is a workflow someone
//! misread. The lifecycle inputs (`pull-request`, `retire`, `keep`,
//! `older-than`, `prune-unlabelled`, `to-deployment`) are parsed here, each
//! rule once ([`Lifecycle`]).

use super::{Settings, parse_bool};
use crate::ci_context::CiContext;
pub(crate) use crate::cli::commands::Command;
use crate::cli::{Input, Inputs};

/// Parsing and checking the command.
pub(crate) trait CommandInput: Sized {
    /// `command`, and `plan: true` as `command: plan`.
    fn parse(inputs: &Inputs) -> Result<Self, String>;
    /// An input error naming every input given to this command that it
    /// does not read (a value other than the input's default).
    fn check_unread(self, inputs: &Inputs) -> Result<(), String>;
}

impl CommandInput for Command {
    fn parse(inputs: &Inputs) -> Result<Command, String> {
        let plan = inputs
            .trimmed(Input::Plan)
            .map_or(Ok(false), |v| parse_bool("plan", v))?;
        let given = inputs.trimmed(Input::Command);
        let command = match given {
            None => Command::Deploy,
            Some(v) => Command::ALL
                .into_iter()
                .find(|c| c.word().eq_ignore_ascii_case(v))
                .ok_or_else(|| {
                    format!(
                        "command must be one of {}, got {}",
                        Command::ALL.map(Command::word).join(", "),
                        shown(v)
                    )
                })?,
        };
        match (plan, command) {
            (false, c) => Ok(c),
            (true, Command::Deploy | Command::Plan) => Ok(Command::Plan),
            (true, c) => Err(format!(
                "plan: true and command: {} were both given: plan: true means command: plan; keep one of them",
                c.word()
            )),
        }
    }

    fn check_unread(self, inputs: &Inputs) -> Result<(), String> {
        let unread: Vec<&str> = Input::ALL
            .into_iter()
            .filter(|&i| !self.reads(i))
            .filter(|&i| {
                inputs
                    .trimmed(i)
                    .is_some_and(|v| i.spec().default.is_none_or(|d| !d.eq_ignore_ascii_case(v)))
            })
            .map(Input::name)
            .collect();
        match unread.as_slice() {
            [] => Ok(()),
            names => Err(format!(
                "command {} does not read {}: remove {} from this step (docs/reference.md lists which inputs each command reads)",
                self.word(),
                names.join(", "),
                if names.len() == 1 { "it" } else { "them" }
            )),
        }
    }
}

/// How teardown and prune retire a deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Retire {
    /// `DELETE /v1/models/{id}/deployments/{id}`.
    #[default]
    Delete,
    /// `POST …/deactivate`: kept, scaled to nothing.
    Deactivate,
}

/// The lifecycle inputs, each checked.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Lifecycle {
    /// `pull-request`, else the pull or merge request of the event that
    /// runs the step; `None` outside one.
    pub(crate) pull_request: Option<u64>,
    pub(crate) retire: Retire,
    /// `keep`: the newest retirable deployments never retired.
    pub(crate) keep: Option<u32>,
    /// `older-than`, in seconds.
    pub(crate) older_than_secs: Option<u64>,
    pub(crate) prune_unlabelled: bool,
    /// `to-deployment`: an id of the rollback's model.
    pub(crate) to_deployment: Option<String>,
}

/// The longest `older-than`: ten years is a typo, not a retention.
const OLDER_THAN_MAX_DAYS: u64 = 3650;
/// A pull request number past this is not one (GitHub's and GitLab's are
/// far below it).
const PULL_REQUEST_MAX: u64 = 4_294_967_295;

impl Lifecycle {
    pub(crate) fn parse(inputs: &Inputs, ci: &CiContext) -> Result<Lifecycle, String> {
        let pull_request = match inputs.trimmed(Input::PullRequest) {
            Some(v) => Some(pull_request_number(v)?),
            None => event_pull_request(ci),
        };
        let retire = match inputs.or_default(Input::Retire).unwrap_or("delete") {
            v if v.eq_ignore_ascii_case("delete") => Retire::Delete,
            v if v.eq_ignore_ascii_case("deactivate") => Retire::Deactivate,
            v => {
                return Err(format!(
                    "retire must be delete or deactivate, got {}",
                    shown(v)
                ));
            }
        };
        let keep = match inputs.trimmed(Input::Keep) {
            Some(_) => Some(super::number(inputs, Input::Keep)? as u32),
            None => None,
        };
        let older_than_secs = inputs.trimmed(Input::OlderThan).map(age).transpose()?;
        let prune_unlabelled = parse_bool(
            "prune-unlabelled",
            inputs.or_default(Input::PruneUnlabelled).unwrap_or("false"),
        )?;
        let to_deployment = match inputs.trimmed(Input::ToDeployment) {
            Some(v) => Some(
                crate::baseten::id::check(v)
                    .map_err(|_| {
                        format!(
                            "to-deployment must be a deployment id (1 to 64 ASCII letters and digits, as Baseten shows it), got {}",
                            shown(v)
                        )
                    })?
                    .to_string(),
            ),
            None => None,
        };
        Ok(Lifecycle {
            pull_request,
            retire,
            keep,
            older_than_secs,
            prune_unlabelled,
            to_deployment,
        })
    }
}

/// A value as an error shows it: at most 40 characters, quoted.
fn shown(v: &str) -> String {
    let cut: String = v.chars().take(40).collect();
    match cut.len() < v.len() {
        true => format!("{cut:?}…"),
        false => format!("{cut:?}"),
    }
}

/// A pull request number as the input gives it: a positive whole number,
/// digits only (`#12`, `12.0` and `0` are refused).
fn pull_request_number(v: &str) -> Result<u64, String> {
    let n = v
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| v.parse::<u64>().ok())
        .flatten()
        .filter(|&n| (1..=PULL_REQUEST_MAX).contains(&n));
    n.ok_or_else(|| {
        format!(
            "pull-request must be a pull or merge request number (a positive whole number, digits only), got {}",
            shown(v)
        )
    })
}

/// The pull or merge request of the event that runs the step: GitHub's
/// payload (`pull_request.number`, closed events included) or
/// `refs/pull/<n>/…`, GitLab's `CI_MERGE_REQUEST_IID`, Buildkite's
/// `BUILDKITE_PULL_REQUEST`.
fn event_pull_request(ci: &CiContext) -> Option<u64> {
    ci.event_for_reporting()
        .and_then(crate::ci_context::event_pr_number)
        .or_else(|| ci.github.pull_ref_number())
        .or_else(|| ci.gitlab.merge_request_iid.as_deref()?.parse().ok())
        .or_else(|| ci.buildkite.pull_request.as_deref()?.parse().ok())
        .filter(|&n| (1..=PULL_REQUEST_MAX).contains(&n))
}

/// `older-than`: whole hours or days (`36h`, `14d`), at least one hour.
fn age(v: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "older-than must be whole hours or days, at least 1h and at most {OLDER_THAN_MAX_DAYS}d (e.g. 36h, 14d), got {}",
            shown(v)
        )
    };
    // The unit is the last character (of any width: `1é` is refused,
    // never cut inside a character).
    let Some(unit) = v.chars().last() else {
        return Err(bad());
    };
    let digits = &v[..v.len() - unit.len_utf8()];
    let per = match unit {
        'h' | 'H' => 3600,
        'd' | 'D' => 86_400,
        _ => return Err(bad()),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let secs = n.checked_mul(per).ok_or_else(bad)?;
    if !(3600..=OLDER_THAN_MAX_DAYS * 86_400).contains(&secs) {
        return Err(bad());
    }
    Ok(secs)
}

/// A command with its inputs parsed: the lifecycle values, and the deploy
/// settings of its targets (teardown's may name none: an empty
/// `truss_directory`, from `Settings::parse_targets_optional`, whose hosts,
/// team, budget and `dry-run` it still reads).
#[derive(Debug)]
pub(crate) struct CommandSettings {
    pub(crate) command: Command,
    pub(crate) lifecycle: Lifecycle,
    pub(crate) settings: Option<Settings>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(pairs: &[(Input, &str)]) -> Inputs {
        pairs
            .iter()
            .fold(Inputs::default(), |i, (k, v)| i.with(*k, v))
    }

    #[test]
    fn the_command_is_one_word_and_plan_true_is_plan() {
        let c = |pairs: &[(Input, &str)]| Command::parse(&inputs(pairs));
        assert_eq!(c(&[]), Ok(Command::Deploy));
        assert_eq!(c(&[(Input::Command, "Prune")]), Ok(Command::Prune));
        assert_eq!(c(&[(Input::Plan, "true")]), Ok(Command::Plan));
        assert_eq!(
            c(&[(Input::Plan, "true"), (Input::Command, "plan")]),
            Ok(Command::Plan)
        );
        assert!(
            c(&[(Input::Command, "destroy")])
                .unwrap_err()
                .contains("teardown")
        );
        assert!(
            c(&[(Input::Plan, "true"), (Input::Command, "prune")])
                .unwrap_err()
                .contains("keep one")
        );
    }

    #[test]
    fn an_input_a_command_does_not_read_is_refused_but_its_default_is_not() {
        let prune = |pairs: &[(Input, &str)]| Command::Prune.check_unread(&inputs(pairs));
        assert_eq!(
            prune(&[(Input::Keep, "3"), (Input::PredictTimeout, "300")]),
            Ok(())
        );
        let e = prune(&[(Input::Cleanup, "true"), (Input::PredictPayload, "{}")]).unwrap_err();
        assert!(e.contains("cleanup, predict-payload"), "{e}");
        assert!(
            Command::Deploy
                .check_unread(&inputs(&[(Input::Keep, "2")]))
                .is_err()
        );
        assert!(
            Command::Deploy
                .check_unread(&inputs(&[(Input::PullRequest, "2")]))
                .is_ok()
        );
        assert!(
            Command::Drift
                .check_unread(&inputs(&[(Input::DryRun, "true")]))
                .is_err()
        );
        assert!(
            Command::Rollback
                .check_unread(&inputs(&[(Input::ToDeployment, "abc")]))
                .is_ok()
        );
    }

    #[test]
    fn lifecycle_values_are_checked_each_once() {
        let ci = CiContext::default();
        let l = |pairs: &[(Input, &str)]| Lifecycle::parse(&inputs(pairs), &ci);
        assert_eq!(l(&[]).unwrap(), Lifecycle::default());
        for bad in ["#12", "0", "-1", "1.0", "1 2", "１２", "99999999999"] {
            assert!(l(&[(Input::PullRequest, bad)]).is_err(), "{bad:?}");
        }
        assert_eq!(
            l(&[(Input::PullRequest, "12")]).unwrap().pull_request,
            Some(12)
        );
        assert!(l(&[(Input::Keep, "0")]).is_err());
        assert!(l(&[(Input::Keep, "1001")]).is_err());
        assert_eq!(l(&[(Input::Keep, "5")]).unwrap().keep, Some(5));
        for bad in [
            "2w",
            "0h",
            "1.5d",
            "d",
            "14",
            "99999999999999999999d",
            "3651d",
        ] {
            assert!(l(&[(Input::OlderThan, bad)]).is_err(), "{bad:?}");
        }
        assert_eq!(
            l(&[(Input::OlderThan, "14d")]).unwrap().older_than_secs,
            Some(14 * 86_400)
        );
        assert_eq!(
            l(&[(Input::OlderThan, "1h")]).unwrap().older_than_secs,
            Some(3600)
        );
        assert_eq!(
            l(&[(Input::Retire, "deactivate")]).unwrap().retire,
            Retire::Deactivate
        );
        assert!(l(&[(Input::Retire, "destroy")]).is_err());
        assert!(l(&[(Input::ToDeployment, "abc/../x")]).is_err());
        assert_eq!(
            l(&[(Input::ToDeployment, "q1w2e3")])
                .unwrap()
                .to_deployment
                .as_deref(),
            Some("q1w2e3")
        );
    }
}
