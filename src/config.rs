//! Stage two of the inputs: a validated `Config`, built before any network
//! call. Every message says what was wrong, what was expected and how to fix
//! it: a bad input gets one clear message and changes nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Url;
use serde_json::Value;

use crate::baseten::{Endpoints, OrderedObject};
use crate::cli::{self, Inputs};
use crate::files::{ReadError, read_regular_file};
use crate::git;
use crate::secret::Secret;
use crate::settings::{
    CONFIG_YAML_MAX_MIB, check_environment, check_name, is_falsy, is_valid_deployment_name,
    json_kind, key_url, number, parse_bool,
};

/// `raw_config` is sent only up to this size (as truss does).
pub(crate) const RAW_CONFIG_MAX_BYTES: usize = 100 * 1024;

/// What is being deployed.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// A model directory with its parsed `config.yaml`.
    Model {
        dir: PathBuf,
        config: Value,
        raw_config: Vec<u8>,
    },
    /// A chain: the `.py` file holding the entrypoint.
    Chain { file: PathBuf },
}

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

/// Everything the run needs, validated.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub target: Target,
    pub api_key: Secret,
    pub model_name: String,
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
    pub deployment_name: String,
    pub cleanup: Cleanup,
    /// `None`: no payload configured, predict is skipped.
    pub predict_payload: Option<Value>,
    /// Cases, objectives and the baseline; `None`: one smoke request.
    pub evidence: Option<crate::settings::evidence::Settings>,
    pub deploy_timeout_minutes: u32,
    pub wait_timeout: Duration,
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
    pub ci_revision: Option<git::Revision>,
    /// Deployments, the pull-request comment and the commit status.
    pub github: crate::github::Settings,
}

/// Loads and checks the model directory.
pub(crate) fn load_model(dir: &Path) -> Result<Target, String> {
    if !dir.is_dir() {
        return Err(format!(
            "truss-directory {} does not exist or is not a directory: point it at the folder holding config.yaml (or at a chain's .py file)",
            dir.display()
        ));
    }
    let path = dir.join("config.yaml");
    let raw = read_regular_file(&path, CONFIG_YAML_MAX_MIB).map_err(|e| match e {
        ReadError::Io(e) => {
            let hint = if dir.join("config.yml").exists() {
                " (found config.yml: Truss reads config.yaml; rename it)"
            } else {
                ""
            };
            format!(
                "cannot read {}: {e}{hint}: a Truss model directory must contain config.yaml",
                path.display()
            )
        }
        other => format!(
            "cannot read {}: {other}: config.yaml must be a plain YAML file of at most {CONFIG_YAML_MAX_MIB} MiB",
            path.display()
        ),
    })?;
    // Parsed, validated, defaulted and serialized as truss 0.18.36's
    // TrussConfig does, so the platform receives what the official client
    // sends — and a config truss refuses is refused here, before any request.
    let config = crate::truss_config::normalize(&raw)?;
    Ok(Target::Model {
        dir: dir.to_path_buf(),
        config,
        raw_config: raw,
    })
}

impl Config {
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

    /// Validates every input. `env` reads CI variables for the default
    /// deployment name; `git` is consulted only when no CI variable names
    /// the commit.
    pub(crate) fn from_inputs(inputs: &Inputs, env: cli::EnvLookup<'_>) -> Result<Config, String> {
        if let Some(problem) = inputs.problems().first() {
            return Err(problem.clone());
        }
        let dir = inputs.trimmed("truss-directory").ok_or(
            "truss-directory is required: set it to your model directory (with config.yaml) or your chain's .py file",
        )?;
        let api_key = inputs.trimmed("baseten-api-key").ok_or(
            "baseten-api-key is required: pass your Baseten API key from a secret, e.g. baseten-api-key: ${{ secrets.BASETEN_API_KEY }}",
        )?;
        if api_key.chars().any(char::is_whitespace) {
            return Err(
                "baseten-api-key contains whitespace inside it: check the secret's value".into(),
            );
        }
        let target = if dir.ends_with(".py") {
            let file = PathBuf::from(dir);
            if !file.is_file() {
                return Err(format!(
                    "truss-directory {dir} ends in .py, so it names a chain file, but there is no such file"
                ));
            }
            Target::Chain { file }
        } else {
            load_model(Path::new(dir))?
        };

        let bool_input = |name: &str| -> Result<bool, String> {
            parse_bool(name, inputs.or_default(name).unwrap_or("false"))
        };
        let mut environment = inputs.trimmed("environment").map(str::to_string);
        if let Some(e) = &environment {
            check_environment(e)?;
        }
        if bool_input("promote")? {
            if let Some(e) = &environment {
                return Err(format!(
                    "promote and environment were both given (environment {e:?}): promote is shorthand for environment production; keep one of them"
                ));
            }
            environment = Some("production".into());
        }
        let team = inputs.trimmed("team").map(str::to_string);
        if let Some(t) = &team {
            check_name("team", t)?;
        }
        let include_git_info = bool_input("include-git-info")?;
        let regional_environment = bool_input("regional-environment")?;
        let stream_logs = bool_input("stream-logs")?;
        let dry_run = bool_input("dry-run")?;
        let print_config = bool_input("print-config")?;
        let promotion = match inputs.or_default("promotion").unwrap_or("at-create") {
            v if v.eq_ignore_ascii_case("at-create") => Promotion::AtCreate,
            v if v.eq_ignore_ascii_case("after-predict") => Promotion::AfterPredict,
            v => {
                return Err(format!(
                    "promotion must be at-create or after-predict, got {v:?}"
                ));
            }
        };
        let preserve_previous_deployment = bool_input("preserve-previous-production-deployment")?;
        let preserve_env_instance_type = parse_bool(
            "preserve-env-instance-type",
            inputs
                .or_default("preserve-env-instance-type")
                .unwrap_or("true"),
        )?;
        let mut notices = Vec::new();
        for name in ["publish", "trusted"] {
            if let Some(v) = inputs.trimmed(name) {
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
            if inputs.trimmed("preserve-env-instance-type").is_some() {
                notices
                    .push("preserve-env-instance-type has no effect without an environment".into());
            }
        }
        if preserve_previous_deployment
            && promotion == Promotion::AtCreate
            && matches!(target, Target::Chain { .. })
        {
            return Err(
                "preserve-previous-production-deployment is not part of a chain's create request: use it with promotion: after-predict, where the promote request carries it".into(),
            );
        }
        // The several-target inputs are checked for one target too, so a
        // typo in them is never silently ignored.
        bool_input("fail-fast")?;
        number(inputs, "max-parallel")?;
        // A whole number from 1 to 32 (the input's range).
        let upload_concurrency = number(inputs, "upload-concurrency")? as usize;
        let cleanup = match inputs.trimmed("cleanup") {
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

        let model_name = match (inputs.trimmed("model-name"), &target) {
            (Some(n), _) => {
                check_name("model-name", n)?;
                n.to_string()
            }
            (None, Target::Model { config, .. }) => {
                let n = config
                    .get("model_name")
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .ok_or(
                        "no model name: config.yaml has no model_name and model-name is not set; add model_name to config.yaml or set model-name",
                    )?;
                check_name("model_name in config.yaml", n)?;
                n.to_string()
            }
            // A chain's name comes from its code; resolved during codegen.
            (None, Target::Chain { .. }) => String::new(),
        };

        let labels = match inputs.trimmed("labels") {
            None => None,
            Some(raw) => match serde_json::from_str::<Value>(raw) {
                // Parsed once more keeping the user's key order, which is
                // the order the platform receives them in.
                Ok(Value::Object(_)) => Some(
                    serde_json::from_str::<OrderedObject>(raw)
                        .map_err(|e| format!("labels is not valid JSON ({e})"))?,
                ),
                Ok(other) => {
                    return Err(format!(
                        "labels must be a JSON object, got {}: set labels to '{{\"team\":\"ml\"}}'",
                        json_kind(&other)
                    ));
                }
                Err(e) => {
                    return Err(format!(
                        "labels is not valid JSON ({e}): set labels to a JSON object like '{{\"team\":\"ml\"}}'"
                    ));
                }
            },
        };

        let mut predict_payload = match inputs.trimmed("predict-payload") {
            Some(raw) => {
                let v: Value = serde_json::from_str(raw).map_err(|e| {
                    format!("predict-payload is not valid JSON ({e}): set it to a JSON object like '{{\"prompt\":\"hi\"}}'")
                })?;
                if matches!(target, Target::Model { .. }) && !v.is_object() {
                    return Err(format!(
                        "predict-payload must be a JSON object for a model, got {}: wrap it, e.g. '{{\"input\": ...}}'",
                        json_kind(&v)
                    ));
                }
                Some(v)
            }
            None => match &target {
                Target::Model { config, .. } => config
                    .pointer("/model_metadata/example_model_input")
                    .cloned(),
                Target::Chain { .. } => None,
            },
        }
        // An empty payload means "no predict", as in the anchor action.
        .filter(|v| !is_falsy(v));
        // Cases are read from the working directory: the repository root.
        let evidence =
            crate::settings::evidence::parse(inputs, &mut predict_payload, Path::new("."))?;
        if promotion == Promotion::AfterPredict && predict_payload.is_none() {
            return Err(
                "promotion is after-predict but there is no predict payload to gate on: set predict-payload (or model_metadata.example_model_input in config.yaml)".into(),
            );
        }

        // Each number is within its declared range, so these conversions
        // cannot overflow.
        let deploy_timeout_minutes = number(inputs, "deploy-timeout-minutes")? as u32;
        let wait_timeout = match inputs.trimmed("wait-timeout-seconds") {
            Some(_) => Duration::from_secs_f64(number(inputs, "wait-timeout-seconds")?),
            None => Duration::from_secs(u64::from(deploy_timeout_minutes) * 60),
        };
        let predict_timeout = Duration::from_secs(number(inputs, "predict-timeout")? as u64);
        let poll_interval = Duration::from_secs_f64(number(inputs, "poll-interval-seconds")?);

        let ci_revision = git::ci_revision(&|k| env(k).ok())?;
        let deployment_name = match inputs.trimmed("deployment-name") {
            Some(n) => {
                if !is_valid_deployment_name(n) {
                    return Err(format!(
                        "deployment-name {n:?} may contain only letters, digits, '_', '.' and '-': pick a name like pr-42_abc1234"
                    ));
                }
                n.to_string()
            }
            None => {
                let rev = ci_revision.clone().or_else(|| {
                    let dir = match &target {
                        Target::Model { dir, .. } => dir.clone(),
                        Target::Chain { file } => {
                            file.parent().map(Path::to_path_buf).unwrap_or_default()
                        }
                    };
                    let dir = if dir.as_os_str().is_empty() {
                        PathBuf::from(".")
                    } else {
                        dir
                    };
                    git::run_git(&dir, &["rev-parse", "HEAD"]).map(|sha| git::Revision {
                        change: None,
                        sha: Some(sha),
                    })
                });
                let derived = rev.as_ref().and_then(git::default_deployment_name).ok_or(
                    "no deployment name: not in a recognised CI and no git commit found; set deployment-name (letters, digits, '_', '.', '-')",
                )?;
                // The CI's variables are refused rather than cleaned up: a
                // name other than the one they spell would be a surprise.
                if !is_valid_deployment_name(&derived) {
                    return Err(format!(
                        "the default deployment name {derived:?}, made from the CI's commit and pull request variables, may contain only letters, digits, '_', '.' and '-': check those variables or set deployment-name"
                    ));
                }
                derived
            }
        };

        let github = crate::github::settings(inputs, &|k| env(k).ok())?;

        let app = key_url("app-url", inputs.or_default("app-url").unwrap_or_default())?;
        let api = key_url("api-url", inputs.or_default("api-url").unwrap_or_default())?;
        let inference = inputs
            .or_default("inference-url")
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
        let s3 = match inputs.trimmed("s3-endpoint") {
            None => None,
            Some(v) => Some(Url::parse(v).map_err(|e| {
                format!("s3-endpoint must be a URL like https://s3.us-west-2.amazonaws.com, got {v:?}: {e}")
            })?),
        };

        Ok(Config {
            target,
            api_key: Secret::new(api_key),
            model_name,
            environment,
            promotion,
            preserve_previous_deployment,
            preserve_env_instance_type,
            notices,
            include_git_info,
            labels,
            deployment_name,
            cleanup,
            predict_payload,
            evidence,
            deploy_timeout_minutes,
            wait_timeout,
            predict_timeout,
            regional_environment,
            team,
            endpoints: Endpoints {
                app,
                api,
                inference,
                s3,
            },
            poll_interval,
            upload_concurrency,
            stream_logs,
            dry_run,
            print_config,
            ci_revision,
            github,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model_dir(config: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("config.yaml"), config).unwrap();
        d
    }

    fn build(pairs: &[(&'static str, &str)]) -> Result<Config, String> {
        Config::from_inputs(&Inputs::from_pairs(pairs), &|_| {
            Err(std::env::VarError::NotPresent)
        })
    }

    #[test]
    fn promotion_inputs_are_checked_before_anything_runs() {
        let with_payload =
            model_dir("model_name: hello\nmodel_metadata:\n  example_model_input: {\"x\": 1}\n");
        let without = model_dir("model_name: hello\n");
        let run = |d: &tempfile::TempDir, extra: &[(&'static str, &str)]| {
            let dir = d.path().to_str().unwrap().to_string();
            let mut pairs: Vec<(&'static str, &str)> =
                vec![("baseten-api-key", "k"), ("deployment-name", "v1")];
            pairs.extend_from_slice(extra);
            pairs.push(("truss-directory", &dir));
            build(&pairs)
        };
        let refused = [
            (
                &with_payload,
                vec![("promotion", "after-predict")],
                "no environment",
            ),
            (
                &with_payload,
                vec![("promotion", "later")],
                "at-create or after-predict",
            ),
            (
                &without,
                vec![
                    ("promotion", "after-predict"),
                    ("environment", "production"),
                ],
                "no predict payload",
            ),
            (
                &with_payload,
                vec![("preserve-previous-production-deployment", "true")],
                "needs an environment",
            ),
            (
                &with_payload,
                vec![("promote", "true"), ("environment", "staging")],
                "both given",
            ),
            (
                &with_payload,
                vec![("publish", "maybe")],
                "publish must be true or false",
            ),
        ];
        for (d, extra, want) in refused {
            let e = run(d, &extra).unwrap_err();
            assert!(e.contains(want), "{extra:?}: {e}");
        }
        let c = run(
            &with_payload,
            &[
                ("promote", "true"),
                ("promotion", "After-Predict"),
                ("trusted", "true"),
            ],
        )
        .unwrap();
        assert_eq!(c.environment.as_deref(), Some("production"));
        assert_eq!(c.promotion, Promotion::AfterPredict);
        assert_eq!(c.create_environment(), None);
        assert_eq!(c.gated_environment(), Some("production"));
        // Gated: cleanup on by default (what serves is never deactivated).
        assert!(c.cleanup.enabled && !c.cleanup.explicit);
        assert_eq!(c.notices.len(), 1, "{:?}", c.notices);
    }

    #[test]
    fn a_good_config_with_defaults() {
        let d =
            model_dir("model_name: hello\nmodel_metadata:\n  example_model_input: {\"x\": 1}\n");
        let dir = d.path().to_str().unwrap();
        let c = build(&[
            ("truss-directory", dir),
            ("baseten-api-key", " key \n"),
            ("deployment-name", "v1"),
        ])
        .unwrap();
        assert_eq!(c.model_name, "hello");
        assert_eq!(c.api_key.expose(), "key");
        assert_eq!(
            c.cleanup,
            Cleanup {
                enabled: true,
                explicit: false
            }
        );
        assert_eq!(c.deploy_timeout_minutes, 45);
        assert_eq!(c.wait_timeout, Duration::from_secs(45 * 60));
        assert_eq!(c.predict_payload, Some(serde_json::json!({"x": 1})));
        assert_eq!(
            c.endpoints.graphql().as_str(),
            "https://app.baseten.co/graphql/"
        );
        assert_eq!(
            c.endpoints.model_predict("abc", "d", None),
            "https://model-abc.api.baseten.co/deployment/d/predict"
        );
    }

    #[test]
    fn cleanup_defaults_off_with_an_environment() {
        let d = model_dir("model_name: hello\n");
        let dir = d.path().to_str().unwrap();
        let base = [
            ("truss-directory", dir),
            ("baseten-api-key", "k"),
            ("deployment-name", "v1"),
        ];
        let with_env: Vec<_> = base
            .iter()
            .copied()
            .chain([("environment", "production")])
            .collect();
        assert_eq!(
            build(&with_env).unwrap().cleanup,
            Cleanup {
                enabled: false,
                explicit: false
            }
        );
        let forced: Vec<_> = with_env
            .iter()
            .copied()
            .chain([("cleanup", "TRUE")])
            .collect();
        assert_eq!(
            build(&forced).unwrap().cleanup,
            Cleanup {
                enabled: true,
                explicit: true
            }
        );
    }

    #[test]
    fn urls_join_without_double_slashes_and_keys_stay_on_https() {
        let d = model_dir("model_name: hello\n");
        let dir = d.path().to_str().unwrap();
        let c = build(&[
            ("truss-directory", dir),
            ("baseten-api-key", "k"),
            ("deployment-name", "v1"),
            ("app-url", "http://127.0.0.1:8080/"),
            ("api-url", "http://localhost:9/"),
        ])
        .unwrap();
        assert_eq!(
            c.endpoints.graphql().as_str(),
            "http://127.0.0.1:8080/graphql/"
        );
        assert_eq!(
            c.endpoints.rest(&["models", "m"]).as_str(),
            "http://localhost:9/v1/models/m"
        );
        let err = build(&[
            ("truss-directory", dir),
            ("baseten-api-key", "k"),
            ("deployment-name", "v1"),
            ("api-url", "http://api.example.com"),
        ])
        .unwrap_err();
        assert!(err.contains("only sent over HTTPS"), "{err}");
    }

    #[test]
    fn deployment_name_rule_is_a_full_match() {
        for ok in ["v1", "PR-42_abc1234", "a.b-c_d"] {
            assert!(is_valid_deployment_name(ok), "{ok}");
        }
        for bad in ["", "v1\n", "a b", "a\"b", "x/y", "é"] {
            assert!(!is_valid_deployment_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn environment_and_name_rules() {
        for ok in ["production", "staging_2", "pr-42", &"e".repeat(48)] {
            assert_eq!(check_environment(ok), Ok(()), "{ok}");
        }
        for bad in [
            "prod@127.0.0.1:8443/x?",
            "a b",
            "é",
            "a.b",
            "a/b",
            &"e".repeat(49),
        ] {
            assert!(check_environment(bad).is_err(), "{bad:?}");
        }
        for ok in ["ml team", "my \"model\"\nv2", "modèle", &"n".repeat(256)] {
            assert_eq!(check_name("team", ok), Ok(()), "{ok:?}");
        }
        for bad in [
            "a\rb",
            "a\u{1b}[2J",
            "a\0",
            "a\tb",
            "a\u{9b}b",
            "model\u{202e}txt.exe",
            "a\u{200b}b",
            "a\u{2066}b\u{2069}",
            "a\u{2028}b",
            "\u{feff}a",
            &"n".repeat(257),
        ] {
            assert!(check_name("team", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn falsy_payloads_skip_predict() {
        let d = model_dir("model_name: hello\nmodel_metadata:\n  example_model_input: {}\n");
        let dir = d.path().to_str().unwrap();
        let c = build(&[
            ("truss-directory", dir),
            ("baseten-api-key", "k"),
            ("deployment-name", "v1"),
        ])
        .unwrap();
        assert_eq!(c.predict_payload, None);
    }
}
