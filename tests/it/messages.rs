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
