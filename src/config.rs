//! Stage two of the inputs: a validated `Config`, built before any network
//! call. Every message says what was wrong, what was expected and how to fix
//! it: a bad input gets one clear message and changes nothing.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::ci_context::CiContext;
#[cfg(test)]
use crate::cli::Inputs;
use crate::files::{ReadError, read_regular_file};
use crate::git;
use crate::kind::Kind;
use crate::settings::{
    CONFIG_YAML_MAX_MIB, check_name, is_falsy, is_valid_deployment_name, json_kind,
};
pub(crate) use crate::settings::{Promotion, Settings};

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

impl Target {
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Target::Model { .. } => Kind::Model,
            Target::Chain { .. } => Kind::Chain,
        }
    }
}

/// Everything one target's run needs, validated: the target and what
/// depends on it, over the run's [`Settings`] (read through `Deref`).
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub target: Target,
    /// `model-name`, else config.yaml's `model_name`; a chain's comes from
    /// its code during codegen (empty until then).
    pub model_name: String,
    pub deployment_name: String,
    /// `None`: no payload configured, predict is skipped.
    pub predict_payload: Option<Value>,
    /// Cases, objectives and the baseline; `None`: one smoke request.
    pub evidence: Option<crate::evidence::Settings>,
    pub ci_revision: Option<git::Revision>,
    pub settings: Settings,
}

impl std::ops::Deref for Config {
    type Target = Settings;

    fn deref(&self) -> &Settings {
        &self.settings
    }
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
    /// Resolves the target `dir` (a model directory or a chain's `.py`
    /// file) under `settings`: reads its config.yaml, names the model and
    /// the deployment (from the CI's commit, else `git`), picks the smoke
    /// test's payload and reads the cases file.
    pub(crate) fn resolve(
        settings: &Settings,
        dir: &str,
        ci: &CiContext,
    ) -> Result<Config, String> {
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
        if settings.skip_unchanged && matches!(target, Target::Chain { .. }) {
            return Err(
                "skip-unchanged compares the content hash recorded in the serving deployment's labels, and chain deployments carry no labels in the published API: drop skip-unchanged for chains".into(),
            );
        }
        if settings.preserve_previous_deployment
            && settings.promotion == Promotion::AtCreate
            && matches!(target, Target::Chain { .. })
        {
            return Err(
                "preserve-previous-production-deployment is not part of a chain's create request: use it with promotion: after-predict, where the promote request carries it".into(),
            );
        }
        let model_name = match (&settings.given_model_name, &target) {
            (Some(n), _) => n.clone(),
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
        let given_payload = match &settings.given_payload {
            Some(v) if matches!(target, Target::Model { .. }) && !v.is_object() => {
                return Err(format!(
                    "predict-payload must be a JSON object for a model, got {}: wrap it, e.g. '{{\"input\": ...}}'",
                    json_kind(v)
                ));
            }
            given => given.clone(),
        };
        let example = match &target {
            Target::Model { config, .. } => config
                .pointer("/model_metadata/example_model_input")
                .cloned(),
            Target::Chain { .. } => None,
        };
        // An empty payload means "no predict", as in the Python action: an
        // empty predict-payload turns the example input off too.
        let (given_payload, example) = match given_payload {
            Some(v) if is_falsy(&v) => (None, None),
            given => (given, example.filter(|v| !is_falsy(v))),
        };
        // Which payload the smoke test sends is decided with the evidence
        // inputs (a cases file's first case goes before the example
        // input); cases are read from the working directory, the
        // repository root.
        let resolved = settings
            .evidence
            .resolve(given_payload, example, Path::new("."))?;
        let (predict_payload, evidence) = (resolved.payload, resolved.evidence);
        if settings.promotion == Promotion::AfterPredict && predict_payload.is_none() {
            return Err(
                "promotion is after-predict but there is no predict payload to gate on: set predict-payload (or model_metadata.example_model_input in config.yaml)".into(),
            );
        }
        let ci_revision = git::ci_revision(ci)?;
        let deployment_name = match &settings.given_deployment_name {
            Some(n) => n.clone(),
            None => default_deployment_name(ci_revision.as_ref(), &target)?,
        };
        Ok(Config {
            target,
            model_name,
            deployment_name,
            predict_payload,
            evidence,
            ci_revision,
            settings: settings.clone(),
        })
    }

    /// Parses and resolves in one step (one target named plainly).
    #[cfg(test)]
    pub(crate) fn from_inputs(inputs: &Inputs, ci: &CiContext) -> Result<Config, String> {
        let settings = Settings::parse(inputs, ci)?;
        Config::resolve(&settings, &settings.truss_directory, ci)
    }
}

/// The deployment name made from the CI's commit and pull request, else
/// from `git rev-parse HEAD` in the target's folder.
fn default_deployment_name(
    ci_revision: Option<&git::Revision>,
    target: &Target,
) -> Result<String, String> {
    let rev = ci_revision.cloned().or_else(|| {
        let dir = match target {
            Target::Model { dir, .. } => dir.clone(),
            Target::Chain { file } => file.parent().map(Path::to_path_buf).unwrap_or_default(),
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
    // The CI's variables are refused rather than cleaned up: a name other
    // than the one they spell would be a surprise.
    if !is_valid_deployment_name(&derived) {
        return Err(format!(
            "the default deployment name {derived:?}, made from the CI's commit and pull request variables, may contain only letters, digits, '_', '.' and '-': check those variables or set deployment-name"
        ));
    }
    Ok(derived)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Cleanup, check_environment};
    use std::time::Duration;

    fn model_dir(config: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("config.yaml"), config).unwrap();
        d
    }

    fn build(pairs: &[(&'static str, &str)]) -> Result<Config, String> {
        Config::from_inputs(&Inputs::from_pairs(pairs), &CiContext::default())
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
