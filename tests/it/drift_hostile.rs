//! `command: drift` as a hostile CI and a broken platform would run it:
//! several targets with mixed verdicts (which exit wins), answers of odd
//! shapes, and the outputs, `--json` and the output file saying one thing.

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::Fault;
use serde_json::Value;

use crate::harness::*;

fn platform(extra: &str) -> FakeBaseten {
    fake(&format!(
        "name: drift\nmanual_clock: true\ndeactivation_seconds: 0\ndeployments:\n  default: [[0, ACTIVE]]\n{extra}"
    ))
}

fn deploy(fake: &FakeBaseten, dir: &std::path::Path) {
    let run = Invocation::new(fake)
        .arg("truss-directory", dir.to_str().unwrap())
        .arg("environment", "production")
        .arg("deployment-name", "first")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
}

fn drift<'a>(fake: &'a FakeBaseten, targets: &str) -> Invocation<'a> {
    let mut inv = Invocation::new(fake);
    inv.args.retain(|a| !a.starts_with("--deployment-name"));
    inv.arg("command", "drift")
        .arg("truss-directory", targets)
        .arg("environment", "production")
}

fn states(run: &Outcome) -> Vec<String> {
    let v: Value = serde_json::from_str(run.out("drift-report")).expect("drift-report is JSON");
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap().to_string())
        .collect()
}

/// One target drifted (never deployed) and one unknown (its audit log
/// answers 500): a failed read wins over drift — exit 1, `deploy_failed`
/// — and `drift` still says that one drifted.
#[test]
fn one_unknown_and_one_drifted_exit_1() {
    let fake = platform("");
    let (_root, dirs) = model_dirs(&["alpha", "beta"]);
    deploy(&fake, &dirs[1]);
    fake.add_fault(Fault {
        times: 0,
        retry_after: Some(0),
        ..Fault::status("rest.get_audit_logs", 500)
    });
    let run = drift(&fake, &target_list(&dirs)).run();
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let mut s = states(&run);
    s.sort();
    assert_eq!(s, ["not-deployed", "unknown"], "{run:?}");
    assert_eq!(run.out("drift"), "true", "{run:?}");
}

/// What serves carries `labels` that are not an object (a string): the
/// answer is not the published one, so the verdict is not guessed —
/// never `in-sync`.
#[test]
fn labels_that_are_not_an_object_are_never_in_sync() {
    let fake = platform(
        "answer_edits:\n  - {endpoint: rest.list_environments, pointer: /environments/0/current_deployment/labels, value: \"truss_push_content_hash\"}\n  - {endpoint: rest.get_environment, pointer: /current_deployment/labels, value: \"truss_push_content_hash\"}\n",
    );
    let dir = model_dir("model_name: alpha\n");
    deploy(&fake, dir.path());
    let run = drift(&fake, dir.path().to_str().unwrap()).run();
    let _ = fake.take_violations();
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(states(&run), ["unknown"], "{run:?}");
}

/// drift, `--json` and an output file: one story.
#[test]
fn drift_outputs_json_and_the_output_file_agree() {
    let fake = platform("");
    let (_root, dirs) = model_dirs(&["alpha", "beta"]);
    deploy(&fake, &dirs[1]);
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("outputs.json");
    let run = drift(&fake, &target_list(&dirs))
        .arg("output-file", file.to_str().unwrap())
        .run();
    assert_eq!(run.code, 7, "{run:?}");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let text = serde_json::to_string(&written).unwrap();
    assert!(text.contains("drift"), "{text}");
    for key in ["drift", "drift-report", "status"] {
        let got = written
            .pointer(&format!("/outputs/{key}"))
            .or_else(|| written.get(key))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{key} in {text}"));
        assert_eq!(got, run.out(key), "{key}");
    }
}
