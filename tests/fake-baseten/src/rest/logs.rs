//! Deployment logs: the options a client may send (query string or JSON
//! body) and the scripted lines that answer them.

use serde_json::{Value, json};

use super::parse_query;
use crate::state::{Deployment, Platform};

/// Log options from the query string (GET) or JSON body (POST).
#[derive(Debug, Default, PartialEq)]
pub(super) struct LogQuery {
    start_ms: Option<u64>,
    end_ms: Option<u64>,
    limit: Option<usize>,
    ascending: bool,
}

pub(super) fn log_query(query: Option<&str>, body: &[u8]) -> Result<LogQuery, String> {
    let mut q = LogQuery::default();
    let mut pairs: Vec<(String, Value)> = parse_query(query)
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    if !body.iter().all(u8::is_ascii_whitespace) {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(o)) => pairs.extend(o),
            _ => return Err("Request body must be a JSON object".into()),
        }
    }
    let num = |k: &str, v: &Value| -> Result<u64, String> {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .ok_or_else(|| format!("{k} must be an integer"))
    };
    for (k, v) in pairs {
        match k.as_str() {
            "start_epoch_millis" if !v.is_null() => q.start_ms = Some(num(&k, &v)?),
            "end_epoch_millis" if !v.is_null() => q.end_ms = Some(num(&k, &v)?),
            "limit" if !v.is_null() => {
                let n = num(&k, &v)?;
                if !(1..=1000).contains(&n) {
                    return Err("limit must be between 1 and 1000".into());
                }
                q.limit = Some(n as usize);
            }
            "direction" => match v.as_str() {
                Some("asc") => q.ascending = true,
                Some("desc") | None => q.ascending = false,
                Some(other) => return Err(format!("direction must be asc or desc, got {other}")),
            },
            _ => {}
        }
    }
    Ok(q)
}

/// Lines scripted for this deployment that have happened by `now`, inside
/// the window (default: the 30 minutes before now), newest first unless
/// `direction=asc`.
pub(super) fn logs(
    p: &Platform,
    d: &Deployment,
    now: f64,
    query: Option<&str>,
    body: &[u8],
) -> Result<Value, String> {
    let q = log_query(query, body)?;
    let model_name = p.model(&d.model_id).map(|m| m.name.as_str()).unwrap_or("");
    let end_ms = q.end_ms.unwrap_or_else(|| p.clock.epoch_ms(now));
    let start_ms = q.start_ms.unwrap_or(end_ms.saturating_sub(30 * 60 * 1000));
    let mut lines: Vec<(u64, &crate::scenario::LogLineSpec)> = p
        .scenario
        .logs
        .iter()
        .filter(|l| l.model.as_deref().is_none_or(|m| m == model_name))
        .map(|l| (d.created_at + l.at, l))
        .filter(|(t, _)| *t <= now)
        .map(|(t, l)| (p.clock.epoch_ms(t), l))
        .filter(|(ms, _)| *ms >= start_ms && *ms <= end_ms)
        .collect();
    lines.sort_by_key(|(ms, _)| *ms);
    if !q.ascending {
        lines.reverse();
    }
    lines.truncate(q.limit.unwrap_or(500));
    let logs: Vec<Value> = lines
        .iter()
        .map(|(ms, l)| {
            json!({
                "timestamp": (u128::from(*ms) * 1_000_000).to_string(),
                "message": l.message,
                "replica": l.replica,
                "request_id": null,
                "level": l.level,
            })
        })
        .collect();
    Ok(json!({ "logs": logs }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_options_from_query_or_body() {
        assert_eq!(
            log_query(Some("start_epoch_millis=5&limit=2&direction=asc"), b"").unwrap(),
            LogQuery {
                start_ms: Some(5),
                end_ms: None,
                limit: Some(2),
                ascending: true
            }
        );
        assert_eq!(
            log_query(None, br#"{"end_epoch_millis": 9}"#)
                .unwrap()
                .end_ms,
            Some(9)
        );
        assert!(log_query(Some("limit=0"), b"").is_err());
        assert!(log_query(Some("direction=sideways"), b"").is_err());
        assert!(log_query(None, b"[1]").is_err());
    }
}
