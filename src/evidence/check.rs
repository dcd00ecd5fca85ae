//! One answer against its case: the status, the JSON subset, each pointer,
//! `contains` and the case's own latency bound. Each broken expectation
//! says what was expected and shows a short diff of what came back.

use serde_json::Value;

use super::cases::Case;

/// Characters of an answer shown in a diff.
const SHOWN_CHARS: usize = 120;

/// One broken expectation.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Mismatch {
    /// Which expectation, e.g. `pointer /labels/0/score`.
    pub(crate) expectation: String,
    pub(crate) expected: String,
    pub(crate) got: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: expected {}\n  - {}\n  + {}",
            self.expectation, self.expected, self.expected, self.got
        )
    }
}

fn short(s: &str) -> String {
    let mut out: String = s.chars().take(SHOWN_CHARS).collect();
    if s.chars().nth(SHOWN_CHARS).is_some() {
        out.push('…');
    }
    out
}

fn shown(v: &Value) -> String {
    short(&v.to_string())
}

/// Checks one answer: HTTP `status`, body `text` (the assembled stream for
/// a streaming case), taking `ms`.
pub(crate) fn check(case: &Case, status: u16, text: &str, ms: f64) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let mut miss = |expectation: String, expected: String, got: String| {
        out.push(Mismatch {
            expectation,
            expected,
            got,
        });
    };
    if status != case.status {
        miss(
            "status".into(),
            format!("HTTP {}", case.status),
            format!("HTTP {status}: {}", short(text)),
        );
    }
    if let Some(max) = case.max_ms
        && ms > max as f64
    {
        miss(
            "max-ms".into(),
            format!("at most {max} ms"),
            format!("{ms:.0} ms"),
        );
    }
    if let Some(needle) = &case.contains
        && !text.contains(needle.as_str())
    {
        miss(
            "contains".into(),
            format!("text containing {needle:?}"),
            short(text),
        );
    }
    if case.json.is_none() && case.pointers.is_empty() {
        return out;
    }
    let answer: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(_) => {
            miss("json".into(), "a JSON answer".into(), short(text));
            return out;
        }
    };
    if let Some(want) = &case.json
        && let Some((at, expected, got)) = subset(want, &answer, String::new())
    {
        miss(
            format!("json at {}", if at.is_empty() { "/" } else { &at }),
            expected,
            got,
        );
    }
    for (pointer, e) in &case.pointers {
        let what = format!("pointer {pointer}");
        let Some(found) = answer.pointer(pointer) else {
            let expected = match (&e.kind, &e.equals, &e.matches) {
                (Some(k), _, _) => format!("a value of type {}", k.word()),
                (_, Some(v), _) => shown(v),
                (_, _, Some(re)) => format!("text matching {:?}", re.as_str()),
                _ => "a value".into(),
            };
            miss(what, expected, "nothing there".into());
            continue;
        };
        if let Some(k) = e.kind
            && !k.holds(found)
        {
            miss(
                what.clone(),
                format!("type {}", k.word()),
                format!("{} ({})", shown(found), type_word(found)),
            );
        }
        if let Some(v) = &e.equals
            && !same(v, found)
        {
            miss(what.clone(), shown(v), shown(found));
        }
        if let Some(re) = &e.matches {
            match found.as_str() {
                Some(s) if re.is_match(s) => {}
                _ => miss(
                    what.clone(),
                    format!("text matching {:?}", re.as_str()),
                    shown(found),
                ),
            }
        }
    }
    out
}

fn type_word(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Equal JSON values, numbers compared by value (`1` equals `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Whether `got` contains `want`: every key of an object (recursively),
/// arrays element by element at the same index, scalars equal. The first
/// difference as (pointer, expected, got).
fn subset(want: &Value, got: &Value, at: String) -> Option<(String, String, String)> {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w.iter().find_map(|(k, wv)| {
            let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
            match g.get(k) {
                Some(gv) => subset(wv, gv, here),
                None => Some((here, shown(wv), "no such key".into())),
            }
        }),
        (Value::Array(w), Value::Array(g)) => w.iter().enumerate().find_map(|(i, wv)| {
            let here = format!("{at}/{i}");
            match g.get(i) {
                Some(gv) => subset(wv, gv, here),
                None => Some((here, shown(wv), format!("an array of {} items", g.len()))),
            }
        }),
        (w, g) if same(w, g) => None,
        (w, g) => Some((at, shown(w), shown(g))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::cases::parse;

    fn case(yaml: &str) -> Case {
        let dir = tempfile::tempdir().unwrap();
        parse(yaml, false, dir.path()).unwrap().remove(0)
    }

    #[test]
    fn a_matching_answer_passes() {
        let c = case(
            r#"
- name: classify
  payload: {}
  json: {labels: [{name: positive}]}
  pointer:
    /labels/0/score: {type: number}
    /model: {equals: my-model}
    /text: {matches: "^Summary: "}
  contains: positive
  max-ms: 100
"#,
        );
        let answer = r#"{"labels": [{"name": "positive", "score": 0.9}, {"name": "x"}], "model": "my-model", "text": "Summary: ok"}"#;
        assert_eq!(check(&c, 200, answer, 20.0), vec![]);
    }

    #[test]
    fn each_broken_expectation_is_named_with_a_diff() {
        let c = case(
            r#"
- name: classify
  payload: {}
  json: {labels: [{name: positive}]}
  pointer:
    /labels/0/score: {type: number}
    /missing: {equals: 1}
    /text: {matches: "^Summary: "}
  contains: zebra
  max-ms: 10
"#,
        );
        let answer = r#"{"labels": [{"name": "negative", "score": "high"}], "text": "nope"}"#;
        let m = check(&c, 500, answer, 20.0);
        let names: Vec<&str> = m.iter().map(|m| m.expectation.as_str()).collect();
        assert_eq!(
            names,
            [
                "status",
                "max-ms",
                "contains",
                "json at /labels/0/name",
                "pointer /labels/0/score",
                "pointer /missing",
                "pointer /text"
            ]
        );
        assert_eq!(m[3].expected, "\"positive\"");
        assert_eq!(m[3].got, "\"negative\"");
        assert_eq!(m[4].got, "\"high\" (string)");
        assert_eq!(m[5].got, "nothing there");
    }

    #[test]
    fn numbers_compare_by_value_and_arrays_by_index() {
        assert!(same(&serde_json::json!(1), &serde_json::json!(1.0)));
        assert!(
            subset(
                &serde_json::json!([1]),
                &serde_json::json!([1, 2]),
                String::new()
            )
            .is_none()
        );
        assert!(
            subset(
                &serde_json::json!([2]),
                &serde_json::json!([1, 2]),
                String::new()
            )
            .is_some()
        );
        assert!(
            subset(
                &serde_json::json!({"a": {}}),
                &serde_json::json!({"a": {"b": 1}}),
                String::new()
            )
            .is_none()
        );
    }

    #[test]
    fn a_non_json_answer_fails_json_expectations_only() {
        let c = case("- {name: a, payload: {}, pointer: {/a: {type: number}}}");
        let m = check(&c, 200, "<html>", 1.0);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].expectation, "json");
    }
}
