//! Reading an environment, typed: what serves it, what is being promoted
//! into it (`Env`, its field names in one place), and what that says of
//! our promotion (`read_env`, `read_gated`). The gate's decisions over a
//! reading live beside the gate (`flow::gate`).
//!
//! A new deployment promoted with a rolling strategy is created at zero
//! replicas and reports SCALED_TO_ZERO while its promotion into the
//! environment is still in flight; a status-only wait would call that
//! success minutes before the model serves. A chain environment
//! (`ChainEnvironmentV1`) has a candidate deployment but no promotion
//! status at all: a chain's promotion is seen only through its current and
//! candidate deployments.

use serde_json::Value;

/// Promotion statuses that end it without our deployment serving.
pub(crate) const PROMOTION_FAILED: &[&str] = &["FAILED", "CANCELED"];
/// The promotion status that means it completed.
pub(crate) const PROMOTION_SUCCEEDED: &str = "SUCCEEDED";

/// `in_progress_promotion`, as a model environment reports it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct InProgressPromotion {
    pub(crate) status: String,
    pub(crate) percent: Option<f64>,
    pub(crate) error_message: Option<String>,
    /// `rolling_deploy`: only a rolling promotion may be force-cancelled.
    pub(crate) rolling: Option<bool>,
}

impl InProgressPromotion {
    fn is(&self, status: &str) -> bool {
        self.status.eq_ignore_ascii_case(status)
    }

    /// Ended: succeeded, failed or cancelled.
    pub(crate) fn ended(&self) -> bool {
        self.is(PROMOTION_SUCCEEDED) || PROMOTION_FAILED.iter().any(|s| self.is(s))
    }
}

/// One reading of an environment (EnvironmentV1 or ChainEnvironmentV1).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Env {
    pub(crate) current: Option<String>,
    pub(crate) candidate: Option<String>,
    pub(crate) in_progress: Option<InProgressPromotion>,
    /// The answer carries `candidate_deployment` or `in_progress_promotion`
    /// (older API versions carry neither).
    pub(crate) reports_promotions: bool,
    /// The answer carries `in_progress_promotion` (models; never chains).
    pub(crate) reports_status: bool,
    /// `promotion_settings.rolling_deploy`: the environment promotes by
    /// rolling traffic over.
    pub(crate) rolling_settings: Option<bool>,
}

fn id_of(v: &Value) -> Option<String> {
    v.get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

impl Env {
    pub(crate) fn parse(v: &Value) -> Env {
        let in_progress = v
            .get("in_progress_promotion")
            .filter(|p| p.is_object())
            .map(|p| InProgressPromotion {
                status: p
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                percent: p
                    .get("percent_traffic_to_new_version")
                    .and_then(Value::as_f64),
                error_message: p
                    .get("error_message")
                    .and_then(Value::as_str)
                    .filter(|m| !m.is_empty())
                    .map(str::to_string),
                rolling: p.get("rolling_deploy").and_then(Value::as_bool),
            });
        Env {
            current: v.get("current_deployment").and_then(id_of),
            candidate: v.get("candidate_deployment").and_then(id_of),
            in_progress,
            reports_promotions: v.get("candidate_deployment").is_some()
                || v.get("in_progress_promotion").is_some(),
            reports_status: v.get("in_progress_promotion").is_some(),
            rolling_settings: v
                .get("promotion_settings")
                .and_then(|p| p.get("rolling_deploy"))
                .and_then(Value::as_bool),
        }
    }

    /// A rolling promotion: the one in flight says so, or the
    /// environment's promotion settings do.
    pub(crate) fn rolling(&self) -> bool {
        self.in_progress.as_ref().and_then(|f| f.rolling) == Some(true)
            || self.rolling_settings == Some(true)
    }

    /// Traffic is still moving (a promotion or a cancelled one ramping
    /// down), or a candidate is still named (an ended promotion whose
    /// deployment the platform has not swapped in yet; a chain's promotion,
    /// which shows only as a candidate).
    pub(crate) fn moving(&self) -> bool {
        self.candidate.is_some() || self.in_progress.as_ref().is_some_and(|f| !f.ended())
    }

    /// `id` serves the environment with nothing left moving traffic: the
    /// end of a rollback. A cancelled promotion keeps the previous
    /// deployment current while traffic ramps back, so the current
    /// deployment alone does not say it.
    pub(crate) fn settled_on(&self, id: &str) -> bool {
        self.current.as_deref() == Some(id) && !self.moving()
    }

    /// Where traffic is, in words, for messages.
    pub(crate) fn describe(&self, env: &str) -> String {
        let serving = match &self.current {
            Some(c) => format!("{env} serves deployment {c}"),
            None => format!("{env} serves no deployment"),
        };
        match (&self.candidate, &self.in_progress) {
            (Some(c), Some(f)) if !f.ended() => match f.percent {
                Some(p) => format!(
                    "{serving}, with a promotion of {c} {} ({p:.0}% of traffic on it)",
                    f.status
                ),
                None => format!("{serving}, with a promotion of {c} {}", f.status),
            },
            (Some(c), _) => format!("{serving}, with {c} being promoted"),
            _ => serving,
        }
    }
}

/// What an environment says about our promoted deployment while the gate
/// waits for it.
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
    /// Another deployment, neither ours nor the one we replace, took the
    /// environment or is being promoted into it: another client is at work.
    Displaced { by: String },
    /// The API answered without the promotion fields (older API versions).
    Unsupported,
}

/// Reads an environment for `ours`.
pub(crate) fn read_env(e: &Env, ours: &str) -> View {
    if e.current.as_deref() == Some(ours) {
        return View::Serving;
    }
    if !e.reports_promotions {
        return View::Unsupported;
    }
    let candidate = e.candidate.as_deref();
    let ours_in_flight = candidate.is_none_or(|c| c == ours);
    if let Some(f) = &e.in_progress
        && ours_in_flight
    {
        if f.is(PROMOTION_SUCCEEDED) {
            return View::Serving;
        }
        if PROMOTION_FAILED.iter().any(|s| f.is(s)) {
            return View::Failed {
                status: f.status.clone(),
                message: f
                    .error_message
                    .clone()
                    .unwrap_or_else(|| "the platform gave no message".into()),
            };
        }
        // In flight, paused, or a status this build does not know: wait.
        return View::InFlight {
            status: f.status.clone(),
            percent: f.percent,
        };
    }
    if candidate == Some(ours) {
        // A chain: the environment names our candidate but has no status.
        return View::InFlight {
            status: "PROMOTING".into(),
            percent: None,
        };
    }
    View::NotYet {
        current: e.current.clone(),
    }
}

/// [`read_env`] for a gated promotion, which knows what it replaces
/// (`previous`): any other deployment serving or being promoted is another
/// client's, and the gate stops instead of waiting for it.
pub(crate) fn read_gated(e: &Env, ours: &str, previous: Option<&str>) -> View {
    if e.current.as_deref() == Some(ours) {
        return View::Serving;
    }
    let foreign = |id: &&str| *id != ours && Some(*id) != previous;
    if let Some(by) = e
        .candidate
        .as_deref()
        .filter(foreign)
        .or(e.current.as_deref().filter(foreign))
    {
        return View::Displaced { by: by.to_string() };
    }
    read_env(e, ours)
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
            // A chain environment: a candidate, no status.
            (
                json!({"current_deployment": {"id": "old"}, "candidate_deployment": {"id": "d1"}}),
                View::InFlight {
                    status: "PROMOTING".into(),
                    percent: None,
                },
            ),
            (
                json!({"current_deployment": {"id": "old"}}),
                View::Unsupported,
            ),
            (json!({"current_deployment": null}), View::Unsupported),
        ];
        for (env, want) in cases {
            assert_eq!(read_env(&Env::parse(&env), "d1"), want, "{env}");
        }
    }

    #[test]
    fn a_gate_sees_another_clients_deployment_as_displacing_it() {
        let env = |v: Value| Env::parse(&v);
        let cases = [
            (
                env(
                    json!({"current_deployment": {"id": "old"}, "candidate_deployment": {"id": "theirs"},
                       "in_progress_promotion": {"status": "RAMPING_UP", "percent_traffic_to_new_version": 5}}),
                ),
                View::Displaced {
                    by: "theirs".into(),
                },
            ),
            (
                env(
                    json!({"current_deployment": {"id": "theirs"}, "candidate_deployment": null, "in_progress_promotion": null}),
                ),
                View::Displaced {
                    by: "theirs".into(),
                },
            ),
            (
                env(
                    json!({"current_deployment": {"id": "old"}, "candidate_deployment": null, "in_progress_promotion": null}),
                ),
                View::NotYet {
                    current: Some("old".into()),
                },
            ),
        ];
        for (e, want) in cases {
            assert_eq!(read_gated(&e, "d1", Some("old")), want, "{e:?}");
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
            // A chain still promoting: its candidate is moving traffic.
            (
                json!({"current_deployment": {"id": "old"}, "candidate_deployment": {"id": "d1"}}),
                false,
            ),
        ];
        for (env, want) in cases {
            assert_eq!(Env::parse(&env).settled_on("old"), want, "{env}");
        }
    }

    #[test]
    fn rolling_is_read_from_the_promotion_or_the_settings() {
        let cases = [
            (
                json!({"in_progress_promotion": {"rolling_deploy": true}}),
                true,
            ),
            (
                json!({"promotion_settings": {"rolling_deploy": true}}),
                true,
            ),
            (
                json!({"in_progress_promotion": {"rolling_deploy": null}}),
                false,
            ),
            (
                json!({"in_progress_promotion": {"rolling_deploy": false}}),
                false,
            ),
            (
                json!({"promotion_settings": {"rolling_deploy": "yes"}}),
                false,
            ),
            (json!({}), false),
        ];
        for (env, want) in cases {
            assert_eq!(Env::parse(&env).rolling(), want, "{env}");
        }
    }
}
