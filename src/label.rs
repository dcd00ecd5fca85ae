//! The labels truss-push writes on every deployment it makes. A leaf:
//! `content` writes and reads it, `settings` refuses it in the user's
//! labels, and neither has to reach the other for it.

/// The label every deployment this tool creates carries: its source's
/// content hash (64 hex digits). Documented in docs/deploy-by-content.md.
pub(crate) const LABEL_KEY: &str = "truss_push_content_hash";

/// The label every model deployment this tool creates carries beside the
/// content hash: a value unique to the run (`flow::run_label`), by which a
/// run whose create answer was lost, or that was cancelled while the create
/// was in flight, tells its own deployment from another run's of the same
/// name. Documented in docs/deploy-by-content.md and docs/internals.md.
pub(crate) const RUN_LABEL_KEY: &str = "truss_push_run";

/// The label every deployment created from a pull or merge request
/// carries: `<owner>/<repo>#<n>` (GitHub's repository, or GitLab's project
/// path, and the number), so previews of mirrors and repositories sharing
/// a team never collide. `teardown` retires what carries its pull
/// request's value. Documented in docs/lifecycle.md.
pub(crate) const PULL_REQUEST_LABEL_KEY: &str = "truss_push_pull_request";

/// The longest repository path taken into the pull-request label.
const REPOSITORY_MAX_CHARS: usize = 255;

/// The pull-request label's value for pull request `number` of
/// `repository` (`None` outside GitHub and GitLab: `#<n>` alone).
/// A repository path is ASCII letters, digits, `_`, `.`, `-` and `/`
/// (GitHub's and GitLab's own rules, GitLab's subgroups included), at
/// most 255 characters; anything else is an input error.
pub(crate) fn pull_request_value(repository: Option<&str>, number: u64) -> Result<String, String> {
    let Some(repo) = repository else {
        return Ok(format!("#{number}"));
    };
    let fine = !repo.is_empty()
        && repo.len() <= REPOSITORY_MAX_CHARS
        && !repo.starts_with('/')
        && !repo.ends_with('/')
        && !repo.contains("//")
        && repo
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/'));
    match fine {
        true => Ok(format!("{repo}#{number}")),
        false => Err(format!(
            "the repository path the CI gave ({:?}) is not one truss-push can put in its {PULL_REQUEST_LABEL_KEY} label: it must be letters, digits, '_', '.', '-' and '/' (GITHUB_REPOSITORY or CI_PROJECT_PATH)",
            repo.chars().take(80).collect::<String>()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_request_values_name_the_repository() {
        for (repo, n, want) in [
            (Some("acme/models"), 12, Ok("acme/models#12")),
            (Some("group/sub/project"), 3, Ok("group/sub/project#3")),
            (Some("a-b/c.d_e"), 1, Ok("a-b/c.d_e#1")),
            (None, 7, Ok("#7")),
        ] {
            assert_eq!(pull_request_value(repo, n).as_deref(), want);
        }
        for bad in [
            "",
            "/x",
            "x/",
            "a//b",
            "a b/c",
            "a/b#1",
            "a/b\n",
            "ä/b",
            &"x".repeat(256),
        ] {
            assert!(pull_request_value(Some(bad), 1).is_err(), "{bad:?}");
        }
    }
}
