//! Deleting models and deployments, and the audit log's bookkeeping: every
//! event goes through [`Platform::record`], which names the deployment as
//! it is when the event happens (the name survives a delete).

use super::{ApiErr, AuditEvent, ChainDeployment, Deployment, Platform};
use crate::scenario::Actor;

/// What `DELETE …/deployments/{id}` did.
#[derive(Clone, Debug, PartialEq)]
pub enum DeleteOutcome {
    /// Gone: the tombstone says `deleted: true`.
    Deleted(String),
    /// The platform answered but kept it (`deleted: false`): a scripted refusal.
    Kept(String),
    /// A scripted refusal with an error status.
    Refused(u16, String),
}

impl Platform {
    /// Appends an audit event, naming its deployment as it is now.
    pub(super) fn record(&mut self, mut e: AuditEvent) {
        if e.deployment_name.is_empty() {
            e.deployment_name = self
                .deployment(&e.deployment_id)
                .map(|d| d.name.clone())
                .unwrap_or_else(|| e.deployment_id.clone());
        }
        self.audit.push(e);
    }

    /// The scenario's own audit entries (`audit_log.entries`), in the
    /// order written.
    pub(super) fn load_audit_entries(&mut self) {
        let entries = self.scenario.audit_log.entries.clone();
        for s in entries {
            let owner = match crate::scenario::is_chain_event(&s.event_type) {
                true => self
                    .chains
                    .iter()
                    .find(|c| c.name == s.model)
                    .map(|c| c.id.clone()),
                false => self
                    .models
                    .iter()
                    .find(|m| m.name == s.model)
                    .map(|m| m.id.clone()),
            };
            let Some(model_id) = owner else {
                continue;
            };
            self.record(AuditEvent {
                at: s.at,
                event_type: s.event_type.clone(),
                model_id,
                deployment_id: s.deployment.clone(),
                deployment_name: s.deployment_name.clone().unwrap_or_default(),
                by: s.by.clone(),
                environment: s.environment.clone(),
                publish: true,
            });
        }
    }

    fn record_for(&mut self, dep_id: &str, event_type: &str, by: &Actor, now: f64) {
        let Some(model_id) = self.deployment(dep_id).map(|d| d.model_id.clone()) else {
            return;
        };
        self.record(AuditEvent {
            at: now,
            event_type: event_type.into(),
            model_id,
            deployment_id: dep_id.into(),
            deployment_name: String::new(),
            by: by.clone(),
            environment: None,
            publish: true,
        });
    }

    fn is_live(&self, dep_id: &str, now: f64) -> bool {
        self.deployment(dep_id)
            .is_some_and(|d| !matches!(d.public_status(now).as_str(), "INACTIVE" | "DEACTIVATING"))
    }

    /// [`Platform::deactivate`], recorded (`MODEL_DEPLOYMENT_DEACTIVATED`)
    /// when it changed something.
    pub fn deactivate_as(&mut self, dep_id: &str, by: &Actor, now: f64) -> bool {
        let was_live = self.is_live(dep_id, now);
        let found = self.deactivate(dep_id, now);
        if was_live {
            self.record_for(dep_id, "MODEL_DEPLOYMENT_DEACTIVATED", by, now);
        }
        found
    }

    /// [`Platform::activate`], recorded (`MODEL_DEPLOYMENT_ACTIVATED`) when
    /// it woke an inactive deployment.
    pub fn activate_as(&mut self, dep_id: &str, by: &Actor, now: f64) -> bool {
        let was_inactive = self.deployment(dep_id).is_some() && !self.is_live(dep_id, now);
        let found = self.activate(dep_id, now);
        if was_inactive {
            self.record_for(dep_id, "MODEL_DEPLOYMENT_ACTIVATED", by, now);
        }
        found
    }

    /// The environments `dep_id` serves or is being promoted into.
    fn environments_holding(&self, dep_id: &str, now: f64) -> Vec<String> {
        let Some(model) = self
            .deployment(dep_id)
            .and_then(|d| self.model(&d.model_id))
        else {
            return Vec::new();
        };
        model
            .environments
            .iter()
            .filter(|e| {
                let v = self.view(e, now);
                v.current.as_deref() == Some(dep_id) || v.candidate.as_deref() == Some(dep_id)
            })
            .map(|e| e.name.clone())
            .collect()
    }

    /// `DELETE /v1/models/{model_id}/deployments/{deployment_id}` for a
    /// deployment of that model. A scripted refusal (`refuse_deletes`) wins;
    /// a deployment that serves an environment or is being promoted into
    /// one is refused (400); anything else is gone from every listing and
    /// read from now on, and its audit history stays.
    pub fn delete_deployment(
        &mut self,
        dep_id: &str,
        by: &Actor,
        now: f64,
    ) -> Result<DeleteOutcome, ApiErr> {
        let Some(dep) = self.deployment(dep_id) else {
            return Err(ApiErr::not_found(format!("Deployment {dep_id} not found")));
        };
        if let Some(r) = self
            .scenario
            .refuse_deletes
            .iter()
            .find(|r| r.deployment == dep.id || r.deployment == dep.name)
        {
            return Ok(match r.status {
                200 => DeleteOutcome::Kept(dep.id.clone()),
                s => DeleteOutcome::Refused(
                    s,
                    format!("Deployment {dep_id} cannot be deleted with this API key"),
                ),
            });
        }
        let held = self.environments_holding(dep_id, now);
        if !held.is_empty() {
            return Err(ApiErr::invalid(format!(
                "Deployment {dep_id} serves or is being promoted into environment {}: promote another deployment there first",
                held.join(", ")
            )));
        }
        self.record_for(dep_id, "MODEL_DEPLOYMENT_DELETED", by, now);
        self.remove_deployment(dep_id, now);
        Ok(DeleteOutcome::Deleted(dep_id.to_string()))
    }

    fn remove_deployment(&mut self, dep_id: &str, now: f64) {
        let Some(i) = self.deployments.iter().position(|d| d.id == dep_id) else {
            return;
        };
        let d = self.deployments.remove(i);
        for m in self.models.iter_mut().filter(|m| m.id == d.model_id) {
            if m.development.as_deref() == Some(dep_id) {
                m.development = None;
            }
        }
        self.deleted.push((now, d));
    }

    /// `DELETE /v1/models/{model_id}`: the model, its environments and
    /// deployments are gone (its audit log with it). False when there is no
    /// such model.
    pub fn delete_model(&mut self, model_id: &str, now: f64) -> bool {
        let Some(i) = self
            .models
            .iter()
            .position(|m| m.id == model_id && m.origin != "CHAINS")
        else {
            return false;
        };
        let ids: Vec<String> = self
            .model_deployments(model_id)
            .map(|d| d.id.clone())
            .collect();
        for id in ids {
            self.remove_deployment(&id, now);
        }
        self.models.remove(i);
        self.audit.retain(|e| e.model_id != model_id);
        true
    }

    /// `DELETE /v1/chains/{chain_id}/deployments/{id}`, under the model
    /// rules: a scripted refusal wins, one that serves a chain environment
    /// or is being promoted into one is refused (400), anything else is
    /// gone with its chainlets' deployments.
    pub fn delete_chain_deployment(
        &mut self,
        cd_id: &str,
        now: f64,
    ) -> Result<DeleteOutcome, ApiErr> {
        let Some(cd) = self.chain_deployment(cd_id).cloned() else {
            return Err(ApiErr::not_found(format!(
                "Chain deployment {cd_id} not found"
            )));
        };
        if let Some(r) = self
            .scenario
            .refuse_deletes
            .iter()
            .find(|r| r.deployment == cd.id || Some(&r.deployment) == cd.name.as_ref())
        {
            return Ok(match r.status {
                200 => DeleteOutcome::Kept(cd.id.clone()),
                s => DeleteOutcome::Refused(
                    s,
                    format!("Chain deployment {cd_id} cannot be deleted with this API key"),
                ),
            });
        }
        let held: Vec<String> = self
            .chain(&cd.chain_id)
            .map(|c| {
                c.environments
                    .iter()
                    .filter(|e| {
                        let v = self.view(e, now);
                        v.current.as_deref() == Some(cd_id) || v.candidate.as_deref() == Some(cd_id)
                    })
                    .map(|e| e.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        if !held.is_empty() {
            return Err(ApiErr::invalid(format!(
                "Chain deployment {cd_id} serves or is being promoted into environment {}: promote another deployment there first",
                held.join(", ")
            )));
        }
        for c in &cd.chainlets {
            self.remove_deployment(&c.deployment_id, now);
        }
        self.chain_deployments.retain(|x| x.id != cd_id);
        self.deleted_chains.push(cd);
        Ok(DeleteOutcome::Deleted(cd_id.to_string()))
    }

    pub(super) fn deleted_chain_deployment(&self, id: &str) -> Option<&ChainDeployment> {
        self.deleted_chains.iter().find(|c| c.id == id)
    }

    /// A deleted deployment, as it was when it was deleted (a past
    /// promotion's readiness still needs it).
    pub(super) fn deleted_deployment(&self, id: &str) -> Option<&Deployment> {
        self.deleted.iter().map(|(_, d)| d).find(|d| d.id == id)
    }

    /// Ids of the deployments deleted so far, oldest first.
    pub fn deleted_ids(&self) -> Vec<String> {
        self.deleted.iter().map(|(_, d)| d.id.clone()).collect()
    }
}
