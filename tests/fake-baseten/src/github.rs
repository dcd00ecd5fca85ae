//! A fake of the slice of the GitHub REST API truss-push uses, on its own
//! loopback port: deployments and their statuses, issue comments (list,
//! create, update) and commit statuses.
//!
//! | request | endpoint name |
//! |---|---|
//! | `POST {prefix}/repos/{o}/{r}/deployments` | `create_deployment` |
//! | `POST …/deployments/{id}/statuses` | `create_deployment_status` |
//! | `GET …/deployments/{id}/statuses` | `list_deployment_statuses` |
//! | `GET …/issues/{n}/comments?per_page&page` | `list_comments` |
//! | `POST …/issues/{n}/comments` | `create_comment` |
//! | `PATCH …/issues/comments/{id}` | `update_comment` |
//! | `POST …/statuses/{sha}` | `create_commit_status` |
//! | `GET {prefix}/user` | `get_authenticated_user` |
//! | `GET …/deployments?environment&per_page` | `list_deployments` |
//!
//! Who the token is follows GitHub: a token starting `ghs_` is a GitHub App
//! installation token, like the job's `GITHUB_TOKEN`: `GET /user` answers
//! 403 `Resource not accessible by integration`, and what it writes is
//! authored by `github-actions[bot]` (type `Bot`, with
//! `performed_via_github_app`). Any other token is the user the builder
//! names (`octocat` by default, type `User`).
//!
//! The API may live under a path prefix (`/api/v3`, as on GitHub Enterprise
//! Server); a request outside it is a 404. Every request needs
//! `Authorization: Bearer <token>` (or `token <token>`) with the fake's
//! token, else 401 `Bad credentials`; a repository other than the fake's is
//! a 404. Faults ([`GhFault`]) answer a status (403 with GitHub's
//! `Resource not accessible by integration`, 500, …) before
//! authentication. Unlike the Baseten fake's, this request log keeps every
//! header value and body as sent, so a test can prove which secrets
//! reached GitHub.
//!
//! Platform rules applied: deployment and commit-status states are
//! GitHub's sets; descriptions over 140 characters are a 422; a deployment
//! needs `ref` and takes `environment` (default `production`),
//! `transient_environment` and `production_environment` (default: the
//! environment is `production`); a `success` status with `auto_inactive`
//! (default true) adds an `inactive` status to every earlier successful
//! deployment of the same environment that is neither transient nor
//! production.
//!
//! [`Tap`] is the other half of the secret tests: a TCP relay put in front
//! of the Baseten fake that keeps every byte the client sent.

mod tap;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context as _;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;

pub use tap::Tap;

/// GitHub's limit on status descriptions.
const DESCRIPTION_MAX_CHARS: usize = 140;
const DEPLOYMENT_STATES: &[&str] = &[
    "error",
    "failure",
    "inactive",
    "in_progress",
    "queued",
    "pending",
    "success",
];
const COMMIT_STATES: &[&str] = &["error", "failure", "pending", "success"];
/// The largest request body read.
const MAX_BODY_BYTES: usize = 1 << 20;

/// One request the fake GitHub received, as sent.
#[derive(Clone, Debug, Serialize)]
pub struct GhRequest {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// See the module's table; `unknown` for anything else.
    pub endpoint: String,
    /// Every header, values included.
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub status: u16,
}

impl GhRequest {
    /// The request as text (line, headers, body), for secret scans.
    pub fn raw(&self) -> String {
        let mut s = format!("{} {}", self.method, self.path);
        if let Some(q) = &self.query {
            s.push('?');
            s.push_str(q);
        }
        s.push('\n');
        for (k, v) in &self.headers {
            s.push_str(&format!("{k}: {v}\n"));
        }
        s.push('\n');
        s.push_str(&self.body);
        s
    }

    /// The body as JSON (`null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// A scripted answer: requests to `endpoint` (`*` for all) get `status`,
/// `times` times (`None`: always).
#[derive(Clone, Debug)]
pub struct GhFault {
    pub endpoint: String,
    pub status: u16,
    pub times: Option<u32>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DeploymentStatus {
    pub id: u64,
    pub state: String,
    pub description: String,
    pub environment_url: String,
    pub log_url: String,
    pub auto_inactive: bool,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Deployment {
    pub id: u64,
    pub r#ref: String,
    pub task: String,
    pub environment: String,
    pub transient_environment: bool,
    pub production_environment: bool,
    pub description: String,
    /// As sent (`{}` when none).
    pub payload: Value,
    pub statuses: Vec<DeploymentStatus>,
}

impl Deployment {
    /// The states, oldest first.
    pub fn states(&self) -> Vec<String> {
        self.statuses.iter().map(|s| s.state.clone()).collect()
    }
}

/// A comment's author, as GitHub shows it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GhUser {
    pub login: String,
    /// `User` or `Bot`.
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Comment {
    pub id: u64,
    pub issue: u64,
    pub body: String,
    pub user: GhUser,
    /// The app that wrote it (`github-actions` for the job's token).
    pub performed_via_github_app: Option<Value>,
    /// How many times it was edited.
    pub edits: u32,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CommitStatus {
    pub id: u64,
    pub sha: String,
    pub state: String,
    pub context: String,
    pub description: String,
    pub target_url: String,
}

#[derive(Debug, Default)]
struct Data {
    next_id: u64,
    deployments: Vec<Deployment>,
    comments: Vec<Comment>,
    commit_statuses: Vec<CommitStatus>,
}

impl Data {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

struct Inner {
    token: String,
    /// The login of a token that is not an installation token.
    user: String,
    repository: String,
    prefix: String,
    log: Mutex<Vec<GhRequest>>,
    faults: Mutex<Vec<GhFault>>,
    data: Mutex<Data>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Options for starting a fake GitHub.
#[derive(Clone, Debug)]
pub struct GhBuilder {
    token: String,
    user: String,
    repository: String,
    prefix: String,
}

impl GhBuilder {
    /// Serve the API under this path, e.g. `/api/v3` (GitHub Enterprise
    /// Server).
    pub fn prefix(mut self, prefix: &str) -> Self {
        self.prefix = prefix.trim_end_matches('/').to_string();
        self
    }

    pub fn repository(mut self, repo: &str) -> Self {
        self.repository = repo.to_string();
        self
    }

    /// The user a token that is not an installation token belongs to.
    pub fn user(mut self, login: &str) -> Self {
        self.user = login.to_string();
        self
    }

    /// Starts serving on a runtime of its own.
    pub fn start_in_background(self) -> anyhow::Result<FakeGitHub> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .thread_name("fake-github")
            .build()
            .context("while starting the fake GitHub's runtime")?;
        let inner = Arc::new(Inner {
            token: self.token,
            user: self.user,
            repository: self.repository,
            prefix: self.prefix,
            log: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
            data: Mutex::new(Data::default()),
        });
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .context("while binding the fake GitHub")?;
        let addr = listener.local_addr()?;
        let (tx, mut rx) = watch::channel(false);
        let app = {
            let inner = inner.clone();
            axum::Router::new().fallback(move |req: Request| {
                let inner = inner.clone();
                async move { handle(&inner, req).await }
            })
        };
        runtime.spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.changed().await;
                })
                .await;
        });
        Ok(FakeGitHub {
            inner,
            addr,
            shutdown: tx,
            runtime: Some(runtime),
        })
    }
}

/// A running fake GitHub. Stops serving when dropped.
pub struct FakeGitHub {
    inner: Arc<Inner>,
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl FakeGitHub {
    /// A fake for `octo/repo` that accepts `token`, at the root path.
    pub fn builder(token: &str) -> GhBuilder {
        GhBuilder {
            token: token.to_string(),
            user: "octocat".into(),
            repository: "octo/repo".into(),
            prefix: String::new(),
        }
    }

    /// What `GITHUB_API_URL` should be: `http://127.0.0.1:PORT{prefix}`.
    pub fn api_url(&self) -> String {
        format!("http://{}{}", self.addr, self.inner.prefix)
    }

    pub fn repository(&self) -> &str {
        &self.inner.repository
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<GhRequest> {
        lock(&self.inner.log).clone()
    }

    /// The endpoint names requested so far, in order.
    pub fn endpoints(&self) -> Vec<String> {
        self.requests().into_iter().map(|r| r.endpoint).collect()
    }

    /// Answers `status` to every request to `endpoint` (`*`: all).
    pub fn fail(&self, endpoint: &str, status: u16) {
        self.add_fault(GhFault {
            endpoint: endpoint.into(),
            status,
            times: None,
        });
    }

    pub fn add_fault(&self, fault: GhFault) {
        lock(&self.inner.faults).push(fault);
    }

    pub fn clear_faults(&self) {
        lock(&self.inner.faults).clear();
    }

    pub fn deployments(&self) -> Vec<Deployment> {
        lock(&self.inner.data).deployments.clone()
    }

    pub fn comments(&self) -> Vec<Comment> {
        lock(&self.inner.data).comments.clone()
    }

    pub fn commit_statuses(&self) -> Vec<CommitStatus> {
        lock(&self.inner.data).commit_statuses.clone()
    }

    /// Adds a comment as someone else (the user `someone-else`) wrote it.
    pub fn add_comment(&self, issue: u64, body: &str) -> u64 {
        self.add_comment_by(issue, body, "someone-else")
    }

    /// Adds a comment written by `login` (`github-actions[bot]`: the job's
    /// token, as GitHub shows it).
    pub fn add_comment_by(&self, issue: u64, body: &str, login: &str) -> u64 {
        let (user, app) = author(login);
        let mut d = lock(&self.inner.data);
        let id = d.id();
        d.comments.push(Comment {
            id,
            issue,
            body: body.into(),
            user,
            performed_via_github_app: app,
            edits: 0,
        });
        id
    }
}

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The login GitHub Actions' installation token writes as.
const ACTIONS_BOT: &str = "github-actions[bot]";

/// A comment's `user` and `performed_via_github_app` for `login`.
fn author(login: &str) -> (GhUser, Option<Value>) {
    if login == ACTIONS_BOT {
        let app = json!({"id": 15368, "slug": "github-actions", "name": "GitHub Actions"});
        (
            GhUser {
                login: login.into(),
                kind: "Bot".into(),
            },
            Some(app),
        )
    } else {
        (
            GhUser {
                login: login.into(),
                kind: "User".into(),
            },
            None,
        )
    }
}

/// Whether `token` is a GitHub App installation token (`ghs_…`).
fn is_installation_token(token: &str) -> bool {
    token.starts_with("ghs_")
}

fn message(status: StatusCode, text: &str) -> Response {
    (status, axum::Json(json!({ "message": text }))).into_response()
}

/// The endpoint a method and path (after `/repos/{o}/{r}/`) name.
fn endpoint_of(method: &Method, rest: &[&str]) -> &'static str {
    match (method.as_str(), rest) {
        ("POST", ["deployments"]) => "create_deployment",
        ("GET", ["deployments"]) => "list_deployments",
        ("POST", ["deployments", _, "statuses"]) => "create_deployment_status",
        ("GET", ["deployments", _, "statuses"]) => "list_deployment_statuses",
        ("GET", ["issues", _, "comments"]) => "list_comments",
        ("POST", ["issues", _, "comments"]) => "create_comment",
        ("PATCH", ["issues", "comments", _]) => "update_comment",
        ("POST", ["statuses", _]) => "create_commit_status",
        _ => "unknown",
    }
}

async fn handle(inner: &Inner, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().map(str::to_string);
    let headers = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let auth = parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let segs: Option<Vec<String>> = path
        .strip_prefix(&inner.prefix)
        .filter(|p| p.starts_with('/'))
        .map(|p| p.split('/').skip(1).map(str::to_string).collect());
    let (endpoint, repo_ok, rest) = match segs.as_deref() {
        Some([repos, owner, name, rest @ ..]) if repos == "repos" => {
            let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
            (
                endpoint_of(&parts.method, &rest),
                format!("{owner}/{name}") == inner.repository,
                rest.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        }
        Some([user]) if user == "user" && parts.method == Method::GET => {
            ("get_authenticated_user", true, Vec::new())
        }
        _ => ("unknown", false, Vec::new()),
    };
    let resp = answer(
        inner,
        endpoint,
        repo_ok,
        &rest,
        auth.as_deref(),
        query.as_deref(),
        &body,
    );
    lock(&inner.log).push(GhRequest {
        method: parts.method.to_string(),
        path,
        query,
        endpoint: endpoint.to_string(),
        headers,
        body,
        status: resp.status().as_u16(),
    });
    resp
}

fn fault_for(inner: &Inner, endpoint: &str) -> Option<u16> {
    let mut faults = lock(&inner.faults);
    let f = faults
        .iter_mut()
        .find(|f| (f.endpoint == "*" || f.endpoint == endpoint) && f.times != Some(0))?;
    if let Some(n) = &mut f.times {
        *n -= 1;
    }
    Some(f.status)
}

fn answer(
    inner: &Inner,
    endpoint: &str,
    repo_ok: bool,
    rest: &[String],
    auth: Option<&str>,
    query: Option<&str>,
    body: &str,
) -> Response {
    if let Some(status) = fault_for(inner, endpoint) {
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let text = match status {
            403 => "Resource not accessible by integration",
            s if s >= 500 => "Server Error",
            _ => "Scripted fault",
        };
        return message(code, text);
    }
    let token_ok = auth
        .and_then(|a| a.split_once(' '))
        .is_some_and(|(scheme, t)| {
            (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token"))
                && t == inner.token
        });
    if !token_ok {
        return message(StatusCode::UNAUTHORIZED, "Bad credentials");
    }
    if endpoint == "unknown" || !repo_ok {
        return message(StatusCode::NOT_FOUND, "Not Found");
    }
    let json: Value = if body.is_empty() {
        Value::Null
    } else {
        match serde_json::from_str(body) {
            Ok(v) => v,
            Err(_) => return message(StatusCode::BAD_REQUEST, "Problems parsing JSON"),
        }
    };
    let text = |k: &str| json.get(k).and_then(Value::as_str).map(str::to_string);
    let long = |k: &str| text(k).is_some_and(|d| d.chars().count() > DESCRIPTION_MAX_CHARS);
    let mut d = lock(&inner.data);
    let num = |i: usize| rest.get(i).and_then(|s| s.parse::<u64>().ok());
    let installation = is_installation_token(&inner.token);
    let me = if installation {
        ACTIONS_BOT
    } else {
        inner.user.as_str()
    };
    let param = |k: &str| {
        query
            .unwrap_or_default()
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(key, _)| *key == k)
            .map(|(_, v)| v.to_string())
    };
    match endpoint {
        "get_authenticated_user" if installation => message(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
        ),
        "get_authenticated_user" => {
            axum::Json(json!({"login": me, "id": 1, "type": "User"})).into_response()
        }
        "list_deployments" => {
            // Newest first, as GitHub lists them.
            let per_page = param("per_page")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(30)
                .clamp(1, 100);
            let env = param("environment");
            let list: Vec<&Deployment> = d
                .deployments
                .iter()
                .rev()
                .filter(|x| env.as_deref().is_none_or(|e| x.environment == e))
                .take(per_page)
                .collect();
            axum::Json(json!(list)).into_response()
        }
        "create_deployment" => {
            let Some(r#ref) = text("ref") else {
                return message(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid request: ref is missing",
                );
            };
            let environment = text("environment").unwrap_or_else(|| "production".into());
            let production = json
                .get("production_environment")
                .and_then(Value::as_bool)
                .unwrap_or(environment == "production");
            let id = d.id();
            let dep = Deployment {
                id,
                r#ref,
                task: text("task").unwrap_or_else(|| "deploy".into()),
                transient_environment: json
                    .get("transient_environment")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                production_environment: production,
                environment,
                description: text("description").unwrap_or_default(),
                payload: json.get("payload").cloned().unwrap_or_else(|| json!({})),
                statuses: Vec::new(),
            };
            d.deployments.push(dep.clone());
            (StatusCode::CREATED, axum::Json(json!(dep))).into_response()
        }
        "create_deployment_status" | "list_deployment_statuses" => {
            let Some(at) = num(1).and_then(|id| d.deployments.iter().position(|x| x.id == id))
            else {
                return message(StatusCode::NOT_FOUND, "Not Found");
            };
            if endpoint == "list_deployment_statuses" {
                let list = d.deployments[at].statuses.clone();
                return axum::Json(json!(list)).into_response();
            }
            let state = text("state").unwrap_or_default();
            if !DEPLOYMENT_STATES.contains(&state.as_str()) || long("description") {
                return message(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
            }
            let auto_inactive = json
                .get("auto_inactive")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            let id = d.id();
            let status = DeploymentStatus {
                id,
                state: state.clone(),
                description: text("description").unwrap_or_default(),
                environment_url: text("environment_url").unwrap_or_default(),
                log_url: text("log_url").unwrap_or_default(),
                auto_inactive,
            };
            d.deployments[at].statuses.push(status.clone());
            if state == "success" && auto_inactive {
                let (env, me) = (d.deployments[at].environment.clone(), d.deployments[at].id);
                let earlier: Vec<usize> = (0..d.deployments.len())
                    .filter(|&i| {
                        let x = &d.deployments[i];
                        x.id != me
                            && x.environment == env
                            && !x.transient_environment
                            && !x.production_environment
                            && x.statuses.last().is_some_and(|s| s.state == "success")
                    })
                    .collect();
                for i in earlier {
                    let id = d.id();
                    d.deployments[i].statuses.push(DeploymentStatus {
                        id,
                        state: "inactive".into(),
                        description: String::new(),
                        environment_url: String::new(),
                        log_url: String::new(),
                        auto_inactive: false,
                    });
                }
            }
            (StatusCode::CREATED, axum::Json(json!(status))).into_response()
        }
        "list_comments" => {
            let issue = num(1).unwrap_or(0);
            let number = |k: &str| param(k).and_then(|v| v.parse::<usize>().ok());
            let per_page = number("per_page").unwrap_or(30).clamp(1, 100);
            let page = number("page").unwrap_or(1).max(1);
            let list: Vec<&Comment> = d
                .comments
                .iter()
                .filter(|c| c.issue == issue)
                .skip((page - 1) * per_page)
                .take(per_page)
                .collect();
            axum::Json(json!(list)).into_response()
        }
        "create_comment" => {
            let (Some(issue), Some(body)) = (num(1), text("body")) else {
                return message(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
            };
            let id = d.id();
            let (user, app) = author(me);
            let c = Comment {
                id,
                issue,
                body,
                user,
                performed_via_github_app: app,
                edits: 0,
            };
            d.comments.push(c.clone());
            (StatusCode::CREATED, axum::Json(json!(c))).into_response()
        }
        "update_comment" => {
            let Some(body) = text("body") else {
                return message(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
            };
            let Some(c) = num(2).and_then(|id| d.comments.iter_mut().find(|c| c.id == id)) else {
                return message(StatusCode::NOT_FOUND, "Not Found");
            };
            c.body = body;
            c.edits += 1;
            axum::Json(json!(c.clone())).into_response()
        }
        "create_commit_status" => {
            let state = text("state").unwrap_or_default();
            if !COMMIT_STATES.contains(&state.as_str()) || long("description") {
                return message(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
            }
            let id = d.id();
            let s = CommitStatus {
                id,
                sha: rest.get(1).cloned().unwrap_or_default(),
                state,
                context: text("context").unwrap_or_else(|| "default".into()),
                description: text("description").unwrap_or_default(),
                target_url: text("target_url").unwrap_or_default(),
            };
            d.commit_statuses.push(s.clone());
            (StatusCode::CREATED, axum::Json(json!(s))).into_response()
        }
        _ => message(StatusCode::NOT_FOUND, "Not Found"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_by_method_and_path() {
        assert_eq!(
            endpoint_of(&Method::POST, &["deployments"]),
            "create_deployment"
        );
        assert_eq!(
            endpoint_of(&Method::PATCH, &["issues", "comments", "3"]),
            "update_comment"
        );
        assert_eq!(
            endpoint_of(&Method::GET, &["deployments"]),
            "list_deployments"
        );
        assert_eq!(endpoint_of(&Method::DELETE, &["deployments"]), "unknown");
    }
}
