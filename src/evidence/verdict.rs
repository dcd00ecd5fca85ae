//! The verdict over one sample: per-case results, the candidate's and the
//! baseline's latency and errors, the regression test, and which
//! objective failed. Everything a reader or a program needs is in
//! [`Analysis`], serialized as is for `--json` and `analysis-file`.
//!
//! What is compared with what: the candidate's latency objectives count
//! every request (a failed one is slower than any answer), the baseline's
//! sample holds only its 2xx answers (its failures are counted beside),
//! and the regression objective is one test of the hypothesis it names —
//! is the candidate slower than `max-latency-regression` × the baseline?

use serde::{Serialize, Serializer};

use super::cases::Case;
use super::check::Mismatch;
use super::metrics::Live;
use super::sampler::{Sample, Sampled, Side};
use super::stats::{self, MannWhitney, Method, alike};
use crate::ci::markdown;

/// The significance level of the regression test.
pub(crate) const REGRESSION_ALPHA: f64 = 0.05;
/// Fewer successful baseline answers than this (or fewer than half of its
/// requests) measure nothing the regression could be judged on.
pub(crate) const MIN_BASELINE_ANSWERS: usize = 20;
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

/// Serializes a latency that may be infinite (a percentile that reached a
/// failed request) as the string `"inf"`, never as JSON's `null` (which
/// reads as "not measured").
fn latency<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) if x.is_infinite() => s.serialize_str("inf"),
        Some(x) => s.serialize_f64(*x),
        None => s.serialize_none(),
    }
}

/// Latency and errors of one side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct SideStats {
    pub(crate) requests: usize,
    /// Requests that count as answered (see [`Sample::error`]).
    pub(crate) answered: usize,
    pub(crate) errors: usize,
    pub(crate) error_rate: f64,
    /// The first failure, as the answer or the error said it.
    pub(crate) first_error: Option<String>,
    /// The candidate's percentiles are over every request (failures at the
    /// top); the baseline's over its 2xx answers.
    #[serde(serialize_with = "latency")]
    pub(crate) p50_ms: Option<f64>,
    #[serde(serialize_with = "latency")]
    pub(crate) p90_ms: Option<f64>,
    #[serde(serialize_with = "latency")]
    pub(crate) p95_ms: Option<f64>,
    #[serde(serialize_with = "latency")]
    pub(crate) p99_ms: Option<f64>,
}

/// How many answers broke one expectation of a case.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct ExpectationCount {
    pub(crate) expectation: String,
    pub(crate) failed: usize,
}

/// One case's results on the candidate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct CaseResult {
    pub(crate) name: String,
    pub(crate) passed: bool,
    pub(crate) requests: usize,
    /// Requests that failed (no answer, or an unasked 429/5xx).
    pub(crate) errors: usize,
    /// Answers that broke at least one expectation.
    pub(crate) failed_requests: usize,
    /// Each broken expectation and how many answers broke it.
    pub(crate) failed_by_expectation: Vec<ExpectationCount>,
    #[serde(serialize_with = "latency")]
    pub(crate) p50_ms: Option<f64>,
    #[serde(serialize_with = "latency")]
    pub(crate) p95_ms: Option<f64>,
    pub(crate) baseline_p95_ms: Option<f64>,
    /// The broken expectations of its first failing answer.
    pub(crate) mismatches: Vec<Mismatch>,
}

/// The regression test and its numbers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Regression {
    /// The test by name and direction.
    pub(crate) test: String,
    pub(crate) limit: f64,
    /// Candidate requests (failures included) and baseline 2xx answers.
    pub(crate) candidate_n: usize,
    pub(crate) baseline_n: usize,
    pub(crate) u: f64,
    pub(crate) p_value: f64,
    pub(crate) method: Method,
    pub(crate) alpha: f64,
    /// Descriptions, not the decision: candidate over baseline.
    #[serde(serialize_with = "latency")]
    pub(crate) p50_ratio: Option<f64>,
    #[serde(serialize_with = "latency")]
    pub(crate) p95_ratio: Option<f64>,
    /// The smallest slowdown (× the baseline) this sample detects with
    /// [`stats::DETECT_POWER`].
    pub(crate) detectable_slowdown: Option<f64>,
    pub(crate) regressed: bool,
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
    /// Whether every counted request finished inside the run's budget.
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

/// The candidate's latency sample over every request of `samples`.
fn candidate_latencies(samples: &[&Sample], slowest_answer: f64) -> Vec<f64> {
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

fn side_of(samples: &[&Sample], latencies: &[f64]) -> SideStats {
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
        p50_ms: p(50.0),
        p90_ms: p(90.0),
        p95_ms: p(95.0),
        p99_ms: p(99.0),
    }
}

fn ms(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(x) if x.is_infinite() => "∞".into(),
        Some(x) => format!("{x:.1}"),
    }
}

/// A p-value: four decimals, scientific notation when smaller.
fn p_text(p: f64) -> String {
    if p >= 1e-4 {
        format!("{p:.4}")
    } else {
        format!("{p:.1e}")
    }
}

/// One failed objective: the heading's few words and the full sentence.
struct Reason {
    short: String,
    long: String,
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

/// Judges the `sampled` requests of `cases` against `objectives`;
/// `baseline` says whether a baseline was sampled and `baseline_name`
/// names it in messages.
pub(crate) fn judge(
    cases: &[Case],
    sampled: &Sampled,
    planned: usize,
    objectives: &Objectives,
    baseline: &Baseline,
    baseline_name: &str,
) -> Judged {
    let samples = &sampled.samples;
    let of = |side: Side, case: Option<usize>| -> Vec<&Sample> {
        samples
            .iter()
            .filter(|s| s.side == side && case.is_none_or(|c| s.case == c))
            .collect()
    };
    let cand = of(Side::Candidate, None);
    let slowest = answered(&cand).into_iter().fold(0.0_f64, f64::max);
    let candidate = side_of(&cand, &candidate_latencies(&cand, slowest));
    let base_samples = of(Side::Baseline, None);
    let base_ms = answered(&base_samples);
    let base_stats = side_of(&base_samples, &base_ms);
    let measured = *baseline == Baseline::Sampled
        && base_stats.answered >= MIN_BASELINE_ANSWERS
        && 2 * base_stats.answered >= base_stats.requests;
    let results: Vec<CaseResult> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            case_result(
                c,
                &of(Side::Candidate, Some(i)),
                &of(Side::Baseline, Some(i)),
                slowest,
                measured,
            )
        })
        .collect();

    let mut reasons: Vec<Reason> = Vec::new();
    if !sampled.complete {
        let done = cand.len();
        let base_done = base_samples.len();
        reasons.push(Reason {
            short: format!("the sample did not finish in the run's budget ({done} of {planned})"),
            long: format!(
                "the sample did not finish inside the run's budget (wait budget + predict-timeout): {done} of {planned} candidate requests{} had finished when it ran out; a partial sample passes nothing",
                if *baseline == Baseline::Sampled {
                    format!(" and {base_done} of {planned} baseline requests")
                } else {
                    String::new()
                }
            ),
        });
    }
    let failed: Vec<&CaseResult> = results.iter().filter(|r| !r.passed).collect();
    if !failed.is_empty() {
        let names: Vec<String> = failed
            .iter()
            .map(|r| {
                format!(
                    "{:?} (failed {} of {})",
                    r.name,
                    r.failed_requests.max(r.errors),
                    r.requests
                )
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
    if candidate.error_rate > objectives.max_error_rate {
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
    if let (Some(max), Some(p95)) = (objectives.max_latency_p95_ms, candidate.p95_ms)
        && p95 > max
    {
        let (v, l) = alike(p95, max, 1);
        let failures = if candidate.errors > 0 {
            format!(
                " (over all {} requests; {} failed and count as slower than every answer)",
                candidate.requests, candidate.errors
            )
        } else {
            String::new()
        };
        reasons.push(Reason {
            short: format!("p95 {v} ms (max {l} ms)"),
            long: format!("p95 latency {v} ms is above max-latency-p95-ms {l}{failures}"),
        });
    }
    let mut regression = None;
    if let Some(limit) = objectives.max_latency_regression {
        match baseline {
            Baseline::Unknown(why) => reasons.push(Reason {
                short: "the baseline could not be found".into(),
                long: format!("{why}; the regression cannot be judged"),
            }),
            Baseline::Sampled if !measured => {
                let first = base_stats
                    .first_error
                    .as_deref()
                    .map_or(String::new(), |e| format!(": first failure {e}"));
                reasons.push(Reason {
                    short: format!(
                        "baseline not measured ({} of {} answered)",
                        base_stats.answered, base_stats.requests
                    ),
                    long: format!(
                        "the serving deployment {baseline_name} answered {} of {} requests with a 2xx{first}; the regression cannot be judged (at least {MIN_BASELINE_ANSWERS} answers and half of its requests are needed)",
                        base_stats.answered, base_stats.requests
                    ),
                });
            }
            Baseline::Sampled if sampled.complete => {
                // Every failure at +∞: slower than any answer on either side.
                let cand_lat = candidate_latencies(&cand, f64::INFINITY);
                if let Some(r) = regress(&cand_lat, &base_ms, limit, &candidate, &base_stats) {
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

fn case_result(
    c: &Case,
    mine: &[&Sample],
    base: &[&Sample],
    slowest: f64,
    baseline_measured: bool,
) -> CaseResult {
    let answered_n = mine.iter().filter(|s| s.error.is_none()).count();
    let failing: Vec<&&Sample> = mine.iter().filter(|s| !s.mismatches.is_empty()).collect();
    let mut by: Vec<ExpectationCount> = Vec::new();
    for s in &failing {
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
    let mut mismatches = failing
        .first()
        .map(|s| s.mismatches.clone())
        .unwrap_or_default();
    // Every request of the case was an error: it never showed it holds.
    if answered_n == 0 && !mine.is_empty() && mismatches.is_empty() {
        let first = mine
            .iter()
            .find_map(|s| s.error.clone())
            .unwrap_or_default();
        mismatches.push(Mismatch {
            expectation: "status".into(),
            expected: format!("HTTP {}", c.status),
            got: first,
        });
        by.push(ExpectationCount {
            expectation: "an answer".into(),
            failed: mine.len(),
        });
    }
    let lat = candidate_latencies(mine, slowest);
    let base_ms = answered(base);
    CaseResult {
        name: c.name.clone(),
        passed: mismatches.is_empty(),
        requests: mine.len(),
        errors: mine.len() - answered_n,
        failed_requests: failing.len(),
        failed_by_expectation: by,
        p50_ms: stats::percentile(&lat, 50.0),
        p95_ms: stats::percentile(&lat, 95.0),
        baseline_p95_ms: baseline_measured
            .then(|| stats::percentile(&base_ms, 95.0))
            .flatten(),
        mismatches,
    }
}

/// The shifted test over the candidate's latencies (failures at +∞) and
/// the baseline's 2xx answers.
fn regress(
    cand: &[f64],
    base: &[f64],
    limit: f64,
    c: &SideStats,
    b: &SideStats,
) -> Option<Regression> {
    let mw: MannWhitney = stats::slower_than_scaled(cand, base, limit)?;
    let ratio = |x: Option<f64>, y: Option<f64>| Some(x? / y?.max(f64::MIN_POSITIVE));
    Some(Regression {
        test: format!("one-sided Mann–Whitney U: candidate slower than {limit} × baseline"),
        limit,
        candidate_n: cand.len(),
        baseline_n: base.len(),
        u: mw.u,
        p_value: mw.p,
        method: mw.method,
        alpha: REGRESSION_ALPHA,
        p50_ratio: ratio(c.p50_ms, b.p50_ms),
        p95_ratio: ratio(c.p95_ms, b.p95_ms),
        detectable_slowdown: stats::log_sd(base).and_then(|sd| {
            stats::detectable_slowdown(cand.len(), base.len(), sd, limit, REGRESSION_ALPHA)
        }),
        regressed: mw.p < REGRESSION_ALPHA,
    })
}

fn ratio_text(r: Option<f64>) -> String {
    match r {
        None => "–".into(),
        Some(x) if x.is_infinite() => "∞".into(),
        Some(x) => format!("{x:.2}×"),
    }
}

fn regression_reason(r: &Regression) -> Reason {
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
            "latency regression: the candidate is slower than {}× the baseline ({}; {} over {} candidate requests and {} baseline answers × {}: U = {:.1}, p = {} < {}); p50 {} and p95 {} the baseline's",
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
        ),
    }
}

fn pass_headline(cases: &[CaseResult], c: &SideStats, r: Option<&Regression>) -> String {
    let mut h = format!(
        "{}/{} cases · p95 {} ms",
        cases.len(),
        cases.len(),
        ms(c.p95_ms)
    );
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

impl Analysis {
    /// The numbers behind the verdict, in one line.
    fn numbers_line(&self) -> String {
        let passed = self.cases.iter().filter(|c| c.passed).count();
        let (e, m) = alike(
            self.candidate.error_rate * 100.0,
            self.objectives.max_error_rate * 100.0,
            1,
        );
        let mut parts = vec![
            format!("{passed}/{} cases passed", self.cases.len()),
            format!(
                "p50 {} ms, p95 {} ms over {} of {} requests",
                ms(self.candidate.p50_ms),
                ms(self.candidate.p95_ms),
                self.candidate.requests,
                self.requests_planned,
            ),
            format!("errors {e}% (max {m}%)"),
        ];
        if let Some(b) = &self.baseline {
            parts.push(format!(
                "baseline p95 {} ms over {} answers ({} failed)",
                ms(b.p95_ms),
                b.answered,
                b.errors
            ));
        }
        if let Some(r) = &self.regression {
            parts.push(format!(
                "one-sided Mann–Whitney U, are the candidate's {} latencies slower than {} × the baseline's {}? U = {:.1}, p = {} ({}; p50 {}, p95 {} the baseline's)",
                r.candidate_n,
                r.limit,
                r.baseline_n,
                r.u,
                p_text(r.p_value),
                if r.regressed { "yes" } else { "no" },
                ratio_text(r.p50_ratio),
                ratio_text(r.p95_ratio),
            ));
        }
        parts.join(" · ")
    }

    /// The verdict in one line, for the log.
    pub(crate) fn verdict_line(&self) -> String {
        let word = if self.passed { "passed" } else { "FAILED" };
        format!("Evidence {word} ({}): {}", self.phase, self.numbers_line())
    }

    /// What the sample could detect, when a regression was judged and
    /// did not fire (a pass can be weak; a failure needs no such line).
    pub(crate) fn detect_line(&self) -> Option<String> {
        let r = self.regression.as_ref().filter(|r| !r.regressed)?;
        Some(match r.detectable_slowdown {
            Some(d) => format!(
                "With {} candidate requests and {} baseline answers at this spread, the test detects a slowdown of {d:.2}× the baseline {:.0} % of the time; a smaller one can pass.",
                r.candidate_n,
                r.baseline_n,
                stats::DETECT_POWER * 100.0
            ),
            None => format!(
                "With {} candidate requests and {} baseline answers, no slowdown is detected reliably: a pass here is weak.",
                r.candidate_n, r.baseline_n
            ),
        })
    }

    /// A case's result cell.
    fn case_cell(c: &CaseResult) -> String {
        if c.passed {
            "✅ pass".into()
        } else if c.failed_requests > 0 {
            format!("❌ failed {} of {}", c.failed_requests, c.requests)
        } else {
            format!("❌ no answer in {}", c.requests)
        }
    }

    /// The log lines of the cases.
    pub(crate) fn case_lines(&self) -> Vec<String> {
        self.cases
            .iter()
            .map(|c| {
                let failures: Vec<String> = c
                    .failed_by_expectation
                    .iter()
                    .map(|e| format!("{} failed {} of {}", e.expectation, e.failed, c.requests))
                    .collect();
                format!(
                    "  case {:?}: {} ({} requests, {} errors, p50 {} ms, p95 {} ms){}",
                    c.name,
                    if c.passed { "pass" } else { "FAIL" },
                    c.requests,
                    c.errors,
                    ms(c.p50_ms),
                    ms(c.p95_ms),
                    if failures.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", failures.join(", "))
                    }
                )
            })
            .collect()
    }

    /// The Markdown section of the step summary: why in the heading, the
    /// verdict line and each reason below it, a table of the cases, the
    /// failing expectations, and a chart of the candidate's latency
    /// against the baseline's.
    pub(crate) fn markdown(&self) -> String {
        let mut out = format!(
            "\n### {} Evidence {} ({}): {}\n\n{}\n\n",
            if self.passed { "✅" } else { "❌" },
            if self.passed { "passed" } else { "failed" },
            self.phase,
            markdown::inline(&self.headline),
            markdown::inline(&self.numbers_line())
        );
        for r in &self.reasons {
            out.push_str(&format!("- {}\n", markdown::inline(r)));
        }
        for s in &self.skipped {
            out.push_str(&format!("- ⚠️ {}\n", markdown::inline(s)));
        }
        if let Some(d) = self.detect_line() {
            out.push_str(&format!("- {}\n", markdown::inline(&d)));
        }
        if !self.reasons.is_empty() || !self.skipped.is_empty() || self.regression.is_some() {
            out.push('\n');
        }
        out.push_str("| Case | Result | Requests | Errors | p50 ms | p95 ms | Baseline p95 ms |\n");
        out.push_str("|------|--------|---------:|-------:|-------:|-------:|----------------:|\n");
        for c in &self.cases {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                markdown::inline(&c.name),
                Self::case_cell(c),
                c.requests,
                c.errors,
                ms(c.p50_ms),
                ms(c.p95_ms),
                ms(c.baseline_p95_ms)
            ));
        }
        for c in self.cases.iter().filter(|c| !c.passed) {
            let counts: Vec<String> = c
                .failed_by_expectation
                .iter()
                .map(|e| format!("{} failed {} of {}", e.expectation, e.failed, c.requests))
                .collect();
            out.push_str(&format!(
                "\n<details><summary>{}: {}</summary>\n\nThe first failing answer:\n\n```diff\n",
                markdown::inline(&c.name),
                markdown::inline(&counts.join(", "))
            ));
            for m in &c.mismatches {
                out.push_str(&format!(
                    "# {}\n- {}\n+ {}\n",
                    markdown::fence_line(&m.expectation),
                    markdown::fence_line(&m.expected),
                    markdown::fence_line(&m.got)
                ));
            }
            out.push_str("```\n</details>\n");
        }
        out.push_str(&self.chart());
        out
    }

    /// A Mermaid `xychart-beta` (GitHub renders it): the candidate's
    /// percentiles as blue bars, the measured baseline's as an orange
    /// line, on a y-axis that starts near the data; a legend line below
    /// for renderers that draw none.
    fn chart(&self) -> String {
        let c = &self.candidate;
        let series = |s: &SideStats| [s.p50_ms, s.p90_ms, s.p95_ms, s.p99_ms];
        let mut finite: Vec<f64> = series(c)
            .into_iter()
            .flatten()
            .filter(|v| v.is_finite())
            .collect();
        if let Some(b) = &self.baseline {
            finite.extend(series(b).into_iter().flatten().filter(|v| v.is_finite()));
        }
        if finite.is_empty() {
            return String::new();
        }
        let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = finite.iter().copied().fold(0.0_f64, f64::max);
        let (bottom, top) = axis(lo, hi);
        let prec = axis_decimals(bottom, top);
        let pts = |s: &SideStats| {
            series(s)
                .map(|v| match v {
                    Some(x) if x.is_finite() => format!("{x:.1}"),
                    // A percentile that reached a failed request: drawn at the top.
                    _ => format!("{top:.prec$}"),
                })
                .join(", ")
        };
        let mut out = format!(
            "\n```mermaid\n%%{{init: {{\"xyChart\": {{\"showLegend\": true}}, \"themeVariables\": {{\"xyChart\": {{\"plotColorPalette\": \"{CANDIDATE_COLOUR}, {BASELINE_COLOUR}\"}}}}}}}}%%\nxychart-beta\n    title \"Latency (ms) by percentile\"\n    x-axis [p50, p90, p95, p99]\n    y-axis \"ms\" {bottom:.prec$} --> {top:.prec$}\n    bar \"candidate\" [{}]\n",
            pts(c)
        );
        if let Some(b) = &self.baseline {
            out.push_str(&format!("    line \"baseline\" [{}]\n", pts(b)));
        }
        out.push_str("```\n\n");
        let mut legend = match &self.baseline {
            Some(_) => "🟦 candidate (bars) · 🟧 baseline (line)".to_string(),
            None => "🟦 candidate (bars) · no baseline was measured".to_string(),
        };
        legend.push_str(&format!(" · the y-axis starts at {bottom:.prec$} ms"));
        if series(c).iter().flatten().any(|v| v.is_infinite()) {
            legend.push_str(" · a bar at the top reached a failed request (∞)");
        }
        out.push_str(&legend);
        out.push('\n');
        out
    }
}

const CANDIDATE_COLOUR: &str = "#1f6feb";
const BASELINE_COLOUR: &str = "#f0883e";

/// A y-axis from a round number a little under `lo` to one a little over
/// `hi`: a 20 % difference fills a fifth of the chart, not a sliver.
fn axis(lo: f64, hi: f64) -> (f64, f64) {
    let span = (hi - lo).max(hi * 0.05).max(1e-3);
    let step = 10f64.powf((span / 5.0).log10().floor());
    let bottom = ((lo - span * 0.2) / step).floor() * step;
    let top = ((hi + span * 0.1) / step).ceil() * step;
    (bottom.max(0.0), top.max(bottom + step))
}

/// Decimals that tell the axis's ends apart (sub-millisecond models too).
fn axis_decimals(bottom: f64, top: f64) -> usize {
    let span = top - bottom;
    if span >= 5.0 {
        0
    } else {
        ((5.0 / span).log10().ceil() as usize).min(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn cases(n: usize) -> Vec<Case> {
        let dir = tempfile::tempdir().unwrap();
        let yaml: String = (0..n)
            .map(|i| format!("- {{name: c{i}, payload: {{}}}}\n"))
            .collect();
        super::super::cases::parse(&yaml, false, dir.path()).unwrap()
    }

    fn objectives() -> Objectives {
        Objectives {
            max_error_rate: 0.0,
            max_latency_p95_ms: None,
            max_latency_regression: Some(1.2),
        }
    }

    fn done(samples: Vec<Sample>) -> Sampled {
        Sampled {
            samples,
            complete: true,
        }
    }

    fn judge_all(cs: &[Case], s: Vec<Sample>, o: &Objectives, b: Baseline) -> Judged {
        let n = s.iter().filter(|s| s.side == Side::Candidate).count();
        judge(cs, &done(s), n, o, &b, "v1dep001")
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
        assert!(!j.regression.unwrap().regressed);
        assert!(j.reasons.is_empty(), "{:?}", j.reasons);
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
    fn failing_cases_count_their_failures() {
        let cs = cases(2);
        let mut samples = vec![
            sample(Side::Candidate, 0, 5.0, false, false),
            sample(Side::Candidate, 0, 5.0, true, false),
        ];
        for i in 0..100 {
            samples.push(sample(Side::Candidate, 1, 5.0, false, i % 10 == 0));
        }
        let mut o = objectives();
        o.max_latency_regression = None;
        let j = judge_all(&cs, samples, &o, Baseline::None("x".into()));
        assert!(j.cases[0].passed);
        assert!(!j.cases[1].passed);
        assert_eq!(j.cases[1].failed_requests, 10);
        assert_eq!(j.cases[1].failed_by_expectation[0].failed, 10);
        assert_eq!(j.cases[1].mismatches[0].expectation, "pointer /a");
        assert_eq!(j.candidate.errors, 1);
        assert_eq!(j.reasons.len(), 2, "{:?}", j.reasons);
        assert!(
            j.reasons[0].contains("\"c1\" (failed 10 of 100)"),
            "{:?}",
            j.reasons
        );
        assert!(j.reasons[1].contains("max-error-rate"));
        assert_eq!(j.headline, "1 of 2 cases failed (+1 more)");
    }

    #[test]
    fn a_heading_stays_under_100_characters() {
        let cs = cases(1);
        let mut o = objectives();
        o.max_latency_regression = None;
        o.max_latency_p95_ms = Some(1.0);
        let s = vec![sample(Side::Candidate, 0, 5.0, true, false); 3];
        let j = judge(
            &cs,
            &Sampled {
                samples: s,
                complete: false,
            },
            1000,
            &o,
            &Baseline::None("x".into()),
            "",
        );
        let heading = format!("❌ Evidence failed (environment): {}", j.headline);
        assert!(heading.chars().count() < 100, "{heading}");
        assert!(
            j.headline.starts_with("the sample did not finish"),
            "{}",
            j.headline
        );
    }

    #[test]
    fn the_axis_starts_near_the_data() {
        let (b, t) = axis(100.0, 120.0);
        assert!(
            (80.0..100.0).contains(&b) && t > 120.0 && t <= 130.0,
            "{b} {t}"
        );
        let (b, t) = axis(0.5, 0.6);
        assert!(b < 0.5 && t > 0.6, "{b} {t}");
    }
}
