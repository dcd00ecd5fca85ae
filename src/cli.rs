//! The command line and its environment fallbacks: stage one of the inputs.
//!
//! Every input can be given four ways (SPEC "Inputs"): as a flag, as the
//! GitHub Docker-action variable `INPUT_NAME-WITH-HYPHENS`, as
//! `INPUT_NAME_WITH_UNDERSCORES`, or as a plain variable. Precedence is in
//! that order and an empty value means "not given". This module only gathers
//! raw strings; `crate::config` validates them.

use std::collections::BTreeMap;

use clap::Parser;

/// One input: its name (the flag and the action input id) and its plain
/// environment variable.
#[derive(Clone, Copy, Debug)]
pub struct InputSpec {
    pub name: &'static str,
    pub plain_env: &'static str,
}

const fn input(name: &'static str, plain_env: &'static str) -> InputSpec {
    InputSpec { name, plain_env }
}

/// Every input, anchor action's first (same names, same plain variables),
/// then the ones this project adds.
pub const INPUTS: &[InputSpec] = &[
    input("truss-directory", "TRUSS_DIRECTORY"),
    input("baseten-api-key", "BASETEN_API_KEY"),
    input("model-name", "MODEL_NAME"),
    input("environment", "ENVIRONMENT"),
    input("include-git-info", "INCLUDE_GIT_INFO"),
    input("labels", "LABELS"),
    input("deployment-name", "DEPLOYMENT_NAME"),
    input("cleanup", "CLEANUP"),
    input("predict-payload", "PREDICT_PAYLOAD"),
    input("deploy-timeout-minutes", "DEPLOY_TIMEOUT_MINUTES"),
    input("predict-timeout", "PREDICT_TIMEOUT"),
    input("regional-environment", "REGIONAL_ENVIRONMENT"),
    input("team", "TEAM"),
    // Extensions.
    input("app-url", "TRUSS_PUSH_APP_URL"),
    input("api-url", "TRUSS_PUSH_API_URL"),
    input("inference-url", "TRUSS_PUSH_INFERENCE_URL"),
    input("s3-endpoint", "TRUSS_PUSH_S3_ENDPOINT"),
    input("poll-interval-seconds", "TRUSS_PUSH_POLL_INTERVAL_SECONDS"),
    input("wait-timeout-seconds", "TRUSS_PUSH_WAIT_TIMEOUT_SECONDS"),
    input("stream-logs", "TRUSS_PUSH_STREAM_LOGS"),
    input("output-file", "TRUSS_PUSH_OUTPUT_FILE"),
    input("output-format", "TRUSS_PUSH_OUTPUT_FORMAT"),
    input("dry-run", "TRUSS_PUSH_DRY_RUN"),
];

/// The environment names an input is read from, in precedence order.
pub fn env_names(spec: &InputSpec) -> [String; 3] {
    let upper = spec.name.to_ascii_uppercase();
    [
        format!("INPUT_{upper}"),
        format!("INPUT_{}", upper.replace('-', "_")),
        spec.plain_env.to_string(),
    ]
}

/// Deploy a Truss model or chain to Baseten, wait until it is ready,
/// smoke-test it, and report the truth as CI outputs.
///
/// Every option can also come from the environment: `INPUT_<NAME>` (hyphens
/// kept or turned into underscores, as GitHub Actions passes inputs) or the
/// plain variable shown. Booleans take true/false, 1/0, yes/no.
#[derive(Debug, Default, Parser)]
#[command(name = "truss-push", version, about, long_about = None, args_override_self = true)]
pub struct Cli {
    /// Model directory (with config.yaml) or chain .py file [env: TRUSS_DIRECTORY]
    #[arg(long, value_name = "PATH")]
    pub truss_directory: Option<String>,
    /// Baseten API key; never printed [env: BASETEN_API_KEY]
    #[arg(long, value_name = "KEY", hide_env_values = true)]
    pub baseten_api_key: Option<String>,
    /// Override the model (or chain) name [env: MODEL_NAME]
    #[arg(long, value_name = "NAME")]
    pub model_name: Option<String>,
    /// Deploy into this environment, e.g. production [env: ENVIRONMENT]
    #[arg(long, value_name = "NAME")]
    pub environment: Option<String>,
    /// Attach commit/tag info to the deployment (default true) [env: INCLUDE_GIT_INFO]
    #[arg(long, value_name = "BOOL")]
    pub include_git_info: Option<String>,
    /// JSON object of labels [env: LABELS]
    #[arg(long, value_name = "JSON")]
    pub labels: Option<String>,
    /// Deployment name [0-9A-Za-z_.-]; default PR-<n>_<sha7> on PRs, else <sha7> [env: DEPLOYMENT_NAME]
    #[arg(long, value_name = "NAME")]
    pub deployment_name: Option<String>,
    /// Deactivate after validation (default: true without environment, false with one) [env: CLEANUP]
    #[arg(long, value_name = "BOOL")]
    pub cleanup: Option<String>,
    /// JSON predict body (default: config model_metadata.example_model_input) [env: PREDICT_PAYLOAD]
    #[arg(long, value_name = "JSON")]
    pub predict_payload: Option<String>,
    /// Deploy budget in minutes, 10..=1440 (default 45) [env: DEPLOY_TIMEOUT_MINUTES]
    #[arg(long, value_name = "MINUTES")]
    pub deploy_timeout_minutes: Option<String>,
    /// Predict deadline in seconds (default 300) [env: PREDICT_TIMEOUT]
    #[arg(long, value_name = "SECONDS")]
    pub predict_timeout: Option<String>,
    /// Predict through the regional environment host (needs environment) [env: REGIONAL_ENVIRONMENT]
    #[arg(long, value_name = "BOOL")]
    pub regional_environment: Option<String>,
    /// Team name, when the key sees several teams [env: TEAM]
    #[arg(long, value_name = "NAME")]
    pub team: Option<String>,

    /// Baseten app URL; GraphQL is {app-url}/graphql/ [env: TRUSS_PUSH_APP_URL] [default: https://app.baseten.co]
    #[arg(long, value_name = "URL", help_heading = "Hosts")]
    pub app_url: Option<String>,
    /// REST API base URL [env: TRUSS_PUSH_API_URL] [default: https://api.baseten.co]
    #[arg(long, value_name = "URL", help_heading = "Hosts")]
    pub api_url: Option<String>,
    /// Inference URL template with {prefix} (model|chain) and {id} [env: TRUSS_PUSH_INFERENCE_URL] [default: https://{prefix}-{id}.api.baseten.co]
    #[arg(long, value_name = "TEMPLATE", help_heading = "Hosts")]
    pub inference_url: Option<String>,
    /// S3 endpoint override (path-style), e.g. for a proxy or a test double [env: TRUSS_PUSH_S3_ENDPOINT]
    #[arg(long, value_name = "URL", help_heading = "Hosts")]
    pub s3_endpoint: Option<String>,

    /// Seconds between status polls (default 2) [env: TRUSS_PUSH_POLL_INTERVAL_SECONDS]
    #[arg(long, value_name = "SECONDS", help_heading = "Behaviour")]
    pub poll_interval_seconds: Option<String>,
    /// Client-side wait budget in seconds (default: deploy-timeout-minutes) [env: TRUSS_PUSH_WAIT_TIMEOUT_SECONDS]
    #[arg(long, value_name = "SECONDS", help_heading = "Behaviour")]
    pub wait_timeout_seconds: Option<String>,
    /// Stream deployment logs while waiting (default true) [env: TRUSS_PUSH_STREAM_LOGS]
    #[arg(long, value_name = "BOOL", help_heading = "Behaviour")]
    pub stream_logs: Option<String>,
    /// Validate and package only; nothing is uploaded or created [env: TRUSS_PUSH_DRY_RUN]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", help_heading = "Behaviour")]
    pub dry_run: Option<String>,

    /// Also write the outputs to this file (for CI systems other than GitHub) [env: TRUSS_PUSH_OUTPUT_FILE]
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub output_file: Option<String>,
    /// Format of --output-file: dotenv or json (default: json for *.json, else dotenv) [env: TRUSS_PUSH_OUTPUT_FORMAT]
    #[arg(long, value_name = "FORMAT", help_heading = "Outputs")]
    pub output_format: Option<String>,
}

impl Cli {
    fn flag(&self, name: &str) -> Option<&String> {
        match name {
            "truss-directory" => self.truss_directory.as_ref(),
            "baseten-api-key" => self.baseten_api_key.as_ref(),
            "model-name" => self.model_name.as_ref(),
            "environment" => self.environment.as_ref(),
            "include-git-info" => self.include_git_info.as_ref(),
            "labels" => self.labels.as_ref(),
            "deployment-name" => self.deployment_name.as_ref(),
            "cleanup" => self.cleanup.as_ref(),
            "predict-payload" => self.predict_payload.as_ref(),
            "deploy-timeout-minutes" => self.deploy_timeout_minutes.as_ref(),
            "predict-timeout" => self.predict_timeout.as_ref(),
            "regional-environment" => self.regional_environment.as_ref(),
            "team" => self.team.as_ref(),
            "app-url" => self.app_url.as_ref(),
            "api-url" => self.api_url.as_ref(),
            "inference-url" => self.inference_url.as_ref(),
            "s3-endpoint" => self.s3_endpoint.as_ref(),
            "poll-interval-seconds" => self.poll_interval_seconds.as_ref(),
            "wait-timeout-seconds" => self.wait_timeout_seconds.as_ref(),
            "stream-logs" => self.stream_logs.as_ref(),
            "dry-run" => self.dry_run.as_ref(),
            "output-file" => self.output_file.as_ref(),
            "output-format" => self.output_format.as_ref(),
            _ => None,
        }
    }

    /// Gathers every input from flags and the environment. `env` is the
    /// environment lookup (a parameter so tests need no `set_var`).
    pub fn gather(&self, env: &dyn Fn(&str) -> Option<String>) -> Inputs {
        let mut values = BTreeMap::new();
        for spec in INPUTS {
            let from_flag = self.flag(spec.name).cloned();
            let value = std::iter::once(from_flag)
                .chain(env_names(spec).iter().map(|n| env(n)))
                .flatten()
                .find(|v| !v.trim().is_empty());
            if let Some(v) = value {
                values.insert(spec.name, v);
            }
        }
        Inputs { values }
    }
}

/// Raw input values by input name; absent means not given.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    values: BTreeMap<&'static str, String>,
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

    #[cfg(test)]
    pub fn from_pairs(pairs: &[(&'static str, &str)]) -> Self {
        Self {
            values: pairs.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::collections::HashMap;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_input_has_a_flag() {
        let cmd = Cli::command();
        for spec in INPUTS {
            assert!(
                cmd.get_arguments().any(|a| a.get_long() == Some(spec.name)),
                "no --{}",
                spec.name
            );
        }
    }

    #[test]
    fn four_spellings_with_precedence_and_empty_as_unset() {
        let env: HashMap<&str, &str> = [
            ("INPUT_MODEL-NAME", "hyphen"),
            ("INPUT_MODEL_NAME", "underscore"),
            ("MODEL_NAME", "plain"),
            ("INPUT_TEAM", ""),
            ("INPUT_TEAM", ""),
            ("TEAM", "ml"),
            ("INPUT_DEPLOY_TIMEOUT_MINUTES", "60"),
            ("DEPLOY_TIMEOUT_MINUTES", "30"),
            ("ENVIRONMENT", "   "),
        ]
        .into_iter()
        .collect();
        let lookup = |k: &str| env.get(k).map(|v| v.to_string());
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
    fn dry_run_flag_needs_no_value() {
        let cli = Cli::parse_from(["truss-push", "--dry-run"]);
        assert_eq!(cli.gather(&|_| None).get("dry-run"), Some("true"));
    }
}
