//! Sends the sample: warm-up requests one at a time, then the counted
//! requests with bounded concurrency, candidate and baseline interleaved
//! (A, B, A, B…) so that drift in the platform or the network hits both.

use std::time::Duration;

use futures_util::StreamExt;

use super::cases::Case;
use super::check::{Mismatch, check};
use crate::baseten::Api;

/// Which side of the comparison a request went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Candidate,
    Baseline,
}

/// One request's result.
#[derive(Clone, Debug)]
pub(crate) struct Sample {
    pub(crate) side: Side,
    pub(crate) case: usize,
    pub(crate) ms: f64,
    /// Counts against max-error-rate: no answer, or a 429/5xx the case did
    /// not ask for.
    pub(crate) error: Option<String>,
    /// Broken expectations of an answer that was not an error.
    pub(crate) mismatches: Vec<Mismatch>,
}

/// What to send.
pub(crate) struct Plan<'a> {
    pub(crate) api: &'a Api,
    pub(crate) label: &'a str,
    pub(crate) candidate: &'a str,
    pub(crate) baseline: Option<&'a str>,
    pub(crate) cases: &'a [Case],
    pub(crate) warmup: usize,
    pub(crate) requests: usize,
    pub(crate) concurrency: usize,
    pub(crate) timeout: Duration,
}

/// Whether an HTTP status is the server failing rather than answering.
fn is_error_status(status: u16, expected: u16) -> bool {
    status != expected && (status == 429 || status >= 500)
}

async fn one(plan: &Plan<'_>, side: Side, index: usize) -> Sample {
    let case_index = index % plan.cases.len();
    let case = &plan.cases[case_index];
    let url = match side {
        Side::Candidate => plan.candidate,
        Side::Baseline => plan.baseline.unwrap_or(plan.candidate),
    };
    let sent = plan
        .api
        .probe(plan.label, url, &case.payload, case.stream, plan.timeout)
        .await;
    match sent {
        Err(e) => Sample {
            side,
            case: case_index,
            ms: plan.timeout.as_secs_f64() * 1000.0,
            error: Some(e.to_string()),
            mismatches: Vec::new(),
        },
        Ok(p) => {
            let ms = p.elapsed.as_secs_f64() * 1000.0;
            let error = is_error_status(p.status, case.status).then(|| {
                let head: String = p.text.chars().take(200).collect();
                format!("HTTP {}: {head}", p.status)
            });
            let mismatches = if error.is_some() {
                Vec::new()
            } else {
                check(case, p.status, &p.text, ms)
            };
            Sample {
                side,
                case: case_index,
                ms,
                error,
                mismatches,
            }
        }
    }
}

/// The order requests are sent in: each index to the candidate, then to
/// the baseline when there is one.
pub(crate) fn order(count: usize, baseline: bool) -> Vec<(Side, usize)> {
    (0..count)
        .flat_map(|i| {
            let b = baseline.then_some((Side::Baseline, i));
            std::iter::once((Side::Candidate, i)).chain(b)
        })
        .collect()
}

/// Runs the plan: the warm-up (not returned), then the counted samples in
/// the order they completed.
pub(crate) async fn run(plan: &Plan<'_>) -> Vec<Sample> {
    let baseline = plan.baseline.is_some();
    for (side, i) in order(plan.warmup, baseline) {
        one(plan, side, i).await;
    }
    // Counted requests cycle the cases from the first again, so each case
    // is counted as often as the others.
    let jobs = order(plan.requests, baseline);
    futures_util::stream::iter(jobs)
        .map(|(side, i)| one(plan, side, i))
        .buffer_unordered(plan.concurrency.max(1))
        .collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_and_baseline_alternate() {
        use Side::*;
        assert_eq!(
            order(2, true),
            [(Candidate, 0), (Baseline, 0), (Candidate, 1), (Baseline, 1)]
        );
        assert_eq!(order(2, false), [(Candidate, 0), (Candidate, 1)]);
    }

    #[test]
    fn only_unasked_server_failures_are_errors() {
        assert!(is_error_status(500, 200));
        assert!(is_error_status(429, 200));
        assert!(!is_error_status(503, 503));
        assert!(!is_error_status(422, 200));
    }
}
