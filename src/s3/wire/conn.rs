//! One HTTP/1.1 connection: TCP, TLS to the proxy for an `https://` one,
//! the proxy's tunnel, TLS to S3 for `https`, and the bytes read but not
//! yet parsed.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::route::{Origin, Proxy, Route};

/// A connection's byte stream: TCP, or TLS over a stream (TLS to S3 over
/// TLS to a proxy is TLS in TLS).
pub(super) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<Stream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// An open connection and what was read from it but not yet used.
pub(super) struct Conn {
    pub(super) stream: Stream,
    pub(super) unread: Vec<u8>,
    pub(super) idle_since: Instant,
    /// Whether any byte arrived since the current request went out: a
    /// pooled connection that fails before one did was closed while idle.
    pub(super) received: bool,
}

impl Conn {
    /// What arrived on this idle connection since its last answer, without
    /// waiting: `None` when nothing did (it may carry a request), else what
    /// came (bytes of an answer nobody asked for, the server's close, an
    /// error). Over TLS only application data counts: a session ticket the
    /// server sends after the handshake is taken in and is not news.
    pub(super) fn idle_news(&mut self) -> Option<&'static str> {
        if !self.unread.is_empty() {
            return Some("held unread bytes");
        }
        let mut byte = [0u8; 1];
        let mut buf = ReadBuf::new(&mut byte);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match Pin::new(&mut self.stream).poll_read(&mut cx, &mut buf) {
            Poll::Pending => None,
            Poll::Ready(Ok(())) if buf.filled().is_empty() => Some("was closed by the server"),
            Poll::Ready(Ok(())) => Some("received bytes nobody asked for"),
            Poll::Ready(Err(_)) => Some("failed"),
        }
    }
}

/// A proxy's refusal for who is asking: of a tunnel (401, 403, 407), or
/// of a request it would forward (407). The same request gets the same
/// answer, so it is not tried again.
#[derive(Debug)]
pub(in crate::s3) struct TunnelRefused(pub(super) String);

impl std::fmt::Display for TunnelRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TunnelRefused {}

/// The most a proxy's answer to `CONNECT` may hold before its blank line.
const TUNNEL_ANSWER_MAX_BYTES: usize = 16 * 1024;

/// Opens a connection for requests to `origin` on `route` within
/// `timeout` (name lookup, TCP, TLS to the proxy, the proxy's tunnel and
/// TLS to S3 together), trying each address in turn.
pub(super) async fn connect(
    origin: &Origin,
    route: &Route,
    tls: &Arc<rustls::ClientConfig>,
    timeout: Duration,
) -> io::Result<Conn> {
    let (host, port) = match route.proxy() {
        Some(p) => (p.host.as_str(), p.port),
        None => (origin.host.as_str(), origin.port),
    };
    let opening = async {
        let mut last = None;
        for addr in tokio::net::lookup_host((host, port)).await? {
            match TcpStream::connect(addr).await {
                Ok(tcp) => {
                    // Heads and the last chunk are small writes that must
                    // not wait for an acknowledgement.
                    tcp.set_nodelay(true)?;
                    return Ok(tcp);
                }
                Err(e) => last = Some(e),
            }
        }
        io::Result::Err(last.unwrap_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "the host name has no address")
        }))
    };
    let handshake = async {
        let mut stream = Stream::Plain(opening.await?);
        if let Some(proxy) = route.proxy().filter(|p| p.https) {
            stream = tls_over(stream, &proxy.host, tls)
                .await
                .map_err(|e| io::Error::new(e.kind(), format!("TLS to the proxy: {e}")))?;
        }
        if let Route::Tunnel(proxy) = route {
            open_tunnel(&mut stream, origin, proxy).await?;
        }
        if !origin.https {
            return io::Result::Ok(stream);
        }
        tls_over(stream, &origin.host, tls).await
    };
    let stream = tokio::time::timeout(timeout, handshake)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    Ok(Conn {
        stream,
        unread: Vec::new(),
        #[expect(
            clippy::disallowed_methods,
            reason = "when a connection went idle: the pool's rule for reusing it"
        )]
        idle_since: Instant::now(),
        received: false,
    })
}

/// A TLS session to `host` over `stream`.
async fn tls_over(
    stream: Stream,
    host: &str,
    tls: &Arc<rustls::ClientConfig>,
) -> io::Result<Stream> {
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::clone(tls))
        .connect(name, stream)
        .await?;
    Ok(Stream::Tls(Box::new(tls)))
}

/// Asks the proxy on `stream` for a tunnel to `origin` (`CONNECT`, with the
/// proxy's credentials when its URL had them) and reads its answer: a 2xx
/// opens the tunnel, anything else is a connect error naming the proxy's
/// status. The tunnel carries TLS end to end: the proxy sees no request.
async fn open_tunnel(tcp: &mut Stream, origin: &Origin, tunnel: &Proxy) -> io::Result<()> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let authority = if origin.host.contains(':') {
        format!("[{}]:{}", origin.host, origin.port)
    } else {
        format!("{}:{}", origin.host, origin.port)
    };
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(auth) = &tunnel.auth {
        head.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
    }
    head.push_str("\r\n");
    tcp.write_all(head.as_bytes()).await?;
    // Over TLS to the proxy the head may still sit in the session.
    tcp.flush().await?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if got.len() > TUNNEL_ANSWER_MAX_BYTES {
            return Err(io::Error::other("the proxy's answer to CONNECT has no end"));
        }
        let n = tcp.read(&mut buf).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the proxy closed the connection instead of opening a tunnel",
            ));
        }
        got.extend_from_slice(&buf[..n]);
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut answer = httparse::Response::new(&mut headers);
    let code = match answer.parse(&got[..end]) {
        Ok(httparse::Status::Complete(_)) => answer.code.unwrap_or(0),
        _ => {
            return Err(io::Error::other(
                "the proxy's answer to CONNECT is not HTTP",
            ));
        }
    };
    if !(200..300).contains(&code) {
        let message = format!(
            "the proxy refused a tunnel to {authority}: {code} {}",
            answer.reason.unwrap_or_default()
        );
        if matches!(code, 401 | 403 | 407) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                TunnelRefused(message),
            ));
        }
        return Err(io::Error::new(io::ErrorKind::ConnectionRefused, message));
    }
    if got.len() > end {
        return Err(io::Error::other(
            "the proxy sent data before the tunnel's TLS handshake",
        ));
    }
    Ok(())
}
