//! Inference: routing forms, streaming, waking from zero, and what a
//! deployment that is not ready answers.

use std::time::Duration;

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::Scenario;
use serde_json::{Value, json};

use crate::common::{Client, create_model_doc, create_vars, truss_tar};

/// A scenario with one existing model and the given deployments.
fn scenario_with(deployments: &str, extra: &str) -> Scenario {
    Scenario::from_yaml(&format!(
        r#"
manual_clock: true
models:
  - id: mdl00001
    name: existing
    environments: [staging]
    deployments: {deployments}
{extra}
"#
    ))
    .unwrap()
}

async fn predict(c: &Client, url: &str, body: Value) -> (u16, Value) {
    let r = c
        .http
        .post(url)
        .header("Authorization", c.auth())
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn every_url_form_reaches_the_right_deployment() {
    let sc = scenario_with(
        r#"[{id: prod0001, name: p, environment: production},
            {id: stag0001, name: s, environment: staging},
            {id: dev00001, name: development, is_draft: true}]"#,
        r#"predict: {by_model: {existing: {"served": "by-model"}}}"#,
    );
    let fake = FakeBaseten::start(sc).await.unwrap();
    let c = Client::new(&fake);
    let base = fake.url();
    for path in [
        "/model-mdl00001/production/predict",
        "/model-mdl00001/environments/staging/predict",
        "/model-mdl00001-staging/predict",
        "/model-mdl00001/development/predict",
        "/model-mdl00001/deployment/prod0001/predict",
    ] {
        let (status, body) = predict(&c, &format!("{base}{path}"), json!({})).await;
        assert_eq!(
            (status, body),
            (200, json!({"served": "by-model"})),
            "{path}"
        );
    }
    for path in [
        "/model-mdl00001/environments/nope/predict",
        "/model-mdl00001/deployment/unknown/predict",
        "/model-zzzzzzzz/production/predict",
    ] {
        let (status, body) = predict(&c, &format!("{base}{path}"), json!({})).await;
        assert_eq!(status, 404, "{path}");
        assert!(body["error"].is_string());
    }
    // The same by Host header, as on the real inference hosts.
    let r = c
        .http
        .post(format!("{base}/predict"))
        .header("Host", "model-mdl00001-staging.api.baseten.co")
        .header("Authorization", c.auth())
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let endpoints: Vec<String> = fake.requests().into_iter().map(|e| e.endpoint).collect();
    assert!(
        endpoints.iter().all(|e| e == "inference.predict"),
        "{endpoints:?}"
    );
    // truss's chainlet keepalive reaches the model server's own routes.
    let r = c
        .http
        .get(format!(
            "{base}/model-mdl00001/deployment/prod0001/sync/v1/models/model"
        ))
        .header("Authorization", c.auth())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(fake.requests().last().unwrap().endpoint, "inference.sync");
}

#[tokio::test]
async fn streaming_answers_openai_style_chunks() {
    let sc = scenario_with(
        "[{id: prod0001, name: p, environment: production}]",
        "predict: {stream: {tokens: 3, token: hi, token_delay_ms: 5}}",
    );
    let fake = FakeBaseten::start(sc).await.unwrap();
    let c = Client::new(&fake);
    let r = c
        .http
        .post(format!("{}/model-mdl00001/production/predict", fake.url()))
        .header("Authorization", c.auth())
        .json(&json!({"prompt": "x", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let text = r.text().await.unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    let chunk = r#"data: {"choices":[{"delta":{"content":"hi"}}]}"#;
    assert_eq!(lines, [chunk, chunk, chunk, "data: [DONE]"]);
}

#[tokio::test]
async fn scaled_to_zero_wakes_and_answers() {
    let sc = scenario_with(
        "[{id: prod0001, name: p, status: SCALED_TO_ZERO, environment: production}]",
        "",
    );
    let fake = FakeBaseten::start(sc).await.unwrap();
    let c = Client::new(&fake);
    let (status, body) = predict(
        &c,
        &format!("{}/model-mdl00001/production/predict", fake.url()),
        json!({"x": 2}),
    )
    .await;
    assert_eq!((status, body), (200, json!({"echo": {"x": 2}})));
    assert_eq!(fake.deployments()[0].status, "ACTIVE");
}

#[tokio::test]
async fn waking_takes_wake_seconds_of_scenario_time() {
    let mut sc = scenario_with(
        "[{id: prod0001, name: p, status: SCALED_TO_ZERO, environment: production}]",
        "",
    );
    sc.wake_seconds = 30.0;
    let fake = std::sync::Arc::new(FakeBaseten::start(sc).await.unwrap());
    let c = Client::new(&fake);
    let url = format!("{}/model-mdl00001/production/predict", fake.url());
    // What happened, in the order it happened: the answer must come after
    // the clock passed the wake time, never before.
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let pending = tokio::spawn({
        let http = c.http.clone();
        let auth = c.auth();
        let events = events.clone();
        async move {
            let status = http
                .post(url)
                .header("Authorization", auth)
                .json(&json!({}))
                .send()
                .await
                .unwrap()
                .status();
            events.lock().unwrap().push("answered");
            status
        }
    });
    // The request has reached the fake once it started the wake (a hang
    // guard, not a speed check: the clock stands still until it has).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while fake.deployments()[0].status != "WAKING_UP" {
        assert!(std::time::Instant::now() < deadline, "never started waking");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    events.lock().unwrap().push("clock advanced");
    fake.clock().advance(30.0);
    assert_eq!(pending.await.unwrap(), 200);
    assert_eq!(*events.lock().unwrap(), ["clock advanced", "answered"]);
    assert_eq!(fake.deployments()[0].status, "ACTIVE");
}

#[tokio::test]
async fn not_ready_is_503_and_deactivated_is_404() {
    let sc = scenario_with(
        r#"[{id: build001, name: b, status: BUILDING},
            {id: fail0001, name: f, status: BUILD_FAILED},
            {id: gone0001, name: g, status: INACTIVE}]"#,
        "",
    );
    let fake = FakeBaseten::start(sc).await.unwrap();
    let c = Client::new(&fake);
    for (dep, want) in [("build001", 503), ("fail0001", 503), ("gone0001", 404)] {
        let (status, body) = predict(
            &c,
            &format!("{}/model-mdl00001/deployment/{dep}/predict", fake.url()),
            json!({}),
        )
        .await;
        assert_eq!(status, want, "{dep}");
        assert!(body["error"].as_str().is_some(), "{body}");
    }
}

#[tokio::test]
async fn a_new_deployment_serves_once_its_timeline_says_so() {
    let mut sc = Scenario::default().with_manual_clock();
    sc.deployments.default = vec![(0.0, "BUILDING".into()), (10.0, "ACTIVE".into())];
    let fake = FakeBaseten::start(sc).await.unwrap();
    let c = Client::new(&fake);
    let creds = c.credentials("model_s3_upload_credentials").await;
    c.upload(&fake, &creds, truss_tar("late")).await;
    let data = c
        .data(
            &create_model_doc("late", creds["s3_key"].as_str().unwrap(), ""),
            create_vars(None),
        )
        .await;
    let mv = &data["create_model_from_truss"]["model_version"];
    let url = format!(
        "{}/deployment/{}/predict",
        mv["oracle"]["hostname"].as_str().unwrap(),
        mv["id"].as_str().unwrap()
    );
    assert_eq!(predict(&c, &url, json!({})).await.0, 503);
    // Production has no current deployment until the promotion succeeds.
    let prod = format!(
        "{}/production/predict",
        mv["oracle"]["hostname"].as_str().unwrap()
    );
    assert_eq!(predict(&c, &prod, json!({})).await.0, 404);
    fake.clock().set(10.0);
    assert_eq!(predict(&c, &url, json!({})).await.0, 200);
    assert_eq!(predict(&c, &prod, json!({})).await.0, 200);
}
