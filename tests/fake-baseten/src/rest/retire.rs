//! `DELETE /v1/models/{model_id}` (`ModelTombstoneV1`),
//! `DELETE /v1/models/{model_id}/deployments/{deployment_id}`
//! (`DeploymentTombstoneV1`) and
//! `DELETE /v1/chains/{chain_id}/deployments/{chain_deployment_id}`
//! (`ChainDeploymentTombstoneV1`, the same rules; its chainlets' deployments
//! go with it). A deleted deployment is gone from every
//! listing and read (404 from then on, a second delete included); one that
//! serves an environment or is being promoted into one is refused with 400
//! `VALIDATION_ERROR`; `refuse_deletes` scripts a refusal (`deleted: false`,
//! or an error status). The `production`/`development` aliases are not
//! published for DELETE and name no deployment here.

use axum::http::StatusCode;
use serde_json::json;

use super::{Answer, check_body, message, not_found, refusal};
use crate::scenario::Actor;
use crate::state::{DeleteOutcome, Platform};

pub(super) fn delete_deployment(
    p: &mut Platform,
    now: f64,
    model_id: &str,
    dep_id: &str,
    body: &[u8],
) -> Answer {
    if let Err(a) = check_body(body) {
        return a;
    }
    if p.model(model_id).is_none() {
        return not_found(format!("Model {model_id} not found"));
    }
    if p.deployment(dep_id).is_none_or(|d| d.model_id != model_id) {
        return not_found(format!(
            "Deployment {dep_id} not found for model {model_id}"
        ));
    }
    match p.delete_deployment(dep_id, &Actor::default(), now) {
        Ok(DeleteOutcome::Deleted(id)) => (
            StatusCode::OK,
            json!({"id": id, "deleted": true, "model_id": model_id}),
        ),
        Ok(DeleteOutcome::Kept(id)) => (
            StatusCode::OK,
            json!({"id": id, "deleted": false, "model_id": model_id}),
        ),
        Ok(DeleteOutcome::Refused(status, msg)) => message(
            StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN),
            msg,
        ),
        Err(e) => refusal(e),
    }
}

pub(super) fn delete_chain_deployment(
    p: &mut Platform,
    now: f64,
    chain_id: &str,
    cd_id: &str,
    body: &[u8],
) -> Answer {
    if let Err(a) = check_body(body) {
        return a;
    }
    if p.chain(chain_id).is_none() {
        return not_found(format!("Chain {chain_id} not found"));
    }
    if p.chain_deployment(cd_id)
        .is_none_or(|cd| cd.chain_id != chain_id)
    {
        return not_found(format!(
            "Chain deployment {cd_id} not found for chain {chain_id}"
        ));
    }
    let tombstone = |id: String, deleted: bool| {
        (
            StatusCode::OK,
            json!({"id": id, "deleted": deleted, "chain_id": chain_id}),
        )
    };
    match p.delete_chain_deployment(cd_id, now) {
        Ok(DeleteOutcome::Deleted(id)) => tombstone(id, true),
        Ok(DeleteOutcome::Kept(id)) => tombstone(id, false),
        Ok(DeleteOutcome::Refused(status, msg)) => message(
            StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN),
            msg,
        ),
        Err(e) => refusal(e),
    }
}

pub(super) fn delete_model(p: &mut Platform, now: f64, model_id: &str, body: &[u8]) -> Answer {
    if let Err(a) = check_body(body) {
        return a;
    }
    if p.delete_model(model_id, now) {
        (StatusCode::OK, json!({"id": model_id, "deleted": true}))
    } else {
        not_found(format!("Model {model_id} not found"))
    }
}
