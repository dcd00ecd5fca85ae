//! Why a request failed, whether another try may help (the crate's retry
//! policy decides from [`CallKind`], never from a message), and the message
//! the user reads when the upload gives up.

use std::fmt;
use std::time::Duration;

use anyhow::anyhow;
use reqwest::StatusCode;

use super::call::Operation;
use super::wire;
use super::xml::S3Error;
use crate::retry::{self, CallKind, Classify};

/// Why one attempt failed.
pub(super) enum AttemptError {
    /// No HTTP answer (connect, TLS, reset, timeout), from the one HTTP
    /// layer every S3 request goes through.
    Wire(wire::Error),
    /// S3 answered with an error (possibly inside a 200, as Complete can).
    S3 {
        status: StatusCode,
        error: S3Error,
        header_region: Option<String>,
        retry_after: Option<Duration>,
    },
    /// A success status to a data request whose body was not sent whole
    /// (answered before `100 Continue`, or while the body was still going
    /// out). No server can have stored what it never got, so the answer is
    /// not trusted: `Inner::try_once` sends the request once more on a new
    /// connection, and a second such answer ends the call.
    AnsweredUnsent { status: u16 },
    /// A success whose body is not what S3 answers that request with (a
    /// Create without an UploadId, a Complete without the object's ETag):
    /// the answer of something else, such as a stray answer on the
    /// connection. Whether the request arrived is unknown.
    NotItsAnswer(&'static str),
    /// A local problem (reading the file, building the URL): never retried.
    Local(anyhow::Error),
}

impl Classify for AttemptError {
    fn kind(&self) -> CallKind {
        match self {
            // A proxy that refused its tunnel refuses the same credentials
            // again: its status is the answer.
            Self::Wire(wire::Error::Connect(_)) if self.is_tunnel_refusal() => CallKind::Permanent,
            Self::Wire(wire::Error::Connect(_)) => CallKind::NotSent,
            Self::Wire(wire::Error::Exchange(_)) | Self::NotItsAnswer(_) => CallKind::Ambiguous,
            // The archive changed or could not be read: another try reads
            // the same file.
            Self::Wire(wire::Error::File(_)) => CallKind::Permanent,
            Self::S3 { status, error, .. } => answer_kind(status.as_u16(), error.code.as_deref()),
            // Its one repeat is `try_once`'s, not the policy's.
            Self::AnsweredUnsent { .. } | Self::Local(_) => CallKind::Permanent,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::S3 { retry_after, .. } => *retry_after,
            Self::Wire(_)
            | Self::AnsweredUnsent { .. }
            | Self::NotItsAnswer(_)
            | Self::Local(_) => None,
        }
    }
}

/// An S3 answer's kind: the crate's retryable statuses, plus S3's own
/// transient codes, which can arrive under other statuses (its idle-socket
/// `RequestTimeout` comes as a 400, Complete's `InternalError` inside a 200).
/// Those count as the status S3 otherwise sends them with, so a policy
/// retries them as it would that status.
pub(super) fn answer_kind(status: u16, code: Option<&str>) -> CallKind {
    if retry::RETRYABLE_STATUSES.contains(&status) {
        return CallKind::Transient { status };
    }
    let status = match code {
        Some("RequestTimeout") => 408,
        Some("InternalError") => 500,
        Some("SlowDown" | "ServiceUnavailable") => 503,
        _ => return CallKind::Permanent,
    };
    CallKind::Transient { status }
}

/// One line for the log: what went wrong, without S3's message.
impl fmt::Display for AttemptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Wire(error) => write!(f, "{error}"),
            Self::S3 { status, error, .. } => write!(
                f,
                "HTTP {} {}",
                status.as_u16(),
                error.code.as_deref().unwrap_or("")
            ),
            Self::AnsweredUnsent { status } => {
                write!(f, "HTTP {status} before the body was sent")
            }
            Self::NotItsAnswer(why) => f.write_str(why),
            Self::Local(error) => write!(f, "{error:#}"),
        }
    }
}

impl AttemptError {
    /// Whether a proxy refused the tunnel to S3 (401, 403 or 407).
    pub(super) fn is_tunnel_refusal(&self) -> bool {
        matches!(self, Self::Wire(wire::Error::Connect(e))
            if e.get_ref().is_some_and(|inner| inner.is::<wire::TunnelRefused>()))
    }

    /// S3's error code, when S3 answered with one.
    pub(super) fn s3_code(&self) -> Option<&str> {
        match self {
            Self::S3 { error, .. } => error.code.as_deref(),
            _ => None,
        }
    }

    /// The HTTP status S3 answered with, when it answered.
    pub(super) fn s3_status(&self) -> Option<u16> {
        match self {
            Self::S3 { status, .. } => Some(status.as_u16()),
            _ => None,
        }
    }

    /// The error the caller reports after `attempts` tries of `operation`,
    /// (what S3 echoed of the upload credentials is blanked by the sinks,
    /// which know them: the flow registers them when it receives them).
    pub(super) fn into_error(self, operation: Operation, attempts: u32) -> anyhow::Error {
        let tries = if attempts > 1 {
            format!(", after {attempts} attempts")
        } else {
            String::new()
        };
        match self {
            // One line: the wire error's text already holds its cause,
            // which a chain would print a second time.
            Self::Wire(error) => {
                anyhow!("{error}").context(format!("could not complete S3 {operation}{tries}"))
            }
            Self::S3 { status, error, .. } => {
                anyhow!(rejection_message(operation, status, &error, &tries))
            }
            Self::AnsweredUnsent { status } => anyhow!(
                "S3 answered {operation} with HTTP {status} before its body was sent, twice, on two connections{tries}: an answer to a body that never arrived cannot mean it was stored, so the upload is not trusted and nothing is deployed; something between truss-push and S3 (a proxy, a gateway) or the S3-compatible server answers requests it did not read (check HTTPS_PROXY and the s3-endpoint input)"
            ),
            Self::NotItsAnswer(why) => {
                anyhow!(
                    "could not complete S3 {operation}{tries}: {why}; something between truss-push and S3 (a proxy, a gateway) answered in S3's place"
                )
            }
            Self::Local(error) => error,
        }
    }
}

/// "S3 rejected the upload: Code: Message (HTTP 403 on PutObject): hint".
/// Only `<Code>` and `<Message>` are shown: S3's other fields (the canonical
/// request, the string to sign) carry the session token.
pub(super) fn rejection_message(
    operation: Operation,
    status: StatusCode,
    error: &S3Error,
    tries: &str,
) -> String {
    let what = match (&error.code, &error.message) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.clone(),
        (None, _) => format!(
            "HTTP {} {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        )
        .trim_end()
        .to_owned(),
    };
    // The cleanup's requests are named for what they are, without a
    // guess at the cause: the same credentials just sent the upload, and
    // a server may refuse an abort for its own reasons (one completing the
    // upload answers 403 AccessDenied).
    if matches!(
        operation,
        Operation::AbortMultipartUpload | Operation::ListParts | Operation::HeadObject
    ) {
        return format!(
            "S3 refused {operation}: {what} (HTTP {}{tries})",
            status.as_u16()
        );
    }
    let mut message = format!(
        "S3 rejected the upload: {what} (HTTP {} on {operation}{tries})",
        status.as_u16()
    );
    if let Some(hint) = error.code.as_deref().and_then(hint) {
        message.push_str(": ");
        message.push_str(hint);
    }
    message
}

fn hint(code: &str) -> Option<&'static str> {
    Some(match code {
        "SignatureDoesNotMatch" => {
            "the request was not signed with the secret S3 expects; check that no proxy rewrites S3 requests, or report it"
        }
        "ExpiredToken" | "TokenRefreshRequired" => {
            "the platform's temporary upload credentials expired; run the deploy again"
        }
        "InvalidAccessKeyId" | "InvalidToken" | "AccessDenied" => {
            "the platform's temporary upload credentials were refused for this bucket and key; run the deploy again, and report it if it persists"
        }
        "RequestTimeTooSkewed" => {
            "this machine's clock is more than 15 minutes off; fix its time (NTP) and retry"
        }
        _ => return None,
    })
}
