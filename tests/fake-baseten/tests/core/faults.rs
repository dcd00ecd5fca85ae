//! Fault injection as a client meets it: 429 with Retry-After, 5xx, added
//! latency, dropped connections, counted with `after` and `times`.

use std::time::{Duration, Instant};

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::{Fault, Scenario};
use serde_json::{Value, json};

use crate::common::{Client, scenario};

#[tokio::test]
async fn rate_limited_with_retry_after_then_success() {
    let sc = scenario("scaled-to-zero-history.yaml").with_fault(
        Fault::status("rest.get_deployment", 429)
            .retry_after(3)
            .times(2),
    );
    let fake = FakeBaseten::start(sc).await.unwrap();
    let c = Client::new(&fake);
    let url = format!("{}/v1/models/seedmodl/deployments/seedold1", fake.url());
    for _ in 0..2 {
        let r = c
            .http
            .get(&url)
            .header("Authorization", c.auth())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()["retry-after"], "3");
        assert!(r.json::<Value>().await.unwrap()["message"].is_string());
    }
    let r = c
        .http
        .get(&url)
        .header("Authorization", c.auth())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["status"], "ACTIVE");
    // Other endpoints were never affected.
    assert_eq!(c.get("/v1/models/seedmodl/environments").await.0, 200);
}

#[tokio::test]
async fn dropped_connection_then_success() {
    let fake = FakeBaseten::start(scenario("scaled-to-zero-history.yaml"))
        .await
        .unwrap();
    fake.add_fault(Fault::drop_connection("inference.predict"));
    let c = Client::new(&fake);
    let send = || {
        c.http
            .post(format!("{}/model-seedmodl/production/predict", fake.url()))
            .header("Authorization", c.auth())
            .json(&json!({"x": 1}))
            .send()
    };
    let err = send()
        .await
        .expect_err("the connection is closed without an answer");
    assert!(!err.is_status(), "{err}");
    let ok = send().await.unwrap();
    assert_eq!(ok.status(), 200);
    let log = fake.requests();
    assert_eq!(log[0].status, None);
    assert_eq!(log[0].fault.as_deref(), Some("drop"));
    assert_eq!(log[1].status, Some(200));
}

#[tokio::test]
async fn server_errors_on_a_mutation_skip_and_count() {
    let sc: Scenario = serde_yaml::from_str(
        r#"
faults:
  - {endpoint: "graphql.teams", status: 503, after: 1, times: 2}
  - {endpoint: "graphql.*", status: 500, body: {errors: [{message: "boom"}]}, after: 10}
"#,
    )
    .unwrap();
    let fake = FakeBaseten::start(sc).await.unwrap();
    let c = Client::new(&fake);
    let statuses: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..5 {
            v.push(c.gql("{ teams { id } }", Value::Null).await.0.as_u16());
        }
        v
    };
    assert_eq!(statuses, [200, 503, 503, 200, 200]);
    let fault_log: Vec<Option<String>> = fake.requests().into_iter().map(|e| e.fault).collect();
    assert_eq!(fault_log[1].as_deref(), Some("status 503"));
    assert_eq!(fault_log[3], None);
}

#[tokio::test]
async fn added_latency_delays_the_answer() {
    let slow = Fault {
        endpoint: "graphql.teams".into(),
        delay_ms: 300,
        times: 1,
        ..Fault::default()
    };
    let fake = FakeBaseten::start(Scenario::default().with_fault(slow))
        .await
        .unwrap();
    let c = Client::new(&fake);
    let t = Instant::now();
    let (status, _) = c.gql("{ teams { id } }", Value::Null).await;
    assert_eq!(status, 200, "a pure delay still answers normally");
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    c.gql("{ teams { id } }", Value::Null).await;
    // Only once: the log shows which request the delay was applied to.
    let delays: Vec<Option<String>> = fake.requests().into_iter().map(|e| e.fault).collect();
    assert_eq!(delays, [Some("delay 300ms".to_string()), None]);
}

#[tokio::test]
async fn s3_faults_answer_in_s3_xml() {
    let fake = FakeBaseten::start(Scenario::default()).await.unwrap();
    fake.add_fault(Fault::status("s3.put_object", 503).retry_after(1));
    let r = crate::common::http()
        .put(format!(
            "{}/{}/models/x.tgz",
            fake.s3_endpoint(),
            fake.bucket()
        ))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    assert!(r.text().await.unwrap().contains("<Code>SlowDown</Code>"));
    assert_eq!(fake.requests()[0].endpoint, "s3.put_object");
}
