//! The Markdown step summary: the result table, links, error, notes, the
//! status history and the sections after them (the evidence), on one page
//! with one budget — what is left of GitHub's 1 MiB — that every part
//! draws from. Past it, parts are cut with a marker, the verdict at the
//! top never.
//!
//! `single`: the page for one target (result table, links, error, notes,
//! status history, then the sections). `table`: the page for several
//! targets or a plan (a row per target, then details). Both share the
//! budget, the cut and the one write here.

mod sections;
mod single;
mod table;

use std::path::Path;

use super::markdown;
use super::outputs::{append_sized, truncate_bytes};

pub(crate) use single::{
    PredictStats, ServesNow, StatusEvent, StreamStats, SummaryInput, append_step_summary,
};
pub(crate) use table::{Cell, TableSummary, append_table_summary};

/// GitHub drops a step summary larger than 1024 KiB (bytes on disk).
const STEP_SUMMARY_MAX_BYTES: usize = 1024 * 1024;

/// Longest error message or note kept in the summary, so the table and
/// links always fit under the size cap.
const SUMMARY_TEXT_MAX_CHARS: usize = 64 * 1024;
const SUMMARY_TRUNCATED_MARKER: &str = "\n\n_Summary truncated to fit GitHub's 1 MiB limit._\n";

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

fn code_or_na(id: &str) -> String {
    if id.is_empty() {
        "N/A".into()
    } else {
        markdown::code(id)
    }
}

/// Appends to the summary file at `path` what `render` makes of the room
/// GitHub's 1 MiB leaves (nothing when none is left), through the sink:
/// the file is looked at and written within the sink's bound, and the text
/// redacted once more as a whole.
fn write_summary(path: &Path, render: impl FnOnce(usize) -> String) -> anyhow::Result<()> {
    Ok(append_sized(path, |held| {
        let budget = summary_budget(held);
        (budget > 0).then(|| render(budget))
    })?)
}

/// What is left of GitHub's 1 MiB in a summary file that holds `held`
/// bytes (the newline an append adds first counted in).
fn summary_budget(held: u64) -> usize {
    let held = usize::try_from(held).unwrap_or(usize::MAX);
    STEP_SUMMARY_MAX_BYTES.saturating_sub(held)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::ci::outputs::tests::full_outputs;
    use crate::kind::Kind;
    use crate::outcome::Status;

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
            assert_eq!(markdown::cell(raw), want, "{raw:?}");
        }
        assert_eq!(markdown::code("a|b"), "`a\\|b`");
        assert_eq!(markdown::code("a\nb"), "`a b`");
        assert_eq!(markdown::code("a`b"), "a`b");
        assert_eq!(markdown::fence_for("no ticks"), "```");
        assert_eq!(markdown::fence_for("has ```` four"), "`````");
        assert_eq!(
            markdown::link_target("https://x/a b(c)"),
            "https://x/a%20b%28c%29"
        );
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
            serves: None,
            environment: None,
            reason: None,
            headline: None,
            sections: &[],
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
            warn: false,
            reason: Some(KEY),
            columns: &["a", "b", "c"],
            rows: &rows,
            details: &notes,
        };
        append_table_summary(&path, &table).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(KEY), "{text}");
        // The redaction, escaped so it renders as three stars, not markup.
        assert!(text.contains("401 for \\*\\*\\*"), "{text}");
    }
}
