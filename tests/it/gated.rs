//! `promotion: after-predict`: traffic moves to a new deployment only after
//! it passed its own smoke test, and moves back when the promotion or the
//! environment's smoke test fails. Asserted on the order of the requests
//! the fake answered and on what the run reported.

use fake_baseten::FakeBaseten;
use fake_baseten::reqlog::LogEntry;

use crate::assert_run_snapshots;
use crate::harness::*;

/// The example model exists; `v1dep001` serves production (and `staging`
/// exists, empty). Promotions ramp over 4 scenario seconds.
fn gated(extra: &str) -> FakeBaseten {
    fake(&format!(
        "time_scale: 20
models:
  - id: gatedmdl
    name: hello-truss-push
    environments: [staging]
    deployments: [{{id: v1dep001, name: v1, environment: production}}]
deployments:
  default: [[0, BUILDING], [1, DEPLOYING], [2, ACTIVE]]
{extra}"
    ))
}

const RAMP: &str = "promote:
  default:
    steps:
      - [0, {status: RELEASING}]
      - [1, {status: RAMPING_UP, percent: 25}]
      - [2, {status: RAMPING_UP, percent: 75}]
      - [4, {status: SUCCEEDED, percent: 100}]
  ramp_down_seconds: 2
";

/// `gated(extra)` on a manual clock that moves one scenario second per poll
/// the fake answers (see [`per_poll`]).
fn gated_by_polls(extra: &str) -> FakeBaseten {
    per_poll(gated(&format!("manual_clock: true\n{extra}")))
}

fn run_gated(fake: &FakeBaseten) -> Invocation<'_> {
    Invocation::new(fake)
        .model(example_model())
        .arg("promotion", "after-predict")
        .arg("environment", "production")
        .arg("predict-timeout", "2")
}

/// A gated run whose every request goes through a fault proxy with `rule`.
fn through_proxy(fake: &FakeBaseten, rule: fake_baseten::proxy::Rule) -> Outcome {
    let proxy = fake_baseten::proxy::FaultProxy::builder(fake.addr())
        .rule(rule)
        .start_in_background()
        .expect("proxy starts");
    run_gated(fake)
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
        .arg("inference-url", proxy.inference_template())
        .arg("s3-endpoint", proxy.s3_endpoint())
        .run()
}

const PROMOTE_PATH: &str = "/v1/models/gatedmdl/environments/production/promote";

/// The position of the first request to `endpoint` (panics when absent).
fn first(log: &[LogEntry], endpoint: &str) -> usize {
    log.iter()
        .position(|e| e.endpoint == endpoint)
        .unwrap_or_else(|| panic!("no {endpoint} in {:?}", names(log)))
}

fn names(log: &[LogEntry]) -> Vec<&str> {
    log.iter().map(|e| e.endpoint.as_str()).collect()
}

/// Ready once the fake has answered `reads` environment reads after the
/// `nth` promote (from 1): on a clock per poll, every step those reads
/// reached is in the run's log before a signal sent then lands.
fn env_reads_after_promote(fake: &FakeBaseten, nth: usize, reads: usize) -> impl Fn() -> bool {
    move || {
        let log = fake.requests();
        let promote = log
            .iter()
            .enumerate()
            .filter(|(_, e)| e.endpoint == "rest.promote")
            .nth(nth - 1);
        promote.is_some_and(|(at, _)| {
            log[at..]
                .iter()
                .filter(|e| e.endpoint == "rest.get_environment")
                .count()
                >= reads
        })
    }
}

/// What serves `env` now, by the fake's own state.
fn serving(fake: &FakeBaseten, env: &str) -> String {
    fake.deployments()
        .into_iter()
        .filter(|d| d.environment.as_deref() == Some(env))
        .map(|d| d.id)
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether the fake deactivated deployment `id`.
fn deactivated(fake: &FakeBaseten, id: &str) -> bool {
    fake.deployments()
        .into_iter()
        .any(|d| d.id == id && d.deactivated)
}

#[test]
fn a_clean_gated_promotion_promotes_only_after_the_deployment_passed() {
    let fake = gated_by_polls(RAMP);
    let run = run_gated(&fake).run();
    assert_eq!(run.status(), "success", "{run:?}");
    let log = fake.requests();
    // Created outside any environment.
    let create = log
        .iter()
        .find(|e| e.endpoint == "graphql.create_model_version_from_truss")
        .expect("a create");
    let args = &create.graphql.as_ref().unwrap().arguments;
    assert!(
        args.values().all(|a| a.get("environment_name").is_none()),
        "{args:?}"
    );
    // Own smoke test, then the promotion, then the environment's test.
    let own_predict = first(&log, "inference.predict");
    let promote = first(&log, "rest.promote");
    assert!(own_predict < promote, "{:?}", names(&log));
    assert_eq!(log[own_predict].status, Some(200));
    let after: Vec<&LogEntry> = log[promote..]
        .iter()
        .filter(|e| e.endpoint.starts_with("inference."))
        .collect();
    assert!(
        after.iter().any(|e| e.path.contains("/production/predict")),
        "{after:?}"
    );
    let dep = run.out("deployment-id");
    assert!(!dep.is_empty());
    assert_eq!(serving(&fake, "production"), dep);
    assert_eq!(run.out("tested-deployment-id"), dep);
    assert_eq!(run.out("previous-deployment-id"), "v1dep001");
    assert_eq!(run.out("rolled-back"), "false");
    assert!(
        run.out("environment-url").ends_with("/production/predict"),
        "{}",
        run.out("environment-url")
    );
    assert_eq!(run.out("predict-url"), run.out("environment-url"));
    // Never deactivated: it serves production.
    assert!(!names(&log).contains(&"rest.deactivate_deployment"));
    assert_run_snapshots!("clean_promotion", &run);
}

#[test]
fn a_deployment_that_fails_its_own_smoke_test_is_never_promoted() {
    let fake = gated_by_polls(&format!(
        "{RAMP}predict:\n  by_deployment:\n    - {{created: 0, via: deployment, status: 500, response: {{error: broken}}}}\n"
    ));
    let run = run_gated(&fake).run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let log = fake.requests();
    assert!(
        !names(&log).iter().any(|e| e.contains("promot")),
        "{:?}",
        names(&log)
    );
    assert_eq!(serving(&fake, "production"), "v1dep001");
    let dep = run.out("deployment-id");
    assert!(
        deactivated(&fake, dep),
        "the failed deployment is cleaned up"
    );
    assert!(!deactivated(&fake, "v1dep001"));
    assert_eq!(run.out("rolled-back"), "false");
    assert_run_snapshots!("own_smoke_test_fails", &run);
}

#[test]
fn a_failed_promotion_leaves_the_environment_on_the_previous_deployment() {
    let fake = gated_by_polls(
        "promote:
  default:
    error_message: not enough GPUs in us-east
    steps:
      - [0, {status: RELEASING}]
      - [1, {status: RAMPING_UP, percent: 20}]
      - [2, {status: FAILED, percent: 0}]
",
    );
    let run = run_gated(&fake).run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert_eq!(serving(&fake, "production"), "v1dep001");
    let dep = run.out("deployment-id");
    assert!(deactivated(&fake, dep), "the new deployment is cleaned up");
    assert_eq!(run.out("previous-deployment-id"), "v1dep001");
    assert_eq!(run.out("rolled-back"), "false");
    assert_run_snapshots!("promotion_fails", &run);
}

#[test]
fn a_failing_environment_smoke_test_rolls_back_to_the_previous_deployment() {
    let fake = gated_by_polls(&format!(
        "{RAMP}predict:\n  by_deployment:\n    - {{created: 0, via: environment, status: 500, response: {{error: wrong answer behind production}}}}\n"
    ));
    let run = run_gated(&fake).run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    assert_eq!(run.out("rolled-back"), "true");
    assert_eq!(serving(&fake, "production"), "v1dep001");
    let dep = run.out("deployment-id");
    assert!(
        deactivated(&fake, dep),
        "the rolled-back deployment is cleaned up"
    );
    let log = fake.requests();
    let promotes: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, e)| e.endpoint == "rest.promote")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(promotes.len(), 2, "{:?}", names(&log));
    // The environment's failed test came between the two promotions.
    let env_test = log
        .iter()
        .position(|e| e.endpoint.starts_with("inference.") && e.path.contains("/production/"))
        .unwrap();
    assert!(promotes[0] < env_test && env_test < promotes[1]);
    assert_run_snapshots!("environment_test_fails", &run);
}

#[test]
fn a_promotion_that_creates_a_new_deployment_is_followed_and_proven() {
    let fake = gated_by_polls(&format!("{RAMP}  redeploy_on_promotion: [production]\n"));
    // The new deployment still loads when its promotion ends: the
    // environment's test retries (a second a try) until it answers.
    let run = run_gated(&fake).arg("predict-timeout", "60").run();
    assert_eq!(run.status(), "success", "{run:?}");
    let tested = run.out("tested-deployment-id");
    let serving_now = run.out("deployment-id");
    assert_ne!(tested, serving_now, "{run:?}");
    assert_eq!(serving(&fake, "production"), serving_now);
    assert!(deactivated(&fake, tested), "the tested copy serves nothing");
    assert!(!deactivated(&fake, serving_now));
    assert_run_snapshots!("promotion_redeploys", &run);
}

#[test]
fn a_signal_mid_promotion_cancels_it_and_puts_traffic_back() {
    // A slow ramp: the signal arrives while traffic is split. A rolling
    // promotion is force-cancelled (documented for rolling ones only); any
    // other is cancelled, and its traffic ramps back within the grace.
    for (rolling, cancel) in [
        (true, "rest.force_cancel_promotion"),
        (false, "rest.cancel_promotion"),
    ] {
        let fake = gated_by_polls(&format!(
            "promote:
  default:
    rolling_deploy: {rolling}
    steps:
      - [0, {{status: RELEASING}}]
      - [1, {{status: RAMPING_UP, percent: 50}}]
      - [10000, {{status: SUCCEEDED, percent: 100}}]
  ramp_down_seconds: 1
"
        ));
        // Signalled once the split is read: the steps before it are in the
        // log whenever the signal lands.
        let run = run_gated(&fake).run_signalled_when(env_reads_after_promote(&fake, 1, 2), "INT");
        assert_eq!(run.code, 130, "{run:?}");
        assert_eq!(run.status(), "deploy_failed");
        assert_eq!(run.out("rolled-back"), "true", "rolling={rolling}: {run:?}");
        let called = endpoints(&fake);
        assert!(called.iter().any(|e| e == cancel), "{called:?}");
        let other = if rolling {
            "rest.cancel_promotion"
        } else {
            "rest.force_cancel_promotion"
        };
        assert!(!called.iter().any(|e| e == other), "{called:?}");
        assert_eq!(serving(&fake, "production"), "v1dep001");
        let dep = run.out("deployment-id");
        assert!(deactivated(&fake, dep), "{run:?}");
        // What the signal set off, in order: the cancel, then ours is
        // deactivated once traffic is back; nothing is promoted again.
        let log = fake.requests();
        let (promote, cancelled) = (first(&log, "rest.promote"), first(&log, cancel));
        let deactivate = first(&log, "rest.deactivate_deployment");
        assert!(
            promote < cancelled && cancelled < deactivate,
            "{:?}",
            names(&log)
        );
        assert_eq!(called.iter().filter(|e| *e == "rest.promote").count(), 1);
        let name = if rolling { "rolling" } else { "not_rolling" };
        assert_run_snapshots!(&format!("signal_mid_promotion_{name}"), &run);
    }
}

#[test]
fn a_first_deployment_has_nothing_to_roll_back_to_and_is_left_as_it_is() {
    // A new model: the platform makes its first deployment production's.
    let fake = per_poll(fake(&format!(
        "manual_clock: true\ndeployments:\n  default: [[0, BUILDING], [1, ACTIVE]]\n{RAMP}predict:\n  by_deployment:\n    - {{created: 0, via: environment, status: 500, response: {{error: broken}}}}\n"
    )));
    let run = run_gated(&fake).run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let dep = run.out("deployment-id");
    assert_eq!(run.out("rolled-back"), "false");
    assert_eq!(run.out("previous-deployment-id"), "");
    assert!(
        !endpoints(&fake).iter().any(|e| e.contains("promot")),
        "the platform promoted it; nothing else to do"
    );
    assert!(!deactivated(&fake, dep), "left as it is");
    assert_run_snapshots!("first_deployment_fails", &run);
}

#[test]
fn promote_and_environment_together_are_refused_before_any_request() {
    let fake = gated_by_polls(RAMP);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("promote", "true")
        .arg("environment", "staging")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(fake.requests().is_empty(), "{:?}", endpoints(&fake));
    assert_run_snapshots!("promote_and_environment", &run);
}

#[test]
fn promote_means_production_and_its_truss_flags_reach_the_create() {
    let fake = gated_by_polls(RAMP);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("promote", "true")
        .arg("preserve-previous-production-deployment", "true")
        .arg("preserve-env-instance-type", "false")
        .arg("publish", "true")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let create = mutations(&fake)
        .into_iter()
        .find(|e| e.endpoint == "graphql.create_model_version_from_truss")
        .unwrap();
    let args = &create.graphql.unwrap().arguments;
    let args = args.values().next().unwrap();
    assert_eq!(args["environment_name"], "production", "{args}");
    assert_eq!(args["scale_down_old_production"], false, "{args}");
    assert_eq!(args["preserve_env_instance_type"], false, "{args}");
    assert_run_snapshots!("promote_with_truss_flags", &run);
}

/// A chain that already serves production (a first, ordinary run), then a
/// gated run named `gated`.
fn chain_twice(extra: &str) -> (FakeBaseten, Outcome, Outcome) {
    use crate::chain_harness::{chain_run, fixture};
    let fake = fake(&format!(
        "time_scale: 20\nchainlets:\n  default: [[0, BUILDING_MODEL], [1, MODEL_READY]]\n{RAMP}{extra}"
    ));
    let chain = fixture("chains/two/two_chain.py");
    let first = chain_run(&fake, &chain)
        .arg("predict-payload", r#"{"x": 21}"#)
        .run();
    assert_eq!(first.status(), "success", "{first:?}");
    let gated = chain_run(&fake, &chain)
        .arg("deployment-name", "gated")
        .arg("predict-payload", r#"{"x": 21}"#)
        .arg("promotion", "after-predict")
        .arg("promote", "true")
        .arg("predict-timeout", "2")
        .run();
    (fake, first, gated)
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn a_chain_is_promoted_after_its_run_remote_passed() {
    let (fake, first, run) = chain_twice("");
    assert_eq!(run.status(), "success", "{run:?}");
    let previous = first.out("deployment-id");
    assert_eq!(run.out("previous-deployment-id"), previous);
    assert_eq!(run.out("rolled-back"), "false");
    let log = fake.requests();
    let gated_start = log
        .iter()
        .rposition(|e| e.endpoint == "graphql.deploy_chain_atomic")
        .unwrap();
    let own = log[gated_start..]
        .iter()
        .position(|e| e.endpoint.starts_with("inference.") && e.path.contains("/deployment/"))
        .expect("run_remote on the chain deployment");
    let promote = log[gated_start..]
        .iter()
        .position(|e| e.endpoint == "rest.promote_chain")
        .expect("a chain promotion");
    assert!(own < promote);
    assert!(
        run.out("environment-url")
            .ends_with("/production/run_remote")
    );
    assert_eq!(run.out("predict-url"), run.out("environment-url"));
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn a_chain_failing_behind_the_environment_is_rolled_back() {
    let (fake, first, run) = chain_twice(
        "predict:\n  by_deployment:\n    - {name: gated, via: environment, status: 500, response: {error: broken}}\n",
    );
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    let previous = first.out("deployment-id");
    assert!(
        run.out("error-message")
            .contains(&format!("back on the previous deployment {previous}")),
        "{run:?}"
    );
    let promotes = endpoints(&fake)
        .iter()
        .filter(|e| *e == "rest.promote_chain")
        .count();
    assert_eq!(promotes, 2);
    // The chain's gated deployment is deactivated after the rollback.
    assert!(
        endpoints(&fake)
            .iter()
            .any(|e| e == "rest.deactivate_chain_deployment"),
        "{:?}",
        endpoints(&fake)
    );
}

#[test]
fn a_promote_whose_answer_is_lost_is_looked_up_not_sent_again() {
    use fake_baseten::proxy::{Fault, Rule, When};
    for (name, fault, promotes_applied) in [
        // Applied, answer lost: adopted from the environment.
        ("applied", Fault::DropAfterForward, 1),
        // Never reached the platform: the environment shows nothing, so
        // it is sent again, once.
        ("not_applied", Fault::ResetBeforeForward, 1),
    ] {
        let fake = gated_by_polls(RAMP);
        let rule = Rule::new("lost", fault.clone())
            .path(PROMOTE_PATH)
            .when(When::Nth(1));
        let run = through_proxy(&fake, rule);
        assert_eq!(run.status(), "success", "{fault:?}: {run:?}");
        let promotes = endpoints(&fake)
            .iter()
            .filter(|e| *e == "rest.promote")
            .count();
        assert_eq!(promotes, promotes_applied, "{fault:?}");
        assert_eq!(serving(&fake, "production"), run.out("deployment-id"));
        assert_run_snapshots!(&format!("promote_answer_lost_{name}"), &run);
    }
}

#[test]
fn a_promote_that_never_gets_through_fails_with_production_untouched() {
    use fake_baseten::proxy::{Fault, Rule};
    let fake = gated_by_polls(RAMP);
    let run = through_proxy(
        &fake,
        Rule::new("cut", Fault::ResetBeforeForward).path(PROMOTE_PATH),
    );
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert_eq!(serving(&fake, "production"), "v1dep001");
    assert!(deactivated(&fake, run.out("deployment-id")));
    assert_run_snapshots!("promote_never_arrives", &run);
}

#[test]
fn the_environment_test_uses_the_regional_host_when_asked() {
    let fake = gated_by_polls(RAMP);
    let run = run_gated(&fake).arg("regional-environment", "true").run();
    assert_eq!(run.status(), "success", "{run:?}");
    let log = fake.requests();
    let predicts: Vec<&str> = log
        .iter()
        .filter(|e| e.endpoint.starts_with("inference."))
        .map(|e| e.path.as_str())
        .collect();
    // First the deployment itself (never the regional host: it serves the
    // environment, which the deployment does not yet), then the regional one.
    assert!(predicts[0].contains("/deployment/"), "{predicts:?}");
    assert!(
        predicts
            .last()
            .unwrap()
            .starts_with("/model-gatedmdl-production/"),
        "{predicts:?}"
    );
    assert_eq!(
        run.out("environment-url"),
        fake.inference_template()
            .replace("{prefix}-{id}", "model-gatedmdl-production")
            + "/predict",
        "{run:?}"
    );
    assert_run_snapshots!("regional_environment_test", &run);
}

#[test]
fn a_missing_environment_is_found_before_anything_is_created() {
    let fake = gated_by_polls(RAMP);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("promotion", "after-predict")
        .arg("environment", "canary")
        .run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(mutations(&fake).is_empty(), "{:?}", endpoints(&fake));
    assert_eq!(run.out("deployment-id"), "");
    assert_run_snapshots!("missing_environment", &run);
}

#[test]
fn a_signal_during_the_rollback_says_it_may_still_finish() {
    // The environment test fails; the rollback's promotion ramps slowly and
    // the signal comes while it moves traffic back.
    let fake = gated_by_polls(
        "promote:
  sequence:
    - steps: [[0, {status: RELEASING}], [1, {status: SUCCEEDED, percent: 100}]]
    - steps: [[0, {status: RELEASING}], [1, {status: RAMPING_UP, percent: 10}], [10000, {status: SUCCEEDED, percent: 100}]]
predict:
  by_deployment:
    - {created: 0, via: environment, status: 500, response: {error: broken}}
",
    );
    // Signalled once the rollback's split is read.
    let run = run_gated(&fake).run_signalled_when(env_reads_after_promote(&fake, 2, 2), "TERM");
    assert_eq!(run.code, 130, "{run:?}");
    assert_eq!(run.out("rolled-back"), "false", "{run:?}");
    // What serves is never deactivated: the new deployment still does.
    assert!(!deactivated(&fake, run.out("deployment-id")), "{run:?}");
    assert!(!deactivated(&fake, "v1dep001"));
    assert_run_snapshots!("signal_during_rollback", &run);
}

// ---- Where traffic is comes from a read (lost answers, other clients) ----

/// The fake's reading of `env` of the example model: (current, candidate).
fn env_of(fake: &FakeBaseten, env: &str) -> (Option<String>, Option<String>) {
    let v = fake
        .environment("hello-truss-push", env)
        .expect("the environment exists");
    (v.current, v.candidate)
}

/// The environment test fails behind production (the deployment passes
/// its own test).
const ENV_TEST_FAILS: &str = "predict:\n  by_deployment:\n    - {created: 0, via: environment, status: 500, response: {error: wrong answer behind production}}\n";

#[test]
fn a_rollback_whose_promote_never_arrives_is_not_reported_as_rolled_back() {
    use fake_baseten::proxy::{Fault, Rule};
    // The first promote goes through; every later one (the rollback's) is
    // reset before it reaches the platform.
    let fake = gated_by_polls(&format!("{RAMP}{ENV_TEST_FAILS}"));
    let run = through_proxy(
        &fake,
        Rule::new("rollback-lost", Fault::ResetBeforeForward)
            .path(PROMOTE_PATH)
            .when(fake_baseten::proxy::When::Nth(2)),
    );
    // One reset, then the lookup sees nothing moved and sends it again: a
    // true rollback, confirmed by a read.
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    assert_eq!(env_of(&fake, "production").0.as_deref(), Some("v1dep001"));
    assert_run_snapshots!("rollback_promote_lost_once", &run);

    // Now every rollback promote is lost: production still serves the
    // deployment that failed, and the run says so.
    let fake = gated_by_polls(&format!("{RAMP}{ENV_TEST_FAILS}"));
    let rule = Rule::new("rollback-lost", Fault::ResetBeforeForward)
        .path(PROMOTE_PATH)
        .after(1);
    let run = through_proxy(&fake, rule);
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let ours = run.out("deployment-id").to_string();
    assert_eq!(run.out("rolled-back"), "false", "{run:?}");
    assert_eq!(
        env_of(&fake, "production").0.as_deref(),
        Some(ours.as_str())
    );
    assert!(!deactivated(&fake, &ours), "what serves is kept");
    assert_run_snapshots!("rollback_promote_always_lost", &run);
}

#[test]
fn a_promote_answered_without_a_readable_id_is_looked_up_not_taken_as_nothing() {
    use fake_baseten::proxy::{DeclaredLength, Fault, Rule};
    let cut = Fault::TruncatedJson {
        keep: Some(3),
        content_length: DeclaredLength::Truncated,
    };
    // Applied and reused: the lookup finds our own deployment promoted.
    let fake = gated_by_polls(RAMP);
    let run = through_proxy(
        &fake,
        Rule::new("cut", cut.clone()).path(PROMOTE_PATH).nth(1),
    );
    assert_eq!(run.status(), "success", "{run:?}");
    let ours = run.out("deployment-id");
    assert_eq!(ours, run.out("tested-deployment-id"));
    assert_eq!(env_of(&fake, "production").0.as_deref(), Some(ours));
    assert_eq!(
        endpoints(&fake)
            .iter()
            .filter(|e| *e == "rest.promote")
            .count(),
        1,
        "never sent twice"
    );
    assert_run_snapshots!("promote_answer_unreadable", &run);

    // Applied, but the platform promotes a copy with a new id: a copy
    // names no source, so the run cannot claim it and says what serves.
    let fake = gated_by_polls(&format!("{RAMP}  redeploy_on_promotion: [production]\n"));
    let run = through_proxy(&fake, Rule::new("cut", cut).path(PROMOTE_PATH).nth(1));
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let (current, candidate) = env_of(&fake, "production");
    let copy = candidate.or(current).expect("the copy is promoted");
    let tested = run.out("tested-deployment-id");
    assert_ne!(copy, tested);
    assert_eq!(run.out("rolled-back"), "false");
    assert!(
        !deactivated(&fake, &copy),
        "never deactivated: not provably ours"
    );
    assert!(
        !endpoints(&fake).iter().any(|e| e.contains("cancel")),
        "never cancelled: not provably ours"
    );
    assert_run_snapshots!("promote_answer_unreadable_copy", &run);
}

/// The example model with a second deployment `theirs01` another client
/// will promote.
fn gated_with_theirs(extra: &str) -> FakeBaseten {
    per_poll(fake(&format!(
        "manual_clock: true
models:
  - id: gatedmdl
    name: hello-truss-push
    environments: [staging]
    deployments: [{{id: v1dep001, name: v1, environment: production}}, {{id: theirs01, name: theirs}}]
deployments:
  default: [[0, BUILDING], [1, DEPLOYING], [2, ACTIVE]]
{extra}"
    )))
}

#[test]
fn another_runs_promotion_is_never_adopted_when_ours_is_lost() {
    use fake_baseten::proxy::{Fault, Rule};
    // The gate reads production (2nd environment read: the first is the
    // check before anything is created); right after it another client
    // starts promoting its deployment; our promote never arrives.
    let fake = gated_with_theirs(&format!(
        "{RAMP}others:
  - on: rest.get_environment
    nth: 2
    action: {{promote: {{deployment: theirs01, environment: production, steps: [[0, {{status: RAMPING_UP, percent: 10}}], [10000, {{status: SUCCEEDED, percent: 100}}]]}}}}
"
    ));
    let run = through_proxy(
        &fake,
        Rule::new("lost", Fault::ResetBeforeForward).path(PROMOTE_PATH),
    );
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let tested = run.out("tested-deployment-id");
    assert_eq!(
        run.out("deployment-id"),
        tested,
        "theirs is never named ours"
    );
    assert_eq!(
        env_of(&fake, "production"),
        (Some("v1dep001".into()), Some("theirs01".into())),
        "their promotion goes on untouched"
    );
    assert!(!deactivated(&fake, "theirs01"));
    assert!(!endpoints(&fake).iter().any(|e| e.contains("cancel")));
    assert!(
        deactivated(&fake, tested),
        "ours, unpromoted, is cleaned up"
    );
    assert_run_snapshots!("another_promotion_while_ours_is_lost", &run);
}

#[test]
fn a_promote_refused_for_another_promotion_names_both_deployments() {
    let fake = gated_with_theirs(&format!(
        "{RAMP}others:
  - on: rest.get_environment
    nth: 2
    action: {{promote: {{deployment: theirs01, environment: production, steps: [[0, {{status: RAMPING_UP, percent: 10}}], [10000, {{status: SUCCEEDED, percent: 100}}]]}}}}
"
    ));
    let run = run_gated(&fake).run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(!deactivated(&fake, "theirs01"));
    assert_eq!(env_of(&fake, "production").1.as_deref(), Some("theirs01"));
    assert_run_snapshots!("promote_refused_for_another", &run);
}

#[test]
fn a_rollback_never_displaces_another_clients_deployment() {
    // Ours is promoted and fails its environment test; as that test
    // answers, another client promotes its own deployment, which takes
    // production at once. Rolling back to v1dep001 would take production
    // from them.
    // (Theirs fails behind production too, so that a retry of our test
    // reaching theirs cannot pass it.)
    let fake = gated_with_theirs(&format!(
        "{RAMP}{ENV_TEST_FAILS}    - {{name: theirs, via: environment, status: 500, response: {{error: theirs}}}}
others:
  - on: inference.predict
    nth: 2
    action: {{promote: {{deployment: theirs01, environment: production, steps: [[0, {{status: SUCCEEDED, percent: 100}}]]}}}}
"
    ));
    let run = run_gated(&fake).run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    assert_eq!(run.out("rolled-back"), "false");
    assert_eq!(env_of(&fake, "production").0.as_deref(), Some("theirs01"));
    assert_eq!(
        endpoints(&fake)
            .iter()
            .filter(|e| *e == "rest.promote")
            .count(),
        1,
        "no rollback promote"
    );
    assert!(!deactivated(&fake, "theirs01"));
    assert!(!deactivated(&fake, "v1dep001"));
    assert_run_snapshots!("rollback_after_another_client", &run);
}

#[test]
fn the_loser_of_two_first_deploys_pushes_a_version_of_the_model() {
    // No model yet; another run creates it just before our create arrives.
    let fake = per_poll(fake(
        "manual_clock: true
deployments:
  default: [[0, BUILDING], [1, ACTIVE]]
others:
  - on: graphql.create_model_from_truss
    before: true
    action: {create_model: {name: hello-truss-push, deployment: theirs01}}
",
    ));
    let run = Invocation::new(&fake).model(example_model()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    let calls = endpoints(&fake);
    let first = calls
        .iter()
        .position(|e| e == "graphql.create_model_from_truss")
        .expect("tried to create the model");
    let version = calls
        .iter()
        .position(|e| e == "graphql.create_model_version_from_truss")
        .expect("pushed a version instead");
    assert!(first < version, "{calls:?}");
    let model = fake
        .deployments()
        .into_iter()
        .find(|d| d.id == "theirs01")
        .expect("their deployment")
        .model_id;
    assert_eq!(run.out("model-id"), model);
    assert_ne!(run.out("deployment-id"), "theirs01");
    assert!(!deactivated(&fake, "theirs01"), "theirs is left alone");
    assert_run_snapshots!("model_created_by_another_run", &run);
}

#[test]
fn the_loser_of_a_first_deploy_race_never_adopts_the_winners_deployment() {
    use fake_baseten::proxy::{Fault, Rule};
    // As above, the other run's deployment carries our very name (two CI
    // runs of one commit), and the answer to our version push is lost.
    let fake = per_poll(fake(
        "manual_clock: true
deployments:
  default: [[0, BUILDING], [1, ACTIVE]]
others:
  - on: graphql.create_model_from_truss
    before: true
    action: {create_model: {name: hello-truss-push, deployment: theirs01, deployment_name: ci-test}}
",
    ));
    let proxy = fake_baseten::proxy::FaultProxy::builder(fake.addr())
        .rule(
            Rule::new("lost", Fault::DropAfterForward)
                .graphql("create_model_version_from_truss")
                .nth(1),
        )
        .start_in_background()
        .expect("proxy starts");
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
        .arg("inference-url", proxy.inference_template())
        .arg("s3-endpoint", proxy.s3_endpoint())
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let ours = run.out("deployment-id");
    assert_ne!(ours, "theirs01", "{run:?}");
    assert!(!deactivated(&fake, "theirs01"), "theirs is never touched");
    assert!(
        deactivated(&fake, ours),
        "ours, adopted after the lost answer, is cleaned up"
    );
    assert_run_snapshots!("create_answer_lost_after_another_run", &run);
}

#[test]
fn without_promotion_fields_the_gate_waits_for_ours_to_be_current() {
    // The environment reports no promotion fields; the old deployment
    // answers 500 behind production. Passing at once would test it.
    let fake = gated_by_polls(&format!(
        "{RAMP}omit_promotion_fields: true
predict:
  by_deployment:
    - {{name: v1, via: environment, status: 500, response: {{error: the previous deployment answered}}}}
"
    ));
    let run = run_gated(&fake).run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(
        env_of(&fake, "production").0.as_deref(),
        Some(run.out("deployment-id"))
    );
    assert_run_snapshots!("no_promotion_fields", &run);
}

#[test]
fn a_gated_run_ends_within_one_budget_when_nothing_settles() {
    // The promotion never ends and its cancel ramps down forever.
    let fake = gated_by_polls(
        "promote:
  default:
    steps: [[0, {status: RELEASING}], [1, {status: RAMPING_UP, percent: 10}]]
  ramp_down_seconds: 1000000
",
    );
    let (wait, predict) = (4.0, 2.0);
    let run = run_gated(&fake)
        .arg("wait-timeout-seconds", wait.to_string())
        .arg("predict-timeout", predict.to_string())
        .run();
    assert_eq!(run.status(), "deploy_timeout", "{run:?}");
    assert_eq!(run.out("rolled-back"), "false");
    // The documented bound is wait budget + predict-timeout + 60 s: the
    // promotion and its ramp-down would otherwise run for days. That each
    // phase stays inside its own deadline is asserted with a clock that
    // jumps by `budget::a_jumping_clock_never_gets_a_request_past_its_phases_deadline`,
    // not from this run's wall time.
    let bound = std::time::Duration::from_secs_f64(wait + predict + 60.0);
    assert!(run.elapsed <= bound, "{:?} > {bound:?}", run.elapsed);
    let calls = endpoints(&fake);
    let cancel = calls.iter().position(|e| e == "rest.cancel_promotion");
    let promote = calls.iter().position(|e| e == "rest.promote");
    assert!(promote < cancel, "{calls:?}");
    assert_run_snapshots!("nothing_settles", &run);
}

#[test]
fn a_previous_deployment_deactivated_by_the_cleanup_strategy_is_activated_then_promoted_back() {
    let fake = gated_by_polls(&format!(
        "{RAMP}  deactivate_previous: [production]\n{ENV_TEST_FAILS}"
    ));
    let run = run_gated(&fake).run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    assert_eq!(env_of(&fake, "production").0.as_deref(), Some("v1dep001"));
    let calls = endpoints(&fake);
    let activate = calls
        .iter()
        .position(|e| e == "rest.activate_deployment")
        .expect("activated");
    let back = calls
        .iter()
        .rposition(|e| e == "rest.promote")
        .expect("promoted back");
    assert!(activate < back, "{calls:?}");
    assert!(!deactivated(&fake, "v1dep001"));
    assert_run_snapshots!("previous_deactivated_by_cleanup_strategy", &run);
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn a_signal_during_a_chain_promotion_puts_the_previous_chain_deployment_back() {
    // A slow chain promotion; the signal arrives while it is in flight.
    // Chains have no cancel: the run promotes the previous deployment,
    // and when the platform refuses a second promotion it ends ours by
    // deactivating the candidate (its own).
    use crate::chain_harness::{chain_run, fixture};
    let fake = crate::harness::fake(
        "time_scale: 20
chainlets:
  default: [[0, BUILDING_MODEL], [1, MODEL_READY]]
promote:
  default:
    steps: [[0, {status: RELEASING}], [1, {status: RAMPING_UP, percent: 10}], [10000, {status: SUCCEEDED, percent: 100}]]
",
    );
    let chain = fixture("chains/two/two_chain.py");
    let first = chain_run(&fake, &chain)
        .arg("predict-payload", r#"{"x": 21}"#)
        .run();
    assert_eq!(first.status(), "success", "{first:?}");
    let previous = first.out("deployment-id").to_string();
    let name = first.out("model-name").to_string();
    let run = chain_run(&fake, &chain)
        .arg("deployment-name", "gated")
        .arg("predict-payload", r#"{"x": 21}"#)
        .arg("promotion", "after-predict")
        .arg("promote", "true")
        .arg("predict-timeout", "2")
        .run_signalled_at("rest.promote_chain", "INT");
    assert_eq!(run.code, 130, "{run:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    let view = fake.environment(&name, "production").expect("chain env");
    assert_eq!(view.current.as_deref(), Some(previous.as_str()));
    assert_eq!(view.candidate, None);
    let log = fake.requests();
    let calls = names(&log);
    assert!(!calls.contains(&"rest.not_found"), "{calls:?}");
    // The rollback's promote of the previous deployment is refused (one
    // promotion at a time), then ours is deactivated to end its promotion.
    let refused = log
        .iter()
        .position(|e| e.endpoint == "rest.promote_chain" && e.status == Some(400))
        .expect("the previous deployment's promote, refused");
    assert!(
        log[refused..]
            .iter()
            .any(|e| e.endpoint == "rest.deactivate_chain_deployment"),
        "{calls:?}"
    );
}

#[test]
fn a_signal_during_the_environment_test_promotes_the_previous_deployment_back() {
    // Ours serves, and the environment's test takes 3 s: the signal comes
    // once the run has read production serving ours (RAMP ends 4 s after
    // the promote), so it lands while that test is under way.
    let fake = gated_by_polls(&format!(
        "{RAMP}faults: [{{endpoint: inference.predict, after: 1, times: 1, delay_ms: 3000}}]\n"
    ));
    let read_serving = || {
        let log = fake.requests();
        let promote = log.iter().find(|e| e.endpoint == "rest.promote");
        promote.is_some_and(|p| {
            log.iter().any(|e| {
                e.endpoint == "rest.get_environment" && e.scenario_secs >= p.scenario_secs + 4.0
            })
        })
    };
    let run = run_gated(&fake)
        .arg("predict-timeout", "10")
        .run_signalled_when(read_serving, "INT");
    assert_eq!(run.code, 130, "{run:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    assert_eq!(env_of(&fake, "production").0.as_deref(), Some("v1dep001"));
    // After the signal: one more promote, of the previous deployment.
    let log = fake.requests();
    let promotes: Vec<&LogEntry> = log
        .iter()
        .filter(|e| e.endpoint == "rest.promote")
        .collect();
    assert_eq!(promotes.len(), 2, "{:?}", names(&log));
    let back = promotes[1].body.as_ref().expect("the promote's body");
    assert_eq!(back["deployment_id"], "v1dep001", "{back}");
    assert_run_snapshots!("signal_during_environment_test", &run);
}
