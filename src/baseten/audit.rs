//! A model's or a chain's audit log (`GET /v1/models/{id}/audit_logs`,
//! `GET /v1/chains/{id}/audit_logs`), read whole:
//! every page, following the cursor, as the published API pages it
//! (`ListAuditLogsResponseV1`: `items` and `pagination {has_more,
//! cursor}`). The log is what decides a rollback's target, what prune and
//! teardown protect, and whether production drifted, so a partial read is
//! never returned as the log: a page that fails fails the read, and a log
//! longer than [`AUDIT_MAX_PAGES`] pages is an error, not its first pages.

use serde::Deserialize;
use serde_json::Value;

use super::{Api, ApiError};
use crate::kind::Kind;

/// Entries per page: the published maximum.
const AUDIT_PAGE_LIMIT: u32 = 200;
/// The event-type groups whose entries place a deployment in an
/// environment (`AuditEntry::placement`).
pub(crate) const PLACEMENT_GROUPS: [&str; 2] = ["PROMOTED", "DEPLOYED"];
/// Pages read at most (40,000 entries): past this the log is refused
/// rather than read in part.
pub(crate) const AUDIT_MAX_PAGES: usize = 200;

/// One audit-log entry (`AuditLogEntryV1`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub(crate) struct AuditEntry {
    /// The entry's id (`id`; empty when the answer has none).
    #[serde(default)]
    pub(crate) id: String,
    /// When the action occurred, ISO 8601.
    pub(crate) created: String,
    pub(crate) event_type: String,
    /// Details by `event_type` (`deployment_id`, `environment_name`, …).
    #[serde(default)]
    pub(crate) event_data: Value,
    /// The surface that issued the action (`UI`, `API`, `MCP`, `SYSTEM`,
    /// `OTHER`), when the answer says.
    #[serde(default)]
    pub(crate) source: Option<String>,
    /// Who did it, when the answer says.
    #[serde(default)]
    pub(crate) actor: Option<Actor>,
}

/// The actor of an entry (`AuditLogActorV1`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub(crate) struct Actor {
    /// `USER`, `API_KEY`, `BASETEN_USER`, `BASETEN_SYSTEM`, `TOMBSTONE_USER`.
    #[serde(rename = "type", default)]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) api_key_prefix: Option<String>,
    #[serde(default)]
    pub(crate) email: Option<String>,
}

impl AuditEntry {
    /// A text field of `event_data`.
    pub(crate) fn data(&self, field: &str) -> Option<&str> {
        self.event_data.get(field)?.as_str()
    }

    /// An entry that places a deployment in an environment, as `history`
    /// reads it (when, which deployment, which environment): a
    /// `MODEL_DEPLOYMENT_PROMOTED`, a `MODEL_DEPLOYED` that names an
    /// environment (a create straight into it), or a
    /// `CHAIN_DEPLOYMENT_PROMOTED` (`chain_deployment_id`; a
    /// `CHAIN_DEPLOYED` names no environment, so it places nothing).
    pub(crate) fn placement(&self) -> Option<crate::history::Promoted> {
        let id_field = match self.event_type.as_str() {
            "MODEL_DEPLOYMENT_PROMOTED" => Some("deployment_id"),
            "MODEL_DEPLOYED" => self
                .data("environment_name")
                .is_some()
                .then_some("deployment_id"),
            "CHAIN_DEPLOYMENT_PROMOTED" => Some("chain_deployment_id"),
            _ => None,
        }?;
        Some(crate::history::Promoted {
            at: self.created.clone(),
            deployment: self.data(id_field).unwrap_or_default().to_string(),
            environment: self.data("environment_name").map(str::to_string),
        })
    }
}

/// Why `entries`, read from `model_id`'s log, are not that model's
/// history alone: an entry whose `event_data.model_id` names another model
/// (an entry without one is not refused). Such a log decides nothing.
pub(crate) fn not_of_model(entries: &[AuditEntry], model_id: &str) -> Option<String> {
    not_of(entries, Kind::Model, model_id)
}

/// [`not_of_model`] for a model's or a chain's log: a chain's entries are
/// checked against `event_data.chain_id`.
pub(crate) fn not_of(entries: &[AuditEntry], kind: Kind, owner_id: &str) -> Option<String> {
    let field = match kind {
        Kind::Model => "model_id",
        Kind::Chain => "chain_id",
    };
    let k = kind.as_str();
    entries
        .iter()
        .find(|e| e.data(field).is_some_and(|m| m != owner_id))
        .map(|e| {
            let other = super::id::check(e.data(field).unwrap_or_default())
                .map_or_else(|refused| refused.to_string(), str::to_string);
            format!(
                "the {k}'s audit log answered an entry of another {k} ({other}), so it is not this {k}'s history and decides nothing"
            )
        })
}

#[derive(Deserialize)]
struct Page {
    items: Vec<AuditEntry>,
    pagination: Pagination,
}

#[derive(Deserialize)]
struct Pagination {
    has_more: bool,
    #[serde(default)]
    cursor: Option<String>,
}

impl Api {
    /// The model's whole audit log in the event-type `groups` given (all
    /// of them when empty), every page read under the read policy. The
    /// entries come in the answer's order; readers sort by `created`
    /// themselves.
    pub(crate) async fn audit_log(
        &self,
        model_id: &str,
        groups: &[&str],
    ) -> Result<Vec<AuditEntry>, ApiError> {
        self.audit_log_of(Kind::Model, model_id, groups).await
    }

    /// [`Api::audit_log`] of a model's or a chain's log, one reader for
    /// both (`GET /v1/{models|chains}/{id}/audit_logs`, paged alike).
    pub(crate) async fn audit_log_of(
        &self,
        kind: Kind,
        owner_id: &str,
        groups: &[&str],
    ) -> Result<Vec<AuditEntry>, ApiError> {
        let (collection, what) = match kind {
            Kind::Model => ("models", "reading the model's audit log"),
            Kind::Chain => ("chains", "reading the chain's audit log"),
        };
        let mut entries = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..AUDIT_MAX_PAGES {
            let mut url = self.endpoints.rest(&[collection, owner_id, "audit_logs"]);
            {
                let mut q = url.query_pairs_mut();
                q.append_pair("limit", &AUDIT_PAGE_LIMIT.to_string());
                for g in groups {
                    q.append_pair("event_type_groups", g);
                }
                if let Some(c) = &cursor {
                    q.append_pair("cursor", c);
                }
            }
            let page: Page = self.rest_read(what, url).await?;
            entries.extend(page.items);
            match (page.pagination.has_more, page.pagination.cursor) {
                (true, Some(next)) if Some(&next) != cursor.as_ref() => cursor = Some(next),
                (true, _) => {
                    return Err(ApiError::permanent(format!(
                        "{what}: the platform said more entries follow but gave no new cursor to read them"
                    )));
                }
                (false, _) => return Ok(entries),
            }
        }
        Err(ApiError::permanent(format!(
            "{what}: more than {AUDIT_MAX_PAGES} pages of {AUDIT_PAGE_LIMIT} entries; not read in part"
        )))
    }
}
