//! Parsing what a REST request carries: the promote body and query strings.

use serde_json::Value;

use crate::state::{ApiErr, PromoteRequest};

/// The promote body: `deployment_id` required, the two flags optional
/// booleans (null means the default, true).
pub(super) fn promote_request(body: &[u8]) -> Result<PromoteRequest, ApiErr> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiErr::invalid(format!("Request body must be a JSON object: {e}")))?;
    let Value::Object(o) = v else {
        return Err(ApiErr::invalid("Request body must be a JSON object"));
    };
    let deployment_id = match o.get("deployment_id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Null) | None => {
            return Err(ApiErr::invalid("deployment_id is required"));
        }
        Some(other) => {
            return Err(ApiErr::invalid(format!(
                "deployment_id must be a string, got {other}"
            )));
        }
    };
    let flag = |k: &str| match o.get(k) {
        None | Some(Value::Null) => Ok(true),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ApiErr::invalid(format!(
            "{k} must be a boolean, got {other}"
        ))),
    };
    Ok(PromoteRequest {
        deployment_id,
        scale_down_previous_deployment: flag("scale_down_previous_deployment")?,
        preserve_env_instance_type: flag("preserve_env_instance_type")?,
    })
}

/// Minimal `application/x-www-form-urlencoded` decoding of a query string.
pub fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    fn decode(s: &str) -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => {
                    let hex = |b: u8| (b as char).to_digit(16);
                    match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                        (Some(h), Some(l)) => {
                            out.push((h * 16 + l) as u8);
                            i += 2;
                        }
                        _ => out.push(b'%'),
                    }
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    q.unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(kv), String::new()),
        })
        .collect()
}

/// The `name` filter of the model and deployment lists (exact match).
pub(super) fn named(query: Option<&str>) -> Option<String> {
    parse_query(query)
        .into_iter()
        .find(|(k, _)| k == "name")
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promote_bodies() {
        let r = promote_request(br#"{"deployment_id": "d1"}"#).unwrap();
        assert_eq!(r.deployment_id, "d1");
        assert!(r.scale_down_previous_deployment && r.preserve_env_instance_type);
        let r = promote_request(
            br#"{"deployment_id": "d1", "scale_down_previous_deployment": false, "preserve_env_instance_type": null}"#,
        )
        .unwrap();
        assert!(!r.scale_down_previous_deployment && r.preserve_env_instance_type);
        for bad in [
            &b""[..],
            b"[]",
            b"{}",
            br#"{"deployment_id": null}"#,
            br#"{"deployment_id": 7}"#,
            br#"{"deployment_id": "d1", "preserve_env_instance_type": "yes"}"#,
        ] {
            let e = promote_request(bad).unwrap_err();
            assert_eq!(
                e.code,
                "VALIDATION_ERROR",
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn query_strings_decode() {
        assert_eq!(
            parse_query(Some("a=1&b=x%20y+z&c")),
            [
                ("a".to_string(), "1".to_string()),
                ("b".to_string(), "x y z".to_string()),
                ("c".to_string(), String::new())
            ]
        );
    }
}
