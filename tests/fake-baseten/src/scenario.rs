//! Scenario files: what the fake platform knows at start and how its
//! deployments behave over (scenario) time.
//!
//! A scenario is YAML; every key is optional. Times are scenario seconds
//! (see [`crate::clock`]); timelines are lists of `[seconds, STATUS]` pairs
//! measured from the moment the deployment was created, and before the first
//! step the status is the first step's status.
//!
//! ```yaml
//! name: scaled-to-zero-history
//! time_scale: 100          # scenario seconds per real second
//! manual_clock: false      # true: time stands still until a test moves it
//! api_key: fake-api-key
//! region: us-west-2        # bucket region
//! bucket: baseten-fake-uploads
//! teams: [{id: team0001, name: ml, default: true}]
//! models:                  # pre-existing models
//!   - name: existing-model
//!     team: ml
//!     environments: [production, staging]
//!     deployments: [{name: v1, status: ACTIVE, environment: production}]
//! chains: [{name: existing-chain, environments: [production, staging]}]
//!   # a chain's existing deployments (see lifecycle): deployments: [{id: cd1, status: ACTIVE, environment: production, created_at: -3600}]
//! new_model_environments: [staging]   # environments every new model gets besides production
//! deployments:             # model deployment status timelines (public statuses)
//!   default: [[0, BUILDING], [5, DEPLOYING], [10, ACTIVE]]
//!   sequence: []           # n-th created model deployment takes entry n
//!   by_model: {}           # by model name; wins over sequence and default
//! chainlets:               # chainlet timelines (RAW statuses), by display name
//!   default: [[0, BUILDING_MODEL], [10, MODEL_READY]]
//!   by_name: {}
//! promotions:              # environment promotion of a new deployment
//!   default: null          # null: RELEASING until the deployment is ready, then SUCCEEDED
//!   sequence: []
//!   by_model: {}           # by model or chain name, e.g. {steps: [[0, {status: RAMPING_UP, percent: 10}], [30, {status: SUCCEEDED, percent: 100}]]}
//! promote:                # promotions started with POST …/environments/{env}/promote
//!   default: null          # null: RELEASING until the promoted deployment is ready, then SUCCEEDED
//!   sequence: []           # n-th promote call (0-based, models and chains together) takes entry n
//!   by_model: {}           # by model or chain name; same step form as `promotions`
//!   redeploy_on_promotion: []   # environments with re-deploy on promotion on: every promotion there creates a new deployment
//!   instance_type_differs: []   # environments whose instance type differs from the deployments': a new deployment unless preserve_env_instance_type is false
//!   new_deployment_timeline: [[0, DEPLOYING], [5, LOADING_MODEL], [10, ACTIVE]]  # the new deployment's statuses (public)
//!   ramp_down_seconds: 5   # a cancel after traffic moved is RAMPING_DOWN this long, then CANCELED
//!   deactivate_previous: []     # environments whose promotion_cleanup_strategy is DEACTIVATE: the deployment a promotion replaces becomes INACTIVE once it succeeds
//! others:                  # another client at work on the same workspace (a second CI run), see below
//!   - {on: rest.promote, nth: 1, before: false, action: {promote: {deployment: v2other, environment: production}}}
//! omit_promotion_fields: false  # true: EnvironmentV1 without candidate_deployment/in_progress_promotion
//! activation_seconds: 2    # an activated deployment is DEPLOYING this long, then ACTIVE
//! activation_inactive_seconds: 0  # ... after still reading INACTIVE this long (waking)
//! deactivation_seconds: 2  # DEACTIVATING lasts this long, then INACTIVE
//! wake_seconds: 0          # a predict on a scaled-to-zero deployment waits this long
//! truss_validation: {success: true, warnings: [], errors: []}
//! predict: {response: null, by_model: {}, chain_response: null, by_deployment: [], stream: {tokens: 5, token: "tok", token_delay_ms: 0}}
//! traffic: {seed: 0, deployments: [], by_payload: [], metrics: true}   # see crate::traffic
//! logs: [{at: 1.0, message: "Building image", replica: null, model: null}]
//! faults: [{endpoint: rest.get_deployment, status: 429, retry_after: 1, after: 0, times: 1}]
//! require_upload: true     # create mutations need the uploaded object
//! secrets: [hf_access_token, {name: wandb_key, team: research}]   # the workspace's secrets; a bare name belongs to the first team (values are never served)
//! answer_edits: [{endpoint: rest.get_deployment, pointer: /status, value: READY}]   # test-only: change one field of a REST or GraphQL (`graphql.<root field>`, pointer from `/data`) answer before it is served (and checked); the platform's state keeps the real value
//! audit_log: {order: time, entries: []}        # see lifecycle: history a scenario writes, and its order
//! refuse_deletes: [{deployment: d1, status: 200}]   # see lifecycle
//! prepare_model_upload: {refuse: null, refuse_taken_names: true}   # see lifecycle
//! instance_types: [...]    # the catalogue and its prices, see lifecycle
//! deployment_settings: {default: {instance_type: "1x2", min_replica: 0, max_replica: 1}, by_model: {}}
//! ```
//!
//! # Promotions through the API
//!
//! `promote` scripts promotions a client starts itself (create-time
//! promotions keep following `promotions`). A promote call reuses the
//! deployment unless the platform's rules make a new one: the deployment
//! is current in (or being promoted into) another environment, the target
//! environment is listed in `redeploy_on_promotion`, or it is listed in
//! `instance_type_differs` and the request keeps `preserve_env_instance_type`
//! (the default). The new deployment gets a new id, the source's name,
//! `new_deployment_timeline` from the promote call on, and the source's
//! predict answers (below); the promote call answers with it.
//!
//! Cancelling while no traffic has moved ends the promotion CANCELED at
//! once; after traffic moved it is RAMPING_DOWN for `ramp_down_seconds`
//! (percent falling to 0), then CANCELED. A force cancel is CANCELED at
//! once. Either way the environment keeps (or gets back) the deployment it
//! served before.
//!
//! An environment's inference URL (`/production/…`, `/environments/{env}/…`
//! or the regional host `model-{id}-{env}`) is served by the candidate
//! deployment once a promotion in progress has moved at least half the
//! traffic, by the current deployment otherwise: deterministic, so a test
//! knows which one answered.
//!
//! # Another client
//!
//! `others` lists actions another client (a second CI run, a person in the
//! UI) takes on the same workspace, each applied when the fake handles the
//! `nth` (1-based, default 1) request to the endpoint `on` (`*`: any
//! request, so `nth` counts every request) — `before` it is
//! handled (default: after), so a test places it exactly between two of the
//! binary's requests. `POST /__fake/others` with one action as JSON (e.g.
//! `{"promote": {"deployment": "d1", "environment": "production"}}`)
//! applies it at once, on cue. Actions:
//!
//! - `promote: {deployment, environment, steps, by}`: promotes a model or chain
//!   deployment (by id) into an environment of its owner, as a promote call
//!   would (refused silently when the platform would refuse it); `steps`
//!   scripts the promotion like `promote.default` (without: it follows the
//!   deployment's readiness); `by` is who the audit log names
//!   ([`Actor`]: default the scenario's own key, as a second CI run with
//!   the same secret; `{source: UI, email: …}` a person, `{api_key_prefix: …}`
//!   another key);
//! - `delete: {deployment}`: deletes a model deployment (by id) as a
//!   `DELETE` would;
//! - `create_model: {name, deployment, deployment_name}`: creates a model of
//!   that name in the default team with one ACTIVE deployment (id
//!   `deployment`, named `deployment_name`, default `other-run`) serving
//!   production — another run's first deploy of the same new model.
//!
//! # Predict answers per deployment
//!
//! `predict.by_deployment` is a list of rules; the first that matches the
//! deployment that serves a request decides its answer (models and chains
//! alike; `by_model`, `response` and `chain_response` apply otherwise):
//!
//! ```yaml
//! predict:
//!   by_deployment:
//!     - created: 1          # the n-th deployment created by a create mutation (0-based; models count like
//!                           # `deployments.sequence`, chain deployments count on their own)
//!       name: v2            # the deployment's (or chain deployment's) name
//!       model: my-model     # model or chain name
//!       via: environment    # any (default) | environment (production, environments/{env}, regional) | deployment (deployment/{id}, development)
//!       status: 500         # HTTP status; 200 by default
//!       response: {error: "scripted failure"}   # body; {"error": …} for a failure status, the usual answer for 2xx
//! ```
//!
//! Every given selector must match; a deployment a promotion created
//! matches as its source does. `via: environment` with a failure status
//! makes a deployment pass its own smoke test and fail only behind the
//! environment.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;

mod lifecycle;
pub use lifecycle::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `[[seconds_after_creation, STATUS], ...]`.
pub type Timeline = Vec<(f64, String)>;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scenario {
    pub name: Option<String>,
    pub time_scale: f64,
    pub manual_clock: bool,
    pub api_key: String,
    pub region: String,
    pub bucket: String,
    pub workspace_name: String,
    pub user_email: String,
    pub teams: Vec<TeamSpec>,
    pub models: Vec<ModelSpec>,
    pub chains: Vec<ChainSpec>,
    pub new_model_environments: Vec<String>,
    pub deployments: Timelines,
    pub chainlets: ChainletTimelines,
    pub promotions: Promotions,
    pub promote: PromoteSpec,
    pub omit_promotion_fields: bool,
    pub others: Vec<OtherClient>,
    pub deactivation_seconds: f64,
    pub activation_seconds: f64,
    /// How long an activated deployment still reads INACTIVE (waking)
    /// before it is DEPLOYING.
    pub activation_inactive_seconds: f64,
    pub wake_seconds: f64,
    pub truss_validation: ValidationSpec,
    pub predict: PredictSpec,
    /// Latency, error rate, answers by payload and live metrics.
    pub traffic: crate::traffic::TrafficSpec,
    pub logs: Vec<LogLineSpec>,
    pub faults: Vec<Fault>,
    pub require_upload: bool,
    /// The workspace's secrets (`GET /v1/secrets`, `GET /v1/teams/{id}/secrets`).
    pub secrets: Vec<SecretSpec>,
    /// Changes made to REST and GraphQL answers before they are served:
    /// the way a test proves the schema check fails on an answer the API
    /// does not publish, or plays a proxy that rewrites answers.
    pub answer_edits: Vec<AnswerEdit>,
    /// Seeds the id generator so two runs of a scenario hand out the same ids.
    pub id_seed: u64,
    /// Audit history the scenario writes, and the order entries are served in.
    pub audit_log: AuditLogSpec,
    /// Deletes the platform refuses.
    pub refuse_deletes: Vec<RefusedDelete>,
    /// The push preflight's knobs.
    pub prepare_model_upload: PrepareSpec,
    /// The instance types and their prices.
    pub instance_types: Vec<InstanceTypeSpec>,
    /// Instance type and replica range of deployments, by model.
    pub deployment_settings: DeploymentSettings,
}

impl Default for Scenario {
    fn default() -> Self {
        Self {
            name: None,
            time_scale: 1.0,
            manual_clock: false,
            api_key: "fake-api-key".into(),
            region: "us-west-2".into(),
            bucket: "baseten-fake-uploads".into(),
            workspace_name: "fake-workspace".into(),
            user_email: "ci@example.com".into(),
            teams: vec![TeamSpec {
                id: None,
                name: "default".into(),
                default: true,
            }],
            models: Vec::new(),
            chains: Vec::new(),
            new_model_environments: Vec::new(),
            deployments: Timelines::default(),
            chainlets: ChainletTimelines::default(),
            promotions: Promotions::default(),
            promote: PromoteSpec::default(),
            omit_promotion_fields: false,
            others: Vec::new(),
            deactivation_seconds: 2.0,
            activation_seconds: 2.0,
            activation_inactive_seconds: 0.0,
            wake_seconds: 0.0,
            truss_validation: ValidationSpec::default(),
            predict: PredictSpec::default(),
            traffic: Default::default(),
            logs: Vec::new(),
            faults: Vec::new(),
            require_upload: true,
            secrets: Vec::new(),
            answer_edits: Vec::new(),
            id_seed: 0,
            audit_log: AuditLogSpec::default(),
            refuse_deletes: Vec::new(),
            prepare_model_upload: PrepareSpec::default(),
            instance_types: InstanceTypeSpec::catalogue(),
            deployment_settings: DeploymentSettings::default(),
        }
    }
}

impl Scenario {
    /// An empty document (or one of comments only) is the default scenario.
    pub fn from_yaml(text: &str) -> anyhow::Result<Self> {
        let is_empty = serde_yaml::from_str::<serde_yaml::Value>(text)
            .map(|v| v.is_null())
            .unwrap_or(false);
        if is_empty {
            return Ok(Self::default());
        }
        let s: Scenario = serde_yaml::from_str(text).context("while parsing the scenario YAML")?;
        s.validate()?;
        Ok(s)
    }

    pub fn from_file(path: impl AsRef<Path>) -> anyhow::Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("while reading scenario {}", path.display()))?;
        Self::from_yaml(&text).with_context(|| format!("in scenario {}", path.display()))
    }

    /// Time stands still until the test moves it.
    pub fn with_manual_clock(mut self) -> Self {
        self.manual_clock = true;
        self
    }

    pub fn with_time_scale(mut self, scale: f64) -> Self {
        self.time_scale = scale;
        self
    }

    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = key.into();
        self
    }

    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.faults.push(fault);
        self
    }

    /// Every model deployment follows `timeline`.
    pub fn with_default_timeline(mut self, timeline: &[(f64, &str)]) -> Self {
        self.deployments.default = timeline.iter().map(|(t, s)| (*t, s.to_string())).collect();
        self
    }

    /// Applies the `answer_edits` for `endpoint` to a REST or GraphQL answer.
    pub fn edit_answer(&self, endpoint: &str, answer: &mut Value) {
        for e in self.answer_edits.iter().filter(|e| e.endpoint == endpoint) {
            if let Some(v) = answer.pointer_mut(&e.pointer) {
                *v = e.value.clone();
            }
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.time_scale.is_finite() && self.time_scale > 0.0,
            "time_scale must be a positive number, got {}: use e.g. 1 (real time) or 100",
            self.time_scale
        );
        for s in &self.secrets {
            if let Some(team) = s.team() {
                anyhow::ensure!(
                    self.teams.iter().any(|t| t.name == team),
                    "secret {:?} names team {team:?}, which is not in teams",
                    s.name()
                );
            }
        }
        let timelines = std::iter::once(&self.deployments.default)
            .chain(&self.deployments.sequence)
            .chain(self.deployments.by_model.values())
            .chain(std::iter::once(&self.promote.new_deployment_timeline))
            .chain(std::iter::once(&self.chainlets.default))
            .chain(self.chainlets.by_name.values());
        for t in timelines {
            anyhow::ensure!(
                !t.is_empty(),
                "a status timeline is empty: give at least one [seconds, STATUS] step"
            );
            anyhow::ensure!(
                t.windows(2).all(|w| w[0].0 <= w[1].0),
                "timeline steps must be in time order, got {t:?}"
            );
        }
        anyhow::ensure!(
            self.promote.ramp_down_seconds.is_finite() && self.promote.ramp_down_seconds >= 0.0,
            "promote.ramp_down_seconds must be 0 or more, got {}",
            self.promote.ramp_down_seconds
        );
        lifecycle::validate(self)?;
        for rule in &self.predict.by_deployment {
            anyhow::ensure!(
                (100..=599).contains(&rule.status),
                "predict.by_deployment status must be an HTTP status (100..=599), got {}",
                rule.status
            );
        }
        Ok(())
    }
}

/// A secret: a bare name (the first team's) or `{name, team}`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum SecretSpec {
    Name(String),
    InTeam { name: String, team: String },
}

impl SecretSpec {
    pub fn name(&self) -> &str {
        match self {
            SecretSpec::Name(n) | SecretSpec::InTeam { name: n, .. } => n,
        }
    }

    /// The team's name; `None` for the first team.
    pub fn team(&self) -> Option<&str> {
        match self {
            SecretSpec::Name(_) => None,
            SecretSpec::InTeam { team, .. } => Some(team),
        }
    }
}

/// One change to a REST answer: `value` replaces what `pointer` (a JSON
/// pointer) names in every answer of `endpoint` (e.g. `rest.get_deployment`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerEdit {
    pub endpoint: String,
    pub pointer: String,
    pub value: Value,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TeamSpec {
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub default: bool,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    /// Team name; the default team when absent.
    #[serde(default)]
    pub team: Option<String>,
    /// Environments besides `production` (which always exists).
    #[serde(default)]
    pub environments: Vec<String>,
    #[serde(default)]
    pub deployments: Vec<ExistingDeploymentSpec>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExistingDeploymentSpec {
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(default = "active")]
    pub status: String,
    /// Environment this deployment is the current deployment of.
    #[serde(default)]
    pub environment: Option<String>,
    #[serde(default)]
    pub is_draft: bool,
    /// Labels another client created it with (`truss push --labels`).
    #[serde(default)]
    pub labels: Option<Value>,
    /// The `config.yaml` text the platform keeps for it (`GET …/config?
    /// output_format=raw`); none by default.
    #[serde(default)]
    pub raw_config: Option<String>,
    /// When it was created, in scenario seconds (negative: before the run;
    /// default 0).
    #[serde(default)]
    pub created_at: f64,
    /// Instance type and replica range (default: `deployment_settings` for
    /// the model).
    #[serde(default)]
    pub settings: Option<DeploymentSetting>,
}

fn active() -> String {
    "ACTIVE".into()
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ChainSpec {
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub team: Option<String>,
    #[serde(default)]
    pub environments: Vec<String>,
    /// Chain deployments the chain has before the run.
    #[serde(default)]
    pub deployments: Vec<ChainDeploymentSpec>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Timelines {
    pub default: Timeline,
    pub sequence: Vec<Timeline>,
    pub by_model: BTreeMap<String, Timeline>,
}

impl Default for Timelines {
    fn default() -> Self {
        Self {
            default: vec![
                (0.0, "BUILDING".into()),
                (5.0, "DEPLOYING".into()),
                (10.0, "ACTIVE".into()),
            ],
            sequence: Vec::new(),
            by_model: BTreeMap::new(),
        }
    }
}

impl Timelines {
    /// The timeline of the `index`-th created model deployment of `model`.
    pub fn pick(&self, model: &str, index: usize) -> Timeline {
        self.by_model
            .get(model)
            .or_else(|| self.sequence.get(index))
            .unwrap_or(&self.default)
            .clone()
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChainletTimelines {
    pub default: Timeline,
    pub by_name: BTreeMap<String, Timeline>,
}

impl Default for ChainletTimelines {
    fn default() -> Self {
        Self {
            default: vec![
                (0.0, "BUILDING_MODEL".into()),
                (5.0, "DEPLOYING_MODEL".into()),
                (10.0, "MODEL_READY".into()),
            ],
            by_name: BTreeMap::new(),
        }
    }
}

impl ChainletTimelines {
    pub fn pick(&self, display_name: &str) -> Timeline {
        self.by_name
            .get(display_name)
            .unwrap_or(&self.default)
            .clone()
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Promotions {
    pub default: Option<PromotionScript>,
    pub sequence: Vec<PromotionScript>,
    pub by_model: BTreeMap<String, PromotionScript>,
}

impl Promotions {
    /// `None`: the promotion follows the deployment (RELEASING until ready).
    pub fn pick(&self, model: &str, index: usize) -> Option<PromotionScript> {
        self.by_model
            .get(model)
            .or_else(|| self.sequence.get(index))
            .or(self.default.as_ref())
            .cloned()
    }
}

/// How promotions started through the promote endpoint behave.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromoteSpec {
    pub default: Option<PromotionScript>,
    pub sequence: Vec<PromotionScript>,
    pub by_model: BTreeMap<String, PromotionScript>,
    /// Environments where re-deploy on promotion is on.
    pub redeploy_on_promotion: Vec<String>,
    /// Environments whose instance type differs from every deployment's.
    pub instance_type_differs: Vec<String>,
    /// Public statuses of a deployment a promotion creates, from the
    /// promote call on.
    pub new_deployment_timeline: Timeline,
    pub ramp_down_seconds: f64,
    /// Environments whose promotion cleanup strategy is DEACTIVATE.
    pub deactivate_previous: Vec<String>,
}

impl Default for PromoteSpec {
    fn default() -> Self {
        Self {
            default: None,
            sequence: Vec::new(),
            by_model: BTreeMap::new(),
            redeploy_on_promotion: Vec::new(),
            instance_type_differs: Vec::new(),
            new_deployment_timeline: vec![
                (0.0, "DEPLOYING".into()),
                (5.0, "LOADING_MODEL".into()),
                (10.0, "ACTIVE".into()),
            ],
            ramp_down_seconds: 5.0,
            deactivate_previous: Vec::new(),
        }
    }
}

impl PromoteSpec {
    /// The script of the `index`-th promote call, for a model or chain
    /// named `name`; `None` follows the promoted deployment's readiness.
    pub fn pick(&self, name: &str, index: usize) -> Option<PromotionScript> {
        self.by_model
            .get(name)
            .or_else(|| self.sequence.get(index))
            .or(self.default.as_ref())
            .cloned()
    }
}

/// One action of another client, at the `nth` request to `on`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OtherClient {
    /// Endpoint name, as in the request log (`rest.promote`).
    pub on: String,
    #[serde(default = "first")]
    pub nth: u32,
    /// Apply before the request is handled (default: after).
    #[serde(default)]
    pub before: bool,
    /// `{promote: {...}}` or `{create_model: {...}}`.
    #[serde(with = "serde_yaml::with::singleton_map")]
    pub action: OtherAction,
}

fn first() -> u32 {
    1
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum OtherAction {
    Promote {
        deployment: String,
        environment: String,
        #[serde(default)]
        steps: Option<Vec<(f64, PromotionStep)>>,
        /// Who the audit log names.
        #[serde(default)]
        by: Actor,
    },
    Delete {
        deployment: String,
        #[serde(default)]
        by: Actor,
    },
    CreateModel {
        name: String,
        deployment: String,
        /// The deployment's name (`other-run` by default).
        #[serde(default)]
        deployment_name: Option<String>,
    },
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PromotionScript {
    /// `[[seconds_after_creation, {status, percent}], ...]`.
    pub steps: Vec<(f64, PromotionStep)>,
    #[serde(default)]
    pub error_message: Option<String>,
    #[serde(default)]
    pub rolling_deploy: Option<bool>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PromotionStep {
    pub status: String,
    #[serde(default)]
    pub percent: u32,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValidationSpec {
    pub success: bool,
    pub warnings: Vec<String>,
    pub errors: Vec<String>,
}

impl Default for ValidationSpec {
    fn default() -> Self {
        Self {
            success: true,
            warnings: Vec::new(),
            errors: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PredictSpec {
    /// Body of every successful predict; `null` echoes `{"echo": <payload>}`.
    pub response: Option<Value>,
    /// Per model name.
    pub by_model: BTreeMap<String, Value>,
    /// Body of every chain `run_remote`; `null` echoes.
    pub chain_response: Option<Value>,
    /// Answers by the deployment that serves the request; first match wins.
    pub by_deployment: Vec<DeploymentPredict>,
    pub stream: StreamSpec,
}

/// Through which kind of URL a request reached a deployment.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    #[default]
    Any,
    /// `/production/…`, `/environments/{env}/…`, or the regional host.
    Environment,
    /// `/deployment/{id}/…` or `/development/…`.
    Deployment,
}

/// One per-deployment predict rule; every selector given must match.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeploymentPredict {
    /// The n-th deployment created by a create mutation (0-based).
    #[serde(default)]
    pub created: Option<usize>,
    /// The deployment's (or chain deployment's) name.
    #[serde(default)]
    pub name: Option<String>,
    /// Model or chain name.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub via: Via,
    #[serde(default = "ok_status")]
    pub status: u16,
    #[serde(default)]
    pub response: Option<Value>,
}

fn ok_status() -> u16 {
    200
}

/// What a served deployment is, for matching [`DeploymentPredict`] rules.
#[derive(Clone, Copy, Debug)]
pub struct Served<'a> {
    pub created: Option<usize>,
    pub name: Option<&'a str>,
    pub model: &'a str,
    pub via_environment: bool,
}

impl DeploymentPredict {
    pub fn matches(&self, d: &Served<'_>) -> bool {
        let via = match self.via {
            Via::Any => true,
            Via::Environment => d.via_environment,
            Via::Deployment => !d.via_environment,
        };
        via && self.created.is_none_or(|n| d.created == Some(n))
            && self.name.as_deref().is_none_or(|n| d.name == Some(n))
            && self.model.as_deref().is_none_or(|m| m == d.model)
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamSpec {
    pub tokens: u32,
    pub token: String,
    /// Real milliseconds between two chunks.
    pub token_delay_ms: u64,
}

impl Default for StreamSpec {
    fn default() -> Self {
        Self {
            tokens: 5,
            token: "tok".into(),
            token_delay_ms: 0,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LogLineSpec {
    /// Seconds after the deployment's creation.
    pub at: f64,
    pub message: String,
    #[serde(default)]
    pub replica: Option<String>,
    #[serde(default)]
    pub level: Option<String>,
    /// Only deployments of this model; all when absent.
    #[serde(default)]
    pub model: Option<String>,
}

/// One scripted failure, applied before authentication as a proxy or load
/// balancer in front of the platform would.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Fault {
    /// Endpoint name (`rest.get_deployment`), a prefix wildcard
    /// (`graphql.*`), or `*`.
    pub endpoint: String,
    /// Skip this many matching requests first.
    pub after: u32,
    /// Fire on this many matching requests; 0 means every one from then on
    /// (the YAML default; the constructors below set 1).
    pub times: u32,
    /// Answer with this HTTP status instead of the real answer.
    pub status: Option<u16>,
    /// `Retry-After` seconds to send with `status`.
    pub retry_after: Option<u32>,
    /// Body to send with `status` (JSON); a generic error body otherwise.
    pub body: Option<Value>,
    /// A plain-text body instead (wins over `body`): what a server that
    /// does not have the endpoint at all answers, not the platform's error.
    pub text: Option<String>,
    /// Real milliseconds to wait before answering (or failing).
    pub delay_ms: u64,
    /// Close the connection without any answer.
    pub drop: bool,
}

impl Fault {
    /// `status` once, with `Retry-After` when given.
    pub fn status(endpoint: &str, status: u16) -> Self {
        Self {
            endpoint: endpoint.into(),
            times: 1,
            status: Some(status),
            ..Self::default()
        }
    }

    /// Close the connection once.
    pub fn drop_connection(endpoint: &str) -> Self {
        Self {
            endpoint: endpoint.into(),
            times: 1,
            drop: true,
            ..Self::default()
        }
    }

    pub fn retry_after(mut self, secs: u32) -> Self {
        self.retry_after = Some(secs);
        self
    }

    pub fn after(mut self, n: u32) -> Self {
        self.after = n;
        self
    }

    pub fn times(mut self, n: u32) -> Self {
        self.times = n;
        self
    }

    pub fn matches_endpoint(&self, endpoint: &str) -> bool {
        endpoint_matches(&self.endpoint, endpoint)
    }

    /// Whether the `n`-th (0-based) matching request is hit.
    pub fn fires_on(&self, n: u32) -> bool {
        n >= self.after && (self.times == 0 || n < self.after.saturating_add(self.times))
    }
}

/// `pattern` is an exact name, `prefix.*`, or `*`.
pub fn endpoint_matches(pattern: &str, endpoint: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.strip_suffix('*') {
        Some(prefix) => endpoint.starts_with(prefix),
        None => pattern == endpoint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_patterns() {
        for (pattern, endpoint, want) in [
            ("rest.get_deployment", "rest.get_deployment", true),
            ("rest.get_deployment", "rest.get_deployments", false),
            ("rest.*", "rest.get_deployment", true),
            ("rest.*", "graphql.teams", false),
            ("*", "s3.upload_part", true),
        ] {
            assert_eq!(
                endpoint_matches(pattern, endpoint),
                want,
                "{pattern} {endpoint}"
            );
        }
    }

    #[test]
    fn fault_window_counts_after_and_times() {
        let f = Fault::status("x", 500).after(2).times(2);
        let fired: Vec<bool> = (0..6).map(|n| f.fires_on(n)).collect();
        assert_eq!(fired, [false, false, true, true, false, false]);
        let forever = Fault::status("x", 500).times(0);
        assert!((0..100).all(|n| forever.fires_on(n)));
    }

    #[test]
    fn timelines_pick_by_model_then_sequence_then_default() {
        let t = Timelines {
            default: vec![(0.0, "ACTIVE".into())],
            sequence: vec![vec![(0.0, "BUILDING".into())]],
            by_model: [("special".to_string(), vec![(0.0, "FAILED".into())])].into(),
        };
        assert_eq!(t.pick("special", 0)[0].1, "FAILED");
        assert_eq!(t.pick("other", 0)[0].1, "BUILDING");
        assert_eq!(t.pick("other", 1)[0].1, "ACTIVE");
    }

    #[test]
    fn promote_and_per_deployment_predict_keys() {
        let s = Scenario::from_yaml(
            "promote: {redeploy_on_promotion: [production], ramp_down_seconds: 0}\n\
             predict: {by_deployment: [{created: 1, via: environment, status: 500}]}",
        )
        .unwrap();
        assert_eq!(s.promote.redeploy_on_promotion, ["production"]);
        assert_eq!(
            s.promote.new_deployment_timeline.last().unwrap().1,
            "ACTIVE"
        );
        let rule = &s.predict.by_deployment[0];
        let served = |created, via_environment| Served {
            created,
            name: Some("v2"),
            model: "m",
            via_environment,
        };
        assert!(rule.matches(&served(Some(1), true)));
        assert!(!rule.matches(&served(Some(1), false)));
        assert!(!rule.matches(&served(Some(0), true)));
        assert!(!rule.matches(&served(None, true)));
        for bad in [
            "promote: {ramp_down_seconds: -1}",
            "promote: {new_deployment_timeline: []}",
            "promote: {redeploy: [production]}",
            "predict: {by_deployment: [{status: 42}]}",
            "predict: {by_deployment: [{via: sideways}]}",
        ] {
            assert!(Scenario::from_yaml(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn yaml_rejects_unknown_keys_and_bad_timelines() {
        assert!(Scenario::from_yaml("tim_scale: 3").is_err());
        assert!(Scenario::from_yaml("deployments: {default: [[5, A], [1, B]]}").is_err());
        let s = Scenario::from_yaml("deployments: {default: [[0.6, BUILDING], [631, ACTIVE]]}")
            .unwrap();
        assert_eq!(s.deployments.default[1], (631.0, "ACTIVE".to_string()));
        assert_eq!(s.api_key, "fake-api-key");
        assert_eq!(
            Scenario::from_yaml("# nothing\n").unwrap().api_key,
            "fake-api-key"
        );
    }
}
