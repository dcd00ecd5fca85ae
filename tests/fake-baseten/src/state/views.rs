//! What an environment shows at one instant: its current deployment, the
//! candidate and the promotion in flight, derived from the promotion's script
//! or from the target's readiness; and which deployment serves it.

use serde::Serialize;

use super::{Deployment, Environment, Platform, Promotion, Readiness};

/// A promotion's state at some instant (`in_progress_promotion`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PromotionState {
    pub status: String,
    pub percent_traffic_to_new_version: u32,
    pub error_message: Option<String>,
    pub rolling_deploy: Option<bool>,
}

impl PromotionState {
    pub(super) fn is_terminal(&self) -> bool {
        matches!(self.status.as_str(), "SUCCEEDED" | "FAILED" | "CANCELED")
    }
}

/// An environment as seen at one instant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnvView {
    pub current: Option<String>,
    pub candidate: Option<String>,
    pub promotion: Option<PromotionState>,
}

impl EnvView {
    /// The deployment the environment's inference URL reaches: the
    /// candidate once a promotion in flight moved at least half the
    /// traffic, the current one otherwise. A fixed threshold rather than a
    /// random split keeps tests deterministic.
    pub fn serving(&self) -> Option<String> {
        match (&self.candidate, &self.promotion) {
            (Some(c), Some(p)) if p.percent_traffic_to_new_version >= 50 => Some(c.clone()),
            _ => self.current.clone(),
        }
    }
}

/// The promotion's state at `now` from its script or, without one, from
/// the target's readiness.
pub fn promotion_state(p: &Promotion, readiness: &Readiness, now: f64) -> PromotionState {
    // A target deactivated before its promotion succeeded ends it: nothing
    // is left to move traffic to.
    if let Some(t) = readiness.deactivated_at
        && t <= now
        && t >= p.started_at
        && p.cancel.as_ref().is_none_or(|c| c.at > t)
    {
        let alive = Readiness {
            deactivated_at: None,
            ..readiness.clone()
        };
        let at_deactivation = promotion_state(p, &alive, t);
        if at_deactivation.status != "SUCCEEDED" {
            return PromotionState {
                status: "FAILED".into(),
                percent_traffic_to_new_version: 0,
                error_message: Some(format!(
                    "Deployment {} was deactivated during its promotion",
                    p.target_id
                )),
                rolling_deploy: at_deactivation.rolling_deploy,
            };
        }
    }
    if let Some(c) = &p.cancel
        && now >= c.at
    {
        let rolling_deploy = p.script.as_ref().map_or(Some(false), |s| s.rolling_deploy);
        let (status, percent) = if now >= c.until {
            ("CANCELED", 0)
        } else {
            let left = (c.until - now) / (c.until - c.at);
            (
                "RAMPING_DOWN",
                (f64::from(c.from_percent) * left).round() as u32,
            )
        };
        return PromotionState {
            status: status.into(),
            percent_traffic_to_new_version: percent,
            error_message: None,
            rolling_deploy,
        };
    }
    if let Some(script) = &p.script {
        let rel = now - p.started_at;
        let step = script
            .steps
            .iter()
            .rev()
            .find(|(t, _)| *t <= rel)
            .or_else(|| script.steps.first());
        let (status, percent) = step
            .map(|(_, s)| (s.status.clone(), s.percent))
            .unwrap_or_else(|| ("SUCCEEDED".into(), 100));
        let failed = matches!(status.as_str(), "FAILED" | "CANCELED");
        return PromotionState {
            status,
            percent_traffic_to_new_version: percent,
            error_message: if failed {
                script.error_message.clone()
            } else {
                None
            },
            rolling_deploy: script.rolling_deploy,
        };
    }
    match (readiness.ready_at, &readiness.failed_at) {
        (Some(t), _) if t <= now => PromotionState {
            status: "SUCCEEDED".into(),
            percent_traffic_to_new_version: 100,
            error_message: None,
            rolling_deploy: Some(false),
        },
        (_, Some((t, s))) if *t <= now => PromotionState {
            status: "FAILED".into(),
            percent_traffic_to_new_version: 0,
            error_message: Some(format!(
                "Deployment {} did not become ready: {s}",
                p.target_id
            )),
            rolling_deploy: Some(false),
        },
        _ => PromotionState {
            status: "RELEASING".into(),
            percent_traffic_to_new_version: 0,
            error_message: None,
            rolling_deploy: Some(false),
        },
    }
}

/// The environment at `now`. A later promotion supersedes an earlier one;
/// a succeeded promotion makes its target current and is no longer shown
/// as in progress; a failed or canceled one stays visible with its error.
pub fn env_view(env: &Environment, now: f64, readiness: impl Fn(&str) -> Readiness) -> EnvView {
    let mut view = EnvView {
        current: env.initial_current.clone(),
        ..EnvView::default()
    };
    for p in env.promotions.iter().filter(|p| p.started_at <= now) {
        let state = promotion_state(p, &readiness(&p.target_id), now);
        view.candidate = None;
        view.promotion = None;
        if state.status == "SUCCEEDED" {
            view.current = Some(p.target_id.clone());
        } else if state.is_terminal() {
            view.promotion = Some(state);
        } else {
            view.candidate = Some(p.target_id.clone());
            view.promotion = Some(state);
        }
    }
    view
}

impl Platform {
    pub(super) fn readiness_of(&self, target_id: &str) -> Readiness {
        if let Some(d) = self
            .deployment(target_id)
            .or_else(|| self.deleted_deployment(target_id))
        {
            return d.readiness();
        }
        if let Some(cd) = self
            .chain_deployment(target_id)
            .or_else(|| self.deleted_chain_deployment(target_id))
        {
            let mut ready_at: Option<f64> = Some(f64::MIN);
            let mut failed_at: Option<(f64, String)> = None;
            let mut deactivated_at: Option<f64> = None;
            for c in &cd.chainlets {
                let r = self
                    .deployment(&c.deployment_id)
                    .or_else(|| self.deleted_deployment(&c.deployment_id))
                    .map(Deployment::readiness)
                    .unwrap_or_default();
                if let Some(t) = r.deactivated_at {
                    deactivated_at = Some(deactivated_at.map_or(t, |d: f64| d.min(t)));
                }
                ready_at = match (ready_at, r.ready_at) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                if let Some((t, s)) = r.failed_at
                    && failed_at.as_ref().is_none_or(|(ft, _)| t < *ft)
                {
                    failed_at = Some((t, s));
                }
            }
            return Readiness {
                ready_at: ready_at.filter(|t| *t > f64::MIN),
                failed_at,
                deactivated_at,
            };
        }
        Readiness::default()
    }

    pub fn view(&self, env: &Environment, now: f64) -> EnvView {
        env_view(env, now, |id| self.readiness_of(id))
    }

    /// The environment a deployment is current in (or being promoted into).
    pub fn environment_of(&self, dep: &Deployment, now: f64) -> Option<String> {
        let model = self.model(&dep.model_id)?;
        let views: Vec<(String, EnvView)> = model
            .environments
            .iter()
            .map(|e| (e.name.clone(), self.view(e, now)))
            .collect();
        views
            .iter()
            .find(|(_, v)| v.current.as_deref() == Some(&dep.id))
            .or_else(|| {
                views
                    .iter()
                    .find(|(_, v)| v.candidate.as_deref() == Some(&dep.id))
            })
            .map(|(n, _)| n.clone())
    }

    /// The deployment currently serving `env` of `model_id`.
    pub fn env_current(&self, model_id: &str, env: &str, now: f64) -> Option<String> {
        let m = self.model(model_id)?;
        let e = m.environments.iter().find(|e| e.name == env)?;
        self.view(e, now).current
    }

    pub fn chain_env_current(&self, chain_id: &str, env: &str, now: f64) -> Option<String> {
        let c = self.chain(chain_id)?;
        let e = c.environments.iter().find(|e| e.name == env)?;
        self.view(e, now).current
    }

    /// The deployment `env` of `model_id` routes inference to at `now`
    /// (see [`EnvView::serving`]).
    pub fn env_serving(&self, model_id: &str, env: &str, now: f64) -> Option<String> {
        let m = self.model(model_id)?;
        let e = m.environments.iter().find(|e| e.name == env)?;
        self.view(e, now).serving()
    }

    pub fn chain_env_serving(&self, chain_id: &str, env: &str, now: f64) -> Option<String> {
        let c = self.chain(chain_id)?;
        let e = c.environments.iter().find(|e| e.name == env)?;
        self.view(e, now).serving()
    }
}
