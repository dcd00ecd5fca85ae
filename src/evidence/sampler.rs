//! Sends the sample: warm-up requests one at a time, then the counted
//! requests with bounded concurrency, candidate and baseline interleaved
//! (A, B, A, B…) so that drift in the platform or the network hits both.
//! Everything ends by the sample's deadline (the run's budget gives it:
//! before a gated promotion, half of what is left): what was still in
//! flight then is dropped, and the sample says how far it got. The
//! baseline gets every case, refusal cases too, so both sides carry the
//! same load at the same moments; the verdict compares what is
//! comparable.

use std::time::{Duration, Instant};

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
    /// How long the request took, answered or not.
    pub(crate) ms: f64,
    /// Set when the request failed: on the candidate no answer or a
    /// 429/5xx the case did not ask for (what `max-error-rate` counts); on
    /// the baseline anything but a 2xx answer (its other answers are not
    /// comparable latencies).
    pub(crate) error: Option<String>,
    /// Broken expectations of a candidate's answer that was not an error
    /// (the baseline is not under test: its answers are not checked).
    pub(crate) mismatches: Vec<Mismatch>,
}

/// What to send.
pub(crate) struct SampleRequests<'a> {
    pub(crate) api: &'a Api,
    pub(crate) label: &'a str,
    pub(crate) candidate: &'a str,
    pub(crate) baseline: Option<&'a str>,
    pub(crate) cases: &'a [Case],
    pub(crate) warmup: usize,
    pub(crate) requests: usize,
    pub(crate) concurrency: usize,
    pub(crate) timeout: Duration,
    /// The sample's deadline: nothing is sent or awaited past it.
    pub(crate) until: Instant,
}

/// The sample as far as it got.
#[derive(Debug)]
pub(crate) struct Sampled {
    /// The counted samples, in the order they completed.
    pub(crate) samples: Vec<Sample>,
    /// Whether every counted request finished before the deadline.
    pub(crate) complete: bool,
}

/// Whether an HTTP status is the server failing rather than answering.
fn is_error_status(status: u16, expected: u16) -> bool {
    status != expected && (status == 429 || status >= 500)
}

/// The HTTP status and the start of an answer, for a message.
fn answer_head(status: u16, text: &str) -> String {
    let head: String = text.chars().take(200).collect();
    format!("HTTP {status}: {head}")
}

async fn one(plan: &SampleRequests<'_>, side: Side, index: usize) -> Sample {
    let case_index = index % plan.cases.len();
    let case = &plan.cases[case_index];
    let url = match side {
        Side::Candidate => plan.candidate,
        Side::Baseline => plan.baseline.unwrap_or(plan.candidate),
    };
    #[expect(clippy::disallowed_methods, reason = "times the sample")]
    let started = Instant::now();
    let sent = plan
        .api
        .probe(plan.label, url, &case.payload, case.stream, plan.timeout)
        .await;
    let (ms, error, mismatches) = match sent {
        Err(e) => (
            started.elapsed().as_secs_f64() * 1000.0,
            Some(e.to_string()),
            Vec::new(),
        ),
        Ok(p) => {
            let ms = p.elapsed.as_secs_f64() * 1000.0;
            match side {
                Side::Baseline => {
                    let ok = (200..300).contains(&p.status);
                    (
                        ms,
                        (!ok).then(|| answer_head(p.status, &p.text)),
                        Vec::new(),
                    )
                }
                Side::Candidate if is_error_status(p.status, case.status) => {
                    (ms, Some(answer_head(p.status, &p.text)), Vec::new())
                }
                Side::Candidate => (ms, None, check(case, p.status, &p.text, ms)),
            }
        }
    };
    Sample {
        side,
        case: case_index,
        ms,
        error,
        mismatches,
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

/// Runs the plan: the warm-up (not returned), then the counted samples,
/// all by the plan's deadline.
#[expect(
    clippy::disallowed_methods,
    reason = "a timer on the evidence deadline, handed over on the monotonic clock (Clock::timer); each request is still checked on the run's clock"
)]
pub(crate) async fn run(plan: &SampleRequests<'_>) -> Sampled {
    let baseline = plan.baseline.is_some();
    let budget = tokio::time::Instant::from_std(plan.until);
    let warmup = async {
        for (side, i) in order(plan.warmup, baseline) {
            one(plan, side, i).await;
        }
    };
    if tokio::time::timeout_at(budget, warmup).await.is_err() {
        return Sampled {
            samples: Vec::new(),
            complete: false,
        };
    }
    // Counted requests cycle the cases from the first again, so each case
    // is counted as often as the others.
    let jobs = order(plan.requests, baseline);
    let planned = jobs.len();
    let samples: Vec<Sample> = futures_util::stream::iter(jobs)
        .map(|(side, i)| one(plan, side, i))
        .buffer_unordered(plan.concurrency.max(1))
        .take_until(tokio::time::sleep_until(budget))
        .collect()
        .await;
    Sampled {
        complete: samples.len() == planned,
        samples,
    }
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
