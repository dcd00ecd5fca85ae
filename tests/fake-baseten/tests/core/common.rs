//! Helpers shared by the end-to-end tests: a client bound to one fake,
//! GraphQL and REST calls, and a SigV4-signed upload of a truss.

use std::path::PathBuf;

use base64::Engine as _;
use fake_baseten::FakeBaseten;
use fake_baseten::scenario::Scenario;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::signed_put::signed_put_headers;

pub fn scenario_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name)
}

pub fn scenario(name: &str) -> Scenario {
    Scenario::from_file(scenario_path(name)).expect("scenario loads")
}

/// A client that sends the fake's key as `Api-Key`.
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub key: String,
}

/// A client for the fake on loopback: it never goes through a proxy the
/// developer's environment names (`HTTP_PROXY` would otherwise catch it).
pub fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

impl Client {
    pub fn new(fake: &FakeBaseten) -> Self {
        Self {
            http: http(),
            base: fake.url(),
            key: fake.api_key().to_string(),
        }
    }

    pub fn auth(&self) -> String {
        format!("Api-Key {}", self.key)
    }

    /// POST /graphql/ → (HTTP status, body).
    pub async fn gql(&self, query: &str, variables: Value) -> (StatusCode, Value) {
        let mut body = json!({ "query": query });
        if !variables.is_null() {
            body["variables"] = variables;
        }
        let r = self
            .http
            .post(format!("{}/graphql/", self.base))
            .header("Authorization", self.auth())
            .json(&body)
            .send()
            .await
            .expect("graphql request");
        let status = r.status();
        (status, r.json().await.expect("graphql json"))
    }

    /// GraphQL that must succeed: its `data`.
    pub async fn data(&self, query: &str, variables: Value) -> Value {
        let (status, body) = self.gql(query, variables).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body.get("errors").is_none(), "unexpected errors: {body}");
        body["data"].clone()
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header("Authorization", self.auth())
            .send()
            .await
            .expect("GET");
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn post(&self, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .header("Authorization", self.auth());
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.expect("POST");
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// `model_s3_upload_credentials` (or the chain one).
    pub async fn credentials(&self, field: &str) -> Value {
        let q = format!(
            "{{ {field} {{ s3_bucket s3_key aws_access_key_id aws_secret_access_key aws_session_token }} }}"
        );
        self.data(&q, Value::Null).await[field].clone()
    }

    /// PUTs `bytes` to the issued key, signed like an S3 client with the
    /// issued temporary credentials, for the bucket's region.
    pub async fn upload(&self, fake: &FakeBaseten, creds: &Value, bytes: Vec<u8>) {
        let (path, headers) = signed_put_headers(&fake.addr().to_string(), &fake.region(), creds);
        let r = self
            .http
            .put(format!("{}{path}", fake.s3_endpoint()))
            .headers(headers)
            .body(bytes)
            .send()
            .await
            .expect("S3 PUT");
        let status = r.status();
        assert!(
            status.is_success(),
            "upload failed: {status} {}",
            r.text().await.unwrap_or_default()
        );
    }
}

/// The base64 JSON config truss sends.
pub fn config_b64(model_name: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(
        json!({"model_name": model_name, "model_metadata": {"example_model_input": {"x": 1}}})
            .to_string(),
    )
}

/// G6 as truss 0.18.36 writes it (optional arguments spliced in).
pub fn create_model_doc(name: &str, s3_key: &str, extra: &str) -> String {
    format!(
        r#"
            mutation ($trussUserEnv: String, $userDeployMetadata: JSONString, $rawConfig: String) {{
                create_model_from_truss(
                    name: "{name}"
                    s3_key: "{s3_key}"
                    config: "{config}"
                    semver_bump: "MINOR"
                    truss_user_env: $trussUserEnv
                    allow_truss_download: true
                    {extra}
                    user_deploy_metadata: $userDeployMetadata
                    raw_config: $rawConfig
                ) {{
                    model_version {{
                        id
                        oracle {{
                            id
                            name
                            hostname
                        }}
                        instance_type {{
                            name
                        }}
                    }}
                }}
            }}
        "#,
        config = config_b64(name)
    )
}

/// The three variables G6/G7/G8 always send.
pub fn create_vars(labels: Option<Value>) -> Value {
    json!({
        "trussUserEnv": "{\"truss_client_version\":\"0.18.36\",\"python_version\":\"3.11.7\",\"pydantic_version\":\"2.14.4\",\"mypy_version\":null,\"git_info\":null}",
        "userDeployMetadata": labels.map(|l| l.to_string()),
        "rawConfig": null,
    })
}

/// A tiny but real tar to upload.
pub fn truss_tar(model_name: &str) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let config = format!("model_name: {model_name}\n");
    let mut h = tar::Header::new_gnu();
    h.set_size(config.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(&mut h, "config.yaml", config.as_bytes())
        .unwrap();
    b.into_inner().unwrap()
}
