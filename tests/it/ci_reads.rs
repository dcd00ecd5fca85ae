//! What the CI reads is exactly what the run meant: stdout stays one JSON
//! document on GitHub when it carries one, and no text the run echoes (a
//! deployment's log, a streamed token, a directory name, an error) can
//! become a workflow command, read the way the runner reads the log.

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::{LogLineSpec, Scenario};
use fake_baseten::workflow_log::workflow_commands;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::Value;

use crate::harness::*;

/// The hostile-text strategy, shared with the reporter's unit tests.
#[path = "../../src/ci/hostile_text.rs"]
mod hostile_text;
use hostile_text::hostile_text;

const GH_TOKEN: &str = "ghs_canary_20a_1f2e3d4c5b6a";
/// Ready at once; several runs of one commit share a fake, and the
/// platform takes the same deployment name again (its preflight too).
const ACTIVE: &str =
    "deployments:\n  default: [[0, ACTIVE]]\nprepare_model_upload: {refuse_taken_names: false}\n";

#[test]
fn json_print_config_and_plan_on_github_keep_stdout_one_document() {
    let fake = fake(ACTIVE);
    let on_github = || {
        Invocation::new(&fake)
            .model(example_model())
            .env("GITHUB_ACTIONS", "true")
            .arg("github-token", GH_TOKEN)
    };
    let runs = [
        ("json", on_github().arg("json", "true")),
        ("print-config", on_github().arg("print-config", "true")),
        ("plan", on_github().arg("plan", "true")),
    ];
    for (mode, inv) in runs {
        let run = inv.run();
        assert_eq!(run.code, 0, "{mode}: {run:?}");
        serde_json::from_str::<Value>(&run.stdout)
            .unwrap_or_else(|e| panic!("{mode}: stdout is not one JSON document ({e}): {run:?}"));
        // The masks still reach the runner, which reads stderr too.
        for secret in [API_KEY, GH_TOKEN] {
            assert!(
                run.stderr.contains(&format!("::add-mask::{secret}\n")),
                "{mode}: {run:?}"
            );
        }
        assert!(!run.stdout.contains("::"), "{mode}: {run:?}");
    }
}

/// Why `log` would make the runner do something the run did not mean.
fn forged(log: &str) -> Option<String> {
    for c in workflow_commands(log) {
        let ours_fence = |t: &str| t.len() == 32 && t.chars().all(|c| c.is_ascii_hexdigit());
        let bad = c.name.starts_with("forged")
            || c.properties.contains("FORGED")
            || (c.name == "add-mask" && c.data != API_KEY)
            || (c.name == "stop-commands" && !ours_fence(&c.data));
        if bad {
            return Some(format!("{c:?}"));
        }
    }
    None
}

/// A directory name from hostile text: no `/` or NUL, at most 200 bytes.
fn dir_name(text: &str) -> String {
    let mut name = String::new();
    for c in text
        .chars()
        .map(|c| if c == '/' || c == '\0' { '_' } else { c })
    {
        if name.len() + c.len_utf8() > 200 {
            break;
        }
        name.push(c);
    }
    match name.as_str() {
        "" | "." | ".." => format!("m{name}"),
        _ => name,
    }
}

fn hostile_fake(text: &str) -> FakeBaseten {
    let mut s = Scenario::from_yaml(
        "manual_clock: true\ndeployments:\n  default: [[0, BUILDING], [1, ACTIVE]]\n",
    )
    .expect("scenario parses")
    .with_api_key(API_KEY);
    s.logs.push(LogLineSpec {
        at: 0.0,
        message: text.to_string(),
        replica: None,
        level: None,
        model: None,
    });
    s.predict.stream.token = text.to_string();
    s.predict.stream.tokens = 2;
    FakeBaseten::start_in_background(s).expect("fake starts")
}

#[test]
fn hostile_text_in_logs_tokens_and_paths_never_becomes_a_workflow_command() {
    let mut runner = TestRunner::new(Config {
        cases: 12,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&(hostile_text(1..16), any::<bool>()), |(text, json)| {
        let scripted = hostile_fake(&text);
        // The text in a deployment's log and in streamed tokens.
        let echoed = Invocation::new(&scripted)
            .model(example_model())
            .env("GITHUB_ACTIONS", "true")
            .arg("predict-payload", r#"{"stream": true}"#)
            .arg("json", json.to_string())
            .run_stepping_clock(&[("rest.get_logs", 1.0)]);
        prop_assert_eq!(echoed.code, 0, "{:?}", echoed);
        // The text in a directory's name (wrapped: a path is trimmed).
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(format!("m{}m", dir_name(&text)));
        std::fs::create_dir_all(dir.join("model")).unwrap();
        for f in ["config.yaml", "model/model.py"] {
            std::fs::copy(example_model().join(f), dir.join(f)).unwrap();
        }
        let plain = fake(ACTIVE);
        let named = Invocation::new(&plain)
            .model(&dir)
            .env("GITHUB_ACTIONS", "true")
            .arg("json", json.to_string())
            .run();
        for (what, run) in [("log and tokens", &echoed), ("directory", &named)] {
            for (stream, log) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
                if let Some(c) = forged(log) {
                    return Err(TestCaseError::fail(format!(
                        "{what}: {stream} makes the runner execute {c}: {run:?}"
                    )));
                }
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn a_command_line_parse_error_still_writes_the_json_and_the_outputs_file() {
    let mut inv = Invocation::bare()
        .model(example_model())
        .arg("json", "true")
        .outputs_file("outputs.json");
    inv.args.push("--no-such-flag".into());
    let run = inv.run();
    assert_eq!(run.code, 2, "{run:?}");
    let v: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("stdout is one JSON document ({e}): {run:?}"));
    assert_eq!(v["exit-code"], 2);
    assert_eq!(v["status"], "deploy_failed");
    assert!(
        v["error-message"]
            .as_str()
            .unwrap()
            .contains("--no-such-flag"),
        "{v}"
    );
    let file: Value = serde_json::from_str(run.outputs_file.as_deref().expect("outputs file"))
        .expect("the outputs file is JSON");
    assert_eq!(file["status"], "deploy_failed");
    assert_eq!(run.out("status"), "deploy_failed");
}

#[test]
fn a_plan_refuses_every_input_a_deploy_refuses() {
    let fake = fake(ACTIVE);
    for (name, value, said) in [
        ("max-parallel", "0", "max-parallel"),
        ("fail-fast", "maybe", "fail-fast must be true or false"),
        ("labels", "[1]", "labels must be a JSON object"),
        ("predict-timeout", "0", "predict-timeout"),
    ] {
        let run = Invocation::bare()
            .model(example_model())
            .arg("plan", "true")
            .arg(name, value)
            .run();
        assert_eq!(run.code, 2, "{name}={value}: {run:?}");
        assert!(run.out("error-message").contains(said), "{run:?}");
        assert_eq!(run.stdout, "", "no matrix for a refused plan: {run:?}");
        assert!(!run.outputs.contains_key("matrix"), "{run:?}");
    }
    // The same plan with valid inputs, and no key: a matrix.
    let run = Invocation::bare()
        .model(example_model())
        .arg("plan", "true")
        .arg("max-parallel", "3")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.out("targets-count"), "1");
    assert!(fake.requests().is_empty());
}

fn models(n: usize) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for i in 0..n {
        let d = root.path().join(format!("m{i:03}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("config.yaml"), format!("model_name: m{i:03}\n")).unwrap();
    }
    root
}

#[test]
fn a_plan_over_256_targets_warns_about_githubs_matrix_limit() {
    for (n, warned) in [(256, false), (257, true)] {
        let root = models(n);
        let run = Invocation::bare()
            .arg("truss-directory", root.path().to_str().unwrap())
            .arg("plan", "true")
            .env("GITHUB_ACTIONS", "true")
            .run();
        assert_eq!(run.code, 0, "{n}: {run:?}");
        assert_eq!(run.out("targets-count"), n.to_string());
        let matrix: Value = serde_json::from_str(&run.stdout).expect("stdout is the matrix");
        assert_eq!(matrix["include"].as_array().unwrap().len(), n);
        let warning = format!(
            "::warning::the plan has {n} targets, but a GitHub Actions matrix runs at most 256 jobs"
        );
        assert_eq!(run.stderr.contains(&warning), warned, "{n}: {}", run.stderr);
    }
}

#[test]
fn a_model_name_with_a_bidi_override_is_refused_before_any_request() {
    let fake = fake(ACTIVE);
    for name in [
        "model\u{202e}lmth.exe",
        "a\u{2066}b\u{2069}",
        "zero\u{200b}width",
    ] {
        let run = Invocation::new(&fake)
            .model(example_model())
            .arg("model-name", name)
            .run();
        assert_eq!(run.code, 2, "{name:?}: {run:?}");
        assert!(
            run.out("error-message")
                .contains("model-name contains an invisible formatting character"),
            "{run:?}"
        );
    }
    assert!(fake.requests().is_empty(), "{:?}", fake.requests());
}

#[test]
fn several_targets_keep_the_github_token_out_of_the_summary_and_results() {
    let fake = fake(
        "deployments:\n  default: [[0, ACTIVE]]\n  by_model: {bad: [[0, BUILDING], [0.1, BUILD_FAILED]]}\n",
    );
    // Both targets' paths, so every row and the failed one's error quote it.
    let root = tempfile::tempdir().unwrap();
    for name in ["good", "bad"] {
        let d = root.path().join(format!("{name}-{GH_TOKEN}"));
        std::fs::create_dir_all(d.join("model")).unwrap();
        std::fs::write(d.join("config.yaml"), format!("model_name: {name}\n")).unwrap();
        std::fs::copy(
            example_model().join("model/model.py"),
            d.join("model/model.py"),
        )
        .unwrap();
    }
    let run = Invocation::new(&fake)
        .arg("truss-directory", root.path().to_str().unwrap())
        .arg("github-token", GH_TOKEN)
        .arg("json", "true")
        .env("GITHUB_ACTIONS", "true")
        .outputs_file("outputs.json")
        .run();
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.out("targets-count"), "2", "{run:?}");
    assert!(run.summary.contains("bad-***"), "{}", run.summary);
    assert!(run.summary.contains("BUILD_FAILED"), "{}", run.summary);
    assert!(run.out("results").contains("bad-***"), "{run:?}");
    // Only the mask itself names it.
    let mask = format!("::add-mask::{GH_TOKEN}\n");
    let seen = run.everything().replacen(&mask, "", 1);
    assert!(!seen.contains(GH_TOKEN), "{seen}");
}

#[test]
fn a_pull_request_target_run_names_the_deployment_after_the_pr_head() {
    use fake_baseten::github::FakeGitHub;
    const BASE: &str = "ba5eba5eba5eba5eba5eba5eba5eba5eba5eba5e";
    const HEAD: &str = "4ead4ead4ead4ead4ead4ead4ead4ead4ead4ead";
    let fake = fake(ACTIVE);
    let gh = FakeGitHub::builder(GH_TOKEN)
        .start_in_background()
        .expect("the fake GitHub starts");
    let events = tempfile::tempdir().unwrap();
    let event = events.path().join("event.json");
    std::fs::write(
        &event,
        serde_json::json!({
            "action": "synchronize",
            "number": 42,
            "pull_request": {"number": 42, "head": {"sha": HEAD}, "base": {"sha": BASE}},
        })
        .to_string(),
    )
    .unwrap();
    let mut inv = Invocation::new(&fake).model(example_model());
    inv.args.retain(|a| !a.starts_with("--deployment-name"));
    // pull_request_target: the ref and GITHUB_SHA are the base branch's.
    let run = inv
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_EVENT_NAME", "pull_request_target")
        .env("GITHUB_EVENT_PATH", event.to_str().unwrap())
        .env("GITHUB_REF", "refs/heads/main")
        .env("GITHUB_SHA", BASE)
        .env("GITHUB_API_URL", gh.api_url())
        .env("GITHUB_REPOSITORY", gh.repository())
        .arg("github-token", GH_TOKEN)
        .arg("pr-comment", "true")
        .arg("commit-status", "true")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    let created = mutations(&fake);
    let sent = serde_json::to_string(&created[0].graphql.as_ref().unwrap().arguments).unwrap();
    assert!(sent.contains("\"PR-42_4ead4ea\""), "{sent}");
    let comments = gh.comments();
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert_eq!(comments[0].issue, 42);
    let statuses = gh.commit_statuses();
    assert!(
        !statuses.is_empty() && statuses.iter().all(|s| s.sha == HEAD),
        "{statuses:?}"
    );
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn each_chain_file_has_its_own_environment_and_its_pending_status_resolves() {
    use crate::chain_harness::{chain_run, fixture};
    use fake_baseten::github::FakeGitHub;
    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
    let fake = fake("time_scale: 1\nchainlets:\n  default: [[0, MODEL_READY]]\n");
    let gh = FakeGitHub::builder(GH_TOKEN)
        .start_in_background()
        .expect("the fake GitHub starts");
    // Two chains in files both called chain.py, each in its own folder.
    let root = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (dir, source) in [
        ("a", "chains/two/two_chain.py"),
        ("b", "chains/three/three_chain.py"),
    ] {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
        let file = root.path().join(dir).join("chain.py");
        std::fs::copy(fixture(source), &file).unwrap();
        files.push(file);
    }
    for file in &files {
        let run = chain_run(&fake, file)
            .env("GITHUB_API_URL", gh.api_url())
            .env("GITHUB_REPOSITORY", gh.repository())
            .env("GITHUB_SHA", SHA)
            .env("GITHUB_REF", "refs/heads/main")
            .arg("github-token", GH_TOKEN)
            .arg("github-deployment", "true")
            .arg("commit-status", "true")
            .run();
        assert_eq!(run.code, 0, "{run:?}");
    }
    let environments: Vec<String> = gh
        .deployments()
        .into_iter()
        .map(|d| d.environment)
        .collect();
    assert_eq!(environments, ["baseten-two-chain", "baseten-WordCount"]);
    let statuses = gh.commit_statuses();
    for name in ["two-chain", "WordCount"] {
        let context = format!("truss-push / chain {name}");
        let states: Vec<&str> = statuses
            .iter()
            .filter(|s| s.context == context)
            .map(|s| s.state.as_str())
            .collect();
        assert_eq!(states, ["pending", "success"], "{context}: {statuses:?}");
    }
    assert_eq!(statuses.len(), 4, "no other context: {statuses:?}");
}

// --- GitHub: whose comment, which deployment ---------------------------------

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
const MARKER: &str = "<!-- truss-push: model hello-truss-push -->";

fn gh_with(token: &str) -> fake_baseten::github::FakeGitHub {
    fake_baseten::github::FakeGitHub::builder(token)
        .user("octocat")
        .start_in_background()
        .expect("the fake GitHub starts")
}

fn on_pr<'a>(
    fake: &'a FakeBaseten,
    gh: &fake_baseten::github::FakeGitHub,
    token: &str,
) -> Invocation<'a> {
    Invocation::new(fake)
        .model(example_model())
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_API_URL", gh.api_url())
        .env("GITHUB_REPOSITORY", gh.repository())
        .env("GITHUB_SHA", SHA)
        .env("GITHUB_REF", "refs/pull/7/merge")
        .arg("github-token", token)
        .arg("pr-comment", "true")
}

#[test]
fn another_users_comment_with_our_marker_is_never_edited() {
    let fake = fake(ACTIVE);
    let gh = gh_with(GH_TOKEN);
    let forged = format!("{MARKER}\nall good, merge it");
    let theirs = gh.add_comment(7, &forged);
    for round in 0..2 {
        let run = on_pr(&fake, &gh, GH_TOKEN).run();
        assert_eq!(run.code, 0, "{run:?}");
        assert!(
            run.stdout
                .contains("carries truss-push's marker; it is not this token's"),
            "{run:?}"
        );
        let comments = gh.comments();
        let their = comments.iter().find(|c| c.id == theirs).unwrap();
        assert_eq!((their.body.as_str(), their.edits), (forged.as_str(), 0));
        let ours: Vec<_> = comments.iter().filter(|c| c.id != theirs).collect();
        assert_eq!(ours.len(), 1, "round {round}: {comments:#?}");
        assert_eq!(ours[0].user.login, "github-actions[bot]");
        assert_eq!(ours[0].edits, round, "{comments:#?}");
        assert!(ours[0].body.starts_with(MARKER), "{}", ours[0].body);
    }
    // The job's token may not ask who it is: GitHub refuses, and the
    // Actions bot is who it writes as.
    assert!(gh.endpoints().iter().any(|e| e == "get_authenticated_user"));
}

#[test]
fn a_refused_edit_posts_a_new_comment_and_says_why() {
    let fake = fake(ACTIVE);
    let gh = gh_with(GH_TOKEN);
    let old = gh.add_comment_by(7, &format!("{MARKER}\nold verdict"), "github-actions[bot]");
    gh.fail("update_comment", 403);
    let run = on_pr(&fake, &gh, GH_TOKEN).run();
    assert_eq!(run.code, 0, "{run:?}");
    let comments = gh.comments();
    assert_eq!(comments.len(), 2, "{comments:#?}");
    assert_eq!(comments[0].id, old);
    assert!(comments[0].body.ends_with("old verdict"));
    assert!(
        comments[1].body.contains("deployed and ready in"),
        "{comments:#?}"
    );
    assert!(
        run.stdout.contains(&format!(
            "::warning::GitHub: could not edit comment {old} on pull request #7 (HTTP 403"
        )) && run
            .stdout
            .contains("so a new comment carries this run's verdict"),
        "{run:?}"
    );
}

#[test]
fn a_personal_token_owns_only_what_its_user_wrote() {
    const PAT: &str = "github_pat_canary_20a";
    let fake = fake(ACTIVE);
    let gh = gh_with(PAT);
    let bots = gh.add_comment_by(7, &format!("{MARKER}\nby the bot"), "github-actions[bot]");
    let mine = gh.add_comment_by(7, &format!("{MARKER}\nby me"), "octocat");
    let run = on_pr(&fake, &gh, PAT).run();
    assert_eq!(run.code, 0, "{run:?}");
    let comments = gh.comments();
    assert_eq!(comments.len(), 2, "{comments:#?}");
    let edited = |id| comments.iter().find(|c| c.id == id).unwrap().edits;
    assert_eq!((edited(bots), edited(mine)), (0, 1), "{comments:#?}");
}

#[test]
fn a_production_deploy_marks_the_github_deployment_it_replaced_inactive() {
    let fake = fake(ACTIVE);
    let gh = gh_with(GH_TOKEN);
    // Another tool's production deployment, which is not ours to retire.
    let run = |name: &str, model: &str| {
        let dir = model_dir(&format!("model_name: {model}\n"));
        let run = Invocation::new(&fake)
            .model(dir.path())
            .env("GITHUB_API_URL", gh.api_url())
            .env("GITHUB_REPOSITORY", gh.repository())
            .env("GITHUB_SHA", SHA)
            .env("GITHUB_REF", "refs/heads/main")
            .arg("github-token", GH_TOKEN)
            .arg("github-deployment", "true")
            .arg("environment", "production")
            .arg("deployment-name", name)
            .run();
        assert_eq!(run.code, 0, "{run:?}");
        run
    };
    run("first", "m");
    run("other", "another-model");
    let last = run("second", "m");
    let deps = gh.deployments();
    assert_eq!(deps.len(), 3);
    assert!(deps.iter().all(|d| d.production_environment), "{deps:#?}");
    assert_eq!(deps[0].states(), ["in_progress", "success", "inactive"]);
    assert_eq!(
        deps[1].states(),
        ["in_progress", "success"],
        "another model's"
    );
    assert_eq!(deps[2].states(), ["in_progress", "success"]);
    assert!(
        last.stdout.contains(&format!(
            "GitHub: deployment {} in production is inactive (replaced by {})",
            deps[0].id, deps[2].id
        )),
        "{last:?}"
    );
}
