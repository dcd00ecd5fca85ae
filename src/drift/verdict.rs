//! The drift verdict, a pure function over one model target's reads
//! ([`decide`]): `unknown` when any read failed (it wins over every
//! other state, and is never "in sync"), `not-deployed` when the model or
//! the environment does not exist or serves nothing, `changed-outside`
//! when what serves carries no content label of ours or the audit log
//! shows it changed by someone else since truss-push last put a
//! deployment there ([`outside`]), `source-changed` when the serving
//! deployment records another hash than the source's, else `in-sync`.

use crate::content::{diff, is_hash};
use crate::label::LABEL_KEY;

/// One target's drift state; the words are the `drift-report`'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drift {
    InSync,
    SourceChanged,
    ChangedOutside,
    NotDeployed,
    /// A read failed: nothing is guessed.
    Unknown,
    /// A chain: its deployments carry no content label.
    NotChecked,
}

impl Drift {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Drift::InSync => "in-sync",
            Drift::SourceChanged => "source-changed",
            Drift::ChangedOutside => "changed-outside",
            Drift::NotDeployed => "not-deployed",
            Drift::Unknown => "unknown",
            Drift::NotChecked => "not-checked",
        }
    }

    /// What serves is not what the repository says.
    pub(crate) fn drifted(self) -> bool {
        matches!(
            self,
            Drift::SourceChanged | Drift::ChangedOutside | Drift::NotDeployed
        )
    }
}

/// Who an audit entry says acted, as read (each value checked by the
/// caller before it is kept: see `read.rs`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Who {
    /// `UI`, `API`, `MCP`, `SYSTEM`, `OTHER`.
    pub(crate) source: Option<String>,
    /// `USER`, `API_KEY`, `BASETEN_SYSTEM`.
    pub(crate) kind: Option<String>,
    pub(crate) key_prefix: Option<String>,
    pub(crate) email: Option<String>,
}

impl Who {
    /// In words, for the report: never this run's key prefix.
    pub(crate) fn described(&self) -> String {
        let source = self.source.as_deref().unwrap_or("an unnamed source");
        match (self.kind.as_deref(), &self.key_prefix, &self.email) {
            (_, _, Some(email)) => format!("{email} ({source})"),
            (Some("API_KEY"), Some(p), _) => format!("API key {p}… ({source})"),
            (Some("API_KEY"), None, _) => format!("an API key the log does not name ({source})"),
            (Some(kind), _, _) => format!("{} ({source})", kind.to_lowercase().replace('_', " ")),
            (None, _, _) => source.to_string(),
        }
    }
}

/// One audit entry, typed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Touch {
    /// `created` as nanoseconds since 1970 (`history::instant`): entries
    /// are ordered by it, never by the answer's order.
    pub(crate) at: u128,
    /// `created` as the platform wrote it.
    pub(crate) created: String,
    pub(crate) event_type: String,
    pub(crate) deployment_id: Option<String>,
    pub(crate) environment: Option<String>,
    pub(crate) who: Who,
}

const DEPLOYED: &str = "MODEL_DEPLOYED";
const PROMOTED: &str = "MODEL_DEPLOYMENT_PROMOTED";
/// What changes how the serving deployment serves.
const CHANGES_SERVING: [&str; 4] = [
    "MODEL_DEPLOYMENT_ACTIVATED",
    "MODEL_DEPLOYMENT_DEACTIVATED",
    "MODEL_DEPLOYMENT_AUTOSCALING_SETTINGS_CHANGED",
    "MODEL_DEPLOYMENT_INSTANCE_TYPE_CHANGED",
];
/// The audit log's groups drift reads (`event_type_groups`).
pub(crate) const AUDIT_GROUPS: [&str; 5] = [
    "DEPLOYED",
    "PROMOTED",
    "ACTIVATED_DEACTIVATED",
    "AUTOSCALING_SETTINGS",
    "INSTANCE_TYPE_CHANGED",
];

impl Touch {
    /// It put a deployment into `env`: a promotion, or a create straight
    /// into it.
    fn places(&self, env: &str) -> bool {
        (self.event_type == PROMOTED || self.event_type == DEPLOYED)
            && self.environment.as_deref() == Some(env)
    }

    /// It changed what serves `env` (whose serving deployment is
    /// `serving`): put a deployment there, or activated, deactivated,
    /// rescaled or moved the serving one to another instance type.
    fn concerns(&self, env: &str, serving: &str) -> bool {
        self.places(env)
            || (CHANGES_SERVING.contains(&self.event_type.as_str())
                && self.deployment_id.as_deref() == Some(serving))
    }

    /// Made with this run's key (by its prefix) through the API.
    fn ours(&self, prefix: &str) -> bool {
        self.who.source.as_deref() == Some("API")
            && self.who.kind.as_deref() == Some("API_KEY")
            && self.who.key_prefix.as_deref() == Some(prefix)
    }

    /// Made by someone else: in the UI, or with an API key whose prefix
    /// is not this run's key's (or is not named).
    fn foreign(&self, prefix: &str) -> bool {
        self.who.source.as_deref() == Some("UI")
            || (self.who.kind.as_deref() == Some("API_KEY")
                && self.who.key_prefix.as_deref() != Some(prefix))
    }
}

/// The changed-outside rule over the audit log: the newest entry that
/// changed what serves `env` and was made by someone else (the UI, or an
/// API key other than this run's, by its prefix), after truss-push's last
/// placement of a deployment there (the newest promotion into `env`, or
/// create straight into it, made with this run's key). Without such a
/// placement in the log, every entry counts. An entry at the same instant
/// as that placement counts too: the log cannot order them.
pub(crate) fn outside<'a>(
    entries: &'a [Touch],
    env: &str,
    serving: &str,
    prefix: &str,
) -> Option<&'a Touch> {
    let mut sorted: Vec<&Touch> = entries.iter().collect();
    sorted.sort_by_key(|t| t.at);
    let last_ours = sorted.iter().rposition(|t| t.places(env) && t.ours(prefix));
    let after: Vec<&Touch> = match last_ours {
        Some(i) => {
            let at = sorted[i].at;
            sorted
                .iter()
                .enumerate()
                .filter(|(j, t)| *j != i && t.at >= at)
                .map(|(_, t)| *t)
                .collect()
        }
        None => sorted,
    };
    after
        .into_iter()
        .rev()
        .find(|t| t.concerns(env, serving) && t.foreign(prefix))
}

/// What serves the environment, as read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Serves {
    NoModel,
    NoEnvironment,
    Nothing,
    /// The serving deployment and the text of its content label (`None`:
    /// it has none, or not as text).
    Deployment {
        id: String,
        label: Option<String>,
    },
}

/// Every read of one model target; an `Err` is a read that failed, with
/// why. `config` and `audit` are read only when a deployment serves.
#[derive(Clone, Debug)]
pub(crate) struct Reads {
    pub(crate) source_hash: Result<String, String>,
    pub(crate) serves: Result<Serves, String>,
    /// The serving deployment's raw config (`Ok(None)`: the platform keeps
    /// none).
    pub(crate) config: Option<Result<Option<String>, String>>,
    pub(crate) audit: Option<Result<Vec<Touch>, String>>,
}

/// One target's verdict with what it rests on.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) drift: Drift,
    pub(crate) serving: Option<String>,
    /// The serving deployment's content label, when it is a hash.
    pub(crate) serving_hash: Option<String>,
    pub(crate) source_hash: Option<String>,
    /// The audit entry that changed it outside, when one did.
    pub(crate) changed: Option<Touch>,
    /// Why, in one sentence.
    pub(crate) why: String,
}

/// The verdict over one model target's reads; `ours` is its
/// `config.yaml` as the repository has it, `prefix` this run's key's.
pub(crate) fn decide(env: &str, reads: &Reads, ours: &str, prefix: &str) -> Verdict {
    let source_hash = reads.source_hash.as_ref().ok().cloned();
    let mut v = Verdict {
        drift: Drift::Unknown,
        serving: None,
        serving_hash: None,
        source_hash,
        changed: None,
        why: String::new(),
    };
    if let Ok(Serves::Deployment { id, label }) = &reads.serves {
        v.serving = Some(id.clone());
        v.serving_hash = label.clone().filter(|l| is_hash(l));
    }
    let failed: Vec<&String> = [
        reads.source_hash.as_ref().err(),
        reads.serves.as_ref().err(),
        reads.config.as_ref().and_then(|c| c.as_ref().err()),
        reads.audit.as_ref().and_then(|a| a.as_ref().err()),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !failed.is_empty() {
        let said: Vec<&str> = failed.iter().map(|s| s.as_str()).collect();
        v.why = format!("not decided: {}", said.join("; "));
        return v;
    }
    let (Ok(source), Ok(serves)) = (&reads.source_hash, &reads.serves) else {
        unreachable!("failed reads were answered above")
    };
    let (id, label) = match serves {
        Serves::NoModel => return v.with(Drift::NotDeployed, "the model does not exist".into()),
        Serves::NoEnvironment => {
            return v.with(
                Drift::NotDeployed,
                format!("the model has no {env} environment"),
            );
        }
        Serves::Nothing => {
            return v.with(
                Drift::NotDeployed,
                format!("the {env} environment serves no deployment"),
            );
        }
        Serves::Deployment { id, label } => (id, label),
    };
    let (Some(Ok(config)), Some(Ok(audit))) = (&reads.config, &reads.audit) else {
        v.why = "not decided: the serving deployment's config or audit log was not read".into();
        return v;
    };
    match label {
        None => {
            return v.with(
                Drift::ChangedOutside,
                format!(
                    "deployment {id} serves {env} and carries no {LABEL_KEY} label: truss-push did not make it"
                ),
            );
        }
        Some(l) if !is_hash(l) => {
            return v.with(
                Drift::ChangedOutside,
                format!(
                    "deployment {id} serves {env} with a {LABEL_KEY} label that is not a content hash: truss-push did not write it"
                ),
            );
        }
        Some(_) => {}
    }
    if let Some(t) = outside(audit, env, id, prefix) {
        let what = event_words(&t.event_type);
        let why = format!(
            "{what} by {} at {} (audit log), after truss-push last put a deployment into {env}",
            t.who.described(),
            t.created
        );
        v.changed = Some(t.clone());
        return v.with(Drift::ChangedOutside, why);
    }
    let same_hash = label.as_deref() == Some(source.as_str());
    let config_same = config.as_deref().map(|theirs| {
        matches!(
            diff::change(ours, Ok(theirs), None),
            diff::What::ConfigSame | diff::What::Same
        )
    });
    match (same_hash, config_same) {
        (false, _) => v.with(
            Drift::SourceChanged,
            format!(
                "deployment {id} serves {env} from content {}…; the repository's is {}…",
                short(label.as_deref().unwrap_or_default()),
                short(source)
            ),
        ),
        (true, Some(false)) => v.with(
            Drift::ChangedOutside,
            format!(
                "deployment {id} records this source's hash, but the config.yaml the platform keeps for it differs from the repository's: its label does not describe it"
            ),
        ),
        (true, Some(true)) => v.with(
            Drift::InSync,
            format!("deployment {id} serves {env} with this source (hash and config.yaml equal)"),
        ),
        (true, None) => v.with(
            Drift::InSync,
            format!(
                "deployment {id} serves {env} with this source (the platform keeps no raw config.yaml for it: the hash decided)"
            ),
        ),
    }
}

impl Verdict {
    fn with(mut self, drift: Drift, why: String) -> Verdict {
        self.drift = drift;
        self.why = why;
        self
    }
}

fn short(hash: &str) -> &str {
    crate::content::skip::short(hash)
}

/// An audit event type in words.
fn event_words(event_type: &str) -> &'static str {
    match event_type {
        PROMOTED => "promoted",
        DEPLOYED => "deployed into it",
        "MODEL_DEPLOYMENT_ACTIVATED" => "activated",
        "MODEL_DEPLOYMENT_DEACTIVATED" => "deactivated",
        "MODEL_DEPLOYMENT_AUTOSCALING_SETTINGS_CHANGED" => "autoscaling changed",
        "MODEL_DEPLOYMENT_INSTANCE_TYPE_CHANGED" => "instance type changed",
        _ => "changed",
    }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
