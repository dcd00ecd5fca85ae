//! Which CI system the process runs under, and the CI variables the run
//! needs, read once through a lookup so nothing deeper reads the environment.

use std::path::PathBuf;

use crate::env_vars::{
    BITBUCKET_BUILD_NUMBER, BUILD_BUILDURI, BUILDKITE, CIRCLECI, GITHUB_ACTIONS, GITHUB_OUTPUT,
    GITHUB_STEP_SUMMARY, GITLAB_CI, JENKINS_URL, TF_BUILD,
};

/// Which CI system the process runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CiKind {
    GitHub,
    GitLab,
    Buildkite,
    CircleCi,
    Jenkins,
    Azure,
    Bitbucket,
    Local,
}

/// The CI-related environment, read once so nothing deeper needs `std::env`.
/// Empty values count as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CiEnv {
    github_actions: Option<String>,
    pub(crate) github_output: Option<PathBuf>,
    pub(crate) github_step_summary: Option<PathBuf>,
    gitlab_ci: Option<String>,
    buildkite: Option<String>,
    circleci: Option<String>,
    jenkins_url: Option<String>,
    tf_build: Option<String>,
    build_builduri: Option<String>,
    bitbucket_build_number: Option<String>,
}

impl CiEnv {
    /// Builds from any name → value lookup (tests pass a closure over a table).
    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| lookup(name).filter(|v| !v.is_empty());
        Self {
            github_actions: get(GITHUB_ACTIONS),
            github_output: get(GITHUB_OUTPUT).map(PathBuf::from),
            github_step_summary: get(GITHUB_STEP_SUMMARY).map(PathBuf::from),
            gitlab_ci: get(GITLAB_CI),
            buildkite: get(BUILDKITE),
            circleci: get(CIRCLECI),
            jenkins_url: get(JENKINS_URL),
            tf_build: get(TF_BUILD),
            build_builduri: get(BUILD_BUILDURI),
            bitbucket_build_number: get(BITBUCKET_BUILD_NUMBER),
        }
    }

    /// The CI system, from the variable each one sets in every job. GitHub
    /// needs exactly `GITHUB_ACTIONS=true` (as the Python action checks);
    /// the others need their marker set. Azure sets either of two markers
    /// depending on the agent. Jenkins comes last because its marker is a
    /// plain URL variable that other tools may also set.
    pub(crate) fn kind(&self) -> CiKind {
        if self.github_actions.as_deref() == Some("true") {
            CiKind::GitHub
        } else if self.gitlab_ci.is_some() {
            CiKind::GitLab
        } else if self.buildkite.is_some() {
            CiKind::Buildkite
        } else if self.circleci.is_some() {
            CiKind::CircleCi
        } else if self.tf_build.is_some() || self.build_builduri.is_some() {
            CiKind::Azure
        } else if self.bitbucket_build_number.is_some() {
            CiKind::Bitbucket
        } else if self.jenkins_url.is_some() {
            CiKind::Jenkins
        } else {
            CiKind::Local
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_kind_follows_the_markers() {
        let cases: &[(&[(&str, &str)], CiKind)] = &[
            (&[], CiKind::Local),
            (&[(GITHUB_ACTIONS, "true")], CiKind::GitHub),
            (&[(GITHUB_ACTIONS, "false")], CiKind::Local),
            (&[(GITHUB_ACTIONS, "")], CiKind::Local),
            (&[(GITLAB_CI, "true")], CiKind::GitLab),
            (&[(BUILDKITE, "true")], CiKind::Buildkite),
            (&[(CIRCLECI, "true")], CiKind::CircleCi),
            (&[(TF_BUILD, "True")], CiKind::Azure),
            (&[(BUILD_BUILDURI, "vstfs:///Build/Build/1")], CiKind::Azure),
            (&[(BITBUCKET_BUILD_NUMBER, "12")], CiKind::Bitbucket),
            (&[(JENKINS_URL, "https://ci.example/")], CiKind::Jenkins),
            // A GitHub job that happens to carry another system's marker is GitHub.
            (
                &[(GITHUB_ACTIONS, "true"), (GITLAB_CI, "true")],
                CiKind::GitHub,
            ),
            (&[(JENKINS_URL, "x"), (GITLAB_CI, "true")], CiKind::GitLab),
        ];
        for (vars, want) in cases {
            let env = CiEnv::from_lookup(|name| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            });
            assert_eq!(env.kind(), *want, "{vars:?}");
        }
    }

    #[test]
    fn ci_env_treats_empty_paths_as_unset() {
        let env = CiEnv::from_lookup(|name| match name {
            GITHUB_OUTPUT => Some("/tmp/out".into()),
            GITHUB_STEP_SUMMARY => Some(String::new()),
            _ => None,
        });
        assert_eq!(env.github_output, Some(PathBuf::from("/tmp/out")));
        assert_eq!(env.github_step_summary, None);
    }
}
