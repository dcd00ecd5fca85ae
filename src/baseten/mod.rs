//! The Baseten platform as truss-push uses it, and every request to it:
//! GraphQL on the app host (`models`, `chains`), REST v1 on the API host
//! (`rest`), the inference hosts (`inference`), and every URL (`urls`).
//! Documents keep the shapes the Python client sends so the platform reads
//! them the same way; every string spliced into a document is escaped as a
//! GraphQL string literal. Nothing here prints.
//!
//! Besides: promote and cancel for models and chains, environments typed
//! as `promotion::Env` (`promote`); the reads and the `DELETE` teardown and
//! prune make (`lifecycle`); single-try evidence requests and
//! metrics (`probe`); the stream's reading (`sse`); every id an answer
//! carries checked once where it is parsed (`id`); JSON as Python writes
//! it (`wire`); typed errors (`error`). Each phase's requests go through
//! a handle of their own that carries that phase's deadline: no deadline
//! is shared between phases.

pub(crate) mod audit;
mod chains;
mod error;
pub(crate) mod id;
mod inference;
mod lifecycle;
mod models;
mod prepare;
mod prices;
mod probe;
mod promote;
mod rest;
mod sse;
mod urls;
mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::{RequestBuilder, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::budget::{Clock, Phase, Spent};
use crate::net::{self, BodyError};
use crate::retry::{self, Classify, Policy};
use crate::secret::Secret;

pub(crate) use audit::AuditEntry;
pub(crate) use chains::{ChainDeployed, ChainletData, ChainletStatus, DeployChainRequest};
pub(crate) use error::ApiError;
pub(crate) use lifecycle::{ChainListed, Deletion, Listed as ListedDeployment, ModelRef};
pub(crate) use models::{CreateRequest, Created};
pub(crate) use prepare::Preflight;
pub(crate) use prices::{Capacity, PriceEntry};
pub(crate) use promote::PromoteFlags;
pub(crate) use rest::{Deployment, Environment, Listed, LogLine};
pub(crate) use urls::{Endpoints, is_loopback};
pub(crate) use wire::{OrderedObject, dumps as python_json};

/// GraphQL calls wait this long for an answer.
const GRAPHQL_TIMEOUT_SECS: u64 = 120;
/// REST calls wait this long for an answer.
const REST_TIMEOUT_SECS: u64 = 60;
/// A deactivation waits this long for an answer.
const DEACTIVATE_TIMEOUT_SECS: u64 = 30;
/// The largest REST or GraphQL answer read: far above any answer's real
/// size (a workspace's model list, a page of logs), far below what would
/// matter to a CI runner's memory.
pub(crate) const ANSWER_MAX_BYTES: usize = 16 << 20;
/// Readable-looking 2xx answers that are not the JSON expected, in a row for
/// one kind of call, before the call is failed for good: a proxy page or a
/// captive portal answers every time, and waiting out a 45-minute deadline
/// would only hide it. The wait polls at least one poll interval apart:
/// about ten seconds at the default 2 s, a minute at 10 s.
pub(crate) const GARBLED_ANSWERS_MAX: u32 = 5;
/// Bytes of an unreadable answer quoted in its message.
const GARBLED_SHOWN_BYTES: usize = 80;

/// Where retries are said: the run's log (they also go to the `tracing`
/// debug log).
pub(crate) type Notes = Arc<dyn Fn(&str) + Send + Sync>;

/// Escapes `s` as a GraphQL string literal (JSON's escapes are a subset of
/// GraphQL's, so a JSON string is a valid GraphQL string).
pub(crate) fn gql_str(s: &str) -> String {
    serde_json::to_string(s).expect("strings always serialize")
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Team {
    #[serde(deserialize_with = "id::checked")]
    pub(crate) id: String,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) default: bool,
}

/// A model or chain as the lists name it, with its owning team.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Named {
    #[serde(deserialize_with = "id::checked")]
    pub(crate) id: String,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) team: Option<TeamRef>,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct TeamRef {
    #[serde(deserialize_with = "id::checked")]
    pub(crate) id: String,
}

/// Temporary S3 credentials for one upload.
#[derive(Clone, Deserialize)]
pub(crate) struct UploadCredentials {
    pub(crate) s3_bucket: String,
    pub(crate) s3_key: String,
    pub(crate) aws_access_key_id: String,
    pub(crate) aws_secret_access_key: String,
    pub(crate) aws_session_token: String,
}

impl std::fmt::Debug for UploadCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "UploadCredentials {{ s3_bucket: {}, s3_key: {}, .. }}",
            self.s3_bucket, self.s3_key
        )
    }
}

/// Client for one API key and one set of hosts.
#[derive(Clone)]
pub(crate) struct Api {
    http: net::HttpClient,
    endpoints: Endpoints,
    key: Secret,
    /// Tests zero the waits between tries.
    zero_delays: bool,
    /// No request of this handle runs past this moment (each request's
    /// timeout is cut to what is left, retries stop). Each phase of the run
    /// takes its own handle with [`Api::within`]; nothing is shared or
    /// restored, so a cancelled phase cannot leave its budget behind.
    deadline: Option<Instant>,
    /// The phase whose deadline that is.
    phase: Option<Phase>,
    /// The run's clock, which the deadline is measured on: each request
    /// asks it whether time is left before it is sent.
    clock: Clock,
    /// Unreadable 2xx answers in a row, by what the call was for.
    garbled: Arc<Mutex<HashMap<String, u32>>>,
    notes: Option<Notes>,
}

impl Api {
    pub(crate) fn new(http: net::HttpClient, endpoints: Endpoints, key: Secret) -> Self {
        Self {
            http,
            endpoints,
            key,
            zero_delays: false,
            deadline: None,
            phase: None,
            clock: Clock::default(),
            garbled: Arc::default(),
            notes: None,
        }
    }

    /// The same client, saying each retry through `notes`.
    pub(crate) fn with_retry_notes(mut self, notes: Notes) -> Self {
        self.notes = Some(notes);
        self
    }

    /// The same client on the run's clock.
    pub(crate) fn on(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The run's clock this client's deadlines are measured on, for a
    /// caller that only holds the client (the evidence).
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Runs `op` under `policy` until `deadline`, saying each retry.
    async fn retrying<T, E, F>(
        &self,
        policy: Policy,
        deadline: Option<Instant>,
        op: impl FnMut(u32) -> F,
    ) -> Result<T, E>
    where
        E: Classify + std::fmt::Display,
        F: Future<Output = Result<T, E>>,
    {
        let policy = self.policy(policy);
        let note = |failed: u32, wait: Duration, err: &E| {
            let line = retry::retry_line(err, failed, wait, policy.attempts);
            tracing::debug!("{line}");
            if let Some(say) = &self.notes {
                say(&line);
            }
        };
        // The retry loop waits on timers: the deadline as they count.
        let deadline = deadline.map(|d| self.clock.timer(d));
        retry::run_noting(&policy, deadline, note, op).await
    }

    /// Reads a 2xx answer's body, within [`ANSWER_MAX_BYTES`].
    async fn body(&self, what: &str, mut resp: Response) -> Result<Vec<u8>, ApiError> {
        net::read_capped(&mut resp, ANSWER_MAX_BYTES)
            .await
            .map_err(|e| match e {
                BodyError::Read(e) => error::unreadable(what, &e),
                too_large => ApiError::permanent(format!("{what}: {}", too_large.describe())),
            })
    }

    /// The first bytes of an answer for a message, secrets removed before
    /// it is cut (a cut could otherwise keep part of one), then escaped.
    fn shown_head(&self, bytes: &[u8]) -> String {
        let end = bytes.len().min(GARBLED_SHOWN_BYTES + 1024);
        let text = String::from_utf8_lossy(&bytes[..end]);
        let text = crate::secret::scrub(&text);
        let mut shown = net::show_bytes(text.as_bytes(), GARBLED_SHOWN_BYTES);
        if end < bytes.len() && !shown.ends_with('…') {
            shown.push('…');
        }
        shown
    }

    /// Reads a 2xx answer's JSON as `T`. A body that is not that JSON (an
    /// HTML page, nothing, another shape) is retried like a lost answer,
    /// until [`GARBLED_ANSWERS_MAX`] in a row for `what` make it final; the
    /// message quotes the body's first bytes. A UTF-8 byte order mark is
    /// passed over, as Python's `requests` does for the official client.
    fn decode<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        bytes: &[u8],
    ) -> Result<T, ApiError> {
        let json = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let e = match id::refused_during(|| serde_json::from_slice(json)) {
            Ok(Ok(v)) => {
                self.garbled.lock().unwrap().remove(what);
                return Ok(v);
            }
            // The answer is the JSON expected, but an id in it is not one
            // truss-push will use: the same answer will come again.
            Err(refused) => {
                self.garbled.lock().unwrap().remove(what);
                return Err(ApiError::permanent(format!("{what}: {refused}")));
            }
            Ok(Err(e)) => e,
        };
        let in_a_row = {
            let mut g = self.garbled.lock().unwrap();
            let n = g.entry(what.to_string()).or_insert(0);
            *n += 1;
            *n
        };
        let message = format!(
            "{what}: the platform answered with a body that is not the JSON expected ({e}); it begins {}",
            self.shown_head(bytes)
        );
        if in_a_row >= GARBLED_ANSWERS_MAX {
            Err(ApiError::permanent(format!(
                "{message}; {in_a_row} such answers in a row: something between truss-push and Baseten (a proxy, a captive portal) answers in its place; check HTTPS_PROXY and the api-url/app-url inputs"
            )))
        } else {
            Err(ApiError::Ambiguous { message })
        }
    }

    /// The same client with every retry delay zero.
    #[cfg(test)]
    pub(crate) fn without_delays(mut self) -> Self {
        self.zero_delays = true;
        self
    }

    /// The same client whose requests end by `deadline`, `phase`'s, from
    /// the run's budget (`crate::budget::Budget::until`, through
    /// `flow::Ctx::api_for`).
    pub(crate) fn within(&self, phase: Phase, deadline: Instant) -> Api {
        Api {
            deadline: Some(deadline),
            phase: Some(phase),
            ..self.clone()
        }
    }

    /// The moment no request of this handle may run past.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    fn policy(&self, p: Policy) -> Policy {
        if self.zero_delays { p.instant() } else { p }
    }

    /// Sends `req` with the API key: only over HTTPS (or to loopback), so
    /// a URL that went wrong can never carry the key in cleartext.
    async fn send_authed(&self, what: &str, req: RequestBuilder) -> Result<Response, ApiError> {
        let mut req = req
            .build()
            .map_err(|e| ApiError::permanent(format!("{what}: {}", error::describe(&e))))?;
        if !urls::may_carry_key(req.url()) {
            return Err(ApiError::permanent(format!(
                "{what}: refusing to send the API key to {} over plain HTTP",
                req.url().origin().ascii_serialization()
            )));
        }
        // The one check before every request to the platform: is there
        // time left on the run's clock?
        let left = self
            .clock
            .send(self.phase, self.deadline, what)
            .map_err(|Spent| ApiError::OutOfTime {
                message: format!("{what}: the run's time budget is spent"),
                sent: false,
            })?;
        if let Some(left) = left {
            let t = req.timeout_mut();
            *t = Some(t.map_or(left, |t| t.min(left)));
        }
        let auth = format!("Api-Key {}", self.key.expose());
        let mut value = reqwest::header::HeaderValue::from_str(&auth).map_err(|_| {
            ApiError::permanent(format!("{what}: the API key is not a valid header value"))
        })?;
        value.set_sensitive(true);
        req.headers_mut()
            .insert(reqwest::header::AUTHORIZATION, value);
        let deadline = self.deadline();
        self.http.execute(req).await.map_err(|e| {
            let out_of_time =
                e.is_timeout() && deadline.is_some_and(|d| self.clock.left(d).is_zero());
            match error::from_send(what, &e) {
                // Cut short by the run's deadline, not the server's fault.
                ApiError::Ambiguous { message } if out_of_time => ApiError::OutOfTime {
                    message,
                    sent: true,
                },
                other => other,
            }
        })
    }

    /// Sends one request and returns a 2xx answer, or the typed error.
    async fn send(&self, what: &str, req: RequestBuilder) -> Result<Response, ApiError> {
        let resp = self.send_authed(what, req).await?;
        if resp.status().is_success() {
            Ok(resp)
        } else {
            Err(error::from_status(what, resp).await)
        }
    }

    /// One GraphQL round trip. GraphQL errors (HTTP 200 with `errors`) are
    /// permanent; every error message is reported, not only the first.
    async fn graphql_once(
        &self,
        what: &str,
        query: &str,
        variables: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let mut body = json!({ "query": query });
        if let Some(v) = variables {
            body["variables"] = v.clone();
        }
        let req = self
            .http
            .post(self.endpoints.graphql())
            .timeout(Duration::from_secs(GRAPHQL_TIMEOUT_SECS))
            .json(&body);
        let resp = self.send(what, req).await?;
        let v: Value = self.decode(what, &self.body(what, resp).await?)?;
        if let Some(errs) = v
            .get("errors")
            .and_then(Value::as_array)
            .filter(|e| !e.is_empty())
        {
            let msgs: Vec<String> = errs.iter().map(graphql_error_text).collect();
            return Err(ApiError::permanent(format!("{what}: {}", msgs.join("; "))));
        }
        v.get("data")
            .cloned()
            .filter(|d| !d.is_null())
            .ok_or_else(|| ApiError::permanent(format!("{what}: the answer has no data")))
    }

    /// A GraphQL call under `policy` (reads retry every transient kind; a
    /// mutation only what surely never arrived).
    async fn graphql(
        &self,
        policy: Policy,
        what: &str,
        query: &str,
        variables: Option<Value>,
    ) -> Result<Value, ApiError> {
        self.retrying(policy, self.deadline(), |_| {
            self.graphql_once(what, query, variables.as_ref())
        })
        .await
    }

    /// A GraphQL query, retried on transient errors.
    async fn query(
        &self,
        what: &str,
        query: &str,
        variables: Option<Value>,
    ) -> Result<Value, ApiError> {
        self.graphql(Policy::READ, what, query, variables).await
    }

    /// One REST GET, no retry (the wait loop owns retries of status reads).
    async fn rest_get<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        url: reqwest::Url,
    ) -> Result<T, ApiError> {
        self.rest_get_within(what, url, Duration::from_secs(REST_TIMEOUT_SECS))
            .await
    }

    /// One REST GET that waits at most `timeout` for its answer.
    async fn rest_get_within<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        url: reqwest::Url,
        timeout: Duration,
    ) -> Result<T, ApiError> {
        let req = self.http.get(url).timeout(timeout);
        let resp = self.send(what, req).await?;
        self.decode(what, &self.body(what, resp).await?)
    }

    /// A REST GET retried under the read policy.
    async fn rest_read<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        url: reqwest::Url,
    ) -> Result<T, ApiError> {
        self.retrying(Policy::READ, self.deadline(), |_| {
            self.rest_get(what, url.clone())
        })
        .await
    }

    /// A REST POST under `policy`, the body discarded.
    async fn rest_post(
        &self,
        policy: Policy,
        what: &str,
        url: reqwest::Url,
        body: Option<Value>,
    ) -> Result<(), ApiError> {
        self.rest_post_json(policy, what, url, body).await.map(drop)
    }

    /// A REST POST under `policy`; the answer's JSON, or null when the
    /// answer has no JSON body.
    async fn rest_post_json(
        &self,
        policy: Policy,
        what: &str,
        url: reqwest::Url,
        body: Option<Value>,
    ) -> Result<Value, ApiError> {
        self.retrying(policy, self.deadline(), |_| {
            let mut req = self
                .http
                .post(url.clone())
                .timeout(Duration::from_secs(DEACTIVATE_TIMEOUT_SECS));
            req = match &body {
                Some(b) => req.json(b),
                // An empty POST says so: some proxies refuse one without a
                // length (411), and the official client sends `Content-Length: 0`.
                None => req
                    .header(reqwest::header::CONTENT_LENGTH, 0)
                    .body(Vec::new()),
            };
            async move {
                let mut resp = self.send(what, req).await?;
                // The answer only informs (a promotion's new id, read by
                // the caller); a missing or odd body is not the mutation's
                // failure, and it is never read past the cap.
                let bytes = net::read_capped(&mut resp, ANSWER_MAX_BYTES)
                    .await
                    .unwrap_or_default();
                Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
            }
        })
        .await
    }
}

/// One GraphQL error as a line: message, description, code.
fn graphql_error_text(e: &Value) -> String {
    let msg = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("unknown error");
    let mut s = msg.to_string();
    if let Some(d) = e
        .pointer("/extensions/description")
        .and_then(Value::as_str)
        .filter(|d| *d != msg)
    {
        s.push_str(&format!(" ({d})"));
    }
    if let Some(c) = e.pointer("/extensions/code").and_then(Value::as_str) {
        s.push_str(&format!(" [{c}]"));
    }
    s
}

/// Milliseconds since the epoch, for log windows.
#[expect(
    clippy::disallowed_methods,
    reason = "a wall-clock stamp for the log window's query, not a deadline"
)]
pub(crate) fn now_epoch_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A server that reads each request and hangs up without answering:
    /// whatever it was asked may have been applied. Counts the requests.
    async fn hang_up_server() -> (String, Arc<AtomicUsize>) {
        use tokio::io::AsyncReadExt;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = [0u8; 65536];
                if s.read(&mut buf).await.unwrap_or(0) > 0 {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        (url, seen)
    }

    fn api(url: &str) -> Api {
        let endpoints = Endpoints {
            app: url.parse().unwrap(),
            api: url.parse().unwrap(),
            inference: format!("{url}/{{prefix}}-{{id}}"),
            s3: None,
        };
        Api::new(net::HttpClient::plain(), endpoints, Secret::new("k")).without_delays()
    }

    #[tokio::test]
    async fn a_mutation_that_may_have_been_applied_is_sent_once_and_a_read_again() {
        let (url, seen) = hang_up_server().await;
        let api = api(&url);
        let e = api
            .create(&CreateRequest {
                existing_model_id: Some("m1"),
                model_name: "m",
                s3_key: "k",
                config_b64: "e30=",
                deployment_name: "d",
                environment: None,
                scale_down_old_production: true,
                preserve_env_instance_type: true,
                deploy_timeout_minutes: 45,
                team_id: None,
                truss_user_env: "{}",
                labels_json: None,
                raw_config_b64: None,
            })
            .await
            .unwrap_err();
        assert!(matches!(e, ApiError::Ambiguous { .. }), "{e:?}");
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        let e = api.teams().await.unwrap_err();
        assert!(matches!(e, ApiError::Ambiguous { .. }), "{e:?}");
        assert_eq!(
            seen.load(Ordering::SeqCst),
            1 + Policy::READ.attempts as usize
        );
    }

    #[test]
    fn unreadable_answers_are_retried_until_too_many_in_a_row() {
        let api = api("http://127.0.0.1:9");
        let bom: Value = api.decode("x", b"\xEF\xBB\xBF{\"a\": 1}").unwrap();
        assert_eq!(bom["a"], 1, "a byte order mark is passed over");
        for round in 0..2 {
            for n in 1..GARBLED_ANSWERS_MAX {
                let e = api.decode::<Value>("x", b"<html>").unwrap_err();
                assert!(
                    matches!(e, ApiError::Ambiguous { .. }),
                    "{round} {n}: {e:?}"
                );
                // Another call's garbage is counted apart.
                let _ = api.decode::<Value>("y", b"");
            }
            let e = api.decode::<Value>("x", b"").unwrap_err();
            assert!(matches!(e, ApiError::Permanent { .. }), "{e:?}");
            assert!(e.to_string().contains("an empty body"), "{e}");
            // A readable answer starts the count again.
            let _: Value = api.decode("x", b"{}").unwrap();
        }
    }

    #[test]
    fn graphql_literals_cannot_break_out() {
        for (raw, lit) in [
            ("plain", r#""plain""#),
            (r#"a"b"#, r#""a\"b""#),
            ("a\\b", r#""a\\b""#),
            ("line\nbreak", r#""line\nbreak""#),
            ("x\") { evil }", r#""x\") { evil }""#),
        ] {
            assert_eq!(gql_str(raw), lit);
        }
    }
}
