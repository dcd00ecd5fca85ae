//! Many targets in one repository: `truss-directory` as lists and globs,
//! plan mode (the matrix parsed as GitHub would), change detection on a
//! fixture repository with a commit history, several targets in one step
//! against the fake, and cancellation with three targets in flight.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fake_baseten::FakeBaseten;
use fake_baseten::runner::parse_github_output;
use serde_json::Value;

use crate::harness::*;

/// A git repository built by the test: two models, a model with a
/// `.truss_ignore`, a chain with a local module and a data directory, and
/// files outside every target.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Self {
        let repo = Repo {
            dir: tempfile::tempdir().unwrap(),
        };
        repo.git(&["init", "-q", "-b", "main"]);
        for name in ["alpha", "beta"] {
            repo.write(
                &format!("models/{name}/config.yaml"),
                &format!("model_name: {name}\n"),
            );
            repo.write(
                &format!("models/{name}/model/model.py"),
                &std::fs::read_to_string(example_model().join("model/model.py")).unwrap(),
            );
        }
        repo.write("models/beta/.truss_ignore", "*.md\n");
        repo.write("models/beta/notes.md", "notes\n");
        repo.write("models/README.md", "the models\n");
        repo.write(
            "chains/c1/chain.py",
            "import truss_chains as chains\nfrom helpers import shout\n\nDATA = chains.make_abs_path_here(\"data\")\n\n@chains.mark_entrypoint(\"chain-one\")\nclass Front(chains.ChainletBase):\n    async def run_remote(self, x: str) -> str:\n        return shout(x)\n",
        );
        repo.write(
            "chains/c1/helpers.py",
            "def shout(x):\n    return x.upper()\n",
        );
        repo.write("chains/c1/data/words.txt", "a\n");
        repo.write("chains/c1/unrelated.txt", "not read by the chain\n");
        repo.write("docs/index.md", "docs\n");
        repo.commit("initial");
        repo
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(self.path())
            .env("HOME", self.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// Edits (appends to) `rel` and commits.
    fn change(&self, rel: &str) -> String {
        let p = self.path().join(rel);
        let mut text = std::fs::read_to_string(&p).unwrap_or_default();
        text.push_str("# changed\n");
        self.write(rel, &text);
        self.commit(&format!("change {rel}"))
    }
}

/// What a run in the repository left behind.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
    outputs: BTreeMap<String, String>,
    summary: String,
}

impl std::fmt::Debug for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}\n--- outputs\n{:#?}",
            self.code, self.stdout, self.stderr, self.outputs
        )
    }
}

impl Ran {
    fn out(&self, name: &str) -> &str {
        self.outputs
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no output {name}: {self:?}"))
    }

    /// The matrix parsed as `fromJSON` would, as (target, kind, name).
    fn matrix(&self) -> Vec<(String, String, String)> {
        let m: Value = serde_json::from_str(self.out("matrix")).expect("matrix is JSON");
        m["include"]
            .as_array()
            .expect("include is an array")
            .iter()
            .map(|e| {
                let s = |k: &str| e[k].as_str().unwrap().to_string();
                (s("target"), s("kind"), s("name"))
            })
            .collect()
    }

    fn targets(&self) -> Vec<String> {
        self.matrix().into_iter().map(|(t, _, _)| t).collect()
    }
}

/// Runs the binary in `cwd` with `args`, the GitHub files and `env`.
fn run_in(cwd: &Path, fake: Option<&FakeBaseten>, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let files = tempfile::tempdir().unwrap();
    let gh_out = files.path().join("github_output");
    let summary = files.path().join("summary.md");
    std::fs::write(&gh_out, "").unwrap();
    let mut cmd = truss_push(files.path());
    cmd.env("GITHUB_OUTPUT", &gh_out)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .envs(env.iter().copied())
        .current_dir(cwd);
    if let Some(f) = fake {
        cmd.args([
            format!("--app-url={}", f.graphql_base()),
            format!("--api-url={}", f.rest_base()),
            format!("--inference-url={}", f.inference_template()),
            format!("--s3-endpoint={}", f.s3_endpoint()),
            format!("--baseten-api-key={API_KEY}"),
            "--poll-interval-seconds=0.05".into(),
            "--deployment-name=ci-test".into(),
        ]);
    }
    let out = cmd.args(args).output().unwrap();
    let gh = std::fs::read_to_string(&gh_out).unwrap();
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        outputs: parse_github_output(&gh)
            .unwrap_or_else(|e| panic!("GITHUB_OUTPUT is not valid for the runner: {e:?}\n{gh}"))
            .into_iter()
            .collect(),
        summary: std::fs::read_to_string(&summary).unwrap_or_default(),
    }
}

/// `--plan` in the repository, with no key and no host to talk to.
fn plan(repo: &Repo, dirs: &str, extra: &[&str]) -> Ran {
    let dirs = format!("--truss-directory={dirs}");
    let mut args = vec!["--plan", dirs.as_str()];
    args.extend(extra);
    run_in(repo.path(), None, &args, &[])
}

const ALL: &str = "models/*\nchains/*/chain.py";

fn triple(t: &str, k: &str, n: &str) -> (String, String, String) {
    (t.into(), k.into(), n.into())
}

// --- Targets and plan ---------------------------------------------------------

#[test]
fn plan_prints_the_matrix_github_reads_and_counts_the_targets() {
    let repo = Repo::new();
    let ran = plan(&repo, ALL, &[]);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(
        ran.matrix(),
        vec![
            triple("models/alpha", "model", "alpha"),
            triple("models/beta", "model", "beta"),
            triple("chains/c1/chain.py", "chain", "chain-one"),
        ]
    );
    assert_eq!(ran.out("targets-count"), "3");
    assert_eq!(ran.out("status"), "success");
    // stdout is the matrix alone, on one line, for `$(truss-push --plan)`.
    assert_eq!(ran.stdout.trim(), ran.out("matrix"), "{ran:?}");
    assert!(
        ran.summary.contains("| `models/beta` | model | beta |"),
        "{}",
        ran.summary
    );
    // Outputs only a plan writes are absent from a plain run's outputs.
    assert!(!ran.outputs.contains_key("results"));
}

#[test]
fn a_plan_with_json_keeps_stdout_one_json_document() {
    let repo = Repo::new();
    let ran = plan(&repo, ALL, &["--json"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let doc: serde_json::Value =
        serde_json::from_str(&ran.stdout).expect("stdout is one JSON object");
    assert_eq!(doc["matrix"].as_str(), Some(ran.out("matrix")));
    assert_eq!(doc["targets-count"], "3");
}

#[test]
fn plan_sends_nothing_even_with_a_key_and_hosts() {
    let repo = Repo::new();
    let fake = fake("");
    let ran = run_in(
        repo.path(),
        Some(&fake),
        &["--plan", "--truss-directory=models/alpha,models/beta"],
        &[],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(ran.targets(), ["models/alpha", "models/beta"]);
    assert!(fake.requests().is_empty(), "{:?}", endpoints(&fake));
    let from_env = run_in(
        repo.path(),
        None,
        &[],
        &[
            ("TRUSS_PUSH_PLAN", "true"),
            ("TRUSS_DIRECTORY", "models/alpha"),
        ],
    );
    assert_eq!(from_env.targets(), ["models/alpha"], "{from_env:?}");
}

#[test]
fn a_target_found_twice_counts_once_and_a_folder_stands_for_its_models() {
    let repo = Repo::new();
    let ran = plan(
        &repo,
        "models/alpha, ./models/alpha/\nmodels/*\nmodels",
        &[],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(ran.targets(), ["models/alpha", "models/beta"]);
    assert_eq!(ran.out("targets-count"), "2");
    // `**` reaches the models at any depth.
    let deep = plan(&repo, "**/config.yaml", &[]);
    assert_eq!(deep.code, 2, "a config.yaml file is not a target: {deep:?}");
    let deep = plan(&repo, "**/model", &[]);
    assert_eq!(deep.code, 2, "{deep:?}");
}

#[test]
fn bad_target_lists_are_refused_before_any_request_naming_the_problem() {
    let repo = Repo::new();
    repo.write("models/gamma/config.yaml", "model_name: alpha\n");
    let fake = fake("");
    let cases: &[(&str, &[&str])] = &[
        ("models/nope*", &["\"models/nope*\" matches nothing"]),
        (
            "models/alpha,models/missing",
            &["models/missing cannot be read"],
        ),
        (
            "models/alpha,docs",
            &["docs is neither a model", "nor a directory holding one"],
        ),
        ("models/alpha,docs/index.md", &["not a chain .py file"]),
        (
            "models/alpha,models/gamma",
            &["models/alpha and models/gamma both deploy the model \"alpha\""],
        ),
        ("docs/*.md", &["neither a model directory"]),
    ];
    for (dirs, wants) in cases {
        let arg = format!("--truss-directory={dirs}");
        for extra in [&["--plan"][..], &[][..]] {
            let mut args = vec![arg.as_str()];
            args.extend(extra);
            let ran = run_in(repo.path(), Some(&fake), &args, &[]);
            assert_eq!(ran.code, 2, "{dirs} {extra:?}: {ran:?}");
            assert_eq!(ran.out("status"), "deploy_failed");
            for want in *wants {
                assert!(
                    ran.out("error-message").contains(want),
                    "{dirs}: {want} in {ran:?}"
                );
            }
        }
    }
    let sent: Vec<_> = mutations(&fake).into_iter().map(|e| e.endpoint).collect();
    assert!(sent.is_empty(), "{sent:?}");
    assert!(
        !endpoints(&fake).iter().any(|e| e.starts_with("s3.")),
        "nothing uploaded"
    );
}

#[test]
fn model_name_with_several_targets_is_refused() {
    let repo = Repo::new();
    let ran = plan(&repo, "models/*", &["--model-name=same"]);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(
        ran.out("error-message").contains("names one model"),
        "{ran:?}"
    );
}

// --- Change detection ---------------------------------------------------------

fn changed(repo: &Repo, since: &str) -> Vec<String> {
    let ran = plan(repo, ALL, &[&format!("--changed-since={since}")]);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(ran.out("targets-count"), ran.targets().len().to_string());
    ran.targets()
}

#[test]
fn an_edit_inside_a_model_selects_it_and_one_outside_selects_nothing() {
    let repo = Repo::new();
    repo.change("models/alpha/model/model.py");
    assert_eq!(changed(&repo, "HEAD~1"), ["models/alpha"]);
    repo.change("docs/index.md");
    repo.change("models/README.md");
    assert!(changed(&repo, "HEAD~2").is_empty());
    // Three commits back reaches the model edit again.
    assert_eq!(changed(&repo, "HEAD~3"), ["models/alpha"]);
    let ran = plan(&repo, ALL, &["--changed-since=HEAD~1"]);
    assert_eq!(ran.out("matrix"), r#"{"include":[]}"#);
    assert_eq!(ran.out("targets-count"), "0");
}

#[test]
fn files_the_truss_ignore_leaves_out_change_nothing() {
    let repo = Repo::new();
    repo.change("models/beta/notes.md");
    assert!(
        changed(&repo, "HEAD~1").is_empty(),
        ".truss_ignore has *.md"
    );
    // The default patterns apply where a model has no .truss_ignore.
    repo.write("models/alpha/model/__pycache__/model.cpython-311.pyc", "x");
    repo.commit("bytecode");
    assert!(changed(&repo, "HEAD~1").is_empty());
    repo.change("models/beta/config.yaml");
    assert_eq!(changed(&repo, "HEAD~1"), ["models/beta"]);
}

#[test]
fn a_chain_changes_with_its_imported_module_and_data_but_not_its_neighbours() {
    let repo = Repo::new();
    repo.change("chains/c1/helpers.py");
    assert_eq!(changed(&repo, "HEAD~1"), ["chains/c1/chain.py"]);
    repo.change("chains/c1/data/words.txt");
    assert_eq!(changed(&repo, "HEAD~1"), ["chains/c1/chain.py"]);
    repo.change("chains/c1/unrelated.txt");
    assert!(changed(&repo, "HEAD~1").is_empty());
    repo.change("chains/c1/chain.py");
    assert_eq!(changed(&repo, "HEAD~1"), ["chains/c1/chain.py"]);
}

#[test]
fn a_renamed_model_directory_is_a_changed_target() {
    let repo = Repo::new();
    repo.git(&["mv", "models/alpha", "models/alpha2"]);
    repo.commit("rename");
    assert_eq!(changed(&repo, "HEAD~1"), ["models/alpha2"]);
}

#[test]
fn auto_compares_with_the_pull_request_base() {
    let repo = Repo::new();
    let base = repo.git(&["rev-parse", "HEAD"]);
    repo.change("models/beta/model/model.py");
    repo.change("docs/index.md");
    let event_dir = tempfile::tempdir().unwrap();
    let event = event_dir.path().join("event.json");
    std::fs::write(
        &event,
        format!(r#"{{"pull_request":{{"base":{{"sha":"{base}"}},"head":{{"sha":"x"}}}}}}"#),
    )
    .unwrap();
    let dirs = format!("--truss-directory={ALL}");
    let ran = run_in(
        repo.path(),
        None,
        &["--plan", &dirs, "--changed-since=auto"],
        &[("GITHUB_EVENT_PATH", event.to_str().unwrap())],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(ran.targets(), ["models/beta"]);
    let nowhere = plan(&repo, ALL, &["--changed-since=auto"]);
    assert_eq!(nowhere.code, 2, "{nowhere:?}");
    assert!(
        nowhere
            .out("error-message")
            .contains("set changed-since to a ref")
    );
}

#[test]
fn a_missing_ref_or_a_shallow_clone_is_an_input_error_never_everything() {
    let repo = Repo::new();
    for _ in 0..3 {
        repo.change("models/alpha/model/model.py");
    }
    let ran = plan(&repo, ALL, &["--changed-since=no-such-branch"]);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(!ran.outputs.contains_key("matrix"), "no matrix: {ran:?}");
    assert!(
        ran.out("error-message")
            .contains("\"no-such-branch\" is not in this clone"),
        "{ran:?}"
    );
    let refused = plan(&repo, ALL, &["--changed-since=--output=/tmp/x"]);
    assert_eq!(refused.code, 2, "{refused:?}");

    let shallow = tempfile::tempdir().unwrap();
    let url = format!("file://{}", repo.path().display());
    let dest = shallow.path().join("clone");
    let ok = Command::new("git")
        .args(["clone", "-q", "--depth=1", &url, dest.to_str().unwrap()])
        .env("HOME", shallow.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .unwrap();
    assert!(ok.success());
    let clone = Repo { dir: shallow };
    let ran = run_in(
        &clone.path().join("clone"),
        None,
        &[
            "--plan",
            &format!("--truss-directory={ALL}"),
            "--changed-since=HEAD~2",
        ],
        &[],
    );
    assert_eq!(ran.code, 2, "{ran:?}");
    let msg = ran.out("error-message");
    assert!(msg.contains("shallow (1 commit of history)"), "{msg}");
    assert!(msg.contains("fetch-depth: 0"), "{msg}");
}

// --- Several targets in one step ----------------------------------------------

fn results(outcome: &Outcome) -> Vec<Value> {
    serde_json::from_str::<Value>(outcome.out("results"))
        .expect("results is JSON")
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn several_targets_deploy_in_one_step_and_one_failure_stops_no_other() {
    let fake = fake(
        "deployments:\n  default: [[0, BUILDING], [0.3, ACTIVE]]\n  by_model:\n    broken: [[0, BUILDING], [0.2, BUILD_FAILED]]\n",
    );
    let (_root, dirs) = model_dirs(&["first", "broken", "third"]);
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .env("GITHUB_ACTIONS", "true")
        .run();
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.status(), "deploy_failed");
    assert_eq!(run.out("targets-count"), "3");
    let results = results(&run);
    let got: Vec<(&str, &str)> = results
        .iter()
        .map(|r| {
            (
                r["model-name"].as_str().unwrap(),
                r["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("first", "success"),
            ("broken", "deploy_failed"),
            ("third", "success")
        ]
    );
    for r in &results {
        assert!(!r["deployment-id"].as_str().unwrap().is_empty(), "{r}");
        assert_eq!(r["kind"], "model");
    }
    assert!(
        results[1]["error-message"]
            .as_str()
            .unwrap()
            .contains("BUILD_FAILED")
    );
    assert!(
        run.out("error-message")
            .contains("1 of 3 targets did not succeed"),
        "{run:?}"
    );
    // Each target's log is one group; the summary has a row per target.
    assert_eq!(run.stdout.matches("::group::").count(), 3, "{run:?}");
    assert_eq!(run.stdout.matches("::endgroup::").count(), 3);
    for name in ["first", "broken", "third"] {
        assert!(
            run.summary
                .lines()
                .any(|l| l.contains(&format!("| {name} |"))),
            "{name} row in {}",
            run.summary
        );
    }
    // Each ran its own cleanup decision, as a single run would.
    assert_eq!(run.stdout.matches("==> Cleanup").count(), 3, "{run:?}");
    let shown = format!("{:?}{}{}", run.outputs, run.summary, run.stderr);
    assert!(!shown.contains(API_KEY));
}

#[test]
fn fail_fast_stops_the_others_and_starts_no_more() {
    let fake = fake(
        // The others would build for an hour: only fail-fast can end this
        // run inside the "did not hang" bound below.
        "deployments:\n  default: [[0, BUILDING], [3600, ACTIVE]]\n  by_model:\n    broken: [[0, BUILDING], [0.2, BUILD_FAILED]]\n",
    );
    let (_root, dirs) = model_dirs(&["broken", "slow", "never"]);
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .arg("fail-fast", "true")
        .run();
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.elapsed < Duration::from_secs(60), "{:?}", run.elapsed);
    let results = results(&run);
    assert_eq!(results[0]["status"], "deploy_failed");
    assert!(
        results[1]["error-message"]
            .as_str()
            .unwrap()
            .contains("fail-fast")
    );
    assert!(
        results[2]["error-message"]
            .as_str()
            .unwrap()
            .starts_with("not started")
    );
    let created: Vec<_> = fake
        .deployments()
        .into_iter()
        .map(|d| d.model_name)
        .collect();
    assert!(!created.contains(&"never".to_string()), "{created:?}");
}

#[test]
fn one_target_keeps_the_single_run_outputs_exactly() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let run = Invocation::new(&fake).model(example_model()).run();
    assert_eq!(run.code, 0, "{run:?}");
    for name in ["matrix", "targets-count", "results"] {
        assert!(!run.outputs.contains_key(name), "{name}: {run:?}");
    }
}

#[test]
fn a_signal_stops_and_cleans_up_three_targets_in_flight() {
    // Existing models with a production deployment each, so the new
    // deployments serve nothing and cleanup deactivates them.
    let mut yaml = String::from("teams: [{id: t1, name: ml, default: true}]\nmodels:\n");
    for (i, n) in ["one", "two", "three"].iter().enumerate() {
        yaml.push_str(&format!(
            "  - {{id: oldm{i}, name: {n}, team: ml, deployments: [{{id: oldd{i}, name: v1, status: ACTIVE, environment: production}}]}}\n"
        ));
    }
    yaml.push_str("deployments:\n  default: [[0, BUILDING]]\n");
    let fake = fake(&yaml);
    let (_root, dirs) = model_dirs(&["one", "two", "three"]);
    // All three are waiting on a deployment they created.
    let polled = || {
        let mut paths: Vec<String> = fake
            .requests()
            .into_iter()
            .filter(|e| e.endpoint == "rest.get_deployment")
            .map(|e| e.path)
            .collect();
        paths.sort();
        paths.dedup();
        paths.len() >= 3
    };
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .arg("deployment-name", "cancel-me")
        .arg("poll-interval-seconds", "0.1")
        .arg("max-parallel", "3")
        .run_signalled_when(polled, "INT");
    let took = run.after_signal.expect("signalled");
    // The deployments would build for ever: "did not hang" only; that each
    // was cleaned up is asserted from the fake below.
    assert!(took < Duration::from_secs(60), "stopped in {took:?}");
    assert_eq!(run.code, 130, "{}", run.stdout);
    let outputs = &run.outputs;
    assert_eq!(outputs["status"], "deploy_failed");
    assert!(outputs["error-message"].contains("SIGINT"), "{outputs:?}");
    let results: Vec<Value> = serde_json::from_str(&outputs["results"]).unwrap();
    assert_eq!(results.len(), 3);
    let created: Vec<_> = fake
        .deployments()
        .into_iter()
        .filter(|d| d.name == "cancel-me")
        .collect();
    assert_eq!(created.len(), 3, "{created:?}");
    for d in &created {
        assert!(
            results.iter().any(|r| r["deployment-id"] == d.id.as_str()),
            "{} in {results:?}",
            d.id
        );
    }
    let deactivated: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|e| e.endpoint == "rest.deactivate_deployment")
        .map(|e| e.path)
        .collect();
    for d in &created {
        assert!(
            deactivated.iter().any(|p| p.contains(&d.id)),
            "{} deactivated: {deactivated:?}",
            d.id
        );
    }
}

#[test]
fn the_several_target_inputs_are_checked_with_one_target_too() {
    for (flag, want) in [
        (
            "--max-parallel=0",
            "max-parallel must be between 1 and 16 targets",
        ),
        ("--fail-fast=maybe", "fail-fast must be true or false"),
        ("--plan=perhaps", "plan must be true or false"),
    ] {
        let ran = run_in(
            &example_model(),
            None,
            &[
                "--truss-directory=.",
                "--baseten-api-key=k",
                "--deployment-name=v1",
                flag,
            ],
            &[],
        );
        assert_eq!(ran.code, 2, "{flag}: {ran:?}");
        assert!(ran.out("error-message").contains(want), "{flag}: {ran:?}");
    }
}
