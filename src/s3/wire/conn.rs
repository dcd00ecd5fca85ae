//! One HTTP/1.1 connection: TCP, TLS on top for `https`, and the bytes
//! read but not yet parsed.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::Origin;

/// A connection's byte stream, plain or TLS.
pub(super) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
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

/// Opens a connection to `origin` within `timeout` (name lookup, TCP and
/// the TLS handshake together), trying each address in turn.
pub(super) async fn connect(
    origin: &Origin,
    tls: &Arc<rustls::ClientConfig>,
    timeout: Duration,
) -> io::Result<Conn> {
    let opening = async {
        let mut last = None;
        for addr in tokio::net::lookup_host((origin.host.as_str(), origin.port)).await? {
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
        let tcp = opening.await?;
        if !origin.https {
            return io::Result::Ok(Stream::Plain(tcp));
        }
        let name = rustls::pki_types::ServerName::try_from(origin.host.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(tls))
            .connect(name, tcp)
            .await?;
        Ok(Stream::Tls(Box::new(tls)))
    };
    let stream = tokio::time::timeout(timeout, handshake)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    Ok(Conn {
        stream,
        unread: Vec::new(),
        idle_since: Instant::now(),
        received: false,
    })
}
