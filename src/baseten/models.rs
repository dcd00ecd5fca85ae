//! GraphQL for teams and models: listing, config validation, upload
//! credentials, and the create mutations.

use serde_json::{Value, json};

use super::{Api, ApiError, Named, Team, UploadCredentials, gql_str, id};
use crate::retry::Policy;

/// `truss_validation`'s answer.
#[derive(Clone, Debug, Default)]
pub(crate) struct Validation {
    pub(crate) success: bool,
    pub(crate) warnings: Vec<String>,
    pub(crate) errors: Vec<String>,
}

/// What a create mutation returns.
#[derive(Clone, Debug)]
pub(crate) struct Created {
    pub(crate) deployment_id: String,
    pub(crate) model_id: String,
}

/// Everything a create mutation takes.
#[derive(Clone, Debug)]
pub(crate) struct CreateRequest<'a> {
    pub(crate) existing_model_id: Option<&'a str>,
    pub(crate) model_name: &'a str,
    pub(crate) s3_key: &'a str,
    pub(crate) config_b64: &'a str,
    pub(crate) deployment_name: &'a str,
    pub(crate) environment: Option<&'a str>,
    /// Scale the environment's previous deployment down once this one
    /// serves (truss's default; false keeps it up).
    pub(crate) scale_down_old_production: bool,
    pub(crate) preserve_env_instance_type: bool,
    pub(crate) deploy_timeout_minutes: u32,
    pub(crate) team_id: Option<&'a str>,
    pub(crate) truss_user_env: &'a str,
    pub(crate) labels_json: Option<String>,
    pub(crate) raw_config_b64: Option<String>,
}

/// Reads a list field of a GraphQL answer.
pub(super) fn list<T: serde::de::DeserializeOwned>(
    d: &Value,
    field: &str,
    what: &str,
) -> Result<T, ApiError> {
    match id::refused_during(|| serde_json::from_value(d[field].clone())) {
        Ok(parsed) => {
            parsed.map_err(|e| ApiError::permanent(format!("{what}: unexpected answer: {e}")))
        }
        Err(refused) => Err(id::refused(what, field, &refused)),
    }
}

/// Models or chains of a list, every id checked (`Named`'s fields): one
/// the run would not use is the platform's error, not an entry left out
/// (leaving it out would create a second model of the same name).
pub(super) fn named(d: &Value, field: &str, what: &str) -> Result<Vec<Named>, ApiError> {
    list(d, field, what)
}

/// `team_id: "…"` for one team, else `all: true`.
pub(super) fn team_arg(team_id: Option<&str>) -> String {
    match team_id {
        Some(t) => format!("team_id: {}", gql_str(t)),
        None => "all: true".to_string(),
    }
}

impl Api {
    pub(crate) async fn teams(&self) -> Result<Vec<Team>, ApiError> {
        let what = "listing teams";
        let d = self
            .query(what, "query Teams { teams { id name default } }", None)
            .await?;
        list(&d, "teams", what)
    }

    /// Models visible to the key, in one team or all.
    pub(crate) async fn models(&self, team_id: Option<&str>) -> Result<Vec<Named>, ApiError> {
        let what = "listing models";
        let q = format!(
            "query {{ models({}) {{ id name team {{ id name }} }} }}",
            team_arg(team_id)
        );
        let d = self.query(what, &q, None).await?;
        named(&d, "models", what)
    }

    pub(crate) async fn truss_validation(
        &self,
        config_b64: &str,
        truss_user_env: &str,
    ) -> Result<Validation, ApiError> {
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

    pub(crate) async fn model_upload_credentials(&self) -> Result<UploadCredentials, ApiError> {
        self.upload_credentials("model_s3_upload_credentials").await
    }

    /// Temporary S3 credentials from `field` (models' or chains').
    pub(super) async fn upload_credentials(
        &self,
        field: &str,
    ) -> Result<UploadCredentials, ApiError> {
        let what = "getting upload credentials";
        let q = format!(
            "query {{ {field} {{ s3_bucket s3_key aws_access_key_id aws_secret_access_key aws_session_token }} }}"
        );
        let d = self.query(what, &q, None).await?;
        list(&d, field, what)
    }

    /// `create_model_from_truss` for a new model, else
    /// `create_model_version_from_truss`. The deployment name is
    /// `version_name` in the first and `name` in the second: the platform's
    /// two mutations spell it differently.
    pub(crate) async fn create(&self, r: &CreateRequest<'_>) -> Result<Created, ApiError> {
        let (field, q) = create_document(r);
        let vars = json!({
            "trussUserEnv": r.truss_user_env,
            "userDeployMetadata": r.labels_json,
            "rawConfig": r.raw_config_b64,
        });
        let what = "creating the deployment";
        let d = self.graphql(Policy::MUTATION, what, &q, Some(vars)).await?;
        let mv = &d[field]["model_version"];
        let deployment_id = id::answered(what, "model_version.id", &mv["id"])?;
        let model_id = match r.existing_model_id {
            Some(id) => id.to_string(),
            None => id::answered(what, "oracle.id", &mv["oracle"]["id"])?,
        };
        Ok(Created {
            deployment_id,
            model_id,
        })
    }
}

/// The create mutation and the field it answers under.
fn create_document(r: &CreateRequest<'_>) -> (&'static str, String) {
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
        args.push(format!(
            "scale_down_old_production: {}",
            r.scale_down_old_production
        ));
        args.push(format!(
            "preserve_env_instance_type: {}",
            r.preserve_env_instance_type
        ));
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
    (field, q)
}
