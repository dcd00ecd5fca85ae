//! Retiring what truss-push made: `teardown` (a pull request's previews,
//! in every model the key sees) and `prune` (old deployments of the
//! targets' models), under one rule above all: what serves is never
//! touched. docs/lifecycle.md is the user's account of it.
//!
//! The decisions are pure functions over what this run read, here with
//! their table tests: which deployments a command selects ([`Scope`],
//! [`select`]), which ones a safety rule protects and why
//! ([`Protected`], [`protection`]), and what a fresh reading of the
//! environments says just before each retirement ([`still_free`]).
//! Ages come from `created_at` read as the audit log's times are
//! ([`epoch_seconds`]).
//! `teardown` and `prune` read and list; `retire` performs the
//! retirements a few at a time and records each as it lands, so a
//! cancelled run reports what it did.

mod freed;
pub(crate) mod prune;
mod retire;
pub(crate) mod teardown;

use std::collections::BTreeMap;

use crate::label::{LABEL_KEY, PULL_REQUEST_LABEL_KEY};
use crate::promotion::Env;

pub(crate) use crate::settings::command::Retire;

/// `created_at` (ISO 8601, UTC, as the platform writes it) in seconds
/// since the epoch: the audit log's one reading of a time
/// (`history::instant`). `None` for anything else: a deployment whose age
/// cannot be told is never retired by age.
pub(crate) fn epoch_seconds(at: &str) -> Option<i64> {
    crate::history::instant(at.trim()).and_then(|n| i64::try_from(n / 1_000_000_000).ok())
}

/// Longest deployment or model name shown; a longer one is cut.
const NAME_MAX_CHARS: usize = 128;

/// What was done (or, in a dry run, would be done) to one deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Deleted,
    Deactivated,
    WouldDelete,
    WouldDeactivate,
}

impl Action {
    pub(crate) fn of(retire: Retire, dry_run: bool) -> Action {
        match (retire, dry_run) {
            (Retire::Delete, false) => Action::Deleted,
            (Retire::Deactivate, false) => Action::Deactivated,
            (Retire::Delete, true) => Action::WouldDelete,
            (Retire::Deactivate, true) => Action::WouldDeactivate,
        }
    }

    pub(crate) fn word(self) -> &'static str {
        match self {
            Action::Deleted => "deleted",
            Action::Deactivated => "deactivated",
            Action::WouldDelete => "would-delete",
            Action::WouldDeactivate => "would-deactivate",
        }
    }
}

/// One deployment as this run's listing read it, its name made safe.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Seen {
    pub(crate) id: String,
    /// Shown as [`shown_name`] made it; empty when it had none.
    pub(crate) name: String,
    pub(crate) status: String,
    /// `created_at` in seconds since the epoch; `None` when the answer had
    /// none this build can read.
    pub(crate) created: Option<i64>,
    /// Carries truss-push's content-hash label: made by truss-push.
    pub(crate) labelled: bool,
    /// The `truss_push_pull_request` label's value, when a string.
    pub(crate) pull_request: Option<String>,
    pub(crate) development: bool,
    /// The listing says it is in production (`is_production`).
    pub(crate) production: bool,
    /// The environment the listing says it belongs to, when any.
    pub(crate) environment: Option<String>,
    /// What it runs on and how many replicas it keeps at rest, when the
    /// listing says (what its retirement frees, for a price to weigh).
    /// The instance type is kept as listed, unescaped, so that it matches
    /// the price list exactly: it is never shown before `freed` checks it
    /// (`flow::price::type_name`).
    pub(crate) instance_type: Option<String>,
    pub(crate) min_replica: Option<u32>,
}

impl Seen {
    /// Reads one listed deployment.
    pub(crate) fn from_listed(d: &crate::baseten::ListedDeployment) -> Seen {
        let label = |k: &str| d.labels.as_ref().and_then(|l| l.get(k));
        Seen {
            id: d.id.clone(),
            name: d.name.as_deref().map(shown_name).unwrap_or_default(),
            status: d.status.trim().to_ascii_uppercase(),
            created: d.created_at.as_deref().and_then(epoch_seconds),
            labelled: label(LABEL_KEY).is_some_and(|v| v.is_string()),
            pull_request: label(PULL_REQUEST_LABEL_KEY)
                .and_then(|v| v.as_str())
                .map(str::to_string),
            development: d.is_development,
            production: d.is_production,
            environment: d
                .environment
                .as_deref()
                .filter(|e| !e.is_empty())
                .map(shown_name),
            instance_type: d.instance_type_name.clone(),
            min_replica: d
                .autoscaling_settings
                .as_ref()
                .and_then(|a| a.get("min_replica"))
                .and_then(serde_json::Value::as_u64)
                .and_then(|n| u32::try_from(n).ok()),
        }
    }
}

impl Seen {
    /// Reads one listed chain deployment: no name, no labels, never the
    /// development one; the environment it serves as the listing says.
    pub(crate) fn from_chain(d: &crate::baseten::ChainListed) -> Seen {
        Seen {
            id: d.id.clone(),
            name: String::new(),
            status: d.status.trim().to_ascii_uppercase(),
            created: epoch_seconds(&d.created_at),
            labelled: false,
            pull_request: None,
            development: false,
            production: false,
            environment: d
                .environment
                .as_deref()
                .filter(|e| !e.is_empty())
                .map(shown_name),
            instance_type: None,
            min_replica: None,
        }
    }
}

/// Why a deployment is never retired, whatever the inputs say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Protected {
    /// It serves this environment.
    Serving(String),
    /// A promotion into this environment is moving traffic to it.
    Candidate(String),
    /// It served this environment just before the current deployment: the
    /// rollback target (from the audit log).
    PreviousServing(String),
    /// Building, deploying or otherwise on its way (another run may be
    /// creating it), or a status this build does not know.
    Unsettled(String),
    /// The model's development deployment.
    Development,
    /// `keep`/`older-than` order by creation time, and the answer gave
    /// none this build can read.
    NoCreationTime,
    /// A promotion into this environment is moving traffic and the answer
    /// names no candidate: which deployment takes part of it is not known.
    Moving(String),
    /// What serves this environment changed between the listing and the
    /// retirement: the previous serving deployment is no longer the one
    /// the run read.
    Changed(String),
}

impl Protected {
    pub(crate) fn describe(&self) -> String {
        match self {
            Protected::Serving(e) => format!("serves {e}"),
            Protected::Candidate(e) => format!("is being promoted into {e}"),
            Protected::PreviousServing(e) => {
                format!("served {e} before the current deployment (the rollback target)")
            }
            Protected::Unsettled(s) => {
                format!("is {s} (not settled: another run may be making it)")
            }
            Protected::Development => "is the development deployment".into(),
            Protected::NoCreationTime => "has no readable creation time to order it by".into(),
            Protected::Moving(e) => format!(
                "may take traffic: a promotion into {e} is moving traffic, and the platform's answer names no candidate"
            ),
            Protected::Changed(e) => format!(
                "may have served {e} before what serves it now, which changed during the run, and the audit log does not say otherwise"
            ),
        }
    }
}

/// Statuses a deployment may be retired in: settled, whether serving
/// traffic or not. Any other (building, deploying, loading, updating,
/// waking, deactivating, or one this build does not know) protects it.
pub(crate) const SETTLED_STATUSES: &[&str] = &[
    "ACTIVE",
    "SCALED_TO_ZERO",
    "INACTIVE",
    "FAILED",
    "BUILD_FAILED",
    "BUILD_STOPPED",
    "DEPLOY_FAILED",
    "UNHEALTHY",
];

/// Which deployments a command selects before the safety rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// `teardown`: those whose pull-request label has exactly this value.
    PullRequest(String),
    /// `prune`: those carrying truss-push's labels.
    Labelled,
    /// `prune` with `prune-unlabelled`: every deployment of the model.
    Everything,
}

impl Scope {
    pub(crate) fn selects(&self, d: &Seen) -> bool {
        match self {
            Scope::PullRequest(v) => d.pull_request.as_deref() == Some(v.as_str()),
            Scope::Labelled => d.labelled || d.pull_request.is_some(),
            Scope::Everything => true,
        }
    }
}

/// The age rules of `prune`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Age {
    /// The newest this many retirable deployments are kept.
    pub(crate) keep: Option<u32>,
    /// Only what was created more than this many seconds before `now`.
    pub(crate) older_than_secs: Option<u64>,
    /// The run's start, in seconds since the epoch.
    pub(crate) now: i64,
}

/// What the rules say of one deployment in scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Retire,
    Protected(Protected),
    /// Among the `keep` newest retirable ones (its rank, 1 = newest).
    Kept(u32),
    /// Not older than `older-than`.
    TooRecent,
    /// `retire: deactivate` and it is inactive already: nothing to do,
    /// not counted.
    AlreadyInactive,
}

/// The protections one reading of the model's environments gives, with
/// the previous serving deployment of each environment (from the audit
/// log): id → the first reason found.
pub(crate) fn guards(
    envs: &[(String, Env)],
    previous: &[(String, String)],
) -> BTreeMap<String, Protected> {
    let mut out = BTreeMap::new();
    for (name, env) in envs {
        if let Some(c) = &env.current {
            out.entry(c.clone())
                .or_insert(Protected::Serving(shown_name(name)));
        }
        if let Some(c) = &env.candidate {
            out.entry(c.clone())
                .or_insert(Protected::Candidate(shown_name(name)));
        }
    }
    for (env, id) in previous {
        out.entry(id.clone())
            .or_insert(Protected::PreviousServing(shown_name(env)));
    }
    out
}

/// An environment whose promotion moves traffic (not ended) while the
/// answer names no candidate: any deployment may be the one taking part of
/// it, so nothing of the model may be retired on this reading.
pub(crate) fn unnamed_candidate(envs: &[(String, Env)]) -> Option<String> {
    envs.iter()
        .find(|(_, e)| e.candidate.is_none() && e.in_progress.as_ref().is_some_and(|f| !f.ended()))
        .map(|(name, _)| shown_name(name))
}

/// Whether a safety rule protects `d`, and which (the first that holds).
pub(crate) fn protection(d: &Seen, guards: &BTreeMap<String, Protected>) -> Option<Protected> {
    if let Some(p) = guards.get(&d.id) {
        return Some(p.clone());
    }
    if let Some(e) = &d.environment {
        return Some(Protected::Serving(e.clone()));
    }
    if d.production {
        return Some(Protected::Serving("production".into()));
    }
    if d.development {
        return Some(Protected::Development);
    }
    if !SETTLED_STATUSES.contains(&d.status.as_str()) {
        return Some(Protected::Unsettled(d.status.clone()));
    }
    None
}

/// The verdict on every deployment `scope` selects, in the listing's
/// order: protected ones first decided by [`protection`]; with `age`
/// (prune), the retirable ones ordered newest first (ties by id) and kept
/// by `keep` and `older-than` as the inputs say (both given: retired only
/// past the `keep` newest **and** older than the age).
pub(crate) fn select(
    deployments: &[Seen],
    scope: &Scope,
    retire: Retire,
    age: Option<Age>,
    guards: &BTreeMap<String, Protected>,
) -> Vec<(Seen, Verdict)> {
    let mut out: Vec<(Seen, Verdict)> = deployments
        .iter()
        .filter(|d| scope.selects(d))
        .map(|d| {
            let verdict = match protection(d, guards) {
                Some(p) => Verdict::Protected(p),
                None if age.is_some() && d.created.is_none() => {
                    Verdict::Protected(Protected::NoCreationTime)
                }
                None if retire == Retire::Deactivate && d.status == "INACTIVE" => {
                    Verdict::AlreadyInactive
                }
                None => Verdict::Retire,
            };
            (d.clone(), verdict)
        })
        .collect();
    let Some(age) = age else {
        return out;
    };
    let mut free: Vec<usize> = (0..out.len())
        .filter(|&i| out[i].1 == Verdict::Retire)
        .collect();
    free.sort_by(|&a, &b| {
        let (a, b) = (&out[a].0, &out[b].0);
        b.created.cmp(&a.created).then_with(|| a.id.cmp(&b.id))
    });
    for (rank, i) in free.into_iter().enumerate() {
        let rank = u32::try_from(rank + 1).unwrap_or(u32::MAX);
        let created = out[i].0.created.unwrap_or(i64::MAX);
        out[i].1 = match (age.keep, age.older_than_secs) {
            (Some(keep), _) if rank <= keep => Verdict::Kept(rank),
            (_, Some(secs))
                if created
                    > age
                        .now
                        .saturating_sub(i64::try_from(secs).unwrap_or(i64::MAX)) =>
            {
                Verdict::TooRecent
            }
            _ => Verdict::Retire,
        };
    }
    out
}

/// Just before a retirement: what a fresh reading of the environments
/// says of `id`, next to the reading the decision was made from
/// (`listed`). `id` is protected when it serves or is being promoted now,
/// and when what serves an environment changed since the listing: what
/// served before the new one is then known only to the audit log as it is
/// now, which this run did not read. `None`: it may be retired.
pub(crate) fn still_free(
    id: &str,
    listed: &[(String, Env)],
    fresh: &[(String, Env)],
) -> Option<Protected> {
    if let Some(env) = unnamed_candidate(fresh) {
        return Some(Protected::Moving(env));
    }
    if let Some(p) = guards(fresh, &[]).remove(id) {
        return Some(p);
    }
    let before = |name: &str| {
        listed
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, e)| e.current.as_ref())
    };
    fresh
        .iter()
        .find(|(name, env)| before(name) != env.current.as_ref())
        .map(|(name, _)| Protected::Changed(shown_name(name)))
}

/// A name from the platform as outputs and the summary may show it: ASCII
/// letters, digits, ` `, `_`, `.`, `-` and `/` as written, anything else
/// escaped (`\u{…}`), at most [`NAME_MAX_CHARS`] characters.
pub(crate) fn shown_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().take(NAME_MAX_CHARS) {
        match c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '.' | '-' | '/') {
            true => out.push(c),
            false => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
        }
    }
    out
}

#[cfg(test)]
mod tests;
