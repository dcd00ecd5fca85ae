//! GraphQL as a server would treat it: syntax errors, validation, only the
//! requested fields, variables.

use fake_baseten::FakeBaseten;
use serde_json::{Value, json};

use crate::common::{Client, create_model_doc, create_vars, scenario, truss_tar};

#[tokio::test]
async fn unescaped_quote_is_a_syntax_error_in_the_platform_shape() {
    let fake = FakeBaseten::start(scenario("instant-active.yaml"))
        .await
        .unwrap();
    let c = Client::new(&fake);
    // What an unescaping client builds from a model named `my"model`.
    let (status, body) = c
        .gql(r#"{ model(name: "my"model") { id } }"#, Value::Null)
        .await;
    assert_eq!(status, 200, "GraphQL errors travel as HTTP 200");
    assert_eq!(body["data"], Value::Null);
    let err = &body["errors"][0];
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .starts_with("Syntax Error: "),
        "{err}"
    );
    assert_eq!(err["extensions"]["code"], "GRAPHQL_PARSE_FAILED");
    assert_eq!(err["extensions"]["description"], Value::Null);
    assert_eq!(err["locations"][0]["line"], 1);
}

#[tokio::test]
async fn escaped_quote_is_read_as_a_quote() {
    let fake = FakeBaseten::start(scenario("instant-active.yaml"))
        .await
        .unwrap();
    let c = Client::new(&fake);
    let creds = c.credentials("model_s3_upload_credentials").await;
    c.upload(&fake, &creds, truss_tar("q")).await;
    let doc = create_model_doc(r#"my\"model"#, creds["s3_key"].as_str().unwrap(), "");
    c.data(&doc, create_vars(None)).await;
    let models = c.data("{ models(all: true) { name } }", Value::Null).await;
    assert_eq!(models["models"], json!([{"name": "my\"model"}]));
}

#[tokio::test]
async fn only_the_requested_fields_are_answered() {
    let fake = FakeBaseten::start(scenario("scaled-to-zero-history.yaml"))
        .await
        .unwrap();
    let c = Client::new(&fake);
    let data = c.data("query Teams { teams { id } }", Value::Null).await;
    assert_eq!(data, json!({"teams": [{"id": "team0seed"}]}));
    let data = c.data("{ teams { name default } }", Value::Null).await;
    assert_eq!(
        data,
        json!({"teams": [{"name": "ml-platform", "default": true}]})
    );
    let data = c
        .data(
            "{ models(team_id: \"team0seed\") { id team { name } } }",
            Value::Null,
        )
        .await;
    assert_eq!(
        data,
        json!({"models": [{"id": "seedmodl", "team": {"name": "ml-platform"}}]})
    );
    let creds = c
        .data("{ model_s3_upload_credentials { s3_key } }", Value::Null)
        .await;
    let keys: Vec<&String> = creds["model_s3_upload_credentials"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["s3_key"]);
    // Aliases and __typename as a server would.
    let data = c
        .data("{ t: teams { ident: id __typename } }", Value::Null)
        .await;
    assert_eq!(
        data,
        json!({"t": [{"ident": "team0seed", "__typename": "TeamType"}]})
    );
    let data = c
        .data(
            "{ organization { workspace_name } user { email } }",
            Value::Null,
        )
        .await;
    assert_eq!(
        data,
        json!({"organization": {"workspace_name": "fake-workspace"}, "user": {"email": "ci@example.com"}})
    );
}

#[tokio::test]
async fn unknown_fields_arguments_and_variables_are_errors() {
    let fake = FakeBaseten::start(scenario("instant-active.yaml"))
        .await
        .unwrap();
    let c = Client::new(&fake);
    for (query, want) in [
        (
            "{ teams { id slug } }",
            "Cannot query field \"slug\" on type \"TeamType\".",
        ),
        (
            "{ nothing { id } }",
            "Cannot query field \"nothing\" on type \"Query\".",
        ),
        (
            "{ models(everything: true) { id } }",
            "Unknown argument \"everything\" on field \"models\" of type \"Query\".",
        ),
        (
            "query { truss_validation(config: \"e30=\", truss_user_env: $trussUserEnv) { success } }",
            "Argument \"truss_user_env\" has invalid value $trussUserEnv.\nVariable \"$trussUserEnv\" is not defined.",
        ),
    ] {
        let (status, body) = c.gql(query, Value::Null).await;
        assert_eq!(status, 200);
        assert_eq!(body["data"], Value::Null);
        assert_eq!(body["errors"][0]["message"], want, "{query}");
        assert_eq!(
            body["errors"][0]["extensions"]["code"],
            "GRAPHQL_VALIDATION_FAILED"
        );
    }
    // G7's deployment name is `name`; G6's `version_name` is not accepted there.
    let q = r#"mutation { create_model_version_from_truss(model_id: "m", s3_key: "k", config: "e30=", version_name: "x") { model_version { id } } }"#;
    let (_, body) = c.gql(q, Value::Null).await;
    assert_eq!(
        body["errors"][0]["message"],
        "Unknown argument \"version_name\" on field \"create_model_version_from_truss\" of type \"Mutation\"."
    );
}

#[tokio::test]
async fn truss_validation_details_is_a_json_string_and_scriptable() {
    let mut sc = scenario("instant-active.yaml");
    sc.truss_validation.success = false;
    sc.truss_validation.warnings = vec!["python_version 3.8 is deprecated".into()];
    let fake = FakeBaseten::start(sc).await.unwrap();
    let c = Client::new(&fake);
    let q = r#"query ($trussUserEnv: String) {
        truss_validation(truss_user_env: $trussUserEnv config: "eyJtb2RlbF9uYW1lIjogIm0ifQ==") { success details }
    }"#;
    let data = c.data(q, json!({"trussUserEnv": "{}"})).await;
    assert_eq!(data["truss_validation"]["success"], false);
    let details: Value =
        serde_json::from_str(data["truss_validation"]["details"].as_str().unwrap()).unwrap();
    assert_eq!(
        details,
        json!({"warnings": ["python_version 3.8 is deprecated"], "errors": []})
    );
}

#[tokio::test]
async fn graphql_lives_at_exactly_slash_graphql_slash() {
    let fake = FakeBaseten::start(scenario("instant-active.yaml"))
        .await
        .unwrap();
    let c = Client::new(&fake);
    for path in ["/graphql", "//graphql/"] {
        let r = c
            .http
            .post(format!("{}{path}", fake.url()))
            .header("Authorization", c.auth())
            .json(&json!({"query": "{ teams { id } }"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path}");
    }
    // Both were recorded as unknown paths, which fail a test unless claimed.
    let unknown: Vec<String> = fake.take_violations().into_iter().map(|v| v.path).collect();
    assert_eq!(unknown, ["/graphql", "//graphql/"]);
    let (status, body) = c.gql("{ teams { id } }", Value::Null).await;
    assert_eq!(status, 200, "{body}");
}
