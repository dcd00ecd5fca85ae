//! The CI run as truss-push sees it, read once when the run starts: the
//! commit, the pull or merge request, what `changed-since: auto` compares
//! with, and GitHub's event payload — read once, capped, and kept with its
//! error, so that each reader applies its own rule to it in one place.

use std::path::Path;

use serde_json::Value;

use crate::env_vars as ev;
use crate::files::{ReadError, read_regular_file};

/// GitHub caps webhook payloads at 25 MB, so a larger event file is not a
/// real event.
pub(crate) const EVENT_FILE_MAX_MIB: u64 = 25;

/// What the CI's variables and GitHub's event payload say about this run.
/// Built once per run ([`CiContext::from_lookup`]); values are trimmed and
/// an empty one counts as unset.
///
/// The payload (`GITHUB_EVENT_PATH`) is read here, once, and a payload that
/// could not be read is kept as such. Its three readers treat that
/// differently, on purpose:
///
/// | reader | file missing or unreadable | not a regular file, or over [`EVENT_FILE_MAX_MIB`] | not JSON |
/// |---|---|---|---|
/// | default deployment name (`git::ci_revision`): [`CiContext::event_for_naming`] | ignored (`GITHUB_SHA` is used) | input error | ignored |
/// | GitHub reporting (`settings::github`): [`CiContext::event_for_reporting`] | ignored | ignored | ignored |
/// | `changed-since: auto` (`changes::since_ref`): [`CiContext::event_for_changes`] | input error | input error | input error |
///
/// The name has a fallback, but a FIFO or a huge file in place of the
/// payload is a broken job worth stopping for; reporting is best effort and
/// never fails a deploy; `auto` has no base without the payload, and change
/// detection never guesses.
#[derive(Debug, Default)]
pub(crate) struct CiContext {
    pub(crate) github: GitHub,
    pub(crate) gitlab: GitLab,
    pub(crate) buildkite: Buildkite,
    /// The payload `GITHUB_EVENT_PATH` names; `None` when it is unset.
    event: Option<Event>,
}

/// GitHub Actions' variables.
#[derive(Debug, Default)]
pub(crate) struct GitHub {
    /// `GITHUB_SHA`: the test-merge commit on `pull_request`, the base
    /// branch's commit on `pull_request_target`; a GitHub run is told by it.
    pub(crate) sha: Option<String>,
    /// `<n>` of a `GITHUB_REF` `refs/pull/<n>/…`, as written.
    pub(crate) pull_ref: Option<String>,
    /// `GITHUB_REPOSITORY`: `owner/name`.
    pub(crate) repository: Option<String>,
    /// `GITHUB_API_URL`.
    pub(crate) api_url: Option<String>,
    /// `GITHUB_SERVER_URL`.
    pub(crate) server_url: Option<String>,
    /// `GITHUB_RUN_ID`.
    pub(crate) run_id: Option<String>,
}

impl GitHub {
    /// The pull request `GITHUB_REF` names, when `<n>` is a number. The
    /// deployment name takes `<n>` as written instead.
    pub(crate) fn pull_ref_number(&self) -> Option<u64> {
        self.pull_ref.as_deref()?.parse().ok()
    }
}

/// GitLab CI's variables.
#[derive(Debug, Default)]
pub(crate) struct GitLab {
    /// `GITLAB_CI` is set.
    pub(crate) ci: bool,
    /// `CI_COMMIT_SHA`.
    pub(crate) commit_sha: Option<String>,
    /// `CI_MERGE_REQUEST_IID` (merge request pipelines only).
    pub(crate) merge_request_iid: Option<String>,
    /// `CI_PROJECT_PATH`: `group/sub/project`.
    pub(crate) project_path: Option<String>,
    /// `CI_MERGE_REQUEST_SOURCE_BRANCH_SHA` (merged-results pipelines).
    pub(crate) merge_request_source_branch_sha: Option<String>,
    /// `CI_MERGE_REQUEST_DIFF_BASE_SHA`.
    pub(crate) merge_request_diff_base_sha: Option<String>,
    /// `CI_COMMIT_BEFORE_SHA`.
    pub(crate) commit_before_sha: Option<String>,
}

impl GitLab {
    /// What `changed-since: auto` compares with: the merge request's diff
    /// base, else the branch's previous tip (all zeros for a new branch,
    /// which is no base). Read whether or not `GITLAB_CI` is set.
    pub(crate) fn change_base(&self) -> Option<&str> {
        [&self.merge_request_diff_base_sha, &self.commit_before_sha]
            .into_iter()
            .filter_map(Option::as_deref)
            .find(|s| !is_null_sha(s))
    }
}

/// Buildkite's variables.
#[derive(Debug, Default)]
pub(crate) struct Buildkite {
    /// `BUILDKITE` is set.
    pub(crate) ci: bool,
    /// `BUILDKITE_COMMIT`.
    pub(crate) commit: Option<String>,
    /// `BUILDKITE_PULL_REQUEST`: a number, or `false`.
    pub(crate) pull_request: Option<String>,
}

/// The event payload file and what reading it gave.
#[derive(Debug)]
struct Event {
    path: String,
    payload: Result<Value, EventError>,
}

/// Why the payload is not there to read.
#[derive(Debug)]
enum EventError {
    Read(ReadError),
    NotJson(serde_json::Error),
}

impl CiContext {
    /// Reads the CI's variables through `env`, and the event payload file
    /// they name (only a regular file, up to [`EVENT_FILE_MAX_MIB`]).
    pub(crate) fn from_lookup(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let get = |k: &str| {
            env(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let event = get(ev::GITHUB_EVENT_PATH).map(|path| {
            let payload = read_regular_file(Path::new(&path), EVENT_FILE_MAX_MIB)
                .map_err(EventError::Read)
                .and_then(|b| serde_json::from_slice(&b).map_err(EventError::NotJson));
            Event { path, payload }
        });
        CiContext {
            github: GitHub {
                sha: get(ev::GITHUB_SHA),
                pull_ref: get(ev::GITHUB_REF).and_then(|r| pull_ref(&r).map(str::to_string)),
                repository: get(ev::GITHUB_REPOSITORY),
                api_url: get(ev::GITHUB_API_URL),
                server_url: get(ev::GITHUB_SERVER_URL),
                run_id: get(ev::GITHUB_RUN_ID),
            },
            gitlab: GitLab {
                ci: get(ev::GITLAB_CI).is_some(),
                commit_sha: get(ev::CI_COMMIT_SHA),
                merge_request_iid: get(ev::CI_MERGE_REQUEST_IID),
                project_path: get(ev::CI_PROJECT_PATH),
                merge_request_source_branch_sha: get(ev::CI_MERGE_REQUEST_SOURCE_BRANCH_SHA),
                merge_request_diff_base_sha: get(ev::CI_MERGE_REQUEST_DIFF_BASE_SHA),
                commit_before_sha: get(ev::CI_COMMIT_BEFORE_SHA),
            },
            buildkite: Buildkite {
                ci: get(ev::BUILDKITE).is_some(),
                commit: get(ev::BUILDKITE_COMMIT),
                pull_request: get(ev::BUILDKITE_PULL_REQUEST),
            },
            event,
        }
    }

    /// The payload as the default deployment name reads it: an error only
    /// when the file is not a regular file or too large (reading it could
    /// block forever or exhaust memory); a file that is missing or not JSON
    /// counts as no payload.
    pub(crate) fn event_for_naming(&self) -> Result<Option<&Value>, String> {
        let Some(event) = &self.event else {
            return Ok(None);
        };
        match &event.payload {
            Ok(v) => Ok(Some(v)),
            Err(EventError::Read(ReadError::Io(_)) | EventError::NotJson(_)) => Ok(None),
            Err(EventError::Read(e)) => Err(format!(
                "{} ({}) cannot be read: {e}: it must be the event payload file the runner wrote",
                ev::GITHUB_EVENT_PATH,
                event.path
            )),
        }
    }

    /// The payload as GitHub reporting reads it: whatever stands in the
    /// way counts as no payload.
    pub(crate) fn event_for_reporting(&self) -> Option<&Value> {
        self.event.as_ref()?.payload.as_ref().ok()
    }

    /// The payload as `changed-since: auto` reads it: `None` when
    /// `GITHUB_EVENT_PATH` is unset; a payload named but not read, or not
    /// JSON, is an error.
    pub(crate) fn event_for_changes(&self) -> Result<Option<&Value>, String> {
        let Some(event) = &self.event else {
            return Ok(None);
        };
        let path = &event.path;
        match &event.payload {
            Ok(v) => Ok(Some(v)),
            Err(EventError::Read(e)) => Err(format!(
                "changed-since: auto reads the event payload ({path}), which cannot be read: {e}"
            )),
            Err(EventError::NotJson(e)) => Err(format!(
                "changed-since: auto: the event payload {path} is not JSON ({e})"
            )),
        }
    }
}

/// `<n>` of `refs/pull/<n>/merge` (or `/head`), as written: the one reading
/// of a pull request's ref.
fn pull_ref(git_ref: &str) -> Option<&str> {
    git_ref.strip_prefix("refs/pull/")?.split('/').next()
}

/// The all-zero sha CI systems give as "no previous commit".
fn is_null_sha(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b == b'0')
}

/// The pull request's number in an event payload (`pull_request`,
/// `pull_request_target`, review events).
pub(crate) fn event_pr_number(event: &Value) -> Option<u64> {
    event.pointer("/pull_request/number")?.as_u64()
}

/// The commit the pull request's author pushed, from an event payload.
pub(crate) fn event_pr_head_sha(event: &Value) -> Option<String> {
    event
        .pointer("/pull_request/head/sha")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// What a GitHub event compares with: a pull request's base, a merge
/// queue's base, else a push's previous tip (none for a new branch).
pub(crate) fn event_change_base(event: &Value) -> Option<&str> {
    ["/pull_request/base/sha", "/merge_group/base_sha", "/before"]
        .into_iter()
        .filter_map(|p| event.pointer(p)?.as_str())
        .find(|s| !s.is_empty() && !is_null_sha(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::github::Settings;

    /// What `GITHUB_EVENT_PATH` points at.
    enum File {
        Unset,
        Json(&'static str),
        Missing,
        Fifo,
        Oversized,
    }

    /// What each reader gets: `Err` holds a piece of the message.
    struct Want {
        name: Result<Option<&'static str>, &'static str>,
        reported: (Option<u64>, Option<&'static str>),
        auto: Result<&'static str, &'static str>,
    }

    const MERGE: &str = "merge0123456789";
    const PR_EVENT: &str = r#"{"pull_request": {"number": 42, "head": {"sha": "head0123456789"}, "base": {"sha": "base42"}}}"#;

    #[test]
    fn each_reader_gets_what_it_got_before_the_context() {
        let pr_ref = [("GITHUB_SHA", MERGE), ("GITHUB_REF", "refs/pull/42/merge")];
        let unreadable_pr = Want {
            name: Err("it must be the event payload file the runner wrote"),
            reported: (Some(42), Some(MERGE)),
            auto: Err("changed-since: auto reads the event payload"),
        };
        type Case = (&'static str, Vec<(&'static str, &'static str)>, File, Want);
        let cases: Vec<Case> = vec![
            (
                "pull_request",
                pr_ref.to_vec(),
                File::Json(PR_EVENT),
                Want {
                    name: Ok(Some("PR-42_head012")),
                    reported: (Some(42), Some("head0123456789")),
                    auto: Ok("base42"),
                },
            ),
            (
                "push",
                vec![
                    ("GITHUB_SHA", "push0123456789"),
                    ("GITHUB_REF", "refs/heads/main"),
                ],
                File::Json(r#"{"before": "prev0123", "after": "push0123456789"}"#),
                Want {
                    name: Ok(Some("push012")),
                    reported: (None, Some("push0123456789")),
                    auto: Ok("prev0123"),
                },
            ),
            (
                "push of a new branch",
                vec![
                    ("GITHUB_SHA", "push0123456789"),
                    ("GITHUB_REF", "refs/heads/new"),
                ],
                File::Json(r#"{"before": "0000000000000000000000000000000000000000"}"#),
                Want {
                    name: Ok(Some("push012")),
                    reported: (None, Some("push0123456789")),
                    auto: Err("found no base in this GitHub event"),
                },
            ),
            (
                // GITHUB_REF is the base branch: only the payload knows the PR.
                "pull_request_target",
                vec![
                    ("GITHUB_SHA", "main0123456789"),
                    ("GITHUB_REF", "refs/heads/main"),
                ],
                File::Json(PR_EVENT),
                Want {
                    name: Ok(Some("PR-42_head012")),
                    reported: (Some(42), Some("head0123456789")),
                    auto: Ok("base42"),
                },
            ),
            (
                "GitLab merge request",
                vec![
                    ("GITLAB_CI", "true"),
                    ("CI_COMMIT_SHA", "gl0123456789"),
                    ("CI_MERGE_REQUEST_IID", "9"),
                    ("CI_MERGE_REQUEST_DIFF_BASE_SHA", "glbase9"),
                    ("CI_COMMIT_BEFORE_SHA", "0000000000"),
                ],
                File::Unset,
                Want {
                    name: Ok(Some("MR-9_gl01234")),
                    reported: (None, None),
                    auto: Ok("glbase9"),
                },
            ),
            (
                "garbled event",
                pr_ref.to_vec(),
                File::Json("{not json"),
                Want {
                    name: Ok(Some("PR-42_merge01")),
                    reported: (Some(42), Some(MERGE)),
                    auto: Err("is not JSON"),
                },
            ),
            (
                "missing event file",
                pr_ref.to_vec(),
                File::Missing,
                Want {
                    name: Ok(Some("PR-42_merge01")),
                    reported: (Some(42), Some(MERGE)),
                    auto: Err("which cannot be read"),
                },
            ),
            (
                "FIFO as event file",
                pr_ref.to_vec(),
                File::Fifo,
                unreadable_pr,
            ),
            (
                "oversized event file",
                pr_ref.to_vec(),
                File::Oversized,
                Want {
                    name: Err("larger than 25 MiB"),
                    reported: (Some(42), Some(MERGE)),
                    auto: Err("larger than 25 MiB"),
                },
            ),
            (
                "no CI",
                vec![],
                File::Unset,
                Want {
                    name: Ok(None),
                    reported: (None, None),
                    auto: Err("auto needs a GitHub pull request or push event"),
                },
            ),
        ];
        for (why, vars, file, want) in cases {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("event.json");
            match file {
                File::Unset | File::Missing => {}
                File::Json(text) => std::fs::write(&path, text).unwrap(),
                File::Fifo => assert!(
                    std::process::Command::new("mkfifo")
                        .arg(&path)
                        .status()
                        .unwrap()
                        .success()
                ),
                File::Oversized => std::fs::File::create(&path)
                    .unwrap()
                    .set_len((EVENT_FILE_MAX_MIB << 20) + 1)
                    .unwrap(),
            }
            let mut vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            if !matches!(file, File::Unset) {
                vars.push(("GITHUB_EVENT_PATH".into(), path.display().to_string()));
            }
            let ci = CiContext::from_lookup(&|k: &str| {
                vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
            });

            let name = crate::git::ci_revision(&ci)
                .map(|r| r.as_ref().and_then(crate::git::default_deployment_name));
            match (&name, want.name) {
                (Ok(got), Ok(w)) => assert_eq!(got.as_deref(), w, "{why}: name"),
                (Err(got), Err(w)) => assert!(got.contains(w), "{why}: name: {got}"),
                _ => panic!("{why}: name: {name:?}"),
            }

            let inputs = crate::cli::Inputs::from_pairs(&[("commit-status", "true")]);
            let s = Settings::from_inputs(&inputs, &ci).unwrap();
            let (pr, sha) = want.reported;
            assert_eq!(
                (s.pull_request, s.sha.as_deref()),
                (pr, sha),
                "{why}: reporting"
            );

            let auto = crate::changes::since_ref("auto", &ci);
            match (&auto, want.auto) {
                (Ok(got), Ok(w)) => assert_eq!(got, w, "{why}: auto"),
                (Err(got), Err(w)) => assert!(got.contains(w), "{why}: auto: {got}"),
                _ => panic!("{why}: auto: {auto:?}"),
            }
        }
    }

    #[test]
    fn one_reading_of_a_pull_requests_ref() {
        assert_eq!(pull_ref("refs/pull/42/merge"), Some("42"));
        assert_eq!(pull_ref("refs/pull/42/head"), Some("42"));
        assert_eq!(pull_ref("refs/heads/main"), None);
        let gh = |r: &str| GitHub {
            pull_ref: pull_ref(r).map(str::to_string),
            ..GitHub::default()
        };
        // The name takes the ref as written; reporting needs a number.
        assert_eq!(gh("refs/pull/abc/merge").pull_ref.as_deref(), Some("abc"));
        assert_eq!(gh("refs/pull/abc/merge").pull_ref_number(), None);
        assert_eq!(gh("refs/pull/7/merge").pull_ref_number(), Some(7));
    }
}
