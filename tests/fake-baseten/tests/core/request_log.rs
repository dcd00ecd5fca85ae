//! The request log: what tests and scripts can read about every request,
//! and the API key never in it.

use fake_baseten::FakeBaseten;
use fake_baseten::reqlog::LogEntry;
use serde_json::{Value, json};

use crate::common::{Client, create_model_doc, create_vars, scenario, truss_tar};

#[tokio::test]
async fn entries_describe_requests_and_never_hold_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("requests.jsonl");
    let key = "sk-secret-0123456789";
    let fake = FakeBaseten::builder(scenario("instant-active.yaml"))
        .api_key(key)
        .request_log(&file)
        .start()
        .await
        .unwrap();
    let c = Client::new(&fake);
    c.data("query Teams { teams { id } }", Value::Null).await;
    let creds = c.credentials("model_s3_upload_credentials").await;
    c.upload(&fake, &creds, truss_tar("logged")).await;
    let s3_key = creds["s3_key"].as_str().unwrap();
    c.data(
        &create_model_doc("logged", s3_key, "version_name: \"v1\""),
        create_vars(Some(json!({"a": "b"}))),
    )
    .await;
    // Bearer, a wrong key, and the key in the query string of a 404.
    let bearer = c
        .http
        .get(format!("{}/v1/models", fake.url()))
        .header("Authorization", format!("Bearer {key}"))
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 200);
    let _ = c
        .http
        .get(format!("{}/v1/models", fake.url()))
        .header("Authorization", "Api-Key wrong")
        .send()
        .await
        .unwrap();

    let log = fake.requests();
    let endpoints: Vec<&str> = log.iter().map(|e| e.endpoint.as_str()).collect();
    assert_eq!(
        endpoints,
        [
            "graphql.teams",
            "graphql.model_s3_upload_credentials",
            "s3.put_object",
            "graphql.create_model_from_truss",
            "rest.list_models",
            "rest.list_models"
        ]
    );
    let create: &LogEntry = &log[3];
    assert!(create.mutation);
    assert_eq!(create.status, Some(200));
    let g = create.graphql.as_ref().unwrap();
    assert_eq!(g.operation_kind.as_deref(), Some("mutation"));
    assert_eq!(g.root_fields, ["create_model_from_truss"]);
    let args = &g.arguments["create_model_from_truss"];
    assert_eq!(args["version_name"], "v1");
    assert_eq!(args["s3_key"], s3_key);
    assert_eq!(
        args["user_deploy_metadata"], "{\"a\":\"b\"}",
        "variables are substituted"
    );
    assert_eq!(args["raw_config"], Value::Null);
    assert!(!log[0].mutation);
    assert_eq!(
        log[0].graphql.as_ref().unwrap().operation_name.as_deref(),
        Some("Teams")
    );
    assert_eq!(log[5].status, Some(401));
    assert_eq!(log[2].method, "PUT");

    let admin = crate::common::http()
        .get(format!("{}/__fake/requests", fake.url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let from_admin: Vec<LogEntry> = serde_json::from_str(&admin).unwrap();
    assert_eq!(from_admin, log);
    let lines = std::fs::read_to_string(&file).unwrap();
    assert_eq!(lines.lines().count(), log.len());
    let in_memory = serde_json::to_string(&log).unwrap();
    for text in [&admin, &lines, &in_memory] {
        assert!(!text.contains(key), "the API key leaked into the log");
        assert!(!text.contains("Api-Key"), "an Authorization value leaked");
    }
    drop(fake);
}
