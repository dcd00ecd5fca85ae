//! Where the outputs go when the destination is hostile: a `GITHUB_OUTPUT`
//! that cannot be written, one without a final newline, a dotenv file
//! asked to hold a huge value, a shell file holding command substitutions,
//! and a key echoed into the status history.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fake_baseten::runner::{parse_github_output, parse_gitlab_dotenv};

use crate::harness::*;

const ACTIVE: &str = "deployments:\n  default: [[0, ACTIVE]]\n";

/// Exit code of a run whose deploy succeeded but whose outputs were lost.
const EXIT_OUTPUTS_NOT_WRITTEN: i32 = 6;

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

/// A successful deploy with `GITHUB_OUTPUT` pointing at `target`.
fn deploy_with_github_output(target: &Path) -> Outcome {
    let fake = fake(ACTIVE);
    Invocation::new(&fake)
        .model(example_model())
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", target.to_str().unwrap())
        .run()
}

#[test]
fn an_unwritable_github_output_fails_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
    let cases = [
        (dir.path().to_path_buf(), "a directory"),
        (dir.path().join("missing/out"), "a missing directory"),
        ("/dev/full".into(), "a full device"),
        (fifo, "a FIFO nobody reads"),
        (link, "a link to nothing"),
    ];
    for (target, why) in cases {
        let run = deploy_with_github_output(&target);
        assert_eq!(run.code, EXIT_OUTPUTS_NOT_WRITTEN, "{why}: {run:?}");
        let error = run
            .stdout
            .lines()
            .find(|l| l.starts_with("::error") && l.contains(target.to_str().unwrap()))
            .unwrap_or_else(|| panic!("{why}: an error naming the file: {run:?}"));
        assert!(error.contains("GITHUB_OUTPUT"), "{why}: {error}");
        // The deploy's own truth stays visible.
        assert!(run.stdout.contains("Final status: success"), "{why}");
        assert!(
            run.elapsed < Duration::from_secs(60),
            "{why}: no hang: {:?}",
            run.elapsed
        );
    }
}

#[test]
fn a_failed_deploy_keeps_its_own_exit_code_when_outputs_are_lost() {
    let fake = fake("deployments:\n  default: [[0, BUILDING], [0.2, BUILD_FAILED]]\n");
    let run = Invocation::new(&fake)
        .model(example_model())
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", "/dev/full")
        .run();
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("::error") && l.contains("/dev/full")),
        "{run:?}"
    );
}

#[test]
fn an_unwritable_outputs_file_fails_the_step_and_the_summary_only_warns() {
    // Two runs of one commit: the platform takes the same name again.
    let fake = fake(&format!(
        "{ACTIVE}prepare_model_upload: {{refuse_taken_names: false}}\n"
    ));
    // A full disk shows only when written (a missing directory is an
    // input error before the run: bad_input).
    let full = "/dev/full";
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("output-file", full)
        .run();
    assert_eq!(run.code, EXIT_OUTPUTS_NOT_WRITTEN, "{run:?}");
    assert!(run.stderr.contains(full), "{run:?}");
    // GITHUB_OUTPUT was fine: it tells the deploy's truth, and the error
    // says which file failed and which was written.
    assert_eq!(run.status(), "success");
    assert!(
        run.stderr.lines().any(|l| l.contains("output-file: ")
            && l.contains(full)
            && l.contains("its outputs were written to GITHUB_OUTPUT only: steps that read output-file see none")),
        "{run:?}"
    );
    assert!(!run.stderr.contains("later steps cannot read"), "{run:?}");

    // The step summary is a convenience: losing it is a warning only.
    let run = Invocation::new(&fake)
        .model(example_model())
        .env("GITHUB_STEP_SUMMARY", "/dev/full")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.status(), "success");
    assert!(run.stderr.contains("step summary"), "{run:?}");
}

#[test]
fn github_output_may_be_a_pipe_with_a_reader() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let run = deploy_with_github_output(&fifo);
    assert_eq!(run.code, 0, "{run:?}");
    let text = reader.join().unwrap();
    let parsed = parse_github_output(&text).unwrap();
    assert!(
        parsed.contains(&("status".into(), "success".into())),
        "{text}"
    );
}

#[test]
fn entries_are_never_glued_to_a_last_line_without_newline() {
    let (_dir, path) = file_in_temp_dir("github_output", "earlier=1");
    let run = deploy_with_github_output(&path);
    assert_eq!(run.code, 0, "{run:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    let parsed = parse_github_output(&text).unwrap_or_else(|e| panic!("{e:?}: {text}"));
    assert_eq!(parsed[0], ("earlier".into(), "1".into()));
    assert_eq!(parsed[1].0, "deployment-id");
    assert!(parsed.contains(&("status".into(), "success".into())));
}

#[test]
fn a_10000_character_model_name_still_gives_a_valid_dotenv_file() {
    // Such a name is refused (names are capped at 256 characters), and the
    // outputs of the refused run still carry it: the file must stay valid.
    let fake = fake(ACTIVE);
    let name = "m".repeat(10_000);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("model-name", &name)
        .outputs_file("outputs.env")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(fake.requests().is_empty());
    let text = run
        .outputs_file
        .clone()
        .expect("the dotenv file is written");
    assert!(text.len() < 5 * 1024, "{}", text.len());
    let vars: std::collections::BTreeMap<_, _> = parse_gitlab_dotenv(text.as_bytes())
        .expect("GitLab accepts the file")
        .into_iter()
        .collect();
    assert_eq!(vars.len(), 19, "{vars:?}");
    assert_eq!(vars["TRUSS_PUSH_STATUS"], "deploy_failed");
    assert!(
        vars["TRUSS_PUSH_ERROR_MESSAGE"].contains("at most 256 characters"),
        "{vars:?}"
    );
    let kept = &vars["TRUSS_PUSH_MODEL_NAME"];
    let stem = kept.strip_suffix('…').expect("a cut value ends with …");
    assert!(stem.len() > 1000, "{}", stem.len());
    assert!(name.starts_with(stem));
}

#[test]
fn the_shell_outputs_file_is_safe_to_source() {
    let marks = tempfile::tempdir().unwrap();
    let (a, b) = (marks.path().join("a"), marks.path().join("b"));
    let hostile = format!(
        "$(touch {}) `touch {}` it's \"quoted\" \\ $HOME\nline two '\\''",
        a.display(),
        b.display()
    );
    let scenario = format!(
        "deployments:\n  default: [[0, ACTIVE]]\npredict:\n  response: {}\n",
        serde_json::to_string(&hostile).unwrap()
    );
    let fake = fake(&scenario);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("output-format", "shell")
        .outputs_file("outputs.sh")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    let text = run.outputs_file.clone().expect("the shell file is written");
    let file = marks.path().join("outputs.sh");
    std::fs::write(&file, &text).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#". "$1" && printf '%s' "$TRUSS_PUSH_PREDICT_RESPONSE""#)
        .arg("sh")
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}\n{text}");
    assert!(
        !a.exists() && !b.exists(),
        "sourcing ran a command:\n{text}"
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        run.out("predict-response")
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#". "$1" && printf '%s|%s' "$TRUSS_PUSH_STATUS" "$TRUSS_PUSH_DEPLOYMENT_ID""#)
        .arg("sh")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("success|{}", run.out("deployment-id"))
    );
}

#[test]
fn the_key_echoed_by_the_platform_stays_out_of_the_summary() {
    // The platform answers with a status that quotes the key: it reaches
    // the status history and the notes of the summary, not only the outputs.
    let fake = fake(&format!(
        "teams: [{{id: t1, name: ml, default: true}}]\nmodels:\n  - {{id: oldmodel, name: hello-truss-push, team: ml, environments: [production, {API_KEY}], deployments: [{{id: olddep, name: v1, status: ACTIVE, environment: production}}]}}\ndeployments:\n  default: [[0, BUILDING], [0.2, {API_KEY}], [0.4, ACTIVE]]\n"
    ));
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("environment", API_KEY)
        .outputs_file("outputs.json")
        .run();
    assert!(!run.summary.is_empty(), "{run:?}");
    assert!(
        !run.everything().contains(API_KEY),
        "the key leaked:\n{}\n{run:?}",
        run.summary
    );
    assert!(run.summary.contains("***"), "{}", run.summary);
    // That status is no published one: served on purpose, claimed here.
    assert!(
        fake.take_violations()
            .iter()
            .all(|v| v.what.contains("'/status'"))
    );
}

/// A step summary that cannot hold the page: a FIFO nobody reads, a
/// directory, a symbolic link to nothing. Each is a warning naming the file
/// (the summary is a convenience), and the run still writes its outputs and
/// cleans up.
#[test]
fn a_step_summary_that_cannot_be_written_is_named_and_the_run_still_ends_whole() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("summary-fifo");
    mkfifo(&fifo);
    let link = dir.path().join("summary-link");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
    // A failing evidence case adds a section to the page: it is written
    // with the rest, through the same bounded sink, not after it.
    let cases_file = dir.path().join("cases.yaml");
    std::fs::write(
        &cases_file,
        "- {name: a, payload: {}, contains: never-in-any-answer}\n",
    )
    .unwrap();
    let cases = [
        (fifo.clone(), "a FIFO nobody reads", false),
        (fifo, "a FIFO nobody reads, with evidence", true),
        (dir.path().to_path_buf(), "a directory", false),
        (link, "a link to nothing", false),
    ];
    for (target, why, evidence) in cases {
        let fake = fake(ACTIVE);
        let mut inv = Invocation::new(&fake)
            .model(example_model())
            .arg("cleanup", "true")
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", target.to_str().unwrap());
        if evidence {
            inv = inv.arg("predict-cases", cases_file.to_str().unwrap());
        }
        let run = inv.run();
        let (code, status) = if evidence {
            (4, "predict_failed")
        } else {
            (0, "success")
        };
        assert_eq!(run.code, code, "{why}: {run:?}");
        assert_eq!(run.status(), status, "{why}: GITHUB_OUTPUT written");
        let warning = run
            .stdout
            .lines()
            .find(|l| l.starts_with("::warning") && l.contains(target.to_str().unwrap()))
            .unwrap_or_else(|| panic!("{why}: a warning naming the file: {run:?}"));
        assert!(warning.contains("step summary"), "{why}: {warning}");
        let said = warning.matches("did not finish").count();
        assert_eq!(
            said,
            usize::from(why.contains("FIFO")),
            "{why}: once: {warning}"
        );
        assert!(
            endpoints(&fake).contains(&"rest.deactivate_deployment".to_string()),
            "{why}: cleanup done: {:?}",
            endpoints(&fake)
        );
        assert!(
            run.elapsed < Duration::from_secs(60),
            "{why}: did not hang: {:?}",
            run.elapsed
        );
    }
    assert!(
        !dir.path().join("nowhere").exists(),
        "the link made no file"
    );
}

/// Evidence whose section alone would pass GitHub's 1 MiB: it draws from
/// the page's one budget, is cut at a line with the marker, and the page
/// keeps both verdicts (the run's and the evidence's) and stays under the
/// limit.
#[test]
fn an_evidence_section_past_1_mib_is_cut_with_a_marker_and_the_verdicts_stay() {
    let fake = fake(ACTIVE);
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases.yaml");
    let long = "n".repeat(8000);
    let text: String = (0..150)
        .map(|i| {
            format!("- {{name: case-{i}-{long}, payload: {{}}, contains: never-in-any-answer}}\n")
        })
        .collect();
    std::fs::write(&cases, text).unwrap();
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("predict-cases", cases.to_str().unwrap())
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let page = &run.summary;
    assert!(page.len() < 1024 * 1024, "{} bytes", page.len());
    assert!(
        page.starts_with("## ❌ Truss Deploy (Model)"),
        "{}",
        &page[..200.min(page.len())]
    );
    assert!(page.contains("| **Status** | `predict_failed` |"));
    assert!(
        page.contains("### ❌ Evidence failed (deployment)"),
        "the evidence's verdict"
    );
    assert!(
        page.ends_with("_Summary truncated to fit GitHub's 1 MiB limit._\n"),
        "{}",
        &page[page.len().saturating_sub(300)..]
    );
    // Cut at a line, with nothing left open: as many fences close as open.
    let fences = page.lines().filter(|l| l.starts_with("```")).count();
    assert_eq!(fences % 2, 0, "an open fence would swallow the marker");
}
