//! The step summary of one target: the result table, links, error, notes,
//! the status history and the sections after them (the evidence).

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::{SUMMARY_TRUNCATED_MARKER, cut_to, sections, write_summary};
use crate::ci::markdown;
use crate::ci::outputs::Outputs;
use crate::kind::Kind;
use crate::secret::scrub;

/// Timing of the predict check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PredictStats {
    pub(crate) total_secs: f64,
    /// Present for streaming (SSE) predictions only.
    pub(crate) stream: Option<StreamStats>,
}

/// Streaming predict figures, as the Python action measures them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StreamStats {
    pub(crate) ttfb_secs: f64,
    pub(crate) tokens: u64,
    pub(crate) tokens_per_sec: f64,
}

/// One row of the status history table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StatusEvent {
    pub(crate) at: SystemTime,
    /// Time since the deploy started.
    pub(crate) elapsed: Duration,
    /// Platform status seen; empty for events without one (e.g. "created").
    pub(crate) status: String,
    /// Classification or event, e.g. `in progress`, `ready`, `HTTP 503, retrying`.
    pub(crate) event: String,
}

impl StatusEvent {
    /// This event with every registered secret replaced by `***` in its
    /// text: a status or an error quoted from the platform may echo one.
    fn redacted(&self) -> StatusEvent {
        StatusEvent {
            status: scrub(&self.status).into_owned(),
            event: scrub(&self.event).into_owned(),
            ..self.clone()
        }
    }
}

/// What the run's latest read of its environment showed serving it: the
/// one value the page's "serves now" line is written from, once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServesNow {
    pub(crate) env: String,
    /// The deployment serving it (`None`: none).
    pub(crate) deployment: Option<String>,
    /// A promotion still moving traffic at that read: to this deployment.
    pub(crate) moving_to: Option<String>,
}

/// Everything the step summary shows.
#[derive(Debug, Clone)]
pub(crate) struct SummaryInput<'a> {
    pub(crate) kind: Kind,
    pub(crate) outputs: &'a Outputs,
    pub(crate) predict: Option<PredictStats>,
    /// Model or chain page in the Baseten app; empty to omit the link.
    pub(crate) page_url: &'a str,
    /// Free-form notes, e.g. `cleanup skipped: environment deployments are kept`.
    pub(crate) notes: &'a [String],
    pub(crate) history: &'a [StatusEvent],
    /// A gated promotion's steps: traffic over time and the rollback.
    pub(crate) promotion: &'a [StatusEvent],
    /// What serves the run's environment, by its latest read.
    pub(crate) serves: Option<&'a ServesNow>,
    /// The run's environment, when it has one: read or not, the page says
    /// what serves it.
    pub(crate) environment: Option<&'a str>,
    /// The failure in plain words when a part of the run has them (a
    /// failed evidence gate's verdict); else the error's start is shown.
    pub(crate) reason: Option<&'a str>,
    /// The verdict's words when the command has its own (teardown,
    /// prune, rollback: what it did); else "Truss Deploy (<kind>): <name>".
    pub(crate) headline: Option<&'a str>,
    /// Markdown sections after the result (the evidence), in order; each
    /// is cut with the marker when the page is full.
    pub(crate) sections: &'a [String],
}

/// What the result's own part leaves for the sections after it when the
/// page is full: enough for each section's heading and verdict.
const SECTIONS_RESERVE_BYTES: usize = 64 * 1024;

/// Renders the summary Markdown, at most `max_bytes` long. The result comes
/// first and keeps its verdict: past the budget its history rows are
/// dropped from the middle (the first row and the latest ones kept), and
/// only then is its text cut; the sections after it share what is left,
/// each cut at a line with the marker (its heading and verdict first).
fn render_summary(input: &SummaryInput<'_>, max_bytes: usize) -> String {
    let wanted: usize = input.sections.iter().map(String::len).sum();
    let own = max_bytes - wanted.min(SECTIONS_RESERVE_BYTES).min(max_bytes / 2);
    let rows = input.history.len();
    let mut text = render_summary_with(input, rows);
    let mut keep = rows;
    while text.len() > own && keep > 0 {
        keep /= 2;
        text = render_summary_with(input, keep);
    }
    let mut page = cut_to(text, own);
    for section in input.sections {
        let left = max_bytes - page.len();
        if section.len() <= left {
            page.push_str(section);
            continue;
        }
        if let Some(cut) = markdown::cut(section, left, SUMMARY_TRUNCATED_MARKER) {
            page.push_str(&cut);
        }
        break;
    }
    page
}

/// Renders with at most `keep` history rows: the first and the latest
/// `keep - 1`. The first screen answers three questions, in this order,
/// before any table or details block: did it work (the heading), why not
/// (the reason, in plain wrapped words), what serves the environment now
/// (from the run's latest read). Then the details. One function per
/// section, each a list of lines (empty: the section is left out).
fn render_summary_with(input: &SummaryInput<'_>, keep: usize) -> String {
    let sections = [
        sections::verdict(input),
        sections::reason(input),
        sections::serves_now(input),
        sections::result_table(input),
        sections::links(input),
        sections::whole_error(input),
        sections::notes(input),
        sections::promotion(input),
        sections::history(input, keep),
    ];
    let mut text = sections
        .into_iter()
        .filter(|s| !s.is_empty())
        .map(|s| s.join("\n"))
        .collect::<Vec<_>>()
        .join("\n\n");
    text.push('\n');
    text
}

/// Appends the summary to the `$GITHUB_STEP_SUMMARY` file at `path`, keeping
/// the whole file within GitHub's 1 MiB (content already there counts).
/// Every registered secret is redacted from each piece before it is cut
/// or escaped, and from the whole page again.
pub(crate) fn append_step_summary(path: &Path, input: &SummaryInput<'_>) -> anyhow::Result<()> {
    let outputs = input.outputs.redacted();
    let page_url = scrub(input.page_url);
    let notes: Vec<String> = input.notes.iter().map(|n| scrub(n).into_owned()).collect();
    let history: Vec<StatusEvent> = input.history.iter().map(StatusEvent::redacted).collect();
    let promotion: Vec<StatusEvent> = input.promotion.iter().map(StatusEvent::redacted).collect();
    let headline = input.headline.map(|h| scrub(h).into_owned());
    let sections: Vec<String> = input
        .sections
        .iter()
        .map(|s| scrub(s).into_owned())
        .collect();
    let input = SummaryInput {
        outputs: &outputs,
        page_url: &page_url,
        notes: &notes,
        history: &history,
        promotion: &promotion,
        sections: &sections,
        headline: headline.as_deref(),
        ..input.clone()
    };
    write_summary(path, |budget| render_summary(&input, budget))
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::ci::outputs::tests::full_outputs;
    use crate::ci::summary::STEP_SUMMARY_MAX_BYTES;
    use crate::outcome::Status;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn summary_for_a_successful_model_deploy() {
        let outputs = full_outputs();
        let history = [
            StatusEvent {
                at: at(1_700_000_000),
                elapsed: Duration::ZERO,
                status: String::new(),
                event: "deployment created".into(),
            },
            StatusEvent {
                at: at(1_700_000_042),
                elapsed: Duration::from_millis(42_460),
                status: "ACTIVE".into(),
                event: "ready".into(),
            },
        ];
        let notes = ["cleanup: deployment deactivated".to_string()];
        let input = SummaryInput {
            kind: Kind::Model,
            outputs: &outputs,
            predict: Some(PredictStats {
                total_secs: 0.534,
                stream: None,
            }),
            page_url: "https://app.baseten.co/models/abc123/overview",
            notes: &notes,
            history: &history,
            promotion: &[],
            serves: None,
            environment: None,
            reason: None,
            headline: None,
            sections: &[],
        };
        let want = "\
## ✅ Truss Deploy (Model): my-model

| Metric | Value |
|--------|-------|
| **Status** | `success` |
| **Model ID** | `abc123` |
| **Deployment ID** | `dep456` |
| **Deploy Time** | 42.5s |
| **Predict Total Time** | 0.53s |
| **Last Platform Status** | `ACTIVE` |

[View logs](https://app.baseten.co/models/abc123/logs/dep456) · [Model page](https://app.baseten.co/models/abc123/overview)

**Notes:**

- cleanup: deployment deactivated

### Status history

| Time (UTC) | Elapsed | Status | Event |
|------------|---------|--------|-------|
| 2023-11-14 22:13:20 | 0.0s |  | deployment created |
| 2023-11-14 22:14:02 | 42.4s | `ACTIVE` | ready |
";
        assert_eq!(render_summary(&input, STEP_SUMMARY_MAX_BYTES), want);
    }

    #[test]
    fn summary_for_a_failed_chain_deploy() {
        let mut outputs = Outputs::new(Status::DeployTimeout);
        outputs.chain_id = "ch1".into();
        outputs.model_name = "my|chain".into();
        outputs.error_message =
            "chainlet Hello still DEPLOYING after 45m00s\nlast poll: HTTP 503 ```busy```".into();
        let history = [StatusEvent {
            at: at(1_709_164_800),
            elapsed: Duration::from_secs(2700),
            status: "DEPLOYING".into(),
            event: "deadline reached | <giving up>".into(),
        }];
        let notes = ["cleanup skipped: no deployment was created".to_string()];
        let input = SummaryInput {
            kind: Kind::Chain,
            outputs: &outputs,
            predict: None,
            page_url: "",
            notes: &notes,
            history: &history,
            promotion: &[],
            serves: None,
            environment: None,
            reason: None,
            headline: None,
            sections: &[],
        };
        let want = "\
## ❌ Truss Deploy (Chain): my\\|chain

**Why:** `deploy_timeout`: chainlet Hello still DEPLOYING after 45m00s last poll: HTTP 503 \\`\\`\\`busy\\`\\`\\`

| Metric | Value |
|--------|-------|
| **Status** | `deploy_timeout` |
| **Chain ID** | `ch1` |
| **Deployment ID** | N/A |
| **Deploy Time** | N/A |

**Notes:**

- cleanup skipped: no deployment was created

### Status history

| Time (UTC) | Elapsed | Status | Event |
|------------|---------|--------|-------|
| 2024-02-29 00:00:00 | 45m00s | `DEPLOYING` | deadline reached \\| &lt;giving up&gt; |
";
        assert_eq!(render_summary(&input, STEP_SUMMARY_MAX_BYTES), want);
    }

    /// The first screen: the verdict, the reason in plain words (a long
    /// error cut between words, the whole text below the details; a
    /// failed gate's own sentence when it has one), what serves the
    /// environment, then the table.
    #[test]
    fn the_first_screen_says_why_in_plain_words_and_what_serves() {
        let mut outputs = full_outputs();
        outputs.status = Status::PredictFailed;
        outputs.error_message =
            format!("evidence failed on the deployment: {}", "word ".repeat(100));
        let serves = ServesNow {
            env: "production".into(),
            deployment: Some("v1dep001".into()),
            moving_to: None,
        };
        let input = SummaryInput {
            kind: Kind::Model,
            outputs: &outputs,
            predict: None,
            page_url: "",
            notes: &[],
            history: &[],
            promotion: &[],
            serves: Some(&serves),
            environment: Some("production"),
            reason: None,
            headline: None,
            sections: &[],
        };
        let page = render_summary(&input, STEP_SUMMARY_MAX_BYTES);
        let why = page.lines().find(|l| l.starts_with("**Why:**")).unwrap();
        assert!(why.ends_with("word … (the whole error is below)"), "{why}");
        assert!(why.chars().count() < 400, "{why}");
        let order = [
            "## ❌ Truss Deploy (Model): my-model",
            "**Why:** `predict_failed`: evidence failed",
            "**production serves:** deployment `v1dep001` (the run's last read of it)",
            "| Metric | Value |",
            "**The whole error:**",
        ];
        let at: Vec<usize> = order.iter().map(|o| page.find(o).unwrap()).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{page}");

        let reason = "Evidence failed (deployment): latency 1.8× the baseline (limit 1.2×)";
        let page = render_summary(
            &SummaryInput {
                reason: Some(reason),
                serves: None,
                ..input
            },
            STEP_SUMMARY_MAX_BYTES,
        );
        assert!(page.contains(&format!(
            "**Why:** `predict_failed`: {reason} (the whole error is below)"
        )));
        assert!(page.contains("**production serves:** not known: this run did not read it"));
        assert!(page.contains("**The whole error:**"));
    }

    #[test]
    fn summary_shows_streaming_figures() {
        let outputs = full_outputs();
        let input = SummaryInput {
            kind: Kind::Model,
            outputs: &outputs,
            predict: Some(PredictStats {
                total_secs: 2.0,
                stream: Some(StreamStats {
                    ttfb_secs: 0.25,
                    tokens: 42,
                    tokens_per_sec: 21.0,
                }),
            }),
            page_url: "",
            notes: &[],
            history: &[],
            promotion: &[],
            serves: None,
            environment: None,
            reason: None,
            headline: None,
            sections: &[],
        };
        let text = render_summary(&input, STEP_SUMMARY_MAX_BYTES);
        assert!(text.contains(
            "| **Predict Total Time** | 2.00s |\n| **TTFB** | 0.25s |\n| **Tokens** | 42 |\n| **Tokens/sec** | 21.0 |\n"
        ));
        assert!(!text.contains("Status history"));
        assert!(!text.contains("**Error:**"), "no error block on success");
    }

    #[test]
    fn summary_drops_middle_history_rows_to_fit_the_cap() {
        let outputs = full_outputs();
        let history: Vec<StatusEvent> = (0..5000)
            .map(|i| StatusEvent {
                at: at(1_700_000_000 + i),
                elapsed: Duration::from_secs(i),
                status: if i == 4999 { "ACTIVE" } else { "DEPLOYING" }.into(),
                event: format!("poll {i}"),
            })
            .collect();
        let input = SummaryInput {
            kind: Kind::Model,
            outputs: &outputs,
            predict: None,
            page_url: "",
            notes: &[],
            history: &history,
            promotion: &[],
            serves: None,
            environment: None,
            reason: None,
            headline: None,
            sections: &[],
        };
        let full = render_summary(&input, STEP_SUMMARY_MAX_BYTES);
        assert!(full.contains("poll 2500"), "everything fits under 1 MiB");

        let capped = render_summary(&input, 8 * 1024);
        assert!(capped.len() <= 8 * 1024);
        assert!(capped.contains("| poll 0 |"), "first row kept");
        assert!(capped.contains("| poll 4999 |"), "latest row kept");
        assert!(capped.contains("rows omitted |"));
        assert!(capped.contains("| **Status** | `success` |"));
    }

    #[test]
    fn summary_is_cut_when_even_the_text_is_too_big() {
        let mut outputs = Outputs::new(Status::DeployFailed);
        outputs.error_message = "x".repeat(100_000);
        let input = SummaryInput {
            kind: Kind::Model,
            outputs: &outputs,
            predict: None,
            page_url: "",
            notes: &[],
            history: &[],
            promotion: &[],
            serves: None,
            environment: None,
            reason: None,
            headline: None,
            sections: &[],
        };
        let capped = render_summary(&input, 4096);
        assert!(capped.len() <= 4096);
        assert!(capped.ends_with(SUMMARY_TRUNCATED_MARKER));
        assert!(capped.starts_with("## ❌ Truss Deploy (Model): unknown\n"));
    }

    #[test]
    fn append_step_summary_counts_existing_content_against_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("step_summary_x");
        std::fs::write(&path, "earlier text without newline").unwrap();
        let outputs = full_outputs();
        let input = SummaryInput {
            kind: Kind::Model,
            outputs: &outputs,
            predict: None,
            page_url: "",
            notes: &[],
            history: &[],
            promotion: &[],
            serves: None,
            environment: None,
            reason: None,
            headline: None,
            sections: &[],
        };
        append_step_summary(&path, &input).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(
                "earlier text without newline\n## ✅ Truss Deploy (Model): my-model\n"
            )
        );

        let full = dir.path().join("step_summary_full");
        std::fs::write(&full, "x".repeat(STEP_SUMMARY_MAX_BYTES - 100)).unwrap();
        append_step_summary(&full, &input).unwrap();
        assert!(std::fs::metadata(&full).unwrap().len() <= STEP_SUMMARY_MAX_BYTES as u64);
    }

    #[test]
    fn sections_share_the_one_budget_and_are_cut_after_their_verdict() {
        let outputs = full_outputs();
        let history: Vec<StatusEvent> = (0..4000)
            .map(|i| StatusEvent {
                at: at(1_700_000_000 + i),
                elapsed: Duration::from_secs(i),
                status: "BUILDING".into(),
                event: "in progress".into(),
            })
            .collect();
        let evidence = format!(
            "\n### ❌ Evidence FAILED (predict): p95 900 ms\n\n<details><summary>a failed</summary>\n\n```diff\n{}```\n</details>\n",
            "- expected\n+ got\n".repeat(100_000)
        );
        let sections = [evidence];
        let input = SummaryInput {
            kind: Kind::Model,
            outputs: &outputs,
            predict: None,
            page_url: "",
            notes: &[],
            history: &history,
            promotion: &[],
            serves: None,
            environment: None,
            reason: None,
            headline: None,
            sections: &sections,
        };
        let max = 256 * 1024;
        let page = render_summary(&input, max);
        assert!(page.len() <= max, "{}", page.len());
        assert!(
            page.starts_with("## ✅ Truss Deploy (Model): my-model"),
            "the verdict stays on top"
        );
        assert!(page.contains("| **Status** | `success` |"));
        assert!(
            page.contains("### ❌ Evidence FAILED (predict): p95 900 ms"),
            "its own verdict stays"
        );
        assert!(page.contains("rows omitted"), "history made room first");
        assert!(
            page.ends_with(&format!("```\n</details>\n{SUMMARY_TRUNCATED_MARKER}")),
            "closed, then marked"
        );
        // Room enough: everything, whole.
        let small = [String::from("\n### ✅ Evidence passed\n")];
        let input = SummaryInput {
            sections: &small,
            history: &[],
            ..input
        };
        let page = render_summary(&input, max);
        assert!(
            page.ends_with("### ✅ Evidence passed\n") && !page.contains("truncated"),
            "{page}"
        );
    }
}
