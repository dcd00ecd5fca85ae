//! A config.yaml's `secrets` told apart from the rest of its text by
//! parsing it, so that a diff of the rest cannot show a secret's value in
//! any of the forms YAML allows: a block scalar (`tok: |` and a PEM on the
//! next lines), a value on the line after its key, a quoted key or a space
//! before the colon, flow style, anchors and aliases, a list.
//!
//! The document is parsed (YAML 1.1, as truss reads it) for the secrets'
//! names and values, and read once more for where each top-level key
//! starts in the text. Every top-level entry whose key is `secrets` is cut
//! out whole, from its key's line to the next key's line; the cut is kept
//! only if the rest of the text parses to the same document without
//! `secrets` (else the rest is not shown at all: a flow-style document, a
//! key written as an alias, an anchor the rest still needs). A node the
//! entry reaches through an alias but written outside it is hidden in the
//! rest by its source extent (`anchors`): a folded or escaped scalar does
//! not hold its parsed value verbatim. Whatever is shown is then scrubbed
//! of every secret value and of every line of a multi-line one.

use std::fmt;
use std::ops::Range;

use serde::Deserializer as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::truss_config::yaml11::{self, Node};

mod anchors;

/// The top-level key whose values are never shown.
const KEY: &str = "secrets";
/// A secret value (or one line of one) shorter than this is not scrubbed
/// from the rest of the text: its own lines are cut out anyway, and
/// replacing every `1` or `yes` in a config would make the diff unreadable
/// while hiding nothing.
const SCRUB_MIN_CHARS: usize = 4;
/// What a scrubbed value reads as.
const HIDDEN: &str = "***";

/// Why a config's secrets cannot be told apart from the rest of its text.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub(crate) enum Untold {
    /// Not YAML, in the parser's words (the parser reads input and keeps
    /// its errors as text).
    #[error("{0}")]
    NotYaml(String),
    /// The cut could not be proved whole.
    #[error("its secrets could not be cut out of the text line by line")]
    NotLines,
}

/// A config.yaml with its secrets told apart.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Parts {
    /// The text without its `secrets` entries, or why it cannot be shown.
    pub(crate) rest: Result<String, Untold>,
    /// The secrets' names (the keys of the `secrets` mapping), in order.
    pub(crate) names: Vec<String>,
    /// Every value under `secrets` (aliases resolved), never shown.
    values: Vec<String>,
    /// The text that was cut out, kept only to tell whether two configs'
    /// secrets differ; never shown.
    cut: String,
}

impl Parts {
    /// Whether the `secrets` entries' own text differs from `other`'s.
    pub(crate) fn secrets_differ(&self, other: &Parts) -> bool {
        !self.cut.lines().eq(other.cut.lines())
    }
}

/// `text` parsed and its secrets told apart; `Err` when it is not YAML
/// (then nothing of it may be shown: its secrets cannot be found).
pub(crate) fn split(text: &str) -> Result<Parts, Untold> {
    let doc = yaml11::parse(text.as_bytes()).map_err(Untold::NotYaml)?;
    let (names, values) = match doc.get(KEY) {
        Some(s) => (names_of(s), values_of(s)),
        None => (Vec::new(), Vec::new()),
    };
    let (rest, cut) = match cut_out(text, &doc) {
        Ok((rest, cut)) => (Ok(rest), cut),
        Err(why) => (Err(why), String::new()),
    };
    Ok(Parts {
        rest,
        names,
        values,
        cut,
    })
}

/// `text` with every occurrence of any of the secret values of `parts`
/// (and of each line of a multi-line one) replaced by `***`.
pub(crate) fn scrub(text: &str, parts: &[&Parts]) -> String {
    let mut hidden: Vec<&str> = parts
        .iter()
        .flat_map(|p| &p.values)
        .flat_map(|v| std::iter::once(v.trim()).chain(v.lines().map(str::trim)))
        .filter(|v| v.chars().count() >= SCRUB_MIN_CHARS)
        .collect();
    // Longest first: a value that holds another is hidden whole.
    hidden.sort_by_key(|v| std::cmp::Reverse(v.len()));
    hidden.dedup();
    let mut out = text.to_string();
    for v in hidden {
        if out.contains(v) {
            out = out.replace(v, HIDDEN);
        }
    }
    out
}

/// The names under `secrets`: a mapping's keys (a list holds no names).
fn names_of(secrets: &Node) -> Vec<String> {
    match secrets {
        Node::Map(entries) => entries.iter().map(|(k, _)| text_of(k)).collect(),
        _ => Vec::new(),
    }
}

/// Every scalar under `secrets` but the mapping's own keys.
fn values_of(secrets: &Node) -> Vec<String> {
    fn all(n: &Node, out: &mut Vec<String>) {
        match n {
            Node::Null => {}
            Node::Seq(items) => items.iter().for_each(|i| all(i, out)),
            Node::Map(entries) => entries.iter().for_each(|(k, v)| {
                all(k, out);
                all(v, out);
            }),
            scalar => out.push(text_of(scalar)),
        }
    }
    let mut out = Vec::new();
    match secrets {
        Node::Map(entries) => entries.iter().for_each(|(_, v)| all(v, &mut out)),
        other => all(other, &mut out),
    }
    out
}

fn text_of(n: &Node) -> String {
    match n {
        Node::Str(s) => s.clone(),
        Node::Null => String::new(),
        Node::Bool(b) => b.to_string(),
        Node::Int(i) => i.to_string(),
        Node::Float(f) => f.to_string(),
        Node::Time { py, .. } => py.clone(),
        Node::Seq(_) | Node::Map(_) => String::new(),
    }
}

/// `text` without its top-level `secrets` entries, and the text cut; `Err`
/// with the reason when the cut cannot be proved whole.
fn cut_out(text: &str, doc: &Node) -> Result<(String, String), Untold> {
    let (kept, cut) = cut_ranges(text, doc)?;
    let extents = anchors::aliased_extents(text, &cut);
    // Each extent in the rest's own offsets: a node's lines never span a
    // top-level key, so an extent lies in one kept range or in the cut.
    let mut shifted: Vec<Range<usize>> = Vec::new();
    let mut offset = 0;
    for k in &kept {
        for e in &extents {
            let (start, end) = (e.start.max(k.start), e.end.min(k.end));
            if start < end {
                shifted.push(start - k.start + offset..end - k.start + offset);
            }
        }
        offset += k.len();
    }
    let rest: String = kept.iter().map(|k| &text[k.clone()]).collect();
    // What the entry aliases is its text too, for telling whether two
    // configs' secrets differ (never shown).
    let mut cut = cut;
    for e in &extents {
        cut.push_str(&text[e.clone()]);
    }
    Ok((anchors::hide(&rest, &shifted, HIDDEN), cut))
}

/// The ranges of `text` kept once its top-level `secrets` entries are cut
/// out, and the text cut; `Err` with the reason when the cut cannot be
/// proved whole.
fn cut_ranges(text: &str, doc: &Node) -> Result<(Vec<Range<usize>>, String), Untold> {
    // A top-level key named `secrets`, duplicates included, is in the
    // parsed document (merged in or written).
    if doc.get(KEY).is_none() {
        let whole: Range<usize> = 0..text.len();
        return Ok((Vec::from([whole]), String::new()));
    }
    let keys = top_level_keys(text).map_err(|_| Untold::NotLines)?;
    // Each key's line start, in document order; a key whose place is not
    // known (escaped, or an alias pointing back) makes the cut unprovable.
    let mut starts = Vec::with_capacity(keys.len());
    for k in &keys {
        let at = k.at.ok_or(Untold::NotLines)?;
        let line = text[..at].rfind('\n').map_or(0, |i| i + 1);
        if starts.last().is_some_and(|&s| s >= line) {
            return Err(Untold::NotLines);
        }
        starts.push(line);
    }
    let (mut rest, mut cut) = (String::new(), String::new());
    let mut kept = Vec::new();
    let mut kept_from = 0;
    for (i, k) in keys.iter().enumerate() {
        if k.text.as_deref() != Some(KEY) {
            continue;
        }
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        rest.push_str(&text[kept_from..starts[i]]);
        kept.push(kept_from..starts[i]);
        cut.push_str(&text[starts[i]..end]);
        kept_from = end;
    }
    rest.push_str(&text[kept_from..]);
    kept.push(kept_from..text.len());
    // The proof: the rest is the same document without `secrets`.
    let want = match doc {
        Node::Map(entries) => entries
            .iter()
            .filter(|(k, _)| !matches!(k, Node::Str(s) if s == KEY))
            .cloned()
            .collect::<Vec<_>>(),
        _ => return Err(Untold::NotLines),
    };
    let got = match yaml11::parse(rest.as_bytes()) {
        Ok(Node::Map(entries)) => entries,
        Ok(Node::Null) => Vec::new(),
        _ => return Err(Untold::NotLines),
    };
    if got != want {
        return Err(Untold::NotLines);
    }
    Ok((kept, cut))
}

/// A top-level key: its text, and where that text starts in the document
/// when it is the document's own (not an escaped or aliased copy).
#[derive(Debug)]
struct Key {
    text: Option<String>,
    at: Option<usize>,
}

/// The top-level mapping's keys in document order (duplicates included);
/// empty when the document is not a mapping.
fn top_level_keys(text: &str) -> Result<Vec<Key>, serde_yaml::Error> {
    serde_yaml::Deserializer::from_str(text).deserialize_any(TopLevel { src: text })
}

struct TopLevel<'s> {
    src: &'s str,
}

impl<'de> Visitor<'de> for TopLevel<'_> {
    type Value = Vec<Key>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML document")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Vec<Key>, A::Error> {
        let mut keys = Vec::new();
        while let Some(k) = a.next_key_seed(KeyAt { src: self.src })? {
            a.next_value::<IgnoredAny>()?;
            keys.push(k);
        }
        Ok(keys)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Vec<Key>, A::Error> {
        while a.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Vec::new())
    }
    fn visit_bool<E>(self, _: bool) -> Result<Vec<Key>, E> {
        Ok(Vec::new())
    }
    fn visit_i64<E>(self, _: i64) -> Result<Vec<Key>, E> {
        Ok(Vec::new())
    }
    fn visit_u64<E>(self, _: u64) -> Result<Vec<Key>, E> {
        Ok(Vec::new())
    }
    fn visit_f64<E>(self, _: f64) -> Result<Vec<Key>, E> {
        Ok(Vec::new())
    }
    fn visit_str<E>(self, _: &str) -> Result<Vec<Key>, E> {
        Ok(Vec::new())
    }
    fn visit_unit<E>(self) -> Result<Vec<Key>, E> {
        Ok(Vec::new())
    }
}

/// Reads a key as text: borrowed from the document (its place known) or
/// not (an escaped quoted key). A key that is not a scalar fails the read.
struct KeyAt<'s> {
    src: &'s str,
}

impl<'de> DeserializeSeed<'de> for KeyAt<'_> {
    type Value = Key;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyAt<'_> {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a scalar key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key, E> {
        let base = self.src.as_ptr() as usize;
        let at = (v.as_ptr() as usize).checked_sub(base);
        Ok(Key {
            text: Some(v.to_string()),
            at: at.filter(|&a| a + v.len() <= self.src.len()),
        })
    }
    fn visit_str<E>(self, v: &str) -> Result<Key, E> {
        Ok(Key {
            text: Some(v.to_string()),
            at: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rest(text: &str) -> String {
        split(text).unwrap().rest.unwrap()
    }

    #[test]
    fn every_top_level_secrets_entry_is_cut_out_whole() {
        let pem =
            "-----BEGIN PRIVATE KEY-----\n    MIIEvQIBADANBgkq\n    -----END PRIVATE KEY-----";
        let cases = [
            format!("model_name: m\nsecrets:\n  tok: |\n    {pem}\nresources:\n  cpu: '1'\n"),
            "model_name: m\nsecrets:\n  tok: >-\n    folded-line-one\n    folded-line-two\n\n# after\nresources:\n  cpu: '1'\n".into(),
            "model_name: m\nsecrets:\n  tok:\n    value-on-next-line\nresources:\n  cpu: '1'\n".into(),
            "model_name: m\n'secrets':\n  tok: quoted-key-value\nresources:\n  cpu: '1'\n".into(),
            "model_name: m\nsecrets :\n  tok: spaced-colon-value\nresources:\n  cpu: '1'\n".into(),
            "model_name: m\nsecrets: {tok: flow-value, b: flow-two}\nresources:\n  cpu: '1'\n".into(),
            "model_name: m\nsecrets:\n  - listed-value\nresources:\n  cpu: '1'\n".into(),
            "model_name: m\nresources:\n  cpu: '1'\nsecrets:\n  tok: last-value\n".into(),
            "model_name: m\nsecrets:\n  tok: first-copy\nresources:\n  cpu: '1'\nsecrets:\n  tok: second-copy\n".into(),
        ];
        for text in cases {
            assert_eq!(
                rest(&text),
                "model_name: m\nresources:\n  cpu: '1'\n",
                "{text}"
            );
        }
    }

    #[test]
    fn names_and_values_come_from_the_parsed_document() {
        let p = split(
            "x: &v anchored-value\nsecrets:\n  'a b': *v\n  c: |\n    one\n    two\n  d: null\n",
        )
        .unwrap();
        assert_eq!(p.names, ["a b", "c", "d"]);
        assert_eq!(p.values, ["anchored-value", "one\ntwo\n"]);
        // The aliased value is written outside the entry: the rest keeps
        // its line, the node hidden by its extent (and scrubbed besides).
        assert_eq!(p.rest.as_deref(), Ok("x: &v ***\n"));
        assert_eq!(scrub("x: &v anchored-value\n", &[&p]), "x: &v ***\n");
        assert_eq!(
            scrub("two lines: one, two\n", &[&p]),
            "two lines: one, two\n"
        );
        let p = split("secrets:\n  tok: |\n    line-one\n    line-two\n").unwrap();
        assert_eq!(scrub("line-two line-one", &[&p]), "*** ***");
    }

    #[test]
    fn a_cut_that_cannot_be_proved_shows_nothing() {
        for text in [
            "{model_name: m, secrets: {tok: v}}\n",
            "model_name: m\nsecrets: &s\n  tok: v\nother: *s\n",
            "model_name: m\n\"sec\\x72ets\":\n  tok: v\n",
            "base: &b {secrets: {tok: v}}\n<<: *b\n",
        ] {
            let p = split(text).unwrap();
            assert!(p.rest.is_err(), "{text}: {p:?}");
        }
        assert!(split("a: [\n").is_err());
    }

    #[test]
    fn a_config_without_secrets_is_kept_as_it_is() {
        let text = "model_name: m\n# comment\nresources: {cpu: '1'}\n";
        assert_eq!(rest(text), text);
        assert_eq!(rest(""), "");
        assert!(split(text).unwrap().names.is_empty());
    }
}
