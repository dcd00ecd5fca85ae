//! `predict-cases`: the cases file (a YAML list, or JSON lines for
//! `.jsonl`), parsed and checked whole before any request — an unknown key,
//! a pointer that is not RFC 6901, a regex that does not compile or a
//! payload file outside the repository is an input error.

use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path};

use regex_lite::Regex;
use serde::Deserialize;
use serde_json::Value;

use crate::files::{ReadError, read_regular_file};

/// A cases file (or a payload file) larger than this is not a test
/// description; it is refused before it is read into memory.
pub(crate) const CASES_FILE_MAX_MIB: u64 = 4;
/// More cases than this would not fit any step summary.
pub(crate) const CASES_MAX: usize = 200;

/// One contract case.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub(crate) name: String,
    pub(crate) payload: Value,
    pub(crate) status: u16,
    /// The answer contains these keys and values (nested; arrays by index).
    pub(crate) json: Option<Value>,
    /// RFC 6901 pointers into the answer and what each must hold.
    pub(crate) pointers: Vec<(String, Expect)>,
    pub(crate) contains: Option<String>,
    /// The answer is an SSE stream, assembled before it is checked.
    pub(crate) stream: bool,
    pub(crate) max_ms: Option<u64>,
}

/// What one pointer must find.
#[derive(Clone, Debug, Default)]
pub(crate) struct Expect {
    pub(crate) kind: Option<JsonType>,
    pub(crate) equals: Option<Value>,
    pub(crate) matches: Option<Regex>,
}

/// The JSON types a pointer expectation can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JsonType {
    String,
    Number,
    Integer,
    Boolean,
    Array,
    Object,
    Null,
}

impl JsonType {
    const ALL: &[(&str, JsonType)] = &[
        ("string", JsonType::String),
        ("number", JsonType::Number),
        ("integer", JsonType::Integer),
        ("boolean", JsonType::Boolean),
        ("array", JsonType::Array),
        ("object", JsonType::Object),
        ("null", JsonType::Null),
    ];

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, t)| *t)
    }

    pub(crate) fn word(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("?", |(n, _)| n)
    }

    pub(crate) fn holds(self, v: &Value) -> bool {
        match self {
            JsonType::String => v.is_string(),
            JsonType::Number => v.is_number(),
            JsonType::Integer => {
                v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            JsonType::Boolean => v.is_boolean(),
            JsonType::Array => v.is_array(),
            JsonType::Object => v.is_object(),
            JsonType::Null => v.is_null(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawCase {
    name: String,
    payload: Value,
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    json: Option<Value>,
    #[serde(default)]
    pointer: BTreeMap<String, RawExpect>,
    #[serde(default)]
    contains: Option<String>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    max_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    equals: Option<Value>,
    #[serde(default)]
    matches: Option<String>,
}

/// Whether `p` is an RFC 6901 JSON pointer: empty, or `/`-separated
/// tokens where `~` is only ever `~0` or `~1`.
pub(crate) fn is_json_pointer(p: &str) -> bool {
    if p.is_empty() {
        return true;
    }
    if !p.starts_with('/') {
        return false;
    }
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return false;
        }
    }
    true
}

/// Reads and checks the cases file at `path` (relative paths are taken
/// from `root`, the repository root, as are payload file paths).
pub(crate) fn load(path: &Path, root: &Path) -> Result<Vec<Case>, String> {
    let shown = path.display();
    let bytes = read_regular_file(&root.join(path), CASES_FILE_MAX_MIB).map_err(|e| match e {
        ReadError::Io(e) => format!(
            "predict-cases {shown} cannot be read ({e}): point it at a YAML or .jsonl file in the repository"
        ),
        other => format!("predict-cases {shown}: {other}"),
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("predict-cases {shown} is not UTF-8 text: save it as UTF-8"))?;
    let jsonl = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"));
    parse(&text, jsonl, root).map_err(|e| format!("predict-cases {shown}: {e}"))
}

/// Parses cases from `text` (YAML list, or one JSON object per line).
pub(crate) fn parse(text: &str, jsonl: bool, root: &Path) -> Result<Vec<Case>, String> {
    let raw: Vec<RawCase> = if jsonl {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1)))
            .collect::<Result<_, _>>()?
    } else {
        serde_yaml::from_str(text).map_err(|e| {
            format!("{e}: the file must be a YAML list of cases, each with name and payload")
        })?
    };
    if raw.is_empty() {
        return Err("no cases: add at least one case with name and payload".into());
    }
    if raw.len() > CASES_MAX {
        return Err(format!(
            "{} cases, more than {CASES_MAX}: keep the contract to the cases that matter",
            raw.len()
        ));
    }
    let mut seen = HashSet::new();
    raw.into_iter().map(|r| case(r, root, &mut seen)).collect()
}

fn case(r: RawCase, root: &Path, seen: &mut HashSet<String>) -> Result<Case, String> {
    let name = r.name.trim().to_string();
    if name.is_empty() {
        return Err("a case has an empty name: give every case a unique name".into());
    }
    if !seen.insert(name.clone()) {
        return Err(format!(
            "two cases are named {name:?}: names must be unique"
        ));
    }
    let payload = match r.payload {
        Value::String(p) => payload_file(&p, root).map_err(|e| format!("case {name:?}: {e}"))?,
        v => v,
    };
    let status = r.status.unwrap_or(200);
    if !(100..=599).contains(&status) {
        return Err(format!(
            "case {name:?}: status must be an HTTP status (100 to 599), got {status}"
        ));
    }
    let mut pointers = Vec::new();
    for (p, e) in r.pointer {
        if !is_json_pointer(&p) {
            return Err(format!(
                "case {name:?}: {p:?} is not an RFC 6901 JSON pointer: start it with '/', e.g. /labels/0/score (write '~' as ~0 and '/' inside a key as ~1)"
            ));
        }
        let kind = match e.kind.as_deref() {
            None => None,
            Some(t) => Some(JsonType::parse(t).ok_or_else(|| {
                format!(
                    "case {name:?}: pointer {p}: type must be one of string, number, integer, boolean, array, object, null; got {t:?}"
                )
            })?),
        };
        let matches = match e.matches.as_deref() {
            None => None,
            Some(re) => Some(Regex::new(re).map_err(|err| {
                format!("case {name:?}: pointer {p}: matches {re:?} is not a valid regex ({err})")
            })?),
        };
        if kind.is_none() && e.equals.is_none() && matches.is_none() {
            return Err(format!(
                "case {name:?}: pointer {p} expects nothing: give it type, equals or matches"
            ));
        }
        pointers.push((
            p,
            Expect {
                kind,
                equals: e.equals,
                matches,
            },
        ));
    }
    if r.max_ms == Some(0) {
        return Err(format!(
            "case {name:?}: max-ms must be at least 1 millisecond"
        ));
    }
    Ok(Case {
        name,
        payload,
        status,
        json: r.json,
        pointers,
        contains: r.contains,
        stream: r.stream,
        max_ms: r.max_ms,
    })
}

/// A payload given as a path: a JSON file inside the repository.
fn payload_file(p: &str, root: &Path) -> Result<Value, String> {
    let rel = Path::new(p);
    if rel.is_absolute() || rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "payload file {p:?} leaves the repository: give a path relative to the repository root without '..'"
        ));
    }
    let full = root.join(rel);
    // A link inside the repository may still point out of it.
    let (Ok(real), Ok(base)) = (full.canonicalize(), root.canonicalize()) else {
        return Err(format!(
            "payload file {p:?} does not exist: paths are relative to the repository root (the working directory)"
        ));
    };
    if !real.starts_with(&base) {
        return Err(format!(
            "payload file {p:?} leaves the repository (it resolves to {}): keep payloads inside it",
            real.display()
        ));
    }
    let bytes = read_regular_file(&real, CASES_FILE_MAX_MIB)
        .map_err(|e| format!("payload file {p:?}: {e}"))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("payload file {p:?} is not valid JSON ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn the_documented_layout_parses() {
        let dir = root();
        std::fs::write(dir.path().join("p.json"), r#"{"text": "from a file"}"#).unwrap();
        let cases = parse(
            r#"
- name: classify
  payload: {task: classify, text: "I love this phone"}
  status: 200
  json: {labels: [{name: positive}]}
  pointer:
    /labels/0/score: {type: number}
    /model: {equals: my-model}
    /choices/0/text: {matches: "^Summary: "}
  contains: hello
  stream: false
  max-ms: 5000
- name: from-file
  payload: p.json
"#,
            false,
            dir.path(),
        )
        .unwrap();
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[0].pointers.len(), 3);
        assert_eq!(cases[0].max_ms, Some(5000));
        assert_eq!(cases[1].payload["text"], "from a file");
        assert_eq!(cases[1].status, 200);
    }

    #[test]
    fn json_lines_parse() {
        let dir = root();
        let cases = parse(
            "{\"name\": \"a\", \"payload\": {\"x\": 1}}\n\n{\"name\": \"b\", \"payload\": {}, \"status\": 422}\n",
            true,
            dir.path(),
        )
        .unwrap();
        assert_eq!(cases[1].status, 422);
    }

    #[test]
    fn bad_cases_are_refused_with_the_reason() {
        let dir = root();
        let refused = [
            (
                "- {name: a, payload: {}, colour: red}",
                "unknown field `colour`",
            ),
            (
                "- {name: a, payload: {}, pointer: {labels: {type: number}}}",
                "not an RFC 6901",
            ),
            (
                "- {name: a, payload: {}, pointer: {/a~2: {type: number}}}",
                "not an RFC 6901",
            ),
            (
                "- {name: a, payload: {}, pointer: {/a: {kind: number}}}",
                "unknown field `kind`",
            ),
            (
                "- {name: a, payload: {}, pointer: {/a: {type: float}}}",
                "type must be one of",
            ),
            (
                "- {name: a, payload: {}, pointer: {/a: {matches: \"(\"}}}",
                "not a valid regex",
            ),
            (
                "- {name: a, payload: {}, pointer: {/a: {}}}",
                "expects nothing",
            ),
            (
                "- {name: a, payload: {}}\n- {name: a, payload: {}}",
                "unique",
            ),
            (
                "- {name: a, payload: ../secrets.json}",
                "leaves the repository",
            ),
            ("- {name: a, payload: /etc/passwd}", "leaves the repository"),
            ("- {name: a, payload: missing.json}", "does not exist"),
            ("- {name: a, payload: {}, status: 42}", "HTTP status"),
            ("- {name: a}", "missing field `payload`"),
            ("[]", "no cases"),
            ("name: a", "YAML list"),
        ];
        for (text, want) in refused {
            let e = parse(text, false, dir.path()).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn a_link_out_of_the_repository_is_refused() {
        let dir = root();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(outside.path(), "{}").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("p.json")).unwrap();
        let e = parse("- {name: a, payload: p.json}", false, dir.path()).unwrap_err();
        assert!(e.contains("leaves the repository"), "{e}");
    }

    #[test]
    fn pointers_follow_rfc_6901() {
        for ok in ["", "/", "/a/0", "/a~0b/c~1d", "/ "] {
            assert!(is_json_pointer(ok), "{ok}");
        }
        for bad in ["a", "a/b", "/a~", "/a~2", "#/a"] {
            assert!(!is_json_pointer(bad), "{bad}");
        }
    }
}
