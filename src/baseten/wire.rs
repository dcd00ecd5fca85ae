//! JSON as the official Python client writes it, so the platform receives
//! the same bytes: `json.dumps` defaults (`", "` and `": "` separators,
//! non-ASCII escaped as `\uXXXX`), and objects in the user's key order.

use std::fmt::Write as _;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// A JSON object that keeps its keys in the order they were written (the
/// user's labels), where `serde_json::Map` would sort them.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct OrderedObject(pub(crate) Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for OrderedObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = OrderedObject;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedObject, A::Error> {
                let mut entries: Vec<(String, Value)> = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    // A repeated key keeps its first place and its last value,
                    // as Python's json.loads does.
                    match entries.iter_mut().find(|(key, _)| *key == k) {
                        Some(slot) => slot.1 = v,
                        None => entries.push((k, v)),
                    }
                }
                Ok(OrderedObject(entries))
            }
        }
        d.deserialize_map(Entries)
    }
}

impl OrderedObject {
    /// `json.dumps` of the object, keys in order.
    pub(crate) fn dumps(&self) -> String {
        let mut out = String::from("{");
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            string(&mut out, k);
            out.push_str(": ");
            value(&mut out, v);
        }
        out.push('}');
        out
    }
}

/// `json.dumps(v)` with Python's defaults.
pub(crate) fn dumps(v: &Value) -> String {
    let mut out = String::new();
    value(&mut out, v);
    out
}

fn value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                string(out, k);
                out.push_str(": ");
                value(out, item);
            }
            out.push('}');
        }
    }
}

/// A JSON string with Python's `ensure_ascii` escapes.
fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_format_of_python_json_dumps() {
        // Expected strings are what `json.dumps` prints for the same values.
        assert_eq!(
            dumps(&json!({"a": [1, 2.5, null, true], "b": "x"})),
            r#"{"a": [1, 2.5, null, true], "b": "x"}"#
        );
        assert_eq!(
            dumps(&json!("é😀\u{1}\"\\\n")),
            r#""\u00e9\ud83d\ude00\u0001\"\\\n""#
        );
        assert_eq!(dumps(&json!({})), "{}");
    }

    #[test]
    fn labels_keep_the_users_key_order() {
        let o: OrderedObject =
            serde_json::from_str(r#"{"zeta": "1", "alpha": {"y": 1}, "mid": 2, "zeta": "last"}"#)
                .unwrap();
        assert_eq!(
            o.dumps(),
            r#"{"zeta": "last", "alpha": {"y": 1}, "mid": 2}"#
        );
        assert!(serde_json::from_str::<OrderedObject>("[1]").is_err());
    }
}
