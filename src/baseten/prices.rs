//! What a deployment runs on and what that costs, as the published
//! management API says: `DeploymentV1`'s `instance_type_name`,
//! `autoscaling_settings` and `environment`, read from the model's
//! deployment list (`GET /v1/models/{model_id}/deployments`, which
//! answers both "this deployment" and "what is in this environment" in
//! one request, and leaves the status reads of the wait loop alone), and
//! `GET /v1/instance_type_prices` (`InstanceTypePricesV1`, USD per
//! minute). The values are kept as the platform wrote them (ids checked);
//! `flow::price` checks them before any is shown.

use serde::Deserialize;
use serde_json::Value;

use super::{Api, ApiError};

/// A deployment's instance type and replica range, as answered.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub(crate) struct Capacity {
    #[serde(deserialize_with = "super::id::checked")]
    pub(crate) id: String,
    /// The environment the deployment is in, if any.
    #[serde(default)]
    pub(crate) environment: Option<String>,
    #[serde(default)]
    pub(crate) instance_type_name: Option<Value>,
    /// `AutoscalingSettingsV1` (`min_replica`, `max_replica`, …); null
    /// until the deployment is ready.
    #[serde(default)]
    pub(crate) autoscaling_settings: Option<Value>,
}

/// One `InstanceTypeWithPriceV1`: the type's name, its GPUs and the
/// price, every value as answered.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PriceEntry {
    pub(crate) name: Value,
    pub(crate) gpu_count: Value,
    pub(crate) gpu_type: Value,
    pub(crate) price: Value,
}

impl Api {
    /// Every deployment of the model with its instance type, autoscaling
    /// settings and environment, one try (a read that only informs: its
    /// caller's deadline is short).
    pub(crate) async fn capacities(&self, model_id: &str) -> Result<Vec<Capacity>, ApiError> {
        #[derive(Deserialize)]
        struct List {
            deployments: Vec<Capacity>,
        }
        let url = self.endpoints.rest(&["models", model_id, "deployments"]);
        let l: List = self
            .rest_get("listing the deployments' instance types", url)
            .await?;
        Ok(l.deployments)
    }

    /// Every instance type's price, one try.
    pub(crate) async fn instance_type_prices(&self) -> Result<Vec<PriceEntry>, ApiError> {
        #[derive(Deserialize)]
        struct List {
            instance_types: Vec<Value>,
        }
        let l: List = self
            .rest_get(
                "reading instance type prices",
                self.endpoints.rest(&["instance_type_prices"]),
            )
            .await?;
        Ok(l.instance_types
            .into_iter()
            .map(|e| {
                let t = e.get("instance_type").cloned().unwrap_or(Value::Null);
                PriceEntry {
                    name: t.get("name").cloned().unwrap_or(Value::Null),
                    gpu_count: t.get("gpu_count").cloned().unwrap_or(Value::Null),
                    gpu_type: t.get("gpu_type").cloned().unwrap_or(Value::Null),
                    price: e.get("price").cloned().unwrap_or(Value::Null),
                }
            })
            .collect())
    }
}
