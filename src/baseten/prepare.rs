//! The push preflight: `POST /v1/prepare_model_upload` with `dry_run:
//! true` (`PrepareModelUploadRequestV1`), which "validates the same
//! payload the commit endpoint will validate" and issues nothing. The
//! answer is typed by what it tells the run: passed, refused by the
//! platform (a 4xx carrying its error), or an endpoint this platform does
//! not have (404/405 without the platform's error body). A request that
//! keeps failing (5xx, no answer) after [`Policy::PREFLIGHT`]'s tries is
//! the caller's error to skip on.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use super::{Api, ApiError, error};
use crate::retry::Policy;

/// The preflight waits this long for an answer: it validates, it never
/// uploads.
const PREFLIGHT_TIMEOUT_SECS: u64 = 15;

/// What the platform said of the payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Preflight {
    /// Validated: the create with this payload would be accepted.
    Passed,
    /// Refused with the platform's reason (its `message`, or the start of
    /// the body), and the HTTP status.
    Refused { status: u16, reason: String },
    /// The platform has no such endpoint: 404 or 405 without its error body.
    Absent { status: u16 },
}

/// The platform's own error body: a JSON object with a `message` string
/// (`{"code", "message"}`); its text.
fn platform_message(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    v.get("message")?.as_str().map(str::to_string)
}

/// Types a non-2xx answer: see [`Preflight`]. 5xx and the other
/// retryable statuses are errors, so the retry loop tries them again.
fn answered(status: StatusCode, body: &[u8]) -> Result<Preflight, ApiError> {
    let code = status.as_u16();
    let message = platform_message(body);
    if !status.is_client_error() || crate::retry::RETRYABLE_STATUSES.contains(&code) {
        let detail = message.unwrap_or_else(|| crate::net::show_bytes(body, 200));
        return Err(error::by_status(
            status,
            format!("the platform's preflight: HTTP {status}: {detail}"),
            None,
        ));
    }
    Ok(match message {
        None if matches!(code, 404 | 405) => Preflight::Absent { status: code },
        Some(reason) => Preflight::Refused {
            status: code,
            reason: crate::secret::scrub(reason.trim()).into_owned(),
        },
        None => Preflight::Refused {
            status: code,
            reason: crate::secret::scrub(&crate::net::show_bytes(body, 300)).into_owned(),
        },
    })
}

impl Api {
    /// Sends `body` (a `PrepareModelUploadRequestV1` with `dry_run: true`)
    /// under [`Policy::PREFLIGHT`]: a dry run changes nothing, so a lost
    /// answer or a 5xx is tried again.
    pub(crate) async fn preflight(&self, body: &Value) -> Result<Preflight, ApiError> {
        debug_assert_eq!(body.get("dry_run"), Some(&Value::Bool(true)));
        let what = "the platform's preflight (prepare_model_upload, dry run)";
        let url = self.endpoints.rest(&["prepare_model_upload"]);
        self.retrying(Policy::PREFLIGHT, self.deadline(), |_| {
            let req = self
                .http
                .post(url.clone())
                .timeout(Duration::from_secs(PREFLIGHT_TIMEOUT_SECS))
                .json(body);
            async move {
                let mut resp = self.send_authed(what, req).await?;
                let status = resp.status();
                let (head, _) =
                    crate::net::read_head(&mut resp, error::ERROR_BODY_READ_BYTES, false)
                        .await
                        .unwrap_or_default();
                if status.is_success() {
                    return Ok(Preflight::Passed);
                }
                answered(status, &head)
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_typed_by_status_and_body() {
        let platform = br#"{"code": "VALIDATION_ERROR", "message": "Invalid deployment name"}"#;
        let refused = |status: u16, reason: &str| {
            Ok::<_, String>(Preflight::Refused {
                status,
                reason: reason.into(),
            })
        };
        let cases: [(u16, &[u8], Result<Preflight, String>); 8] = [
            (400, platform, refused(400, "Invalid deployment name")),
            (401, br#"{"message": "bad key"}"#, refused(401, "bad key")),
            (
                404,
                br#"{"code": "RESOURCE_NOT_FOUND", "message": "Model `m` not found"}"#,
                refused(404, "Model `m` not found"),
            ),
            (404, b"Not Found", Ok(Preflight::Absent { status: 404 })),
            (405, b"", Ok(Preflight::Absent { status: 405 })),
            (
                403,
                b"<html>denied</html>",
                refused(403, "\"<html>denied</html>\""),
            ),
            (500, platform, Err("permanent? false".into())),
            (503, b"", Err("permanent? false".into())),
        ];
        for (status, body, want) in cases {
            let got = answered(StatusCode::from_u16(status).unwrap(), body)
                .map_err(|e| format!("permanent? {}", matches!(e, ApiError::Permanent { .. })));
            assert_eq!(got, want, "{status}");
        }
    }
}
