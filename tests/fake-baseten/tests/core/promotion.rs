//! Promotions a client drives itself: promote, cancel and force cancel for
//! models and chains, the lifecycle over scenario time, new deployments
//! made by a promotion, and environment URLs that follow whichever
//! deployment serves.

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::Scenario;
use serde_json::{Value, json};

use crate::common::{Client, config_b64, scenario as scenario_file, truss_tar};

const MODEL: &str = "mdl00001";

/// One existing model: `old` serves production, `stag` serves staging,
/// `new` serves nothing, `gone` is deactivated. Each answers predict with
/// its own name.
fn scenario(extra: &str) -> Scenario {
    Scenario::from_yaml(&format!(
        r#"
manual_clock: true
models:
  - id: {MODEL}
    name: existing
    environments: [staging]
    deployments:
      - {{id: old00001, name: old, environment: production}}
      - {{id: new00001, name: new}}
      - {{id: stag0001, name: stag, environment: staging}}
      - {{id: gone0001, name: gone, status: INACTIVE}}
{extra}
"#
    ))
    .unwrap()
}

const SERVED_BY_NAME: &str = r#"
predict:
  by_deployment:
    - {name: old, response: {served: old}}
    - {name: new, response: {served: new}}
    - {name: stag, response: {served: stag}}
"#;

async fn promote(c: &Client, env: &str, body: Value) -> (u16, Value) {
    let (s, v) = c
        .post(
            &format!("/v1/models/{MODEL}/environments/{env}/promote"),
            Some(body),
        )
        .await;
    (s.as_u16(), v)
}

async fn cancel(c: &Client, env: &str, force: bool) -> (u16, Value) {
    let action = if force {
        "force_cancel_promotion"
    } else {
        "cancel_promotion"
    };
    let (s, v) = c
        .post(
            &format!("/v1/models/{MODEL}/environments/{env}/{action}"),
            None,
        )
        .await;
    (s.as_u16(), v)
}

async fn env(c: &Client, env: &str) -> Value {
    let (s, v) = c
        .get(&format!("/v1/models/{MODEL}/environments/{env}"))
        .await;
    assert_eq!(s, 200, "{v}");
    v
}

async fn post_json(c: &Client, url: &str) -> (u16, Value) {
    let r = c
        .http
        .post(url)
        .header("Authorization", c.auth())
        .json(&json!({"x": 1}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Which deployment answers production, through both environment URL forms.
async fn served_by_production(c: &Client, fake: &FakeBaseten) -> Value {
    let (s1, a) = post_json(
        c,
        &format!("{}/model-{MODEL}/production/predict", fake.url()),
    )
    .await;
    let (s2, b) = post_json(
        c,
        &format!("{}/model-{MODEL}-production/predict", fake.url()),
    )
    .await;
    assert_eq!((s1, s2), (200, 200), "{a} {b}");
    assert_eq!(a, b, "path and regional forms reach the same deployment");
    a["served"].clone()
}

fn assert_refused(status: u16, body: &Value, want_status: u16, want_in_message: &str) {
    assert_eq!(status, want_status, "{body}");
    let code = if want_status == 404 {
        "RESOURCE_NOT_FOUND"
    } else {
        "VALIDATION_ERROR"
    };
    assert_eq!(body["code"], code, "{body}");
    let msg = body["message"].as_str().unwrap();
    assert!(msg.contains(want_in_message), "{msg}");
}

#[tokio::test]
async fn promote_answers_with_the_deployment_and_refuses_as_the_platform_does() {
    let fake = FakeBaseten::start(scenario("")).await.unwrap();
    let c = Client::new(&fake);
    for (body, want_status, want) in [
        (json!({}), 400, "deployment_id"),
        (json!({"deployment_id": null}), 400, "deployment_id"),
        (json!({"deployment_id": "gone0001"}), 400, "inactive"),
        (json!({"deployment_id": "nope0001"}), 404, "nope0001"),
        (
            json!({"deployment_id": "old00001"}),
            400,
            "already the current",
        ),
        (
            json!({"deployment_id": "new00001", "scale_down_previous_deployment": "no"}),
            400,
            "boolean",
        ),
    ] {
        let (s, v) = promote(&c, "production", body.clone()).await;
        assert_refused(s, &v, want_status, want);
    }
    let (s, v) = promote(&c, "nowhere", json!({"deployment_id": "new00001"})).await;
    assert_refused(s, &v, 404, "nowhere");
    let (s, v) = c
        .post(
            "/v1/models/nomodel/environments/production/promote",
            Some(json!({"deployment_id": "new00001"})),
        )
        .await;
    assert_refused(s.as_u16(), &v, 404, "nomodel");
    // GET is not how one promotes.
    let (s, _) = c
        .get(&format!(
            "/v1/models/{MODEL}/environments/production/promote"
        ))
        .await;
    assert_eq!(s, 405);
    // The three malformed bodies and the GET depart from the published API
    // on purpose; the schema check recorded each.
    assert_eq!(fake.take_violations().len(), 4);

    let (s, d) = promote(
        &c,
        "production",
        json!({"deployment_id": "new00001", "scale_down_previous_deployment": false,
               "preserve_env_instance_type": true}),
    )
    .await;
    assert_eq!(s, 200, "{d}");
    for key in [
        "id",
        "created_at",
        "name",
        "model_id",
        "is_production",
        "is_development",
        "status",
        "active_replica_count",
        "autoscaling_settings",
        "instance_type_name",
        "environment",
        "labels",
    ] {
        assert!(d.get(key).is_some(), "DeploymentV1 lacks {key}: {d}");
    }
    assert_eq!(d["id"], "new00001");
    assert_eq!(d["environment"], "production");
    assert_eq!(d["is_production"], true);
    // Without a script, promoting a ready deployment succeeds at once.
    let prod = env(&c, "production").await;
    assert_eq!(prod["current_deployment"]["id"], "new00001");
    assert_eq!(prod["in_progress_promotion"], Value::Null);
    assert_eq!(prod["candidate_deployment"], Value::Null);

    for force in [false, true] {
        let (s, v) = cancel(&c, "production", force).await;
        assert_refused(s, &v, 400, "no in progress promotion");
    }
    let endpoints: Vec<String> = fake.requests().into_iter().map(|e| e.endpoint).collect();
    for name in [
        "rest.promote",
        "rest.cancel_promotion",
        "rest.force_cancel_promotion",
    ] {
        assert!(endpoints.iter().any(|e| e == name), "{name}: {endpoints:?}");
    }
}

#[tokio::test]
async fn the_lifecycle_follows_the_script_and_the_environment_url_follows_the_traffic() {
    let extra = format!(
        r#"
promote:
  default:
    rolling_deploy: true
    steps:
      - [0, {{status: RELEASING}}]
      - [10, {{status: RAMPING_UP, percent: 20}}]
      - [20, {{status: RAMPING_UP, percent: 60}}]
      - [25, {{status: PAUSED, percent: 60}}]
      - [40, {{status: SUCCEEDED, percent: 100}}]
{SERVED_BY_NAME}"#
    );
    let fake = FakeBaseten::start(scenario(&extra)).await.unwrap();
    let c = Client::new(&fake);
    fake.clock().set(100.0);
    let (s, d) = promote(&c, "production", json!({"deployment_id": "new00001"})).await;
    assert_eq!((s, d["id"].as_str()), (200, Some("new00001")));
    // One promotion in flight per environment.
    let (s, v) = promote(&c, "production", json!({"deployment_id": "stag0001"})).await;
    assert_refused(s, &v, 400, "in progress");

    for (at, status, percent, serves) in [
        (100.0, "RELEASING", 0, "old"),
        (110.0, "RAMPING_UP", 20, "old"),
        (120.0, "RAMPING_UP", 60, "new"),
        (126.0, "PAUSED", 60, "new"),
    ] {
        fake.clock().set(at);
        let e = env(&c, "production").await;
        let p = &e["in_progress_promotion"];
        assert_eq!(p["status"], status, "at {at}: {e}");
        assert_eq!(p["percent_traffic_to_new_version"], percent, "at {at}");
        assert_eq!(p["error_message"], Value::Null);
        assert_eq!(p["rolling_deploy"], true);
        assert_eq!(e["current_deployment"]["id"], "old00001", "at {at}");
        assert_eq!(e["candidate_deployment"]["id"], "new00001", "at {at}");
        assert_eq!(served_by_production(&c, &fake).await, serves, "at {at}");
    }
    fake.clock().set(140.0);
    let e = env(&c, "production").await;
    assert_eq!(e["current_deployment"]["id"], "new00001");
    assert_eq!(e["in_progress_promotion"], Value::Null);
    assert_eq!(served_by_production(&c, &fake).await, "new");
}

#[tokio::test]
async fn a_failed_promotion_keeps_the_old_deployment_serving() {
    let extra = format!(
        r#"
promote:
  sequence:
    - error_message: "health checks failed"
      steps: [[0, {{status: RAMPING_UP, percent: 30}}], [15, {{status: FAILED}}]]
{SERVED_BY_NAME}"#
    );
    let fake = FakeBaseten::start(scenario(&extra)).await.unwrap();
    let c = Client::new(&fake);
    promote(&c, "production", json!({"deployment_id": "new00001"})).await;
    fake.clock().set(15.0);
    let e = env(&c, "production").await;
    assert_eq!(e["in_progress_promotion"]["status"], "FAILED");
    assert_eq!(
        e["in_progress_promotion"]["error_message"],
        "health checks failed"
    );
    assert_eq!(e["candidate_deployment"], Value::Null);
    assert_eq!(e["current_deployment"]["id"], "old00001");
    assert_eq!(served_by_production(&c, &fake).await, "old");
    // A finished promotion no longer blocks the next one (unscripted: at once).
    let (s, _) = promote(&c, "production", json!({"deployment_id": "new00001"})).await;
    assert_eq!(s, 200);
    assert_eq!(served_by_production(&c, &fake).await, "new");
}

#[tokio::test]
async fn a_promotion_makes_a_new_deployment_when_the_platform_would() {
    // (scenario extra, request body, a new deployment expected)
    let cases = [
        ("", json!({"deployment_id": "new00001"}), false),
        // Already serving staging: production gets a copy.
        ("", json!({"deployment_id": "stag0001"}), true),
        (
            "promote: {redeploy_on_promotion: [production]}",
            json!({"deployment_id": "new00001"}),
            true,
        ),
        (
            "promote: {instance_type_differs: [production]}",
            json!({"deployment_id": "new00001"}),
            true,
        ),
        (
            "promote: {instance_type_differs: [production]}",
            json!({"deployment_id": "new00001", "preserve_env_instance_type": false}),
            false,
        ),
    ];
    for (extra, body, want_new) in cases {
        let fake = FakeBaseten::start(scenario(&format!("{extra}\n{SERVED_BY_NAME}")))
            .await
            .unwrap();
        let c = Client::new(&fake);
        let asked = body["deployment_id"].as_str().unwrap().to_string();
        let (s, d) = promote(&c, "production", body.clone()).await;
        assert_eq!(s, 200, "{d}");
        let id = d["id"].as_str().unwrap().to_string();
        assert_eq!(id != asked, want_new, "{extra} {body}: {d}");
        let e = env(&c, "production").await;
        assert_eq!(
            e["promotion_settings"]["redeploy_on_promotion"],
            extra.contains("redeploy"),
            "{e}"
        );
        if !want_new {
            assert_eq!(e["current_deployment"]["id"], asked);
            continue;
        }
        // The copy initialises first: the promotion waits for it.
        let snap = fake.deployments();
        let copy = snap.iter().find(|x| x.id == id).unwrap();
        assert_eq!(copy.copied_from.as_deref(), Some(asked.as_str()));
        assert_eq!(copy.status, "DEPLOYING");
        assert_eq!(d["status"], "DEPLOYING");
        assert_eq!(d["name"], snap.iter().find(|x| x.id == asked).unwrap().name);
        assert_eq!(e["in_progress_promotion"]["status"], "RELEASING");
        assert_eq!(e["candidate_deployment"]["id"], id.as_str());
        assert_eq!(e["current_deployment"]["id"], "old00001");
        fake.clock().set(10.0);
        let e = env(&c, "production").await;
        assert_eq!(e["current_deployment"]["id"], id.as_str(), "{e}");
        assert_eq!(e["current_deployment"]["status"], "ACTIVE");
        // The copy answers as its source does.
        let source_name = if asked == "stag0001" { "stag" } else { "new" };
        assert_eq!(served_by_production(&c, &fake).await, source_name);
        if asked == "stag0001" {
            let staging = env(&c, "staging").await;
            assert_eq!(staging["current_deployment"]["id"], "stag0001");
        }
    }
}

#[tokio::test]
async fn cancel_ramps_down_when_traffic_moved_and_the_old_deployment_keeps_serving() {
    let extra = format!(
        r#"
promote:
  ramp_down_seconds: 10
  default:
    steps:
      - [0, {{status: RELEASING}}]
      - [10, {{status: RAMPING_UP, percent: 80}}]
      - [60, {{status: SUCCEEDED, percent: 100}}]
{SERVED_BY_NAME}"#
    );
    let fake = FakeBaseten::start(scenario(&extra)).await.unwrap();
    let c = Client::new(&fake);

    // Nothing moved yet: canceled at once.
    promote(&c, "production", json!({"deployment_id": "new00001"})).await;
    fake.clock().set(5.0);
    let (s, v) = cancel(&c, "production", false).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "CANCELED");
    assert!(v["message"].as_str().unwrap().contains("production"));
    let e = env(&c, "production").await;
    assert_eq!(e["in_progress_promotion"]["status"], "CANCELED");
    assert_eq!(e["candidate_deployment"], Value::Null);
    assert_eq!(e["current_deployment"]["id"], "old00001");

    // Traffic moved: ramping down first.
    promote(&c, "production", json!({"deployment_id": "new00001"})).await;
    fake.clock().set(20.0);
    assert_eq!(served_by_production(&c, &fake).await, "new");
    let (s, v) = cancel(&c, "production", false).await;
    assert_eq!(
        (s, v["status"].as_str()),
        (200, Some("RAMPING_DOWN")),
        "{v}"
    );
    for (at, status, percent, serves) in [
        (20.0, "RAMPING_DOWN", 80, "new"),
        (25.0, "RAMPING_DOWN", 40, "old"),
        (30.0, "CANCELED", 0, "old"),
        // Past the time the script would have succeeded.
        (90.0, "CANCELED", 0, "old"),
    ] {
        fake.clock().set(at);
        let e = env(&c, "production").await;
        assert_eq!(e["in_progress_promotion"]["status"], status, "at {at}");
        assert_eq!(
            e["in_progress_promotion"]["percent_traffic_to_new_version"], percent,
            "at {at}"
        );
        assert_eq!(e["current_deployment"]["id"], "old00001", "at {at}");
        assert_eq!(served_by_production(&c, &fake).await, serves, "at {at}");
    }
}

#[tokio::test]
async fn force_cancel_rolls_back_at_once() {
    let extra = format!(
        r#"
promote:
  sequence:
    - rolling_deploy: true
      steps: [[0, {{status: RAMPING_UP, percent: 100}}], [60, {{status: SUCCEEDED, percent: 100}}]]
    - steps: [[0, {{status: RAMPING_UP, percent: 10}}], [600, {{status: SUCCEEDED, percent: 100}}]]
{SERVED_BY_NAME}"#
    );
    let fake = FakeBaseten::start(scenario(&extra)).await.unwrap();
    let c = Client::new(&fake);
    promote(&c, "production", json!({"deployment_id": "new00001"})).await;
    fake.clock().set(30.0);
    assert_eq!(served_by_production(&c, &fake).await, "new");
    let (s, v) = cancel(&c, "production", true).await;
    assert_eq!((s, v), (200, json!({"success": true})));
    let e = env(&c, "production").await;
    assert_eq!(e["in_progress_promotion"]["status"], "CANCELED");
    assert_eq!(
        e["in_progress_promotion"]["percent_traffic_to_new_version"],
        0
    );
    assert_eq!(e["current_deployment"]["id"], "old00001");
    assert_eq!(served_by_production(&c, &fake).await, "old");
    let (s, v) = cancel(&c, "production", true).await;
    assert_refused(s, &v, 400, "no in progress promotion");
    // Documented for rolling promotions only: any other is refused and
    // stays in flight.
    let (s, v) = promote(&c, "production", json!({"deployment_id": "new00001"})).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = cancel(&c, "production", true).await;
    assert_refused(s, &v, 400, "not a rolling promotion");
    let e = env(&c, "production").await;
    assert_eq!(e["candidate_deployment"]["id"], "new00001", "{e}");
}

#[tokio::test]
async fn a_deployment_can_fail_only_behind_its_environment_and_promoting_back_restores() {
    let extra = r#"
predict:
  by_deployment:
    - {name: new, via: environment, status: 500}
    - {name: old, response: {served: old}}
"#;
    let fake = FakeBaseten::start(scenario(extra)).await.unwrap();
    let c = Client::new(&fake);
    let own = format!("{}/model-{MODEL}/deployment/new00001/predict", fake.url());
    let (s, v) = post_json(&c, &own).await;
    assert_eq!((s, v), (200, json!({"echo": {"x": 1}})));
    let (s, _) = promote(&c, "production", json!({"deployment_id": "new00001"})).await;
    assert_eq!(s, 200);
    let prod = format!("{}/model-{MODEL}/production/predict", fake.url());
    let (s, v) = post_json(&c, &prod).await;
    assert_eq!(s, 500, "{v}");
    assert!(v["error"].as_str().unwrap().contains("new00001"), "{v}");
    // Still fine on its own URL while it serves the environment.
    assert_eq!(post_json(&c, &own).await.0, 200);
    // The rollback: the demoted deployment is reused, not copied.
    let (s, d) = promote(&c, "production", json!({"deployment_id": "old00001"})).await;
    assert_eq!((s, d["id"].as_str()), (200, Some("old00001")), "{d}");
    assert_eq!(
        env(&c, "production").await["current_deployment"]["id"],
        "old00001"
    );
    assert_eq!(served_by_production(&c, &fake).await, "old");
}

/// Deploys one chain deployment of `hello-chain` (a single chainlet).
pub(crate) async fn deploy_chain(c: &Client, fake: &FakeBaseten, name: &str) -> (String, String) {
    let creds = c.credentials("model_s3_upload_credentials").await;
    c.upload(fake, &creds, truss_tar("Hello-0123abcd")).await;
    let q = format!(
        r#"mutation {{
            deploy_chain_atomic(
                chain_name: "hello-chain"
                deployment_name: "{name}"
                is_draft: false
                entrypoint: {{
                    name: "Hello",
                    oracle: {{
                        model_name: "Hello-0123abcd",
                        s3_key: "{key}",
                        encoded_config_str: "{config}",
                        semver_bump: "MINOR"
                    }}
                }}
                dependencies: []
            ) {{ chain_deployment {{ id chain {{ id }} }} }}
        }}"#,
        key = creds["s3_key"].as_str().unwrap(),
        config = config_b64("Hello-0123abcd"),
    );
    let data = c.data(&q, Value::Null).await;
    let cd = &data["deploy_chain_atomic"]["chain_deployment"];
    (
        cd["chain"]["id"].as_str().unwrap().to_string(),
        cd["id"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn chains_promote_as_documented_with_no_cancel_and_no_promotion_status() {
    let sc = Scenario::from_yaml(
        r#"
manual_clock: true
chains: [{name: hello-chain, environments: [staging]}]
chainlets: {default: [[0, MODEL_READY]]}
promote:
  sequence:
    - steps: [[0, {status: RAMPING_UP, percent: 60}], [30, {status: SUCCEEDED, percent: 100}]]
predict:
  by_deployment:
    - {model: hello-chain, created: 0, response: {served: first}}
    - {model: hello-chain, created: 1, response: {served: second}}
"#,
    )
    .unwrap();
    let fake = FakeBaseten::start(sc).await.unwrap();
    let c = Client::new(&fake);
    let (chain, first) = deploy_chain(&c, &fake, "one").await;
    let (_, second) = deploy_chain(&c, &fake, "two").await;
    let base = format!("/v1/chains/{chain}/environments");
    let run = async |env_path: &str| -> Value {
        let (s, v) = post_json(
            &c,
            &format!("{}/chain-{chain}/{env_path}/run_remote", fake.url()),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        v["served"].clone()
    };
    assert_eq!(run("production").await, "first");

    // The published API has no chain cancel: both paths are unknown.
    for action in ["cancel_promotion", "force_cancel_promotion"] {
        let (s, _) = c.post(&format!("{base}/production/{action}"), None).await;
        assert_eq!(s.as_u16(), 404, "{action}");
    }
    // The schema check recorded both as unknown paths.
    assert_eq!(fake.take_violations().len(), 2);

    // Promote the second chain deployment: scripted at 60 % at once.
    let (s, d) = c
        .post(
            &format!("{base}/production/promote"),
            Some(json!({"deployment_id": second, "scale_down_previous_deployment": true})),
        )
        .await;
    assert_eq!(s, 200, "{d}");
    for key in [
        "id",
        "created_at",
        "chain_id",
        "environment",
        "chainlets",
        "status",
    ] {
        assert!(d.get(key).is_some(), "ChainDeploymentV1 lacks {key}: {d}");
    }
    assert_eq!(d["id"], second.as_str());
    assert_eq!(d["environment"], "production");
    let (_, e) = c.get(&format!("{base}/production")).await;
    // ChainEnvironmentV1: a candidate and the promotion settings, no
    // promotion status.
    assert!(e.get("in_progress_promotion").is_none(), "{e}");
    assert!(e["promotion_settings"].is_object(), "{e}");
    assert_eq!(e["candidate_deployment"]["id"], second.as_str());
    assert_eq!(e["current_deployment"]["id"], first.as_str());
    assert_eq!(run("production").await, "second");

    // A second promotion while one is in flight is refused; deactivating
    // the candidate ends its promotion, and the first serves again.
    let (s, v) = c
        .post(
            &format!("{base}/production/promote"),
            Some(json!({"deployment_id": first})),
        )
        .await;
    assert_refused(s.as_u16(), &v, 400, "already has a promotion in progress");
    let (s, _) = c
        .post(
            &format!("/v1/chains/{chain}/deployments/{second}/deactivate"),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 200);
    let (_, e) = c.get(&format!("{base}/production")).await;
    assert_eq!(e["candidate_deployment"], Value::Null, "{e}");
    assert_eq!(e["current_deployment"]["id"], first.as_str());
    assert_eq!(run("production").await, "first");

    // The first serves production, so staging gets a copy of it (unscripted:
    // the copy's readiness decides).
    let (s, d) = c
        .post(
            &format!("{base}/staging/promote"),
            Some(json!({"deployment_id": first})),
        )
        .await;
    assert_eq!(s, 200, "{d}");
    let copy = d["id"].as_str().unwrap().to_string();
    assert_ne!(copy, first);
    assert_eq!(d["status"], "DEPLOYING");
    assert_eq!(d["chainlets"][0]["name"], "Hello");
    let (_, e) = c.get(&format!("{base}/staging")).await;
    assert_eq!(e["candidate_deployment"]["id"], copy.as_str(), "{e}");
    fake.clock().set(10.0);
    let (_, e) = c.get(&format!("{base}/staging")).await;
    assert_eq!(e["current_deployment"]["id"], copy.as_str(), "{e}");
    assert_eq!(run("environments/staging").await, "first");
    assert_eq!(run("production").await, "first");
}

#[tokio::test]
async fn the_example_scenario_fails_the_new_deployment_only_behind_production() {
    let fake = FakeBaseten::start(scenario_file("gated-promotion.yaml").with_manual_clock())
        .await
        .unwrap();
    let c = Client::new(&fake);
    let creds = c.credentials("model_s3_upload_credentials").await;
    c.upload(&fake, &creds, truss_tar("gated-model")).await;
    let doc = format!(
        r#"mutation {{ create_model_version_from_truss(model_id: "gatedmdl" s3_key: "{key}"
            config: "{config}" semver_bump: "MINOR" name: "v2")
            {{ model_version {{ id }} }} }}"#,
        key = creds["s3_key"].as_str().unwrap(),
        config = config_b64("gated-model"),
    );
    let data = c.data(&doc, Value::Null).await;
    let v2 = data["create_model_version_from_truss"]["model_version"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    fake.clock().set(10.0);
    let url = |path: &str| format!("{}/model-gatedmdl/{path}/predict", fake.url());
    assert_eq!(
        post_json(&c, &url(&format!("deployment/{v2}"))).await.0,
        200
    );
    let promote = async |dep: &str| {
        c.post(
            "/v1/models/gatedmdl/environments/production/promote",
            Some(json!({"deployment_id": dep})),
        )
        .await
    };
    assert_eq!(promote(&v2).await.0, 200);
    fake.clock().set(40.0);
    let (_, e) = c.get("/v1/models/gatedmdl/environments/production").await;
    assert_eq!(e["current_deployment"]["id"], v2.as_str());
    assert_eq!(post_json(&c, &url("production")).await.0, 500);
    assert_eq!(promote("v1dep001").await.0, 200);
    let (_, e) = c.get("/v1/models/gatedmdl/environments/production").await;
    assert_eq!(e["current_deployment"]["id"], "v1dep001");
    assert_eq!(post_json(&c, &url("production")).await.0, 200);
}

#[tokio::test]
async fn the_audit_log_records_each_promotion_newest_first_and_pages() {
    let fake = FakeBaseten::start(scenario("")).await.unwrap();
    let c = Client::new(&fake);
    let log = |q: &'static str| {
        let c = &c;
        async move { c.get(&format!("/v1/models/{MODEL}/audit_logs{q}")).await }
    };
    // The scenario's own deployments predate the log.
    let (s, v) = log("").await;
    assert_eq!((s.as_u16(), v["items"].as_array().unwrap().len()), (200, 0));
    assert_eq!(v["pagination"], json!({"has_more": false, "cursor": null}));

    fake.clock().set(10.0);
    assert_eq!(
        promote(&c, "production", json!({"deployment_id": "new00001"}))
            .await
            .0,
        200
    );
    fake.clock().set(20.0);
    assert_eq!(
        promote(&c, "staging", json!({"deployment_id": "old00001"}))
            .await
            .0,
        200
    );

    let (_, v) = log("?deployment_ids=new00001&event_type_groups=PROMOTED").await;
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{v}");
    assert_eq!(items[0]["event_type"], "MODEL_DEPLOYMENT_PROMOTED");
    assert_eq!(items[0]["created"], fake.clock().iso(10.0));
    assert_eq!(items[0]["event_data"]["deployment_id"], "new00001");
    assert_eq!(items[0]["event_data"]["environment_name"], "production");
    assert_eq!(items[0]["event_data"]["deployment_name"], "new");

    // Newest first, one a page, the cursor to the next.
    let (_, v) = log("?limit=1").await;
    assert_eq!(v["items"][0]["event_data"]["deployment_id"], "old00001");
    assert_eq!(v["pagination"]["has_more"], true);
    let cursor = v["pagination"]["cursor"].as_str().unwrap().to_string();
    let (_, v) = c
        .get(&format!(
            "/v1/models/{MODEL}/audit_logs?limit=1&cursor={cursor}"
        ))
        .await;
    assert_eq!(v["items"][0]["event_data"]["deployment_id"], "new00001");
    assert_eq!(v["pagination"]["has_more"], false);
    let (_, v) = log("?direction=ASC&environment_names=staging").await;
    assert_eq!(v["items"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["items"][0]["event_data"]["environment_name"], "staging");
    let (_, v) = log("?event_type_groups=DEPLOYED").await;
    assert_eq!(v["items"].as_array().unwrap().len(), 0, "{v}");

    // What the fake does not model is refused, not ignored.
    for q in [
        "?limit=0",
        "?limit=201",
        "?direction=up",
        "?search=x",
        "?user_ids=u1",
    ] {
        assert_eq!(log(q).await.0.as_u16(), 400, "{q}");
    }
    assert_eq!(c.get("/v1/models/nomodel/audit_logs").await.0.as_u16(), 404);
}
