//! The platform reads and mutations teardown and prune make (REST v1, the
//! published management API): the models the key sees, one model's
//! deployments with their status, labels and creation time, its
//! environments as `promotion::Env`, and the published `DELETE` of a
//! deployment read into what it says happened (deleted, refused, gone).
//!
//! Every id is checked where it is parsed (`id`); names are returned as
//! written and made safe by the caller before they reach an output.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::{Api, ApiError, id};
use crate::kind::Kind;
use crate::promotion::Env;
use crate::retry::Policy;

/// A DELETE waits this long for its answer.
const DELETE_TIMEOUT_SECS: u64 = 30;

/// A model as `GET /v1/models` lists it (ModelV1, what a teardown reads).
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct ModelRef {
    #[serde(deserialize_with = "id::checked")]
    pub(crate) id: String,
    pub(crate) name: String,
    /// `team_name`: the team the model belongs to.
    #[serde(default)]
    pub(crate) team_name: Option<String>,
}

/// A deployment as `GET /v1/models/{id}/deployments` lists it
/// (DeploymentV1): what the retirement rules read.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Listed {
    #[serde(deserialize_with = "id::checked")]
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(deserialize_with = "id::checked_status")]
    pub(crate) status: String,
    /// Required, as the published `DeploymentV1` has it: a listing that
    /// does not say whether a deployment is the development one, or which
    /// environment it belongs to, decides nothing (a missing field is not
    /// read as `false` or none).
    pub(crate) is_development: bool,
    /// `is_production`, required too: one in production is protected
    /// whatever else the answer says.
    pub(crate) is_production: bool,
    /// The environment it belongs to (`environment`, null when none;
    /// present, as the published `DeploymentV1` requires).
    #[serde(deserialize_with = "Option::deserialize")]
    pub(crate) environment: Option<String>,
    #[serde(default)]
    pub(crate) labels: Option<serde_json::Map<String, Value>>,
    /// ISO 8601 as the platform writes it.
    #[serde(default)]
    pub(crate) created_at: Option<String>,
    /// `instance_type_name` (null until known).
    #[serde(default)]
    pub(crate) instance_type_name: Option<String>,
    /// `autoscaling_settings` (null until the deployment first became
    /// ready): its `min_replica` is what the deployment costs at rest.
    #[serde(default)]
    pub(crate) autoscaling_settings: Option<Value>,
}

/// A chain deployment as `GET /v1/chains/{id}/deployments` lists it
/// (ChainDeploymentV1): what the retirement rules read. No name, no
/// labels, no development deployment in the published API.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct ChainListed {
    #[serde(deserialize_with = "id::checked")]
    pub(crate) id: String,
    /// The chain it belongs to: one of another chain decides nothing.
    #[serde(deserialize_with = "id::checked")]
    pub(crate) chain_id: String,
    #[serde(deserialize_with = "id::checked_status")]
    pub(crate) status: String,
    /// Required and present (null when none), as `ChainDeploymentV1` has it.
    #[serde(deserialize_with = "Option::deserialize")]
    pub(crate) environment: Option<String>,
    /// Required: ISO 8601 as the platform writes it.
    pub(crate) created_at: String,
}

/// What a `DELETE` of a deployment says happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Deletion {
    /// `deleted: true`.
    Done,
    /// 404: it is gone already (another run, a person).
    Gone,
    /// An answer saying the delete did not happen (`deleted: false`), in
    /// words.
    Refused(String),
}

impl Api {
    /// Every model the key sees (`GET /v1/models`, one answer), retried
    /// like every read.
    pub(crate) async fn models_seen(&self) -> Result<Vec<ModelRef>, ApiError> {
        #[derive(Deserialize)]
        struct Models {
            models: Vec<ModelRef>,
        }
        let url = self.endpoints.rest(&["models"]);
        let m: Models = self.rest_read("listing the team's models", url).await?;
        Ok(m.models)
    }

    /// Every deployment of the model (`GET /v1/models/{id}/deployments`:
    /// one answer, no paging in the published API), retried like every
    /// read.
    pub(crate) async fn deployments_of(&self, model_id: &str) -> Result<Vec<Listed>, ApiError> {
        #[derive(Deserialize)]
        struct Deployments {
            deployments: Vec<Listed>,
        }
        let url = self.endpoints.rest(&["models", model_id, "deployments"]);
        let l: Deployments = self
            .rest_read("listing the model's deployments", url)
            .await?;
        Ok(l.deployments)
    }

    /// Every deployment of the chain (`GET /v1/chains/{id}/deployments`,
    /// one answer), retried like every read.
    pub(crate) async fn chain_deployments_of(
        &self,
        chain_id: &str,
    ) -> Result<Vec<ChainListed>, ApiError> {
        #[derive(Deserialize)]
        struct Deployments {
            deployments: Vec<ChainListed>,
        }
        let url = self.endpoints.rest(&["chains", chain_id, "deployments"]);
        let l: Deployments = self
            .rest_read("listing the chain's deployments", url)
            .await?;
        Ok(l.deployments)
    }

    /// The model's (or chain's) environments, each read as an [`Env`]
    /// (what serves it and what is being promoted into it), every id in
    /// them checked. Retried like every read.
    pub(crate) async fn environment_readings(
        &self,
        kind: Kind,
        owner_id: &str,
    ) -> Result<Vec<(String, Env)>, ApiError> {
        #[derive(Deserialize)]
        struct List {
            environments: Vec<Value>,
        }
        let (collection, what) = match kind {
            Kind::Model => ("models", "reading the model's environments"),
            Kind::Chain => ("chains", "reading the chain's environments"),
        };
        let url = self.endpoints.rest(&[collection, owner_id, "environments"]);
        let l: List = self.rest_read(what, url).await?;
        let mut out = Vec::with_capacity(l.environments.len());
        for e in &l.environments {
            let name = e.get("name").and_then(Value::as_str).ok_or_else(|| {
                ApiError::permanent(format!("{what}: an environment has no name"))
            })?;
            // `current_deployment` is required (null when nothing
            // serves): an answer without it does not say what serves.
            if e.get("current_deployment").is_none() {
                return Err(ApiError::permanent(format!(
                    "{what}: an environment's answer has no current_deployment (null when nothing serves it), so what serves it is not known"
                )));
            }
            for field in ["current_deployment", "candidate_deployment"] {
                if let Some(d) = e.get(field).filter(|d| !d.is_null()) {
                    id::field(
                        what,
                        &format!("{field}.id"),
                        d.get("id").unwrap_or(&Value::Null),
                    )?;
                }
            }
            out.push((name.to_string(), Env::parse(e)));
        }
        Ok(out)
    }

    /// Deletes a model deployment (`DELETE /v1/models/{id}/deployments/{id}`,
    /// answered with DeploymentTombstoneV1) or a chain deployment
    /// (`DELETE /v1/chains/{id}/deployments/{id}`, ChainDeploymentTombstoneV1). Sent again after a lost answer
    /// or a gateway's error, as a deactivation is: a second `DELETE` of one
    /// that went is a 404, read as gone. The platform's own 500 is final.
    pub(crate) async fn delete_deployment(
        &self,
        kind: Kind,
        owner_id: &str,
        deployment_id: &str,
    ) -> Result<Deletion, ApiError> {
        #[derive(Deserialize)]
        struct Tombstone {
            deleted: bool,
        }
        let (collection, what) = match kind {
            Kind::Model => ("models", "deleting the deployment"),
            Kind::Chain => ("chains", "deleting the chain deployment"),
        };
        let url = self
            .endpoints
            .rest(&[collection, owner_id, "deployments", deployment_id]);
        let answer = self
            .retrying(Policy::DEACTIVATE, self.deadline(), |_| {
                let req = self
                    .http
                    .delete(url.clone())
                    .timeout(Duration::from_secs(DELETE_TIMEOUT_SECS));
                async move {
                    let resp = self.send(what, req).await?;
                    let bytes = self.body(what, resp).await?;
                    self.decode::<Tombstone>(what, &bytes)
                }
            })
            .await;
        match answer {
            Ok(Tombstone { deleted: true }) => Ok(Deletion::Done),
            Ok(Tombstone { deleted: false }) => Ok(Deletion::Refused(
                "the platform answered deleted: false".into(),
            )),
            Err(e) if e.permanent_status() == Some(404) => Ok(Deletion::Gone),
            Err(e) => Err(e),
        }
    }
}
