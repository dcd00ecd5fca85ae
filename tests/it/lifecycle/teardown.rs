//! `command: teardown`: a pull request's previews retired in every model
//! the key sees, and nothing else; the deploy side (the label, the refusal
//! on a closed pull request); GitHub's deployments of that pull request.

use fake_baseten::FakeBaseten;
use serde_json::Value;

use super::*;

/// Three models: `alpha` (in the checkout) and `gamma-renamed` (a model
/// the pull request renamed: no checkout names it) each with a preview
/// of acme/models#12; `alpha` also has #13's preview, a mirror's #12 and a
/// #12 deployment that serves production (promoted by hand); `beta` only
/// what other pull requests made.
fn previews(extra: &str) -> FakeBaseten {
    let mut y = String::from(
        "manual_clock: true\nmodels:\n  - id: alpha001\n    name: alpha\n    deployments:\n",
    );
    y += &dep(
        "ap000001",
        9,
        &format!(", environment: production{}", pr_label("acme/models#12")),
    );
    y += &dep("ax000001", 2, &pr_label("acme/models#12"));
    y += &dep("ay000001", 2, &pr_label("acme/models#13"));
    y += &dep("am000001", 2, &pr_label("mirror/models#12"));
    y += &dep("an000001", 2, &pr_label("#12"));
    y += "  - id: gamma001\n    name: gamma-renamed\n    deployments:\n";
    y += &dep("gp000001", 9, ", environment: production");
    y += &dep("gx000001", 1, &pr_label("acme/models#12"));
    y += "  - id: beta0001\n    name: beta\n    deployments:\n";
    y += &dep("bp000001", 9, ", environment: production");
    y += &dep("by000001", 1, &pr_label("acme/models#120"));
    y += "audit_log:\n  entries:\n";
    for (model, d) in [
        ("alpha", "ap000001"),
        ("gamma-renamed", "gp000001"),
        ("beta", "bp000001"),
    ] {
        y += &format!(
            "    - {{at: -86400, event_type: MODEL_DEPLOYMENT_PROMOTED, model: {model}, deployment: {d}, environment: production}}\n"
        );
    }
    y += extra;
    fake(&y)
}

#[test]
fn teardown_retires_a_pull_requests_previews_in_every_model_and_nothing_else() {
    let fake = previews("");
    // No checkout at all, as GitLab's on_stop job with GIT_STRATEGY: none.
    let (inv, _event) = on_github(command(&fake, "teardown"), &closed(12));
    let run = inv.run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.status(), "success");
    assert_eq!(deleted(&fake), ["ax000001", "gx000001"]);
    assert_eq!(retired(&run), pairs(&["ax000001", "gx000001"], "deleted"));
    assert_eq!(run.out("retired-count"), "2");
    // The #12 deployment that serves production is protected and said so.
    assert_eq!(run.out("protected-count"), "1");
    assert!(run.stdout.contains("ap000001"), "{run:?}");
    // Only DELETEs were sent, and only of those two.
    let muts = mutations_of(&fake);
    assert!(
        muts.iter().all(|e| e.endpoint == "rest.delete_deployment"),
        "{muts:?}"
    );
    assert_eq!(muts.len(), 2);
    // Each DELETE came after a fresh reading of its model's environments.
    let log = fake.requests();
    for d in ["ax000001", "gx000001"] {
        let at = log
            .iter()
            .position(|e| e.method == "DELETE" && e.path.ends_with(d))
            .unwrap();
        let model = &log[at].path.split('/').nth(3).unwrap().to_string();
        assert!(
            log[..at]
                .iter()
                .rev()
                .take(RECENT_READS)
                .any(|e| e.endpoint == "rest.list_environments" && e.path.contains(model.as_str())),
            "no environments read just before deleting {d}"
        );
    }
    // beta had no #12 deployment: neither its environments nor its log were read.
    assert!(!log.iter().any(
        |e| e.path.contains("beta0001/environments") || e.path.contains("beta0001/audit_logs")
    ));
    crate::snapshots::page_snapshot("teardown_deletes_two_previews", &run, &[]);
}

/// How far back the environments read before a DELETE may be in the log:
/// other retirements run beside it.
const RECENT_READS: usize = 2 * 8;

#[test]
fn teardown_with_retire_deactivate_deactivates_instead() {
    let fake = previews("");
    let (inv, _event) = on_github(
        command(&fake, "teardown").arg("retire", "deactivate"),
        &closed(12),
    );
    let run = inv.run();
    assert_eq!(run.code, 0, "{run:?}");
    assert!(deleted(&fake).is_empty());
    let deactivated: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|e| e.endpoint == "rest.deactivate_deployment")
        .map(|e| e.path)
        .collect();
    assert_eq!(deactivated.len(), 2, "{deactivated:?}");
    assert_eq!(
        retired(&run),
        pairs(&["ax000001", "gx000001"], "deactivated")
    );
}

#[test]
fn teardown_takes_the_pull_request_input_outside_a_pull_request_event() {
    let fake = previews("");
    let (inv, _event) = on_github(command(&fake, "teardown").arg("pull-request", "13"), "{}");
    let run = inv.run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(deleted(&fake), ["ay000001"]);
}

#[test]
fn a_dry_run_changes_nothing_and_lists_what_it_would_retire() {
    let fake = previews("");
    let (inv, _event) = on_github(
        command(&fake, "teardown").arg("dry-run", "true"),
        &closed(12),
    );
    let run = inv.run();
    assert_eq!(run.code, 0, "{run:?}");
    assert!(mutations_of(&fake).is_empty(), "{:?}", mutations_of(&fake));
    assert_eq!(
        retired(&run),
        pairs(&["ax000001", "gx000001"], "would-delete")
    );
    assert_eq!(run.out("retired-count"), "2");
}

#[test]
fn a_chain_teardown_is_refused_without_a_request() {
    let fake = previews("");
    let (dir, chain) = file_in_temp_dir(
        "my_chain.py",
        "import truss_chains as chains\n\n@chains.mark_entrypoint\nclass Hello(chains.ChainletBase):\n    def run_remote(self) -> str:\n        return 'hi'\n",
    );
    let (inv, _event) = on_github(
        command(&fake, "teardown").arg("truss-directory", chain.to_str().unwrap()),
        &closed(12),
    );
    let run = inv.run();
    drop(dir);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("chain deployments carry no labels"),
        "{run:?}"
    );
    assert!(fake.requests().is_empty(), "{:?}", fake.requests());
}

#[test]
fn a_refused_delete_is_a_warning_the_others_go_on_and_the_run_fails_with_5() {
    let fake = previews("faults: [{endpoint: rest.delete_deployment, status: 500, times: 1}]\n");
    let (inv, _event) = on_github(command(&fake, "teardown"), &closed(12));
    let run = inv.run();
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.status(), "cleanup_failed");
    // One of the two was refused, the other deleted.
    assert_eq!(deleted(&fake).len(), 1);
    assert_eq!(run.out("retired-count"), "1");
    assert!(
        run.stdout.contains("was not retired") || run.stderr.contains("was not retired"),
        "{run:?}"
    );
}

#[test]
fn a_key_that_may_read_but_not_delete_retires_nothing_and_says_so() {
    let fake = previews(
        "refuse_deletes: [{deployment: ax000001, status: 403}, {deployment: gx000001, status: 403}]\n",
    );
    let (inv, _event) = on_github(command(&fake, "teardown"), &closed(12));
    let run = inv.run();
    assert_eq!(run.code, 5, "{run:?}");
    assert!(deleted(&fake).is_empty());
    assert_eq!(run.out("retired"), "[]");
    assert_eq!(run.out("retired-count"), "0");
}

#[test]
fn a_delete_answered_deleted_false_is_a_refusal() {
    let fake = previews("refuse_deletes: [{deployment: ax000001}]\n");
    let (inv, _event) = on_github(command(&fake, "teardown"), &closed(12));
    let run = inv.run();
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(deleted(&fake), ["gx000001"]);
    assert!(
        format!("{}{}", run.stdout, run.stderr).contains("deleted: false"),
        "{run:?}"
    );
    crate::snapshots::page_snapshot("teardown_a_refused_delete", &run, &[]);
}

#[test]
fn a_preview_still_building_is_kept_so_a_racing_deploy_is_never_cut_down() {
    let mut y = String::from(
        "manual_clock: true\nmodels:\n  - id: alpha001\n    name: alpha\n    deployments:\n",
    );
    y += &dep(
        "ab000001",
        0,
        &format!(", status: BUILDING{}", pr_label("acme/models#12")),
    );
    y += &dep("ax000001", 1, &pr_label("acme/models#12"));
    let fake = fake(&y);
    let (inv, _event) = on_github(command(&fake, "teardown"), &closed(12));
    let run = inv.run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(deleted(&fake), ["ax000001"]);
    assert_eq!(run.out("protected-count"), "1");
    assert!(run.stdout.contains("BUILDING"), "{run:?}");
}

#[test]
fn a_deploy_on_a_closed_pull_request_is_refused() {
    let fake = previews("");
    let dir = model_dir("model_name: alpha\n");
    let (inv, _event) = on_github(Invocation::new(&fake).model(dir.path()), &closed(12));
    let run = inv.run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("being closed"), "{run:?}");
    assert!(fake.requests().is_empty());
}

#[test]
fn odd_pull_request_numbers_are_refused_before_any_request() {
    let fake = previews("");
    for bad in [
        "#12",
        "0",
        "-1",
        "1e3",
        "12;rm",
        "\u{0661}\u{0662}",
        "99999999999999999999999",
    ] {
        let (inv, _event) = on_github(command(&fake, "teardown").arg("pull-request", bad), "{}");
        let run = inv.run();
        assert_eq!(run.code, 2, "{bad:?}: {run:?}");
    }
    assert!(fake.requests().is_empty());
}

#[test]
fn teardown_with_team_looks_only_at_that_teams_models() {
    let mut y = String::from(
        "manual_clock: true\nteams: [{name: ml, default: true}, {name: web}]\nmodels:\n  - id: alpha001\n    name: alpha\n    team: ml\n    deployments:\n",
    );
    y += &dep("ax000001", 2, &pr_label("acme/models#12"));
    y += "  - id: webm0001\n    name: web-model\n    team: web\n    deployments:\n";
    y += &dep("wx000001", 2, &pr_label("acme/models#12"));
    let fake = fake(&y);
    let (inv, _event) = on_github(
        command(&fake, "teardown")
            .arg("team", "web")
            .outputs_file("truss-push.env"),
        &closed(12),
    );
    let run = inv.run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(deleted(&fake), ["wx000001"]);
    // GitLab's dotenv report carries the counts; the JSON list stays in
    // the JSON outputs (a dotenv file never holds JSON).
    let dotenv = run.outputs_file.clone().unwrap_or_default();
    for line in ["TRUSS_PUSH_RETIRED_COUNT=1", "TRUSS_PUSH_PROTECTED_COUNT=0"] {
        assert!(dotenv.contains(line), "{line}: {dotenv}");
    }
    assert!(!dotenv.contains("TRUSS_PUSH_RETIRED="), "{dotenv}");
    assert!(dotenv.lines().count() <= 20 && dotenv.len() < 5 * 1024);
}

// --------------------------------------------- end to end, with GitHub

/// Two pull requests deploy previews of the same model (the deploy labels
/// each and records the label in its GitHub deployment's payload); the
/// teardown of #12 deletes #12's preview only, and marks only #12's
/// GitHub deployment inactive.
#[test]
fn a_deploy_labels_its_preview_and_teardown_retires_only_that_pull_requests() {
    use fake_baseten::github::FakeGitHub;
    const TOKEN: &str = "ghs_canary_lifecycle_0a1b2c";
    let gh = FakeGitHub::builder(TOKEN).start_in_background().unwrap();
    let repo = gh.repository().to_string();
    let fake = fake(&format!(
        "deployments:\n  default: [[0, ACTIVE]]\nmodels:\n  - id: hello001\n    name: hello-truss-push\n    deployments:\n{}audit_log:\n  entries:\n    - {{at: -86400, event_type: MODEL_DEPLOYMENT_PROMOTED, model: hello-truss-push, deployment: prod0001, environment: production}}\n",
        dep("prod0001", 9, ", environment: production")
    ));
    let github = |inv: Invocation<'_>, event: &str| {
        let (dir, path) = file_in_temp_dir("event.json", event);
        let inv = inv
            .env("GITHUB_API_URL", gh.api_url())
            .env("GITHUB_REPOSITORY", &repo)
            .env("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567")
            .env("GITHUB_EVENT_PATH", path.to_str().unwrap())
            .arg("github-token", TOKEN)
            .arg("github-deployment", "true");
        let run = inv.run();
        drop(dir);
        run
    };
    let opened = |n: u64| {
        format!(
            r#"{{"action": "synchronize", "pull_request": {{"number": {n}, "head": {{"sha": "0123456789abcdef0123456789abcdef01234567"}}}}}}"#
        )
    };
    for n in [12, 13] {
        // Each pull request's own name, as the default PR-<n>_<sha7> is
        // (the platform's preflight refuses a name the model has).
        let deploy = Invocation::new(&fake)
            .model(example_model())
            .arg("deployment-name", format!("pr-{n}"))
            .arg("cleanup", "false");
        let run = github(deploy, &opened(n));
        assert_eq!(run.code, 0, "{run:?}");
    }
    let label = |id: &str| {
        fake.deployments()
            .into_iter()
            .find(|d| d.id == id)
            .and_then(|d| d.labels)
            .and_then(|l| l.get("truss_push_pull_request").cloned())
    };
    let previews: Vec<String> = fake
        .deployments()
        .into_iter()
        .filter(|d| d.id != "prod0001")
        .map(|d| d.id)
        .collect();
    assert_eq!(previews.len(), 2);
    assert_eq!(label(&previews[0]), Some(Value::from(format!("{repo}#12"))));
    assert_eq!(label(&previews[1]), Some(Value::from(format!("{repo}#13"))));

    let run = github(command(&fake, "teardown"), &closed(12));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(deleted(&fake), [previews[0].clone()]);
    let states: Vec<(Value, String)> = gh
        .deployments()
        .into_iter()
        .map(|d| {
            (
                d.payload["truss_push"]["pull_request"].clone(),
                d.states().last().cloned().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            (Value::from(format!("{repo}#12")), "inactive".to_string()),
            (Value::from(format!("{repo}#13")), "success".to_string()),
        ],
        "{run:?}"
    );
}
