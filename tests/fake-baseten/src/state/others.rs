//! What happens on the platform besides the client under test: another
//! client's actions placed between two of its requests (`others` in the
//! scenario), the environment's cleanup strategy deactivating what a
//! promotion replaced, and re-activation of an inactive deployment.

use super::{Owner, Platform, PromoteRequest};
use crate::scenario::{ExistingDeploymentSpec, ModelSpec, OtherAction, PromotionScript};

impl Platform {
    /// Counts a request to `endpoint` and applies the other clients'
    /// actions placed before it. Returns the request's number (1-based)
    /// for [`Platform::after_request`].
    pub fn before_request(&mut self, endpoint: &str, now: f64) -> u32 {
        self.settle(now);
        let n = self.request_counts.entry(endpoint.to_string()).or_default();
        *n += 1;
        let n = *n;
        let all = self.request_counts.entry("*".to_string()).or_default();
        *all += 1;
        let all = *all;
        self.act(endpoint, n, true, now);
        self.act("*", all, true, now);
        n
    }

    /// How many requests to `endpoint` were handled so far (this one included).
    pub fn request_count(&self, endpoint: &str) -> u32 {
        self.request_counts.get(endpoint).copied().unwrap_or(0)
    }

    /// Applies the other clients' actions placed after the `n`-th request
    /// to `endpoint`.
    pub fn after_request(&mut self, endpoint: &str, n: u32, now: f64) {
        self.act(endpoint, n, false, now);
        let all = self.request_count("*");
        self.act("*", all, false, now);
    }

    fn act(&mut self, endpoint: &str, n: u32, before: bool, now: f64) {
        let due: Vec<OtherAction> = self
            .scenario
            .others
            .iter()
            .filter(|o| o.on == endpoint && o.nth == n && o.before == before)
            .map(|o| o.action.clone())
            .collect();
        for action in due {
            self.apply_other(action, now);
        }
    }

    /// Applies one action of another client now (`others`, or on cue
    /// through `POST /__fake/others`). An action the platform would refuse
    /// changes nothing: it is the other client's problem, not the test's.
    pub fn apply_other(&mut self, action: OtherAction, now: f64) {
        {
            match action {
                OtherAction::Delete { deployment, by } => {
                    let _ = self.delete_deployment(&deployment, &by, now);
                }
                OtherAction::Promote {
                    deployment,
                    environment,
                    steps,
                    by,
                } => {
                    let owner = match (
                        self.deployment(&deployment),
                        self.chain_deployment(&deployment),
                    ) {
                        (Some(d), _) => Owner::Model(d.model_id.clone()),
                        (None, Some(cd)) => Owner::Chain(cd.chain_id.clone()),
                        (None, None) => return,
                    };
                    let req = PromoteRequest {
                        deployment_id: deployment,
                        scale_down_previous_deployment: true,
                        preserve_env_instance_type: false,
                    };
                    let script = steps.map(|steps| PromotionScript {
                        steps,
                        error_message: None,
                        rolling_deploy: None,
                    });
                    // Refused as the platform would refuse it: the other
                    // client's problem, not the test's.
                    let _ = self.start_promotion(&owner, &environment, &req, script, &by, now);
                }
                OtherAction::CreateModel {
                    name,
                    deployment,
                    deployment_name,
                } => {
                    if self.models.iter().any(|m| m.name == name) {
                        return;
                    }
                    let spec = ModelSpec {
                        id: None,
                        name,
                        team: None,
                        environments: self.scenario.new_model_environments.clone(),
                        deployments: vec![ExistingDeploymentSpec {
                            id: Some(deployment),
                            name: deployment_name.unwrap_or_else(|| "other-run".into()),
                            status: "ACTIVE".into(),
                            environment: Some(super::PRODUCTION.into()),
                            is_draft: false,
                            labels: None,
                            raw_config: None,
                            created_at: 0.0,
                            settings: None,
                        }],
                    };
                    self.add_model_spec(&spec, now);
                }
            }
        }
    }

    /// The environments' cleanup strategy: a deployment replaced by a
    /// promotion that succeeded in an environment whose strategy is
    /// DEACTIVATE is deactivated (observed at the next request).
    pub fn settle(&mut self, now: f64) {
        let mut due = Vec::new();
        for envs in self
            .models
            .iter()
            .map(|m| &m.environments)
            .chain(self.chains.iter().map(|c| &c.environments))
        {
            for (ei, e) in envs.iter().enumerate() {
                for (pi, p) in e.promotions.iter().enumerate() {
                    let Some(old) = &p.replaces else { continue };
                    if p.started_at > now {
                        continue;
                    }
                    let s = super::promotion_state(p, &self.readiness_of(&p.target_id), now);
                    if s.status == "SUCCEEDED" {
                        due.push((e.name.clone(), ei, pi, old.clone()));
                    }
                }
            }
        }
        for (_, _, _, old) in &due {
            if self.deployment(old).is_some() {
                self.deactivate_as(old, &crate::scenario::Actor::system(), now);
            } else {
                self.deactivate_chain_deployment(old, now);
            }
        }
        for envs in self
            .models
            .iter_mut()
            .map(|m| &mut m.environments)
            .chain(self.chains.iter_mut().map(|c| &mut c.environments))
        {
            for e in envs.iter_mut() {
                for p in e.promotions.iter_mut() {
                    if due
                        .iter()
                        .any(|(n, _, _, old)| *n == e.name && p.replaces.as_ref() == Some(old))
                    {
                        p.replaces = None;
                    }
                }
            }
        }
    }

    /// `POST …/deployments/{id}/activate`: an inactive deployment is
    /// still INACTIVE for `activation_inactive_seconds` (waking), then
    /// DEPLOYING for `activation_seconds`, then ACTIVE; an active one is
    /// left as it is. False when there is no such deployment.
    pub fn activate(&mut self, dep_id: &str, now: f64) -> bool {
        let secs = self.scenario.activation_seconds.max(0.0);
        let lag = self.scenario.activation_inactive_seconds.max(0.0);
        let Some(d) = self.deployments.iter_mut().find(|d| d.id == dep_id) else {
            return false;
        };
        if matches!(d.public_status(now).as_str(), "INACTIVE" | "DEACTIVATING") {
            d.deactivated_at = None;
            // Its history before the activate no longer decides whether a
            // promotion of it can succeed (an INACTIVE read before it
            // would count as a failure to become ready).
            let waking = [(now, "INACTIVE")];
            let waking = if lag > 0.0 { &waking[..] } else { &[] };
            let up = [(now + lag, "DEPLOYING"), (now + lag + secs, "ACTIVE")];
            d.rewrite_from(f64::NEG_INFINITY, &[waking, &up[..]].concat());
        }
        true
    }
}
