//! The verdict over one sample: per-case results, the candidate's and the
//! baseline's latency and error rate, the regression test, and which
//! objective failed. Everything a reader or a program needs is in
//! [`Analysis`], serialized as is for `--json` and `analysis-file`.

use serde::Serialize;

use super::cases::Case;
use super::check::Mismatch;
use super::metrics::Live;
use super::sampler::{Sample, Side};
use super::stats::{self, MannWhitney};
use crate::ci::markdown;

/// The significance level of the regression test.
pub(crate) const REGRESSION_ALPHA: f64 = 0.05;

/// The objectives a sample is judged by.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Objectives {
    pub(crate) max_error_rate: f64,
    pub(crate) max_latency_p95_ms: Option<f64>,
    pub(crate) max_latency_regression: Option<f64>,
}

/// Latency and errors of one side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct SideStats {
    pub(crate) requests: usize,
    pub(crate) errors: usize,
    pub(crate) error_rate: f64,
    pub(crate) p50_ms: Option<f64>,
    pub(crate) p90_ms: Option<f64>,
    pub(crate) p95_ms: Option<f64>,
    pub(crate) p99_ms: Option<f64>,
}

/// One case's results on the candidate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct CaseResult {
    pub(crate) name: String,
    pub(crate) passed: bool,
    pub(crate) requests: usize,
    pub(crate) errors: usize,
    pub(crate) failed_requests: usize,
    pub(crate) p50_ms: Option<f64>,
    pub(crate) p95_ms: Option<f64>,
    pub(crate) baseline_p95_ms: Option<f64>,
    /// The broken expectations of its first failing answer.
    pub(crate) mismatches: Vec<Mismatch>,
}

/// The regression test's numbers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Regression {
    /// Candidate p95 over baseline p95.
    pub(crate) ratio: f64,
    pub(crate) limit: Option<f64>,
    pub(crate) u: f64,
    pub(crate) p_value: f64,
    pub(crate) alpha: f64,
    pub(crate) regressed: bool,
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
    pub(crate) objectives: Objectives,
    pub(crate) cases: Vec<CaseResult>,
    pub(crate) candidate: SideStats,
    pub(crate) baseline: Option<SideStats>,
    pub(crate) regression: Option<Regression>,
    /// Readings of real traffic during a rolling promotion.
    pub(crate) live: Vec<Live>,
    pub(crate) passed: bool,
    /// Each objective that failed, as a sentence.
    pub(crate) reasons: Vec<String>,
}

fn side_of(samples: &[&Sample]) -> SideStats {
    let ms: Vec<f64> = samples
        .iter()
        .filter(|s| s.error.is_none())
        .map(|s| s.ms)
        .collect();
    let errors = samples.iter().filter(|s| s.error.is_some()).count();
    let p = |q| stats::percentile(&ms, q);
    SideStats {
        requests: samples.len(),
        errors,
        error_rate: if samples.is_empty() {
            0.0
        } else {
            errors as f64 / samples.len() as f64
        },
        p50_ms: p(50.0),
        p90_ms: p(90.0),
        p95_ms: p(95.0),
        p99_ms: p(99.0),
    }
}

fn answered_ms(samples: &[Sample], side: Side, case: Option<usize>) -> Vec<f64> {
    samples
        .iter()
        .filter(|s| s.side == side && s.error.is_none() && case.is_none_or(|c| s.case == c))
        .map(|s| s.ms)
        .collect()
}

/// Judges `samples` of `cases` against `objectives`.
pub(crate) fn judge(
    cases: &[Case],
    samples: &[Sample],
    objectives: &Objectives,
    has_baseline: bool,
) -> (
    Vec<CaseResult>,
    SideStats,
    Option<SideStats>,
    Option<Regression>,
    Vec<String>,
) {
    let of = |side: Side| -> Vec<&Sample> { samples.iter().filter(|s| s.side == side).collect() };
    let candidate = side_of(&of(Side::Candidate));
    let baseline = has_baseline.then(|| side_of(&of(Side::Baseline)));
    let results: Vec<CaseResult> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mine: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.side == Side::Candidate && s.case == i)
                .collect();
            let answered = mine.iter().filter(|s| s.error.is_none()).count();
            let failing: Vec<&&Sample> = mine.iter().filter(|s| !s.mismatches.is_empty()).collect();
            let ms = answered_ms(samples, Side::Candidate, Some(i));
            let base = answered_ms(samples, Side::Baseline, Some(i));
            let mut mismatches = failing
                .first()
                .map(|s| s.mismatches.clone())
                .unwrap_or_default();
            // Every request of the case was an error: it never showed it holds.
            if answered == 0 && !mine.is_empty() && mismatches.is_empty() {
                let last = mine
                    .last()
                    .and_then(|s| s.error.clone())
                    .unwrap_or_default();
                mismatches.push(Mismatch {
                    expectation: "status".into(),
                    expected: format!("HTTP {}", c.status),
                    got: last,
                });
            }
            CaseResult {
                name: c.name.clone(),
                passed: mismatches.is_empty(),
                requests: mine.len(),
                errors: mine.len() - answered,
                failed_requests: failing.len(),
                p50_ms: stats::percentile(&ms, 50.0),
                p95_ms: stats::percentile(&ms, 95.0),
                baseline_p95_ms: stats::percentile(&base, 95.0),
                mismatches,
            }
        })
        .collect();

    let mut reasons = Vec::new();
    let failed = results.iter().filter(|r| !r.passed).count();
    if failed > 0 {
        let names: Vec<String> = results
            .iter()
            .filter(|r| !r.passed)
            .map(|r| format!("{:?}", r.name))
            .collect();
        reasons.push(format!(
            "{failed} of {} cases failed: {}",
            results.len(),
            names.join(", ")
        ));
    }
    if candidate.error_rate > objectives.max_error_rate {
        reasons.push(format!(
            "error rate {:.1}% ({} of {} requests) is above max-error-rate {:.1}%",
            candidate.error_rate * 100.0,
            candidate.errors,
            candidate.requests,
            objectives.max_error_rate * 100.0
        ));
    }
    if let (Some(max), Some(p95)) = (objectives.max_latency_p95_ms, candidate.p95_ms)
        && p95 > max
    {
        reasons.push(format!(
            "p95 latency {p95:.1} ms is above max-latency-p95-ms {max:.0}"
        ));
    }
    let regression = baseline.as_ref().and_then(|b| {
        let (cp, bp) = (candidate.p95_ms?, b.p95_ms?);
        let mw: MannWhitney = stats::mann_whitney_greater(
            &answered_ms(samples, Side::Candidate, None),
            &answered_ms(samples, Side::Baseline, None),
        )?;
        let ratio = cp / bp.max(f64::MIN_POSITIVE);
        let limit = objectives.max_latency_regression;
        // Both: a ratio past the limit that is noise, or a significant
        // difference too small to matter, does not fail.
        let regressed = limit.is_some_and(|l| ratio > l) && mw.p < REGRESSION_ALPHA;
        Some(Regression {
            ratio,
            limit,
            u: mw.u,
            p_value: mw.p,
            alpha: REGRESSION_ALPHA,
            regressed,
        })
    });
    if let Some(r) = regression.as_ref().filter(|r| r.regressed) {
        reasons.push(format!(
            "latency regression: p95 is {:.2}× the baseline's (limit {:.2}×) and the candidate is slower (Mann–Whitney U = {:.1}, p = {:.4} < {REGRESSION_ALPHA})",
            r.ratio,
            r.limit.unwrap_or_default(),
            r.u,
            r.p_value
        ));
    }
    (results, candidate, baseline, regression, reasons)
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.1}"))
}

impl Analysis {
    /// The verdict in one line.
    pub(crate) fn verdict_line(&self) -> String {
        let passed = self.cases.iter().filter(|c| c.passed).count();
        let mut parts = vec![
            format!("{passed}/{} cases passed", self.cases.len()),
            format!(
                "p50 {} ms, p95 {} ms over {} requests",
                ms(self.candidate.p50_ms),
                ms(self.candidate.p95_ms),
                self.candidate.requests
            ),
            format!(
                "errors {:.1}% (max {:.1}%)",
                self.candidate.error_rate * 100.0,
                self.objectives.max_error_rate * 100.0
            ),
        ];
        if let (Some(b), Some(r)) = (&self.baseline, &self.regression) {
            parts.push(format!(
                "baseline p95 {} ms: ratio {:.2}, U = {:.1}, p = {:.4}",
                ms(b.p95_ms),
                r.ratio,
                r.u,
                r.p_value
            ));
        }
        let word = if self.passed { "passed" } else { "FAILED" };
        format!("Evidence {word} ({}): {}", self.phase, parts.join(" · "))
    }

    /// The Markdown section of the step summary: the verdict on top, a
    /// table of the cases, the failing expectations, and a chart of the
    /// candidate's latency against the baseline's.
    pub(crate) fn markdown(&self) -> String {
        let mut out = format!(
            "\n### {} {}\n\n",
            if self.passed { "✅" } else { "❌" },
            markdown::inline(&self.verdict_line())
        );
        if !self.reasons.is_empty() {
            for r in &self.reasons {
                out.push_str(&format!("- {}\n", markdown::inline(r)));
            }
            out.push('\n');
        }
        out.push_str("| Case | Result | Requests | Errors | p50 ms | p95 ms | Baseline p95 ms |\n");
        out.push_str("|------|--------|---------:|-------:|-------:|-------:|----------------:|\n");
        for c in &self.cases {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                markdown::inline(&c.name),
                if c.passed { "✅ pass" } else { "❌ fail" },
                c.requests,
                c.errors,
                ms(c.p50_ms),
                ms(c.p95_ms),
                ms(c.baseline_p95_ms)
            ));
        }
        for c in self.cases.iter().filter(|c| !c.passed) {
            out.push_str(&format!(
                "\n<details><summary>{} failed</summary>\n\n```diff\n",
                markdown::inline(&c.name)
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
    /// percentiles as bars, the baseline's as a line.
    fn chart(&self) -> String {
        let c = &self.candidate;
        let pts = |s: &SideStats| {
            [s.p50_ms, s.p90_ms, s.p95_ms, s.p99_ms]
                .map(|v| format!("{:.1}", v.unwrap_or(0.0)))
                .join(", ")
        };
        if c.p50_ms.is_none() {
            return String::new();
        }
        let top = [Some(c), self.baseline.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|s| s.p99_ms)
            .fold(0.0_f64, f64::max);
        let title = if self.baseline.is_some() {
            "Latency ms: candidate (bars) vs baseline (line)"
        } else {
            "Latency ms: candidate"
        };
        let mut out = format!(
            "\n```mermaid\nxychart-beta\n    title \"{title}\"\n    x-axis [p50, p90, p95, p99]\n    y-axis \"ms\" 0 --> {:.0}\n    bar [{}]\n",
            (top * 1.1).ceil().max(1.0),
            pts(c)
        );
        if let Some(b) = &self.baseline {
            out.push_str(&format!("    line [{}]\n", pts(b)));
        }
        out.push_str("```\n");
        out
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

    #[test]
    fn a_slower_candidate_regresses_and_equal_ones_do_not() {
        let cs = cases(1);
        let mut slow = Vec::new();
        let mut equal = Vec::new();
        for i in 0..50 {
            let base = 10.0 + (i % 7) as f64;
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
        let (_, _, _, r, reasons) = judge(&cs, &slow, &objectives(), true);
        let r = r.unwrap();
        assert!(r.regressed && r.ratio > 1.9 && r.p_value < 0.001, "{r:?}");
        assert!(reasons[0].contains("latency regression"), "{reasons:?}");
        let (_, _, _, r, reasons) = judge(&cs, &equal, &objectives(), true);
        assert!(!r.unwrap().regressed);
        assert!(reasons.is_empty());
    }

    #[test]
    fn failing_cases_and_errors_are_reasons() {
        let cs = cases(2);
        let samples = vec![
            sample(Side::Candidate, 0, 5.0, false, false),
            sample(Side::Candidate, 1, 5.0, false, true),
            sample(Side::Candidate, 0, 5.0, true, false),
        ];
        let (results, cand, _, _, reasons) = judge(&cs, &samples, &objectives(), false);
        assert!(results[0].passed);
        assert!(!results[1].passed);
        assert_eq!(results[1].mismatches[0].expectation, "pointer /a");
        assert_eq!(cand.errors, 1);
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(reasons[0].contains("\"c1\""));
        assert!(reasons[1].contains("max-error-rate"));
    }
}
