//! The value of the `truss_push_pull_request` label a run's deployments
//! carry (`label`): `<owner>/<repo>#<n>` on GitHub (`GITHUB_REPOSITORY`),
//! the project path on GitLab (`CI_PROJECT_PATH`), `#<n>` elsewhere; the
//! number is `command::Lifecycle`'s (the `pull-request` input, else the
//! event's). And the refusal of a deploy whose event closes a pull request.

use serde_json::Value;

use crate::ci_context::{self, CiContext};

/// The repository the label names: GitHub's on a GitHub run, GitLab's
/// project path on a GitLab one, none elsewhere.
pub(crate) fn repository(ci: &CiContext) -> Option<&str> {
    match (&ci.github.sha, ci.gitlab.ci) {
        (Some(_), _) => ci.github.repository.as_deref(),
        (None, true) => ci.gitlab.project_path.as_deref(),
        (None, false) => None,
    }
}

/// The label's value for pull request `number` of this run's repository
/// (an input error when the CI's repository path is not one a label may
/// carry).
pub(crate) fn label_value(number: u64, ci: &CiContext) -> Result<String, String> {
    crate::label::pull_request_value(repository(ci), number)
}

/// A deploy whose event is a pull request being closed: it would leave a
/// preview behind that pull request's teardown, so it is refused.
pub(crate) fn closed_event_refusal(ci: &CiContext) -> Option<String> {
    let event = ci.event_for_reporting()?;
    let closed = event.get("action").and_then(Value::as_str) == Some("closed")
        && event.get("pull_request").is_some_and(Value::is_object);
    closed.then(|| {
        let n = ci_context::event_pr_number(event)
            .map(|n| format!(" #{n}"))
            .unwrap_or_default();
        format!(
            "this run's event is pull request{n} being closed: a deploy now would leave a preview behind its teardown. Run command: teardown on this event (or limit the deploy's workflow to pull_request types opened, synchronize, reopened)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ci(vars: &[(&str, &str)], event: Option<&str>) -> (tempfile::TempDir, CiContext) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("event.json");
        let mut vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if let Some(e) = event {
            std::fs::write(&path, e).unwrap();
            vars.push(("GITHUB_EVENT_PATH".into(), path.display().to_string()));
        }
        let ctx =
            CiContext::from_lookup(&|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()));
        (dir, ctx)
    }

    #[test]
    fn the_repository_comes_from_the_ci() {
        let gh = [("GITHUB_SHA", "abc"), ("GITHUB_REPOSITORY", "acme/models")];
        let closed = r#"{"action": "closed", "pull_request": {"number": 12}}"#;
        let (_d, c) = ci(&gh, Some(closed));
        assert_eq!(label_value(12, &c).unwrap(), "acme/models#12");
        assert!(
            closed_event_refusal(&c)
                .unwrap()
                .contains("#12 being closed")
        );

        let opened = r#"{"action": "synchronize", "pull_request": {"number": 12}}"#;
        let (_d, c) = ci(&gh, Some(opened));
        assert_eq!(closed_event_refusal(&c), None);
        // A closed issue is not a closed pull request.
        let (_d, c) = ci(&gh, Some(r#"{"action": "closed", "issue": {"number": 3}}"#));
        assert_eq!(closed_event_refusal(&c), None);

        let gl = [
            ("GITLAB_CI", "true"),
            ("CI_PROJECT_PATH", "group/sub/project"),
            ("CI_MERGE_REQUEST_IID", "9"),
        ];
        let (_d, c) = ci(&gl, None);
        assert_eq!(label_value(9, &c).unwrap(), "group/sub/project#9");

        let (_d, c) = ci(&[], None);
        assert_eq!(label_value(3, &c).unwrap(), "#3");
        let (_d, c) = ci(
            &[("GITHUB_SHA", "a"), ("GITHUB_REPOSITORY", "a/b;rm")],
            None,
        );
        assert!(label_value(3, &c).is_err());
    }
}
