//! A failed platform call, typed by what it tells us about the request:
//! never sent, maybe applied, answered with a retryable status, or final.
//! The cause is read from reqwest's error kinds and the HTTP status before
//! anything is turned into text.

use std::time::Duration;

use reqwest::{Response, StatusCode};
use serde_json::Value;

use crate::retry::{self, CallKind, Classify};

/// Characters of an error body kept in a message.
const ERROR_BODY_MAX_CHARS: usize = 300;
/// Bytes of an error body read: enough for the REST `message` of any real
/// error answer; a larger one is cut there (and shown by its start).
pub(crate) const ERROR_BODY_READ_BYTES: usize = 64 << 10;

/// A failed call; the message is for people, the variant for code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// The request never left (connection refused, DNS, TLS handshake).
    #[error("{message}")]
    NotSent { message: String },
    /// The request was sent and may have been applied, but no usable answer
    /// came back (connection closed or timed out, unreadable answer).
    #[error("{message}")]
    Ambiguous { message: String },
    /// The server answered with a status worth another try (429, 5xx, …).
    #[error("{message}")]
    Transient {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// The run's deadline passed before or while the request ran; `sent`
    /// when it was cut after it left (a mutation may have been applied).
    #[error("{message}")]
    OutOfTime { message: String, sent: bool },
    /// Will not get better by retrying: 4xx, GraphQL errors, a malformed
    /// request. `status` is the HTTP status when there was one.
    #[error("{message}")]
    Permanent {
        status: Option<u16>,
        message: String,
    },
}

impl ApiError {
    pub(crate) fn permanent(message: String) -> Self {
        ApiError::Permanent {
            status: None,
            message,
        }
    }

    /// The HTTP status of a permanent answer, if the server gave one.
    pub(crate) fn permanent_status(&self) -> Option<u16> {
        match self {
            ApiError::Permanent { status, .. } => *status,
            _ => None,
        }
    }
}

impl Classify for ApiError {
    fn kind(&self) -> CallKind {
        match self {
            ApiError::NotSent { .. } => CallKind::NotSent,
            ApiError::Ambiguous { .. } => CallKind::Ambiguous,
            ApiError::Transient { status, .. } => CallKind::Transient { status: *status },
            ApiError::Permanent { .. } | ApiError::OutOfTime { .. } => CallKind::Permanent,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::Transient { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The error and its sources in one line.
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    msg
}

/// Types a transport error by reqwest's own kinds: a connect error (DNS,
/// refused, TLS) happened before any byte of the request left; everything
/// else after sending began (a timeout, a reset, "connection closed before
/// message completed") may have reached the server.
pub(crate) fn from_send(what: &str, e: &reqwest::Error) -> ApiError {
    let message = format!("{what}: {}", describe(e));
    if e.is_connect() {
        ApiError::NotSent { message }
    } else if e.is_builder() || e.is_redirect() {
        ApiError::permanent(message)
    } else {
        ApiError::Ambiguous { message }
    }
}

/// An answer that came but could not be read: the server handled the
/// request, so for a mutation the effect may exist.
pub(crate) fn unreadable(what: &str, e: &reqwest::Error) -> ApiError {
    ApiError::Ambiguous {
        message: format!("{what}: unreadable answer: {}", describe(e)),
    }
}

/// Reads a non-2xx answer into an error: the REST `message` when there is
/// one, else the start of the body.
pub(crate) async fn from_status(what: &str, mut resp: Response) -> ApiError {
    let status = resp.status();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(retry::parse_retry_after);
    let (head, _) = crate::net::read_head(&mut resp, ERROR_BODY_READ_BYTES, false)
        .await
        .unwrap_or_default();
    // Secrets are removed before the body is cut: a cut could keep part
    // of one, which no later redaction would recognise.
    let body = crate::secret::scrub(&String::from_utf8_lossy(&head)).into_owned();
    let detail = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| body.chars().take(ERROR_BODY_MAX_CHARS).collect());
    let hint = match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            " (check that baseten-api-key is a valid key for this workspace)"
        }
        _ => "",
    };
    let message = format!("{what}: HTTP {status}{hint}: {}", detail.trim());
    by_status(status, message, retry_after)
}

/// A non-2xx answer's error: worth another try (429, 502, 503, 504:
/// `retry::RETRYABLE_STATUSES`) or final.
pub(crate) fn by_status(
    status: StatusCode,
    message: String,
    retry_after: Option<Duration>,
) -> ApiError {
    let code = status.as_u16();
    if retry::RETRYABLE_STATUSES.contains(&code) {
        ApiError::Transient {
            status: code,
            message,
            retry_after,
        }
    } else {
        ApiError::Permanent {
            status: Some(code),
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::Policy;

    /// A real reqwest error of each transport kind, from a real socket.
    async fn send_to(addr: &str) -> reqwest::Error {
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .post(format!("http://{addr}/"))
            .timeout(Duration::from_millis(300))
            .body("x")
            .send()
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn refused_is_not_sent_and_closed_after_sending_is_ambiguous() {
        // Nothing listens on port 1: refused before any byte was sent. (A
        // port just freed could be taken by a test running beside this one.)
        let e = from_send("x", &send_to("127.0.0.1:1").await);
        assert!(matches!(e, ApiError::NotSent { .. }), "{e:?}");

        // A server that reads the request and hangs up without answering:
        // the request may have been applied.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
        });
        let e = from_send("x", &send_to(&addr).await);
        assert!(matches!(e, ApiError::Ambiguous { .. }), "{e:?}");
        assert!(!Policy::MUTATION.retries(e.kind()));
        assert!(Policy::READ.retries(e.kind()));

        // A server that accepts and never answers: a timeout after sending.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (_s, _) = l.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(5)).await;
        });
        let e = from_send("x", &send_to(&addr).await);
        assert!(matches!(e, ApiError::Ambiguous { .. }), "{e:?}");
    }
}
