//! Every environment variable truss-push reads, declared once.
//!
//! Inputs (see `crate::cli::INPUTS`) are read under three names each — the
//! GitHub Docker-action form `INPUT_NAME-WITH-HYPHENS`, `INPUT_NAME_WITH_UNDERSCORES`
//! and the Python action's plain name — which are derived from the input's
//! name, not listed here. Everything else the binary reads is below.

/// `true` when running inside GitHub Actions: enables workflow commands.
pub const GITHUB_ACTIONS: &str = "GITHUB_ACTIONS";
/// File the step's outputs are appended to (heredoc form).
pub const GITHUB_OUTPUT: &str = "GITHUB_OUTPUT";
/// File the step's Markdown summary is appended to.
pub const GITHUB_STEP_SUMMARY: &str = "GITHUB_STEP_SUMMARY";
/// The commit; on `pull_request` a synthetic merge commit.
pub const GITHUB_SHA: &str = "GITHUB_SHA";
/// The full ref: `refs/pull/<n>/merge` on pull requests.
pub const GITHUB_REF: &str = "GITHUB_REF";
/// The webhook payload (holds `.pull_request.head.sha`); read once per run,
/// into the `CiContext`.
pub const GITHUB_EVENT_PATH: &str = "GITHUB_EVENT_PATH";
/// `push`, `pull_request`, …
pub const GITHUB_EVENT_NAME: &str = "GITHUB_EVENT_NAME";
/// `https://github.com` (for the run link in the summary).
pub const GITHUB_SERVER_URL: &str = "GITHUB_SERVER_URL";
/// `owner/repo`.
pub const GITHUB_REPOSITORY: &str = "GITHUB_REPOSITORY";
/// The workflow run id.
pub const GITHUB_RUN_ID: &str = "GITHUB_RUN_ID";
/// The REST API base: `https://api.github.com`, or
/// `https://HOST/api/v3` on GitHub Enterprise Server. The GitHub token is
/// sent nowhere else.
pub const GITHUB_API_URL: &str = "GITHUB_API_URL";

/// `true` inside GitLab CI.
pub const GITLAB_CI: &str = "GITLAB_CI";
/// The commit GitLab builds.
pub const CI_COMMIT_SHA: &str = "CI_COMMIT_SHA";
/// The tag of a tag pipeline.
pub const CI_COMMIT_TAG: &str = "CI_COMMIT_TAG";
/// The project's path with its namespace (`group/sub/project`): the
/// repository part of the pull-request label on GitLab.
pub const CI_PROJECT_PATH: &str = "CI_PROJECT_PATH";
/// The merge request's project-level number (MR pipelines only).
pub const CI_MERGE_REQUEST_IID: &str = "CI_MERGE_REQUEST_IID";
/// The MR head commit in merged-results pipelines (empty otherwise).
pub const CI_MERGE_REQUEST_SOURCE_BRANCH_SHA: &str = "CI_MERGE_REQUEST_SOURCE_BRANCH_SHA";
/// The merge request's diff base (MR pipelines only): what
/// `changed-since: auto` compares with.
pub const CI_MERGE_REQUEST_DIFF_BASE_SHA: &str = "CI_MERGE_REQUEST_DIFF_BASE_SHA";
/// The branch tip before a push (zeros for a new branch): what
/// `changed-since: auto` compares with outside merge requests.
pub const CI_COMMIT_BEFORE_SHA: &str = "CI_COMMIT_BEFORE_SHA";

/// `true` inside Buildkite.
pub const BUILDKITE: &str = "BUILDKITE";
/// The commit Buildkite builds.
pub const BUILDKITE_COMMIT: &str = "BUILDKITE_COMMIT";
/// The pull request number, or the string `false`.
pub const BUILDKITE_PULL_REQUEST: &str = "BUILDKITE_PULL_REQUEST";
/// The tag of a tag build.
pub const BUILDKITE_TAG: &str = "BUILDKITE_TAG";

/// Set (to `true`) by CircleCI jobs.
pub const CIRCLECI: &str = "CIRCLECI";
/// Jenkins server URL, set in every Jenkins build; other tools may set it
/// too, so it is the weakest CI marker.
pub const JENKINS_URL: &str = "JENKINS_URL";
/// Set (to `True`) by Azure Pipelines agents.
pub const TF_BUILD: &str = "TF_BUILD";
/// Build URI set by Azure Pipelines agents (the second Azure marker).
pub const BUILD_BUILDURI: &str = "BUILD_BUILDURI";
/// Build number set by Bitbucket Pipelines.
pub const BITBUCKET_BUILD_NUMBER: &str = "BITBUCKET_BUILD_NUMBER";

/// The network's variables: read by `net::Network::from_vars` alone, once
/// per run, and named nowhere else (`tests/it/structure.rs`).
pub mod network {
    /// Extra trusted CA bundle (PEM), added to the bundled public roots.
    pub const SSL_CERT_FILE: &str = "SSL_CERT_FILE";
    /// Directory of extra trusted CA certificates (PEM files).
    pub const SSL_CERT_DIR: &str = "SSL_CERT_DIR";
    /// The proxy for plain `http` requests.
    pub const HTTP_PROXY: &str = "HTTP_PROXY";
    /// [`HTTP_PROXY`] as curl also reads it, when that is unset.
    pub const HTTP_PROXY_LOWER: &str = "http_proxy";
    /// The proxy for `https` requests.
    pub const HTTPS_PROXY: &str = "HTTPS_PROXY";
    /// [`HTTPS_PROXY`] in lower case.
    pub const HTTPS_PROXY_LOWER: &str = "https_proxy";
    /// The proxy for either scheme when its own variable is unset.
    pub const ALL_PROXY: &str = "ALL_PROXY";
    /// [`ALL_PROXY`] in lower case.
    pub const ALL_PROXY_LOWER: &str = "all_proxy";
    /// Hosts reached without a proxy.
    pub const NO_PROXY: &str = "NO_PROXY";
    /// [`NO_PROXY`] in lower case.
    pub const NO_PROXY_LOWER: &str = "no_proxy";
    /// Set in CGI environments, where proxy variables are not trusted.
    pub const REQUEST_METHOD: &str = "REQUEST_METHOD";
}

/// The Python interpreter that runs the chain code generator (default:
/// `python3` on `PATH`).
pub const TRUSS_PUSH_PYTHON: &str = "TRUSS_PUSH_PYTHON";

/// Log filter for debug output on stderr (`truss_push=debug`).
pub const TRUSS_PUSH_LOG: &str = "TRUSS_PUSH_LOG";

/// Debug builds only (a release build never reads it): a scripted clock
/// for tests of the whole binary, `PHASE#N+SECS,…` (the clock jumps `SECS`
/// forward before the `N`th request of `PHASE`); the run prints every
/// request's phase, time and deadline at its end.
pub const TRUSS_PUSH_TEST_CLOCK: &str = "TRUSS_PUSH_TEST_CLOCK";
