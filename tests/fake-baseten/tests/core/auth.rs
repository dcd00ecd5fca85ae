//! Authentication: the fake's key as `Api-Key` or `Bearer`, 401 otherwise,
//! and S3 left to SigV4.

use fake_baseten::FakeBaseten;
use reqwest::StatusCode;
use serde_json::json;

use crate::common::scenario;

async fn status_with(fake: &FakeBaseten, auth: Option<&str>) -> [StatusCode; 3] {
    let http = crate::common::http();
    let with = |r: reqwest::RequestBuilder| match auth {
        Some(a) => r.header("Authorization", a),
        None => r,
    };
    let gql = with(http.post(format!("{}/graphql/", fake.url())))
        .json(&json!({"query": "{ teams { id } }"}))
        .send()
        .await
        .unwrap()
        .status();
    let rest = with(http.get(format!(
        "{}/v1/models/seedmodl/deployments/seedold1",
        fake.url()
    )))
    .send()
    .await
    .unwrap()
    .status();
    let predict = with(http.post(format!("{}/model-seedmodl/production/predict", fake.url())))
        .json(&json!({"x": 1}))
        .send()
        .await
        .unwrap()
        .status();
    [gql, rest, predict]
}

#[tokio::test]
async fn unknown_keys_get_401_everywhere_and_both_schemes_work() {
    let fake = FakeBaseten::start(scenario("scaled-to-zero-history.yaml"))
        .await
        .unwrap();
    let ok = [StatusCode::OK; 3];
    let denied = [StatusCode::UNAUTHORIZED; 3];
    assert_eq!(status_with(&fake, Some("Api-Key fake-api-key")).await, ok);
    assert_eq!(status_with(&fake, Some("Bearer fake-api-key")).await, ok);
    assert_eq!(status_with(&fake, Some("Api-Key wrong-key")).await, denied);
    assert_eq!(status_with(&fake, Some("Bearer wrong-key")).await, denied);
    assert_eq!(status_with(&fake, Some("Basic fake-api-key")).await, denied);
    assert_eq!(status_with(&fake, None).await, denied);
}

#[tokio::test]
async fn rejections_carry_the_right_body_shapes() {
    let fake = FakeBaseten::start(scenario("scaled-to-zero-history.yaml"))
        .await
        .unwrap();
    let http = crate::common::http();
    let r = http
        .get(format!("{}/v1/models/seedmodl", fake.url()))
        .header("Authorization", "Api-Key nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(body["message"].is_string(), "{body}");
    let r = http
        .post(format!("{}/model-seedmodl/production/predict", fake.url()))
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(body["error"].is_string(), "{body}");
}

#[tokio::test]
async fn s3_is_judged_by_sigv4_not_by_the_api_key() {
    let fake = FakeBaseten::start(scenario("scaled-to-zero-history.yaml"))
        .await
        .unwrap();
    let r = crate::common::http()
        .put(format!(
            "{}/{}/models/x.tgz",
            fake.s3_endpoint(),
            fake.bucket()
        ))
        .header("Authorization", "Api-Key fake-api-key")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_ne!(r.status(), 401);
    assert!(r.status().is_client_error());
    let text = r.text().await.unwrap();
    assert!(text.contains("<Error>"), "{text}");
}
