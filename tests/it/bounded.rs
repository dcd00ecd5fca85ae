//! Bounded children and answers, and a model's own error failing fast: the
//! chain helper's process group and output, broken extra CA certificates.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::chain_harness::*;
use crate::harness::*;

const ACTIVE: &str = "deployments:\n  default: [[0, ACTIVE]]\n";
const READY_CHAIN: &str = "time_scale: 1\nchainlets:\n  default: [[0, MODEL_READY]]\n";

fn noisy_chain() -> std::path::PathBuf {
    fixture("chains/noisy/noisy_chain.py")
}

/// Whether process `pid` is gone: no such process, or a zombie (dead,
/// waiting for a parent that may never reap it in a container).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Waits (a few seconds at most) for `pid` to be gone: a SIGKILL is
/// delivered asynchronously.
fn wait_gone(pid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    gone(pid)
}

fn read_pid(file: &Path) -> u32 {
    std::fs::read_to_string(file)
        .expect("the chain's import wrote its grandchild's pid")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_grandchild_holding_the_helpers_pipes_neither_delays_nor_outlives_the_run() {
    let fake = fake(READY_CHAIN);
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("sleep.pid");
    let run = chain_run(&fake, &noisy_chain())
        .env("NOISY_GRANDCHILD_PIDFILE", pidfile.to_str().unwrap())
        .arg("predict-payload", r#"{"x": 1}"#)
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let pid = read_pid(&pidfile);
    // The `sleep 25` holds the helper's stderr open: waiting for the pipe's
    // end would have taken its 25 seconds.
    assert!(
        run.elapsed < Duration::from_secs(20),
        "the run waited for the grandchild: {:?}",
        run.elapsed
    );
    assert!(wait_gone(pid), "the grandchild {pid} outlived the run");
}

#[test]
fn a_cancel_during_the_chains_import_stops_what_it_started() {
    let fake = fake(READY_CHAIN);
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("sleep.pid");
    let file = pidfile.clone();
    let run = chain_run(&fake, &noisy_chain())
        .env("NOISY_GRANDCHILD_PIDFILE", pidfile.to_str().unwrap())
        .env("NOISY_HOLD_SECS", "60")
        .run_signalled_when(move || file.exists(), "INT");
    assert_ne!(run.code, 0, "{run:?}");
    let pid = read_pid(&pidfile);
    assert!(wait_gone(pid), "the grandchild {pid} outlived the cancel");
    assert!(
        !endpoints(&fake).iter().any(|e| e.contains("deploy_chain")),
        "nothing was deployed"
    );
}

#[test]
fn a_broken_certificate_in_ssl_cert_file_is_skipped_with_one_warning() {
    let fake = fake(ACTIVE);
    let good = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/certs/test-ca.pem"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("corporate.pem");
    std::fs::write(
        &bundle,
        format!("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n{good}"),
    )
    .unwrap();
    let run = Invocation::new(&fake)
        .model(example_model())
        .env("SSL_CERT_FILE", bundle.to_str().unwrap())
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let said = run.everything();
    assert_eq!(
        said.matches("skipped 1 certificate(s)").count(),
        1,
        "{run:?}"
    );
    assert!(said.contains("corporate.pem (certificate 1)"), "{said}");
}
