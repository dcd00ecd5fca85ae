//! The step summary of several targets or a plan: one table, a row per
//! target, then a list of details.

use std::path::Path;

use super::{SUMMARY_TEXT_MAX_CHARS, code_or_na, cut_to, write_summary};
use crate::ci::markdown;
use crate::ci::outputs::truncate_chars;
use crate::secret::scrub;

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
    /// It worked and found something to look at (drift): ⚠️, not ✅.
    pub(crate) warn: bool,
    /// Why it failed, in plain words, said before the table.
    pub(crate) reason: Option<&'a str>,
    pub(crate) columns: &'a [&'a str],
    pub(crate) rows: &'a [Vec<Cell>],
    /// Shown under the table as a list, e.g. each failed target's error.
    pub(crate) details: &'a [String],
}

fn render_cell(cell: &Cell) -> String {
    match cell {
        Cell::Text(t) if t.is_empty() => "N/A".into(),
        Cell::Text(t) => markdown::cell(truncate_chars(t, SUMMARY_TEXT_MAX_CHARS)),
        Cell::Code(c) => code_or_na(c),
        Cell::Link { label, url } if url.is_empty() => markdown::cell(label),
        Cell::Link { label, url } => format!(
            "[{}]({})",
            markdown::cell(label),
            markdown::link_target(url)
        ),
    }
}

fn render_table_summary(input: &TableSummary<'_>, max_bytes: usize) -> String {
    let mark = match (input.ok, input.warn) {
        (true, false) => "✅",
        (true, true) => "⚠️",
        (false, _) => "❌",
    };
    let mut lines = vec![
        format!("## {mark} {}", markdown::inline(input.heading)),
        String::new(),
    ];
    if let Some(reason) = input.reason.filter(|_| !input.ok) {
        let shown = truncate_chars(reason.trim(), super::sections::REASON_MAX_CHARS);
        let more = if shown.len() < reason.trim().len() {
            " …"
        } else {
            ""
        };
        lines.push(format!("**Why:** {}{more}", super::sections::plain(shown)));
        lines.push(String::new());
    }
    lines.extend([
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
    ]);
    for row in input.rows {
        let cells: Vec<String> = row.iter().map(render_cell).collect();
        lines.push(format!("| {} |", cells.join(" | ")));
    }
    if !input.details.is_empty() {
        lines.push(String::new());
        for d in input.details {
            lines.push(format!(
                "- {}",
                markdown::inline(truncate_chars(d, SUMMARY_TEXT_MAX_CHARS))
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
    let reason = input.reason.map(clean);
    let input = TableSummary {
        heading: &heading,
        reason: reason.as_deref(),
        rows: &rows,
        details: &details,
        ..input.clone()
    };
    write_summary(path, |budget| render_table_summary(&input, budget))
}
