//! `command: rollback` as a hostile CI would use it: after deploys the
//! binary made itself, a failed newest deploy, and odd targets.

use fake_baseten::FakeBaseten;

use crate::harness::*;

const MODEL: &str = "rbh-model";

fn truss() -> tempfile::TempDir {
    model_dir(&format!("model_name: {MODEL}\n"))
}

/// A deploy of `name` straight into production, as the default
/// (`promotion: at-create`) makes it.
fn deploy(fake: &FakeBaseten, dir: &std::path::Path, name: &str) -> Outcome {
    Invocation::new(fake)
        .model(dir)
        .arg("promote", "true")
        .arg("deployment-name", name)
        .run()
}

/// A and B deployed into production by the binary itself, then C whose
/// build fails: production still serves B, and a rollback puts back A —
/// the failed create never served, so it neither hides A nor is the
/// target.
#[test]
fn rollback_after_two_deploys_and_a_failed_one_puts_back_the_first() {
    let fake = fake(&format!(
        "name: rbh\nmodels:\n  - name: {MODEL}\n    environments: [production]\ndeployments:\n  sequence: [[[0, ACTIVE]], [[0, ACTIVE]], [[0, BUILDING], [0.2, BUILD_FAILED]]]\n"
    ));
    let dir = truss();
    let a = deploy(&fake, dir.path(), "va");
    assert_eq!(a.code, 0, "{a:?}");
    let b = deploy(&fake, dir.path(), "vb");
    assert_eq!(b.code, 0, "{b:?}");
    let c = deploy(&fake, dir.path(), "vc");
    assert_ne!(c.code, 0, "{c:?}");
    let (a_id, b_id) = (
        a.out("deployment-id").to_string(),
        b.out("deployment-id").to_string(),
    );
    let run = Invocation::new(&fake)
        .model(dir.path())
        .command("rollback")
        .arg("environment", "production")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    assert_eq!(run.out("deployment-id"), a_id, "{run:?}");
    assert_eq!(run.out("previous-deployment-id"), b_id, "{run:?}");
}

/// `old01` (INACTIVE, production before) and `cur01` (production now),
/// the audit log saying so; `extra` adds scenario keys.
fn two(extra: &str) -> FakeBaseten {
    fake(&format!(
        "name: rbh\nmanual_clock: true\nmodels:\n  - name: {MODEL}\n    environments: [production, staging]\n    deployments:\n      - {{id: old01, name: v1, status: INACTIVE, created_at: -300}}\n      - {{id: cur01, name: v2, environment: production, created_at: -200}}\naudit_log:\n  entries:\n    - {{at: -250, event_type: MODEL_DEPLOYMENT_PROMOTED, model: {MODEL}, deployment: old01, environment: production}}\n    - {{at: -150, event_type: MODEL_DEPLOYMENT_PROMOTED, model: {MODEL}, deployment: cur01, environment: production}}\n{extra}"
    ))
}

fn rollback<'a>(fake: &'a FakeBaseten, dir: &std::path::Path) -> Invocation<'a> {
    Invocation::new(fake)
        .model(dir)
        .command("rollback")
        .arg("environment", "production")
        .arg("predict-payload", r#"{"x": 1}"#)
}

/// A TERM while the activated target wakes (before any promote): exit
/// 130, `rolled-back` false, `deployment-id` what serves (from a read),
/// the target left activated and said so, nothing promoted.
#[test]
fn a_signal_while_the_target_wakes_reports_what_serves() {
    let fake = two("activation_seconds: 100000\n");
    let dir = truss();
    let run = rollback(&fake, dir.path()).run_signalled_after("rest.get_deployment", 3, "TERM");
    assert_eq!(run.code, 130, "{run:?}");
    assert_eq!(run.out("status"), "deploy_failed", "{run:?}");
    assert_eq!(run.out("rolled-back"), "false", "{run:?}");
    assert_eq!(run.out("deployment-id"), "cur01", "{run:?}");
    assert!(!fake.requests().iter().any(|e| e.endpoint == "rest.promote"));
    assert!(
        run.summary.contains("production serves deployment cur01"),
        "{}",
        run.summary
    );
}

/// A TERM once the promote was answered, the platform's promotion ending
/// at once: whatever phase the signal lands in (the wait, the smoke test),
/// the outputs say what a read shows — production serves the target, so
/// the rollback happened: `rolled-back` true, beside `deployment-id`.
#[test]
fn a_signal_after_the_promote_says_whether_the_rollback_happened() {
    let fake =
        two("activation_seconds: 0\nfaults: [{endpoint: inference.predict, delay_ms: 30000}]\n");
    let dir = truss();
    let run = rollback(&fake, dir.path()).run_signalled_at("rest.promote", "TERM");
    assert_eq!(run.code, 130, "{run:?}");
    assert_eq!(run.out("deployment-id"), "old01", "{run:?}");
    assert_eq!(run.out("previous-deployment-id"), "cur01", "{run:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
}

/// The same, the signal landing while the wait's read of the environment
/// is held (the promotion has ended on the platform): the read the cancel
/// makes shows the target serving, so the rollback happened.
#[test]
fn a_signal_during_the_wait_after_a_promotion_that_landed_says_rolled_back() {
    let fake = two(
        "activation_seconds: 0\nfaults: [{endpoint: rest.get_environment, after: 2, times: 1, delay_ms: 30000}]\n",
    );
    let dir = truss();
    let run = rollback(&fake, dir.path()).run_signalled_at("rest.promote", "TERM");
    assert_eq!(run.code, 130, "{run:?}");
    assert_eq!(run.out("deployment-id"), "old01", "{run:?}");
    assert_eq!(run.out("previous-deployment-id"), "cur01", "{run:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
}

/// A key that may read but not promote: the promote answered 403. The
/// outputs say what serves (a read), nothing else is tried.
#[test]
fn a_promote_refused_403_says_what_serves() {
    let fake = two("activation_seconds: 0\nfaults: [{endpoint: rest.promote, status: 403}]\n");
    let dir = truss();
    let run = rollback(&fake, dir.path())
        .arg("to-deployment", "old01")
        .run();
    assert_eq!(run.out("status"), "deploy_failed", "{run:?}");
    assert_eq!(run.out("deployment-id"), "cur01", "{run:?}");
    assert_eq!(run.out("rolled-back"), "false", "{run:?}");
    assert!(
        run.out("error-message")
            .contains("production serves deployment cur01"),
        "{run:?}"
    );
    let promotes = fake
        .requests()
        .iter()
        .filter(|e| e.endpoint == "rest.promote")
        .count();
    assert_eq!(promotes, 1, "{run:?}");
}

/// An environment the model does not have: an input error before any
/// change.
#[test]
fn a_rollback_of_an_environment_that_does_not_exist_is_an_input_error() {
    let fake = two("");
    let dir = truss();
    let run = Invocation::new(&fake)
        .model(dir.path())
        .command("rollback")
        .arg("environment", "canary")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.out("rolled-back"), "false", "{run:?}");
    assert!(
        fake.requests()
            .iter()
            .all(|e| !e.mutation && (e.method == "GET" || e.endpoint.starts_with("graphql."))),
        "{:?}",
        fake.requests()
    );
}

/// `to-deployment` with odd bytes (a line break and a forged workflow
/// command, an RTL override, NUL, a very long one): exit 2 before any
/// request, never echoed raw.
#[test]
fn a_to_deployment_with_odd_bytes_is_refused_before_any_request() {
    for odd in [
        "old01\n::error::FORGED",
        "old01\u{202e}10dlo",
        &"a".repeat(5000),
        "../old01",
    ] {
        let fake = two("");
        let dir = truss();
        let run = rollback(&fake, dir.path()).arg("to-deployment", odd).run();
        assert_eq!(run.code, 2, "{odd:?}: {run:?}");
        assert!(fake.requests().is_empty(), "{odd:?}: {:?}", fake.requests());
        // Echoed escaped, on the error's own line: never a workflow command.
        assert!(
            !run.everything()
                .lines()
                .any(|l| l.starts_with("::error::FORGED")),
            "{run:?}"
        );
        assert!(!run.everything().contains('\u{202e}'), "{run:?}");
        assert_eq!(run.out("rolled-back"), "false", "{odd:?}: {run:?}");
    }
}

/// The audit log answers an entry of another model: it decides nothing,
/// and nothing is changed.
#[test]
fn an_audit_entry_of_another_model_changes_nothing() {
    let fake = two(
        "answer_edits:\n  - {endpoint: rest.get_audit_logs, pointer: /items/1/event_data/model_id, value: othr0001}\n",
    );
    let dir = truss();
    let run = rollback(&fake, dir.path()).run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(
        run.out("error-message").contains("another model"),
        "{run:?}"
    );
    assert_eq!(run.out("rolled-back"), "false", "{run:?}");
    assert!(
        !fake
            .requests()
            .iter()
            .any(|e| e.mutation || (e.endpoint.starts_with("rest.") && e.method != "GET")),
        "{:?}",
        fake.requests()
    );
}

/// Production went old01 → mid01 → cur01; mid01 is DEPLOYING now — woken
/// by an activate (a rollback cancelled while it woke leaves it so), after
/// it served. A status alone cannot tell this from a first deploy that
/// never came up, so the rollback must not skip it and go two back to
/// old01: it refuses, nothing changed, and says to name the target.
#[test]
fn a_previous_deployment_waking_is_never_skipped_for_the_one_before() {
    let fake = fake(&format!(
        "name: rbh\nmanual_clock: true\nmodels:\n  - name: {MODEL}\n    environments: [production]\n    deployments:\n      - {{id: old01, name: v1, status: INACTIVE, created_at: -400}}\n      - {{id: mid01, name: v2, status: DEPLOYING, created_at: -300}}\n      - {{id: cur01, name: v3, environment: production, created_at: -200}}\naudit_log:\n  entries:\n    - {{at: -350, event_type: MODEL_DEPLOYMENT_PROMOTED, model: {MODEL}, deployment: old01, environment: production}}\n    - {{at: -250, event_type: MODEL_DEPLOYMENT_PROMOTED, model: {MODEL}, deployment: mid01, environment: production}}\n    - {{at: -150, event_type: MODEL_DEPLOYMENT_PROMOTED, model: {MODEL}, deployment: cur01, environment: production}}\n"
    ));
    let dir = truss();
    // A short wait: were the waking deployment skipped again, the run
    // would wait on the one before it until this, not for ten minutes.
    let run = rollback(&fake, dir.path())
        .arg("wait-timeout-seconds", "15")
        .run();
    assert_ne!(run.code, 0, "{run:?}");
    assert_eq!(run.out("rolled-back"), "false", "{run:?}");
    assert!(run.out("error-message").contains("mid01"), "{run:?}");
    assert!(
        !fake
            .requests()
            .iter()
            .any(|e| e.mutation || (e.endpoint.starts_with("rest.") && e.method != "GET")),
        "{:?}",
        fake.requests()
    );
}
