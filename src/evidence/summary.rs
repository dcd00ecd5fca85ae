//! How an analysis reads: the verdict in one line for the log, the case
//! lines, and the step summary's section (heading, numbers, reasons, the
//! cases' table, the failing answers' diffs and the chart).

use super::side::{ms, p_text, ratio_text};
use super::stats::{self, alike};
use super::verdict::{Analysis, CaseResult};
use crate::ci::markdown;

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
            self.latency_text(),
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

    /// The candidate's latency and what it is over, or that it was not
    /// measured.
    fn latency_text(&self) -> String {
        let c = &self.candidate;
        let sent = format!("{} of {} requests", c.requests, self.requests_planned);
        let to = if c.latency_requests == c.requests {
            ""
        } else {
            " to cases that expect a success"
        };
        match (c.p50_ms, to) {
            (Some(_), "") => format!(
                "p50 {} ms, p95 {} ms over {sent}",
                ms(c.p50_ms),
                ms(c.p95_ms)
            ),
            (Some(_), to) => format!(
                "p50 {} ms, p95 {} ms over the {} requests{to} ({sent})",
                ms(c.p50_ms),
                ms(c.p95_ms),
                c.latency_requests
            ),
            (None, to) => format!(
                "latency not measured: none of the {} requests{to} was answered ({sent})",
                c.latency_requests
            ),
        }
    }

    /// The verdict in one line, for the log.
    pub(crate) fn verdict_line(&self) -> String {
        let word = if self.passed { "passed" } else { "FAILED" };
        format!("Evidence {word} ({}): {}", self.phase, self.numbers_line())
    }

    /// What the regression left out, when it left something out.
    pub(crate) fn left_out_line(&self) -> Option<String> {
        self.regression.as_ref()?.left_out.clone()
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

    /// A case's result cell: every failed request counted once.
    fn case_cell(c: &CaseResult) -> String {
        match (c.passed, c.failed_requests, c.requests) {
            (true, 0, _) => "✅ pass".into(),
            (true, k, n) => format!("⚠️ failed {k} of {n} (no answer, allowed)"),
            (false, _, 0) => "❌ not sent".into(),
            (false, k, n) => format!("❌ failed {k} of {n}"),
        }
    }

    /// How often each expectation of a case failed.
    fn failure_counts(c: &CaseResult) -> Vec<String> {
        c.failed_by_expectation
            .iter()
            .map(|e| format!("{} failed {} of {}", e.expectation, e.failed, c.requests))
            .collect()
    }

    /// The log lines of the cases.
    pub(crate) fn case_lines(&self) -> Vec<String> {
        self.cases
            .iter()
            .map(|c| {
                let failures = Self::failure_counts(c);
                format!(
                    "  case {:?}: {} ({} requests, {} errors, p50 {} ms, p95 {} ms){}",
                    c.name,
                    match (c.passed, c.failed_requests) {
                        (true, 0) => "pass",
                        (true, _) => "pass (max-error-rate allows its requests without an answer)",
                        (false, _) => "FAIL",
                    },
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
        let mut bullets: Vec<String> = self.reasons.clone();
        bullets.extend(self.skipped.iter().map(|s| format!("⚠️ {s}")));
        bullets.extend(self.left_out_line());
        bullets.extend(self.detect_line());
        for b in &bullets {
            out.push_str(&format!("- {}\n", markdown::inline(b)));
        }
        if !bullets.is_empty() {
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
            out.push_str(&format!(
                "\n<details><summary>{}: {}</summary>\n\nThe first failing answer:\n\n```diff\n",
                markdown::inline(&c.name),
                markdown::inline(&Self::failure_counts(c).join(", "))
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
}
