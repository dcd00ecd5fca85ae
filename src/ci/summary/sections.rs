//! The sections of one target's step summary, one function each (a list
//! of lines; empty leaves the section out), in the page's order: the first
//! screen (`verdict`, `reason`, `serves_now`), then the details. A part
//! another command adds is one more function here and one more line in
//! `single::render_summary_with`.

use super::{SUMMARY_TEXT_MAX_CHARS, code_or_na};
use super::{StatusEvent, SummaryInput};
use crate::ci::format::{format_deploy_time, format_elapsed, format_utc};
use crate::ci::markdown;
use crate::ci::outputs::truncate_chars;
use crate::ci::{Command, Outputs};
use crate::kind::Kind;
use crate::outcome::Status;

/// Longest reason shown whole on the first screen; a longer one keeps its
/// start there and the whole text in a block below the details.
pub(super) const REASON_MAX_CHARS: usize = 320;

fn kind_word(kind: Kind) -> &'static str {
    match kind {
        Kind::Model => "Model",
        Kind::Chain => "Chain",
    }
}

/// Did it work: ✅/❌, then what the command did (its headline), or the
/// kind and the name of what was deployed.
pub(super) fn verdict(input: &SummaryInput<'_>) -> Vec<String> {
    let out = input.outputs;
    let ok = out.status == Status::Success;
    let mark = if ok { "✅" } else { "❌" };
    if let Some(headline) = input.headline {
        return vec![format!("## {mark} {}", markdown::inline(headline))];
    }
    let name = if out.model_name.is_empty() {
        "unknown"
    } else {
        &out.model_name
    };
    vec![format!(
        "## {mark} Truss Deploy ({}): {}",
        kind_word(input.kind),
        markdown::inline(name)
    )]
}

/// Text as Markdown that renders as the same plain words: table syntax,
/// HTML and links escaped (`markdown::inline`), then emphasis and code
/// marks, line breaks as spaces (the page wraps it).
pub(super) fn plain(text: &str) -> String {
    let inline = markdown::inline(text);
    let mut out = String::with_capacity(inline.len());
    for c in inline.chars() {
        if matches!(c, '`' | '*' | '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Why not: the error as a paragraph of plain words, its status word
/// first; cut at [`REASON_MAX_CHARS`] (the whole text follows the details).
pub(super) fn reason(input: &SummaryInput<'_>) -> Vec<String> {
    let out = input.outputs;
    if out.status == Status::Success || out.error_message.is_empty() {
        return Vec::new();
    }
    if let Some(reason) = input.reason {
        return vec![format!(
            "**Why:** `{}`: {} (the whole error is below)",
            out.status.as_str(),
            plain(reason)
        )];
    }
    let message = out.error_message.trim();
    let mut shown = truncate_chars(message, REASON_MAX_CHARS);
    if shown.len() < message.len() {
        // Cut between words.
        shown = shown.rsplit_once(' ').map_or(shown, |(head, _)| head);
    }
    // Teardown and prune list each failure whole in their own section.
    let lifecycle = matches!(out.command, Command::Teardown | Command::Prune);
    let more = match (shown.len() < message.len(), lifecycle) {
        (false, _) => "",
        (true, false) => " … (the whole error is below)",
        (true, true) => " … (each one is listed whole below)",
    };
    vec![format!(
        "**Why:** `{}`: {}{more}",
        out.status.as_str(),
        plain(shown)
    )]
}

/// What serves the environment now, from the run's latest read of it:
/// the page's one claim of it.
pub(super) fn serves_now(input: &SummaryInput<'_>) -> Vec<String> {
    let Some(s) = input.serves else {
        return match input.environment {
            Some(env) => vec![format!(
                "**{} serves:** not known: this run did not read it",
                markdown::inline(env)
            )],
            None => Vec::new(),
        };
    };
    let what = match &s.deployment {
        Some(d) => format!("deployment {}", markdown::code(d)),
        None => "no deployment".to_string(),
    };
    let moving = match &s.moving_to {
        Some(d) => format!(
            ", a promotion of {} still moving traffic",
            markdown::code(d)
        ),
        None => String::new(),
    };
    vec![format!(
        "**{} serves:** {what}{moving} (the run's last read of it)",
        markdown::inline(&s.env)
    )]
}

/// The details: the metrics table (none for teardown and prune: what
/// they retired and kept is their own table, below).
pub(super) fn result_table(input: &SummaryInput<'_>) -> Vec<String> {
    let out = input.outputs;
    if matches!(out.command, Command::Teardown | Command::Prune) {
        return Vec::new();
    }
    let (id_label, id) = match input.kind {
        Kind::Model => ("Model ID", &out.model_id),
        Kind::Chain => ("Chain ID", &out.chain_id),
    };
    let mut lines: Vec<String> = vec![
        "| Metric | Value |".into(),
        "|--------|-------|".into(),
        metric_row("Status", &markdown::code(out.status.as_str())),
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
            lines.push(metric_row(label, &markdown::code(value)));
        }
    }
    if let Some(back) = out.rolled_back {
        lines.push(metric_row("Rolled Back", if back { "yes" } else { "no" }));
    }
    if let Some(row) = price_row(out) {
        lines.push(row);
    }
    if !out.last_status.is_empty() {
        lines.push(metric_row(
            "Last Platform Status",
            &markdown::code(&out.last_status),
        ));
    }
    lines
}

pub(super) fn links(input: &SummaryInput<'_>) -> Vec<String> {
    let out = input.outputs;
    let mut links = Vec::new();
    if !out.logs_url.is_empty() {
        links.push(format!(
            "[View logs]({})",
            markdown::link_target(&out.logs_url)
        ));
    }
    if !input.page_url.is_empty() {
        links.push(format!(
            "[{} page]({})",
            kind_word(input.kind),
            markdown::link_target(input.page_url)
        ));
    }
    if !out.environment_url.is_empty() {
        links.push(format!(
            "[Environment URL]({})",
            markdown::link_target(&out.environment_url)
        ));
    }
    match links.is_empty() {
        true => Vec::new(),
        false => vec![links.join(" · ")],
    }
}

/// The whole error, when the reason on the first screen had to be cut
/// (teardown and prune: their section lists each failure whole).
pub(super) fn whole_error(input: &SummaryInput<'_>) -> Vec<String> {
    let out = input.outputs;
    let message = out.error_message.trim();
    let shown_whole = input.reason.is_none() && message.chars().count() <= REASON_MAX_CHARS;
    let listed = matches!(out.command, Command::Teardown | Command::Prune);
    if out.status == Status::Success || message.is_empty() || shown_whole || listed {
        return Vec::new();
    }
    let message = truncate_chars(message, SUMMARY_TEXT_MAX_CHARS);
    let fence = markdown::fence_for(message);
    vec![
        "**The whole error:**".into(),
        String::new(),
        format!("{fence}text"),
        message.trim_end_matches(['\n', '\r']).to_owned(),
        fence,
    ]
}

pub(super) fn notes(input: &SummaryInput<'_>) -> Vec<String> {
    if input.notes.is_empty() {
        return Vec::new();
    }
    let mut lines = vec!["**Notes:**".to_string(), String::new()];
    for note in input.notes {
        lines.push(format!(
            "- {}",
            markdown::inline(truncate_chars(note, SUMMARY_TEXT_MAX_CHARS))
        ));
    }
    lines
}

const EVENTS_HEADER: [&str; 2] = [
    "| Time (UTC) | Elapsed | Status | Event |",
    "|------------|---------|--------|-------|",
];

/// A gated promotion's steps, once: they are left out of the history.
pub(super) fn promotion(input: &SummaryInput<'_>) -> Vec<String> {
    if input.promotion.is_empty() {
        return Vec::new();
    }
    let mut lines = vec!["### Promotion".to_string(), String::new()];
    lines.extend(EVENTS_HEADER.map(String::from));
    lines.extend(input.promotion.iter().map(history_row));
    lines
}

/// The status history without the promotion's steps (shown above).
pub(super) fn history(input: &SummaryInput<'_>, keep: usize) -> Vec<String> {
    let rows: Vec<&StatusEvent> = input
        .history
        .iter()
        .filter(|e| !input.promotion.contains(e))
        .collect();
    if rows.is_empty() {
        return Vec::new();
    }
    let heading = match input.promotion.is_empty() {
        true => "### Status history",
        false => "### Status history (the promotion's steps are above)",
    };
    let mut lines = vec![heading.to_string(), String::new()];
    lines.extend(EVENTS_HEADER.map(String::from));
    let (head, tail) = match keep {
        k if k >= rows.len() => (rows.len(), 0),
        0 => (0, 0),
        k => (1, k - 1),
    };
    lines.extend(rows[..head].iter().map(|e| history_row(e)));
    let omitted = rows.len() - head - tail;
    if omitted > 0 {
        lines.push(format!("| … | | | {omitted} rows omitted |"));
    }
    lines.extend(rows[rows.len() - tail..].iter().map(|e| history_row(e)));
    lines
}

/// The hourly price's row, when a price applies: its line, `$` escaped so
/// GitHub never reads two of them as a formula.
fn price_row(out: &Outputs) -> Option<String> {
    let line = &out.hourly_price.as_ref()?.line;
    Some(metric_row(
        "Hourly Price",
        &markdown::dollars(&markdown::inline(line)),
    ))
}

fn metric_row(label: &str, value: &str) -> String {
    format!("| **{label}** | {value} |")
}

fn history_row(event: &StatusEvent) -> String {
    let status = if event.status.is_empty() {
        String::new()
    } else {
        markdown::code(&event.status)
    };
    format!(
        "| {} | {} | {status} | {} |",
        format_utc(event.at),
        format_elapsed(event.elapsed),
        markdown::cell(&event.event)
    )
}
