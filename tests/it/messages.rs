//! Messages that point at the right fix: a timeout names the input that
//! set the deadline it hit, an input error among several targets names
//! its target, and nothing says a deployment is being created before the
//! run decided to create one.

use crate::harness::*;

#[test]
fn a_timeout_set_by_wait_timeout_seconds_says_to_raise_that() {
    let fake = fake("deployments:\n  default: [[0, BUILDING]]\n");
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("wait-timeout-seconds", "1")
        .run();
    assert_eq!(run.status(), "deploy_timeout", "{run:?}");
    let error = run.out("error-message");
    assert!(error.contains("raise wait-timeout-seconds"), "{error}");
    assert!(!error.contains("deploy-timeout-minutes"), "{error}");
}

#[test]
fn an_input_error_among_several_targets_names_its_target() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let (_root, dirs) = model_dirs(&["good", "broken"]);
    std::fs::write(
        dirs[1].join("config.yaml"),
        "model_name: broken\nresources: [\n",
    )
    .unwrap();
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    let error = run.out("error-message");
    assert!(
        error.starts_with(&format!("{}: ", dirs[1].display())) && error.contains("not valid YAML"),
        "{error}"
    );
    assert!(fake.requests().is_empty(), "{:?}", endpoints(&fake));
}

#[test]
fn an_existing_model_is_named_without_promising_a_new_deployment() {
    let fake = fake(
        "models:\n  - id: oldmodel\n    name: hello-truss-push\n    deployments: [{id: v1dep001, name: v1, environment: production}]\ndeployments:\n  default: [[0, ACTIVE]]\n",
    );
    let run = Invocation::new(&fake).model(example_model()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.stdout
            .contains("Model \"hello-truss-push\" exists (oldmodel)\n"),
        "{run:?}"
    );
    assert!(!run.stdout.contains("creating a new deployment"), "{run:?}");
}

/// A cancel whose answer is lost is sent again (it is idempotent); the
/// platform refuses the second, the first having applied. The log does
/// not say "the cancel was not taken": it says what the next read shows.
#[test]
fn a_cancel_refused_after_a_lost_answer_says_what_the_read_shows() {
    use fake_baseten::proxy::{Fault, FaultProxy, Rule, When};
    let fake = per_poll(fake(
        "manual_clock: true
time_scale: 20
models:
  - id: gatedmdl
    name: hello-truss-push
    deployments: [{id: v1dep001, name: v1, environment: production}]
deployments:
  default: [[0, BUILDING], [1, DEPLOYING], [2, ACTIVE]]
promote:
  default:
    rolling_deploy: false
    steps:
      - [0, {status: RELEASING}]
      - [1, {status: RAMPING_UP, percent: 50}]
      - [10000, {status: SUCCEEDED, percent: 100}]
  ramp_down_seconds: 1
",
    ));
    let proxy = FaultProxy::builder(fake.addr())
        .rule(
            Rule::new("cancel-lost", Fault::DropAfterForward)
                .path("/v1/models/gatedmdl/environments/production/cancel_promotion")
                .when(When::Nth(1)),
        )
        // The retry refused, as a platform refuses to cancel what is no
        // longer in flight.
        .rule(
            Rule::new(
                "cancel-refused",
                Fault::HtmlError {
                    status: 400,
                    echo: None,
                },
            )
            .path("/v1/models/gatedmdl/environments/production/cancel_promotion")
            .when(When::Nth(2)),
        )
        .start_in_background()
        .expect("proxy starts");
    // Signalled once the split is read, after the promote.
    let split_read = || {
        let log = fake.requests();
        log.iter()
            .position(|e| e.endpoint == "rest.promote")
            .is_some_and(|at| {
                log[at..]
                    .iter()
                    .filter(|e| e.endpoint == "rest.get_environment")
                    .count()
                    >= 2
            })
    };
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("promotion", "after-predict")
        .arg("environment", "production")
        .arg("predict-timeout", "2")
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
        .arg("inference-url", proxy.inference_template())
        .arg("s3-endpoint", proxy.s3_endpoint())
        .run_signalled_when(split_read, "INT");
    assert_eq!(run.code, 130, "{run:?}");
    // The first cancel reached the platform (its answer was dropped).
    assert!(
        endpoints(&fake)
            .iter()
            .any(|e| e == "rest.cancel_promotion"),
        "{:?}",
        endpoints(&fake)
    );
    assert!(!run.stdout.contains("the cancel was not taken"), "{run:?}");
    assert_in_order(
        &run.stdout,
        &[
            "the cancel request answered",
            "after the cancel: production serves deployment",
        ],
    );
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
}
