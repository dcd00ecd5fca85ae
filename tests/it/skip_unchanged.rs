//! Deploy by content: every create records the truss's content hash as a
//! label, and `skip-unchanged` leaves out a deploy whose source already
//! serves the environment — read from the platform (the fake's request log
//! shows no upload and no create), never guessed.
//!
//! The fake runs on a manual clock: deployments are ACTIVE the moment they
//! are created, and a test moves the clock to make the serving one FAILED
//! or INACTIVE between two runs.

use std::path::Path;

use fake_baseten::FakeBaseten;
use fake_baseten::reqlog::LogEntry;
use fake_baseten::scenario::Fault;

use crate::harness::*;

const LABEL: &str = "truss_push_content_hash";
const MODEL: &str = "by-content";

/// A fake whose deployments are ACTIVE at once, and whose first created
/// deployment follows `first` (e.g. `[[0, ACTIVE], [100, FAILED]]`).
fn platform(first: &str, extra: &str) -> FakeBaseten {
    fake(&format!(
        "name: by-content\nmanual_clock: true\ndeactivation_seconds: 0\ndeployments:\n  default: [[0, ACTIVE]]\n  sequence: [{first}]\n{extra}"
    ))
}

fn a_truss(config: &str) -> tempfile::TempDir {
    let dir = model_dir(config);
    std::fs::write(dir.path().join("model/weights.bin"), b"\x00\x01weights").unwrap();
    dir
}

const CONFIG: &str = "model_name: by-content\nresources:\n  cpu: '1'\n  accelerator: A10G\n";

/// A run into production with `skip-unchanged`; `name` is the
/// deployment's name, should it create one.
fn push<'a>(fake: &'a FakeBaseten, dir: &Path, name: &str) -> Invocation<'a> {
    Invocation::new(fake)
        .model(dir)
        .arg("environment", "production")
        .arg("skip-unchanged", "true")
        .arg("predict-payload", r#"{"x": 1}"#)
        .arg("deployment-name", name)
}

/// The endpoints the fake logged from `from` on.
fn endpoints_since(fake: &FakeBaseten, from: usize) -> Vec<String> {
    since(fake, from).into_iter().map(|e| e.endpoint).collect()
}

/// The requests the fake logged from `from` on.
fn since(fake: &FakeBaseten, from: usize) -> Vec<LogEntry> {
    fake.requests().into_iter().skip(from).collect()
}

fn creates(log: &[LogEntry]) -> usize {
    log.iter()
        .filter(|e| e.endpoint.starts_with("graphql.create_model"))
        .count()
}

fn uploads(log: &[LogEntry]) -> usize {
    log.iter().filter(|e| e.endpoint.starts_with("s3.")).count()
}

/// The hash the run printed.
fn printed_hash(run: &Outcome) -> String {
    let at = run.stdout.find("Content hash ").expect("the hash is said") + 13;
    run.stdout[at..at + 64].to_string()
}

/// The label the fake stores on deployment `id`.
fn label_of(fake: &FakeBaseten, id: &str) -> Option<String> {
    let d = fake.deployments().into_iter().find(|d| d.id == id)?;
    d.labels?.get(LABEL)?.as_str().map(str::to_string)
}

/// A first run deploys (the model is new) and records the hash; returns
/// the deployment it created.
fn first_deploy(fake: &FakeBaseten, dir: &Path) -> String {
    let run = push(fake, dir, "first")
        .arg("labels", r#"{"team": "ml"}"#)
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("unchanged"), "false", "{run:?}");
    assert!(run.stdout.contains("Deploying: "), "{run:?}");
    let id = run.out("deployment-id").to_string();
    let d = fake.deployments().into_iter().find(|d| d.id == id).unwrap();
    let labels = d.labels.expect("labels stored");
    assert_eq!(labels["team"], "ml", "the user's labels are kept: {labels}");
    assert_eq!(labels[LABEL], printed_hash(&run).as_str(), "{labels}");
    id
}

#[test]
fn a_new_model_is_deployed_and_says_why() {
    let fake = platform("[[0, ACTIVE]]", "");
    let dir = a_truss(CONFIG);
    let run = push(&fake, dir.path(), "first").run();
    assert!(
        run.stdout
            .contains("Deploying: the model does not exist yet"),
        "{run:?}"
    );
}

#[test]
fn the_same_truss_twice_is_deployed_once_and_the_environment_still_tested() {
    let fake = platform("[[0, ACTIVE]]", "");
    let dir = a_truss(CONFIG);
    let first = first_deploy(&fake, dir.path());
    let before = fake.requests().len();
    // Cleanup asked for explicitly must not touch what serves: the run
    // created nothing.
    let run = push(&fake, dir.path(), "second")
        .arg("cleanup", "true")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("unchanged"), "true");
    assert_eq!(run.out("deployment-id"), first);
    assert!(!run.out("model-id").is_empty());
    // What serves is priced: the default 1x2 (0.00058 USD a minute), 0–1 replicas.
    assert_eq!(
        (run.out("hourly-price-min"), run.out("hourly-price-max")),
        ("0.00", "0.03"),
        "{run:?}"
    );
    assert!(!run.out("environment-url").is_empty());
    // What the reads said of it, never "since": the first run created it
    // straight into production, so the audit log records no promotion.
    let created = fake
        .deployments()
        .into_iter()
        .find(|d| d.id == first)
        .map(|d| fake.clock().iso(d.created_at_secs))
        .unwrap();
    assert!(
        run.stdout.contains(&format!(
            "Unchanged: deployment {first} (first, created {created}) serves production with this source"
        )),
        "{run:?}"
    );
    assert!(!run.stdout.contains(" since "), "{run:?}");
    assert!(
        run.summary.contains("Unchanged: deployment"),
        "{}",
        run.summary
    );
    let log = since(&fake, before);
    assert_eq!(uploads(&log), 0, "no S3 request: {log:#?}");
    assert_eq!(creates(&log), 0, "no create: {log:#?}");
    assert!(
        !log.iter().any(|e| e.mutation),
        "no mutation at all: {log:#?}"
    );
    assert!(
        !log.iter()
            .any(|e| e.endpoint == "rest.deactivate_deployment"),
        "the serving deployment was deactivated: {log:#?}"
    );
    // The smoke test went to the environment, after the reads.
    let predicts: Vec<_> = log
        .iter()
        .filter(|e| e.endpoint == "inference.predict")
        .collect();
    assert_eq!(predicts.len(), 1, "{log:#?}");
    assert!(
        predicts[0].path.ends_with("/production/predict"),
        "{:?}",
        predicts[0]
    );
    assert_eq!(run.out("predict-url"), run.out("environment-url"));
    assert_eq!(label_of(&fake, &first), Some(printed_hash(&run)));
}

#[test]
fn ignored_files_leave_it_unchanged_and_a_byte_a_rename_or_a_deletion_deploy() {
    let fake = platform("[[0, ACTIVE]]", "");
    let dir = a_truss(CONFIG);
    first_deploy(&fake, dir.path());

    // Files truss's ignore rules leave out change nothing.
    std::fs::create_dir_all(dir.path().join("model/__pycache__")).unwrap();
    std::fs::write(
        dir.path().join("model/__pycache__/model.cpython-311.pyc"),
        b"x",
    )
    .unwrap();
    std::fs::write(dir.path().join("model/cache.pyc"), b"x").unwrap();
    let before = fake.requests().len();
    let run = push(&fake, dir.path(), "ignored").run();
    assert_eq!(run.out("unchanged"), "true", "{run:?}");
    assert_eq!(creates(&since(&fake, before)), 0);

    let mut last = run.out("deployment-id").to_string();
    let weights = dir.path().join("model/weights.bin");
    type Change<'a> = Box<dyn Fn() + 'a>;
    let steps: [(&str, Change<'_>); 3] = [
        (
            "one-byte",
            Box::new(|| std::fs::write(&weights, b"\x00\x02weights").unwrap()),
        ),
        (
            "renamed",
            Box::new(|| {
                std::fs::rename(&weights, dir.path().join("model/weights-v2.bin")).unwrap()
            }),
        ),
        (
            "deleted",
            Box::new(|| std::fs::remove_file(dir.path().join("model/weights-v2.bin")).unwrap()),
        ),
    ];
    for (name, change) in steps {
        change();
        let before = fake.requests().len();
        let run = push(&fake, dir.path(), name).run();
        assert_eq!(run.status(), "success", "{name}: {run:?}");
        assert_eq!(run.out("unchanged"), "false", "{name}");
        assert_eq!(creates(&since(&fake, before)), 1, "{name}");
        assert!(uploads(&since(&fake, before)) > 0, "{name}");
        assert!(
            run.stdout.contains(&format!(
                "Deploying: the serving deployment {last} was made from other content"
            )),
            "{name}: {run:?}"
        );
        let created = run.out("deployment-id").to_string();
        assert_ne!(created, last, "{name}");
        assert_eq!(
            label_of(&fake, &created),
            Some(printed_hash(&run)),
            "{name}"
        );
        last = created;
        // And the same source again is unchanged.
        let run = push(&fake, dir.path(), &format!("{name}-again")).run();
        assert_eq!(run.out("unchanged"), "true", "{name}: {run:?}");
        assert_eq!(run.out("deployment-id"), last, "{name}");
    }
}

#[test]
fn a_serving_deployment_that_failed_or_is_inactive_is_deployed_over() {
    for status in ["FAILED", "INACTIVE"] {
        let fake = platform(&format!("[[0, ACTIVE], [100, {status}]]"), "");
        let dir = a_truss(CONFIG);
        let first = first_deploy(&fake, dir.path());
        fake.clock().set(100.0);
        let before = fake.requests().len();
        let run = push(&fake, dir.path(), "again").run();
        assert_eq!(run.out("unchanged"), "false", "{status}: {run:?}");
        assert!(
            run.stdout.contains(&format!(
                "Deploying: the serving deployment {first} is {status}, not ACTIVE or SCALED_TO_ZERO"
            )),
            "{status}: {run:?}"
        );
        assert_eq!(creates(&since(&fake, before)), 1, "{status}");
        assert_eq!(run.status(), "success", "{status}: {run:?}");
    }
}

#[test]
fn a_promotion_in_flight_is_deployed_over() {
    // Another client starts promoting an older deployment into production
    // just before the second run (at its team lookup), and the promotion
    // stays in flight.
    let fake = platform(
        "[[0, ACTIVE]]",
        &format!(
            "models:\n  - name: {MODEL}\n    environments: [production]\n    deployments: [{{id: older01, name: older}}]\nothers:\n  - on: graphql.teams\n    nth: 2\n    before: true\n    action: {{promote: {{deployment: older01, environment: production, steps: [[0, {{status: RELEASING, percent: 0}}]]}}}}\n"
        ),
    );
    let dir = a_truss(CONFIG);
    let first = first_deploy(&fake, dir.path());
    let env = fake.environment(MODEL, "production").unwrap();
    assert!(format!("{env:?}").contains(&first), "{env:?}");
    let before = fake.requests().len();
    let run = push(&fake, dir.path(), "again")
        .arg("wait-timeout-seconds", "5")
        .run();
    assert_eq!(run.out("unchanged"), "false", "{run:?}");
    assert!(
        run.stdout
            .contains("Deploying: a promotion is in flight (production serves deployment"),
        "{run:?}"
    );
    assert_eq!(creates(&since(&fake, before)), 1, "{run:?}");
    // What serves is still known, so the summary compares with it.
    assert_in_order(
        &run.summary,
        &[
            "### What changes in production",
            &format!("Compared with deployment `{first}`, read from production before the deploy."),
            "The same source (config.yaml and content hash equal) deploys again.",
        ],
    );
}

#[test]
fn a_serving_deployment_scaled_to_zero_with_our_hash_is_unchanged() {
    let fake = platform("[[0, ACTIVE], [50, SCALED_TO_ZERO]]", "");
    let dir = a_truss(CONFIG);
    let first = first_deploy(&fake, dir.path());
    fake.clock().set(60.0);
    let before = fake.requests().len();
    let run = push(&fake, dir.path(), "again").run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("unchanged"), "true", "{run:?}");
    assert_eq!(run.out("deployment-id"), first);
    assert!(
        run.stdout.contains("with this source (content hash ")
            && run
                .stdout
                .contains(", SCALED_TO_ZERO); nothing was uploaded or created"),
        "{run:?}"
    );
    let log = since(&fake, before);
    assert_eq!((uploads(&log), creates(&log)), (0, 0), "{log:#?}");
}

#[test]
fn an_environment_that_cannot_be_read_is_deployed_over_with_the_reason() {
    let fake = platform("[[0, ACTIVE]]", "");
    let dir = a_truss(CONFIG);
    first_deploy(&fake, dir.path());
    let cases = [
        ("500", Fault::status("rest.get_environment", 500), "500"),
        (
            "reset",
            Fault::drop_connection("rest.get_environment"),
            "could not read the production environment",
        ),
    ];
    for (why, fault, said) in cases {
        fake.add_fault(fault);
        let before = fake.requests().len();
        let run = push(&fake, dir.path(), why).run();
        assert_eq!(run.status(), "success", "{why}: {run:?}");
        assert_eq!(run.out("unchanged"), "false", "{why}");
        let line = run
            .stdout
            .lines()
            .find(|l| l.contains("Deploying: could not read the production environment"))
            .unwrap_or_else(|| panic!("{why}: no reason line: {run:?}"));
        assert!(line.contains(said), "{why}: {line}");
        let log = since(&fake, before);
        assert_eq!(creates(&log), 1, "{why}");
        // The read that failed came before any upload.
        let failed = log
            .iter()
            .position(|e| e.endpoint == "rest.get_environment")
            .unwrap();
        let first_upload = log
            .iter()
            .position(|e| e.endpoint.starts_with("s3."))
            .unwrap();
        assert!(failed < first_upload, "{why}: {log:#?}");
    }
}

#[test]
fn a_label_written_by_hand_with_another_hash_is_deployed_over() {
    let other = "ab".repeat(32);
    let fake = platform(
        "[[0, ACTIVE]]",
        &format!(
            "models:\n  - name: {MODEL}\n    environments: [production]\n    deployments: [{{id: byhand1, name: by-hand, environment: production, labels: {{{LABEL}: \"{other}\"}}}}]\n"
        ),
    );
    let dir = a_truss(CONFIG);
    let run = push(&fake, dir.path(), "ours").run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("unchanged"), "false");
    assert!(
        run.stdout.contains(&format!(
            "Deploying: the serving deployment byhand1 was made from other content ({LABEL} abababababab…"
        )),
        "{run:?}"
    );
    assert_ne!(run.out("deployment-id"), "byhand1");
    // Made before the platform kept raw configs (its `raw_config` is
    // null): nothing to diff with, and the summary says so.
    assert!(
        run.summary.contains(
            "Not compared: the platform keeps no raw config.yaml for the serving deployment byhand1 (it keeps them for deployments created since 2026-04-30)."
        ),
        "{}",
        run.summary
    );
    assert!(!run.summary.contains("```diff"), "{}", run.summary);
}

/// Without `skip-unchanged`, every model deploy into an environment still
/// reads what serves it (alongside the upload) and says what it changes;
/// a read that fails says why and never fails the deploy.
#[test]
fn every_deploy_into_an_environment_says_what_it_changes() {
    let fake = platform("[[0, ACTIVE]]", "");
    let dir = a_truss(CONFIG);
    let deploy = |name: &str| {
        Invocation::new(&fake)
            .model(dir.path())
            .arg("environment", "production")
            .arg("deployment-name", name)
            .run()
    };
    let run = deploy("first");
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.summary.contains(
            "### What changes in production\n\nNot compared: the model does not exist yet, so nothing serves production."
        ),
        "{}",
        run.summary
    );
    let first = run.out("deployment-id").to_string();

    std::fs::write(
        dir.path().join("config.yaml"),
        CONFIG.replace("A10G", "H100"),
    )
    .unwrap();
    let before = fake.requests().len();
    let run = deploy("h100");
    assert_eq!(run.status(), "success", "{run:?}");
    assert_in_order(
        &run.summary,
        &[
            "### What changes in production",
            &format!("Compared with deployment `{first}`, read from production before the deploy."),
            "-   accelerator: A10G",
            "+   accelerator: H100",
        ],
    );
    // Read before the create changed what serves.
    let log = endpoints_since(&fake, before);
    let read = log.iter().position(|e| e == "rest.get_deployment_config");
    let created = log
        .iter()
        .position(|e| e.starts_with("graphql.create_model"));
    assert!(read.is_some() && read < created, "{log:#?}");

    // Only a packed file changed: the hash from what was packaged says so.
    std::fs::write(dir.path().join("model/weights.bin"), b"new weights").unwrap();
    let run = deploy("code");
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(run.summary.contains("**Code changed**"), "{}", run.summary);

    // A read that fails: not compared, and the deploy goes on. (The
    // comparison reads the model's environment list, so the deploy's own
    // environment and deployment reads are untouched.)
    fake.add_fault(Fault::status("rest.list_environments", 500));
    let before = fake.requests().len();
    let run = deploy("unread");
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.summary
            .contains("Not compared: could not read the production environment ("),
        "{}",
        run.summary
    );
    let log = endpoints_since(&fake, before);
    assert_eq!(
        log.iter()
            .filter(|e| *e == "rest.list_environments")
            .count(),
        1,
        "one try: {log:#?}"
    );
}

#[test]
fn the_summary_shows_what_changes_in_production() {
    let fake = platform("[[0, ACTIVE]]", "");
    let dir = a_truss(CONFIG);
    first_deploy(&fake, dir.path());
    // A changed accelerator: the config's diff.
    std::fs::write(
        dir.path().join("config.yaml"),
        CONFIG.replace("A10G", "H100"),
    )
    .unwrap();
    let run = push(&fake, dir.path(), "h100").run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_in_order(
        &run.summary,
        &[
            "### What changes in production",
            "```diff",
            "  resources:",
            "-   accelerator: A10G",
            "+   accelerator: H100",
            "```",
        ],
    );
    assert!(
        fake.requests()
            .iter()
            .any(|e| e.endpoint == "rest.get_deployment_config"
                && e.query.as_deref() == Some("output_format=raw")),
        "the raw form was asked for"
    );
    // The same config, another file: code changed.
    std::fs::write(dir.path().join("model/weights.bin"), b"new weights").unwrap();
    let run = push(&fake, dir.path(), "code").run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(run.summary.contains("**Code changed**"), "{}", run.summary);
    assert!(!run.summary.contains("```diff"), "{}", run.summary);
}

#[test]
fn bad_input_is_refused_before_any_request() {
    let fake = platform("[[0, ACTIVE]]", "");
    let dir = a_truss(CONFIG);
    let chain = tempfile::tempdir().unwrap();
    std::fs::write(chain.path().join("chain.py"), "import truss_chains\n").unwrap();
    let chain_file = chain.path().join("chain.py");
    let cases: [(&str, Invocation<'_>, &str); 3] = [
        (
            "no environment",
            Invocation::new(&fake)
                .model(dir.path())
                .arg("skip-unchanged", "true"),
            "skip-unchanged is true but no environment was given",
        ),
        (
            "a chain",
            Invocation::new(&fake)
                .arg("truss-directory", chain_file.to_str().unwrap())
                .arg("environment", "production")
                .env("TRUSS_PUSH_SKIP_UNCHANGED", "true"),
            "chain deployments carry no labels in the published API",
        ),
        (
            "our label given",
            Invocation::new(&fake)
                .model(dir.path())
                .arg("labels", format!(r#"{{"{LABEL}": "x"}}"#)),
            "labels may not set \"truss_push_content_hash\"",
        ),
    ];
    for (why, inv, said) in cases {
        let run = inv.run();
        assert_eq!(run.code, 2, "{why}: {run:?}");
        assert!(run.out("error-message").contains(said), "{why}: {run:?}");
    }
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());
}

/// Three model targets, `alpha`, `beta` and `gamma`, each deployed once
/// into production: the root, the deployments, the plan's
/// `truss-directory`.
fn three_served(fake: &FakeBaseten) -> (tempfile::TempDir, Vec<String>, String) {
    let root = tempfile::tempdir().unwrap();
    let mut served = Vec::new();
    for name in ["alpha", "beta", "gamma"] {
        let dir = root.path().join(name);
        std::fs::create_dir_all(dir.join("model")).unwrap();
        std::fs::write(dir.join("config.yaml"), format!("model_name: {name}\n")).unwrap();
        std::fs::copy(
            example_model().join("model/model.py"),
            dir.join("model/model.py"),
        )
        .unwrap();
        let run = push(fake, &dir, "first").run();
        assert_eq!(run.status(), "success", "{name}: {run:?}");
        served.push(run.out("deployment-id").to_string());
    }
    let dirs: Vec<String> = ["alpha", "beta", "gamma"]
        .iter()
        .map(|n| root.path().join(n).to_string_lossy().into_owned())
        .collect();
    (root, served, dirs.join(","))
}

fn plan_by_content<'a>(fake: &'a FakeBaseten, dirs: &str) -> Invocation<'a> {
    Invocation::new(fake)
        .arg("plan", "true")
        .arg("truss-directory", dirs)
        .arg("environment", "production")
        .arg("skip-unchanged", "true")
}

/// The `name`s in the plan's matrix.
fn matrix_names(run: &Outcome) -> Vec<String> {
    let matrix: serde_json::Value = serde_json::from_str(run.out("matrix")).unwrap();
    matrix["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_plan_leaves_out_the_targets_whose_source_already_serves() {
    let fake = platform("[[0, ACTIVE]]", "");
    let (root, served, dirs) = three_served(&fake);
    std::fs::write(root.path().join("beta/model/model.py"), "# changed\n").unwrap();
    let plan = |key: bool| {
        let mut inv = plan_by_content(&fake, &dirs);
        if !key {
            inv.args.retain(|a| !a.starts_with("--baseten-api-key"));
        }
        inv.run()
    };
    let before = fake.requests().len();
    let run = plan(true);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(matrix_names(&run), ["beta"], "{run:?}");
    assert_eq!(run.out("targets-count"), "1");
    for (name, id) in [("alpha", &served[0]), ("gamma", &served[2])] {
        assert!(
            run.stderr.contains(&format!(
                "unchanged: {} ({name:?}) is served in production by deployment {id}",
                root.path().join(name).display()
            )),
            "{name}: {run:?}"
        );
        assert!(
            run.summary.contains(&format!(
                "| {name} | unchanged: served by deployment {id} (first, created "
            )),
            "{name}: {}",
            run.summary
        );
    }
    assert!(
        run.stderr.contains("deploys: ") && run.stderr.contains("was made from other content"),
        "{run:?}"
    );
    let log = since(&fake, before);
    assert!(
        !log.iter().any(|e| e.mutation),
        "a plan only reads: {log:#?}"
    );
    assert_eq!(uploads(&log), 0, "no S3 request: {log:#?}");
    assert_eq!(creates(&log), 0, "no create: {log:#?}");
    assert!(
        log.iter().any(|e| e.endpoint == "rest.get_environment"),
        "the plan read the environments: {log:#?}"
    );
    // The model list is read once for all the targets, not once each.
    let lists = log
        .iter()
        .filter(|e| e.endpoint.starts_with("graphql.models"))
        .count();
    assert_eq!(lists, 1, "{log:#?}");

    // Without a key the plan reads nothing and says so.
    let before = fake.requests().len();
    let run = plan(false);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.out("targets-count"), "3", "{run:?}");
    assert!(
        run.everything()
            .contains("no baseten-api-key was given to the plan"),
        "{run:?}"
    );
    assert!(since(&fake, before).is_empty());
}

#[test]
fn the_pull_request_comment_shows_what_changes_too() {
    use fake_baseten::github::FakeGitHub;
    const TOKEN: &str = "ghs_canary_content_0123456789";
    let fake = platform("[[0, ACTIVE]]", "");
    let gh = FakeGitHub::builder(TOKEN).start_in_background().unwrap();
    let dir = a_truss(CONFIG);
    let on_pr = |name: &str| {
        push(&fake, dir.path(), name)
            .env("GITHUB_API_URL", gh.api_url())
            .env("GITHUB_REPOSITORY", gh.repository())
            .env("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567")
            .env("GITHUB_REF", "refs/pull/9/merge")
            .env("GITHUB_SERVER_URL", "https://github.com")
            .env("GITHUB_RUN_ID", "77")
            .arg("github-token", TOKEN)
            .arg("pr-comment", "true")
    };
    assert_eq!(on_pr("first").run().code, 0);
    std::fs::write(
        dir.path().join("config.yaml"),
        CONFIG.replace("A10G", "H100"),
    )
    .unwrap();
    let run = on_pr("h100").run();
    assert_eq!(run.code, 0, "{run:?}");
    let comments = gh.comments();
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert_in_order(
        &comments[0].body,
        &[
            "### What changes in production",
            "-   accelerator: A10G",
            "+   accelerator: H100",
        ],
    );
    // Unchanged: the comment says so, and shows no change.
    let run = on_pr("again").run();
    assert_eq!(run.out("unchanged"), "true", "{run:?}");
    let body = &gh.comments()[0].body;
    assert!(body.contains("unchanged, already serving"), "{body}");
    assert!(!body.contains("What changes"), "{body}");
}

#[test]
fn a_signal_while_the_truss_is_hashed_stops_the_run_in_time() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    // A sparse 64 GiB file: hashing it would take minutes.
    let fake = platform("[[0, ACTIVE]]", "");
    let dir = a_truss(CONFIG);
    let f = std::fs::File::create(dir.path().join("model/huge.bin")).unwrap();
    f.set_len(64 << 30).unwrap();
    drop(f);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    std::fs::write(&out, "").unwrap();
    let child = truss_push(work.path())
        .env("GITHUB_OUTPUT", &out)
        .args([
            format!("--truss-directory={}", dir.path().display()),
            format!("--baseten-api-key={API_KEY}"),
            format!("--app-url={}", fake.graphql_base()),
            format!("--api-url={}", fake.rest_base()),
            format!("--inference-url={}", fake.inference_template()),
            format!("--s3-endpoint={}", fake.s3_endpoint()),
            "--environment=production".into(),
            "--skip-unchanged=true".into(),
            "--deployment-name=hashing".into(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The models are listed just before the hash starts.
    let started = Instant::now();
    while !endpoints(&fake).iter().any(|e| e == "graphql.models") {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never reached the hash: {:?}",
            endpoints(&fake)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let sent = Instant::now();
    let killed = Command::new("kill")
        .args(["-INT".to_string(), child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let done = child.wait_with_output().unwrap();
    // Hashing 64 GiB would take minutes: "did not hang" only.
    assert!(
        sent.elapsed() < Duration::from_secs(60),
        "stopped in {:?}",
        sent.elapsed()
    );
    assert_eq!(
        done.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&done.stdout)
    );
    let outputs: std::collections::BTreeMap<_, _> =
        fake_baseten::runner::parse_github_output(&std::fs::read_to_string(&out).unwrap())
            .unwrap()
            .into_iter()
            .collect();
    assert!(outputs["error-message"].contains("SIGINT"), "{outputs:?}");
    assert_eq!(outputs["unchanged"], "false", "{outputs:?}");
    assert!(
        !fake
            .requests()
            .iter()
            .any(|e| e.endpoint.starts_with("rest.") || e.mutation),
        "nothing read or sent after the hash began: {:?}",
        endpoints(&fake)
    );
}

#[test]
fn the_diff_never_shows_the_key_or_a_secret_value() {
    let fake = platform("[[0, ACTIVE]]", "");
    // A config that quotes the key by mistake, and a secret with a value.
    let config = format!(
        "model_name: by-content\n# key: {API_KEY}\nsecrets:\n  hf_token: hf-live-value-1\nresources:\n  accelerator: A10G\n"
    );
    let dir = a_truss(&config);
    first_deploy(&fake, dir.path());
    std::fs::write(
        dir.path().join("config.yaml"),
        config
            .replace("A10G", "H100")
            .replace(&format!("# key: {API_KEY}"), &format!("# key: {API_KEY}!"))
            .replace("hf-live-value-1", "hf-live-value-2"),
    )
    .unwrap();
    let run = push(&fake, dir.path(), "h100").run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.summary.contains("+   accelerator: H100"),
        "{}",
        run.summary
    );
    assert!(
        run.summary.contains(
            "Secrets (names only; values are never shown): `hf_token`; the `secrets` entry's text differs."
        ),
        "{}",
        run.summary
    );
    // The key's line changed: it is in the diff, redacted.
    assert!(run.summary.contains("+ # key: ***!"), "{}", run.summary);
    assert!(!run.everything().contains(API_KEY), "{}", run.summary);
    assert!(
        !run.everything().contains("hf-live-value"),
        "{}",
        run.summary
    );
}

/// Secrets written the ways a line-by-line reading misses — a PEM in a
/// block scalar, a value on the next line, a quoted key with a space
/// before its colon, flow style, an alias of a value written elsewhere —
/// never reach the summary or the pull-request comment; their names do.
#[test]
fn secrets_in_any_yaml_form_stay_out_of_the_diff() {
    use fake_baseten::github::FakeGitHub;
    const TOKEN: &str = "ghs_canary_secrets_0123456789";
    let gh = FakeGitHub::builder(TOKEN).start_in_background().unwrap();
    let fake = platform("[[0, ACTIVE]]", "");
    let pem = [
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        "BKcwggSjAgEAAoIBAQC7bS4pem-canary",
    ];
    let first = format!(
        "model_name: by-content\nsecrets:\n  tls_key: |\n    -----BEGIN PRIVATE KEY-----\n    {}\n    {}\n    -----END PRIVATE KEY-----\n  hf_token:\n    hf-next-line-canary\nresources:\n  accelerator: A10G\n",
        pem[0], pem[1]
    );
    // The alias's anchor sits outside `secrets`, in a field that is shown.
    let second = "model_name: by-content\nenvironment_variables:\n  MODE: &shared shared-alias-canary\n'secrets' : {hf_token: hf-flow-canary, api: *shared}\nresources:\n  accelerator: H100\n";
    let dir = a_truss(&first);
    let on_pr = |name: &str| {
        push(&fake, dir.path(), name)
            .env("GITHUB_API_URL", gh.api_url())
            .env("GITHUB_REPOSITORY", gh.repository())
            .env("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567")
            .env("GITHUB_REF", "refs/pull/9/merge")
            .env("GITHUB_SERVER_URL", "https://github.com")
            .env("GITHUB_RUN_ID", "77")
            .arg("github-token", TOKEN)
            .arg("pr-comment", "true")
    };
    assert_eq!(on_pr("first").run().status(), "success");
    std::fs::write(dir.path().join("config.yaml"), second).unwrap();
    let run = on_pr("second").run();
    assert_eq!(run.status(), "success", "{run:?}");
    let comment = gh.comments().pop().expect("a comment").body;
    for page in [&run.summary, &comment] {
        assert_in_order(
            page,
            &[
                "### What changes in production",
                "+ environment_variables:",
                "+   MODE: &shared ***",
                "-   accelerator: A10G",
                "+   accelerator: H100",
                "Secrets (names only; values are never shown): `hf_token`, `api`; added `api`; removed `tls_key`.",
            ],
        );
        for canary in [
            pem[0],
            pem[1],
            "BEGIN PRIVATE KEY",
            "hf-next-line-canary",
            "hf-flow-canary",
            "shared-alias-canary",
        ] {
            assert!(!page.contains(canary), "{canary} shown:\n{page}");
        }
    }
}

/// The unchanged line says what the reads say of the serving deployment:
/// when the model's audit log records it promoted into the environment,
/// that; when the log cannot be read, when it was created — never "since".
#[test]
fn the_unchanged_line_says_when_the_audit_log_saw_it_promoted() {
    let fake = platform("[[0, ACTIVE]]", "");
    let dir = a_truss(CONFIG);
    first_deploy(&fake, dir.path());
    // A second source, created outside production and promoted into it
    // only after its smoke test.
    std::fs::write(dir.path().join("model/weights.bin"), b"promoted").unwrap();
    let gated = push(&fake, dir.path(), "gated")
        .arg("promotion", "after-predict")
        .run();
    assert_eq!(gated.status(), "success", "{gated:?}");
    let promoted = gated.out("deployment-id").to_string();
    let audit = |run_from: usize| {
        since(&fake, run_from)
            .into_iter()
            .filter(|e| e.endpoint == "rest.get_audit_logs")
            .collect::<Vec<_>>()
    };

    let before = fake.requests().len();
    let run = push(&fake, dir.path(), "again").run();
    assert_eq!(run.out("unchanged"), "true", "{run:?}");
    assert_eq!(run.out("deployment-id"), promoted);
    let at = fake.clock().iso(0.0);
    assert!(
        run.stdout.contains(&format!(
            "Unchanged: deployment {promoted} (gated, promoted to production at {at}) serves production"
        )),
        "{run:?}"
    );
    let reads = audit(before);
    assert_eq!(reads.len(), 1, "one try: {reads:#?}");
    assert_eq!(
        reads[0].query.as_deref(),
        Some(format!("deployment_ids={promoted}&event_type_groups=PROMOTED").as_str())
    );

    // The log cannot be read: one try, and the line says what it knows.
    fake.add_fault(Fault::status("rest.get_audit_logs", 500));
    let before = fake.requests().len();
    let run = push(&fake, dir.path(), "unread").run();
    assert_eq!(run.out("unchanged"), "true", "{run:?}");
    assert!(
        run.stdout.contains(&format!(
            "Unchanged: deployment {promoted} (gated, created {at}) serves production"
        )),
        "{run:?}"
    );
    assert_eq!(audit(before).len(), 1, "one try");
    assert!(!run.stdout.contains(" since "), "{run:?}");
}

/// A target the plan cannot compare stays in the matrix with the reason,
/// and the plan goes on: a read that fails, and the plan's one deadline
/// (every target's reads and hash end by it, not each by its own). The
/// targets are read side by side (`TARGETS_AT_ONCE`), so which one meets
/// the failing read is not fixed: exactly one does.
#[test]
fn a_target_the_plan_cannot_compare_stays_in_the_matrix() {
    let fake = platform("[[0, ACTIVE]]", "");
    let (root, served, dirs) = three_served(&fake);

    // One environment read fails; the two other targets are unchanged.
    fake.add_fault(Fault::status("rest.get_environment", 500));
    let run = plan_by_content(&fake, &dirs).run();
    assert_eq!(run.code, 0, "{run:?}");
    let kept = matrix_names(&run);
    let [kept] = kept.as_slice() else {
        panic!("one target stays in: {run:?}")
    };
    assert!(
        run.stderr.contains(&format!(
            "(\"{kept}\"): could not read the production environment"
        )),
        "{run:?}"
    );
    assert!(
        run.summary.contains(&format!(
            "| {kept} | named; deploys: could not read the production environment"
        )),
        "{}",
        run.summary
    );
    assert_eq!(run.stderr.matches("  unchanged: ").count(), 2, "{run:?}");

    // beta takes longer to hash than the plan's budget (a sparse 64 GiB
    // file): it stays in with the reason; alpha and gamma, read beside
    // it, are left out.
    let f = std::fs::File::create(root.path().join("beta/model/huge.bin")).unwrap();
    f.set_len(64 << 30).unwrap();
    drop(f);
    let run = plan_by_content(&fake, &dirs)
        .arg("wait-timeout-seconds", "10")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(matrix_names(&run), ["beta"], "{run:?}");
    assert!(
        run.stderr.contains(
            "(\"beta\"): not compared: the plan's time budget ran out before it was compared; its job decides"
        ),
        "{run:?}"
    );
    for (i, name) in [(0, "alpha"), (2, "gamma")] {
        assert!(
            run.summary.contains(&format!(
                "| {name} | unchanged: served by deployment {}",
                served[i]
            )),
            "{}",
            run.summary
        );
    }
}
