//! `GET /v1/models/{model_id}/environments/{env_name}/metrics`
//! (`GetModelMetricsResponseV1`, marked unstable by the platform): the
//! default metric set — `baseten_replicas_active`,
//! `baseten_inference_requests_total` by status class and
//! `baseten_end_to_end_response_time_seconds` quantiles — index-mapped as
//! published. The numbers come from the `live` behaviour of the
//! deployments serving the environment ([`crate::traffic`]): requests split
//! by the promotion's traffic percentage, latency from whichever deployment
//! the environment's URL reaches at that instant. `traffic.metrics: false`
//! answers 404, as an API without the endpoint would; `traffic.metrics_values`
//! scripts the numbers read by read (hostile answers that still fit the
//! published types).

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::rest::{Answer, parse_query};
use crate::state::Platform;
use crate::traffic;

/// Requests the fake reports per value set.
const REQUESTS_PER_STEP: f64 = 1000.0;
/// Default window of SUMMARY and SERIES modes, as documented.
const DEFAULT_WINDOW_MILLIS: i64 = 3_600_000;
const SERIES_STEPS: i64 = 12;
const QUANTILES: [f64; 4] = [0.5, 0.9, 0.95, 0.99];

fn message(status: StatusCode, msg: String) -> Answer {
    (status, json!({"message": msg}))
}

pub fn environment(
    p: &Platform,
    now: f64,
    model_id: &str,
    env: &str,
    query: Option<&str>,
) -> Answer {
    if !p.scenario.traffic.metrics {
        return message(StatusCode::NOT_FOUND, "Not found".into());
    }
    let Some(model) = p.model(model_id) else {
        return message(StatusCode::NOT_FOUND, format!("Model {model_id} not found"));
    };
    let Some(e) = model.environments.iter().find(|x| x.name == env) else {
        return message(
            StatusCode::NOT_FOUND,
            format!("Environment {env} not found for model {model_id}"),
        );
    };
    let q = parse_query(query);
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let mode = get("mode").unwrap_or("CURRENT");
    if !matches!(mode, "CURRENT" | "SUMMARY" | "SERIES") {
        return message(
            StatusCode::BAD_REQUEST,
            format!("mode must be one of CURRENT, SUMMARY, SERIES; got {mode}"),
        );
    }
    let millis = |k: &str| get(k).map(|v| v.parse::<i64>());
    let (start, end) = (millis("start_epoch_millis"), millis("end_epoch_millis"));
    if matches!(start, Some(Err(_))) || matches!(end, Some(Err(_))) {
        return message(
            StatusCode::BAD_REQUEST,
            "epoch millis must be integers".into(),
        );
    }
    if mode == "CURRENT" && (start.is_some() || end.is_some()) {
        return message(
            StatusCode::BAD_REQUEST,
            "start_epoch_millis and end_epoch_millis must be omitted in CURRENT mode".into(),
        );
    }
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let end = end.and_then(Result::ok).unwrap_or(wall);
    let start = match mode {
        "CURRENT" => end,
        _ => start
            .and_then(Result::ok)
            .unwrap_or(end - DEFAULT_WINDOW_MILLIS),
    };
    if end - start > 7 * 24 * DEFAULT_WINDOW_MILLIS {
        return message(
            StatusCode::BAD_REQUEST,
            "The window between start and end must not exceed 7 days".into(),
        );
    }

    let view = p.view(e, now);
    let share = match (&view.candidate, &view.promotion) {
        (Some(_), Some(pr)) => f64::from(pr.percent_traffic_to_new_version) / 100.0,
        _ => 0.0,
    };
    let mut weighted: Vec<(f64, traffic::Behaviour)> = Vec::new();
    if let Some(c) = &view.current {
        weighted.push((1.0 - share, traffic::live(p, c)));
    }
    if let Some(c) = view.candidate.as_deref().filter(|_| share > 0.0) {
        weighted.push((share, traffic::live(p, c)));
    }
    let values = match view.serving() {
        None => json!([[0], [null, null, null], [null, null, null, null, null]]),
        Some(serving) => {
            let errors: f64 = weighted.iter().map(|(w, b)| w * b.error_rate).sum();
            let total: f64 = weighted.iter().map(|(w, _)| w).sum();
            let ok = (total - errors) * REQUESTS_PER_STEP;
            let bad = errors * REQUESTS_PER_STEP;
            let b = traffic::live(p, &serving);
            let mut lat: Vec<Value> = QUANTILES
                .iter()
                .map(|q| json!(b.quantile_ms(*q) / 1000.0))
                .collect();
            lat.push(json!(
                b.median_ms * (b.spread * b.spread / 2.0).exp() / 1000.0
            ));
            json!([[weighted.len()], [ok.round(), 0.0, bad.round()], lat])
        }
    };
    // A scripted answer replaces the computed numbers, read by read.
    let reads = p.request_count("rest.get_environment_metrics").max(1) as usize;
    let scripted = &p.scenario.traffic.metrics_values;
    let values = scripted
        .get(reads - 1)
        .or(scripted.last())
        .cloned()
        .unwrap_or(values);
    let sets: Vec<Value> = match mode {
        "SERIES" => {
            let step = ((end - start) / SERIES_STEPS).max(1);
            (0..SERIES_STEPS)
                .map(|i| json!({"start_epoch_millis": start + i * step, "values": values}))
                .collect()
        }
        _ => vec![json!({"start_epoch_millis": start, "values": values})],
    };
    let step_seconds = (mode == "SERIES").then(|| ((end - start) / SERIES_STEPS / 1000).max(1));
    let mut quantile_labels: Vec<Value> = QUANTILES
        .iter()
        .map(|q| json!({"quantile": q.to_string()}))
        .collect();
    quantile_labels.push(json!({"stat": "avg"}));
    (
        StatusCode::OK,
        json!({
            "start_epoch_millis": start,
            "end_epoch_millis": end,
            "mode": mode,
            "step_seconds": step_seconds,
            "metric_descriptors": [
                {"name": "baseten_replicas_active", "unit_hint": "COUNT", "kind": "GAUGE", "label_sets": [{}]},
                {"name": "baseten_inference_requests_total", "unit_hint": "COUNT", "kind": "COUNTER",
                 "label_sets": [{"status": "2xx"}, {"status": "4xx"}, {"status": "5xx"}]},
                {"name": "baseten_end_to_end_response_time_seconds", "unit_hint": "SECONDS", "kind": "HISTOGRAM",
                 "label_sets": quantile_labels},
            ],
            "metric_values": sets,
        }),
    )
}
