//! config.yaml read as truss reads it: YAML 1.1 scalars (PyYAML's safe
//! loader), not the YAML 1.2 core schema serde_yaml applies.
//!
//! serde_yaml's parser is libyaml, whose event stream PyYAML's parser
//! mirrors, so the syntax accepted is the same; only the typing of plain
//! scalars differs (`yes`, `010`, `1e3`, `0o17`, `1:30`, dates). serde_yaml
//! hides a scalar's style, so the document is read twice: once for its
//! shape, once asking every scalar for its text as a string. A plain scalar's
//! text comes back borrowed from the input without surrounding quotes, which
//! tells plain scalars (typed here by the YAML 1.1 rules) from quoted and
//! block ones (always strings).

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

mod scalar;

use scalar::resolve_plain;

/// A YAML 1.1 value as PyYAML constructs it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    /// A timestamp: its `str()` in Python and its JSON form in pydantic.
    Time {
        py: String,
        json: String,
    },
    Seq(Vec<Node>),
    /// Keys in first-insertion order, later duplicates already folded in.
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// Python truthiness.
    pub(crate) fn truthy(&self) -> bool {
        match self {
            Node::Null => false,
            Node::Bool(b) => *b,
            Node::Int(i) => *i != 0,
            Node::Float(f) => *f != 0.0,
            Node::Str(s) => !s.is_empty(),
            Node::Time { .. } => true,
            Node::Seq(v) => !v.is_empty(),
            Node::Map(m) => !m.is_empty(),
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(m) => m
                .iter()
                .find(|(k, _)| matches!(k, Node::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Parses one YAML document with PyYAML's safe-loader semantics.
pub(crate) fn parse(raw: &[u8]) -> Result<Node, String> {
    let text = std::str::from_utf8(raw).map_err(|e| format!("config.yaml is not UTF-8: {e}"))?;
    // A stream without a document is null to PyYAML; libyaml's serde front
    // end calls it an early end of input.
    let blank = text
        .trim_start_matches('\u{feff}')
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
    if blank {
        return Ok(Node::Null);
    }
    let shape = Shape::deserialize(serde_yaml::Deserializer::from_str(text))
        .map_err(|e| format!("config.yaml is not valid YAML: {e}"))?;
    let seed = Reread {
        shape: &shape,
        src: text,
    };
    let raw_node = seed
        .deserialize(serde_yaml::Deserializer::from_str(text))
        .map_err(|e| format!("config.yaml is not valid YAML: {e}"))?;
    build(raw_node)
}

/// The first read: the document's structure.
#[derive(Debug)]
enum Shape {
    Scalar,
    Seq(Vec<Shape>),
    Map(Vec<(Shape, Shape)>),
}

impl<'de> serde::Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShapeVisitor)
    }
}

struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Shape;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_i128<E>(self, _: i128) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_u128<E>(self, _: u128) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_unit<E>(self) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_none<E>(self) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Shape, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = a.next_element::<Shape>()? {
            v.push(x);
        }
        Ok(Shape::Seq(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Shape, A::Error> {
        let mut v = Vec::new();
        while let Some((k, x)) = a.next_entry::<Shape, Shape>()? {
            v.push((k, x));
        }
        Ok(Shape::Map(v))
    }
}

/// A scalar's text and whether it was written plain (so typed by the rules).
#[derive(Debug)]
enum Raw {
    Scalar { text: String, plain: bool },
    Seq(Vec<Raw>),
    Map(Vec<(Raw, Raw)>),
}

/// The second read, walking the known shape and asking scalars for text.
struct Reread<'s> {
    shape: &'s Shape,
    src: &'s str,
}

impl<'de, 's> DeserializeSeed<'de> for Reread<'s> {
    type Value = Raw;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Raw, D::Error> {
        match self.shape {
            Shape::Scalar => d.deserialize_str(ScalarText { src: self.src }),
            Shape::Seq(items) => d.deserialize_seq(SeqText {
                items,
                src: self.src,
            }),
            Shape::Map(entries) => d.deserialize_map(MapText {
                entries,
                src: self.src,
            }),
        }
    }
}

struct ScalarText<'s> {
    src: &'s str,
}

impl<'de> Visitor<'de> for ScalarText<'_> {
    type Value = Raw;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a scalar")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Raw, E> {
        // Quoted scalars without escapes are borrowed too: their text sits
        // between a pair of quote characters in the input.
        let base = self.src.as_ptr() as usize;
        let at = (v.as_ptr() as usize).wrapping_sub(base);
        let bytes = self.src.as_bytes();
        let quoted = at >= 1
            && at + v.len() < bytes.len()
            && matches!(bytes[at - 1], b'"' | b'\'')
            && bytes[at + v.len()] == bytes[at - 1];
        // An explicit tag right before the scalar overrides its style's typing.
        let before = self.src[..at.min(self.src.len())].trim_end_matches([' ', '\t']);
        let tag = before
            .rsplit([' ', '\t', '\n', '\r', '[', '{', ','])
            .next()
            .filter(|t| t.starts_with('!'));
        let text = match tag {
            Some("!!binary") => {
                use base64::Engine as _;
                let clean: String = v.split_whitespace().collect();
                base64::engine::general_purpose::STANDARD
                    .decode(clean)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .unwrap_or_else(|| v.to_string())
            }
            _ => v.to_string(),
        };
        Ok(Raw::Scalar {
            text,
            plain: !quoted && !matches!(tag, Some("!!str" | "!!binary")),
        })
    }
    fn visit_str<E>(self, v: &str) -> Result<Raw, E> {
        // Text that differs from its source: escapes, a block scalar, or a
        // plain scalar folded over lines (which no YAML 1.1 type matches).
        Ok(Raw::Scalar {
            text: v.to_string(),
            plain: false,
        })
    }
    fn visit_unit<E>(self) -> Result<Raw, E> {
        Ok(Raw::Scalar {
            text: String::new(),
            plain: true,
        })
    }
}

struct SeqText<'s> {
    items: &'s [Shape],
    src: &'s str,
}

impl<'de> Visitor<'de> for SeqText<'_> {
    type Value = Raw;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sequence")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Raw, A::Error> {
        let mut out = Vec::new();
        for shape in self.items {
            let seed = Reread {
                shape,
                src: self.src,
            };
            match a.next_element_seed(seed)? {
                Some(x) => out.push(x),
                None => return Err(de::Error::custom("sequence changed between reads")),
            }
        }
        Ok(Raw::Seq(out))
    }
}

struct MapText<'s> {
    entries: &'s [(Shape, Shape)],
    src: &'s str,
}

impl<'de> Visitor<'de> for MapText<'_> {
    type Value = Raw;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Raw, A::Error> {
        let mut out = Vec::new();
        for (ks, vs) in self.entries {
            let k = a.next_key_seed(Reread {
                shape: ks,
                src: self.src,
            })?;
            let Some(k) = k else {
                return Err(de::Error::custom("mapping changed between reads"));
            };
            let v = a.next_value_seed(Reread {
                shape: vs,
                src: self.src,
            })?;
            out.push((k, v));
        }
        Ok(Raw::Map(out))
    }
}

/// Applies YAML 1.1 typing, merge keys and Python's dict semantics.
fn build(raw: Raw) -> Result<Node, String> {
    match raw {
        Raw::Scalar { text, plain } => {
            if plain {
                resolve_plain(&text)
            } else {
                Ok(Node::Str(text))
            }
        }
        Raw::Seq(items) => Ok(Node::Seq(
            items.into_iter().map(build).collect::<Result<_, _>>()?,
        )),
        Raw::Map(entries) => {
            let mut merged: Vec<(Node, Node)> = Vec::new();
            let mut own: Vec<(Node, Node)> = Vec::new();
            for (k, v) in entries {
                if matches!(&k, Raw::Scalar { text, plain: true } if text == "<<") {
                    // Merged keys come first, so the mapping's own keys win.
                    match build(v)? {
                        Node::Map(m) => merged.extend(m),
                        Node::Seq(maps) => {
                            // Earlier mappings in the list take precedence.
                            for m in maps.into_iter().rev() {
                                match m {
                                    Node::Map(m) => merged.extend(m),
                                    _ => return Err(merge_error()),
                                }
                            }
                        }
                        _ => return Err(merge_error()),
                    }
                    continue;
                }
                own.push((build(k)?, build(v)?));
            }
            let mut out: Vec<(Node, Node)> = Vec::new();
            for (k, v) in merged.into_iter().chain(own) {
                if matches!(k, Node::Seq(_) | Node::Map(_)) {
                    return Err(
                        "config.yaml: a mapping key is a list or a mapping; use a plain string key"
                            .into(),
                    );
                }
                match out.iter_mut().find(|(old, _)| py_key_eq(old, &k)) {
                    Some(slot) => slot.1 = v,
                    None => out.push((k, v)),
                }
            }
            Ok(Node::Map(out))
        }
    }
}

fn merge_error() -> String {
    "config.yaml: a merge key (<<) must name a mapping or a list of mappings".into()
}

/// Python's `==` for dict keys: `1`, `1.0` and `True` are one key.
fn py_key_eq(a: &Node, b: &Node) -> bool {
    fn num(n: &Node) -> Option<f64> {
        match n {
            Node::Bool(b) => Some(f64::from(u8::from(*b))),
            Node::Int(i) => Some(*i as f64),
            Node::Float(f) => Some(*f),
            _ => None,
        }
    }
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(yaml: &str) -> Node {
        match parse(format!("k: {yaml}\n").as_bytes()).unwrap() {
            Node::Map(m) => m.into_iter().next().unwrap().1,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn plain_scalars_follow_yaml_1_1() {
        let s = |x: &str| Node::Str(x.into());
        let table = [
            ("yes", Node::Bool(true)),
            ("Off", Node::Bool(false)),
            ("'yes'", s("yes")),
            ("\"on\"", s("on")),
            ("y", s("y")),
            ("~", Node::Null),
            ("", Node::Null),
            ("010", Node::Int(8)),
            ("08", s("08")),
            ("0o17", s("0o17")),
            ("0x1F", Node::Int(31)),
            ("0b101", Node::Int(5)),
            ("1_000", Node::Int(1000)),
            ("1:30", Node::Int(90)),
            ("-1:30", Node::Int(-90)),
            ("1e3", s("1e3")),
            ("1.5e+3", Node::Float(1500.0)),
            ("1.5e3", s("1.5e3")),
            ("1.", Node::Float(1.0)),
            (".5", Node::Float(0.5)),
            ("+.5", s("+.5")),
            ("1:30.5", Node::Float(90.5)),
            ("=", Node::Null),
        ];
        for (yaml, want) in table {
            if yaml == "=" {
                assert!(parse(b"k: =\n").is_err());
                continue;
            }
            assert_eq!(one(yaml), want, "{yaml}");
        }
        assert!(matches!(one(".inf"), Node::Float(f) if f.is_infinite()));
        assert!(matches!(one(".NaN"), Node::Float(f) if f.is_nan()));
    }

    #[test]
    fn timestamps_and_dates() {
        assert_eq!(
            one("2024-01-31"),
            Node::Time {
                py: "2024-01-31".into(),
                json: "2024-01-31".into()
            }
        );
        assert_eq!(
            one("2001-12-14 21:59:43.10 -5"),
            Node::Time {
                py: "2001-12-14 21:59:43.100000-05:00".into(),
                json: "2001-12-14T21:59:43.100000-05:00".into()
            }
        );
        assert!(parse(b"k: 2024-02-30\n").is_err());
        assert_eq!(one("2024-1-1"), Node::Str("2024-1-1".into()));
    }

    #[test]
    fn merge_keys_and_duplicates_follow_pyyaml() {
        let n = parse(b"a: &x {p: 1, q: 2}\nb:\n  <<: *x\n  q: 3\nc: 1\nc: 2\n").unwrap();
        assert_eq!(n.get("c"), Some(&Node::Int(2)));
        let b = n.get("b").unwrap();
        assert_eq!(b.get("p"), Some(&Node::Int(1)));
        assert_eq!(b.get("q"), Some(&Node::Int(3)));
    }
}
