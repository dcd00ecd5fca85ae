//! `command: drift` against the fake: read only (the request log shows no
//! mutation), each target's state from the platform's reads and the audit
//! log, exit 7 on drift, 1 when a read failed (never "in sync"), 2 without
//! an environment.
//!
//! The fake runs on a manual clock: deployments are ACTIVE the moment they
//! are created, each deploy creating straight into production with the
//! content label and this key's audit entries.

use std::path::{Path, PathBuf};

use fake_baseten::FakeBaseten;
use fake_baseten::reqlog::LogEntry;
use fake_baseten::scenario::{Fault, OtherAction};
use serde_json::Value;

use crate::harness::*;

fn platform() -> FakeBaseten {
    fake(
        "name: drift\nmanual_clock: true\ndeactivation_seconds: 0\ndeployments:\n  default: [[0, ACTIVE]]\n",
    )
}

/// A deploy of `dirs` into production; the deployment ids, in order.
fn deploy(fake: &FakeBaseten, dirs: &[PathBuf], name: &str) -> Vec<String> {
    let run = Invocation::new(fake)
        .arg("truss-directory", target_list(dirs))
        .arg("environment", "production")
        .arg("deployment-name", name)
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    match dirs {
        [_] => vec![run.out("deployment-id").to_string()],
        _ => {
            let results: Value = serde_json::from_str(run.out("results")).unwrap();
            results
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["deployment-id"].as_str().unwrap().to_string())
                .collect()
        }
    }
}

/// A drift run (without the harness's default deployment name: drift
/// does not read it).
fn drift<'a>(fake: &'a FakeBaseten, targets: &str) -> Invocation<'a> {
    let mut inv = Invocation::new(fake);
    inv.args.retain(|a| !a.starts_with("--deployment-name"));
    inv.arg("command", "drift")
        .arg("truss-directory", targets)
        .arg("environment", "production")
}

/// The drift report's objects.
fn report(run: &Outcome) -> Vec<Value> {
    let v: Value = serde_json::from_str(run.out("drift-report"))
        .unwrap_or_else(|e| panic!("drift-report is JSON ({e}): {run:?}"));
    v.as_array().expect("an array").clone()
}

fn states(run: &Outcome) -> Vec<String> {
    report(run)
        .iter()
        .map(|t| t["state"].as_str().unwrap().to_string())
        .collect()
}

fn since(fake: &FakeBaseten, from: usize) -> Vec<LogEntry> {
    fake.requests().into_iter().skip(from).collect()
}

fn assert_read_only(log: &[LogEntry]) {
    assert!(
        !log.iter()
            .any(|e| e.mutation || e.endpoint.starts_with("s3.")),
        "drift only reads: {log:#?}"
    );
}

/// The run's page as a snapshot, each serving deployment named after its
/// target (the fake numbers deployments made side by side in any order).
fn page(name: &str, run: &Outcome) {
    let renamed: Vec<(String, String)> = report(run)
        .iter()
        .filter_map(|t| {
            let id = t["serving_deployment_id"].as_str()?;
            Some((id.to_string(), format!("{}01", t["name"].as_str()?)))
        })
        .collect();
    crate::snapshots::page_snapshot(name, run, &renamed);
}

fn write(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
}

#[test]
fn three_targets_in_sync_changed_in_the_repository_and_promoted_by_hand() {
    let fake = platform();
    let (_root, dirs) = model_dirs(&["alpha", "beta", "gamma"]);
    let first = deploy(&fake, &dirs, "first");
    // gamma: a second version goes out, then someone promotes the first
    // back by hand in the UI, and the repository is put back to the first
    // version's source: its label matches the source again, so only the
    // audit log tells.
    let original = std::fs::read_to_string(dirs[2].join("model/model.py")).unwrap();
    write(&dirs[2], "model/model.py", "# v2\n");
    deploy(&fake, &dirs[2..], "second");
    write(&dirs[2], "model/model.py", &original);
    fake.act(OtherAction::Promote {
        deployment: first[2].clone(),
        environment: "production".into(),
        steps: None,
        by: fake_baseten::scenario::Actor {
            source: Some("UI".into()),
            email: Some("ann@example.com".into()),
            ..Default::default()
        },
    });
    // beta: changed in the repository, never deployed.
    write(&dirs[1], "model/model.py", "# changed\n");

    let before = fake.requests().len();
    let run = drift(&fake, &target_list(&dirs)).run();
    assert_eq!(run.code, 7, "{run:?}");
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("drift"), "true");
    assert_eq!(
        states(&run),
        ["in-sync", "source-changed", "changed-outside"],
        "{run:?}"
    );
    let r = report(&run);
    assert_eq!(r[0]["serving_deployment_id"], first[0].as_str());
    assert_eq!(r[0]["serving_hash"], r[0]["source_hash"]);
    assert_ne!(r[1]["serving_hash"], r[1]["source_hash"]);
    assert!(r[1]["source_hash"].as_str().unwrap().len() == 64);
    let by = &r[2]["changed_by"];
    assert_eq!(by["source"], "UI", "{r:#?}");
    assert_eq!(by["email"], "ann@example.com");
    assert_eq!(by["event"], "MODEL_DEPLOYMENT_PROMOTED");
    assert_eq!(by["deployment_id"], first[2].as_str());
    assert!(
        r[2]["why"]
            .as_str()
            .unwrap()
            .starts_with("promoted by ann@example.com (UI) at "),
        "{r:#?}"
    );
    for t in &r {
        assert_eq!(t["environment"], "production");
        assert_eq!(t["kind"], "model");
    }
    // The summary is one table, a row per target, the state first.
    assert!(
        run.summary
            .contains("⚠️ Drift in production: 2 of 3 targets drifted (1 in sync)"),
        "{}",
        run.summary
    );
    assert!(
        run.summary.contains("| `changed-outside` |"),
        "{}",
        run.summary
    );
    page("drift_two_of_three_drifted", &run);
    let log = since(&fake, before);
    assert_read_only(&log);
    let audit_reads = log
        .iter()
        .filter(|e| e.endpoint == "rest.get_audit_logs")
        .count();
    assert_eq!(audit_reads, 3, "one audit log read per target: {log:#?}");
    let lists = log
        .iter()
        .filter(|e| e.endpoint.starts_with("graphql.models"))
        .count();
    assert_eq!(lists, 1, "the model list is read once: {log:#?}");

    // Every target in sync: exit 0, drift false.
    let run = drift(&fake, &target_list(&dirs[..1])).run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.out("drift"), "false");
    assert_eq!(states(&run), ["in-sync"]);
    page("drift_in_sync", &run);
}

#[test]
fn an_audit_log_that_answers_500_is_unknown_never_in_sync() {
    let fake = platform();
    let (_root, dirs) = model_dirs(&["alpha"]);
    deploy(&fake, &dirs, "first");
    // Every try answered 500 (a read is retried: `Retry-After: 0` keeps
    // the test quick without changing what the run is told).
    fake.add_fault(Fault {
        times: 0,
        retry_after: Some(0),
        ..Fault::status("rest.get_audit_logs", 500)
    });
    let before = fake.requests().len();
    let run = drift(&fake, &target_list(&dirs)).run();
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert_eq!(states(&run), ["unknown"], "{run:?}");
    assert_eq!(run.out("drift"), "false");
    let r = report(&run);
    assert!(
        r[0]["why"]
            .as_str()
            .unwrap()
            .contains("could not read the model's audit log"),
        "{r:#?}"
    );
    assert!(
        run.out("error-message").contains("never in sync"),
        "{run:?}"
    );
    let log = since(&fake, before);
    assert_read_only(&log);
    assert!(
        log.iter()
            .any(|e| e.endpoint == "rest.get_audit_logs" && e.status == Some(500))
    );
    page("drift_one_target_unknown", &run);
}

#[test]
fn a_model_never_deployed_has_drifted_and_a_chain_is_not_checked() {
    let fake = platform();
    let (root, dirs) = model_dirs(&["alpha"]);
    let chain = root.path().join("chain.py");
    std::fs::write(
        &chain,
        "import truss_chains as chains\n\n@chains.mark_entrypoint(\"c\")\nclass Front(chains.ChainletBase):\n    async def run_remote(self, x: str) -> str:\n        return x\n",
    )
    .unwrap();
    let targets = format!("{}\n{}", dirs[0].display(), chain.display());
    let before = fake.requests().len();
    let run = drift(&fake, &targets).run();
    assert_eq!(run.code, 7, "{run:?}");
    assert_eq!(states(&run), ["not-deployed", "not-checked"], "{run:?}");
    let r = report(&run);
    assert_eq!(r[0]["why"], "the model does not exist");
    assert!(r[0]["serving_deployment_id"].is_null());
    assert_eq!(r[1]["kind"], "chain");
    assert_read_only(&since(&fake, before));

    // A chain alone is not drift.
    let run = drift(&fake, chain.to_str().unwrap()).run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.out("drift"), "false");
}

#[test]
fn drift_without_an_environment_is_an_input_error_before_any_request() {
    let fake = platform();
    let (_root, dirs) = model_dirs(&["alpha"]);
    let mut inv = drift(&fake, &target_list(&dirs));
    inv.args.retain(|a| !a.starts_with("--environment"));
    let run = inv.run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.out("error-message")
            .contains("set environment (or promote: true for production)"),
        "{run:?}"
    );
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());
}

/// Hostile: a deployment someone else made with another key, carrying a
/// content label written by hand with this source's very hash, and an
/// audit log served oldest first that names a deployment since deleted.
/// The label matches; the log, ordered by time, shows another key put it
/// into production after this key's last promotion: changed-outside, not
/// in sync.
#[test]
fn a_label_copied_onto_a_deployment_made_with_another_key_is_changed_outside() {
    // The source's hash, as a deploy records it.
    let first = platform();
    let (_root, dirs) = model_dirs(&["alpha"]);
    let id = deploy(&first, &dirs, "first").remove(0);
    let labels = first
        .deployments()
        .into_iter()
        .find(|d| d.id == id)
        .and_then(|d| d.labels)
        .unwrap();
    let hash = labels["truss_push_content_hash"]
        .as_str()
        .unwrap()
        .to_string();

    let fake = fake(&format!(
        "name: drift\nmanual_clock: true\nmodels:\n  - name: alpha\n    deployments: [{{id: hand0001, name: by-hand, environment: production, labels: {{truss_push_content_hash: {hash}}}}}]\naudit_log:\n  order: recorded\n  entries:\n    - {{at: -3600, event_type: MODEL_DEPLOYMENT_PROMOTED, model: alpha, deployment: gone0001, environment: production}}\n    - {{at: -60, event_type: MODEL_DEPLOYED, model: alpha, deployment: hand0001, environment: production, by: {{api_key_prefix: otherkey}}}}\n"
    ));
    let run = drift(&fake, &target_list(&dirs)).run();
    assert_eq!(run.code, 7, "{run:?}");
    assert_eq!(states(&run), ["changed-outside"], "{run:?}");
    let r = report(&run);
    assert_eq!(r[0]["serving_hash"], r[0]["source_hash"], "{r:#?}");
    assert_eq!(r[0]["changed_by"]["api_key_prefix"], "otherkey", "{r:#?}");
    assert_eq!(r[0]["changed_by"]["event"], "MODEL_DEPLOYED");
    assert_eq!(r[0]["changed_by"]["deployment_id"], "hand0001");
}

/// The targets are read side by side: through a link with a round trip,
/// at least 8 connections carry drift's reads at once (the bound, 16
/// targets at a time, is `content::plan::at_once`'s unit test: an open
/// connection count can pass it, the pool keeping a connection it opened
/// while another came free).
#[test]
fn targets_are_read_side_by_side_and_bounded() {
    use fake_baseten::proxy::{Shape, ShapedLink};
    let fake = platform();
    let names: Vec<String> = (0..20).map(|i| format!("m{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let (_root, dirs) = model_dirs(&refs);
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .arg("environment", "production")
        .arg("max-parallel", "8")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    let link =
        ShapedLink::start_in_background(fake.addr(), Shape::parse("rtt=200ms").unwrap()).unwrap();
    let run = drift(&fake, &target_list(&dirs))
        .arg("app-url", link.url())
        .arg("api-url", link.url())
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(states(&run), vec!["in-sync"; 20], "{run:?}");
    let peak = link.peak_connections();
    assert!(peak >= 8, "peak {peak} connections");
}

/// The measurement in BENCHMARKS.md ("Reading many targets"), not a
/// check: 50 model targets, each with a 1 MiB file to hash, served in
/// production, read through a link with a 100 ms round trip. Times a plan
/// by content and a drift check of this build, and, when
/// `TRUSS_PUSH_BASELINE` names an older binary, that binary's plan
/// beside them. Run it with
/// `TRUSS_PUSH_BASELINE=… cargo test --test it drift::bench -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement for BENCHMARKS.md, not a check"]
fn bench_fifty_targets_through_a_100_ms_round_trip() {
    use fake_baseten::proxy::{Shape, ShapedLink};
    use std::time::Instant;

    let fake = platform();
    let names: Vec<String> = (0..50).map(|i| format!("m{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let (root, dirs) = model_dirs(&refs);
    let mut weights = vec![0u8; 1 << 20];
    for d in &dirs {
        fastrand::fill(&mut weights);
        std::fs::write(d.join("model/weights.bin"), &weights).unwrap();
    }
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .arg("environment", "production")
        .arg("max-parallel", "8")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    let link = ShapedLink::start_in_background(
        fake.addr(),
        Shape::parse(&std::env::var("TRUSS_PUSH_BENCH_SHAPE").unwrap_or("rtt=100ms".into()))
            .unwrap(),
    )
    .unwrap();
    let targets = target_list(&dirs);
    let timed = |bin: &str, args: &[&str]| {
        let mut cmd = std::process::Command::new(bin);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", root.path())
            .current_dir(root.path())
            .args([
                format!("--baseten-api-key={API_KEY}"),
                format!("--app-url={}", link.url()),
                format!("--api-url={}", link.url()),
                format!("--truss-directory={targets}"),
                "--environment=production".into(),
            ])
            .args(args);
        let started = Instant::now();
        let out = cmd.output().unwrap();
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        (took, out.status.code(), stdout + &stderr)
    };
    // TRUSS_PUSH_BENCH_BIN: a release build of this source to time
    // instead of the test's debug binary.
    let bench_bin = std::env::var("TRUSS_PUSH_BENCH_BIN").ok();
    let ours = bench_bin
        .as_deref()
        .unwrap_or(env!("CARGO_BIN_EXE_truss-push"));
    let plan = ["--plan=true", "--skip-unchanged=true"];
    let mut rows = Vec::new();
    if let Ok(baseline) = std::env::var("TRUSS_PUSH_BASELINE") {
        rows.push((
            "plan by content, baseline (one target after another)",
            timed(&baseline, &plan),
        ));
    }
    rows.push(("plan by content, this build", timed(ours, &plan)));
    rows.push(("drift, this build", timed(ours, &["--command=drift"])));
    for (what, (took, code, out)) in &rows {
        let unchanged = out.matches("  unchanged: ").count();
        let in_sync = out.matches("  in-sync: ").count();
        println!(
            "| {what} | {:.2} s | exit {} | {} |",
            took.as_secs_f64(),
            code.unwrap_or(-1),
            if in_sync > 0 {
                format!("{in_sync} of 50 in sync")
            } else {
                format!("{unchanged} of 50 left out as unchanged")
            }
        );
    }
    println!(
        "peak connections through the link: {}",
        link.peak_connections()
    );
}
