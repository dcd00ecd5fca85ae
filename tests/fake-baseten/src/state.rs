//! The fake platform's state: teams, models, deployments, environments and
//! promotions, chains and chainlets, and the rules the platform applies when
//! something is created, woken or deactivated.
//!
//! Nothing here reads a clock: every function takes the scenario time `now`,
//! so the rules can be tested at chosen instants.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use base64::Engine as _;
use serde::Serialize;
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::scenario::{PromotionScript, Scenario};
use crate::status;

pub const PRODUCTION: &str = "production";

mod others;
mod promote;

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

#[derive(Clone, Debug)]
pub struct Team {
    pub id: String,
    pub name: String,
    pub default: bool,
}

#[derive(Clone, Debug)]
pub struct Model {
    pub id: String,
    pub name: String,
    pub team_id: String,
    /// `BASETEN` or `CHAINS` (chainlet models are hidden from `models`).
    pub origin: String,
    pub created_at: f64,
    pub environments: Vec<Environment>,
    pub development: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Environment {
    pub name: String,
    pub created_at: f64,
    /// The current deployment the scenario started with.
    pub initial_current: Option<String>,
    pub promotions: Vec<Promotion>,
}

impl Environment {
    fn new(name: &str, now: f64) -> Self {
        Self {
            name: name.to_string(),
            created_at: now,
            initial_current: None,
            promotions: Vec::new(),
        }
    }
}

/// A deployment (or chain deployment) being promoted into an environment.
#[derive(Clone, Debug)]
pub struct Promotion {
    pub target_id: String,
    pub started_at: f64,
    /// `None`: RELEASING until the target is ready, then SUCCEEDED (FAILED
    /// when it fails first).
    pub script: Option<PromotionScript>,
    /// Set by a cancel or force cancel; wins over the script from then on.
    pub cancel: Option<Cancel>,
    /// The deployment this promotion replaces, when the environment's
    /// cleanup strategy deactivates it once the promotion succeeded.
    pub replaces: Option<String>,
}

/// A cancel of a promotion in flight: traffic falls from `from_percent`
/// at `at` to 0 at `until` (RAMPING_DOWN), then the promotion is CANCELED.
#[derive(Clone, Debug, PartialEq)]
pub struct Cancel {
    pub at: f64,
    pub from_percent: u32,
    pub until: f64,
}

/// Whose environments: a model's or a chain's (by id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    Model(String),
    Chain(String),
}

/// What the promote endpoints ask for, after body checking.
#[derive(Clone, Debug)]
pub struct PromoteRequest {
    pub deployment_id: String,
    /// Recorded but not modelled: the fake never scales the previous
    /// deployment down, so a rollback can promote it again at once.
    pub scale_down_previous_deployment: bool,
    pub preserve_env_instance_type: bool,
}

/// The answer to a (non-forced) cancel.
#[derive(Clone, Debug, PartialEq)]
pub struct CancelOutcome {
    /// `CANCELED` or `RAMPING_DOWN`.
    pub status: &'static str,
    pub message: String,
}

#[derive(Clone, Debug)]
pub struct Deployment {
    pub id: String,
    pub model_id: String,
    pub name: String,
    pub created_at: f64,
    /// `(absolute scenario time, status)`, in time order.
    pub steps: Vec<(f64, String)>,
    /// Steps are raw internal statuses (chainlets) rather than public ones.
    pub raw: bool,
    pub is_draft: bool,
    pub labels: Option<Value>,
    pub s3_key: Option<String>,
    pub config: Value,
    pub semver: String,
    pub instance_type_name: String,
    pub deploy_timeout_minutes: Option<i64>,
    pub chain_deployment_id: Option<String>,
    pub deactivated_at: Option<f64>,
    /// The n-th deployment a create mutation made (`deployments.sequence`
    /// index); a promotion's copy keeps its source's.
    pub created_index: Option<usize>,
    /// The deployment a promotion copied this one from.
    pub copied_from: Option<String>,
}

impl Deployment {
    /// The scripted status at `now`, in the timeline's own vocabulary.
    pub fn status_at(&self, now: f64) -> String {
        status_at(&self.steps, now)
    }

    pub fn public_status(&self, now: f64) -> String {
        status::as_public(&self.status_at(now))
    }

    pub fn raw_status(&self, now: f64) -> String {
        let s = self.status_at(now);
        if self.raw {
            s
        } else {
            status::public_to_raw(&s)
        }
    }

    fn readiness(&self) -> Readiness {
        let mut r = Readiness::default();
        for (t, s) in &self.steps {
            let p = status::as_public(s);
            if r.ready_at.is_none() && status::is_ready(&p) && r.failed_at.is_none() {
                r.ready_at = Some(*t);
            }
            if r.failed_at.is_none() && status::is_failed(&p) && r.ready_at.is_none() {
                r.failed_at = Some((*t, p));
            }
        }
        r.deactivated_at = self.deactivated_at;
        r
    }

    /// Replaces everything scripted from `at` on with `steps`.
    fn rewrite_from(&mut self, at: f64, steps: &[(f64, &str)]) {
        self.steps.retain(|(t, _)| *t < at);
        for (t, s) in steps {
            let s = if self.raw {
                status::public_to_raw(s)
            } else {
                (*s).to_string()
            };
            self.steps.push((*t, s));
        }
    }
}

/// Status of a timeline at `now`: the last step at or before `now`, or the
/// first step's status before it.
pub fn status_at(steps: &[(f64, String)], now: f64) -> String {
    steps
        .iter()
        .rev()
        .find(|(t, _)| *t <= now)
        .or_else(|| steps.first())
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| "ACTIVE".into())
}

/// When a deployment first became ready, or failed before that.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Readiness {
    pub ready_at: Option<f64>,
    pub failed_at: Option<(f64, String)>,
    /// When it was deactivated (a chain deployment: its first chainlet).
    pub deactivated_at: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct Chain {
    pub id: String,
    pub name: String,
    pub team_id: String,
    pub created_at: f64,
    pub environments: Vec<Environment>,
}

#[derive(Clone, Debug)]
pub struct ChainDeployment {
    pub id: String,
    pub chain_id: String,
    pub name: Option<String>,
    pub created_at: f64,
    pub is_draft: bool,
    pub chainlets: Vec<Chainlet>,
    pub original_source_artifact_s3_key: Option<String>,
    /// The n-th chain deployment `deploy_chain_atomic` made; a promotion's
    /// copy keeps its source's.
    pub created_index: Option<usize>,
    pub copied_from: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Chainlet {
    pub id: String,
    pub name: String,
    pub is_entrypoint: bool,
    pub model_id: String,
    pub deployment_id: String,
}

/// A promotion's state at some instant (`in_progress_promotion`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PromotionState {
    pub status: String,
    pub percent_traffic_to_new_version: u32,
    pub error_message: Option<String>,
    pub rolling_deploy: Option<bool>,
}

impl PromotionState {
    fn is_terminal(&self) -> bool {
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

/// Ids like the platform's: short, lower-case alphanumeric, no hyphens (the
/// inference host `model-{id}-{env}` relies on that).
#[derive(Debug)]
struct IdGen {
    state: u64,
    used: BTreeSet<String>,
}

impl IdGen {
    fn new(seed: u64) -> Self {
        Self {
            state: seed ^ 0x5eed_ba5e_7e11_0000,
            used: BTreeSet::new(),
        }
    }

    fn next(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        loop {
            // splitmix64 step
            self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let mut id = String::with_capacity(len);
            // A letter first keeps ids from looking like numbers in YAML/JSON.
            id.push(ALPHABET[10 + (z % 26) as usize] as char);
            z /= 26;
            for _ in 1..len {
                id.push(ALPHABET[(z % 36) as usize] as char);
                z /= 36;
            }
            if self.used.insert(id.clone()) {
                return id;
            }
        }
    }

    fn reserve(&mut self, id: &str) {
        self.used.insert(id.to_string());
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
        for d in &m.deployments {
            let dep_id = d.id.clone().unwrap_or_else(|| self.ids.next(7));
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
                created_at: now,
                steps: vec![(now, d.status.clone())],
                raw: false,
                is_draft: d.is_draft,
                labels: None,
                s3_key: None,
                config: json!({"model_name": m.name}),
                semver: "0.0.1".into(),
                instance_type_name: "1x2".into(),
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

    fn readiness_of(&self, target_id: &str) -> Readiness {
        if let Some(d) = self.deployment(target_id) {
            return d.readiness();
        }
        if let Some(cd) = self.chain_deployment(target_id) {
            let mut ready_at: Option<f64> = Some(f64::MIN);
            let mut failed_at: Option<(f64, String)> = None;
            let mut deactivated_at: Option<f64> = None;
            for c in &cd.chainlets {
                let r = self
                    .deployment(&c.deployment_id)
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

    fn object_ok(
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

    fn next_model_timeline(&mut self, model_name: &str) -> (Vec<(f64, String)>, usize) {
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
        if let Some(raw) = &req.raw_config_b64
            && base64::engine::general_purpose::STANDARD
                .decode(raw)
                .is_err()
        {
            return Err(ApiErr::invalid("raw_config is not valid base64"));
        }
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
            semver: format!("0.{}.0", count + 1),
            instance_type_name: "1x2".into(),
            deploy_timeout_minutes: req.deploy_timeout_minutes,
            chain_deployment_id: None,
            deactivated_at: None,
            created_index: Some(index),
            copied_from: None,
        });
        if kind == CreateKind::Draft {
            self.models[model_idx].development = Some(dep_id.clone());
        }
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

    fn new_model_env_names(&self) -> Vec<String> {
        let mut v = vec![PRODUCTION.to_string()];
        v.extend(self.scenario.new_model_environments.iter().cloned());
        v
    }

    fn resolve_team(&self, team_id: Option<&str>) -> Result<String, ApiErr> {
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

    fn add_model(&mut self, name: &str, team_id: &str, origin: &str, now: f64) -> usize {
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
                semver: format!("0.{}.0", count + 1),
                instance_type_name: "1x2".into(),
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
    use super::*;
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
