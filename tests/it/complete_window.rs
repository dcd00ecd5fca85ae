//! A stop while the archive's upload ends: never an abort while S3 may be
//! completing the upload. Once the CompleteMultipartUpload is sent, the
//! run waits for its answer (within the signal's seconds, or cleanup's
//! minute when the budget ran out), then reads the object back, or aborts
//! and lists until no part is left; with no answer it says the archive
//! "may be stored at" its key, never "nothing is left". A stop while a part
//! is in flight aborts and lists until S3 holds none.

use fake_baseten::FakeBaseten;
use fake_baseten::s3::{AbortWhileCompleting, Refusal, S3Event};

use crate::harness::*;
use crate::stream::{MIB, NEW, all_output, deploy, ops, truss_with_victim};

/// What the run prints once it waits for the completion's answer.
const WAITING: &str = "waiting for its answer";

/// The S3 operations that end an upload, in the order S3 answered them.
fn endings(events: &[S3Event]) -> Vec<(&str, u16)> {
    events
        .iter()
        .map(|e| (e.operation.as_str(), e.status))
        .filter(|(o, _)| {
            ["complete", "abort", "list_parts", "head_object"]
                .iter()
                .any(|w| o.contains(w))
        })
        .collect()
}

/// `s3://bucket/key` of the run's upload.
fn location(fake: &FakeBaseten) -> String {
    let events = fake.s3().events();
    let create = ops(&events, "s3.create_multipart_upload");
    format!("s3://{}/{}", fake.s3().bucket(), create[0].key)
}

/// A signal's run: exit 130, `deploy_failed`, the signal named, nothing
/// created.
#[track_caller]
fn cancelled_by_sigterm(fake: &FakeBaseten, run: &Outcome) {
    assert_eq!(run.code, 130, "{run:?}");
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(
        run.outputs["error-message"].contains("SIGTERM"),
        "{:?}",
        run.outputs
    );
    assert_eq!(run.outputs["deployment-id"], "");
    assert!(mutations(fake).is_empty(), "nothing was created");
}

/// The run said the archive is stored whole at its key, from a read.
#[track_caller]
fn says_stored(fake: &FakeBaseten, run: &Outcome) {
    let [(_, size)] = fake.s3().objects().try_into().expect("one object");
    let output = all_output(run);
    assert!(
        output.contains(&format!(
            "The archive was stored whole at {} ({:.1} MiB, read back)",
            location(fake),
            size as f64 / MIB as f64
        )) && output.contains("nothing was created from it"),
        "{output}"
    );
    assert!(
        run.summary.contains("The archive was stored whole"),
        "{run:?}"
    );
    assert!(!output.contains("nothing is left"), "{output}");
}

#[test]
fn sigterm_during_the_completion_waits_for_its_answer_and_reads_the_archive_stored() {
    for refusal in [
        AbortWhileCompleting::NoSuchUpload,
        AbortWhileCompleting::AccessDenied,
    ] {
        let fake = fake(NEW);
        let truss = truss_with_victim();
        fake.s3().abort_while_completing(refusal);
        fake.s3().hold_completion();
        let held = || fake.s3().held() == 1;
        // Released only once the run, signalled, says it waits.
        let run = deploy(&fake, truss.path())
            .run_signalled_then(held, "TERM", WAITING, |_| fake.s3().release_held());
        cancelled_by_sigterm(&fake, &run);
        let events = fake.s3().events();
        assert_eq!(
            endings(&events),
            [
                ("s3.complete_multipart_upload", 200),
                ("s3.head_object", 200)
            ],
            "no abort while S3 completed it ({refusal:?}): {events:#?}"
        );
        says_stored(&fake, &run);
    }
}

#[test]
fn a_budget_spent_during_the_completion_waits_for_its_answer_too() {
    let fake = fake(NEW);
    let truss = truss_with_victim();
    fake.s3().hold_completion();
    // The deploy's budget ends while the completion is held; cleanup's
    // minute then waits for it, released once the run says so.
    let run = deploy(&fake, truss.path())
        .arg("wait-timeout-seconds", "10")
        .run_acting_when_said(WAITING, |_| fake.s3().release_held());
    assert_eq!(run.status(), "deploy_timeout", "{run:?}");
    assert!(
        run.outputs["error-message"].contains("did not finish within the deploy budget"),
        "{:?}",
        run.outputs
    );
    let events = fake.s3().events();
    assert_eq!(
        endings(&events),
        [
            ("s3.complete_multipart_upload", 200),
            ("s3.head_object", 200)
        ],
        "{events:#?}"
    );
    says_stored(&fake, &run);
    assert!(mutations(&fake).is_empty(), "nothing was created");
}

#[test]
fn a_completion_unanswered_past_the_signals_seconds_may_be_stored_and_nothing_is_aborted() {
    let fake = fake(NEW);
    let truss = truss_with_victim();
    fake.s3().hold_completion();
    let held = || fake.s3().held() == 1;
    let run = deploy(&fake, truss.path()).run_signalled_when(held, "TERM");
    cancelled_by_sigterm(&fake, &run);
    let after = run.after_signal.expect("signalled");
    assert!(after.as_secs() < 30, "stopped in {after:?}");
    let output = all_output(&run);
    let key = location(&fake);
    assert!(
        output.contains(&format!(
            "The archive may be stored at {key}: S3 had not answered"
        )) && output.contains("Nothing was aborted"),
        "{output}"
    );
    assert!(run.summary.contains("may be stored at"), "{run:?}");
    assert!(!output.contains("nothing is left"), "{output}");
    let events = fake.s3().events();
    assert!(
        !events
            .iter()
            .any(|e| e.operation.contains("abort") || e.operation.contains("list_parts")),
        "{events:#?}"
    );
    // And so it was: S3 carries out the completion it received.
    fake.s3().release_held();
    assert_eq!(fake.s3().objects().len(), 1);
}

#[test]
fn sigterm_while_the_last_part_is_in_flight_aborts_and_lists_until_none_is_left() {
    let fake = fake(NEW);
    let truss = truss_with_victim();
    // The last of two parts: its body arrives whole and S3 holds it, to
    // land just after the abort (AWS: a part in progress may still land).
    fake.s3().hold_part(2);
    let held = || fake.s3().held() == 1;
    let run = deploy(&fake, truss.path()).run_signalled_when(held, "TERM");
    cancelled_by_sigterm(&fake, &run);
    let events = fake.s3().events();
    assert_eq!(
        endings(&events),
        [
            ("s3.abort_multipart_upload", 204),
            ("s3.list_parts", 200),
            ("s3.abort_multipart_upload", 204),
            ("s3.list_parts", 404),
        ],
        "no completion; aborted until S3 lists none: {events:#?}"
    );
    assert_eq!(fake.s3().open_uploads(), 0, "S3 keeps no part of it");
    assert!(fake.s3().objects().is_empty());
    assert!(
        run.stdout.contains("S3 lists no part of it") && run.summary.contains("S3 lists no part"),
        "{run:?}"
    );
}

#[test]
fn a_refused_abort_names_the_request_its_status_and_code_not_a_guess() {
    let fake = fake(NEW);
    let truss = truss_with_victim();
    fake.s3().hold_part(2);
    fake.s3()
        .refuse_at_headers("s3.abort_multipart_upload", Refusal::AccessDenied, 1);
    let held = || fake.s3().held() == 1;
    let run = deploy(&fake, truss.path()).run_signalled_when(held, "TERM");
    cancelled_by_sigterm(&fake, &run);
    let output = all_output(&run);
    assert!(
        output.contains("S3 refused AbortMultipartUpload: AccessDenied: Access Denied (HTTP 403)"),
        "{output}"
    );
    assert!(
        !output.contains("credentials"),
        "no guess at the cause: {output}"
    );
    assert!(!output.contains("nothing is left"), "{output}");
}

#[test]
fn a_completion_whose_answer_drips_past_the_signals_seconds_may_be_stored_and_nothing_is_aborted() {
    use fake_baseten::proxy::{Fault, FaultProxy, Rule};
    let fake = fake(NEW);
    let truss = truss_with_victim();
    // POSTs: CreateMultipartUpload signed for us-east-1 (answered with the
    // bucket's region), again for that region, then the completion: S3
    // applies it, and its answer comes a byte every 400 ms.
    let proxy = FaultProxy::builder(fake.addr())
        .rule(
            Rule::new(
                "dripped-complete",
                Fault::Drip {
                    bytes: 1,
                    interval_ms: 400,
                },
            )
            .method("POST")
            .nth(3),
        )
        .start_in_background()
        .unwrap();
    let completed = || {
        ops(&fake.s3().events(), "s3.complete_multipart_upload")
            .iter()
            .any(|e| e.status == 200)
    };
    let run = deploy(&fake, truss.path())
        .arg("s3-endpoint", proxy.s3_endpoint())
        .run_signalled_when(completed, "TERM");
    cancelled_by_sigterm(&fake, &run);
    let output = all_output(&run);
    assert!(
        output.contains(&format!(
            "The archive may be stored at {}: S3 had not answered",
            location(&fake)
        )),
        "{output}"
    );
    assert!(!output.contains("nothing is left"), "{output}");
    let events = fake.s3().events();
    assert_eq!(
        endings(&events),
        [("s3.complete_multipart_upload", 200)],
        "nothing aborted, nothing read that could not settle it: {events:#?}"
    );
    assert_eq!(
        fake.s3().objects().len(),
        1,
        "stored, as the run said it may be"
    );
}

#[test]
fn a_second_signal_during_the_wait_for_the_completion_still_says_the_archive_may_be_stored() {
    let fake = fake(NEW);
    let truss = truss_with_victim();
    fake.s3().hold_completion();
    let held = || fake.s3().held() == 1;
    // GitHub's INT, then its TERM while the run waits for the completion.
    let run = deploy(&fake, truss.path()).run_signalled_then(held, "INT", WAITING, |pid| {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
    });
    assert_eq!(run.code, 130, "{run:?}");
    let output = all_output(&run);
    let said = format!(
        "The archive may be stored at {}: the cleanup was stopped while S3 was completing the upload",
        location(&fake)
    );
    assert!(output.contains(&said), "{output}");
    assert!(run.summary.contains(&said), "{run:?}");
    assert!(!output.contains("nothing is left"), "{output}");
    let events = fake.s3().events();
    assert!(
        !events.iter().any(|e| e.operation.contains("abort")),
        "{events:#?}"
    );
    assert!(mutations(&fake).is_empty(), "nothing was created");
    fake.s3().release_held();
}

/// A retried completion: S3 completes the first try but its answer is
/// lost (the connection drops after the request reached S3), and the
/// retry is answered 403 `AccessDenied` (as s3s-fs answers a request on
/// an upload it is completing). That refusal settles nothing: the run
/// reads the object back, finds it whole, says so and goes on; nothing is
/// aborted.
#[test]
fn a_refusal_after_a_completion_try_that_got_no_answer_reads_the_object_back() {
    use fake_baseten::proxy::{Fault, FaultProxy, Rule};
    let fake = fake(NEW);
    let truss = truss_with_victim();
    // POSTs: CreateMultipartUpload signed for us-east-1 (answered with the
    // bucket's region), again for that region, then the completion twice.
    let proxy = FaultProxy::builder(fake.addr())
        .rule(
            Rule::new("lost-complete", Fault::DropAfterForward)
                .method("POST")
                .nth(3),
        )
        .rule(
            Rule::new(
                "denied-retry",
                Fault::Status {
                    status: 403,
                    retry_after: None,
                    body: Some(
                        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>".to_owned(),
                    ),
                    content_type: Some("application/xml".to_owned()),
                },
            )
            .method("POST")
            .nth(4),
        )
        .start_in_background()
        .unwrap();
    let run = deploy(&fake, truss.path())
        .arg("s3-endpoint", proxy.s3_endpoint())
        .run();
    let output = all_output(&run);
    assert_eq!(proxy.faulted().len(), 2, "both faults hit: {output}");
    assert!(
        output.contains("but S3 holds the archive whole"),
        "{output}"
    );
    let events = fake.s3().events();
    assert!(
        !events.iter().any(|e| e.operation.contains("abort")),
        "nothing aborted: {events:#?}"
    );
    assert_eq!(fake.s3().objects().len(), 1, "{events:#?}");
    assert_eq!(run.code, 0, "{output}");
}
