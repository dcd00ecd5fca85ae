//! The schema check over the binary's own traffic: every test's fake checks
//! each REST exchange against the published API and fails the test on a
//! mismatch (see tests/fake-baseten/src/schema). This proves the check can
//! fail: one documented field of one answer changed, nothing else.

use std::panic::AssertUnwindSafe;

use crate::harness::{Invocation, example_model, fake};

const DEPLOY: &str = "deployments:\n  default: [[0, BUILDING], [0.2, ACTIVE]]\n";

#[test]
fn a_deploy_s_traffic_matches_the_published_api() {
    let fake = fake(DEPLOY);
    let run = Invocation::new(&fake).model(example_model()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        fake.requests()
            .iter()
            .any(|e| e.endpoint == "rest.get_deployment")
    );
    assert_eq!(fake.take_violations(), []);
}

#[test]
fn one_changed_field_of_the_status_answer_fails_the_test() {
    // `active_replica_count` is a documented integer the binary never
    // reads, so the deploy itself succeeds and only the check can notice.
    let fake = fake(&format!(
        "{DEPLOY}answer_edits: [{{endpoint: rest.get_deployment, pointer: /active_replica_count, value: \"one\"}}]\n"
    ));
    let run = Invocation::new(&fake).model(example_model()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    let polls: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|e| e.endpoint == "rest.get_deployment")
        .collect();
    assert!(!polls.is_empty());
    for p in &polls {
        assert!(
            p.violations.len() == 1 && p.violations[0].contains("'/active_replica_count'"),
            "{p:?}"
        );
    }
    let dropped = std::panic::catch_unwind(AssertUnwindSafe(|| drop(fake)));
    let msg = dropped
        .expect_err("a fake that served an unpublished answer fails its test")
        .downcast::<String>()
        .expect("a message");
    assert!(msg.contains("want integer, but got string"), "{msg}");
}
