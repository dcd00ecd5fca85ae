//! Bounded children and answers, and a model's own error failing fast: the
//! chain helper's process group and output, answer caps, garbage answers,
//! broken extra CA certificates, a hung secrets check, and which failures
//! are retried (each retry said in the log).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fake_baseten::FakeBaseten;
use fake_baseten::proxy::{Fault, FaultProxy, Rule};
use fake_baseten::scenario::{Fault as FakeFault, Scenario};

use crate::chain_harness::*;
use crate::harness::*;

const ACTIVE: &str = "deployments:\n  default: [[0, ACTIVE]]\n";
const READY_CHAIN: &str = "time_scale: 1\nchainlets:\n  default: [[0, MODEL_READY]]\n";
/// The most the binary may hold at once, whatever it is sent.
const PEAK_RSS_MAX_KIB: u64 = 64 << 10;

fn noisy_chain() -> std::path::PathBuf {
    fixture("chains/noisy/noisy_chain.py")
}

/// A server answering every request with `200` and a JSON-looking body of
/// `bytes` bytes, sent chunked (no length to refuse it by) as fast as the
/// client reads; counts the requests.
fn flood_server(bytes: u64) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let counter = Arc::clone(&counter);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0u8; length];
                let _ = reader.read_exact(&mut body);
                counter.fetch_add(1, Ordering::SeqCst);
                let mut w = conn;
                let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
                if w.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let chunk = vec![b' '; 1 << 20];
                let mut sent = 0u64;
                let mut first = true;
                while sent < bytes {
                    let mut piece = chunk.clone();
                    if first {
                        piece[0] = b'[';
                        first = false;
                    }
                    let n = piece.len().min((bytes - sent) as usize);
                    let framed = [format!("{n:x}\r\n").as_bytes(), &piece[..n], b"\r\n"].concat();
                    if w.write_all(&framed).is_err() {
                        return;
                    }
                    sent += n as u64;
                }
                let _ = w.write_all(b"0\r\n\r\n");
            });
        }
    });
    (url, asked)
}

fn through(fake: &FakeBaseten, rule: Rule) -> FaultProxy {
    FaultProxy::builder(fake.addr())
        .rule(rule)
        .start_in_background()
        .expect("proxy starts")
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

/// Waits (a minute at most, for a loaded runner) for `pid` to be gone: a SIGKILL is
/// delivered asynchronously.
fn wait_gone(pid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(60);
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
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn a_chain_helper_writing_300_mib_and_github_answering_400_mb_stay_under_64_mib() {
    let fake = fake(READY_CHAIN);
    let (github, asked) = flood_server(400_000_000);
    let run = chain_run(&fake, &noisy_chain())
        .env("NOISY_STDERR_MIB", "300")
        .env("GITHUB_API_URL", &github)
        .env("GITHUB_REPOSITORY", "octo/repo")
        .env("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567")
        .env("GITHUB_REF", "refs/heads/main")
        .env("GITHUB_RUN_ID", "77")
        .arg("github-token", "ghs_canary_flood")
        .arg("github-deployment", "true")
        .arg("commit-status", "true")
        .arg("predict-payload", r#"{"x": 1}"#)
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(asked.load(Ordering::SeqCst) >= 1, "GitHub was never asked");
    assert!(
        run.stderr.contains("larger than 8 MiB"),
        "the GitHub warning names the cap: {run:?}"
    );
    eprintln!("peak RSS: {} KiB", run.peak_rss_kib);
    assert!(run.peak_rss_kib > 0, "the peak was measured");
    assert!(
        run.peak_rss_kib < PEAK_RSS_MAX_KIB,
        "peak RSS {} KiB: {run:?}",
        run.peak_rss_kib
    );
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
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
    // The `sleep 600` holds the helper's stderr open: waiting for the pipe's
    // end would take ten minutes, so a "did not hang" bound tells the two
    // apart on any runner.
    assert!(
        run.elapsed < Duration::from_secs(60),
        "the run waited for the grandchild: {:?}",
        run.elapsed
    );
    assert!(wait_gone(pid), "the grandchild {pid} outlived the run");
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
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
fn a_status_answer_past_its_cap_fails_the_deploy_naming_the_cap() {
    let fake = fake(ACTIVE);
    let (rest, asked) = flood_server(400_000_000);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("api-url", &rest)
        .arg("cleanup", "false")
        .run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(asked.load(Ordering::SeqCst) >= 1);
    assert!(
        run.out("error-message").contains("larger than 16 MiB"),
        "{run:?}"
    );
    eprintln!("peak RSS: {} KiB", run.peak_rss_kib);
    assert!(
        run.peak_rss_kib < PEAK_RSS_MAX_KIB,
        "peak RSS {} KiB",
        run.peak_rss_kib
    );
}

#[test]
fn a_huge_predict_answer_keeps_its_start_in_little_memory() {
    let fake = fake(ACTIVE);
    let (inference, asked) = flood_server(300_000_000);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("inference-url", format!("{inference}/{{prefix}}-{{id}}"))
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    let response = run.out("predict-response");
    assert_eq!(response.chars().count(), 4096);
    assert!(response.starts_with('['), "{response:.20}");
    eprintln!("peak RSS: {} KiB", run.peak_rss_kib);
    assert!(
        run.peak_rss_kib < PEAK_RSS_MAX_KIB,
        "peak RSS {} KiB",
        run.peak_rss_kib
    );
}

#[test]
fn garbage_answers_to_status_polls_fail_the_deploy_and_say_so() {
    let fake = fake("deployments:\n  default: [[0, BUILDING]]\n");
    // The key echoed where the quoted head is cut: no part of it may show.
    let page = format!(
        "\u{feff}<html><body>Proxy login required\r\n::error::forged</body></html>{API_KEY}"
    );
    let proxy = through(
        &fake,
        Rule::new(
            "portal",
            Fault::Status {
                status: 200,
                retry_after: None,
                body: Some(page),
                content_type: Some("text/html".into()),
            },
        )
        .method("GET")
        .path("/v1/models/"),
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("api-url", proxy.rest_base())
        // Without the garbage rule this run would end deploy_timeout after
        // its ten minutes; with it, well before.
        .arg("deploy-timeout-minutes", "10")
        .run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let msg = run.out("error-message");
    assert!(msg.contains("<html><body>Proxy login"), "{msg}");
    assert!(msg.contains("5 such answers in a row"), "{msg}");
    // The body's line break is shown escaped: it cannot start a line.
    assert!(msg.contains(r"\r\n::error::forged"), "{msg}");
    assert!(!run.everything().contains("\n::error::forged"), "{run:?}");
    assert!(!run.everything().contains(&API_KEY[..8]), "{run:?}");
    // The cleanup check read garbage too: the deployment is kept, and the
    // log says so and why.
    assert!(run.stderr.contains("so it is left running"), "{run:?}");
    assert!(
        !endpoints(&fake).contains(&"rest.deactivate_deployment".to_string()),
        "{run:?}"
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

#[test]
fn a_hung_secrets_check_holds_the_deploy_a_few_seconds_at_most() {
    let fake = fake(ACTIVE);
    let proxy = through(&fake, Rule::new("hang", Fault::Hang).path("/v1/teams/"));
    let run = secrets_check_failing_at(&fake, &proxy.rest_base());
    // The check waits 5 s; without that bound the REST call's minute and
    // its retries would hold the run for minutes: "did not hang" only.
    assert!(run.elapsed < Duration::from_secs(60), "{:?}", run.elapsed);
}

#[test]
fn a_gateway_error_on_predict_is_retried_and_each_retry_said() {
    let scenario = Scenario::from_yaml(ACTIVE)
        .unwrap()
        .with_api_key(API_KEY)
        .with_fault(FakeFault {
            times: 2,
            ..FakeFault::status("inference.predict", 503)
        });
    let fake = FakeBaseten::start_in_background(scenario).unwrap();
    let run = Invocation::new(&fake).model(example_model()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_in_order(
        &run.stdout,
        &[
            "predict answered HTTP 503",
            "(try 2 of 12)",
            "predict answered HTTP 503",
            "(try 3 of 12)",
            "Predict OK",
        ],
    );
}

/// A deploy whose cleanup deactivates (a new model's first deployment is
/// production, kept unless cleanup is set explicitly).
fn deactivating(fake: &FakeBaseten) -> Outcome {
    Invocation::new(fake)
        .model(example_model())
        .arg("cleanup", "true")
        .run()
}

/// A cleanup that failed without a signal says, where people look (the
/// error message, the error annotation), what it may have left running and
/// to deactivate it, and names it in `deployment-id`.
fn said_left_running(run: &Outcome) {
    assert_eq!(run.code, 5, "{run:?}");
    let id = run.out("deployment-id");
    assert!(!id.is_empty(), "{run:?}");
    let said = format!(
        "cleanup did not finish: deployment {id} may be left running (no deactivation of it was confirmed); deactivate what is left in Baseten: deactivating the deployment"
    );
    assert!(run.out("error-message").contains(&said), "{run:?}");
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with("error: cleanup_failed: ") && l.contains(&said)),
        "{run:?}"
    );
}

#[test]
fn a_deactivation_answered_500_fails_cleanup_at_once() {
    let scenario = Scenario::from_yaml(ACTIVE)
        .unwrap()
        .with_api_key(API_KEY)
        .with_fault(FakeFault {
            times: 0,
            ..FakeFault::status("rest.deactivate_deployment", 500)
        });
    let fake = FakeBaseten::start_in_background(scenario).unwrap();
    let run = deactivating(&fake);
    assert_eq!(run.status(), "cleanup_failed", "{run:?}");
    assert!(run.out("error-message").contains("500"), "{run:?}");
    said_left_running(&run);
    let tries = endpoints(&fake)
        .iter()
        .filter(|e| *e == "rest.deactivate_deployment")
        .count();
    assert_eq!(tries, 1, "a 500 is the platform's answer, not a blip");
}

/// The deactivate hangs past cleanup's allowance, no signal: the scripted
/// clock (debug builds) leaves it 3 s of its 60.
#[test]
fn a_hung_deactivation_without_a_signal_says_what_may_be_left_running() {
    if !cfg!(debug_assertions) {
        return;
    }
    let fake = fake(ACTIVE);
    let proxy = through(
        &fake,
        Rule::new("stuck", Fault::Hang).path_like("/v1/models/*/deployments/*/deactivate"),
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("api-url", proxy.rest_base())
        .arg("cleanup", "true")
        .env("TRUSS_PUSH_TEST_CLOCK", "Cleanup#1+57")
        .run();
    assert_eq!(run.status(), "cleanup_failed", "{run:?}");
    assert!(
        !proxy.faulted().is_empty(),
        "the deactivate was held: {run:?}"
    );
    said_left_running(&run);
}

#[test]
fn a_deactivation_answered_503_is_retried_and_said() {
    let scenario = Scenario::from_yaml(ACTIVE)
        .unwrap()
        .with_api_key(API_KEY)
        .with_fault(FakeFault::status("rest.deactivate_deployment", 503));
    let fake = FakeBaseten::start_in_background(scenario).unwrap();
    let run = deactivating(&fake);
    assert_eq!(run.status(), "success", "{run:?}");
    assert_in_order(
        &run.stdout,
        &[
            "deactivating the deployment: HTTP 503",
            "(try 2 of 8)",
            "Deactivated",
        ],
    );
}
