//! `command: rollback`: the environment goes back to the deployment that
//! served it before — the one the audit log names, or `to-deployment` —
//! without a build: activated when inactive, promoted, smoke-tested
//! through the environment, as the fake's request log shows (no S3
//! request, no create, nothing deactivated); every refusal before any
//! mutation; what serves always from a read.

use fake_baseten::FakeBaseten;
use fake_baseten::reqlog::LogEntry;

use crate::harness::*;

const MODEL: &str = "rb-model";

/// A model with two deployments: `old01` (v1, INACTIVE, production before)
/// and `cur01` (v2, production now), the audit log saying so; `extra`
/// adds scenario keys (`audit` replaces the log's entries).
fn platform(audit: &str, extra: &str) -> FakeBaseten {
    fake(&format!(
        "name: rb\nmanual_clock: true\nactivation_seconds: 0\nmodels:\n  - name: {MODEL}\n    environments: [production, staging]\n    deployments:\n      - {{id: old01, name: v1, status: INACTIVE, created_at: -300}}\n      - {{id: cur01, name: v2, environment: production, created_at: -200}}\n      - {{id: bad01, name: v0, status: BUILD_FAILED, created_at: -400}}\n      - {{id: new01, name: v3, created_at: -100}}\n  - name: other-model\n    deployments:\n      - {{id: oth01, name: x}}\naudit_log:\n  entries:\n{audit}{extra}"
    ))
}

/// The log as the platform writes it: v1 promoted, then v2.
const HISTORY: &str = "    - {at: -250, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: old01, environment: production}\n    - {at: -150, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: cur01, environment: production}\n";

fn rollback<'a>(fake: &'a FakeBaseten, dir: &std::path::Path) -> Invocation<'a> {
    Invocation::new(fake)
        .model(dir)
        .command("rollback")
        .arg("environment", "production")
        .arg("predict-payload", r#"{"x": 1}"#)
}

/// Every request that changes something: a GraphQL mutation or a REST or
/// S3 request that is not a read.
fn changes(fake: &FakeBaseten) -> Vec<LogEntry> {
    fake.requests()
        .into_iter()
        .filter(|e| {
            e.mutation
                || (e.endpoint.starts_with("rest.") && e.method != "GET")
                || e.endpoint.starts_with("s3.")
        })
        .collect()
}

fn at(log: &[LogEntry], endpoint: &str) -> usize {
    log.iter()
        .position(|e| e.endpoint == endpoint)
        .unwrap_or_else(|| panic!("no {endpoint}: {log:#?}"))
}

fn truss() -> tempfile::TempDir {
    model_dir(&format!("model_name: {MODEL}\n"))
}

#[test]
fn an_inactive_previous_deployment_is_activated_promoted_and_tested() {
    let fake = platform(HISTORY, "");
    let dir = truss();
    let run = rollback(&fake, dir.path())
        .arg("to-deployment", "old01")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    assert_eq!(run.out("deployment-id"), "old01", "what serves, read");
    assert_eq!(run.out("previous-deployment-id"), "cur01");
    let log = fake.requests();
    assert!(
        !log.iter().any(|e| e.endpoint.starts_with("s3.")),
        "no S3: {log:#?}"
    );
    assert!(
        !log.iter().any(|e| e.endpoint.contains("create")),
        "no create: {log:#?}"
    );
    assert!(
        !log.iter().any(|e| e.endpoint.contains("deactivate")),
        "{log:#?}"
    );
    let (activate, promote, predict) = (
        at(&log, "rest.activate_deployment"),
        at(&log, "rest.promote"),
        at(&log, "inference.predict"),
    );
    assert!(activate < promote && promote < predict, "{log:#?}");
    assert!(
        log[predict].path.ends_with("/production/predict"),
        "{:?}",
        log[predict]
    );
    let env = fake.environment(MODEL, "production").unwrap();
    assert!(format!("{env:?}").contains("old01"), "{env:?}");
    // The page says what the rollback did, then what serves from a read,
    // once each.
    assert!(
        run.summary.starts_with(
            "## ✅ Rollback of production: back to deployment old01, in place of cur01\n\n**production serves:** deployment `old01`"
        ),
        "{}",
        run.summary
    );
    crate::snapshots::page_snapshot("rollback_activated_and_promoted", &run, &[]);
}

#[test]
fn a_deployment_of_another_model_is_refused_before_any_change() {
    let fake = platform(HISTORY, "");
    let dir = truss();
    let run = rollback(&fake, dir.path())
        .arg("to-deployment", "oth01")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.out("error-message")
            .contains("deployment oth01 is not a deployment of model rb-model"),
        "{run:?}"
    );
    assert_eq!(changes(&fake), vec![], "no mutation");
    // A build that failed cannot be put back either.
    let run = rollback(&fake, dir.path())
        .arg("to-deployment", "bad01")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.out("error-message").contains("is BUILD_FAILED"),
        "{run:?}"
    );
    assert_eq!(changes(&fake), vec![], "no mutation");
}

#[test]
fn a_failing_smoke_test_says_what_serves_and_tries_nothing_else() {
    let fake = platform(
        HISTORY,
        "predict:\n  by_deployment:\n    - {name: v1, status: 500, response: {error: broken}}\n",
    );
    let dir = truss();
    let run = rollback(&fake, dir.path())
        .arg("to-deployment", "old01")
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    assert_eq!(
        run.out("deployment-id"),
        "old01",
        "what serves, read: {run:?}"
    );
    assert_eq!(
        run.out("rolled-back"),
        "true",
        "traffic did move back: {run:?}"
    );
    assert!(
        run.out("error-message")
            .contains("production serves deployment old01"),
        "{run:?}"
    );
    let log = fake.requests();
    assert_eq!(
        log.iter().filter(|e| e.endpoint == "rest.promote").count(),
        1,
        "no third deployment: {log:#?}"
    );
    crate::snapshots::page_snapshot("rollback_a_failed_smoke_test", &run, &[]);
}

#[test]
fn the_target_already_serving_is_nothing_to_do() {
    let fake = platform(HISTORY, "");
    let dir = truss();
    let run = rollback(&fake, dir.path())
        .arg("to-deployment", "cur01")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("rolled-back"), "false", "{run:?}");
    assert_eq!(run.out("deployment-id"), "cur01");
    assert!(
        run.stdout
            .contains("Nothing to do: deployment cur01 already serves production"),
        "{run:?}"
    );
    // What serves is priced all the same: the default 1x2, 0 to 1 replicas.
    assert_eq!(
        (run.out("hourly-price-min"), run.out("hourly-price-max")),
        ("0.00", "0.03"),
        "{run:?}"
    );
    assert_eq!(changes(&fake), vec![]);
}

#[test]
fn a_dry_run_says_what_it_would_do_and_does_nothing() {
    let fake = platform(HISTORY, "");
    let dir = truss();
    let run = rollback(&fake, dir.path())
        .arg("to-deployment", "old01")
        .arg("dry-run", "true")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.stdout.contains("Dry run: would activate and promote deployment old01 (INACTIVE) into production in place of cur01; nothing was changed"),
        "{run:?}"
    );
    assert_eq!(run.out("rolled-back"), "false");
    assert_eq!(changes(&fake), vec![]);
}

#[test]
fn a_deploy_moving_the_environment_meanwhile_stops_the_rollback() {
    // Another run promotes cur01's successor while the rollback wakes old01.
    let fake = platform(
        HISTORY,
        "others:\n  - on: rest.activate_deployment\n    nth: 1\n    action: {promote: {deployment: new01, environment: production}}\n",
    );
    let dir = truss();
    let run = rollback(&fake, dir.path())
        .arg("to-deployment", "old01")
        .run();
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.out("error-message")
            .contains("production moved since it was first read"),
        "{run:?}"
    );
    assert_eq!(run.out("rolled-back"), "false");
    let log = fake.requests();
    assert!(
        !log.iter().any(|e| e.endpoint == "rest.promote"),
        "{log:#?}"
    );
}

#[test]
fn one_model_target_with_an_environment() {
    let fake = platform(HISTORY, "");
    let (_root, dirs) = model_dirs(&["a", "b"]);
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .command("rollback")
        .arg("environment", "production")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.out("error-message").contains("takes one model target"),
        "{run:?}"
    );
    let chain = tempfile::tempdir().unwrap();
    let file = chain.path().join("chain.py");
    std::fs::write(&file, "import truss_chains as chains\n").unwrap();
    let run = Invocation::new(&fake)
        .arg("truss-directory", file.to_str().unwrap())
        .command("rollback")
        .arg("environment", "production")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.out("error-message")
            .contains("a chain cannot be rolled back"),
        "{run:?}"
    );
    let dir = truss();
    let run = Invocation::new(&fake)
        .model(dir.path())
        .command("rollback")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.out("error-message").contains("needs an environment"),
        "{run:?}"
    );
    assert_eq!(changes(&fake), vec![]);
    assert!(fake.requests().is_empty(), "no request at all");
}

#[test]
fn the_environments_github_deployment_records_the_rollback() {
    let gh = fake_baseten::github::FakeGitHub::builder("ghs_canary_rollback")
        .start_in_background()
        .expect("the fake GitHub starts");
    let fake = platform(HISTORY, "");
    let dir = truss();
    let run = rollback(&fake, dir.path())
        .arg("to-deployment", "old01")
        .arg("github-deployment", "true")
        .arg("github-token", "ghs_canary_rollback")
        .env("GITHUB_API_URL", gh.api_url())
        .env("GITHUB_REPOSITORY", gh.repository())
        .env("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567")
        .env("GITHUB_REF", "refs/heads/main")
        .env("GITHUB_SERVER_URL", "https://github.com")
        .env("GITHUB_RUN_ID", "77")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let deps = gh.deployments();
    assert_eq!(deps.len(), 1, "{deps:#?}");
    assert_eq!(deps[0].environment, "production");
    assert_eq!(deps[0].states(), ["in_progress", "success"]);
    let last = deps[0].statuses.last().unwrap();
    assert_eq!(
        last.description, "rolled back to deployment old01",
        "{last:?}"
    );
    assert_eq!(last.environment_url, run.out("environment-url"));
}

/// The log as a hostile platform may serve it: entries out of order, a
/// promotion of a deployment deleted since, two at the same instant, or
/// none explaining what serves. The order never decides; anything the log
/// does not decide is refused before any change, saying why.
#[test]
fn the_audit_log_decides_or_the_rollback_refuses() {
    let dir = truss();
    // Served out of order: the time the action occurred decides.
    let shuffled = "  order: recorded\n  entries:\n    - {at: -150, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: cur01, environment: production}\n    - {at: -250, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: old01, environment: production}\n    - {at: -260, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: new01, environment: production}\n";
    let fake = fake(&format!(
        "name: rb\nmanual_clock: true\nactivation_seconds: 0\nmodels:\n  - name: {MODEL}\n    environments: [production]\n    deployments:\n      - {{id: old01, name: v1, status: INACTIVE, created_at: -300}}\n      - {{id: cur01, name: v2, environment: production, created_at: -200}}\n      - {{id: new01, name: v0, created_at: -400}}\naudit_log:\n{shuffled}"
    ));
    let run = rollback(&fake, dir.path()).arg("dry-run", "true").run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.stdout
            .contains("would activate and promote deployment old01 (INACTIVE)"),
        "{run:?}"
    );

    let refused = |entries: &str, want: &str| {
        let fake = platform(entries, "");
        let run = rollback(&fake, dir.path()).run();
        assert_eq!(run.code, 2, "{want}: {run:?}");
        assert!(run.out("error-message").contains(want), "{want}: {run:?}");
        assert_eq!(changes(&fake), vec![], "{want}: no mutation");
    };
    // What served before was deleted since.
    refused(
        "    - {at: -250, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: gone01, environment: production}\n    - {at: -150, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: cur01, environment: production}\n",
        "names deployment gone01 as what served production before, but the platform no longer has it (deleted)",
    );
    // Two deployments promoted at the same instant before cur01.
    refused(
        "    - {at: -250, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: old01, environment: production}\n    - {at: -250, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: new01, environment: production}\n    - {at: -150, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: cur01, environment: production}\n",
        "the audit log does not decide what served production before cur01",
    );
    // The log's newest promotion is not of what serves (it was made by a
    // create straight into production, or by something the log does not show).
    refused(
        "    - {at: -250, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: old01, environment: production}\n",
        "the audit log does not decide what served production before cur01",
    );
    // Only cur01 was ever promoted: nothing to go back to.
    refused(
        "    - {at: -150, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: cur01, environment: production}\n",
        "shows nothing that served production before cur01",
    );
}

#[test]
fn an_audit_log_that_cannot_be_read_changes_nothing() {
    let fake = platform(HISTORY, "");
    fake.add_fault(fake_baseten::scenario::Fault::status("rest.get_audit_logs", 500).times(1000));
    let dir = truss();
    let run = rollback(&fake, dir.path())
        .arg("wait-timeout-seconds", "3")
        .run();
    assert!(
        matches!(run.status(), "deploy_failed" | "deploy_timeout"),
        "{run:?}"
    );
    assert!(
        run.out("error-message")
            .contains("could not be read from the model's audit log; nothing was changed"),
        "{run:?}"
    );
    assert_eq!(changes(&fake), vec![]);
}

/// An environment that re-deploys on promotion serves a copy of the
/// target: `deployment-id` is the copy, `tested-deployment-id` the target.
#[test]
fn a_copy_made_on_promotion_is_what_serves() {
    let fake = platform(
        HISTORY,
        "promote:\n  redeploy_on_promotion: [production]\n  new_deployment_timeline: [[0, ACTIVE]]\n",
    );
    let dir = truss();
    let run = rollback(&fake, dir.path()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    let copy = run.out("deployment-id");
    assert!(!copy.is_empty() && copy != "old01", "{run:?}");
    assert_eq!(run.out("tested-deployment-id"), "old01");
    assert_eq!(run.out("rolled-back"), "true");
    let env = fake.environment(MODEL, "production").unwrap();
    assert!(format!("{env:?}").contains(copy), "{env:?}");
    assert!(
        run.summary
            .contains(&format!("**production serves:** deployment `{copy}`"))
            && run
                .summary
                .contains(&format!("new deployment {copy}, created from old01")),
        "{}",
        run.summary
    );
}

/// Stopped by a signal while the promotion is in flight: nothing is
/// cleaned up or undone, and the outputs say what serves, from a read.
#[test]
fn a_signal_during_the_promotion_reports_what_serves() {
    let fake = platform(
        HISTORY,
        "promote:\n  default:\n    steps:\n      - [0, {status: RELEASING}]\n",
    );
    let dir = truss();
    let run = rollback(&fake, dir.path()).run_signalled_at("rest.promote", "TERM");
    assert_eq!(run.code, 130, "{run:?}");
    assert_eq!(run.out("deployment-id"), "cur01", "{run:?}");
    assert!(
        run.summary.contains("stopped during the rollback: production serves deployment cur01, with a promotion of old01"),
        "{}",
        run.summary
    );
    let log = fake.requests();
    assert!(
        !log.iter()
            .any(|e| e.endpoint.contains("deactivate") || e.endpoint.contains("cancel")),
        "{log:#?}"
    );
}

/// An audit entry whose deployment id is not one decides nothing, and the
/// id is never shown as the platform wrote it.
#[test]
fn an_audit_entry_with_an_id_that_is_not_one_decides_nothing() {
    let fake = platform(
        "    - {at: -250, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: \"old01\\n::error::FORGED\", environment: production}\n    - {at: -150, event_type: MODEL_DEPLOYMENT_PROMOTED, model: rb-model, deployment: cur01, environment: production}\n",
        "",
    );
    let dir = truss();
    let run = rollback(&fake, dir.path()).run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(
        run.out("error-message")
            .contains("by an id that is not one"),
        "{run:?}"
    );
    assert!(!run.everything().contains("::error::FORGED"), "{run:?}");
    assert_eq!(changes(&fake), vec![]);
}

/// `old01` runs on A10Gx4x16 (0.02012 USD a minute, 1 to 3 replicas);
/// `cur01`, which serves, on the default 1x2 (0.00058, 0 to 1); `types`
/// replaces the price list when given.
fn priced(types: &str) -> FakeBaseten {
    fake(&format!(
        "name: rb\nmanual_clock: true\nactivation_seconds: 0\nmodels:\n  - name: {MODEL}\n    environments: [production]\n    deployments:\n      - {{id: old01, name: v1, created_at: -300, settings: {{instance_type: A10Gx4x16, min_replica: 1, max_replica: 3}}}}\n      - {{id: cur01, name: v2, environment: production, created_at: -200}}\naudit_log:\n  entries:\n{HISTORY}{types}"
    ))
}

#[test]
fn what_serves_after_the_rollback_is_priced_against_what_it_replaces() {
    let fake = priced("");
    let dir = truss();
    let run = rollback(&fake, dir.path()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("deployment-id"), "old01", "{run:?}");
    assert_eq!(
        (run.out("hourly-price-min"), run.out("hourly-price-max")),
        ("1.21", "3.62"),
        "{run:?}"
    );
    assert!(
        run.summary.contains(
            r"Costs \$1.21–\$3.62 per hour: 1–3 replicas of A10Gx4x16 (1 × A10G); against cur01, which it replaces (\$0.00–\$0.03 per hour): +\$1.21 at the minimum, +\$3.59 at the maximum"
        ),
        "{}",
        run.summary
    );
    // What serves is priced after the promote: its read said which.
    let log = fake.requests();
    let last_price = log
        .iter()
        .rposition(|e| e.endpoint == "rest.list_instance_type_prices")
        .expect("priced");
    assert!(at(&log, "rest.promote") < last_price, "{log:#?}");
}

#[test]
fn a_hostile_price_is_not_read_and_the_rollback_still_succeeds() {
    let fake = priced(
        "instance_types:\n  - {id: A10Gx4x16, name: A10Gx4x16, memory_limit_mib: 16384, millicpu_limit: 4000, gpu_count: 1, gpu_type: A10G, price: -0.5}\n  - {id: 1x2, name: 1x2, memory_limit_mib: 2048, millicpu_limit: 1000, price: 0.00058}\n",
    );
    let dir = truss();
    let run = rollback(&fake, dir.path()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    assert_eq!(run.out("hourly-price-min"), "", "{run:?}");
    assert_eq!(run.out("hourly-price-max"), "", "{run:?}");
    assert!(
        run.summary
            .contains("Price not read: the price of A10Gx4x16"),
        "{}",
        run.summary
    );
}
