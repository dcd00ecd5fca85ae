//! The platform's preflight before any upload (`prepare_model_upload`
//! with `dry_run: true`), and the hourly price read after ready: what the
//! user sees (exit code, outputs, summary) and what the fake received.

use fake_baseten::reqlog::LogEntry;

use crate::harness::*;

const PREPARE: &str = "rest.prepare_model_upload";
const PRICES: &str = "rest.list_instance_type_prices";

/// A model that exists, with a production environment, whose deployments
/// become ready at once.
const EXISTING: &str = "teams: [{id: t1, name: ml, default: true}]\nmodels:\n  - {id: m1, name: hello-truss-push, team: ml, deployments: [{id: d0, name: v1, status: ACTIVE, environment: production}]}\ndeployments:\n  default: [[0, ACTIVE]]\n";

fn requests_to(fake: &fake_baseten::FakeBaseten, endpoint: &str) -> Vec<LogEntry> {
    fake.requests()
        .into_iter()
        .filter(|r| r.endpoint == endpoint)
        .collect()
}

fn no_upload_nor_create(fake: &fake_baseten::FakeBaseten) {
    let log = fake.requests();
    assert!(
        log.iter().all(|r| !r.endpoint.starts_with("s3.")),
        "no S3 request: {:?}",
        endpoints(fake)
    );
    assert!(
        mutations(fake).is_empty(),
        "nothing created: {:?}",
        endpoints(fake)
    );
}

#[test]
fn a_refused_payload_ends_the_run_before_any_upload_with_the_platforms_reason() {
    // An environment the model does not have: the platform's 404 with its
    // error body is a refusal, not an absent endpoint.
    let fake = fake(EXISTING);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("environment", "staging")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.status(), "deploy_failed");
    let msg = run.out("error-message");
    assert!(
        msg.contains("refused this deploy before anything was uploaded")
            && msg.contains("HTTP 404")
            && msg.contains("Environment `staging` does not exist"),
        "{msg}"
    );
    no_upload_nor_create(&fake);
    let sent = requests_to(&fake, PREPARE);
    assert_eq!(sent.len(), 1, "one preflight: {:?}", endpoints(&fake));
    let body = sent[0].body.clone().expect("a JSON body");
    assert_eq!(body["dry_run"], true);
    assert_eq!(body["model_id"], "m1");
    let d = &body["deployment"];
    assert_eq!(d["environment_name"], "staging");
    assert_eq!(d["deployment_name"], "ci-test");
    assert_eq!(d["config"]["model_name"], "hello-truss-push");
    // Every label but the content hash, which only the upload's reads know.
    let labels = d["labels"].as_object().expect("labels");
    assert!(labels.contains_key("truss_push_run"), "{labels:?}");
    assert!(
        !labels.contains_key("truss_push_content_hash"),
        "{labels:?}"
    );
}

#[test]
fn a_default_name_the_model_already_has_says_a_rerun_reuses_it_and_names_the_fix() {
    let fake = fake(&EXISTING.replace(
        "name: v1, status: ACTIVE, environment: production}",
        "name: v1, status: ACTIVE, environment: production}, {id: d1, name: abc1234, status: ACTIVE}",
    ));
    let mut inv = Invocation::new(&fake).model(example_model());
    inv.args.retain(|a| !a.starts_with("--deployment-name"));
    let run = inv.env("GITHUB_SHA", "abc1234def5678").run();
    assert_eq!(run.code, 2, "{run:?}");
    let msg = run.out("error-message");
    assert!(
        msg.contains("already has a deployment named `abc1234`")
            && msg.contains("a re-run of the same commit sends that name again")
            && msg.contains("set deployment-name"),
        "{msg}"
    );
    no_upload_nor_create(&fake);
}

#[test]
fn a_platform_without_the_endpoint_is_a_notice_and_the_deploy_goes_on() {
    let fake = fake(&format!(
        "{EXISTING}faults: [{{endpoint: {PREPARE}, status: 404, text: \"404 page not found\"}}]\n"
    ));
    let run = Invocation::new(&fake).model(example_model()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.stdout.contains("The platform's preflight was skipped: this platform has no prepare_model_upload endpoint (HTTP 404"),
        "{run:?}"
    );
    assert_eq!(requests_to(&fake, PREPARE).len(), 1, "a 404 is not retried");
    let order = endpoints(&fake);
    let at = |e: &str| order.iter().position(|x| x.starts_with(e)).unwrap();
    assert!(at(PREPARE) < at("s3."), "{order:?}");
}

#[test]
fn a_preflight_that_keeps_failing_is_skipped_after_three_tries_and_the_deploy_goes_on() {
    let fake = fake(&format!(
        "{EXISTING}faults: [{{endpoint: {PREPARE}, status: 500}}]\n"
    ));
    let run = Invocation::new(&fake).model(example_model()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(
        requests_to(&fake, PREPARE).len(),
        3,
        "{:?}",
        endpoints(&fake)
    );
    assert!(
        run.stdout
            .contains("The platform's preflight was skipped: it did not answer"),
        "{run:?}"
    );
    assert!(run.out("deployment-id").len() > 1);
}

#[test]
fn preflight_false_asks_nothing() {
    let fake = fake(EXISTING);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("preflight", "false")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(requests_to(&fake, PREPARE).is_empty());
}

#[test]
fn a_dry_run_with_a_key_asks_the_preflight_and_without_one_says_the_platform_was_not_asked() {
    let fake = fake(EXISTING);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("dry-run", "true")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.stdout.contains(
            "Dry run: the local checks ran, and so did the platform's preflight, which passed"
        ),
        "{run:?}"
    );
    assert_eq!(requests_to(&fake, PREPARE).len(), 1);
    no_upload_nor_create(&fake);

    // Refused in a dry run: the same failure as a deploy's.
    let refused = Invocation::new(&fake)
        .model(example_model())
        .arg("environment", "staging")
        .arg("dry-run", "true")
        .run();
    assert_eq!(refused.code, 2, "{refused:?}");
    no_upload_nor_create(&fake);

    let quiet = fake_baseten::FakeBaseten::start_in_background(
        fake_baseten::scenario::Scenario::from_yaml(EXISTING).unwrap(),
    )
    .unwrap();
    let mut inv = Invocation::new(&quiet)
        .model(example_model())
        .arg("dry-run", "true")
        .arg("api-url", quiet.rest_base())
        .arg("app-url", quiet.graphql_base());
    inv.args.retain(|a| !a.starts_with("--baseten-api-key"));
    let run = inv.run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.stdout.contains(
            "Dry run: the local checks ran; the platform was not asked (no baseten-api-key was given)"
        ),
        "{run:?}"
    );
    assert!(quiet.requests().is_empty(), "{:?}", endpoints(&quiet));
}

/// The model's deployments run on A10Gx4x16 (0.02012 USD a minute),
/// scaling from 1 to 3 replicas.
fn priced(extra: &str) -> String {
    format!(
        "{EXISTING}deployment_settings: {{by_model: {{hello-truss-push: {{instance_type: A10Gx4x16, min_replica: 1, max_replica: 3}}}}}}\n{extra}"
    )
}

#[test]
fn a_ready_deployment_says_what_it_costs_per_hour() {
    let fake = fake(&priced(""));
    let (_dir, summary) = file_in_temp_dir("summary.md", "");
    let run = Invocation::new(&fake)
        .model(example_model())
        .env("GITHUB_STEP_SUMMARY", summary.to_str().unwrap())
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("hourly-price-min"), "1.21");
    assert_eq!(run.out("hourly-price-max"), "3.62");
    let page = std::fs::read_to_string(&summary).unwrap();
    assert!(
        page.contains(r"Costs \$1.21–\$3.62 per hour: 1–3 replicas of A10Gx4x16 (1 × A10G)"),
        "{page}"
    );
    // The price is read once the deployment is ready, never before.
    let order = endpoints(&fake);
    let create = order
        .iter()
        .position(|e| e.contains("create_model_version"))
        .expect("created");
    let price = order.iter().position(|e| e == PRICES).expect("priced");
    assert!(create < price, "{order:?}");
}

#[test]
fn hostile_prices_leave_the_outputs_empty_with_a_notice() {
    for (what, types) in [
        ("negative", "memory_limit_mib: 16384, price: -0.5"),
        (
            "another type's",
            "memory_limit_mib: 16384, price: 0.02, price_name: H100",
        ),
        ("absent", "memory_limit_mib: 16384"),
    ] {
        let fake = fake(&priced(&format!(
            "instance_types:\n  - {{id: A10Gx4x16, name: A10Gx4x16, millicpu_limit: 4000, gpu_count: 1, gpu_type: A10G, {types}}}\n"
        )));
        let run = Invocation::new(&fake).model(example_model()).run();
        assert_eq!(run.status(), "success", "{what}: {run:?}");
        assert_eq!(run.out("hourly-price-min"), "", "{what}");
        assert_eq!(run.out("hourly-price-max"), "", "{what}");
        assert!(run.stdout.contains("Price not read: "), "{what}: {run:?}");
    }
    // A price that is a string: the fake's schema check flags it too.
    let fake = fake(&priced(
        "instance_types:\n  - {id: A10Gx4x16, name: A10Gx4x16, memory_limit_mib: 16384, millicpu_limit: 4000, gpu_count: 1, gpu_type: A10G, price: \"0.02\"}\n",
    ));
    let run = Invocation::new(&fake).model(example_model()).run();
    assert_eq!(run.out("hourly-price-max"), "", "{run:?}");
    assert!(
        run.stdout
            .contains("Price not read: the price of A10Gx4x16 is not a number (a string)"),
        "{run:?}"
    );
    assert!(!fake.take_violations().is_empty());
}

#[test]
fn several_targets_carry_their_own_price_and_the_step_their_sum() {
    let (_root, dirs) = model_dirs(&["alpha", "beta"]);
    let fake = fake(
        "deployments:\n  default: [[0, ACTIVE]]\ndeployment_settings: {by_model: {alpha: {instance_type: A10Gx4x16, min_replica: 1, max_replica: 3}}}\n",
    );
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let results: serde_json::Value = serde_json::from_str(run.out("results")).unwrap();
    let each: Vec<(&str, &str)> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["hourly-price-min"].as_str().unwrap(),
                r["hourly-price-max"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(each, [("1.21", "3.62"), ("0.00", "0.03")]);
    // The sum of the exact prices, rounded once.
    assert_eq!(run.out("hourly-price-min"), "1.21");
    assert_eq!(run.out("hourly-price-max"), "3.66");
}

/// A gated promotion whose environment test fails is rolled back: the
/// price is of what serves again (`d0`, 1x2 at 0.00058 USD a minute, 0 to
/// 1 replicas), never the rolled-back deployment's (A10Gx4x16, 1 to 3),
/// which the line names apart.
#[test]
fn after_a_gated_rollback_the_price_is_of_what_serves_again() {
    let fake = fake(
        "time_scale: 20\nmodels:\n  - id: m1\n    name: hello-truss-push\n    deployments: [{id: d0, name: v1, environment: production, settings: {instance_type: 1x2, min_replica: 0, max_replica: 1}}]\ndeployments:\n  default: [[0, BUILDING], [1, DEPLOYING], [2, ACTIVE]]\ndeployment_settings: {by_model: {hello-truss-push: {instance_type: A10Gx4x16, min_replica: 1, max_replica: 3}}}\npredict:\n  by_deployment:\n    - {created: 0, via: environment, status: 500, response: {error: wrong answer behind production}}\n",
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("promotion", "after-predict")
        .arg("environment", "production")
        .arg("predict-timeout", "2")
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    let ours = run.out("deployment-id");
    assert_ne!(ours, "d0");
    assert_eq!(
        (run.out("hourly-price-min"), run.out("hourly-price-max")),
        ("0.00", "0.03"),
        "{run:?}"
    );
    assert!(
        run.summary.contains(&format!(
            r"production serves d0 again: Costs \$0.00–\$0.03 per hour: 0–1 replicas of 1x2 (no GPU); this run's deployment {ours}, rolled back, would cost \$1.21–\$3.62 per hour while it runs"
        )),
        "{}",
        run.summary
    );
}
