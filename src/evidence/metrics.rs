//! Real traffic during a rolling promotion: the environment's metrics
//! (`GetModelMetricsResponseV1`, index-mapped descriptors and value sets)
//! read into the two numbers the objectives bound — the share of 5xx
//! answers in `baseten_inference_requests_total` and the p95 of
//! `baseten_end_to_end_response_time_seconds`.

use serde_json::Value;

const REQUESTS: &str = "baseten_inference_requests_total";
const LATENCY: &str = "baseten_end_to_end_response_time_seconds";

/// One reading of the environment's live traffic.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Live {
    /// Requests counted in the reading (all statuses).
    pub(crate) requests: f64,
    /// 5xx answers over all answers; `None` without traffic.
    pub(crate) error_rate: Option<f64>,
    pub(crate) p95_ms: Option<f64>,
}

/// Reads a metrics answer. `Err` says why its shape is not the published
/// one (the endpoint is unstable): the caller then stops reading it.
pub(crate) fn read(v: &Value) -> Result<Live, String> {
    let descriptors = v
        .get("metric_descriptors")
        .and_then(Value::as_array)
        .ok_or("no metric_descriptors list")?;
    let sets = v
        .get("metric_values")
        .and_then(Value::as_array)
        .ok_or("no metric_values list")?;
    let index = |name: &str| {
        descriptors
            .iter()
            .position(|d| d.get("name").and_then(Value::as_str) == Some(name))
    };
    let (req_i, lat_i) = (index(REQUESTS), index(LATENCY));
    if req_i.is_none() && lat_i.is_none() {
        return Err(format!("neither {REQUESTS} nor {LATENCY} is in the answer"));
    }
    // The last value set is the latest step (CURRENT mode has one).
    let values = sets
        .last()
        .and_then(|s| s.get("values"))
        .and_then(Value::as_array);
    let series = |i: usize| -> Vec<(Value, Option<f64>)> {
        let labels = descriptors[i]
            .get("label_sets")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let vals = values
            .and_then(|v| v.get(i))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        labels
            .into_iter()
            .enumerate()
            .map(|(k, l)| (l, vals.get(k).and_then(Value::as_f64)))
            .collect()
    };
    let (mut requests, mut errors) = (0.0, 0.0);
    if let Some(i) = req_i {
        for (labels, value) in series(i) {
            let n = value.unwrap_or(0.0);
            requests += n;
            if labels.get("status").and_then(Value::as_str) == Some("5xx") {
                errors += n;
            }
        }
    }
    let p95_ms = lat_i.and_then(|i| {
        series(i)
            .into_iter()
            .find(|(l, _)| {
                l.get("quantile")
                    .and_then(Value::as_str)
                    .and_then(|q| q.parse::<f64>().ok())
                    == Some(0.95)
            })
            .and_then(|(_, v)| v)
            .map(|s| s * 1000.0)
    });
    Ok(Live {
        requests,
        error_rate: (requests > 0.0).then(|| errors / requests),
        p95_ms,
    })
}

/// What a reading breaks, if anything, as a sentence.
pub(crate) fn breach(live: &Live, max_error_rate: f64, max_p95_ms: Option<f64>) -> Option<String> {
    if let Some(r) = live.error_rate
        && r > max_error_rate
    {
        return Some(format!(
            "{:.1}% of real requests answered 5xx, above max-error-rate {:.1}%",
            r * 100.0,
            max_error_rate * 100.0
        ));
    }
    match (live.p95_ms, max_p95_ms) {
        (Some(p), Some(max)) if p > max => Some(format!(
            "real traffic's p95 latency is {p:.0} ms, above max-latency-p95-ms {max:.0}"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(values: Value) -> Value {
        json!({
            "start_epoch_millis": 0, "end_epoch_millis": 1, "mode": "CURRENT", "step_seconds": null,
            "metric_descriptors": [
                {"name": "baseten_replicas_active", "unit_hint": "COUNT", "kind": "GAUGE", "label_sets": [{}]},
                {"name": REQUESTS, "unit_hint": "COUNT", "kind": "COUNTER",
                 "label_sets": [{"status": "2xx"}, {"status": "4xx"}, {"status": "5xx"}]},
                {"name": LATENCY, "unit_hint": "SECONDS", "kind": "HISTOGRAM",
                 "label_sets": [{"quantile": "0.5"}, {"quantile": "0.95"}, {"quantile": "0.99"}, {"stat": "avg"}]}
            ],
            "metric_values": [{"start_epoch_millis": 0, "values": values}]
        })
    }

    #[test]
    fn the_published_shape_is_read() {
        let live = read(&answer(json!([[2], [90, 5, 5], [0.1, 0.25, 0.4, 0.12]]))).unwrap();
        assert_eq!(live.requests, 100.0);
        assert_eq!(live.error_rate, Some(0.05));
        assert_eq!(live.p95_ms, Some(250.0));
        assert!(breach(&live, 0.0, None).unwrap().contains("5.0%"));
        assert_eq!(breach(&live, 0.1, Some(300.0)), None);
        assert!(breach(&live, 0.1, Some(200.0)).unwrap().contains("250 ms"));
    }

    #[test]
    fn no_traffic_is_no_breach() {
        let live = read(&answer(json!([
            [1],
            [null, null, null],
            [null, null, null, null]
        ])))
        .unwrap();
        assert_eq!(live.error_rate, None);
        assert_eq!(live.p95_ms, None);
        assert_eq!(breach(&live, 0.0, Some(1.0)), None);
    }

    #[test]
    fn an_unknown_shape_is_said() {
        assert!(read(&json!({"data": []})).is_err());
        assert!(read(&json!({"metric_descriptors": [], "metric_values": []})).is_err());
    }
}
