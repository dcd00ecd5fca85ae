//! The fake platform's state: teams, models, deployments, environments and
//! promotions, chains and chainlets, and the rules the platform applies when
//! something is created, woken or deactivated.
//!
//! Nothing here reads a clock: every function takes the scenario time `now`,
//! so the rules can be tested at chosen instants.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::scenario::Scenario;
use crate::status;

pub const PRODUCTION: &str = "production";

mod create;
mod entities;
mod ids;
mod lifecycle;
mod others;
mod preflight;
mod promote;
mod views;

pub use create::{
    ChainletInput, CreateKind, CreateModel, DeployChain, decode_config, valid_deploy_timeout,
    valid_deployment_name,
};
pub use entities::*;
pub use lifecycle::DeleteOutcome;
pub use views::{EnvView, PromotionState, env_view, promotion_state};

use ids::IdGen;

/// A platform error as GraphQL reports it (`extensions.code`).
#[derive(Clone, Debug, PartialEq)]
pub struct ApiErr {
    pub message: String,
    pub code: &'static str,
}

impl ApiErr {
    pub fn not_found(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: "RESOURCE_NOT_FOUND",
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: "VALIDATION_ERROR",
        }
    }
}

/// The whole fake platform.
#[derive(Debug)]
pub struct Platform {
    pub scenario: Scenario,
    ids: IdGen,
    pub teams: Vec<Team>,
    pub models: Vec<Model>,
    pub deployments: Vec<Deployment>,
    pub chains: Vec<Chain>,
    pub chain_deployments: Vec<ChainDeployment>,
    pub issued_keys: BTreeSet<String>,
    created_model_deployments: usize,
    created_chain_deployments: usize,
    /// The model audit log, in the order recorded.
    pub audit: Vec<AuditEvent>,
    /// Deleted deployments, with when.
    deleted: Vec<(f64, Deployment)>,
    /// Deleted chain deployments (their chainlets' deployments are in `deleted`).
    deleted_chains: Vec<ChainDeployment>,
    promote_calls: usize,
    /// Requests handled so far, by endpoint name (another client's actions
    /// are placed by them).
    request_counts: BTreeMap<String, u32>,
    /// `{prefix}` and `{id}` placeholders, e.g. `http://127.0.0.1:PORT/{prefix}-{id}`.
    pub hostname_template: String,
    pub clock: Arc<Clock>,
}

impl Platform {
    pub fn new(scenario: Scenario, hostname_template: String, clock: Arc<Clock>) -> Self {
        let mut p = Self {
            clock,
            ids: IdGen::new(scenario.id_seed),
            scenario,
            teams: Vec::new(),
            models: Vec::new(),
            deployments: Vec::new(),
            chains: Vec::new(),
            chain_deployments: Vec::new(),
            issued_keys: BTreeSet::new(),
            created_model_deployments: 0,
            created_chain_deployments: 0,
            audit: Vec::new(),
            deleted: Vec::new(),
            deleted_chains: Vec::new(),
            promote_calls: 0,
            request_counts: BTreeMap::new(),
            hostname_template,
        };
        p.load_scenario();
        p
    }

    fn load_scenario(&mut self) {
        let sc = self.scenario.clone();
        for id in sc
            .teams
            .iter()
            .filter_map(|t| t.id.as_ref())
            .chain(sc.models.iter().filter_map(|m| m.id.as_ref()))
            .chain(sc.chains.iter().filter_map(|c| c.id.as_ref()))
        {
            self.ids.reserve(id);
        }
        for m in &sc.models {
            for d in m.deployments.iter().filter_map(|d| d.id.as_ref()) {
                self.ids.reserve(d);
            }
        }
        for t in &sc.teams {
            let id = t.id.clone().unwrap_or_else(|| self.ids.next(8));
            self.teams.push(Team {
                id,
                name: t.name.clone(),
                default: t.default,
            });
        }
        for m in &sc.models {
            self.add_model_spec(m, 0.0);
        }
        for c in &sc.chains {
            let team_id = self.team_id_by_name(c.team.as_deref());
            let mut envs = vec![Environment::new(PRODUCTION, 0.0)];
            for e in &c.environments {
                if !envs.iter().any(|x| &x.name == e) {
                    envs.push(Environment::new(e, 0.0));
                }
            }
            let id = c.id.clone().unwrap_or_else(|| self.ids.next(8));
            self.chains.push(Chain {
                id,
                name: c.name.clone(),
                team_id,
                created_at: 0.0,
                environments: envs,
            });
            self.add_chain_deployments(self.chains.len() - 1, &c.deployments);
        }
        // After the chains: a scenario's entries may name one.
        self.load_audit_entries();
    }

    /// A scenario chain's existing deployments: each one chainlet
    /// (`entrypoint`, its model made as `deploy_chain_atomic` makes a
    /// chainlet's) whose model deployment is in the scripted status.
    fn add_chain_deployments(
        &mut self,
        chain_idx: usize,
        specs: &[crate::scenario::ChainDeploymentSpec],
    ) {
        if specs.is_empty() {
            return;
        }
        let (chain_id, team_id, name) = {
            let c = &self.chains[chain_idx];
            (c.id.clone(), c.team_id.clone(), c.name.clone())
        };
        let model_idx = self.add_model(&format!("{name}-entrypoint"), &team_id, "CHAINS", 0.0);
        let model_id = self.models[model_idx].id.clone();
        for (i, d) in specs.iter().enumerate() {
            let cd_id = d.id.clone().unwrap_or_else(|| self.ids.next(7));
            let dep_id = self.ids.next(7);
            if let Some(env) = &d.environment {
                let envs = &mut self.chains[chain_idx].environments;
                match envs.iter_mut().find(|e| &e.name == env) {
                    Some(e) => e.initial_current = Some(cd_id.clone()),
                    None => {
                        let mut e = Environment::new(env, 0.0);
                        e.initial_current = Some(cd_id.clone());
                        envs.push(e);
                    }
                }
            }
            self.deployments.push(Deployment {
                id: dep_id.clone(),
                model_id: model_id.clone(),
                name: format!("deployment-{}", i + 1),
                created_at: d.created_at,
                steps: vec![(d.created_at, d.status.clone())],
                raw: false,
                is_draft: false,
                labels: None,
                s3_key: None,
                config: Value::Null,
                raw_config: None,
                semver: format!("0.{}.0", i + 1),
                instance_type_name: "1x2".into(),
                min_replica: 0,
                max_replica: 1,
                deploy_timeout_minutes: None,
                chain_deployment_id: Some(cd_id.clone()),
                deactivated_at: None,
                created_index: None,
                copied_from: None,
            });
            let chainlet_id = self.ids.next(7);
            self.chain_deployments.push(ChainDeployment {
                id: cd_id,
                chain_id: chain_id.clone(),
                name: None,
                created_at: d.created_at,
                is_draft: false,
                chainlets: vec![Chainlet {
                    id: chainlet_id,
                    name: "entrypoint".into(),
                    is_entrypoint: true,
                    model_id: model_id.clone(),
                    deployment_id: dep_id,
                }],
                original_source_artifact_s3_key: None,
                created_index: None,
                copied_from: None,
            });
        }
    }

    /// A model as the scenario (or another client) describes it, with its
    /// deployments, created at `now`.
    pub(crate) fn add_model_spec(&mut self, m: &crate::scenario::ModelSpec, now: f64) {
        let team_id = self.team_id_by_name(m.team.as_deref());
        let model_id = m.id.clone().unwrap_or_else(|| self.ids.next(8));
        let mut envs = vec![Environment::new(PRODUCTION, now)];
        for e in &m.environments {
            if !envs.iter().any(|x| &x.name == e) {
                envs.push(Environment::new(e, now));
            }
        }
        let mut model = Model {
            id: model_id.clone(),
            name: m.name.clone(),
            team_id,
            origin: "BASETEN".into(),
            created_at: now,
            environments: envs,
            development: None,
        };
        let default_setting = self.scenario.deployment_settings.pick(&m.name);
        for d in &m.deployments {
            let dep_id = d.id.clone().unwrap_or_else(|| self.ids.next(7));
            let setting = d
                .settings
                .clone()
                .unwrap_or_else(|| default_setting.clone());
            let created_at = now + d.created_at;
            if let Some(env) = &d.environment {
                match model.environments.iter_mut().find(|e| &e.name == env) {
                    Some(e) => e.initial_current = Some(dep_id.clone()),
                    None => {
                        let mut e = Environment::new(env, now);
                        e.initial_current = Some(dep_id.clone());
                        model.environments.push(e);
                    }
                }
            }
            if d.is_draft {
                model.development = Some(dep_id.clone());
            }
            self.deployments.push(Deployment {
                id: dep_id,
                model_id: model_id.clone(),
                name: d.name.clone(),
                created_at,
                steps: vec![(created_at, d.status.clone())],
                raw: false,
                is_draft: d.is_draft,
                labels: d.labels.clone(),
                s3_key: None,
                config: json!({"model_name": m.name}),
                raw_config: d.raw_config.clone(),
                semver: "0.0.1".into(),
                instance_type_name: setting.instance_type,
                min_replica: setting.min_replica,
                max_replica: setting.max_replica,
                deploy_timeout_minutes: None,
                chain_deployment_id: None,
                deactivated_at: None,
                created_index: None,
                copied_from: None,
            });
        }
        self.models.push(model);
    }

    fn team_id_by_name(&self, name: Option<&str>) -> String {
        name.and_then(|n| self.teams.iter().find(|t| t.name == n))
            .or_else(|| self.default_team())
            .map(|t| t.id.clone())
            .unwrap_or_default()
    }

    /// The team flagged default, else the first one.
    pub fn default_team(&self) -> Option<&Team> {
        self.teams
            .iter()
            .find(|t| t.default)
            .or_else(|| self.teams.first())
    }

    pub fn team(&self, id: &str) -> Option<&Team> {
        self.teams.iter().find(|t| t.id == id)
    }

    /// ISO 8601 timestamp of scenario time `secs`.
    pub fn scenario_iso(&self, secs: f64) -> String {
        self.clock.iso(secs)
    }

    pub fn hostname(&self, prefix: &str, id: &str) -> String {
        self.hostname_template
            .replace("{prefix}", prefix)
            .replace("{id}", id)
    }

    pub fn model(&self, id: &str) -> Option<&Model> {
        self.models.iter().find(|m| m.id == id)
    }

    pub fn deployment(&self, id: &str) -> Option<&Deployment> {
        self.deployments.iter().find(|d| d.id == id)
    }

    pub fn chain(&self, id: &str) -> Option<&Chain> {
        self.chains.iter().find(|c| c.id == id)
    }

    pub fn chain_deployment(&self, id: &str) -> Option<&ChainDeployment> {
        self.chain_deployments.iter().find(|c| c.id == id)
    }

    pub fn model_deployments(&self, model_id: &str) -> impl Iterator<Item = &Deployment> {
        self.deployments
            .iter()
            .filter(move |d| d.model_id == model_id)
    }

    /// Records a key handed out by `*_s3_upload_credentials`.
    pub fn issue_key(&mut self, key: &str) {
        self.issued_keys.insert(key.to_string());
    }

    /// Deactivation: DEACTIVATING now, INACTIVE `deactivation_seconds`
    /// later, whatever the timeline had scripted after now. Deactivating an
    /// inactive deployment changes nothing.
    pub fn deactivate(&mut self, dep_id: &str, now: f64) -> bool {
        let secs = self.scenario.deactivation_seconds.max(0.0);
        let Some(d) = self.deployments.iter_mut().find(|d| d.id == dep_id) else {
            return false;
        };
        if matches!(d.public_status(now).as_str(), "INACTIVE" | "DEACTIVATING") {
            return true;
        }
        d.deactivated_at = Some(now);
        d.rewrite_from(now, &[(now, "DEACTIVATING"), (now + secs, "INACTIVE")]);
        true
    }

    pub fn deactivate_chain_deployment(&mut self, cd_id: &str, now: f64) -> bool {
        let Some(cd) = self.chain_deployment(cd_id) else {
            return false;
        };
        let deps: Vec<String> = cd
            .chainlets
            .iter()
            .map(|c| c.deployment_id.clone())
            .collect();
        for d in deps {
            self.deactivate(&d, now);
        }
        true
    }

    /// A request reached a scaled-to-zero or waking deployment: it becomes
    /// ACTIVE `wake_seconds` from now (WAKING_UP meanwhile). Returns the
    /// scenario time at which it is ACTIVE.
    pub fn wake(&mut self, dep_id: &str, now: f64) -> f64 {
        let secs = self.scenario.wake_seconds.max(0.0);
        let Some(d) = self.deployments.iter_mut().find(|d| d.id == dep_id) else {
            return now;
        };
        let current = d.public_status(now);
        if current == "WAKING_UP" {
            // Already waking by our own hand: keep its schedule.
            if let Some((t, _)) = d
                .steps
                .iter()
                .find(|(t, s)| *t > now && status::as_public(s) == "ACTIVE")
            {
                return *t;
            }
        }
        if secs == 0.0 {
            d.rewrite_from(now, &[(now, "ACTIVE")]);
            now
        } else {
            d.rewrite_from(now, &[(now, "WAKING_UP"), (now + secs, "ACTIVE")]);
            now + secs
        }
    }

    /// State of every model deployment, for test assertions.
    pub fn snapshot(&self, now: f64) -> Vec<DeploymentSnapshot> {
        self.deployments
            .iter()
            .map(|d| {
                let model = self.model(&d.model_id);
                let environment = self.environment_of(d, now);
                DeploymentSnapshot {
                    id: d.id.clone(),
                    model_id: d.model_id.clone(),
                    model_name: model.map(|m| m.name.clone()).unwrap_or_default(),
                    name: d.name.clone(),
                    status: d.public_status(now),
                    raw_status: d.raw_status(now),
                    is_production: environment.as_deref() == Some(PRODUCTION),
                    environment,
                    is_draft: d.is_draft,
                    labels: d.labels.clone(),
                    s3_key: d.s3_key.clone(),
                    deploy_timeout_minutes: d.deploy_timeout_minutes,
                    chain_deployment_id: d.chain_deployment_id.clone(),
                    created_at_secs: d.created_at,
                    deactivated: d.deactivated_at.is_some(),
                    copied_from: d.copied_from.clone(),
                }
            })
            .collect()
    }
}

/// One deployment as the fake sees it at an instant.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DeploymentSnapshot {
    pub id: String,
    pub model_id: String,
    pub model_name: String,
    pub name: String,
    pub status: String,
    pub raw_status: String,
    pub environment: Option<String>,
    pub is_production: bool,
    pub is_draft: bool,
    pub labels: Option<Value>,
    pub s3_key: Option<String>,
    pub deploy_timeout_minutes: Option<i64>,
    pub chain_deployment_id: Option<String>,
    pub created_at_secs: f64,
    pub deactivated: bool,
    /// The deployment a promotion made this one from.
    pub copied_from: Option<String>,
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;
    use crate::scenario::PromotionScript;
    use crate::scenario::PromotionStep;

    fn steps(v: &[(f64, &str)]) -> Vec<(f64, String)> {
        v.iter().map(|(t, s)| (*t, s.to_string())).collect()
    }

    #[test]
    fn status_before_first_step_is_first_status() {
        let s = steps(&[(0.6, "BUILDING"), (11.5, "DEPLOYING"), (631.0, "ACTIVE")]);
        for (now, want) in [
            (0.0, "BUILDING"),
            (0.6, "BUILDING"),
            (11.49, "BUILDING"),
            (11.5, "DEPLOYING"),
            (630.9, "DEPLOYING"),
            (631.0, "ACTIVE"),
            (10_000.0, "ACTIVE"),
        ] {
            assert_eq!(status_at(&s, now), want, "at {now}");
        }
    }

    #[test]
    fn deployment_names_and_timeouts() {
        for (name, ok) in [
            ("PR-42_abc1234", true),
            ("v1.2.3", true),
            ("", false),
            ("has space", false),
            ("quote\"", false),
            ("trailing\n", false),
        ] {
            assert_eq!(valid_deployment_name(name), ok, "{name:?}");
        }
        for (m, ok) in [
            (9, false),
            (10, true),
            (45, true),
            (1440, true),
            (1441, false),
        ] {
            assert_eq!(valid_deploy_timeout(m), ok, "{m}");
        }
    }

    #[test]
    fn derived_promotion_follows_readiness() {
        let p = Promotion {
            target_id: "d".into(),
            started_at: 0.0,
            script: None,
            cancel: None,
            replaces: None,
        };
        let ready = Readiness {
            ready_at: Some(12.9),
            failed_at: None,
            deactivated_at: None,
        };
        assert_eq!(promotion_state(&p, &ready, 5.0).status, "RELEASING");
        assert_eq!(promotion_state(&p, &ready, 13.0).status, "SUCCEEDED");
        let failed = Readiness {
            ready_at: None,
            failed_at: Some((20.0, "BUILD_FAILED".into())),
            deactivated_at: None,
        };
        let s = promotion_state(&p, &failed, 21.0);
        assert_eq!(s.status, "FAILED");
        assert!(s.error_message.unwrap().contains("BUILD_FAILED"));
        // Deactivated before it was ready: the promotion fails; after it
        // succeeded, the success stands.
        let deactivated = Readiness {
            deactivated_at: Some(8.0),
            ..ready.clone()
        };
        let s = promotion_state(&p, &deactivated, 9.0);
        assert_eq!(s.status, "FAILED");
        assert!(s.error_message.unwrap().contains("deactivated"));
        let late = Readiness {
            deactivated_at: Some(14.0),
            ..ready
        };
        assert_eq!(promotion_state(&p, &late, 15.0).status, "SUCCEEDED");
    }

    #[test]
    fn env_view_moves_current_only_on_success() {
        let script = PromotionScript {
            steps: vec![
                (
                    0.0,
                    PromotionStep {
                        status: "RAMPING_UP".into(),
                        percent: 10,
                    },
                ),
                (
                    30.0,
                    PromotionStep {
                        status: "SUCCEEDED".into(),
                        percent: 100,
                    },
                ),
            ],
            error_message: None,
            rolling_deploy: Some(true),
        };
        let env = Environment {
            name: PRODUCTION.into(),
            created_at: 0.0,
            initial_current: Some("old".into()),
            promotions: vec![Promotion {
                target_id: "new".into(),
                started_at: 100.0,
                script: Some(script),
                cancel: None,
                replaces: None,
            }],
        };
        let r = |_: &str| Readiness::default();
        let before = env_view(&env, 50.0, r);
        assert_eq!(before.current.as_deref(), Some("old"));
        assert_eq!(before.promotion, None);
        let during = env_view(&env, 110.0, r);
        assert_eq!(during.current.as_deref(), Some("old"));
        assert_eq!(during.candidate.as_deref(), Some("new"));
        assert_eq!(during.promotion.unwrap().percent_traffic_to_new_version, 10);
        let after = env_view(&env, 131.0, r);
        assert_eq!(after.current.as_deref(), Some("new"));
        assert_eq!((after.candidate, after.promotion), (None, None));
    }

    #[test]
    fn a_cancel_ramps_traffic_down_then_cancels() {
        let p = Promotion {
            target_id: "new".into(),
            started_at: 0.0,
            script: None,
            cancel: Some(Cancel {
                at: 10.0,
                from_percent: 80,
                until: 20.0,
            }),
            replaces: None,
        };
        let ready = Readiness {
            ready_at: Some(0.0),
            failed_at: None,
            deactivated_at: None,
        };
        let at = |now| {
            let s = promotion_state(&p, &ready, now);
            (s.status, s.percent_traffic_to_new_version)
        };
        assert_eq!(at(5.0), ("SUCCEEDED".into(), 100), "before the cancel");
        assert_eq!(at(10.0), ("RAMPING_DOWN".into(), 80));
        assert_eq!(at(15.0), ("RAMPING_DOWN".into(), 40));
        assert_eq!(at(20.0), ("CANCELED".into(), 0));
    }

    #[test]
    fn the_candidate_serves_from_half_the_traffic() {
        let view = |percent| EnvView {
            current: Some("old".into()),
            candidate: Some("new".into()),
            promotion: Some(PromotionState {
                status: "RAMPING_UP".into(),
                percent_traffic_to_new_version: percent,
                error_message: None,
                rolling_deploy: None,
            }),
        };
        assert_eq!(view(49).serving().as_deref(), Some("old"));
        assert_eq!(view(50).serving().as_deref(), Some("new"));
        let settled = EnvView {
            current: Some("old".into()),
            ..EnvView::default()
        };
        assert_eq!(settled.serving().as_deref(), Some("old"));
    }

    #[test]
    fn ids_are_hyphen_free_and_unique() {
        let mut g = IdGen::new(7);
        let ids: BTreeSet<String> = (0..500).map(|_| g.next(7)).collect();
        assert_eq!(ids.len(), 500);
        assert!(
            ids.iter()
                .all(|i| i.len() == 7 && i.chars().all(|c| c.is_ascii_alphanumeric()))
        );
        assert_eq!(IdGen::new(1).next(8), IdGen::new(1).next(8));
    }

    #[test]
    fn configs_decode_from_base64_json() {
        let b64 = base64::engine::general_purpose::STANDARD.encode(br#"{"model_name": "m"}"#);
        assert_eq!(decode_config(&b64).unwrap()["model_name"], "m");
        assert!(decode_config("!!!").is_err());
        let arr = base64::engine::general_purpose::STANDARD.encode(b"[1]");
        assert!(decode_config(&arr).is_err());
    }
}
