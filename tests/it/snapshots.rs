//! Snapshots of what the user reads: the log of a success, a deploy failure
//! and a timeout, the step summary, and the outputs file in both formats.
//! The fake runs on a manual clock the test steps, so every run sees the same
//! statuses in the same order; filters take out what changes between runs
//! and machines (times, durations, rates, ids, ports, temp paths).
//!
//! `shown` and `stable` are the snapshot support the fault and gated tests
//! use too.
//!
//! A changed snapshot fails the test. To accept a deliberate change, run
//! `INSTA_UPDATE=always cargo test --test it snapshots` (or the module whose
//! snapshots changed) and review the diff of `tests/it/snapshots/`.

use fake_baseten::FakeBaseten;

use crate::harness::*;

/// A model that builds, deploys and becomes active, one step per poll.
const BUILDS_THEN_ACTIVE: &str =
    "manual_clock: true\ndeployments:\n  default: [[0, BUILDING], [1, DEPLOYING], [2, ACTIVE]]\n";
/// Each status read once, then the next: BUILDING, DEPLOYING, ACTIVE.
const STEP_TO_ACTIVE: &[(&str, f64)] =
    &[("rest.get_deployment", 1.0), ("rest.get_deployment", 2.0)];

fn on_github(fake: &FakeBaseten) -> Invocation<'_> {
    Invocation::new(fake)
        .model(example_model())
        .env("GITHUB_ACTIONS", "true")
}

/// Exit code, stdout and stderr as one text.
pub(crate) fn shown(run: &Outcome) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        run.code, run.stdout, run.stderr
    )
}

/// Snapshots what the user reads of a run with `stable`'s filters: its log
/// (exit code, stdout, stderr) as `<name>_log` and its step summary as
/// `<name>_summary`, in the calling module's snapshot files.
#[macro_export]
macro_rules! assert_run_snapshots {
    ($name:expr, $run:expr) => {{
        let run: &$crate::harness::Outcome = $run;
        let name: &str = $name;
        let (log, summary) = ($crate::snapshots::shown(run), run.summary.as_str());
        $crate::snapshots::stable(run, || {
            insta::assert_snapshot!(format!("{name}_log"), log);
            insta::assert_snapshot!(format!("{name}_summary"), summary);
        });
    }};
}

/// Snapshots a run's step summary alone as `<name>_summary` (in this
/// module's snapshot files, whichever test calls it): the pages
/// `first_screen` checks and `scripts/render-summaries` draws.
/// The ids stay: these scenarios name their deployments (and the fake's
/// generated ids are the same on every run of one scenario), and the
/// renders show real ids, not placeholders.
/// `renamed`: ids the fake made in an order that differs between runs
/// (targets deployed side by side), each with the name shown instead.
pub(crate) fn page_snapshot(name: &str, run: &Outcome, renamed: &[(String, String)]) {
    filtered(run, false, renamed, || {
        insta::assert_snapshot!(format!("{name}_summary"), run.summary.as_str());
    });
}

/// Runs `check` with filters for everything that differs between runs of
/// the same scenario.
pub(crate) fn stable(run: &Outcome, check: impl FnOnce()) {
    filtered(run, true, &[], check);
}

/// `stable`'s filters; the run's own ids replaced by name when `ids`.
fn filtered(run: &Outcome, ids: bool, renamed: &[(String, String)], check: impl FnOnce()) {
    let mut settings = insta::Settings::clone_current();
    for (id, name) in renamed {
        settings.add_filter(&regex_escape(id), name.as_str());
    }
    // Ids first: they are replaced by name wherever they appear (URLs too).
    let outputs: &[(&str, &str)] = match ids {
        true => &[
            ("deployment-id", "[DEPLOYMENT_ID]"),
            ("model-id", "[MODEL_ID]"),
        ],
        false => &[],
    };
    for &(output, name) in outputs {
        let id = run.out(output);
        if !id.is_empty() {
            settings.add_filter(&regex_escape(id), name);
        }
    }
    settings.add_filter(&regex_escape(API_KEY), "[API_KEY]");
    settings.add_filter(r"127\.0\.0\.1:\d+", "127.0.0.1:[PORT]");
    settings.add_filter(r"/tmp/\.tmp[0-9A-Za-z]+", "[TMP]");
    settings.add_filter(&regex_escape(env!("CARGO_MANIFEST_DIR")), "[REPO]");
    // Calendar times (the summary's history) and clock times in ISO form.
    settings.add_filter(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?Z?", "[UTC]");
    // Measured durations and rates; configured ones ("timeout: 45m00s",
    // "not ready after 1.0s") stay, since they come from the inputs.
    let duration = r"(\d+h)?(\d+m)?\d+(\.\d+)?s";
    settings.add_filter(
        &format!(r"after {duration}, {duration} left"),
        "after [ELAPSED], [LEFT] left",
    );
    settings.add_filter(&format!(r"Ready after {duration}"), "Ready after [ELAPSED]");
    // Retry delays carry jitter.
    settings.add_filter(r"retrying in \d+(\.\d+)? ?m?s\b", "retrying in [DELAY]");
    settings.add_filter(&format!(r"\bin {duration}\b"), "in [DURATION]");
    settings.add_filter(&format!(r"\| {duration} \|"), "| [DURATION] |");
    settings.add_filter(r"\(\d+(\.\d+)? [KMG]?i?B/s\)", "([RATE])");
    settings.add_filter(
        r#"(DEPLOY_TIME_SECONDS=|"deploy-time-seconds": ")\d+(\.\d+)?"#,
        "${1}[SECONDS]",
    );
    settings.bind(check);
}

/// The characters regex syntax gives a meaning, escaped.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[test]
fn a_success() {
    let fake = fake(BUILDS_THEN_ACTIVE);
    let run = on_github(&fake)
        .outputs_file("outputs.json")
        .run_stepping_clock(STEP_TO_ACTIVE);
    assert_eq!(run.status(), "success", "{run:?}");
    stable(&run, || {
        insta::assert_snapshot!("success_stdout", shown(&run));
        insta::assert_snapshot!("success_summary", run.summary);
        insta::assert_snapshot!("success_outputs_json", run.outputs_file.clone().unwrap());
    });
}

#[test]
fn a_success_as_dotenv() {
    let fake = fake(BUILDS_THEN_ACTIVE);
    let run = on_github(&fake)
        .outputs_file("outputs.env")
        .run_stepping_clock(STEP_TO_ACTIVE);
    assert_eq!(run.status(), "success", "{run:?}");
    stable(&run, || {
        insta::assert_snapshot!("success_outputs_dotenv", run.outputs_file.clone().unwrap());
    });
}

#[test]
fn a_deploy_failure() {
    let fake =
        fake("manual_clock: true\ndeployments:\n  default: [[0, BUILDING], [1, BUILD_FAILED]]\n");
    let run = on_github(&fake)
        .outputs_file("outputs.env")
        .run_stepping_clock(&[("rest.get_deployment", 1.0)]);
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    stable(&run, || {
        insta::assert_snapshot!("deploy_failure_stdout", shown(&run));
        insta::assert_snapshot!("deploy_failure_summary", run.summary);
        insta::assert_snapshot!(
            "deploy_failure_outputs_dotenv",
            run.outputs_file.clone().unwrap()
        );
    });
}

#[test]
fn a_timeout() {
    // The clock never moves: BUILDING until the binary's own deadline.
    let fake = fake("manual_clock: true\ndeployments:\n  default: [[0, BUILDING]]\n");
    let run = on_github(&fake)
        .arg("wait-timeout-seconds", "1")
        .run_stepping_clock(&[]);
    assert_eq!(run.status(), "deploy_timeout", "{run:?}");
    stable(&run, || {
        insta::assert_snapshot!("timeout_stdout", shown(&run));
        insta::assert_snapshot!("timeout_summary", run.summary);
    });
}
