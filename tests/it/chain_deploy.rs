//! A chain deploy end to end: the real `truss_chains` generates the
//! chainlets, the binary pushes them to the fake, waits on raw chainlet
//! statuses, calls `run_remote` and cleans up.

use std::collections::BTreeSet;

use fake_baseten::FakeBaseten;
use serde_json::Value;

use crate::chain_harness::*;
use crate::harness::*;

fn chain_fake(chainlets_yaml: &str) -> FakeBaseten {
    fake(&format!("time_scale: 1\nchainlets:\n{chainlets_yaml}"))
}

fn two_chain() -> std::path::PathBuf {
    fixture("chains/two/two_chain.py")
}

fn three_chain() -> std::path::PathBuf {
    fixture("chains/three/three_chain.py")
}

/// Scenario seconds at which the fake created the chain deployment.
fn created_at(fake: &FakeBaseten) -> f64 {
    fake.requests()
        .into_iter()
        .find(|r| r.endpoint == "graphql.deploy_chain_atomic")
        .expect("deploy_chain_atomic was called")
        .scenario_secs
}

fn polls_after(fake: &FakeBaseten, secs: f64) -> usize {
    fake.requests()
        .into_iter()
        .filter(|r| r.endpoint == "graphql.chain_deployment" && r.scenario_secs >= secs)
        .count()
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn every_chainlet_ready_is_success_with_chain_outputs() {
    let fake = chain_fake("  default: [[0, BUILDING_MODEL], [0.3, MODEL_READY]]\n");
    let run = chain_run(&fake, &two_chain())
        .arg("predict-payload", r#"{"x": 21}"#)
        .arg("cleanup", "true")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.status(), "success");
    assert_eq!(run.out("model-name"), "two-chain");
    assert_eq!(run.out("model-id"), "");
    assert_eq!(run.out("last-status"), "MODEL_READY");
    let atomic = graphql_calls(&fake, "deploy_chain_atomic");
    assert_eq!(atomic.len(), 1, "{atomic:?}");
    assert_eq!(atomic[0]["chain_name"], "two-chain");
    assert_eq!(atomic[0]["deployment_name"], "ci-test");
    assert_eq!(atomic[0]["entrypoint"]["name"], "Front");
    assert_eq!(atomic[0]["dependencies"][0]["name"], "Doubler");
    let chain_id = run.out("chain-id");
    assert!(!chain_id.is_empty(), "{run:?}");
    let deployment_id = run.out("deployment-id");
    let polled = graphql_calls(&fake, "chain_deployment");
    assert!(
        polled.iter().all(|a| a["id"] == deployment_id),
        "deployment-id is the chain deployment id: {polled:?}"
    );
    for name in ["Front", "Doubler"] {
        assert!(
            run.stdout.contains(&format!(
                "chainlet {name} status BUILDING_MODEL (in progress)"
            )),
            "{run:?}"
        );
        assert!(
            run.stdout
                .contains(&format!("chainlet {name} status MODEL_READY (ready)")),
            "{run:?}"
        );
        assert_eq!(
            run.stdout.matches(&format!("logs of {name}: ")).count(),
            1,
            "each chainlet's logs URL once: {run:?}"
        );
    }
    let e = endpoints(&fake);
    assert_eq!(
        e.iter().filter(|x| *x == "inference.run_remote").count(),
        1,
        "{e:?}"
    );
    assert!(!run.out("predict-response").is_empty(), "{run:?}");
    assert!(
        e.iter().any(|x| x == "rest.deactivate_chain_deployment"),
        "{e:?}"
    );
    // Two chainlet trusses and the chain source.
    let uploads: BTreeSet<&str> = atomic[0]["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .chain([&atomic[0]["entrypoint"]])
        .map(|c| c["oracle"]["s3_key"].as_str().unwrap())
        .chain([atomic[0]["original_source_artifact_s3_key"]
            .as_str()
            .unwrap()])
        .collect();
    assert_eq!(uploads.len(), 3, "{atomic:?}");
    assert!(!run.everything().contains(API_KEY));
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn one_failed_chainlet_fails_within_one_poll() {
    let fake = chain_fake(
        "  default: [[0, BUILDING_MODEL]]\n  by_name:\n    Counter: [[0, BUILDING_MODEL], [0.5, MODEL_DEPLOY_FAILED]]\n",
    );
    let run = chain_run(&fake, &three_chain())
        .arg("deploy-timeout-minutes", "10")
        .arg("labels", r#"{"team": "ml"}"#)
        .run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let msg = run.out("error-message");
    assert!(
        msg.contains("chainlet Counter failed with status MODEL_DEPLOY_FAILED"),
        "{msg}"
    );
    assert_eq!(run.out("last-status"), "MODEL_DEPLOY_FAILED");
    // The failure is seen by the first poll after it happened.
    let counter = fake
        .deployments()
        .into_iter()
        .find(|d| d.chain_deployment_id.is_some() && d.model_name.starts_with("Counter-"))
        .expect("the Counter chainlet was deployed");
    let failed_at = counter.created_at_secs + 0.5;
    // (Zero when the poll that saw it arrived a hair before the failure
    // time in the fake's log but was answered after it.)
    assert!(polls_after(&fake, failed_at) <= 1, "{run:?}");
    // No model-name input and no name in the code: the entrypoint's name.
    assert_eq!(run.out("model-name"), "WordCount");
    let atomic = graphql_calls(&fake, "deploy_chain_atomic");
    let deps: Vec<&str> = atomic[0]["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(deps, ["Splitter", "Counter"]);
    // Labels cannot go with a chain: said, not silently dropped.
    assert!(
        run.stderr.contains("labels are not supported for chains"),
        "{run:?}"
    );
    // The chain source honours the chain root's .truss_ignore.
    let source = tar_members(
        &fake,
        atomic[0]["original_source_artifact_s3_key"]
            .as_str()
            .unwrap(),
    );
    assert!(source.contains("three_chain.py"), "{source:?}");
    assert!(!source.contains("secret-notes.txt"), "{source:?}");
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn scaled_to_zero_and_ready_chainlets_are_success() {
    let fake = chain_fake(
        "  default: [[0, MODEL_READY]]\n  by_name:\n    Doubler: [[0, BUILDING_MODEL], [0.2, SCALED_TO_ZERO]]\n",
    );
    let run = chain_run(&fake, &two_chain()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.stdout
            .contains("chainlet Doubler status SCALED_TO_ZERO (ready)"),
        "{run:?}"
    );
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn an_unknown_chainlet_status_keeps_polling() {
    let fake = chain_fake("  default: [[0, RESHARDING_REPLICAS], [0.4, MODEL_READY]]\n");
    let run = chain_run(&fake, &two_chain()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.stdout
            .contains("chainlet Front status RESHARDING_REPLICAS (in progress)"),
        "{run:?}"
    );
    assert_eq!(
        format!("{}{}", run.stdout, run.stderr)
            .matches("unknown chainlet status \"RESHARDING_REPLICAS\"")
            .count(),
        1,
        "{run:?}"
    );
    assert!(polls_after(&fake, created_at(&fake)) >= 3, "{run:?}");
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn an_import_error_is_reported_and_nothing_is_uploaded() {
    let fake = chain_fake("  default: [[0, MODEL_READY]]\n");
    let run = chain_run(&fake, &fixture("chains/broken/broken_chain.py"))
        .outputs_file("outputs.json")
        .run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert_ne!(run.code, 0);
    let msg = run.out("error-message");
    assert!(msg.contains("could not be imported"), "{msg}");
    assert!(
        msg.contains("No module named 'a_module_that_does_not_exist'"),
        "{msg}"
    );
    assert!(
        msg.contains("broken_chain.py\", line"),
        "traceback lines: {msg}"
    );
    assert!(run.outputs_file.is_some(), "{run:?}");
    let e = endpoints(&fake);
    assert!(!e.iter().any(|x| x.starts_with("s3.")), "{e:?}");
    assert!(mutations(&fake).is_empty(), "{e:?}");
}

/// The shape of a `deploy_chain_atomic` call: argument names, chainlet
/// names in order, and each chainlet's oracle field names.
fn shape(args: &Value) -> (BTreeSet<String>, Vec<String>, Vec<BTreeSet<String>>) {
    let keys = |v: &Value| -> BTreeSet<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    let chainlets: Vec<&Value> = std::iter::once(&args["entrypoint"])
        .chain(args["dependencies"].as_array().unwrap())
        .collect();
    (
        keys(args),
        chainlets
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect(),
        chainlets.iter().map(|c| keys(&c["oracle"])).collect(),
    )
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn deploy_chain_atomic_matches_what_truss_chains_push_sends() {
    let source = fixture("conformance/chain/conformance_chain.py");
    let yaml = "time_scale: 1\nchainlets:\n  default: [[0, MODEL_READY]]\n";
    let real_fake = fake(yaml);
    let real = real_truss_chains_push(&real_fake, &source, &["--deployment-name", "ci-test"]);
    let stdout = String::from_utf8_lossy(&real.stdout);
    assert!(
        stdout.contains("Deployment succeeded."),
        "truss chains push:\n{stdout}\n{}",
        String::from_utf8_lossy(&real.stderr)
    );
    let theirs = graphql_calls(&real_fake, "deploy_chain_atomic");

    let our_fake = fake(yaml);
    let run = chain_run(&our_fake, &source).run();
    assert_eq!(run.status(), "success", "{run:?}");
    let ours = graphql_calls(&our_fake, "deploy_chain_atomic");

    assert_eq!(
        shape(&ours[0]),
        shape(&theirs[0]),
        "ours {ours:?}\ntheirs {theirs:?}"
    );
    assert_eq!(ours[0]["deployment_name"], theirs[0]["deployment_name"]);
    assert_eq!(ours[0]["team_id"], theirs[0]["team_id"]);
    assert_eq!(ours[0]["chain_name"], theirs[0]["chain_name"]);
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn a_chain_into_an_environment_waits_for_the_promotion() {
    // Chainlets are ready at 0.3 s, but the chain's promotion into
    // production only succeeds at 2.5 s: success must wait for it.
    let fake = fake(
        "time_scale: 1\nchainlets:\n  default: [[0, BUILDING_MODEL], [0.3, MODEL_READY]]\npromotions:\n  default:\n    steps: [[0, {status: RELEASING, percent: 0}], [1.0, {status: RAMPING_UP, percent: 40}], [2.5, {status: SUCCEEDED, percent: 100}]]\n",
    );
    let run = chain_run(&fake, &two_chain())
        .arg("environment", "production")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    // A chain environment reports no promotion status
    // (ChainEnvironmentV1): the candidate is all there is to see.
    assert!(
        run.stdout.contains("promotion into production: PROMOTING"),
        "{run:?}"
    );
    let created = fake
        .deployments()
        .into_iter()
        .filter_map(|d| d.chain_deployment_id.map(|_| d.created_at_secs))
        .fold(f64::MAX, f64::min);
    let last_env_read = fake
        .requests()
        .into_iter()
        .filter(|r| r.endpoint == "rest.get_chain_environment")
        .map(|r| r.scenario_secs)
        .fold(0.0, f64::max);
    assert!(
        last_env_read >= created + 2.5,
        "ready only once the promotion succeeded: {last_env_read} vs {created}"
    );
}
