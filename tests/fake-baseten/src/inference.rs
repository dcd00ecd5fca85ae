//! Inference: predict on model deployments and `run_remote` on chain
//! deployments, by host (`model-{id}.api.baseten.co`, regional
//! `model-{id}-{env}.…`) or, for loopback clients without DNS, by the same
//! forms as a path prefix (`/model-{id}/deployment/{dep}/predict`,
//! `/model-{id}-{env}/predict`, `/chain-{id}/production/run_remote`, …).
//!
//! A deployment answers by its status (see [`crate::status::Serving`]):
//! ACTIVE/UPDATING answer at once; SCALED_TO_ZERO/WAKING_UP park the request
//! until the deployment is woken (`wake_seconds` of scenario time, 0 by
//! default) and then answer — the timeline is rewritten to ACTIVE from then
//! on; BUILDING/DEPLOYING/LOADING_MODEL and every failed or unhealthy status
//! answer 503 `{"error": ...}` (no container to route to); DEACTIVATING and
//! INACTIVE answer 404 `{"error": ...}`, as the platform documents for
//! deactivated deployments. Unknown ids and environments are 404.
//!
//! An environment URL (production, `environments/{env}`, regional) reaches
//! whichever deployment serves the environment at that instant, following
//! promotions ([`crate::state::EnvView::serving`]). What a deployment
//! answers is the first matching `predict.by_deployment` rule of the
//! scenario, so a scenario can fail a deployment only behind its
//! environment; otherwise `by_model`, `response` or `chain_response`.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::scenario::Served;
use crate::server::Shared;
use crate::status::{self, Serving};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entity {
    Model,
    Chain,
}

/// Which deployment a URL names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    Deployment(String),
    Environment(String),
    Production,
    Development,
    /// Regional host: the environment is part of the host name.
    Regional(String),
}

impl Selector {
    /// The URL names an environment rather than one deployment.
    pub fn is_environment(&self) -> bool {
        matches!(
            self,
            Selector::Environment(_) | Selector::Production | Selector::Regional(_)
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub entity: Entity,
    pub id: String,
    pub selector: Selector,
    /// `predict`, `run_remote`, `wake` or `sync` (any `sync/…` path).
    pub action: String,
}

impl Route {
    pub fn endpoint(&self) -> &'static str {
        match self.action.as_str() {
            "predict" => "inference.predict",
            "run_remote" => "inference.run_remote",
            "wake" => "inference.wake",
            "sync" => "inference.sync",
            _ => "inference.not_found",
        }
    }
}

/// `model-{id}` / `model-{id}-{env}` (and `chain-…`).
fn parse_label(label: &str) -> Option<(Entity, String, Option<String>)> {
    let (entity, rest) = if let Some(r) = label.strip_prefix("model-") {
        (Entity::Model, r)
    } else if let Some(r) = label.strip_prefix("chain-") {
        (Entity::Chain, r)
    } else {
        return None;
    };
    // Ids never contain `-`, so the first one separates a regional
    // environment name.
    let (id, env) = match rest.split_once('-') {
        Some((id, env)) if !env.is_empty() => (id, Some(env.to_string())),
        _ => (rest, None),
    };
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    Some((entity, id.to_string(), env))
}

/// The inference route a request names, if any.
pub fn parse_route(host: Option<&str>, path: &str) -> Option<Route> {
    let host_label = host
        .map(|h| h.split(':').next().unwrap_or(h))
        .filter(|h| h.contains('.'))
        .and_then(|h| h.split('.').next())
        .and_then(parse_label);
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (target, rest) = match host_label {
        Some(t) => (t, &segments[..]),
        None => (parse_label(segments.first()?)?, &segments[1..]),
    };
    let (entity, id, regional) = target;
    let (selector, tail) = match (regional, rest) {
        (Some(env), tail) => (Selector::Regional(env), tail),
        (None, ["deployment", dep, tail @ ..]) => (Selector::Deployment(dep.to_string()), tail),
        (None, ["environments", env, tail @ ..]) => (Selector::Environment(env.to_string()), tail),
        (None, ["production", tail @ ..]) => (Selector::Production, tail),
        (None, ["development", tail @ ..]) => (Selector::Development, tail),
        _ => return None,
    };
    // `sync/{path}` reaches the model server itself (truss's keepalive
    // pings `sync/v1/models/model`); every other action is one segment.
    let action = match tail {
        ["sync", _, ..] => "sync",
        [action] if *action != "sync" => *action,
        _ => return None,
    };
    let valid = match entity {
        Entity::Model => matches!(action, "predict" | "wake" | "sync"),
        Entity::Chain => matches!(action, "run_remote" | "wake"),
    };
    valid.then(|| Route {
        entity,
        id,
        selector,
        action: action.to_string(),
    })
}

pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({"error": message.into()}))).into_response()
}

/// What a resolved route serves.
struct Target {
    /// Model deployments behind the route (one, or every chainlet's).
    deployments: Vec<String>,
    model_name: String,
    /// The model deployment or chain deployment that answers.
    served: String,
    via_environment: bool,
}

/// The deployments a route names, or the 404 message.
fn resolve(shared: &Shared, route: &Route, now: f64) -> Result<Target, String> {
    let p = shared.platform();
    let not_found = Err;
    match route.entity {
        Entity::Model => {
            let Some(m) = p.model(&route.id) else {
                return not_found(format!("Model {} not found", route.id));
            };
            let dep = match &route.selector {
                Selector::Deployment(d) => p
                    .deployment(d)
                    .filter(|x| x.model_id == m.id)
                    .map(|x| x.id.clone()),
                Selector::Production => p.env_serving(&m.id, "production", now),
                Selector::Environment(e) | Selector::Regional(e) => {
                    if !m.environments.iter().any(|x| &x.name == e) {
                        return not_found(format!("Environment {e} not found for model {}", m.id));
                    }
                    p.env_serving(&m.id, e, now)
                }
                Selector::Development => m.development.clone(),
            };
            match dep {
                Some(d) => Ok(Target {
                    deployments: vec![d.clone()],
                    model_name: m.name.clone(),
                    served: d,
                    via_environment: route.selector.is_environment(),
                }),
                None => not_found(format!("No deployment found for model {}", m.id)),
            }
        }
        Entity::Chain => {
            let Some(c) = p.chain(&route.id) else {
                return not_found(format!("Chain {} not found", route.id));
            };
            let cd = match &route.selector {
                Selector::Deployment(d) => p
                    .chain_deployment(d)
                    .filter(|x| x.chain_id == c.id)
                    .map(|x| x.id.clone()),
                Selector::Production => p.chain_env_serving(&c.id, "production", now),
                Selector::Environment(e) | Selector::Regional(e) => {
                    if !c.environments.iter().any(|x| &x.name == e) {
                        return not_found(format!("Environment {e} not found for chain {}", c.id));
                    }
                    p.chain_env_serving(&c.id, e, now)
                }
                Selector::Development => p
                    .chain_deployments
                    .iter()
                    .rev()
                    .find(|x| x.chain_id == c.id && x.is_draft)
                    .map(|x| x.id.clone()),
            };
            let Some(cd) = cd.and_then(|id| p.chain_deployment(&id)) else {
                return not_found(format!("No deployment found for chain {}", c.id));
            };
            Ok(Target {
                deployments: cd
                    .chainlets
                    .iter()
                    .map(|c| c.deployment_id.clone())
                    .collect(),
                model_name: c.name.clone(),
                served: cd.id.clone(),
                via_environment: route.selector.is_environment(),
            })
        }
    }
}

/// The combined disposition of several deployments (a chain serves only
/// when every chainlet can).
fn combined(dispositions: &[Serving]) -> Serving {
    for d in [Serving::Gone, Serving::Unavailable, Serving::WakeThenServe] {
        if dispositions.contains(&d) {
            return d;
        }
    }
    Serving::Serve
}

pub async fn handle(shared: &Shared, route: &Route, body: Bytes) -> Response {
    let now = shared.clock.now();
    let target = match resolve(shared, route, now) {
        Ok(t) => t,
        Err(msg) => return error(StatusCode::NOT_FOUND, msg),
    };
    let statuses: Vec<String> = {
        let p = shared.platform();
        target
            .deployments
            .iter()
            .filter_map(|d| p.deployment(d).map(|x| x.public_status(now)))
            .collect()
    };
    let dispositions: Vec<Serving> = statuses.iter().map(|s| status::serving(s)).collect();

    if route.action == "wake" {
        let mut p = shared.platform();
        for (d, s) in target.deployments.iter().zip(&dispositions) {
            if *s == Serving::WakeThenServe {
                p.wake(d, now);
            }
        }
        return (StatusCode::ACCEPTED, axum::Json(json!({"success": true}))).into_response();
    }

    match combined(&dispositions) {
        Serving::Serve => {}
        Serving::Gone => {
            return error(
                StatusCode::NOT_FOUND,
                format!("Deployment is deactivated ({})", statuses.join(", ")),
            );
        }
        Serving::Unavailable => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("Deployment is not ready ({})", statuses.join(", ")),
            );
        }
        Serving::WakeThenServe => {
            let ready_at = {
                let mut p = shared.platform();
                target
                    .deployments
                    .iter()
                    .zip(&dispositions)
                    .filter(|(_, s)| **s == Serving::WakeThenServe)
                    .map(|(d, _)| p.wake(d, now))
                    .fold(now, f64::max)
            };
            wait_until(shared, ready_at).await;
        }
    }

    if route.action == "sync" {
        // The truss server's own routes; keepalives only look at the status.
        return (StatusCode::OK, axum::Json(json!({}))).into_response();
    }
    let payload: Value = if body.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("Invalid JSON payload: {e}"),
                );
            }
        }
    };
    if let Some((code, body)) = scripted(shared, route.entity, &target) {
        let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        match body {
            Some(v) => return (code, axum::Json(v)).into_response(),
            None if !code.is_success() => {
                return error(
                    code,
                    format!("Scripted failure of deployment {}", target.served),
                );
            }
            None => {}
        }
    }
    // Latency, errors and answers by payload (models; a chain deployment
    // is not a model deployment).
    let model_dep = (route.entity == Entity::Model).then_some(target.served.as_str());
    if let Some(resp) = crate::traffic::answer(shared, model_dep, &payload).await {
        return resp;
    }
    let spec = shared.platform().scenario.predict.clone();
    if route.entity == Entity::Model && payload.get("stream").and_then(Value::as_bool) == Some(true)
    {
        return stream_response(&spec.stream);
    }
    let response = match route.entity {
        Entity::Model => spec
            .by_model
            .get(&target.model_name)
            .cloned()
            .or(spec.response),
        Entity::Chain => spec.chain_response,
    }
    .unwrap_or_else(|| json!({"echo": payload}));
    (StatusCode::OK, axum::Json(response)).into_response()
}

/// The first `predict.by_deployment` rule matching the deployment that
/// serves: its status and body.
fn scripted(shared: &Shared, entity: Entity, target: &Target) -> Option<(u16, Option<Value>)> {
    let p = shared.platform();
    let rules = &p.scenario.predict.by_deployment;
    if rules.is_empty() {
        return None;
    }
    let (created, name) = match entity {
        Entity::Model => {
            let d = p.deployment(&target.served)?;
            (d.created_index, Some(d.name.as_str()))
        }
        Entity::Chain => {
            let cd = p.chain_deployment(&target.served)?;
            (cd.created_index, cd.name.as_deref())
        }
    };
    let served = Served {
        created,
        name,
        model: &target.model_name,
        via_environment: target.via_environment,
    };
    rules
        .iter()
        .find(|r| r.matches(&served))
        .map(|r| (r.status, r.response.clone()))
}

/// Parks the request until scenario time reaches `at`.
async fn wait_until(shared: &Shared, at: f64) {
    loop {
        let now = shared.clock.now();
        if now >= at {
            return;
        }
        // A manual clock only moves when the test moves it: poll it.
        let step = shared
            .clock
            .real_duration(at - now)
            .unwrap_or(Duration::from_millis(10))
            .min(Duration::from_millis(50));
        tokio::time::sleep(step.max(Duration::from_millis(1))).await;
    }
}

/// OpenAI-style server-sent events: `tokens` chunks then `[DONE]`.
fn stream_response(spec: &crate::scenario::StreamSpec) -> Response {
    let chunk = format!(
        "data: {}\n\n",
        json!({"choices": [{"delta": {"content": spec.token}}]})
    );
    let tokens = spec.tokens;
    let delay = Duration::from_millis(spec.token_delay_ms);
    let stream = futures_util::stream::unfold(0u32, move |i| {
        let chunk = chunk.clone();
        async move {
            if i > tokens {
                return None;
            }
            if i > 0 && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let data = if i == tokens {
                Bytes::from_static(b"data: [DONE]\n\n")
            } else {
                Bytes::from(chunk)
            };
            Some((Ok::<_, std::io::Error>(data), i + 1))
        }
    });
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(entity: Entity, id: &str, selector: Selector, action: &str) -> Option<Route> {
        Some(Route {
            entity,
            id: id.into(),
            selector,
            action: action.into(),
        })
    }

    #[test]
    fn routes_by_path_and_by_host() {
        use Entity::*;
        use Selector::*;
        let cases: Vec<(Option<&str>, &str, Option<Route>)> = vec![
            (
                None,
                "/model-abc/deployment/d1/predict",
                r(Model, "abc", Deployment("d1".into()), "predict"),
            ),
            (
                None,
                "/model-abc/environments/staging/predict",
                r(Model, "abc", Environment("staging".into()), "predict"),
            ),
            (
                None,
                "/model-abc/production/predict",
                r(Model, "abc", Production, "predict"),
            ),
            (
                None,
                "/model-abc/development/predict",
                r(Model, "abc", Development, "predict"),
            ),
            (
                None,
                "/model-abc-staging/predict",
                r(Model, "abc", Regional("staging".into()), "predict"),
            ),
            (
                None,
                "/model-abc-my-env/predict",
                r(Model, "abc", Regional("my-env".into()), "predict"),
            ),
            (
                None,
                "/chain-c1/deployment/cd1/run_remote",
                r(Chain, "c1", Deployment("cd1".into()), "run_remote"),
            ),
            (
                None,
                "/chain-c1-prod/run_remote",
                r(Chain, "c1", Regional("prod".into()), "run_remote"),
            ),
            (
                None,
                "/model-abc/production/wake",
                r(Model, "abc", Production, "wake"),
            ),
            (
                None,
                "/model-abc/deployment/d1/sync/v1/models/model",
                r(Model, "abc", Deployment("d1".into()), "sync"),
            ),
            (
                None,
                "/model-abc/development/sync/v1/models/model",
                r(Model, "abc", Development, "sync"),
            ),
            (None, "/model-abc/deployment/d1/sync", None),
            (None, "/model-abc/deployment/d1/predict/extra", None),
            (
                Some("model-abc.api.baseten.co"),
                "/deployment/d1/predict",
                r(Model, "abc", Deployment("d1".into()), "predict"),
            ),
            (
                Some("model-abc-staging.api.baseten.co:443"),
                "/predict",
                r(Model, "abc", Regional("staging".into()), "predict"),
            ),
            (
                Some("chain-c1.api.baseten.co"),
                "/production/run_remote",
                r(Chain, "c1", Production, "run_remote"),
            ),
            (
                Some("127.0.0.1:8080"),
                "/model-abc/production/predict",
                r(Model, "abc", Production, "predict"),
            ),
            // Not inference:
            (None, "/model-abc/deployment/d1/run_remote", None),
            (None, "/chain-c1/production/predict", None),
            (None, "/model-abc-staging/deployment/d1/predict", None),
            (None, "/v1/models/abc", None),
            (None, "/graphql/", None),
            (Some("model-abc.api.baseten.co"), "/predict", None),
        ];
        for (host, path, want) in cases {
            assert_eq!(parse_route(host, path), want, "{host:?} {path}");
        }
    }

    #[test]
    fn chains_serve_only_when_every_chainlet_can() {
        use Serving::*;
        assert_eq!(combined(&[Serve, Serve]), Serve);
        assert_eq!(combined(&[Serve, WakeThenServe]), WakeThenServe);
        assert_eq!(combined(&[WakeThenServe, Unavailable]), Unavailable);
        assert_eq!(combined(&[Unavailable, Gone]), Gone);
    }
}
