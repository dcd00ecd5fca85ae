//! PLACEHOLDER (drift branch) for the lead's `audit.rs`, written to its
//! announced interface so drift can be built and tested before it lands;
//! replaced by main's file at the merge.

use serde::Deserialize;
use serde_json::Value;

use super::{Api, ApiError};

/// Pages followed at most.
const PAGES_MAX: usize = 50;

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Actor {
    #[serde(rename = "type", default)]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) api_key_prefix: Option<String>,
    #[serde(default)]
    pub(crate) email: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct AuditEntry {
    pub(crate) created: String,
    pub(crate) event_type: String,
    #[serde(default)]
    pub(crate) event_data: Value,
    #[serde(default)]
    pub(crate) source: Option<String>,
    #[serde(default)]
    pub(crate) actor: Option<Actor>,
}

impl Api {
    pub(crate) async fn audit_log(
        &self,
        model_id: &str,
        groups: &[&str],
    ) -> Result<Vec<AuditEntry>, ApiError> {
        #[derive(Deserialize)]
        struct Pagination {
            #[serde(default)]
            cursor: Option<String>,
        }
        #[derive(Deserialize)]
        struct Page {
            items: Vec<AuditEntry>,
            pagination: Option<Pagination>,
        }
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..PAGES_MAX {
            let mut url = self.endpoints.rest(&["models", model_id, "audit_logs"]);
            {
                let mut q = url.query_pairs_mut();
                q.append_pair("limit", "200");
                for g in groups {
                    q.append_pair("event_type_groups", g);
                }
                if let Some(c) = &cursor {
                    q.append_pair("cursor", c);
                }
            }
            let page: Page = self.rest_get("reading the model's audit log", url).await?;
            all.extend(page.items);
            match page.pagination.and_then(|p| p.cursor) {
                Some(c) => cursor = Some(c),
                None => return Ok(all),
            }
        }
        Err(ApiError::permanent(format!(
            "the audit log has more than {PAGES_MAX} pages"
        )))
    }
}
