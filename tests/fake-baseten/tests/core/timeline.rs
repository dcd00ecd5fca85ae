//! Status timelines, promotions, deactivation and logs read at chosen
//! scenario instants.

use std::time::{Duration, Instant};

use fake_baseten::FakeBaseten;
use serde_json::{Value, json};

use crate::common::{Client, create_vars, scenario, truss_tar};

/// Pushes a new version of the existing model of a real deployment's
/// recorded history (`scaled-to-zero-history.yaml`) into production and returns (model id,
/// deployment id).
async fn push_new_version(c: &Client, fake: &FakeBaseten) -> (String, String) {
    let creds = c.credentials("model_s3_upload_credentials").await;
    c.upload(fake, &creds, truss_tar("seed-model")).await;
    let q = format!(
        r#"mutation ($trussUserEnv: String, $userDeployMetadata: JSONString, $rawConfig: String) {{
            create_model_version_from_truss(
                model_id: "seedmodl"
                s3_key: "{key}"
                config: "{config}"
                semver_bump: "MINOR"
                truss_user_env: $trussUserEnv
                scale_down_old_production: true
                preserve_env_instance_type: true
                name: "abc1234"
                environment_name: "production"
                deploy_timeout_minutes: 45
                user_deploy_metadata: $userDeployMetadata
                raw_config: $rawConfig
            ) {{ model_version {{ id oracle {{ id name hostname }} instance_type {{ name }} }} }}
        }}"#,
        key = creds["s3_key"].as_str().unwrap(),
        config = crate::common::config_b64("seed-model"),
    );
    let data = c.data(&q, create_vars(None)).await;
    let mv = &data["create_model_version_from_truss"]["model_version"];
    (
        mv["oracle"]["id"].as_str().unwrap().to_string(),
        mv["id"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn the_recorded_history_read_at_chosen_instants_on_a_manual_clock() {
    let fake = FakeBaseten::start(scenario("scaled-to-zero-history.yaml").with_manual_clock())
        .await
        .unwrap();
    let c = Client::new(&fake);
    let (model, dep) = push_new_version(&c, &fake).await;
    assert_eq!(model, "seedmodl");
    for (t, want) in [
        (0.3, "BUILDING"),
        (12.0, "DEPLOYING"),
        (13.0, "SCALED_TO_ZERO"),
        (30.0, "WAKING_UP"),
        (631.0, "ACTIVE"),
    ] {
        fake.clock().set(t);
        let (status, body) = c
            .get(&format!("/v1/models/{model}/deployments/{dep}"))
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["status"], want, "at {t}s: {body}");
        assert_eq!(body["id"], dep);
        assert_eq!(body["name"], "abc1234");
        assert_eq!(body["model_id"], model);
        assert_eq!(body["is_development"], false);
    }
}

#[tokio::test]
async fn deployment_v1_has_every_documented_field() {
    let fake = FakeBaseten::start(scenario("scaled-to-zero-history.yaml").with_manual_clock())
        .await
        .unwrap();
    let c = Client::new(&fake);
    let (model, dep) = push_new_version(&c, &fake).await;
    let (_, body) = c
        .get(&format!("/v1/models/{model}/deployments/{dep}"))
        .await;
    let mut keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "active_replica_count",
            "autoscaling_settings",
            "created_at",
            "environment",
            "id",
            "instance_type_name",
            "is_development",
            "is_production",
            "labels",
            "model_id",
            "name",
            "region",
            "request_backpressure_settings",
            "status"
        ]
    );
    // Not deployed yet: no autoscaling settings, being promoted to production.
    assert_eq!(body["autoscaling_settings"], Value::Null);
    assert_eq!(body["environment"], "production");
    assert_eq!(body["is_production"], true);
    fake.clock().set(700.0);
    let (_, body) = c
        .get(&format!("/v1/models/{model}/deployments/{dep}"))
        .await;
    assert_eq!(body["active_replica_count"], 1);
    assert!(body["autoscaling_settings"]["max_replica"].is_number());
}

#[tokio::test]
async fn scaled_clock_runs_the_recorded_history_in_order() {
    // 631 scenario seconds in about 0.63 real seconds.
    let fake = FakeBaseten::start(scenario("scaled-to-zero-history.yaml").with_time_scale(1000.0))
        .await
        .unwrap();
    let c = Client::new(&fake);
    let started = Instant::now();
    let (model, dep) = push_new_version(&c, &fake).await;
    let order = [
        "BUILDING",
        "DEPLOYING",
        "SCALED_TO_ZERO",
        "WAKING_UP",
        "ACTIVE",
    ];
    let mut seen: Vec<String> = Vec::new();
    loop {
        let (_, body) = c
            .get(&format!("/v1/models/{model}/deployments/{dep}"))
            .await;
        let s = body["status"].as_str().unwrap().to_string();
        if seen.last() != Some(&s) {
            seen.push(s.clone());
        }
        if s == "ACTIVE" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never ACTIVE: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let positions: Vec<usize> = seen
        .iter()
        .map(|s| {
            order
                .iter()
                .position(|o| o == s)
                .expect("a recorded status")
        })
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "out of order: {seen:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn promotion_switches_production_only_when_it_succeeds() {
    let fake = FakeBaseten::start(scenario("scaled-to-zero-history.yaml").with_manual_clock())
        .await
        .unwrap();
    let c = Client::new(&fake);
    let (model, dep) = push_new_version(&c, &fake).await;
    let env = |body: &Value| {
        (
            body["current_deployment"]["id"].clone(),
            body["candidate_deployment"]["id"].clone(),
            body["in_progress_promotion"]["status"].clone(),
        )
    };
    fake.clock().set(13.0);
    let (status, body) = c
        .get(&format!("/v1/models/{model}/environments/production"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        env(&body),
        (json!("seedold1"), json!(dep), json!("RELEASING"))
    );
    assert_eq!(body["in_progress_promotion"]["rolling_deploy"], true);
    fake.clock().set(631.5);
    let (_, body) = c
        .get(&format!("/v1/models/{model}/environments/production"))
        .await;
    assert_eq!(
        env(&body),
        (json!("seedold1"), json!(dep), json!("RAMPING_UP"))
    );
    assert_eq!(
        body["in_progress_promotion"]["percent_traffic_to_new_version"],
        50
    );
    fake.clock().set(633.0);
    let (_, body) = c
        .get(&format!("/v1/models/{model}/environments/production"))
        .await;
    assert_eq!(env(&body), (json!(dep), Value::Null, Value::Null));
    // The list has every environment.
    let (_, list) = c.get(&format!("/v1/models/{model}/environments")).await;
    let names: Vec<&str> = list["environments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["production", "staging"]);
    let (status, body) = c
        .get(&format!("/v1/models/{model}/environments/nope"))
        .await;
    assert_eq!(status, 404);
    assert!(body["message"].is_string());
}

#[tokio::test]
async fn older_api_omits_the_promotion_fields() {
    let mut sc = scenario("scaled-to-zero-history.yaml").with_manual_clock();
    sc.omit_promotion_fields = true;
    let fake = FakeBaseten::start(sc).await.unwrap();
    let c = Client::new(&fake);
    let (_, body) = c.get("/v1/models/seedmodl/environments/production").await;
    assert_eq!(body["current_deployment"]["id"], "seedold1");
    assert!(body.get("candidate_deployment").is_none(), "{body}");
    assert!(body.get("in_progress_promotion").is_none(), "{body}");
}

#[tokio::test]
async fn deactivation_goes_through_deactivating_to_inactive() {
    let fake = FakeBaseten::start(scenario("scaled-to-zero-history.yaml").with_manual_clock())
        .await
        .unwrap();
    let c = Client::new(&fake);
    let (model, dep) = push_new_version(&c, &fake).await;
    fake.clock().set(640.0);
    let url = format!("/v1/models/{model}/deployments/{dep}");
    // The action sends no body at all.
    let (status, body) = c.post(&format!("{url}/deactivate"), None).await;
    assert_eq!((status.as_u16(), body), (200, json!({"success": true})));
    assert_eq!(c.get(&url).await.1["status"], "DEACTIVATING");
    fake.clock().advance(2.0);
    assert_eq!(c.get(&url).await.1["status"], "INACTIVE");
    // With `{}` too, and idempotent.
    let (status, _) = c.post(&format!("{url}/deactivate"), Some(json!({}))).await;
    assert_eq!(status, 200);
    assert_eq!(c.get(&url).await.1["status"], "INACTIVE");
    let (status, body) = c
        .post(
            &format!("/v1/models/{model}/deployments/nope/deactivate"),
            None,
        )
        .await;
    assert_eq!(status, 404);
    assert!(body["message"].as_str().unwrap().contains("nope"));
}

#[tokio::test]
async fn logs_are_newest_first_and_honour_the_window() {
    let fake = FakeBaseten::start(scenario("scaled-to-zero-history.yaml").with_manual_clock())
        .await
        .unwrap();
    let c = Client::new(&fake);
    let (model, dep) = push_new_version(&c, &fake).await;
    let url = format!("/v1/models/{model}/deployments/{dep}/logs");
    fake.clock().set(30.0);
    let (status, body) = c.get(&url).await;
    assert_eq!(status, 200);
    let messages = |b: &Value| -> Vec<String> {
        b["logs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["message"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        messages(&body),
        [
            "Starting replica",
            "Deploying model",
            "Image built",
            "Building image for deployment"
        ]
    );
    let first = &body["logs"][0];
    assert_eq!(first["replica"], "replica-0");
    let ts: u128 = first["timestamp"].as_str().unwrap().parse().unwrap();
    let second: u128 = body["logs"][1]["timestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(ts > second, "nanosecond timestamps, newest first");
    let (_, asc) = c.get(&format!("{url}?direction=asc&limit=2")).await;
    assert_eq!(
        messages(&asc),
        ["Building image for deployment", "Image built"]
    );
    // POST with a body, a window that starts after the third line.
    let start_ms = (second / 1_000_000) as u64 + 1;
    let (status, windowed) = c
        .post(&url, Some(json!({"start_epoch_millis": start_ms})))
        .await;
    assert_eq!(status, 200);
    assert_eq!(messages(&windowed), ["Starting replica"]);
}
