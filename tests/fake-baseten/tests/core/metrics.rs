//! The environment metrics endpoint in the published shape
//! (`GetModelMetricsResponseV1`), its parameters' rules, and numbers that
//! follow the traffic a promotion has moved.

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::Scenario;
use serde_json::{Value, json};

use crate::common::Client;

const MODEL: &str = "mdl00001";
const PATH: &str = "/v1/models/mdl00001/environments/production/metrics";

/// `old` serves production without errors; `new` answers real users with
/// half of its requests failing. A promotion of `new` moves 20 % of the
/// traffic at 1 s and everything at 10 s.
async fn fake(extra: &str) -> FakeBaseten {
    let s = Scenario::from_yaml(&format!(
        r#"
manual_clock: true
models:
  - id: {MODEL}
    name: existing
    deployments:
      - {{id: old00001, name: old, environment: production}}
      - {{id: new00001, name: new}}
promote:
  default:
    rolling_deploy: true
    steps: [[0, {{status: RELEASING}}], [1, {{status: RAMPING_UP, percent: 20}}], [10, {{status: SUCCEEDED, percent: 100}}]]
traffic:
  deployments:
    - {{name: old, median_ms: 100, spread: 0.5}}
    - {{name: new, median_ms: 100, live: {{median_ms: 300, spread: 0.5, error_rate: 0.5}}}}
{extra}
"#
    ))
    .unwrap();
    FakeBaseten::start(s).await.unwrap()
}

/// The answer's shape, field by field as the published schema requires.
fn assert_published_shape(v: &Value, mode: &str) {
    for k in ["start_epoch_millis", "end_epoch_millis"] {
        assert!(v[k].is_i64(), "{k}: {v}");
    }
    assert_eq!(v["mode"], mode);
    assert_eq!(v["step_seconds"].is_null(), mode != "SERIES", "{v}");
    let descriptors = v["metric_descriptors"].as_array().unwrap();
    for d in descriptors {
        assert!(d["name"].is_string());
        assert!(
            [
                "PER_SECOND",
                "SECONDS",
                "BYTES",
                "MEBIBYTES",
                "COUNT",
                "RATIO"
            ]
            .contains(&d["unit_hint"].as_str().unwrap())
        );
        assert!(["GAUGE", "COUNTER", "HISTOGRAM"].contains(&d["kind"].as_str().unwrap()));
        assert!(
            d["label_sets"]
                .as_array()
                .unwrap()
                .iter()
                .all(Value::is_object)
        );
    }
    let sets = v["metric_values"].as_array().unwrap();
    assert!(!sets.is_empty());
    for set in sets {
        assert!(set["start_epoch_millis"].is_i64());
        let values = set["values"].as_array().unwrap();
        assert_eq!(values.len(), descriptors.len(), "index-mapped");
        for (d, vals) in descriptors.iter().zip(values) {
            let n = d["label_sets"].as_array().unwrap().len();
            let vals = vals.as_array().unwrap();
            assert_eq!(vals.len(), n, "one value per label set: {d}");
            assert!(vals.iter().all(|x| x.is_number() || x.is_null()));
        }
    }
}

fn value(v: &Value, metric: &str, labels: Value) -> f64 {
    let ds = v["metric_descriptors"].as_array().unwrap();
    let i = ds.iter().position(|d| d["name"] == metric).unwrap();
    let j = ds[i]["label_sets"]
        .as_array()
        .unwrap()
        .iter()
        .position(|l| *l == labels)
        .unwrap();
    v["metric_values"][0]["values"][i][j].as_f64().unwrap()
}

#[tokio::test]
async fn the_metrics_follow_the_traffic_a_promotion_moved() {
    let fake = fake("").await;
    let c = Client::new(&fake);
    let (s, before) = c.get(PATH).await;
    assert_eq!(s, 200, "{before}");
    assert_published_shape(&before, "CURRENT");
    assert_eq!(
        value(
            &before,
            "baseten_inference_requests_total",
            json!({"status": "5xx"})
        ),
        0.0
    );
    let p95 = value(
        &before,
        "baseten_end_to_end_response_time_seconds",
        json!({"quantile": "0.95"}),
    );
    // The old deployment's configured distribution: 100 ms · exp(0.5 · 1.645).
    assert!((p95 - 0.2276).abs() < 0.001, "{p95}");

    let (s, _) = c
        .post(
            &format!("/v1/models/{MODEL}/environments/production/promote"),
            Some(json!({"deployment_id": "new00001"})),
        )
        .await;
    assert_eq!(s, 200);
    fake.clock().advance(2.0);
    let (_, during) = c.get(PATH).await;
    let bad = value(
        &during,
        "baseten_inference_requests_total",
        json!({"status": "5xx"}),
    );
    let good = value(
        &during,
        "baseten_inference_requests_total",
        json!({"status": "2xx"}),
    );
    // 20 % of the traffic on a deployment failing half its requests.
    assert!((bad / (bad + good) - 0.1).abs() < 1e-9, "{during}");

    for mode in ["SUMMARY", "SERIES"] {
        let (s, v) = c.get(&format!("{PATH}?mode={mode}")).await;
        assert_eq!(s, 200, "{v}");
        assert_published_shape(&v, mode);
    }
}

#[tokio::test]
async fn parameters_follow_the_documented_rules() {
    let fake = fake("").await;
    let c = Client::new(&fake);
    let refused = [
        format!("{PATH}?mode=LATEST"),
        format!("{PATH}?start_epoch_millis=1"),
        format!("{PATH}?mode=SUMMARY&start_epoch_millis=0&end_epoch_millis=999999999999"),
        format!("{PATH}?mode=SUMMARY&start_epoch_millis=soon"),
    ];
    for path in refused {
        let (s, v) = c.get(&path).await;
        assert_eq!(s, 400, "{path}: {v}");
        assert!(v["message"].is_string());
    }
    let (s, _) = c
        .get("/v1/models/nosuch01/environments/production/metrics")
        .await;
    assert_eq!(s, 404);
    let (s, _) = c
        .get("/v1/models/mdl00001/environments/nosuch/metrics")
        .await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn an_api_without_the_endpoint_answers_404() {
    let fake = fake("  metrics: false").await;
    let (s, v) = Client::new(&fake).get(PATH).await;
    assert_eq!(s, 404, "{v}");
}
