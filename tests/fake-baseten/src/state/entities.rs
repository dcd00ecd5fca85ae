//! What the platform holds: teams, models and their environments,
//! deployments and their status timelines, chains, chain deployments and
//! chainlets, and the plain values the promotion endpoints exchange.

use serde_json::Value;

use crate::scenario::PromotionScript;
use crate::status;

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
    pub(super) fn new(name: &str, now: f64) -> Self {
        Self {
            name: name.to_string(),
            created_at: now,
            initial_current: None,
            promotions: Vec::new(),
        }
    }
}

/// One model event the platform's audit log records (`AuditLogEntryV1`):
/// creates, promotions, activations, deactivations and deletes (which
/// action writes which is listed in `GUESSES.md`), and entries a scenario
/// writes (`audit_log.entries`).
#[derive(Clone, Debug)]
pub struct AuditEvent {
    pub at: f64,
    /// One of [`crate::scenario::MODEL_EVENT_TYPES`].
    pub event_type: String,
    pub model_id: String,
    pub deployment_id: String,
    /// The deployment's name when the event was recorded (kept after a delete).
    pub deployment_name: String,
    /// Who acted.
    pub by: crate::scenario::Actor,
    /// The environment deployed or promoted into, if any.
    pub environment: Option<String>,
    /// For `MODEL_DEPLOYED`: a published (not development) deployment.
    pub publish: bool,
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
    /// The raw `config.yaml` text the create sent (`raw_config`, decoded),
    /// when it sent one that is UTF-8 text.
    pub raw_config: Option<String>,
    pub semver: String,
    pub instance_type_name: String,
    /// The autoscaling range (`AutoscalingSettingsV1`) once deployed.
    pub min_replica: i64,
    pub max_replica: i64,
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

    pub(super) fn readiness(&self) -> Readiness {
        let mut r = Readiness::default();
        for (i, (t, s)) in self.steps.iter().enumerate() {
            let p = status::as_public(s);
            // INACTIVE with a later step is a deployment waking after an
            // activate, not one that failed.
            if p == "INACTIVE" && i + 1 < self.steps.len() {
                continue;
            }
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
    pub(super) fn rewrite_from(&mut self, at: f64, steps: &[(f64, &str)]) {
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
