//! The Baseten API as truss-push uses it: GraphQL on the app host, REST v1 on
//! the API host, and the inference hosts. Documents keep the shapes the
//! Python client sends (reference 2.3, 3.12) so the platform reads them the
//! same way; every string spliced into a document is escaped as a GraphQL
//! string literal.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use reqwest::{Response, StatusCode, Url};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::Endpoints;
use crate::retry;
use crate::secret::Secret;

/// GraphQL calls wait this long for an answer.
pub const GRAPHQL_TIMEOUT_SECS: u64 = 120;
/// REST calls wait this long for an answer.
pub const REST_TIMEOUT_SECS: u64 = 60;
/// Setup calls (queries) are retried this many times on transient errors.
pub const SETUP_ATTEMPTS: u32 = 5;

/// A failed call, split the way callers decide what to do next.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Worth another try: connection errors, timeouts, 429, 5xx.
    #[error("{message}")]
    Transient {
        message: String,
        retry_after: Option<Duration>,
    },
    /// Will not get better by retrying.
    #[error("{0}")]
    Permanent(String),
}

/// Escapes `s` as a GraphQL string literal (JSON's escapes are a subset of
/// GraphQL's, so a JSON string is a valid GraphQL string).
pub fn gql_str(s: &str) -> String {
    serde_json::to_string(s).expect("strings always serialize")
}

fn describe_reqwest(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    msg
}

fn classify_send_error(what: &str, e: reqwest::Error) -> ApiError {
    let message = format!("{what}: {}", describe_reqwest(&e));
    if e.is_timeout() || e.is_connect() || e.is_request() || e.is_body() {
        ApiError::Transient {
            message,
            retry_after: None,
        }
    } else {
        ApiError::Permanent(message)
    }
}

/// Reads a non-2xx answer into an error: the REST `message` when there is
/// one, else the start of the body.
async fn status_error(what: &str, resp: Response) -> ApiError {
    let status = resp.status();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(retry::parse_retry_after);
    let body = resp.text().await.unwrap_or_default();
    let detail = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| body.chars().take(300).collect());
    let hint = match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            " (check that baseten-api-key is a valid key for this workspace)"
        }
        _ => "",
    };
    let message = format!("{what}: HTTP {status}{hint}: {}", detail.trim());
    if retry::is_retryable_status(status.as_u16()) {
        ApiError::Transient {
            message,
            retry_after,
        }
    } else {
        ApiError::Permanent(message)
    }
}

/// A deployment as REST v1 describes it (fields truss-push reads).
#[derive(Clone, Debug, Deserialize)]
pub struct Deployment {
    pub id: String,
    pub status: String,
    #[serde(default)]
    pub is_production: bool,
    #[serde(default)]
    pub environment: Option<String>,
}

/// An environment (EnvironmentV1); the promotion fields are optional because
/// older API versions do not send them.
#[derive(Clone, Debug, Deserialize)]
pub struct Environment {
    pub name: String,
    #[serde(default)]
    pub current_deployment: Option<Deployment>,
    #[serde(default)]
    pub candidate_deployment: Option<Deployment>,
    #[serde(default)]
    pub in_progress_promotion: Option<Promotion>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Promotion {
    pub status: String,
    #[serde(default)]
    pub percent_traffic_to_new_version: Option<f64>,
    #[serde(default)]
    pub error_message: Option<String>,
}

/// One log line (LogV1).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Hash)]
pub struct LogLine {
    pub timestamp: String,
    pub message: String,
    #[serde(default)]
    pub replica: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Team {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub default: bool,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ModelRef {
    pub id: String,
    pub name: String,
    pub team: Option<TeamRef>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct TeamRef {
    pub id: String,
    pub name: String,
}

/// Temporary S3 credentials for one upload.
#[derive(Clone, Deserialize)]
pub struct UploadCredentials {
    pub s3_bucket: String,
    pub s3_key: String,
    pub aws_access_key_id: String,
    pub aws_secret_access_key: String,
    pub aws_session_token: String,
}

impl std::fmt::Debug for UploadCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "UploadCredentials {{ s3_bucket: {}, s3_key: {}, .. }}",
            self.s3_bucket, self.s3_key
        )
    }
}

/// `truss_validation`'s answer.
#[derive(Clone, Debug, Default)]
pub struct Validation {
    pub success: bool,
    pub warnings: Vec<String>,
    pub errors: Vec<String>,
}

/// What a create mutation returns.
#[derive(Clone, Debug)]
pub struct Created {
    pub deployment_id: String,
    pub model_id: String,
    pub hostname: Option<String>,
    pub instance_type: Option<String>,
}

/// Everything a create mutation takes.
#[derive(Clone, Debug)]
pub struct CreateRequest<'a> {
    pub existing_model_id: Option<&'a str>,
    pub model_name: &'a str,
    pub s3_key: &'a str,
    pub config_b64: &'a str,
    pub deployment_name: &'a str,
    pub environment: Option<&'a str>,
    pub deploy_timeout_minutes: u32,
    pub team_id: Option<&'a str>,
    pub truss_user_env: &'a str,
    pub labels_json: Option<String>,
    pub raw_config_b64: Option<String>,
}

/// Client for one API key and one set of hosts.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    endpoints: Endpoints,
    key: Secret,
}

impl Api {
    pub fn new(http: reqwest::Client, endpoints: Endpoints, key: Secret) -> Self {
        Self {
            http,
            endpoints,
            key,
        }
    }

    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    fn auth(&self) -> String {
        format!("Api-Key {}", self.key.expose())
    }

    /// One GraphQL round trip. GraphQL errors (HTTP 200 with `errors`) are
    /// permanent; every error message is reported, not only the first.
    pub async fn graphql_once(
        &self,
        what: &str,
        query: &str,
        variables: Option<Value>,
    ) -> Result<Value, ApiError> {
        let mut body = json!({ "query": query });
        if let Some(v) = variables {
            body["variables"] = v;
        }
        let resp = self
            .http
            .post(self.endpoints.graphql())
            .header(reqwest::header::AUTHORIZATION, self.auth())
            .timeout(Duration::from_secs(GRAPHQL_TIMEOUT_SECS))
            .json(&body)
            .send()
            .await
            .map_err(|e| classify_send_error(what, e))?;
        if !resp.status().is_success() {
            return Err(status_error(what, resp).await);
        }
        let v: Value = resp.json().await.map_err(|e| ApiError::Transient {
            message: format!("{what}: unreadable answer: {}", describe_reqwest(&e)),
            retry_after: None,
        })?;
        if let Some(errs) = v
            .get("errors")
            .and_then(Value::as_array)
            .filter(|e| !e.is_empty())
        {
            let msgs: Vec<String> = errs
                .iter()
                .map(|e| {
                    let msg = e
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown error");
                    let desc = e.pointer("/extensions/description").and_then(Value::as_str);
                    let code = e.pointer("/extensions/code").and_then(Value::as_str);
                    let mut s = msg.to_string();
                    if let Some(d) = desc.filter(|d| *d != msg) {
                        s.push_str(&format!(" ({d})"));
                    }
                    if let Some(c) = code {
                        s.push_str(&format!(" [{c}]"));
                    }
                    s
                })
                .collect();
            return Err(ApiError::Permanent(format!("{what}: {}", msgs.join("; "))));
        }
        v.get("data")
            .cloned()
            .filter(|d| !d.is_null())
            .ok_or_else(|| ApiError::Permanent(format!("{what}: the answer has no data")))
    }

    /// A query, retried on transient errors.
    pub async fn query(&self, what: &str, query: &str, variables: Option<Value>) -> Result<Value> {
        let mut attempt = 0;
        loop {
            match self.graphql_once(what, query, variables.clone()).await {
                Ok(v) => return Ok(v),
                Err(ApiError::Transient {
                    message,
                    retry_after,
                }) if attempt + 1 < SETUP_ATTEMPTS => {
                    tracing::debug!("retrying: {message}");
                    tokio::time::sleep(retry::delay_for(attempt, retry_after)).await;
                    attempt += 1;
                }
                Err(e) => return Err(anyhow!(e)),
            }
        }
    }

    pub async fn teams(&self) -> Result<Vec<Team>> {
        let d = self
            .query(
                "listing teams",
                "query Teams { teams { id name default } }",
                None,
            )
            .await?;
        serde_json::from_value(d["teams"].clone()).context("reading the teams list")
    }

    /// Models visible to the key, in one team or all.
    pub async fn models(&self, team_id: Option<&str>) -> Result<Vec<ModelRef>> {
        let arg = match team_id {
            Some(t) => format!("team_id: {}", gql_str(t)),
            None => "all: true".to_string(),
        };
        let q = format!("query {{ models({arg}) {{ id name team {{ id name }} }} }}");
        let d = self.query("listing models", &q, None).await?;
        serde_json::from_value(d["models"].clone()).context("reading the models list")
    }

    pub async fn truss_validation(
        &self,
        config_b64: &str,
        truss_user_env: &str,
    ) -> Result<Validation> {
        let q = format!(
            "query ($trussUserEnv: String) {{ truss_validation(truss_user_env: $trussUserEnv, config: {}) {{ success details }} }}",
            gql_str(config_b64)
        );
        let d = self
            .query(
                "validating the truss config",
                &q,
                Some(json!({ "trussUserEnv": truss_user_env })),
            )
            .await?;
        let tv = &d["truss_validation"];
        let details: Value = match &tv["details"] {
            Value::String(s) if !s.trim().is_empty() => {
                serde_json::from_str(s).unwrap_or(Value::Null)
            }
            Value::Object(_) => tv["details"].clone(),
            _ => Value::Null,
        };
        let strings = |k: &str| -> Vec<String> {
            details[k]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(Validation {
            success: tv["success"].as_bool().unwrap_or(false),
            warnings: strings("warnings"),
            errors: strings("errors"),
        })
    }

    pub async fn model_upload_credentials(&self) -> Result<UploadCredentials> {
        let d = self
            .query(
                "getting upload credentials",
                "query { model_s3_upload_credentials { s3_bucket s3_key aws_access_key_id aws_secret_access_key aws_session_token } }",
                None,
            )
            .await?;
        serde_json::from_value(d["model_s3_upload_credentials"].clone())
            .context("reading upload credentials")
    }

    /// `create_model_from_truss` for a new model, else
    /// `create_model_version_from_truss` (deployment name is `version_name`
    /// in the first and `name` in the second, hazard H30).
    pub async fn create(&self, r: &CreateRequest<'_>) -> Result<Created> {
        let mut args = Vec::new();
        let field = match r.existing_model_id {
            None => {
                args.push(format!("name: {}", gql_str(r.model_name)));
                "create_model_from_truss"
            }
            Some(id) => {
                args.push(format!("model_id: {}", gql_str(id)));
                "create_model_version_from_truss"
            }
        };
        args.push(format!("s3_key: {}", gql_str(r.s3_key)));
        args.push(format!("config: {}", gql_str(r.config_b64)));
        args.push("semver_bump: \"MINOR\"".into());
        args.push("truss_user_env: $trussUserEnv".into());
        if r.existing_model_id.is_none() {
            args.push("allow_truss_download: true".into());
            args.push(format!("version_name: {}", gql_str(r.deployment_name)));
        } else {
            args.push("scale_down_old_production: true".into());
            args.push("preserve_env_instance_type: true".into());
            args.push(format!("name: {}", gql_str(r.deployment_name)));
        }
        if let Some(env) = r.environment {
            args.push(format!("environment_name: {}", gql_str(env)));
        }
        args.push(format!(
            "deploy_timeout_minutes: {}",
            r.deploy_timeout_minutes
        ));
        if let (None, Some(team)) = (r.existing_model_id, r.team_id) {
            args.push(format!("team_id: {}", gql_str(team)));
        }
        args.push("user_deploy_metadata: $userDeployMetadata".into());
        args.push("raw_config: $rawConfig".into());
        let q = format!(
            "mutation ($trussUserEnv: String, $userDeployMetadata: JSONString, $rawConfig: String) {{\n  {field}(\n    {}\n  ) {{\n    model_version {{ id oracle {{ id name hostname }} instance_type {{ name }} }}\n  }}\n}}",
            args.join(",\n    ")
        );
        let vars = json!({
            "trussUserEnv": r.truss_user_env,
            "userDeployMetadata": r.labels_json,
            "rawConfig": r.raw_config_b64,
        });
        let what = "creating the deployment";
        // A mutation is sent once: a retry after an ambiguous failure could
        // create a second deployment. Only a refused connection is retried.
        let mut attempt = 0;
        let d = loop {
            match self.graphql_once(what, &q, Some(vars.clone())).await {
                Ok(d) => break d,
                Err(ApiError::Transient { message, .. })
                    if attempt + 1 < SETUP_ATTEMPTS
                        && message.contains("error sending request")
                        && message.contains("onnect") =>
                {
                    tokio::time::sleep(retry::delay_for(attempt, None)).await;
                    attempt += 1;
                }
                Err(e) => return Err(anyhow!(e)),
            }
        };
        let mv = &d[field]["model_version"];
        let deployment_id = mv["id"]
            .as_str()
            .ok_or_else(|| anyhow!("{what}: the answer has no model_version.id"))?;
        let model_id = match r.existing_model_id {
            Some(id) => id.to_string(),
            None => mv["oracle"]["id"]
                .as_str()
                .ok_or_else(|| anyhow!("{what}: the answer has no oracle.id"))?
                .to_string(),
        };
        Ok(Created {
            deployment_id: deployment_id.to_string(),
            model_id,
            hostname: mv["oracle"]["hostname"].as_str().map(str::to_string),
            // Hazard H18: a null instance type is not worth a crash.
            instance_type: mv["instance_type"]["name"].as_str().map(str::to_string),
        })
    }

    async fn rest_get<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        url: Url,
    ) -> Result<T, ApiError> {
        let resp = self
            .http
            .get(url)
            .header(reqwest::header::AUTHORIZATION, self.auth())
            .timeout(Duration::from_secs(REST_TIMEOUT_SECS))
            .send()
            .await
            .map_err(|e| classify_send_error(what, e))?;
        if !resp.status().is_success() {
            return Err(status_error(what, resp).await);
        }
        resp.json().await.map_err(|e| ApiError::Transient {
            message: format!("{what}: unreadable answer: {}", describe_reqwest(&e)),
            retry_after: None,
        })
    }

    /// One status read (REST v1); the wait loop owns retries.
    pub async fn deployment(
        &self,
        model_id: &str,
        deployment_id: &str,
    ) -> Result<Deployment, ApiError> {
        let url = self
            .endpoints
            .rest(&format!("v1/models/{model_id}/deployments/{deployment_id}"));
        self.rest_get("reading the deployment status", url).await
    }

    pub async fn environment(&self, model_id: &str, env: &str) -> Result<Environment, ApiError> {
        let url = self.endpoints.rest(&format!(
            "v1/models/{model_id}/environments/{}",
            urlencode(env)
        ));
        self.rest_get("reading the environment", url).await
    }

    /// The environment as raw JSON, so callers can tell an absent field
    /// (older API) from a null one.
    pub async fn environment_json(&self, model_id: &str, env: &str) -> Result<Value, ApiError> {
        let url = self.endpoints.rest(&format!(
            "v1/models/{model_id}/environments/{}",
            urlencode(env)
        ));
        self.rest_get("reading the environment", url).await
    }

    pub async fn environments(&self, model_id: &str) -> Result<Vec<Environment>, ApiError> {
        #[derive(Deserialize)]
        struct List {
            environments: Vec<Environment>,
        }
        let url = self
            .endpoints
            .rest(&format!("v1/models/{model_id}/environments"));
        let l: List = self.rest_get("listing environments", url).await?;
        Ok(l.environments)
    }

    /// Log lines since `start_ms` (epoch milliseconds), oldest first.
    pub async fn logs(
        &self,
        model_id: &str,
        deployment_id: &str,
        start_ms: Option<u64>,
    ) -> Result<Vec<LogLine>, ApiError> {
        #[derive(Deserialize)]
        struct Logs {
            logs: Vec<LogLine>,
        }
        let mut url = self.endpoints.rest(&format!(
            "v1/models/{model_id}/deployments/{deployment_id}/logs"
        ));
        if let Some(s) = start_ms {
            url.query_pairs_mut()
                .append_pair("start_epoch_millis", &s.to_string());
        }
        let mut l: Logs = self.rest_get("reading deployment logs", url).await?;
        // The platform answers newest first.
        l.logs.reverse();
        Ok(l.logs)
    }

    /// Deactivates a model deployment, retrying transient errors.
    pub async fn deactivate(&self, model_id: &str, deployment_id: &str) -> Result<()> {
        let path = format!("v1/models/{model_id}/deployments/{deployment_id}/deactivate");
        self.post_with_retry("deactivating the deployment", &path, None)
            .await
    }

    /// Deactivates a chain deployment (JSON `{}` body, as truss sends it).
    pub async fn deactivate_chain(&self, chain_id: &str, chain_deployment_id: &str) -> Result<()> {
        let path = format!("v1/chains/{chain_id}/deployments/{chain_deployment_id}/deactivate");
        self.post_with_retry("deactivating the chain deployment", &path, Some(json!({})))
            .await
    }

    /// A chain deployment (ChainDeploymentV1) as raw JSON.
    pub async fn chain_deployment(
        &self,
        chain_id: &str,
        chain_deployment_id: &str,
    ) -> Result<Value, ApiError> {
        let url = self.endpoints.rest(&format!(
            "v1/chains/{chain_id}/deployments/{chain_deployment_id}"
        ));
        self.rest_get("reading the chain deployment", url).await
    }

    /// A chain's environment (ChainEnvironmentV1) as raw JSON.
    pub async fn chain_environment_json(
        &self,
        chain_id: &str,
        env: &str,
    ) -> Result<Value, ApiError> {
        let url = self.endpoints.rest(&format!(
            "v1/chains/{chain_id}/environments/{}",
            urlencode(env)
        ));
        self.rest_get("reading the chain environment", url).await
    }

    /// A REST POST, retried on transient errors.
    async fn post_with_retry(&self, what: &str, path: &str, body: Option<Value>) -> Result<()> {
        let url = self.endpoints.rest(path);
        let mut attempt = 0;
        loop {
            let mut req = self
                .http
                .post(url.clone())
                .header(reqwest::header::AUTHORIZATION, self.auth())
                .timeout(Duration::from_secs(30));
            if let Some(b) = &body {
                req = req.json(b);
            }
            let err = match req.send().await {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) => status_error(what, r).await,
                Err(e) => classify_send_error(what, e),
            };
            match err {
                ApiError::Transient { retry_after, .. } if attempt + 1 < SETUP_ATTEMPTS => {
                    tokio::time::sleep(retry::delay_for(attempt, retry_after)).await;
                    attempt += 1;
                }
                e => bail!(e),
            }
        }
    }

    /// POSTs a predict request; the caller reads the body under its own
    /// deadline.
    pub async fn post_inference(&self, url: Url, payload: &Value) -> Result<Response, ApiError> {
        let what = "predict";
        self.http
            .post(url)
            .header(reqwest::header::AUTHORIZATION, self.auth())
            .json(payload)
            .send()
            .await
            .map_err(|e| classify_send_error(what, e))
    }
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphql_literals_cannot_break_out() {
        for (raw, lit) in [
            ("plain", r#""plain""#),
            (r#"a"b"#, r#""a\"b""#),
            ("a\\b", r#""a\\b""#),
            ("line\nbreak", r#""line\nbreak""#),
            ("x\") { evil }", r#""x\") { evil }""#),
        ] {
            assert_eq!(gql_str(raw), lit);
        }
    }
}
