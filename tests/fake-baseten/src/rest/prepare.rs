//! `POST /v1/prepare_model_upload` (`PrepareModelUploadRequestV1` →
//! `PrepareModelUploadResponseV1`): the push preflight. The platform's
//! rules are in `state/preflight.rs`; a refusal is the platform's usual
//! error body (`{"code", "message"}`, 400 `VALIDATION_ERROR` or 404
//! `RESOURCE_NOT_FOUND`: the spec documents only 200, so the shape is a
//! guess). `prepare_model_upload.refuse` scripts a refusal of a payload
//! that passed. With `dry_run: true` nothing is issued and `creds`,
//! `s3_bucket`, `s3_key` and `s3_region` are null; without it the fake
//! issues upload credentials as `model_s3_upload_credentials` does (the
//! key is then accepted by the GraphQL creates). The commit step of the
//! documented REST push (`POST /v1/models` or `…/deployments` with a
//! `model_archive` source) is not served.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{Answer, refusal};
use crate::s3::FakeS3;
use crate::state::{ApiErr, Platform};

pub(super) fn prepare_model_upload(
    p: &mut Platform,
    s3: &FakeS3,
    _now: f64,
    body: &[u8],
) -> Answer {
    let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(body) else {
        return refusal(ApiErr::invalid("Request body must be a JSON object"));
    };
    let dry_run = match o.get("dry_run") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return refusal(ApiErr::invalid(format!(
                "dry_run must be a boolean, got {v}"
            )));
        }
    };
    if let Err(e) = p.preflight(&o) {
        return refusal(e);
    }
    if let Some(r) = &p.scenario.prepare_model_upload.refuse {
        let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_REQUEST);
        return (
            status,
            json!({"code": "VALIDATION_ERROR", "message": r.message}),
        );
    }
    if dry_run {
        return (
            StatusCode::OK,
            json!({"creds": null, "s3_bucket": null, "s3_key": null, "s3_region": null}),
        );
    }
    let c = s3.issue_credentials("models");
    p.issue_key(&c.s3_key);
    (
        StatusCode::OK,
        json!({
            "creds": {
                "aws_access_key_id": c.aws_access_key_id,
                "aws_secret_access_key": c.aws_secret_access_key,
                "aws_session_token": c.aws_session_token,
            },
            "s3_bucket": c.s3_bucket,
            "s3_key": c.s3_key,
            "s3_region": s3.region(),
        }),
    )
}
