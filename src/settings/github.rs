//! The GitHub reporting settings: which features the inputs ask for, the
//! token, and where reports go according to the CI context. Parsed with the
//! other inputs, before any request; `crate::github` acts on them.

use super::parse_bool;
use crate::ci_context::{self, CiContext};
use crate::cli::{Input, Inputs};
use crate::secret::Secret;

/// The public GitHub API, when `GITHUB_API_URL` is not set.
const DEFAULT_API_URL: &str = "https://api.github.com";

/// The GitHub features asked for, and what the CI environment says about
/// where they go. Built with the other inputs, before any request.
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    pub(crate) deployment: bool,
    pub(crate) pr_comment: bool,
    pub(crate) commit_status: bool,
    pub(crate) token: Option<Secret>,
    /// `GITHUB_API_URL` as given, or the public API.
    pub(crate) api: String,
    /// `owner/name`.
    pub(crate) repository: Option<String>,
    /// The commit deployed: the pull request's head, else `GITHUB_SHA`.
    pub(crate) sha: Option<String>,
    pub(crate) pull_request: Option<u64>,
    /// The workflow run's page, for statuses while the deploy runs.
    pub(crate) run_url: Option<String>,
}

impl Settings {
    /// Reads the GitHub inputs, and where they go from the CI context. A
    /// malformed switch or token is a bad input; everything else that stands in
    /// the way is found when the session opens, and only warned about (an
    /// event payload that cannot be read is no payload:
    /// [`CiContext::event_for_reporting`]).
    pub(crate) fn from_inputs(inputs: &Inputs, ci: &CiContext) -> Result<Settings, String> {
        let flag =
            |input: Input| parse_bool(input.name(), inputs.or_default(input).unwrap_or("false"));
        let mut s = Settings {
            deployment: flag(Input::GithubDeployment)?,
            pr_comment: flag(Input::PrComment)?,
            commit_status: flag(Input::CommitStatus)?,
            ..Settings::default()
        };
        if !s.any() {
            return Ok(s);
        }
        if let Some(t) = inputs.trimmed(Input::GithubToken) {
            super::one_word(
                "github-token",
                t,
                "the token's value (github-token: ${{ github.token }})",
            )?;
            s.token = Some(Secret::new(t));
        }
        let gh = &ci.github;
        s.api = gh
            .api_url
            .clone()
            .unwrap_or_else(|| DEFAULT_API_URL.to_string());
        s.repository = gh.repository.clone();
        let event = ci.event_for_reporting();
        s.pull_request = gh
            .pull_ref_number()
            .or_else(|| event.and_then(ci_context::event_pr_number));
        s.sha = event
            .and_then(ci_context::event_pr_head_sha)
            .or_else(|| gh.sha.clone());
        if let (Some(server), Some(repo), Some(run)) = (&gh.server_url, &s.repository, &gh.run_id) {
            s.run_url = Some(format!(
                "{}/{repo}/actions/runs/{run}",
                server.trim_end_matches('/')
            ));
        }
        Ok(s)
    }

    pub(crate) fn any(&self) -> bool {
        self.deployment || self.pr_comment || self.commit_status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(pairs: &[(&'static str, &str)]) -> Inputs {
        Inputs::from_pairs(pairs)
    }

    #[test]
    fn nothing_is_read_when_no_feature_is_on() {
        let ci = CiContext::from_lookup(&|k: &str| match k {
            "GITHUB_REPOSITORY" => Some("octo/repo".into()),
            "GITHUB_SHA" => Some("mergesha".into()),
            _ => None,
        });
        let s = Settings::from_inputs(&inputs(&[("github-token", "t")]), &ci).unwrap();
        assert!(!s.any());
        assert!(s.token.is_none());
        assert!(s.repository.is_none() && s.sha.is_none());
    }

    #[test]
    fn bad_switches_and_tokens_are_bad_inputs() {
        let env = CiContext::default();
        let err = Settings::from_inputs(&inputs(&[("pr-comment", "sure")]), &env).unwrap_err();
        assert!(err.contains("pr-comment must be true or false"), "{err}");
        let err = Settings::from_inputs(
            &inputs(&[("commit-status", "true"), ("github-token", "a b")]),
            &env,
        )
        .unwrap_err();
        assert!(err.contains("github-token contains whitespace"), "{err}");
        let err = Settings::from_inputs(
            &inputs(&[("commit-status", "true"), ("github-token", "a\u{1b}b")]),
            &env,
        )
        .unwrap_err();
        assert!(err.contains("github-token contains a control"), "{err}");
    }

    #[test]
    fn the_pull_request_and_commit_come_from_the_ref_or_the_event() {
        let dir = tempfile::tempdir().unwrap();
        let event = dir.path().join("event.json");
        std::fs::write(
            &event,
            r#"{"pull_request": {"number": 42, "head": {"sha": "headsha"}}}"#,
        )
        .unwrap();
        let event = event.to_str().unwrap().to_string();
        let env = move |k: &str| match k {
            "GITHUB_EVENT_PATH" => Some(event.clone()),
            "GITHUB_SHA" => Some("mergesha".into()),
            "GITHUB_REF" => Some("refs/heads/main".into()),
            "GITHUB_REPOSITORY" => Some("octo/repo".into()),
            "GITHUB_SERVER_URL" => Some("https://github.com/".into()),
            "GITHUB_RUN_ID" => Some("9".into()),
            _ => None,
        };
        let s = Settings::from_inputs(
            &inputs(&[("pr-comment", "true")]),
            &CiContext::from_lookup(&env),
        )
        .unwrap();
        assert_eq!(s.pull_request, Some(42));
        assert_eq!(s.sha.as_deref(), Some("headsha"));
        assert_eq!(s.api, DEFAULT_API_URL);
        assert_eq!(
            s.run_url.as_deref(),
            Some("https://github.com/octo/repo/actions/runs/9")
        );
        let env = |k: &str| match k {
            "GITHUB_REF" => Some("refs/pull/7/merge".into()),
            "GITHUB_SHA" => Some("mergesha".into()),
            "GITHUB_API_URL" => Some("https://ghe.example/api/v3".into()),
            _ => None,
        };
        let s = Settings::from_inputs(
            &inputs(&[("github-deployment", "yes")]),
            &CiContext::from_lookup(&env),
        )
        .unwrap();
        assert_eq!(s.pull_request, Some(7));
        assert_eq!(s.sha.as_deref(), Some("mergesha"));
        assert_eq!(s.api, "https://ghe.example/api/v3");
    }

    #[test]
    fn an_event_payload_that_cannot_be_read_is_no_payload() {
        let dir = tempfile::tempdir().unwrap();
        let garbled = dir.path().join("garbled.json");
        std::fs::write(&garbled, "{not json").unwrap();
        for event in [garbled, dir.path().join("missing.json"), dir.path().into()] {
            let event = event.to_str().unwrap().to_string();
            let env = move |k: &str| match k {
                "GITHUB_EVENT_PATH" => Some(event.clone()),
                "GITHUB_SHA" => Some("mergesha".into()),
                "GITHUB_REF" => Some("refs/pull/7/merge".into()),
                _ => None,
            };
            let s = Settings::from_inputs(
                &inputs(&[("commit-status", "true")]),
                &CiContext::from_lookup(&env),
            )
            .unwrap();
            assert_eq!(s.pull_request, Some(7));
            assert_eq!(s.sha.as_deref(), Some("mergesha"));
        }
    }
}
