//! The push preflight's rules (`POST /v1/prepare_model_upload`): the
//! platform "validates the same payload the commit endpoint will
//! validate". The fake checks what the published request schema and its
//! descriptions say, and the rules its create mutations apply:
//!
//! - exactly one of `name` (a new model) and `model_id` (a new deployment
//!   of that model); `team_id` only with `name`;
//! - `deployment.config` a JSON object whose top-level keys are truss
//!   config fields (truss 0.18.36 forbids unknown keys on push) and whose
//!   best-known fields have their types; the scenario's
//!   `truss_validation.errors` refuse it too (the platform's own check);
//! - `deployment_name` fully `[0-9A-Za-z_.-]+` and, for an existing model,
//!   not already one of its deployments' names (`prepare_model_upload.refuse_taken_names`);
//! - `deploy_timeout_minutes` within 10..=1440;
//! - `environment_name` an environment of the model (a new model: production
//!   or the scenario's `new_model_environments`);
//! - `is_development` with the fields its description says must stay at
//!   their defaults.
//!
//! Refusals are `ApiErr`s: `VALIDATION_ERROR` (400) or `RESOURCE_NOT_FOUND`
//! (404) — the platform's usual error body; the spec documents only 200.

use serde_json::{Map, Value};

use super::{ApiErr, Platform, valid_deploy_timeout, valid_deployment_name};

/// The top-level fields of truss 0.18.36's `TrussConfig`.
const CONFIG_FIELDS: &[&str] = &[
    "model_name",
    "model_metadata",
    "description",
    "examples_filename",
    "data_dir",
    "external_data",
    "external_package_dirs",
    "python_version",
    "base_image",
    "requirements_file",
    "requirements",
    "system_packages",
    "environment_variables",
    "secrets",
    "resources",
    "runtime",
    "build",
    "build_commands",
    "docker_server",
    "model_cache",
    "weights",
    "bdn",
    "trt_llm",
    "training_checkpoints",
    "bis_llm",
    "input_type",
    "model_framework",
    "model_type",
    "model_module_dir",
    "model_class_filename",
    "model_class_name",
    "bundled_packages_dir",
    "use_local_src",
    "cache_internal",
    "live_reload",
    "apply_library_patches",
    "spec_version",
];

fn invalid(msg: impl Into<String>) -> ApiErr {
    ApiErr::invalid(msg)
}

/// `o[k]` as an optional value of the kind `is` accepts (null = absent).
fn field<'a>(
    o: &'a Map<String, Value>,
    k: &str,
    kind: &str,
    is: fn(&Value) -> bool,
) -> Result<Option<&'a Value>, ApiErr> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(v) if is(v) => Ok(Some(v)),
        Some(v) => Err(invalid(format!("{k} must be {kind}, got {v}"))),
    }
}

fn check_config(config: &Map<String, Value>) -> Result<(), ApiErr> {
    let unknown: Vec<&str> = config
        .keys()
        .map(String::as_str)
        .filter(|k| !CONFIG_FIELDS.contains(k))
        .collect();
    if !unknown.is_empty() {
        return Err(invalid(format!(
            "config has unknown field(s): {}",
            unknown.join(", ")
        )));
    }
    let string_list = |v: &Value| v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
    let string_map = |v: &Value| {
        v.as_object()
            .is_some_and(|o| o.values().all(Value::is_string))
    };
    for (k, kind, ok) in [
        (
            "model_name",
            "a string",
            Value::is_string as fn(&Value) -> bool,
        ),
        ("python_version", "a string", Value::is_string),
        ("resources", "an object", Value::is_object),
        ("runtime", "an object", Value::is_object),
        ("build", "an object", Value::is_object),
        ("model_metadata", "an object", Value::is_object),
        ("requirements", "a list of strings", string_list),
        ("system_packages", "a list of strings", string_list),
        ("environment_variables", "a map of strings", string_map),
        ("secrets", "an object", Value::is_object),
    ] {
        field(config, k, kind, ok).map_err(|e| invalid(format!("config: {}", e.message)))?;
    }
    Ok(())
}

impl Platform {
    /// Checks a `PrepareModelUploadRequestV1` body against the platform's
    /// rules (the module doc lists them).
    pub fn preflight(&self, body: &Map<String, Value>) -> Result<(), ApiErr> {
        let text = |k: &str| field(body, k, "a string", Value::is_string);
        let name = text("name")?.and_then(Value::as_str);
        let model_id = text("model_id")?.and_then(Value::as_str);
        let team_id = text("team_id")?.and_then(Value::as_str);
        let Some(Value::Object(d)) = body.get("deployment") else {
            return Err(invalid("deployment is required and must be an object"));
        };
        let Some(Value::Object(config)) = d.get("config") else {
            return Err(invalid(
                "deployment.config is required and must be an object",
            ));
        };
        let dtext = |k: &str| field(d, k, "a string", Value::is_string);
        let dbool = |k: &str| field(d, k, "a boolean", Value::is_boolean);
        dtext("raw_config")?;
        field(d, "user_env", "an object", Value::is_object)?;
        field(d, "labels", "an object", Value::is_object)?;
        let env = dtext("environment_name")?.and_then(Value::as_str);
        let dep_name = dtext("deployment_name")?.and_then(Value::as_str);
        let preserve = dbool("preserve_env_instance_type")?.and_then(Value::as_bool);
        let development = dbool("is_development")?
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let timeout = field(d, "deploy_timeout_minutes", "an integer", |v| v.is_i64())?
            .and_then(Value::as_i64);
        check_config(config)?;
        let errors = &self.scenario.truss_validation.errors;
        if !errors.is_empty() {
            return Err(invalid(format!("Invalid config: {}", errors.join("; "))));
        }
        if let Some(m) = timeout
            && !valid_deploy_timeout(m)
        {
            return Err(invalid(format!(
                "deploy_timeout_minutes must be between 10 and 1440, got {m}"
            )));
        }
        if let Some(n) = dep_name
            && !valid_deployment_name(n)
        {
            return Err(invalid(format!(
                "Invalid deployment name `{n}`: only letters, digits, `_`, `-` and `.` are allowed"
            )));
        }
        if development && (env.is_some() || dep_name.is_some() || preserve == Some(false)) {
            return Err(invalid(
                "is_development: environment_name, deployment_name and preserve_env_instance_type must be left at their defaults",
            ));
        }
        match (name, model_id) {
            (Some(_), Some(_)) | (None, None) => {
                Err(invalid("Exactly one of name and model_id is required"))
            }
            (Some(name), None) => self.preflight_new_model(name, team_id, env, development),
            (None, Some(id)) => {
                if team_id.is_some() {
                    return Err(invalid(
                        "team_id must not be set with model_id: the model already has a team",
                    ));
                }
                self.preflight_new_deployment(id, env, dep_name)
            }
        }
    }

    fn preflight_new_model(
        &self,
        name: &str,
        team_id: Option<&str>,
        env: Option<&str>,
        development: bool,
    ) -> Result<(), ApiErr> {
        if name.trim().is_empty() {
            return Err(invalid("Model name must not be empty"));
        }
        let team = self.resolve_team(team_id)?;
        // A development push reuses the model of that name; a new-model
        // push must not find one.
        if !development
            && self
                .models
                .iter()
                .any(|m| m.name == name && m.team_id == team)
        {
            return Err(invalid(format!(
                "A model named `{name}` already exists in this team: push with its model_id"
            )));
        }
        if let Some(env) = env
            && !self.new_model_env_names().iter().any(|e| e == env)
        {
            return Err(ApiErr::not_found(format!(
                "Environment `{env}` does not exist: a new model only has {}",
                self.new_model_env_names().join(", ")
            )));
        }
        Ok(())
    }

    fn preflight_new_deployment(
        &self,
        model_id: &str,
        env: Option<&str>,
        dep_name: Option<&str>,
    ) -> Result<(), ApiErr> {
        let Some(model) = self.model(model_id).filter(|m| m.origin != "CHAINS") else {
            return Err(ApiErr::not_found(format!("Model `{model_id}` not found")));
        };
        if let Some(env) = env
            && !model.environments.iter().any(|e| e.name == env)
        {
            return Err(ApiErr::not_found(format!(
                "Environment `{env}` does not exist for model `{model_id}`"
            )));
        }
        if let Some(n) = dep_name
            && self.scenario.prepare_model_upload.refuse_taken_names
            && self.model_deployments(model_id).any(|d| d.name == n)
        {
            return Err(invalid(format!(
                "Model `{model_id}` already has a deployment named `{n}`: choose another deployment_name"
            )));
        }
        Ok(())
    }
}
