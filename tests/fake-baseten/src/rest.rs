//! REST v1 (`/v1/...`): routing, the handlers for deployments,
//! environments, deactivation, chain deployments, secrets and promotions,
//! and the refusals; answer shapes in `rest/answers.rs`, logs in `rest/logs.rs`,
//! a model's audit log in `rest/audit.rs`. Errors are
//! `{"message": ...}` with the HTTP status; the promotion endpoints also
//! send `code` (`VALIDATION_ERROR` with 400, `RESOURCE_NOT_FOUND` with 404),
//! as the platform's examples for them do.
//!
//! # Promotion endpoints
//!
//! Models under `/v1/models/{model_id}/environments/{env_name}/`, chains
//! under `/v1/chains/{chain_id}/environments/{env_name}/`, all POST:
//!
//! - `promote`, body `{"deployment_id": str (required), "scale_down_previous_deployment": bool = true,
//!   "preserve_env_instance_type": bool = true}` (the chain form documents
//!   only the first two; the third is ignored there). Answers 200 with
//!   the promoted deployment — `DeploymentV1` for models,
//!   `ChainDeploymentV1` for chains — whose id is new when the promotion
//!   had to create a deployment (rules in [`crate::scenario`]). Refused
//!   with 400: a missing or mistyped field, an inactive (or deactivating)
//!   deployment, a promotion already in flight in that environment, the
//!   environment's current deployment itself; 404: unknown model, chain,
//!   environment or deployment.
//! - `cancel_promotion` (models only), no body: 200 `{"status": "CANCELED" | "RAMPING_DOWN", "message": str}`;
//!   400 `VALIDATION_ERROR` when nothing is in flight.
//! - `force_cancel_promotion` (models only), no body: 200 `{"success": true}`, the
//!   promotion is CANCELED at once and the previous deployment keeps
//!   serving; 400 as above when nothing is in flight, and for a promotion
//!   that is not rolling (the platform documents it for rolling
//!   promotions only).
//!
//! Chains have no cancel endpoint and their environment no
//! `in_progress_promotion` (`ChainEnvironmentV1`): those paths answer 404.
//! `POST /v1/models/{model_id}/deployments/{deployment_id}/activate`
//! answers `{"success": true}` and re-activates an inactive deployment.
//!
//! Deletes, the push preflight and the instance-type catalogue are in
//! `rest/retire.rs`, `rest/prepare.rs` and `rest/prices.rs`.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::s3::FakeS3;
use crate::scenario::Actor;
use crate::state::{ApiErr, ChainDeployment, Deployment, Owner, PRODUCTION, Platform};
mod answers;
mod audit;
mod logs;
mod parse;
mod prepare;
mod prices;
mod retire;

pub use parse::parse_query;
use parse::{named, promote_request};

use answers::*;
use logs::logs;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    ListModels,
    GetModel(String),
    /// `DELETE /v1/models/{model_id}`.
    DeleteModel(String),
    /// `DELETE /v1/models/{model_id}/deployments/{deployment_id}`.
    DeleteDeployment(String, String),
    /// `DELETE /v1/chains/{chain_id}/deployments/{chain_deployment_id}`.
    DeleteChainDeployment(String, String),
    /// `POST /v1/models` (a `model_archive` source).
    CreateModel,
    /// `POST /v1/models/{model_id}/deployments` (a `model_archive` source).
    CreateDeployment(String),
    /// `POST /v1/prepare_model_upload`.
    PrepareModelUpload,
    InstanceTypes,
    InstanceTypePrices,
    /// `GET /v1/models/{model_id}/audit_logs`.
    AuditLogs(String),
    /// `GET /v1/chains/{chain_id}/audit_logs`.
    ChainAuditLogs(String),
    ListDeployments(String),
    GetDeployment(String, String),
    DeactivateDeployment(String, String),
    ActivateDeployment(String, String),
    Logs(String, String),
    /// `GET …/deployments/{id}/config?output_format=raw|parsed|both`.
    DeploymentConfig(String, String),
    ListEnvironments(String),
    GetEnvironment(String, String),
    EnvironmentMetrics(String, String),
    ListChainDeployments(String),
    GetChainDeployment(String, String),
    DeactivateChainDeployment(String, String),
    ListChainEnvironments(String),
    GetChainEnvironment(String, String),
    Promote(Owner, String),
    /// Models only: the platform has no chain cancel.
    CancelPromotion(String, String),
    ForceCancelPromotion(String, String),
    ListSecrets,
    ListTeamSecrets(String),
    MethodNotAllowed,
    NotFound,
}

impl Route {
    pub fn endpoint(&self) -> &'static str {
        match self {
            Route::ListModels => "rest.list_models",
            Route::GetModel(..) => "rest.get_model",
            Route::DeleteModel(..) => "rest.delete_model",
            Route::DeleteDeployment(..) => "rest.delete_deployment",
            Route::DeleteChainDeployment(..) => "rest.delete_chain_deployment",
            Route::CreateModel => "rest.create_model",
            Route::CreateDeployment(..) => "rest.create_deployment",
            Route::PrepareModelUpload => "rest.prepare_model_upload",
            Route::InstanceTypes => "rest.list_instance_types",
            Route::InstanceTypePrices => "rest.list_instance_type_prices",
            Route::AuditLogs(..) => "rest.get_audit_logs",
            Route::ChainAuditLogs(..) => "rest.get_chain_audit_logs",
            Route::ListDeployments(..) => "rest.list_deployments",
            Route::GetDeployment(..) => "rest.get_deployment",
            Route::DeactivateDeployment(..) => "rest.deactivate_deployment",
            Route::ActivateDeployment(..) => "rest.activate_deployment",
            Route::Logs(..) => "rest.get_logs",
            Route::DeploymentConfig(..) => "rest.get_deployment_config",
            Route::ListEnvironments(..) => "rest.list_environments",
            Route::GetEnvironment(..) => "rest.get_environment",
            Route::EnvironmentMetrics(..) => "rest.get_environment_metrics",
            Route::ListChainDeployments(..) => "rest.list_chain_deployments",
            Route::GetChainDeployment(..) => "rest.get_chain_deployment",
            Route::DeactivateChainDeployment(..) => "rest.deactivate_chain_deployment",
            Route::ListChainEnvironments(..) => "rest.list_chain_environments",
            Route::GetChainEnvironment(..) => "rest.get_chain_environment",
            Route::Promote(Owner::Model(_), _) => "rest.promote",
            Route::Promote(Owner::Chain(_), _) => "rest.promote_chain",
            Route::CancelPromotion(..) => "rest.cancel_promotion",
            Route::ForceCancelPromotion(..) => "rest.force_cancel_promotion",
            Route::ListSecrets => "rest.list_secrets",
            Route::ListTeamSecrets(..) => "rest.list_team_secrets",
            Route::MethodNotAllowed => "rest.method_not_allowed",
            Route::NotFound => "rest.not_found",
        }
    }
}

/// The REST route of `method path` (path starting with `/v1/`).
pub fn route(method: &Method, path: &str) -> Route {
    let segs: Vec<String> = path
        .trim_start_matches('/')
        .trim_end_matches('/')
        .split('/')
        .map(str::to_string)
        .collect();
    let seg: Vec<&str> = segs.iter().map(String::as_str).collect();
    let get = method == Method::GET;
    let post = method == Method::POST;
    let delete = method == Method::DELETE;
    let (route, allowed) = match seg.as_slice() {
        ["v1", "models"] if post => (Route::CreateModel, true),
        ["v1", "models"] => (Route::ListModels, get),
        ["v1", "models", m, "deployments"] if post => {
            (Route::CreateDeployment(m.to_string()), true)
        }
        ["v1", "chains", c, "deployments", d] if delete => (
            Route::DeleteChainDeployment(c.to_string(), d.to_string()),
            true,
        ),
        ["v1", "prepare_model_upload"] => (Route::PrepareModelUpload, post),
        ["v1", "instance_types"] => (Route::InstanceTypes, get),
        ["v1", "instance_type_prices"] => (Route::InstanceTypePrices, get),
        ["v1", "models", m] if delete => (Route::DeleteModel(m.to_string()), true),
        ["v1", "models", m, "deployments", d] if delete => {
            (Route::DeleteDeployment(m.to_string(), d.to_string()), true)
        }
        ["v1", "secrets"] => (Route::ListSecrets, get),
        ["v1", "teams", t, "secrets"] => (Route::ListTeamSecrets(t.to_string()), get),
        ["v1", "models", m] => (Route::GetModel(m.to_string()), get),
        ["v1", "models", m, "audit_logs"] => (Route::AuditLogs(m.to_string()), get),
        ["v1", "models", m, "deployments"] => (Route::ListDeployments(m.to_string()), get),
        ["v1", "models", m, "deployments", d] => {
            (Route::GetDeployment(m.to_string(), d.to_string()), get)
        }
        ["v1", "models", m, "deployments", d, "deactivate"] => (
            Route::DeactivateDeployment(m.to_string(), d.to_string()),
            post,
        ),
        ["v1", "models", m, "deployments", d, "activate"] => (
            Route::ActivateDeployment(m.to_string(), d.to_string()),
            post,
        ),
        ["v1", "models", m, "deployments", d, "logs"] => {
            (Route::Logs(m.to_string(), d.to_string()), get || post)
        }
        ["v1", "models", m, "deployments", d, "config"] => {
            (Route::DeploymentConfig(m.to_string(), d.to_string()), get)
        }
        ["v1", "models", m, "environments"] => (Route::ListEnvironments(m.to_string()), get),
        ["v1", "models", m, "environments", e] => {
            (Route::GetEnvironment(m.to_string(), e.to_string()), get)
        }
        ["v1", "models", m, "environments", e, "metrics"] => {
            (Route::EnvironmentMetrics(m.to_string(), e.to_string()), get)
        }
        ["v1", "chains", c, "deployments"] => (Route::ListChainDeployments(c.to_string()), get),
        ["v1", "chains", c, "audit_logs"] => (Route::ChainAuditLogs(c.to_string()), get),
        ["v1", "chains", c, "deployments", d] => {
            (Route::GetChainDeployment(c.to_string(), d.to_string()), get)
        }
        ["v1", "chains", c, "deployments", d, "deactivate"] => (
            Route::DeactivateChainDeployment(c.to_string(), d.to_string()),
            post,
        ),
        ["v1", "chains", c, "environments"] => (Route::ListChainEnvironments(c.to_string()), get),
        ["v1", "chains", c, "environments", e] => (
            Route::GetChainEnvironment(c.to_string(), e.to_string()),
            get,
        ),
        [
            "v1",
            kind @ ("models" | "chains"),
            id,
            "environments",
            e,
            "promote",
        ] => {
            let owner = if *kind == "models" {
                Owner::Model(id.to_string())
            } else {
                Owner::Chain(id.to_string())
            };
            (Route::Promote(owner, e.to_string()), post)
        }
        [
            "v1",
            "models",
            m,
            "environments",
            e,
            action @ ("cancel_promotion" | "force_cancel_promotion"),
        ] => {
            let (m, e) = (m.to_string(), e.to_string());
            let route = if *action == "cancel_promotion" {
                Route::CancelPromotion(m, e)
            } else {
                Route::ForceCancelPromotion(m, e)
            };
            (route, post)
        }
        _ => (Route::NotFound, true),
    };
    if allowed {
        route
    } else {
        Route::MethodNotAllowed
    }
}

pub type Answer = (StatusCode, Value);

fn message(status: StatusCode, msg: impl Into<String>) -> Answer {
    (status, json!({"message": msg.into()}))
}

fn not_found(msg: impl Into<String>) -> Answer {
    message(StatusCode::NOT_FOUND, msg)
}

/// A platform refusal with its `code`, as the promotion endpoints answer.
fn refusal(e: ApiErr) -> Answer {
    let status = if e.code == "RESOURCE_NOT_FOUND" {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::BAD_REQUEST
    };
    (status, json!({"code": e.code, "message": e.message}))
}

/// Answers one REST request; `s3` issues upload credentials (the push
/// preflight without `dry_run`).
pub fn handle(
    p: &mut Platform,
    s3: &FakeS3,
    now: f64,
    route: &Route,
    query: Option<&str>,
    body: &[u8],
) -> Answer {
    match route {
        Route::DeleteModel(m) => retire::delete_model(p, now, m, body),
        Route::DeleteDeployment(m, d) => retire::delete_deployment(p, now, m, d, body),
        Route::DeleteChainDeployment(c, d) => retire::delete_chain_deployment(p, now, c, d, body),
        Route::CreateModel => prepare::create(p, s3, now, None, body),
        Route::CreateDeployment(m) => prepare::create(p, s3, now, Some(m), body),
        Route::PrepareModelUpload => prepare::prepare_model_upload(p, s3, now, body),
        Route::InstanceTypes => prices::instance_types(p),
        Route::InstanceTypePrices => prices::instance_type_prices(p),
        Route::NotFound => not_found("Not found"),
        Route::MethodNotAllowed => message(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed"),
        Route::ListModels => {
            let name = named(query);
            let models: Vec<Value> = p
                .models
                .iter()
                .filter(|m| m.origin != "CHAINS")
                .filter(|m| name.as_ref().is_none_or(|n| &m.name == n))
                .map(|m| model_v1(p, &m.id, now))
                .collect();
            (StatusCode::OK, json!({ "models": models }))
        }
        Route::ListSecrets => (StatusCode::OK, json!({ "secrets": secrets_v1(p, None) })),
        Route::ListTeamSecrets(t) => {
            if !p.teams.iter().any(|team| &team.id == t) {
                return not_found(format!("Team {t} not found"));
            }
            (StatusCode::OK, json!({ "secrets": secrets_v1(p, Some(t)) }))
        }
        Route::GetModel(m) => match p.model(m) {
            Some(_) => (StatusCode::OK, model_v1(p, m, now)),
            None => not_found(format!("Model {m} not found")),
        },
        Route::AuditLogs(m) => match p.model(m) {
            Some(_) => audit::audit_logs(p, m, false, query),
            None => not_found(format!("Model {m} not found")),
        },
        Route::ChainAuditLogs(c) => match p.chain(c) {
            Some(_) => audit::audit_logs(p, c, true, query),
            None => not_found(format!("Chain {c} not found")),
        },
        Route::ListDeployments(m) => {
            if p.model(m).is_none() {
                return not_found(format!("Model {m} not found"));
            }
            let name = named(query);
            let deps: Vec<Value> = p
                .model_deployments(m)
                .filter(|d| name.as_ref().is_none_or(|n| &d.name == n))
                .map(|d| deployment_v1(p, d, now))
                .collect();
            (StatusCode::OK, json!({ "deployments": deps }))
        }
        Route::GetDeployment(m, d) => match find_deployment(p, m, d, now) {
            Ok(dep) => (StatusCode::OK, deployment_v1(p, dep, now)),
            Err(a) => a,
        },
        Route::DeploymentConfig(m, d) => {
            let dep = match find_deployment(p, m, d, now) {
                Ok(dep) => dep,
                Err(a) => return a,
            };
            let format = parse_query(query)
                .into_iter()
                .find(|(k, _)| k == "output_format")
                .map_or_else(|| "both".to_string(), |(_, v)| v);
            match deployment_config_v1(dep, &format) {
                Some(v) => (StatusCode::OK, v),
                None => message(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("output_format must be one of 'raw', 'parsed', 'both', got {format:?}"),
                ),
            }
        }
        Route::DeactivateDeployment(m, d) => {
            if let Err(a) = check_body(body) {
                return a;
            }
            let id = match find_deployment(p, m, d, now) {
                Ok(dep) => dep.id.clone(),
                Err(a) => return a,
            };
            p.deactivate_as(&id, &Actor::default(), now);
            (StatusCode::OK, json!({"success": true}))
        }
        Route::Logs(m, d) => {
            let dep = match find_deployment(p, m, d, now) {
                Ok(dep) => dep,
                Err(a) => return a,
            };
            match logs(p, dep, now, query, body) {
                Ok(v) => (StatusCode::OK, v),
                Err(msg) => message(StatusCode::BAD_REQUEST, msg),
            }
        }
        Route::ListEnvironments(m) => {
            let Some(model) = p.model(m) else {
                return not_found(format!("Model {m} not found"));
            };
            let envs: Vec<Value> = model
                .environments
                .iter()
                .map(|e| environment_v1(p, &model.id, e, now))
                .collect();
            (StatusCode::OK, json!({ "environments": envs }))
        }
        Route::GetEnvironment(m, e) => {
            let Some(model) = p.model(m) else {
                return not_found(format!("Model {m} not found"));
            };
            match model.environments.iter().find(|x| &x.name == e) {
                Some(env) => (StatusCode::OK, environment_v1(p, &model.id, env, now)),
                None => not_found(format!("Environment {e} not found for model {m}")),
            }
        }
        Route::EnvironmentMetrics(m, e) => crate::metrics::environment(p, now, m, e, query),
        Route::ListChainDeployments(c) => {
            if p.chain(c).is_none() {
                return not_found(format!("Chain {c} not found"));
            }
            let deps: Vec<Value> = p
                .chain_deployments
                .iter()
                .filter(|cd| &cd.chain_id == c)
                .map(|cd| chain_deployment_v1(p, cd, now))
                .collect();
            (StatusCode::OK, json!({ "deployments": deps }))
        }
        Route::GetChainDeployment(c, d) => match find_chain_deployment(p, c, d) {
            Ok(cd) => (StatusCode::OK, chain_deployment_v1(p, cd, now)),
            Err(a) => a,
        },
        Route::DeactivateChainDeployment(c, d) => {
            if let Err(a) = check_body(body) {
                return a;
            }
            let id = match find_chain_deployment(p, c, d) {
                Ok(cd) => cd.id.clone(),
                Err(a) => return a,
            };
            p.deactivate_chain_deployment(&id, now);
            (StatusCode::OK, json!({"success": true}))
        }
        Route::Promote(owner, env) => {
            let request = promote_request(body).map(|mut r| {
                // The chain request has no preserve_env_instance_type.
                if matches!(owner, Owner::Chain(_)) {
                    r.preserve_env_instance_type = true;
                }
                r
            });
            let promoted = match request.and_then(|r| p.promote(owner, env, &r, now)) {
                Ok(id) => id,
                Err(e) => return refusal(e),
            };
            let answer = match owner {
                Owner::Model(_) => p.deployment(&promoted).map(|d| deployment_v1(p, d, now)),
                Owner::Chain(_) => p
                    .chain_deployment(&promoted)
                    .map(|cd| chain_deployment_v1(p, cd, now)),
            };
            (StatusCode::OK, answer.unwrap_or(Value::Null))
        }
        Route::ActivateDeployment(m, d) => {
            if let Err(a) = check_body(body) {
                return a;
            }
            let id = match find_deployment(p, m, d, now) {
                Ok(dep) => dep.id.clone(),
                Err(a) => return a,
            };
            p.activate_as(&id, &Actor::default(), now);
            (StatusCode::OK, json!({"success": true}))
        }
        Route::CancelPromotion(m, env) => {
            match p.cancel_promotion(&Owner::Model(m.clone()), env, false, now) {
                Ok(o) => (
                    StatusCode::OK,
                    json!({"status": o.status, "message": o.message}),
                ),
                Err(e) => refusal(e),
            }
        }
        Route::ForceCancelPromotion(m, env) => {
            match p.cancel_promotion(&Owner::Model(m.clone()), env, true, now) {
                Ok(_) => (StatusCode::OK, json!({"success": true})),
                Err(e) => refusal(e),
            }
        }
        Route::ListChainEnvironments(c) => {
            let Some(chain) = p.chain(c) else {
                return not_found(format!("Chain {c} not found"));
            };
            let envs: Vec<Value> = chain
                .environments
                .iter()
                .map(|e| chain_environment_v1(p, &chain.id, e, now))
                .collect();
            (StatusCode::OK, json!({ "environments": envs }))
        }
        Route::GetChainEnvironment(c, e) => {
            let Some(chain) = p.chain(c) else {
                return not_found(format!("Chain {c} not found"));
            };
            match chain.environments.iter().find(|x| &x.name == e) {
                Some(env) => (StatusCode::OK, chain_environment_v1(p, &chain.id, env, now)),
                None => not_found(format!("Environment {e} not found for chain {c}")),
            }
        }
    }
}

/// Deactivate takes no body or a JSON object (`{}`).
fn check_body(body: &[u8]) -> Result<(), Answer> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(_)) => Ok(()),
        _ => Err(message(
            StatusCode::BAD_REQUEST,
            "Request body must be a JSON object",
        )),
    }
}

/// `{d}` may also be `production` or `development`, as the platform's
/// deployment aliases.
fn find_deployment<'p>(
    p: &'p Platform,
    m: &str,
    d: &str,
    now: f64,
) -> Result<&'p Deployment, Answer> {
    let Some(model) = p.model(m) else {
        return Err(not_found(format!("Model {m} not found")));
    };
    let id = match d {
        "production" => p.env_current(&model.id, PRODUCTION, now),
        "development" => model.development.clone(),
        other => Some(other.to_string()),
    };
    id.and_then(|id| p.deployment(&id))
        .filter(|dep| dep.model_id == model.id)
        .ok_or_else(|| not_found(format!("Deployment {d} not found for model {m}")))
}

fn find_chain_deployment<'p>(
    p: &'p Platform,
    c: &str,
    d: &str,
) -> Result<&'p ChainDeployment, Answer> {
    if p.chain(c).is_none() {
        return Err(not_found(format!("Chain {c} not found")));
    }
    p.chain_deployment(d)
        .filter(|cd| cd.chain_id == c)
        .ok_or_else(|| not_found(format!("Chain deployment {d} not found for chain {c}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let g = Method::GET;
        let post = Method::POST;
        let del = Method::DELETE;
        for (m, path, want) in [
            (&g, "/v1/models/m1/deployments/d1", "rest.get_deployment"),
            (&g, "/v1/models/m1/deployments/d1/", "rest.get_deployment"),
            (
                &post,
                "/v1/models/m1/deployments/d1/deactivate",
                "rest.deactivate_deployment",
            ),
            (
                &g,
                "/v1/models/m1/deployments/d1/deactivate",
                "rest.method_not_allowed",
            ),
            (&g, "/v1/models/m1/deployments/d1/logs", "rest.get_logs"),
            (
                &g,
                "/v1/models/m1/deployments/d1/config",
                "rest.get_deployment_config",
            ),
            (
                &post,
                "/v1/models/m1/deployments/d1/config",
                "rest.method_not_allowed",
            ),
            (&post, "/v1/models/m1/deployments/d1/logs", "rest.get_logs"),
            (&g, "/v1/models/m1/environments", "rest.list_environments"),
            (
                &g,
                "/v1/models/m1/environments/staging",
                "rest.get_environment",
            ),
            (
                &g,
                "/v1/chains/c1/deployments/cd1",
                "rest.get_chain_deployment",
            ),
            (
                &post,
                "/v1/chains/c1/deployments/cd1/deactivate",
                "rest.deactivate_chain_deployment",
            ),
            (
                &g,
                "/v1/chains/c1/environments/production",
                "rest.get_chain_environment",
            ),
            (
                &post,
                "/v1/models/m1/environments/production/promote",
                "rest.promote",
            ),
            (
                &g,
                "/v1/models/m1/environments/production/promote",
                "rest.method_not_allowed",
            ),
            (
                &post,
                "/v1/models/m1/environments/staging/cancel_promotion",
                "rest.cancel_promotion",
            ),
            (
                &post,
                "/v1/models/m1/environments/staging/force_cancel_promotion",
                "rest.force_cancel_promotion",
            ),
            (
                &post,
                "/v1/chains/c1/environments/production/promote",
                "rest.promote_chain",
            ),
            (
                &post,
                "/v1/chains/c1/environments/production/cancel_promotion",
                "rest.not_found",
            ),
            (
                &post,
                "/v1/chains/c1/environments/production/force_cancel_promotion",
                "rest.not_found",
            ),
            (
                &post,
                "/v1/models/m1/environments/production/pause_promotion",
                "rest.not_found",
            ),
            (&g, "/v1/nothing", "rest.not_found"),
            (&g, "/v1/models", "rest.list_models"),
            (&del, "/v1/models/m1", "rest.delete_model"),
            (
                &del,
                "/v1/chains/c1/deployments/cd1",
                "rest.delete_chain_deployment",
            ),
            (&post, "/v1/models", "rest.create_model"),
            (&post, "/v1/models/m1/deployments", "rest.create_deployment"),
            (
                &del,
                "/v1/models/m1/deployments/d1",
                "rest.delete_deployment",
            ),
            (
                &del,
                "/v1/models/m1/environments/e1",
                "rest.method_not_allowed",
            ),
            (&del, "/v1/models/m1/audit_logs", "rest.method_not_allowed"),
            (
                &post,
                "/v1/prepare_model_upload",
                "rest.prepare_model_upload",
            ),
            (&g, "/v1/prepare_model_upload", "rest.method_not_allowed"),
            (&g, "/v1/instance_types", "rest.list_instance_types"),
            (
                &g,
                "/v1/instance_type_prices",
                "rest.list_instance_type_prices",
            ),
            (&g, "/v1/models/m1", "rest.get_model"),
            (&g, "/v1/models/m1/audit_logs", "rest.get_audit_logs"),
            (&g, "/v1/chains/c1/audit_logs", "rest.get_chain_audit_logs"),
            (&post, "/v1/models/m1/audit_logs", "rest.method_not_allowed"),
            (&g, "/v1/models/m1/deployments", "rest.list_deployments"),
            (
                &g,
                "/v1/models/m1/deployments/production",
                "rest.get_deployment",
            ),
            (
                &g,
                "/v1/chains/c1/deployments",
                "rest.list_chain_deployments",
            ),
            (
                &g,
                "/v1/chains/c1/environments",
                "rest.list_chain_environments",
            ),
            (&g, "/v1/secrets", "rest.list_secrets"),
            (&g, "/v1/teams/t1/secrets", "rest.list_team_secrets"),
            (
                &g,
                "/v1/models/m1/environments/production/metrics",
                "rest.get_environment_metrics",
            ),
            (
                &post,
                "/v1/models/m1/deployments/d1/activate",
                "rest.activate_deployment",
            ),
        ] {
            assert_eq!(route(m, path).endpoint(), want, "{m} {path}");
            // Every route the fake serves is published, or excepted with
            // its reason; the two refusals are for everything else.
            let served = !want.ends_with("not_found") && !want.ends_with("method_not_allowed");
            assert_eq!(
                crate::schema::published().covers(m.as_str(), path.trim_end_matches('/')),
                served,
                "{m} {path}"
            );
        }
    }
}
