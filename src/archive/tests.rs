//! The archive's walk, layout, reader and reference writer, tested together.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read as _, Write as _};
use std::path::Path;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use tar::EntryType;

use super::layout::*;
use super::reference::*;
use super::walk::*;
use super::*;

/// Builds a tree under a fresh temp dir: a path ending in `/` is an
/// (empty) directory, anything else a file with the given contents.
fn tree(spec: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, contents) in spec {
        let full = dir.path().join(path);
        if path.ends_with('/') {
            fs::create_dir_all(&full).unwrap();
        } else {
            fs::create_dir_all(full.parent().unwrap()).unwrap();
            fs::write(&full, contents).unwrap();
        }
    }
    dir
}

fn paths(members: &[Member]) -> Vec<&str> {
    members.iter().map(|m| m.path.as_str()).collect()
}

fn planned(spec: &[(&str, &str)]) -> Vec<String> {
    let dir = tree(spec);
    plan(dir.path())
        .unwrap()
        .into_iter()
        .map(|m| m.path)
        .collect()
}

/// What a tar reader sees: (path, type, link target, contents, mode, uid, gid, owner names).
#[derive(Debug)]
struct Seen {
    path: String,
    kind: EntryType,
    link: Option<String>,
    contents: Vec<u8>,
    mode: u32,
    uid: u64,
    gid: u64,
    owners: (String, String),
}

fn read_tar(path: &Path) -> Vec<Seen> {
    let mut archive = tar::Archive::new(File::open(path).unwrap());
    archive
        .entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let header = entry.header().clone();
            let mut contents = Vec::new();
            entry.read_to_end(&mut contents).unwrap();
            Seen {
                path: entry.path().unwrap().to_str().unwrap().to_owned(),
                kind: header.entry_type(),
                link: entry
                    .link_name()
                    .unwrap()
                    .map(|l| l.to_str().unwrap().to_owned()),
                contents,
                mode: header.mode().unwrap(),
                uid: header.uid().unwrap(),
                gid: header.gid().unwrap(),
                owners: (
                    header.username().unwrap().unwrap_or("").to_owned(),
                    header.groupname().unwrap().unwrap_or("").to_owned(),
                ),
            }
        })
        .collect()
}

/// Also returns the temp dir holding the tar, which lives as long as it does.
fn write_and_read(root: &Path) -> (Archive, Vec<Seen>, tempfile::TempDir) {
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("truss.tgz");
    let archive = write(root, &dest).unwrap();
    let seen = read_tar(&dest);
    (archive, seen, out)
}

/// Every byte of the layout's tar, read in ranges cut at `cuts` (each
/// range with a reader of its own, as each part has).
fn read_in_ranges(layout: &Arc<Layout>, cuts: &[u64]) -> Vec<u8> {
    read_and_hash_in_ranges(layout, cuts).0
}

/// [`read_in_ranges`], and the digests each range's reader gave, by range.
fn read_and_hash_in_ranges(
    layout: &Arc<Layout>,
    cuts: &[u64],
) -> (Vec<u8>, BTreeMap<(u64, u64), RangeDigests>) {
    let mut bounds: Vec<u64> = cuts
        .iter()
        .copied()
        .filter(|&c| c > 0 && c < layout.size())
        .collect();
    bounds.push(0);
    bounds.push(layout.size());
    bounds.sort_unstable();
    bounds.dedup();
    let mut out = Vec::new();
    let mut digests = BTreeMap::new();
    for pair in bounds.windows(2) {
        let len = pair[1] - pair[0];
        let mut reader = Reader::for_range(Arc::clone(layout), pair[0], len);
        let mut buf = vec![0u8; len as usize];
        // In steps of an odd size, so steps cross every kind of boundary.
        let mut at = 0;
        while at < buf.len() {
            let end = (at + 7919).min(buf.len());
            reader
                .read_exact_at(&mut buf[at..end], pair[0] + at as u64)
                .unwrap();
            at = end;
        }
        if let Some(range) = reader.finish().unwrap() {
            digests.insert((pair[0], len), range);
        }
        out.extend_from_slice(&buf);
    }
    (out, digests)
}

/// A tree with what a tar header finds hard: names at and around the
/// 100-byte field, long link targets, empty files and sizes at and
/// around the 512-byte block.
fn varied_tree() -> tempfile::TempDir {
    let mut spec: Vec<(String, Vec<u8>)> = Vec::new();
    for size in [0usize, 1, 511, 512, 513, 1023, 1024, 1025, 20_000] {
        let mut bytes = vec![0u8; size];
        fastrand::Rng::with_seed(size as u64).fill(&mut bytes);
        spec.push((format!("sizes/f{size}.bin"), bytes));
    }
    // A path of exactly `len` bytes: `n{len}/` and then components of at
    // most 60 bytes (a file name may not pass 255).
    let path_of = |len: usize| {
        let mut path = format!("n{len}");
        while path.len() < len {
            let room = len - path.len() - 1;
            path.push('/');
            path.push_str(&"x".repeat(room.min(60)));
        }
        assert_eq!(path.len(), len);
        path
    };
    for len in [98usize, 99, 100, 101, 200, 300] {
        spec.push((path_of(len), b"named".to_vec()));
    }
    spec.push((
        format!("{}/{}", "d".repeat(120), "deep.txt"),
        b"deep".to_vec(),
    ));
    spec.push(("config.yaml".into(), b"model_name: m\n".to_vec()));
    let dir = tempfile::tempdir().unwrap();
    for (path, bytes) in &spec {
        let full = dir.path().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(&full, bytes).unwrap();
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        symlink("config.yaml", dir.path().join("short-link")).unwrap();
        let long_target = path_of(300);
        symlink(&long_target, dir.path().join("long-link")).unwrap();
        let long_name = format!("l/{}/{}", "y".repeat(80), "z".repeat(80));
        fs::create_dir_all(dir.path().join(&long_name).parent().unwrap()).unwrap();
        symlink(format!("../../{long_target}"), dir.path().join(long_name)).unwrap();
    }
    dir
}

#[test]
fn the_layout_reads_the_bytes_the_writer_writes() {
    let dir = varied_tree();
    let out = tempfile::tempdir().unwrap();
    let written = write(dir.path(), &out.path().join("t.tar")).unwrap();
    let bytes = fs::read(&written.path).unwrap();
    let layout = Arc::new(layout(dir.path()).unwrap());
    assert_eq!(layout.size(), bytes.len() as u64);
    assert_eq!(
        layout.members().cloned().collect::<Vec<_>>(),
        written.members
    );
    // The long names made records of their own.
    assert!(layout.entries.iter().any(|e| e.head_len > BLOCK));
    // Whole, then cut where ranges end inside headers, contents,
    // padding and the end blocks; the 20 000-byte file spans three.
    let big = layout
        .entries
        .iter()
        .find(|e| e.member.path == "sizes/f20000.bin")
        .unwrap();
    let contents = big.start + big.head_len;
    let cut_sets: Vec<Vec<u64>> = vec![
        vec![],
        vec![contents + 6000, contents + 13_000],
        (1..40).map(|n| n * 512).collect(),
        (1..60).map(|n| n * 1000 + 1).collect(),
        vec![layout.size() - 1024, layout.size() - 1],
    ];
    for cuts in cut_sets {
        let read = read_in_ranges(&layout, &cuts);
        assert!(read == bytes, "cut at {cuts:?}");
    }
}

/// A tree of files whose contents blake3 cuts in interesting places: empty,
/// under a chunk, a chunk and a half (contents starting 512 bytes off a
/// chunk), and 40 KiB (which ranges of 8 KiB cut into five and more).
fn digest_tree() -> tempfile::TempDir {
    let dir = varied_tree();
    for (name, size) in [("a/k1536.bin", 1536usize), ("b/big.bin", 40 * 1024 + 300)] {
        let mut bytes = vec![0u8; size];
        fastrand::Rng::with_seed(size as u64).fill(&mut bytes);
        fs::create_dir_all(dir.path().join(name).parent().unwrap()).unwrap();
        fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

/// Each member's digest from the ranges' reads, against blake3 of the file.
fn assert_digests_are_the_files(
    layout: &Layout,
    ranges: &BTreeMap<(u64, u64), RangeDigests>,
    why: &str,
) {
    let digests = merge_digests(layout, ranges).unwrap();
    for (member, digest) in layout.members().zip(&digests) {
        match member.kind {
            MemberKind::File => {
                let want =
                    *blake3::hash(&fs::read(layout.root().join(&member.path)).unwrap()).as_bytes();
                assert_eq!(*digest, Some(want), "{} ({why})", member.path);
            }
            MemberKind::Symlink { .. } => assert_eq!(*digest, None, "{}", member.path),
        }
    }
}

/// Cuts at every offset of interest in a file's contents: chunk
/// boundaries, 512 bytes off them, inside its first chunk, a byte before
/// and after its end.
fn cuts_in(entry: &Entry) -> Vec<u64> {
    let at = entry.start + entry.head_len;
    let len = entry.member.size;
    let mut cuts = vec![
        at + 100,
        at + 512,
        at + 1024,
        at + 1536,
        at + len.saturating_sub(1),
        at + len + 1,
    ];
    cuts.extend((1..len / 1024).map(|k| at + k * 1024));
    cuts
}

#[test]
fn the_ranges_reads_give_each_files_blake3_digest_wherever_they_are_cut() {
    let dir = digest_tree();
    let layout = Arc::new(layout(dir.path()).unwrap().with_digests());
    let big = layout
        .entries
        .iter()
        .find(|e| e.member.path == "b/big.bin")
        .unwrap();
    let big_at = big.start + big.head_len;
    let mut cut_sets: Vec<Vec<u64>> = vec![
        vec![],
        // Ranges of 8 KiB cut the big file five times (3+ ranges span it).
        (1..layout.size() / 8192).map(|n| n * 8192).collect(),
        // Every 512-byte block: each small file straddles a cut.
        (1..layout.size() / 512).map(|n| n * 512).collect(),
        // Inside the big file's first chunk, 512 off a chunk, on one.
        vec![big_at + 100, big_at + 512 + 3 * 1024, big_at + 16 * 1024],
    ];
    for entry in &layout.entries {
        cut_sets.push(cuts_in(entry));
    }
    for cuts in cut_sets {
        let (_, ranges) = read_and_hash_in_ranges(&layout, &cuts);
        assert_digests_are_the_files(&layout, &ranges, &format!("cuts {cuts:?}"));
    }
}

#[test]
fn a_range_read_again_counts_once_and_a_missing_one_gives_no_digest() {
    let dir = digest_tree();
    let layout = Arc::new(layout(dir.path()).unwrap().with_digests());
    let cuts: Vec<u64> = (1..layout.size() / 8192).map(|n| n * 8192).collect();
    let (_, mut ranges) = read_and_hash_in_ranges(&layout, &cuts);
    // A retried part: its range read once more replaces its own digests.
    let (_, again) = read_and_hash_in_ranges(&layout, &cuts);
    let (&key, range) = again.iter().nth(2).unwrap();
    ranges.insert(key, range.clone());
    assert_digests_are_the_files(&layout, &ranges, "a range read twice");
    ranges.remove(&key);
    let e = merge_digests(&layout, &ranges).unwrap_err();
    assert!(e.to_string().contains("from the upload's reads"), "{e}");
}

#[test]
fn a_reader_without_digests_or_read_out_of_order_hands_none_out() {
    let dir = digest_tree();
    let plain = Arc::new(layout(dir.path()).unwrap());
    let (_, ranges) = read_and_hash_in_ranges(&plain, &[8192]);
    assert!(ranges.is_empty());
    let layout = Arc::new(layout(dir.path()).unwrap().with_digests());
    let mut reader = Reader::for_range(Arc::clone(&layout), 0, layout.size());
    let mut buf = vec![0u8; 4096];
    reader.read_exact_at(&mut buf, 8192).unwrap();
    reader.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(reader.finish().unwrap(), None);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    #[test]
    fn random_cuts_give_each_files_blake3_digest(
        cuts in proptest::collection::vec(0u64..80_000, 0..12),
    ) {
        let dir = digest_tree();
        let layout = Arc::new(layout(dir.path()).unwrap().with_digests());
        let (bytes, ranges) = read_and_hash_in_ranges(&layout, &cuts);
        proptest::prop_assert_eq!(bytes.len() as u64, layout.size());
        assert_digests_are_the_files(&layout, &ranges, &format!("cuts {cuts:?}"));
    }
}

#[test]
fn a_file_that_changes_after_the_layout_fails_the_read_naming_it() {
    type Change = fn(&Path);
    let changes: [(&str, Change, &str); 4] = [
        (
            "grown",
            |p| fs::write(p, vec![1u8; 3000]).unwrap(),
            "now 3000",
        ),
        ("truncated", |p| fs::write(p, b"x").unwrap(), "now 1"),
        (
            "touched",
            |p| {
                File::options()
                    .write(true)
                    .open(p)
                    .unwrap()
                    .set_modified(UNIX_EPOCH + std::time::Duration::from_secs(86_400))
                    .unwrap()
            },
            "modification time",
        ),
        ("deleted", |p| fs::remove_file(p).unwrap(), "deleted"),
    ];
    for (what, change, says) in changes {
        let victim = "v".repeat(2000);
        let dir = tree(&[("a.txt", "first"), ("victim.bin", victim.as_str())]);
        let layout = Arc::new(layout(dir.path()).unwrap());
        change(&dir.path().join("victim.bin"));
        let mut reader = Reader::new(Arc::clone(&layout));
        let mut buf = vec![0u8; layout.size() as usize];
        let err = reader.read_exact_at(&mut buf, 0).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("victim.bin"), "{what}: {text}");
        assert!(text.contains(says), "{what}: {text}");
        assert!(
            text.contains("changed while the archive was being uploaded"),
            "{text}"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_file_replaced_by_another_or_by_a_fifo_fails_the_read_without_blocking() {
    let victim = "v".repeat(2000);
    let dir = tree(&[("victim.bin", victim.as_str())]);
    let layout = Arc::new(layout(dir.path()).unwrap());
    let path = dir.path().join("victim.bin");
    // Same size and time, another inode: an atomic write's rename.
    let meta = fs::metadata(&path).unwrap();
    let other = dir.path().join("other.tmp");
    fs::write(&other, &victim).unwrap();
    File::options()
        .write(true)
        .open(&other)
        .unwrap()
        .set_modified(meta.modified().unwrap())
        .unwrap();
    fs::rename(&other, &path).unwrap();
    let mut buf = vec![0u8; layout.size() as usize];
    let err = Reader::new(Arc::clone(&layout))
        .read_exact_at(&mut buf, 0)
        .unwrap_err();
    assert!(
        err.to_string().contains("another file took its place"),
        "{err}"
    );
    fs::remove_file(&path).unwrap();
    mkfifo(&path);
    let err = Reader::new(Arc::clone(&layout))
        .read_exact_at(&mut buf, 0)
        .unwrap_err();
    assert!(
        err.to_string().contains("no longer a regular file"),
        "{err}"
    );
}

#[test]
fn an_empty_file_deleted_before_its_header_is_read_fails_the_read() {
    let dir = tree(&[("a.txt", "x"), ("empty.txt", "")]);
    let layout = Arc::new(layout(dir.path()).unwrap());
    fs::remove_file(dir.path().join("empty.txt")).unwrap();
    let mut buf = vec![0u8; layout.size() as usize];
    let err = Reader::new(Arc::clone(&layout))
        .read_exact_at(&mut buf, 0)
        .unwrap_err();
    assert!(err.to_string().contains("empty.txt"), "{err}");
    assert!(err.to_string().contains("it was deleted"), "{err}");
}

#[test]
fn a_file_that_changes_while_it_is_read_fails_at_its_end() {
    let victim = "v".repeat(5000);
    let dir = tree(&[("victim.bin", victim.as_str())]);
    let layout = Arc::new(layout(dir.path()).unwrap());
    let mut reader = Reader::new(Arc::clone(&layout));
    let mut head = vec![0u8; 1024];
    reader.read_exact_at(&mut head, 0).unwrap();
    // Grown in place while its first bytes are on their way.
    fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("victim.bin"))
        .unwrap()
        .write_all(b"more")
        .unwrap();
    let mut rest = vec![0u8; 5000];
    let err = reader.read_exact_at(&mut rest, 1024).unwrap_err();
    assert!(err.to_string().contains("now 5004"), "{err}");
}

#[test]
fn defaults_are_the_80_truss_patterns() {
    let patterns: Vec<&str> = pattern_lines(DEFAULT_PATTERNS).collect();
    assert_eq!(patterns.len(), 80);
    assert_eq!(patterns.first(), Some(&"__pycache__/"));
    assert_eq!(patterns.last(), Some(&"*.swp"));
    build_matcher(DEFAULT_PATTERNS, None).unwrap();
}

#[test]
fn pattern_lines_trim_and_skip_blank_and_comment_lines() {
    let cases: &[(&str, &[&str])] = &[
        ("", &[]),
        ("a\nb\n", &["a", "b"]),
        ("  *.tmp  \r\n", &["*.tmp"]),
        ("\n   \n\t\n", &[]),
        ("# note\n  # indented note\nx", &["x"]),
        ("!keep.log", &["!keep.log"]),
        ("a#b", &["a#b"]),
    ];
    for (text, want) in cases {
        let got: Vec<&str> = pattern_lines(text).collect();
        assert_eq!(&got, want, "for {text:?}");
    }
}

#[test]
fn action_table() {
    use Action::*;
    use Shape::*;
    let cases = [
        (Dir, false, Descend),
        (Dir, true, Skip),
        (File, false, Store),
        (File, true, Skip),
        (LinkToFile, false, Store),
        (LinkToFile, true, Skip),
        (LinkToDir, false, Skip),
        (LinkToDir, true, Skip),
        (BrokenLink, false, Refuse),
        (BrokenLink, true, Skip),
        (Special, false, Refuse),
        (Special, true, Skip),
    ];
    for (shape, ignored, want) in cases {
        assert_eq!(action(shape, ignored), want, "{shape:?} ignored={ignored}");
    }
}

#[test]
fn lib_pattern_matches_directories_at_any_depth_but_not_files() {
    let got = planned(&[
        ("packages/lib/util.py", "x"),
        ("packages/lib2/ok.py", "x"),
        ("lib", "a file named lib"),
    ]);
    assert_eq!(got, ["lib", "packages/lib2/ok.py"]);
    let got = planned(&[
        ("lib/top.py", "x"),
        ("pkg/lib", "x"),
        ("pkg/lib64/a.txt", "x"),
    ]);
    assert_eq!(got, ["pkg/lib"]);
}

#[test]
fn docs_build_is_anchored_at_the_root() {
    let got = planned(&[
        ("docs/_build/x", "x"),
        ("docs/index.md", "x"),
        ("x/docs/_build/y", "x"),
    ]);
    assert_eq!(got, ["docs/index.md", "x/docs/_build/y"]);
}

#[test]
fn dot_git_matches_at_any_depth_as_file_or_dir() {
    let got = planned(&[
        (".git/config", "x"),
        ("sub/.git", "gitdir: ../.git/modules/sub"),
        ("sub/deep/.git/HEAD", "x"),
        ("sub/a.py", "x"),
        (".gitignore", "x"),
    ]);
    assert_eq!(got, [".gitignore", "sub/a.py"]);
}

#[test]
fn compiled_python_is_dropped() {
    let got = planned(&[
        ("model.py", "x"),
        ("model.pyc", "x"),
        ("model.pyo", "x"),
        ("model.pyd", "x"),
        ("model.pyx", "x"),
        ("__pycache__/model.cpython-311.pyc", "x"),
    ]);
    assert_eq!(got, ["model.py", "model.pyx"]);
}

#[test]
fn repo_truss_ignore_replaces_the_defaults() {
    let got = planned(&[
        (TRUSS_IGNORE_FILE, "secret.txt\n"),
        ("secret.txt", "x"),
        ("build/out.txt", "x"),
        ("a.pyc", "x"),
        ("model/secret.txt", "x"),
    ]);
    assert_eq!(got, [TRUSS_IGNORE_FILE, "a.pyc", "build/out.txt"]);
}

#[test]
fn truss_ignore_lines_are_trimmed_like_truss_does() {
    let got = planned(&[
        (
            TRUSS_IGNORE_FILE,
            "# comment\n\n   *.tmp   \n  # indented comment\n",
        ),
        ("a.tmp", "x"),
        ("b.txt", "x"),
    ]);
    assert_eq!(got, [TRUSS_IGNORE_FILE, "b.txt"]);
}

#[test]
fn an_empty_truss_ignore_keeps_everything() {
    let got = planned(&[(TRUSS_IGNORE_FILE, ""), (".git/HEAD", "x"), ("a.pyc", "x")]);
    assert_eq!(got, [TRUSS_IGNORE_FILE, "a.pyc", ".git/HEAD"]);
}

#[test]
fn negation_reincludes_files_but_not_under_an_ignored_dir() {
    let got = planned(&[
        (
            TRUSS_IGNORE_FILE,
            "*.log\n!keep.log\nlogs/\n!logs/keep.txt\n",
        ),
        ("keep.log", "x"),
        ("other.log", "x"),
        ("sub/keep.log", "x"),
        ("logs/keep.txt", "x"),
    ]);
    assert_eq!(got, [TRUSS_IGNORE_FILE, "keep.log", "sub/keep.log"]);
}

#[test]
fn an_invalid_truss_ignore_pattern_is_an_error_naming_it() {
    let dir = tree(&[(TRUSS_IGNORE_FILE, "a/**b{\n")]);
    let err = format!("{:#}", plan(dir.path()).unwrap_err());
    assert!(err.contains("a/**b{"), "{err}");
    assert!(err.contains(TRUSS_IGNORE_FILE), "{err}");
}

#[test]
fn order_is_files_sorted_bytewise_then_subdirectories_depth_first() {
    let got = planned(&[
        ("zz.py", "x"),
        ("config.yaml", "x"),
        ("Z.txt", "x"),
        ("b/2.txt", "x"),
        ("b/1.txt", "x"),
        ("a/y/deep.txt", "x"),
        ("a/z.txt", "x"),
        ("a/x/deep.txt", "x"),
        ("a.txt", "x"),
        ("B/upper.txt", "x"),
    ]);
    assert_eq!(
        got,
        [
            "Z.txt",
            "a.txt",
            "config.yaml",
            "zz.py",
            "B/upper.txt",
            "a/z.txt",
            "a/x/deep.txt",
            "a/y/deep.txt",
            "b/1.txt",
            "b/2.txt",
        ]
    );
}

#[test]
fn two_runs_give_identical_bytes() {
    let dir = tree(&[
        ("config.yaml", "model_name: m\n"),
        ("model/model.py", "class Model: pass\n"),
        ("data/w.bin", "0123456789"),
    ]);
    let out = tempfile::tempdir().unwrap();
    let first = write(dir.path(), &out.path().join("1.tar")).unwrap();
    let second = write(dir.path(), &out.path().join("2.tar")).unwrap();
    assert_eq!(first.members, second.members);
    assert_eq!(
        fs::read(&first.path).unwrap(),
        fs::read(&second.path).unwrap()
    );
}

#[test]
fn members_are_regular_files_with_contents_and_normalized_owners() {
    let dir = tree(&[
        ("config.yaml", "model_name: m\n"),
        ("model/model.py", "class Model: pass\n"),
        ("empty/", ""),
        ("nested/empty/", ""),
        ("zero.txt", ""),
    ]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.path().join("model/model.py");
        fs::set_permissions(&script, fs::Permissions::from_mode(0o750)).unwrap();
    }
    let (archive, seen, _out) = write_and_read(dir.path());
    let names: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(names, ["config.yaml", "zero.txt", "model/model.py"]);
    assert_eq!(paths(&archive.members), names);
    assert!(seen.iter().all(|s| s.kind == EntryType::Regular));
    assert_eq!(seen[0].contents, b"model_name: m\n");
    assert_eq!(seen[1].contents, b"");
    assert_eq!(seen[2].contents, b"class Model: pass\n");
    assert_eq!(archive.members[2].size, 18);
    for s in &seen {
        assert_eq!((s.uid, s.gid), (0, 0), "{}", s.path);
        assert_eq!(s.owners, (String::new(), String::new()), "{}", s.path);
    }
    #[cfg(unix)]
    assert_eq!(seen[2].mode, 0o750);
    assert_eq!(archive.size, fs::metadata(&archive.path).unwrap().len());
}

#[test]
fn mtime_is_copied_from_the_file() {
    let dir = tree(&[("a.txt", "x")]);
    let when = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    File::options()
        .write(true)
        .open(dir.path().join("a.txt"))
        .unwrap()
        .set_modified(when)
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let archive = write(dir.path(), &out.path().join("t.tar")).unwrap();
    let mut tar = tar::Archive::new(File::open(&archive.path).unwrap());
    let entry = tar.entries().unwrap().next().unwrap().unwrap();
    assert_eq!(entry.header().mtime().unwrap(), 1_700_000_000);
}

#[test]
fn long_paths_and_link_targets_round_trip() {
    let long_dir = "d".repeat(60);
    let long_path = format!("{long_dir}/{}/file.txt", "e".repeat(60));
    assert!(long_path.len() > 100);
    let dir = tree(&[(long_path.as_str(), "deep")]);
    #[cfg(unix)]
    std::os::unix::fs::symlink(&long_path, dir.path().join("link")).unwrap();
    let (_, seen, _out) = write_and_read(dir.path());
    let file = seen.iter().find(|s| s.path == long_path).unwrap();
    assert_eq!(file.contents, b"deep");
    #[cfg(unix)]
    {
        let link = seen.iter().find(|s| s.path == "link").unwrap();
        assert_eq!(link.link.as_deref(), Some(long_path.as_str()));
    }
}

#[cfg(unix)]
#[test]
fn symlink_to_file_is_stored_as_a_symlink_and_linked_dirs_are_skipped() {
    use std::os::unix::fs::symlink;
    let dir = tree(&[("data/real.txt", "payload"), ("other/inner.txt", "x")]);
    symlink("data/real.txt", dir.path().join("alias.txt")).unwrap();
    symlink("other", dir.path().join("linked_dir")).unwrap();
    symlink(
        dir.path().join("other"),
        dir.path().join("data/abs_linked_dir"),
    )
    .unwrap();

    let members = plan(dir.path()).unwrap();
    assert_eq!(
        members,
        [
            Member {
                path: "alias.txt".into(),
                size: 0,
                kind: MemberKind::Symlink {
                    target: "data/real.txt".into()
                },
            },
            Member {
                path: "data/real.txt".into(),
                size: 7,
                kind: MemberKind::File,
            },
            Member {
                path: "other/inner.txt".into(),
                size: 1,
                kind: MemberKind::File,
            },
        ]
    );
    let (_, seen, _out) = write_and_read(dir.path());
    assert_eq!(seen[0].kind, EntryType::Symlink);
    assert_eq!(seen[0].link.as_deref(), Some("data/real.txt"));
    assert!(seen[0].contents.is_empty());
    assert_eq!(seen[1].contents, b"payload");
    assert!(seen.iter().all(|s| !s.path.contains("linked_dir")));
}

#[cfg(unix)]
#[test]
fn broken_symlink_is_an_error_naming_it_unless_ignored() {
    use std::os::unix::fs::symlink;
    let dir = tree(&[("config.yaml", "x")]);
    symlink("missing.bin", dir.path().join("weights.bin")).unwrap();
    let err = format!("{:#}", plan(dir.path()).unwrap_err());
    assert!(err.contains("weights.bin"), "{err}");
    assert!(err.contains("missing.bin"), "{err}");
    assert!(err.contains(TRUSS_IGNORE_FILE), "{err}");

    fs::write(dir.path().join(TRUSS_IGNORE_FILE), "weights.bin\n").unwrap();
    assert_eq!(
        paths(&plan(dir.path()).unwrap()),
        [TRUSS_IGNORE_FILE, "config.yaml"]
    );
}

#[cfg(unix)]
#[test]
fn a_socket_is_an_error_unless_ignored() {
    let dir = tree(&[("config.yaml", "x")]);
    let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("s.sock")).unwrap();
    let err = format!("{:#}", plan(dir.path()).unwrap_err());
    assert!(err.contains("s.sock"), "{err}");
    fs::write(dir.path().join(TRUSS_IGNORE_FILE), "*.sock\n").unwrap();
    assert_eq!(
        paths(&plan(dir.path()).unwrap()),
        [TRUSS_IGNORE_FILE, "config.yaml"]
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_to_a_device_or_fifo_is_an_error_naming_it_unless_ignored() {
    use std::os::unix::fs::symlink;
    let dir = tree(&[("config.yaml", "x")]);
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    fs::write(dir.path().join(TRUSS_IGNORE_FILE), "pipe\n").unwrap();
    // Hashing what these point at would never end (the device) or block
    // (the FIFO, nobody writing): refused by the walk, before any read.
    for (link, target, kind) in [
        ("zero.bin", Path::new("/dev/zero"), "device"),
        ("piped.bin", fifo.as_path(), "FIFO (named pipe)"),
    ] {
        symlink(target, dir.path().join(link)).unwrap();
        let err = format!("{:#}", plan(dir.path()).unwrap_err());
        assert_eq!(
            err,
            format!(
                "{} is a symlink to {}, which is a {kind}, not a regular file or directory: remove the link or list it in {TRUSS_IGNORE_FILE}",
                dir.path().join(link).display(),
                target.display()
            )
        );
        fs::remove_file(dir.path().join(link)).unwrap();
    }
    symlink("/dev/zero", dir.path().join("zero.bin")).unwrap();
    fs::write(dir.path().join(TRUSS_IGNORE_FILE), "pipe\nzero.bin\n").unwrap();
    assert_eq!(
        paths(&plan(dir.path()).unwrap()),
        [TRUSS_IGNORE_FILE, "config.yaml"]
    );
}

#[cfg(unix)]
#[test]
fn a_digest_read_refuses_what_is_not_a_regular_file() {
    let err = file_digest(Path::new("/dev/zero")).unwrap_err();
    assert_eq!(err.to_string(), "it is a device, not a regular file");
    let dir = tree(&[("config.yaml", "x")]);
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let err = file_digest(&fifo).unwrap_err();
    assert_eq!(
        err.to_string(),
        "it is a FIFO (named pipe), not a regular file"
    );
}

#[cfg(unix)]
#[test]
fn a_non_utf8_name_is_an_error_unless_ignored() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tree(&[("config.yaml", "x")]);
    let name = std::ffi::OsStr::from_bytes(b"bad\xff.txt");
    fs::write(dir.path().join(name), "x").unwrap();
    let err = format!("{:#}", plan(dir.path()).unwrap_err());
    assert!(err.contains("UTF-8"), "{err}");
    fs::write(dir.path().join(TRUSS_IGNORE_FILE), "bad*\n").unwrap();
    assert_eq!(
        paths(&plan(dir.path()).unwrap()),
        [TRUSS_IGNORE_FILE, "config.yaml"]
    );
}

#[test]
fn a_root_that_is_not_a_directory_is_an_error() {
    let dir = tree(&[("model.py", "x")]);
    for root in [dir.path().join("model.py"), dir.path().join("absent")] {
        let err = format!("{:#}", plan(&root).unwrap_err());
        assert!(err.contains(&*root.to_string_lossy()), "{err}");
        assert!(err.contains("truss-directory"), "{err}");
    }
}

#[test]
fn the_archive_may_not_be_written_inside_the_truss() {
    let dir = tree(&[("config.yaml", "x"), ("out/", "")]);
    let err = format!(
        "{:#}",
        write(dir.path(), &dir.path().join("out/t.tar")).unwrap_err()
    );
    assert!(err.contains("inside the truss directory"), "{err}");
    assert!(!dir.path().join("out/t.tar").exists());
}

#[test]
fn exact_len_refuses_a_short_body() {
    let mut short = ExactLen {
        inner: &b"abc"[..],
        remaining: 5,
        hasher: &mut blake3::Hasher::new(),
    };
    let err = io::copy(&mut short, &mut io::sink()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);

    let mut long = ExactLen {
        inner: &b"abcdef"[..],
        remaining: 4,
        hasher: &mut blake3::Hasher::new(),
    };
    let mut out = Vec::new();
    io::copy(&mut long, &mut out).unwrap();
    assert_eq!(out, b"abcd");
}

/// Makes a FIFO (named pipe) at `path`.
#[cfg(unix)]
fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}
