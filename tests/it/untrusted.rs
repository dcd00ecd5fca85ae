//! What the run is handed but did not write: the platform's answers (ids,
//! names, error text) and the user's files as another user sees them.
//! Each is input, checked before it is used.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::harness::*;

const NEW: &str = "teams: [{id: t1, name: ml, default: true}]\ndeployments:\n  default: [[0, BUILDING], [0.2, ACTIVE]]\n";

/// The user a root test run drops to: `nobody`.
const OTHER_UID: u32 = 65534;

fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        == Some("0")
}

/// Whether `path` can be read by `uid` (or by this process when `None`),
/// asked of a real `cat` run as that user. Panics, loudly, when the test
/// cannot run anything as that user: a test that cannot make a file
/// unreadable must fail, never pass.
fn readable_by(uid: Option<u32>, path: &Path) -> bool {
    let mut cat = Command::new("cat");
    cat.arg(path).stdout(Stdio::null()).stderr(Stdio::null());
    if let Some(uid) = uid {
        cat.uid(uid).gid(uid);
    }
    cat.status()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `cat` as uid {uid:?} ({e}): this test needs root (to drop to another user) or a non-root user, so that a mode-000 file is unreadable"
            )
        })
        .success()
}

/// A file the running user cannot read is an input error before any
/// request (exit 2), naming the file and the permission; it used to pass
/// the walk and fail mid-upload as "changed while it was uploaded". Root
/// reads a mode-000 file, so as root the binary runs as `nobody`.
#[test]
fn an_unreadable_file_is_an_input_error_before_any_request() {
    let truss = model_dir("model_name: m\n");
    let user = is_root().then_some(OTHER_UID);
    let set = |p: &Path, mode| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    set(truss.path(), 0o755);
    let secret = truss.path().join("model/weights.bin");
    std::fs::write(&secret, b"not for this user").unwrap();
    set(&secret, 0o000);
    assert!(
        readable_by(user, &truss.path().join("model/model.py")),
        "the rest of the truss must be readable to the run's user"
    );
    assert!(
        !readable_by(user, &secret),
        "the run's user (uid {user:?}) can read a mode-000 file: it has CAP_DAC_OVERRIDE, so this test cannot make a file unreadable; run it as root (it drops to uid {OTHER_UID}) or as an ordinary user"
    );

    let fake = fake(NEW);
    let mut run = Invocation::new(&fake).model(truss.path());
    if let Some(uid) = user {
        run = run.run_as(uid);
    }
    let run = run.run();

    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let msg = run.out("error-message");
    assert!(
        msg.contains("model/weights.bin")
            && msg.contains("permission denied")
            && msg.contains("mode 0000"),
        "{msg}"
    );
    assert!(!msg.contains("changed while"), "{msg}");
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());
}

/// A value a shell would run, were it pasted into a script.
const HOSTILE_ID: &str = "abc$(touch x)";

/// A scenario whose answers carry `HOSTILE_ID` (or `hostile`) at the
/// given `(endpoint, JSON pointer)` places, as a proxy rewriting answers
/// in transit would; the platform's state keeps the real ids.
fn rewritten(edits: &[(&str, &str)], hostile: &str) -> String {
    let mut s = format!("{NEW}answer_edits:\n");
    for (endpoint, pointer) in edits {
        s.push_str(&format!(
            "  - {{endpoint: {endpoint}, pointer: {pointer}, value: {}}}\n",
            serde_json::to_string(hostile).unwrap()
        ));
    }
    s
}

/// Nothing the user sees carries the hostile value: not the outputs, the
/// log, the summary or the outputs file; the escaped form only.
#[track_caller]
fn carries_nothing_of(run: &Outcome, hostile: &str) {
    let seen = run.everything();
    for part in ["$(", "touch x", hostile] {
        assert!(!seen.contains(part), "{part:?} reached the user:\n{seen}");
    }
}

/// The create's answer names a deployment id no shell should see: the
/// answer came, so the create may have been applied; the run looks up
/// what exists (by name, as after a lost answer), adopts the deployment
/// the read shows and reports that one. The rewritten id is shown nowhere.
#[test]
fn a_hostile_id_in_the_create_answer_is_looked_up_never_output() {
    let fake = fake(&rewritten(
        &[(
            "graphql.create_model_from_truss",
            "/data/create_model_from_truss/model_version/id",
        )],
        HOSTILE_ID,
    ));
    let run = Invocation::new(&fake).model(example_model()).run();
    carries_nothing_of(&run, HOSTILE_ID);
    assert!(
        run.everything()
            .contains(r"abc\u{24}\u{28}touch\u{20}x\u{29}"),
        "the refusal is said, escaped: {run:?}"
    );
    let real = fake.deployments();
    assert_eq!(real.len(), 1, "one create, no second: {real:?}");
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("deployment-id"), real[0].id, "{run:?}");
    assert!(
        endpoints(&fake).contains(&"rest.list_deployments".to_string()),
        "{:?}",
        endpoints(&fake)
    );
}

/// Every answer naming the deployment is rewritten (the create's and the
/// list read after it, a line break in it this time): a platform error,
/// exit 1, the value shown escaped, no output carrying it, and no
/// deployment adopted.
#[test]
fn a_hostile_id_read_back_too_is_a_platform_error_no_output_carries() {
    let hostile = "abc\n$(touch x)";
    let fake = fake(&rewritten(
        &[
            (
                "graphql.create_model_from_truss",
                "/data/create_model_from_truss/model_version/id",
            ),
            ("rest.list_deployments", "/deployments/0/id"),
        ],
        hostile,
    ));
    let run = Invocation::new(&fake).model(example_model()).run();
    carries_nothing_of(&run, hostile);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert_eq!(run.out("deployment-id"), "", "{run:?}");
    let msg = run.out("error-message");
    assert!(
        msg.contains(r"abc\u{a}\u{24}\u{28}touch\u{20}x\u{29}"),
        "{msg}"
    );
}

/// A status read that names another id: the wait ends on the platform's
/// error at once (no retries of a "garbled" answer), and only the id the
/// create answered is reported.
#[test]
fn a_hostile_id_in_a_status_read_ends_the_wait_as_a_platform_error() {
    let fake = fake(&rewritten(&[("rest.get_deployment", "/id")], HOSTILE_ID));
    let run = Invocation::new(&fake).model(example_model()).run();
    carries_nothing_of(&run, HOSTILE_ID);
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let real = fake.deployments();
    assert_eq!(run.out("deployment-id"), real[0].id, "{run:?}");
    let polls = endpoints(&fake)
        .iter()
        .filter(|e| *e == "rest.get_deployment")
        .count();
    // The wait's one read and cleanup's check (which fails closed: the
    // deployment is left running, said so); a "garbled" answer would have
    // been read five times in a row first.
    assert!(polls <= 2, "{:?}\n{run:?}", endpoints(&fake));
    assert!(
        run.stderr.contains("not deactivating deployment"),
        "{run:?}"
    );
    assert!(
        run.out("error-message").contains(r"abc\u{24}\u{28}touch"),
        "{run:?}"
    );
}

/// `page` without its fenced blocks (whose text is shown literally).
fn outside_fences(page: &str) -> String {
    let mut fenced = false;
    let mut out = String::new();
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Text the platform writes reaches the step summary as text: a link, an
/// image or an autolink in its error message renders as its characters,
/// not live. Every status read is refused with that message: the run
/// fails, and cleanup's check (refused too) leaves the deployment, saying
/// why in the summary's notes, the message quoted.
#[test]
fn markdown_in_the_platforms_text_is_shown_not_rendered() {
    let message = "[approve](https://evil.example/ok) ![pixel](https://evil.example/p.png) <https://evil.example/a> [ref][1]";
    let fake = fake(&format!(
        "{NEW}faults:\n  - {{endpoint: rest.get_deployment, status: 400, body: {{message: {}}}}}\n",
        serde_json::to_string(message).unwrap()
    ));
    let run = Invocation::new(&fake).model(example_model()).run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let page = outside_fences(&run.summary);
    let note = page
        .lines()
        .find(|l| l.starts_with("- not deactivating"))
        .unwrap_or_else(|| panic!("no note quoting the platform:\n{}", run.summary));
    assert!(
        note.contains(r"\[approve\](https://evil.example/ok) !\[pixel\](https://evil.example/p.png) &lt;https://evil.example/a&gt; \[ref\]\[1\]"),
        "the message is shown, escaped: {note}"
    );
    for live in ["[approve](", "[pixel](", "<https://", "[ref]"] {
        let unescaped = page
            .match_indices(live)
            .any(|(at, _)| !page[..at].ends_with('\\'));
        assert!(!unescaped, "{live} renders live:\n{page}");
    }
}

/// A `secrets` entry aliasing anchors written elsewhere, in the forms
/// whose source does not hold the parsed value (a folded block, an
/// escaped double-quoted scalar), on both sides of the diff: the summary
/// shows the anchors' lines hidden, the names, the real change, and no
/// line of any value.
#[test]
fn aliased_secrets_written_folded_or_escaped_stay_out_of_the_diff() {
    let fake = fake(
        "name: aliased-secrets\nmanual_clock: true\ndeactivation_seconds: 0\ndeployments:\n  default: [[0, ACTIVE]]\n",
    );
    let config = |accelerator: &str, n: u8| {
        format!(
            "model_name: aliased\nenvironment_variables:\n  PEM: &pem >-\n    folded-canary-line-one-{n}\n    folded-canary-line-two-{n}\n  TOKEN: &tok \"\\x65scaped-canary-{n}\\\n    -continued\"\nsecrets:\n  tls_key: *pem\n  hf_token: *tok\nresources:\n  accelerator: {accelerator}\n"
        )
    };
    let dir = model_dir(&config("A10G", 1));
    let push = |name: &str| {
        Invocation::new(&fake)
            .model(dir.path())
            .arg("environment", "production")
            .arg("deployment-name", name)
            .run()
    };
    assert_eq!(push("first").status(), "success");
    std::fs::write(dir.path().join("config.yaml"), config("H100", 2)).unwrap();
    let run = push("second");
    assert_eq!(run.status(), "success", "{run:?}");
    assert_in_order(
        &run.summary,
        &[
            "### What changes in production",
            "      ***\n  resources:\n-   accelerator: A10G\n+   accelerator: H100",
            "Secrets (names only; values are never shown): `tls_key`, `hf_token`; the `secrets` entry's text differs.",
        ],
    );
    for canary in [
        "folded-canary",
        "scaped-canary",
        "continued",
        "line-one",
        "line-two",
    ] {
        assert!(
            !run.everything().contains(canary),
            "{canary} shown:\n{}",
            run.summary
        );
    }
}

/// A status is reported as the platform wrote it (`last-status`, the
/// summary): one that is not a status word (the published API lists
/// every status, all such words) is the platform's error too, and
/// neither the output nor the log carries it.
#[test]
fn a_hostile_status_is_a_platform_error_not_an_output() {
    let hostile = "ACTIVE$(touch x)";
    let fake = fake(&rewritten(&[("rest.get_deployment", "/status")], hostile));
    let run = Invocation::new(&fake).model(example_model()).run();
    carries_nothing_of(&run, hostile);
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert_eq!(run.out("last-status"), "", "{run:?}");
    assert!(
        run.out("error-message")
            .contains(r#"a status truss-push will not use, "ACTIVE\u{24}\u{28}touch"#),
        "{run:?}"
    ); // The published API lists every status: the fake flags the edit.
    assert!(!fake.take_violations().is_empty());
}
