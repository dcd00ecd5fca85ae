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
//! For a slow network rather than a broken one, [`ShapedLink`] (`shape`)
//! relays TCP with a round-trip delay and rate caps; put it in front of the
//! fake or of this proxy. For a server that speaks on an idle keep-alive
//! connection (a `408` before it closes, a stale second answer),
//! [`unsolicited::Unsolicited`] relays TCP and writes an answer nobody
//! asked for once a connection has been quiet.
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
mod serve;
pub mod shape;
pub mod unsolicited;

use std::convert::Infallible;
use std::fs::File;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::watch;

use rules::Book;
pub use rules::{DeclaredLength, Fault, RedirectTo, Rule, RuleSet, When};
pub use shape::{Shape, ShapedLink};

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
    /// Whether a `Proxy-Authorization` header was sent (its value is never
    /// kept); it is never forwarded.
    pub proxy_authorization: bool,
    /// Whether the request carried `Expect: 100-continue`.
    pub expect_continue: bool,
    /// Whether the request-target was absolute-form (`http://host/path`),
    /// as a client sends it to a proxy that forwards it.
    pub absolute_form: bool,
    /// Whether it came over TLS to the proxy.
    pub tls: bool,
    /// Whether it came inside a `CONNECT` tunnel the proxy intercepted.
    pub tunnelled: bool,
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
    tls: Option<Arc<rustls::ServerConfig>>,
    intercept: Option<Arc<rustls::ServerConfig>>,
    credentials: Option<String>,
    forward_expect: bool,
}

fn server_config(
    cert_chain: Vec<Vec<u8>>,
    pkcs8_key: Vec<u8>,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .context("while choosing the proxy's TLS versions")?
    .with_no_client_auth()
    .with_single_cert(
        cert_chain
            .into_iter()
            .map(rustls::pki_types::CertificateDer::from)
            .collect(),
        rustls::pki_types::PrivateKeyDer::Pkcs8(pkcs8_key.into()),
    )
    .context("while loading the proxy's certificate")?;
    Ok(Arc::new(config))
}

impl ProxyBuilder {
    /// Serves over TLS with this certificate chain and PKCS#8 key (DER):
    /// the proxy of an `https://` proxy URL.
    pub fn tls(mut self, cert_chain: Vec<Vec<u8>>, pkcs8_key: Vec<u8>) -> anyhow::Result<Self> {
        self.tls = Some(server_config(cert_chain, pkcs8_key)?);
        Ok(self)
    }

    /// Opens `CONNECT` tunnels as a TLS-intercepting proxy does: a `200`,
    /// then TLS with this certificate inside the tunnel, and the requests
    /// in it served (logged, faulted, forwarded to the fake) like any other,
    /// marked `tunnelled`. Without it a `CONNECT` is forwarded to the fake.
    pub fn intercept_tunnels(
        mut self,
        cert_chain: Vec<Vec<u8>>,
        pkcs8_key: Vec<u8>,
    ) -> anyhow::Result<Self> {
        self.intercept = Some(server_config(cert_chain, pkcs8_key)?);
        Ok(self)
    }

    /// Forwards `Expect: 100-continue` to the fake, as RFC 9110 lets a
    /// proxy do, instead of answering the `100` itself and dropping it:
    /// the fake's S3 then records what the client asked. (The body is
    /// still read whole first, and the fake's `100` is passed over.)
    pub fn forward_expect(mut self) -> Self {
        self.forward_expect = true;
        self
    }

    /// Answers `407 Proxy Authentication Required` to every request (the
    /// admin paths excepted) whose `Proxy-Authorization` is not Basic
    /// `user:password`.
    pub fn credentials(mut self, user: &str, password: &str) -> Self {
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        self.credentials = Some(format!("Basic {token}"));
        self
    }

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
            tls: self.tls.map(tokio_rustls::TlsAcceptor::from),
            intercept: self.intercept.map(tokio_rustls::TlsAcceptor::from),
            credentials: self.credentials,
            forward_expect: self.forward_expect,
        });
        let (tx, rx) = watch::channel(false);
        tokio::spawn(serve::serve(listener, state.clone(), rx.clone(), false));
        tokio::spawn(serve::serve(sink_listener, state.clone(), rx, true));
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
            tls: None,
            intercept: None,
            credentials: None,
            forward_expect: false,
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
    /// The proxy (not its sink) is reached over TLS.
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// Terminates the TLS inside `CONNECT` tunnels, if set.
    intercept: Option<tokio_rustls::TlsAcceptor>,
    /// The `Proxy-Authorization` every request must carry, if any.
    credentials: Option<String>,
    /// `Expect` is forwarded, not dropped.
    forward_expect: bool,
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
