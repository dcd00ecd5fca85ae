//! The regression objective: which requests are comparable (the cases
//! that expect a success and that the baseline answered with a 2xx at
//! least once), whether the baseline was measured, and the one test of
//! the hypothesis `max-latency-regression` names — is the candidate
//! slower than the limit × the baseline?

use serde::Serialize;

use super::cases::Case;
use super::sampler::Sample;
use super::side::{Reason, SideStats, expects_success, latency, p_text, ratio_text};
use super::stats::{self, MannWhitney, Method, alike};

/// The significance level of the regression test.
pub(crate) const REGRESSION_ALPHA: f64 = 0.05;
/// Fewer successful baseline answers than this (or fewer than half of the
/// requests that could be compared) measure nothing the regression could
/// be judged on.
pub(crate) const MIN_BASELINE_ANSWERS: usize = 20;

/// The regression test and its numbers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Regression {
    /// The test by name and direction.
    pub(crate) test: String,
    pub(crate) limit: f64,
    /// Candidate requests compared (failures included) and baseline 2xx
    /// answers.
    pub(crate) candidate_n: usize,
    pub(crate) baseline_n: usize,
    /// Candidate requests left out of the comparison, and why.
    pub(crate) left_out_requests: usize,
    pub(crate) left_out: Option<String>,
    pub(crate) u: f64,
    pub(crate) p_value: f64,
    pub(crate) method: Method,
    pub(crate) alpha: f64,
    /// Descriptions, not the decision: candidate over baseline, over the
    /// requests compared.
    #[serde(serialize_with = "latency")]
    pub(crate) p50_ratio: Option<f64>,
    #[serde(serialize_with = "latency")]
    pub(crate) p95_ratio: Option<f64>,
    /// The smallest slowdown (× the baseline) this sample detects with
    /// [`stats::DETECT_POWER`].
    pub(crate) detectable_slowdown: Option<f64>,
    pub(crate) regressed: bool,
}

/// Which of the sample's requests the regression compares.
pub(super) struct Comparison<'s> {
    /// Per case: it expects a success and the baseline answered it with a
    /// 2xx at least once.
    pub(super) comparable: Vec<bool>,
    /// The candidate's requests to those cases.
    pub(super) candidate: Vec<&'s Sample>,
    /// The baseline's requests to those cases (the half-answered rule's
    /// denominator).
    pub(super) baseline_requests: usize,
    pub(super) left_out_requests: usize,
    pub(super) left_out: Option<String>,
}

/// The cases the regression compares: those that expect a success and
/// that the baseline answered with a 2xx at least once; the candidate's
/// other requests are left out, and the sentence says which and why.
pub(super) fn comparison<'s>(
    cases: &[Case],
    cand: &[&'s Sample],
    base: &[&Sample],
) -> Comparison<'s> {
    let comparable: Vec<bool> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| expects_success(c) && base.iter().any(|s| s.case == i && s.error.is_none()))
        .collect();
    let names = |keep: &dyn Fn(usize) -> bool| -> (usize, Vec<String>) {
        let n = cand.iter().filter(|s| keep(s.case)).count();
        let named = (0..cases.len())
            .filter(|&i| keep(i))
            .map(|i| format!("{:?}", cases[i].name))
            .collect();
        (n, named)
    };
    let (refusals, refusal_names) = names(&|i| !expects_success(&cases[i]));
    let (unanswered, unanswered_names) = names(&|i| expects_success(&cases[i]) && !comparable[i]);
    let mut why = Vec::new();
    if refusals > 0 {
        why.push(format!(
            "{refusals} to cases that expect a refusal, whose latency is not the model's ({})",
            refusal_names.join(", ")
        ));
    }
    if unanswered > 0 {
        why.push(format!(
            "{unanswered} to cases the serving deployment never answered with a 2xx, so there is nothing to compare them with ({})",
            unanswered_names.join(", ")
        ));
    }
    let left_out_requests = refusals + unanswered;
    Comparison {
        candidate: cand
            .iter()
            .copied()
            .filter(|s| comparable[s.case])
            .collect(),
        baseline_requests: base.iter().filter(|s| comparable[s.case]).count(),
        comparable,
        left_out_requests,
        left_out: (left_out_requests > 0).then(|| {
            format!(
                "{left_out_requests} of {} candidate requests are left out of the comparison: {}",
                cand.len(),
                why.join("; ")
            )
        }),
    }
}

/// The baseline answered too little to compare with.
pub(super) fn unmeasured(name: &str, b: &SideStats, compared: &Comparison<'_>) -> Reason {
    let first = b
        .first_error
        .as_deref()
        .map_or(String::new(), |e| format!(": first failure {e}"));
    Reason {
        short: format!(
            "baseline not measured ({} of {} answered)",
            b.answered, b.requests
        ),
        long: format!(
            "the serving deployment {name} answered {} of {} requests with a 2xx{first}; the regression cannot be judged ({})",
            b.answered,
            b.requests,
            if b.answered == 0 || compared.baseline_requests == b.requests {
                format!(
                    "at least {MIN_BASELINE_ANSWERS} answers and half of its requests are needed"
                )
            } else {
                format!(
                    "at least {MIN_BASELINE_ANSWERS} answers are needed, and answers to half of its {} requests to the cases it answered at all",
                    compared.baseline_requests
                )
            }
        ),
    }
}

/// The shifted test over the candidate's compared requests (failures at
/// +∞: slower than any answer on either side) and the baseline's 2xx
/// answers.
pub(super) fn regress(compared: &Comparison<'_>, base: &[f64], limit: f64) -> Option<Regression> {
    let cand: Vec<f64> = compared
        .candidate
        .iter()
        .map(|s| match s.error {
            None => s.ms,
            Some(_) => f64::INFINITY,
        })
        .collect();
    let mw: MannWhitney = stats::slower_than_scaled(&cand, base, limit)?;
    let ratio = |q: f64| {
        let (c, b) = (stats::percentile(&cand, q)?, stats::percentile(base, q)?);
        Some(c / b.max(f64::MIN_POSITIVE))
    };
    Some(Regression {
        test: format!("one-sided Mann–Whitney U: candidate slower than {limit} × baseline"),
        limit,
        candidate_n: cand.len(),
        baseline_n: base.len(),
        left_out_requests: compared.left_out_requests,
        left_out: compared.left_out.clone(),
        u: mw.u,
        p_value: mw.p,
        method: mw.method,
        alpha: REGRESSION_ALPHA,
        p50_ratio: ratio(50.0),
        p95_ratio: ratio(95.0),
        detectable_slowdown: stats::log_sd(base).and_then(|sd| {
            stats::detectable_slowdown(cand.len(), base.len(), sd, limit, REGRESSION_ALPHA)
        }),
        regressed: mw.p < REGRESSION_ALPHA,
    })
}

pub(super) fn regression_reason(r: &Regression) -> Reason {
    let short = match r.p50_ratio {
        Some(x) if x > r.limit => {
            let (v, l) = alike(x, r.limit, 1);
            format!("latency {v}× the baseline (limit {l}×)")
        }
        _ => format!("latency slower than {}× the baseline", r.limit),
    };
    Reason {
        short,
        long: format!(
            "latency regression: the candidate is slower than {}× the baseline ({}; {} over {} candidate requests and {} baseline answers × {}: U = {:.1}, p = {} < {}); p50 {} and p95 {} the baseline's{}",
            r.limit,
            r.test,
            match r.method {
                Method::Exact => "exact p",
                Method::Asymptotic => "p by the normal approximation",
            },
            r.candidate_n,
            r.baseline_n,
            r.limit,
            r.u,
            p_text(r.p_value),
            r.alpha,
            ratio_text(r.p50_ratio),
            ratio_text(r.p95_ratio),
            r.left_out
                .as_ref()
                .map_or(String::new(), |l| format!(" ({l})")),
        ),
    }
}
