//! The verdict over one sample: per-case results, the candidate's and the
//! baseline's latency and errors, the regression test, and which
//! objective failed. Everything a reader or a program needs is in
//! [`Analysis`], serialized as is for `--json` and `analysis-file`. The
//! regression's own rules are in `regression`; how an analysis reads in
//! the log and the summary in `summary` and `chart`.
//!
//! What is compared with what: latency is measured on the cases that
//! expect a success only (a refusal's latency says nothing of the
//! model's). The candidate's latency objectives count every such request
//! (a failed one is slower than any answer); the baseline's sample holds
//! only its 2xx answers (its failures are counted beside); and the
//! regression compares like with like — the candidate's requests to the
//! cases the baseline answered with a 2xx at least once, against those
//! answers — in one test of the hypothesis the objective names: is the
//! candidate slower than `max-latency-regression` × the baseline?

use serde::Serialize;

use super::cases::Case;
use super::check::Mismatch;
use super::metrics::Live;
use super::regression::{
    MIN_BASELINE_ANSWERS, Regression, comparison, regress, regression_reason, unmeasured,
};
use super::sampler::{Sample, Sampled, Side};
use super::side::{Reason, SideStats, expects_success, latency, ms, ratio_text};
use super::stats::{self, alike};

/// The heading's reason is cut past this, so the whole heading ("❌ Evidence
/// failed (environment): " and the reason) stays under 100 characters.
const HEADLINE_MAX_CHARS: usize = 64;

/// The objectives a sample is judged by.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Objectives {
    pub(crate) max_error_rate: f64,
    pub(crate) max_latency_p95_ms: Option<f64>,
    pub(crate) max_latency_regression: Option<f64>,
}

/// How many requests broke one expectation of a case.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct ExpectationCount {
    pub(crate) expectation: String,
    pub(crate) failed: usize,
}

/// The expectation a request without an answer broke.
pub(crate) const NO_ANSWER: &str = "an answer";

/// One case's results on the candidate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct CaseResult {
    pub(crate) name: String,
    /// Every answer met the case and at least one came; requests without
    /// an answer only when `max-error-rate` allows them.
    pub(crate) passed: bool,
    pub(crate) requests: usize,
    /// Requests that failed (no answer, or an unasked 429/5xx).
    pub(crate) errors: usize,
    /// Requests that failed, each once: no answer, or an answer that broke
    /// at least one expectation.
    pub(crate) failed_requests: usize,
    /// Each broken expectation and how many requests broke it
    /// ([`NO_ANSWER`] for those without an answer).
    pub(crate) failed_by_expectation: Vec<ExpectationCount>,
    /// `None` when no request of the case was answered.
    #[serde(serialize_with = "latency")]
    pub(crate) p50_ms: Option<f64>,
    #[serde(serialize_with = "latency")]
    pub(crate) p95_ms: Option<f64>,
    pub(crate) baseline_p95_ms: Option<f64>,
    /// The broken expectations of its first failing answer (else of its
    /// first request without one).
    pub(crate) mismatches: Vec<Mismatch>,
}

/// What the baseline is for one analysis.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Baseline {
    /// Another deployment serves the environment: it was sampled.
    Sampled,
    /// Nothing to compare with, and why (said once, not a failure).
    None(String),
    /// Whether one serves could not be read.
    Unknown(String),
}

/// One analysis: where it ran, what it found, and the verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Analysis {
    /// `deployment` (its own URL) or `environment` (through it).
    pub(crate) phase: String,
    pub(crate) url: String,
    pub(crate) baseline_deployment_id: Option<String>,
    pub(crate) baseline_url: Option<String>,
    pub(crate) warmup: usize,
    pub(crate) concurrency: usize,
    /// Counted requests planned to each side.
    pub(crate) requests_planned: usize,
    /// Whether every counted request finished inside the sample's deadline.
    pub(crate) complete: bool,
    pub(crate) objectives: Objectives,
    pub(crate) cases: Vec<CaseResult>,
    pub(crate) candidate: SideStats,
    /// Only when the baseline was measured (see [`MIN_BASELINE_ANSWERS`]).
    pub(crate) baseline: Option<SideStats>,
    pub(crate) regression: Option<Regression>,
    /// Objectives not judged here, and why.
    pub(crate) skipped: Vec<String>,
    /// Readings of real traffic during a rolling promotion.
    pub(crate) live: Vec<Live>,
    pub(crate) passed: bool,
    /// Why, in a few words: the summary's heading.
    pub(crate) headline: String,
    /// Each objective that failed, as a sentence.
    pub(crate) reasons: Vec<String>,
    /// This analysis gave the evidence outputs (`latency-*`,
    /// `baseline-p95-ms`, `cases-*`).
    pub(crate) outputs: bool,
}

/// A value of the latency sample for a failed request: its elapsed time
/// when that is longer than every answer (a timeout), else +∞.
fn failed_value(ms: f64, slowest_answer: f64) -> f64 {
    if ms > slowest_answer {
        ms
    } else {
        f64::INFINITY
    }
}

/// The candidate's latency sample over every request of `samples`, empty
/// when none of them was answered (nothing was measured).
fn candidate_latencies(samples: &[&Sample], slowest_answer: f64) -> Vec<f64> {
    if samples.iter().all(|s| s.error.is_some()) {
        return Vec::new();
    }
    samples
        .iter()
        .map(|s| match s.error {
            None => s.ms,
            Some(_) => failed_value(s.ms, slowest_answer),
        })
        .collect()
}

fn answered(samples: &[&Sample]) -> Vec<f64> {
    samples
        .iter()
        .filter(|s| s.error.is_none())
        .map(|s| s.ms)
        .collect()
}

/// One side's numbers: `samples` for the counts, `latency_requests` and
/// `latencies` (empty when nothing was measured) for the percentiles.
fn side_of(samples: &[&Sample], latency_requests: usize, latencies: &[f64]) -> SideStats {
    let errors = samples.iter().filter(|s| s.error.is_some()).count();
    let p = |q| stats::percentile(latencies, q);
    SideStats {
        requests: samples.len(),
        answered: samples.len() - errors,
        errors,
        error_rate: if samples.is_empty() {
            0.0
        } else {
            errors as f64 / samples.len() as f64
        },
        first_error: samples.iter().find_map(|s| s.error.clone()),
        latency_requests,
        p50_ms: p(50.0),
        p90_ms: p(90.0),
        p95_ms: p(95.0),
        p99_ms: p(99.0),
    }
}

/// What [`judge`] makes of a sample.
pub(crate) struct Judged {
    pub(crate) cases: Vec<CaseResult>,
    pub(crate) candidate: SideStats,
    pub(crate) baseline: Option<SideStats>,
    pub(crate) regression: Option<Regression>,
    pub(crate) headline: String,
    pub(crate) reasons: Vec<String>,
}

/// What a sample was planned as: the counted requests per side, what the
/// baseline is and its name for messages, and the deadline it ran to (for
/// the message when it did not finish).
pub(crate) struct PlannedSample<'a> {
    pub(crate) requests: usize,
    pub(crate) baseline: &'a Baseline,
    pub(crate) baseline_name: &'a str,
    pub(crate) deadline: &'a str,
}

/// Judges the `sampled` requests of `cases` against `objectives`.
pub(crate) fn judge(
    cases: &[Case],
    sampled: &Sampled,
    plan: &PlannedSample<'_>,
    objectives: &Objectives,
) -> Judged {
    let samples = &sampled.samples;
    let success: Vec<bool> = cases.iter().map(expects_success).collect();
    let of = |side: Side, case: Option<usize>| -> Vec<&Sample> {
        samples
            .iter()
            .filter(|s| s.side == side && case.is_none_or(|c| s.case == c))
            .collect()
    };
    let cand = of(Side::Candidate, None);
    // Latency is the model's on the cases that expect a success.
    let cand_lat: Vec<&Sample> = cand.iter().copied().filter(|s| success[s.case]).collect();
    let slowest = answered(&cand_lat).into_iter().fold(0.0_f64, f64::max);
    let candidate = side_of(
        &cand,
        cand_lat.len(),
        &candidate_latencies(&cand_lat, slowest),
    );
    let base_all = of(Side::Baseline, None);
    let base: Vec<&Sample> = base_all
        .iter()
        .copied()
        .filter(|s| success[s.case])
        .collect();
    let base_ms = answered(&base);
    let base_stats = side_of(&base, base_ms.len(), &base_ms);
    let compared = comparison(cases, &cand, &base);
    let measured = *plan.baseline == Baseline::Sampled
        && base_stats.answered >= MIN_BASELINE_ANSWERS
        && 2 * base_stats.answered >= compared.baseline_requests;
    let errors_allowed = candidate.error_rate <= objectives.max_error_rate;
    let results: Vec<CaseResult> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let base_case = of(Side::Baseline, Some(i));
            let base_p95 = (measured && compared.comparable[i])
                .then(|| stats::percentile(&answered(&base_case), 95.0))
                .flatten();
            case_result(
                c,
                &of(Side::Candidate, Some(i)),
                slowest,
                base_p95,
                errors_allowed,
            )
        })
        .collect();

    let mut reasons: Vec<Reason> = Vec::new();
    if !sampled.complete {
        reasons.push(unfinished(plan, cand.len(), base_all.len()));
    }
    let failed: Vec<&CaseResult> = results.iter().filter(|r| !r.passed).collect();
    if !failed.is_empty() {
        let names: Vec<String> = failed
            .iter()
            .map(|r| match r.requests {
                0 => format!("{:?} (not sent)", r.name),
                n => format!("{:?} (failed {} of {n})", r.name, r.failed_requests),
            })
            .collect();
        reasons.push(Reason {
            short: format!("{} of {} cases failed", failed.len(), results.len()),
            long: format!(
                "{} of {} cases failed: {}",
                failed.len(),
                results.len(),
                names.join(", ")
            ),
        });
    }
    if !errors_allowed {
        let (v, l) = alike(
            candidate.error_rate * 100.0,
            objectives.max_error_rate * 100.0,
            1,
        );
        reasons.push(Reason {
            short: format!("error rate {v}% (max {l}%)"),
            long: format!(
                "error rate {v}% ({} of {} requests) is above max-error-rate {l}%",
                candidate.errors, candidate.requests
            ),
        });
    }
    if let Some(max) = objectives.max_latency_p95_ms {
        reasons.extend(p95_reason(&candidate, &cand_lat, max));
    }
    let mut regression = None;
    if let Some(limit) = objectives.max_latency_regression {
        match plan.baseline {
            Baseline::Unknown(why) => reasons.push(Reason {
                short: "the baseline could not be found".into(),
                long: format!("{why}; the regression cannot be judged"),
            }),
            Baseline::Sampled if !measured => {
                reasons.push(unmeasured(plan.baseline_name, &base_stats, &compared));
            }
            Baseline::Sampled if sampled.complete => {
                if let Some(r) = regress(&compared, &base_ms, limit) {
                    if r.regressed {
                        reasons.push(regression_reason(&r));
                    }
                    regression = Some(r);
                }
            }
            Baseline::Sampled | Baseline::None(_) => {}
        }
    }
    let headline = match reasons.as_slice() {
        [] => pass_headline(&results, &candidate, regression.as_ref()),
        [one] => one.short.clone(),
        [first, rest @ ..] => format!("{} (+{} more)", first.short, rest.len()),
    };
    Judged {
        cases: results,
        candidate,
        baseline: measured.then_some(base_stats),
        regression,
        headline: cut(&headline, HEADLINE_MAX_CHARS),
        reasons: reasons.into_iter().map(|r| r.long).collect(),
    }
}

/// The sample ran out of its deadline: how far it got.
fn unfinished(plan: &PlannedSample<'_>, done: usize, base_done: usize) -> Reason {
    let planned = plan.requests;
    Reason {
        short: format!("the sample did not finish in time ({done} of {planned})"),
        long: format!(
            "the sample did not finish inside {}: {done} of {planned} candidate requests{} had finished when it ran out; a partial sample passes nothing",
            plan.deadline,
            if *plan.baseline == Baseline::Sampled {
                format!(" and {base_done} of {planned} baseline requests")
            } else {
                String::new()
            }
        ),
    }
}

/// The p95 objective over the candidate's latency sample (`lat`, its
/// requests to cases that expect a success), or why it was not measured.
fn p95_reason(candidate: &SideStats, lat: &[&Sample], max: f64) -> Option<Reason> {
    let n = candidate.latency_requests;
    let to = if n == candidate.requests {
        ""
    } else {
        " to cases that expect a success"
    };
    let Some(p95) = candidate.p95_ms else {
        let first = lat
            .iter()
            .find_map(|s| s.error.as_deref())
            .map_or(String::new(), |e| format!(" (first failure {e})"));
        return Some(Reason {
            short: "p95 latency not measured".into(),
            long: format!(
                "max-latency-p95-ms cannot be judged: none of the {n} requests{to} was answered{first}, so no latency was measured"
            ),
        });
    };
    if p95 <= max {
        return None;
    }
    let (v, l) = alike(p95, max, 1);
    let failures = lat.iter().filter(|s| s.error.is_some()).count();
    let how = if failures > 0 {
        format!(
            " (over all {n} requests{to}; {failures} failed and count as slower than every answer)"
        )
    } else {
        String::new()
    };
    Some(Reason {
        short: format!("p95 {v} ms (max {l} ms)"),
        long: format!("p95 latency {v} ms is above max-latency-p95-ms {l}{how}"),
    })
}

fn case_result(
    c: &Case,
    mine: &[&Sample],
    slowest: f64,
    baseline_p95_ms: Option<f64>,
    errors_allowed: bool,
) -> CaseResult {
    let errors = mine.iter().filter(|s| s.error.is_some()).count();
    let broke: Vec<&&Sample> = mine
        .iter()
        .filter(|s| s.error.is_none() && !s.mismatches.is_empty())
        .collect();
    let mut by: Vec<ExpectationCount> = Vec::new();
    for s in &broke {
        for m in &s.mismatches {
            match by.iter_mut().find(|e| e.expectation == m.expectation) {
                Some(e) => e.failed += 1,
                None => by.push(ExpectationCount {
                    expectation: m.expectation.clone(),
                    failed: 1,
                }),
            }
        }
    }
    if errors > 0 {
        by.push(ExpectationCount {
            expectation: NO_ANSWER.into(),
            failed: errors,
        });
    }
    // The first broken answer shows the most (a diff of its body); else
    // the first request without an answer.
    let mismatches = match (broke.first(), mine.iter().find_map(|s| s.error.clone())) {
        (Some(s), _) => s.mismatches.clone(),
        (None, Some(e)) => vec![Mismatch {
            expectation: NO_ANSWER.into(),
            expected: format!("HTTP {}", c.status),
            got: e,
        }],
        (None, None) => Vec::new(),
    };
    let lat = candidate_latencies(mine, slowest);
    CaseResult {
        name: c.name.clone(),
        passed: broke.is_empty() && errors < mine.len() && (errors == 0 || errors_allowed),
        requests: mine.len(),
        errors,
        failed_requests: broke.len() + errors,
        failed_by_expectation: by,
        p50_ms: stats::percentile(&lat, 50.0),
        p95_ms: stats::percentile(&lat, 95.0),
        baseline_p95_ms,
        mismatches,
    }
}

fn pass_headline(cases: &[CaseResult], c: &SideStats, r: Option<&Regression>) -> String {
    let mut h = format!("{}/{} cases", cases.len(), cases.len());
    if c.p95_ms.is_some() {
        h.push_str(&format!(" · p95 {} ms", ms(c.p95_ms)));
    }
    if let Some(r) = r {
        h.push_str(&format!(
            " · {} the baseline's p50",
            ratio_text(r.p50_ratio)
        ));
    }
    h
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.into();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::side::p_text;

    fn sample(side: Side, case: usize, ms: f64, error: bool, bad: bool) -> Sample {
        Sample {
            side,
            case,
            ms,
            error: error.then(|| "HTTP 500".into()),
            mismatches: if bad {
                vec![Mismatch {
                    expectation: "pointer /a".into(),
                    expected: "type number".into(),
                    got: "\"x\" (string)".into(),
                }]
            } else {
                vec![]
            },
        }
    }

    /// Cases c0, c1, …; those in `refusals` expect a 422.
    fn cases_with(n: usize, refusals: &[usize]) -> Vec<Case> {
        let dir = tempfile::tempdir().unwrap();
        let yaml: String = (0..n)
            .map(|i| {
                let status = if refusals.contains(&i) { 422 } else { 200 };
                format!("- {{name: c{i}, payload: {{}}, status: {status}}}\n")
            })
            .collect();
        super::super::cases::parse(&yaml, false, dir.path()).unwrap()
    }

    fn cases(n: usize) -> Vec<Case> {
        cases_with(n, &[])
    }

    fn objectives() -> Objectives {
        Objectives {
            max_error_rate: 0.0,
            max_latency_p95_ms: None,
            max_latency_regression: Some(1.2),
        }
    }

    fn judge_all(cs: &[Case], s: Vec<Sample>, o: &Objectives, b: Baseline) -> Judged {
        let n = s.iter().filter(|s| s.side == Side::Candidate).count();
        let sampled = Sampled {
            samples: s,
            complete: true,
        };
        let plan = PlannedSample {
            requests: n,
            baseline: &b,
            baseline_name: "v1dep001",
            deadline: "the run's budget",
        };
        judge(cs, &sampled, &plan, o)
    }

    #[test]
    fn a_slower_candidate_regresses_and_equal_ones_do_not() {
        let cs = cases(1);
        let mut slow = Vec::new();
        let mut equal = Vec::new();
        for i in 0..50 {
            let base = 10.0 + (i % 7) as f64 + i as f64 * 0.001;
            slow.push(sample(Side::Baseline, 0, base, false, false));
            slow.push(sample(Side::Candidate, 0, base * 2.0, false, false));
            equal.push(sample(Side::Baseline, 0, base, false, false));
            equal.push(sample(
                Side::Candidate,
                0,
                10.0 + ((i + 3) % 7) as f64,
                false,
                false,
            ));
        }
        let j = judge_all(&cs, slow, &objectives(), Baseline::Sampled);
        let r = j.regression.unwrap();
        assert!(r.regressed && r.p_value < 0.001, "{r:?}");
        assert!(
            j.reasons[0].contains("latency regression"),
            "{:?}",
            j.reasons
        );
        assert_eq!(j.headline, "latency 2.0× the baseline (limit 1.2×)");
        let j = judge_all(&cs, equal, &objectives(), Baseline::Sampled);
        let r = j.regression.unwrap();
        assert!(!r.regressed);
        assert_eq!((r.left_out_requests, r.left_out), (0, None));
        assert!(j.reasons.is_empty(), "{:?}", j.reasons);
    }

    #[test]
    fn a_small_p_is_written_in_scientific_notation() {
        assert_eq!(p_text(0.0312), "0.0312");
        assert_eq!(p_text(0.0001), "0.0001");
        assert_eq!(p_text(3.24e-7), "3.2e-7");
        assert_eq!(p_text(9.3e-24), "9.3e-24");
    }

    #[test]
    fn a_baseline_that_answered_too_little_fails_and_is_not_shown() {
        let cs = cases(1);
        let mut s = Vec::new();
        for i in 0..40 {
            s.push(sample(Side::Candidate, 0, 10.0 + i as f64, false, false));
            // 15 answers of 40: fewer than 20.
            s.push(sample(Side::Baseline, 0, 5.0, i >= 15, false));
        }
        let j = judge_all(&cs, s, &objectives(), Baseline::Sampled);
        assert!(j.baseline.is_none() && j.regression.is_none());
        assert!(j.cases[0].baseline_p95_ms.is_none());
        assert!(
            j.reasons[0].starts_with("the serving deployment v1dep001 answered 15 of 40 requests with a 2xx: first failure HTTP 500"),
            "{:?}",
            j.reasons
        );
        assert!(j.reasons[0].contains("the regression cannot be judged"));
    }

    /// Candidate and baseline alike on the cases both answer, 25 rounds
    /// of each case.
    fn alike_on(
        cases: usize,
        base_refuses: &[usize],
        cand_ms: impl Fn(usize) -> f64,
    ) -> Vec<Sample> {
        let mut s = Vec::new();
        for i in 0..25 * cases {
            let case = i % cases;
            let ms = 10.0 + (i % 7) as f64 + i as f64 * 0.001;
            let refused = base_refuses.contains(&case);
            s.push(sample(Side::Baseline, case, ms, refused, false));
            s.push(sample(
                Side::Candidate,
                case,
                cand_ms(case) * ms,
                false,
                false,
            ));
        }
        s
    }

    #[test]
    fn half_the_cases_negative_still_judge_the_regression_on_the_others() {
        // c1 expects a refusal: both sides answer it (the baseline's 422
        // counts as an error of its own sample) in a fraction of the time.
        let cs = cases_with(2, &[1]);
        let s = alike_on(2, &[1], |c| if c == 1 { 0.01 } else { 1.0 });
        let j = judge_all(&cs, s, &objectives(), Baseline::Sampled);
        assert!(j.reasons.is_empty(), "{:?}", j.reasons);
        let b = j.baseline.as_ref().expect("the baseline was measured");
        assert_eq!((b.requests, b.answered, b.errors), (25, 25, 0));
        let r = j.regression.unwrap();
        assert_eq!((r.candidate_n, r.baseline_n), (25, 25));
        assert_eq!(r.left_out_requests, 25);
        let why = r.left_out.unwrap();
        assert!(
            why.starts_with("25 of 50 candidate requests are left out of the comparison: 25 to cases that expect a refusal"),
            "{why}"
        );
        // The refusals' fast answers are not the candidate's latency.
        assert_eq!(j.candidate.latency_requests, 25);
        assert!(j.candidate.p50_ms.unwrap() > 10.0, "{:?}", j.candidate);
        // And a slower candidate on the compared case still regresses.
        let s = alike_on(2, &[1], |c| if c == 1 { 0.01 } else { 2.0 });
        let j = judge_all(&cs, s, &objectives(), Baseline::Sampled);
        assert!(j.regression.unwrap().regressed, "{:?}", j.reasons);
    }

    #[test]
    fn a_case_the_baseline_never_answered_is_left_out_on_both_sides() {
        // c1 and c2 are new: the serving model refuses them, and the
        // candidate is slow on them. An unchanged model on c0 is no
        // regression.
        let cs = cases(3);
        let s = alike_on(3, &[1, 2], |c| if c >= 1 { 5.0 } else { 1.0 });
        let j = judge_all(&cs, s, &objectives(), Baseline::Sampled);
        assert!(j.reasons.is_empty(), "{:?}", j.reasons);
        let r = j.regression.unwrap();
        assert!(!r.regressed);
        assert_eq!(
            (r.candidate_n, r.baseline_n, r.left_out_requests),
            (25, 25, 50)
        );
        let why = r.left_out.unwrap();
        assert!(
            why.contains(
                "50 to cases the serving deployment never answered with a 2xx, so there is nothing to compare them with (\"c1\", \"c2\")"
            ),
            "{why}"
        );
        // Its refusals are baseline errors, shown; the rule of half counts
        // over the requests that could be compared (25 of 25, not 25 of 75).
        let b = j.baseline.unwrap();
        assert_eq!((b.requests, b.answered, b.errors), (75, 25, 50));
        assert_eq!(j.cases[1].baseline_p95_ms, None);
        assert!(j.cases[0].baseline_p95_ms.is_some());
        // Without the exclusion the new slow case would have regressed.
        let same = cases(1);
        let mut both = alike_on(2, &[], |c| if c == 1 { 5.0 } else { 1.0 });
        both.iter_mut().for_each(|s| s.case = 0);
        assert!(
            judge_all(&same, both, &objectives(), Baseline::Sampled)
                .regression
                .unwrap()
                .regressed
        );
    }

    #[test]
    fn failed_candidate_requests_count_as_slower_than_every_answer() {
        let cs = cases(1);
        let mut s: Vec<Sample> = (0..95)
            .map(|i| sample(Side::Candidate, 0, 10.0 + i as f64 * 0.1, false, false))
            .collect();
        // Five timeouts at 5 s and one fast failure.
        s.extend((0..5).map(|_| sample(Side::Candidate, 0, 5000.0, true, false)));
        let mut o = objectives();
        o.max_error_rate = 0.1;
        o.max_latency_p95_ms = Some(100.0);
        o.max_latency_regression = None;
        let j = judge_all(&cs, s.clone(), &o, Baseline::None("first".into()));
        assert!(j.candidate.p95_ms.unwrap() > 100.0, "{:?}", j.candidate);
        assert!(
            j.reasons
                .iter()
                .any(|r| r.contains("over all 100 requests; 5 failed")),
            "{:?}",
            j.reasons
        );
        // Fast failures (elapsed under every answer) enter at +∞.
        s.extend((0..5).map(|_| sample(Side::Candidate, 0, 1.0, true, false)));
        let j = judge_all(&cs, s, &o, Baseline::None("first".into()));
        assert_eq!(j.candidate.p99_ms, Some(f64::INFINITY));
        let json = serde_json::to_value(&j.candidate).unwrap();
        assert_eq!(json["p99_ms"], "inf");
    }

    #[test]
    fn without_an_answer_no_latency_is_measured() {
        let cs = cases(1);
        let s = vec![sample(Side::Candidate, 0, 1.0, true, false); 4];
        let mut o = objectives();
        o.max_latency_regression = None;
        o.max_latency_p95_ms = Some(100.0);
        let j = judge_all(&cs, s, &o, Baseline::None("first".into()));
        let c = &j.candidate;
        assert_eq!((c.p50_ms, c.p95_ms, c.p99_ms), (None, None, None));
        assert_eq!((j.cases[0].p50_ms, j.cases[0].p95_ms), (None, None));
        assert!(
            j.reasons.iter().any(|r| r.starts_with(
                "max-latency-p95-ms cannot be judged: none of the 4 requests was answered (first failure HTTP 500), so no latency was measured"
            )),
            "{:?}",
            j.reasons
        );
        let json = serde_json::to_value(c).unwrap();
        assert!(json["p95_ms"].is_null());
    }

    #[test]
    fn failing_cases_count_each_failed_request_once() {
        let cs = cases(3);
        let mut samples = vec![
            sample(Side::Candidate, 0, 5.0, false, false),
            sample(Side::Candidate, 0, 5.0, true, false),
        ];
        for i in 0..100 {
            samples.push(sample(Side::Candidate, 1, 5.0, false, i % 10 == 0));
        }
        // c2: an answer that broke two expectations counts once.
        let mut two = sample(Side::Candidate, 2, 5.0, false, true);
        two.mismatches.push(Mismatch {
            expectation: "status".into(),
            expected: "HTTP 200".into(),
            got: "HTTP 404".into(),
        });
        samples.push(two);
        samples.push(sample(Side::Candidate, 2, 5.0, false, false));
        let mut o = objectives();
        o.max_latency_regression = None;
        let j = judge_all(&cs, samples.clone(), &o, Baseline::None("x".into()));
        // c0: one request without an answer, none allowed: failed 1 of 2.
        assert!(!j.cases[0].passed);
        assert_eq!((j.cases[0].failed_requests, j.cases[0].errors), (1, 1));
        assert_eq!(j.cases[0].mismatches[0].expectation, NO_ANSWER);
        assert!(!j.cases[1].passed);
        assert_eq!(j.cases[1].failed_requests, 10);
        assert_eq!(j.cases[1].failed_by_expectation[0].failed, 10);
        assert_eq!(j.cases[1].mismatches[0].expectation, "pointer /a");
        assert_eq!(j.cases[2].failed_requests, 1);
        assert_eq!(j.cases[2].failed_by_expectation.len(), 2);
        assert_eq!(j.candidate.errors, 1);
        assert!(
            j.reasons[0].contains(
                "3 of 3 cases failed: \"c0\" (failed 1 of 2), \"c1\" (failed 10 of 100), \"c2\" (failed 1 of 2)"
            ),
            "{:?}",
            j.reasons
        );
        assert!(j.reasons[1].contains("max-error-rate"));
        assert_eq!(j.headline, "3 of 3 cases failed (+1 more)");
        // A max-error-rate that allows the one error: c0 passes, and still
        // says what failed.
        o.max_error_rate = 0.5;
        let j = judge_all(&cs, samples, &o, Baseline::None("x".into()));
        assert!(j.cases[0].passed);
        assert_eq!(j.cases[0].failed_requests, 1);
        assert!(
            j.reasons[0].starts_with("2 of 3 cases failed"),
            "{:?}",
            j.reasons
        );
    }

    #[test]
    fn a_heading_stays_under_100_characters() {
        let cs = cases(1);
        let mut o = objectives();
        o.max_latency_regression = None;
        o.max_latency_p95_ms = Some(1.0);
        let s = vec![sample(Side::Candidate, 0, 5.0, true, false); 3];
        let b = Baseline::None("x".into());
        let plan = PlannedSample {
            requests: 1000,
            baseline: &b,
            baseline_name: "",
            deadline: "the run's budget",
        };
        let sampled = Sampled {
            samples: s,
            complete: false,
        };
        let j = judge(&cs, &sampled, &plan, &o);
        let heading = format!("❌ Evidence failed (environment): {}", j.headline);
        assert!(heading.chars().count() < 100, "{heading}");
        assert!(
            j.headline.starts_with("the sample did not finish"),
            "{}",
            j.headline
        );
    }
}
