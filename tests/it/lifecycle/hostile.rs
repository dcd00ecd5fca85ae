//! Prune and teardown against audit logs and listings of odd shapes: what
//! the platform answers is input, and an answer that does not decide the
//! previous serving deployment never lets it be retired.

use fake_baseten::FakeBaseten;

use super::*;

/// A model whose production serves `prod0003` (promoted 3 days ago), with
/// `prev0003` (30 days) and `old00003` (40 days) labelled, and the audit
/// log's `entries` (scenario lines).
fn model_with_log(entries: &[&str]) -> FakeBaseten {
    model_with_log_and(entries, "")
}

/// [`model_with_log`] with `extra` scenario keys.
fn model_with_log_and(entries: &[&str], extra: &str) -> FakeBaseten {
    let mut y = String::from(
        "manual_clock: true\nmodels:\n  - id: prune003\n    name: pruned\n    deployments:\n",
    );
    y += &dep(
        "prod0003",
        3,
        &format!(", environment: production{}", labelled()),
    );
    y += &dep("prev0003", 30, &labelled());
    y += &dep("old00003", 40, &labelled());
    y += "audit_log:\n  entries:\n";
    for e in entries {
        y += &format!("    - {e}\n");
    }
    y += extra;
    fake(&y)
}

fn prune_keep_0_like(fake: &FakeBaseten) -> Outcome {
    let dir = model_dir("model_name: pruned\n");
    command(fake, "prune")
        .arg("truss-directory", dir.path().to_str().unwrap())
        .arg("older-than", "1h")
        .run()
}

/// The previous production was promoted by an entry whose
/// `environment_name` is null (the published schema allows it): which
/// environment it went into is not known, so it may be what served
/// production before the current one. The log does not decide it: nothing
/// of the model is retired, and the run says why.
#[test]
fn a_promotion_naming_no_environment_leaves_the_previous_undecided() {
    let fake = model_with_log(&[
        "{at: -3456000, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: old00003, environment: production}",
        "{at: -2592000, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: prev0003}",
        "{at: -259200, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: prod0003, environment: production}",
    ]);
    let run = prune_keep_0_like(&fake);
    assert!(deleted(&fake).is_empty(), "{run:?}");
    assert!(mutations_of(&fake).is_empty(), "{run:?}");
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.out("status"), "cleanup_failed");
    assert!(
        run.out("error-message").contains("names no environment"),
        "{run:?}"
    );
}

/// An entry promoting a deployment by an id that is not one (empty here)
/// between the previous production and the current one: the log names no
/// usable previous deployment, so it decides nothing (as rollback holds).
#[test]
fn a_promotion_by_an_id_that_is_not_one_decides_nothing() {
    let fake = model_with_log(&[
        "{at: -2592000, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: prev0003, environment: production}",
        "{at: -1728000, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: '', environment: production}",
        "{at: -259200, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: prod0003, environment: production}",
    ]);
    let run = prune_keep_0_like(&fake);
    assert!(deleted(&fake).is_empty(), "{run:?}");
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.out("status"), "cleanup_failed");
    assert!(run.out("error-message").contains("not one"), "{run:?}");
}

/// The development deployment of `super::prune::nine`'s model listed
/// without `is_development` (a field the published `DeploymentV1`
/// requires): the listing does not say it is not the development
/// deployment, so nothing of the model is retired on it.
#[test]
fn a_listing_without_is_development_retires_nothing() {
    let edit = format!(
        "answer_edits:\n  - {{endpoint: rest.list_deployments, pointer: /deployments/4, value: {{id: devl0001, name: devl0001, model_id: prune001, status: ACTIVE, created_at: \"2020-01-01T00:00:00Z\", is_production: false, environment: null, active_replica_count: 0, autoscaling_settings: null, instance_type_name: null, labels: {{truss_push_content_hash: \"{HASH}\"}}}}}}\n"
    );
    let fake = super::prune::nine(&edit);
    let dir = model_dir("model_name: pruned\n");
    let run = command(&fake, "prune")
        .arg("truss-directory", dir.path().to_str().unwrap())
        .arg("keep", "2")
        .run();
    assert!(!deleted(&fake).contains(&"devl0001".to_string()), "{run:?}");
    assert!(deleted(&fake).is_empty(), "{run:?}");
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.out("error-message").contains("is_development"),
        "{run:?}"
    );
    // The answer breaks the published schema on purpose.
    assert!(!fake.take_violations().is_empty());
}

/// A deployment listed twice, once building and once active (an answer
/// that contradicts itself): which is true is not known, so nothing of
/// the model is retired.
#[test]
fn a_deployment_listed_twice_retires_nothing() {
    let edit = "answer_edits:\n  - {endpoint: rest.list_deployments, pointer: /deployments/9/id, value: bld00001}\n";
    let fake = super::prune::nine(edit);
    let dir = model_dir("model_name: pruned\n");
    let run = command(&fake, "prune")
        .arg("truss-directory", dir.path().to_str().unwrap())
        .arg("keep", "2")
        .run();
    assert!(!deleted(&fake).contains(&"bld00001".to_string()), "{run:?}");
    assert!(deleted(&fake).is_empty(), "{run:?}");
    assert_eq!(run.code, 5, "{run:?}");
    assert!(run.out("error-message").contains("twice"), "{run:?}");
}

/// An environment answered without `current_deployment` (required, null
/// when nothing serves, in the published `EnvironmentV1`), while the
/// listing names no environment for the deployment that serves it: the
/// answer does not say what serves, so nothing is retired.
#[test]
fn an_environment_without_current_deployment_retires_nothing() {
    let edit = "answer_edits:\n  - {endpoint: rest.list_environments, pointer: /environments/0, value: {name: production, model_id: prune001, created_at: \"2026-01-01T00:00:00Z\", candidate_deployment: null, in_progress_promotion: null}}\n  - {endpoint: rest.list_deployments, pointer: /deployments/0/environment, value: null}\n";
    let fake = super::prune::nine(edit);
    let dir = model_dir("model_name: pruned\n");
    let run = command(&fake, "prune")
        .arg("truss-directory", dir.path().to_str().unwrap())
        .arg("older-than", "1h")
        .run();
    assert!(!deleted(&fake).contains(&"prod0001".to_string()), "{run:?}");
    assert!(deleted(&fake).is_empty(), "{run:?}");
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.out("error-message").contains("current_deployment"),
        "{run:?}"
    );
    // The answer breaks the published schema on purpose.
    assert!(!fake.take_violations().is_empty());
}

/// Production's answer says a promotion is moving traffic
/// (`in_progress_promotion` RAMPING_DOWN, as a cancelled one ramps back)
/// but names no `candidate_deployment` (null is allowed): the deployment
/// that still takes part of the traffic is not known, so nothing of the
/// model is retired.
#[test]
fn a_promotion_moving_traffic_without_a_named_candidate_retires_nothing() {
    let edit = "answer_edits:\n  - {endpoint: rest.list_environments, pointer: /environments/0/in_progress_promotion, value: {status: RAMPING_DOWN, percent_traffic_to_new_version: 30}}\n";
    let fake = super::prune::nine(edit);
    let dir = model_dir("model_name: pruned\n");
    let run = command(&fake, "prune")
        .arg("truss-directory", dir.path().to_str().unwrap())
        .arg("older-than", "1h")
        .run();
    assert!(deleted(&fake).is_empty(), "{run:?}");
    assert!(mutations_of(&fake).is_empty(), "{run:?}");
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.out("error-message").contains("names no candidate"),
        "{run:?}"
    );
}

/// `older-than` ending in a character of several bytes (`1é`, `14д`,
/// an RTL override): an input error, exit 2 before any request — not an
/// internal error.
#[test]
fn an_older_than_ending_in_a_wide_character_is_an_input_error() {
    for odd in ["1é", "14д", "14d\u{202e}", "\u{202e}"] {
        let fake = super::prune::nine("");
        let dir = model_dir("model_name: pruned\n");
        let run = command(&fake, "prune")
            .arg("truss-directory", dir.path().to_str().unwrap())
            .arg("older-than", odd)
            .run();
        assert_eq!(run.code, 2, "{odd:?}: {run:?}");
        assert!(
            run.out("error-message").contains("older-than must be"),
            "{run:?}"
        );
        assert!(fake.requests().is_empty(), "{odd:?}");
    }
}

/// The model's audit log answers an entry of another model (its
/// `event_data.model_id` is not this model's): the log read is not this
/// model's history alone, so it decides nothing — before, the other
/// model's deployment was taken for the previous production and the real
/// one retired.
#[test]
fn an_audit_entry_of_another_model_decides_nothing() {
    let fake = model_with_log_and(
        &[
            "{at: -2592000, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: prev0003, environment: production}",
            "{at: -1728000, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: frgn0001, environment: production}",
            "{at: -259200, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: prod0003, environment: production}",
        ],
        "answer_edits:\n  - {endpoint: rest.get_audit_logs, pointer: /items/1/event_data/model_id, value: othr0001}\n",
    );
    let run = prune_keep_0_like(&fake);
    assert!(deleted(&fake).is_empty(), "{run:?}");
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.out("error-message").contains("another model"),
        "{run:?}"
    );
}

/// Production went old00003 → prev0003 → prod0003, and prev0003 is
/// DEPLOY_FAILED now (activated again after it served, and failed to come
/// up): a status alone does not say it never served, so it stays
/// protected as the previous production.
#[test]
fn a_previous_production_that_failed_later_is_still_protected() {
    let mut y = String::from(
        "manual_clock: true\nmodels:\n  - id: prune004\n    name: pruned\n    deployments:\n",
    );
    y += &dep(
        "prod0004",
        3,
        &format!(", environment: production{}", labelled()),
    );
    y += &dep(
        "prev0004",
        30,
        &format!(", status: DEPLOY_FAILED{}", labelled()),
    );
    y += &dep("old00004", 40, &labelled());
    y += "audit_log:\n  entries:\n";
    for (at, id) in [
        (-3456000, "old00004"),
        (-2592000, "prev0004"),
        (-259200, "prod0004"),
    ] {
        y += &format!(
            "    - {{at: {at}, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: {id}, environment: production}}\n"
        );
    }
    let fake = fake(&y);
    let run = prune_keep_0_like(&fake);
    assert!(!deleted(&fake).contains(&"prev0004".to_string()), "{run:?}");
}

/// Two deployments placed in production at the same instant just before
/// the current one, in either order of the answer: which served just
/// before is not known, so nothing of the model is retired.
#[test]
fn two_promotions_at_one_instant_before_the_current_retire_nothing() {
    for (first, second) in [("prev0003", "old00003"), ("old00003", "prev0003")] {
        let fake = model_with_log_and(
            &[
                &format!(
                    "{{at: -2592000, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: {first}, environment: production}}"
                ),
                &format!(
                    "{{at: -2592000, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: {second}, environment: production}}"
                ),
                "{at: -259200, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: prod0003, environment: production}",
            ],
            "",
        );
        let run = prune_keep_0_like(&fake);
        assert!(deleted(&fake).is_empty(), "{run:?}");
        assert_eq!(run.code, 5, "{run:?}");
        assert!(run.out("error-message").contains("same instant"), "{run:?}");
    }
}
