//! Environments and promotions, for models and chains alike: read an
//! environment, promote a deployment into it, cancel a promotion.

use serde_json::{Value, json};

use super::{Api, ApiError, id};
use crate::kind::Kind;
use crate::promotion::Env;
use crate::retry::Policy;

/// Models and chains have environments and the same promotion endpoints,
/// each under its own collection.
fn collection(kind: Kind) -> &'static str {
    match kind {
        Kind::Model => "models",
        Kind::Chain => "chains",
    }
}

/// The promote request's flags.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PromoteFlags {
    pub(crate) scale_down_previous_deployment: bool,
    pub(crate) preserve_env_instance_type: bool,
}

impl Api {
    /// The environment (EnvironmentV1 or ChainEnvironmentV1), typed, one
    /// try (the wait loops own retries).
    pub(crate) async fn environment_of(
        &self,
        owner: Kind,
        owner_id: &str,
        env: &str,
    ) -> Result<Env, ApiError> {
        self.environment(owner, owner_id, env, "reading the environment", false)
            .await
    }

    /// A chain's environment, as [`Api::environment_of`] reads it.
    pub(crate) async fn chain_environment(
        &self,
        chain_id: &str,
        env: &str,
    ) -> Result<Env, ApiError> {
        let what = "reading the chain environment";
        self.environment(Kind::Chain, chain_id, env, what, false)
            .await
    }

    /// The environment, typed, retried like every read.
    pub(crate) async fn read_environment(
        &self,
        owner: Kind,
        owner_id: &str,
        env: &str,
    ) -> Result<Env, ApiError> {
        self.environment(owner, owner_id, env, "reading the environment", true)
            .await
    }

    /// Reads and types the environment: once, or `retried` under the read
    /// policy. The field names are `Env::parse`'s alone.
    async fn environment(
        &self,
        owner: Kind,
        owner_id: &str,
        env: &str,
        what: &str,
        retried: bool,
    ) -> Result<Env, ApiError> {
        let url = self.environment_url(owner, owner_id, env, None);
        let v: Value = if retried {
            self.rest_read(what, url).await?
        } else {
            self.rest_get(what, url).await?
        };
        // The ids `Env` carries are checked here, where the answer is read.
        for field in ["current_deployment", "candidate_deployment"] {
            id::optional(what, field, v.get(field).and_then(|d| d.get("id")))?;
        }
        if let Some(status) = v
            .pointer("/in_progress_promotion/status")
            .and_then(Value::as_str)
        {
            id::check_status(status.trim())
                .map_err(|e| id::refused(what, "in_progress_promotion.status", &e))?;
        }
        Ok(Env::parse(&v))
    }

    /// `…/{models|chains}/{id}/environments/{env}[/{action}]`.
    fn environment_url(
        &self,
        owner: Kind,
        owner_id: &str,
        env: &str,
        action: Option<&str>,
    ) -> reqwest::Url {
        let mut segments = vec![collection(owner), owner_id, "environments", env];
        segments.extend(action);
        self.endpoints.rest(&segments)
    }

    /// Starts promoting `deployment_id` into `env`; answers the id of the
    /// deployment being promoted, which is a new one when the platform had
    /// to create it. Never resent once it may have arrived: a second
    /// promote would be refused or start a second promotion. A 2xx answer
    /// that names no deployment (cut, empty, a proxy's page) reached the
    /// platform and may have been applied: it is `Ambiguous`, for the
    /// caller to look up.
    pub(crate) async fn promote(
        &self,
        owner: Kind,
        owner_id: &str,
        env: &str,
        deployment_id: &str,
        flags: PromoteFlags,
    ) -> Result<String, ApiError> {
        let url = self.environment_url(owner, owner_id, env, Some("promote"));
        // The chain request (`PromoteToChainEnvironmentRequestV1`) has no
        // `preserve_env_instance_type`.
        let body = match owner {
            Kind::Model => json!({
                "deployment_id": deployment_id,
                "scale_down_previous_deployment": flags.scale_down_previous_deployment,
                "preserve_env_instance_type": flags.preserve_env_instance_type,
            }),
            Kind::Chain => json!({
                "deployment_id": deployment_id,
                "scale_down_previous_deployment": flags.scale_down_previous_deployment,
            }),
        };
        let answer = self
            .rest_post_json(
                Policy::MUTATION,
                "promoting the deployment",
                url,
                Some(body),
            )
            .await?;
        let what = "promoting the deployment";
        match answer
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
        {
            Some(id) => id::check(id)
                .map(str::to_owned)
                .map_err(|e| id::maybe_applied(what, "id", &e)),
            None => Err(ApiError::Ambiguous {
                message: format!(
                    "{what}: the platform answered but named no deployment (a cut or unreadable answer)"
                ),
            }),
        }
    }

    /// Cancels the model promotion in flight in `env`
    /// (`cancel_promotion`: traffic ramps back first). With `force`
    /// (`force_cancel_promotion`, documented for rolling promotions only)
    /// it ends at once. Chains have neither endpoint. The answer says
    /// little: the caller reads the environment to learn what happened.
    pub(crate) async fn cancel_promotion(
        &self,
        model_id: &str,
        env: &str,
        force: bool,
    ) -> Result<Value, ApiError> {
        let action = if force {
            "force_cancel_promotion"
        } else {
            "cancel_promotion"
        };
        let url = self.environment_url(Kind::Model, model_id, env, Some(action));
        self.rest_post_json(Policy::IDEMPOTENT, "cancelling the promotion", url, None)
            .await
    }

    /// Re-activates an inactive model deployment (`…/deployments/{id}/activate`).
    pub(crate) async fn activate(
        &self,
        model_id: &str,
        deployment_id: &str,
    ) -> Result<(), ApiError> {
        let url =
            self.endpoints
                .rest(&["models", model_id, "deployments", deployment_id, "activate"]);
        self.rest_post_json(Policy::IDEMPOTENT, "activating the deployment", url, None)
            .await
            .map(drop)
    }

    /// The public status of a model deployment or a chain deployment.
    pub(crate) async fn deployment_status_of(
        &self,
        owner: Kind,
        owner_id: &str,
        deployment_id: &str,
    ) -> Result<String, ApiError> {
        let collection = collection(owner);
        let url = self
            .endpoints
            .rest(&[collection, owner_id, "deployments", deployment_id]);
        let what = "reading the deployment status";
        let v: Value = self.rest_read(what, url).await?;
        let status = v.get("status").and_then(Value::as_str).unwrap_or("");
        id::check_status(status.trim()).map_err(|e| id::refused(what, "status", &e))?;
        Ok(status.to_string())
    }
}
