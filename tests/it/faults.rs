//! A broken network between the binary and the platform: a fault-injecting
//! proxy sits in front of the fake and loses answers, resets connections,
//! redirects, or answers error pages. Whatever happens, no deployment is
//! created twice, none is left unreported, and the key goes nowhere else.
//! What the user reads of each case (the log and the step summary) is a
//! snapshot: the fake's clock moves one second per poll, so it is the same
//! on every run.

use fake_baseten::FakeBaseten;
use fake_baseten::proxy::{Fault, FaultProxy, RedirectTo, Rule};

use crate::assert_run_snapshots;
use crate::harness::*;

/// An existing model, so deploys create a new deployment of it.
const EXISTING: &str = "teams: [{id: t1, name: ml, default: true}]\nmodels:\n  - {id: oldmodel, name: hello-truss-push, team: ml, deployments: [{id: olddep, name: v0, status: ACTIVE}]}\ndeployments:\n  default: [[0, BUILDING], [1, ACTIVE]]\n";
/// No model yet: the first deploy creates it.
const NEW: &str = "teams: [{id: t1, name: ml, default: true}]\ndeployments:\n  default: [[0, BUILDING], [1, ACTIVE]]\n";

/// A fake of `scenario` on a clock that moves a second per poll (see
/// [`per_poll`]): a deployment is read BUILDING once, then ACTIVE.
fn fake_by_polls(scenario: &str) -> FakeBaseten {
    per_poll(fake(&format!("manual_clock: true\n{scenario}")))
}

fn through(fake: &FakeBaseten, rules: Vec<Rule>) -> FaultProxy {
    let mut b = FaultProxy::builder(fake.addr());
    for r in rules {
        b = b.rule(r);
    }
    b.start_in_background().expect("proxy starts")
}

/// A deploy of the example model whose every request goes through `proxy`.
fn deploy(fake: &FakeBaseten, proxy: &FaultProxy) -> Outcome {
    Invocation::new(fake)
        .model(example_model())
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
        .arg("inference-url", proxy.inference_template())
        .arg("s3-endpoint", proxy.s3_endpoint())
        .arg("cleanup", "false")
        .run()
}

/// Deployments the fake holds that are named like ours.
fn ours(fake: &FakeBaseten) -> Vec<String> {
    fake.deployments()
        .into_iter()
        .filter(|d| d.name == "ci-test")
        .map(|d| d.id)
        .collect()
}

fn creates(fake: &FakeBaseten) -> usize {
    endpoints(fake)
        .iter()
        .filter(|e| e.starts_with("graphql.create_model"))
        .count()
}

#[test]
fn a_create_applied_but_unanswered_is_adopted_not_sent_again() {
    for (name, scenario, field) in [
        (
            "existing_model",
            EXISTING,
            "create_model_version_from_truss",
        ),
        ("new_model", NEW, "create_model_from_truss"),
    ] {
        let fake = fake_by_polls(scenario);
        let proxy = through(
            &fake,
            vec![Rule::new("lost", Fault::DropAfterForward).graphql(field)],
        );
        let run = deploy(&fake, &proxy);
        assert_eq!(run.status(), "success", "{run:?}");
        // The platform applied it once and the binary never sent it again.
        assert_eq!(creates(&fake), 1, "{field}: {:?}", endpoints(&fake));
        let ids = ours(&fake);
        assert_eq!(ids.len(), 1, "{ids:?}");
        assert_eq!(run.out("deployment-id"), ids[0]);
        assert!(!run.everything().contains(API_KEY));
        assert_run_snapshots!(&format!("create_answer_lost_{name}"), &run);
    }
}

#[test]
fn a_create_refused_before_arrival_is_sent_once_more() {
    for (name, fault) in [
        ("reset", Fault::ResetBeforeForward),
        (
            "html_502",
            Fault::HtmlError {
                status: 502,
                echo: None,
            },
        ),
    ] {
        let fake = fake_by_polls(EXISTING);
        let proxy = through(
            &fake,
            vec![
                Rule::new("cut", fault.clone())
                    .graphql("create_model_version_from_truss")
                    .nth(1),
            ],
        );
        let run = deploy(&fake, &proxy);
        assert_eq!(run.status(), "success", "{fault:?}: {run:?}");
        assert_eq!(creates(&fake), 1, "{fault:?}");
        assert_eq!(ours(&fake).len(), 1, "{fault:?}");
        assert_run_snapshots!(&format!("create_refused_before_arrival_{name}"), &run);
    }
}

#[test]
fn a_create_whose_outcome_stays_unknown_fails_naming_what_to_check() {
    let fake = fake_by_polls(EXISTING);
    // Every create is lost, and so is every attempt to list deployments.
    let proxy = through(
        &fake,
        vec![
            Rule::new("lost", Fault::DropAfterForward).graphql("create_model_version_from_truss"),
            // The lookup is refused for good (a 403 is not retried).
            Rule::new(
                "blind",
                Fault::Status {
                    status: 403,
                    retry_after: None,
                    body: Some(r#"{"message": "forbidden"}"#.into()),
                    content_type: Some("application/json".into()),
                },
            )
            .method("GET")
            .path("/v1/models/oldmodel/deployments"),
        ],
    );
    let run = deploy(&fake, &proxy);
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert_eq!(run.code, 1);
    // Sent once: an unknown outcome is never resent blind.
    assert_eq!(creates(&fake), 1);
    assert_run_snapshots!("create_outcome_unknown", &run);
}

#[test]
fn a_lost_create_that_did_not_happen_is_sent_once_more_then_adopted() {
    let fake = fake_by_polls(EXISTING);
    // The first create is answered 502 by a proxy that never forwarded it:
    // the lookup finds nothing, the second goes through.
    let proxy = through(
        &fake,
        vec![
            Rule::new(
                "gateway",
                Fault::HtmlError {
                    status: 504,
                    echo: None,
                },
            )
            .graphql("create_model_version_from_truss")
            .nth(1),
        ],
    );
    let run = deploy(&fake, &proxy);
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(ours(&fake).len(), 1);
    assert_run_snapshots!("create_lost_before_arrival", &run);
}

#[test]
fn redirects_to_another_origin_are_not_followed_and_carry_no_key() {
    let fake = fake_by_polls(EXISTING);
    let proxy = through(
        &fake,
        vec![
            Rule::new(
                "away",
                Fault::Redirect {
                    status: 307,
                    to: RedirectTo::Sink,
                },
            )
            .graphql("teams"),
        ],
    );
    let run = deploy(&fake, &proxy);
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    // Nothing reached the other origin, with or without the key.
    assert!(
        proxy.sink_requests().is_empty(),
        "{:?}",
        proxy.sink_requests()
    );
    assert_eq!(creates(&fake), 0);
    assert_run_snapshots!("redirect_to_another_origin", &run);
}

#[test]
fn an_error_page_echoing_the_key_leaks_it_nowhere() {
    let fake = fake_by_polls(EXISTING);
    let proxy = through(
        &fake,
        vec![
            Rule::new(
                "echo",
                Fault::HtmlError {
                    status: 503,
                    echo: Some(format!("Authorization: Api-Key {API_KEY}")),
                },
            )
            .method("GET")
            .path_like("/v1/models/oldmodel/deployments/*")
            .first(2),
        ],
    );
    let run = deploy(&fake, &proxy);
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(!run.everything().contains(API_KEY), "{}", run.everything());
    assert_run_snapshots!("error_page_echoing_the_key", &run);
}

#[test]
fn truncated_and_dripped_status_answers_are_polled_through() {
    let fake = fake_by_polls(EXISTING);
    let proxy = through(
        &fake,
        vec![
            Rule::new(
                "cut",
                Fault::TruncatedJson {
                    keep: Some(10),
                    content_length: fake_baseten::proxy::DeclaredLength::Truncated,
                },
            )
            .method("GET")
            .path_like("/v1/models/oldmodel/deployments/*")
            .nth(1),
            Rule::new(
                "slow",
                Fault::Drip {
                    bytes: 64,
                    interval_ms: 5,
                },
            )
            .method("GET")
            .path_like("/v1/models/oldmodel/deployments/*")
            .nth(2),
        ],
    );
    let run = deploy(&fake, &proxy);
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(ours(&fake).len(), 1);
    assert_run_snapshots!("truncated_and_dripped_polls", &run);
}

/// A deploy through `proxy` with a `wait_secs` budget for everything up to
/// ready.
fn deploy_within(fake: &FakeBaseten, proxy: &FaultProxy, wait_secs: &str) -> Outcome {
    Invocation::new(fake)
        .model(example_model())
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
        .arg("inference-url", proxy.inference_template())
        .arg("s3-endpoint", proxy.s3_endpoint())
        .arg("wait-timeout-seconds", wait_secs)
        .arg("predict-timeout", "2")
        .run()
}

#[test]
fn the_wait_budget_holds_for_setup_against_a_silent_server() {
    let fake = fake_by_polls(EXISTING);
    let proxy = through(
        &fake,
        vec![Rule::new("silent", Fault::Hang).graphql("teams")],
    );
    let run = deploy_within(&fake, &proxy, "3");
    assert_eq!(run.status(), "deploy_timeout", "{run:?}");
    assert_eq!(run.code, 3);
    // Without the budget: five tries of 120 s each. The budget is 3 s; the
    // bound only tells seconds from minutes, so a loaded runner cannot fail it.
    assert!(run.elapsed.as_secs() < 60, "{:?}", run.elapsed);
    assert_eq!(creates(&fake), 0);
    assert_run_snapshots!("silent_server_during_setup", &run);
}

#[test]
fn a_huge_retry_after_does_not_outlast_the_budget() {
    let fake = fake_by_polls(EXISTING);
    let proxy = through(
        &fake,
        vec![
            Rule::new(
                "throttle",
                Fault::TooManyRequests {
                    retry_after: "999999".into(),
                },
            )
            .graphql("teams"),
        ],
    );
    let run = deploy_within(&fake, &proxy, "3");
    assert_ne!(run.status(), "success", "{run:?}");
    // Honouring the Retry-After would take eleven days: "did not hang" only.
    assert!(run.elapsed.as_secs() < 60, "{:?}", run.elapsed);
    assert_eq!(creates(&fake), 0);
    assert_run_snapshots!("huge_retry_after", &run);
}

#[test]
fn a_silent_predict_ends_at_the_predict_timeout_and_cleanup_still_runs() {
    let fake = fake_by_polls(EXISTING);
    let proxy = through(
        &fake,
        vec![Rule::new("silent", Fault::Hang).path("/model-")],
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("inference-url", proxy.inference_template())
        .arg("predict-timeout", "2")
        .arg("cleanup", "true")
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    // A silent host never answers: "did not hang" only, the message above
    // says which deadline ended it.
    assert!(run.elapsed.as_secs() < 60, "{:?}", run.elapsed);
    // The deployment that failed its smoke test was deactivated.
    assert!(
        endpoints(&fake)
            .iter()
            .any(|e| e == "rest.deactivate_deployment")
    );
    assert_run_snapshots!("silent_predict", &run);
}

#[test]
fn debug_logs_never_print_the_key() {
    let fake = fake_by_polls(EXISTING);
    let proxy = through(
        &fake,
        vec![
            Rule::new(
                "echo",
                Fault::HtmlError {
                    status: 503,
                    echo: Some(format!("Authorization: Api-Key {API_KEY}")),
                },
            )
            .graphql("teams")
            .nth(1),
        ],
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("app-url", proxy.graphql_base())
        .env("TRUSS_PUSH_LOG", "trace")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    // Not a snapshot: the trace log holds every request's timing and
    // connection details, which differ on every run.
    assert!(run.stderr.contains("retrying"), "{}", run.stderr);
    assert!(!run.everything().contains(API_KEY), "{}", run.everything());
}

#[test]
fn an_id_from_the_platform_cannot_reach_another_resource() {
    let fake = fake_by_polls(EXISTING);
    // The platform answers the create with an id that climbs the path.
    let body = serde_json::json!({"data": {"create_model_version_from_truss": {"model_version": {
        "id": "../../othermodel/deployments/victim",
        "oracle": {"id": "oldmodel", "name": "hello-truss-push", "hostname": null},
        "instance_type": null
    }}}});
    let proxy = through(
        &fake,
        vec![
            Rule::new(
                "odd-id",
                Fault::Status {
                    status: 200,
                    retry_after: None,
                    body: Some(body.to_string()),
                    content_type: Some("application/json".into()),
                },
            )
            .graphql("create_model_version_from_truss"),
        ],
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
        .arg("cleanup", "true")
        .arg("wait-timeout-seconds", "2")
        .run();
    assert_ne!(run.status(), "success", "{run:?}");
    // The id was refused before any use; no request left the model it named.
    for r in fake.requests() {
        if r.path.starts_with("/v1/models/") {
            assert!(
                r.path.starts_with("/v1/models/oldmodel/"),
                "{} {}",
                r.method,
                r.path
            );
            assert!(
                !r.path.contains("othermodel/deployments/victim"),
                "{}",
                r.path
            );
        }
    }
    assert_run_snapshots!("id_climbing_the_path", &run);
}

#[test]
fn a_flood_of_log_lines_prints_each_line_once_and_summarizes_the_excess() {
    let fake = fake(
        "teams: [{id: t1, name: ml, default: true}]\nmodels:\n  - {id: oldmodel, name: hello-truss-push, team: ml, deployments: [{id: olddep, name: v0, status: ACTIVE}]}\ndeployments:\n  default: [[0, BUILDING], [1.5, ACTIVE]]\n",
    );
    // Every logs answer holds the same 15,000 lines (more than any
    // count-based de-duplication window), the newest first.
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let lines: Vec<_> = (0..15_000u128)
        .rev()
        .map(|i| {
            serde_json::json!({
                "timestamp": (now_ns + i).to_string(),
                "message": format!("flood line {i}"),
                "replica": null
            })
        })
        .collect();
    let body = serde_json::json!({ "logs": lines }).to_string();
    let probe = Invocation::new(&fake).model(example_model()).run();
    let dep = probe.out("deployment-id").to_string();
    let fake = self::fake(
        "teams: [{id: t1, name: ml, default: true}]\nmodels:\n  - {id: oldmodel, name: hello-truss-push, team: ml, deployments: [{id: olddep, name: v0, status: ACTIVE}]}\ndeployments:\n  default: [[0, BUILDING], [1.5, ACTIVE]]\n",
    );
    let proxy = through(
        &fake,
        vec![
            Rule::new(
                "flood",
                Fault::Status {
                    status: 200,
                    retry_after: None,
                    body: Some(body),
                    content_type: Some("application/json".into()),
                },
            )
            .path(&format!("/v1/models/oldmodel/deployments/{dep}/logs")),
        ],
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("api-url", proxy.rest_base())
        .arg("poll-interval-seconds", "0.5")
        .run();
    assert_eq!(run.status(), "success", "{}", run.stderr);
    assert_eq!(
        run.out("deployment-id"),
        dep,
        "the fake hands out the same ids"
    );
    let polls = proxy
        .faulted()
        .iter()
        .filter(|e| e.path.ends_with("/logs"))
        .count();
    assert!(polls >= 2, "the logs were read {polls} times");
    // Counted, not a snapshot: a thousand lines, and how many log reads
    // fall within the deploy depends on real time (one every 0.5 s).
    let printed = run
        .stdout
        .lines()
        .filter(|l| l.contains("flood line"))
        .count();
    assert_eq!(printed, 1_000, "at most 1,000 new lines a poll, each once");
    assert!(
        run.stdout.contains("14000 log lines not shown here"),
        "{}",
        &run.stdout[..2000.min(run.stdout.len())]
    );
}
