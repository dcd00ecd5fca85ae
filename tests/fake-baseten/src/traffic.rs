//! How deployments answer inference traffic, beyond yes or no: each
//! deployment's latency distribution and error rate (drawn from a fixed
//! seed, so a run is repeatable), answers chosen by the payload, and the
//! live numbers its environment's metrics endpoint reports.
//!
//! ```yaml
//! traffic:
//!   seed: 7                  # the k-th request to a deployment always draws the same latency
//!   deployments:             # first match wins; selectors as predict.by_deployment
//!     - name: v1             # the serving deployment
//!       median_ms: 4         # log-normal: median_ms · exp(spread · z), z standard normal
//!       spread: 0.1
//!     - created: 0
//!       median_ms: 8
//!       error_rate: 0.0      # share of requests answered 500
//!       live: {error_rate: 0.3, median_ms: 8, spread: 0.1}   # real users' traffic, for the metrics endpoint
//!       hang_every: 20       # every 20th request to it (k = 19, 39, …) gets no answer for 10 minutes
//!       reject: 422          # every request answered with this status (an old model that does not know a payload)
//!       reject_when: {task: summarize}   # only requests whose payload contains this are rejected
//!   by_payload:              # first rule whose `when` the payload contains (nested; arrays by index)
//!     - {when: {task: classify}, status: 200, response: {labels: [{name: positive, score: 0.9}]}}
//!     - {when: {task: sum}, every: 10, response: {}}   # only the 10th, 20th, … match per deployment; else the next rule
//!   metrics: true            # false: the environment metrics endpoint answers 404, as an API without it
//!   metrics_values:          # the n-th metrics read answers the n-th entry's `values` (the last repeats)
//!     - [[1], [900, 0, 100], [0.01, 0.02, 0.03, 0.04, 0.02]]
//! ```
//!
//! Latencies are real milliseconds (the scenario clock does not scale
//! them): keep them small in tests. A deployment a promotion created
//! behaves as its source.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::scenario::Served;
use crate::state::Platform;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrafficSpec {
    pub seed: u64,
    pub deployments: Vec<DeploymentTraffic>,
    pub by_payload: Vec<PayloadAnswer>,
    pub metrics: bool,
    /// Scripted `values` of the metrics answers, read by read (each must
    /// still be numbers or nulls, as published): counters that go down,
    /// negative ones, whatever a hostile or broken metrics system says.
    pub metrics_values: Vec<Value>,
}

impl Default for TrafficSpec {
    fn default() -> Self {
        Self {
            seed: 0,
            deployments: Vec::new(),
            by_payload: Vec::new(),
            metrics: true,
            metrics_values: Vec::new(),
        }
    }
}

/// A latency distribution and an error rate.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Behaviour {
    pub median_ms: f64,
    /// Standard deviation of the latency's logarithm.
    pub spread: f64,
    pub error_rate: f64,
}

impl Behaviour {
    /// The `q` quantile (0..1) of the latency, in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        self.median_ms * (self.spread * normal_quantile(q)).exp()
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeploymentTraffic {
    #[serde(default)]
    pub created: Option<usize>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(flatten)]
    pub synthetic: Behaviour,
    /// What real users see, when it differs from the requests tests send.
    #[serde(default)]
    pub live: Option<Behaviour>,
    /// Every n-th request (the k-th with k % n = n − 1) hangs for
    /// [`HANG_SECS`]: the client's timeout ends it.
    #[serde(default)]
    pub hang_every: Option<u64>,
    /// Every request is answered with this status.
    #[serde(default)]
    pub reject: Option<u16>,
    /// Only the requests whose payload contains this are rejected (an old
    /// model that does not know one task).
    #[serde(default)]
    pub reject_when: Option<Value>,
}

/// How long a hanging request waits before it answers.
pub const HANG_SECS: u64 = 600;

impl DeploymentTraffic {
    fn matches(&self, d: &Served<'_>) -> bool {
        self.created.is_none_or(|n| d.created == Some(n))
            && self.name.as_deref().is_none_or(|n| d.name == Some(n))
            && self.model.as_deref().is_none_or(|m| m == d.model)
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadAnswer {
    pub when: Value,
    #[serde(default = "ok")]
    pub status: u16,
    pub response: Value,
    /// Applies only to every n-th request (per deployment) its `when`
    /// matches; the others fall through to the next rule.
    #[serde(default)]
    pub every: Option<u64>,
}

fn ok() -> u16 {
    200
}

/// How many requests each deployment has answered, for the draws.
#[derive(Debug, Default)]
pub struct Counters(Mutex<HashMap<String, u64>>);

impl Counters {
    fn next(&self, id: &str) -> u64 {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(id.to_string()).or_insert(0);
        *n += 1;
        *n - 1
    }
}

/// The model deployment's rule, following a promotion's copy to its source.
pub fn rule_for<'a>(p: &'a Platform, deployment_id: &str) -> Option<&'a DeploymentTraffic> {
    let mut d = p.deployment(deployment_id)?;
    while let Some(src) = d.copied_from.as_deref().and_then(|s| p.deployment(s)) {
        d = src;
    }
    let model = p.model(&d.model_id).map(|m| m.name.as_str()).unwrap_or("");
    let served = Served {
        created: d.created_index,
        name: Some(d.name.as_str()),
        model,
        via_environment: false,
    };
    p.scenario
        .traffic
        .deployments
        .iter()
        .find(|r| r.matches(&served))
}

/// splitmix64: a well-mixed 64-bit value from a counter.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn hash_str(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Uniform in (0, 1) from a key.
fn uniform(key: u64) -> f64 {
    ((mix(key) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// The draws of the `k`-th request to `id`: a standard normal value (Box–Muller)
/// and a uniform one for the error.
pub fn draws(seed: u64, id: &str, k: u64) -> (f64, f64) {
    let base = mix(seed ^ hash_str(id)) ^ k.wrapping_mul(0x2545_F491_4F6C_DD1D);
    let (u1, u2, u3) = (uniform(base), uniform(base ^ 1), uniform(base ^ 2));
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    (z, u3)
}

/// The standard normal quantile (Acklam's rational approximation,
/// relative error below 1.2e-9).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-12, 1.0 - 1e-12);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// Whether `payload` contains `when` (objects by key, arrays by index).
fn contains(payload: &Value, when: &Value) -> bool {
    match (when, payload) {
        (Value::Object(w), Value::Object(p)) => w
            .iter()
            .all(|(k, v)| p.get(k).is_some_and(|pv| contains(pv, v))),
        (Value::Array(w), Value::Array(p)) => w
            .iter()
            .enumerate()
            .all(|(i, v)| p.get(i).is_some_and(|pv| contains(pv, v))),
        _ => when == payload,
    }
}

/// Applies the model deployment's latency and error rate to one request
/// (sleeping the drawn latency), then the payload's answer: the response
/// to send, or `None` to answer as usual.
pub async fn answer(
    shared: &crate::server::Shared,
    deployment_id: Option<&str>,
    payload: &Value,
) -> Option<Response> {
    let (rule, seed, by_payload) = {
        let p = shared.platform();
        let rule = deployment_id.and_then(|d| rule_for(&p, d)).cloned();
        (
            rule,
            p.scenario.traffic.seed,
            p.scenario.traffic.by_payload.clone(),
        )
    };
    if let (Some(rule), Some(id)) = (&rule, deployment_id) {
        let k = shared.traffic.next(id);
        let (z, u) = draws(seed, id, k);
        let b = &rule.synthetic;
        let ms = b.median_ms * (b.spread * z).exp();
        if ms > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)).await;
        }
        if rule.hang_every.is_some_and(|n| n > 0 && k % n == n - 1) {
            tokio::time::sleep(Duration::from_secs(HANG_SECS)).await;
        }
        if u < b.error_rate {
            return Some(crate::inference::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Scripted error (request {k} of deployment {id})"),
            ));
        }
        if let Some(status) = rule.reject
            && rule
                .reject_when
                .as_ref()
                .is_none_or(|w| contains(payload, w))
        {
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            return Some(crate::inference::error(
                code,
                format!("Scripted rejection (request {k} of deployment {id})"),
            ));
        }
    }
    let key = deployment_id.unwrap_or("");
    let hit = by_payload.into_iter().enumerate().find(|(i, r)| {
        contains(payload, &r.when)
            && r.every.is_none_or(|n| {
                // Counted per deployment and rule: the n-th, 2n-th… match.
                let m = shared.traffic.next(&format!("{key}#rule{i}"));
                n > 0 && m % n == n - 1
            })
    })?;
    let hit = hit.1;
    let code = StatusCode::from_u16(hit.status).unwrap_or(StatusCode::OK);
    Some((code, axum::Json(hit.response)).into_response())
}

/// The live behaviour of a model deployment for the metrics endpoint.
pub fn live(p: &Platform, deployment_id: &str) -> Behaviour {
    rule_for(p, deployment_id)
        .map(|r| r.live.clone().unwrap_or_else(|| r.synthetic.clone()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn draws_repeat_for_a_seed_and_differ_across_seeds() {
        assert_eq!(draws(7, "d1", 3), draws(7, "d1", 3));
        assert_ne!(draws(7, "d1", 3), draws(8, "d1", 3));
        assert_ne!(draws(7, "d1", 3), draws(7, "d1", 4));
    }

    #[test]
    fn draws_follow_a_standard_normal() {
        let zs: Vec<f64> = (0..20_000).map(|k| draws(1, "d", k).0).collect();
        let mean = zs.iter().sum::<f64>() / zs.len() as f64;
        let var = zs.iter().map(|z| (z - mean).powi(2)).sum::<f64>() / zs.len() as f64;
        assert!(
            mean.abs() < 0.03 && (var - 1.0).abs() < 0.05,
            "{mean} {var}"
        );
        let above = zs.iter().filter(|z| **z > 1.6449).count() as f64 / zs.len() as f64;
        assert!((above - 0.05).abs() < 0.006, "{above}");
    }

    #[test]
    fn quantiles_are_the_distributions() {
        assert!((normal_quantile(0.95) - 1.644_853_626_951).abs() < 1e-6);
        assert!((normal_quantile(0.5)).abs() < 1e-12);
        assert!((normal_quantile(0.01) + 2.326_347_874).abs() < 1e-6);
        let b = Behaviour {
            median_ms: 10.0,
            spread: 0.0,
            error_rate: 0.0,
        };
        assert_eq!(b.quantile_ms(0.99), 10.0);
    }

    #[test]
    fn payload_rules_match_by_containment() {
        let p = json!({"task": "classify", "text": "x", "list": [1, 2]});
        assert!(contains(&p, &json!({"task": "classify"})));
        assert!(contains(&p, &json!({"list": [1]})));
        assert!(!contains(&p, &json!({"task": "summarize"})));
    }
}
