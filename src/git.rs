//! Where the code being deployed came from: the default deployment name and
//! the git info attached to the deployment, from the CI context or `git`;
//! and the one way truss-push runs `git`.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

use crate::ci_context::{self, CiContext};

/// Git facts the platform records with a deployment (`GitInfo`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct GitInfo {
    pub latest_commit_sha: String,
    pub latest_tag: Option<String>,
    pub commits_since_tag: Option<u64>,
    pub has_uncommitted_changes: bool,
}

/// Why `git` gave no answer.
#[derive(Debug)]
pub(crate) enum GitError {
    /// The executable could not be started (not installed, not on `PATH`).
    NotRun(std::io::Error),
    /// git ran and failed: its own message (stderr, trimmed).
    Failed(String),
}

/// The one way truss-push runs `git`: in `dir`, with no terminal to prompt
/// on and nothing on stdin, its stderr captured. Stdout as bytes on
/// success; callers decide how strict to be about UTF-8.
pub(crate) fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(GitError::NotRun)?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(GitError::Failed(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

/// Runs `git` in `dir` and returns trimmed stdout on success; `None` when git
/// is missing, the directory is not a repository, the command failed or its
/// output is not UTF-8 — git info is a nicety and must never abort a deploy.
pub(crate) fn run_git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = git(dir, args).ok()?;
    Some(String::from_utf8(out).ok()?.trim().to_string())
}

/// The pull/merge request a CI run builds, and the head commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Revision {
    /// `PR-<n>` / `MR-<n>` when the run builds a change request.
    pub change: Option<String>,
    /// The commit being deployed (the PR head, not a synthetic merge).
    pub sha: Option<String>,
}

/// The revision according to the CI system's variables (GitHub, GitLab,
/// Buildkite), or `None` outside a recognised CI. An error when the GitHub
/// event file is not a regular file or too large
/// ([`CiContext::event_for_naming`]).
pub(crate) fn ci_revision(ci: &CiContext) -> Result<Option<Revision>, String> {
    if let Some(sha) = &ci.github.sha {
        // GITHUB_SHA is the test-merge commit on pull_request and the base
        // branch's commit on pull_request_target (whose GITHUB_REF is the
        // base branch): the payload names the PR and the commit its author
        // pushed, which the GitHub comment and statuses use too.
        let event = ci.event_for_naming()?;
        let pr = ci.github.pull_ref.clone().or_else(|| {
            event
                .and_then(ci_context::event_pr_number)
                .map(|n| n.to_string())
        });
        let head = event.and_then(ci_context::event_pr_head_sha);
        return Ok(Some(match pr {
            Some(n) => Revision {
                change: Some(format!("PR-{n}")),
                sha: Some(head.unwrap_or_else(|| sha.clone())),
            },
            None => Revision {
                change: None,
                sha: Some(sha.clone()),
            },
        }));
    }
    let gitlab = &ci.gitlab;
    if gitlab.ci {
        let sha = gitlab
            .merge_request_source_branch_sha
            .clone()
            .or_else(|| gitlab.commit_sha.clone());
        return Ok(Some(Revision {
            change: gitlab.merge_request_iid.as_ref().map(|n| format!("MR-{n}")),
            sha,
        }));
    }
    let buildkite = &ci.buildkite;
    if buildkite.ci {
        let pr = buildkite.pull_request.as_ref().filter(|p| *p != "false");
        return Ok(Some(Revision {
            change: pr.map(|n| format!("PR-{n}")),
            sha: buildkite.commit.clone(),
        }));
    }
    Ok(None)
}

/// The default deployment name: `<change>_<sha7>` for change requests, else
/// `<sha7>`. `None` when no commit is known.
pub(crate) fn default_deployment_name(rev: &Revision) -> Option<String> {
    let sha = rev.sha.as_deref()?;
    let short: String = sha.chars().take(7).collect();
    if short.is_empty() {
        return None;
    }
    Some(match &rev.change {
        Some(c) => format!("{c}_{short}"),
        None => short,
    })
}

/// Collects git info for `dir`: commit from CI variables when present (a
/// shallow CI checkout may have no tags, but it always knows its commit),
/// the rest from `git` when available.
pub(crate) fn collect_git_info(dir: &Path, ci: Option<&Revision>) -> Option<GitInfo> {
    let from_git = run_git(dir, &["rev-parse", "HEAD"]).filter(|s| !s.is_empty());
    let sha = ci.and_then(|r| r.sha.clone()).or(from_git.clone())?;
    let (latest_tag, commits_since_tag, dirty) = if from_git.is_some() {
        let tag = run_git(dir, &["describe", "--tags", "--abbrev=0"]).filter(|s| !s.is_empty());
        let since = tag.as_ref().and_then(|t| {
            run_git(dir, &["rev-list", &format!("{t}..HEAD"), "--count"])?
                .parse()
                .ok()
        });
        let dirty = run_git(dir, &["status", "--porcelain"]).is_some_and(|s| !s.is_empty());
        (tag, since, dirty)
    } else {
        (None, None, false)
    };
    Some(GitInfo {
        latest_commit_sha: sha,
        latest_tag,
        commits_since_tag,
        has_uncommitted_changes: dirty,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn default_names_by_ci_system() {
        let dir = tempfile::tempdir().unwrap();
        let event = dir.path().join("event.json");
        std::fs::write(
            &event,
            r#"{"pull_request":{"head":{"sha":"feedbeef0123456"}}}"#,
        )
        .unwrap();
        let event = event.to_str().unwrap();
        type Case<'a> = (Vec<(&'a str, &'a str)>, Option<&'a str>);
        let cases: Vec<Case> = vec![
            (
                vec![
                    ("GITHUB_SHA", "abc1234def"),
                    ("GITHUB_REF", "refs/heads/main"),
                ],
                Some("abc1234"),
            ),
            (
                vec![
                    ("GITHUB_SHA", "abc1234def"),
                    ("GITHUB_REF", "refs/pull/42/merge"),
                    ("GITHUB_EVENT_PATH", event),
                ],
                Some("PR-42_feedbee"),
            ),
            // No payload: fall back to GITHUB_SHA rather than fail.
            (
                vec![
                    ("GITHUB_SHA", "abc1234def"),
                    ("GITHUB_REF", "refs/pull/7/merge"),
                ],
                Some("PR-7_abc1234"),
            ),
            (
                vec![("GITLAB_CI", "true"), ("CI_COMMIT_SHA", "0123456789")],
                Some("0123456"),
            ),
            (
                vec![
                    ("GITLAB_CI", "true"),
                    ("CI_COMMIT_SHA", "0123456789"),
                    ("CI_MERGE_REQUEST_IID", "9"),
                ],
                Some("MR-9_0123456"),
            ),
            (
                vec![
                    ("BUILDKITE", "true"),
                    ("BUILDKITE_COMMIT", "fedcba98765"),
                    ("BUILDKITE_PULL_REQUEST", "false"),
                ],
                Some("fedcba9"),
            ),
            (
                vec![
                    ("BUILDKITE", "true"),
                    ("BUILDKITE_COMMIT", "fedcba98765"),
                    ("BUILDKITE_PULL_REQUEST", "15"),
                ],
                Some("PR-15_fedcba9"),
            ),
            (vec![], None),
        ];
        for (env, want) in cases {
            let rev = ci_revision(&CiContext::from_lookup(&lookup(&env))).unwrap();
            let got = rev.as_ref().and_then(default_deployment_name);
            assert_eq!(got.as_deref(), want, "{env:?}");
        }
    }

    #[test]
    fn the_name_stops_only_for_an_event_file_that_could_block_or_flood() {
        let dir = tempfile::tempdir().unwrap();
        let garbled = dir.path().join("garbled.json");
        std::fs::write(&garbled, "{not json").unwrap();
        let missing = dir.path().join("missing.json");
        let pr = |event: &Path| {
            let event = event.to_str().unwrap().to_string();
            CiContext::from_lookup(&lookup(&[
                ("GITHUB_SHA", "abc1234def"),
                ("GITHUB_REF", "refs/pull/7/merge"),
                ("GITHUB_EVENT_PATH", &event),
            ]))
        };
        for ignored in [&garbled, &missing] {
            let rev = ci_revision(&pr(ignored)).unwrap().unwrap();
            assert_eq!(default_deployment_name(&rev).unwrap(), "PR-7_abc1234");
        }
        let err = ci_revision(&pr(dir.path())).unwrap_err();
        assert_eq!(
            err,
            format!(
                "GITHUB_EVENT_PATH ({}) cannot be read: it is a directory, not a regular file: it must be the event payload file the runner wrote",
                dir.path().display()
            )
        );
        // Without GITHUB_SHA no GitHub name is made, so the state of the
        // payload does not matter.
        let event = dir.path().to_str().unwrap().to_string();
        let ci = CiContext::from_lookup(&lookup(&[("GITHUB_EVENT_PATH", &event)]));
        assert_eq!(ci_revision(&ci).unwrap(), None);
    }

    #[test]
    fn git_info_without_a_repository_is_none_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(collect_git_info(dir.path(), None), None);
        let rev = Revision {
            change: None,
            sha: Some("abc".into()),
        };
        let info = collect_git_info(dir.path(), Some(&rev)).unwrap();
        assert_eq!(info.latest_commit_sha, "abc");
        assert_eq!(info.latest_tag, None);
    }
}
