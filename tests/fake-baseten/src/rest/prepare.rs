//! `POST /v1/prepare_model_upload` (`PrepareModelUploadRequestV1` →
//! `PrepareModelUploadResponseV1`): the push preflight. The platform's
//! rules are in `state/preflight.rs`; a refusal is the platform's usual
//! error body (`{"code", "message"}`, 400 `VALIDATION_ERROR` or 404
//! `RESOURCE_NOT_FOUND`: the spec documents only 200, so the shape is a
//! guess). `prepare_model_upload.refuse` scripts a refusal of a payload
//! that passed. With `dry_run: true` nothing is issued and `creds`,
//! `s3_bucket`, `s3_key` and `s3_region` are null; without it the fake
//! issues upload credentials as `model_s3_upload_credentials` does (the
//! key is then accepted by the GraphQL creates and by the REST commit).
//!
//! The commit of the documented REST push, `POST /v1/models` and
//! `POST /v1/models/{model_id}/deployments` with a `model_archive` source
//! (`CreatedModelDeploymentV1`), runs the same rules, needs an issued key
//! with an object stored there (as the GraphQL creates do), and creates
//! the deployment as the GraphQL creates would (`is_development`: the
//! model's development deployment). A `library_listing` source is refused
//! (400): the fake has no library.

use axum::http::StatusCode;
use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::answers::{deployment_v1, model_v1};
use super::{Answer, refusal};
use crate::s3::FakeS3;
use crate::state::{ApiErr, CreateKind, CreateModel, Platform};

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

/// `POST /v1/models` (`model_id` none) or `POST /v1/models/{model_id}/deployments`.
pub(super) fn create(
    p: &mut Platform,
    s3: &FakeS3,
    now: f64,
    model_id: Option<&String>,
    body: &[u8],
) -> Answer {
    match create_deployment(p, s3, now, model_id, body) {
        Ok(dep_id) => {
            let Some(d) = p.deployment(&dep_id) else {
                return refusal(ApiErr::not_found(format!("Deployment {dep_id} not found")));
            };
            (
                StatusCode::OK,
                json!({"model": model_v1(p, &d.model_id, now), "deployment": deployment_v1(p, d, now)}),
            )
        }
        Err(e) => refusal(e),
    }
}

fn create_deployment(
    p: &mut Platform,
    s3: &FakeS3,
    now: f64,
    model_id: Option<&String>,
    body: &[u8],
) -> Result<String, ApiErr> {
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(body) else {
        return Err(ApiErr::invalid("Request body must be a JSON object"));
    };
    let Some(Value::Object(source)) = o.get("source") else {
        return Err(ApiErr::invalid("source is required and must be an object"));
    };
    match source.get("kind").and_then(Value::as_str) {
        None | Some("model_archive") => {}
        Some(other) => {
            return Err(ApiErr::invalid(format!(
                "source kind {other} is not served by the fake (only model_archive)"
            )));
        }
    }
    let Some(s3_key) = source.get("s3_key").and_then(Value::as_str) else {
        return Err(ApiErr::invalid("source.s3_key is required"));
    };
    let deployment = source.get("deployment").cloned().unwrap_or(Value::Null);
    let mut pre = Map::new();
    pre.insert("deployment".into(), deployment.clone());
    match model_id {
        Some(id) => pre.insert("model_id".into(), json!(id)),
        None => pre.insert(
            "name".into(),
            source.get("name").cloned().unwrap_or(Value::Null),
        ),
    };
    p.preflight(&pre)?;
    let d = deployment.as_object().cloned().unwrap_or_default();
    let text = |k: &str| d.get(k).and_then(Value::as_str).map(str::to_string);
    let json_text = |k: &str| d.get(k).filter(|v| !v.is_null()).map(Value::to_string);
    let development = d.get("is_development").and_then(Value::as_bool) == Some(true);
    let name = match model_id {
        Some(id) => p.model(id).map(|m| m.name.clone()),
        None => source
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    let kind = match (model_id, development) {
        (_, true) => CreateKind::Draft,
        (Some(_), false) => CreateKind::NewVersion,
        (None, false) => CreateKind::NewModel,
    };
    let config = d.get("config").cloned().unwrap_or(Value::Null);
    let req = CreateModel {
        name,
        model_id: model_id.cloned(),
        s3_key: s3_key.to_string(),
        config_b64: b64(config.to_string().as_bytes()),
        semver_bump: None,
        deployment_name: text("deployment_name"),
        environment_name: text("environment_name"),
        deploy_timeout_minutes: d.get("deploy_timeout_minutes").and_then(Value::as_i64),
        team_id: None,
        labels_json: json_text("labels"),
        truss_user_env: json_text("user_env"),
        raw_config_b64: text("raw_config").map(|r| b64(r.as_bytes())),
        model_origin: None,
    };
    p.create_model_deployment(kind, req, now, &|k| s3.object_exists(k))
}
