//! The source text of every node a `secrets` entry reaches through an
//! alias, found by where it is written rather than by what it parses to:
//! a folded block (`>-`) or an escaped double-quoted scalar parses to text
//! its source does not hold, so a search for the value misses the lines
//! that spell it.
//!
//! An extent runs from just after an anchor's name to the end of the
//! node's last line: the rest of that anchor's line and every following
//! line indented past it (a block mapping, sequence or scalar; a plain
//! scalar continued), a block sequence written at its key's own
//! indentation, and a quoted scalar or a flow collection to its closing
//! character wherever that is. The reading errs wide: anything it takes
//! for an anchor or a node's line is hidden, never shown.

use std::ops::Range;

/// The extents, in `text`, of every node anchored under a name that an
/// alias in `aliasing` uses, and of the nodes their own text aliases in
/// turn; sorted, merged where they overlap.
pub(super) fn aliased_extents(text: &str, aliasing: &str) -> Vec<Range<usize>> {
    let mut names: Vec<&str> = aliases(aliasing);
    let mut extents: Vec<Range<usize>> = Vec::new();
    let mut seen = 0;
    while seen < names.len() {
        let name = names[seen];
        seen += 1;
        for (at, end) in anchors(text, name) {
            let extent = end..node_end(text, at, end);
            for inner in aliases(&text[extent.clone()]) {
                if !names.contains(&inner) {
                    names.push(inner);
                }
            }
            extents.push(extent);
        }
    }
    extents.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::new();
    for r in extents {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// `text` with the parts inside `extents` (offsets into it) hidden line by
/// line: each line's share that holds anything but spaces reads `***`,
/// its indentation kept, so the lines around still diff as they are.
pub(super) fn hide(text: &str, extents: &[Range<usize>], hidden: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for r in extents {
        out.push_str(&text[from..r.start]);
        let mut first = true;
        for piece in text[r.clone()].split_inclusive('\n') {
            let body = piece.trim_end_matches(['\n', '\r']);
            let ending = &piece[body.len()..];
            let content = body.trim_start();
            let was_first = std::mem::replace(&mut first, false);
            if content.is_empty() {
                out.push_str(piece);
                continue;
            }
            match was_first {
                true => out.push(' '),
                false => out.push_str(&body[..body.len() - content.len()]),
            }
            out.push_str(hidden);
            out.push_str(ending);
        }
        from = r.end;
    }
    out.push_str(&text[from..]);
    out
}

/// The characters libyaml allows in an anchor's or an alias's name.
fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Whether a `&` or `*` at `at` starts a token: at a line's start or after
/// a space, a tab or a flow indicator.
fn token_start(text: &str, at: usize) -> bool {
    text[..at]
        .chars()
        .next_back()
        .is_none_or(|c| matches!(c, ' ' | '\t' | '\n' | '\r' | '[' | '{' | ','))
}

/// The names of every alias (`*name`) in `text`.
fn aliases(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for (at, _) in text.match_indices('*') {
        if !token_start(text, at) {
            continue;
        }
        let rest = &text[at + 1..];
        let len = rest.find(|c| !name_char(c)).unwrap_or(rest.len());
        if len > 0 && !out.contains(&&rest[..len]) {
            out.push(&rest[..len]);
        }
    }
    out
}

/// Where each anchor `&name` in `text` starts, and where its name ends.
fn anchors(text: &str, name: &str) -> Vec<(usize, usize)> {
    let tag = format!("&{name}");
    text.match_indices(&tag)
        .map(|(at, _)| (at, at + tag.len()))
        .filter(|&(at, end)| {
            token_start(text, at) && !text[end..].chars().next().is_some_and(name_char)
        })
        .collect()
}

/// The start of the line after the one holding `at`.
fn line_after(text: &str, at: usize) -> usize {
    text[at..].find('\n').map_or(text.len(), |i| at + i + 1)
}

/// A line's leading spaces, and whether it holds nothing else.
fn indent_of(line: &str) -> (usize, bool) {
    let trimmed = line.trim_start_matches([' ', '\t']);
    (line.len() - trimmed.len(), trimmed.trim().is_empty())
}

/// Where the node anchored at `at` (its name ending at `name_end`) ends:
/// a line's start (or the text's end).
fn node_end(text: &str, at: usize, name_end: usize) -> usize {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let (indent, _) = indent_of(&text[line_start..]);
    let after = text[name_end..line_after(text, name_end)].trim();
    // A tag (`!!str`) may sit between an anchor and its node.
    let after = match after.strip_prefix('!') {
        Some(tagged) => tagged.split_once(' ').map_or("", |(_, v)| v.trim_start()),
        None => after,
    };
    let on_next_lines = after.is_empty() || after.starts_with('#');
    let mut end = line_after(text, name_end);
    let mut sequence_at_key = None;
    loop {
        if end >= text.len() {
            break;
        }
        let line = &text[end..line_after(text, end)];
        let (spaces, blank) = indent_of(line);
        let dash = line[spaces..].starts_with('-');
        let same_level_item = on_next_lines
            && spaces == indent
            && dash
            && sequence_at_key.is_none_or(|s| s == spaces);
        if blank || spaces > indent || same_level_item {
            if same_level_item {
                sequence_at_key = Some(spaces);
            }
            end = line_after(text, end);
            continue;
        }
        break;
    }
    // A quoted scalar or a flow collection runs to its closing character,
    // whatever the lines in between are indented by.
    let skip_space = |i: usize| {
        i + text[i..]
            .find(|c: char| !c.is_whitespace())
            .unwrap_or(text.len() - i)
    };
    let mut value_at = skip_space(name_end);
    if text[value_at..].starts_with('!') {
        let tag_len = text[value_at..]
            .find(char::is_whitespace)
            .unwrap_or(text.len() - value_at);
        value_at = skip_space(value_at + tag_len);
    }
    match closing(text, value_at) {
        Some(c) => end.max(line_after(text, c)),
        None => end,
    }
}

/// Where a quoted scalar or a flow collection starting at `at` closes
/// (the closing character's offset, the text's end when it never does);
/// `None` for any other node.
fn closing(text: &str, at: usize) -> Option<usize> {
    let mut chars = text[at..].char_indices();
    let (_, open) = chars.next()?;
    match open {
        '"' => {
            let mut escaped = false;
            for (i, c) in chars {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => return Some(at + i),
                    _ => {}
                }
            }
            Some(text.len())
        }
        '\'' => {
            let rest = &text[at + 1..];
            let mut i = 0;
            while let Some(q) = rest[i..].find('\'') {
                let q = i + q;
                if rest[q + 1..].starts_with('\'') {
                    i = q + 2;
                    continue;
                }
                return Some(at + 1 + q);
            }
            Some(text.len())
        }
        '[' | '{' => {
            let mut depth = 0usize;
            let mut quote: Option<char> = None;
            let mut escaped = false;
            for (i, c) in text[at..].char_indices() {
                match (quote, c) {
                    (Some('"'), _) if escaped => escaped = false,
                    (Some('"'), '\\') => escaped = true,
                    (Some(q), c) if c == q => quote = None,
                    (Some(_), _) => {}
                    (None, '"' | '\'') => quote = Some(c),
                    (None, '[' | '{') => depth += 1,
                    (None, ']' | '}') => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return Some(at + i);
                        }
                    }
                    _ => {}
                }
            }
            Some(text.len())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hidden(text: &str, aliasing: &str) -> String {
        hide(text, &aliased_extents(text, aliasing), "***")
    }

    #[test]
    fn every_style_of_an_aliased_node_is_hidden_by_its_source_lines() {
        let cases = [
            ("a: &v plain-value\nb: 1\n", "a: &v ***\nb: 1\n"),
            ("a: &v 'single ''q'''\nb: 1\n", "a: &v ***\nb: 1\n"),
            (
                "a: &v \"esc\\x41ped\n  line two \\\"q\\\"\"\nb: 1\n",
                "a: &v ***\n  ***\nb: 1\n",
            ),
            (
                "a: &v >-\n  folded-one\n\n  folded-two\nb: 1\n",
                "a: &v ***\n  ***\n\n  ***\nb: 1\n",
            ),
            (
                "a: &v |\n  lit-one\n  lit-two\nb: 1\n",
                "a: &v ***\n  ***\n  ***\nb: 1\n",
            ),
            ("a: &v !!str tagged\nb: 1\n", "a: &v ***\nb: 1\n"),
            (
                "a: &v\n- item-one\n- item-two\nb: 1\n",
                "a: &v\n***\n***\nb: 1\n",
            ),
            (
                "x:\n  a: &v {k: [1, 2],\n    j: 3}\n  b: 1\n",
                "x:\n  a: &v ***\n    ***\n  b: 1\n",
            ),
            (
                "l:\n  - &v plain\n  - other\n",
                "l:\n  - &v ***\n  - other\n",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(hidden(text, "secrets: {t: *v}"), want, "{text}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any text, anchors and aliases anywhere (in comments, unclosed
        /// quotes, next to multi-byte characters): extents within the
        /// text, on character boundaries, and hiding never panics.
        #[test]
        fn any_text_is_read_without_a_panic(
            text in "([ \\n\t&*a\"'\\[\\]{},:#!|>-]|é|x){0,80}",
            aliasing in "([ \\n*a,]|é){0,20}",
        ) {
            let extents = aliased_extents(&text, &aliasing);
            for r in &extents {
                proptest::prop_assert!(r.start <= r.end && r.end <= text.len());
                proptest::prop_assert!(text.is_char_boundary(r.start) && text.is_char_boundary(r.end));
            }
            let _ = hide(&text, &extents, "***");
        }
    }

    #[test]
    fn only_aliased_anchors_and_what_they_alias_in_turn_are_hidden() {
        let text = "b: &b deep-value\na: &a [*b]\nc: &c kept-value\nd: a&b*c\n";
        assert_eq!(
            hidden(text, "secrets:\n  t: *a\n"),
            "b: &b ***\na: &a ***\nc: &c kept-value\nd: a&b*c\n"
        );
        assert_eq!(hidden(text, "secrets: {t: x*c}"), text);
        assert_eq!(
            hidden("a: &vv x\nb: &v y\n", "s: *v"),
            "a: &vv x\nb: &v ***\n"
        );
    }
}
