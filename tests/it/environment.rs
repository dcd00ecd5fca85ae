//! Deploying into an environment: wait for the promotion, not just the
//! status; never deactivate what serves traffic.

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::Scenario;

use crate::harness::*;

const SCALE: f64 = 200.0;

fn seed(extra: &str) -> FakeBaseten {
    let text = std::fs::read_to_string(scenario_file("seed-000.yaml")).unwrap();
    let mut scenario = Scenario::from_yaml(&text)
        .unwrap()
        .with_api_key(API_KEY)
        .with_time_scale(SCALE);
    if !extra.is_empty() {
        let patch = Scenario::from_yaml(extra).unwrap();
        if extra.contains("promotions:") {
            scenario.promotions = patch.promotions;
        }
        scenario.omit_promotion_fields = patch.omit_promotion_fields;
    }
    FakeBaseten::start_in_background(scenario).unwrap()
}

fn deploy_production(fake: &FakeBaseten) -> Outcome {
    Invocation::new(fake)
        .model(example_model())
        .arg("model-name", "seed-model")
        .arg("environment", "production")
        .run()
}

#[test]
fn the_seed_history_into_production_succeeds_only_after_the_promotion() {
    // SCALED_TO_ZERO at 12.9 s is ready by status, but the promotion into
    // production completes at 632 s: success must wait for it.
    let fake = seed("");
    let run = deploy_production(&fake);
    assert_eq!(run.status(), "success", "{run:?}");
    let secs: f64 = run.out("deploy-time-seconds").parse().unwrap();
    let scenario_secs = secs * SCALE;
    assert!(
        (600.0..760.0).contains(&scenario_secs),
        "ready at ~631 scenario s, got {scenario_secs}"
    );
    assert!(
        run.stdout.contains("promotion into production: RELEASING"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("environment production now serves deployment"),
        "{run:?}"
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
    let fake = seed(
        "promotions:\n  default:\n    error_message: \"not enough GPUs in us-east\"\n    steps: [[0, {status: RELEASING, percent: 0}], [20, {status: FAILED, percent: 0}]]\n",
    );
    let run = deploy_production(&fake);
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(
        run.out("error-message")
            .contains("not enough GPUs in us-east"),
        "{run:?}"
    );
}

#[test]
fn a_promotion_paused_until_the_deadline_is_a_timeout() {
    let fake = seed(
        "promotions:\n  default:\n    steps: [[0, {status: RELEASING, percent: 0}], [15, {status: PAUSED, percent: 30}]]\n",
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("model-name", "seed-model")
        .arg("environment", "production")
        .arg("wait-timeout-seconds", "1.5")
        .run();
    assert_eq!(run.status(), "deploy_timeout", "{run:?}");
    assert!(run.stdout.contains("PAUSED, 30% of traffic"), "{run:?}");
}

#[test]
fn without_promotion_fields_the_status_decides_and_says_so_once() {
    let fake = seed("omit_promotion_fields: true\n");
    let run = deploy_production(&fake);
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("last-status"), "SCALED_TO_ZERO");
    let all = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(
        all.matches("does not report promotions").count(),
        1,
        "{run:?}"
    );
}
