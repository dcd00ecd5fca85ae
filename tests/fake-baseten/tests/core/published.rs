//! The published-API check as a test sees it: unknown paths and answers the
//! API does not publish are recorded, and a fake dropped with unclaimed
//! ones fails the test that started it.

use std::panic::AssertUnwindSafe;

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::Scenario;

use crate::common::Client;

fn start(yaml: &str) -> FakeBaseten {
    FakeBaseten::start_in_background(Scenario::from_yaml(yaml).unwrap()).unwrap()
}

/// The panic message a dropped fake gives, if it panics.
fn drop_panics(fake: FakeBaseten) -> Option<String> {
    let err = std::panic::catch_unwind(AssertUnwindSafe(|| drop(fake))).err()?;
    Some(
        err.downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| "a panic without a message".into()),
    )
}

#[test]
fn an_unknown_path_is_recorded_and_fails_the_test_that_asked_it() {
    let fake = start("");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = Client::new(&fake);
    for path in ["/v2/models", "/v1/models/m1/deployments/d1/metrics"] {
        let (status, _) = rt.block_on(c.get(path));
        assert_eq!(status, 404, "{path}");
    }
    let log = fake.requests();
    assert!(
        log.iter().all(|e| e.violations.len() == 1),
        "each unknown path is one violation on its log entry: {log:?}"
    );
    let msg = drop_panics(fake).expect("the dropped fake fails the test");
    assert!(msg.contains("GET /v2/models: unknown path"), "{msg}");
    assert!(
        msg.contains("GET /v1/models/m1/deployments/d1/metrics: GET /v1/models/m1/deployments/d1/metrics is no published endpoint the fake serves"),
        "{msg}"
    );
}

#[test]
fn one_changed_field_of_an_answer_fails_and_claimed_violations_do_not() {
    let models = "teams: [{id: t1, name: ml}]\nmodels: [{id: m1, name: m, team: ml}]\n";
    let clean = start(models);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (status, _) = rt.block_on(Client::new(&clean).get("/v1/models/m1"));
    assert_eq!(status, 200);
    assert_eq!(
        drop_panics(clean),
        None,
        "the fake's own answer is published"
    );

    let edited = start(&format!(
        "{models}answer_edits: [{{endpoint: rest.get_model, pointer: /deployments_count, value: \"2\"}}]\n"
    ));
    let (status, body) = rt.block_on(Client::new(&edited).get("/v1/models/m1"));
    assert_eq!(
        (status.as_u16(), &body["deployments_count"]),
        (200, &"2".into())
    );
    let msg = drop_panics(edited).expect("an unpublished answer fails the test");
    assert!(msg.contains("'/deployments_count'"), "{msg}");

    let claimed = start(&format!(
        "{models}answer_edits: [{{endpoint: rest.get_model, pointer: /deployments_count, value: \"2\"}}]\n"
    ));
    rt.block_on(Client::new(&claimed).get("/v1/models/m1"));
    assert_eq!(claimed.take_violations().len(), 1);
    assert_eq!(drop_panics(claimed), None);
}
