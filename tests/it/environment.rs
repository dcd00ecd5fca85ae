//! Deploying into an environment: wait for the promotion, not just the
//! status; never deactivate what serves traffic.
//!
//! A real deployment's recorded status history (`scaled-to-zero-history.yaml`) runs on the
//! fake's manual clock, moved by the harness once the binary has read what
//! the test wants it to see; the tests assert the order of what the binary
//! reported and of what the fake answered, never how long it took.

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::Scenario;

use crate::harness::*;

/// The recorded history's first ready status: SCALED_TO_ZERO at 12.9 s.
const SCALED_TO_ZERO_SECS: f64 = 12.9;

fn recorded_history(extra: &str) -> FakeBaseten {
    let text = std::fs::read_to_string(scenario_file("scaled-to-zero-history.yaml")).unwrap();
    let mut scenario = Scenario::from_yaml(&text)
        .unwrap()
        .with_api_key(API_KEY)
        .with_manual_clock();
    if !extra.is_empty() {
        let patch = Scenario::from_yaml(extra).unwrap();
        if extra.contains("promotions:") {
            scenario.promotions = patch.promotions;
        }
        scenario.omit_promotion_fields = patch.omit_promotion_fields;
    }
    FakeBaseten::start_in_background(scenario).unwrap()
}

fn into_production(fake: &FakeBaseten) -> Invocation<'_> {
    Invocation::new(fake)
        .model(example_model())
        .arg("model-name", "seed-model")
        .arg("environment", "production")
}

/// Moves the recorded deployment to SCALED_TO_ZERO once the binary has read BUILDING, then
/// lets it read the environment there before `then` moves it on.
fn ready_then(then: &[(&'static str, f64)]) -> Vec<(&'static str, f64)> {
    let mut steps = vec![("rest.get_deployment", SCALED_TO_ZERO_SECS)];
    steps.extend_from_slice(then);
    steps
}

#[test]
fn the_recorded_history_into_production_succeeds_only_after_the_promotion() {
    // SCALED_TO_ZERO at 12.9 s is ready by status, but the promotion into
    // production completes at 632 s: success must wait for it.
    let fake = recorded_history("");
    let run = into_production(&fake).run_stepping_clock(&ready_then(&[
        ("rest.get_environment", 24.3),
        ("rest.get_deployment", 631.0),
        ("rest.get_environment", 632.0),
    ]));
    assert_eq!(run.status(), "success", "{run:?}");
    assert_in_order(
        &run.stdout,
        &[
            "status BUILDING (in progress)",
            "status SCALED_TO_ZERO (ready)",
            "promotion into production: RELEASING",
            "status WAKING_UP (in progress)",
            "status ACTIVE (ready)",
            "promotion into production: RAMPING_UP, 50% of traffic",
            "promotion into production done: all traffic on deployment",
            "Final status: success",
        ],
    );
    // The fake answered RELEASING while the deployment was already ready,
    // and the smoke test came only once the promotion had succeeded.
    let log = fake.requests();
    assert!(
        log.iter().any(|e| e.endpoint == "rest.get_environment"
            && e.scenario_secs == SCALED_TO_ZERO_SECS),
        "the environment was read once the status was ready"
    );
    let predicts: Vec<_> = log
        .iter()
        .filter(|e| e.endpoint.starts_with("inference."))
        .collect();
    assert!(!predicts.is_empty(), "{run:?}");
    assert!(
        predicts.iter().all(|e| e.scenario_secs >= 632.0),
        "predict before the promotion succeeded: {predicts:?}"
    );
    assert!(
        run.summary.contains("promotion into production"),
        "history: {}",
        run.summary
    );
    // Cleanup is off with an environment: nothing deactivated.
    assert!(
        !endpoints(&fake)
            .iter()
            .any(|e| e == "rest.deactivate_deployment")
    );
}

#[test]
fn a_failed_promotion_is_deploy_failed_with_the_platform_message() {
    let fake = recorded_history(
        "promotions:\n  default:\n    error_message: \"not enough GPUs in us-east\"\n    steps: [[0, {status: RELEASING, percent: 0}], [20, {status: FAILED, percent: 0}]]\n",
    );
    let run =
        into_production(&fake).run_stepping_clock(&ready_then(&[("rest.get_environment", 20.0)]));
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert_in_order(
        &run.stdout,
        &[
            "status SCALED_TO_ZERO (ready)",
            "promotion into production: RELEASING",
            "promotion into production: FAILED",
        ],
    );
    assert!(
        run.out("error-message")
            .contains("not enough GPUs in us-east"),
        "{run:?}"
    );
}

#[test]
fn a_promotion_paused_until_the_deadline_is_a_timeout() {
    let fake = recorded_history(
        "promotions:\n  default:\n    steps: [[0, {status: RELEASING, percent: 0}], [15, {status: PAUSED, percent: 30}]]\n",
    );
    // The clock stops at 15 s: PAUSED until the binary's own deadline.
    let run = into_production(&fake)
        .arg("wait-timeout-seconds", "1.5")
        .run_stepping_clock(&ready_then(&[("rest.get_environment", 15.0)]));
    assert_eq!(run.status(), "deploy_timeout", "{run:?}");
    assert_in_order(
        &run.stdout,
        &[
            "status SCALED_TO_ZERO (ready)",
            "promotion into production: RELEASING",
            "promotion into production: PAUSED, 30% of traffic",
            "Final status: deploy_timeout",
        ],
    );
}

#[test]
fn without_promotion_fields_the_status_decides_and_says_so_once() {
    let fake = recorded_history("omit_promotion_fields: true\n");
    let run = into_production(&fake).run_stepping_clock(&ready_then(&[]));
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("last-status"), "SCALED_TO_ZERO");
    let all = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(
        all.matches("does not report promotions").count(),
        1,
        "{run:?}"
    );
}
