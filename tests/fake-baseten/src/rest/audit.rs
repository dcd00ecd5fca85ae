//! A model's or a chain's audit log (`GET /v1/models/{model_id}/audit_logs`,
//! `GET /v1/chains/{chain_id}/audit_logs`, `ListAuditLogsResponseV1`,
//! paged and filtered alike): the events the fake recorded
//! (`Platform::audit`: creates, promotions, activations, deactivations,
//! deletes, and a scenario's own entries), newest first unless
//! `direction=ASC`, filtered and paged as the published parameters say.
//! The cursor carries the direction (the docs: `direction` is "ignored when
//! paginating with a cursor"). Filters the fake does not model (`search`,
//! `user_ids`, `chain_deployment_ids`) are refused with 400 rather than
//! ignored, so no test can lean on them unnoticed.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{Answer, message, parse_query};
use crate::scenario::{AuditOrder, api_key_prefix, is_chain_event};
use crate::state::{AuditEvent, Platform};

/// The documented default and bounds of `limit`.
const LIMIT_DEFAULT: usize = 20;
const LIMIT_MAX: usize = 200;

/// The event-type group (`AuditLogEventTypeGroupV1`) of each event the fake
/// records.
fn group_of(event_type: &str) -> &'static str {
    match event_type {
        "MODEL_DEPLOYED" | "CHAIN_DEPLOYED" => "DEPLOYED",
        "MODEL_DEPLOYMENT_PROMOTED" | "CHAIN_DEPLOYMENT_PROMOTED" => "PROMOTED",
        "MODEL_DEPLOYMENT_ACTIVATED" | "MODEL_DEPLOYMENT_DEACTIVATED" => "ACTIVATED_DEACTIVATED",
        "MODEL_DEPLOYMENT_AUTOSCALING_SETTINGS_CHANGED" => "AUTOSCALING_SETTINGS",
        "MODEL_DEPLOYMENT_INSTANCE_TYPE_CHANGED" => "INSTANCE_TYPE_CHANGED",
        _ => "DELETED",
    }
}

/// `d:<offset>` (newest first) or `a:<offset>`: the page after `offset`
/// entries, in that direction.
fn parse_cursor(v: &str) -> Option<(bool, usize)> {
    let (dir, n) = v.split_once(':')?;
    let ascending = match dir {
        "a" => true,
        "d" => false,
        _ => return None,
    };
    Some((ascending, n.parse().ok()?))
}

/// The log of model `owner_id`, or of chain `owner_id` when `chain`.
pub(super) fn audit_logs(p: &Platform, owner_id: &str, chain: bool, query: Option<&str>) -> Answer {
    let bad = |m: String| message(StatusCode::BAD_REQUEST, m);
    let (mut deployments, mut environments, mut groups, mut sources) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut limit, mut ascending, mut cursor) = (LIMIT_DEFAULT, false, None);
    let (mut start_ms, mut end_ms) = (None, None);
    for (k, v) in parse_query(query) {
        match k.as_str() {
            "deployment_ids" => deployments.push(v),
            "environment_names" => environments.push(v),
            "event_type_groups" => groups.push(v),
            "sources" => sources.push(v),
            "limit" => match v.parse::<usize>() {
                Ok(n) if (1..=LIMIT_MAX).contains(&n) => limit = n,
                _ => {
                    return bad(format!(
                        "limit must be between 1 and {LIMIT_MAX}, got {v:?}"
                    ));
                }
            },
            "direction" => match v.as_str() {
                "DESC" => ascending = false,
                "ASC" => ascending = true,
                _ => return bad(format!("direction must be DESC or ASC, got {v:?}")),
            },
            "cursor" => match parse_cursor(&v) {
                Some(c) => cursor = Some(c),
                None => return bad(format!("cursor {v:?} is not one this API returned")),
            },
            "start_epoch_millis" | "end_epoch_millis" => {
                let Ok(ms) = v.parse::<u64>() else {
                    return bad(format!("{k} must be an integer, got {v:?}"));
                };
                *(if k == "start_epoch_millis" {
                    &mut start_ms
                } else {
                    &mut end_ms
                }) = Some(ms);
            }
            other => {
                return bad(format!(
                    "the fake does not model the audit log filter {other}"
                ));
            }
        }
    }
    let offset = match cursor {
        Some((dir, n)) => {
            ascending = dir;
            n
        }
        None => 0,
    };
    let mut entries: Vec<(usize, &AuditEvent)> = p
        .audit
        .iter()
        .enumerate()
        .filter(|(_, e)| e.model_id == owner_id && is_chain_event(&e.event_type) == chain)
        .filter(|(_, e)| deployments.is_empty() || deployments.contains(&e.deployment_id))
        .filter(|(_, e)| {
            environments.is_empty()
                || e.environment
                    .as_ref()
                    .is_some_and(|n| environments.contains(n))
        })
        .filter(|(_, e)| groups.is_empty() || groups.iter().any(|g| g == group_of(&e.event_type)))
        .filter(|(_, e)| sources.is_empty() || sources.iter().any(|s| s == e.by.source()))
        .filter(|(_, e)| {
            let ms = p.clock.epoch_ms(e.at);
            start_ms.is_none_or(|s| ms >= s) && end_ms.is_none_or(|t| ms <= t)
        })
        .collect();
    if p.scenario.audit_log.order == AuditOrder::Time {
        // Stable: events at the same instant keep the order recorded.
        entries.sort_by(|a, b| a.1.at.total_cmp(&b.1.at));
    }
    if !ascending {
        entries.reverse();
    }
    let page: Vec<Value> = entries
        .iter()
        .skip(offset)
        .take(limit)
        .map(|(i, e)| entry(p, *i, e))
        .collect();
    let next = offset + page.len();
    let has_more = next < entries.len();
    let dir = if ascending { "a" } else { "d" };
    let pagination = json!({
        "has_more": has_more,
        "cursor": has_more.then(|| format!("{dir}:{next}")),
    });
    (
        StatusCode::OK,
        json!({"items": page, "pagination": pagination}),
    )
}

/// `AuditLogEntryV1` for the `i`-th recorded event.
fn entry(p: &Platform, i: usize, e: &AuditEvent) -> Value {
    if is_chain_event(&e.event_type) {
        return chain_entry(p, i, e);
    }
    let model_name = p
        .model(&e.model_id)
        .map(|m| m.name.clone())
        .unwrap_or_default();
    let mut data = json!({
        "event_type": e.event_type,
        "model_id": e.model_id,
        "model_name": model_name,
        "deployment_id": e.deployment_id,
        "deployment_name": e.deployment_name,
    });
    match e.event_type.as_str() {
        "MODEL_DEPLOYED" => {
            data["scale_previous_to_zero"] = json!(false);
            data["trusted"] = json!(false);
            data["publish"] = json!(e.publish);
            data["environment_name"] = json!(e.environment);
        }
        "MODEL_DEPLOYMENT_PROMOTED" => {
            data["environment_name"] = json!(e.environment);
            data["environment_id"] = Value::Null;
        }
        // The settings the deployment has now (the platform's defaults
        // for one that is gone); nothing earlier is kept.
        "MODEL_DEPLOYMENT_AUTOSCALING_SETTINGS_CHANGED" => {
            let (min, max) = p
                .deployment(&e.deployment_id)
                .map_or((0, 1), |d| (d.min_replica, d.max_replica));
            for (k, v) in [
                ("schedules", Value::Null),
                ("min_replica", json!(min)),
                ("max_replica", json!(max)),
                ("concurrency_target", json!(1)),
                ("autoscaling_window", json!(60)),
                ("scale_down_delay", json!(900)),
                ("target_utilization_percentage", json!(70)),
                ("target_in_flight_tokens", Value::Null),
                ("max_scale_down_rate", Value::Null),
                ("deployment_type", Value::Null),
                ("previous_settings", Value::Null),
            ] {
                data[k] = v;
            }
        }
        "MODEL_DEPLOYMENT_INSTANCE_TYPE_CHANGED" => {
            data["instance_type_name"] = json!(
                p.deployment(&e.deployment_id)
                    .map_or("1x2", |d| d.instance_type_name.as_str())
            );
        }
        _ => {}
    }
    json!({
        "id": format!("audit{i:06}"),
        "created": p.scenario_iso(e.at),
        "event_type": e.event_type,
        "event_data": data,
        "source": e.by.source(),
        "actor": e.by.actor_v1(&api_key_prefix(&p.scenario.api_key)),
    })
}

/// `AuditLogEntryV1` for a chain's event (`AuditLogEventChainDeployedV1`,
/// `AuditLogEventChainDeploymentPromotedV1`).
fn chain_entry(p: &Platform, i: usize, e: &AuditEvent) -> Value {
    let chain_name = p
        .chain(&e.model_id)
        .map(|c| c.name.clone())
        .unwrap_or_default();
    let mut data = json!({
        "event_type": e.event_type,
        "chain_id": e.model_id,
        "chain_name": chain_name,
        "chain_deployment_id": e.deployment_id,
        "chain_deployment_name": e.deployment_name,
    });
    match e.event_type.as_str() {
        "CHAIN_DEPLOYED" => {
            data["is_primary"] = json!(false);
            data["publish"] = json!(e.publish);
        }
        _ => {
            data["environment_name"] = json!(e.environment);
            data["environment_id"] = Value::Null;
        }
    }
    json!({
        "id": format!("audit{i:06}"),
        "created": p.scenario_iso(e.at),
        "event_type": e.event_type,
        "event_data": data,
        "source": e.by.source(),
        "actor": e.by.actor_v1(&api_key_prefix(&p.scenario.api_key)),
    })
}
