//! Whole flows through GraphQL, S3, REST and inference, and the platform's
//! validation of create mutations.

use fake_baseten::FakeBaseten;
use serde_json::{Value, json};

use crate::common::{Client, config_b64, create_model_doc, create_vars, scenario, truss_tar};

#[tokio::test]
async fn create_before_upload_fails() {
    let fake = FakeBaseten::start(scenario("instant-active.yaml"))
        .await
        .unwrap();
    let c = Client::new(&fake);
    let creds = c.credentials("model_s3_upload_credentials").await;
    let doc = create_model_doc("early", creds["s3_key"].as_str().unwrap(), "");
    let (status, body) = c.gql(&doc, create_vars(None)).await;
    assert_eq!(status, 200);
    assert_eq!(body["data"], Value::Null);
    let msg = body["errors"][0]["message"].as_str().unwrap();
    assert!(msg.contains("upload"), "{msg}");
    assert_eq!(
        body["errors"][0]["path"],
        json!(["create_model_from_truss"])
    );
    // A key the fake never issued is refused too.
    let doc = create_model_doc("early", "models/made-up.tgz", "");
    let (_, body) = c.gql(&doc, create_vars(None)).await;
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("not issued")
    );
    assert!(fake.deployments().is_empty());
    // After the upload the same key works.
    c.upload(&fake, &creds, truss_tar("early")).await;
    let doc = create_model_doc("early", creds["s3_key"].as_str().unwrap(), "");
    c.data(&doc, create_vars(None)).await;
    assert_eq!(fake.deployments().len(), 1);
}

#[tokio::test]
async fn model_flow_push_wait_predict_deactivate() {
    let fake = FakeBaseten::start(scenario("instant-active.yaml").with_manual_clock())
        .await
        .unwrap();
    let c = Client::new(&fake);
    let teams = c
        .data("query Teams { teams { id name default } }", Value::Null)
        .await;
    let team_id = teams["teams"][0]["id"].as_str().unwrap().to_string();
    let models = c
        .data(
            &format!("{{ models(team_id: \"{team_id}\") {{ id name team {{ id name }} }} }}"),
            Value::Null,
        )
        .await;
    assert_eq!(models["models"], json!([]));
    let creds = c.credentials("model_s3_upload_credentials").await;
    assert_eq!(creds["s3_bucket"], fake.bucket());
    let tar = truss_tar("hello");
    c.upload(&fake, &creds, tar.clone()).await;
    let key = creds["s3_key"].as_str().unwrap();
    let extra = format!(
        "version_name: \"PR-42_abc1234\"\n deploy_timeout_minutes: 45\n team_id: \"{team_id}\""
    );
    let data = c
        .data(
            &create_model_doc("hello", key, &extra),
            create_vars(Some(json!({"team": "ml"}))),
        )
        .await;
    let mv = &data["create_model_from_truss"]["model_version"];
    let (model, dep) = (
        mv["oracle"]["id"].as_str().unwrap().to_string(),
        mv["id"].as_str().unwrap().to_string(),
    );
    assert_eq!(mv["oracle"]["name"], "hello");
    assert_eq!(
        mv["oracle"]["hostname"],
        format!("{}/model-{model}", fake.url())
    );
    assert_eq!(mv["instance_type"]["name"], "1x2");

    // The stored object is the uploaded tar, also over the admin route.
    let stored = fake.s3().object_bytes(key).unwrap();
    assert_eq!(stored, tar);
    let via_admin = crate::common::http()
        .get(format!("{}/__fake/objects/{key}", fake.url()))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(via_admin.as_ref(), tar.as_slice());

    let (_, d) = c
        .get(&format!("/v1/models/{model}/deployments/{dep}"))
        .await;
    assert_eq!(d["status"], "ACTIVE");
    assert_eq!(d["name"], "PR-42_abc1234");
    assert_eq!(d["labels"], json!({"team": "ml"}));
    assert_eq!(
        d["is_production"], true,
        "a new model's first deployment is production"
    );
    let (_, env) = c
        .get(&format!("/v1/models/{model}/environments/production"))
        .await;
    assert_eq!(env["current_deployment"]["id"], dep);
    assert_eq!(env["in_progress_promotion"], Value::Null);

    // Predict at the deployment URL derived from the hostname.
    let hostname = mv["oracle"]["hostname"].as_str().unwrap();
    let r = c
        .http
        .post(format!("{hostname}/deployment/{dep}/predict"))
        .header("Authorization", c.auth())
        .json(&json!({"x": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"echo": {"x": 1}}));

    let (status, _) = c
        .post(
            &format!("/v1/models/{model}/deployments/{dep}/deactivate"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    fake.clock().advance(5.0);
    let snap = fake.deployments();
    assert_eq!(snap[0].status, "INACTIVE");
    assert!(snap[0].deactivated);
    let r = c
        .http
        .post(format!("{hostname}/deployment/{dep}/predict"))
        .header("Authorization", c.auth())
        .json(&json!({"x": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn new_versions_environments_and_platform_validation() {
    let fake = FakeBaseten::start(scenario("instant-active.yaml"))
        .await
        .unwrap();
    let c = Client::new(&fake);
    let upload = async |name: &str| {
        let creds = c.credentials("model_s3_upload_credentials").await;
        c.upload(&fake, &creds, truss_tar(name)).await;
        creds["s3_key"].as_str().unwrap().to_string()
    };
    let key = upload("m").await;
    let data = c
        .data(&create_model_doc("m", &key, ""), create_vars(None))
        .await;
    let model = data["create_model_from_truss"]["model_version"]["oracle"]["id"]
        .as_str()
        .unwrap()
        .to_string();

    let g7 = |key: &str, extra: &str| {
        format!(
            r#"mutation ($trussUserEnv: String, $userDeployMetadata: JSONString, $rawConfig: String) {{
                create_model_version_from_truss(
                    model_id: "{model}" s3_key: "{key}" config: "{config}" semver_bump: "MINOR"
                    truss_user_env: $trussUserEnv scale_down_old_production: true
                    preserve_env_instance_type: true {extra}
                    user_deploy_metadata: $userDeployMetadata raw_config: $rawConfig
                ) {{ model_version {{ id oracle {{ id name hostname }} instance_type {{ name }} }} }}
            }}"#,
            config = config_b64("m")
        )
    };
    let key = upload("m").await;
    let data = c
        .data(
            &g7(&key, "name: \"v2\" environment_name: \"staging\""),
            create_vars(None),
        )
        .await;
    let v2 = data["create_model_version_from_truss"]["model_version"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, env) = c
        .get(&format!("/v1/models/{model}/environments/staging"))
        .await;
    assert_eq!(env["current_deployment"]["id"], v2);
    assert_eq!(env["current_deployment"]["environment"], "staging");

    let err = async |doc: String| -> (String, String) {
        let (_, body) = c.gql(&doc, create_vars(None)).await;
        let e = &body["errors"][0];
        (
            e["message"].as_str().unwrap_or_default().to_string(),
            e["extensions"]["code"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };
    let key = upload("m").await;
    let (msg, code) = err(g7(&key, "environment_name: \"canary\"")).await;
    assert!(msg.contains("canary"), "{msg}");
    assert_eq!(code, "RESOURCE_NOT_FOUND");
    let (msg, _) = err(g7(&key, "deploy_timeout_minutes: 5")).await;
    assert!(msg.contains("between 10 and 1440"), "{msg}");
    let (msg, _) = err(g7(&key, "name: \"has space\"")).await;
    assert!(msg.contains("Invalid deployment name"), "{msg}");
    let (msg, _) = err(create_model_doc("m", &key, "")).await;
    assert!(msg.contains("already exists"), "{msg}");
    let (msg, _) = err(create_model_doc(
        "fresh",
        &key,
        "environment_name: \"canary\"",
    ))
    .await;
    assert!(msg.contains("canary"), "{msg}");
    let unknown = g7(&key, "").replace(&model, "nosuchmodel");
    let (_, code) = err(unknown).await;
    assert_eq!(code, "RESOURCE_NOT_FOUND");
    assert_eq!(
        fake.deployments().len(),
        2,
        "no failed mutation created anything"
    );
}

#[tokio::test]
async fn chain_flow_deploy_status_run_remote_deactivate() {
    let fake = FakeBaseten::start(scenario("instant-active.yaml").with_manual_clock())
        .await
        .unwrap();
    let c = Client::new(&fake);
    let mut keys = Vec::new();
    for name in ["HelloWorld-a649b00a", "Dep-0123abcd"] {
        let creds = c.credentials("model_s3_upload_credentials").await;
        c.upload(&fake, &creds, truss_tar(name)).await;
        keys.push(creds["s3_key"].as_str().unwrap().to_string());
    }
    let src = c.credentials("chain_s3_upload_credentials").await;
    assert!(src["s3_key"].as_str().unwrap().starts_with("chains/"));
    c.upload(&fake, &src, truss_tar("source")).await;
    assert_eq!(
        c.data(
            "{ chains(all: true) { id name team { id name } } }",
            Value::Null
        )
        .await["chains"],
        json!([])
    );
    let q = format!(
        r#"mutation ($trussUserEnv: String) {{
            deploy_chain_atomic(
                chain_name: "hello-chain"
                original_source_artifact_s3_key: "{src_key}"
                is_draft: false
                entrypoint: {{
                    name: "HelloWorld",
                    oracle: {{
                        model_name: "HelloWorld-a649b00a",
                        s3_key: "{k0}",
                        encoded_config_str: "{c0}",
                        semver_bump: "MINOR"
                    }}
                }}
                dependencies: [{{
                    name: "Dep",
                    oracle: {{
                        model_name: "Dep-0123abcd",
                        s3_key: "{k1}",
                        encoded_config_str: "{c1}",
                        semver_bump: "MINOR"
                    }}
                }}]
                truss_user_env: $trussUserEnv
            ) {{ chain_deployment {{ id chain {{ id hostname }} }} }}
        }}"#,
        src_key = src["s3_key"].as_str().unwrap(),
        k0 = keys[0],
        k1 = keys[1],
        c0 = config_b64("HelloWorld-a649b00a"),
        c1 = config_b64("Dep-0123abcd"),
    );
    let data = c.data(&q, json!({"trussUserEnv": "{}"})).await;
    let cd = &data["deploy_chain_atomic"]["chain_deployment"];
    let (chain, cd_id) = (
        cd["chain"]["id"].as_str().unwrap().to_string(),
        cd["id"].as_str().unwrap().to_string(),
    );
    assert_eq!(
        cd["chain"]["hostname"],
        format!("{}/chain-{chain}", fake.url())
    );

    let info = c
        .data(
            &format!(
                r#"{{ chain_deployment(id:"{cd_id}") {{ chainlets {{ name id is_entrypoint
                    oracle {{ id name hostname }}
                    oracle_version {{ id is_draft current_model_deployment_status {{ status }} }} }}
                    chain {{ id }} }} }}"#
            ),
            Value::Null,
        )
        .await;
    let chainlets = info["chain_deployment"]["chainlets"].as_array().unwrap();
    assert_eq!(chainlets.len(), 2);
    assert_eq!(chainlets[0]["name"], "HelloWorld");
    assert_eq!(chainlets[0]["is_entrypoint"], true);
    assert_eq!(chainlets[1]["is_entrypoint"], false);
    assert_eq!(chainlets[0]["oracle"]["name"], "HelloWorld-a649b00a");
    assert_eq!(
        chainlets[0]["oracle_version"]["current_model_deployment_status"]["status"], "MODEL_READY",
        "chainlet statuses are raw"
    );
    assert_eq!(info["chain_deployment"]["chain"]["id"], chain);
    let deployments = c
        .data(
            &format!("{{ chain(id: \"{chain}\") {{ deployments {{ id created is_draft }} }} }}"),
            Value::Null,
        )
        .await;
    assert_eq!(deployments["chain"]["deployments"][0]["id"], cd_id);
    assert_eq!(deployments["chain"]["deployments"][0]["is_draft"], false);

    let (status, rest) = c
        .get(&format!("/v1/chains/{chain}/deployments/{cd_id}"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(rest["status"], "ACTIVE");
    assert_eq!(
        rest["chainlets"][0]["status"], "ACTIVE",
        "REST statuses are public"
    );
    assert_eq!(rest["environment"], "production");
    let (_, env) = c
        .get(&format!("/v1/chains/{chain}/environments/production"))
        .await;
    assert_eq!(env["current_deployment"]["id"], cd_id);

    let run = c
        .http
        .post(format!(
            "{}/chain-{chain}/deployment/{cd_id}/run_remote",
            fake.url()
        ))
        .header("Authorization", c.auth())
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(run.status(), 200);
    assert_eq!(
        run.json::<Value>().await.unwrap(),
        json!({"echo": {"name": "x"}})
    );

    let (status, body) = c
        .post(
            &format!("/v1/chains/{chain}/deployments/{cd_id}/deactivate"),
            Some(json!({})),
        )
        .await;
    assert_eq!((status.as_u16(), body), (200, json!({"success": true})));
    let (_, rest) = c
        .get(&format!("/v1/chains/{chain}/deployments/{cd_id}"))
        .await;
    assert_eq!(rest["status"], "DEACTIVATING");
    fake.clock().advance(3.0);
    let info = c
        .data(
            &format!("{{ chain_deployment(id:\"{cd_id}\") {{ chainlets {{ oracle_version {{ current_model_deployment_status {{ status }} }} }} }} }}"),
            Value::Null,
        )
        .await;
    assert_eq!(
        info["chain_deployment"]["chainlets"][0]["oracle_version"]["current_model_deployment_status"]
            ["status"],
        "DEACTIVATED_MODEL"
    );
    // Existing chain with an unknown environment: RESOURCE_NOT_FOUND, which
    // truss turns into "environment does not exist".
    let again = q.replace(
        "chain_name: \"hello-chain\"",
        &format!("chain_id: \"{chain}\" environment: \"staging\""),
    );
    let (_, body) = c.gql(&again, json!({"trussUserEnv": "{}"})).await;
    assert_eq!(
        body["errors"][0]["extensions"]["code"],
        "RESOURCE_NOT_FOUND"
    );
}

/// `GET …/deployments/{id}/config` in each `output_format`: the raw text
/// the create sent, the parsed config, both; an unknown format is refused.
/// (The schema check verifies every answer against the published one.)
#[tokio::test]
async fn a_deployments_config_in_each_output_format() {
    use base64::Engine as _;
    let fake = FakeBaseten::start(scenario("instant-active.yaml").with_manual_clock())
        .await
        .unwrap();
    let c = Client::new(&fake);
    let creds = c.credentials("model_s3_upload_credentials").await;
    c.upload(&fake, &creds, truss_tar("hello")).await;
    let key = creds["s3_key"].as_str().unwrap();
    let raw = "model_name: hello  # the name\nresources:\n  accelerator: A10G\n";
    let mut vars = create_vars(Some(json!({"truss_push_content_hash": "ab"})));
    vars["rawConfig"] = json!(base64::engine::general_purpose::STANDARD.encode(raw));
    let data = c
        .data(
            &create_model_doc("hello", key, "version_name: \"v1\""),
            vars,
        )
        .await;
    let mv = &data["create_model_from_truss"]["model_version"];
    let (model, dep) = (
        mv["oracle"]["id"].as_str().unwrap(),
        mv["id"].as_str().unwrap(),
    );
    let path = format!("/v1/models/{model}/deployments/{dep}/config");
    let (s, a) = c.get(&format!("{path}?output_format=raw")).await;
    assert_eq!(s, reqwest::StatusCode::OK);
    assert_eq!(a, json!({"config": null, "raw_config": raw}));
    let (_, a) = c.get(&format!("{path}?output_format=parsed")).await;
    assert_eq!(a["raw_config"], Value::Null);
    assert_eq!(a["config"]["model_name"], "hello");
    let (_, both) = c.get(&path).await;
    assert_eq!(both["raw_config"], raw);
    assert_eq!(both["config"]["model_name"], "hello");
    let (s, _) = c.get(&format!("{path}?output_format=yaml")).await;
    assert_eq!(s, reqwest::StatusCode::UNPROCESSABLE_ENTITY);
    let (_, d) = c
        .get(&format!("/v1/models/{model}/deployments/{dep}"))
        .await;
    assert_eq!(d["labels"], json!({"truss_push_content_hash": "ab"}));
    assert!(fake.take_violations().is_empty());
}
