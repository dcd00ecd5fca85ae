//! The create mutations under the platform's rules: what a request may
//! name (deployment names, timeouts, configs, uploaded objects, teams,
//! environments), and the models, deployments, chains and chainlets a
//! create makes.

use std::collections::BTreeSet;

use base64::Engine as _;
use serde_json::Value;

use super::{
    ApiErr, AuditEvent, Chain, ChainDeployment, Chainlet, Deployment, Environment, Model,
    PRODUCTION, Platform, Promotion,
};

/// Deployment names the platform accepts: `[0-9A-Za-z_.-]+`, fully.
pub fn valid_deployment_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// `deploy_timeout_minutes` must be within 10..=1440.
pub fn valid_deploy_timeout(minutes: i64) -> bool {
    (10..=1440).contains(&minutes)
}

/// Decodes a base64 JSON config (`config` / `encoded_config_str`).
pub fn decode_config(b64: &str) -> Result<Value, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| format!("config is not valid base64: {e}"))?;
    let v: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("config is not valid JSON: {e}"))?;
    if v.is_object() {
        Ok(v)
    } else {
        Err("config must encode a JSON object".into())
    }
}

/// What a create mutation asks for, after GraphQL argument checking.
#[derive(Clone, Debug, Default)]
pub struct CreateModel {
    /// G6/G8: the model name. G7: unused.
    pub name: Option<String>,
    /// G7: the existing model.
    pub model_id: Option<String>,
    pub s3_key: String,
    pub config_b64: String,
    pub semver_bump: Option<String>,
    pub deployment_name: Option<String>,
    pub environment_name: Option<String>,
    pub deploy_timeout_minutes: Option<i64>,
    pub team_id: Option<String>,
    pub labels_json: Option<String>,
    pub truss_user_env: Option<String>,
    pub raw_config_b64: Option<String>,
    pub model_origin: Option<String>,
}

/// One chainlet of `deploy_chain_atomic`.
#[derive(Clone, Debug, Default)]
pub struct ChainletInput {
    pub name: String,
    pub model_name: String,
    pub s3_key: String,
    pub encoded_config_str: String,
    pub semver_bump: Option<String>,
    pub version_name: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct DeployChain {
    pub chain_id: Option<String>,
    pub chain_name: Option<String>,
    pub environment: Option<String>,
    pub team_id: Option<String>,
    pub is_draft: bool,
    pub deployment_name: Option<String>,
    pub original_source_artifact_s3_key: Option<String>,
    pub truss_user_env: Option<String>,
    pub entrypoint: ChainletInput,
    pub dependencies: Vec<ChainletInput>,
}

/// Which create mutation is being served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateKind {
    NewModel,
    NewVersion,
    Draft,
}

impl Platform {
    pub(super) fn object_ok(
        &self,
        key: &str,
        object_exists: &dyn Fn(&str) -> bool,
        what: &str,
    ) -> Result<(), ApiErr> {
        if !self.issued_keys.contains(key) {
            return Err(ApiErr::invalid(format!(
                "{what} `{key}` was not issued by model_s3_upload_credentials/chain_s3_upload_credentials"
            )));
        }
        if self.scenario.require_upload && !object_exists(key) {
            return Err(ApiErr::invalid(format!(
                "No object found at {what} `{key}`: upload the truss before creating the deployment"
            )));
        }
        Ok(())
    }

    pub(super) fn next_model_timeline(&mut self, model_name: &str) -> (Vec<(f64, String)>, usize) {
        let index = self.created_model_deployments;
        self.created_model_deployments += 1;
        (self.scenario.deployments.pick(model_name, index), index)
    }

    /// G6 / G7 / G8. Returns the new deployment's id.
    pub fn create_model_deployment(
        &mut self,
        kind: CreateKind,
        req: CreateModel,
        now: f64,
        object_exists: &dyn Fn(&str) -> bool,
    ) -> Result<String, ApiErr> {
        self.object_ok(&req.s3_key, object_exists, "s3_key")?;
        let config = decode_config(&req.config_b64).map_err(ApiErr::invalid)?;
        if let Some(m) = req.deploy_timeout_minutes
            && !valid_deploy_timeout(m)
        {
            return Err(ApiErr::invalid(format!(
                "deploy_timeout_minutes must be between 10 and 1440, got {m}"
            )));
        }
        if let Some(n) = &req.deployment_name
            && !valid_deployment_name(n)
        {
            return Err(ApiErr::invalid(format!(
                "Invalid deployment name `{n}`: only letters, digits, `_`, `-` and `.` are allowed"
            )));
        }
        if let Some(env) = &req.truss_user_env
            && serde_json::from_str::<Value>(env).is_err()
        {
            return Err(ApiErr::invalid("truss_user_env is not valid JSON"));
        }
        let labels = match &req.labels_json {
            None => None,
            Some(s) => match serde_json::from_str::<Value>(s) {
                Ok(v @ Value::Object(_)) => Some(v),
                Ok(Value::Null) => None,
                _ => {
                    return Err(ApiErr::invalid(
                        "user_deploy_metadata must be a JSON object",
                    ));
                }
            },
        };
        // Kept as the deployment's raw config when it is UTF-8 text (the
        // platform drops an invalid raw config without failing the create).
        let raw_config = match &req.raw_config_b64 {
            None => None,
            Some(raw) => match base64::engine::general_purpose::STANDARD.decode(raw) {
                Ok(bytes) => String::from_utf8(bytes).ok(),
                Err(_) => return Err(ApiErr::invalid("raw_config is not valid base64")),
            },
        };
        let origin = req.model_origin.clone().unwrap_or_else(|| "BASETEN".into());

        let (model_idx, promote_to) = match kind {
            CreateKind::NewModel => {
                let name = req.name.clone().unwrap_or_default();
                if name.trim().is_empty() {
                    return Err(ApiErr::invalid("Model name must not be empty"));
                }
                let team_id = self.resolve_team(req.team_id.as_deref())?;
                if self
                    .models
                    .iter()
                    .any(|m| m.name == name && m.team_id == team_id)
                {
                    return Err(ApiErr::invalid(format!(
                        "A model named `{name}` already exists in this team: push a new version with create_model_version_from_truss"
                    )));
                }
                let env = req
                    .environment_name
                    .clone()
                    .unwrap_or_else(|| PRODUCTION.into());
                if env != PRODUCTION && !self.scenario.new_model_environments.contains(&env) {
                    return Err(ApiErr::not_found(format!(
                        "Environment `{env}` does not exist: a new model only has {}",
                        self.new_model_env_names().join(", ")
                    )));
                }
                let idx = self.add_model(&name, &team_id, &origin, now);
                (idx, Some(env))
            }
            CreateKind::NewVersion => {
                let model_id = req.model_id.clone().unwrap_or_default();
                let idx = self
                    .models
                    .iter()
                    .position(|m| m.id == model_id)
                    .ok_or_else(|| ApiErr::not_found(format!("Model `{model_id}` not found")))?;
                let promote_to = match &req.environment_name {
                    Some(env) => {
                        if !self.models[idx].environments.iter().any(|e| &e.name == env) {
                            return Err(ApiErr::not_found(format!(
                                "Environment `{env}` does not exist for model `{model_id}`"
                            )));
                        }
                        Some(env.clone())
                    }
                    // The platform promotes a published deployment to
                    // production when production has nothing yet.
                    None => {
                        let prod = self.models[idx]
                            .environments
                            .iter()
                            .find(|e| e.name == PRODUCTION)
                            .map(|e| self.view(e, now));
                        match prod {
                            Some(v) if v.current.is_none() && v.candidate.is_none() => {
                                Some(PRODUCTION.to_string())
                            }
                            _ => None,
                        }
                    }
                };
                (idx, promote_to)
            }
            CreateKind::Draft => {
                let name = req.name.clone().unwrap_or_default();
                if name.trim().is_empty() {
                    return Err(ApiErr::invalid("Model name must not be empty"));
                }
                let team_id = self.resolve_team(req.team_id.as_deref())?;
                let idx = match self
                    .models
                    .iter()
                    .position(|m| m.name == name && m.team_id == team_id)
                {
                    Some(i) => i,
                    None => self.add_model(&name, &team_id, &origin, now),
                };
                (idx, None)
            }
        };

        let model_name = self.models[model_idx].name.clone();
        let model_id = self.models[model_idx].id.clone();
        let (timeline, index) = self.next_model_timeline(&model_name);
        let count = self.model_deployments(&model_id).count();
        let dep_id = self.ids.next(7);
        let setting = self.scenario.deployment_settings.pick(&model_name);
        let name = match kind {
            CreateKind::Draft => "development".to_string(),
            _ => req
                .deployment_name
                .clone()
                .unwrap_or_else(|| format!("deployment-{}", count + 1)),
        };
        self.deployments.push(Deployment {
            id: dep_id.clone(),
            model_id: model_id.clone(),
            name,
            created_at: now,
            steps: timeline.iter().map(|(t, s)| (now + t, s.clone())).collect(),
            raw: false,
            is_draft: kind == CreateKind::Draft,
            labels,
            s3_key: Some(req.s3_key.clone()),
            config,
            raw_config,
            semver: format!("0.{}.0", count + 1),
            instance_type_name: setting.instance_type,
            min_replica: setting.min_replica,
            max_replica: setting.max_replica,
            deploy_timeout_minutes: req.deploy_timeout_minutes,
            chain_deployment_id: None,
            deactivated_at: None,
            created_index: Some(index),
            copied_from: None,
        });
        if kind == CreateKind::Draft {
            self.models[model_idx].development = Some(dep_id.clone());
        }
        self.record(AuditEvent {
            at: now,
            event_type: "MODEL_DEPLOYED".into(),
            model_id: model_id.clone(),
            deployment_id: dep_id.clone(),
            deployment_name: String::new(),
            by: crate::scenario::Actor::default(),
            environment: promote_to.clone(),
            publish: kind != CreateKind::Draft,
        });
        if let Some(env) = promote_to {
            let script = self.scenario.promotions.pick(&model_name, index);
            let model = &mut self.models[model_idx];
            if let Some(e) = model.environments.iter_mut().find(|e| e.name == env) {
                e.promotions.push(Promotion {
                    target_id: dep_id.clone(),
                    started_at: now,
                    script,
                    cancel: None,
                    replaces: None,
                });
            }
        }
        Ok(dep_id)
    }

    pub(super) fn new_model_env_names(&self) -> Vec<String> {
        let mut v = vec![PRODUCTION.to_string()];
        v.extend(self.scenario.new_model_environments.iter().cloned());
        v
    }

    pub(super) fn resolve_team(&self, team_id: Option<&str>) -> Result<String, ApiErr> {
        match team_id {
            Some(id) => self
                .team(id)
                .map(|t| t.id.clone())
                .ok_or_else(|| ApiErr::not_found(format!("Team `{id}` not found"))),
            None => self
                .default_team()
                .map(|t| t.id.clone())
                .ok_or_else(|| ApiErr::invalid("No team available")),
        }
    }

    pub(super) fn add_model(&mut self, name: &str, team_id: &str, origin: &str, now: f64) -> usize {
        let mut environments = vec![Environment::new(PRODUCTION, now)];
        if origin != "CHAINS" {
            for e in &self.scenario.new_model_environments {
                if e != PRODUCTION {
                    environments.push(Environment::new(e, now));
                }
            }
        }
        self.models.push(Model {
            id: self.ids.next(8),
            name: name.to_string(),
            team_id: team_id.to_string(),
            origin: origin.to_string(),
            created_at: now,
            environments,
            development: None,
        });
        self.models.len() - 1
    }

    /// G10. Returns the new chain deployment's id.
    pub fn deploy_chain(
        &mut self,
        req: DeployChain,
        now: f64,
        object_exists: &dyn Fn(&str) -> bool,
    ) -> Result<String, ApiErr> {
        let all: Vec<&ChainletInput> = std::iter::once(&req.entrypoint)
            .chain(&req.dependencies)
            .collect();
        let mut names = BTreeSet::new();
        for c in &all {
            if !names.insert(c.name.as_str()) {
                return Err(ApiErr::invalid(format!(
                    "Chainlet names must be unique, `{}` appears twice",
                    c.name
                )));
            }
            if c.name.is_empty()
                || !c
                    .name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
            {
                return Err(ApiErr::invalid(format!(
                    "Invalid chainlet name `{}`",
                    c.name
                )));
            }
            self.object_ok(&c.s3_key, object_exists, "s3_key")?;
            decode_config(&c.encoded_config_str).map_err(ApiErr::invalid)?;
            if let Some(v) = &c.version_name
                && !valid_deployment_name(v)
            {
                return Err(ApiErr::invalid(format!("Invalid version_name `{v}`")));
            }
        }
        if let Some(key) = &req.original_source_artifact_s3_key {
            self.object_ok(key, object_exists, "original_source_artifact_s3_key")?;
        }
        if let Some(n) = &req.deployment_name
            && !valid_deployment_name(n)
        {
            return Err(ApiErr::invalid(format!("Invalid deployment name `{n}`")));
        }
        if let Some(env) = &req.truss_user_env
            && serde_json::from_str::<Value>(env).is_err()
        {
            return Err(ApiErr::invalid("truss_user_env is not valid JSON"));
        }

        let (chain_idx, is_new) = match (&req.chain_id, &req.chain_name) {
            (Some(id), _) => (
                self.chains
                    .iter()
                    .position(|c| &c.id == id)
                    .ok_or_else(|| ApiErr::not_found(format!("Chain `{id}` not found")))?,
                false,
            ),
            (None, Some(name)) => {
                let team_id = self.resolve_team(req.team_id.as_deref())?;
                match self
                    .chains
                    .iter()
                    .position(|c| &c.name == name && c.team_id == team_id)
                {
                    Some(i) => (i, false),
                    None => {
                        if let Some(env) = &req.environment
                            && env != PRODUCTION
                        {
                            return Err(ApiErr::not_found(format!(
                                "Environment `{env}` does not exist: a new chain only has production"
                            )));
                        }
                        self.chains.push(Chain {
                            id: self.ids.next(8),
                            name: name.clone(),
                            team_id,
                            created_at: now,
                            environments: vec![Environment::new(PRODUCTION, now)],
                        });
                        (self.chains.len() - 1, true)
                    }
                }
            }
            (None, None) => {
                return Err(ApiErr::invalid("Either chain_id or chain_name is required"));
            }
        };
        if let Some(env) = &req.environment
            && !self.chains[chain_idx]
                .environments
                .iter()
                .any(|e| &e.name == env)
        {
            return Err(ApiErr::not_found(format!(
                "Environment `{env}` does not exist for chain `{}`",
                self.chains[chain_idx].id
            )));
        }
        let chain_id = self.chains[chain_idx].id.clone();
        let team_id = self.chains[chain_idx].team_id.clone();
        let cd_id = self.ids.next(7);
        let mut chainlets = Vec::new();
        for (i, c) in all.iter().enumerate() {
            let model_idx = match self
                .models
                .iter()
                .position(|m| m.name == c.model_name && m.team_id == team_id)
            {
                Some(idx) => idx,
                None => self.add_model(&c.model_name, &team_id, "CHAINS", now),
            };
            let model_id = self.models[model_idx].id.clone();
            let count = self.model_deployments(&model_id).count();
            let dep_id = self.ids.next(7);
            let timeline = self.scenario.chainlets.pick(&c.name);
            self.deployments.push(Deployment {
                id: dep_id.clone(),
                model_id: model_id.clone(),
                name: c
                    .version_name
                    .clone()
                    .unwrap_or_else(|| format!("deployment-{}", count + 1)),
                created_at: now,
                steps: timeline.iter().map(|(t, s)| (now + t, s.clone())).collect(),
                raw: true,
                is_draft: req.is_draft,
                labels: None,
                s3_key: Some(c.s3_key.clone()),
                config: decode_config(&c.encoded_config_str).unwrap_or(Value::Null),
                raw_config: None,
                semver: format!("0.{}.0", count + 1),
                instance_type_name: "1x2".into(),
                min_replica: 0,
                max_replica: 1,
                deploy_timeout_minutes: None,
                chain_deployment_id: Some(cd_id.clone()),
                deactivated_at: None,
                created_index: None,
                copied_from: None,
            });
            chainlets.push(Chainlet {
                id: self.ids.next(7),
                name: c.name.clone(),
                is_entrypoint: i == 0,
                model_id,
                deployment_id: dep_id,
            });
        }
        self.chain_deployments.push(ChainDeployment {
            id: cd_id.clone(),
            chain_id: chain_id.clone(),
            name: req.deployment_name.clone(),
            created_at: now,
            is_draft: req.is_draft,
            chainlets,
            original_source_artifact_s3_key: req.original_source_artifact_s3_key.clone(),
            created_index: Some(self.created_chain_deployments),
            copied_from: None,
        });
        self.created_chain_deployments += 1;
        let promote_to = if req.is_draft {
            None
        } else if is_new {
            Some(PRODUCTION.to_string())
        } else if let Some(env) = &req.environment {
            Some(env.clone())
        } else {
            let prod = self.chains[chain_idx]
                .environments
                .iter()
                .find(|e| e.name == PRODUCTION)
                .map(|e| self.view(e, now));
            match prod {
                Some(v) if v.current.is_none() && v.candidate.is_none() => {
                    Some(PRODUCTION.to_string())
                }
                _ => None,
            }
        };
        // Scripted promotions apply to chains by chain name (`by_model`) or
        // the default; `sequence` counts model deployments only.
        let script = self
            .scenario
            .promotions
            .pick(&self.chains[chain_idx].name, usize::MAX);
        if let Some(env) = promote_to
            && let Some(e) = self.chains[chain_idx]
                .environments
                .iter_mut()
                .find(|e| e.name == env)
        {
            e.promotions.push(Promotion {
                target_id: cd_id.clone(),
                started_at: now,
                script,
                cancel: None,
                replaces: None,
            });
        }
        Ok(cd_id)
    }
}
