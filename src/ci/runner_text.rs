//! Text as GitHub's runner reads it from a step's log: where lines end,
//! which lines it takes for workflow commands, and JSON that can hold
//! neither. Pure functions for the reporter's sink.

/// Whether GitHub's runner would read `line` as a workflow command: it
/// starts with `::` after leading whitespace, or holds the legacy `##[`
/// form, which the runner matches anywhere in a line. Control characters
/// count as whitespace here too: fencing one line too many costs nothing.
pub(super) fn looks_like_command(line: &str) -> bool {
    line.trim_start_matches(|c: char| c.is_whitespace() || c.is_control())
        .starts_with("::")
        || line.contains("##[")
}

/// Characters that end a line for the runner (`\r\n`, `\r`, `\n`: .NET's
/// `ReadLine`) or for a log viewer (NEL, U+2028, U+2029, vertical tab,
/// form feed): text is cut at each, so that what follows one is checked as
/// a line of its own.
pub(super) fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// `text` cut into the lines the runner (or a viewer) reads; `\r\n` is one
/// break.
pub(super) fn runner_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if !is_line_break(c) {
            continue;
        }
        lines.push(&text[start..at]);
        start = at + c.len_utf8();
        if c == '\r' && chars.peek().is_some_and(|&(_, n)| n == '\n') {
            chars.next();
            start += 1;
        }
    }
    lines.push(&text[start..]);
    lines
}

/// JSON data made safe for the runner without changing its value: the
/// characters a viewer may break a line at, and the legacy `##[` command
/// prefix, can only sit inside JSON strings, where `\uXXXX` means the same.
pub(super) fn json_for_runner(json: &str) -> String {
    json.replace('\u{85}', "\\u0085")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
        .replace("##[", "#\\u0023[")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_end_where_the_runner_or_a_viewer_ends_them() {
        assert_eq!(
            runner_lines("a\r\nb\rc\nd\u{2028}e\u{85}f"),
            ["a", "b", "c", "d", "e", "f"]
        );
        assert_eq!(runner_lines("a\n"), ["a", ""]);
        for (line, command) in [
            ("\u{1b}::error::x", true),
            ("\t ::warning::x", true),
            ("x ::error::y", false),
        ] {
            assert_eq!(looks_like_command(line), command, "{line:?}");
        }
        let json = json_for_runner("{\"v\": \"a\u{2028}##[b\"}");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["v"], "a\u{2028}##[b");
        assert!(
            !json.contains('\u{2028}') && !json.contains("##["),
            "{json}"
        );
    }
}
