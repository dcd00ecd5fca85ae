//! Where reviewers see a deploy: the `--json` result on stdout, GitHub
//! deployments with their statuses, one pull-request comment kept up to
//! date, commit statuses; GitHub failures that only warn; and both secrets
//! kept where they belong, proven with canaries.

use std::time::Duration;

use fake_baseten::github::{FakeGitHub, Tap};
use serde_json::Value;

use crate::harness::*;

/// A canary GitHub token: it must reach the fake GitHub and nothing else.
const GH_TOKEN: &str = "ghs_canary_4b3c2d1e0f9a8b7c";
const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
const MODEL: &str = "hello-truss-push";
/// Ready at once; several runs of one commit share a fake, and the
/// platform takes the same deployment name again (its preflight too).
const ACTIVE: &str =
    "deployments:\n  default: [[0, ACTIVE]]\nprepare_model_upload: {refuse_taken_names: false}\n";

fn github() -> FakeGitHub {
    FakeGitHub::builder(GH_TOKEN)
        .start_in_background()
        .expect("the fake GitHub starts")
}

/// A run on GitHub Actions for `octo/repo` at `SHA`, talking to `gh`, with
/// the given features on.
fn on_github<'a>(fake: &'a fake_baseten::FakeBaseten, gh: &FakeGitHub) -> Invocation<'a> {
    Invocation::new(fake)
        .model(example_model())
        .env("GITHUB_API_URL", gh.api_url())
        .env("GITHUB_REPOSITORY", gh.repository())
        .env("GITHUB_SHA", SHA)
        .env("GITHUB_REF", "refs/heads/main")
        .env("GITHUB_SERVER_URL", "https://github.com")
        .env("GITHUB_RUN_ID", "77")
        .arg("github-token", GH_TOKEN)
}

fn on_pull_request<'a>(
    fake: &'a fake_baseten::FakeBaseten,
    gh: &FakeGitHub,
    pr: u64,
) -> Invocation<'a> {
    on_github(fake, gh).env("GITHUB_REF", format!("refs/pull/{pr}/merge"))
}

#[test]
fn json_puts_one_object_on_stdout_and_the_logs_on_stderr() {
    let fake = fake(ACTIVE);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("json", "true")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    let v: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("stdout is one JSON object ({e}): {run:?}"));
    // Every output, as GITHUB_OUTPUT has it.
    for (name, value) in &run.outputs {
        assert_eq!(v[name.as_str()], Value::from(value.as_str()), "{name}");
    }
    assert_eq!(v["status"], "success");
    assert_eq!(v["exit-code"], 0);
    let history = v["history"].as_array().expect("a history array");
    assert!(
        history
            .iter()
            .any(|e| e["status"] == "ACTIVE" && e["elapsed-seconds"].is_number()),
        "{history:?}"
    );
    assert!(
        history[0]["time"].as_str().unwrap().ends_with('Z'),
        "{history:?}"
    );
    assert!(v["notes"].is_array());
    assert!(run.stderr.contains("Final status: success"), "{run:?}");
    assert!(!run.everything().contains(API_KEY));
}

#[test]
fn json_reports_failures_and_bad_inputs_too() {
    let fake = fake("deployments:\n  default: [[0, BUILDING], [0.2, BUILD_FAILED]]\n");
    let run = Invocation::new(&fake)
        .model(example_model())
        .env("TRUSS_PUSH_JSON", "yes")
        .run();
    assert_eq!(run.code, 1, "{run:?}");
    let v: Value = serde_json::from_str(&run.stdout).expect("one JSON object");
    assert_eq!(v["status"], "deploy_failed");
    assert_eq!(v["last-status"], "BUILD_FAILED");
    assert_eq!(v["exit-code"], 1);
    assert!(!v["error-message"].as_str().unwrap().is_empty());

    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("json", "true")
        .arg("labels", "[1]")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    let v: Value = serde_json::from_str(&run.stdout).expect("one JSON object");
    assert_eq!(v["exit-code"], 2);
    assert!(
        v["error-message"]
            .as_str()
            .unwrap()
            .contains("labels must be a JSON object"),
        "{v}"
    );

    // A json value that is not a boolean is itself a bad input.
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("json", "maybe")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.out("error-message")
            .contains("json must be true or false")
    );
}

#[test]
fn a_successful_deploy_is_a_transient_github_deployment_in_progress_then_success() {
    let fake = fake(ACTIVE);
    let gh = github();
    let run = on_github(&fake, &gh).arg("github-deployment", "true").run();
    assert_eq!(run.code, 0, "{run:?}");
    let deps = gh.deployments();
    assert_eq!(deps.len(), 1, "{deps:?}");
    let d = &deps[0];
    assert_eq!(d.r#ref, SHA);
    assert_eq!(d.environment, format!("baseten-{MODEL}"));
    assert!(d.transient_environment);
    assert_eq!(d.states(), ["in_progress", "success"]);
    assert_eq!(
        d.statuses[0].log_url,
        "https://github.com/octo/repo/actions/runs/77"
    );
    let done = &d.statuses[1];
    assert_eq!(done.environment_url, run.out("predict-url"));
    assert!(!done.environment_url.is_empty());
    assert_eq!(done.log_url, run.out("logs-url"));
    assert!(done.description.starts_with("deployed and ready in"));
    assert!(!done.auto_inactive, "no environment: nothing to retire");
    let create = &gh.requests()[0];
    assert_eq!(create.json()["auto_merge"], false);
    assert_eq!(create.json()["required_contexts"], serde_json::json!([]));
    assert!(
        create
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && v == &format!("Bearer {GH_TOKEN}"))
    );
}

#[test]
fn a_failed_deploy_is_a_failure_and_a_timeout_an_error() {
    let gh = github();
    let failing = fake("deployments:\n  default: [[0, BUILDING], [0.2, BUILD_FAILED]]\n");
    let run = on_github(&failing, &gh)
        .arg("github-deployment", "true")
        .run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let slow = fake("deployments:\n  default: [[0, BUILDING]]\n");
    let run = on_github(&slow, &gh)
        .arg("github-deployment", "true")
        .arg("wait-timeout-seconds", "1.5")
        .run();
    assert_eq!(run.status(), "deploy_timeout", "{run:?}");
    let deps = gh.deployments();
    assert_eq!(deps.len(), 2, "{deps:?}");
    assert_eq!(deps[0].states(), ["in_progress", "failure"]);
    assert!(
        deps[0].statuses[1]
            .description
            .starts_with("deploy failed: "),
        "{:?}",
        deps[0].statuses[1]
    );
    assert_eq!(deps[1].states(), ["in_progress", "error"]);
    assert!(
        deps[1].statuses[1]
            .description
            .starts_with("deploy timed out")
    );
    for d in &deps {
        assert!(d.statuses[1].description.chars().count() <= 140);
    }
}

#[test]
fn a_deploy_into_an_environment_retires_the_earlier_one() {
    let fake = fake(&format!("new_model_environments: [staging]\n{ACTIVE}"));
    let gh = github();
    for name in ["first", "second"] {
        let run = on_github(&fake, &gh)
            .arg("github-deployment", "true")
            .arg("environment", "staging")
            .arg("deployment-name", name)
            .run();
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(
            gh.deployments()
                .last()
                .unwrap()
                .statuses
                .last()
                .unwrap()
                .environment_url,
            run.out("environment-url")
        );
    }
    let deps = gh.deployments();
    assert_eq!(deps.len(), 2);
    for d in &deps {
        assert_eq!(d.environment, "staging");
        assert!(!d.transient_environment);
    }
    assert_eq!(deps[0].states(), ["in_progress", "success", "inactive"]);
    assert_eq!(deps[1].states(), ["in_progress", "success"]);
    assert!(deps[1].statuses[1].auto_inactive);
}

#[test]
fn two_runs_on_one_pull_request_leave_one_comment_edited_in_place() {
    let fake = fake(ACTIVE);
    let gh = github();
    let someone = gh.add_comment(7, "Looks good to me");
    // Another model's comment on the same pull request stays its own.
    let other = gh.add_comment(7, "<!-- truss-push: model other-model -->\nold");
    let first = on_pull_request(&fake, &gh, 7)
        .arg("pr-comment", "true")
        .run();
    assert_eq!(first.code, 0, "{first:?}");
    let second = on_pull_request(&fake, &gh, 7)
        .arg("pr-comment", "true")
        .arg("deployment-name", "second")
        .run();
    assert_eq!(second.code, 0, "{second:?}");
    let comments = gh.comments();
    let ours: Vec<_> = comments
        .iter()
        .filter(|c| {
            c.body
                .starts_with(&format!("<!-- truss-push: model {MODEL} -->"))
        })
        .collect();
    assert_eq!(ours.len(), 1, "{comments:#?}");
    let c = ours[0];
    assert_eq!((c.issue, c.edits), (7, 1));
    assert!(c.body.contains(second.out("deployment-id")), "{}", c.body);
    assert!(c.body.contains("deployed and ready in"), "{}", c.body);
    assert!(c.body.contains(second.out("logs-url")), "{}", c.body);
    assert!(c.body.contains("| Predict latency |"), "{}", c.body);
    for (id, body) in [
        (someone, "Looks good to me"),
        (other, "<!-- truss-push: model other-model -->\nold"),
    ] {
        let c = comments.iter().find(|c| c.id == id).unwrap();
        assert_eq!((c.body.as_str(), c.edits), (body, 0));
    }
    let calls = gh.endpoints();
    assert_eq!(
        calls.iter().filter(|e| *e == "create_comment").count(),
        1,
        "{calls:?}"
    );
    assert_eq!(
        calls.iter().filter(|e| *e == "update_comment").count(),
        1,
        "{calls:?}"
    );
}

#[test]
fn a_failed_deploy_comment_shows_the_error_and_the_last_status() {
    let fake = fake("deployments:\n  default: [[0, BUILDING], [0.2, BUILD_FAILED]]\n");
    let gh = github();
    let run = on_pull_request(&fake, &gh, 3)
        .arg("pr-comment", "true")
        .run();
    assert_eq!(run.code, 1, "{run:?}");
    let comments = gh.comments();
    assert_eq!(comments.len(), 1);
    let body = &comments[0].body;
    assert!(body.contains("❌"), "{body}");
    assert!(
        body.contains("| Last platform status | `BUILD_FAILED` |"),
        "{body}"
    );
    assert!(body.contains("```text\n"), "{body}");
}

#[test]
fn no_pull_request_means_no_comment() {
    let fake = fake(ACTIVE);
    let gh = github();
    let run = on_github(&fake, &gh).arg("pr-comment", "true").run();
    assert_eq!(run.code, 0, "{run:?}");
    assert!(gh.requests().is_empty(), "{:?}", gh.endpoints());
    assert!(run.stdout.contains("not a pull request"), "{run:?}");
}

#[test]
fn a_commit_status_per_model_pending_then_the_verdict() {
    let fake = fake(ACTIVE);
    let gh = github();
    let run = on_github(&fake, &gh).arg("commit-status", "true").run();
    assert_eq!(run.code, 0, "{run:?}");
    let statuses = gh.commit_statuses();
    let states: Vec<_> = statuses.iter().map(|s| s.state.as_str()).collect();
    assert_eq!(states, ["pending", "success"]);
    for s in &statuses {
        assert_eq!(s.sha, SHA);
        assert_eq!(s.context, format!("truss-push / model {MODEL}"));
    }
    assert_eq!(statuses[1].target_url, run.out("logs-url"));
}

/// Every feature on a pull request, with `fault` answered to every GitHub
/// call: the deploy succeeds and each feature warns, naming its
/// permission.
fn every_feature_with_github_answering(status: u16) -> (Outcome, FakeGitHub) {
    let fake = fake(ACTIVE);
    let gh = github();
    gh.fail("*", status);
    let run = on_pull_request(&fake, &gh, 5)
        .arg("github-deployment", "true")
        .arg("pr-comment", "true")
        .arg("commit-status", "true")
        .run();
    (run, gh)
}

#[test]
fn a_403_on_every_call_is_a_warning_naming_the_permission() {
    let (run, gh) = every_feature_with_github_answering(403);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.status(), "success");
    for perm in [
        "deployments: write",
        "pull-requests: write",
        "statuses: write",
    ] {
        assert!(
            run.stderr
                .lines()
                .any(|l| l.starts_with("warning: GitHub:") && l.contains(perm)),
            "a warning naming {perm}: {run:?}"
        );
    }
    assert!(
        run.stderr
            .contains("HTTP 403: Resource not accessible by integration")
    );
    // A refused request is not retried, and a refused feature is not
    // asked again at the end of the run (one warning each).
    let calls = gh.endpoints();
    for endpoint in ["create_deployment", "create_commit_status", "list_comments"] {
        assert_eq!(
            calls.iter().filter(|e| *e == endpoint).count(),
            1,
            "{endpoint}: {calls:?}"
        );
    }
    assert_eq!(run.stderr.matches("warning: GitHub:").count(), 3, "{run:?}");
    assert!(gh.deployments().is_empty() && gh.comments().is_empty());
}

#[test]
fn a_github_outage_is_a_warning_and_holds_the_deploy_only_briefly() {
    let (run, gh) = every_feature_with_github_answering(500);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("GitHub is having trouble"), "{run:?}");
    // "Did not hang" only; how often GitHub was asked is counted below.
    assert!(run.elapsed < Duration::from_secs(60), "{:?}", run.elapsed);
    // Creates are not resent after a 500 (they may have been applied);
    // reads and status updates are tried a few times.
    let calls = gh.endpoints();
    assert_eq!(
        calls.iter().filter(|e| *e == "create_deployment").count(),
        1,
        "{calls:?}"
    );
    assert_eq!(
        calls.iter().filter(|e| *e == "list_comments").count(),
        3,
        "{calls:?}"
    );
}

#[test]
fn a_missing_token_is_a_warning_and_nothing_is_sent() {
    let fake = fake(ACTIVE);
    let gh = github();
    let run = Invocation::new(&fake)
        .model(example_model())
        .env("GITHUB_API_URL", gh.api_url())
        .env("GITHUB_REPOSITORY", gh.repository())
        .env("GITHUB_SHA", SHA)
        .arg("github-deployment", "true")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    assert!(gh.requests().is_empty());
    assert!(
        run.stderr.contains("no github-token was given")
            && run.stderr.contains("deployments: write"),
        "{run:?}"
    );
}

#[test]
fn the_token_never_goes_over_plain_http_off_this_machine() {
    let fake = fake(ACTIVE);
    let run = Invocation::new(&fake)
        .model(example_model())
        .env("GITHUB_API_URL", "http://github.invalid/api/v3")
        .env("GITHUB_REPOSITORY", "octo/repo")
        .env("GITHUB_SHA", SHA)
        .arg("github-token", GH_TOKEN)
        .arg("commit-status", "true")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("only sent over HTTPS"), "{run:?}");
}

#[test]
fn an_enterprise_server_base_url_is_honoured() {
    let fake = fake(ACTIVE);
    let gh = FakeGitHub::builder(GH_TOKEN)
        .prefix("/api/v3")
        .start_in_background()
        .unwrap();
    assert!(gh.api_url().ends_with("/api/v3"));
    let run = on_pull_request(&fake, &gh, 9)
        .arg("github-deployment", "true")
        .arg("pr-comment", "true")
        .arg("commit-status", "true")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    let reqs = gh.requests();
    assert!(!reqs.is_empty());
    for r in &reqs {
        assert!(r.path.starts_with("/api/v3/repos/octo/repo/"), "{}", r.path);
        assert!(r.status < 300, "{r:?}");
    }
    assert_eq!(gh.deployments().len(), 1);
    assert_eq!(gh.comments().len(), 1);
    assert!(!run.stderr.contains("warning: GitHub"), "{run:?}");
}

#[test]
fn the_baseten_key_never_reaches_github_and_the_token_never_reaches_baseten() {
    let fake = fake(ACTIVE);
    let tap = Tap::start_in_background(fake.addr()).unwrap();
    let gh = github();
    let url = tap.url();
    let run = on_pull_request(&fake, &gh, 11)
        .arg("app-url", &url)
        .arg("api-url", &url)
        .arg("inference-url", format!("{url}/{{prefix}}-{{id}}"))
        .arg("s3-endpoint", &url)
        .arg("github-deployment", "true")
        .arg("pr-comment", "true")
        .arg("commit-status", "true")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    // Both sides were really used, through the tap and the fake GitHub.
    assert!(tap.saw(API_KEY), "the tap sees the platform traffic");
    assert!(tap.saw("predict"), "the smoke test went through the tap");
    assert!(!gh.deployments().is_empty() && !gh.comments().is_empty());
    assert!(!tap.saw(GH_TOKEN), "the GitHub token reached Baseten");
    for r in gh.requests() {
        let raw = r.raw();
        assert!(!raw.contains(API_KEY), "the API key reached GitHub: {raw}");
        assert!(
            raw.contains(GH_TOKEN),
            "every GitHub request carries the token"
        );
    }
    // And neither is shown anywhere.
    let shown = run.everything();
    assert!(!shown.contains(GH_TOKEN), "{run:?}");
    assert!(!shown.contains(API_KEY));
}

#[test]
fn a_wrong_token_or_no_github_at_all_is_a_warning() {
    let fake = fake(ACTIVE);
    let gh = github();
    let run = on_github(&fake, &gh)
        .arg("github-token", "ghs_not_the_right_one")
        .arg("commit-status", "true")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains("HTTP 401: Bad credentials")
            && run.stderr.contains("check github-token"),
        "{run:?}"
    );
    assert!(gh.commit_statuses().is_empty());

    // Nothing listens on the API's port (port 1: a port just freed could
    // be taken by a fake started beside this test).
    let down = "http://127.0.0.1:1".to_string();
    let run = on_github(&fake, &gh)
        .env("GITHUB_API_URL", &down)
        .arg("github-deployment", "true")
        .arg("commit-status", "true")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.status(), "success");
    assert!(
        run.stderr.contains("could not create a deployment")
            && run.stderr.contains("deployments: write"),
        "{run:?}"
    );
    // "Did not hang" only: a refused connection must not be waited on.
    assert!(run.elapsed < Duration::from_secs(60), "{:?}", run.elapsed);
}

#[test]
fn a_cancelled_deploy_is_an_error_on_github_and_still_writes_its_outputs() {
    let fake = fake("deployments:\n  default: [[0, BUILDING]]\n");
    let gh = github();
    let waiting = || {
        endpoints(&fake).iter().any(|e| e == "rest.get_deployment")
            && gh
                .deployments()
                .first()
                .is_some_and(|d| !d.statuses.is_empty())
    };
    let run = on_github(&fake, &gh)
        .arg("deployment-name", "cancel-me")
        .arg("poll-interval-seconds", "0.1")
        .arg("github-deployment", "true")
        .run_signalled_when(waiting, "INT");
    let took = run.after_signal.expect("signalled");
    // The deployment builds for ever: "did not hang" only.
    assert!(took < Duration::from_secs(60), "{took:?}");
    assert_eq!(run.code, 130);
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let d = &gh.deployments()[0];
    assert_eq!(d.states(), ["in_progress", "error"]);
    assert!(
        d.statuses[1].description.contains("cancelled by SIGINT"),
        "{:?}",
        d.statuses[1]
    );
}

#[test]
fn a_403_on_any_one_call_is_one_warning_naming_its_permission() {
    let fake = fake(ACTIVE);
    for (endpoint, perm) in [
        ("create_deployment", "deployments: write"),
        ("create_deployment_status", "deployments: write"),
        ("list_comments", "pull-requests: write"),
        ("create_comment", "pull-requests: write"),
        // The token may comment (it did before): the edit of that one
        // comment was refused, and a new comment carries the verdict.
        (
            "update_comment",
            "so a new comment carries this run's verdict",
        ),
        ("create_commit_status", "statuses: write"),
    ] {
        let gh = github();
        if endpoint == "update_comment" {
            gh.add_comment_by(
                5,
                &format!("<!-- truss-push: model {MODEL} -->\nearlier"),
                "github-actions[bot]",
            );
        }
        gh.fail(endpoint, 403);
        let run = on_pull_request(&fake, &gh, 5)
            .arg("github-deployment", "true")
            .arg("pr-comment", "true")
            .arg("commit-status", "true")
            .run();
        assert_eq!(
            (run.code, run.status()),
            (0, "success"),
            "{endpoint}: {run:?}"
        );
        let warnings: Vec<&str> = run
            .stderr
            .lines()
            .filter(|l| l.starts_with("warning: GitHub:"))
            .collect();
        assert_eq!(warnings.len(), 1, "{endpoint}: {warnings:?}");
        assert!(warnings[0].contains(perm), "{endpoint}: {warnings:?}");
        assert!(gh.endpoints().iter().any(|e| e == endpoint), "{endpoint}");
    }
}
