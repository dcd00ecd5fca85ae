//! Conformance: the real Python client (`truss==0.18.36`, venv from
//! `scripts/python-env`) pushes a model four ways and a two-chainlet chain.
//!
//! Proves, for the traffic `truss push` and `truss chains push` send:
//! - GraphQL: `Api-Key` auth, every document truss sends parsed into the
//!   arguments it meant (literals and `$variables`): labels as
//!   `user_deploy_metadata`, deployment name as `version_name` (new model)
//!   vs `name` (new version), `environment_name`; answers carry every field
//!   truss reads; new vs existing model; a new model's environments;
//!   chainlet raw statuses that truss's wait loop reads as in progress/ACTIVE.
//! - S3 via boto3: path-style PUT, SigV4 with the issued session credentials,
//!   the region answer boto3 follows (us-east-1 → 400 → us-west-2 → 200),
//!   and the stored tar is truss's, default ignore patterns applied.
//!
//! Cannot prove: REST v1 and inference (the push never calls REST, and
//! `--wait` would send it to https://api.baseten.co; only chain keepalive
//! GETs touch inference paths); aws-chunked bodies (boto3 streams them only
//! over https); multipart uploads (fixtures are far below 8 MiB); GraphQL
//! error answers and faults (truss exercises none).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use fake_baseten::FakeBaseten;
use fake_baseten::reqlog::LogEntry;
use fake_baseten::s3::S3Event;
use fake_baseten::scenario::Scenario;
use serde_json::{Value, json};

/// The bucket region, deliberately not boto3's default so the redirect runs.
const BUCKET_REGION: &str = "us-west-2";
const BOTO_DEFAULT_REGION: &str = "us-east-1";
const MODEL_NAME: &str = "conformance-echo";
const CHAIN_NAME: &str = "conformance-chain";

/// Files the default `.truss_ignore` patterns must drop, created at test
/// time in a scratch copy (a `.git` or `__pycache__` cannot live in the
/// committed fixture), each beside the pattern that drops it.
const MODEL_JUNK: &[(&str, &str)] = &[
    ("__pycache__/stale.cpython-311.pyc", "__pycache__/"),
    ("model/__pycache__/model.cpython-311.pyc", "__pycache__/"),
    ("model/helper.pyc", "*.py[cod]"),
    ("build/lib/artifact.txt", "build/"),
    ("data/lib/vendored.py", "lib/ at any depth"),
    (".git/HEAD", ".git"),
    ("debug.log", "*.log"),
    (".env", ".env"),
    ("notes.swp", "*.swp"),
    (".DS_Store", ".DS_Store"),
];
const MODEL_MEMBERS: &[&str] = &[
    "config.yaml",
    "data/labels.json",
    "model/__init__.py",
    "model/model.py",
];

const CHAIN_JUNK: &[(&str, &str)] = &[
    ("__pycache__/old.cpython-311.pyc", "__pycache__/"),
    ("build/out.txt", "build/"),
    (".git/HEAD", ".git"),
    ("run.log", "*.log"),
];
const CHAINLET_MEMBERS: &[&str] = &[
    "config.yaml",
    "model/__init__.py",
    "model/model.py",
    "packages/_model_dbg.py",
    "packages/conformance_chain.py",
    "packages/greeting.txt",
    "pip_requirements.txt",
];
const CHAIN_SOURCE_MEMBERS: &[&str] = &["conformance_chain.py", "greeting.txt"];

/// Scenario second at which chainlets turn ready (the clock is manual).
const CHAINLET_READY_SECS: f64 = 10.0;
/// How long truss may take to reach a state the test waits for: Python
/// start-up, code generation and three uploads take ~5 s on a quiet machine.
const TRUSS_STEP_DEADLINE: Duration = Duration::from_secs(120);

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn truss_push_of_a_model_conforms() {
    let venv = truss_venv();
    let scenario = Scenario {
        region: BUCKET_REGION.into(),
        new_model_environments: vec!["staging".into()],
        ..Scenario::default()
    };
    let fake = FakeBaseten::start_in_background(scenario).expect("the fake starts");
    let sandbox = Sandbox::new("model", &fake);
    let model_dir = sandbox.copy_fixture("model", MODEL_JUNK);
    let dir = model_dir.to_str().expect("utf-8 temp path");
    let team_id = only_team_id(&fake);

    // 1. A new model, named deployment: create_model_from_truss + version_name.
    let run = sandbox.run(
        &venv,
        &fake,
        &[
            "push",
            "--publish",
            "--deployment-name",
            "first-push",
            "--output",
            "json",
            dir,
        ],
    );
    let first = pushed_ids(&run.output);
    let args = run.only_call("create_model_from_truss");
    assert_eq!(args["name"], MODEL_NAME);
    assert_eq!(args["version_name"], "first-push");
    assert_eq!(args["team_id"], team_id.as_str());
    assert_eq!(args["semver_bump"], "MINOR");
    assert_eq!(args["allow_truss_download"], true);
    assert_absent(&args, &["environment_name", "model_id"]);
    assert_eq!(args["user_deploy_metadata"], Value::Null);
    assert_eq!(
        decode_b64(&args["raw_config"]),
        std::fs::read(model_dir.join("config.yaml")).expect("fixture config"),
        "raw_config must be the config.yaml bytes"
    );
    let config: Value =
        serde_json::from_slice(&decode_b64(&args["config"])).expect("config is base64 JSON");
    assert_eq!(config["model_name"], MODEL_NAME);
    assert_eq!(
        config["environment_variables"],
        json!({"ECHO_PREFIX": "echo: "})
    );
    run.assert_region_redirect_per_upload(1);
    assert_tar_members(&fake, str_arg(&args, "s3_key"), MODEL_MEMBERS);

    // 2. The same model again: a new version of the existing model.
    let run = sandbox.run(
        &venv,
        &fake,
        &["push", "--publish", "--output", "json", dir],
    );
    let second = pushed_ids(&run.output);
    assert_eq!(second.0, first.0, "the second push must reuse the model");
    let args = run.only_call("create_model_version_from_truss");
    assert_eq!(args["model_id"], first.0.as_str());
    assert_eq!(args["scale_down_old_production"], true);
    assert_eq!(args["preserve_env_instance_type"], true);
    assert_absent(
        &args,
        &["name", "version_name", "environment_name", "team_id"],
    );
    assert_eq!(args["user_deploy_metadata"], Value::Null);
    run.assert_region_redirect_per_upload(1);
    assert_tar_members(&fake, str_arg(&args, "s3_key"), MODEL_MEMBERS);

    // 3. Into the staging environment the scenario gives every new model.
    let run = sandbox.run(
        &venv,
        &fake,
        &[
            "push",
            "--publish",
            "--environment",
            "staging",
            "--output",
            "json",
            dir,
        ],
    );
    let third = pushed_ids(&run.output);
    let args = run.only_call("create_model_version_from_truss");
    assert_eq!(args["environment_name"], "staging");
    assert_absent(&args, &["name", "version_name"]);
    run.assert_region_redirect_per_upload(1);

    // 4. Labels and a deployment name on a new version: `name`, not `version_name`.
    let run = sandbox.run(
        &venv,
        &fake,
        &[
            "push",
            "--publish",
            "--labels",
            r#"{"a":"b"}"#,
            "--deployment-name",
            "x",
            "--output",
            "json",
            dir,
        ],
    );
    let fourth = pushed_ids(&run.output);
    let args = run.only_call("create_model_version_from_truss");
    assert_eq!(args["name"], "x");
    assert_absent(&args, &["version_name", "environment_name"]);
    let labels: Value = serde_json::from_str(
        args["user_deploy_metadata"]
            .as_str()
            .expect("labels travel as a JSON string"),
    )
    .expect("user_deploy_metadata is JSON");
    assert_eq!(labels, json!({"a": "b"}));
    run.assert_region_redirect_per_upload(1);

    // What the platform made of it, as the fake's state shows.
    let deployments = fake.deployments();
    let find = |id: &str| {
        deployments
            .iter()
            .find(|d| d.id == id)
            .unwrap_or_else(|| panic!("the fake has no deployment {id}; it has {deployments:#?}"))
    };
    assert_eq!(find(&first.1).name, "first-push");
    assert_eq!(find(&third.1).environment.as_deref(), Some("staging"));
    assert_eq!(find(&fourth.1).name, "x");
    assert_eq!(find(&fourth.1).labels, Some(json!({"a": "b"})));
    assert!(
        deployments.iter().all(|d| d.model_id == first.0),
        "all four pushes target one model: {deployments:#?}"
    );
    assert_eq!(
        deployments.len(),
        4,
        "one deployment per push: {deployments:#?}"
    );
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn truss_chains_push_of_two_chainlets_conforms() {
    let venv = truss_venv();
    let mut scenario = Scenario {
        region: BUCKET_REGION.into(),
        manual_clock: true,
        ..Scenario::default()
    };
    // Chainlets build until the test moves the clock, so truss's wait loop
    // must read the raw in-progress status as "keep waiting".
    scenario.chainlets.default = vec![
        (0.0, "BUILDING_MODEL".into()),
        (CHAINLET_READY_SECS, "MODEL_READY".into()),
    ];
    let fake = FakeBaseten::start_in_background(scenario).expect("the fake starts");
    let sandbox = Sandbox::new("chain", &fake);
    let chain_dir = sandbox.copy_fixture("chain", CHAIN_JUNK);
    let source = chain_dir.join("conformance_chain.py");
    let team_id = only_team_id(&fake);

    let chain_polls = || {
        fake.requests()
            .iter()
            .filter(|r| r.endpoint == "graphql.chain_deployment")
            .count()
    };
    // truss looks once to print the table and once more in its wait loop
    // before it sleeps; only then does the clock move.
    let ready_when_polled_twice = |truss: &mut Child| {
        wait_for(truss, "truss to poll the building chain twice", || {
            chain_polls() >= 2
        })?;
        fake.clock().advance(CHAINLET_READY_SECS);
        Ok(())
    };
    let run = sandbox.run_while(
        &venv,
        &fake,
        &[
            "chains",
            "push",
            "--publish",
            source.to_str().expect("utf-8 temp path"),
        ],
        ready_when_polled_twice,
    );
    // truss exits 0 even when chainlets fail, so the verdict is in the text.
    assert!(
        run.stdout().contains("Deployment succeeded."),
        "truss did not report success:\n{}",
        run.transcript()
    );

    let args = run.only_call("deploy_chain_atomic");
    assert_eq!(args["chain_name"], CHAIN_NAME);
    assert_eq!(args["is_draft"], false);
    assert_eq!(args["team_id"], team_id.as_str());
    assert_absent(&args, &["chain_id", "environment", "deployment_name"]);

    let entrypoint = &args["entrypoint"];
    assert_eq!(entrypoint["name"], "Greeter");
    let dependencies = args["dependencies"]
        .as_array()
        .expect("dependencies is a list");
    assert_eq!(dependencies.len(), 1, "one dependency: {dependencies:?}");
    assert_eq!(dependencies[0]["name"], "Shouter");
    for chainlet in [entrypoint, &dependencies[0]] {
        let oracle = &chainlet["oracle"];
        let model_name = str_arg(oracle, "model_name");
        let display = str_arg(chainlet, "name");
        assert!(
            is_chainlet_model_name(model_name, display),
            "chainlet model names are <display name>-<8 hex>, got {model_name:?}"
        );
        assert_eq!(oracle["semver_bump"], "MINOR");
        let config: Value = serde_json::from_slice(&decode_b64(&oracle["encoded_config_str"]))
            .expect("encoded_config_str is base64 JSON");
        assert_eq!(config["model_name"], model_name);
        assert_tar_members(&fake, str_arg(oracle, "s3_key"), CHAINLET_MEMBERS);
    }
    assert_tar_members(
        &fake,
        str_arg(&args, "original_source_artifact_s3_key"),
        CHAIN_SOURCE_MEMBERS,
    );
    // Two chainlet trusses and the chain source: three uploads.
    run.assert_region_redirect_per_upload(3);

    let polls = run.calls("chain_deployment").len();
    assert!(
        polls >= 3,
        "two looks while building and one once ready, saw {polls} chain_deployment queries"
    );
    let chainlets: Vec<_> = fake
        .deployments()
        .into_iter()
        .filter(|d| d.chain_deployment_id.is_some())
        .collect();
    assert_eq!(
        chainlets.len(),
        2,
        "one model deployment per chainlet: {chainlets:#?}"
    );
}

// --- the Python side -------------------------------------------------------

/// The venv's path, made (once) by `scripts/python-env`.
fn truss_venv() -> PathBuf {
    let script = repo_root().join("scripts/python-env");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed ({}); it needs python3 with venv or pip, and PyPI:\n{}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let venv = PathBuf::from(path);
    assert!(
        venv.join("bin/truss").is_file(),
        "no truss in {}",
        venv.display()
    );
    venv
}

/// Polls `done` (a cheap look at the fake's log) until it holds, giving up
/// early when truss has exited.
fn wait_for(truss: &mut Child, what: &str, done: impl Fn() -> bool) -> Result<(), String> {
    let start = Instant::now();
    while !done() {
        if let Ok(Some(status)) = truss.try_wait() {
            return Err(format!("truss exited ({status}) before {what}"));
        }
        if start.elapsed() > TRUSS_STEP_DEADLINE {
            return Err(format!(
                "gave up after {TRUSS_STEP_DEADLINE:?} waiting for {what}"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch HOME, TMPDIR and workspace for one test, removed on drop.
struct Sandbox {
    root: tempfile::TempDir,
}

impl Sandbox {
    fn new(tag: &str, fake: &FakeBaseten) -> Self {
        let root = tempfile::Builder::new()
            .prefix(&format!("truss-conformance-{tag}-"))
            .tempdir()
            .expect("create the sandbox");
        for dir in ["home/.aws", "tmp", "work"] {
            std::fs::create_dir_all(root.path().join(dir)).expect("create sandbox dirs");
        }
        // trussrc routes GraphQL; the AWS config is the only way to route
        // boto3, because truss deletes every AWS_* variable before uploading.
        // botocore reads `endpoint_url` at the profile's top level only.
        let trussrc = format!(
            "[baseten]\nremote_provider = baseten\napi_key = {}\nremote_url = {}\n",
            fake.api_key(),
            fake.graphql_base()
        );
        let aws = format!(
            "[default]\nendpoint_url = {}\ns3 =\n    addressing_style = path\n",
            fake.s3_endpoint()
        );
        std::fs::write(root.path().join("home/.trussrc"), trussrc).expect("write .trussrc");
        std::fs::write(root.path().join("home/.aws/config"), aws).expect("write aws config");
        Self { root }
    }

    /// Copies `tests/fixtures/conformance/<name>` and adds the junk files.
    fn copy_fixture(&self, name: &str, junk: &[(&str, &str)]) -> PathBuf {
        let src = repo_root().join("tests/fixtures/conformance").join(name);
        let dst = self.root.path().join("work").join(name);
        copy_tree(&src, &dst);
        for (path, pattern) in junk {
            let file = dst.join(path);
            std::fs::create_dir_all(file.parent().expect("junk has a parent"))
                .expect("create junk dir");
            std::fs::write(
                &file,
                format!("must be dropped by the default pattern {pattern}\n"),
            )
            .expect("write junk");
        }
        dst
    }

    /// Runs `truss <args>` against the fake; panics with the transcript
    /// unless it exits 0.
    fn run(&self, venv: &Path, fake: &FakeBaseten, args: &[&str]) -> Run {
        self.run_while(venv, fake, args, |_| Ok(()))
    }

    /// Like `run`, calling `meanwhile` while truss runs; if it fails, truss
    /// is killed (a chain push waits forever on a clock that stands still).
    fn run_while(
        &self,
        venv: &Path,
        fake: &FakeBaseten,
        args: &[&str],
        meanwhile: impl FnOnce(&mut Child) -> Result<(), String>,
    ) -> Run {
        let requests_before = fake.requests().len();
        let s3_before = fake.s3().events().len();
        let path = match std::env::var_os("PATH") {
            Some(p) => {
                let mut dirs = vec![venv.join("bin")];
                dirs.extend(std::env::split_paths(&p));
                std::env::join_paths(dirs).expect("PATH joins")
            }
            None => venv.join("bin").into_os_string(),
        };
        // A clean environment: no stray AWS_*, BASETEN_* or USER_TRUSSRC_PATH
        // can reroute the client.
        let mut child = Command::new(venv.join("bin/truss"))
            .args(args)
            .args(["--remote", "baseten", "--non-interactive"])
            .current_dir(self.root.path().join("work"))
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.root.path().join("home"))
            .env("TMPDIR", self.root.path().join("tmp"))
            .env("TRUSS_NO_UPDATE_CHECK", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONIOENCODING", "utf-8")
            .env("COLUMNS", "200")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("truss starts");
        let trouble = meanwhile(&mut child).err();
        if trouble.is_some() {
            let _ = child.kill();
        }
        let output = child.wait_with_output().expect("truss output");
        let run = Run {
            args: args.iter().map(|s| s.to_string()).collect(),
            output,
            requests: fake.requests().split_off(requests_before),
            s3: fake.s3().events().split_off(s3_before),
        };
        if let Some(trouble) = trouble {
            panic!("{trouble}\n{}", run.transcript());
        }
        assert!(
            run.output.status.success(),
            "truss failed:\n{}",
            run.transcript()
        );
        run.assert_fake_refused_nothing();
        run
    }
}

fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("create copy dir");
    for entry in std::fs::read_dir(src).unwrap_or_else(|e| panic!("read {}: {e}", src.display())) {
        let entry = entry.expect("dir entry");
        let to = dst.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).expect("copy fixture file");
        }
    }
}

/// One truss invocation and what the fake saw during it.
struct Run {
    args: Vec<String>,
    output: Output,
    requests: Vec<LogEntry>,
    s3: Vec<S3Event>,
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Everything needed to debug a failure; the fake's log holds no header
    /// values, and truss prints no key.
    fn transcript(&self) -> String {
        let requests: Vec<String> = self
            .requests
            .iter()
            .map(|r| {
                format!(
                    "  {} {} -> {:?} [{}]",
                    r.method, r.path, r.status, r.endpoint
                )
            })
            .collect();
        format!(
            "truss {}\nexit: {}\n--- stdout\n{}\n--- stderr\n{}\n--- fake saw\n{}\n--- s3 events\n{:#?}",
            self.args.join(" "),
            self.output.status,
            self.stdout(),
            String::from_utf8_lossy(&self.output.stderr),
            requests.join("\n"),
            self.s3
        )
    }

    /// Resolved arguments of every GraphQL call to `root_field`.
    fn calls(&self, root_field: &str) -> Vec<Value> {
        self.requests
            .iter()
            .filter_map(|r| r.graphql.as_ref())
            .filter(|g| g.root_fields.first().map(String::as_str) == Some(root_field))
            .map(|g| g.arguments.get(root_field).cloned().unwrap_or(Value::Null))
            .collect()
    }

    fn only_call(&self, root_field: &str) -> Value {
        let calls = self.calls(root_field);
        assert_eq!(
            calls.len(),
            1,
            "expected one {root_field} call:\n{}",
            self.transcript()
        );
        calls.into_iter().next().expect("one call")
    }

    /// Each of the `uploads` objects went through boto3's region dance:
    /// signed for us-east-1, told the bucket's region, re-signed, stored;
    /// and every S3 request — the wrong-region first attempt included —
    /// passed SigV4 verification with the issued credentials (the fake
    /// answers the region first, as S3 does, but still checks and records
    /// the signature for the request's own scope).
    fn assert_region_redirect_per_upload(&self, uploads: usize) {
        let keys: BTreeSet<&str> = self.s3.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys.len(),
            uploads,
            "uploads in this run:\n{}",
            self.transcript()
        );
        for key in keys {
            let seen: Vec<_> = self
                .s3
                .iter()
                .filter(|e| e.key == key)
                .map(|e| {
                    let region = e.signed_region.as_deref();
                    (
                        e.operation.as_str(),
                        region,
                        e.status,
                        e.error_code.as_deref(),
                    )
                })
                .collect();
            let want = vec![
                (
                    "s3.put_object",
                    Some(BOTO_DEFAULT_REGION),
                    400,
                    Some("AuthorizationHeaderMalformed"),
                ),
                ("s3.put_object", Some(BUCKET_REGION), 200, None),
            ];
            assert_eq!(seen, want, "S3 requests for {key}:\n{}", self.transcript());
        }
        let unverified: Vec<_> = self.s3.iter().filter(|e| !e.signature_verified).collect();
        assert!(
            unverified.is_empty(),
            "S3 requests whose signature did not verify: {unverified:#?}"
        );
    }

    /// Nothing truss sent was refused, apart from the S3 region answers
    /// that `assert_region_redirect_per_upload` pins down.
    fn assert_fake_refused_nothing(&self) {
        let refused: Vec<String> = self
            .requests
            .iter()
            .filter(|r| {
                let ok = r.status.is_some_and(|s| (200..300).contains(&s));
                let region_answer = r.endpoint.starts_with("s3.") && r.status == Some(400);
                !ok && !region_answer
            })
            .map(|r| format!("{} {} -> {:?} [{}]", r.method, r.path, r.status, r.endpoint))
            .collect();
        assert!(
            refused.is_empty(),
            "the fake refused {refused:#?}\n{}",
            self.transcript()
        );
    }
}

/// `truss push --output json` prints the created ids on stdout.
fn pushed_ids(output: &Output) -> (String, String) {
    let text = String::from_utf8_lossy(&output.stdout);
    let v: Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("truss push --output json printed no JSON ({e}):\n{text}"));
    let id = |k: &str| {
        v[k].as_str()
            .unwrap_or_else(|| panic!("no {k} in truss's JSON: {v}"))
            .to_string()
    };
    assert_eq!(v["is_draft"], false, "a published deployment: {v}");
    (id("model_id"), id("model_version_id"))
}

fn only_team_id(fake: &FakeBaseten) -> String {
    let teams: Vec<String> = fake
        .ids()
        .into_iter()
        .filter(|(name, _)| name.starts_with("team:"))
        .map(|(_, id)| id)
        .collect();
    assert_eq!(
        teams.len(),
        1,
        "the scenario has one team, so truss picks it without asking"
    );
    teams.into_iter().next().expect("one team")
}

fn assert_tar_members(fake: &FakeBaseten, key: &str, expected: &[&str]) {
    let object = fake.s3().object_reader(key).unwrap_or_else(|| {
        panic!(
            "the fake stored no object {key}; it has {:?}",
            fake.s3().objects()
        )
    });
    let mut archive = tar::Archive::new(object);
    let mut members = BTreeSet::new();
    for entry in archive.entries().expect("a tar archive") {
        let entry = entry.expect("a tar entry");
        assert!(
            !entry.header().entry_type().is_dir(),
            "truss stores no directory entries, found {:?}",
            entry.path()
        );
        members.insert(
            entry
                .path()
                .expect("member path")
                .to_string_lossy()
                .into_owned(),
        );
    }
    let expected: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
    assert_eq!(members, expected, "members of {key}");
}

fn assert_absent(args: &Value, keys: &[&str]) {
    for k in keys {
        assert!(
            args.get(*k).is_none(),
            "argument {k} must not be sent: {args}"
        );
    }
}

fn str_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args[key]
        .as_str()
        .unwrap_or_else(|| panic!("argument {key} is not a string: {args}"))
}

fn decode_b64(v: &Value) -> Vec<u8> {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("expected a base64 string, got {v}"));
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .unwrap_or_else(|e| panic!("not base64 ({e}): {s:.40}"))
}

/// `<display name>-<8 lowercase hex>`, the name truss gives a chainlet model.
fn is_chainlet_model_name(model_name: &str, display_name: &str) -> bool {
    model_name
        .strip_prefix(display_name)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hex| {
            hex.len() == 8
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

#[test]
fn chainlet_model_names_are_display_name_dash_eight_hex() {
    for (model, display, want) in [
        ("Greeter-1a2b3c4d", "Greeter", true),
        ("Greeter-1a2b3c4", "Greeter", false),
        ("Greeter-1A2B3C4D", "Greeter", false),
        ("Greeter1a2b3c4d", "Greeter", false),
        ("Shouter-1a2b3c4d", "Greeter", false),
        ("Greeter-1a2b3c4d5", "Greeter", false),
    ] {
        assert_eq!(
            is_chainlet_model_name(model, display),
            want,
            "{model} / {display}"
        );
    }
}
