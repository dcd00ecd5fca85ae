//! Scenario keys for the lifecycle endpoints: who the audit log says acted,
//! audit entries a scenario writes itself, refused deletes, the push
//! preflight (`POST /v1/prepare_model_upload`) and the instance-type
//! catalogue with its prices.
//!
//! ```yaml
//! audit_log:
//!   order: time            # time (documented: by when the action occurred) | recorded (in the order written: a scripted entry with an earlier `at` shows out of order)
//!   entries:               # history before the run (or at set times), e.g. promotions made by hand
//!     - {at: -7200, event_type: MODEL_DEPLOYMENT_PROMOTED, model: m, deployment: d1, deployment_name: v1, environment: production, by: {source: UI, email: ann@example.com}}
//!     - {at: -3600, event_type: CHAIN_DEPLOYMENT_PROMOTED, model: my-chain, deployment: cd1, environment: production}   # a CHAIN_ event names a chain in `model`
//! chains:                  # a chain's existing deployments (in `chains:`)
//!   - {name: my-chain, deployments: [{id: cd1, status: ACTIVE, environment: production, created_at: -3600}]}
//! refuse_deletes:          # DELETE …/deployments/{id} the platform refuses
//!   - {deployment: d1, status: 200}   # 200: answered `deleted: false` (default); 4xx: the platform's error body
//! prepare_model_upload:
//!   refuse: {status: 400, message: "…"}   # every preflight that passed the rules is refused so
//!   refuse_taken_names: true              # a deployment name the model already has is refused
//! instance_types:          # GET /v1/instance_types and /v1/instance_type_prices (default: see InstanceTypeSpec::catalogue)
//!   - {id: "A10Gx4x16", name: "A10Gx4x16", memory_limit_mib: 16384, millicpu_limit: 4000, gpu_count: 1, gpu_type: A10G, gpu_memory_limit_mib: 24576, price: 0.02012}
//! deployment_settings:     # what a deployment runs on: created ones by model name, else default
//!   default: {instance_type: "1x2", min_replica: 0, max_replica: 1}
//!   by_model: {my-model: {instance_type: "A10Gx4x16", min_replica: 1, max_replica: 3}}
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Scenario;

/// Who did something, as the audit log records it (`source`, `actor`).
/// `api_key_prefix` makes the actor an API key; `email` a user; neither:
/// the key the scenario serves (`api_key`) for source `API`, a user
/// without an email for `UI`, the platform for `SYSTEM`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Actor {
    /// `UI`, `API`, `MCP`, `SYSTEM` or `OTHER` (`AuditLogSourceV1`); `API` when absent.
    pub source: Option<String>,
    pub api_key_prefix: Option<String>,
    pub email: Option<String>,
}

impl Actor {
    /// The platform itself (a cleanup strategy's deactivation).
    pub fn system() -> Self {
        Self {
            source: Some("SYSTEM".into()),
            ..Self::default()
        }
    }

    pub fn source(&self) -> &str {
        self.source.as_deref().unwrap_or("API")
    }

    /// `AuditLogActorV1`; `own_prefix` is the prefix of the scenario's key.
    pub fn actor_v1(&self, own_prefix: &str) -> Value {
        let (kind, prefix) = match (&self.api_key_prefix, &self.email, self.source()) {
            (Some(p), _, _) => ("API_KEY", Some(p.clone())),
            (None, Some(_), _) => ("USER", None),
            (None, None, "SYSTEM") => ("BASETEN_SYSTEM", None),
            (None, None, "UI") => ("USER", None),
            (None, None, _) => ("API_KEY", Some(own_prefix.to_string())),
        };
        json!({
            "type": kind,
            "email": self.email,
            "api_key_prefix": prefix,
            "api_key_name": null,
        })
    }
}

/// The prefix the audit log shows for an API key: the text before its
/// first `.` (Baseten keys are `<prefix>.<secret>`), else its first 8
/// characters.
pub fn api_key_prefix(key: &str) -> String {
    match key.split_once('.') {
        Some((prefix, _)) => prefix.to_string(),
        None => key.chars().take(8).collect(),
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AuditOrder {
    /// By when the action occurred (the documented order).
    #[default]
    Time,
    /// In the order the entries were written.
    Recorded,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditLogSpec {
    pub order: AuditOrder,
    pub entries: Vec<AuditEntrySpec>,
}

/// An audit entry the scenario writes: another client's past action.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AuditEntrySpec {
    /// Scenario seconds (negative: before the run).
    pub at: f64,
    /// One of [`MODEL_EVENT_TYPES`].
    pub event_type: String,
    /// Model name; a chain's name for a `CHAIN_` event.
    pub model: String,
    /// Deployment id; need not exist (a deleted deployment).
    pub deployment: String,
    /// Defaults to the deployment's name when it exists, else its id.
    #[serde(default)]
    pub deployment_name: Option<String>,
    #[serde(default)]
    pub environment: Option<String>,
    #[serde(default)]
    pub by: Actor,
}

/// The audit event types the fake writes or lets a scenario write.
pub const MODEL_EVENT_TYPES: &[&str] = &[
    "MODEL_DEPLOYED",
    "MODEL_DEPLOYMENT_PROMOTED",
    "MODEL_DEPLOYMENT_ACTIVATED",
    "MODEL_DEPLOYMENT_DEACTIVATED",
    "MODEL_DEPLOYMENT_DELETED",
    // Only as scripted history: the fake has no endpoint that changes these.
    "MODEL_DEPLOYMENT_AUTOSCALING_SETTINGS_CHANGED",
    "MODEL_DEPLOYMENT_INSTANCE_TYPE_CHANGED",
];

/// The chain events a scenario may write (`model` then names a chain).
pub const CHAIN_EVENT_TYPES: &[&str] = &["CHAIN_DEPLOYED", "CHAIN_DEPLOYMENT_PROMOTED"];

/// Whether an audit event is a chain's (its owner id is a chain's).
pub fn is_chain_event(event_type: &str) -> bool {
    event_type.starts_with("CHAIN_")
}

/// A chain deployment a scenario's chain has before the run: one
/// chainlet (`entrypoint`) whose model deployment is in `status`, so the
/// chain deployment's status, derived from its chainlets as for any
/// chain deployment, is `status`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ChainDeploymentSpec {
    #[serde(default)]
    pub id: Option<String>,
    /// A public status (`DeploymentStatusV1`).
    #[serde(default = "active_status")]
    pub status: String,
    /// Environment this chain deployment is the current deployment of.
    #[serde(default)]
    pub environment: Option<String>,
    /// Scenario seconds (negative: before the run; default 0).
    #[serde(default)]
    pub created_at: f64,
}

fn active_status() -> String {
    "ACTIVE".into()
}

/// One refused `DELETE …/deployments/{id}`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RefusedDelete {
    /// Deployment id or name.
    pub deployment: String,
    /// 200: the tombstone says `deleted: false`; a 4xx: the platform's
    /// error body with that status.
    #[serde(default = "ok")]
    pub status: u16,
}

fn ok() -> u16 {
    200
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrepareSpec {
    /// Refuses every preflight that passed the fake's rules.
    pub refuse: Option<PrepareRefusal>,
    /// A deployment name the model already has is refused.
    pub refuse_taken_names: bool,
}

impl Default for PrepareSpec {
    fn default() -> Self {
        Self {
            refuse: None,
            refuse_taken_names: true,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PrepareRefusal {
    #[serde(default = "bad_request")]
    pub status: u16,
    pub message: String,
}

fn bad_request() -> u16 {
    400
}

/// One instance type of the catalogue, with its price.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceTypeSpec {
    pub id: String,
    pub name: String,
    pub memory_limit_mib: i64,
    pub millicpu_limit: i64,
    #[serde(default)]
    pub gpu_count: i64,
    #[serde(default)]
    pub gpu_type: Option<String>,
    #[serde(default)]
    pub gpu_memory_limit_mib: Option<i64>,
    /// USD per minute, served as given (any JSON: a hostile price is a
    /// negative number or a string). Absent: the type is missing from the
    /// price list.
    #[serde(default)]
    pub price: Option<Value>,
    /// The name the price list gives this type (default: `name`): another
    /// type's name makes a price that matches the wrong type.
    #[serde(default)]
    pub price_name: Option<String>,
}

impl InstanceTypeSpec {
    /// The default catalogue: the CPU type every deployment runs on unless
    /// scripted, and one GPU type. Prices are illustrative, not Baseten's.
    pub fn catalogue() -> Vec<Self> {
        vec![
            Self {
                id: "1x2".into(),
                name: "1x2".into(),
                memory_limit_mib: 2048,
                millicpu_limit: 1000,
                gpu_count: 0,
                gpu_type: None,
                gpu_memory_limit_mib: None,
                price: Some(json!(0.00058)),
                price_name: None,
            },
            Self {
                id: "A10Gx4x16".into(),
                name: "A10Gx4x16".into(),
                memory_limit_mib: 16384,
                millicpu_limit: 4000,
                gpu_count: 1,
                gpu_type: Some("A10G".into()),
                gpu_memory_limit_mib: Some(24576),
                price: Some(json!(0.02012)),
                price_name: None,
            },
        ]
    }

    /// `InstanceTypeV1`, under `name`.
    pub fn v1(&self, name: &str) -> Value {
        json!({
            "id": self.id,
            "name": name,
            "memory_limit_mib": self.memory_limit_mib,
            "millicpu_limit": self.millicpu_limit,
            "gpu_count": self.gpu_count,
            "gpu_type": self.gpu_type,
            "gpu_memory_limit_mib": self.gpu_memory_limit_mib,
        })
    }
}

/// What a deployment runs on and how far it scales.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DeploymentSetting {
    pub instance_type: String,
    pub min_replica: i64,
    pub max_replica: i64,
}

impl Default for DeploymentSetting {
    fn default() -> Self {
        Self {
            instance_type: "1x2".into(),
            min_replica: 0,
            max_replica: 1,
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeploymentSettings {
    pub default: DeploymentSetting,
    /// By model name; wins over `default`.
    pub by_model: BTreeMap<String, DeploymentSetting>,
}

impl DeploymentSettings {
    pub fn pick(&self, model: &str) -> DeploymentSetting {
        self.by_model.get(model).unwrap_or(&self.default).clone()
    }
}

/// The lifecycle keys' own checks, run with the scenario's.
pub(super) fn validate(s: &Scenario) -> anyhow::Result<()> {
    for e in &s.audit_log.entries {
        anyhow::ensure!(
            MODEL_EVENT_TYPES.contains(&e.event_type.as_str())
                || CHAIN_EVENT_TYPES.contains(&e.event_type.as_str()),
            "audit_log entry event_type must be one of {MODEL_EVENT_TYPES:?} or {CHAIN_EVENT_TYPES:?}, got {:?}",
            e.event_type
        );
        if is_chain_event(&e.event_type) {
            anyhow::ensure!(
                s.chains.iter().any(|c| c.name == e.model),
                "audit_log entry {} names chain {:?}, which is not in chains",
                e.event_type,
                e.model
            );
        } else {
            anyhow::ensure!(
                s.models.iter().any(|m| m.name == e.model),
                "audit_log entry names model {:?}, which is not in models",
                e.model
            );
        }
    }
    for r in &s.refuse_deletes {
        anyhow::ensure!(
            r.status == 200 || (400..=599).contains(&r.status),
            "refuse_deletes status must be 200 (deleted: false) or an error status, got {}",
            r.status
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_prefixes_and_actors() {
        assert_eq!(api_key_prefix("abcd1234.secret"), "abcd1234");
        assert_eq!(api_key_prefix("fake-api-key"), "fake-api");
        let own = Actor::default().actor_v1("abcd1234");
        assert_eq!(
            (&own["type"], &own["api_key_prefix"]),
            (&json!("API_KEY"), &json!("abcd1234"))
        );
        assert_eq!(Actor::system().actor_v1("x")["type"], "BASETEN_SYSTEM");
        let ui = Actor {
            source: Some("UI".into()),
            ..Actor::default()
        };
        assert_eq!(
            (ui.source(), &ui.actor_v1("x")["type"]),
            ("UI", &json!("USER"))
        );
    }

    #[test]
    fn lifecycle_keys_are_checked() {
        let ok = "models: [{name: m}]\naudit_log: {order: recorded, entries: [{at: -5, event_type: MODEL_DEPLOYMENT_PROMOTED, model: m, deployment: d0}]}\nrefuse_deletes: [{deployment: d1}, {deployment: d2, status: 403}]";
        let s = Scenario::from_yaml(ok).unwrap();
        assert_eq!(s.audit_log.order, AuditOrder::Recorded);
        assert_eq!(s.refuse_deletes[0].status, 200);
        for bad in [
            "models: [{name: m}]\naudit_log: {entries: [{at: 0, event_type: MODEL_RENAMED, model: m, deployment: d}]}",
            "audit_log: {entries: [{at: 0, event_type: MODEL_DEPLOYED, model: nope, deployment: d}]}",
            "refuse_deletes: [{deployment: d, status: 302}]",
            "audit_log: {order: random}",
            "instance_types: [{id: x, name: x}]",
            "deployment_settings: {default: {instance_type: x, replicas: 3}}",
        ] {
            assert!(Scenario::from_yaml(bad).is_err(), "{bad}");
        }
    }
}
