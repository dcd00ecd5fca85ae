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
        run = run.as_user(uid);
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
