//! The proxy's sockets: accepting, serving each connection with hyper over a
//! socket the handler can also reset, drip or watch, forwarding to the
//! fake, and building the answers each fault calls for.

use std::convert::Infallible;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::http::{request, response};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

use super::rules::{DeclaredLength, Fault, RedirectTo, RequestFacts};
use super::{Body, ProxyEntry, State};

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

pub(super) async fn serve(
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
    let tls = if sink { None } else { state.tls.clone() };
    let over_tls = tls.is_some();
    let svc = {
        let conn = conn.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let state = state.clone();
            let conn = conn.clone();
            async move {
                Ok::<_, Infallible>(if sink {
                    sink_answer(&state, req)
                } else if req.method() == Method::CONNECT && state.intercept.is_some() {
                    open_tunnel(&state, &conn, req, over_tls)
                } else {
                    handle(&state, &conn, req, over_tls, false).await
                })
            }
        })
    };
    let served: Pin<Box<dyn std::future::Future<Output = ()> + Send>> = match tls {
        Some(acceptor) => Box::pin(async move {
            // A client that fails the handshake gets nothing more.
            if let Ok(tls) = acceptor.accept(io).await {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .with_upgrades()
                    .await;
            }
        }),
        None => Box::pin(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(io), svc)
                .with_upgrades()
                .await;
        }),
    };
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
    // The proxy's own credentials: a proxy takes them off.
    "proxy-authorization",
];

fn host_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Answers a `CONNECT` as a TLS-intercepting proxy: `407` without the
/// credentials it wants, else `200` and, on the upgraded connection, TLS
/// with the intercepting certificate and the requests inside served by
/// [`handle`] (marked `tunnelled`).
fn open_tunnel(
    state: &Arc<State>,
    conn: &Arc<Conn>,
    req: Request<Incoming>,
    tls: bool,
) -> Response<Body> {
    let mut entry = ProxyEntry {
        method: "CONNECT".into(),
        host: req.uri().authority().map(|a| a.to_string()),
        path: String::new(),
        proxy_authorization: req.headers().contains_key(header::PROXY_AUTHORIZATION),
        tls,
        ..ProxyEntry::default()
    };
    if let Some(refusal) = refuse_credentials(state, req.headers()) {
        entry.status = Some(407);
        state.push(entry);
        return refusal;
    }
    entry.status = Some(200);
    state.push(entry);
    let Some(acceptor) = state.intercept.clone() else {
        return plain(StatusCode::BAD_GATEWAY, "proxy: no tunnels\n".into());
    };
    tokio::spawn(serve_tunnel(
        state.clone(),
        conn.clone(),
        hyper::upgrade::on(req),
        acceptor,
        tls,
    ));
    Response::new(Full::new(Bytes::new()).boxed())
}

/// The requests inside an intercepted tunnel. A boxed future: it serves
/// [`handle`], whose own future holds this one's spawn.
fn serve_tunnel(
    state: Arc<State>,
    conn: Arc<Conn>,
    upgrade: hyper::upgrade::OnUpgrade,
    acceptor: tokio_rustls::TlsAcceptor,
    tls: bool,
) -> Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async move {
        let Ok(upgraded) = upgrade.await else {
            return;
        };
        let Ok(inner) = acceptor.accept(TokioIo::new(upgraded)).await else {
            return;
        };
        let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
            let state = state.clone();
            let conn = conn.clone();
            async move { Ok::<_, Infallible>(handle(&state, &conn, req, tls, true).await) }
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(inner), svc)
            .await;
    })
}

/// The `407` for a request without the credentials the proxy wants.
fn refuse_credentials(state: &State, headers: &HeaderMap) -> Option<Response<Body>> {
    let want = state.credentials.as_ref()?;
    let got = headers.get(header::PROXY_AUTHORIZATION);
    if got.is_some_and(|got| got.as_bytes() == want.as_bytes()) {
        return None;
    }
    let mut refusal = plain(
        StatusCode::PROXY_AUTHENTICATION_REQUIRED,
        "proxy: credentials required\n".to_owned(),
    );
    refusal.headers_mut().insert(
        header::PROXY_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"fault-proxy\""),
    );
    Some(refusal)
}

async fn handle(
    state: &Arc<State>,
    conn: &Arc<Conn>,
    req: Request<Incoming>,
    tls: bool,
    tunnelled: bool,
) -> Response<Body> {
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
        return match forward(state, &parts, body).await {
            Ok((head, body)) => answer_forwarded(head, body),
            Err(e) => plain(StatusCode::BAD_GATEWAY, format!("proxy: {e:#}")),
        };
    }
    let host = host_of(&parts.headers);
    let graphql = graphql_names(&body);
    let decision = state.book().decide(&RequestFacts {
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
        proxy_authorization: parts.headers.contains_key(header::PROXY_AUTHORIZATION),
        expect_continue: parts
            .headers
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue")),
        absolute_form: parts.uri.scheme().is_some(),
        tls,
        tunnelled,
        rule: decision.as_ref().map(|d| d.rule.clone()),
        fault: decision.as_ref().map(|d| d.fault.describe()),
        ..ProxyEntry::default()
    };
    // Inside a tunnel the credentials went with the CONNECT.
    if let Some(refusal) = refuse_credentials(state, &parts.headers).filter(|_| !tunnelled) {
        entry.rule = None;
        entry.fault = None;
        entry.status = Some(407);
        state.push(entry);
        return refusal;
    }
    let Some(fault) = decision.map(|d| d.fault) else {
        return forward_and_log(state, &parts, body, entry).await;
    };

    let forwarded = if fault.forwards() {
        entry.forwarded = true;
        match forward(state, &parts, body).await {
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
    let resp = match forward(state, parts, body).await {
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
    state: &State,
    parts: &request::Parts,
    body: Bytes,
) -> anyhow::Result<(response::Parts, Bytes)> {
    let upstream = state.upstream;
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
        let expect = state.forward_expect && name == header::EXPECT;
        if expect || !HOP_BY_HOP.contains(&name.as_str()) {
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
