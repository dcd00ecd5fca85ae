//! The `config` payload exactly as the pinned truss sends it: config.yaml
//! read with YAML 1.1 scalars, validated, defaulted and serialised like
//! `TrussConfig.from_yaml` → `validate_forbid_extra()` → `to_dict()`.
//!
//! Field names, types, constraints and defaults come from `schema.json`,
//! generated from the pinned truss by `scripts/truss-config-schema`; the
//! validators and serializers truss hand-writes are ported in `validators`.

mod formats;
mod py;
mod trt_llm;
mod validators;
pub(crate) mod yaml11;

use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use yaml11::Node;

/// The config JSON `truss push` would send for these config.yaml bytes, or
/// why truss refuses them (with the field path). The payload keeps the
/// file's own `model_name` (null when absent), as truss does when the name is
/// given on the command line.
pub fn normalize(raw: &[u8]) -> Result<Value, String> {
    let doc = yaml11::parse(raw)?;
    let data = from_yaml(doc)?;
    let schema = schema();
    let internal = schema.model(&schema.root, &data, true, &mut Vec::new())?;
    Ok(schema.ser_model(&schema.root, &internal))
}

/// `TrussConfig.from_yaml` and `from_dict`: the steps before validation.
fn from_yaml(doc: Node) -> Result<Node, String> {
    let doc = if doc.truthy() {
        doc
    } else {
        Node::Map(Vec::new())
    };
    let Node::Map(mut entries) = doc else {
        return Err(
            "config.yaml must be a mapping of settings (model_name: ..., resources: ...), not a list or a single value"
                .into(),
        );
    };
    if let Some(Node::Map(build)) = lookup(&entries, "build")
        && build
            .iter()
            .any(|(k, v)| *k == Node::Str("no_cache".into()) && *v == Node::Bool(true))
    {
        return Err("config.yaml: build.no_cache cannot be set in config.yaml (truss takes it only from the --no-cache flag); remove it".into());
    }
    if lookup(&entries, "hf_cache").is_some() && lookup(&entries, "model_cache").is_none() {
        let at = position(&entries, "hf_cache").unwrap_or(0);
        let (_, v) = entries.remove(at);
        let v = if v.truthy() { v } else { Node::Seq(Vec::new()) };
        entries.push((Node::Str("model_cache".into()), v));
    }
    // Environment variable values are strings on the platform: truss turns
    // booleans into `true`/`false` and everything else into Python's str().
    let env = match lookup(&entries, "environment_variables") {
        None => Node::Map(Vec::new()),
        Some(Node::Map(m)) => Node::Map(
            m.iter()
                .map(|(k, v)| {
                    let s = match v {
                        Node::Bool(b) => b.to_string(),
                        other => py::str_of(other),
                    };
                    (k.clone(), Node::Str(s))
                })
                .collect(),
        ),
        Some(_) => {
            return Err(
                "config.yaml: environment_variables must be a mapping of names to values".into(),
            );
        }
    };
    match position(&entries, "environment_variables") {
        Some(i) => entries[i].1 = env,
        None => entries.push((Node::Str("environment_variables".into()), env)),
    }
    Ok(Node::Map(entries))
}

fn lookup<'a>(entries: &'a [(Node, Node)], key: &str) -> Option<&'a Node> {
    position(entries, key).map(|i| &entries[i].1)
}

fn position(entries: &[(Node, Node)], key: &str) -> Option<usize> {
    entries
        .iter()
        .position(|(k, _)| matches!(k, Node::Str(s) if s == key))
}

#[derive(Deserialize)]
struct Schema {
    truss_version: String,
    root: String,
    constants: Constants,
    models: BTreeMap<String, ModelDef>,
}

#[derive(Deserialize)]
struct Constants {
    supported_python_versions: Vec<String>,
    default_non_root_user_id: i64,
    registry_build_secret_prefix: String,
    bei_required_max_num_tokens: i64,
    openai_compatible_tag: String,
    openai_non_compatible_tag: String,
}

#[derive(Deserialize)]
struct ModelDef {
    extra: String,
    forbid_on_push: bool,
    #[cfg_attr(not(test), expect(dead_code, reason = "checked by the schema test"))]
    validators: Vec<String>,
    root: Option<Ty>,
    #[serde(default)]
    fields: Vec<FieldDef>,
    #[serde(default)]
    #[cfg_attr(not(test), expect(dead_code, reason = "checked by the schema test"))]
    computed: Vec<String>,
    /// The model overrides `__init__`: pydantic then validates it without
    /// the push context, so neither it nor the models inside it refuse
    /// unknown keys; they keep them instead.
    #[serde(default)]
    custom_init: bool,
}

#[derive(Deserialize)]
struct FieldDef {
    name: String,
    #[serde(rename = "type")]
    ty: Ty,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    default: Value,
    /// The keys the field is read from, first found wins (the field's own
    /// name when empty).
    #[serde(default)]
    aliases: Vec<String>,
}

impl FieldDef {
    /// The input key this field takes its value from, if any.
    fn key_in<'a>(&'a self, entries: &[(Node, Node)]) -> Option<&'a str> {
        let has = |k: &str| {
            entries
                .iter()
                .any(|(e, _)| matches!(e, Node::Str(s) if s == k))
        };
        if self.aliases.is_empty() {
            has(&self.name).then_some(self.name.as_str())
        } else {
            self.aliases.iter().map(String::as_str).find(|a| has(a))
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "t", rename_all = "lowercase")]
enum Ty {
    Str {
        min_length: Option<usize>,
    },
    Int {
        ge: Option<i64>,
        gt: Option<i64>,
        le: Option<i64>,
        #[serde(default)]
        strict: bool,
    },
    Float {
        gt: Option<f64>,
        le: Option<f64>,
        #[serde(default)]
        strict: bool,
    },
    Bool,
    Any {
        /// `dict` or `list` without item types: any value of that shape.
        accepts: Option<Shape>,
    },
    Nullable {
        of: Box<Ty>,
    },
    List {
        of: Box<Ty>,
        min_length: Option<usize>,
    },
    Dict {
        of: Box<Ty>,
        key_pattern: Option<String>,
    },
    Enum {
        values: Vec<String>,
    },
    Literal {
        value: String,
    },
    Model {
        name: String,
    },
    Tagged {
        field: String,
        variants: BTreeMap<String, String>,
    },
    /// A union whose member a ported function picks from the input.
    Callable {
        function: String,
        variants: BTreeMap<String, String>,
    },
    /// pydantic's smart-mode union: the first member the value is exactly
    /// an instance of, else the first member that accepts it.
    Union {
        of: Vec<Ty>,
    },
}

#[derive(Deserialize, Clone, Copy, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Shape {
    Mapping,
    List,
}

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        serde_json::from_str(include_str!("schema.json")).expect("schema.json is valid")
    })
}

/// Where a value sits in the config, for error messages.
type Path = Vec<String>;

fn at(path: &Path, msg: impl std::fmt::Display) -> String {
    if path.is_empty() {
        format!("config.yaml: {msg}")
    } else {
        format!("config.yaml: {}: {msg}", path.join("."))
    }
}

fn kind(n: &Node) -> &'static str {
    match n {
        Node::Null => "null",
        Node::Bool(_) => "a boolean",
        Node::Int(_) => "an integer",
        Node::Float(_) => "a number",
        Node::Str(_) => "a string",
        Node::Time { .. } => "a date",
        Node::Seq(_) => "a list",
        Node::Map(_) => "a mapping",
    }
}

fn key_text(k: &Node) -> String {
    match k {
        Node::Str(s) => s.clone(),
        other => py::repr(other),
    }
}

impl Schema {
    fn def(&self, name: &str) -> &ModelDef {
        &self.models[name]
    }

    /// Validates a model's input into its internal form: every field, in
    /// declaration order, with its validated value or default, then the
    /// unknown keys the model keeps. `forbid` says whether the push-time
    /// refusal of unknown keys reaches this model.
    fn model(
        &self,
        name: &str,
        input: &Node,
        forbid: bool,
        path: &mut Path,
    ) -> Result<Value, String> {
        let def = self.def(name);
        let forbid = forbid && !def.custom_init;
        let input = validators::before_model(self, name, input, path)?;
        if let Some(root) = &def.root {
            let v = self.value(root, &input, forbid, path)?;
            validators::after_root(name, &v, path)?;
            return Ok(v);
        }
        let Node::Map(entries) = &*input else {
            return Err(at(
                path,
                format!(
                    "expected a mapping of {name} settings, got {}",
                    kind(&input)
                ),
            ));
        };
        let used: Vec<&str> = def
            .fields
            .iter()
            .filter_map(|f| f.key_in(entries))
            .collect();
        let extras: Vec<&(Node, Node)> = entries
            .iter()
            .filter(|(k, _)| !matches!(k, Node::Str(s) if used.contains(&s.as_str())))
            .collect();
        if forbid && def.forbid_on_push && validators::extras_reach_dump(name) && !extras.is_empty()
        {
            let mut names: Vec<String> = extras.iter().map(|(k, _)| key_text(k)).collect();
            names.sort();
            return Err(at(
                path,
                format!(
                    "unknown field{} [{}]: truss {} refuses fields it does not know; check the spelling",
                    if names.len() > 1 { "s" } else { "" },
                    names.join(", "),
                    self.truss_version
                ),
            ));
        }
        let mut out = Map::new();
        for f in &def.fields {
            path.push(f.name.clone());
            let given = f.key_in(entries).and_then(|key| {
                entries
                    .iter()
                    .find(|(k, _)| matches!(k, Node::Str(s) if s == key))
                    .map(|(_, v)| v)
            });
            let value = match given {
                Some(v) => {
                    let v = validators::before_field(name, &f.name, v);
                    let value = self.value(&f.ty, &v, forbid, path)?;
                    validators::after_field(self, name, &f.name, value, path)?
                }
                None if f.required => {
                    return Err(at(path, "this field is required"));
                }
                None => f.default.clone(),
            };
            path.pop();
            out.insert(f.name.clone(), value);
        }
        // pydantic keeps unknown keys of its `extra="allow"` models and
        // dumps them after the fields.
        if def.extra == "allow" {
            for (k, v) in extras {
                out.insert(json_key(k), any_json(v));
            }
        }
        validators::after_model(self, name, &mut out, &input, path)?;
        Ok(Value::Object(out))
    }

    /// Validates one value against its type with pydantic's lax rules for
    /// Python input.
    fn value(&self, ty: &Ty, n: &Node, forbid: bool, path: &mut Path) -> Result<Value, String> {
        let wrong = |want: &str| at(path, format!("expected {want}, got {}", kind(n)));
        match ty {
            Ty::Str { min_length } => match n {
                Node::Str(s) => {
                    if let Some(min) = min_length
                        && s.chars().count() < *min
                    {
                        return Err(at(path, format!("must be at least {min} character long")));
                    }
                    Ok(Value::String(s.clone()))
                }
                _ => Err(wrong("a string (quote it)")),
            },
            Ty::Int { ge, gt, le, strict } => {
                let i = match n {
                    Node::Int(i) => Some(*i),
                    _ if *strict => None,
                    Node::Bool(b) => Some(i128::from(*b)),
                    Node::Float(f) if f.is_finite() && f.fract() == 0.0 => Some(*f as i128),
                    Node::Str(s) => py::parse_int(s),
                    _ => None,
                };
                let i = i.ok_or_else(|| wrong("an integer"))?;
                let i = i64::try_from(i).map_err(|_| at(path, "integer out of range"))?;
                if let Some(min) = ge
                    && i < *min
                {
                    return Err(at(path, format!("must be at least {min}")));
                }
                if let Some(min) = gt
                    && i <= *min
                {
                    return Err(at(path, format!("must be greater than {min}")));
                }
                if let Some(max) = le
                    && i > *max
                {
                    return Err(at(path, format!("must be at most {max}")));
                }
                Ok(Value::from(i))
            }
            Ty::Float { gt, le, strict } => {
                let f = match n {
                    Node::Float(f) => Some(*f),
                    Node::Int(i) => Some(*i as f64),
                    _ if *strict => None,
                    Node::Bool(b) => Some(f64::from(u8::from(*b))),
                    Node::Str(s) => py::parse_float(s),
                    _ => None,
                };
                let f = f.ok_or_else(|| wrong("a number"))?;
                if let Some(min) = gt
                    && f.partial_cmp(min) != Some(std::cmp::Ordering::Greater)
                {
                    return Err(at(path, format!("must be greater than {min}")));
                }
                if let Some(max) = le
                    && f.partial_cmp(max)
                        .is_none_or(|o| o == std::cmp::Ordering::Greater)
                {
                    return Err(at(path, format!("must be at most {max}")));
                }
                Ok(float_json(f))
            }
            Ty::Bool => {
                let b = match n {
                    Node::Bool(b) => Some(*b),
                    Node::Int(0) => Some(false),
                    Node::Int(1) => Some(true),
                    Node::Float(f) if *f == 0.0 => Some(false),
                    Node::Float(f) if *f == 1.0 => Some(true),
                    Node::Str(s) => match s.to_ascii_lowercase().as_str() {
                        "0" | "off" | "f" | "false" | "n" | "no" => Some(false),
                        "1" | "on" | "t" | "true" | "y" | "yes" => Some(true),
                        _ => None,
                    },
                    _ => None,
                };
                b.map(Value::Bool).ok_or_else(|| wrong("true or false"))
            }
            Ty::Any { accepts } => match (accepts, n) {
                (None, _)
                | (Some(Shape::Mapping), Node::Map(_))
                | (Some(Shape::List), Node::Seq(_)) => Ok(any_json(n)),
                (Some(Shape::Mapping), _) => Err(wrong("a mapping")),
                (Some(Shape::List), _) => Err(wrong("a list")),
            },
            Ty::Nullable { of } => match n {
                Node::Null => Ok(Value::Null),
                _ => self.value(of, n, forbid, path),
            },
            Ty::List { of, min_length } => {
                let Node::Seq(items) = n else {
                    return Err(wrong("a list"));
                };
                if let Some(min) = min_length
                    && items.len() < *min
                {
                    return Err(at(path, format!("must list at least {min} item")));
                }
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    path.push(i.to_string());
                    out.push(self.value(of, item, forbid, path)?);
                    path.pop();
                }
                Ok(Value::Array(out))
            }
            Ty::Dict { of, key_pattern } => {
                let Node::Map(entries) = n else {
                    return Err(wrong("a mapping"));
                };
                let mut out = Map::new();
                for (k, v) in entries {
                    let Node::Str(key) = k else {
                        return Err(at(
                            path,
                            format!("the key {} must be a string (quote it)", py::repr(k)),
                        ));
                    };
                    if let Some(p) = key_pattern
                        && !formats::matches_key_pattern(p, key)
                    {
                        return Err(at(
                            path,
                            format!(
                                "the key '{key}' must match {p}: use letters, digits and _ - . :"
                            ),
                        ));
                    }
                    path.push(key.clone());
                    let v = self.value(of, v, forbid, path)?;
                    path.pop();
                    out.insert(key.clone(), v);
                }
                Ok(Value::Object(out))
            }
            Ty::Enum { values } => match n {
                Node::Str(s) if values.contains(s) => Ok(Value::String(s.clone())),
                _ => Err(at(
                    path,
                    format!("expected one of {}, got {}", values.join(", "), py::repr(n)),
                )),
            },
            Ty::Literal { value } => match n {
                Node::Str(s) if s == value => Ok(Value::String(s.clone())),
                _ => Err(at(path, format!("expected '{value}'"))),
            },
            Ty::Model { name } => self.model(name, n, forbid, path),
            Ty::Tagged { field, variants } => {
                let Node::Map(_) = n else {
                    return Err(wrong("a mapping"));
                };
                let tag = match n.get(field) {
                    Some(Node::Str(t)) => t,
                    _ => {
                        return Err(at(
                            path,
                            format!(
                                "needs `{field}`: one of {}",
                                variants.keys().cloned().collect::<Vec<_>>().join(", ")
                            ),
                        ));
                    }
                };
                let Some(model) = variants.get(tag) else {
                    return Err(at(
                        path,
                        format!(
                            "{field} must be one of {}, got '{tag}'",
                            variants.keys().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                };
                self.model(model, n, forbid, path)
            }
            Ty::Callable { function, variants } => {
                let tag = validators::discriminate(function, n).map_err(|e| at(path, e))?;
                let Some(model) = variants.get(&tag) else {
                    return Err(at(path, format!("no variant '{tag}'")));
                };
                self.model(model, n, forbid, path)
            }
            Ty::Union { of } => {
                if let Some(exact) = of.iter().find(|t| exact_instance(t, n)) {
                    return self.value(exact, n, forbid, path);
                }
                for t in of {
                    if let Ok(v) = self.value(t, n, forbid, path) {
                        return Ok(v);
                    }
                }
                Err(at(
                    path,
                    format!("{} is none of the types this field accepts", kind(n)),
                ))
            }
        }
    }

    /// Turns a model's internal form into what `model_dump(mode="json")`
    /// gives, with truss's own serializers applied.
    fn ser_model(&self, name: &str, v: &Value) -> Value {
        let def = self.def(name);
        if let Some(root) = &def.root {
            return self.ser(root, v);
        }
        let Value::Object(fields) = v else {
            return v.clone();
        };
        let mut out = Map::new();
        for f in &def.fields {
            let value = fields.get(&f.name).cloned().unwrap_or(Value::Null);
            out.insert(f.name.clone(), self.ser(&f.ty, &value));
        }
        for (k, v) in fields {
            if !def.fields.iter().any(|f| &f.name == k) {
                out.insert(k.clone(), v.clone());
            }
        }
        validators::serialize(name, fields, out)
    }

    fn ser(&self, ty: &Ty, v: &Value) -> Value {
        match (ty, v) {
            (Ty::Nullable { .. }, Value::Null) => Value::Null,
            (Ty::Nullable { of }, _) => self.ser(of, v),
            (Ty::List { of, .. }, Value::Array(items)) => {
                Value::Array(items.iter().map(|x| self.ser(of, x)).collect())
            }
            (Ty::Dict { of, .. }, Value::Object(m)) => Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), self.ser(of, x)))
                    .collect(),
            ),
            (Ty::Model { name }, _) => self.ser_model(name, v),
            (Ty::Callable { variants, .. }, Value::Object(m)) => {
                match validators::variant_of(m).and_then(|t| variants.get(t)) {
                    Some(model) => self.ser_model(model, v),
                    None => v.clone(),
                }
            }
            (Ty::Tagged { field, variants }, Value::Object(m)) => {
                match m
                    .get(field)
                    .and_then(Value::as_str)
                    .and_then(|t| variants.get(t))
                {
                    Some(model) => self.ser_model(model, v),
                    None => v.clone(),
                }
            }
            _ => v.clone(),
        }
    }
}

/// Whether a value is exactly of a union member's type, which pydantic's
/// smart mode prefers over a member that would convert it.
fn exact_instance(ty: &Ty, n: &Node) -> bool {
    matches!(
        (ty, n),
        (Ty::Str { .. }, Node::Str(_))
            | (Ty::Int { .. }, Node::Int(_))
            | (Ty::Float { .. }, Node::Float(_))
            | (Ty::Bool, Node::Bool(_))
            | (
                Ty::Any {
                    accepts: Some(Shape::Mapping)
                },
                Node::Map(_)
            )
            | (
                Ty::Any {
                    accepts: Some(Shape::List)
                },
                Node::Seq(_)
            )
    )
}

/// A float as pydantic writes it to JSON: infinities and NaN become null.
fn float_json(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// A value of an untyped field as pydantic's JSON mode writes it.
fn any_json(n: &Node) -> Value {
    match n {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(*b),
        Node::Int(i) => {
            if let Ok(v) = i64::try_from(*i) {
                Value::from(v)
            } else if let Ok(v) = u64::try_from(*i) {
                Value::from(v)
            } else {
                float_json(*i as f64)
            }
        }
        Node::Float(f) => float_json(*f),
        Node::Str(s) => Value::String(s.clone()),
        Node::Time { json, .. } => Value::String(json.clone()),
        Node::Seq(items) => Value::Array(items.iter().map(any_json).collect()),
        Node::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (json_key(k), any_json(v)))
                .collect(),
        ),
    }
}

/// A non-string dict key as pydantic's JSON mode writes it.
fn json_key(k: &Node) -> String {
    match k {
        Node::Str(s) => s.clone(),
        Node::Null => "None".into(),
        Node::Bool(b) => b.to_string(),
        Node::Time { json, .. } => json.clone(),
        other => py::str_of(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_truss_validator_is_ported() {
        let missing: Vec<&String> = schema()
            .models
            .values()
            .flat_map(|m| &m.validators)
            .filter(|v| !validators::PORTED.contains(&v.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "truss validators not ported to src/truss_config/validators.rs: {missing:?}"
        );
        for m in schema().models.values() {
            assert!(
                matches!(m.extra.as_str(), "allow" | "ignore"),
                "{}",
                m.extra
            );
            assert!(m.computed.iter().all(|c| c == "use_gpu"));
        }
    }

    #[test]
    fn every_key_pattern_is_ported() {
        fn patterns<'a>(t: &'a Ty, out: &mut Vec<&'a str>) {
            match t {
                Ty::Dict { of, key_pattern } => {
                    out.extend(key_pattern.as_deref());
                    patterns(of, out);
                }
                Ty::Nullable { of } | Ty::List { of, .. } => patterns(of, out),
                Ty::Union { of } => of.iter().for_each(|t| patterns(t, out)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        for m in schema().models.values() {
            m.fields.iter().for_each(|f| patterns(&f.ty, &mut found));
            if let Some(r) = &m.root {
                patterns(r, &mut found);
            }
        }
        assert!(!found.is_empty());
        for p in found {
            assert!(
                formats::KEY_PATTERNS.contains(&p),
                "key pattern {p} not ported"
            );
        }
    }

    #[test]
    fn a_small_config_gets_every_default() {
        let v = normalize(b"model_name: m\nresources:\n  accelerator: T4\nenvironment_variables: {A: yes, B: 3}\n").unwrap();
        assert_eq!(v["model_name"], "m");
        assert_eq!(v["resources"]["use_gpu"], true);
        assert_eq!(v["resources"]["cpu"], "1");
        assert_eq!(v["environment_variables"]["A"], "true");
        assert_eq!(v["environment_variables"]["B"], "3");
        assert_eq!(v["spec_version"], "2.0");
        assert_eq!(v["runtime"]["is_websocket_endpoint"], false);
    }

    #[test]
    fn refusals_name_the_field() {
        let e = normalize(b"resources:\n  cpu: 1\n").unwrap_err();
        assert!(e.contains("resources.cpu"), "{e}");
        let e = normalize(b"resourcez: {}\n").unwrap_err();
        assert!(e.contains("resourcez"), "{e}");
        assert!(normalize(b"spec_version: 2.0\n").is_err());
    }
}
