//! HTTP/1.1 for the requests that carry archive bytes (PutObject and
//! UploadPart), written here because the crate's HTTP client cannot wait
//! for an interim `100 Continue` (hyper 1.x has no client side for it).
//!
//! As boto3 does, the head goes out with `Expect: 100-continue` and the
//! body only once S3 says `100`: a request S3 refuses at its headers (wrong
//! region, expired credentials, a bucket policy, a bad signature) is read
//! as S3's XML error before a byte of the body is sent, instead of a broken
//! pipe after megabytes were pushed into a closing connection. A server
//! that ignores `Expect` gets the body after [`EXPECT_WAIT`], and its origin
//! is remembered so later requests do not wait again. One that answers
//! `417 Expectation Failed` (it, or something on the way, implements no
//! expectations) gets the request once more without `Expect`, on a new
//! connection, as RFC 9110 asks, and its origin is remembered so later
//! requests there carry no `Expect` at all.
//!
//! An answer is read only as the answer to the request just sent:
//! connections are kept per origin for the next request, but one that
//! answered early or failed is closed, never reused; one that received any
//! byte while it sat idle (an answer nobody asked for, a close) is closed
//! when it is next taken from the pool ([`Wire::check_out`]); and a retry
//! (`fresh`) always opens a new one. The TLS config and the proxy route
//! are the run's network's (`net::Transport`), built with its reqwest
//! clients from the same roots and variables; nothing here reads the
//! environment. When `HTTPS_PROXY` applies to an `https` host (`NO_PROXY`
//! included) and names an `http://` proxy, each connection is a
//! `CONNECT` tunnel through it, TLS end to end; for an `https://` proxy, or
//! a plain `http` host behind `HTTP_PROXY`, the request goes through
//! reqwest and its proxy support instead, without `Expect`.

mod answer;
mod conn;

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper_util::client::proxy::matcher::Matcher;
use reqwest::Url;
use reqwest::header::HeaderMap;
use tokio::io::AsyncWriteExt as _;

use self::answer::Head;
use self::conn::Conn;
pub(super) use self::conn::TunnelRefused;
use super::payload::{FileBody, WriteError};
use crate::net::{Expectation, Expectations, Transport};

/// How long to wait for the interim answer before sending the body anyway.
/// 1 s, what botocore and curl wait: S3 answers within a round trip, so a
/// longer wait would only cost servers that ignore `Expect` (proxies, some
/// S3-compatible stores), and those pay it once per origin.
pub(super) const EXPECT_WAIT: Duration = Duration::from_secs(1);
/// How long the final answer may take once the body is sent. S3 answers
/// a stored part at once; a server that took the body and went silent is
/// retried rather than waited on forever.
const ANSWER_WAIT: Duration = Duration::from_secs(120);
/// Idle connections older than this are closed rather than reused: S3
/// drops idle connections after about 20 s, and a request on a connection
/// the server is closing costs an attempt.
const IDLE_MAX: Duration = Duration::from_secs(15);
/// Idle connections kept per origin: more than parts are ever in flight.
const IDLE_PER_ORIGIN_MAX: usize = 64;
/// The most of an answer's body read: S3's XML answers are a few hundred
/// bytes.
pub(super) const ANSWER_MAX_BYTES: usize = 1024 * 1024;

/// Scheme, host and port: which connections may carry a request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Origin {
    https: bool,
    host: String,
    port: u16,
}

impl Origin {
    /// `scheme://host:port`, how the run's memory names it.
    fn key(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}:{}", self.host, self.port)
    }

    fn of(url: &Url) -> io::Result<Self> {
        let https = match url.scheme() {
            "https" => true,
            "http" => false,
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("unsupported scheme {other}"),
                ));
            }
        };
        let host = url
            .host_str()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the URL has no host"))?;
        // An IPv6 literal is written with brackets in URLs, not for DNS.
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = url
            .port_or_known_default()
            .unwrap_or(if https { 443 } else { 80 });
        Ok(Self { https, host, port })
    }
}

/// An HTTP proxy's tunnel (`CONNECT`) to an `https` origin: the proxy's
/// address and, when its URL named a user, its `Proxy-Authorization`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Tunnel {
    host: String,
    port: u16,
    auth: Option<String>,
}

/// How a request to a URL travels.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    /// Straight to S3.
    Direct,
    /// Through a proxy's tunnel, TLS end to end.
    Tunnel(Tunnel),
    /// Through reqwest, without `Expect`: a proxy that is itself `https`,
    /// or plain `http` to S3 through a proxy (it would see the request).
    Reqwest,
}

/// What a request carries: bytes in memory (sent with the head, no
/// `Expect`), or a range of the archive (sent after S3's `100`).
#[derive(Clone, Copy)]
pub(super) enum Outgoing<'a> {
    Bytes(&'a [u8]),
    File(&'a FileBody),
}

/// One request's head: method, URL, and every header but `Host`,
/// `Content-Length` and `Expect`, which this layer writes.
pub(super) struct Request<'a> {
    pub(super) method: &'a str,
    pub(super) url: &'a Url,
    pub(super) headers: &'a [(&'static str, String)],
    pub(super) content_length: u64,
}

/// A final answer.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) headers: HeaderMap,
    pub(super) body: Vec<u8>,
    /// It came before the body was sent (S3 refused the request at its
    /// headers): none of the body left this machine.
    pub(super) early: bool,
    /// The whole body went out on this connection before the answer was
    /// read. Without it, a success cannot mean the body was stored.
    pub(super) sent_whole: bool,
}

/// Why a request got no answer.
#[derive(Debug)]
pub(super) enum Error {
    /// No connection (name lookup, TCP, TLS, the connect timeout): nothing
    /// was sent.
    Connect(io::Error),
    /// The connection failed, or the answer was not HTTP, after the head
    /// went out.
    Exchange(io::Error),
    /// The archive could not be read.
    File(io::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(e) => write!(f, "could not connect: {e}"),
            Self::Exchange(e) => write!(f, "the connection failed: {e}"),
            Self::File(e) => write!(f, "could not read the archive: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Connect(e) | Self::Exchange(e) | Self::File(e) => Some(e),
        }
    }
}

/// Why one exchange on one connection failed.
enum Failed {
    /// A connection from the pool failed before any byte of an answer: the
    /// server had closed it while it was idle. Nothing was sent that could
    /// have been applied; a new connection takes the request.
    Stale,
    /// `417 Expectation Failed` to a head that carried `Expect`, before any
    /// of the body: the request is to be repeated without it.
    ExpectRefused,
    Other(Error),
}

/// The connections and settings of the S3 data requests.
pub(super) struct Wire {
    tls: Arc<rustls::ClientConfig>,
    proxies: Arc<Matcher>,
    connect_timeout: Duration,
    user_agent: String,
    idle: Mutex<HashMap<Origin, Vec<Conn>>>,
    /// Origins that sent no `100` within [`EXPECT_WAIT`] (later requests
    /// there send the body at once) or answered `417` to `Expect` (later
    /// requests there do not send it): the run's, shared by its uploads.
    expectations: Arc<Expectations>,
}

impl Wire {
    /// The TLS config and the proxy route are the run's network's, the
    /// ones its reqwest clients were built from.
    pub(super) fn new(transport: &Transport) -> Self {
        Self {
            tls: Arc::clone(&transport.tls),
            proxies: Arc::clone(&transport.proxies),
            connect_timeout: transport.connect_timeout,
            user_agent: transport.user_agent.clone(),
            idle: Mutex::default(),
            expectations: Arc::clone(&transport.expectations),
        }
    }

    /// Whether this layer carries a request to `url`: straight, or through
    /// an HTTP proxy's tunnel; not through an `https` proxy or a proxy for
    /// plain `http` (reqwest carries those, without `Expect`).
    pub(super) fn carries(&self, url: &Url) -> bool {
        self.route(url) != Route::Reqwest
    }

    fn route(&self, url: &Url) -> Route {
        let Some(host) = url.host_str() else {
            return Route::Reqwest;
        };
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let Ok(uri) = format!("{}://{authority}/", url.scheme()).parse::<http::Uri>() else {
            return Route::Reqwest;
        };
        let Some(proxy) = self.proxies.intercept(&uri) else {
            return Route::Direct;
        };
        let proxy_uri = proxy.uri();
        match (url.scheme(), proxy_uri.scheme_str(), proxy_uri.host()) {
            ("https", Some("http"), Some(host)) => Route::Tunnel(Tunnel {
                host: host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned(),
                port: proxy_uri.port_u16().unwrap_or(80),
                auth: proxy
                    .basic_auth()
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
            }),
            _ => Route::Reqwest,
        }
    }

    /// Whether connections to `url` go through a proxy's tunnel.
    pub(super) fn tunnels(&self, url: &Url) -> bool {
        self.tunnel(url).is_some()
    }

    /// The tunnel a connection to `url` opens first, if any.
    fn tunnel(&self, url: &Url) -> Option<Tunnel> {
        match self.route(url) {
            Route::Tunnel(t) => Some(t),
            _ => None,
        }
    }

    /// Opens up to `count` connections to `url`'s origin ahead of need, so
    /// the first parts do not each wait for a TCP and TLS handshake. Best
    /// effort: a connection that cannot be opened now is opened (or its
    /// error reported) by the request that needs it.
    pub(super) async fn warm(&self, url: &Url, count: usize) {
        let Ok(origin) = Origin::of(url) else {
            return;
        };
        let have = self.idle_of(&origin).len();
        let tunnel = self.tunnel(url);
        let opening = (have..count)
            .map(|_| conn::connect(&origin, tunnel.as_ref(), &self.tls, self.connect_timeout));
        for conn in futures_util::future::join_all(opening)
            .await
            .into_iter()
            .flatten()
        {
            self.check_in(&origin, conn);
        }
    }

    /// Sends `request` with `body` and reads the answer. With `fresh`, a
    /// new connection carries it (a retry), else an idle one if any.
    pub(super) async fn send(
        &self,
        request: &Request<'_>,
        body: Outgoing<'_>,
        fresh: bool,
    ) -> Result<Answer, Error> {
        let origin = Origin::of(request.url).map_err(Error::Connect)?;
        let tunnel = self.tunnel(request.url);
        let mut pooled = if fresh { None } else { self.check_out(&origin) };
        let mut refused_expect = false;
        loop {
            let reused = pooled.is_some();
            let mut conn = match pooled.take() {
                Some(conn) => conn,
                None => conn::connect(&origin, tunnel.as_ref(), &self.tls, self.connect_timeout)
                    .await
                    .map_err(Error::Connect)?,
            };
            match self
                .exchange(&mut conn, &origin, request, body, reused)
                .await
            {
                Ok((answer, reusable)) => {
                    if reusable {
                        self.check_in(&origin, conn);
                    }
                    return Ok(answer);
                }
                Err(Failed::Stale) => continue,
                // Once: the origin is remembered, so the repeat carries no
                // `Expect` and its answer, whatever it is, is final.
                Err(Failed::ExpectRefused) if !refused_expect => {
                    refused_expect = true;
                    self.remember_refuses_expect(&origin);
                    continue;
                }
                Err(Failed::ExpectRefused) => {
                    return Err(Error::Exchange(io::Error::other(
                        "the server answered 417 Expectation Failed twice",
                    )));
                }
                Err(Failed::Other(error)) => return Err(error),
            }
        }
    }

    /// One request and its answer on `conn`; the answer and whether `conn`
    /// may carry another request.
    async fn exchange(
        &self,
        conn: &mut Conn,
        origin: &Origin,
        request: &Request<'_>,
        body: Outgoing<'_>,
        reused: bool,
    ) -> Result<(Answer, bool), Failed> {
        conn.received = false;
        let body = match body {
            Outgoing::File(body) => body,
            Outgoing::Bytes(bytes) => {
                return self.exchange_bytes(conn, request, bytes, reused).await;
            }
        };
        let expect = !self.known_to_refuse_expect(origin);
        let head = self.head_bytes(request, expect);
        let lost = |e: io::Error| {
            if reused {
                Failed::Stale
            } else {
                Failed::Other(Error::Exchange(e))
            }
        };
        conn.stream.write_all(&head).await.map_err(lost)?;
        conn.stream.flush().await.map_err(lost)?;
        if expect && !self.known_to_ignore_expect(origin) {
            let deadline = tokio::time::Instant::now() + EXPECT_WAIT;
            loop {
                match tokio::time::timeout_at(deadline, conn.read_head()).await {
                    Err(_elapsed) => {
                        self.remember_ignores_expect(origin);
                        break;
                    }
                    Ok(Err(e)) if !conn.received => return Err(lost(e)),
                    Ok(Err(e)) => return Err(Failed::Other(Error::Exchange(e))),
                    Ok(Ok(interim)) if interim.status == 100 => break,
                    // Another interim answer (102, 103): keep waiting.
                    Ok(Ok(interim)) if (101..200).contains(&interim.status) => {}
                    Ok(Ok(last)) if last.status == 417 => {
                        // The body is not sent; this connection is out of
                        // step and closes with `conn`.
                        return Err(Failed::ExpectRefused);
                    }
                    Ok(Ok(last)) => {
                        // Refused at the headers. The body is never sent, so
                        // the connection is out of step and is closed.
                        let (body, _) = with_answer_wait(conn.read_body(
                            &last,
                            request.method,
                            ANSWER_MAX_BYTES,
                        ))
                        .await
                        .map_err(|e| Failed::Other(Error::Exchange(e)))?;
                        let answer = Answer {
                            status: last.status,
                            headers: last.headers,
                            body,
                            early: true,
                            sent_whole: false,
                        };
                        return Ok((answer, false));
                    }
                }
            }
        }
        if let Err(error) = body.write_to(&mut conn.stream).await {
            return match error {
                WriteError::File(e) => Err(Failed::Other(Error::File(e))),
                // A server that ignores `Expect` may answer and close while
                // the body is still going out: its answer says more than the
                // broken pipe.
                WriteError::Net(e) => match early_answer_after(conn, request.method).await {
                    Some(answer) => Ok((answer, false)),
                    None => Err(Failed::Other(Error::Exchange(e))),
                },
            };
        }
        let answered = with_answer_wait(final_answer(conn, request.method)).await;
        let (last, body, reusable) = answered.map_err(|e| Failed::Other(Error::Exchange(e)))?;
        if expect && last.status == 417 {
            // A server we sent the body at once (it had ignored `Expect`
            // before) and that refuses the expectation after all.
            return Err(Failed::ExpectRefused);
        }
        let answer = Answer {
            status: last.status,
            headers: last.headers,
            body,
            early: false,
            sent_whole: true,
        };
        Ok((answer, reusable))
    }

    /// A request whose whole body is `bytes` (none, or a small XML
    /// document): nothing to hold back, so no `Expect`.
    async fn exchange_bytes(
        &self,
        conn: &mut Conn,
        request: &Request<'_>,
        bytes: &[u8],
        reused: bool,
    ) -> Result<(Answer, bool), Failed> {
        let mut out = self.head_bytes(request, false);
        out.extend_from_slice(bytes);
        let sent = async {
            conn.stream.write_all(&out).await?;
            conn.stream.flush().await
        };
        if let Err(e) = sent.await {
            return Err(if reused {
                Failed::Stale
            } else {
                Failed::Other(Error::Exchange(e))
            });
        }
        let answered = with_answer_wait(final_answer(conn, request.method)).await;
        let (last, body, reusable) = match answered {
            Ok(answered) => answered,
            // No byte of an answer on a pooled connection: it was closed
            // while idle (S3 read nothing it could have applied).
            Err(_) if reused && !conn.received => {
                return Err(Failed::Stale);
            }
            Err(e) => return Err(Failed::Other(Error::Exchange(e))),
        };
        let answer = Answer {
            status: last.status,
            headers: last.headers,
            body,
            early: false,
            sent_whole: true,
        };
        Ok((answer, reusable))
    }

    fn head_bytes(&self, request: &Request<'_>, expect: bool) -> Vec<u8> {
        let url = request.url;
        let mut target = url.path().to_owned();
        if let Some(query) = url.query() {
            target.push('?');
            target.push_str(query);
        }
        // The host as signed: with the port only when the URL names one.
        let host = match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => String::new(),
        };
        let mut head = format!(
            "{} {target} HTTP/1.1\r\nhost: {host}\r\nuser-agent: {}\r\ncontent-length: {}\r\n",
            request.method, self.user_agent, request.content_length
        );
        if expect {
            head.push_str("expect: 100-continue\r\n");
        }
        for (name, value) in request.headers {
            head.push_str(name);
            head.push_str(": ");
            head.push_str(value);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        head.into_bytes()
    }

    fn idle_of(&self, origin: &Origin) -> Vec<Instant> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.get(origin)
            .map(|conns| conns.iter().map(|c| c.idle_since).collect())
            .unwrap_or_default()
    }

    /// An idle connection to `origin` that may carry a request: one that
    /// is not too old and received nothing while it sat in the pool. A
    /// byte that arrived then (an answer nobody asked for, a close, a
    /// reset) would be read as the answer to the next request, so such a
    /// connection is closed instead.
    fn check_out(&self, origin: &Origin) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let conns = idle.get_mut(origin)?;
        while let Some(mut conn) = conns.pop() {
            if conn.idle_since.elapsed() >= IDLE_MAX {
                continue;
            }
            match conn.idle_news() {
                None => return Some(conn),
                Some(news) => {
                    tracing::debug!(host = %origin.host, "closing a pooled S3 connection that {news} while idle");
                }
            }
        }
        None
    }

    fn check_in(&self, origin: &Origin, mut conn: Conn) {
        if !conn.unread.is_empty() {
            // Bytes nobody asked for: the connection is out of step.
            return;
        }
        conn.idle_since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let conns = idle.entry(origin.clone()).or_default();
        conns.retain(|c| c.idle_since.elapsed() < IDLE_MAX);
        if conns.len() < IDLE_PER_ORIGIN_MAX {
            conns.push(conn);
        }
    }

    /// Whether a request to `url`'s origin waited for a `100` in vain.
    #[cfg(test)]
    pub(super) fn waited_in_vain(&self, url: &Url) -> bool {
        Origin::of(url).is_ok_and(|origin| self.known_to_ignore_expect(&origin))
    }

    fn known_to_ignore_expect(&self, origin: &Origin) -> bool {
        // A refusal implies it: no `100` will come where none is asked.
        self.expectations.of(&origin.key()).is_some()
    }

    fn known_to_refuse_expect(&self, origin: &Origin) -> bool {
        self.expectations.of(&origin.key()) == Some(Expectation::Refused)
    }

    fn remember_refuses_expect(&self, origin: &Origin) {
        tracing::debug!(host = %origin.host, "417 Expectation Failed; sending without Expect from now on");
        self.expectations.learn(&origin.key(), Expectation::Refused);
    }

    fn remember_ignores_expect(&self, origin: &Origin) {
        tracing::debug!(host = %origin.host, "no 100 Continue within the wait; sending bodies at once from now on");
        self.expectations.learn(&origin.key(), Expectation::Ignored);
    }
}

async fn with_answer_wait<T>(reading: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    tokio::time::timeout(ANSWER_WAIT, reading)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no answer from S3 in time"))?
}

/// The final answer on `conn`, past any interim (1xx) ones: its head, its
/// body within the cap, and whether the connection may carry another
/// request.
async fn final_answer(conn: &mut Conn, method: &str) -> io::Result<(Head, Vec<u8>, bool)> {
    let last = loop {
        let head = conn.read_head().await?;
        if !(100..200).contains(&head.status) {
            break head;
        }
    };
    let (body, framed) = conn.read_body(&last, method, ANSWER_MAX_BYTES).await?;
    let reusable = framed && last.keeps_alive();
    Ok((last, body, reusable))
}

/// The final answer a server sent before it stopped reading the body, if
/// it sent one within a short wait.
async fn early_answer_after(conn: &mut Conn, method: &str) -> Option<Answer> {
    let reading = async {
        let head = conn.read_head().await?;
        let (body, _) = conn.read_body(&head, method, ANSWER_MAX_BYTES).await?;
        io::Result::Ok((head, body))
    };
    let (head, body) = tokio::time::timeout(EXPECT_WAIT, reading)
        .await
        .ok()?
        .ok()?;
    (head.status >= 200).then_some(Answer {
        status: head.status,
        headers: head.headers,
        body,
        early: false,
        sent_whole: false,
    })
}

#[cfg(test)]
mod tests;
