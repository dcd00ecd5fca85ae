//! A model deploy end to end, against the fake's scripted status histories.

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::{Fault, Scenario};

use crate::harness::*;

fn timeline_yaml(steps: &str, time_scale: f64) -> String {
    format!("time_scale: {time_scale}\ndeployments:\n  default: {steps}\n")
}

fn deploy(fake: &FakeBaseten) -> Outcome {
    Invocation::new(fake).model(example_model()).run()
}

#[test]
fn a_real_deployments_recorded_history_is_ready_at_scaled_to_zero() {
    // A real deployment's recorded history (scaled-to-zero-history.yaml): SCALED_TO_ZERO at 12.9 s, WAKING_UP at
    // 24.3 s, ACTIVE at 631 s. The old client failed at SCALED_TO_ZERO; the
    // truth is "ready". The fake's clock stands still at 12.9 s once the
    // binary has read BUILDING, so only readiness at SCALED_TO_ZERO ends
    // the wait.
    let scenario = Scenario::from_file(scenario_file("scaled-to-zero-history.yaml"))
        .unwrap()
        .with_api_key(API_KEY)
        .with_manual_clock();
    let fake = FakeBaseten::start_in_background(scenario).unwrap();
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("model-name", "seed-model")
        .run_stepping_clock(&[("rest.get_deployment", 12.9)]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.status(), "success");
    assert_eq!(run.out("last-status"), "SCALED_TO_ZERO");
    assert_in_order(
        &run.stdout,
        &[
            "status BUILDING (in progress)",
            "status SCALED_TO_ZERO (ready)",
            "Final status: success",
        ],
    );
    // Ready at the first SCALED_TO_ZERO read: the next request after it is
    // the smoke test, with no further status poll (cleanup reads the
    // deployment again afterwards).
    let polls_and_predicts: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|e| e.endpoint == "rest.get_deployment" || e.endpoint.starts_with("inference."))
        .collect();
    let first_ready = polls_and_predicts
        .iter()
        .position(|e| e.endpoint == "rest.get_deployment" && e.scenario_secs == 12.9)
        .expect("a poll at SCALED_TO_ZERO");
    assert_eq!(
        polls_and_predicts
            .get(first_ready + 1)
            .map(|e| e.endpoint.as_str()),
        Some("inference.predict"),
        "{polls_and_predicts:?}"
    );
    // An existing model: a new version of it.
    let m = mutations(&fake);
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0].endpoint, "graphql.create_model_version_from_truss");
}

#[test]
fn a_model_resting_at_scaled_to_zero_is_ready() {
    let fake = fake(&timeline_yaml(
        "[[0, BUILDING], [0.3, SCALED_TO_ZERO]]",
        1.0,
    ));
    let run = deploy(&fake);
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("last-status"), "SCALED_TO_ZERO");
}

#[test]
fn waking_up_then_active() {
    let fake = fake(&timeline_yaml("[[0, WAKING_UP], [0.4, ACTIVE]]", 1.0));
    let run = deploy(&fake);
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.stdout.contains("status WAKING_UP (in progress)"),
        "{run:?}"
    );
    assert_eq!(run.out("last-status"), "ACTIVE");
}

#[test]
fn an_unknown_status_is_polled_with_one_warning() {
    let fake = fake(&timeline_yaml(
        "[[0, RESHARDING_REPLICAS], [0.5, ACTIVE]]",
        1.0,
    ));
    let run = deploy(&fake);
    assert_eq!(run.status(), "success", "{run:?}");
    let all = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(
        all.matches("unknown deployment status \"RESHARDING_REPLICAS\"")
            .count(),
        1,
        "{run:?}"
    );
    // A status the published enum lacks is served on purpose (the platform
    // may add one before its docs do); the schema check saw each answer.
    let off_spec = fake.take_violations();
    assert!(!off_spec.is_empty());
    assert!(
        off_spec.iter().all(|v| v.what.contains("'/status'")),
        "{off_spec:?}"
    );
}

#[test]
fn each_failed_status_is_deploy_failed() {
    for failed in [
        "BUILD_FAILED",
        "BUILD_STOPPED",
        "DEPLOY_FAILED",
        "FAILED",
        "INACTIVE",
        "UNHEALTHY",
    ] {
        let fake = fake(&timeline_yaml(
            &format!("[[0, BUILDING], [0.2, {failed}]]"),
            1.0,
        ));
        let run = deploy(&fake);
        assert_eq!(run.code, 1, "{failed}: {run:?}");
        assert_eq!(run.status(), "deploy_failed", "{failed}");
        assert_eq!(run.out("last-status"), failed);
        assert!(run.out("error-message").contains(failed), "{run:?}");
        assert!(!run.out("deployment-id").is_empty());
    }
}

#[test]
fn deactivating_then_inactive_fails_once_inactive() {
    let fake = fake(&timeline_yaml("[[0, DEACTIVATING], [0.4, INACTIVE]]", 1.0));
    let run = deploy(&fake);
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(
        run.stdout.contains("status DEACTIVATING (in progress)"),
        "{run:?}"
    );
    assert_eq!(run.out("last-status"), "INACTIVE");
}

#[test]
fn never_ready_times_out_at_the_deadline() {
    let fake = fake(&timeline_yaml("[[0, BUILDING]]", 1.0));
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("wait-timeout-seconds", "1.5")
        .arg("poll-interval-seconds", "0.2")
        .run();
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(run.status(), "deploy_timeout");
    assert_eq!(run.out("last-status"), "BUILDING");
    assert_in_order(
        &run.stdout,
        &[
            "status BUILDING (in progress)",
            "Final status: deploy_timeout",
        ],
    );
    assert!(
        run.stderr
            .contains("was not ready after 1.5s (last status: BUILDING)"),
        "{run:?}"
    );
    // Not before the deadline: a lower bound on a sleep cannot flake.
    assert!(run.elapsed.as_secs_f64() >= 1.5, "{:?}", run.elapsed);
    // Not past it either: each wait between polls is at least the poll
    // interval, so a wait that ended at the deadline polled at most once
    // per interval of the budget (cleanup then reads the deployment once
    // more); and nothing was smoke-tested.
    let polls = endpoints(&fake)
        .iter()
        .filter(|e| *e == "rest.get_deployment")
        .count();
    assert!(
        (2..=(1.5_f64 / 0.2).ceil() as usize + 2).contains(&polls),
        "{polls} polls: {:?}",
        endpoints(&fake)
    );
    assert!(!endpoints(&fake).iter().any(|e| e.starts_with("inference.")));
}

#[test]
fn bursts_of_503_and_429_are_ridden_out() {
    let scenario = Scenario::from_yaml(&timeline_yaml("[[0, BUILDING], [0.3, ACTIVE]]", 1.0))
        .unwrap()
        .with_api_key(API_KEY)
        .with_fault(Fault::status("rest.get_deployment", 503).times(3))
        .with_fault(
            Fault::status("rest.get_deployment", 429)
                .retry_after(1)
                .after(3)
                .times(2),
        );
    let fake = FakeBaseten::start_in_background(scenario).unwrap();
    let run = deploy(&fake);
    assert_eq!(run.status(), "success", "{run:?}");
    let faults = fake
        .requests()
        .into_iter()
        .filter(|r| r.fault.is_some())
        .count();
    assert!(faults >= 5, "the faults fired: {faults}");
}

#[test]
fn every_poll_failing_is_a_timeout_not_a_hang() {
    let scenario = Scenario::from_yaml(&timeline_yaml("[[0, ACTIVE]]", 1.0))
        .unwrap()
        .with_api_key(API_KEY)
        // Two 502s, then every request dropped: the deadline must still hold.
        .with_fault(Fault::status("rest.get_deployment", 502).times(2))
        .with_fault(
            Fault::drop_connection("rest.get_deployment")
                .after(2)
                .times(0),
        );
    let fake = FakeBaseten::start_in_background(scenario).unwrap();
    // The harness fails a run that never exits; here the binary must end
    // the wait itself, as a timeout.
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("wait-timeout-seconds", "2")
        .run();
    assert_eq!(run.status(), "deploy_timeout", "{run:?}");
    assert_in_order(
        &run.stdout,
        &["poll failed, retrying", "Final status: deploy_timeout"],
    );
    assert!(run.stderr.contains("was not ready after 2.0s"), "{run:?}");
    // The fake saw the 502s, then only dropped connections, until the
    // binary gave up. Every wait between polls lasts at least the poll
    // interval (0.05 s), so a wait that stopped at the deadline made at most
    // one poll per interval of the budget.
    let polls: Vec<Option<u16>> = fake
        .requests()
        .into_iter()
        .filter(|r| r.endpoint == "rest.get_deployment")
        .map(|r| r.status)
        .collect();
    assert_eq!(polls[..2], [Some(502), Some(502)], "{polls:?}");
    assert!(polls.len() > 2, "it kept polling after the 502s: {polls:?}");
    assert!(polls[2..].iter().all(Option::is_none), "{polls:?}");
    assert!(polls.len() <= (2.0_f64 / 0.05) as usize + 1, "{polls:?}");
    assert!(!endpoints(&fake).iter().any(|e| e.starts_with("inference.")));
}

#[test]
fn predict_sync_keeps_the_first_4096_characters() {
    let big = "x".repeat(10_000);
    let fake = fake(&format!(
        "deployments:\n  default: [[0, ACTIVE]]\npredict:\n  response: {{\"text\": \"{big}\"}}\n"
    ));
    let run = deploy(&fake);
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("predict-response").chars().count(), 4096);
    assert!(run.out("predict-response").starts_with("{\"text\":"));
    let predicts: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.endpoint == "inference.predict")
        .collect();
    assert_eq!(predicts.len(), 1);
    assert!(
        predicts[0].path.contains("/deployment/"),
        "{:?}",
        predicts[0]
    );
}

#[test]
fn predict_streaming_counts_tokens() {
    let fake = fake(
        "deployments:\n  default: [[0, ACTIVE]]\npredict:\n  stream: {tokens: 7, token: \"hi \", token_delay_ms: 5}\n",
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("predict-payload", r#"{"prompt": "x", "stream": true}"#)
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("predict-response"), "hi ".repeat(7));
    assert!(run.stdout.contains("7 tokens"), "{run:?}");
    assert!(run.summary.contains("Tokens"), "{}", run.summary);
}

#[test]
fn predict_uses_the_regional_environment_host() {
    let fake = fake("new_model_environments: [staging]\ndeployments:\n  default: [[0, ACTIVE]]\n");
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("environment", "staging")
        .arg("regional-environment", "true")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let p: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.endpoint.starts_with("inference."))
        .collect();
    assert_eq!(p.len(), 1, "{p:?}");
    let model_id = run.out("model-id");
    assert!(
        p[0].path
            .starts_with(&format!("/model-{model_id}-staging/predict")),
        "{:?}",
        p[0]
    );
}

#[test]
fn a_failing_predict_is_predict_failed_at_once_with_status_and_body() {
    // The model's own 500 on every try: the model would only say it again,
    // so the first answer is the verdict, well within predict-timeout.
    let scenario = Scenario::from_yaml("deployments:\n  default: [[0, ACTIVE]]\n")
        .unwrap()
        .with_api_key(API_KEY)
        .with_fault(Fault {
            times: 0,
            body: Some(serde_json::json!({"error": "CUDA out of memory"})),
            ..Fault::status("inference.predict", 500)
        });
    let fake = FakeBaseten::start_in_background(scenario).unwrap();
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("predict-timeout", "300")
        .run();
    assert_eq!(run.code, 4, "{run:?}");
    assert_eq!(run.status(), "predict_failed");
    let msg = run.out("error-message");
    assert!(
        msg.contains("500") && msg.contains("CUDA out of memory"),
        "{run:?}"
    );
    let tries = endpoints(&fake)
        .iter()
        .filter(|e| *e == "inference.predict")
        .count();
    assert_eq!(tries, 1, "a model's own error is not retried");
}

#[test]
fn a_predict_refused_once_is_tried_again() {
    let scenario = Scenario::from_yaml("deployments:\n  default: [[0, ACTIVE]]\n")
        .unwrap()
        .with_api_key(API_KEY)
        .with_fault(Fault::status("inference.predict", 503));
    let fake = FakeBaseten::start_in_background(scenario).unwrap();
    let run = deploy(&fake);
    assert_eq!(run.status(), "success", "{run:?}");
    assert_ne!(run.out("predict-response"), "");
}

#[test]
fn cleanup_defaults_matrix() {
    // (existing model?, environment, cleanup input) -> deactivated?
    let yaml = "teams: [{id: t1, name: ml, default: true}]\nmodels:\n  - {id: oldmodel, name: hello-truss-push, team: ml, environments: [production, staging], deployments: [{id: olddep, name: v1, status: ACTIVE, environment: production}]}\ndeployments:\n  default: [[0, ACTIVE]]\n";
    let new_model_yaml = "deployments:\n  default: [[0, ACTIVE]]\n";
    type Case<'a> = (&'a str, Option<&'a str>, Option<&'a str>, bool, &'a str);
    let cases: &[Case] = &[
        (yaml, None, None, true, "default on without an environment"),
        (
            yaml,
            Some("staging"),
            None,
            false,
            "default off with an environment",
        ),
        (
            yaml,
            Some("staging"),
            Some("false"),
            false,
            "explicitly off",
        ),
        (
            yaml,
            None,
            Some("false"),
            false,
            "explicitly off, no environment",
        ),
        (
            new_model_yaml,
            None,
            None,
            false,
            "a new model's first deployment is production: kept",
        ),
        (
            new_model_yaml,
            None,
            Some("true"),
            true,
            "explicit cleanup deactivates even production",
        ),
    ];
    for (yaml, env, cleanup, want, why) in cases {
        let fake = fake(yaml);
        let mut inv = Invocation::new(&fake).model(example_model());
        if let Some(e) = env {
            inv = inv.arg("environment", e);
        }
        if let Some(c) = cleanup {
            inv = inv.arg("cleanup", c);
        }
        let run = inv.run();
        assert_eq!(run.status(), "success", "{why}: {run:?}");
        let deactivated = endpoints(&fake)
            .iter()
            .any(|e| e == "rest.deactivate_deployment");
        assert_eq!(deactivated, *want, "{why}: {run:?}");
        if !want && *yaml == new_model_yaml {
            let shown = format!("{}{}", run.stdout, run.stderr);
            assert!(shown.contains("not deactivating"), "{why}: {run:?}");
            assert!(
                run.summary.contains("not deactivating"),
                "{why}: {}",
                run.summary
            );
        }
    }
}

#[test]
fn a_failed_deactivate_is_cleanup_failed() {
    let scenario = Scenario::from_yaml("teams: [{id: t1, name: ml, default: true}]\nmodels:\n  - {id: oldmodel, name: hello-truss-push, team: ml, deployments: [{id: olddep, name: v1, status: ACTIVE, environment: production}]}\ndeployments:\n  default: [[0, ACTIVE]]\n")
        .unwrap()
        .with_api_key(API_KEY)
        .with_fault(Fault::status("rest.deactivate_deployment", 403));
    let fake = FakeBaseten::start_in_background(scenario).unwrap();
    let run = deploy(&fake);
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.status(), "cleanup_failed");
}

#[test]
fn outputs_file_in_dotenv_and_json() {
    // Two runs of one commit: the platform takes the same name again.
    let fake = fake(
        "deployments:\n  default: [[0, ACTIVE]]\nprepare_model_upload: {refuse_taken_names: false}\n",
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .outputs_file("outputs.env")
        .run();
    let text = run.outputs_file.clone().expect("dotenv written");
    let vars: std::collections::BTreeMap<_, _> =
        fake_baseten::runner::parse_gitlab_dotenv(text.as_bytes())
            .expect("GitLab accepts the dotenv file")
            .into_iter()
            .collect();
    assert_eq!(vars["TRUSS_PUSH_STATUS"], "success");
    assert_eq!(vars["TRUSS_PUSH_DEPLOYMENT_ID"], run.out("deployment-id"));
    let run = Invocation::new(&fake)
        .model(example_model())
        .outputs_file("outputs.json")
        .run();
    let v: serde_json::Value = serde_json::from_str(run.outputs_file.as_deref().unwrap()).unwrap();
    assert_eq!(v["status"], "success");
    assert_eq!(v["model-name"], "hello-truss-push");
}

#[test]
fn the_api_key_never_appears_anywhere() {
    let fake = fake("deployments:\n  default: [[0, BUILDING], [0.2, BUILD_FAILED]]\n");
    let run = Invocation::new(&fake)
        .model(example_model())
        .env("GITHUB_ACTIONS", "true")
        .outputs_file("o.json")
        .run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    // The one place the key may appear is the runner command that masks it,
    // which the runner consumes instead of printing.
    let mask = format!("::add-mask::{API_KEY}\n");
    assert!(run.stdout.starts_with(&mask), "masked first: {run:?}");
    let seen = run.everything().replacen(&mask, "", 1);
    assert!(!seen.contains(API_KEY), "the key leaked: {run:?}");
    let log = serde_json::to_string(&fake.requests()).unwrap();
    assert!(!log.contains(API_KEY), "the fake's log holds no key");
}

#[test]
fn names_with_quotes_backslashes_and_newlines_stay_valid_graphql() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let evil = "my \"model\" \\ with\nnewline\") { teams { id } }";
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("model-name", evil)
        .arg("labels", r#"{"team": "a\"b", "x": "\\n"}"#)
        .arg("cleanup", "false")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let created = mutations(&fake);
    assert_eq!(created.len(), 1, "{created:?}");
    let args = &created[0].graphql.as_ref().unwrap().arguments;
    let create = args.values().next().unwrap();
    assert_eq!(create["name"], evil, "{args:?}");
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.endpoint != "graphql.invalid")
    );
}

#[test]
fn the_step_summary_tells_the_story() {
    let fake = fake("deployments:\n  default: [[0, BUILDING], [0.2, DEPLOYING], [0.4, ACTIVE]]\n");
    let run = deploy(&fake);
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.summary
            .contains("Truss Deploy (Model): hello-truss-push"),
        "{}",
        run.summary
    );
    for s in ["BUILDING", "DEPLOYING", "ACTIVE"] {
        assert!(
            run.summary.contains(s),
            "{s} in the history: {}",
            run.summary
        );
    }
}
