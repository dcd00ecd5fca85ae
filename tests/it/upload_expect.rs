//! S3 refusing an upload at its headers: the binary sends its data requests
//! with `Expect: 100-continue`, so the refusal is S3's own XML message, and
//! the fake records that not one body byte reached it.

use fake_baseten::s3::{Refusal, S3Event};

use crate::harness::*;

const NEW: &str = "teams: [{id: t1, name: ml, default: true}]\ndeployments:\n  default: [[0, BUILDING], [0.2, ACTIVE]]\n";

fn refused<'a>(events: &'a [S3Event], operation: &str) -> Vec<&'a S3Event> {
    events
        .iter()
        .filter(|e| e.operation == operation && e.status >= 400)
        .collect()
}

#[test]
fn a_part_refused_at_the_headers_fails_with_s3s_message_and_no_body_sent() {
    let fake = fake(NEW);
    let dir = model_dir("model_name: big-model\n");
    let mut weights = vec![0u8; 20 << 20];
    fastrand::Rng::with_seed(21).fill(&mut weights);
    std::fs::write(dir.path().join("weights.bin"), &weights).unwrap();
    fake.s3()
        .refuse_at_headers("s3.upload_part", Refusal::AccessDenied, 1000);

    let run = Invocation::new(&fake)
        .model(dir.path())
        .arg("cleanup", "false")
        .run();

    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains(
            "S3 rejected the upload: AccessDenied: Access Denied (HTTP 403 on UploadPart"
        ),
        "{}",
        run.stderr
    );
    let events = fake.s3().events();
    let parts = refused(&events, "s3.upload_part");
    assert!(!parts.is_empty(), "{events:#?}");
    for part in parts {
        assert!(part.signature_verified, "{part:?}");
        assert_eq!(part.body_bytes, 0, "no body byte after a refusal: {part:?}");
    }
    // The upload it had started was aborted; nothing was stored.
    assert_eq!(fake.s3().open_uploads(), 0);
    assert!(fake.s3().objects().is_empty());
}

#[test]
fn a_put_refused_for_an_expired_token_says_so_and_sends_no_body() {
    let fake = fake(NEW);
    let dir = model_dir("model_name: small-model\n");
    fake.s3()
        .refuse_at_headers("s3.put_object", Refusal::ExpiredToken, 1000);

    let run = Invocation::new(&fake)
        .model(dir.path())
        .arg("cleanup", "false")
        .run();

    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains(
            "ExpiredToken: The provided token has expired. (HTTP 400 on PutObject): the platform's temporary upload credentials expired"
        ),
        "{}",
        run.stderr
    );
    let events = fake.s3().events();
    let puts = refused(&events, "s3.put_object");
    assert_eq!(puts.len(), 1, "not retried: {events:#?}");
    assert_eq!(puts[0].body_bytes, 0, "{:?}", puts[0]);
}

#[test]
fn an_accepted_upload_sends_every_part_once_with_its_checksum_verified() {
    let fake = fake(NEW);
    let dir = model_dir("model_name: big-model\n");
    let mut weights = vec![0u8; 20 << 20];
    fastrand::Rng::with_seed(22).fill(&mut weights);
    std::fs::write(dir.path().join("weights.bin"), &weights).unwrap();

    let run = Invocation::new(&fake)
        .model(dir.path())
        .arg("cleanup", "false")
        .run();

    assert_eq!(run.code, 0, "{run:?}");
    let events = fake.s3().events();
    let parts: Vec<_> = events
        .iter()
        .filter(|e| e.operation == "s3.upload_part")
        .collect();
    assert_eq!(parts.len(), 3, "{events:#?}");
    for part in parts {
        assert_eq!(part.status, 200, "{part:?}");
        assert!(part.crc32_verified && part.signature_verified, "{part:?}");
        assert!(part.body_bytes > 0, "{part:?}");
    }
}
