//! The GitHub deployment a production deploy replaces, marked `inactive`.
//!
//! GitHub's `auto_inactive` marks earlier deployments of an environment
//! inactive, but not in a production environment (nor a transient one), so
//! the deployments page would keep showing every earlier production deploy
//! as active. After a successful one, this run does it itself: every
//! earlier deployment of the same environment that truss-push recorded for
//! the same model or chain (the `payload` it wrote) and whose latest status
//! is `success`. Another model's deployments in that environment, and
//! deployments made by other tools, are left as they are.

use reqwest::Method;
use serde_json::{Value, json};

use super::client::REPEATABLE;
use super::{Feature, Session};

/// Earlier deployments looked at: the newest 100 hold the one replaced.
const DEPLOYMENTS_PER_PAGE: usize = 100;

/// Whether `d` (a deployment as GitHub lists it) was recorded by
/// truss-push for `name`.
pub(super) fn recorded_for(d: &Value, name: &str) -> bool {
    d.pointer("/payload/truss_push/name")
        .and_then(Value::as_str)
        == Some(name)
}

/// The state of the newest status in `statuses` (ids grow with time,
/// whatever order the list is in).
pub(super) fn latest_state(statuses: &Value) -> Option<&str> {
    statuses
        .as_array()?
        .iter()
        .max_by_key(|s| s.get("id").and_then(Value::as_u64).unwrap_or(0))?
        .get("state")
        .and_then(Value::as_str)
}

impl Session {
    /// Marks inactive the deployments that `current` replaced.
    pub(super) async fn retire_replaced(&self, current: u64) {
        let Some(environment) = self.environment.clone() else {
            return;
        };
        let query = [
            ("environment", environment.clone()),
            ("per_page", DEPLOYMENTS_PER_PAGE.to_string()),
        ];
        let listed = match self
            .client
            .send(&REPEATABLE, Method::GET, &["deployments"], &query, None)
            .await
        {
            Ok(v) => v,
            Err(e) => {
                return self.warn(
                    Feature::Deployment,
                    "list the environment's earlier deployments to mark the replaced one inactive",
                    &e,
                );
            }
        };
        let earlier = listed.as_array().cloned().unwrap_or_default();
        for d in earlier.iter().filter(|d| recorded_for(d, &self.early_name)) {
            let Some(id) = d
                .get("id")
                .and_then(Value::as_u64)
                .filter(|&id| id != current)
            else {
                continue;
            };
            let path = ["deployments", &id.to_string(), "statuses"];
            let statuses = match self
                .client
                .send(&REPEATABLE, Method::GET, &path, &[], None)
                .await
            {
                Ok(v) => v,
                Err(e) => {
                    self.warn(
                        Feature::Deployment,
                        "read an earlier deployment's status",
                        &e,
                    );
                    continue;
                }
            };
            if latest_state(&statuses) != Some("success") {
                continue;
            }
            let body = json!({
                "state": "inactive",
                "description": format!("Replaced by deployment {current}"),
            });
            match self
                .client
                .send(&REPEATABLE, Method::POST, &path, &[], Some(&body))
                .await
            {
                Ok(_) => self.say(&format!(
                    "GitHub: deployment {id} in {environment} is inactive (replaced by {current})"
                )),
                Err(e) => self.warn(
                    Feature::Deployment,
                    "mark the replaced deployment inactive",
                    &e,
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_record_of_the_same_name_whose_latest_status_succeeded() {
        let d = json!({"payload": {"truss_push": {"name": "m"}}});
        assert!(recorded_for(&d, "m"));
        assert!(!recorded_for(&d, "other"));
        assert!(!recorded_for(&json!({"payload": {}}), "m"));
        let statuses = json!([{"id": 9, "state": "success"}, {"id": 3, "state": "in_progress"}]);
        assert_eq!(latest_state(&statuses), Some("success"));
        let statuses = json!([{"id": 2, "state": "success"}, {"id": 5, "state": "inactive"}]);
        assert_eq!(latest_state(&statuses), Some("inactive"));
        assert_eq!(latest_state(&json!([])), None);
    }
}
