//! A model's audit log (`GET /v1/models/{model_id}/audit_logs`,
//! `ListAuditLogsResponseV1`): the creates and promotions the fake
//! recorded (`Platform::audit`), newest first unless `direction=ASC`,
//! filtered and paged as the published parameters say. Filters the fake
//! does not model (actors, sources, search, chain deployments) are refused
//! with 400 rather than ignored, so no test can lean on them unnoticed.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{Answer, message, parse_query};
use crate::state::{AuditEvent, Platform};

/// The documented default and bounds of `limit`.
const LIMIT_DEFAULT: usize = 20;
const LIMIT_MAX: usize = 200;

/// The event-type group (`AuditLogEventTypeGroupV1`) of each event the fake
/// records.
fn group_of(event_type: &str) -> &'static str {
    match event_type {
        "MODEL_DEPLOYED" => "DEPLOYED",
        _ => "PROMOTED",
    }
}

pub(super) fn audit_logs(p: &Platform, model_id: &str, query: Option<&str>) -> Answer {
    let bad = |m: String| message(StatusCode::BAD_REQUEST, m);
    let (mut deployments, mut environments, mut groups) = (Vec::new(), Vec::new(), Vec::new());
    let (mut limit, mut ascending, mut offset) = (LIMIT_DEFAULT, false, 0usize);
    let (mut start_ms, mut end_ms) = (None, None);
    for (k, v) in parse_query(query) {
        match k.as_str() {
            "deployment_ids" => deployments.push(v),
            "environment_names" => environments.push(v),
            "event_type_groups" => groups.push(v),
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
            "cursor" => match v.parse::<usize>() {
                Ok(n) => offset = n,
                Err(_) => return bad(format!("cursor {v:?} is not one this API returned")),
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
    let mut entries: Vec<(usize, &AuditEvent)> = p
        .audit
        .iter()
        .enumerate()
        .filter(|(_, e)| e.model_id == model_id)
        .filter(|(_, e)| deployments.is_empty() || deployments.contains(&e.deployment_id))
        .filter(|(_, e)| {
            environments.is_empty()
                || e.environment
                    .as_ref()
                    .is_some_and(|n| environments.contains(n))
        })
        .filter(|(_, e)| groups.is_empty() || groups.iter().any(|g| g == group_of(e.event_type)))
        .filter(|(_, e)| {
            let ms = p.clock.epoch_ms(e.at);
            start_ms.is_none_or(|s| ms >= s) && end_ms.is_none_or(|t| ms <= t)
        })
        .collect();
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
    let pagination = json!({
        "has_more": has_more,
        "cursor": has_more.then(|| next.to_string()),
    });
    (
        StatusCode::OK,
        json!({"items": page, "pagination": pagination}),
    )
}

/// `AuditLogEntryV1` for the `i`-th recorded event.
fn entry(p: &Platform, i: usize, e: &AuditEvent) -> Value {
    let model_name = p
        .model(&e.model_id)
        .map(|m| m.name.clone())
        .unwrap_or_default();
    let deployment_name = p
        .deployment(&e.deployment_id)
        .map(|d| d.name.clone())
        .unwrap_or_default();
    let data = match e.event_type {
        "MODEL_DEPLOYED" => json!({
            "event_type": e.event_type,
            "model_id": e.model_id,
            "model_name": model_name,
            "deployment_id": e.deployment_id,
            "deployment_name": deployment_name,
            "scale_previous_to_zero": false,
            "trusted": false,
            "publish": e.publish,
            "environment_name": e.environment,
        }),
        _ => json!({
            "event_type": e.event_type,
            "model_id": e.model_id,
            "model_name": model_name,
            "deployment_id": e.deployment_id,
            "deployment_name": deployment_name,
            "environment_name": e.environment,
            "environment_id": null,
        }),
    };
    json!({
        "id": format!("audit{i:06}"),
        "created": p.scenario_iso(e.at),
        "event_type": e.event_type,
        "event_data": data,
        "source": "API",
        "actor": {"type": "API_KEY"},
    })
}
