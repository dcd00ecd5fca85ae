//! A pull request's GitHub deployments marked `inactive` when `command:
//! teardown` retires its previews: only the deployments truss-push
//! recorded for this pull request (the `payload` its deploys write names
//! the pull-request label's value, `<owner>/<repo>#<n>`), whatever their
//! environment or commit — never another open pull request's, and never a
//! deployment another tool made.

use reqwest::Method;
use serde_json::{Value, json};

use super::client::REPEATABLE;
use super::replaced::latest_state;
use super::{Feature, Session};
use crate::budget::{Budget, Phase};

/// Deployments looked at, newest first: a repository's newest 100 hold a
/// closed pull request's previews.
const DEPLOYMENTS_PER_PAGE: usize = 100;

/// Whether `d` (a deployment as GitHub lists it) was recorded by
/// truss-push for the pull request whose label value is `value`.
pub(super) fn recorded_for_pull_request(d: &Value, value: &str) -> bool {
    d.pointer("/payload/truss_push/pull_request")
        .and_then(Value::as_str)
        == Some(value)
}

impl Session {
    /// Marks inactive this pull request's GitHub deployments, by the
    /// deadline the run's budget gives the report; best effort.
    pub(crate) async fn retire_pull_request(&self, value: &str, budget: &Budget) {
        if !self.deployment {
            return;
        }
        let until = self.due(budget, Phase::Report);
        let left = budget.left(until);
        if tokio::time::timeout(left, self.retire_unbounded(value))
            .await
            .is_err()
        {
            self.rep.lock().unwrap().warning(&format!(
                "GitHub: no answer within {} while marking the pull request's deployments inactive; some may still show as active. The teardown itself is not affected.",
                crate::ci::human(left)
            ));
        }
    }

    async fn retire_unbounded(&self, value: &str) {
        let query = [("per_page", DEPLOYMENTS_PER_PAGE.to_string())];
        let listed = match self
            .client
            .send(&REPEATABLE, Method::GET, &["deployments"], &query, None)
            .await
        {
            Ok(v) => v,
            Err(e) => {
                return self.warn(
                    Feature::Deployment,
                    "list the deployments to mark the pull request's inactive",
                    &e,
                );
            }
        };
        let ours = listed.as_array().cloned().unwrap_or_default();
        for d in ours.iter().filter(|d| recorded_for_pull_request(d, value)) {
            let Some(id) = d.get("id").and_then(Value::as_u64) else {
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
                    self.warn(Feature::Deployment, "read a deployment's status", &e);
                    continue;
                }
            };
            if latest_state(&statuses) == Some("inactive") {
                continue;
            }
            let body = json!({
                "state": "inactive",
                "description": "The pull request closed: its preview was retired",
            });
            match self
                .client
                .send(&REPEATABLE, Method::POST, &path, &[], Some(&body))
                .await
            {
                Ok(_) => self.say(&format!(
                    "GitHub: deployment {id} is inactive ({value} closed)"
                )),
                Err(e) => self.warn(
                    Feature::Deployment,
                    "mark the pull request's deployment inactive",
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
    fn only_this_pull_requests_record() {
        let d = json!({"payload": {"truss_push": {"name": "m", "pull_request": "acme/m#12"}}});
        assert!(recorded_for_pull_request(&d, "acme/m#12"));
        assert!(!recorded_for_pull_request(&d, "acme/m#1"));
        assert!(!recorded_for_pull_request(&d, "mirror/m#12"));
        let older = json!({"payload": {"truss_push": {"name": "m"}}});
        assert!(!recorded_for_pull_request(&older, "acme/m#12"));
    }
}
