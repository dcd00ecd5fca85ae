//! The HTTP front: one loopback listener that tells the app (GraphQL), REST,
//! S3 and inference hosts apart by Host header and path, applies scripted
//! faults, checks the API key, dispatches, and writes the request log.
//!
//! Connections are served with hyper directly (not `axum::serve`) so a
//! fault can close a connection without answering: the handler signals the
//! connection's task, which drops the socket.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};

use crate::clock::{Clock, iso_now};
use crate::faults::{self, Faults};
use crate::graphql::{self, error_body};
use crate::inference;
use crate::reqlog::{GraphqlInfo, LogEntry, RequestLog};
use crate::resolve::{self, Exec};
use crate::rest;
use crate::s3::FakeS3;
use crate::scenario::Fault;
use crate::schema::{self, Violation};
use crate::state::Platform;

/// Largest GraphQL/REST/inference body read into memory (S3 streams).
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// State shared by every connection.
pub struct Shared {
    pub api_key: String,
    pub clock: Arc<Clock>,
    platform: Mutex<Platform>,
    pub s3: FakeS3,
    pub log: RequestLog,
    pub faults: Faults,
    /// Mismatches with the published REST API, oldest first, until a test
    /// claims them (`FakeBaseten::take_violations`).
    violations: Mutex<Vec<Violation>>,
    pub traffic: crate::traffic::Counters,
}

impl Shared {
    pub fn new(
        api_key: String,
        clock: Arc<Clock>,
        platform: Platform,
        s3: FakeS3,
        log: RequestLog,
        faults: Faults,
    ) -> Self {
        Self {
            api_key,
            clock,
            platform: Mutex::new(platform),
            s3,
            log,
            faults,
            violations: Mutex::new(Vec::new()),
            traffic: Default::default(),
        }
    }

    /// Records mismatches with the published API, on the log entry too.
    fn record(&self, entry: &mut LogEntry, whats: Vec<String>) {
        if whats.is_empty() {
            return;
        }
        let mut v = self.violations.lock().unwrap_or_else(|e| e.into_inner());
        for what in whats {
            v.push(Violation {
                method: entry.method.clone(),
                path: entry.path.clone(),
                what: what.clone(),
            });
            entry.violations.push(what);
        }
    }

    /// The violations recorded so far, cleared.
    pub fn take_violations(&self) -> Vec<Violation> {
        std::mem::take(&mut *self.violations.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn platform(&self) -> MutexGuard<'_, Platform> {
        self.platform.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Accepts connections until `shutdown` changes (or its sender is dropped).
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                // Out of file descriptors and the like: back off, keep serving.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let shared = shared.clone();
        let mut conn_shutdown = shutdown.clone();
        tokio::spawn(async move {
            let kill = Arc::new(Notify::new());
            let svc = {
                let kill = kill.clone();
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let shared = shared.clone();
                    let kill = kill.clone();
                    async move {
                        Ok::<_, Infallible>(dispatch(&shared, req.map(Body::new), &kill).await)
                    }
                })
            };
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                _ = conn => {}
                _ = kill.notified() => {}
                _ = conn_shutdown.changed() => {}
            }
        });
    }
}

/// `Authorization: Api-Key <k>` or `Bearer <k>` with the fake's key.
pub fn authorized(header: Option<&str>, key: &str) -> bool {
    let Some((scheme, token)) = header.and_then(|h| h.trim().split_once(' ')) else {
        return false;
    };
    let scheme_ok = scheme.eq_ignore_ascii_case("api-key") || scheme.eq_ignore_ascii_case("bearer");
    scheme_ok && !key.is_empty() && token.trim() == key
}

/// Which of the fake's APIs a request is for, told apart by host and path.
enum Api {
    S3,
    Inference(inference::Route),
    Graphql,
    Rest(rest::Route),
    Unknown,
}

fn json_response(status: StatusCode, v: Value) -> Response {
    (status, axum::Json(v)).into_response()
}

fn header_text(req: &Request, name: header::HeaderName) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

async fn dispatch(shared: &Shared, req: Request, kill: &Notify) -> Response {
    let method = req.method().clone();
    let uri = req.uri().clone();
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| uri.authority().map(|a| a.to_string()));
    let path = uri.path().to_string();
    if let Some(rest) = path.strip_prefix("/__fake/") {
        let body = axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES)
            .await
            .unwrap_or_default();
        return admin(shared, &method, rest, uri.query(), &body).await;
    }
    let mut entry = LogEntry {
        seq: 0,
        time: iso_now(),
        scenario_secs: shared.clock.now(),
        method: method.to_string(),
        host: host.clone(),
        path: path.clone(),
        query: uri.query().map(str::to_string),
        endpoint: String::new(),
        status: None,
        fault: None,
        graphql: None,
        mutation: false,
        user_agent: header_text(&req, header::USER_AGENT),
        content_length: header_text(&req, header::CONTENT_LENGTH),
        body: None,
        violations: Vec::new(),
    };
    let auth_ok = authorized(
        req.headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
        &shared.api_key,
    );

    let api = if shared.s3.matches(host.as_deref(), &path) {
        Api::S3
    } else if let Some(r) = inference::parse_route(host.as_deref(), &path) {
        Api::Inference(r)
    } else if path == "/graphql/" {
        // Exactly this path: the platform's GraphQL URL ends in a slash, and
        // a client that builds `//graphql/` or drops the slash should see it.
        Api::Graphql
    } else if path.starts_with("/v1/") {
        Api::Rest(rest::route(&method, &path))
    } else {
        Api::Unknown
    };

    if let Api::S3 = api {
        entry.endpoint = FakeS3::operation_name(&method, &uri).to_string();
        if let Some(resp) = apply_fault(shared, &mut entry, &api, kill).await {
            return resp;
        }
        let resp = shared.s3.handle_on_connection(req, kill).await;
        entry.status = Some(resp.status().as_u16());
        shared.log.push(entry);
        return resp;
    }

    let body = match axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            entry.endpoint = "unknown".into();
            entry.status = Some(413);
            shared.log.push(entry);
            return json_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                json!({"message": "Request body too large or unreadable"}),
            );
        }
    };

    let mut prepared = None;
    let mut graphql_refused: Option<Response> = None;
    entry.endpoint = match &api {
        Api::Inference(r) => r.endpoint().to_string(),
        Api::Rest(r) => r.endpoint().to_string(),
        Api::Unknown => "unknown".to_string(),
        Api::S3 => unreachable!("S3 returned above"),
        Api::Graphql => {
            let mut info = GraphqlInfo::default();
            let name = match parse_graphql_request(&method, &body) {
                Err(resp) => {
                    graphql_refused = Some(resp);
                    "graphql.invalid".to_string()
                }
                Ok(r) => {
                    match graphql::prepare(
                        &r.query,
                        r.variables.as_ref(),
                        r.operation_name.as_deref(),
                    ) {
                        Ok(p) => {
                            info.operation_kind = Some(p.kind.as_str().to_string());
                            info.operation_name = p.operation_name.clone();
                            info.root_fields = p.roots.iter().map(|r| r.name.clone()).collect();
                            info.arguments = p
                                .roots
                                .iter()
                                .map(|r| (r.key.clone(), Value::Object(r.args.clone())))
                                .collect();
                            entry.mutation = p.kind == graphql::OpKind::Mutation;
                            let name = format!(
                                "graphql.{}",
                                p.roots.first().map(|r| r.name.as_str()).unwrap_or("empty")
                            );
                            prepared = Some(p);
                            name
                        }
                        Err(errors) => {
                            graphql_refused =
                                Some(json_response(StatusCode::OK, error_body(&errors)));
                            "graphql.invalid".to_string()
                        }
                    }
                }
            };
            entry.graphql = Some(info);
            name
        }
    };

    match &api {
        Api::Rest(_) => {
            entry.body = serde_json::from_slice(&body).ok();
            let whats = schema::published().check_request(&entry.method, &path, uri.query(), &body);
            shared.record(&mut entry, whats);
        }
        Api::Unknown => shared.record(
            &mut entry,
            vec![format!(
                "unknown path: {method} {path} is no endpoint the fake serves"
            )],
        ),
        _ => {}
    }

    if let Some(resp) = apply_fault(shared, &mut entry, &api, kill).await {
        return resp;
    }

    // Another client's actions placed around this request (`others`).
    let nth = shared
        .platform()
        .before_request(&entry.endpoint, shared.clock.now());

    let resp = if !auth_ok {
        let msg = "Invalid or missing API key: send `Authorization: Api-Key <key>`";
        match api {
            Api::Inference(_) => inference::error(StatusCode::UNAUTHORIZED, msg),
            _ => json_response(StatusCode::UNAUTHORIZED, json!({"message": msg})),
        }
    } else {
        match api {
            Api::S3 => unreachable!("S3 returned above"),
            Api::Unknown => json_response(StatusCode::NOT_FOUND, json!({"message": "Not found"})),
            Api::Rest(route) => {
                let now = shared.clock.now();
                let (status, v) = {
                    let mut platform = shared.platform();
                    let (status, mut v) =
                        rest::handle(&mut platform, &shared.s3, now, &route, uri.query(), &body);
                    platform.scenario.edit_answer(route.endpoint(), &mut v);
                    (status, v)
                };
                let whats =
                    schema::published().check_answer(&entry.method, &path, status.as_u16(), &v);
                shared.record(&mut entry, whats);
                json_response(status, v)
            }
            Api::Inference(route) => inference::handle(shared, &route, body).await,
            Api::Graphql => match (graphql_refused, prepared) {
                (Some(resp), _) => resp,
                (None, Some(p)) => {
                    let now = shared.clock.now();
                    let mut platform = shared.platform();
                    let mut exec = Exec {
                        platform: &mut platform,
                        now,
                        s3: &shared.s3,
                    };
                    let mut v = resolve::execute(&mut exec, &p);
                    platform.scenario.edit_answer(&entry.endpoint, &mut v);
                    json_response(StatusCode::OK, v)
                }
                (None, None) => json_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    json!({"message": "unreachable"}),
                ),
            },
        }
    };
    shared
        .platform()
        .after_request(&entry.endpoint, nth, shared.clock.now());
    if auth_ok && STATUS_POLLS.contains(&entry.endpoint.as_str()) {
        shared.clock.polled();
    }
    entry.status = Some(resp.status().as_u16());
    shared.log.push(entry);
    resp
}

/// The requests a client repeats while it waits for a deployment: the
/// status reads, and predicts (retried while the deployment loads). A
/// manual clock set to move per poll (`Clock::advance_per_poll`) moves
/// after each.
const STATUS_POLLS: &[&str] = &[
    "rest.get_deployment",
    "rest.get_environment",
    "rest.get_chain_deployment",
    "rest.get_chain_environment",
    "inference.predict",
];

/// A GraphQL HTTP request body.
struct GqlRequest {
    query: String,
    variables: Option<Map<String, Value>>,
    operation_name: Option<String>,
}

/// `{"query", "variables", "operationName"}` from a POST body, or the 4xx
/// the platform's GraphQL view answers.
#[allow(
    clippy::result_large_err,
    reason = "the Err is the response itself, built once"
)]
fn parse_graphql_request(method: &Method, body: &[u8]) -> Result<GqlRequest, Response> {
    if method != Method::POST {
        return Err(json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            json!({"errors": [{"message": "GraphQL only supports POST requests here."}]}),
        ));
    }
    let v: Value = serde_json::from_slice(body).map_err(|_| {
        json_response(
            StatusCode::BAD_REQUEST,
            json!({"errors": [{"message": "POST body sent invalid JSON."}]}),
        )
    })?;
    let Some(query) = v.get("query").and_then(Value::as_str) else {
        return Err(json_response(
            StatusCode::BAD_REQUEST,
            json!({"errors": [{"message": "Must provide query string."}]}),
        ));
    };
    let vars = match v.get("variables") {
        None | Some(Value::Null) => None,
        Some(Value::Object(o)) => Some(o.clone()),
        Some(_) => {
            return Err(json_response(
                StatusCode::BAD_REQUEST,
                json!({"errors": [{"message": "Variables are invalid JSON."}]}),
            ));
        }
    };
    let op = v
        .get("operationName")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(GqlRequest {
        query: query.to_string(),
        variables: vars,
        operation_name: op,
    })
}

/// Applies the first firing fault for the entry's endpoint. `Some` is the
/// response to send instead of the real one; a dropped connection never
/// returns.
async fn apply_fault(
    shared: &Shared,
    entry: &mut LogEntry,
    api: &Api,
    kill: &Notify,
) -> Option<Response> {
    let fault = shared.faults.check(&entry.endpoint)?;
    entry.fault = Some(faults::describe(&fault));
    if fault.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(fault.delay_ms)).await;
    }
    if fault.drop {
        entry.status = None;
        shared.log.push(entry.clone());
        kill.notify_one();
        std::future::pending::<()>().await;
    }
    let status = fault.status?;
    let resp = fault_response(&fault, status, api);
    entry.status = Some(resp.status().as_u16());
    shared.log.push(entry.clone());
    Some(resp)
}

fn fault_response(fault: &Fault, status: u16, api: &Api) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let reason = code.canonical_reason().unwrap_or("Error").to_string();
    let mut resp = match (&fault.body, api) {
        _ if fault.text.is_some() => {
            let text = fault.text.clone().unwrap_or_default();
            let mut r = (code, text).into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            r
        }
        (Some(body), _) => json_response(code, body.clone()),
        (None, Api::S3) => {
            let s3_code = match status {
                503 => "SlowDown",
                429 => "TooManyRequests",
                _ => "InternalError",
            };
            let xml = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{s3_code}</Code><Message>{reason}</Message><RequestId>FAULT</RequestId></Error>"
            );
            let mut r = (code, xml).into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/xml"),
            );
            r
        }
        (None, Api::Inference(_)) => inference::error(code, reason),
        (None, _) => json_response(code, json!({"message": reason})),
    };
    if let Some(secs) = fault.retry_after {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

/// Unauthenticated routes for scripts: the request log, stored objects,
/// deployment state, the clock, and another client's action on cue
/// (`POST /__fake/others`, body one `others` action as JSON).
async fn admin(
    shared: &Shared,
    method: &Method,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Response {
    match (method.clone(), path) {
        (Method::POST, "others") => {
            match serde_json::from_slice::<crate::scenario::OtherAction>(body) {
                Ok(action) => {
                    let now = shared.clock.now();
                    shared.platform().apply_other(action, now);
                    json_response(StatusCode::OK, json!({"applied": true}))
                }
                Err(e) => json_response(
                    StatusCode::BAD_REQUEST,
                    json!({"message": format!("not an `others` action: {e}")}),
                ),
            }
        }
        (Method::GET, "requests") => json_response(
            StatusCode::OK,
            serde_json::to_value(shared.log.entries()).unwrap_or_default(),
        ),
        (Method::GET, "deployments") => {
            let now = shared.clock.now();
            let snap = shared.platform().snapshot(now);
            json_response(
                StatusCode::OK,
                serde_json::to_value(snap).unwrap_or_default(),
            )
        }
        (Method::GET, p) if p.starts_with("objects/") => {
            let key = &p["objects/".len()..];
            // Streamed: a multi-GiB object must not be read into memory.
            match shared.s3.object_body(key) {
                Some((size, body)) if shared.s3.object_exists(key) => (
                    StatusCode::OK,
                    [
                        (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
                        (header::CONTENT_LENGTH, size.to_string()),
                    ],
                    body,
                )
                    .into_response(),
                _ => json_response(
                    StatusCode::NOT_FOUND,
                    json!({"message": format!("No object {key}")}),
                ),
            }
        }
        (Method::GET, "clock") => clock_json(shared),
        (Method::POST, "clock") => {
            for (k, v) in rest::parse_query(query) {
                let Ok(secs) = v.parse::<f64>() else {
                    return json_response(
                        StatusCode::BAD_REQUEST,
                        json!({"message": format!("{k} must be a number of seconds, got {v:?}")}),
                    );
                };
                match k.as_str() {
                    "advance" => shared.clock.advance(secs),
                    "set" => shared.clock.set(secs),
                    _ => {}
                }
            }
            clock_json(shared)
        }
        _ => json_response(
            StatusCode::NOT_FOUND,
            json!({"message": "Unknown admin route"}),
        ),
    }
}

fn clock_json(shared: &Shared) -> Response {
    json_response(
        StatusCode::OK,
        json!({"now": shared.clock.now(), "manual": shared.clock.is_manual()}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_schemes() {
        for (header, ok) in [
            (Some("Api-Key k1"), true),
            (Some("api-key k1"), true),
            (Some("Bearer k1"), true),
            (Some("bearer  k1"), true),
            (Some("Basic k1"), false),
            (Some("Api-Key k2"), false),
            (Some("Api-Key"), false),
            (Some("k1"), false),
            (None, false),
        ] {
            assert_eq!(authorized(header, "k1"), ok, "{header:?}");
        }
        assert!(!authorized(Some("Api-Key "), ""));
    }
}
