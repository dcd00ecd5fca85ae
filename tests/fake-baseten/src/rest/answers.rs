//! The platform's answer shapes, built from the fake's state: `DeploymentV1`,
//! `ModelV1`, `EnvironmentV1`, `ChainDeploymentV1`, `ChainEnvironmentV1`,
//! `SecretV1` (the schema check holds each to the published API).

use serde_json::{Map, Value, json};

use crate::state::{ChainDeployment, Deployment, EnvView, Environment, PRODUCTION, Platform};
use crate::status;

/// `SecretV1` for each scripted secret (of team id `team`, or every team's);
/// values are never returned by the platform. Ids are stable per scenario.
pub(super) fn secrets_v1(p: &Platform, team: Option<&str>) -> Vec<Value> {
    p.scenario
        .secrets
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            // A bare name belongs to the first team (or to none: a key
            // that lists no teams).
            let owner = match s.team() {
                None => p.teams.first(),
                Some(name) => Some(p.teams.iter().find(|t| t.name == name)?),
            };
            let owner_id = owner.map(|t| t.id.as_str());
            (team.is_none() || team == owner_id).then(|| {
                json!({
                    "id": format!("secret{i:04}"),
                    "created_at": "2026-01-01T00:00:00Z",
                    "name": s.name(),
                    "team_name": owner.map(|t| t.name.as_str()).unwrap_or_default(),
                })
            })
        })
        .collect()
}

/// `AutoscalingSettingsV1` with the platform's defaults (min 0, max 1).
pub(super) fn autoscaling_settings() -> Value {
    replica_range(0, 1)
}

/// `AutoscalingSettingsV1` for a replica range.
fn replica_range(min_replica: i64, max_replica: i64) -> Value {
    json!({
        "min_replica": min_replica,
        "max_replica": max_replica,
        "autoscaling_window": 60,
        "scale_down_delay": 900,
        "concurrency_target": 1,
        "target_utilization_percentage": 70,
    })
}

pub(super) fn deployment_v1(p: &Platform, d: &Deployment, now: f64) -> Value {
    let status = d.public_status(now);
    let environment = p.environment_of(d, now);
    let deployed = d
        .steps
        .iter()
        .any(|(t, s)| *t <= now && status::is_ready(&status::as_public(s)));
    let replicas = u32::from(matches!(status.as_str(), "ACTIVE" | "UPDATING"));
    json!({
        "id": d.id,
        "created_at": p.scenario_iso(d.created_at),
        "name": d.name,
        "model_id": d.model_id,
        "is_production": environment.as_deref() == Some(PRODUCTION),
        "is_development": d.is_draft,
        "status": status,
        "active_replica_count": replicas,
        // Empty until the deployment first became ready.
        "autoscaling_settings": if deployed { replica_range(d.min_replica, d.max_replica) } else { Value::Null },
        "instance_type_name": d.instance_type_name,
        "environment": environment,
        "labels": d.labels,
        "region": null,
        "request_backpressure_settings": {"policy": null},
    })
}

/// `DeploymentConfigResponseV1` for `output_format` (`raw`, `parsed` or
/// `both`), `None` for another format. `raw_config` is the text the create
/// sent (null when it sent none, as for deployments the platform made
/// before it kept raw configs); `config` the parsed config it sent.
pub(super) fn deployment_config_v1(d: &Deployment, format: &str) -> Option<Value> {
    let (raw, parsed) = match format {
        "raw" => (true, false),
        "parsed" => (false, true),
        "both" => (true, true),
        _ => return None,
    };
    Some(json!({
        "config": if parsed { d.config.clone() } else { Value::Null },
        "raw_config": if raw { d.raw_config.clone() } else { None },
    }))
}

pub(super) fn model_v1(p: &Platform, m: &str, now: f64) -> Value {
    let Some(model) = p.model(m) else {
        return Value::Null;
    };
    json!({
        "id": model.id,
        "created_at": p.scenario_iso(model.created_at),
        "name": model.name,
        "deployments_count": p.model_deployments(&model.id).count(),
        "production_deployment_id": p.env_current(&model.id, PRODUCTION, now),
        "development_deployment_id": model.development,
        "instance_type_name": "1x2",
        "team_name": p.teams.iter().find(|t| t.id == model.team_id).map(|t| t.name.clone()).unwrap_or_default(),
    })
}

pub(super) fn promotion_fields(
    p: &Platform,
    out: &mut Map<String, Value>,
    view: &EnvView,
    render: impl Fn(&str) -> Value,
) {
    if p.scenario.omit_promotion_fields {
        return;
    }
    out.insert(
        "candidate_deployment".into(),
        view.candidate
            .as_deref()
            .map(&render)
            .unwrap_or(Value::Null),
    );
    out.insert(
        "in_progress_promotion".into(),
        view.promotion
            .as_ref()
            .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
            .unwrap_or(Value::Null),
    );
}

/// `PromotionSettingsV1` as the scenario sets the environment up.
pub(super) fn promotion_settings(p: &Platform, env: &str) -> Value {
    let spec = &p.scenario.promote;
    let listed = |l: &[String]| l.iter().any(|e| e == env);
    json!({
        "redeploy_on_promotion": listed(&spec.redeploy_on_promotion),
        "rolling_deploy": false,
        "promotion_cleanup_strategy": if listed(&spec.deactivate_previous) { "DEACTIVATE" } else { "SCALE_TO_ZERO" },
        "rolling_deploy_config": null,
        "ramp_up_while_promoting": false,
        "ramp_up_duration_seconds": 600,
    })
}

pub(super) fn environment_v1(p: &Platform, model_id: &str, env: &Environment, now: f64) -> Value {
    let view = p.view(env, now);
    let render = |id: &str| {
        p.deployment(id)
            .map(|d| deployment_v1(p, d, now))
            .unwrap_or(Value::Null)
    };
    let mut out = Map::new();
    out.insert("name".into(), json!(env.name));
    out.insert("created_at".into(), json!(p.scenario_iso(env.created_at)));
    out.insert("model_id".into(), json!(model_id));
    out.insert(
        "current_deployment".into(),
        view.current.as_deref().map(render).unwrap_or(Value::Null),
    );
    promotion_fields(p, &mut out, &view, render);
    out.insert("autoscaling_settings".into(), autoscaling_settings());
    out.insert(
        "promotion_settings".into(),
        promotion_settings(p, &env.name),
    );
    out.insert(
        "instance_type".into(),
        json!({
            "id": "1x2",
            "name": "1x2",
            "memory_limit_mib": 2048,
            "millicpu_limit": 1000,
            "gpu_count": 0,
            "gpu_type": null,
            "gpu_memory_limit_mib": null,
        }),
    );
    out.insert(
        "request_backpressure_settings".into(),
        json!({"policy": null}),
    );
    out.insert("autoscaling_schedules".into(), Value::Null);
    Value::Object(out)
}

pub(super) fn chain_deployment_v1(p: &Platform, cd: &ChainDeployment, now: f64) -> Value {
    let mut statuses = Vec::new();
    let chainlets: Vec<Value> = cd
        .chainlets
        .iter()
        .map(|c| {
            let dep = p.deployment(&c.deployment_id);
            let status = dep
                .map(|d| d.public_status(now))
                .unwrap_or_else(|| "UNKNOWN".into());
            statuses.push(status.clone());
            json!({
                "id": c.id,
                "name": c.name,
                "autoscaling_settings": if status::is_ready(&status) { autoscaling_settings() } else { Value::Null },
                "instance_type_name": dep.map(|d| d.instance_type_name.clone()),
                "active_replica_count": u32::from(status == "ACTIVE"),
                "status": status,
            })
        })
        .collect();
    let environment = p.chain(&cd.chain_id).and_then(|c| {
        c.environments.iter().find_map(|e| {
            let v = p.view(e, now);
            (v.current.as_deref() == Some(&cd.id) || v.candidate.as_deref() == Some(&cd.id))
                .then(|| e.name.clone())
        })
    });
    json!({
        "id": cd.id,
        "created_at": p.scenario_iso(cd.created_at),
        "chain_id": cd.chain_id,
        "environment": environment,
        "chainlets": chainlets,
        "status": status::chain_status(&statuses),
    })
}

pub(super) fn chain_environment_v1(
    p: &Platform,
    chain_id: &str,
    env: &Environment,
    now: f64,
) -> Value {
    let view = p.view(env, now);
    let render = |id: &str| {
        p.chain_deployment(id)
            .map(|cd| chain_deployment_v1(p, cd, now))
            .unwrap_or(Value::Null)
    };
    let mut out = Map::new();
    out.insert("name".into(), json!(env.name));
    out.insert("created_at".into(), json!(p.scenario_iso(env.created_at)));
    out.insert("chain_id".into(), json!(chain_id));
    out.insert(
        "current_deployment".into(),
        view.current.as_deref().map(&render).unwrap_or(Value::Null),
    );
    // ChainEnvironmentV1 has a candidate deployment but no promotion
    // status: a chain's promotion is seen only through those two fields.
    if !p.scenario.omit_promotion_fields {
        out.insert(
            "candidate_deployment".into(),
            view.candidate
                .as_deref()
                .map(&render)
                .unwrap_or(Value::Null),
        );
    }
    out.insert(
        "promotion_settings".into(),
        promotion_settings(p, &env.name),
    );
    out.insert("chainlet_settings".into(), json!([]));
    Value::Object(out)
}
