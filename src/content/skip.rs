//! `skip-unchanged`: whether the deployment serving the environment was
//! made from this very source, read from the platform before anything is
//! packaged. Only an equal hash read from the platform skips: the
//! environment settled on one deployment (nothing in flight), that
//! deployment ready (`ACTIVE` or `SCALED_TO_ZERO`) with our label holding
//! our hash, and the environment still on it when read again. Anything
//! else — a read that fails included — deploys, with one line saying why.
//!
//! The decisions are pure functions over the reads (`over_environment`,
//! `over_deployment`, `still_on`); `check` performs the reads. These reads
//! decide (a failed one deploys, which is always safe). The audit log's
//! "promoted at" words (`promoted_at`) and the serving deployment read
//! for the config diff (`serving`) only inform: they run as
//! `crate::flow::inform` reads, under their own short deadline.

use serde_json::Value;

use crate::baseten::{Api, ApiError, AuditEntry, Deployment, Environment};
use crate::kind::Kind;
use crate::label::LABEL_KEY;
use crate::promotion::Env;
use crate::status::MODEL_READY_STATUSES;

/// The deployment that serves the environment with this source.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Serving {
    pub(crate) deployment_id: String,
    pub(crate) name: Option<String>,
    /// `created_at` as the platform wrote it.
    pub(crate) created: Option<String>,
    /// When the model's audit log last records it promoted into the
    /// environment, if it does (a deployment created into the
    /// environment has no such entry).
    pub(crate) promoted: Option<String>,
    pub(crate) status: String,
}

impl Serving {
    /// What the reads said of it, in words: its name and when it was
    /// promoted into `env` (or, without an audit entry, created). Never
    /// "since": neither read says when it began serving.
    pub(crate) fn described(&self, env: &str) -> String {
        let when = match (&self.promoted, &self.created) {
            (Some(p), _) => Some(format!("promoted to {env} at {p}")),
            (None, Some(c)) => Some(format!("created {c}")),
            (None, None) => None,
        };
        let said: Vec<String> = self.name.iter().cloned().chain(when).collect();
        match said.is_empty() {
            true => String::new(),
            false => format!(" ({})", said.join(", ")),
        }
    }
}

/// The verdict before packaging.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Verdict {
    Unchanged(Serving),
    /// Deploy, because of `why`; `serving` is the deployment that serves
    /// the environment as read (to compare configs with), or why none
    /// could be read.
    Deploy {
        why: Why,
        serving: Result<Read, Why>,
    },
}

/// The serving deployment as read: its id and the hash it records.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Read {
    pub(crate) deployment_id: String,
    pub(crate) recorded: Option<String>,
}

/// Why the source is not shown unchanged (a deploy goes ahead) or what
/// serves the environment could not be read: each reason with the facts
/// the platform's reads gave, said in one sentence.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub(crate) enum Why {
    #[error("the model does not exist yet, so nothing serves {env}")]
    NoModel { env: String },
    #[error("could not list the teams ({cause})")]
    TeamsUnread { cause: String },
    #[error("team {team:?} is not visible to this key")]
    TeamNotVisible { team: String },
    #[error("could not list the models ({cause})")]
    ModelsUnread { cause: String },
    #[error("several models named {name:?} are visible to this key; the deploy job picks the team")]
    SeveralModels { name: String },
    #[error("the {env} environment does not exist yet, so nothing serves this source")]
    NoEnvironment { env: String },
    /// The environment list holds no environment of that name.
    #[error("the {env} environment does not exist yet, so nothing serves it")]
    NotListed { env: String },
    #[error("could not read the {env} environment ({cause})")]
    EnvironmentUnread { env: String, cause: String },
    /// A promotion in flight, as the environment describes it.
    #[error("a promotion is in flight ({0}), so what will serve is not settled")]
    InFlight(String),
    #[error("the {env} environment serves no deployment")]
    ServesNothing { env: String },
    #[error(
        "could not read the serving deployment {id} ({cause}), and only a read can show the source unchanged"
    )]
    DeploymentUnreadToSkip { id: String, cause: String },
    #[error("could not read the serving deployment {id} ({cause})")]
    DeploymentUnread { id: String, cause: String },
    #[error("the serving deployment {id} is {status}, not ACTIVE or SCALED_TO_ZERO")]
    NotReady { id: String, status: String },
    #[error(
        "the serving deployment {id} carries no {LABEL_KEY} label (made before skip-unchanged, or by another client)"
    )]
    Unlabelled { id: String },
    /// Both hashes shortened ([`short`]).
    #[error(
        "the serving deployment {id} was made from other content ({LABEL_KEY} {theirs}…, this truss {ours}…)"
    )]
    OtherContent {
        id: String,
        theirs: String,
        ours: String,
    },
    /// The label's value, cut to 80 characters.
    #[error(
        "the serving deployment {id} has a {LABEL_KEY} label that is not a content hash ({value})"
    )]
    NotAHash { id: String, value: String },
    #[error("the {env} environment moved from {from} to {to} while it was being read")]
    Moved {
        env: String,
        from: String,
        to: String,
    },
}

fn deploy(why: Why, serving: Result<Read, Why>) -> Verdict {
    Verdict::Deploy { why, serving }
}

/// The hash a deployment records under our label, if it is text.
fn recorded(d: &Deployment) -> Option<String> {
    match d.labels.as_ref()?.get(LABEL_KEY)? {
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The environment as read: the deployment that serves it, and what is
/// in flight (in words) when a promotion is.
#[derive(Debug, PartialEq)]
struct Serves {
    current: String,
    moving: Option<Why>,
}

/// The environment's reading: the deployment serving it, or why none.
fn over_environment(env_name: &str, read: Result<Env, ApiError>) -> Result<Serves, Why> {
    let env = match read {
        Ok(env) => env,
        Err(e) if e.permanent_status() == Some(404) => {
            return Err(Why::NoEnvironment {
                env: env_name.to_string(),
            });
        }
        Err(e) => {
            return Err(Why::EnvironmentUnread {
                env: env_name.to_string(),
                cause: e.to_string(),
            });
        }
    };
    let moving = env.moving().then(|| Why::InFlight(env.describe(env_name)));
    match env.current {
        Some(current) => Ok(Serves { current, moving }),
        None => Err(moving.unwrap_or_else(|| Why::ServesNothing {
            env: env_name.to_string(),
        })),
    }
}

/// The serving deployment's reading against our hash.
fn over_deployment(
    ours: &str,
    id: &str,
    read: Result<Deployment, ApiError>,
) -> Result<Serving, Why> {
    let d = read.map_err(|e| Why::DeploymentUnreadToSkip {
        id: id.to_string(),
        cause: e.to_string(),
    })?;
    let status = d.status.trim().to_string();
    if !MODEL_READY_STATUSES.contains(&status.as_str()) {
        return Err(Why::NotReady {
            id: id.to_string(),
            status,
        });
    }
    match d.labels.as_ref().and_then(|l| l.get(LABEL_KEY)).cloned() {
        None => Err(Why::Unlabelled { id: id.to_string() }),
        Some(Value::String(theirs)) if theirs == ours => Ok(Serving {
            deployment_id: id.to_string(),
            name: d.name.filter(|n| !n.is_empty()),
            created: d.created_at.filter(|c| !c.is_empty()),
            promoted: None,
            status,
        }),
        Some(Value::String(theirs)) if super::is_hash(&theirs) => Err(Why::OtherContent {
            id: id.to_string(),
            theirs: short(&theirs).to_string(),
            ours: short(ours).to_string(),
        }),
        Some(other) => Err(Why::NotAHash {
            id: id.to_string(),
            value: other.to_string().chars().take(80).collect(),
        }),
    }
}

/// The second environment read: still settled on the same deployment.
fn still_on(env_name: &str, id: &str, read: Result<Env, ApiError>) -> Result<(), Why> {
    match over_environment(env_name, read)? {
        Serves {
            moving: Some(why), ..
        } => Err(why),
        Serves { current, .. } if current == id => Ok(()),
        Serves { current, .. } => Err(Why::Moved {
            env: env_name.to_string(),
            from: id.to_string(),
            to: current,
        }),
    }
}

/// The first twelve hex digits, for messages.
pub(crate) fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// The environment and the deployment serving it, one try each: what
/// serves (and what is in flight), that deployment's read, or why none.
async fn read(
    api: &Api,
    model_id: Option<&str>,
    env_name: &str,
) -> Result<(Serves, Result<Deployment, ApiError>), Why> {
    let Some(model_id) = model_id else {
        return Err(Why::NoModel {
            env: env_name.to_string(),
        });
    };
    let serves = over_environment(
        env_name,
        api.environment_of(Kind::Model, model_id, env_name).await,
    )?;
    let d = api.deployment(model_id, &serves.current).await;
    Ok((serves, d))
}

/// What the comparison needs of a read: the serving deployment's id and
/// label, or why it could not be read.
fn known(serves: &Serves, d: &Result<Deployment, ApiError>) -> Result<Read, Why> {
    match d {
        Ok(d) => Ok(Read {
            deployment_id: serves.current.clone(),
            recorded: recorded(d),
        }),
        Err(e) => Err(Why::DeploymentUnread {
            id: serves.current.clone(),
            cause: e.to_string(),
        }),
    }
}

/// The deployment serving `env_name`, for the comparison of what a deploy
/// changes (without `skip-unchanged`): one read, best effort. The model's
/// environment list carries each one's current deployment whole (labels
/// included), so the environment and deployment reads the deploy itself
/// makes afterwards stay its own.
pub(crate) async fn serving(
    api: &Api,
    model_id: Option<&str>,
    env_name: &str,
) -> Result<Read, Why> {
    let Some(model_id) = model_id else {
        return Err(Why::NoModel {
            env: env_name.to_string(),
        });
    };
    let listed = api
        .environments(model_id)
        .await
        .map_err(|e| Why::EnvironmentUnread {
            env: env_name.to_string(),
            cause: e.to_string(),
        })?;
    over_list(env_name, listed)
}

/// The environment list's reading: the deployment serving `env_name`.
fn over_list(env_name: &str, listed: Vec<Environment>) -> Result<Read, Why> {
    let env = listed
        .into_iter()
        .find(|e| e.name == env_name)
        .ok_or_else(|| Why::NotListed {
            env: env_name.to_string(),
        })?;
    let d = env.current_deployment.ok_or_else(|| Why::ServesNothing {
        env: env_name.to_string(),
    })?;
    Ok(Read {
        recorded: recorded(&d),
        deployment_id: d.id,
    })
}

/// Reads the environment and its serving deployment (`model_id`: the
/// model, when it exists) and decides. One try per read: a failure means
/// deploying, which is always safe, where retries would only delay it.
pub(crate) async fn check(
    api: &Api,
    model_id: Option<&str>,
    env_name: &str,
    ours: &str,
) -> Verdict {
    let (serves, d) = match read(api, model_id, env_name).await {
        Ok(r) => r,
        Err(why) => return deploy(why.clone(), Err(why)),
    };
    let known = known(&serves, &d);
    if let Some(why) = serves.moving {
        return deploy(why, known);
    }
    let serving = match over_deployment(ours, &serves.current, d) {
        Ok(s) => s,
        Err(why) => return deploy(why, known),
    };
    let model_id = model_id.expect("read only with a model");
    match still_on(
        env_name,
        &serves.current,
        api.environment_of(Kind::Model, model_id, env_name).await,
    ) {
        Ok(()) => Verdict::Unchanged(serving),
        Err(why) => deploy(why.clone(), Err(why)),
    }
}

/// When the model's audit log last saw deployment `id` promoted into
/// `env` (`None`: it records no such promotion, as for a deployment
/// created into the environment). One try: it only informs the unchanged
/// line (`crate::flow::inform`), so nothing waits for it past its short
/// deadline, and unread, the line says when the deployment was created.
pub(crate) async fn promoted_at(
    api: &Api,
    model_id: &str,
    id: &str,
    env: &str,
) -> Result<Option<String>, ApiError> {
    let entries = api.promotions_of(model_id, id).await?;
    Ok(last_promoted(&entries, id, env))
}

/// When the audit log's newest entry promoting `id` into `env` says it
/// happened (the entries newest first, as the log lists them).
fn last_promoted(entries: &[AuditEntry], id: &str, env: &str) -> Option<String> {
    entries
        .iter()
        .find(|e| {
            e.event_type == "MODEL_DEPLOYMENT_PROMOTED"
                && e.event_data.get("deployment_id").and_then(Value::as_str) == Some(id)
                && e.event_data.get("environment_name").and_then(Value::as_str) == Some(env)
        })
        .map(|e| e.created.clone())
        .filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const OURS: &str = "81f01b92a435973ad68866f0191aab81a8755a5d4e4c857fd9d732d5cf7aa32f";

    fn env(v: Value) -> Result<Env, ApiError> {
        Ok(Env::parse(&v))
    }

    fn dep(status: &str, labels: Value) -> Result<Deployment, ApiError> {
        Ok(serde_json::from_value(json!({
            "id": "d1", "status": status, "labels": labels,
            "created_at": "2026-12-01T10:00:00Z", "name": "ci-1",
        }))
        .unwrap())
    }

    fn lost() -> ApiError {
        ApiError::Ambiguous {
            message: "connection reset".into(),
        }
    }

    #[test]
    fn what_the_environment_says() {
        let settled = json!({"name": "production", "current_deployment": {"id": "d1", "status": "ACTIVE"}, "candidate_deployment": null, "in_progress_promotion": null});
        assert_eq!(
            over_environment("production", env(settled)),
            Ok(Serves {
                current: "d1".into(),
                moving: None
            })
        );
        // In flight: what serves is still known (to compare configs with).
        let flying = json!({"name": "production", "current_deployment": {"id": "d1"}, "candidate_deployment": {"id": "d2"}, "in_progress_promotion": {"status": "RELEASING"}});
        let r = over_environment("production", env(flying)).unwrap();
        assert_eq!(r.current, "d1");
        let why = r.moving.unwrap().to_string();
        assert!(why.contains("promotion is in flight"), "{why}");
        let empty = json!({"name": "production", "current_deployment": null});
        assert!(
            over_environment("production", env(empty))
                .unwrap_err()
                .to_string()
                .contains("serves no deployment")
        );
        let missing = ApiError::Permanent {
            status: Some(404),
            message: "no such environment".into(),
        };
        assert!(
            over_environment("production", Err(missing))
                .unwrap_err()
                .to_string()
                .contains("does not exist yet")
        );
        let why = over_environment("production", Err(lost()))
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("could not read the production environment (connection reset)"),
            "{why}"
        );
    }

    #[test]
    fn only_a_ready_deployment_with_our_hash_is_unchanged() {
        let ok = over_deployment(
            OURS,
            "d1",
            dep("SCALED_TO_ZERO", json!({"team": "ml", LABEL_KEY: OURS})),
        )
        .unwrap();
        assert_eq!(ok.deployment_id, "d1");
        assert_eq!(ok.created.as_deref(), Some("2026-12-01T10:00:00Z"));
        assert_eq!(
            ok.described("production"),
            " (ci-1, created 2026-12-01T10:00:00Z)"
        );
        let promoted = Serving {
            promoted: Some("2026-12-02T08:00:00Z".into()),
            ..ok.clone()
        };
        assert_eq!(
            promoted.described("production"),
            " (ci-1, promoted to production at 2026-12-02T08:00:00Z)"
        );
        assert!(over_deployment(OURS, "d1", dep("ACTIVE", json!({LABEL_KEY: OURS}))).is_ok());
        let other = "0".repeat(64);
        let cases = [
            (dep("FAILED", json!({LABEL_KEY: OURS})), "is FAILED"),
            (dep("INACTIVE", json!({LABEL_KEY: OURS})), "is INACTIVE"),
            (dep("WAKING_UP", json!({LABEL_KEY: OURS})), "is WAKING_UP"),
            (dep("ACTIVE", Value::Null), "carries no"),
            (dep("ACTIVE", json!({"team": "ml"})), "carries no"),
            (
                dep("ACTIVE", json!({LABEL_KEY: other})),
                "other content (truss_push_content_hash 000000000000…, this truss 81f01b92a435…)",
            ),
            (
                dep("ACTIVE", json!({LABEL_KEY: 7})),
                "not a content hash (7)",
            ),
            (
                dep("ACTIVE", json!({LABEL_KEY: "v1"})),
                "not a content hash (\"v1\")",
            ),
            (
                dep("ACTIVE", json!({LABEL_KEY: OURS.to_uppercase()})),
                "other content",
            ),
            (Err(lost()), "could not read the serving deployment d1"),
        ];
        for (read, want) in cases {
            let why = over_deployment(OURS, "d1", read).unwrap_err().to_string();
            assert!(why.contains(want), "{why} lacks {want}");
        }
    }

    #[test]
    fn the_environment_list_names_what_serves() {
        let list: Vec<Environment> = serde_json::from_value(json!([
            {"name": "staging", "current_deployment": null},
            {"name": "production", "current_deployment": {"id": "d1", "status": "ACTIVE", "labels": {LABEL_KEY: OURS}}},
        ]))
        .unwrap();
        assert_eq!(
            over_list("production", list.clone()),
            Ok(Read {
                deployment_id: "d1".into(),
                recorded: Some(OURS.into())
            })
        );
        assert!(
            over_list("staging", list.clone())
                .unwrap_err()
                .to_string()
                .contains("serves no deployment")
        );
        assert!(
            over_list("canary", list)
                .unwrap_err()
                .to_string()
                .contains("does not exist yet")
        );
    }

    #[test]
    fn the_newest_promotion_of_that_deployment_into_that_environment_counts() {
        let e = |t: &str, ty: &str, dep: &str, env: &str| AuditEntry {
            created: t.into(),
            event_type: ty.into(),
            event_data: json!({"deployment_id": dep, "environment_name": env}),
            ..AuditEntry::default()
        };
        let p = "MODEL_DEPLOYMENT_PROMOTED";
        let log = [
            e("t5", "MODEL_PROMOTION_CONTROL_ACTION", "d1", "production"),
            e("t4", p, "d2", "production"),
            e("t3", p, "d1", "staging"),
            e("t2", p, "d1", "production"),
            e("t1", p, "d1", "production"),
        ];
        assert_eq!(
            last_promoted(&log, "d1", "production").as_deref(),
            Some("t2")
        );
        assert_eq!(last_promoted(&log, "d1", "staging").as_deref(), Some("t3"));
        assert_eq!(last_promoted(&log, "d3", "production"), None);
        assert_eq!(last_promoted(&[], "d1", "production"), None);
    }

    #[test]
    fn the_second_read_must_show_the_same_deployment() {
        let on = |id: &str| env(json!({"name": "production", "current_deployment": {"id": id}}));
        assert_eq!(still_on("production", "d1", on("d1")), Ok(()));
        assert!(
            still_on("production", "d1", on("d2"))
                .unwrap_err()
                .to_string()
                .contains("moved from d1 to d2")
        );
        assert!(still_on("production", "d1", Err(lost())).is_err());
    }
}
