//! Deploy by content: the source's identity and what follows from it.
//!
//! The identity is the content hash the platform's published API documents
//! for a truss's source (`DeploymentPatchPointWithHashV1.hash`), the value
//! the official client computes for its live patches: every non-ignored
//! path, files by the blake3 digest of their bytes, directories as null,
//! folded in path-component order. The paths are the archive's own walk
//! (`archive::walk`, truss's ignore rules), directories included as the
//! definition says although the archive stores none.
//!
//! Where it follows the archive rather than truss's helper: a symlink to a
//! directory is neither shipped nor hashed (truss's helper lists it as a
//! directory), and a symlink to a file counts by the bytes it points at (as
//! in truss), not by its target text.
//!
//! `skip` reads the environment and decides whether a deploy can be left
//! out; `diff` shows what a deploy changes in the serving config.

use std::cmp::Ordering;
use std::path::Path;

use anyhow::Context;

use crate::archive;
use crate::baseten::OrderedObject;
use crate::label::{LABEL_KEY, PULL_REQUEST_LABEL_KEY, RUN_LABEL_KEY};

pub(crate) mod diff;
pub(crate) mod plan;
pub(crate) mod record;
pub(crate) mod reuse;
pub(crate) mod secrets;
pub(crate) mod skip;

/// A truss's content hash and what went into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ContentHash {
    /// 64 lowercase hex digits.
    pub(crate) hex: String,
    pub(crate) files: usize,
    pub(crate) dirs: usize,
    /// The bytes read (the files' sizes).
    pub(crate) bytes: u64,
}

/// One path of the source: its key and, for a file, its digest.
type Entry = (String, Option<[u8; 32]>);

/// The content hash of the truss in `root`, over the paths the archive
/// walks, each file read once (for `skip-unchanged`, before packaging).
pub(crate) fn hash(root: &Path) -> anyhow::Result<ContentHash> {
    let walk = archive::walk(root)?;
    hash_paths(root, &walk.members, &walk.dirs)
}

/// The content hash of exactly what `layout` packed, from the digests the
/// upload took of its files from the very reads whose bytes S3 stored
/// (`archive::ByRange::digests`, in member order, `None` for a symlink):
/// no file is read again. A symlink counts by the bytes it points at,
/// which the tar does not hold: the digest of the member it points at
/// when it is one, else its target read on its own.
pub(crate) fn of_upload(
    layout: &archive::Layout,
    digests: &[Option<[u8; 32]>],
) -> anyhow::Result<ContentHash> {
    let members: Vec<&archive::Member> = layout.members().collect();
    anyhow::ensure!(
        members.len() == digests.len(),
        "the upload hashed {} files where the archive has {} members",
        digests.len(),
        members.len()
    );
    let linked = layout.linked_members();
    let mut entries: Vec<Entry> = Vec::with_capacity(members.len() + layout.dirs().len());
    let mut bytes = 0u64;
    for (index, member) in members.iter().enumerate() {
        let from_upload = digests[index].map(|d| (d, member.size)).or_else(|| {
            let target = linked[index]?;
            digests[target].map(|d| (d, members[target].size))
        });
        let (digest, n) = match from_upload {
            Some(known) => known,
            None => {
                let path = layout.root().join(&member.path);
                archive::file_digest(&path)
                    .with_context(|| format!("cannot read {} to hash it", path.display()))?
            }
        };
        bytes += n;
        entries.push((member.path.clone(), Some(digest)));
    }
    entries.extend(layout.dirs().iter().map(|d| (d.clone(), None)));
    Ok(ContentHash {
        hex: fold(entries),
        files: members.len(),
        dirs: layout.dirs().len(),
        bytes,
    })
}

fn hash_paths(
    root: &Path,
    members: &[archive::Member],
    dirs: &[String],
) -> anyhow::Result<ContentHash> {
    let mut entries: Vec<Entry> = Vec::with_capacity(members.len() + dirs.len());
    let mut bytes = 0u64;
    for m in members {
        let path = root.join(&m.path);
        let (digest, n) = archive::file_digest(&path)
            .with_context(|| format!("cannot read {} to hash it", path.display()))?;
        bytes += n;
        entries.push((m.path.clone(), Some(digest)));
    }
    entries.extend(dirs.iter().map(|d| (d.clone(), None)));
    Ok(ContentHash {
        hex: fold(entries),
        files: members.len(),
        dirs: dirs.len(),
        bytes,
    })
}

/// The content hash of what an archive holds, from the digests taken
/// while the tests' reference writer wrote it: the same value [`hash`]
/// gives for the same tree.
#[cfg(test)]
pub(crate) fn of_archive(a: &archive::Archive) -> ContentHash {
    let mut entries: Vec<Entry> = a
        .members
        .iter()
        .zip(&a.digests)
        .map(|(m, d)| (m.path.clone(), Some(*d)))
        .collect();
    entries.extend(a.dirs.iter().map(|d| (d.clone(), None)));
    ContentHash {
        hex: fold(entries),
        files: a.members.len(),
        dirs: a.dirs.len(),
        bytes: a.members.iter().map(|m| m.size).sum(),
    }
}

/// Keys compared as lists of `/`-separated components, each by UTF-8 bytes
/// (which is Unicode code point order): `a/b` before `a.b`.
fn by_components(a: &str, b: &str) -> Ordering {
    a.split('/').cmp(b.split('/'))
}

/// The documented fold: for each key in component order, the digest of
/// the key's UTF-8, then a file's own digest; the hex of the result.
fn fold(mut entries: Vec<Entry>) -> String {
    entries.sort_by(|a, b| by_components(&a.0, &b.0));
    let mut hasher = blake3::Hasher::new();
    for (key, digest) in &entries {
        hasher.update(blake3::hash(key.as_bytes()).as_bytes());
        if let Some(d) = digest {
            hasher.update(d);
        }
    }
    hasher.finalize().to_hex().to_string()
}

/// The labels a create carries: the user's, in their order, then ours (the
/// content hash, the run's label `run`, then the pull request's, when the
/// run belongs to one). (A user label under any of our keys is refused as
/// an input error.)
pub(crate) fn labels_with(
    user: Option<&OrderedObject>,
    hash: &str,
    run: &str,
    pull_request: Option<&str>,
) -> OrderedObject {
    let ours = [LABEL_KEY, RUN_LABEL_KEY, PULL_REQUEST_LABEL_KEY];
    let mut all = user.cloned().unwrap_or_default();
    all.0.retain(|(k, _)| !ours.contains(&k.as_str()));
    let values = [Some(hash), Some(run), pull_request];
    for (key, value) in ours.into_iter().zip(values) {
        if let Some(v) = value {
            all.0
                .push((key.to_string(), serde_json::Value::String(v.into())));
        }
    }
    all
}

/// A label value that can be a content hash: 64 hex digits.
pub(crate) fn is_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tree the test vector was made from.
    const VECTOR_FILES: &[(&str, &[u8])] = &[
        ("config.yaml", b"model_name: vector\n"),
        ("empty.txt", b""),
        ("a/b", b"under a\n"),
        ("a.b", b"beside a\n"),
        ("model/model.py", b"class Model:\n    pass\n"),
        ("model/sub/deep/x.py", b"x = 1\n"),
        (
            "donn\u{e9}es/\u{e9}t\u{e9}.txt",
            "\u{e9}t\u{e9}\n".as_bytes(),
        ),
        ("\u{65e5}\u{672c}.txt", b"\x00\xff binary\n"),
        // Ignored by truss's default patterns: not part of the hash.
        ("__pycache__/m.cpython-311.pyc", b"ignored"),
        ("model/x.pyc", b"ignored"),
    ];

    /// Made once with the real truss 0.18.36 and the `blake3` package from
    /// PyPI (1.0.11), in the venv `scripts/python-env` builds: the tree of
    /// `VECTOR_FILES` plus an empty directory `data/empty`, written by a
    /// Python script into a temp dir, then
    /// `truss.truss_handle.patch.hash.directory_content_hash(root,
    /// truss.util.path.load_trussignore_patterns_from_truss_dir(root))`.
    /// The same script folded the documented way with `blake3` alone
    /// (os.walk, keys sorted by `k.split("/")`, `blake3(key).digest()` then
    /// `bytes.fromhex(file digest)`) and printed the same value.
    const VECTOR_HASH: &str = "81f01b92a435973ad68866f0191aab81a8755a5d4e4c857fd9d732d5cf7aa32f";

    fn vector_tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (rel, data) in VECTOR_FILES {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, data).unwrap();
        }
        std::fs::create_dir_all(d.path().join("data/empty")).unwrap();
        d
    }

    #[test]
    fn the_hash_equals_the_official_clients() {
        let d = vector_tree();
        let h = hash(d.path()).unwrap();
        assert_eq!(h.hex, VECTOR_HASH);
        // a, data, data/empty, données, model, model/sub, model/sub/deep.
        assert_eq!((h.files, h.dirs), (8, 7));
        assert!(is_hash(&h.hex));
    }

    #[test]
    fn the_archive_gives_the_same_hash_from_its_own_reads() {
        let d = vector_tree();
        let out = tempfile::tempdir().unwrap();
        let a = archive::write(d.path(), &out.path().join("t.tar")).unwrap();
        assert_eq!(of_archive(&a).hex, VECTOR_HASH);
        #[cfg(unix)]
        {
            // A symlink to a file counts by the bytes it points at.
            std::os::unix::fs::symlink("a.b", d.path().join("link")).unwrap();
            let a = archive::write(d.path(), &out.path().join("u.tar")).unwrap();
            assert_eq!(of_archive(&a).hex, hash(d.path()).unwrap().hex);
            assert_ne!(of_archive(&a).hex, VECTOR_HASH);
        }
    }

    /// The content hash from an upload's reads of `root`, its tar read in
    /// ranges of `cut` bytes.
    fn from_reads(root: &Path, cut: u64) -> ContentHash {
        let layout = std::sync::Arc::new(archive::layout(root).unwrap().with_digests());
        let mut ranges = std::collections::BTreeMap::new();
        let mut at = 0;
        while at < layout.size() {
            let len = cut.min(layout.size() - at);
            let mut reader = archive::Reader::for_range(std::sync::Arc::clone(&layout), at, len);
            let mut buf = vec![0u8; len as usize];
            reader.read_exact_at(&mut buf, at).unwrap();
            ranges.insert((at, len), reader.finish().unwrap().unwrap());
            at += len;
        }
        let digests = archive::merge_digests(&layout, &ranges).unwrap();
        of_upload(&layout, &digests).unwrap()
    }

    #[test]
    fn the_upload_gives_the_same_hash_from_its_own_reads() {
        let d = vector_tree();
        for cut in [512, 1536, 1 << 20] {
            assert_eq!(from_reads(d.path(), cut).hex, VECTOR_HASH, "cut {cut}");
        }
        #[cfg(unix)]
        {
            // A symlink counts by the bytes it points at: a member's
            // digest, or its target read on its own.
            let outside = tempfile::tempdir().unwrap();
            std::fs::write(outside.path().join("w"), b"outside").unwrap();
            std::os::unix::fs::symlink("a.b", d.path().join("link")).unwrap();
            std::os::unix::fs::symlink(outside.path().join("w"), d.path().join("out")).unwrap();
            let h = from_reads(d.path(), 1536);
            assert_eq!(h, hash(d.path()).unwrap());
            assert_ne!(h.hex, VECTOR_HASH);
        }
    }

    #[test]
    fn the_empty_directory_counts() {
        let d = vector_tree();
        std::fs::remove_dir(d.path().join("data/empty")).unwrap();
        assert_ne!(hash(d.path()).unwrap().hex, VECTOR_HASH);
    }

    #[test]
    fn components_order_before_bytes() {
        let mut keys = vec!["a.b", "a/b", "a", "b", "a/b/c", "\u{e9}", "z"];
        keys.sort_by(|a, b| by_components(a, b));
        assert_eq!(keys, ["a", "a/b", "a/b/c", "a.b", "b", "z", "\u{e9}"]);
        // Byte order alone would put `a.b` first, and give another hash.
        let entries =
            |ks: &[&str]| -> Vec<Entry> { ks.iter().map(|k| ((*k).to_string(), None)).collect() };
        let sorted = fold(entries(&["a", "a/b", "a.b"]));
        let mut hasher = blake3::Hasher::new();
        for k in ["a", "a.b", "a/b"] {
            hasher.update(blake3::hash(k.as_bytes()).as_bytes());
        }
        assert_ne!(sorted, hasher.finalize().to_hex().to_string());
    }

    #[test]
    fn ignored_files_change_nothing_and_a_byte_or_a_name_does() {
        let d = vector_tree();
        let base = hash(d.path()).unwrap().hex;
        std::fs::write(d.path().join("model/y.pyc"), b"more").unwrap();
        assert_eq!(hash(d.path()).unwrap().hex, base);
        std::fs::write(d.path().join("empty.txt"), b" ").unwrap();
        let one_byte = hash(d.path()).unwrap().hex;
        assert_ne!(one_byte, base);
        std::fs::rename(d.path().join("a.b"), d.path().join("a.c")).unwrap();
        assert_ne!(hash(d.path()).unwrap().hex, one_byte);
    }

    #[test]
    fn our_labels_follow_the_users() {
        let user: OrderedObject = serde_json::from_str(r#"{"team": "ml", "a": 1}"#).unwrap();
        assert_eq!(
            labels_with(Some(&user), VECTOR_HASH, "r1", None).dumps(),
            format!(
                r#"{{"team": "ml", "a": 1, "truss_push_content_hash": "{VECTOR_HASH}", "truss_push_run": "r1"}}"#
            )
        );
        assert_eq!(
            labels_with(None, VECTOR_HASH, "r1", None).dumps(),
            format!(r#"{{"truss_push_content_hash": "{VECTOR_HASH}", "truss_push_run": "r1"}}"#)
        );
        assert_eq!(
            labels_with(Some(&user), VECTOR_HASH, "r1", Some("acme/m#3")).dumps(),
            format!(
                r#"{{"team": "ml", "a": 1, "truss_push_content_hash": "{VECTOR_HASH}", "truss_push_run": "r1", "truss_push_pull_request": "acme/m#3"}}"#
            )
        );
    }

    #[test]
    fn what_a_label_value_may_be() {
        assert!(is_hash(VECTOR_HASH));
        assert!(!is_hash(&VECTOR_HASH[1..]));
        assert!(!is_hash(&format!("{}g", &VECTOR_HASH[1..])));
    }
}
