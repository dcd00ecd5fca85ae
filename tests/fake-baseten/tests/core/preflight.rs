//! The push preflight (`POST /v1/prepare_model_upload`) and the price of
//! what a deployment runs on (`GET /v1/instance_types`,
//! `GET /v1/instance_type_prices`, `DeploymentV1.instance_type_name` and
//! `autoscaling_settings`).

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::{Fault, Scenario};
use serde_json::{Value, json};

use crate::common::{Client, config_b64, truss_tar};

const MODEL: &str = "mdl00001";

fn scenario(extra: &str) -> Scenario {
    Scenario::from_yaml(&format!(
        r#"
manual_clock: true
teams: [{{id: team0001, name: ml, default: true}}]
models:
  - id: {MODEL}
    name: existing
    environments: [staging]
    deployments:
      - {{id: old00001, name: abc1234, environment: production}}
{extra}
"#
    ))
    .unwrap()
}

/// The payload a push of a new deployment of the existing model carries.
fn payload(deployment: Value) -> Value {
    let mut d = json!({
        "config": {"model_name": "existing", "resources": {"cpu": "1"}},
        "deployment_name": "def5678",
        "environment_name": "staging",
        "labels": {"truss_push_pull_request": "o/r#7"},
        "deploy_timeout_minutes": 45,
    });
    for (k, v) in deployment.as_object().unwrap() {
        d[k] = v.clone();
    }
    json!({"model_id": MODEL, "dry_run": true, "deployment": d})
}

async fn prepare(c: &Client, body: Value) -> (u16, Value) {
    let (s, v) = c.post("/v1/prepare_model_upload", Some(body)).await;
    (s.as_u16(), v)
}

#[tokio::test]
async fn a_dry_run_validates_the_payload_and_issues_nothing() {
    let fake = FakeBaseten::start(scenario("")).await.unwrap();
    let c = Client::new(&fake);
    let (s, v) = prepare(&c, payload(json!({}))).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v,
        json!({"creds": null, "s3_bucket": null, "s3_key": null, "s3_region": null})
    );
    // A new model: the name path, team defaulted or named.
    let new = json!({"name": "fresh", "team_id": "team0001", "dry_run": true,
        "deployment": {"config": {"model_name": "fresh"}, "environment_name": "production"}});
    assert_eq!(prepare(&c, new).await.0, 200);
}

#[tokio::test]
async fn the_platform_refuses_what_the_create_would_refuse() {
    let fake = FakeBaseten::start(scenario("")).await.unwrap();
    let c = Client::new(&fake);
    for (what, body, status, says) in [
        (
            "a config field truss does not know",
            payload(json!({"config": {"model_name": "m", "resourcez": {}}})),
            400,
            "resourcez",
        ),
        (
            "a config field of the wrong type",
            payload(json!({"config": {"requirements": "torch"}})),
            400,
            "requirements",
        ),
        (
            "a deployment name outside the charset",
            payload(json!({"deployment_name": "pr 7"})),
            400,
            "pr 7",
        ),
        (
            "a deployment name the model already has",
            payload(json!({"deployment_name": "abc1234"})),
            400,
            "abc1234",
        ),
        (
            "an environment that does not exist",
            payload(json!({"environment_name": "canary"})),
            404,
            "canary",
        ),
        (
            "a timeout out of range",
            payload(json!({"deploy_timeout_minutes": 5})),
            400,
            "deploy_timeout_minutes",
        ),
        (
            "a model the key cannot see",
            json!({"model_id": "nomodel", "dry_run": true, "deployment": {"config": {}}}),
            404,
            "nomodel",
        ),
        (
            "both name and model_id",
            json!({"model_id": MODEL, "name": "x", "dry_run": true, "deployment": {"config": {}}}),
            400,
            "Exactly one",
        ),
        (
            "a new model whose name is taken",
            json!({"name": "existing", "dry_run": true, "deployment": {"config": {}}}),
            400,
            "existing",
        ),
        (
            "a new model into an environment it will not have",
            json!({"name": "fresh", "dry_run": true, "deployment": {"config": {}, "environment_name": "staging"}}),
            404,
            "staging",
        ),
    ] {
        let (s, v) = prepare(&c, body).await;
        assert_eq!(s, status, "{what}: {v}");
        let code = if status == 404 {
            "RESOURCE_NOT_FOUND"
        } else {
            "VALIDATION_ERROR"
        };
        assert_eq!(v["code"], code, "{what}: {v}");
        assert!(v["message"].as_str().unwrap().contains(says), "{what}: {v}");
    }
    assert!(
        fake.s3().events().is_empty(),
        "a preflight never touches S3"
    );
}

#[tokio::test]
async fn knobs_refuse_allow_taken_names_hide_the_endpoint_or_fail_it() {
    let refusing = FakeBaseten::start(scenario(
        "prepare_model_upload: {refuse: {status: 403, message: \"This key may not push\"}}",
    ))
    .await
    .unwrap();
    let (s, v) = prepare(&Client::new(&refusing), payload(json!({}))).await;
    assert_eq!(s, 403);
    assert_eq!(v["message"], "This key may not push");

    let lenient = FakeBaseten::start(scenario(
        "prepare_model_upload: {refuse_taken_names: false}",
    ))
    .await
    .unwrap();
    let (s, v) = prepare(
        &Client::new(&lenient),
        payload(json!({"deployment_name": "abc1234"})),
    )
    .await;
    assert_eq!(s, 200, "{v}");

    let invalid = FakeBaseten::start(scenario(
        "truss_validation: {success: false, errors: [\"resources.accelerator: unknown GPU\"]}",
    ))
    .await
    .unwrap();
    let (s, v) = prepare(&Client::new(&invalid), payload(json!({}))).await;
    assert_eq!(s, 400);
    assert!(
        v["message"].as_str().unwrap().contains("unknown GPU"),
        "{v}"
    );

    // The endpoint absent (an older platform): 404 with no platform body.
    let absent = FakeBaseten::start(scenario(
        "faults: [{endpoint: rest.prepare_model_upload, status: 404, text: \"Not Found\"}]",
    ))
    .await
    .unwrap();
    let r = reqwest_post(&absent, payload(json!({}))).await;
    assert_eq!(r.0, 404);
    assert_eq!(r.1, "Not Found", "plain text, not the platform's error");
    assert!(r.2.starts_with("text/plain"), "{}", r.2);

    let failing = FakeBaseten::start(
        scenario("").with_fault(Fault::status("rest.prepare_model_upload", 500).times(3)),
    )
    .await
    .unwrap();
    let c = Client::new(&failing);
    for _ in 0..3 {
        assert_eq!(prepare(&c, payload(json!({}))).await.0, 500);
    }
    assert_eq!(
        prepare(&c, payload(json!({}))).await.0,
        200,
        "then it answers"
    );
}

/// (status, body text, content type).
async fn reqwest_post(fake: &FakeBaseten, body: Value) -> (u16, String, String) {
    let c = Client::new(fake);
    let r = c
        .http
        .post(format!("{}/v1/prepare_model_upload", c.base))
        .header("Authorization", c.auth())
        .json(&body)
        .send()
        .await
        .unwrap();
    let ct = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (r.status().as_u16(), r.text().await.unwrap(), ct)
}

#[tokio::test]
async fn without_dry_run_it_issues_credentials_a_create_accepts() {
    let fake = FakeBaseten::start(scenario("")).await.unwrap();
    let c = Client::new(&fake);
    let mut body = payload(json!({}));
    body["dry_run"] = json!(false);
    let (s, v) = prepare(&c, body).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["s3_bucket"], fake.bucket().as_str());
    assert_eq!(v["s3_region"], fake.region().as_str());
    let mut creds = v["creds"].clone();
    creds["s3_bucket"] = v["s3_bucket"].clone();
    creds["s3_key"] = v["s3_key"].clone();
    c.upload(&fake, &creds, truss_tar("existing")).await;
    let doc = format!(
        r#"mutation {{ create_model_version_from_truss(model_id: "{MODEL}" s3_key: "{key}"
            config: "{config}" semver_bump: "MINOR" name: "def5678")
            {{ model_version {{ id }} }} }}"#,
        key = v["s3_key"].as_str().unwrap(),
        config = config_b64("existing"),
    );
    let data = c.data(&doc, Value::Null).await;
    assert!(
        data["create_model_version_from_truss"]["model_version"]["id"].is_string(),
        "{data}"
    );
}

#[tokio::test]
async fn instance_types_and_prices_by_name() {
    let fake = FakeBaseten::start(scenario(
        "deployment_settings: {by_model: {existing: {instance_type: A10Gx4x16, min_replica: 1, max_replica: 3}}}",
    ))
    .await
    .unwrap();
    let c = Client::new(&fake);
    let (s, v) = c.get("/v1/instance_types").await;
    assert_eq!(s, 200);
    let names: Vec<&str> = v["instance_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["1x2", "A10Gx4x16"]);
    let (s, v) = c.get("/v1/instance_type_prices").await;
    assert_eq!(s, 200);
    let gpu = &v["instance_types"][1];
    assert_eq!(gpu["instance_type"]["name"], "A10Gx4x16");
    assert_eq!(gpu["instance_type"]["gpu_type"], "A10G");
    assert_eq!(gpu["price"], 0.02012);

    // The scenario's deployment runs on the model's settings.
    let (_, d) = c
        .get(&format!("/v1/models/{MODEL}/deployments/old00001"))
        .await;
    assert_eq!(d["instance_type_name"], "A10Gx4x16");
    assert_eq!(d["autoscaling_settings"]["min_replica"], 1);
    assert_eq!(d["autoscaling_settings"]["max_replica"], 3);
}

#[tokio::test]
async fn a_new_deployment_has_no_autoscaling_settings_before_it_is_ready() {
    let fake = FakeBaseten::start(scenario(
        "deployment_settings: {default: {instance_type: A10Gx4x16, min_replica: 2, max_replica: 4}}",
    ))
    .await
    .unwrap();
    let c = Client::new(&fake);
    let creds = c.credentials("model_s3_upload_credentials").await;
    c.upload(&fake, &creds, truss_tar("existing")).await;
    let doc = format!(
        r#"mutation {{ create_model_version_from_truss(model_id: "{MODEL}" s3_key: "{key}"
            config: "{config}" semver_bump: "MINOR" name: "v2")
            {{ model_version {{ id }} }} }}"#,
        key = creds["s3_key"].as_str().unwrap(),
        config = config_b64("existing"),
    );
    let id =
        c.data(&doc, Value::Null).await["create_model_version_from_truss"]["model_version"]["id"]
            .as_str()
            .unwrap()
            .to_string();
    let path = format!("/v1/models/{MODEL}/deployments/{id}");
    let (_, d) = c.get(&path).await;
    assert_eq!(d["status"], "BUILDING");
    assert_eq!(d["autoscaling_settings"], Value::Null);
    assert_eq!(d["instance_type_name"], "A10Gx4x16");
    fake.clock().set(10.0);
    let (_, d) = c.get(&path).await;
    assert_eq!(d["status"], "ACTIVE");
    assert_eq!(d["autoscaling_settings"]["min_replica"], 2);
    assert_eq!(d["autoscaling_settings"]["max_replica"], 4);
}

#[tokio::test]
async fn hostile_prices_are_served_as_scripted() {
    let fake = FakeBaseten::start(scenario(
        r#"instance_types:
  - {id: neg, name: neg, memory_limit_mib: 1, millicpu_limit: 1, price: -0.5}
  - {id: text, name: text, memory_limit_mib: 1, millicpu_limit: 1, price: "0.01"}
  - {id: other, name: other, memory_limit_mib: 1, millicpu_limit: 1, price: 0.02, price_name: neg}
  - {id: unpriced, name: unpriced, memory_limit_mib: 1, millicpu_limit: 1}
"#,
    ))
    .await
    .unwrap();
    let c = Client::new(&fake);
    let (_, types) = c.get("/v1/instance_types").await;
    assert_eq!(types["instance_types"].as_array().unwrap().len(), 4);
    let (s, v) = c.get("/v1/instance_type_prices").await;
    assert_eq!(s, 200);
    let prices: Vec<(Value, Value)> = v["instance_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["instance_type"]["name"].clone(), p["price"].clone()))
        .collect();
    assert_eq!(
        prices,
        [
            (json!("neg"), json!(-0.5)),
            (json!("text"), json!("0.01")),
            (json!("neg"), json!(0.02)),
        ],
        "a negative price, a string, another type's name; `unpriced` missing"
    );
    // A price that is not a number is off the published schema: the check
    // finds it (claimed here, on purpose).
    let found = fake.take_violations();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].path.ends_with("/instance_type_prices"),
        "{found:?}"
    );
}

#[tokio::test]
async fn the_documented_rest_push_commits_what_the_preflight_passed() {
    let fake = FakeBaseten::start(scenario("")).await.unwrap();
    let c = Client::new(&fake);
    let mut body = payload(json!({"environment_name": null}));
    body["dry_run"] = json!(false);
    let (s, v) = prepare(&c, body.clone()).await;
    assert_eq!(s, 200, "{v}");
    let key = v["s3_key"].as_str().unwrap().to_string();
    let commit = json!({"source": {"kind": "model_archive", "s3_key": key, "deployment": body["deployment"]}});
    let path = format!("/v1/models/{MODEL}/deployments");
    let (s, v) = c.post(&path, Some(commit.clone())).await;
    assert_eq!(s, 400, "nothing uploaded yet: {v}");
    let mut creds = prepare(&c, body).await.1;
    let key = creds["s3_key"].as_str().unwrap().to_string();
    creds["creds"]["s3_bucket"] = creds["s3_bucket"].clone();
    creds["creds"]["s3_key"] = json!(key);
    c.upload(&fake, &creds["creds"], truss_tar("existing"))
        .await;
    let mut commit = commit;
    commit["source"]["s3_key"] = json!(key);
    let (s, v) = c.post(&path, Some(commit.clone())).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["model"]["id"], MODEL);
    assert_eq!(v["deployment"]["name"], "def5678");
    assert_eq!(
        v["deployment"]["labels"]["truss_push_pull_request"],
        "o/r#7"
    );
    let (s, v) = c.post(&path, Some(commit)).await;
    assert_eq!(s, 400, "the name is taken now: {v}");

    // A new model through POST /v1/models.
    let creds = prepare(
        &c,
        json!({"name": "fresh", "deployment": {"config": {"model_name": "fresh"}}}),
    )
    .await
    .1;
    let mut up = creds["creds"].clone();
    up["s3_bucket"] = creds["s3_bucket"].clone();
    up["s3_key"] = creds["s3_key"].clone();
    c.upload(&fake, &up, truss_tar("fresh")).await;
    let (s, v) = c
        .post(
            "/v1/models",
            Some(json!({"source": {"kind": "model_archive", "name": "fresh", "s3_key": creds["s3_key"],
                "deployment": {"config": {"model_name": "fresh"}, "deployment_name": "first"}}})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["model"]["name"], "fresh");
    assert_eq!(v["deployment"]["name"], "first");
}
