//! Real traffic during a rolling promotion: the environment's metrics
//! (`GetModelMetricsResponseV1`, index-mapped descriptors and value sets)
//! read into the two numbers the objectives bound — the share of 5xx
//! answers in `baseten_inference_requests_total` and the p95 of
//! `baseten_end_to_end_response_time_seconds`.

use serde_json::Value;

use super::stats::alike;

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

/// A metric value: a finite number at least 0, or no data (`null`, or
/// missing). Anything else makes the answer unreadable.
fn value(v: Option<&Value>, what: &str) -> Result<Option<f64>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
            _ => Err(format!("{what} is {n}, not a count or a duration")),
        },
        Some(other) => Err(format!("{what} is {other}, not a number")),
    }
}

/// Reads a metrics answer. `Err` says why it cannot be trusted (a shape
/// that is not the published one, a count or a duration that is negative
/// or not a number, a quantile label that is not one, quantiles that go
/// down as the quantile goes up): the caller then stops reading it, and
/// never takes it for "no errors". A counter is published as the total
/// over its step, so one reading lower than the last is no fault.
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
    let series = |i: usize, what: &str| -> Result<Vec<(Value, Option<f64>)>, String> {
        let labels = descriptors[i]
            .get("label_sets")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let vals = match values.and_then(|v| v.get(i)) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(other) => return Err(format!("the values of {what} are {other}, not a list")),
        };
        labels
            .into_iter()
            .enumerate()
            .map(|(k, l)| Ok((l, value(vals.get(k), what)?)))
            .collect()
    };
    let (mut requests, mut errors) = (0.0, 0.0);
    if let Some(i) = req_i {
        for (labels, value) in series(i, REQUESTS)? {
            let n = value.unwrap_or(0.0);
            requests += n;
            if labels.get("status").and_then(Value::as_str) == Some("5xx") {
                errors += n;
            }
        }
    }
    let mut p95_ms = None;
    let mut quantiles: Vec<(f64, f64)> = Vec::new();
    if let Some(i) = lat_i {
        for (labels, value) in series(i, LATENCY)? {
            let Some(q) = labels.get("quantile") else {
                continue;
            };
            let q = q
                .as_str()
                .and_then(|q| q.parse::<f64>().ok())
                .filter(|q| (0.0..=1.0).contains(q))
                .ok_or_else(|| format!("the quantile label {q} of {LATENCY} is not a number"))?;
            if q == 0.95 {
                p95_ms = value.map(|s| s * 1000.0);
            }
            quantiles.extend(value.map(|v| (q, v)));
        }
    }
    quantiles.sort_by(|a, b| a.0.total_cmp(&b.0));
    if let Some(w) = quantiles.windows(2).find(|w| w[1].1 < w[0].1) {
        return Err(format!(
            "the {} quantile of {LATENCY} ({} s) is below the {} quantile ({} s)",
            w[1].0, w[1].1, w[0].0, w[0].1
        ));
    }
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
        let (v, l) = alike(r * 100.0, max_error_rate * 100.0, 1);
        return Some(format!(
            "{v}% of real requests answered 5xx, above max-error-rate {l}%"
        ));
    }
    match (live.p95_ms, max_p95_ms) {
        (Some(p), Some(max)) if p > max => {
            let (v, l) = alike(p, max, 0);
            Some(format!(
                "real traffic's p95 latency is {v} ms, above max-latency-p95-ms {l}"
            ))
        }
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

    #[test]
    fn hostile_numbers_are_unreadable_never_zero_errors() {
        let lat = json!([0.1, 0.25, 0.4, 0.12]);
        let bad = [
            (json!([[1], [-5, 0, 0], lat]), "not a count"),
            (json!([[1], ["90", 0, 5], lat]), "not a number"),
            (
                json!([[1], [90, 0, 5], [0.1, "fast", 0.4, 0.1]]),
                "not a number",
            ),
            (
                json!([[1], [90, 0, 5], [0.1, -0.2, 0.4, 0.1]]),
                "not a count",
            ),
            (json!([[1], "many", lat]), "not a list"),
        ];
        for (values, why) in bad {
            let e = read(&answer(values.clone())).unwrap_err();
            assert!(e.contains(why), "{values}: {e}");
        }
        let e = read(&answer(json!([[1], [90, 0, 5], [0.3, 0.2, 0.4, 0.1]]))).unwrap_err();
        assert!(e.contains("the 0.95 quantile"), "{e}");
        let mut odd = answer(json!([[1], [90, 0, 5], lat]));
        odd["metric_descriptors"][2]["label_sets"][1] = json!({"quantile": "p95"});
        assert!(read(&odd).unwrap_err().contains("quantile label"));
    }
}
