//! The Markdown step summary: the result table, links, error, notes and
//! the status history, kept under GitHub's size limit.

use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Context;

use super::format::{format_deploy_time, format_elapsed, format_utc};
use super::outputs::{Outputs, append_file, lacks_final_newline, truncate_bytes, truncate_chars};
use crate::kind::Kind;
use crate::outcome::Status;
use crate::secret::scrub;

/// GitHub drops a step summary larger than 1024 KiB (bytes on disk).
const STEP_SUMMARY_MAX_BYTES: usize = 1024 * 1024;

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
}

/// Longest error message or note kept in the summary, so the table and
/// links always fit under the size cap.
const SUMMARY_TEXT_MAX_CHARS: usize = 64 * 1024;
const SUMMARY_TRUNCATED_MARKER: &str = "\n\n_Summary truncated to fit GitHub's 1 MiB limit._\n";

/// Renders the summary Markdown, at most `max_bytes` long: history rows are
/// dropped from the middle first (keeping the first row and the latest
/// ones), and only then is the text cut.
fn render_summary(input: &SummaryInput<'_>, max_bytes: usize) -> String {
    let rows = input.history.len();
    let mut text = render_summary_with(input, rows);
    let mut keep = rows;
    while text.len() > max_bytes && keep > 0 {
        keep /= 2;
        text = render_summary_with(input, keep);
    }
    cut_to(text, max_bytes)
}

/// `text` if it fits in `max_bytes`, else cut to fit with the truncation
/// marker at its end.
fn cut_to(text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let marker = SUMMARY_TRUNCATED_MARKER;
    let mut cut = truncate_bytes(&text, max_bytes.saturating_sub(marker.len())).to_owned();
    if cut.len() + marker.len() <= max_bytes {
        cut.push_str(marker);
    }
    cut
}

/// Renders with at most `keep` history rows: the first and the latest `keep - 1`.
fn render_summary_with(input: &SummaryInput<'_>, keep: usize) -> String {
    let out = input.outputs;
    let ok = out.status == Status::Success;
    let (kind_word, id_label, id) = match input.kind {
        Kind::Model => ("Model", "Model ID", &out.model_id),
        Kind::Chain => ("Chain", "Chain ID", &out.chain_id),
    };
    let name = if out.model_name.is_empty() {
        "unknown"
    } else {
        &out.model_name
    };
    let mut lines: Vec<String> = vec![
        format!(
            "## {} Truss Deploy ({kind_word}): {}",
            if ok { "✅" } else { "❌" },
            escape_inline(name)
        ),
        String::new(),
        "| Metric | Value |".into(),
        "|--------|-------|".into(),
        metric_row("Status", &code_cell(out.status.as_str())),
        metric_row(id_label, &code_or_na(id)),
        metric_row("Deployment ID", &code_or_na(&out.deployment_id)),
        metric_row(
            "Deploy Time",
            &match format_deploy_time(out.deploy_time_seconds) {
                t if t.is_empty() => "N/A".into(),
                t => format!("{t}s"),
            },
        ),
    ];
    if let Some(predict) = input.predict {
        lines.push(metric_row(
            "Predict Total Time",
            &format!("{:.2}s", predict.total_secs),
        ));
        if let Some(stream) = predict.stream {
            lines.push(metric_row("TTFB", &format!("{:.2}s", stream.ttfb_secs)));
            lines.push(metric_row("Tokens", &stream.tokens.to_string()));
            lines.push(metric_row(
                "Tokens/sec",
                &format!("{:.1}", stream.tokens_per_sec),
            ));
        }
    }
    for (label, value) in [
        ("Tested Deployment", &out.tested_deployment_id),
        ("Previous Deployment", &out.previous_deployment_id),
    ] {
        if !value.is_empty() && *value != out.deployment_id {
            lines.push(metric_row(label, &code_cell(value)));
        }
    }
    if let Some(back) = out.rolled_back {
        lines.push(metric_row(
            "Rolled Back",
            if back {
                "yes: the previous deployment serves"
            } else {
                "no"
            },
        ));
    }
    if !out.last_status.is_empty() {
        lines.push(metric_row(
            "Last Platform Status",
            &code_cell(&out.last_status),
        ));
    }

    let mut links = Vec::new();
    if !out.logs_url.is_empty() {
        links.push(format!("[View logs]({})", link_target(&out.logs_url)));
    }
    if !input.page_url.is_empty() {
        links.push(format!(
            "[{kind_word} page]({})",
            link_target(input.page_url)
        ));
    }
    if !out.environment_url.is_empty() {
        links.push(format!(
            "[Environment URL]({})",
            link_target(&out.environment_url)
        ));
    }
    if !links.is_empty() {
        lines.push(String::new());
        lines.push(links.join(" · "));
    }

    if !ok && !out.error_message.is_empty() {
        let message = truncate_chars(&out.error_message, SUMMARY_TEXT_MAX_CHARS);
        let fence = code_fence(message);
        lines.push(String::new());
        lines.push("**Error:**".into());
        lines.push(String::new());
        lines.push(format!("{fence}text"));
        lines.push(message.trim_end_matches(['\n', '\r']).to_owned());
        lines.push(fence);
    }

    if !input.notes.is_empty() {
        lines.push(String::new());
        lines.push("**Notes:**".into());
        lines.push(String::new());
        for note in input.notes {
            lines.push(format!(
                "- {}",
                escape_inline(truncate_chars(note, SUMMARY_TEXT_MAX_CHARS))
            ));
        }
    }

    if !input.promotion.is_empty() {
        lines.push(String::new());
        lines.push("### Promotion".into());
        lines.push(String::new());
        lines.push("| Time (UTC) | Elapsed | Status | Event |".into());
        lines.push("|------------|---------|--------|-------|".into());
        for event in input.promotion {
            lines.push(history_row(event));
        }
    }

    if !input.history.is_empty() {
        lines.push(String::new());
        lines.push("### Status history".into());
        lines.push(String::new());
        lines.push("| Time (UTC) | Elapsed | Status | Event |".into());
        lines.push("|------------|---------|--------|-------|".into());
        let rows = input.history;
        let (head, tail) = match keep {
            k if k >= rows.len() => (rows.len(), 0),
            0 => (0, 0),
            k => (1, k - 1),
        };
        for event in &rows[..head] {
            lines.push(history_row(event));
        }
        let omitted = rows.len() - head - tail;
        if omitted > 0 {
            lines.push(format!("| … | | | {omitted} rows omitted |"));
        }
        for event in &rows[rows.len() - tail..] {
            lines.push(history_row(event));
        }
    }

    let mut text = lines.join("\n");
    text.push('\n');
    text
}

fn metric_row(label: &str, value: &str) -> String {
    format!("| **{label}** | {value} |")
}

fn history_row(event: &StatusEvent) -> String {
    let status = if event.status.is_empty() {
        String::new()
    } else {
        code_cell(&event.status)
    };
    format!(
        "| {} | {} | {status} | {} |",
        format_utc(event.at),
        format_elapsed(event.elapsed),
        escape_cell(&event.event)
    )
}

fn code_or_na(id: &str) -> String {
    if id.is_empty() {
        "N/A".into()
    } else {
        code_cell(id)
    }
}

/// A value as an inline code span inside a table cell. Code spans show text
/// literally, so only the table's own syntax (`|`, line breaks) is escaped;
/// a value with a backtick cannot be a simple code span and is shown as text.
fn code_cell(value: &str) -> String {
    if value.contains('`') || value.is_empty() {
        return escape_cell(value);
    }
    let one_line = value.replace(['\r', '\n'], " ");
    format!("`{}`", one_line.replace('|', "\\|"))
}

/// Text for a Markdown table cell: `|` escaped, line breaks as `<br>`, and
/// HTML-significant characters as entities so a value cannot inject markup.
fn escape_cell(value: &str) -> String {
    let normalized = value.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(normalized.len());
    for c in normalized.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '\n' => out.push_str("<br>"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Text for a heading or list item: one line, no markup injection.
fn escape_inline(value: &str) -> String {
    escape_cell(value).replace("<br>", " ")
}

/// Percent-encodes the characters that would end or break a Markdown link target.
fn link_target(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    for c in url.chars() {
        match c {
            ' ' => out.push_str("%20"),
            '(' => out.push_str("%28"),
            ')' => out.push_str("%29"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            '\n' | '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// A backtick fence longer than any backtick run in `text` (at least three).
fn code_fence(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// A cell of a [`TableSummary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cell {
    Text(String),
    /// An id or a status word, shown as code.
    Code(String),
    /// A link; empty URL shows the label alone.
    Link {
        label: String,
        url: String,
    },
}

/// A summary that is one table (a row per target) plus a list of details:
/// several targets in one step, or a plan.
#[derive(Debug, Clone)]
pub(crate) struct TableSummary<'a> {
    pub(crate) heading: &'a str,
    pub(crate) ok: bool,
    pub(crate) columns: &'a [&'a str],
    pub(crate) rows: &'a [Vec<Cell>],
    /// Shown under the table as a list, e.g. each failed target's error.
    pub(crate) details: &'a [String],
}

fn render_cell(cell: &Cell) -> String {
    match cell {
        Cell::Text(t) if t.is_empty() => "N/A".into(),
        Cell::Text(t) => escape_cell(truncate_chars(t, SUMMARY_TEXT_MAX_CHARS)),
        Cell::Code(c) => code_or_na(c),
        Cell::Link { label, url } if url.is_empty() => escape_cell(label),
        Cell::Link { label, url } => format!("[{}]({})", escape_cell(label), link_target(url)),
    }
}

fn render_table_summary(input: &TableSummary<'_>, max_bytes: usize) -> String {
    let mut lines = vec![
        format!(
            "## {} {}",
            if input.ok { "✅" } else { "❌" },
            escape_inline(input.heading)
        ),
        String::new(),
        format!("| {} |", input.columns.join(" | ")),
        format!(
            "|{}|",
            input
                .columns
                .iter()
                .map(|c| "-".repeat(c.len() + 2))
                .collect::<Vec<_>>()
                .join("|")
        ),
    ];
    for row in input.rows {
        let cells: Vec<String> = row.iter().map(render_cell).collect();
        lines.push(format!("| {} |", cells.join(" | ")));
    }
    if !input.details.is_empty() {
        lines.push(String::new());
        for d in input.details {
            lines.push(format!(
                "- {}",
                escape_inline(truncate_chars(d, SUMMARY_TEXT_MAX_CHARS))
            ));
        }
    }
    let mut text = lines.join("\n");
    text.push('\n');
    cut_to(text, max_bytes)
}

/// Appends a [`TableSummary`] to the `$GITHUB_STEP_SUMMARY` file, within
/// GitHub's 1 MiB like [`append_step_summary`], redacted like it.
pub(crate) fn append_table_summary(path: &Path, input: &TableSummary<'_>) -> anyhow::Result<()> {
    let budget = summary_budget(path);
    if budget == 0 {
        return Ok(());
    }
    let clean = |t: &str| scrub(t).into_owned();
    let rows: Vec<Vec<Cell>> = input
        .rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|c| match c {
                    Cell::Text(t) => Cell::Text(clean(t)),
                    Cell::Code(t) => Cell::Code(clean(t)),
                    Cell::Link { label, url } => Cell::Link {
                        label: clean(label),
                        url: clean(url),
                    },
                })
                .collect()
        })
        .collect();
    let details: Vec<String> = input.details.iter().map(|d| clean(d)).collect();
    let heading = clean(input.heading);
    let input = TableSummary {
        heading: &heading,
        rows: &rows,
        details: &details,
        ..input.clone()
    };
    write_summary(path, &render_table_summary(&input, budget))
}

/// Appends one more section to the step summary (after the run's own),
/// redacted, cut to what is left of GitHub's 1 MiB.
pub(crate) fn append_summary_section(path: &Path, markdown: &str) -> anyhow::Result<()> {
    let budget = summary_budget(path);
    if budget == 0 {
        return Ok(());
    }
    let text = format!("\n{}", scrub(markdown));
    write_summary(path, &cut_to(text, budget))
}

/// Appends rendered summary text, redacted once more as a whole.
fn write_summary(path: &Path, text: &str) -> anyhow::Result<()> {
    append_file(path, scrub(text).as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// What is left of GitHub's 1 MiB in the summary file at `path`.
/// `append_file` separates from earlier content that does not end its last
/// line; that newline counts too.
fn summary_budget(path: &Path) -> usize {
    let existing = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let existing = usize::try_from(existing).unwrap_or(usize::MAX);
    let separator_len = usize::from(lacks_final_newline(path));
    STEP_SUMMARY_MAX_BYTES
        .saturating_sub(existing)
        .saturating_sub(separator_len)
}

/// Appends the summary to the `$GITHUB_STEP_SUMMARY` file at `path`, keeping
/// the whole file within GitHub's 1 MiB (content already there counts).
/// Every registered secret is redacted from each piece before it is cut
/// or escaped, and from the whole page again.
pub(crate) fn append_step_summary(path: &Path, input: &SummaryInput<'_>) -> anyhow::Result<()> {
    let budget = summary_budget(path);
    if budget == 0 {
        return Ok(());
    }
    let outputs = input.outputs.redacted();
    let page_url = scrub(input.page_url);
    let notes: Vec<String> = input.notes.iter().map(|n| scrub(n).into_owned()).collect();
    let history: Vec<StatusEvent> = input.history.iter().map(StatusEvent::redacted).collect();
    let promotion: Vec<StatusEvent> = input.promotion.iter().map(StatusEvent::redacted).collect();
    let input = SummaryInput {
        outputs: &outputs,
        page_url: &page_url,
        notes: &notes,
        history: &history,
        promotion: &promotion,
        ..input.clone()
    };
    write_summary(path, &render_summary(&input, budget))
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::ci::outputs::tests::full_outputs;

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
        };
        let want = "\
## ❌ Truss Deploy (Chain): my\\|chain

| Metric | Value |
|--------|-------|
| **Status** | `deploy_timeout` |
| **Chain ID** | `ch1` |
| **Deployment ID** | N/A |
| **Deploy Time** | N/A |

**Error:**

````text
chainlet Hello still DEPLOYING after 45m00s
last poll: HTTP 503 ```busy```
````

**Notes:**

- cleanup skipped: no deployment was created

### Status history

| Time (UTC) | Elapsed | Status | Event |
|------------|---------|--------|-------|
| 2024-02-29 00:00:00 | 45m00s | `DEPLOYING` | deadline reached \\| &lt;giving up&gt; |
";
        assert_eq!(render_summary(&input, STEP_SUMMARY_MAX_BYTES), want);
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
    fn cells_escape_table_syntax_and_markup() {
        let cases = [
            ("plain", "plain"),
            ("a|b", "a\\|b"),
            ("one\ntwo", "one<br>two"),
            ("one\r\ntwo", "one<br>two"),
            ("<script>&", "&lt;script&gt;&amp;"),
        ];
        for (raw, want) in cases {
            assert_eq!(escape_cell(raw), want, "{raw:?}");
        }
        assert_eq!(code_cell("a|b"), "`a\\|b`");
        assert_eq!(code_cell("a\nb"), "`a b`");
        assert_eq!(code_cell("a`b"), "a`b");
        assert_eq!(code_fence("no ticks"), "```");
        assert_eq!(code_fence("has ```` four"), "`````");
        assert_eq!(link_target("https://x/a b(c)"), "https://x/a%20b%28c%29");
    }

    #[test]
    fn both_summaries_redact_registered_secrets_from_every_piece() {
        const KEY: &str = "sk-summary-canary-7";
        crate::secret::register(KEY);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.md");
        let mut outputs = full_outputs();
        outputs.status = Status::DeployFailed;
        outputs.error_message = format!("401 for {KEY}");
        outputs.model_name = KEY.into();
        let event = StatusEvent {
            at: SystemTime::UNIX_EPOCH,
            elapsed: Duration::ZERO,
            status: KEY.into(),
            event: format!("echo {KEY}"),
        };
        let notes = [format!("note {KEY}")];
        let page = format!("https://x/{KEY}");
        let history = [event.clone()];
        let input = SummaryInput {
            kind: Kind::Model,
            outputs: &outputs,
            predict: None,
            page_url: &page,
            notes: &notes,
            history: &history,
            promotion: &history,
        };
        append_step_summary(&path, &input).unwrap();
        let rows = [vec![
            Cell::Text(KEY.into()),
            Cell::Code(KEY.into()),
            Cell::Link {
                label: KEY.into(),
                url: page.clone(),
            },
        ]];
        let table = TableSummary {
            heading: KEY,
            ok: false,
            columns: &["a", "b", "c"],
            rows: &rows,
            details: &notes,
        };
        append_table_summary(&path, &table).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(KEY), "{text}");
        assert!(text.contains("401 for ***"), "{text}");
    }
}
