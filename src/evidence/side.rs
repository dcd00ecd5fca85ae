//! What both the verdict and the regression test speak in: one side's
//! latency and errors ([`SideStats`]), a failed objective's [`Reason`],
//! which cases measure latency, and how numbers read for people. A leaf
//! of `evidence`: `verdict` and `regression` both use it, neither is used
//! by it.

use serde::{Serialize, Serializer};

use super::cases::Case;

/// Serializes a latency that may be infinite (a percentile that reached a
/// failed request) as the string `"inf"`, never as JSON's `null` (which
/// reads as "not measured").
pub(super) fn latency<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) if x.is_infinite() => s.serialize_str("inf"),
        Some(x) => s.serialize_f64(*x),
        None => s.serialize_none(),
    }
}

/// Latency and errors of one side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct SideStats {
    /// The candidate: every request; the baseline: its requests to cases
    /// that expect a success (its answers to a refusal are not compared).
    pub(crate) requests: usize,
    /// Requests that count as answered (see [`Sample::error`](super::sampler::Sample::error)).
    pub(crate) answered: usize,
    pub(crate) errors: usize,
    pub(crate) error_rate: f64,
    /// The first failure, as the answer or the error said it.
    pub(crate) first_error: Option<String>,
    /// What the percentiles are over: the candidate's requests to cases
    /// that expect a success (failures at the top), the baseline's 2xx
    /// answers to them.
    pub(crate) latency_requests: usize,
    /// `None` (not measured) when none of those requests was answered.
    #[serde(serialize_with = "latency")]
    pub(crate) p50_ms: Option<f64>,
    #[serde(serialize_with = "latency")]
    pub(crate) p90_ms: Option<f64>,
    #[serde(serialize_with = "latency")]
    pub(crate) p95_ms: Option<f64>,
    #[serde(serialize_with = "latency")]
    pub(crate) p99_ms: Option<f64>,
}

/// Whether a case expects a success: only those measure latency.
pub(super) fn expects_success(c: &Case) -> bool {
    (200..300).contains(&c.status)
}

/// A latency for people: one decimal, `∞`, or `–` when not measured.
pub(super) fn ms(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(x) if x.is_infinite() => "∞".into(),
        Some(x) => format!("{x:.1}"),
    }
}

/// A p-value: four decimals, scientific notation when smaller.
pub(super) fn p_text(p: f64) -> String {
    if p >= 1e-4 {
        format!("{p:.4}")
    } else {
        format!("{p:.1e}")
    }
}

pub(super) fn ratio_text(r: Option<f64>) -> String {
    match r {
        None => "–".into(),
        Some(x) if x.is_infinite() => "∞".into(),
        Some(x) => format!("{x:.2}×"),
    }
}

/// One failed objective: the heading's few words and the full sentence.
pub(super) struct Reason {
    pub(super) short: String,
    pub(super) long: String,
}
