//! Runs the real binary against an in-process fake and reads back what a CI
//! user would see: exit code, stdout/stderr, GITHUB_OUTPUT parsed by the
//! runner's rules, the step summary and the outputs file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fake_baseten::FakeBaseten;
use fake_baseten::runner::parse_github_output;
use fake_baseten::scenario::Scenario;

/// A canary API key: tests assert it never appears in anything the binary
/// writes.
pub const API_KEY: &str = "sk-canary-9f8e7d6c5b4a";

pub fn example_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello-model")
}

pub fn scenario_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fake-baseten/scenarios")
        .join(name)
}

/// Starts a fake from YAML, with the canary key.
pub fn fake(yaml: &str) -> FakeBaseten {
    let scenario = Scenario::from_yaml(yaml)
        .expect("scenario parses")
        .with_api_key(API_KEY);
    FakeBaseten::start_in_background(scenario).expect("fake starts")
}

/// A model truss copied into a temp dir, with `config.yaml` replaced.
pub fn model_dir(config_yaml: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("model")).unwrap();
    std::fs::copy(
        example_model().join("model/model.py"),
        d.path().join("model/model.py"),
    )
    .unwrap();
    std::fs::write(d.path().join("config.yaml"), config_yaml).unwrap();
    d
}

pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub outputs: BTreeMap<String, String>,
    pub summary: String,
    pub outputs_file: Option<String>,
    pub elapsed: Duration,
}

impl Outcome {
    pub fn out(&self, name: &str) -> &str {
        self.outputs
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no output {name}: {:?}", self.outputs))
    }

    pub fn status(&self) -> &str {
        self.out("status")
    }

    /// Everything the user can see, for secret checks.
    pub fn everything(&self) -> String {
        format!(
            "{}\n{}\n{:?}\n{}\n{}",
            self.stdout,
            self.stderr,
            self.outputs,
            self.summary,
            self.outputs_file.clone().unwrap_or_default()
        )
    }
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}\n--- outputs\n{:#?}",
            self.code, self.stdout, self.stderr, self.outputs
        )
    }
}

/// A run of the binary: flags pointing at the fake, plus the test's own
/// flags and environment.
pub struct Invocation<'a> {
    pub fake: Option<&'a FakeBaseten>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub outputs_file: Option<&'static str>,
}

impl<'a> Invocation<'a> {
    pub fn new(fake: &'a FakeBaseten) -> Self {
        Self {
            fake: Some(fake),
            args: vec![
                format!("--baseten-api-key={API_KEY}"),
                "--poll-interval-seconds=0.05".into(),
                "--deployment-name=ci-test".into(),
            ],
            env: Vec::new(),
            outputs_file: None,
        }
    }

    /// No fake, no defaults: for input validation tests.
    pub fn bare() -> Self {
        Self {
            fake: None,
            args: Vec::new(),
            env: Vec::new(),
            outputs_file: None,
        }
    }

    pub fn arg(mut self, flag: &str, value: impl AsRef<str>) -> Self {
        // `--flag=value`, so values starting with '-' stay values.
        self.args.push(format!("--{flag}={}", value.as_ref()));
        self
    }

    pub fn model(self, dir: impl AsRef<Path>) -> Self {
        let d = dir.as_ref().to_str().unwrap().to_string();
        self.arg("truss-directory", d)
    }

    pub fn env(mut self, k: &str, v: impl AsRef<str>) -> Self {
        self.env.push((k.into(), v.as_ref().into()));
        self
    }

    pub fn outputs_file(mut self, name: &'static str) -> Self {
        self.outputs_file = Some(name);
        self
    }

    pub fn run(self) -> Outcome {
        let dir = tempfile::tempdir().unwrap();
        let gh_out = dir.path().join("github_output");
        let summary = dir.path().join("summary.md");
        std::fs::write(&gh_out, "").unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_truss-push"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir.path())
            .env("GITHUB_OUTPUT", &gh_out)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .current_dir(dir.path());
        if let Some(f) = self.fake {
            cmd.args(["--app-url", &f.graphql_base()])
                .args(["--api-url", &f.rest_base()])
                .args(["--inference-url", &f.inference_template()])
                .args(["--s3-endpoint", &f.s3_endpoint()]);
        }
        let out_file = self.outputs_file.map(|n| dir.path().join(n));
        if let Some(p) = &out_file {
            cmd.args(["--output-file", p.to_str().unwrap()]);
        }
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let started = Instant::now();
        let out = cmd.output().expect("the binary runs");
        let elapsed = started.elapsed();
        let gh = std::fs::read_to_string(&gh_out).unwrap();
        let outputs = parse_github_output(&gh)
            .unwrap_or_else(|e| panic!("GITHUB_OUTPUT is not valid for the runner: {e:?}\n{gh}"))
            .into_iter()
            .collect();
        Outcome {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            outputs,
            summary: std::fs::read_to_string(&summary).unwrap_or_default(),
            outputs_file: out_file.and_then(|p| std::fs::read_to_string(p).ok()),
            elapsed,
        }
    }
}

/// Endpoint names the fake logged, in order.
pub fn endpoints(fake: &FakeBaseten) -> Vec<String> {
    fake.requests().into_iter().map(|e| e.endpoint).collect()
}

/// The mutation requests the fake logged.
pub fn mutations(fake: &FakeBaseten) -> Vec<fake_baseten::reqlog::LogEntry> {
    fake.requests().into_iter().filter(|e| e.mutation).collect()
}
