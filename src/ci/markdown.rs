//! Markdown as every page the run writes needs it — the step summary, its
//! evidence section and the pull-request comment — escaped in one place:
//! a value from the platform, the user or a model's answer is shown as
//! text, never read as table syntax, markup, a link or a closing fence.
//! Each value is redacted (`secret::scrub`) before it is escaped: an
//! escape inside a secret (`|` as `\|`) would hide it from the page's
//! final redaction.

use crate::secret::scrub;

/// Text for a Markdown table cell: `|` escaped, line breaks as `<br>`,
/// HTML-significant characters as entities so a value cannot inject markup
/// (nor an autolink: `<https://…>`), and `[`, `]` and `\` escaped so no
/// link or image (`[text](url)`, `![alt](src)`, `[text][ref]`) renders
/// live: a bracket's escape cannot be undone by a backslash the value puts
/// before it, since that backslash is escaped too. A bare URL stays as it
/// is: GitHub may link it, but it shows its own target.
pub(crate) fn cell(value: &str) -> String {
    let normalized = scrub(value).replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(normalized.len());
    for c in normalized.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '\\' => out.push_str("\\\\"),
            '[' => out.push_str("\\["),
            ']' => out.push_str("\\]"),
            '\n' => out.push_str("<br>"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Text for a heading, a list item or a cell that must stay one line: no
/// markup injection, line breaks as spaces.
pub(crate) fn inline(value: &str) -> String {
    cell(value).replace("<br>", " ")
}

/// Markdown text with each `$` escaped: GitHub renders the text between
/// two dollar signs as a formula (`$1.21–$3.62`).
pub(crate) fn dollars(text: &str) -> String {
    text.replace('$', "\\$")
}

/// A value as an inline code span (in a cell or a heading). Code spans show
/// text literally, so only the table's own syntax (`|`, line breaks) is
/// escaped; a value with a backtick cannot be a simple code span and is
/// shown as text.
pub(crate) fn code(value: &str) -> String {
    let value = &*scrub(value);
    if value.contains('`') || value.is_empty() {
        return cell(value);
    }
    let one_line = value.replace(['\r', '\n'], " ");
    format!("`{}`", one_line.replace('|', "\\|"))
}

/// Percent-encodes the characters that would end or break a link target.
pub(crate) fn link_target(url: &str) -> String {
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

/// `[label](url)`, or the label alone when there is no URL.
pub(crate) fn link(label: &str, url: &str) -> String {
    match url.is_empty() {
        true => cell(label),
        false => format!("[{}]({})", cell(label), link_target(url)),
    }
}

/// A backtick fence longer than any backtick run in `text` (at least three).
pub(crate) fn fence_for(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// `text` in a fenced block of `info` (e.g. `text`) that it cannot close.
pub(crate) fn fenced(text: &str, info: &str) -> String {
    let fence = fence_for(text);
    let body = text.trim_end_matches(['\n', '\r']);
    format!("{fence}{info}\n{body}\n{fence}\n")
}

/// One line inside a fenced block whose lines each start with a prefix of
/// their own (a diff's `-`/`+`): it may not break the line, nor hold a run
/// of backticks that could read as a fence.
pub(crate) fn fence_line(value: &str) -> String {
    scrub(value)
        .replace("```", "'''")
        .replace(['\n', '\r'], " ")
}

/// `text` cut at a line's end to at most `max_bytes`, `marker` after it: a
/// fenced block or a `<details>` the cut left open is closed first, so the
/// marker reads as text and the page renders. `None` when not even the
/// marker fits.
pub(crate) fn cut(text: &str, max_bytes: usize, marker: &str) -> Option<String> {
    // The closers a cut may need: a fence as long as any in the text, and
    // a `</details>` for each level left open.
    let fence = fence_for(text);
    let reserve = marker.len() + fence.len() + 2 + "</details>\n".len() * 4;
    let room = max_bytes.checked_sub(reserve)?;
    let mut end = room.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let kept = match text[..end].rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    let mut out = kept.to_string();
    let mut open_fence: Option<&str> = None;
    let mut details = 0usize;
    for line in kept.lines() {
        let t = line.trim_start();
        match open_fence {
            Some(f) if t.starts_with(f) && t.trim_end().chars().all(|c| c == '`') => {
                open_fence = None;
            }
            Some(_) => {}
            None if t.starts_with("```") => {
                let run = t.len() - t.trim_start_matches('`').len();
                open_fence = Some(&t[..run]);
            }
            None => {
                details += t.matches("<details>").count();
                details = details.saturating_sub(t.matches("</details>").count());
            }
        }
    }
    if let Some(f) = open_fence {
        out.push_str(f);
        out.push('\n');
    }
    for _ in 0..details.min(4) {
        out.push_str("</details>\n");
    }
    out.push_str(marker);
    (out.len() <= max_bytes).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_cannot_become_markup() {
        let cases = [
            (cell("a|b\r\nc<script>&"), "a\\|b<br>c&lt;script&gt;&amp;"),
            (inline("x\ny|z"), "x y\\|z"),
            (code("ACTIVE"), "`ACTIVE`"),
            (code("a`b"), "a`b"),
            (code(""), ""),
            (code("a|b\nc"), "`a\\|b c`"),
            (
                link("logs", "https://x/(a) b"),
                "[logs](https://x/%28a%29%20b)",
            ),
            (link("a|b", ""), "a\\|b"),
            (
                cell("[approve](https://evil) ![x](https://t/p.png) [r][1]"),
                "\\[approve\\](https://evil) !\\[x\\](https://t/p.png) \\[r\\]\\[1\\]",
            ),
            // A backslash of the value's own cannot undo an escape.
            (cell("\\[a\\](u) \\|"), "\\\\\\[a\\\\\\](u) \\\\\\|"),
            (inline("<https://evil>"), "&lt;https://evil&gt;"),
            (link("[x](y)", "https://ok"), "[\\[x\\](y)](https://ok)"),
            (fence_for("no ticks"), "```"),
            (fence_for("````"), "`````"),
            (fenced("x ``` y\n", "text"), "````text\nx ``` y\n````\n"),
            (fence_line("a```b\nc"), "a'''b c"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn a_secret_is_redacted_before_an_escape_could_split_it() {
        crate::secret::register("sk-md|<canary>");
        assert_eq!(cell("key sk-md|<canary>"), "key ***");
        assert_eq!(code("sk-md|<canary>"), "`***`");
        assert_eq!(fence_line("+ sk-md|<canary>"), "+ ***");
    }

    #[test]
    fn a_cut_closes_what_it_left_open_and_ends_with_the_marker() {
        let marker = "\n_cut_\n";
        let text = format!(
            "# head\n<details><summary>s</summary>\n\n```diff\n{}```\n</details>\ntail\n",
            "- line\n".repeat(100)
        );
        let out = cut(&text, 200, marker).unwrap();
        assert!(out.len() <= 200, "{}", out.len());
        assert!(out.starts_with("# head\n<details>"), "{out}");
        assert!(out.ends_with("```\n</details>\n\n_cut_\n"), "{out}");
        // Whole lines only, and never a split character.
        let wide = "é".repeat(50) + "\n" + &"é".repeat(50);
        let out = cut(&wide, 150, marker).unwrap();
        assert!(out.ends_with(marker) && out.len() <= 150, "{out}");
        assert_eq!(cut("text", 5, marker), None);
    }
}
