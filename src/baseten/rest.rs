//! REST v1 on the API host: deployment and chain deployment reads,
//! environments, logs, and deactivation.

use serde::Deserialize;
use serde_json::{Value, json};

use super::audit::AuditEntry;
use super::{Api, ApiError};
use crate::retry::Policy;

/// A deployment as REST v1 describes it (fields truss-push reads).
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Deployment {
    #[serde(deserialize_with = "super::id::checked")]
    pub(crate) id: String,
    #[serde(deserialize_with = "super::id::checked_status")]
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) is_production: bool,
    /// `labels` (object or null): what the creator attached, the content
    /// hash this tool records among them.
    #[serde(default)]
    pub(crate) labels: Option<serde_json::Map<String, Value>>,
    /// `created_at`, ISO 8601 as the platform writes it.
    #[serde(default)]
    pub(crate) created_at: Option<String>,
    #[serde(default)]
    pub(crate) name: Option<String>,
}

/// An environment (EnvironmentV1), only what cleanup reads.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Environment {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) current_deployment: Option<Deployment>,
}

/// A deployment as the lists name it.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Listed {
    #[serde(deserialize_with = "super::id::checked")]
    pub(crate) id: String,
    #[serde(default)]
    name: Option<String>,
    /// `labels` (object or null), as on [`Deployment`].
    #[serde(default)]
    pub(crate) labels: Option<serde_json::Map<String, Value>>,
}

#[derive(Deserialize)]
struct Deployments {
    deployments: Vec<Listed>,
}

/// One log line (LogV1).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Hash)]
pub(crate) struct LogLine {
    pub(crate) timestamp: String,
    pub(crate) message: String,
    #[serde(default)]
    pub(crate) replica: Option<String>,
}

impl Api {
    /// One status read; the wait loop owns retries.
    pub(crate) async fn deployment(
        &self,
        model_id: &str,
        deployment_id: &str,
    ) -> Result<Deployment, ApiError> {
        let url = self
            .endpoints
            .rest(&["models", model_id, "deployments", deployment_id]);
        self.rest_get("reading the deployment status", url).await
    }

    /// The deployment's own `config.yaml` text as the platform keeps it
    /// (`GET …/config?output_format=raw`, `raw_config`), one try: `None`
    /// when the platform has none (deployments created before it kept raw
    /// configs, or one whose raw text it dropped).
    pub(crate) async fn deployment_raw_config(
        &self,
        model_id: &str,
        deployment_id: &str,
    ) -> Result<Option<String>, ApiError> {
        #[derive(Deserialize)]
        struct Answer {
            #[serde(default)]
            raw_config: Option<String>,
        }
        let mut url =
            self.endpoints
                .rest(&["models", model_id, "deployments", deployment_id, "config"]);
        url.query_pairs_mut().append_pair("output_format", "raw");
        let a: Answer = self
            .rest_get("reading the serving deployment's config", url)
            .await?;
        Ok(a.raw_config)
    }

    /// The first page of the model's audit log (newest first) of
    /// promotions of `deployment_id`, one try.
    pub(crate) async fn promotions_of(
        &self,
        model_id: &str,
        deployment_id: &str,
    ) -> Result<Vec<AuditEntry>, ApiError> {
        #[derive(Deserialize)]
        struct Page {
            items: Vec<AuditEntry>,
        }
        let mut url = self.endpoints.rest(&["models", model_id, "audit_logs"]);
        url.query_pairs_mut()
            .append_pair("deployment_ids", deployment_id)
            .append_pair("event_type_groups", "PROMOTED");
        let page: Page = self.rest_get("reading the model's audit log", url).await?;
        Ok(page.items)
    }

    /// The model's deployments named `name` (ids and labels), retried like
    /// every read.
    pub(crate) async fn deployments_named(
        &self,
        model_id: &str,
        name: &str,
    ) -> Result<Vec<Listed>, ApiError> {
        let url = self.endpoints.rest(&["models", model_id, "deployments"]);
        let l: Deployments = self.rest_read("listing deployments", url).await?;
        Ok(l.deployments
            .into_iter()
            .filter(|d| d.name.as_deref() == Some(name))
            .collect())
    }

    /// Ids of the chain's deployments, retried like every read.
    pub(crate) async fn chain_deployment_ids(
        &self,
        chain_id: &str,
    ) -> Result<Vec<String>, ApiError> {
        let url = self.endpoints.rest(&["chains", chain_id, "deployments"]);
        let l: Deployments = self.rest_read("listing chain deployments", url).await?;
        Ok(l.deployments.into_iter().map(|d| d.id).collect())
    }

    /// Names of the secrets a deploy in team `team_id` can use (never
    /// their values): the team's own list when the team is known, as the
    /// official client asks, else the key's whole list, which spans every
    /// team the key belongs to. Read from `{"secrets": [...]}` or a bare array.
    pub(crate) async fn secret_names(
        &self,
        team_id: Option<&str>,
    ) -> Result<Vec<String>, ApiError> {
        #[derive(Deserialize)]
        struct Named {
            name: String,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Answer {
            Wrapped { secrets: Vec<Named> },
            Bare(Vec<Named>),
        }
        // One try: the check only informs (`crate::flow::inform`), under its own
        // short deadline; a retry would outlive it.
        let url = match team_id {
            Some(team) => self.endpoints.rest(&["teams", team, "secrets"]),
            None => self.endpoints.rest(&["secrets"]),
        };
        let answer: Answer = self.rest_get("listing secrets", url).await?;
        let list = match answer {
            Answer::Wrapped { secrets } | Answer::Bare(secrets) => secrets,
        };
        Ok(list.into_iter().map(|s| s.name).collect())
    }

    pub(crate) async fn environments(&self, model_id: &str) -> Result<Vec<Environment>, ApiError> {
        #[derive(Deserialize)]
        struct List {
            environments: Vec<Environment>,
        }
        let url = self.endpoints.rest(&["models", model_id, "environments"]);
        let l: List = self.rest_get("listing environments", url).await?;
        Ok(l.environments)
    }

    /// Log lines since `start_ms` (epoch milliseconds), oldest first.
    pub(crate) async fn logs(
        &self,
        model_id: &str,
        deployment_id: &str,
        start_ms: Option<u64>,
    ) -> Result<Vec<LogLine>, ApiError> {
        #[derive(Deserialize)]
        struct Logs {
            logs: Vec<LogLine>,
        }
        let mut url =
            self.endpoints
                .rest(&["models", model_id, "deployments", deployment_id, "logs"]);
        if let Some(s) = start_ms {
            url.query_pairs_mut()
                .append_pair("start_epoch_millis", &s.to_string());
        }
        let mut l: Logs = self.rest_get("reading deployment logs", url).await?;
        // The platform answers newest first.
        l.logs.reverse();
        Ok(l.logs)
    }

    /// Deactivates a model deployment; safe to send twice, so a lost
    /// answer or a gateway's error is retried, the platform's own 500 not.
    pub(crate) async fn deactivate(
        &self,
        model_id: &str,
        deployment_id: &str,
    ) -> Result<(), ApiError> {
        let url = self.endpoints.rest(&[
            "models",
            model_id,
            "deployments",
            deployment_id,
            "deactivate",
        ]);
        self.rest_post(Policy::DEACTIVATE, "deactivating the deployment", url, None)
            .await
    }

    /// Deactivates a chain deployment (JSON `{}` body, as truss sends it).
    pub(crate) async fn deactivate_chain(
        &self,
        chain_id: &str,
        chain_deployment_id: &str,
    ) -> Result<(), ApiError> {
        let url = self.endpoints.rest(&[
            "chains",
            chain_id,
            "deployments",
            chain_deployment_id,
            "deactivate",
        ]);
        self.rest_post(
            Policy::DEACTIVATE,
            "deactivating the chain deployment",
            url,
            Some(json!({})),
        )
        .await
    }

    /// A chain deployment (ChainDeploymentV1) as raw JSON.
    pub(crate) async fn chain_deployment(
        &self,
        chain_id: &str,
        chain_deployment_id: &str,
    ) -> Result<Value, ApiError> {
        let url = self
            .endpoints
            .rest(&["chains", chain_id, "deployments", chain_deployment_id]);
        self.rest_get("reading the chain deployment", url).await
    }
}
