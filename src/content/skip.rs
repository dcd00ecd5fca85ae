//! `skip-unchanged`: whether the deployment serving the environment was
//! made from this very source, read from the platform before anything is
//! packaged. Only an equal hash read from the platform skips: the
//! environment settled on one deployment (nothing in flight), that
//! deployment ready (`ACTIVE` or `SCALED_TO_ZERO`) with our label holding
//! our hash, and the environment still on it when read again. Anything
//! else — a read that fails included — deploys, with one line saying why.
//!
//! The decisions are pure functions over the reads (`over_environment`,
//! `over_deployment`, `still_on`); `check` performs the reads.

use serde_json::Value;

use super::LABEL_KEY;
use crate::baseten::{Api, ApiError, Deployment};
use crate::kind::Kind;
use crate::promotion::Env;
use crate::status::MODEL_READY_STATUSES;

/// The deployment that serves the environment with this source.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Serving {
    pub(crate) deployment_id: String,
    pub(crate) name: Option<String>,
    /// `created_at` as the platform wrote it.
    pub(crate) since: Option<String>,
    pub(crate) status: String,
}

/// The verdict before packaging.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Verdict {
    Unchanged(Serving),
    /// Deploy, because of `why`; `serving` is the deployment that serves
    /// the environment when it was read (to diff its config).
    Deploy {
        why: String,
        serving: Option<Read>,
    },
}

/// The serving deployment as read: its id and the hash it records.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Read {
    pub(crate) deployment_id: String,
    pub(crate) recorded: Option<String>,
}

fn deploy(why: String, serving: Option<Read>) -> Verdict {
    Verdict::Deploy { why, serving }
}

/// The hash a deployment records under our label, if it is text.
fn recorded(d: &Deployment) -> Option<String> {
    match d.labels.as_ref()?.get(LABEL_KEY)? {
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The environment's reading: the deployment it settled on, or why not.
fn over_environment(env_name: &str, read: Result<Env, ApiError>) -> Result<String, String> {
    let env = match read {
        Ok(env) => env,
        Err(e) if e.permanent_status() == Some(404) => {
            return Err(format!(
                "the {env_name} environment does not exist yet, so nothing serves this source"
            ));
        }
        Err(e) => {
            return Err(format!(
                "could not read the {env_name} environment ({e}), and only a read can show the source unchanged"
            ));
        }
    };
    if env.moving() {
        return Err(format!(
            "a promotion is in flight ({}), so what will serve is not settled",
            env.describe(env_name)
        ));
    }
    env.current
        .ok_or_else(|| format!("the {env_name} environment serves no deployment"))
}

/// The serving deployment's reading against our hash.
fn over_deployment(
    ours: &str,
    id: &str,
    read: Result<Deployment, ApiError>,
) -> Result<Serving, String> {
    let d = read.map_err(|e| {
        format!("could not read the serving deployment {id} ({e}), and only a read can show the source unchanged")
    })?;
    let status = d.status.trim().to_string();
    if !MODEL_READY_STATUSES.contains(&status.as_str()) {
        return Err(format!(
            "the serving deployment {id} is {status}, not ACTIVE or SCALED_TO_ZERO"
        ));
    }
    match d.labels.as_ref().and_then(|l| l.get(LABEL_KEY)).cloned() {
        None => Err(format!(
            "the serving deployment {id} carries no {LABEL_KEY} label (made before skip-unchanged, or by another client)"
        )),
        Some(Value::String(theirs)) if theirs == ours => Ok(Serving {
            deployment_id: id.to_string(),
            name: d.name.filter(|n| !n.is_empty()),
            since: d.created_at.filter(|c| !c.is_empty()),
            status,
        }),
        Some(Value::String(theirs)) if super::is_hash(&theirs) => Err(format!(
            "the serving deployment {id} was made from other content ({LABEL_KEY} {}…, this truss {}…)",
            short(&theirs),
            short(ours)
        )),
        Some(other) => Err(format!(
            "the serving deployment {id} has a {LABEL_KEY} label that is not a content hash ({})",
            other.to_string().chars().take(80).collect::<String>()
        )),
    }
}

/// The second environment read: still settled on the same deployment.
fn still_on(env_name: &str, id: &str, read: Result<Env, ApiError>) -> Result<(), String> {
    match over_environment(env_name, read)? {
        now if now == id => Ok(()),
        now => Err(format!(
            "the {env_name} environment moved from {id} to {now} while it was being read"
        )),
    }
}

/// The first twelve hex digits, for messages.
pub(crate) fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
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
    let Some(model_id) = model_id else {
        return deploy("the model does not exist yet".into(), None);
    };
    let current = match over_environment(
        env_name,
        api.environment_of(Kind::Model, model_id, env_name).await,
    ) {
        Ok(id) => id,
        Err(why) => return deploy(why, None),
    };
    let read = api.deployment(model_id, &current).await;
    let known = read.as_ref().ok().map(|d| Read {
        deployment_id: current.clone(),
        recorded: recorded(d),
    });
    let serving = match over_deployment(ours, &current, read) {
        Ok(s) => s,
        Err(why) => return deploy(why, known),
    };
    match still_on(
        env_name,
        &current,
        api.environment_of(Kind::Model, model_id, env_name).await,
    ) {
        Ok(()) => Verdict::Unchanged(serving),
        Err(why) => deploy(why, None),
    }
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
            Ok("d1".into())
        );
        let flying = json!({"name": "production", "current_deployment": {"id": "d1"}, "candidate_deployment": {"id": "d2"}, "in_progress_promotion": {"status": "RELEASING"}});
        let why = over_environment("production", env(flying)).unwrap_err();
        assert!(why.contains("promotion is in flight"), "{why}");
        let empty = json!({"name": "production", "current_deployment": null});
        assert!(
            over_environment("production", env(empty))
                .unwrap_err()
                .contains("serves no deployment")
        );
        let missing = ApiError::Permanent {
            status: Some(404),
            message: "no such environment".into(),
        };
        assert!(
            over_environment("production", Err(missing))
                .unwrap_err()
                .contains("does not exist yet")
        );
        let why = over_environment("production", Err(lost())).unwrap_err();
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
        assert_eq!(ok.since.as_deref(), Some("2026-12-01T10:00:00Z"));
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
            let why = over_deployment(OURS, "d1", read).unwrap_err();
            assert!(why.contains(want), "{why} lacks {want}");
        }
    }

    #[test]
    fn the_second_read_must_show_the_same_deployment() {
        let on = |id: &str| env(json!({"name": "production", "current_deployment": {"id": id}}));
        assert_eq!(still_on("production", "d1", on("d1")), Ok(()));
        assert!(
            still_on("production", "d1", on("d2"))
                .unwrap_err()
                .contains("moved from d1 to d2")
        );
        assert!(still_on("production", "d1", Err(lost())).is_err());
    }
}
