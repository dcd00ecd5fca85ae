//! The published REST API as a check on every exchange: each REST request
//! the fake receives and each answer it serves is compared with Baseten's
//! management API (`schema/rest-v1.json`, extracted by `scripts/rest-schema`
//! from the published OpenAPI). What does not match is a [`Violation`]: a
//! path or method the API does not publish, a query parameter or body field
//! it does not define, an answer that misses a required field, has a wrong
//! type or enum value, or carries a field the API does not name. The fake
//! records violations as it serves; [`crate::FakeBaseten`] fails the test
//! that started it when any are left unclaimed. [`exceptions`] lists the
//! only deviations allowed, each with its reason.
//!
//! The OpenAPI documents no error answers; the fake's error body is a guess
//! (listed in `GUESSES.md`) checked here against [`error_schema`].

pub mod exceptions;

use std::sync::OnceLock;

use boon::{Compiler, SchemaIndex, Schemas};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use self::exceptions::{Exception, Side};

/// The fixture, generated from the published OpenAPI.
const FIXTURE: &str = include_str!("../../schema/rest-v1.json");

/// One mismatch between an exchange and the published API.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct Violation {
    pub method: String,
    pub path: String,
    /// What did not match, in the validator's words.
    pub what: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.method, self.path, self.what)
    }
}

/// The error body every REST refusal uses: `message` is what the official
/// client prints for a 4xx; `code` is what the platform's promotion
/// examples add. Not published: the shape is one of the fake's guesses.
pub fn error_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "message": {"type": "string"},
            "code": {"type": "string"},
        },
        "required": ["message"],
        "additionalProperties": false,
    })
}

#[derive(Deserialize)]
struct Fixture {
    endpoints: Vec<FixtureEndpoint>,
}

#[derive(Deserialize)]
struct FixtureEndpoint {
    method: String,
    path: String,
    query: Vec<String>,
    request: Option<Value>,
    responses: serde_json::Map<String, Value>,
}

struct Endpoint {
    method: String,
    path: String,
    query: Vec<String>,
    request: Option<SchemaIndex>,
    ok: Option<SchemaIndex>,
}

/// The compiled fixture.
pub struct Published {
    endpoints: Vec<Endpoint>,
    schemas: Schemas,
    error: SchemaIndex,
}

/// The published API, compiled once per process.
pub fn published() -> &'static Published {
    static P: OnceLock<Published> = OnceLock::new();
    P.get_or_init(|| Published::compile(FIXTURE).expect("the REST schema fixture compiles"))
}

/// How many of `path`'s segments (split on `/`) a template matches, or
/// `None`; literal segments score over parameters so `…/production` wins
/// over `…/{deployment_id}`.
fn match_template(template: &str, path: &str) -> Option<usize> {
    let t: Vec<&str> = template.split('/').collect();
    let p: Vec<&str> = path.split('/').collect();
    if t.len() != p.len() {
        return None;
    }
    let mut literal = 0;
    for (ts, ps) in t.iter().zip(&p) {
        if ts.starts_with('{') && ts.ends_with('}') {
            if ps.is_empty() {
                return None;
            }
        } else if ts == ps {
            literal += 1;
        } else {
            return None;
        }
    }
    Some(literal)
}

/// The published template `path` falls under (any method), most literal first.
pub fn template_of<'a>(templates: impl Iterator<Item = &'a str>, path: &str) -> Option<&'a str> {
    templates
        .filter_map(|t| match_template(t, path).map(|score| (score, t)))
        .max_by_key(|(score, _)| *score)
        .map(|(_, t)| t)
}

fn is_blank(body: &[u8]) -> bool {
    body.iter().all(u8::is_ascii_whitespace)
}

impl Published {
    fn compile(fixture: &str) -> anyhow::Result<Self> {
        let fixture: Fixture = serde_json::from_str(fixture)?;
        let mut compiler = Compiler::new();
        compiler.enable_format_assertions();
        let mut schemas = Schemas::new();
        let mut n = 0;
        let mut add = |compiler: &mut Compiler, schemas: &mut Schemas, v: Value| {
            n += 1;
            let loc = format!("urn:rest-v1:{n}");
            compiler
                .add_resource(&loc, v)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            compiler
                .compile(&loc, schemas)
                .map_err(|e| anyhow::anyhow!("{e}"))
        };
        let error = add(&mut compiler, &mut schemas, error_schema())?;
        let mut endpoints = Vec::new();
        for e in fixture.endpoints {
            let request = match e.request {
                Some(s) => Some(add(&mut compiler, &mut schemas, s)?),
                None => None,
            };
            let ok = match e.responses.get("200").cloned() {
                Some(Value::Null) | None => None,
                Some(s) => Some(add(&mut compiler, &mut schemas, s)?),
            };
            endpoints.push(Endpoint {
                method: e.method,
                path: e.path,
                query: e.query,
                request,
                ok,
            });
        }
        Ok(Self {
            endpoints,
            schemas,
            error,
        })
    }

    /// Every published `(method, path template)` in the fixture.
    pub fn endpoints(&self) -> impl Iterator<Item = (&str, &str)> {
        self.endpoints
            .iter()
            .map(|e| (e.method.as_str(), e.path.as_str()))
    }

    /// Whether `method path` is published (in the fixture) or excepted as
    /// a whole endpoint.
    pub fn covers(&self, method: &str, path: &str) -> bool {
        self.find(method, path).is_some()
            || exceptions::matching(method, path)
                .iter()
                .any(|x| x.side == Side::Endpoint)
    }

    fn find(&self, method: &str, path: &str) -> Option<&Endpoint> {
        let template = template_of(
            self.endpoints
                .iter()
                .filter(|e| e.method == method)
                .map(|e| e.path.as_str()),
            path,
        )?;
        self.endpoints
            .iter()
            .find(|e| e.method == method && e.path == template)
    }

    fn validate(&self, idx: SchemaIndex, v: &Value) -> Result<(), String> {
        self.schemas
            .validate(v, idx)
            .map_err(|e| format!("{e}").replace('\n', " "))
    }

    /// The mismatches of a request to `method path?query` with `body`.
    pub fn check_request(
        &self,
        method: &str,
        path: &str,
        query: Option<&str>,
        body: &[u8],
    ) -> Vec<String> {
        let exceptions = exceptions::matching(method, path);
        if exceptions.iter().any(|x| x.side == Side::Endpoint) {
            return Vec::new();
        }
        let Some(ep) = self.find(method, path) else {
            return vec![format!(
                "{method} {path} is no published endpoint the fake serves (schema/rest-v1.json) nor an exception"
            )];
        };
        let mut out = Vec::new();
        for (k, _) in crate::rest::parse_query(query) {
            if !ep.query.contains(&k) {
                out.push(format!(
                    "query parameter {k:?} is not published for {}",
                    ep.path
                ));
            }
        }
        match ep.request {
            None => {
                // The official client sends `{}` where no body is defined.
                let empty = is_blank(body)
                    || serde_json::from_slice::<Value>(body)
                        .is_ok_and(|v| v.as_object().is_some_and(|o| o.is_empty()));
                if !empty {
                    out.push(format!(
                        "a request body where {method} {} defines none",
                        ep.path
                    ));
                }
            }
            Some(idx) => match serde_json::from_slice::<Value>(body) {
                Err(e) => out.push(format!("request body is not JSON: {e}")),
                Ok(mut v) => {
                    strip(&mut v, &exceptions, Side::Request);
                    if let Err(e) = self.validate(idx, &v) {
                        out.push(format!("request body: {e}"));
                    }
                }
            },
        }
        out
    }

    /// The mismatches of the answer `status body` to `method path`.
    pub fn check_answer(&self, method: &str, path: &str, status: u16, body: &Value) -> Vec<String> {
        let exceptions = exceptions::matching(method, path);
        if exceptions.iter().any(|x| x.side == Side::Endpoint) {
            return Vec::new();
        }
        if status >= 400 {
            return match self.validate(self.error, body) {
                Ok(()) => Vec::new(),
                Err(e) => vec![format!("{status} error body: {e}")],
            };
        }
        let Some(ep) = self.find(method, path) else {
            // Reported once, by check_request.
            return Vec::new();
        };
        let Some(idx) = ep.ok.filter(|_| status == 200) else {
            return vec![format!("status {status} is not published for {}", ep.path)];
        };
        let mut v = body.clone();
        strip(&mut v, &exceptions, Side::Answer);
        match self.validate(idx, &v) {
            Ok(()) => Vec::new(),
            Err(e) => vec![format!("answer: {e}")],
        }
    }
}

/// Removes the top-level fields an exception allows, so the rest is checked.
/// An answer's array field is emptied rather than removed: its items are
/// what deviates, while its presence and type are still checked.
fn strip(v: &mut Value, exceptions: &[&Exception], side: Side) {
    let Some(o) = v.as_object_mut() else { return };
    for x in exceptions.iter().filter(|x| x.side == side) {
        if let Some(field) = x.field {
            match o.get_mut(field) {
                Some(Value::Array(items)) if side == Side::Answer => items.clear(),
                _ => {
                    o.remove(field);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_prefer_literal_segments() {
        let ts = [
            "/v1/models/{model_id}/deployments/{deployment_id}",
            "/v1/models/{model_id}/deployments/production",
        ];
        assert_eq!(
            template_of(ts.iter().copied(), "/v1/models/m1/deployments/production"),
            Some(ts[1])
        );
        assert_eq!(
            template_of(ts.iter().copied(), "/v1/models/m1/deployments/d1"),
            Some(ts[0])
        );
        assert_eq!(
            template_of(ts.iter().copied(), "/v1/models/m1/deployments/d1/"),
            None
        );
        assert_eq!(
            template_of(ts.iter().copied(), "/v1/models//deployments/d1"),
            None
        );
    }

    #[test]
    fn a_documented_answer_passes_and_one_changed_field_fails() {
        let p = published();
        let path = "/v1/secrets";
        let good = json!({"secrets": [{"id": "s1", "created_at": "2026-01-01T00:00:00Z", "name": "hf", "team_name": "ml"}]});
        assert_eq!(
            p.check_answer("GET", path, 200, &good),
            Vec::<String>::new()
        );
        for bad in [
            json!({"secrets": [{"created_at": "2026-01-01T00:00:00Z", "name": "hf", "team_name": "ml"}]}),
            json!({"secrets": [{"id": 7, "created_at": "2026-01-01T00:00:00Z", "name": "hf", "team_name": "ml"}]}),
            json!({"secrets": [{"id": "s1", "created_at": "yesterday", "name": "hf", "team_name": "ml"}]}),
            json!({"secrets": [], "next": null}),
        ] {
            assert_eq!(p.check_answer("GET", path, 200, &bad).len(), 1, "{bad}");
        }
        assert_eq!(p.check_answer("GET", path, 201, &good).len(), 1);
    }

    #[test]
    fn requests_are_checked_for_path_query_and_body() {
        let p = published();
        let promote = "/v1/models/m1/environments/staging/promote";
        assert!(
            p.check_request("POST", promote, None, br#"{"deployment_id": "d1"}"#)
                .is_empty()
        );
        assert_eq!(
            p.check_request("POST", promote, None, br#"{"deployment_id": "d1", "x": 1}"#)
                .len(),
            1
        );
        assert_eq!(p.check_request("POST", promote, None, b"{}").len(), 1);
        assert_eq!(p.check_request("PUT", promote, None, b"").len(), 1);
        assert_eq!(p.check_request("GET", "/v1/nothing", None, b"").len(), 1);
        let logs = "/v1/models/m1/deployments/d1/logs";
        assert!(
            p.check_request("GET", logs, Some("start_epoch_millis=1&limit=5"), b"")
                .is_empty()
        );
        assert_eq!(p.check_request("GET", logs, Some("since=1"), b"").len(), 1);
        let deactivate = "/v1/models/m1/deployments/d1/deactivate";
        assert!(p.check_request("POST", deactivate, None, b"").is_empty());
        assert!(p.check_request("POST", deactivate, None, b"{}").is_empty());
        assert_eq!(
            p.check_request("POST", deactivate, None, br#"{"now": true}"#)
                .len(),
            1
        );
    }

    #[test]
    fn error_bodies_follow_the_guessed_shape() {
        let p = published();
        let path = "/v1/models/m1";
        assert!(
            p.check_answer("GET", path, 404, &json!({"message": "Model m1 not found"}))
                .is_empty()
        );
        assert!(
            p.check_answer(
                "GET",
                path,
                400,
                &json!({"code": "VALIDATION_ERROR", "message": "no"})
            )
            .is_empty()
        );
        assert_eq!(
            p.check_answer("GET", path, 500, &json!({"error": "boom"}))
                .len(),
            1
        );
    }
}
