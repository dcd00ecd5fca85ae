//! A fault-injecting HTTP/1.1 proxy in front of the fake, for tests that
//! need a broken network rather than a broken platform.
//!
//! The proxy listens on its own loopback port and forwards each request to
//! the fake unchanged, `Host` header included: the fake tells its hosts
//! apart by the host label and path (never the port), and S3 requests are
//! SigV4-signed over the `Host` the client sent, so rewriting it would break
//! both. A client is pointed at the proxy with the same base-URL overrides
//! it would give the fake ([`FaultProxy::graphql_base`] and friends).
//!
//! [`rules::Rule`]s decide, request by request, whether to forward, and what
//! to do to the answer: drop the connection after the fake applied the
//! request, reset it before, never answer, drip the answer, answer a 429,
//! an HTML error page or a redirect, or cut the JSON short. A redirect can
//! point at the proxy's sink, another loopback port that records whether a
//! followed redirect carried the `Authorization` header.
//!
//! Every request is logged ([`ProxyEntry`]) with the rule and fault applied,
//! whether it was forwarded, and whether an `Authorization` header was
//! present — never its value. `/__fake/…` admin requests pass through
//! unlogged and unfaulted; `GET /__proxy/requests` answers the log as JSON.
//!
//! # Rules files
//!
//! `fake-baseten --scenario S --proxy-rules rules.yaml [--proxy-log p.jsonl]`
//! starts a proxy too and adds its bases under `proxy` in the start-up line.
//!
//! ```yaml
//! seed: 7                     # random draws repeat for the same seed
//! rules:                      # first rule that fires wins; each counts its own matches
//!   - id: lost-create
//!     match: {graphql: create_model_from_truss}   # operation or root field name
//!     when: {nth: 1}          # every (default) | {nth: N} | {first: N} | {probability: P}
//!     fault: {kind: drop_after_forward}
//!   - match: {method: GET, path: /v1/}            # also host: <Host prefix>
//!     fault: {kind: too_many_requests, retry_after: 999999}
//!   - match: {path: /model-}                     # inference, as the fake's template routes it
//!     fault: {kind: redirect, status: 307, to: sink}   # or http_same_host, {path: P}, {url: U}
//!   - fault: {kind: html_error, status: 502, echo: "reflected text"}
//!   - when: {probability: 0.2}                   # the soak: 20 % of everything
//!     faults: soak            # or a list: one is drawn per fired request
//! ```
//!
//! Other kinds: `reset_before_forward`, `hang`, `drip {bytes, interval_ms}`,
//! `status {status, retry_after, body, content_type}`,
//! `truncated_json {keep, content_length: truncated | original}`.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use fake_baseten::FakeBaseten;
//! use fake_baseten::proxy::{Fault, FaultProxy, Rule};
//! use fake_baseten::scenario::Scenario;
//! let fake = FakeBaseten::start(Scenario::default()).await?;
//! let proxy = FaultProxy::builder(fake.addr())
//!     .rule(Rule::new("lost-answer", Fault::DropAfterForward).graphql("create_model_from_truss").nth(1))
//!     .start()
//!     .await?;
//! let app_url = proxy.graphql_base(); // give this to the client instead of the fake's
//! # let _ = app_url; Ok(()) }
//! ```

pub mod rules;

use std::convert::Infallible;
use std::fs::File;
use std::future::Future as _;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::http::{request, response};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

use rules::{Book, Seen};
pub use rules::{DeclaredLength, Fault, RedirectTo, Rule, RuleSet, When};

type Body = BoxBody<Bytes, Infallible>;

/// One request the proxy (or its sink) received, and what it did with it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct ProxyEntry {
    pub seq: u64,
    /// Received by the sink (the target of `redirect: sink`), not the proxy.
    pub sink: bool,
    pub method: String,
    pub host: Option<String>,
    pub path: String,
    pub query: Option<String>,
    /// Operation names and root fields of a GraphQL body, in document order.
    pub graphql: Vec<String>,
    /// Whether an `Authorization` header was sent (its value is never kept).
    pub authorization: bool,
    /// The rule that fired, by id.
    pub rule: Option<String>,
    /// [`Fault::describe`] of what was done.
    pub fault: Option<String>,
    /// Whether the fake received the request.
    pub forwarded: bool,
    /// What the fake answered, when forwarded.
    pub upstream_status: Option<u16>,
    /// The status the client was sent; `None` when it was sent nothing
    /// (dropped, reset, never answered) or the fake could not be reached.
    pub status: Option<u16>,
}

/// Options for starting a proxy.
#[derive(Clone, Debug)]
pub struct ProxyBuilder {
    upstream: SocketAddr,
    host: IpAddr,
    port: u16,
    rules: RuleSet,
    log_file: Option<PathBuf>,
}

impl ProxyBuilder {
    /// Replaces the rules (and seed) with a parsed rules file.
    pub fn rules(mut self, set: RuleSet) -> Self {
        self.rules = set;
        self
    }

    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.rules.push(rule);
        self
    }

    pub fn seed(mut self, seed: u64) -> Self {
        self.rules.seed = seed;
        self
    }

    pub fn host(mut self, host: IpAddr) -> Self {
        self.host = host;
        self
    }

    /// 0 (the default) picks a free port.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Also append the log, one JSON object per line, to `path`.
    pub fn log_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.log_file = Some(path.into());
        self
    }

    /// Starts serving on the current tokio runtime.
    pub async fn start(self) -> anyhow::Result<FaultProxy> {
        let listener = TcpListener::bind(SocketAddr::new(self.host, self.port))
            .await
            .with_context(|| format!("while binding the proxy to {}:{}", self.host, self.port))?;
        let sink_listener = TcpListener::bind(SocketAddr::new(self.host, 0))
            .await
            .context("while binding the proxy's sink")?;
        let addr = listener
            .local_addr()
            .context("while reading the proxy's address")?;
        let sink_addr = sink_listener
            .local_addr()
            .context("while reading the sink's address")?;
        let file = match &self.log_file {
            Some(p) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .with_context(|| format!("while opening the proxy log {}", p.display()))?,
            )),
            None => None,
        };
        let state = Arc::new(State {
            upstream: self.upstream,
            sink_url: format!("http://{sink_addr}"),
            book: Mutex::new(Book::new(self.rules)),
            log: Mutex::new(Vec::new()),
            file,
            open: AtomicUsize::new(0),
        });
        let (tx, rx) = watch::channel(false);
        tokio::spawn(serve(listener, state.clone(), rx.clone(), false));
        tokio::spawn(serve(sink_listener, state.clone(), rx, true));
        Ok(FaultProxy {
            state,
            addr,
            sink_addr,
            shutdown: tx,
            runtime: None,
        })
    }

    /// Starts serving on a runtime of its own, for tests that are not async.
    pub fn start_in_background(self) -> anyhow::Result<FaultProxy> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("fault-proxy")
            .build()
            .context("while starting the proxy's runtime")?;
        let mut proxy = runtime.block_on(self.start())?;
        proxy.runtime = Some(runtime);
        Ok(proxy)
    }
}

/// A running proxy (and its sink). Stops serving when dropped.
pub struct FaultProxy {
    state: Arc<State>,
    addr: SocketAddr,
    sink_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl FaultProxy {
    /// A proxy forwarding to `upstream` (the fake's [`crate::FakeBaseten::addr`]),
    /// on `127.0.0.1`, a free port, with no rules yet.
    pub fn builder(upstream: SocketAddr) -> ProxyBuilder {
        ProxyBuilder {
            upstream,
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            rules: RuleSet::default(),
            log_file: None,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The app URL to give a client instead of the fake's.
    pub fn graphql_base(&self) -> String {
        self.url()
    }

    pub fn rest_base(&self) -> String {
        self.url()
    }

    pub fn s3_endpoint(&self) -> String {
        self.url()
    }

    /// `http://127.0.0.1:PORT/{prefix}-{id}`, as the fake's.
    pub fn inference_template(&self) -> String {
        format!("{}/{{prefix}}-{{id}}", self.url())
    }

    /// `http://127.0.0.1:SINKPORT`: the foreign host redirects point at.
    pub fn sink_url(&self) -> String {
        format!("http://{}", self.sink_addr)
    }

    pub fn add_rule(&self, rule: Rule) {
        self.state.book().add(rule);
    }

    /// Removes every rule: the proxy forwards everything from now on.
    pub fn clear_rules(&self) {
        self.state.book().clear();
    }

    /// Every request seen so far (the sink's included), oldest first.
    pub fn requests(&self) -> Vec<ProxyEntry> {
        self.state.entries().clone()
    }

    /// The requests a rule fired on.
    pub fn faulted(&self) -> Vec<ProxyEntry> {
        self.requests()
            .into_iter()
            .filter(|e| e.rule.is_some())
            .collect()
    }

    /// Client connections (the sink's included) the proxy still holds: 0
    /// once every client has gone, whatever was done to them.
    pub fn open_connections(&self) -> usize {
        self.state.open.load(Ordering::SeqCst)
    }

    /// The requests the sink received.
    pub fn sink_requests(&self) -> Vec<ProxyEntry> {
        self.requests().into_iter().filter(|e| e.sink).collect()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

struct State {
    upstream: SocketAddr,
    sink_url: String,
    book: Mutex<Book>,
    log: Mutex<Vec<ProxyEntry>>,
    file: Option<Mutex<File>>,
    /// Client connections (to the proxy and the sink) not yet closed.
    open: AtomicUsize,
}

impl State {
    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn entries(&self) -> MutexGuard<'_, Vec<ProxyEntry>> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, mut entry: ProxyEntry) {
        let line = {
            let mut entries = self.entries();
            entry.seq = entries.len() as u64;
            let line = serde_json::to_string(&entry).unwrap_or_default();
            entries.push(entry);
            line
        };
        if let Some(f) = &self.file {
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            // A log write failure must not change what the client sees.
            let _ = writeln!(f, "{line}");
            let _ = f.flush();
        }
    }
}

/// What the request handler may do to its connection beyond answering.
struct Conn {
    stream: Arc<TcpStream>,
    /// Ends the connection without (further) answer.
    kill: Notify,
    /// Close with RST rather than FIN.
    reset: AtomicBool,
    /// Write at most this many bytes, this far apart.
    drip: Mutex<Option<(usize, Duration)>>,
}

impl Conn {
    fn drip(&self) -> Option<(usize, Duration)> {
        *self.drip.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes the connection (RST when `reset`) and never returns: the
    /// connection's task drops this handler with the socket.
    async fn end(&self, reset: bool) -> Response<Body> {
        self.reset.store(reset, Ordering::SeqCst);
        self.kill.notify_one();
        std::future::pending().await
    }
}

async fn serve(
    listener: TcpListener,
    state: Arc<State>,
    mut shutdown: watch::Receiver<bool>,
    sink: bool,
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
        tokio::spawn(connection(stream, state.clone(), shutdown.clone(), sink));
    }
}

async fn connection(
    stream: TcpStream,
    state: Arc<State>,
    mut shutdown: watch::Receiver<bool>,
    sink: bool,
) {
    state.open.fetch_add(1, Ordering::SeqCst);
    let counted = state.clone();
    let stream = Arc::new(stream);
    let conn = Arc::new(Conn {
        stream: stream.clone(),
        kill: Notify::new(),
        reset: AtomicBool::new(false),
        drip: Mutex::new(None),
    });
    let io = Io {
        conn: conn.clone(),
        pause: None,
    };
    let svc = {
        let conn = conn.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let state = state.clone();
            let conn = conn.clone();
            async move {
                Ok::<_, Infallible>(if sink {
                    sink_answer(&state, req)
                } else {
                    handle(&state, &conn, req).await
                })
            }
        })
    };
    let served = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(io), svc);
    tokio::select! {
        _ = served => {}
        _ = conn.kill.notified() => {}
        _ = shutdown.changed() => {}
    }
    if conn.reset.load(Ordering::SeqCst) {
        // Zero linger turns the close into a reset; the socket closes when
        // the last handle (this one, once hyper's is gone) is dropped.
        let _ = stream.set_zero_linger();
    }
    counted.open.fetch_sub(1, Ordering::SeqCst);
}

/// The socket as hyper sees it: shared with the handler (to reset it or to
/// watch for the client leaving) and slowed down when the answer drips.
struct Io {
    conn: Arc<Conn>,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let stream = &self.conn.stream;
        loop {
            ready!(stream.poll_read_ready(cx))?;
            match stream.try_read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let drip = self.conn.drip();
        if let Some(pause) = self.pause.as_mut() {
            ready!(pause.as_mut().poll(cx));
            self.pause = None;
        }
        let limit = drip.map_or(buf.len(), |(n, _)| n.min(buf.len()));
        loop {
            ready!(self.conn.stream.poll_write_ready(cx))?;
            match self.conn.stream.try_write(&buf[..limit]) {
                Ok(n) => {
                    if let Some((_, every)) = drip {
                        self.pause = Some(Box::pin(tokio::time::sleep(every)));
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    // The socket closes when the connection's task drops it.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// How long a short body waits, stalled, before its connection is closed:
/// time for hyper to flush the cut answer to the socket.
const CLOSE_AFTER_FLUSH: Duration = Duration::from_millis(100);

/// Headers that describe one hop, not the message.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "expect",
];

fn host_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

async fn handle(state: &State, conn: &Arc<Conn>, req: Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        // The client went away mid-body; nobody will read an answer.
        Err(_) => return conn.end(false).await,
    };
    let path = parts.uri.path().to_string();
    if path.starts_with("/__proxy/") {
        return admin(state, &parts.method, &path);
    }
    if path.starts_with("/__fake/") {
        return match forward(state.upstream, &parts, body).await {
            Ok((head, body)) => answer_forwarded(head, body),
            Err(e) => plain(StatusCode::BAD_GATEWAY, format!("proxy: {e:#}")),
        };
    }
    let host = host_of(&parts.headers);
    let graphql = graphql_names(&body);
    let decision = state.book().decide(&Seen {
        method: parts.method.as_str(),
        path: &path,
        host: host.as_deref().unwrap_or(""),
        graphql: &graphql,
    });
    let mut entry = ProxyEntry {
        method: parts.method.to_string(),
        host: host.clone(),
        path: path.clone(),
        query: parts.uri.query().map(str::to_string),
        graphql,
        authorization: parts.headers.contains_key(header::AUTHORIZATION),
        rule: decision.as_ref().map(|d| d.rule.clone()),
        fault: decision.as_ref().map(|d| d.fault.describe()),
        ..ProxyEntry::default()
    };
    let Some(fault) = decision.map(|d| d.fault) else {
        return forward_and_log(state, &parts, body, entry).await;
    };

    let forwarded = if fault.forwards() {
        entry.forwarded = true;
        match forward(state.upstream, &parts, body).await {
            Ok(r) => {
                entry.upstream_status = Some(r.0.status.as_u16());
                Some(r)
            }
            Err(e) => {
                entry.status = Some(502);
                state.push(entry);
                return plain(StatusCode::BAD_GATEWAY, format!("proxy: {e:#}"));
            }
        }
    } else {
        None
    };

    let resp = match (fault, forwarded) {
        (Fault::ResetBeforeForward, _) => {
            state.push(entry);
            return conn.end(true).await;
        }
        (Fault::DropAfterForward, _) => {
            state.push(entry);
            return conn.end(false).await;
        }
        (Fault::Hang, _) => {
            state.push(entry);
            client_gone(&conn.stream).await;
            return conn.end(false).await;
        }
        (Fault::Drip { bytes, interval_ms }, Some((head, body))) => {
            *conn.drip.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((bytes, Duration::from_millis(interval_ms)));
            closing(answer_forwarded(head, body))
        }
        (
            Fault::TruncatedJson {
                keep,
                content_length,
            },
            Some((head, body)),
        ) => closing(truncated(head, body, keep, content_length, conn.clone())),
        (Fault::TooManyRequests { retry_after }, _) => synthetic(
            StatusCode::TOO_MANY_REQUESTS,
            Some(&retry_after),
            "application/json",
            json!({"error": "Too Many Requests"}).to_string(),
        ),
        (Fault::HtmlError { status, echo }, _) => {
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            synthetic(code, None, "text/html", html_page(code, echo.as_deref()))
        }
        (
            Fault::Status {
                status,
                retry_after,
                body,
                content_type,
            },
            _,
        ) => {
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = body.unwrap_or_else(|| {
                json!({"error": code.canonical_reason().unwrap_or("Error")}).to_string()
            });
            synthetic(
                code,
                retry_after.as_deref(),
                content_type.as_deref().unwrap_or("application/json"),
                body,
            )
        }
        (Fault::Redirect { status, to }, _) => {
            let here = format!(
                "{path}{}",
                parts
                    .uri
                    .query()
                    .map(|q| format!("?{q}"))
                    .unwrap_or_default()
            );
            let host = host.unwrap_or_default();
            let location = match to {
                RedirectTo::Path(p) => format!("http://{host}{p}"),
                RedirectTo::HttpSameHost => format!("http://{host}{here}"),
                RedirectTo::Sink => format!("{}{here}", state.sink_url),
                RedirectTo::Url(u) => u,
            };
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::TEMPORARY_REDIRECT);
            let mut r = synthetic(code, None, "text/plain", format!("Moved to {location}\n"));
            if let Ok(v) = HeaderValue::from_str(&location) {
                r.headers_mut().insert(header::LOCATION, v);
            }
            r
        }
        (Fault::Drip { .. } | Fault::TruncatedJson { .. }, None) => {
            unreachable!("faults that forward have the fake's answer")
        }
    };
    entry.status = Some(resp.status().as_u16());
    state.push(entry);
    resp
}

async fn forward_and_log(
    state: &State,
    parts: &request::Parts,
    body: Bytes,
    mut entry: ProxyEntry,
) -> Response<Body> {
    entry.forwarded = true;
    let resp = match forward(state.upstream, parts, body).await {
        Ok((head, body)) => {
            entry.upstream_status = Some(head.status.as_u16());
            answer_forwarded(head, body)
        }
        Err(e) => plain(StatusCode::BAD_GATEWAY, format!("proxy: {e:#}")),
    };
    entry.status = Some(resp.status().as_u16());
    state.push(entry);
    resp
}

/// Sends the request to the fake on a fresh connection and reads the whole
/// answer.
async fn forward(
    upstream: SocketAddr,
    parts: &request::Parts,
    body: Bytes,
) -> anyhow::Result<(response::Parts, Bytes)> {
    let tcp = TcpStream::connect(upstream)
        .await
        .with_context(|| format!("while connecting to the fake at {upstream}"))?;
    let (mut sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .context("while starting HTTP/1.1 to the fake")?;
    tokio::spawn(driver);
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let mut req = Request::builder()
        .method(parts.method.clone())
        .uri(target)
        .body(Full::new(body))
        .context("while building the forwarded request")?;
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            req.headers_mut().append(name.clone(), value.clone());
        }
    }
    let resp = sender
        .send_request(req)
        .await
        .context("while waiting for the fake's answer")?;
    let (head, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .context("while reading the fake's answer")?
        .to_bytes();
    Ok((head, body))
}

fn answer_forwarded(head: response::Parts, body: Bytes) -> Response<Body> {
    let mut resp = Response::new(Full::new(body).boxed());
    *resp.status_mut() = head.status;
    for (name, value) in &head.headers {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            resp.headers_mut().append(name.clone(), value.clone());
        }
    }
    resp
}

fn truncated(
    head: response::Parts,
    body: Bytes,
    keep: Option<usize>,
    declared: DeclaredLength,
    conn: Arc<Conn>,
) -> Response<Body> {
    let keep = keep.unwrap_or(body.len() / 2).min(body.len());
    let full_len = body.len();
    let cut = body.slice(..keep);
    let mut resp = answer_forwarded(head, Bytes::new());
    let (len, body) = match declared {
        DeclaredLength::Truncated => (keep, Full::new(cut).boxed()),
        // A body of unknown size lets the declared length stand. Once the
        // cut is sent, the body stalls (hyper flushes what it has) and the
        // connection is closed: ending the body short instead would make
        // hyper drop the unflushed answer with the connection.
        DeclaredLength::Original => {
            let sent = futures_util::stream::once(async move { Ok(Frame::data(cut)) });
            let close = futures_util::stream::once(async move {
                tokio::time::sleep(CLOSE_AFTER_FLUSH).await;
                conn.kill.notify_one();
                std::future::pending::<Result<Frame<Bytes>, Infallible>>().await
            });
            (
                full_len,
                StreamBody::new(futures_util::StreamExt::chain(sent, close)).boxed(),
            )
        }
    };
    resp.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    *resp.body_mut() = body;
    resp
}

/// Ends the connection after this answer, so a slowed or broken answer
/// cannot leak into the next request on the same connection.
fn closing(mut resp: Response<Body>) -> Response<Body> {
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

fn synthetic(
    status: StatusCode,
    retry_after: Option<&str>,
    content_type: &str,
    body: String,
) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed());
    *resp.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    if let Some(v) = retry_after.and_then(|r| HeaderValue::from_str(r).ok()) {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

fn plain(status: StatusCode, text: String) -> Response<Body> {
    synthetic(status, None, "text/plain", text)
}

/// A load balancer's error page; `echo` lands in it verbatim, as a page
/// that reflects a request header would.
fn html_page(code: StatusCode, echo: Option<&str>) -> String {
    let reason = code.canonical_reason().unwrap_or("Error");
    let status = code.as_u16();
    let echo = echo.map(|e| format!("<p>{e}</p>\n")).unwrap_or_default();
    format!(
        "<html>\n<head><title>{status} {reason}</title></head>\n<body>\n<center><h1>{status} {reason}</h1></center>\n{echo}<hr><center>nginx</center>\n</body>\n</html>\n"
    )
}

/// Waits until the client closes its end (or the socket fails).
async fn client_gone(stream: &TcpStream) {
    let mut byte = [0u8; 1];
    loop {
        match stream.peek(&mut byte).await {
            Ok(0) | Err(_) => return,
            // More bytes from a client still waiting: look again later.
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Operation names and root field names of a GraphQL JSON body.
fn graphql_names(body: &[u8]) -> Vec<String> {
    use graphql_parser::query::{Definition, OperationDefinition, Selection};
    if !body.trim_ascii_start().starts_with(b"{") {
        return Vec::new();
    }
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let Some(query) = v.get("query").and_then(Value::as_str) else {
        return Vec::new();
    };
    let mut names: Vec<String> = v
        .get("operationName")
        .and_then(Value::as_str)
        .map(str::to_string)
        .into_iter()
        .collect();
    let Ok(doc) = graphql_parser::parse_query::<String>(query) else {
        return names;
    };
    for def in doc.definitions {
        let Definition::Operation(op) = def else {
            continue;
        };
        let (name, set) = match op {
            OperationDefinition::SelectionSet(s) => (None, s),
            OperationDefinition::Query(q) => (q.name, q.selection_set),
            OperationDefinition::Mutation(m) => (m.name, m.selection_set),
            OperationDefinition::Subscription(s) => (s.name, s.selection_set),
        };
        names.extend(name);
        names.extend(set.items.into_iter().filter_map(|item| match item {
            Selection::Field(f) => Some(f.name),
            _ => None,
        }));
    }
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// The sink answers every request 200 and records it.
fn sink_answer(state: &State, req: Request<Incoming>) -> Response<Body> {
    state.push(ProxyEntry {
        sink: true,
        method: req.method().to_string(),
        host: host_of(req.headers()),
        path: req.uri().path().to_string(),
        query: req.uri().query().map(str::to_string),
        authorization: req.headers().contains_key(header::AUTHORIZATION),
        status: Some(200),
        ..ProxyEntry::default()
    });
    synthetic(
        StatusCode::OK,
        None,
        "application/json",
        json!({"sink": true}).to_string(),
    )
}

fn admin(state: &State, method: &Method, path: &str) -> Response<Body> {
    match (method, path) {
        (&Method::GET, "/__proxy/requests") => synthetic(
            StatusCode::OK,
            None,
            "application/json",
            serde_json::to_string(&*state.entries()).unwrap_or_default(),
        ),
        _ => plain(StatusCode::NOT_FOUND, "unknown proxy admin route".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphql_names_are_operation_and_root_fields() {
        let body = json!({
            "query": "mutation Push($c: String) { create_model_from_truss(config: $c) { model_version { id } } }",
            "operationName": "Push",
        })
        .to_string();
        assert_eq!(
            graphql_names(body.as_bytes()),
            ["Push", "create_model_from_truss"]
        );
        let anonymous = json!({"query": "{ teams { id } user { email } }"}).to_string();
        assert_eq!(graphql_names(anonymous.as_bytes()), ["teams", "user"]);
        assert!(graphql_names(b"\x1f\x8b binary").is_empty());
        assert!(graphql_names(br#"{"model_input": 1}"#).is_empty());
    }

    #[test]
    fn html_page_echoes() {
        let page = html_page(StatusCode::BAD_GATEWAY, Some("Api-Key secret"));
        assert!(page.contains("502 Bad Gateway"));
        assert!(page.contains("<p>Api-Key secret</p>"));
    }
}
