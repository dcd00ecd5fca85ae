//! HTTP/1.1 for every S3 request, written here because the requests that
//! carry archive bytes (PutObject and UploadPart) must wait for an interim
//! `100 Continue`, which the crate's HTTP client cannot (hyper 1.x has no
//! client side for it); the bodiless calls share its connections. Files:
//! `route` (where a connection goes), `conn` (opening one), `pool` (idle
//! ones), `exchange` (one request and its answer), `answer` (reading it).
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
//! connections are kept per origin for the next request ([`pool`]), but
//! one that answered early or failed is closed, never reused; one that
//! received any byte while it sat idle (an answer nobody asked for, a
//! close) is closed when it is next taken from the pool; and a retry
//! (`fresh`) always opens a new one. The TLS config and the proxy route
//! are the run's network's (`net::Transport`); nothing here reads the
//! environment. Every S3 request of the run goes through this layer, on
//! one of three routes ([`route`]): straight; through an HTTP proxy's
//! `CONNECT` tunnel to an `https` S3, TLS to S3 end to end (inside TLS to
//! the proxy when the proxy's URL is `https://`); or, to a plain-`http`
//! S3, to the proxy itself with an absolute-form request it forwards.
//! `Expect` is sent on each.

mod answer;
mod conn;
mod exchange;
mod pool;
mod route;

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::client::proxy::matcher::Matcher;
use reqwest::Url;
use reqwest::header::HeaderMap;

use self::conn::Conn;
pub(super) use self::conn::TunnelRefused;
use self::exchange::Failed;
use self::route::{Origin, Route};
use super::payload::FileBody;
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
/// The most of an answer's body read: S3's XML answers are a few hundred
/// bytes.
pub(super) const ANSWER_MAX_BYTES: usize = 1024 * 1024;

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

/// The connections and settings of the S3 data requests.
pub(super) struct Wire {
    tls: Arc<rustls::ClientConfig>,
    proxies: Arc<Matcher>,
    connect_timeout: Duration,
    user_agent: String,
    /// How long a data request waits for `100 Continue`: [`EXPECT_WAIT`].
    expect_wait: Duration,
    idle: Mutex<HashMap<Origin, Vec<Conn>>>,
    /// Origins that sent no `100` within [`EXPECT_WAIT`] (later requests
    /// there send the body at once) or answered `417` to `Expect` (later
    /// requests there do not send it): the run's, shared by its uploads.
    expectations: Arc<Expectations>,
}

impl Wire {
    /// The TLS config and the proxy route are the run's network's, built
    /// from the same roots and variables as its API client.
    pub(super) fn new(transport: &Transport) -> Self {
        Self {
            tls: Arc::clone(&transport.tls),
            proxies: Arc::clone(&transport.proxies),
            connect_timeout: transport.connect_timeout,
            user_agent: transport.user_agent.clone(),
            expect_wait: EXPECT_WAIT,
            idle: Mutex::default(),
            expectations: Arc::clone(&transport.expectations),
        }
    }

    /// How a request to `url` travels, by the run's proxy route.
    fn route(&self, url: &Url) -> io::Result<Route> {
        route::of(&self.proxies, url)
    }

    /// Whether requests to `url` go through a proxy (a tunnel, or one
    /// that forwards them).
    pub(super) fn proxied(&self, url: &Url) -> bool {
        self.route(url).is_ok_and(|route| route != Route::Direct)
    }

    /// Opens up to `count` connections to `url`'s origin ahead of need, so
    /// the first parts do not each wait for a TCP and TLS handshake. Best
    /// effort: a connection that cannot be opened now is opened (or its
    /// error reported) by the request that needs it.
    pub(super) async fn warm(&self, url: &Url, count: usize) {
        let Ok(origin) = Origin::of(url) else {
            return;
        };
        let Ok(route) = self.route(url) else {
            return;
        };
        let have = self.idle_count(&origin);
        let opening =
            (have..count).map(|_| conn::connect(&origin, &route, &self.tls, self.connect_timeout));
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
        let route = self.route(request.url).map_err(Error::Connect)?;
        let mut pooled = if fresh { None } else { self.check_out(&origin) };
        let mut refused_expect = false;
        loop {
            let reused = pooled.is_some();
            let mut conn = match pooled.take() {
                Some(conn) => conn,
                None => conn::connect(&origin, &route, &self.tls, self.connect_timeout)
                    .await
                    .map_err(Error::Connect)?,
            };
            match self
                .exchange(&mut conn, (&origin, &route), request, body, reused)
                .await
            {
                // S3 never asks for a proxy's credentials: a 407 is the
                // forwarding proxy's, and the same credentials get it again.
                Ok((answer, _)) if answer.status == 407 && matches!(route, Route::Forward(_)) => {
                    return Err(Error::Connect(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        TunnelRefused(format!(
                            "the proxy refused to forward the request to {}:{}: 407 Proxy Authentication Required",
                            origin.host, origin.port
                        )),
                    )));
                }
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

#[cfg(test)]
mod tests;
