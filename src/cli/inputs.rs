//! Every input declared once: its name, its plain environment variable,
//! the kind of value it takes (with a number's range and unit), its default,
//! its help line and its `--help` heading. The clap definition, the
//! environment names and the validation ranges all come from this table.

/// The unit of a numeric input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    Seconds,
    Minutes,
    /// A count of deploys running at once.
    Targets,
    /// A count of requests.
    Requests,
    Milliseconds,
    /// A share of requests, from 0 to 1.
    Share,
    /// A factor, e.g. 1.2 for 20 % more.
    Times,
    /// A count of deployments.
    Deployments,
}

impl Unit {
    /// The unit as a word, for messages.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Unit::Seconds => "seconds",
            Unit::Minutes => "minutes",
            Unit::Targets => "targets",
            Unit::Requests => "requests",
            Unit::Milliseconds => "milliseconds",
            Unit::Share => "(a share of requests)",
            Unit::Times => "times",
            Unit::Deployments => "deployments",
        }
    }
}

/// The values a numeric input accepts: `min..=max` in `unit`, whole numbers
/// only when `whole`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Range {
    pub(crate) unit: Unit,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) whole: bool,
}

/// What kind of value an input takes: its placeholder in `--help` and the
/// checks stage two applies to it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ValueKind {
    /// A file or directory.
    Path,
    /// The API key: masked in logs, never printed.
    Secret,
    /// Text naming something on the platform.
    Name,
    /// true/false, 1/0, yes/no.
    Bool,
    /// A boolean that may also be given as a bare flag (`--dry-run`).
    Switch,
    /// A JSON document.
    Json,
    /// An http(s) URL.
    Url,
    /// A URL with `{prefix}` and `{id}` placeholders.
    Template,
    /// The outputs file format.
    Format,
    /// A number within a range.
    Number(Range),
}

impl ValueKind {
    pub(super) fn value_name(self) -> &'static str {
        match self {
            ValueKind::Path => "PATH",
            ValueKind::Secret => "KEY",
            ValueKind::Name => "NAME",
            ValueKind::Bool | ValueKind::Switch => "BOOL",
            ValueKind::Json => "JSON",
            ValueKind::Url => "URL",
            ValueKind::Template => "TEMPLATE",
            ValueKind::Format => "FORMAT",
            ValueKind::Number(r) => match r.unit {
                Unit::Seconds => "SECONDS",
                Unit::Minutes => "MINUTES",
                Unit::Targets | Unit::Requests | Unit::Deployments => "N",
                Unit::Milliseconds => "MS",
                Unit::Share => "SHARE",
                Unit::Times => "FACTOR",
            },
        }
    }
}

/// One input, declared once.
#[derive(Clone, Copy, Debug)]
pub struct InputSpec {
    /// The flag without dashes and the action input id.
    pub name: &'static str,
    /// The Python action's plain environment variable, or ours for the
    /// inputs this project adds.
    pub plain_env: &'static str,
    pub(crate) kind: ValueKind,
    /// The value used when the input is not given; `None` when there is no
    /// default or it depends on other inputs (the help says which).
    pub(crate) default: Option<&'static str>,
    /// One line for `--help`.
    pub(crate) help: &'static str,
    /// The `--help` section; `None` for the Python action's inputs.
    pub(crate) heading: Option<&'static str>,
}

const HOSTS: Option<&str> = Some("Hosts");
const BEHAVIOUR: Option<&str> = Some("Behaviour");
const OUTPUTS: Option<&str> = Some("Outputs");
const PROMOTION: Option<&str> = Some("Promotion");
const GITHUB: Option<&str> = Some("GitHub");
const TARGETS: Option<&str> = Some("Several targets");
const EVIDENCE: Option<&str> = Some("Evidence");
const LIFECYCLE: Option<&str> = Some("Lifecycle");

const fn number(unit: Unit, min: f64, max: f64, whole: bool) -> ValueKind {
    ValueKind::Number(Range {
        unit,
        min,
        max,
        whole,
    })
}

const fn seconds(min: f64, max: f64, whole: bool) -> ValueKind {
    ValueKind::Number(Range {
        unit: Unit::Seconds,
        min,
        max,
        whole,
    })
}

/// Every input, the Python action's first (same names, same plain
/// variables), then the ones this project adds.
pub const INPUTS: &[InputSpec] = &[
    InputSpec {
        name: "truss-directory",
        plain_env: "TRUSS_DIRECTORY",
        kind: ValueKind::Path,
        default: None,
        help: "Model directory (with config.yaml) or chain .py file; several paths or globs, one per line or comma separated",
        heading: None,
    },
    InputSpec {
        name: "baseten-api-key",
        plain_env: "BASETEN_API_KEY",
        kind: ValueKind::Secret,
        default: None,
        help: "Baseten API key; never printed",
        heading: None,
    },
    InputSpec {
        name: "model-name",
        plain_env: "MODEL_NAME",
        kind: ValueKind::Name,
        default: None,
        help: "Override the model (or chain) name",
        heading: None,
    },
    InputSpec {
        name: "environment",
        plain_env: "ENVIRONMENT",
        kind: ValueKind::Name,
        default: None,
        help: "Deploy into this environment, e.g. production (letters, digits, '_', '-')",
        heading: None,
    },
    InputSpec {
        name: "promote",
        plain_env: "TRUSS_PUSH_PROMOTE",
        kind: ValueKind::Bool,
        default: Some("false"),
        help: "Shorthand for environment production (as truss push --promote); not with environment",
        heading: PROMOTION,
    },
    InputSpec {
        name: "promotion",
        plain_env: "TRUSS_PUSH_PROMOTION",
        kind: ValueKind::Name,
        default: Some("at-create"),
        help: "at-create: the platform promotes when ready; after-predict: promote only after the deployment passed its smoke test, roll back if the environment's fails",
        heading: PROMOTION,
    },
    InputSpec {
        name: "preserve-previous-production-deployment",
        plain_env: "TRUSS_PUSH_PRESERVE_PREVIOUS_PRODUCTION_DEPLOYMENT",
        kind: ValueKind::Bool,
        default: Some("false"),
        help: "Keep the previous deployment of the environment scaled up after the promotion",
        heading: PROMOTION,
    },
    InputSpec {
        name: "preserve-env-instance-type",
        plain_env: "TRUSS_PUSH_PRESERVE_ENV_INSTANCE_TYPE",
        kind: ValueKind::Bool,
        default: Some("true"),
        help: "Keep the environment's instance type (false: take the config's resources)",
        heading: PROMOTION,
    },
    InputSpec {
        name: "publish",
        plain_env: "TRUSS_PUSH_PUBLISH",
        kind: ValueKind::Bool,
        default: None,
        help: "Accepted for truss push compatibility; deployments are always published",
        heading: PROMOTION,
    },
    InputSpec {
        name: "trusted",
        plain_env: "TRUSS_PUSH_TRUSTED",
        kind: ValueKind::Bool,
        default: None,
        help: "Accepted for truss push compatibility (deprecated there); no effect",
        heading: PROMOTION,
    },
    InputSpec {
        name: "include-git-info",
        plain_env: "INCLUDE_GIT_INFO",
        kind: ValueKind::Bool,
        default: Some("true"),
        help: "Attach commit/tag info to the deployment",
        heading: None,
    },
    InputSpec {
        name: "labels",
        plain_env: "LABELS",
        kind: ValueKind::Json,
        default: None,
        help: "JSON object of labels",
        heading: None,
    },
    InputSpec {
        name: "deployment-name",
        plain_env: "DEPLOYMENT_NAME",
        kind: ValueKind::Name,
        default: None,
        help: "Deployment name [0-9A-Za-z_.-]; default PR-<n>_<sha7> on PRs, else <sha7>",
        heading: None,
    },
    InputSpec {
        name: "cleanup",
        plain_env: "CLEANUP",
        kind: ValueKind::Bool,
        default: None,
        help: "Deactivate after validation (default: true without environment, false with one)",
        heading: None,
    },
    InputSpec {
        name: "predict-payload",
        plain_env: "PREDICT_PAYLOAD",
        kind: ValueKind::Json,
        default: None,
        help: "JSON predict body for the smoke test (default: the first case of predict-cases, else config model_metadata.example_model_input)",
        heading: None,
    },
    InputSpec {
        name: "deploy-timeout-minutes",
        plain_env: "DEPLOY_TIMEOUT_MINUTES",
        kind: ValueKind::Number(Range {
            unit: Unit::Minutes,
            // The platform rejects deploy_timeout_minutes outside this range.
            min: 10.0,
            max: 1440.0,
            whole: true,
        }),
        default: Some("45"),
        help: "Deploy budget in minutes",
        heading: None,
    },
    InputSpec {
        name: "predict-timeout",
        plain_env: "PREDICT_TIMEOUT",
        // An hour is far beyond any smoke test; a larger value is a typo.
        kind: seconds(1.0, 3600.0, true),
        default: Some("300"),
        help: "Predict deadline in seconds",
        heading: None,
    },
    InputSpec {
        name: "regional-environment",
        plain_env: "REGIONAL_ENVIRONMENT",
        kind: ValueKind::Bool,
        default: Some("false"),
        help: "Predict through the regional environment host (needs environment)",
        heading: None,
    },
    InputSpec {
        name: "team",
        plain_env: "TEAM",
        kind: ValueKind::Name,
        default: None,
        help: "Team name, when the key sees several teams",
        heading: None,
    },
    InputSpec {
        name: "app-url",
        plain_env: "TRUSS_PUSH_APP_URL",
        kind: ValueKind::Url,
        default: Some("https://app.baseten.co"),
        help: "Baseten app URL; GraphQL is {app-url}/graphql/",
        heading: HOSTS,
    },
    InputSpec {
        name: "api-url",
        plain_env: "TRUSS_PUSH_API_URL",
        kind: ValueKind::Url,
        default: Some("https://api.baseten.co"),
        help: "REST API base URL",
        heading: HOSTS,
    },
    InputSpec {
        name: "inference-url",
        plain_env: "TRUSS_PUSH_INFERENCE_URL",
        kind: ValueKind::Template,
        default: Some("https://{prefix}-{id}.api.baseten.co"),
        help: "Inference URL template with {prefix} (model|chain) and {id}",
        heading: HOSTS,
    },
    InputSpec {
        name: "s3-endpoint",
        plain_env: "TRUSS_PUSH_S3_ENDPOINT",
        kind: ValueKind::Url,
        default: None,
        help: "S3 endpoint override (path-style), e.g. for a proxy or a test double",
        heading: HOSTS,
    },
    InputSpec {
        name: "poll-interval-seconds",
        plain_env: "TRUSS_PUSH_POLL_INTERVAL_SECONDS",
        // Below the floor the poll loop hammers the API; the tests poll
        // their local fake at the floor to stay fast.
        kind: seconds(0.05, 600.0, false),
        default: Some("2"),
        help: "Seconds between status polls",
        heading: BEHAVIOUR,
    },
    InputSpec {
        name: "wait-timeout-seconds",
        plain_env: "TRUSS_PUSH_WAIT_TIMEOUT_SECONDS",
        // The ceiling is the longest deploy budget the platform accepts.
        kind: seconds(0.1, 86_400.0, false),
        default: None,
        help: "Client-side wait budget in seconds (default: deploy-timeout-minutes)",
        heading: BEHAVIOUR,
    },
    InputSpec {
        name: "stream-logs",
        plain_env: "TRUSS_PUSH_STREAM_LOGS",
        kind: ValueKind::Bool,
        default: Some("true"),
        help: "Stream deployment logs while waiting",
        heading: BEHAVIOUR,
    },
    InputSpec {
        name: "dry-run",
        plain_env: "TRUSS_PUSH_DRY_RUN",
        kind: ValueKind::Switch,
        default: Some("false"),
        help: "Validate and package only; nothing is uploaded or created (teardown and prune: list what would be retired, change nothing)",
        heading: BEHAVIOUR,
    },
    InputSpec {
        name: "print-config",
        plain_env: "TRUSS_PUSH_PRINT_CONFIG",
        kind: ValueKind::Switch,
        default: Some("false"),
        help: "Print the config JSON the platform would receive and exit; nothing is sent",
        heading: BEHAVIOUR,
    },
    InputSpec {
        name: "output-file",
        plain_env: "TRUSS_PUSH_OUTPUT_FILE",
        kind: ValueKind::Path,
        default: None,
        help: "Also write the outputs to this file (for CI systems other than GitHub)",
        heading: OUTPUTS,
    },
    InputSpec {
        name: "output-format",
        plain_env: "TRUSS_PUSH_OUTPUT_FORMAT",
        kind: ValueKind::Format,
        default: None,
        help: "Format of --output-file: dotenv or json (default: json for *.json, else dotenv)",
        heading: OUTPUTS,
    },
    InputSpec {
        name: "json",
        plain_env: "TRUSS_PUSH_JSON",
        kind: ValueKind::Switch,
        default: Some("false"),
        help: "Print the result as one JSON object on stdout (every output and the status history); logs go to stderr",
        heading: OUTPUTS,
    },
    InputSpec {
        name: "github-token",
        plain_env: "GITHUB_TOKEN",
        kind: ValueKind::Secret,
        default: None,
        help: "Token for the GitHub API (deployments, PR comment, commit status); sent only to GITHUB_API_URL",
        heading: GITHUB,
    },
    InputSpec {
        name: "github-deployment",
        plain_env: "TRUSS_PUSH_GITHUB_DEPLOYMENT",
        kind: ValueKind::Bool,
        default: Some("false"),
        help: "Record a GitHub deployment with its statuses and environment URL (needs deployments: write)",
        heading: GITHUB,
    },
    InputSpec {
        name: "pr-comment",
        plain_env: "TRUSS_PUSH_PR_COMMENT",
        kind: ValueKind::Bool,
        default: Some("false"),
        help: "Keep one pull-request comment per model up to date (needs pull-requests: write)",
        heading: GITHUB,
    },
    InputSpec {
        name: "commit-status",
        plain_env: "TRUSS_PUSH_COMMIT_STATUS",
        kind: ValueKind::Bool,
        default: Some("false"),
        help: "Set a commit status per model with the verdict and a link (needs statuses: write)",
        heading: GITHUB,
    },
    InputSpec {
        name: "plan",
        plain_env: "TRUSS_PUSH_PLAN",
        kind: ValueKind::Switch,
        default: Some("false"),
        help: "Print the targets as a CI matrix (outputs matrix, targets-count) and exit; nothing is sent",
        heading: TARGETS,
    },
    InputSpec {
        name: "changed-since",
        plain_env: "TRUSS_PUSH_CHANGED_SINCE",
        kind: ValueKind::Name,
        default: None,
        help: "Only targets changed since this git ref (e.g. origin/main, HEAD~1; auto: the pull request's base)",
        heading: TARGETS,
    },
    InputSpec {
        name: "max-parallel",
        plain_env: "TRUSS_PUSH_MAX_PARALLEL",
        kind: ValueKind::Number(Range {
            unit: Unit::Targets,
            min: 1.0,
            // Each deploy holds an upload and a poll loop; past this the
            // platform's rate limits, not the runner, set the pace.
            max: 16.0,
            whole: true,
        }),
        default: Some("2"),
        help: "With several targets: how many deploy at once",
        heading: TARGETS,
    },
    InputSpec {
        name: "fail-fast",
        plain_env: "TRUSS_PUSH_FAIL_FAST",
        kind: ValueKind::Bool,
        default: Some("false"),
        help: "With several targets: the first failure cancels (and cleans up) the others",
        heading: TARGETS,
    },
    InputSpec {
        name: "predict-cases",
        plain_env: "TRUSS_PUSH_PREDICT_CASES",
        kind: ValueKind::Path,
        default: None,
        help: "Contract cases: a YAML list (or .jsonl) of named payloads and what each answer must hold; relative to the repository root",
        heading: EVIDENCE,
    },
    InputSpec {
        name: "predict-requests",
        plain_env: "TRUSS_PUSH_PREDICT_REQUESTS",
        // Each request costs inference time; a thousand already gives
        // exact percentiles to a tenth of a percent.
        kind: number(Unit::Requests, 1.0, 1000.0, true),
        default: None,
        help: "Counted requests to the candidate, cases cycled (a baseline gets as many) (default: one per case; 100 with max-latency-regression, which needs at least 20)",
        heading: EVIDENCE,
    },
    InputSpec {
        name: "predict-concurrency",
        plain_env: "TRUSS_PUSH_PREDICT_CONCURRENCY",
        kind: number(Unit::Requests, 1.0, 16.0, true),
        default: Some("1"),
        help: "Evidence requests in flight at once",
        heading: EVIDENCE,
    },
    InputSpec {
        name: "predict-warmup",
        plain_env: "TRUSS_PUSH_PREDICT_WARMUP",
        kind: number(Unit::Requests, 0.0, 100.0, true),
        default: Some("1"),
        help: "Requests sent first and not counted, so a cold start is not a regression",
        heading: EVIDENCE,
    },
    InputSpec {
        name: "max-error-rate",
        plain_env: "TRUSS_PUSH_MAX_ERROR_RATE",
        kind: number(Unit::Share, 0.0, 1.0, false),
        default: Some("0"),
        help: "Largest share of requests that may fail (no answer, 429, 5xx), e.g. 0.01",
        heading: EVIDENCE,
    },
    InputSpec {
        name: "max-latency-p95-ms",
        plain_env: "TRUSS_PUSH_MAX_LATENCY_P95_MS",
        kind: number(Unit::Milliseconds, 1.0, 3_600_000.0, false),
        default: None,
        help: "Fail when the candidate's p95 latency exceeds this (also bounds real traffic during a rolling promotion)",
        heading: EVIDENCE,
    },
    InputSpec {
        name: "max-latency-regression",
        plain_env: "TRUSS_PUSH_MAX_LATENCY_REGRESSION",
        kind: number(Unit::Times, 1.0, 100.0, false),
        default: None,
        help: "Fail when a one-sided Mann-Whitney U test (0.05) finds the candidate slower than this many times the serving deployment, measured side by side; needs environment and promotion: after-predict",
        heading: EVIDENCE,
    },
    InputSpec {
        name: "analysis-file",
        plain_env: "TRUSS_PUSH_ANALYSIS_FILE",
        kind: ValueKind::Path,
        default: None,
        help: "Write every evidence number here as JSON",
        heading: EVIDENCE,
    },
    InputSpec {
        name: "upload-concurrency",
        plain_env: "TRUSS_PUSH_UPLOAD_CONCURRENCY",
        kind: ValueKind::Number(Range {
            unit: Unit::Requests,
            min: 1.0,
            // Each part in flight holds a 256 KiB buffer and a connection;
            // 32 keeps the number of sockets to S3 modest.
            max: 32.0,
            whole: true,
        }),
        default: Some(UPLOAD_CONCURRENCY_DEFAULT),
        help: "Parts of a large archive uploaded at once (more helps on a long, fast link; each costs a connection and a 256 KiB buffer)",
        heading: BEHAVIOUR,
    },
    InputSpec {
        name: "skip-unchanged",
        plain_env: "TRUSS_PUSH_SKIP_UNCHANGED",
        kind: ValueKind::Bool,
        default: Some("false"),
        help: "Models with an environment: when the serving deployment's recorded content hash equals this truss's and it is ready, upload and create nothing (output unchanged: true); plan leaves such targets out",
        heading: BEHAVIOUR,
    },
    InputSpec {
        name: "command",
        plain_env: "TRUSS_PUSH_COMMAND",
        kind: ValueKind::Name,
        default: Some("deploy"),
        help: "What the step does: deploy, plan (as plan: true), teardown (a pull request's previews), prune (old deployments), rollback (what served before), drift (does what serves match the repository)",
        heading: LIFECYCLE,
    },
    InputSpec {
        name: "pull-request",
        plain_env: "TRUSS_PUSH_PULL_REQUEST",
        kind: ValueKind::Name,
        default: None,
        help: "The pull or merge request number whose previews teardown retires and whose label a deploy writes (default: the event's)",
        heading: LIFECYCLE,
    },
    InputSpec {
        name: "retire",
        plain_env: "TRUSS_PUSH_RETIRE",
        kind: ValueKind::Name,
        default: Some("delete"),
        help: "How teardown and prune retire a deployment: delete, or deactivate",
        heading: LIFECYCLE,
    },
    InputSpec {
        name: "keep",
        plain_env: "TRUSS_PUSH_KEEP",
        kind: number(Unit::Deployments, 1.0, 1000.0, true),
        default: None,
        help: "prune: the newest retirable deployments of each model never retired",
        heading: LIFECYCLE,
    },
    InputSpec {
        name: "older-than",
        plain_env: "TRUSS_PUSH_OLDER_THAN",
        kind: ValueKind::Name,
        default: None,
        help: "prune: retire deployments created longer ago than this (whole hours or days: 36h, 14d; at least 1h)",
        heading: LIFECYCLE,
    },
    InputSpec {
        name: "prune-unlabelled",
        plain_env: "TRUSS_PUSH_PRUNE_UNLABELLED",
        kind: ValueKind::Bool,
        default: Some("false"),
        help: "prune: deployments truss-push did not label are candidates too (what serves stays protected)",
        heading: LIFECYCLE,
    },
    InputSpec {
        name: "to-deployment",
        plain_env: "TRUSS_PUSH_TO_DEPLOYMENT",
        kind: ValueKind::Name,
        default: None,
        help: "rollback: the deployment id of the same model to put back (default: what served the environment before, from the audit log)",
        heading: LIFECYCLE,
    },
    InputSpec {
        name: "preflight",
        plain_env: "TRUSS_PUSH_PREFLIGHT",
        kind: ValueKind::Bool,
        default: Some("true"),
        help: "Models: before any upload, ask the platform to validate the payload the create will carry (prepare_model_upload with dry_run: true); a refusal ends the run before a byte is uploaded (exit 2), an endpoint the platform lacks is a notice",
        heading: BEHAVIOUR,
    },
];

/// Every input, in the order of [`INPUTS`]: code names an input by its
/// variant, so a misspelt input is a compile error, not a panic at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Input {
    TrussDirectory,
    BasetenApiKey,
    ModelName,
    Environment,
    Promote,
    Promotion,
    PreservePreviousProductionDeployment,
    PreserveEnvInstanceType,
    Publish,
    Trusted,
    IncludeGitInfo,
    Labels,
    DeploymentName,
    Cleanup,
    PredictPayload,
    DeployTimeoutMinutes,
    PredictTimeout,
    RegionalEnvironment,
    Team,
    AppUrl,
    ApiUrl,
    InferenceUrl,
    S3Endpoint,
    PollIntervalSeconds,
    WaitTimeoutSeconds,
    StreamLogs,
    DryRun,
    PrintConfig,
    OutputFile,
    OutputFormat,
    Json,
    GithubToken,
    GithubDeployment,
    PrComment,
    CommitStatus,
    Plan,
    ChangedSince,
    MaxParallel,
    FailFast,
    PredictCases,
    PredictRequests,
    PredictConcurrency,
    PredictWarmup,
    MaxErrorRate,
    MaxLatencyP95Ms,
    MaxLatencyRegression,
    AnalysisFile,
    UploadConcurrency,
    SkipUnchanged,
    Command,
    PullRequest,
    Retire,
    Keep,
    OlderThan,
    PruneUnlabelled,
    ToDeployment,
    Preflight,
}

impl Input {
    /// Every variant, in declaration order.
    pub const ALL: [Input; 57] = [
        Input::TrussDirectory,
        Input::BasetenApiKey,
        Input::ModelName,
        Input::Environment,
        Input::Promote,
        Input::Promotion,
        Input::PreservePreviousProductionDeployment,
        Input::PreserveEnvInstanceType,
        Input::Publish,
        Input::Trusted,
        Input::IncludeGitInfo,
        Input::Labels,
        Input::DeploymentName,
        Input::Cleanup,
        Input::PredictPayload,
        Input::DeployTimeoutMinutes,
        Input::PredictTimeout,
        Input::RegionalEnvironment,
        Input::Team,
        Input::AppUrl,
        Input::ApiUrl,
        Input::InferenceUrl,
        Input::S3Endpoint,
        Input::PollIntervalSeconds,
        Input::WaitTimeoutSeconds,
        Input::StreamLogs,
        Input::DryRun,
        Input::PrintConfig,
        Input::OutputFile,
        Input::OutputFormat,
        Input::Json,
        Input::GithubToken,
        Input::GithubDeployment,
        Input::PrComment,
        Input::CommitStatus,
        Input::Plan,
        Input::ChangedSince,
        Input::MaxParallel,
        Input::FailFast,
        Input::PredictCases,
        Input::PredictRequests,
        Input::PredictConcurrency,
        Input::PredictWarmup,
        Input::MaxErrorRate,
        Input::MaxLatencyP95Ms,
        Input::MaxLatencyRegression,
        Input::AnalysisFile,
        Input::UploadConcurrency,
        Input::SkipUnchanged,
        Input::Command,
        Input::PullRequest,
        Input::Retire,
        Input::Keep,
        Input::OlderThan,
        Input::PruneUnlabelled,
        Input::ToDeployment,
        Input::Preflight,
    ];

    /// The input's declaration.
    pub fn spec(self) -> &'static InputSpec {
        &INPUTS[self as usize]
    }

    /// The input's name, as flags and `with:` keys spell it.
    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

/// `upload-concurrency`'s default, chosen by measurement through a shaped
/// link (BENCHMARKS.md, "Upload through a shaped link").
const UPLOAD_CONCURRENCY_DEFAULT: &str = "24";
