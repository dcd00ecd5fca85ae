//! Reading an answer from a connection: the status line and headers
//! (httparse), then the body by its framing (Content-Length, chunked, or
//! up to the close), never more than a cap.

use std::io;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::AsyncReadExt as _;

use super::conn::Conn;

/// The most an answer's head may take; S3's are well under 2 KiB.
const HEAD_MAX_BYTES: usize = 64 * 1024;
/// Headers an answer may have; S3 sends about ten.
const HEADERS_MAX: usize = 100;

/// A status line and headers.
pub(super) struct Head {
    pub(super) status: u16,
    /// HTTP/1.x minor version.
    pub(super) minor: u8,
    pub(super) headers: HeaderMap,
}

impl Head {
    /// Whether the connection may carry another request after this answer
    /// (its body read whole).
    pub(super) fn keeps_alive(&self) -> bool {
        let close = self
            .headers
            .get_all(reqwest::header::CONNECTION)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| has_token(v, "close")));
        self.minor >= 1 && !close
    }

    fn chunked(&self) -> bool {
        self.headers
            .get_all(reqwest::header::TRANSFER_ENCODING)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| has_token(v, "chunked")))
    }

    /// The declared length. Several `Content-Length` values that differ
    /// leave the answer's end unknown (where the next answer starts is
    /// then the sender's choice), so they are refused.
    fn content_length(&self) -> io::Result<Option<u64>> {
        let mut declared = None;
        for v in self.headers.get_all(reqwest::header::CONTENT_LENGTH) {
            let len: u64 = v
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| invalid("the answer's Content-Length is not a number"))?;
            if declared.is_some_and(|d| d != len) {
                return Err(invalid("the answer declares two different Content-Lengths"));
            }
            declared = Some(len);
        }
        Ok(declared)
    }
}

fn has_token(value: &str, token: &str) -> bool {
    value
        .split(',')
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

pub(super) fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

impl Conn {
    /// Reads more bytes into `unread`; an end of stream is an error here,
    /// since whoever asks still expects bytes. Cancel-safe: nothing read is
    /// lost if the future is dropped.
    async fn fill(&mut self) -> io::Result<()> {
        match self.stream.read_buf(&mut self.unread).await? {
            0 => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection before its answer was complete",
            )),
            _ => {
                self.received = true;
                Ok(())
            }
        }
    }

    /// Reads one status line and its headers (an interim `100 Continue`
    /// too). Cancel-safe, so it can race a timer: the bytes of a head still
    /// in transit stay in `unread` for the next call.
    pub(super) async fn read_head(&mut self) -> io::Result<Head> {
        loop {
            if !self.unread.is_empty() {
                let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
                let mut response = httparse::Response::new(&mut headers);
                match response.parse(&self.unread) {
                    Ok(httparse::Status::Complete(used)) => {
                        if response.code == Some(101) {
                            // Not an interim answer: past it the bytes are
                            // another protocol, and no request here asks
                            // for an upgrade.
                            return Err(invalid(
                                "the server switched protocols (101), which no request asked for",
                            ));
                        }
                        let head = Head {
                            status: response.code.unwrap_or(0),
                            minor: response.version.unwrap_or(0),
                            headers: header_map(response.headers)?,
                        };
                        self.unread.drain(..used);
                        return Ok(head);
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(e) => return Err(invalid(&format!("the answer is not HTTP/1.1 ({e})"))),
                }
            }
            if self.unread.len() > HEAD_MAX_BYTES {
                return Err(invalid("the answer's head is too large"));
            }
            self.fill().await?;
        }
    }

    /// Reads the body that follows `head` to a request with `method`,
    /// refusing it past `cap` bytes. Returns the body and whether the
    /// connection is still usable (the body's end was framed, not a close).
    pub(super) async fn read_body(
        &mut self,
        head: &Head,
        method: &str,
        cap: usize,
    ) -> io::Result<(Vec<u8>, bool)> {
        if method == "HEAD" || head.status == 204 || head.status == 304 {
            return Ok((Vec::new(), true));
        }
        if head.chunked() {
            return self.read_chunked(cap).await.map(|body| (body, true));
        }
        if let Some(len) = head.content_length()? {
            let len = usize::try_from(len)
                .ok()
                .filter(|len| *len <= cap)
                .ok_or_else(|| too_large(cap))?;
            while self.unread.len() < len {
                self.fill().await?;
            }
            let body = self.unread.drain(..len).collect();
            return Ok((body, true));
        }
        // Neither: the body ends when the server closes.
        loop {
            if self.unread.len() > cap {
                return Err(too_large(cap));
            }
            if self.stream.read_buf(&mut self.unread).await? == 0 {
                return Ok((std::mem::take(&mut self.unread), false));
            }
        }
    }

    /// One line (without its CRLF), read whole.
    async fn read_line(&mut self) -> io::Result<String> {
        loop {
            if let Some(end) = self.unread.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.unread[..end]).into_owned();
                self.unread.drain(..end + 2);
                return Ok(line);
            }
            if self.unread.len() > HEAD_MAX_BYTES {
                return Err(invalid("a line of the chunked answer is too long"));
            }
            self.fill().await?;
        }
    }

    async fn read_chunked(&mut self, cap: usize) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line().await?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| invalid("a chunk size of the answer is not hexadecimal"))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.read_line().await?.is_empty() {}
                return Ok(body);
            }
            if body.len().saturating_add(size) > cap {
                return Err(too_large(cap));
            }
            while self.unread.len() < size + 2 {
                self.fill().await?;
            }
            body.extend_from_slice(&self.unread[..size]);
            if &self.unread[size..size + 2] != b"\r\n" {
                return Err(invalid("a chunk of the answer does not end with CRLF"));
            }
            self.unread.drain(..size + 2);
        }
    }
}

fn too_large(cap: usize) -> io::Error {
    invalid(&format!(
        "the answer is larger than {} KiB, the most truss-push reads for it",
        cap / 1024
    ))
}

fn header_map(headers: &[httparse::Header<'_>]) -> io::Result<HeaderMap> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for header in headers {
        let name = HeaderName::from_bytes(header.name.as_bytes())
            .map_err(|_| invalid("the answer has a malformed header name"))?;
        let value = HeaderValue::from_bytes(header.value)
            .map_err(|_| invalid("the answer has a malformed header value"))?;
        map.append(name, value);
    }
    Ok(map)
}
