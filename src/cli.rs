//! The command line and its environment fallbacks: stage one of the inputs.
//!
//! Every input can be given four ways: as a flag, as the GitHub
//! Docker-action variable `INPUT_NAME-WITH-HYPHENS`, as
//! `INPUT_NAME_WITH_UNDERSCORES`, or as a plain variable. Precedence is in
//! that order and an empty value means "not given", because GitHub passes
//! unset inputs as empty strings. Each input is declared once, in `INPUTS`:
//! the clap definition, the environment names, the default and the kind of
//! value all come from that table. This module only gathers raw strings;
//! `crate::config` validates them.

use std::collections::BTreeMap;
use std::env::VarError;
use std::ffi::OsString;

use clap::{Arg, ArgAction, ArgMatches, Command};

/// Reads one environment variable the way `std::env::var` does, so that a
/// value which is not UTF-8 is told apart from an unset one.
pub(crate) type EnvLookup<'a> = &'a dyn Fn(&str) -> Result<String, VarError>;

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
pub(crate) enum Kind {
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

impl Kind {
    fn value_name(self) -> &'static str {
        match self {
            Kind::Path => "PATH",
            Kind::Secret => "KEY",
            Kind::Name => "NAME",
            Kind::Bool | Kind::Switch => "BOOL",
            Kind::Json => "JSON",
            Kind::Url => "URL",
            Kind::Template => "TEMPLATE",
            Kind::Format => "FORMAT",
            Kind::Number(r) => match r.unit {
                Unit::Seconds => "SECONDS",
                Unit::Minutes => "MINUTES",
                Unit::Targets | Unit::Requests => "N",
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
    /// The anchor action's plain environment variable, or ours for the
    /// inputs this project adds.
    pub plain_env: &'static str,
    pub(crate) kind: Kind,
    /// The value used when the input is not given; `None` when there is no
    /// default or it depends on other inputs (the help says which).
    pub(crate) default: Option<&'static str>,
    /// One line for `--help`.
    pub(crate) help: &'static str,
    /// The `--help` section; `None` for the anchor action's inputs.
    pub(crate) heading: Option<&'static str>,
}

const HOSTS: Option<&str> = Some("Hosts");
const BEHAVIOUR: Option<&str> = Some("Behaviour");
const OUTPUTS: Option<&str> = Some("Outputs");
const PROMOTION: Option<&str> = Some("Promotion");
const GITHUB: Option<&str> = Some("GitHub");
const TARGETS: Option<&str> = Some("Several targets");
const EVIDENCE: Option<&str> = Some("Evidence");

const fn number(unit: Unit, min: f64, max: f64, whole: bool) -> Kind {
    Kind::Number(Range {
        unit,
        min,
        max,
        whole,
    })
}

const fn seconds(min: f64, max: f64, whole: bool) -> Kind {
    Kind::Number(Range {
        unit: Unit::Seconds,
        min,
        max,
        whole,
    })
}

/// Every input, the anchor action's first (same names, same plain
/// variables), then the ones this project adds.
pub const INPUTS: &[InputSpec] = &[
    InputSpec {
        name: "truss-directory",
        plain_env: "TRUSS_DIRECTORY",
        kind: Kind::Path,
        default: None,
        help: "Model directory (with config.yaml) or chain .py file; several paths or globs, one per line or comma separated",
        heading: None,
    },
    InputSpec {
        name: "baseten-api-key",
        plain_env: "BASETEN_API_KEY",
        kind: Kind::Secret,
        default: None,
        help: "Baseten API key; never printed",
        heading: None,
    },
    InputSpec {
        name: "model-name",
        plain_env: "MODEL_NAME",
        kind: Kind::Name,
        default: None,
        help: "Override the model (or chain) name",
        heading: None,
    },
    InputSpec {
        name: "environment",
        plain_env: "ENVIRONMENT",
        kind: Kind::Name,
        default: None,
        help: "Deploy into this environment, e.g. production (letters, digits, '_', '-')",
        heading: None,
    },
    InputSpec {
        name: "promote",
        plain_env: "TRUSS_PUSH_PROMOTE",
        kind: Kind::Bool,
        default: Some("false"),
        help: "Shorthand for environment production (as truss push --promote); not with environment",
        heading: PROMOTION,
    },
    InputSpec {
        name: "promotion",
        plain_env: "TRUSS_PUSH_PROMOTION",
        kind: Kind::Name,
        default: Some("at-create"),
        help: "at-create: the platform promotes when ready; after-predict: promote only after the deployment passed its smoke test, roll back if the environment's fails",
        heading: PROMOTION,
    },
    InputSpec {
        name: "preserve-previous-production-deployment",
        plain_env: "TRUSS_PUSH_PRESERVE_PREVIOUS_PRODUCTION_DEPLOYMENT",
        kind: Kind::Bool,
        default: Some("false"),
        help: "Keep the previous deployment of the environment scaled up after the promotion",
        heading: PROMOTION,
    },
    InputSpec {
        name: "preserve-env-instance-type",
        plain_env: "TRUSS_PUSH_PRESERVE_ENV_INSTANCE_TYPE",
        kind: Kind::Bool,
        default: Some("true"),
        help: "Keep the environment's instance type (false: take the config's resources)",
        heading: PROMOTION,
    },
    InputSpec {
        name: "publish",
        plain_env: "TRUSS_PUSH_PUBLISH",
        kind: Kind::Bool,
        default: None,
        help: "Accepted for truss push compatibility; deployments are always published",
        heading: PROMOTION,
    },
    InputSpec {
        name: "trusted",
        plain_env: "TRUSS_PUSH_TRUSTED",
        kind: Kind::Bool,
        default: None,
        help: "Accepted for truss push compatibility (deprecated there); no effect",
        heading: PROMOTION,
    },
    InputSpec {
        name: "include-git-info",
        plain_env: "INCLUDE_GIT_INFO",
        kind: Kind::Bool,
        default: Some("true"),
        help: "Attach commit/tag info to the deployment",
        heading: None,
    },
    InputSpec {
        name: "labels",
        plain_env: "LABELS",
        kind: Kind::Json,
        default: None,
        help: "JSON object of labels",
        heading: None,
    },
    InputSpec {
        name: "deployment-name",
        plain_env: "DEPLOYMENT_NAME",
        kind: Kind::Name,
        default: None,
        help: "Deployment name [0-9A-Za-z_.-]; default PR-<n>_<sha7> on PRs, else <sha7>",
        heading: None,
    },
    InputSpec {
        name: "cleanup",
        plain_env: "CLEANUP",
        kind: Kind::Bool,
        default: None,
        help: "Deactivate after validation (default: true without environment, false with one)",
        heading: None,
    },
    InputSpec {
        name: "predict-payload",
        plain_env: "PREDICT_PAYLOAD",
        kind: Kind::Json,
        default: None,
        help: "JSON predict body (default: config model_metadata.example_model_input)",
        heading: None,
    },
    InputSpec {
        name: "deploy-timeout-minutes",
        plain_env: "DEPLOY_TIMEOUT_MINUTES",
        kind: Kind::Number(Range {
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
        kind: Kind::Bool,
        default: Some("false"),
        help: "Predict through the regional environment host (needs environment)",
        heading: None,
    },
    InputSpec {
        name: "team",
        plain_env: "TEAM",
        kind: Kind::Name,
        default: None,
        help: "Team name, when the key sees several teams",
        heading: None,
    },
    InputSpec {
        name: "app-url",
        plain_env: "TRUSS_PUSH_APP_URL",
        kind: Kind::Url,
        default: Some("https://app.baseten.co"),
        help: "Baseten app URL; GraphQL is {app-url}/graphql/",
        heading: HOSTS,
    },
    InputSpec {
        name: "api-url",
        plain_env: "TRUSS_PUSH_API_URL",
        kind: Kind::Url,
        default: Some("https://api.baseten.co"),
        help: "REST API base URL",
        heading: HOSTS,
    },
    InputSpec {
        name: "inference-url",
        plain_env: "TRUSS_PUSH_INFERENCE_URL",
        kind: Kind::Template,
        default: Some("https://{prefix}-{id}.api.baseten.co"),
        help: "Inference URL template with {prefix} (model|chain) and {id}",
        heading: HOSTS,
    },
    InputSpec {
        name: "s3-endpoint",
        plain_env: "TRUSS_PUSH_S3_ENDPOINT",
        kind: Kind::Url,
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
        kind: Kind::Bool,
        default: Some("true"),
        help: "Stream deployment logs while waiting",
        heading: BEHAVIOUR,
    },
    InputSpec {
        name: "dry-run",
        plain_env: "TRUSS_PUSH_DRY_RUN",
        kind: Kind::Switch,
        default: Some("false"),
        help: "Validate and package only; nothing is uploaded or created",
        heading: BEHAVIOUR,
    },
    InputSpec {
        name: "print-config",
        plain_env: "TRUSS_PUSH_PRINT_CONFIG",
        kind: Kind::Switch,
        default: Some("false"),
        help: "Print the config JSON the platform would receive and exit; nothing is sent",
        heading: BEHAVIOUR,
    },
    InputSpec {
        name: "output-file",
        plain_env: "TRUSS_PUSH_OUTPUT_FILE",
        kind: Kind::Path,
        default: None,
        help: "Also write the outputs to this file (for CI systems other than GitHub)",
        heading: OUTPUTS,
    },
    InputSpec {
        name: "output-format",
        plain_env: "TRUSS_PUSH_OUTPUT_FORMAT",
        kind: Kind::Format,
        default: None,
        help: "Format of --output-file: dotenv or json (default: json for *.json, else dotenv)",
        heading: OUTPUTS,
    },
    InputSpec {
        name: "json",
        plain_env: "TRUSS_PUSH_JSON",
        kind: Kind::Switch,
        default: Some("false"),
        help: "Print the result as one JSON object on stdout (every output and the status history); logs go to stderr",
        heading: OUTPUTS,
    },
    InputSpec {
        name: "github-token",
        plain_env: "GITHUB_TOKEN",
        kind: Kind::Secret,
        default: None,
        help: "Token for the GitHub API (deployments, PR comment, commit status); sent only to GITHUB_API_URL",
        heading: GITHUB,
    },
    InputSpec {
        name: "github-deployment",
        plain_env: "TRUSS_PUSH_GITHUB_DEPLOYMENT",
        kind: Kind::Bool,
        default: Some("false"),
        help: "Record a GitHub deployment with its statuses and environment URL (needs deployments: write)",
        heading: GITHUB,
    },
    InputSpec {
        name: "pr-comment",
        plain_env: "TRUSS_PUSH_PR_COMMENT",
        kind: Kind::Bool,
        default: Some("false"),
        help: "Keep one pull-request comment per model up to date (needs pull-requests: write)",
        heading: GITHUB,
    },
    InputSpec {
        name: "commit-status",
        plain_env: "TRUSS_PUSH_COMMIT_STATUS",
        kind: Kind::Bool,
        default: Some("false"),
        help: "Set a commit status per model with the verdict and a link (needs statuses: write)",
        heading: GITHUB,
    },
    InputSpec {
        name: "plan",
        plain_env: "TRUSS_PUSH_PLAN",
        kind: Kind::Switch,
        default: Some("false"),
        help: "Print the targets as a CI matrix (outputs matrix, targets-count) and exit; nothing is sent",
        heading: TARGETS,
    },
    InputSpec {
        name: "changed-since",
        plain_env: "TRUSS_PUSH_CHANGED_SINCE",
        kind: Kind::Name,
        default: None,
        help: "Only targets changed since this git ref (e.g. origin/main, HEAD~1; auto: the pull request's base)",
        heading: TARGETS,
    },
    InputSpec {
        name: "max-parallel",
        plain_env: "TRUSS_PUSH_MAX_PARALLEL",
        kind: Kind::Number(Range {
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
        kind: Kind::Bool,
        default: Some("false"),
        help: "With several targets: the first failure cancels (and cleans up) the others",
        heading: TARGETS,
    },
    InputSpec {
        name: "predict-cases",
        plain_env: "TRUSS_PUSH_PREDICT_CASES",
        kind: Kind::Path,
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
        help: "Counted requests to the candidate, cases cycled (a baseline gets as many) (default: one per case)",
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
        help: "Fail when the candidate's p95 exceeds this many times the serving deployment's and a one-sided Mann-Whitney U test (0.05) says it is slower",
        heading: EVIDENCE,
    },
    InputSpec {
        name: "analysis-file",
        plain_env: "TRUSS_PUSH_ANALYSIS_FILE",
        kind: Kind::Path,
        default: None,
        help: "Write every evidence number here as JSON",
        heading: EVIDENCE,
    },
    InputSpec {
        name: "upload-concurrency",
        plain_env: "TRUSS_PUSH_UPLOAD_CONCURRENCY",
        kind: Kind::Number(Range {
            unit: Unit::Requests,
            min: 1.0,
            // Each part in flight holds a 64 KiB buffer and a connection;
            // 32 keeps the number of sockets to S3 modest.
            max: 32.0,
            whole: true,
        }),
        default: Some(UPLOAD_CONCURRENCY_DEFAULT),
        help: "Parts of a large archive uploaded at once (more helps on a long, fast link; each costs a connection and a 64 KiB buffer)",
        heading: BEHAVIOUR,
    },
];

/// `upload-concurrency`'s default, chosen by measurement through a shaped
/// link (BENCHMARKS.md, "Upload through a shaped link").
const UPLOAD_CONCURRENCY_DEFAULT: &str = "24";

/// The spec of the input called `name`.
///
/// # Panics
/// When `name` is not an input: a typo in the code, caught by any test that
/// reads it.
pub(crate) fn spec(name: &str) -> &'static InputSpec {
    INPUTS
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("unknown input {name}"))
}

/// The environment names an input is read from, in precedence order.
pub fn env_names(spec: &InputSpec) -> [String; 3] {
    let upper = spec.name.to_ascii_uppercase();
    [
        format!("INPUT_{upper}"),
        format!("INPUT_{}", upper.replace('-', "_")),
        spec.plain_env.to_string(),
    ]
}

/// The `--help` line of an input: its text, its range, its plain variable
/// and its default.
fn help_line(spec: &InputSpec) -> String {
    let mut line = spec.help.to_string();
    if let Kind::Number(r) = spec.kind {
        line.push_str(&format!(" [range: {} to {}]", r.min, r.max));
    }
    line.push_str(&format!(" [env: {}]", spec.plain_env));
    if let Some(d) = spec.default {
        line.push_str(&format!(" [default: {d}]"));
    }
    line
}

/// The clap definition, built from `INPUTS`. Every flag takes its value as
/// an OS string so that a value which is not UTF-8 reaches `gather`, which
/// names the flag, instead of clap refusing it without saying which.
pub(crate) fn command() -> Command {
    let mut cmd = Command::new("truss-push")
        .version(env!("CARGO_PKG_VERSION"))
        .about(env!("CARGO_PKG_DESCRIPTION"))
        // Repeating a flag is not an error: the last value wins.
        .args_override_self(true);
    for spec in INPUTS {
        let mut arg = Arg::new(spec.name)
            .long(spec.name)
            .value_name(spec.kind.value_name())
            .value_parser(clap::value_parser!(OsString))
            .action(ArgAction::Set)
            .help(help_line(spec));
        if let Some(heading) = spec.heading {
            arg = arg.help_heading(heading);
        }
        if spec.kind == Kind::Switch {
            arg = arg.num_args(0..=1).default_missing_value("true");
        }
        cmd = cmd.arg(arg);
    }
    cmd
}

/// The parsed command line: the flags that were given, by input name.
#[derive(Debug, Default)]
pub struct Cli {
    flags: BTreeMap<&'static str, OsString>,
}

impl Cli {
    /// Parses the process's arguments; `--help` and `--version` come back as
    /// errors whose `use_stderr()` is false.
    pub fn try_parse() -> Result<Self, clap::Error> {
        Ok(Self::from_matches(command().try_get_matches()?))
    }

    /// Parses `args` (the first is the program name).
    pub fn try_parse_from<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Ok(Self::from_matches(command().try_get_matches_from(args)?))
    }

    /// What can still be read from a command line clap refused (an unknown
    /// flag, a missing value): the flags it holds that parse, so that a
    /// parse error is reported where the user asked (`--json`,
    /// `--output-file`) and with the secrets it names masked.
    pub fn salvage() -> Self {
        Self::salvage_from(std::env::args_os())
    }

    /// [`Cli::salvage`] over `args` (the first is the program name).
    pub fn salvage_from<I, T>(args: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let mut args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        // Each refusal names the argument it stumbled on: drop it and read
        // the rest again, until clap accepts them or names nothing more.
        while args.len() > 1 {
            let e = match command().try_get_matches_from(&args) {
                Ok(m) => return Self::from_matches(m),
                Err(e) => e,
            };
            let bad = match e.get(clap::error::ContextKind::InvalidArg) {
                Some(clap::error::ContextValue::String(a)) => a.clone(),
                _ => break,
            };
            let flag = bad.split([' ', '=']).next().unwrap_or_default().to_string();
            let Some(at) = args.iter().skip(1).position(|a| {
                let a = a.to_string_lossy();
                a == bad.as_str() || a == flag.as_str() || a.starts_with(&format!("{flag}="))
            }) else {
                break;
            };
            args.remove(at + 1);
        }
        command()
            .ignore_errors(true)
            .try_get_matches_from(&args)
            .map(Self::from_matches)
            .unwrap_or_default()
    }

    /// Like `try_parse_from`, panicking on a parse error (tests).
    pub fn parse_from<I, T>(args: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Self::try_parse_from(args).unwrap_or_else(|e| panic!("{e}"))
    }

    fn from_matches(mut m: ArgMatches) -> Self {
        let flags = INPUTS
            .iter()
            .filter_map(|spec| Some((spec.name, m.remove_one::<OsString>(spec.name)?)))
            .collect();
        Self { flags }
    }

    /// Gathers every input from flags and the environment. `env` is the
    /// environment lookup (a parameter so tests need no `set_var`).
    pub(crate) fn gather(&self, env: EnvLookup<'_>) -> Inputs {
        let mut inputs = Inputs::default();
        for spec in INPUTS {
            let from_flag = self
                .flags
                .get(spec.name)
                .map(|v| (format!("--{}", spec.name), v.clone().into_string()));
            let from_env = env_names(spec).into_iter().map(|n| {
                let v = env(&n).map_err(|e| match e {
                    VarError::NotPresent => OsString::new(),
                    VarError::NotUnicode(raw) => raw,
                });
                (n, v)
            });
            for (source, value) in from_flag.into_iter().chain(from_env) {
                match value {
                    Ok(v) if v.trim().is_empty() => {}
                    Ok(v) => {
                        inputs.values.insert(spec.name, v);
                        break;
                    }
                    // Unset.
                    Err(raw) if raw.is_empty() => {}
                    // Never fall back to a later spelling: treating this one
                    // as unset could turn a mangled dry-run into a real
                    // deploy. The value itself is not shown: it may be the
                    // key.
                    Err(_) => {
                        inputs.problems.push(format!(
                            "{source} (input {}) is not valid UTF-8: inputs must be text; fix the value where it is set",
                            spec.name
                        ));
                        break;
                    }
                }
            }
        }
        inputs
    }
}

/// Raw input values by input name; absent means not given.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    values: BTreeMap<&'static str, String>,
    problems: Vec<String>,
}

impl Inputs {
    /// The raw value, untrimmed (JSON and paths keep their spaces).
    pub fn get(&self, name: &str) -> Option<&str> {
        debug_assert!(
            INPUTS.iter().any(|s| s.name == name),
            "unknown input {name}"
        );
        self.values.get(name).map(String::as_str)
    }

    /// The value trimmed of surrounding whitespace.
    pub fn trimmed(&self, name: &str) -> Option<&str> {
        self.get(name).map(str::trim)
    }

    /// The trimmed value, or the input's declared default.
    pub(crate) fn or_default(&self, name: &str) -> Option<&str> {
        self.trimmed(name).or(spec(name).default)
    }

    /// Inputs that could not be read at all (not UTF-8), one message each.
    pub(crate) fn problems(&self) -> &[String] {
        &self.problems
    }

    /// These inputs with `name` set to `value`: one target's inputs when a
    /// run deploys several.
    pub(crate) fn with(&self, name: &'static str, value: &str) -> Inputs {
        let mut inputs = self.clone();
        inputs.values.insert(spec(name).name, value.to_string());
        inputs
    }

    #[cfg(test)]
    pub fn from_pairs(pairs: &[(&'static str, &str)]) -> Self {
        Self {
            values: pairs.iter().map(|(k, v)| (*k, v.to_string())).collect(),
            problems: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Result<String, VarError> {
        let env: HashMap<&str, &str> = pairs.iter().copied().collect();
        move |k: &str| {
            env.get(k)
                .map(|v| v.to_string())
                .ok_or(VarError::NotPresent)
        }
    }

    fn unset(_: &str) -> Result<String, VarError> {
        Err(VarError::NotPresent)
    }

    #[test]
    fn cli_definition_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn every_input_has_a_flag_and_a_valid_default() {
        let cmd = command();
        for spec in INPUTS {
            assert!(
                cmd.get_arguments().any(|a| a.get_long() == Some(spec.name)),
                "no --{}",
                spec.name
            );
            if let (Kind::Number(r), Some(d)) = (spec.kind, spec.default) {
                let d: f64 = d.parse().unwrap();
                assert!(r.min <= d && d <= r.max, "default of {}", spec.name);
            }
        }
    }

    #[test]
    fn four_spellings_with_precedence_and_empty_as_unset() {
        let lookup = lookup(&[
            ("INPUT_MODEL-NAME", "hyphen"),
            ("INPUT_MODEL_NAME", "underscore"),
            ("MODEL_NAME", "plain"),
            ("INPUT_TEAM", ""),
            ("TEAM", "ml"),
            ("INPUT_DEPLOY_TIMEOUT_MINUTES", "60"),
            ("DEPLOY_TIMEOUT_MINUTES", "30"),
            ("ENVIRONMENT", "   "),
        ]);
        let cli = Cli::parse_from(["truss-push", "--labels", "{}"]);
        let got = cli.gather(&lookup);
        assert_eq!(got.get("model-name"), Some("hyphen"));
        assert_eq!(got.get("team"), Some("ml"));
        assert_eq!(got.get("deploy-timeout-minutes"), Some("60"));
        assert_eq!(got.get("environment"), None);
        assert_eq!(got.get("labels"), Some("{}"));
        let cli = Cli::parse_from(["truss-push", "--model-name", "flag"]);
        assert_eq!(cli.gather(&lookup).get("model-name"), Some("flag"));
        let cli = Cli::parse_from(["truss-push", "--model-name", ""]);
        assert_eq!(cli.gather(&lookup).get("model-name"), Some("hyphen"));
    }

    #[test]
    fn a_value_that_is_not_utf8_is_a_problem_not_a_fallback() {
        use std::os::unix::ffi::OsStringExt;
        let bad = || OsString::from_vec(b"tru\xffe".to_vec());
        let env = |k: &str| match k {
            "INPUT_DRY-RUN" => Err(VarError::NotUnicode(bad())),
            "TRUSS_PUSH_DRY_RUN" => Ok("false".to_string()),
            _ => Err(VarError::NotPresent),
        };
        let got = Cli::default().gather(&env);
        assert_eq!(got.get("dry-run"), None);
        assert_eq!(got.problems().len(), 1);
        assert!(got.problems()[0].starts_with("INPUT_DRY-RUN (input dry-run)"));
        let cli = Cli::parse_from([OsString::from("truss-push"), "--team".into(), bad()]);
        let got = cli.gather(&unset);
        assert!(
            got.problems()[0].starts_with("--team "),
            "{:?}",
            got.problems()
        );
    }

    #[test]
    fn a_refused_command_line_keeps_the_flags_that_parse() {
        for args in [
            &["truss-push", "--json", "--bogus", "--output-file", "o.json"][..],
            &[
                "truss-push",
                "--output-file=o.json",
                "--json",
                "true",
                "stray",
            ],
            &["truss-push", "--json", "--output-file=o.json", "--team"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
            let got = Cli::salvage_from(args).gather(&unset);
            assert_eq!(got.get("json"), Some("true"), "{args:?}");
            assert_eq!(got.get("output-file"), Some("o.json"), "{args:?}");
        }
    }

    #[test]
    fn a_repeated_flag_keeps_the_last_value() {
        let cli = Cli::parse_from(["truss-push", "--team", "a", "--team=b"]);
        assert_eq!(cli.gather(&unset).get("team"), Some("b"));
    }

    #[test]
    fn dry_run_flag_needs_no_value() {
        let cli = Cli::parse_from(["truss-push", "--dry-run"]);
        assert_eq!(cli.gather(&unset).get("dry-run"), Some("true"));
        let cli = Cli::parse_from(["truss-push", "--dry-run", "false"]);
        assert_eq!(cli.gather(&unset).get("dry-run"), Some("false"));
    }

    #[test]
    fn defaults_apply_only_when_not_given() {
        let inputs = Inputs::from_pairs(&[("predict-timeout", " 20 ")]);
        assert_eq!(inputs.or_default("predict-timeout"), Some("20"));
        assert_eq!(inputs.or_default("deploy-timeout-minutes"), Some("45"));
        assert_eq!(inputs.or_default("team"), None);
    }

    #[test]
    fn help_shows_env_range_and_default() {
        let help = command().render_long_help().to_string();
        for want in [
            "Deploy budget in minutes [range: 10 to 1440] [env: DEPLOY_TIMEOUT_MINUTES] [default: 45]",
            "--dry-run [<BOOL>]",
            "Baseten API key; never printed [env: BASETEN_API_KEY]",
            "Hosts:",
        ] {
            assert!(help.contains(want), "{want:?} in\n{help}");
        }
    }
}
