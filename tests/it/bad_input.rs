//! Bad input: one clear message, outputs still written, nothing uploaded or
//! created.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fake_baseten::runner::parse_github_output;

use crate::harness::*;

#[test]
fn every_bad_input_is_refused_before_any_upload_or_mutation() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let good = example_model();
    let no_name = model_dir("resources: {cpu: '1'}\n");
    let bad_yaml = model_dir("model_name: [unclosed\n");
    let list_yaml = model_dir("- a\n- b\n");
    let empty_dir = tempfile::tempdir().unwrap();
    let good_s = good.to_str().unwrap();
    type Case<'a> = (&'a str, Vec<(&'a str, String)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "missing truss-directory",
            vec![("truss-directory", String::new())],
            "truss-directory is required",
        ),
        (
            "directory does not exist",
            vec![("truss-directory", "/nonexistent/model".into())],
            "does not exist",
        ),
        (
            "no config.yaml",
            vec![("truss-directory", empty_dir.path().to_str().unwrap().into())],
            "config.yaml",
        ),
        (
            "config.yaml not YAML",
            vec![("truss-directory", bad_yaml.path().to_str().unwrap().into())],
            "not valid YAML",
        ),
        (
            "config.yaml not a mapping",
            vec![("truss-directory", list_yaml.path().to_str().unwrap().into())],
            "mapping",
        ),
        (
            "no model name",
            vec![("truss-directory", no_name.path().to_str().unwrap().into())],
            "no model name",
        ),
        (
            "chain file missing",
            vec![("truss-directory", "/nonexistent/chain.py".into())],
            "no such file",
        ),
        (
            "empty api key",
            vec![("baseten-api-key", "   ".into())],
            "baseten-api-key is required",
        ),
        (
            "labels not JSON",
            vec![("labels", "{team: ml}".into())],
            "labels is not valid JSON",
        ),
        (
            "output-file in a directory that does not exist",
            vec![(
                "output-file",
                empty_dir
                    .path()
                    .join("missing/out.env")
                    .display()
                    .to_string(),
            )],
            "its directory",
        ),
        (
            "output-file a directory",
            vec![("output-file", empty_dir.path().display().to_string())],
            "is a directory: point output-file at a file",
        ),
        (
            "labels with an integer past 64 bits",
            vec![(
                "labels",
                r#"{"run": "1", "ids": [2, 123456789012345678901234567890]}"#.into(),
            )],
            "labels holds the integer 123456789012345678901234567890",
        ),
        (
            "labels an array",
            vec![("labels", "[1,2]".into())],
            "labels must be a JSON object",
        ),
        (
            "labels setting the run's own label",
            vec![("labels", r#"{"truss_push_run": "mine"}"#.into())],
            "labels may not set \"truss_push_run\"",
        ),
        (
            "payload with an integer past 64 bits",
            vec![("predict-payload", r#"{"n": 18446744073709551616}"#.into())],
            "predict-payload holds the integer 18446744073709551616",
        ),
        (
            "payload not JSON",
            vec![("predict-payload", "{nope".into())],
            "predict-payload is not valid JSON",
        ),
        (
            "payload not an object",
            vec![("predict-payload", "[1]".into())],
            "must be a JSON object",
        ),
        (
            "timeout too small",
            vec![("deploy-timeout-minutes", "5".into())],
            "between 10 and 1440",
        ),
        (
            "timeout too big",
            vec![("deploy-timeout-minutes", "1441".into())],
            "between 10 and 1440",
        ),
        (
            "timeout not a number",
            vec![("deploy-timeout-minutes", "ten".into())],
            "whole number",
        ),
        (
            "predict-timeout zero",
            vec![("predict-timeout", "0".into())],
            "predict-timeout must be between 1 and 3600 seconds",
        ),
        (
            "predict-timeout negative",
            vec![("predict-timeout", "-3".into())],
            "predict-timeout must be a whole number of seconds between 1 and 3600",
        ),
        (
            "deployment name with space",
            vec![("deployment-name", "my deploy".into())],
            "may contain only",
        ),
        (
            "deployment name with newline",
            vec![("deployment-name", "v1\nv2".into())],
            "may contain only",
        ),
        (
            "regional without environment",
            vec![("regional-environment", "true".into())],
            "no environment was given",
        ),
        (
            "boolean typo",
            vec![("cleanup", "ture".into())],
            "cleanup must be true or false",
        ),
        (
            "include-git-info typo",
            vec![("include-git-info", "maybe".into())],
            "include-git-info must be true or false",
        ),
        (
            "api url over plain http",
            vec![("api-url", "http://api.example.com".into())],
            "only sent over HTTPS",
        ),
        (
            "output format",
            vec![("output-format", "xml".into())],
            "output-format must be dotenv or json",
        ),
        (
            "poll interval",
            vec![("poll-interval-seconds", "0".into())],
            "poll-interval-seconds must be between 0.05 and 600 seconds",
        ),
        (
            "unknown command",
            vec![("command", "destroy".into())],
            "command must be one of deploy, plan, teardown, prune, rollback, drift",
        ),
        (
            "plan with another command",
            vec![("plan", "true".into()), ("command", "prune".into())],
            "plan: true means command: plan",
        ),
        (
            "pull request with a hash",
            vec![("pull-request", "#12".into())],
            "pull-request must be a pull or merge request number",
        ),
        (
            "pull request zero",
            vec![("command", "teardown".into()), ("pull-request", "0".into())],
            "pull-request must be a pull or merge request number",
        ),
        (
            "keep zero",
            vec![("command", "prune".into()), ("keep", "0".into())],
            "keep must be between 1 and 1000 deployments",
        ),
        (
            "older-than in weeks",
            vec![("command", "prune".into()), ("older-than", "2w".into())],
            "older-than must be whole hours or days",
        ),
        (
            "a deploy-only input given to prune",
            vec![
                ("command", "prune".into()),
                ("keep", "2".into()),
                ("cleanup", "true".into()),
            ],
            "command prune does not read cleanup",
        ),
        (
            "a lifecycle input given to deploy",
            vec![("keep", "2".into())],
            "command deploy does not read keep",
        ),
        (
            "to-deployment that is not an id",
            vec![
                ("command", "rollback".into()),
                ("promote", "true".into()),
                ("to-deployment", "../x".into()),
            ],
            "to-deployment must be a deployment id",
        ),
    ];
    assert!(cases.len() >= 20);
    for (why, overrides, expect) in &cases {
        let mut inv = Invocation::new(&fake).arg("truss-directory", good_s);
        for (k, v) in overrides {
            inv = match *k {
                "command" => inv.command(v),
                _ => inv.arg(k, v),
            };
        }
        if *why == "output format" {
            inv = inv.outputs_file("o.env");
        }
        let run = inv.run();
        assert_eq!(run.code, 2, "{why}: {run:?}");
        assert_eq!(run.status(), "deploy_failed", "{why}");
        let msg = run.out("error-message");
        assert!(
            msg.contains(expect),
            "{why}: expected {expect:?} in {msg:?}"
        );
        assert!(
            run.stderr.contains(expect) || run.stdout.contains(expect),
            "{why}: shown to the user"
        );
        assert_eq!(run.out("deployment-id"), "", "{why}");
    }
    let log = fake.requests();
    assert!(
        log.iter().all(|r| !r.endpoint.starts_with("s3.")),
        "no uploads: {log:?}"
    );
    assert!(log.iter().all(|r| !r.mutation), "no mutations");
}

#[test]
fn inputs_arrive_in_all_four_spellings() {
    // Three runs of one commit: the platform takes the same name again.
    let fake = fake(
        "deployments:\n  default: [[0, ACTIVE]]\nprepare_model_upload: {refuse_taken_names: false}\n",
    );
    let d = example_model();
    for (k_dir, k_key) in [
        ("INPUT_TRUSS-DIRECTORY", "INPUT_BASETEN-API-KEY"),
        ("INPUT_TRUSS_DIRECTORY", "INPUT_BASETEN_API_KEY"),
        ("TRUSS_DIRECTORY", "BASETEN_API_KEY"),
    ] {
        let mut inv = Invocation::new(&fake);
        inv.args.remove(0); // drop --baseten-api-key
        let run = inv
            .env(k_dir, d.to_str().unwrap())
            .env(k_key, API_KEY)
            .env("INPUT_CLEANUP", "false")
            .run();
        assert_eq!(run.status(), "success", "{k_dir}: {run:?}");
    }
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.endpoint != "rest.deactivate_deployment")
    );
}

#[test]
fn an_unknown_flag_still_writes_outputs() {
    let run = Invocation::bare().arg("no-such-flag", "x").run();
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.status(), "deploy_failed");
    assert!(
        run.out("error-message").contains("--no-such-flag"),
        "{run:?}"
    );
}

/// Asserts a refused run: exit 2, outputs written, the message shown, no
/// panic, and not one request to the platform.
fn assert_refused(fake: &fake_baseten::FakeBaseten, why: &str, run: &Outcome, expect: &str) {
    assert_eq!(run.code, 2, "{why}: {run:?}");
    assert_eq!(run.status(), "deploy_failed", "{why}");
    let msg = run.out("error-message");
    assert!(
        msg.contains(expect),
        "{why}: expected {expect:?} in {msg:?}"
    );
    assert!(!run.stderr.contains("panicked"), "{why}: {run:?}");
    assert_eq!(run.out("deployment-id"), "", "{why}");
    assert!(fake.requests().is_empty(), "{why}: {:?}", fake.requests());
}

#[test]
fn numbers_outside_their_documented_range_are_refused_before_any_request() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "poll-interval-seconds",
            &[
                "NaN", "inf", "-inf", "1e20", "1.8e19", "1e-300", "-1", "0.01", "601",
            ],
            "poll-interval-seconds must be between 0.05 and 600 seconds",
        ),
        (
            "wait-timeout-seconds",
            &["NaN", "inf", "1e20", "1.8e19", "1e-300", "-5", "0", "86401"],
            "wait-timeout-seconds must be between 0.1 and 86400 seconds",
        ),
        (
            "predict-timeout",
            &[
                "NaN",
                "1e20",
                "18446744073709551615",
                "3601",
                "0",
                "-3",
                "1.5",
            ],
            "predict-timeout must be",
        ),
        (
            "deploy-timeout-minutes",
            &["NaN", "inf", "1e20", "9", "1441", "-45", "45.5"],
            "deploy-timeout-minutes must be",
        ),
    ];
    for (input, values, expect) in cases {
        for value in *values {
            let run = Invocation::new(&fake)
                .model(example_model())
                .arg(input, value)
                .run();
            assert_refused(&fake, &format!("{input}={value}"), &run, expect);
        }
    }
    // Both ends of each range are accepted (a dry run makes no request).
    for (input, value) in [
        ("poll-interval-seconds", "600"),
        ("wait-timeout-seconds", "86400"),
        ("wait-timeout-seconds", "0.1"),
        ("predict-timeout", "3600"),
        ("predict-timeout", "1"),
    ] {
        let run = Invocation::new(&fake)
            .model(example_model())
            .arg(input, value)
            .arg("dry-run", "true")
            .run();
        assert_eq!(run.status(), "success", "{input}={value}: {run:?}");
    }
}

/// Runs the binary on `model` with raw (possibly non-UTF-8) extra
/// arguments and environment, pointed at `fake`; returns the exit code (-1
/// when it had to be killed after `RAW_RUN_TIMEOUT`), the outputs and
/// stderr.
fn run_raw(
    fake: &fake_baseten::FakeBaseten,
    model: &Path,
    args: &[OsString],
    env: &[(&str, OsString)],
) -> (i32, BTreeMap<String, String>, String) {
    let (dir, gh_out) = file_in_temp_dir("github_output", "");
    let mut child = truss_push(dir.path())
        .env("GITHUB_OUTPUT", &gh_out)
        .arg(format!("--app-url={}", fake.graphql_base()))
        .arg(format!("--api-url={}", fake.rest_base()))
        .arg(format!("--inference-url={}", fake.inference_template()))
        .arg(format!("--s3-endpoint={}", fake.s3_endpoint()))
        .arg(format!("--truss-directory={}", model.display()))
        .arg("--poll-interval-seconds=0.05")
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let started = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if started.elapsed() > RAW_RUN_TIMEOUT {
            child.kill().unwrap();
            child.wait().unwrap();
            break -1;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let outputs = parse_github_output(&std::fs::read_to_string(&gh_out).unwrap())
        .expect("GITHUB_OUTPUT is valid")
        .into_iter()
        .collect();
    (code, outputs, stderr)
}

/// A hang guard, not a speed check: a refused run ends before its first
/// request, so one still going after a minute is hanging.
const RAW_RUN_TIMEOUT: Duration = Duration::from_secs(60);

#[test]
fn input_values_that_are_not_utf8_are_refused_and_named() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let mangled = || OsString::from_vec(b"tru\xffe".to_vec());
    let key = || OsString::from(API_KEY);
    type Case = (Vec<OsString>, Vec<(&'static str, OsString)>, &'static str);
    let cases: Vec<Case> = vec![
        // A mangled dry-run must not fall back to false and deploy for real.
        (
            vec![],
            vec![("BASETEN_API_KEY", key()), ("INPUT_DRY-RUN", mangled())],
            "INPUT_DRY-RUN",
        ),
        (
            vec![],
            vec![
                ("BASETEN_API_KEY", key()),
                ("INPUT_DRY_RUN", mangled()),
                ("TRUSS_PUSH_DRY_RUN", "true".into()),
            ],
            "INPUT_DRY_RUN",
        ),
        (
            vec![],
            vec![("BASETEN_API_KEY", mangled())],
            "BASETEN_API_KEY",
        ),
        (
            vec![OsString::from_vec(b"--model-name=caf\xe9".to_vec())],
            vec![("BASETEN_API_KEY", key())],
            "--model-name",
        ),
        (
            vec!["--cleanup".into(), mangled()],
            vec![("BASETEN_API_KEY", key())],
            "--cleanup",
        ),
    ];
    for (args, env, named) in &cases {
        let mut args = args.clone();
        args.push("--deployment-name=ci-test".into());
        let (code, outputs, stderr) = run_raw(&fake, &example_model(), &args, env);
        assert_eq!(code, 2, "{named}: {outputs:?}\n{stderr}");
        assert_eq!(outputs["status"], "deploy_failed", "{named}");
        let msg = &outputs["error-message"];
        assert!(
            msg.contains(named) && msg.contains("not valid UTF-8"),
            "{named}: {msg:?}"
        );
        assert!(
            stderr.contains(named),
            "{named}: shown to the user: {stderr}"
        );
        assert!(fake.requests().is_empty(), "{named}: {:?}", fake.requests());
    }
}

#[test]
fn names_are_checked_before_any_request() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let long = "x".repeat(257);
    let cases: &[(&str, &str, &str)] = &[
        // Would become the predict host model-<id>-prod@127.0.0.1:8443/...
        (
            "environment",
            "prod@127.0.0.1:8443/x?",
            "environment may contain only",
        ),
        ("environment", "pro duction", "environment may contain only"),
        ("environment", &"e".repeat(49), "at most 48"),
        ("team", "ml\u{1b}[2J", "team contains a control character"),
        ("team", &long, "at most 256"),
        (
            "model-name",
            "model\u{1b}]8;;http://x\u{7}",
            "model-name contains a control character",
        ),
        (
            "model-name",
            "a\rb",
            "model-name contains a control character",
        ),
        ("model-name", &long, "at most 256"),
    ];
    for (input, value, expect) in cases {
        let run = Invocation::new(&fake)
            .model(example_model())
            .arg(input, value)
            .run();
        assert_refused(&fake, &format!("{input}={value:?}"), &run, expect);
    }
}

#[test]
fn a_default_deployment_name_from_odd_ci_variables_is_refused() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    for (sha, git_ref) in [
        ("ab/../x1234", "refs/heads/main"),
        ("abc1234def", "refs/pull/4 2/merge"),
        ("abc\u{1b}1234", "refs/heads/main"),
    ] {
        let mut inv = Invocation::new(&fake).model(example_model());
        inv.args.retain(|a| !a.starts_with("--deployment-name"));
        let run = inv.env("GITHUB_SHA", sha).env("GITHUB_REF", git_ref).run();
        assert_refused(
            &fake,
            &format!("{sha:?} {git_ref:?}"),
            &run,
            "set deployment-name",
        );
    }
    // The ordinary case still works.
    let mut inv = Invocation::new(&fake).model(example_model());
    inv.args.retain(|a| !a.starts_with("--deployment-name"));
    let run = inv
        .env("GITHUB_SHA", "abc1234def")
        .env("GITHUB_REF", "refs/pull/42/merge")
        .arg("dry-run", "true")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(run.stdout.contains("\"PR-42_abc1234\""), "{run:?}");
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(ok.success(), "mkfifo {}", path.display());
}

#[test]
fn config_and_event_files_that_are_not_regular_files_are_refused_without_hanging() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let key = || OsString::from(API_KEY);
    let name = || OsString::from("--deployment-name=ci-test");

    let fifo_model = tempfile::tempdir().unwrap();
    mkfifo(&fifo_model.path().join("config.yaml"));
    let dir_model = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir_model.path().join("config.yaml")).unwrap();
    let big_model = model_dir(&format!(
        "model_name: big\n{}",
        "# padding\n".repeat(1024 * 1024 / 10 + 1)
    ));
    type Case<'a> = (
        &'a str,
        &'a Path,
        Vec<OsString>,
        Vec<(&'a str, OsString)>,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "config.yaml is a FIFO",
            fifo_model.path(),
            vec![name()],
            vec![("BASETEN_API_KEY", key())],
            "is a FIFO (named pipe), not a regular file",
        ),
        (
            "config.yaml is a directory",
            dir_model.path(),
            vec![name()],
            vec![("BASETEN_API_KEY", key())],
            "is a directory, not a regular file",
        ),
        (
            "config.yaml is over 1 MiB",
            big_model.path(),
            vec![name()],
            vec![("BASETEN_API_KEY", key())],
            "larger than 1 MiB",
        ),
    ];

    let events = tempfile::tempdir().unwrap();
    let fifo_event = events.path().join("event.json");
    mkfifo(&fifo_event);
    let pr = |event: &Path| {
        vec![
            ("BASETEN_API_KEY", key()),
            ("GITHUB_SHA", OsString::from("abc1234def")),
            ("GITHUB_REF", OsString::from("refs/pull/42/merge")),
            ("GITHUB_EVENT_PATH", event.as_os_str().to_owned()),
        ]
    };
    let model = example_model();
    let event_cases = vec![
        (
            "GITHUB_EVENT_PATH is a FIFO",
            model.as_path(),
            vec![],
            pr(&fifo_event),
            "GITHUB_EVENT_PATH",
        ),
        (
            "GITHUB_EVENT_PATH is a directory",
            model.as_path(),
            vec![],
            pr(events.path()),
            "GITHUB_EVENT_PATH",
        ),
    ];
    for (why, model, args, env, expect) in cases.into_iter().chain(event_cases) {
        let (code, outputs, stderr) = run_raw(&fake, model, &args, &env);
        assert_eq!(code, 2, "{why}: {outputs:?}\n{stderr}");
        assert_eq!(outputs["status"], "deploy_failed", "{why}");
        let msg = &outputs["error-message"];
        assert!(msg.contains(expect), "{why}: {msg:?}");
        assert!(
            msg.contains("not a regular file") || msg.contains("larger than"),
            "{why}: {msg:?}"
        );
        assert!(fake.requests().is_empty(), "{why}: {:?}", fake.requests());
    }
}

#[test]
fn problems_with_the_truss_files_are_input_errors_before_any_request() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let fifo_inside = model_dir("model_name: m\n");
    mkfifo(&fifo_inside.path().join("pipe"));
    let fifo_ignore = model_dir("model_name: m\n");
    mkfifo(&fifo_ignore.path().join(".truss_ignore"));
    let loop_inside = model_dir("model_name: m\n");
    std::os::unix::fs::symlink("a", loop_inside.path().join("b")).unwrap();
    std::os::unix::fs::symlink("b", loop_inside.path().join("a")).unwrap();
    // The hash reads what a link points at: a device would never end, a
    // FIFO nobody writes into would block.
    let link_to_device = model_dir("model_name: m\n");
    std::os::unix::fs::symlink("/dev/zero", link_to_device.path().join("weights.bin")).unwrap();
    let link_to_fifo = model_dir("model_name: m\n");
    let outside = tempfile::tempdir().unwrap();
    mkfifo(&outside.path().join("pipe"));
    std::os::unix::fs::symlink(
        outside.path().join("pipe"),
        link_to_fifo.path().join("data"),
    )
    .unwrap();
    let odd_name = model_dir("model_name: m\n");
    {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::OsStr::from_bytes(b"weights-\xff.bin");
        std::fs::write(odd_name.path().join(name), b"x").unwrap();
    }
    for (why, dir, expect) in [
        ("a FIFO inside", fifo_inside.path(), "pipe"),
        (
            "a FIFO as .truss_ignore",
            fifo_ignore.path(),
            ".truss_ignore",
        ),
        ("a symlink loop", loop_inside.path(), "is a symlink to"),
        (
            "a symlink to a device",
            link_to_device.path(),
            "weights.bin is a symlink to /dev/zero, which is a device, not a regular file or directory",
        ),
        (
            "a symlink to a FIFO outside the truss",
            link_to_fifo.path(),
            "which is a FIFO (named pipe), not a regular file or directory",
        ),
        ("a file name that is not UTF-8", odd_name.path(), "weights-"),
    ] {
        let started = std::time::Instant::now();
        let run = Invocation::new(&fake).model(dir).run();
        assert_eq!(run.code, 2, "{why}: {run:?}");
        assert_eq!(run.status(), "deploy_failed", "{why}");
        assert!(run.out("error-message").contains(expect), "{why}: {run:?}");
        assert!(started.elapsed().as_secs() < 60, "{why}: did not hang");
    }
    assert!(
        fake.requests().is_empty(),
        "nothing was sent: {:?}",
        endpoints(&fake)
    );
}

#[test]
fn a_refused_model_name_is_not_reported_as_the_model_name() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let escape = "red\u{1b}[31mX\rY";
    let cases: &[(Option<&str>, Option<&str>, &str, &str)] = &[
        (
            Some(escape),
            None,
            "red\u{1b}",
            "model-name contains a control character",
        ),
        (
            None,
            Some("rtl\\u202eoverride"),
            "rtl\u{202e}",
            "invisible formatting character",
        ),
    ];
    for (input, in_config, shown, expect) in cases {
        let dir = match in_config {
            Some(n) => model_dir(&format!("model_name: \"{n}\"\n")),
            None => model_dir("model_name: fine\n"),
        };
        let mut inv = Invocation::new(&fake).model(dir.path());
        if let Some(n) = input {
            inv = inv.arg("model-name", n);
        }
        let run = inv.run();
        let why = format!("{input:?} {in_config:?}");
        assert_refused(&fake, &why, &run, expect);
        // The name that was refused for how it displays is not displayed.
        assert_eq!(run.out("model-name"), "", "{why}");
        assert!(!run.summary.contains(shown), "{why}: {}", run.summary);
    }
}
