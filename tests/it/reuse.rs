//! Reuse by content (`skip-unchanged`): a revert to the source of an older
//! deployment promotes that deployment instead of building — activated
//! first when inactive, smoke-tested like any deploy into the environment
//! (before the promote with `promotion: after-predict`), never cleaned up
//! — as the fake's request log shows: no S3 request, no create.
//!
//! The fake runs on a manual clock: deployments are ACTIVE the moment they
//! are created, and the first one turns INACTIVE at 100 s.

use std::path::Path;

use fake_baseten::FakeBaseten;
use fake_baseten::reqlog::LogEntry;

use crate::harness::*;

const LABEL: &str = "truss_push_content_hash";
const CONFIG: &str = "model_name: by-content\nresources:\n  cpu: '1'\n";

fn platform(extra: &str) -> FakeBaseten {
    fake(&format!(
        "name: by-content\nmanual_clock: true\ndeactivation_seconds: 0\nactivation_seconds: 0\ndeployments:\n  default: [[0, ACTIVE]]\n  sequence: [[[0, ACTIVE], [100, INACTIVE]]]\n{extra}"
    ))
}

fn a_truss() -> tempfile::TempDir {
    let dir = model_dir(CONFIG);
    std::fs::write(dir.path().join("model/weights.bin"), b"v1").unwrap();
    dir
}

fn push<'a>(fake: &'a FakeBaseten, dir: &Path, name: &str) -> Invocation<'a> {
    Invocation::new(fake)
        .model(dir)
        .arg("environment", "production")
        .arg("skip-unchanged", "true")
        .arg("predict-payload", r#"{"x": 1}"#)
        .arg("deployment-name", name)
}

fn since(fake: &FakeBaseten, from: usize) -> Vec<LogEntry> {
    fake.requests().into_iter().skip(from).collect()
}

fn count(log: &[LogEntry], prefix: &str) -> usize {
    log.iter()
        .filter(|e| e.endpoint.starts_with(prefix))
        .count()
}

/// The index of the first request to `endpoint` in `log`.
fn at(log: &[LogEntry], endpoint: &str) -> usize {
    log.iter()
        .position(|e| e.endpoint == endpoint)
        .unwrap_or_else(|| panic!("no {endpoint}: {log:#?}"))
}

/// v1 deployed (the first deployment), then v2 over it; the truss is back
/// at v1 when this returns, the first deployment INACTIVE. Answers both ids.
fn deploy_then_change(fake: &FakeBaseten, dir: &Path, second: &[(&str, &str)]) -> (String, String) {
    let run = push(fake, dir, "v1").run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("reused"), "false", "{run:?}");
    let v1 = run.out("deployment-id").to_string();
    std::fs::write(dir.join("model/weights.bin"), b"v2").unwrap();
    let mut run = push(fake, dir, "v2");
    for (k, v) in second {
        run = run.arg(k, v);
    }
    let run = run.run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("reused"), "false", "{run:?}");
    let v2 = run.out("deployment-id").to_string();
    assert_ne!(v1, v2);
    std::fs::write(dir.join("model/weights.bin"), b"v1").unwrap();
    fake.clock().set(100.0);
    (v1, v2)
}

#[test]
fn a_revert_promotes_the_old_deployment_and_builds_nothing() {
    let fake = platform("activation_inactive_seconds: 0");
    let dir = a_truss();
    let (v1, v2) = deploy_then_change(&fake, dir.path(), &[]);
    let before = fake.requests().len();
    let run = push(&fake, dir.path(), "v1-again")
        .arg("cleanup", "true")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("reused"), "true", "{run:?}");
    assert_eq!(run.out("unchanged"), "false", "{run:?}");
    assert_eq!(run.out("deployment-id"), v1, "what serves, read");
    assert_eq!(run.out("previous-deployment-id"), v2);
    let log = since(&fake, before);
    assert_eq!(count(&log, "s3."), 0, "no upload: {log:#?}");
    assert_eq!(
        count(&log, "graphql.create_model"),
        0,
        "no create: {log:#?}"
    );
    assert_eq!(count(&log, "rest.create"), 0, "no create: {log:#?}");
    assert_eq!(
        count(&log, "rest.deactivate_deployment"),
        0,
        "cleanup never applies: {log:#?}"
    );
    // Activated, then promoted, then smoke-tested.
    let (activate, promote, predict) = (
        at(&log, "rest.activate_deployment"),
        at(&log, "rest.promote"),
        at(&log, "inference.predict"),
    );
    assert!(activate < promote && promote < predict, "{log:#?}");
    assert!(log[activate].path.contains(&v1) && log[promote].path.contains("production"));
    let env = fake.environment("by-content", "production").unwrap();
    assert!(format!("{env:?}").contains(&v1), "{env:?}");
    assert!(
        run.summary
            .contains(&format!("Reused: deployment {v1} (v1, built ")),
        "{}",
        run.summary
    );
}

#[test]
fn a_reused_deployment_is_priced_once_it_serves() {
    // The model's deployments run on A10Gx4x16 (0.02012 USD a minute),
    // 1 to 3 replicas.
    let fake = platform(
        "activation_inactive_seconds: 0\ndeployment_settings: {by_model: {by-content: {instance_type: A10Gx4x16, min_replica: 1, max_replica: 3}}}",
    );
    let dir = a_truss();
    let (v1, v2) = deploy_then_change(&fake, dir.path(), &[]);
    let before = fake.requests().len();
    let run = push(&fake, dir.path(), "v1-again").run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("reused"), "true", "{run:?}");
    assert_eq!(run.out("deployment-id"), v1);
    assert_eq!(
        (run.out("hourly-price-min"), run.out("hourly-price-max")),
        ("1.21", "3.62"),
        "{run:?}"
    );
    assert!(
        run.summary.contains(&format!(
            r"Costs \$1.21–\$3.62 per hour: 1–3 replicas of A10Gx4x16 (1 × A10G); against {v2}, which it replaces (\$1.21–\$3.62 per hour): ±\$0.00 at the minimum, ±\$0.00 at the maximum"
        )),
        "{}",
        run.summary
    );
    // What serves is priced after the promote that put it there.
    let log = since(&fake, before);
    let promote = at(&log, "rest.promote");
    let last_price = log
        .iter()
        .rposition(|e| e.endpoint == "rest.list_instance_type_prices")
        .expect("priced");
    assert!(promote < last_price, "{log:#?}");
}

#[test]
fn inactive_after_the_runs_own_activate_is_waking() {
    // The platform still shows INACTIVE for a while after the activate.
    let fake = platform("activation_inactive_seconds: 30");
    let dir = a_truss();
    let (v1, _) = deploy_then_change(&fake, dir.path(), &[]);
    let run = push(&fake, dir.path(), "v1-again").run_stepping_clock(&[
        ("rest.activate_deployment", 110.0),
        ("rest.get_deployment", 140.0),
    ]);
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("reused"), "true", "{run:?}");
    assert_eq!(run.out("deployment-id"), v1);
    assert!(
        run.stdout
            .contains("status INACTIVE (in progress) (waking after this run's activate)"),
        "{run:?}"
    );
}

#[test]
fn with_after_predict_the_reused_deployment_is_tested_before_the_promote() {
    let fake = platform("activation_inactive_seconds: 0");
    let dir = a_truss();
    let (v1, v2) = deploy_then_change(&fake, dir.path(), &[]);
    let before = fake.requests().len();
    let run = push(&fake, dir.path(), "v1-again")
        .arg("promotion", "after-predict")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("reused"), "true", "{run:?}");
    assert_eq!(run.out("deployment-id"), v1);
    assert_eq!(run.out("previous-deployment-id"), v2);
    assert_eq!(run.out("rolled-back"), "false");
    let log = since(&fake, before);
    assert_eq!(count(&log, "s3."), 0, "{log:#?}");
    let promote = at(&log, "rest.promote");
    let predicts: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, e)| e.endpoint == "inference.predict")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(predicts.len(), 2, "{log:#?}");
    // The reused deployment itself, before the promote; then production.
    assert!(predicts[0] < promote && promote < predicts[1], "{log:#?}");
    assert!(
        format!("{:?}{}", log[predicts[0]].host, log[predicts[0]].path).contains(&v1),
        "{:?}",
        log[predicts[0]]
    );
    assert!(
        log[predicts[1]].path.ends_with("/production/predict"),
        "{:?}",
        log[predicts[1]]
    );
    assert!(at(&log, "rest.activate_deployment") < predicts[0]);
}

/// The content hash the binary prints for the truss in `dir` (a first
/// deploy against a fake of its own).
fn hash_of(dir: &Path) -> String {
    let fake = platform("");
    let run = push(&fake, dir, "probe").run();
    let at = run.stdout.find("Content hash ").expect("the hash is said") + 13;
    run.stdout[at..at + 64].to_string()
}

/// A label is a claim: a foreign deployment carrying this source's hash
/// without truss-push's run label is never reused (the run builds); one
/// carrying both, whose config the platform does not keep, is reused on
/// the hash alone, and the log says the hash decided.
#[test]
fn a_hash_label_written_by_hand_on_a_foreign_deployment() {
    let dir = a_truss();
    let hash = hash_of(dir.path());
    let scenario = |labels: &str| {
        platform(&format!(
            "models:\n  - name: by-content\n    environments: [production]\n    deployments:\n      - {{id: serving01, name: serving, environment: production, created_at: -100}}\n      - {{id: theirs01, name: theirs, created_at: -50, labels: {labels}}}\n"
        ))
    };
    let fake = scenario(&format!("{{{LABEL}: '{hash}'}}"));
    let run = push(&fake, dir.path(), "v1").run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("reused"), "false", "{run:?}");
    assert!(
        run.stdout
            .contains("deployment theirs01 carries this source's hash but no truss_push_run label"),
        "{run:?}"
    );
    assert_eq!(
        count(&fake.requests(), "graphql.create_model") + count(&fake.requests(), "rest.create"),
        1,
        "built"
    );
    assert_eq!(count(&fake.requests(), "rest.promote"), 0);

    // Both labels, but the config.yaml the platform keeps for it is not
    // this truss's: its labels do not describe it, and the run builds.
    let forged = platform(&format!(
        "models:\n  - name: by-content\n    environments: [production]\n    deployments:\n      - {{id: serving01, name: serving, environment: production, created_at: -100}}\n      - {{id: theirs01, name: theirs, created_at: -50, raw_config: \"model_name: something-else\\n\", labels: {{{LABEL}: '{hash}', truss_push_run: forged}}}}\n"
    ));
    let run = push(&forged, dir.path(), "v1").run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("reused"), "false", "{run:?}");
    assert!(
        run.everything().contains("deployment theirs01 carries this source's hash but the config.yaml the platform keeps for it differs"),
        "{run:?}"
    );
    assert_eq!(count(&forged.requests(), "rest.promote"), 0);
    let configs_read = forged
        .requests()
        .into_iter()
        .filter(|e| e.endpoint == "rest.get_deployment_config" && e.path.contains("theirs01"))
        .count();
    assert_eq!(configs_read, 1);

    let fake = scenario(&format!("{{{LABEL}: '{hash}', truss_push_run: forged}}"));
    let run = push(&fake, dir.path(), "v1").run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("reused"), "true", "{run:?}");
    assert_eq!(run.out("deployment-id"), "theirs01");
    assert!(
        run.stdout.contains("the platform keeps no config.yaml for deployment theirs01: its content hash label decides"),
        "{run:?}"
    );
    assert_eq!(count(&fake.requests(), "s3."), 0);
}

/// Another run moves the environment while the reused deployment wakes:
/// the environment is read again before the promote, and nothing is
/// promoted over a deployment this run did not see.
#[test]
fn a_deploy_racing_the_reuse_is_never_promoted_over() {
    let fake = platform(
        "activation_inactive_seconds: 0\nmodels:\n  - name: by-content\n    environments: [production]\n    deployments: [{id: other01, name: other, created_at: -500}]\nothers:\n  - on: rest.activate_deployment\n    nth: 1\n    action: {promote: {deployment: other01, environment: production}}\n",
    );
    let dir = a_truss();
    deploy_then_change(&fake, dir.path(), &[]);
    let before = fake.requests().len();
    let run = push(&fake, dir.path(), "v1-again").run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(
        run.out("error-message")
            .contains("production moved since it was first read"),
        "{run:?}"
    );
    assert_eq!(
        run.out("deployment-id"),
        "other01",
        "what serves, read: {run:?}"
    );
    let log = since(&fake, before);
    assert_eq!(count(&log, "rest.promote"), 0, "{log:#?}");
    assert_eq!(count(&log, "rest.deactivate"), 0, "{log:#?}");
    assert_eq!(count(&log, "s3."), 0, "{log:#?}");
}
