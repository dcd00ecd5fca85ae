//! Promotions a client starts, cancels or force-cancels itself, under the
//! platform's rules: one promotion in flight per environment, no inactive
//! deployment, and a new deployment (new id) whenever the promoted one
//! cannot be reused.

use super::{
    ApiErr, AuditEvent, Cancel, CancelOutcome, Chainlet, Deployment, Environment, Owner, Platform,
    PromoteRequest, Promotion, promotion_state,
};
use crate::scenario::{Actor, PromotionScript};
use crate::status;

impl Platform {
    /// The name (scripts are picked by it) and environments of `owner`.
    pub(super) fn owner_envs(&self, owner: &Owner) -> Result<(String, &[Environment]), ApiErr> {
        match owner {
            Owner::Model(id) => self
                .model(id)
                .map(|m| (m.name.clone(), m.environments.as_slice()))
                .ok_or_else(|| ApiErr::not_found(format!("Model {id} not found"))),
            Owner::Chain(id) => self
                .chain(id)
                .map(|c| (c.name.clone(), c.environments.as_slice()))
                .ok_or_else(|| ApiErr::not_found(format!("Chain {id} not found"))),
        }
    }

    fn owner_env<'a>(
        envs: &'a [Environment],
        owner: &Owner,
        env: &str,
    ) -> Result<&'a Environment, ApiErr> {
        let (kind, id) = match owner {
            Owner::Model(id) => ("model", id),
            Owner::Chain(id) => ("chain", id),
        };
        envs.iter().find(|e| e.name == env).ok_or_else(|| {
            ApiErr::not_found(format!("Environment {env} not found for {kind} {id}"))
        })
    }

    pub(super) fn owner_env_mut(&mut self, owner: &Owner, env: &str) -> Option<&mut Environment> {
        let envs = match owner {
            Owner::Model(id) => &mut self.models.iter_mut().find(|m| &m.id == id)?.environments,
            Owner::Chain(id) => &mut self.chains.iter_mut().find(|c| &c.id == id)?.environments,
        };
        envs.iter_mut().find(|e| e.name == env)
    }

    /// Public statuses of what `dep` names for `owner`: the deployment, or
    /// every chainlet of the chain deployment.
    fn promotable_statuses(
        &self,
        owner: &Owner,
        dep: &str,
        now: f64,
    ) -> Result<Vec<String>, ApiErr> {
        match owner {
            Owner::Model(m) => self
                .deployment(dep)
                .filter(|d| &d.model_id == m)
                .map(|d| vec![d.public_status(now)])
                .ok_or_else(|| {
                    ApiErr::not_found(format!("Deployment {dep} not found for model {m}"))
                }),
            Owner::Chain(c) => self
                .chain_deployment(dep)
                .filter(|cd| &cd.chain_id == c)
                .map(|cd| {
                    cd.chainlets
                        .iter()
                        .filter_map(|x| self.deployment(&x.deployment_id))
                        .map(|d| d.public_status(now))
                        .collect()
                })
                .ok_or_else(|| {
                    ApiErr::not_found(format!("Chain deployment {dep} not found for chain {c}"))
                }),
        }
    }

    /// Starts promoting `req.deployment_id` into `env`; returns the id of
    /// the deployment being promoted, which is a new one when the platform
    /// cannot reuse the requested one.
    pub fn promote(
        &mut self,
        owner: &Owner,
        env: &str,
        req: &PromoteRequest,
        now: f64,
    ) -> Result<String, ApiErr> {
        let (name, _) = self.owner_envs(owner)?;
        let script = self.scenario.promote.pick(&name, self.promote_calls);
        let r = self.start_promotion(owner, env, req, script, &Actor::default(), now);
        if r.is_ok() {
            self.promote_calls += 1;
        }
        r
    }

    /// A promotion under the platform's rules, following `script` (`None`:
    /// the target's readiness). Every client's promote comes through here.
    pub(super) fn start_promotion(
        &mut self,
        owner: &Owner,
        env: &str,
        req: &PromoteRequest,
        script: Option<PromotionScript>,
        by: &Actor,
        now: f64,
    ) -> Result<String, ApiErr> {
        let dep = req.deployment_id.as_str();
        let (_, envs) = self.owner_envs(owner)?;
        let target_env = Self::owner_env(envs, owner, env)?;
        let statuses = self.promotable_statuses(owner, dep, now)?;
        if statuses
            .iter()
            .any(|s| matches!(s.as_str(), "INACTIVE" | "DEACTIVATING"))
        {
            return Err(ApiErr::invalid(format!(
                "Deployment {dep} is inactive: activate it before promoting it to {env}"
            )));
        }
        let view = self.view(target_env, now);
        if view.candidate.is_some() {
            return Err(ApiErr::invalid(format!(
                "Environment {env} already has a promotion in progress: wait for it to finish or cancel it"
            )));
        }
        if view.current.as_deref() == Some(dep) {
            return Err(ApiErr::invalid(format!(
                "Deployment {dep} is already the current deployment of environment {env}"
            )));
        }
        let tied_elsewhere = envs.iter().filter(|e| e.name != env).any(|e| {
            let v = self.view(e, now);
            v.current.as_deref() == Some(dep) || v.candidate.as_deref() == Some(dep)
        });
        let spec = &self.scenario.promote;
        let listed = |list: &[String]| list.iter().any(|e| e == env);
        let needs_new = tied_elsewhere
            || listed(&spec.redeploy_on_promotion)
            || (req.preserve_env_instance_type && listed(&spec.instance_type_differs));
        // Cleanup strategy DEACTIVATE: what this promotion replaces is
        // deactivated once it succeeded (`Platform::settle`).
        let replaces = view
            .current
            .clone()
            .filter(|_| listed(&spec.deactivate_previous) && req.scale_down_previous_deployment);
        let target = match (needs_new, owner) {
            (false, _) => dep.to_string(),
            (true, Owner::Model(_)) => self.copy_deployment(dep, None, now),
            (true, Owner::Chain(_)) => self.copy_chain_deployment(dep, now),
        };
        let Some(e) = self.owner_env_mut(owner, env) else {
            return Err(ApiErr::not_found(format!("Environment {env} not found")));
        };
        e.promotions.push(Promotion {
            target_id: target.clone(),
            started_at: now,
            script,
            cancel: None,
            replaces,
        });
        let (owner_id, event_type) = match owner {
            Owner::Model(m) => (m, "MODEL_DEPLOYMENT_PROMOTED"),
            Owner::Chain(c) => (c, "CHAIN_DEPLOYMENT_PROMOTED"),
        };
        {
            self.record(AuditEvent {
                at: now,
                event_type: event_type.into(),
                model_id: owner_id.clone(),
                deployment_id: target.clone(),
                deployment_name: String::new(),
                by: by.clone(),
                environment: Some(env.to_string()),
                publish: true,
            });
        }
        Ok(target)
    }

    /// A new deployment initialised from `src`: new id, the source's name,
    /// config and predict answers, and the promotion's timeline from `now`.
    fn copy_deployment(
        &mut self,
        src: &str,
        chain_deployment_id: Option<String>,
        now: f64,
    ) -> String {
        let id = self.ids.next(7);
        let timeline = self.scenario.promote.new_deployment_timeline.clone();
        let Some(source) = self.deployment(src).cloned() else {
            return id;
        };
        let steps = timeline
            .iter()
            .map(|(t, s)| {
                let s = if source.raw {
                    status::public_to_raw(s)
                } else {
                    s.clone()
                };
                (now + t, s)
            })
            .collect();
        self.deployments.push(Deployment {
            id: id.clone(),
            created_at: now,
            steps,
            is_draft: false,
            deactivated_at: None,
            copied_from: Some(src.to_string()),
            chain_deployment_id: chain_deployment_id.or(source.chain_deployment_id.clone()),
            ..source
        });
        id
    }

    /// A new chain deployment with a new deployment per chainlet.
    fn copy_chain_deployment(&mut self, src: &str, now: f64) -> String {
        let Some(source) = self.chain_deployment(src).cloned() else {
            return src.to_string();
        };
        let cd_id = self.ids.next(7);
        let mut chainlets = Vec::new();
        for c in &source.chainlets {
            let dep = self.copy_deployment(&c.deployment_id, Some(cd_id.clone()), now);
            chainlets.push(Chainlet {
                id: self.ids.next(7),
                deployment_id: dep,
                ..c.clone()
            });
        }
        self.chain_deployments.push(super::ChainDeployment {
            id: cd_id.clone(),
            created_at: now,
            is_draft: false,
            chainlets,
            copied_from: Some(src.to_string()),
            ..source
        });
        cd_id
    }

    /// Cancels the promotion in flight in `env`. Without `force`, one that
    /// already moved traffic ramps down first; with it, it ends at once.
    /// Either way the environment keeps the deployment it served before.
    pub fn cancel_promotion(
        &mut self,
        owner: &Owner,
        env: &str,
        force: bool,
        now: f64,
    ) -> Result<CancelOutcome, ApiErr> {
        let (_, envs) = self.owner_envs(owner)?;
        let e = Self::owner_env(envs, owner, env)?;
        let in_flight = e
            .promotions
            .iter()
            .rposition(|p| p.started_at <= now)
            .map(|i| {
                let p = &e.promotions[i];
                (i, promotion_state(p, &self.readiness_of(&p.target_id), now))
            })
            .filter(|(_, s)| !s.is_terminal());
        let Some((idx, state)) = in_flight else {
            return Err(ApiErr::invalid(format!(
                "Environment {env} has no in progress promotion."
            )));
        };
        // The platform documents the force cancel for rolling promotions
        // only: the fake refuses it for any other.
        if force && state.rolling_deploy != Some(true) {
            return Err(ApiErr::invalid(format!(
                "The promotion to {env} is not a rolling promotion: use cancel_promotion"
            )));
        }
        let ramp_secs = self.scenario.promote.ramp_down_seconds;
        let percent = state.percent_traffic_to_new_version;
        let Some(p) = self
            .owner_env_mut(owner, env)
            .and_then(|e| e.promotions.get_mut(idx))
        else {
            return Err(ApiErr::not_found(format!("Environment {env} not found")));
        };
        let until = match &p.cancel {
            _ if force || percent == 0 => now,
            // Cancelled twice: keep the ramp's schedule.
            Some(c) => c.until,
            None => now + ramp_secs,
        };
        p.cancel = Some(Cancel {
            at: now,
            from_percent: percent,
            until,
        });
        Ok(if until <= now {
            CancelOutcome {
                status: "CANCELED",
                message: format!("Canceled the promotion to {env}."),
            }
        } else {
            CancelOutcome {
                status: "RAMPING_DOWN",
                message: format!(
                    "Moving traffic in {env} back to the previous deployment; the promotion ends CANCELED."
                ),
            }
        })
    }
}
