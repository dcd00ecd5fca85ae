//! Reading an environment's promotion: is our deployment the one serving it?
//!
//! A new deployment promoted with a rolling strategy is created at zero
//! replicas and reports SCALED_TO_ZERO while its promotion into the
//! environment is still in flight; a status-only wait would call that
//! success minutes before the model serves.

use serde_json::Value;

/// Promotion statuses that end it without our deployment serving.
pub(crate) const PROMOTION_FAILED: &[&str] = &["FAILED", "CANCELED"];
/// The promotion status that means it completed.
pub(crate) const PROMOTION_SUCCEEDED: &str = "SUCCEEDED";

/// What an EnvironmentV1 says about our deployment.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum View {
    /// The environment's current deployment is ours, or our promotion
    /// succeeded.
    Serving,
    /// Our promotion is moving traffic (or paused).
    InFlight {
        status: String,
        percent: Option<f64>,
    },
    /// Our promotion ended without us serving.
    Failed { status: String, message: String },
    /// Another deployment serves and no promotion of ours is visible yet.
    NotYet { current: Option<String> },
    /// The API answered without the promotion fields (older API versions).
    Unsupported,
}

fn id_of(v: &Value) -> Option<&str> {
    v.get("id").and_then(Value::as_str)
}

/// Reads an EnvironmentV1 JSON object for `deployment_id`.
pub(crate) fn read(env: &Value, deployment_id: &str) -> View {
    let current = env.get("current_deployment").and_then(id_of);
    if current == Some(deployment_id) {
        return View::Serving;
    }
    let has_fields =
        env.get("in_progress_promotion").is_some() || env.get("candidate_deployment").is_some();
    if !has_fields {
        return View::Unsupported;
    }
    let candidate = env.get("candidate_deployment").and_then(id_of);
    let ours = candidate.is_none_or(|c| c == deployment_id);
    if let Some(p) = env.get("in_progress_promotion").filter(|p| p.is_object())
        && ours
    {
        let status = p
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if status.eq_ignore_ascii_case(PROMOTION_SUCCEEDED) {
            return View::Serving;
        }
        if PROMOTION_FAILED
            .iter()
            .any(|s| s.eq_ignore_ascii_case(&status))
        {
            let message = p
                .get("error_message")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .unwrap_or("the platform gave no message")
                .to_string();
            return View::Failed { status, message };
        }
        // In flight, paused, or a status this build does not know: wait.
        return View::InFlight {
            status,
            percent: p
                .get("percent_traffic_to_new_version")
                .and_then(Value::as_f64),
        };
    }
    View::NotYet {
        current: current.map(str::to_string),
    }
}

/// Whether `deployment_id` serves the environment with no promotion left
/// moving traffic: the end of a rollback. A cancelled promotion keeps the
/// previous deployment current while traffic ramps back, so the current
/// deployment alone does not say it.
pub(crate) fn settled_on(env: &Value, deployment_id: &str) -> bool {
    let current = env.get("current_deployment").and_then(id_of);
    let moving = env
        .get("in_progress_promotion")
        .filter(|p| p.is_object())
        .and_then(|p| p.get("status"))
        .and_then(Value::as_str)
        .is_some_and(|s| {
            !s.eq_ignore_ascii_case(PROMOTION_SUCCEEDED)
                && !PROMOTION_FAILED.iter().any(|f| f.eq_ignore_ascii_case(s))
        });
    current == Some(deployment_id) && !moving
}

/// The environment's current deployment, if any.
pub(crate) fn current(env: &Value) -> Option<String> {
    env.get("current_deployment")
        .and_then(id_of)
        .map(str::to_string)
}

/// The deployment being promoted into the environment, if any.
pub(crate) fn candidate(env: &Value) -> Option<String> {
    env.get("candidate_deployment")
        .and_then(id_of)
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn promotion_views() {
        let cases = [
            (
                json!({"current_deployment": {"id": "d1"}, "in_progress_promotion": null}),
                View::Serving,
            ),
            (
                json!({"current_deployment": {"id": "old"}, "candidate_deployment": {"id": "d1"},
                       "in_progress_promotion": {"status": "RAMPING_UP", "percent_traffic_to_new_version": 10}}),
                View::InFlight {
                    status: "RAMPING_UP".into(),
                    percent: Some(10.0),
                },
            ),
            (
                json!({"current_deployment": {"id": "old"}, "candidate_deployment": {"id": "d1"},
                       "in_progress_promotion": {"status": "PAUSED", "percent_traffic_to_new_version": 50}}),
                View::InFlight {
                    status: "PAUSED".into(),
                    percent: Some(50.0),
                },
            ),
            (
                json!({"current_deployment": {"id": "old"}, "candidate_deployment": {"id": "d1"},
                       "in_progress_promotion": {"status": "SUCCEEDED"}}),
                View::Serving,
            ),
            (
                json!({"current_deployment": {"id": "old"}, "candidate_deployment": {"id": "d1"},
                       "in_progress_promotion": {"status": "FAILED", "error_message": "quota"}}),
                View::Failed {
                    status: "FAILED".into(),
                    message: "quota".into(),
                },
            ),
            (
                json!({"current_deployment": {"id": "old"}, "candidate_deployment": {"id": "other"},
                       "in_progress_promotion": {"status": "RAMPING_UP"}}),
                View::NotYet {
                    current: Some("old".into()),
                },
            ),
            (
                json!({"current_deployment": {"id": "old"}, "candidate_deployment": null, "in_progress_promotion": null}),
                View::NotYet {
                    current: Some("old".into()),
                },
            ),
            (
                json!({"current_deployment": {"id": "old"}}),
                View::Unsupported,
            ),
            (json!({"current_deployment": null}), View::Unsupported),
        ];
        for (env, want) in cases {
            assert_eq!(read(&env, "d1"), want, "{env}");
        }
    }

    #[test]
    fn a_rollback_settles_only_when_traffic_stopped_moving() {
        let cases = [
            (
                json!({"current_deployment": {"id": "old"}, "in_progress_promotion": null}),
                true,
            ),
            (
                json!({"current_deployment": {"id": "old"}, "candidate_deployment": {"id": "d1"},
                       "in_progress_promotion": {"status": "RAMPING_DOWN", "percent_traffic_to_new_version": 40}}),
                false,
            ),
            (
                json!({"current_deployment": {"id": "old"}, "in_progress_promotion": {"status": "CANCELED"}}),
                true,
            ),
            (
                json!({"current_deployment": {"id": "d1"}, "in_progress_promotion": null}),
                false,
            ),
            (json!({"current_deployment": null}), false),
        ];
        for (env, want) in cases {
            assert_eq!(settled_on(&env, "old"), want, "{env}");
        }
    }
}
