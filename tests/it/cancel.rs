//! Cancellation: GitHub sends SIGINT, then SIGTERM 7.5 s later. The binary
//! must stop, clean up what it created, write outputs and exit non-zero
//! within 5 s.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fake_baseten::FakeBaseten;

use crate::harness::*;

pub const EXISTING: &str = "teams: [{id: t1, name: ml, default: true}]\nmodels:\n  - {id: oldmodel, name: hello-truss-push, team: ml, deployments: [{id: olddep, name: v1, status: ACTIVE, environment: production}]}\ndeployments:\n  default: [[0, BUILDING]]\n";

fn cancel_with(signal: &str) {
    let fake = fake(EXISTING);
    cancel_at(
        &fake,
        signal,
        "rest.get_deployment",
        example_model().to_str().unwrap(),
        &[],
    );
    assert!(
        endpoints(&fake)
            .iter()
            .any(|e| e == "rest.deactivate_deployment"),
        "the created deployment was deactivated"
    );
}

/// Starts a deploy of `model` (with `extra` flags), sends `signal` once the
/// fake has answered `endpoint`, and checks the run stopped in time with its
/// outputs written, naming the deployment if one was created.
fn cancel_at(
    fake: &FakeBaseten,
    signal: &str,
    endpoint: &str,
    model: &str,
    extra: &[String],
) -> std::collections::BTreeMap<String, String> {
    cancel_at_ending(fake, signal, endpoint, model, extra, 130)
}

/// [`cancel_at`], the run ending with exit `code`.
fn cancel_at_ending(
    fake: &FakeBaseten,
    signal: &str,
    endpoint: &str,
    model: &str,
    extra: &[String],
    code: i32,
) -> std::collections::BTreeMap<String, String> {
    let (dir, gh_out) = file_in_temp_dir("out", "");
    let child = truss_push(dir.path())
        .env("GITHUB_OUTPUT", &gh_out)
        .args([
            format!("--truss-directory={model}"),
            format!("--baseten-api-key={API_KEY}"),
            format!("--app-url={}", fake.graphql_base()),
            format!("--api-url={}", fake.rest_base()),
            format!("--inference-url={}", fake.inference_template()),
            format!("--s3-endpoint={}", fake.s3_endpoint()),
            "--deployment-name=cancel-me".into(),
            "--poll-interval-seconds=0.1".into(),
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the run reached the phase under test.
    let started = Instant::now();
    while !endpoints(fake).iter().any(|e| e == endpoint) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never reached the wait"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = Instant::now();
    let ok = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    // The phase under test would go on for ever: "did not hang" only; what
    // cleanup did is asserted from the fake below.
    assert!(took < Duration::from_secs(60), "stopped in {took:?}");
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let outputs: std::collections::BTreeMap<_, _> =
        fake_baseten::runner::parse_github_output(&std::fs::read_to_string(&gh_out).unwrap())
            .unwrap()
            .into_iter()
            .collect();
    assert_eq!(outputs["status"], "deploy_failed");
    assert!(outputs["error-message"].contains(signal), "{outputs:?}");
    let created: Vec<_> = fake
        .deployments()
        .into_iter()
        .filter(|d| d.name == "cancel-me")
        .collect();
    match created.as_slice() {
        [] => assert_eq!(outputs["deployment-id"], ""),
        [d] => assert_eq!(outputs["deployment-id"], d.id),
        many => panic!("created more than once: {many:?}"),
    }
    outputs
}

#[test]
fn a_signal_during_packaging_stops_the_run_in_time() {
    // A sparse 64 GiB file: packaging it would take minutes.
    let dir = model_dir("model_name: huge\n");
    let f = std::fs::File::create(dir.path().join("weights.bin")).unwrap();
    f.set_len(64 << 30).unwrap();
    drop(f);
    let fake = fake(EXISTING);
    cancel_at(
        &fake,
        "HUP",
        "graphql.model_s3_upload_credentials",
        dir.path().to_str().unwrap(),
        &[],
    );
    assert!(mutations(&fake).is_empty(), "nothing was created");
}

#[test]
fn sigint_cleans_up_writes_outputs_and_exits_130() {
    cancel_with("INT");
}

#[test]
fn sigterm_does_the_same() {
    cancel_with("TERM");
}

#[test]
fn a_signal_while_parts_are_hashed_and_sent_stops_the_run_in_time() {
    // 1 GiB of zeros: packed in seconds, then hashed and sent part by part.
    let dir = model_dir("model_name: big\n");
    let f = std::fs::File::create(dir.path().join("weights.bin")).unwrap();
    f.set_len(1 << 30).unwrap();
    drop(f);
    let fake = fake(EXISTING);
    cancel_at(
        &fake,
        "TERM",
        "s3.create_multipart_upload",
        dir.path().to_str().unwrap(),
        &[],
    );
    assert!(mutations(&fake).is_empty(), "nothing was created");
}

#[test]
fn sigterm_mid_upload_aborts_it_and_leaves_no_part() {
    // 1 GiB of zeros: 128 parts, 24 in flight when the first is stored.
    let dir = model_dir("model_name: big\n");
    let f = std::fs::File::create(dir.path().join("weights.bin")).unwrap();
    f.set_len(1 << 30).unwrap();
    drop(f);
    let fake = fake(EXISTING);
    cancel_at(
        &fake,
        "TERM",
        "s3.upload_part",
        dir.path().to_str().unwrap(),
        &[],
    );
    let events = fake.s3().events();
    let aborts = events
        .iter()
        .filter(|e| e.operation == "s3.abort_multipart_upload")
        .count();
    assert!(aborts >= 1, "an abort was sent: {events:#?}");
    assert_eq!(fake.s3().open_uploads(), 0, "no part remains");
    assert!(fake.s3().objects().is_empty());
    assert!(mutations(&fake).is_empty(), "nothing was created");
}

#[test]
fn a_hanging_deactivate_after_a_signal_still_ends_in_time() {
    use fake_baseten::proxy::{Fault, FaultProxy, Rule};
    let fake = fake(EXISTING);
    let proxy = FaultProxy::builder(fake.addr())
        .rule(
            Rule::new("stuck", Fault::Hang)
                .method("POST")
                .path_like("/v1/models/*/deployments/*/deactivate"),
        )
        .start_in_background()
        .unwrap();
    // Cleanup could not finish: exit 8, and the outputs say what is left.
    let outputs = cancel_at_ending(
        &fake,
        "INT",
        "rest.get_deployment",
        example_model().to_str().unwrap(),
        &[format!("--api-url={}", proxy.rest_base())],
        8,
    );
    assert!(
        proxy
            .faulted()
            .iter()
            .any(|e| e.path.ends_with("/deactivate")),
        "the deactivate was sent and never answered"
    );
    let left = &outputs["deployment-id"];
    assert!(!left.is_empty(), "{outputs:?}");
    let msg = &outputs["error-message"];
    assert!(
        msg.contains("cancelled by SIGINT, and cleanup did not finish")
            && msg.contains(&format!("deployment {left} may be left running")),
        "{outputs:?}"
    );
}

#[test]
fn a_slow_deactivate_that_ends_within_the_signals_seconds_is_a_cleanup_that_ran() {
    use fake_baseten::proxy::{Fault, FaultProxy, Rule};
    let fake = fake(EXISTING);
    // The answer comes in three pieces half a second apart: slow, not hung.
    let proxy = FaultProxy::builder(fake.addr())
        .rule(
            Rule::new(
                "slow",
                Fault::Drip {
                    bytes: 64,
                    interval_ms: 500,
                },
            )
            .path_like("/v1/models/*/deployments/*/deactivate"),
        )
        .start_in_background()
        .unwrap();
    let outputs = cancel_at(
        &fake,
        "TERM",
        "rest.get_deployment",
        example_model().to_str().unwrap(),
        &[format!("--api-url={}", proxy.rest_base())],
    );
    assert!(!outputs["deployment-id"].is_empty());
    assert!(
        !outputs["error-message"].contains("cleanup did not finish"),
        "{outputs:?}"
    );
}
