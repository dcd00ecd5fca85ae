//! Prune and teardown against audit logs and listings of odd shapes: what
//! the platform answers is input, and an answer that does not decide the
//! previous serving deployment never lets it be retired.

use fake_baseten::FakeBaseten;

use super::*;

/// A model whose production serves `prod0003` (promoted 3 days ago), with
/// `prev0003` (30 days) and `old00003` (40 days) labelled, and the audit
/// log's `entries` (scenario lines).
fn model_with_log(entries: &[&str]) -> FakeBaseten {
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
