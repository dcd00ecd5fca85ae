//! An S3 answer is read only as the answer to the request it follows: a
//! success before the body was sent is not an upload, an answer that came
//! on an idle connection belongs to no request, and a `417` to `Expect`
//! is answered by sending the request again without it.

use std::time::Duration;

use fake_baseten::proxy::unsolicited::Unsolicited;
use fake_baseten::s3::{EarlyAnswer, S3Event};

use crate::harness::*;

const NEW: &str = "teams: [{id: t1, name: ml, default: true}]\ndeployments:\n  default: [[0, BUILDING], [0.2, ACTIVE]]\n";

fn of<'a>(events: &'a [S3Event], operation: &str) -> Vec<&'a S3Event> {
    events.iter().filter(|e| e.operation == operation).collect()
}

/// A model whose archive takes three parts (20 MiB of random weights).
fn big_model() -> tempfile::TempDir {
    let dir = model_dir("model_name: big-model\n");
    let mut weights = vec![0u8; 20 << 20];
    fastrand::Rng::with_seed(29).fill(&mut weights);
    std::fs::write(dir.path().join("weights.bin"), &weights).unwrap();
    dir
}

#[test]
fn a_put_answered_200_before_its_body_is_never_an_upload() {
    let fake = fake(NEW);
    fake.s3()
        .answer_before_body("s3.put_object", EarlyAnswer::OkUnread, 2);

    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("cleanup", "false")
        .run();

    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(!run.stderr.contains("Uploaded"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("S3 answered PutObject with HTTP 200 before its body was sent, twice"),
        "{}",
        run.stderr
    );
    // Sent twice (the second time on a new connection), never trusted.
    let events = fake.s3().events();
    let puts = of(&events, "s3.put_object");
    assert_eq!(puts.len(), 2, "{events:#?}");
    assert!(puts.iter().all(|p| p.body_bytes == 0), "{puts:#?}");
    assert!(fake.s3().objects().is_empty());
    let sent = endpoints(&fake);
    assert!(
        !sent.iter().any(|e| e.starts_with("graphql.create_model")),
        "nothing is created from an archive that was never stored: {sent:?}"
    );
}

#[test]
fn one_put_answered_before_its_body_is_sent_again_and_the_deploy_goes_on() {
    let fake = fake(NEW);
    fake.s3()
        .answer_before_body("s3.put_object", EarlyAnswer::OkUnread, 1);

    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("cleanup", "false")
        .run();

    assert_eq!(run.status(), "success", "{run:?}");
    let events = fake.s3().events();
    let puts = of(&events, "s3.put_object");
    assert_eq!(puts.len(), 2, "{events:#?}");
    assert_eq!((puts[0].status, puts[0].body_bytes), (200, 0));
    assert_eq!(
        (puts[1].status, puts[1].body_bytes > 0),
        (200, true),
        "{puts:#?}"
    );
    assert_eq!(fake.s3().objects().len(), 1);
    // The create follows the upload S3 itself answered.
    let sent = endpoints(&fake);
    assert!(
        sent.iter().any(|e| e.starts_with("graphql.create_model")),
        "{sent:?}"
    );
}

#[test]
fn a_part_answered_200_before_its_body_fails_the_upload_and_aborts_it() {
    let fake = fake(NEW);
    fake.s3()
        .answer_before_body("s3.upload_part", EarlyAnswer::OkUnread, 100);

    let run = Invocation::new(&fake)
        .model(big_model().path())
        .arg("cleanup", "false")
        .run();

    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(
        run.stderr
            .contains("with HTTP 200 before its body was sent"),
        "{}",
        run.stderr
    );
    assert_eq!(fake.s3().open_uploads(), 0);
    assert!(fake.s3().objects().is_empty());
    assert!(
        !endpoints(&fake)
            .iter()
            .any(|e| e.starts_with("graphql.create_model"))
    );
}

/// The parts' connections are opened while CreateMultipartUpload is on its
/// way; S3 takes its time answering it, and meanwhile something writes a
/// `200 OK` on every quiet connection. Each part must get its own answer.
#[test]
fn an_answer_that_came_on_an_idle_connection_is_no_parts_answer() {
    let fake = fake(NEW);
    fake.s3()
        .delay_answer("s3.create_multipart_upload", Duration::from_millis(600), 1);
    let relay = Unsolicited::start_in_background(
        fake.addr(),
        Duration::from_millis(150),
        b"HTTP/1.1 200 OK\r\netag: \"stale\"\r\ncontent-length: 0\r\n\r\n".to_vec(),
    )
    .unwrap();

    let run = Invocation::new(&fake)
        .model(big_model().path())
        .arg("s3-endpoint", relay.url())
        .arg("upload-concurrency", "3")
        .arg("cleanup", "false")
        .run();

    assert_eq!(run.status(), "success", "{run:?}");
    assert!(relay.spoken() > 0, "the relay spoke on an idle connection");
    let events = fake.s3().events();
    let parts = of(&events, "s3.upload_part");
    // Each part sent once and stored: none took the stale answer for its
    // own (that would show as a part sent twice, or one never sent).
    let mut numbers: Vec<_> = parts.iter().map(|p| p.part_number).collect();
    numbers.sort();
    assert_eq!(numbers, [Some(1), Some(2), Some(3)], "{events:#?}");
    assert!(
        parts.iter().all(|p| p.status == 200 && p.crc32_verified),
        "{parts:#?}"
    );
}

#[test]
fn a_417_to_expect_on_a_put_is_sent_again_without_it() {
    let fake = fake(NEW);
    fake.s3()
        .answer_before_body("s3.put_object", EarlyAnswer::ExpectationFailed, 1);

    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("cleanup", "false")
        .run();

    assert_eq!(run.status(), "success", "{run:?}");
    let events = fake.s3().events();
    let puts = of(&events, "s3.put_object");
    assert_eq!(puts.len(), 2, "{events:#?}");
    assert_eq!((puts[0].status, puts[0].expect_continue), (417, true));
    assert_eq!((puts[1].status, puts[1].expect_continue), (200, false));
    assert!(puts[1].body_bytes > 0, "{:?}", puts[1]);
    assert_eq!(fake.s3().objects().len(), 1);
}

#[test]
fn a_417_to_expect_on_a_part_is_sent_again_without_it_and_remembered() {
    let fake = fake(NEW);
    fake.s3()
        .answer_before_body("s3.upload_part", EarlyAnswer::ExpectationFailed, 1);

    let run = Invocation::new(&fake)
        .model(big_model().path())
        .arg("upload-concurrency", "1")
        .arg("cleanup", "false")
        .run();

    assert_eq!(run.status(), "success", "{run:?}");
    let events = fake.s3().events();
    let parts = of(&events, "s3.upload_part");
    assert_eq!(parts.len(), 4, "{events:#?}");
    assert_eq!((parts[0].status, parts[0].expect_continue), (417, true));
    // The repeat and every later part: no `Expect` to that origin again.
    for part in &parts[1..] {
        assert_eq!(
            (part.status, part.expect_continue),
            (200, false),
            "{part:?}"
        );
        assert!(part.crc32_verified, "{part:?}");
    }
    assert_eq!(fake.s3().objects().len(), 1);
}

/// A bodiless `200` to CompleteMultipartUpload is not S3's answer (S3's
/// names the object's ETag): the call is sent again, and only S3's own
/// answer completes the upload.
#[test]
fn a_complete_answered_without_its_document_is_sent_again() {
    let fake = fake(NEW);
    fake.s3()
        .answer_before_body("s3.complete_multipart_upload", EarlyAnswer::OkUnread, 1);

    let run = Invocation::new(&fake)
        .model(big_model().path())
        .arg("cleanup", "false")
        .run();

    assert_eq!(run.status(), "success", "{run:?}");
    let events = fake.s3().events();
    let completes = of(&events, "s3.complete_multipart_upload");
    assert_eq!(completes.len(), 2, "{events:#?}");
    assert!(completes[1].signature_verified, "{:?}", completes[1]);
    assert_eq!(fake.s3().objects().len(), 1);
    assert_eq!(fake.s3().open_uploads(), 0);
}

/// Something on the way (a proxy, a captive portal) answers a part with
/// its own `200` page: S3 names the part it stored (its ETag), this answer
/// does not, so the part is sent again and only S3's answer counts.
#[test]
fn a_proxys_200_page_for_a_part_is_not_s3s_answer() {
    use fake_baseten::proxy::{Fault, FaultProxy, Rule};
    let fake = fake(NEW);
    let proxy = FaultProxy::builder(fake.addr())
        .rule(
            Rule::new(
                "portal",
                Fault::HtmlError {
                    status: 200,
                    echo: None,
                },
            )
            .method("PUT")
            .nth(1),
        )
        .start_in_background()
        .unwrap();

    let run = Invocation::new(&fake)
        .model(big_model().path())
        .arg("s3-endpoint", proxy.s3_endpoint())
        .arg("cleanup", "false")
        .run();

    assert_eq!(run.status(), "success", "{run:?}");
    let events = fake.s3().events();
    let parts = of(&events, "s3.upload_part");
    // The proxy kept the first part from S3; S3 stored each part once.
    let mut numbers: Vec<_> = parts.iter().map(|p| p.part_number).collect();
    numbers.sort();
    assert_eq!(numbers, [Some(1), Some(2), Some(3)], "{events:#?}");
    assert_eq!(fake.s3().objects().len(), 1);
}

/// What a `417` taught holds for the rest of the run: the next target's
/// upload to the same S3 sends no `Expect` either.
#[test]
fn a_417_is_remembered_for_the_rest_of_the_run() {
    let fake = fake(NEW);
    fake.s3()
        .answer_before_body("s3.put_object", EarlyAnswer::ExpectationFailed, 1);
    let (_models, dirs) = model_dirs(&["first", "second"]);

    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .arg("max-parallel", "1")
        .arg("cleanup", "false")
        .run();

    assert_eq!(run.status(), "success", "{run:?}");
    let events = fake.s3().events();
    let puts: Vec<(u16, bool)> = of(&events, "s3.put_object")
        .iter()
        .map(|p| (p.status, p.expect_continue))
        .collect();
    assert_eq!(
        puts,
        [(417, true), (200, false), (200, false)],
        "{events:#?}"
    );
    assert_eq!(fake.s3().objects().len(), 2);
}

/// An answer that comes a few bytes at a time (status line and headers
/// split across many packets) is still read whole, as its part's own.
#[test]
fn a_parts_answer_split_across_many_packets_is_read_whole() {
    use fake_baseten::proxy::{Fault, FaultProxy, Rule};
    let fake = fake(NEW);
    let proxy = FaultProxy::builder(fake.addr())
        .rule(
            Rule::new(
                "drip",
                Fault::Drip {
                    bytes: 3,
                    interval_ms: 2,
                },
            )
            .method("PUT"),
        )
        .start_in_background()
        .unwrap();

    let run = Invocation::new(&fake)
        .model(big_model().path())
        .arg("s3-endpoint", proxy.s3_endpoint())
        .arg("cleanup", "false")
        .run();

    assert_eq!(run.status(), "success", "{run:?}");
    let events = fake.s3().events();
    let parts = of(&events, "s3.upload_part");
    assert_eq!(parts.len(), 3, "each part once: {events:#?}");
    assert!(parts.iter().all(|p| p.status == 200 && p.crc32_verified));
    assert_eq!(fake.s3().objects().len(), 1);
}
