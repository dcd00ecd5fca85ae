//! One request and its answer on one connection: the head (with
//! `Expect: 100-continue` for a body from the archive), the wait for the
//! interim answer, the body, and the final answer.

use std::io;

use tokio::io::AsyncWriteExt as _;

use super::answer::Head;
use super::conn::Conn;
use super::route::{self, Origin, Route};
use super::{ANSWER_MAX_BYTES, ANSWER_WAIT, Answer, EXPECT_WAIT, Error, Request, Wire};
use crate::s3::payload::{FileBody, WriteError};

/// Why one exchange on one connection failed.
pub(super) enum Failed {
    /// A connection from the pool failed before any byte of an answer, by
    /// being closed rather than by a timeout, before the request could
    /// have been applied (its whole body never went out) or for a request
    /// that may be applied twice (GET, HEAD, PUT, DELETE): the server had
    /// closed it while it sat idle. A new connection takes the request.
    Stale,
    /// `417 Expectation Failed` to a head that carried `Expect`, before any
    /// of the body: the request is to be repeated without it.
    ExpectRefused,
    Other(Error),
}

/// How far a request got when its connection failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sent {
    /// Not all of it went out: no server can have applied it.
    Partly,
    /// All of it went out: the server may have applied it.
    Whole,
}

/// What a failure on `conn` means: on a connection taken from the pool
/// (`reused`) that received no byte of an answer and was closed (not
/// timed out), that the server closed it while it sat idle
/// ([`Failed::Stale`]), unless the whole request went out and it is not
/// one that may be applied twice; else the exchange failed. The one
/// place every exchange decides it.
fn lost(conn: &Conn, (reused, method): (bool, &str), sent: Sent, e: io::Error) -> Failed {
    if stale(reused && !conn.received, e.kind(), sent, method) {
        Failed::Stale
    } else {
        Failed::Other(Error::Exchange(e))
    }
}

/// The rule of [`lost`]: a failure of kind `kind` on a pooled connection
/// that received nothing since the request went out (`quiet_reuse`) is
/// a stale connection unless it timed out, or unless the whole request
/// went out and `method` is not idempotent (it may have been applied).
pub(super) fn stale(quiet_reuse: bool, kind: io::ErrorKind, sent: Sent, method: &str) -> bool {
    let closed = kind != io::ErrorKind::TimedOut;
    let repeatable = sent == Sent::Partly || idempotent(method);
    quiet_reuse && closed && repeatable
}

/// Whether a request with `method` has the same effect sent twice (RFC
/// 9110, 9.2.2): every S3 request here but the POSTs (Create and Complete
/// of a multipart upload).
fn idempotent(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "PUT" | "DELETE")
}

/// Writes `bytes` (a head, maybe with its small body) and flushes them.
async fn send_all(conn: &mut Conn, bytes: &[u8], reused: bool, method: &str) -> Result<(), Failed> {
    let sent = async {
        conn.stream.write_all(bytes).await?;
        conn.stream.flush().await
    };
    sent.await
        .map_err(|e| lost(conn, (reused, method), Sent::Partly, e))
}

impl Wire {
    /// One request and its answer on `conn`; the answer and whether `conn`
    /// may carry another request.
    pub(super) async fn exchange(
        &self,
        conn: &mut Conn,
        (origin, route): (&Origin, &Route),
        request: &Request<'_>,
        body: super::Outgoing<'_>,
        reused: bool,
    ) -> Result<(Answer, bool), Failed> {
        conn.received = false;
        match body {
            super::Outgoing::File(body) => {
                self.exchange_file(conn, (origin, route), request, body, reused)
                    .await
            }
            super::Outgoing::Bytes(bytes) => {
                self.exchange_bytes(conn, route, request, bytes, reused)
                    .await
            }
        }
    }

    /// A request whose body is a range of the archive: the head with
    /// `Expect` (unless the origin refuses it), the body once S3 says
    /// `100` (or the wait ran out).
    async fn exchange_file(
        &self,
        conn: &mut Conn,
        (origin, route): (&Origin, &Route),
        request: &Request<'_>,
        body: &FileBody,
        reused: bool,
    ) -> Result<(Answer, bool), Failed> {
        let expect = !self.known_to_refuse_expect(origin);
        let head = self.head_bytes(request, route, expect);
        let asked = (reused, request.method);
        send_all(conn, &head, reused, request.method).await?;
        if expect && !self.known_to_ignore_expect(origin) {
            #[expect(
                clippy::disallowed_methods,
                reason = "the wait for 100 Continue inside one request, not a phase's deadline"
            )]
            let deadline = tokio::time::Instant::now() + self.expect_wait;
            loop {
                #[expect(
                    clippy::disallowed_methods,
                    reason = "the wait for 100 Continue inside one request, not a phase's deadline"
                )]
                match tokio::time::timeout_at(deadline, conn.read_head()).await {
                    Err(_elapsed) => {
                        self.remember_ignores_expect(origin);
                        break;
                    }
                    Ok(Err(e)) => return Err(lost(conn, asked, Sent::Partly, e)),
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
                // broken pipe. Without one, a pooled connection the server
                // had closed fails here too (the head fit in the socket's
                // buffer); the body never ended, so nothing was applied.
                WriteError::Net(e) => match early_answer_after(conn, request.method).await {
                    Some(answer) => Ok((answer, false)),
                    None => Err(lost(conn, asked, Sent::Partly, e)),
                },
            };
        }
        let (answer, reusable) = answer_to_whole_request(conn, asked).await?;
        if expect && answer.status == 417 {
            // A server we sent the body at once (it had ignored `Expect`
            // before) and that refuses the expectation after all.
            return Err(Failed::ExpectRefused);
        }
        Ok((answer, reusable))
    }

    /// A request whose whole body is `bytes` (none, or a small XML
    /// document): nothing to hold back, so no `Expect`.
    async fn exchange_bytes(
        &self,
        conn: &mut Conn,
        route: &Route,
        request: &Request<'_>,
        bytes: &[u8],
        reused: bool,
    ) -> Result<(Answer, bool), Failed> {
        let mut out = self.head_bytes(request, route, false);
        out.extend_from_slice(bytes);
        send_all(conn, &out, reused, request.method).await?;
        answer_to_whole_request(conn, (reused, request.method)).await
    }

    /// The request line and headers. To a proxy that forwards the request,
    /// the target is absolute-form and the proxy's credentials ride along
    /// (the proxy takes them off); through a tunnel or straight, S3 gets
    /// neither.
    fn head_bytes(&self, request: &Request<'_>, route: &Route, expect: bool) -> Vec<u8> {
        let url = request.url;
        let mut head = format!(
            "{} {} HTTP/1.1\r\nhost: {}\r\nuser-agent: {}\r\ncontent-length: {}\r\n",
            request.method,
            route::target(url, route),
            route::host_header(url),
            self.user_agent,
            request.content_length
        );
        if let Route::Forward(proxy) = route
            && let Some(auth) = &proxy.auth
        {
            head.push_str("proxy-authorization: ");
            head.push_str(auth);
            head.push_str("\r\n");
        }
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
}

/// The final answer to a request sent whole on `conn` (taken from the pool
/// when `reused`), within [`ANSWER_WAIT`], and whether `conn` may carry
/// another request.
async fn answer_to_whole_request(
    conn: &mut Conn,
    (reused, method): (bool, &str),
) -> Result<(Answer, bool), Failed> {
    let answered = with_answer_wait(final_answer(conn, method)).await;
    let (last, body, reusable) =
        answered.map_err(|e| lost(conn, (reused, method), Sent::Whole, e))?;
    let answer = Answer {
        status: last.status,
        headers: last.headers,
        body,
        early: false,
        sent_whole: true,
    };
    Ok((answer, reusable))
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
