//! The archive streamed from the truss's files: what S3 stores is the tar
//! of the truss, cut into parts straight from the files, with no copy on
//! disk; a file that changes underneath fails the upload and aborts it; an
//! abort leaves no part, even one that lands after it; a proxy that refuses
//! the tunnel is asked once. (A stop during the completion:
//! `complete_window`.)

use std::io::Read as _;
use std::path::Path;

use fake_baseten::FakeBaseten;
use fake_baseten::proxy::{Fault, FaultProxy, Rule};
use fake_baseten::s3::S3Event;

use crate::harness::*;

pub(crate) const NEW: &str = "teams: [{id: t1, name: ml, default: true}]\ndeployments:\n  default: [[0, BUILDING], [0.2, ACTIVE]]\n";
pub(crate) const MIB: usize = 1024 * 1024;

fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    fastrand::Rng::with_seed(seed).fill(&mut bytes);
    bytes
}

/// One part in flight: 8 MiB parts in order, none staggered.
pub(crate) fn deploy<'a>(fake: &'a FakeBaseten, truss: &Path) -> Invocation<'a> {
    Invocation::new(fake)
        .model(truss)
        .arg("upload-concurrency", "1")
        .arg("cleanup", "false")
}

pub(crate) fn ops<'a>(events: &'a [S3Event], operation: &str) -> Vec<&'a S3Event> {
    events.iter().filter(|e| e.operation == operation).collect()
}

pub(crate) fn all_output(run: &Outcome) -> String {
    format!("{}\n{}", run.stdout, run.stderr)
}

/// What a tar reader finds in a stored object: each member's name, type,
/// link target and contents.
fn members_of(
    fake: &FakeBaseten,
    key: &str,
) -> Vec<(String, tar::EntryType, Option<String>, Vec<u8>)> {
    let reader = fake.s3().object_reader(key).expect("the object is stored");
    let mut archive = tar::Archive::new(reader);
    archive
        .entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let kind = entry.header().entry_type();
            let link = entry
                .link_name()
                .unwrap()
                .map(|l| l.to_str().unwrap().to_owned());
            let path = entry.path().unwrap().to_str().unwrap().to_owned();
            let mut contents = Vec::new();
            entry.read_to_end(&mut contents).unwrap();
            (path, kind, link, contents)
        })
        .collect()
}

/// The platform's documented content hash of the tree at `root`, computed
/// here on its own from plain per-file `blake3::hash`es: every path (files
/// by their digest, followed through symlinks; directories as null), folded
/// in path-component order. The tree must hold nothing truss ignores.
fn independent_content_hash(root: &Path) -> String {
    fn visit(root: &Path, rel: &str, out: &mut Vec<(String, Option<[u8; 32]>)>) {
        for entry in std::fs::read_dir(root.join(rel)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let key = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if root.join(&key).is_dir() {
                out.push((key.clone(), None));
                visit(root, &key, out);
            } else {
                let bytes = std::fs::read(root.join(&key)).unwrap();
                out.push((key, Some(*blake3::hash(&bytes).as_bytes())));
            }
        }
    }
    let mut entries = Vec::new();
    visit(root, "", &mut entries);
    entries.sort_by(|a, b| a.0.split('/').cmp(b.0.split('/')));
    let mut fold = blake3::Hasher::new();
    for (key, digest) in &entries {
        fold.update(blake3::hash(key.as_bytes()).as_bytes());
        if let Some(d) = digest {
            fold.update(d);
        }
    }
    fold.finalize().to_hex().to_string()
}

/// The content-hash label on the one deployment the run created.
fn created_label(fake: &FakeBaseten) -> String {
    let [deployment] = fake.deployments().try_into().expect("one deployment");
    deployment.labels.expect("labels")["truss_push_content_hash"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A truss whose archive is the 9 MiB `a.bin` (part 1 lies inside it),
/// then `config.yaml`, `victim.bin` and the model: the victim's bytes are
/// read only for part 2.
pub(crate) fn truss_with_victim() -> tempfile::TempDir {
    let dir = model_dir("model_name: streamed\n");
    std::fs::write(dir.path().join("a.bin"), random_bytes(9 * MIB, 1)).unwrap();
    std::fs::write(dir.path().join("victim.bin"), random_bytes(MIB, 2)).unwrap();
    dir
}

#[test]
fn the_stored_object_is_the_truss_tar_cut_from_its_files_with_a_file_across_three_parts() {
    let fake = fake(NEW);
    let dir = model_dir("model_name: varied\n");
    let root = dir.path();
    let big = random_bytes(20 * MIB, 3);
    std::fs::write(root.join("big.bin"), &big).unwrap();
    for size in [0usize, 511, 512, 513] {
        std::fs::write(root.join(format!("s{size}.bin")), random_bytes(size, 4)).unwrap();
    }
    let long = format!("{}/{}/file.txt", "d".repeat(70), "e".repeat(70));
    std::fs::create_dir_all(root.join(&long).parent().unwrap()).unwrap();
    std::fs::write(root.join(&long), b"deep").unwrap();
    std::os::unix::fs::symlink(&long, root.join("link-to-long")).unwrap();

    let run = deploy(&fake, root).run();
    assert_eq!(run.status(), "success", "{run:?}");

    let [(key, size)] = fake.s3().objects().try_into().expect("one object");
    let events = fake.s3().events();
    let parts = ops(&events, "s3.upload_part");
    assert_eq!(
        parts.len() as u64,
        size.div_ceil(8 * MIB as u64),
        "{parts:#?}"
    );
    assert!(parts.len() >= 3, "big.bin spans three parts: {parts:#?}");
    assert!(parts.iter().all(|p| p.status == 200 && p.crc32_verified));

    let members = members_of(&fake, &key);
    let names: Vec<&str> = members.iter().map(|m| m.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "big.bin",
            "config.yaml",
            "link-to-long",
            "s0.bin",
            "s511.bin",
            "s512.bin",
            "s513.bin",
            long.as_str(),
            "model/model.py",
        ]
    );
    for (path, kind, link, contents) in &members {
        if path == "link-to-long" {
            assert_eq!(*kind, tar::EntryType::Symlink);
            assert_eq!(link.as_deref(), Some(long.as_str()));
        } else {
            assert_eq!(*kind, tar::EntryType::Regular, "{path}");
            let want = std::fs::read(root.join(path)).unwrap();
            assert!(*contents == want, "{path} is stored byte for byte");
        }
    }
    assert!(members[0].3 == big);
    // The label is each file's digest taken from the parts' own reads
    // (big.bin's from three parts, cut inside its chunks), folded.
    assert_eq!(created_label(&fake), independent_content_hash(root));
    // The history gives the upload's rate against its wall time.
    assert!(
        run.summary.contains(&format!(
            "uploaded the truss: {:.1} MiB in ",
            size as f64 / MIB as f64
        )) && run.summary.contains("of wall time (")
            && run
                .summary
                .contains("read from its files and sent in one pass"),
        "{}",
        run.summary
    );
}

#[test]
fn a_part_cut_after_s3_stored_it_is_read_again_from_the_files_and_stored_whole() {
    let fake = fake(NEW);
    let truss = truss_with_victim();
    // The second PUT (part 2, which reads victim.bin) is stored, then its
    // answer is lost with the connection: the part goes again, read again.
    let proxy = FaultProxy::builder(fake.addr())
        .rule(
            Rule::new("cut-part", Fault::DropAfterForward)
                .method("PUT")
                .nth(2),
        )
        .start_in_background()
        .unwrap();
    let run = deploy(&fake, truss.path())
        .arg("s3-endpoint", proxy.s3_endpoint())
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(proxy.faulted().len(), 1, "{:#?}", proxy.requests());
    let events = fake.s3().events();
    let part2: Vec<_> = ops(&events, "s3.upload_part")
        .into_iter()
        .filter(|e| e.part_number == Some(2))
        .collect();
    assert_eq!(part2.len(), 2, "part 2 was sent twice: {events:#?}");
    assert!(part2.iter().all(|e| e.status == 200 && e.crc32_verified));
    let [(key, _)] = fake.s3().objects().try_into().expect("one object");
    for (path, _, _, contents) in members_of(&fake, &key) {
        let want = std::fs::read(truss.path().join(&path)).unwrap();
        assert!(contents == want, "{path} is stored byte for byte");
    }
}

#[test]
fn a_model_deploys_with_no_writable_temp_dir_or_working_directory() {
    let fake = fake(NEW);
    let truss = truss_with_victim();
    // Unwritable even for root: the temp dir's parent is a regular file,
    // and the working directory is /proc.
    let blocker = tempfile::NamedTempFile::new().unwrap();
    let tmpdir = blocker.path().join("tmp");
    let run = deploy(&fake, truss.path())
        .env("TMPDIR", tmpdir.to_str().unwrap())
        .cwd("/proc")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let [(key, _)] = fake.s3().objects().try_into().expect("one object");
    let members = members_of(&fake, &key);
    let victim = members.iter().find(|m| m.0 == "victim.bin").unwrap();
    assert!(victim.3 == std::fs::read(truss.path().join("victim.bin")).unwrap());
    // Nothing was written beside the truss either.
    let mut names: Vec<String> = std::fs::read_dir(truss.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["a.bin", "config.yaml", "model", "victim.bin"]);
}

/// Deploys [`truss_with_victim`], holds part 1 in the fake once S3 has its
/// body, applies `change` to `victim.bin` meanwhile, then lets it go.
fn victim_changed_during_the_upload(change: fn(&Path), says: &str) {
    let fake = fake(NEW);
    let truss = truss_with_victim();
    let victim = truss.path().join("victim.bin");
    fake.s3().hold_part(1);
    let held = || fake.s3().held() == 1;
    let run = deploy(&fake, truss.path()).run_acting_when(held, || {
        change(&victim);
        fake.s3().release_held();
    });
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let output = all_output(&run);
    assert!(
        output.contains(&format!(
            "{} changed while the archive was being uploaded ({says}",
            victim.display()
        )),
        "{output}"
    );
    assert_eq!(
        output.matches("changed while").count(),
        1,
        "said once: {output}"
    );
    let events = fake.s3().events();
    let aborts = ops(&events, "s3.abort_multipart_upload");
    assert_eq!(aborts.len(), 1, "{events:#?}");
    assert_eq!(aborts[0].status, 204);
    assert!(ops(&events, "s3.complete_multipart_upload").is_empty());
    // Part 2 never reached its last chunk: S3 stored only part 1.
    let stored: Vec<_> = ops(&events, "s3.upload_part")
        .into_iter()
        .filter(|e| e.status == 200)
        .map(|e| e.part_number)
        .collect();
    assert_eq!(stored, [Some(1)], "{events:#?}");
    assert_eq!(fake.s3().open_uploads(), 0);
    assert!(fake.s3().objects().is_empty());
    assert!(mutations(&fake).is_empty(), "nothing was created");
}

#[test]
fn a_file_grown_during_the_upload_fails_it_naming_the_file() {
    victim_changed_during_the_upload(
        |p| {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
            f.write_all(b"more").unwrap();
        },
        &format!("it was {} bytes, now {}", MIB, MIB + 4),
    );
}

#[test]
fn a_file_truncated_during_the_upload_fails_it_naming_the_file() {
    victim_changed_during_the_upload(
        |p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .set_len(100)
                .unwrap()
        },
        &format!("it was {MIB} bytes, now 100"),
    );
}

#[test]
fn a_file_touched_during_the_upload_fails_it_naming_the_file() {
    victim_changed_during_the_upload(
        |p| {
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(when)
                .unwrap()
        },
        "its modification time changed",
    );
}

#[test]
fn a_file_replaced_during_the_upload_fails_it_naming_the_file() {
    // An editor's or a download's atomic write: the same size, a new file
    // renamed over the path.
    victim_changed_during_the_upload(
        |p| {
            let fresh = p.with_extension("new");
            std::fs::write(&fresh, random_bytes(MIB, 9)).unwrap();
            let seen = std::fs::metadata(p).unwrap().modified().unwrap();
            std::fs::File::options()
                .write(true)
                .open(&fresh)
                .unwrap()
                .set_modified(seen)
                .unwrap();
            std::fs::rename(&fresh, p).unwrap();
        },
        "another file took its place",
    );
}

#[test]
fn a_file_deleted_during_the_upload_fails_it_naming_the_file() {
    victim_changed_during_the_upload(|p| std::fs::remove_file(p).unwrap(), "it was deleted");
}

#[test]
fn a_part_that_lands_after_the_abort_is_aborted_again_so_no_part_remains() {
    let fake = fake(NEW);
    let truss = truss_with_victim();
    // Part 1's body arrives whole and S3 holds it: it lands only after the
    // abort, as AWS documents for a part in progress during one.
    fake.s3().hold_part(1);
    let held = || fake.s3().held() == 1;
    let run = deploy(&fake, truss.path()).run_signalled_when(held, "INT");
    assert_eq!(run.code, 130, "{run:?}");

    let events = fake.s3().events();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e.operation.as_str())
        .filter(|o| o.contains("abort") || o.contains("list_parts"))
        .collect();
    assert_eq!(
        names,
        [
            "s3.abort_multipart_upload",
            "s3.list_parts",
            "s3.abort_multipart_upload",
            "s3.list_parts",
        ],
        "{events:#?}"
    );
    assert_eq!(fake.s3().open_uploads(), 0, "S3 keeps no part of it");
    assert!(fake.s3().objects().is_empty());
    assert!(
        run.stdout
            .contains("(2 aborts: parts in flight landed after the first); S3 lists no part of it"),
        "{run:?}"
    );
    assert!(mutations(&fake).is_empty(), "nothing was created");
}

#[test]
fn a_part_whose_body_is_out_is_answered_before_the_abort_so_none_lands_after_it() {
    let fake = fake(NEW);
    let truss = truss_with_victim();
    // Part 1's body arrives whole and S3 stores it 0.7 s later, or just
    // after the upload's first ListParts if one comes first: a run that cut
    // the part at the signal would abort, list nothing, and leave it there.
    fake.s3()
        .land_part_late(1, std::time::Duration::from_millis(700));
    let held = || fake.s3().held() == 1;
    let run = deploy(&fake, truss.path()).run_signalled_when(held, "INT");
    assert_eq!(run.code, 130, "{run:?}");

    let events = fake.s3().events();
    let order: Vec<(&str, Option<u32>, u16)> = events
        .iter()
        .map(|e| (e.operation.as_str(), e.part_number, e.status))
        .filter(|(o, _, _)| {
            o.contains("upload_part") || o.contains("abort") || o.contains("list_parts")
        })
        .collect();
    assert_eq!(
        order,
        [
            ("s3.upload_part", Some(1), 200),
            ("s3.abort_multipart_upload", None, 204),
            ("s3.list_parts", None, 404),
        ],
        "the part was answered, then aborted once: {events:#?}"
    );
    assert_eq!(fake.s3().open_uploads(), 0, "S3 keeps no part of it");
    assert!(fake.s3().objects().is_empty());
    assert!(
        run.stdout.contains("; S3 lists no part of it") && !run.stdout.contains("aborts:"),
        "{run:?}"
    );
    assert!(mutations(&fake).is_empty(), "nothing was created");
}

/// A deploy whose S3 is reached only through `proxy`'s tunnel, which the
/// proxy refuses with `status`.
fn through_a_refusing_proxy(status: u16, truss: &Path) {
    let fake = fake(NEW);
    let refusal = Fault::Status {
        status,
        retry_after: None,
        body: None,
        content_type: None,
    };
    let proxy = FaultProxy::builder(fake.addr())
        .rule(Rule::new("refuse-tunnel", refusal).method("CONNECT"))
        .start_in_background()
        .unwrap();
    let run = Invocation::new(&fake)
        .model(truss)
        .arg("s3-endpoint", "https://127.0.0.2:9")
        .env("HTTPS_PROXY", format!("http://ci:wrong@{}", proxy.addr()))
        .run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let connects: Vec<_> = proxy
        .requests()
        .into_iter()
        .filter(|e| e.method == "CONNECT")
        .collect();
    assert_eq!(connects.len(), 1, "one attempt: {connects:#?}");
    let output = all_output(&run);
    assert!(
        output.contains(&format!(
            "the proxy refused a tunnel to 127.0.0.2:9: {status}"
        )),
        "{output}"
    );
    assert!(!output.contains("attempts"), "{output}");
    assert!(mutations(&fake).is_empty(), "nothing was created");
}

#[test]
fn a_proxy_refusing_the_tunnel_with_407_is_asked_once_and_named() {
    through_a_refusing_proxy(407, &example_model());
}

#[test]
fn a_proxy_refusing_a_multipart_uploads_tunnel_with_401_is_asked_once_and_named() {
    let truss = truss_with_victim();
    through_a_refusing_proxy(401, truss.path());
}

#[test]
fn a_proxy_refusing_the_tunnel_with_403_is_asked_once_and_named() {
    through_a_refusing_proxy(403, &example_model());
}

#[test]
fn a_completion_whose_answer_is_lost_after_s3_stored_the_object_goes_on() {
    let fake = fake(NEW);
    let truss = truss_with_victim();
    // POSTs: CreateMultipartUpload signed for us-east-1 (answered with the
    // bucket's region), again for that region, then the completion: it is
    // applied and its answer lost with the connection.
    let proxy = FaultProxy::builder(fake.addr())
        .rule(
            Rule::new("lost-complete", Fault::DropAfterForward)
                .method("POST")
                .nth(3),
        )
        .start_in_background()
        .unwrap();
    let run = deploy(&fake, truss.path())
        .arg("s3-endpoint", proxy.s3_endpoint())
        .run();
    let faulted = proxy.faulted();
    assert_eq!(faulted.len(), 1, "{:#?}", proxy.requests());
    assert!(
        faulted[0]
            .query
            .as_deref()
            .unwrap_or("")
            .starts_with("uploadId="),
        "the completion was cut: {faulted:#?}"
    );
    assert_eq!(run.status(), "success", "{run:?}");
    let events = fake.s3().events();
    assert_eq!(ops(&events, "s3.complete_multipart_upload")[0].status, 200);
    assert_eq!(ops(&events, "s3.head_object").len(), 1, "{events:#?}");
    let output = all_output(&run);
    assert!(output.contains("S3 holds the archive whole"), "{output}");
    let [(key, _)] = fake.s3().objects().try_into().expect("one object");
    assert_eq!(
        mutations(&fake).len(),
        1,
        "created once: {:#?}",
        mutations(&fake)
    );
    let members = members_of(&fake, &key);
    assert!(members.iter().any(|m| m.0 == "victim.bin"));
}
