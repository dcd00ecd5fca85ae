//! Environments and promotions, for models and chains alike: read an
//! environment, promote a deployment into it, cancel a promotion.

use serde_json::{Value, json};

use super::{Api, ApiError};
use crate::retry::Policy;

/// What owns the deployments: a model or a chain. Both have environments
/// and the same promotion endpoints under their own path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    Model,
    Chain,
}

impl Owner {
    fn collection(self) -> &'static str {
        match self {
            Owner::Model => "models",
            Owner::Chain => "chains",
        }
    }

    /// `model` or `chain`, for messages and inference host names.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Owner::Model => "model",
            Owner::Chain => "chain",
        }
    }
}

/// The promote request's flags.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PromoteFlags {
    pub(crate) scale_down_previous_deployment: bool,
    pub(crate) preserve_env_instance_type: bool,
}

impl Api {
    /// The environment (EnvironmentV1 or ChainEnvironmentV1) as raw JSON,
    /// one try (the wait loops own retries).
    pub(crate) async fn environment_of(
        &self,
        owner: Owner,
        owner_id: &str,
        env: &str,
    ) -> Result<Value, ApiError> {
        let url = self.environment_url(owner, owner_id, env, None);
        self.rest_get("reading the environment", url).await
    }

    /// The environment, retried like every read.
    pub(crate) async fn read_environment(
        &self,
        owner: Owner,
        owner_id: &str,
        env: &str,
    ) -> Result<Value, ApiError> {
        let url = self.environment_url(owner, owner_id, env, None);
        self.rest_read("reading the environment", url).await
    }

    /// `…/{models|chains}/{id}/environments/{env}[/{action}]`.
    fn environment_url(
        &self,
        owner: Owner,
        owner_id: &str,
        env: &str,
        action: Option<&str>,
    ) -> reqwest::Url {
        let mut segments = vec![owner.collection(), owner_id, "environments", env];
        segments.extend(action);
        self.endpoints.rest(&segments)
    }

    /// Starts promoting `deployment_id` into `env`; answers the id of the
    /// deployment being promoted, which is a new one when the platform had
    /// to create it. Never resent once it may have arrived: a second
    /// promote would be refused or start a second promotion.
    pub(crate) async fn promote(
        &self,
        owner: Owner,
        owner_id: &str,
        env: &str,
        deployment_id: &str,
        flags: PromoteFlags,
    ) -> Result<String, ApiError> {
        let url =
            self.endpoints
                .rest(&[owner.collection(), owner_id, "environments", env, "promote"]);
        let body = json!({
            "deployment_id": deployment_id,
            "scale_down_previous_deployment": flags.scale_down_previous_deployment,
            "preserve_env_instance_type": flags.preserve_env_instance_type,
        });
        let answer = self
            .rest_post_json(
                Policy::MUTATION,
                "promoting the deployment",
                url,
                Some(body),
            )
            .await?;
        answer
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                ApiError::permanent(
                    "promoting the deployment: the answer names no deployment id".to_string(),
                )
            })
    }

    /// Cancels the promotion in flight in `env`. With `force` it ends at
    /// once and the previous deployment keeps (or takes back) all traffic;
    /// without, traffic ramps back first. Safe to repeat: a second cancel
    /// of a cancelled promotion is refused, which the caller reads as done.
    pub(crate) async fn cancel_promotion(
        &self,
        owner: Owner,
        owner_id: &str,
        env: &str,
        force: bool,
    ) -> Result<Value, ApiError> {
        let action = if force {
            "force_cancel_promotion"
        } else {
            "cancel_promotion"
        };
        let url = self.environment_url(owner, owner_id, env, Some(action));
        self.rest_post_json(Policy::IDEMPOTENT, "cancelling the promotion", url, None)
            .await
    }
}
