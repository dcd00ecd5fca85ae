//! Uploads through a link shaped like a WAN (round-trip delay, a rate cap
//! per connection and in total): the parts S3 stores, the connections the
//! upload opens, a failed part sent again alone, and a cancel that aborts
//! the upload it interrupts.

use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

use fake_baseten::FakeBaseten;
use fake_baseten::proxy::{Fault, FaultProxy, Rule, Shape, ShapedLink};
use fake_baseten::s3::S3Event;

use crate::harness::*;

const NEW: &str = "teams: [{id: t1, name: ml, default: true}]\ndeployments:\n  default: [[0, BUILDING], [0.2, ACTIVE]]\n";
const PART_BYTES: u64 = 8 * 1024 * 1024;

/// A truss whose archive needs a multipart upload: `mib` MiB of random
/// bytes (incompressible, so every part is distinct) in `weights.bin`.
fn big_truss(mib: usize) -> (tempfile::TempDir, Vec<u8>) {
    let dir = model_dir("model_name: big-model\n");
    let mut weights = vec![0u8; mib << 20];
    fastrand::Rng::with_seed(24).fill(&mut weights);
    std::fs::write(dir.path().join("weights.bin"), &weights).unwrap();
    (dir, weights)
}

fn link(upstream: std::net::SocketAddr, shape: &str) -> ShapedLink {
    ShapedLink::start_in_background(upstream, Shape::parse(shape).unwrap()).unwrap()
}

fn deploy<'a>(fake: &'a FakeBaseten, truss: &Path, s3: &str, concurrency: &str) -> Invocation<'a> {
    Invocation::new(fake)
        .model(truss)
        .arg("s3-endpoint", s3)
        .arg("upload-concurrency", concurrency)
        .arg("cleanup", "false")
}

fn ops<'a>(events: &'a [S3Event], operation: &str) -> Vec<&'a S3Event> {
    events.iter().filter(|e| e.operation == operation).collect()
}

/// The bytes of `name` inside the tar the fake stored under `key`.
fn member_of_stored_archive(fake: &FakeBaseten, key: &str, name: &str) -> Vec<u8> {
    let reader = fake.s3().object_reader(key).expect("the object is stored");
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().ends_with(name) {
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            return bytes;
        }
    }
    panic!("{name} is not in the stored archive");
}

#[test]
fn a_multipart_upload_through_a_slow_link_stores_every_part_checksummed() {
    let fake = fake(NEW);
    let (truss, weights) = big_truss(40);
    let link = link(fake.addr(), "rtt=40ms,conn=4MB/s,total=12MB/s");
    let run = deploy(&fake, truss.path(), &link.url(), "3").run();
    assert_eq!(run.code, 0, "{run:?}");

    let [(key, size)] = fake.s3().objects().try_into().expect("one object");
    let events = fake.s3().events();
    let parts = ops(&events, "s3.upload_part");
    let mut numbers: Vec<u32> = parts.iter().map(|e| e.part_number.unwrap()).collect();
    numbers.sort_unstable();
    // 8 MiB parts, the first round's staggered down towards 5 MiB.
    assert!(
        (size.div_ceil(PART_BYTES)..=size.div_ceil(5 << 20)).contains(&(parts.len() as u64)),
        "{parts:#?}"
    );
    assert_eq!(
        numbers,
        (1..=parts.len() as u32).collect::<Vec<_>>(),
        "each part sent once: {parts:#?}"
    );
    for part in &parts {
        assert_eq!(part.status, 200, "{part:?}");
        assert!(part.crc32_verified, "S3 checked the part's CRC32: {part:?}");
    }
    let completes = ops(&events, "s3.complete_multipart_upload");
    assert_eq!(completes.len(), 1);
    assert_eq!(completes[0].status, 200);
    assert!(ops(&events, "s3.abort_multipart_upload").is_empty());
    assert_eq!(fake.s3().open_uploads(), 0);
    assert!(
        member_of_stored_archive(&fake, &key, "weights.bin") == weights,
        "the stored archive holds the weights byte for byte"
    );
    // upload-concurrency bounds the parts in flight, and the upload uses
    // every one of them: only S3 goes through the link.
    assert_eq!(link.peak_connections(), 3);
    assert!(
        run.summary.contains("uploaded the truss: 40.0 MiB in"),
        "the summary shows the upload's rate: {}",
        run.summary
    );
}

#[test]
fn a_part_that_fails_is_sent_again_alone() {
    let fake = fake(NEW);
    let (truss, _) = big_truss(40);
    // The third part request is reset before it reaches S3.
    let proxy = FaultProxy::builder(fake.addr())
        .rule(
            Rule::new("lost-part", Fault::ResetBeforeForward)
                .method("PUT")
                .nth(3),
        )
        .start_in_background()
        .unwrap();
    let link = link(proxy.addr(), "rtt=40ms,conn=8MB/s,total=24MB/s");
    let run = deploy(&fake, truss.path(), &link.url(), "3").run();
    assert_eq!(run.code, 0, "{run:?}");

    let faulted = proxy.faulted();
    assert_eq!(faulted.len(), 1, "{faulted:#?}");
    let lost = faulted[0].query.clone().unwrap();
    let sends_of_lost = proxy
        .requests()
        .iter()
        .filter(|e| e.method == "PUT" && e.query.as_deref() == Some(lost.as_str()))
        .count();
    assert_eq!(sends_of_lost, 2, "the lost part was sent again");

    let events = fake.s3().events();
    let parts = ops(&events, "s3.upload_part");
    let mut numbers: Vec<u32> = parts.iter().map(|e| e.part_number.unwrap()).collect();
    numbers.sort_unstable();
    assert_eq!(
        numbers,
        (1..=parts.len() as u32).collect::<Vec<_>>(),
        "S3 received every part once: only the lost one was resent"
    );
    assert!(parts.iter().all(|p| p.status == 200 && p.crc32_verified));
    let created = ops(&events, "s3.create_multipart_upload");
    // The first is signed for us-east-1 and answered with the bucket's region.
    assert_eq!(created.iter().filter(|e| e.status == 200).count(), 1);
    assert_eq!(ops(&events, "s3.complete_multipart_upload").len(), 1);
    assert!(ops(&events, "s3.abort_multipart_upload").is_empty());
}

#[test]
fn a_cancel_mid_upload_aborts_it_within_the_cancel_budget() {
    let fake = fake(NEW);
    let (truss, _) = big_truss(80);
    let link = link(fake.addr(), "rtt=40ms,conn=4MB/s,total=12MB/s");
    let stored_a_part = || {
        fake.s3()
            .events()
            .iter()
            .any(|e| e.operation == "s3.upload_part" && e.status == 200)
    };
    let run =
        deploy(&fake, truss.path(), &link.url(), "3").run_signalled_when(stored_a_part, "INT");
    assert_eq!(run.code, 130, "{run:?}");
    let after_signal = run.after_signal.unwrap();
    // The cleanup's budget after a cancel is 3 s (Budget, unit-tested);
    // here only "did not hang", and the abort is read from the fake below.
    assert!(after_signal < Duration::from_secs(60), "{after_signal:?}");

    let events = fake.s3().events();
    let aborts = ops(&events, "s3.abort_multipart_upload");
    assert_eq!(aborts.len(), 1, "{events:#?}");
    assert_eq!(aborts[0].status, 204);
    assert!(ops(&events, "s3.complete_multipart_upload").is_empty());
    assert_eq!(fake.s3().open_uploads(), 0, "S3 keeps no part of it");
    assert!(fake.s3().objects().is_empty());
    assert!(
        run.stdout.contains("Aborted the unfinished S3 upload"),
        "{run:?}"
    );
    assert!(mutations(&fake).is_empty(), "nothing was created");
}

#[test]
fn upload_concurrency_out_of_range_is_refused_before_any_request() {
    let fake = fake(NEW);
    for bad in ["0", "33", "four", "2.5"] {
        let run = Invocation::new(&fake)
            .model(example_model())
            .arg("upload-concurrency", bad)
            .run();
        assert_eq!(run.code, 2, "{bad}: {run:?}");
        assert!(
            run.stderr.contains("upload-concurrency must be")
                || run.stdout.contains("upload-concurrency must be"),
            "{bad}: {run:?}"
        );
    }
    assert!(fake.requests().is_empty(), "nothing was sent");
}

#[test]
fn a_long_upload_says_every_few_seconds_how_far_it_is_and_how_long_is_left() {
    let fake = fake(NEW);
    let (truss, _) = big_truss(24);
    // About 7 s for the archive: a start line, then one every 5 s.
    let link = link(fake.addr(), "rtt=40ms,conn=2MB/s,total=4MB/s");
    let run = deploy(&fake, truss.path(), &link.url(), "3")
        .env("GITHUB_ACTIONS", "true")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    let progress: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("Uploading the truss: "))
        .collect();
    assert!(progress.len() >= 2, "{progress:#?}");
    assert!(progress[0].starts_with("Uploading the truss: 0% (0 B of 24.0 MiB)"));
    for line in &progress[1..] {
        let (_, pace) = line.split_once("), ").expect("a rate and the time left");
        assert!(
            pace.ends_with(" left") && pace.contains("/s, about "),
            "{line}"
        );
    }
}
