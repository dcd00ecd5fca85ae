//! Every deploy input parsed into [`Settings`]: pure, in the order a user
//! reads the messages (what is missing first, then each input's own rule,
//! then the rules between inputs). What needs the target (its config.yaml,
//! the default deployment name from git) is `config`'s resolution.

use std::time::Duration;

use reqwest::Url;
use serde_json::Value;

use super::{
    check_environment, check_name, evidence, is_valid_deployment_name, json_kind, key_url, number,
    parse_bool,
};
use crate::baseten::{Endpoints, OrderedObject};
use crate::ci_context::CiContext;
use crate::cli::{Input, Inputs};

/// Whether cleanup runs, and whether the user said so or it is the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cleanup {
    pub enabled: bool,
    pub explicit: bool,
}

/// When traffic moves to the new deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Promotion {
    /// The platform promotes it into the environment as soon as it is ready
    /// (the create request names the environment).
    AtCreate,
    /// Created outside any environment, smoke-tested on its own URL, then
    /// promoted by this run, tested again behind the environment, and
    /// rolled back when either the promotion or that test fails.
    AfterPredict,
}

/// The deploy inputs, each parsed and checked on its own and against the
/// others. One `Settings` serves every target of a run.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// `truss-directory` as given (untrimmed): one path, or entries and
    /// globs.
    pub truss_directory: String,
    /// `changed-since` as given.
    pub changed_since: Option<String>,
    /// `model-name` as given (else config.yaml's, or the chain's).
    pub given_model_name: Option<String>,
    /// `deployment-name` as given (else made from the commit).
    pub given_deployment_name: Option<String>,
    /// `predict-payload` as given (else config.yaml's example input).
    pub given_payload: Option<Value>,
    pub evidence: evidence::Given,
    pub environment: Option<String>,
    pub promotion: Promotion,
    /// Keep the environment's previous deployment scaled up.
    pub preserve_previous_deployment: bool,
    pub preserve_env_instance_type: bool,
    /// Things the user should know about their inputs (deprecated inputs
    /// accepted as no-ops, an input with no effect here), said at the start.
    pub notices: Vec<String>,
    pub include_git_info: bool,
    pub labels: Option<OrderedObject>,
    /// The `truss_push_pull_request` label's value every created model
    /// deployment carries, when the run belongs to a pull request
    /// (`super::pull_request`).
    pub pull_request_label: Option<String>,
    pub cleanup: Cleanup,
    pub deploy_timeout_minutes: u32,
    pub wait_timeout: Duration,
    /// The input that set `wait_timeout`: the one a timeout tells to raise.
    pub wait_timeout_input: &'static str,
    pub predict_timeout: Duration,
    pub regional_environment: bool,
    pub team: Option<String>,
    pub endpoints: Endpoints,
    pub poll_interval: Duration,
    /// S3 parts in flight at once.
    pub upload_concurrency: usize,
    pub stream_logs: bool,
    pub dry_run: bool,
    /// Print the config payload and stop before any request.
    pub print_config: bool,
    /// Several targets: how many run at once, and whether one failure
    /// stops the others.
    pub max_parallel: usize,
    pub fail_fast: bool,
    /// `skip-unchanged`: leave out a model deploy whose source already
    /// serves the environment (always with an environment).
    pub skip_unchanged: bool,
    /// `preflight`: a model deploy asks the platform to validate its
    /// create's payload before any upload (`flow::preflight`).
    pub preflight: bool,
    /// Deployments, the pull-request comment and the commit status.
    pub github: super::github::Settings,
    /// `TRUSS_PUSH_PYTHON`: the interpreter that runs the chain code
    /// generation helper, when set (read by `run`, the environment's one
    /// reader: [`Settings::with_chain_python`]).
    pub chain_python: Option<String>,
}

impl Settings {
    /// Parses every deploy input. `ci` tells the GitHub settings where
    /// reports go.
    pub(crate) fn parse(inputs: &Inputs, ci: &CiContext) -> Result<Settings, String> {
        Self::parse_with(inputs, ci, true)
    }

    /// The same settings for a command that needs no targets (`teardown`:
    /// its previews may be of a model the pull request renamed, and an
    /// `on_stop` job may have no checkout): without `truss-directory`,
    /// `truss_directory` is empty.
    pub(crate) fn parse_targets_optional(
        inputs: &Inputs,
        ci: &CiContext,
    ) -> Result<Settings, String> {
        Self::parse_with(inputs, ci, false)
    }

    fn parse_with(inputs: &Inputs, ci: &CiContext, targets: bool) -> Result<Settings, String> {
        if let Some(problem) = inputs.problems().first() {
            return Err(problem.clone());
        }
        let truss_directory = match inputs.trimmed(Input::TrussDirectory) {
            Some(t) => t,
            None if !targets => "",
            None => return Err(
                "truss-directory is required: set it to your model directory (with config.yaml) or your chain's .py file".into(),
            ),
        };

        let bool_input = |input: Input| -> Result<bool, String> {
            parse_bool(input.name(), inputs.or_default(input).unwrap_or("false"))
        };
        let mut environment = inputs.trimmed(Input::Environment).map(str::to_string);
        if let Some(e) = &environment {
            check_environment(e)?;
        }
        if bool_input(Input::Promote)? {
            if let Some(e) = &environment {
                return Err(format!(
                    "promote and environment were both given (environment {e:?}): promote is shorthand for environment production; keep one of them"
                ));
            }
            environment = Some("production".into());
        }
        let team = inputs.trimmed(Input::Team).map(str::to_string);
        if let Some(t) = &team {
            check_name("team", t)?;
        }
        let include_git_info = bool_input(Input::IncludeGitInfo)?;
        let regional_environment = bool_input(Input::RegionalEnvironment)?;
        let stream_logs = bool_input(Input::StreamLogs)?;
        let dry_run = bool_input(Input::DryRun)?;
        let print_config = bool_input(Input::PrintConfig)?;
        let promotion = match inputs.or_default(Input::Promotion).unwrap_or("at-create") {
            v if v.eq_ignore_ascii_case("at-create") => Promotion::AtCreate,
            v if v.eq_ignore_ascii_case("after-predict") => Promotion::AfterPredict,
            v => {
                return Err(format!(
                    "promotion must be at-create or after-predict, got {v:?}"
                ));
            }
        };
        let preserve_previous_deployment = bool_input(Input::PreservePreviousProductionDeployment)?;
        let preserve_env_instance_type = parse_bool(
            "preserve-env-instance-type",
            inputs
                .or_default(Input::PreserveEnvInstanceType)
                .unwrap_or("true"),
        )?;
        let mut notices = Vec::new();
        for input in [Input::Publish, Input::Trusted] {
            let name = input.name();
            if let Some(v) = inputs.trimmed(input) {
                parse_bool(name, v)?;
                notices.push(format!(
                    "{name} is accepted for truss push compatibility and has no effect: truss-push always creates a published deployment"
                ));
            }
        }
        if environment.is_none() {
            if promotion == Promotion::AfterPredict {
                return Err(
                    "promotion is after-predict but no environment was given: the gate promotes into an environment; set environment (or promote: true for production)".into(),
                );
            }
            if preserve_previous_deployment {
                return Err(
                    "preserve-previous-production-deployment needs an environment to promote into: set environment (or promote: true), or drop it".into(),
                );
            }
            if inputs.trimmed(Input::PreserveEnvInstanceType).is_some() {
                notices
                    .push("preserve-env-instance-type has no effect without an environment".into());
            }
        }
        // The several-target inputs are checked for one target too, so a
        // typo in them is never silently ignored.
        let fail_fast = bool_input(Input::FailFast)?;
        let max_parallel = number(inputs, Input::MaxParallel)? as usize;
        // A whole number from 1 to 32 (the input's range).
        let upload_concurrency = number(inputs, Input::UploadConcurrency)? as usize;
        let cleanup = match inputs.trimmed(Input::Cleanup) {
            Some(v) => Cleanup {
                enabled: parse_bool("cleanup", v)?,
                explicit: true,
            },
            // A gated promotion creates its deployment outside the
            // environment: what ends up serving is never deactivated (the
            // gate checks), so by default only what failed is.
            None => Cleanup {
                enabled: environment.is_none() || promotion == Promotion::AfterPredict,
                explicit: false,
            },
        };
        if regional_environment && environment.is_none() {
            return Err(
                "regional-environment is true but no environment was given: the regional host serves an environment; set environment (e.g. production) or drop regional-environment".into(),
            );
        }
        let given_model_name = inputs.trimmed(Input::ModelName).map(str::to_string);
        if let Some(n) = &given_model_name {
            check_name("model-name", n)?;
        }
        let labels = labels(inputs.trimmed(Input::Labels))?;
        // The pull request a create's label names: the `pull-request`
        // input, else the event's (parsed once, in `command::Lifecycle`).
        let pull_request_label = super::command::Lifecycle::parse(inputs, ci)?
            .pull_request
            .map(|n| super::pull_request::label_value(n, ci))
            .transpose()?;
        let skip_unchanged = bool_input(Input::SkipUnchanged)?;
        let preflight = bool_input(Input::Preflight)?;
        if skip_unchanged && environment.is_none() {
            return Err(
                "skip-unchanged is true but no environment was given: it compares this truss with the deployment that serves an environment; set environment (e.g. production) or drop skip-unchanged".into(),
            );
        }
        let given_payload = inputs
            .trimmed(Input::PredictPayload)
            .map(|raw| {
                let v = serde_json::from_str::<Value>(raw).map_err(|e| {
                    format!("predict-payload is not valid JSON ({e}): set it to a JSON object like '{{\"prompt\":\"hi\"}}'")
                })?;
                match inexact_integer(raw) {
                    Some(n) => Err(format!(
                        "predict-payload holds the integer {n}, which does not fit in 64 bits and would reach the model rounded: write it as a string (\"{n}\")"
                    )),
                    None => Ok(v),
                }
            })
            .transpose()?;
        let evidence = evidence::parse(inputs)?;
        // The regression compares the new deployment with the one serving
        // the environment before it is replaced: only a gated promotion
        // has both answering at once. Anywhere else the check could never
        // measure what it judges, so it is refused rather than skipped.
        if inputs.trimmed(Input::MaxLatencyRegression).is_some()
            && (environment.is_none() || promotion != Promotion::AfterPredict)
        {
            return Err(
                "max-latency-regression compares the new deployment with the one serving the environment, side by side before the promotion, which only a gated promotion measures: set environment (or promote: true) and promotion: after-predict, or drop max-latency-regression".into(),
            );
        }

        // Each number is within its declared range, so these conversions
        // cannot overflow.
        let deploy_timeout_minutes = number(inputs, Input::DeployTimeoutMinutes)? as u32;
        let (wait_timeout, wait_timeout_input) = match inputs.trimmed(Input::WaitTimeoutSeconds) {
            Some(_) => (
                Duration::from_secs_f64(number(inputs, Input::WaitTimeoutSeconds)?),
                Input::WaitTimeoutSeconds.name(),
            ),
            None => (
                Duration::from_secs(u64::from(deploy_timeout_minutes) * 60),
                Input::DeployTimeoutMinutes.name(),
            ),
        };
        let predict_timeout = Duration::from_secs(number(inputs, Input::PredictTimeout)? as u64);
        let poll_interval = Duration::from_secs_f64(number(inputs, Input::PollIntervalSeconds)?);
        let given_deployment_name = inputs.trimmed(Input::DeploymentName).map(str::to_string);
        if let Some(n) = &given_deployment_name
            && !is_valid_deployment_name(n)
        {
            return Err(format!(
                "deployment-name {n:?} may contain only letters, digits, '_', '.' and '-': pick a name like pr-42_abc1234"
            ));
        }
        let github = super::github::Settings::from_inputs(inputs, ci)?;
        let endpoints = endpoints(inputs)?;

        Ok(Settings {
            truss_directory: inputs
                .get(Input::TrussDirectory)
                .unwrap_or(truss_directory)
                .to_string(),
            changed_since: inputs.trimmed(Input::ChangedSince).map(str::to_string),
            given_model_name,
            given_deployment_name,
            given_payload,
            evidence,
            environment,
            promotion,
            preserve_previous_deployment,
            preserve_env_instance_type,
            notices,
            include_git_info,
            labels,
            pull_request_label,
            cleanup,
            deploy_timeout_minutes,
            wait_timeout,
            wait_timeout_input,
            predict_timeout,
            regional_environment,
            team,
            endpoints,
            poll_interval,
            upload_concurrency,
            stream_logs,
            dry_run,
            print_config,
            max_parallel,
            fail_fast,
            skip_unchanged,
            preflight,
            github,
            chain_python: None,
        })
    }

    /// The same settings with the chain helper's interpreter as the
    /// environment gave it (`TRUSS_PUSH_PYTHON`).
    pub(crate) fn with_chain_python(self, chain_python: Option<String>) -> Settings {
        Settings {
            chain_python,
            ..self
        }
    }

    /// The environment the create request names: none when this run
    /// promotes the deployment itself after its smoke test.
    pub(crate) fn create_environment(&self) -> Option<&str> {
        match self.promotion {
            Promotion::AtCreate => self.environment.as_deref(),
            Promotion::AfterPredict => None,
        }
    }

    /// The environment a promotion gated by this run goes into.
    pub(crate) fn gated_environment(&self) -> Option<&str> {
        match self.promotion {
            Promotion::AtCreate => None,
            Promotion::AfterPredict => self.environment.as_deref(),
        }
    }
}

/// `labels`: a JSON object, kept in the user's key order (the order the
/// platform receives them in).
fn labels(raw: Option<&str>) -> Result<Option<OrderedObject>, String> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(map)) if map.contains_key(crate::label::LABEL_KEY) => Err(format!(
            "labels may not set {:?}: truss-push writes that label itself (the truss's content hash, for skip-unchanged); remove it from labels",
            crate::label::LABEL_KEY
        )),
        Ok(Value::Object(map)) if map.contains_key(crate::label::RUN_LABEL_KEY) => Err(format!(
            "labels may not set {:?}: truss-push writes that label itself (a value unique to the run, by which a run finds the deployment it created); remove it from labels",
            crate::label::RUN_LABEL_KEY
        )),
        Ok(Value::Object(map)) if map.contains_key(crate::label::PULL_REQUEST_LABEL_KEY) => {
            Err(format!(
                "labels may not set {:?}: truss-push writes that label itself (the pull request a preview belongs to, by which teardown finds it); remove it from labels",
                crate::label::PULL_REQUEST_LABEL_KEY
            ))
        }
        Ok(Value::Object(_)) => match inexact_integer(raw) {
            Some(n) => Err(format!(
                "labels holds the integer {n}, which does not fit in 64 bits and would reach the platform rounded: write it as a string (\"{n}\")"
            )),
            None => serde_json::from_str::<OrderedObject>(raw)
                .map(Some)
                .map_err(|e| format!("labels is not valid JSON ({e})")),
        },
        Ok(other) => Err(format!(
            "labels must be a JSON object, got {}: set labels to '{{\"team\":\"ml\"}}'",
            json_kind(&other)
        )),
        Err(e) => Err(format!(
            "labels is not valid JSON ({e}): set labels to a JSON object like '{{\"team\":\"ml\"}}'"
        )),
    }
}

/// The first integer literal of a JSON text (outside its strings) that
/// `serde_json` would read as a rounded float: one that fits neither `i64`
/// nor `u64`. Python's `json`, which the official client reads labels and
/// predict bodies with, keeps such an integer exact.
fn inexact_integer(raw: &str) -> Option<&str> {
    let bytes = raw.as_bytes();
    let (mut i, mut in_string) = (0, false);
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if b == b'-' || b.is_ascii_digit() {
            let start = i;
            while i < bytes.len()
                && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
            {
                i += 1;
            }
            let token = &raw[start..i];
            let integer = !token.contains(['.', 'e', 'E']);
            if integer && token.parse::<i64>().is_err() && token.parse::<u64>().is_err() {
                return Some(token);
            }
            continue;
        }
        i += 1;
    }
    None
}

/// The platform's URLs: each one that carries the key is HTTPS (or
/// loopback), the inference template names the deployment.
fn endpoints(inputs: &Inputs) -> Result<Endpoints, String> {
    let app = key_url(
        "app-url",
        inputs.or_default(Input::AppUrl).unwrap_or_default(),
    )?;
    let api = key_url(
        "api-url",
        inputs.or_default(Input::ApiUrl).unwrap_or_default(),
    )?;
    let inference = inputs
        .or_default(Input::InferenceUrl)
        .unwrap_or_default()
        .to_string();
    if !inference.contains("{id}") {
        return Err(format!(
            "inference-url must contain {{id}} (and usually {{prefix}}), got {inference:?}"
        ));
    }
    key_url(
        "inference-url",
        &inference.replace("{prefix}", "model").replace("{id}", "x"),
    )?;
    let s3 = match inputs.trimmed(Input::S3Endpoint) {
        None => None,
        Some(v) => Some(Url::parse(v).map_err(|e| {
            format!(
                "s3-endpoint must be a URL like https://s3.us-west-2.amazonaws.com, got {v:?}: {e}"
            )
        })?),
    };
    Ok(Endpoints {
        app,
        api,
        inference,
        s3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_integers_json_would_round_are_inexact() {
        let exact = [
            r#"{"a": 9223372036854775807, "b": -9223372036854775808}"#,
            r#"{"a": 18446744073709551615, "b": 1.5e300, "c": -0.0}"#,
            r#"{"a": "123456789012345678901234567890", "b\"9999999999999999999999": 1}"#,
            r#"{"a": "\\", "b": 12345678901234567890.0}"#,
        ];
        for raw in exact {
            assert_eq!(inexact_integer(raw), None, "{raw}");
        }
        assert_eq!(
            inexact_integer(r#"{"a": "\"", "b": [1, -9223372036854775809]}"#),
            Some("-9223372036854775809")
        );
        assert_eq!(
            inexact_integer(r#"{"a": 18446744073709551616}"#),
            Some("18446744073709551616")
        );
        let big = labels(Some(r#"{"a": 123456789012345678901234567890}"#));
        assert!(big.unwrap_err().contains("write it as a string"));
        assert!(labels(Some(r#"{"a": 12}"#)).unwrap().is_some());
    }
}
