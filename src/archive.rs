//! The truss archive: walk a truss directory with truss's ignore rules and stream it into a plain tar.
//!
//! What matches `truss push`: an uncompressed tar whose member
//! names are relative to the truss root; only regular files and symlinks to
//! files, never directory entries (so empty directories vanish); symlinked
//! directories neither followed nor stored; a root `.truss_ignore` replaces the
//! 80 default patterns; ignored directories are pruned, so a negation cannot
//! bring back anything beneath one.
//!
//! Where we deliberately differ, so that identical trees give identical
//! archives on any machine:
//! * Order. truss lists a directory's files in raw `readdir` order. We walk
//!   depth-first, pre-order: a directory's files first, sorted bytewise by
//!   name, then each subdirectory, sorted bytewise, recursively. That is
//!   truss's own shape (its subdirectories are already sorted), so the only
//!   change is that files are sorted too.
//! * Ownership. truss copies uid, gid and owner names. We write uid/gid 0 and
//!   empty names: the CI runner's accounts mean nothing to the remote builder,
//!   and identical trees then give identical bytes on any machine. Permission
//!   bits and mtime (whole seconds) are copied from the file.
//!
//! Headers are GNU, so paths and link targets longer than 100 bytes are kept
//! whole via long-name records.

use std::fs::{self, File, Metadata};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use anyhow::{Context, bail};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use tar::{EntryType, Header};

use crate::files;

/// A file in the truss root whose patterns replace the defaults.
pub(crate) const TRUSS_IGNORE_FILE: &str = ".truss_ignore";

/// A `.truss_ignore` larger than this (MiB) is refused: patterns, not data.
const TRUSS_IGNORE_MAX_MIB: u64 = 1;

/// truss's bundled `truss/util/.truss_ignore` patterns, in file order.
const DEFAULT_PATTERNS: &str = include_str!("truss_ignore_default.txt");

/// One tar member, as planned from metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    /// Relative to the truss root, `/`-separated, no leading `./`.
    pub path: String,
    /// Content bytes; 0 for a symlink.
    pub size: u64,
    pub kind: MemberKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MemberKind {
    File,
    /// The link's own target text, unresolved (may be relative or absolute).
    Symlink {
        target: String,
    },
}

/// A written tar file and what went into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Archive {
    /// The tar file.
    pub path: PathBuf,
    /// Its length in bytes.
    pub size: u64,
    pub members: Vec<Member>,
    /// The directories the walk descended into ([`Walk::dirs`]).
    pub dirs: Vec<String>,
    /// The blake3 digest of each member's content, in `members` order,
    /// taken from the very bytes the tar stores (a symlink: the bytes of
    /// the file it points at), so the content hash costs no second read.
    pub digests: Vec<[u8; 32]>,
}

/// What the walk found: the members the archive stores and, for the
/// content hash (which counts directories although the archive stores
/// none), every directory it descended into, in walk order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Walk {
    pub members: Vec<Member>,
    /// Relative to the truss root, `/`-separated, empty ones included.
    pub dirs: Vec<String>,
}

/// Walks `root` applying the ignore rules; nothing is read but metadata.
pub(crate) fn plan(root: &Path) -> anyhow::Result<Vec<Member>> {
    Ok(walk(root)?.members)
}

/// The one walk of a truss: [`plan`]'s members and the directories they
/// sit in, as the ignore rules leave them.
pub(crate) fn walk(root: &Path) -> anyhow::Result<Walk> {
    let root_meta = fs::metadata(root).with_context(|| {
        format!(
            "cannot read the truss directory {}: point truss-directory at the folder holding config.yaml",
            root.display()
        )
    })?;
    if !root_meta.is_dir() {
        bail!(
            "the truss directory {} is not a directory: point truss-directory at the folder holding config.yaml",
            root.display()
        );
    }
    let matcher = load_matcher(root)?;

    let mut members = Vec::new();
    let mut dirs = Vec::new();
    // A stack of directories still to visit, relative to the root; pushing a
    // directory's subdirectories in reverse makes them pop in sorted order.
    let mut pending = vec![PathBuf::new()];
    while let Some(dir) = pending.pop() {
        let mut subdirs = Vec::new();
        for entry in sorted_entries(&root.join(&dir))? {
            let rel = dir.join(entry.file_name());
            let found = inspect(&entry, &rel)?;
            let ignored = matcher
                .matched(&rel, found.shape.tested_as_dir())
                .is_ignore();
            match action(found.shape, ignored) {
                Action::Skip => {}
                Action::Descend => {
                    dirs.push(member_path(&rel)?);
                    subdirs.push(rel);
                }
                Action::Store => members.push(Member {
                    path: member_path(&rel)?,
                    size: found.size,
                    kind: match found.target {
                        Some(target) => MemberKind::Symlink {
                            target: target_text(&rel, target)?,
                        },
                        None => MemberKind::File,
                    },
                }),
                Action::Refuse => return Err(refusal(root, &rel, found)),
            }
        }
        pending.extend(subdirs.into_iter().rev());
    }
    Ok(Walk { members, dirs })
}

/// Writes the tar for `root` into `dest` (a file path in a temp dir the caller owns).
pub(crate) fn write(root: &Path, dest: &Path) -> anyhow::Result<Archive> {
    let Walk { members, dirs } = walk(root)?;
    refuse_dest_inside(root, dest)?;
    let file = File::create(dest)
        .with_context(|| format!("cannot create the archive file {}", dest.display()))?;
    let mut builder = tar::Builder::new(BufWriter::new(file));
    let mut digests = Vec::with_capacity(members.len());
    for member in &members {
        let digest = append_member(&mut builder, root, member)
            .with_context(|| format!("while adding {} to the archive", member.path))?;
        digests.push(digest);
    }
    let mut out = builder
        .into_inner()
        .with_context(|| format!("while finishing the archive {}", dest.display()))?;
    out.flush()
        .with_context(|| format!("while writing the archive {}", dest.display()))?;
    let size = out
        .get_ref()
        .metadata()
        .with_context(|| format!("cannot read the size of the archive {}", dest.display()))?
        .len();
    Ok(Archive {
        path: dest.to_path_buf(),
        size,
        members,
        dirs,
        digests,
    })
}

/// The kinds of directory entry the walk tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Dir,
    File,
    LinkToFile,
    LinkToDir,
    BrokenLink,
    /// Socket, FIFO or device: nothing truss can ship.
    Special,
}

impl Shape {
    /// truss (via `os.walk`) files a symlinked directory among directories, so
    /// directory-only patterns apply to it; a broken link counts as a file.
    fn tested_as_dir(self) -> bool {
        matches!(self, Shape::Dir | Shape::LinkToDir)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Descend,
    Store,
    Skip,
    Refuse,
}

/// What the walk does with an entry. Ignore rules come first, so an ignored
/// broken link or socket is no error.
fn action(shape: Shape, ignored: bool) -> Action {
    match (shape, ignored) {
        (_, true) => Action::Skip,
        (Shape::Dir, false) => Action::Descend,
        (Shape::File | Shape::LinkToFile, false) => Action::Store,
        (Shape::LinkToDir, false) => Action::Skip,
        (Shape::BrokenLink | Shape::Special, false) => Action::Refuse,
    }
}

/// An entry's shape plus the metadata a member needs.
struct Found {
    shape: Shape,
    size: u64,
    target: Option<PathBuf>,
    /// Why a link's target could not be reached.
    link_error: Option<io::Error>,
}

fn inspect(entry: &fs::DirEntry, rel: &Path) -> anyhow::Result<Found> {
    let path = entry.path();
    let kind = entry
        .file_type()
        .with_context(|| format!("cannot read the type of {}", rel.display()))?;
    let mut found = Found {
        shape: Shape::Special,
        size: 0,
        target: None,
        link_error: None,
    };
    if kind.is_dir() {
        found.shape = Shape::Dir;
    } else if kind.is_file() {
        found.shape = Shape::File;
        found.size = entry
            .metadata()
            .with_context(|| format!("cannot read the size of {}", rel.display()))?
            .len();
    } else if kind.is_symlink() {
        found.target = Some(
            fs::read_link(&path)
                .with_context(|| format!("cannot read the symlink {}", rel.display()))?,
        );
        match fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => found.shape = Shape::LinkToDir,
            Ok(_) => found.shape = Shape::LinkToFile,
            Err(err) => {
                found.shape = Shape::BrokenLink;
                found.link_error = Some(err);
            }
        }
    }
    Ok(found)
}

fn refusal(root: &Path, rel: &Path, found: Found) -> anyhow::Error {
    let shown = root.join(rel);
    match (found.target, found.link_error) {
        (Some(target), Some(err)) => anyhow::anyhow!(
            "{} is a symlink to {}, which cannot be opened ({err}): fix or remove the link, or list it in {TRUSS_IGNORE_FILE}",
            shown.display(),
            target.display()
        ),
        _ => anyhow::anyhow!(
            "{} is not a regular file, directory or symlink (a socket, FIFO or device): remove it or list it in {TRUSS_IGNORE_FILE}",
            shown.display()
        ),
    }
}

/// A directory's entries sorted bytewise by name, so the walk does not depend
/// on the filesystem's `readdir` order.
fn sorted_entries(dir: &Path) -> anyhow::Result<Vec<fs::DirEntry>> {
    let mut entries = fs::read_dir(dir)
        .and_then(|it| it.collect::<io::Result<Vec<_>>>())
        .with_context(|| {
            format!(
                "cannot list {}: make it readable or list it in {TRUSS_IGNORE_FILE}",
                dir.display()
            )
        })?;
    entries.sort_by(|a, b| {
        a.file_name()
            .as_encoded_bytes()
            .cmp(b.file_name().as_encoded_bytes())
    });
    Ok(entries)
}

/// The member name for a walked path: components joined with `/`.
fn member_path(rel: &Path) -> anyhow::Result<String> {
    let mut parts = Vec::new();
    for part in rel.components() {
        let text = part.as_os_str().to_str().with_context(|| {
            format!(
                "{} has a name that is not valid UTF-8: rename it or list it in {TRUSS_IGNORE_FILE}",
                rel.display()
            )
        })?;
        parts.push(text);
    }
    Ok(parts.join("/"))
}

fn target_text(rel: &Path, target: PathBuf) -> anyhow::Result<String> {
    target.into_os_string().into_string().map_err(|raw| {
        anyhow::anyhow!(
            "the symlink {} points at {}, which is not valid UTF-8: rename the target or list the link in {TRUSS_IGNORE_FILE}",
            rel.display(),
            Path::new(&raw).display()
        )
    })
}

/// The patterns in force, one per line: trimmed, blank and `#` lines dropped
/// (truss strips both ends, so a leading space does not make a pattern).
fn pattern_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

pub(crate) fn load_matcher(root: &Path) -> anyhow::Result<Gitignore> {
    let ignore_file = root.join(TRUSS_IGNORE_FILE);
    let bytes = match files::read_regular_file(&ignore_file, TRUSS_IGNORE_MAX_MIB) {
        Ok(bytes) => bytes,
        Err(files::ReadError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
            return build_matcher(DEFAULT_PATTERNS, None);
        }
        Err(e) => bail!(
            "cannot read {}: {e}: make it a readable UTF-8 text file or remove it",
            ignore_file.display()
        ),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        bail!(
            "cannot read {}: it is not UTF-8 text: make it a readable UTF-8 text file or remove it",
            ignore_file.display()
        );
    };
    build_matcher(&text, Some(&ignore_file))
}

fn build_matcher(text: &str, origin: Option<&Path>) -> anyhow::Result<Gitignore> {
    // Relative paths never start with `/`, so the crate's prefix stripping
    // can never eat a directory that happens to share the root's name.
    let mut builder = GitignoreBuilder::new("/");
    for line in pattern_lines(text) {
        builder
            .add_line(origin.map(Path::to_path_buf), line)
            .with_context(|| {
                let from = origin.map_or("the default ignore patterns".to_owned(), |path| {
                    path.display().to_string()
                });
                format!(
                    "pattern `{line}` in {from} is not a valid gitignore pattern: fix or remove it"
                )
            })?;
    }
    builder
        .build()
        .context("cannot compile the ignore patterns")
}

/// The caller's temp dir must not sit inside the truss: the archive would
/// otherwise be shipped inside the next one.
fn refuse_dest_inside(root: &Path, dest: &Path) -> anyhow::Result<()> {
    let parent = match dest.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let (Ok(root), Ok(parent)) = (root.canonicalize(), parent.canonicalize()) else {
        // File::create reports a missing parent with a better message.
        return Ok(());
    };
    if parent.starts_with(&root) {
        bail!(
            "the archive {} would be written inside the truss directory {}: write it to a temporary directory elsewhere",
            dest.display(),
            root.display()
        );
    }
    Ok(())
}

/// Read buffer for a digest read on its own (the size truss reads with).
const DIGEST_BUFFER_BYTES: usize = 128 * 1024;

/// The blake3 digest of the file at `path` (followed through a symlink)
/// and its length, read `DIGEST_BUFFER_BYTES` at a time.
pub(crate) fn file_digest(path: &Path) -> io::Result<([u8; 32], u64)> {
    let mut file = File::open(path)?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; DIGEST_BUFFER_BYTES];
    let mut total = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((*hasher.finalize().as_bytes(), total))
}

/// Appends one member; answers the digest of its content.
fn append_member<W: Write>(
    builder: &mut tar::Builder<W>,
    root: &Path,
    member: &Member,
) -> anyhow::Result<[u8; 32]> {
    let source = root.join(&member.path);
    match &member.kind {
        MemberKind::File => {
            let mut file = File::open(&source)
                .with_context(|| format!("cannot open {}: make it readable", source.display()))?;
            let meta = file
                .metadata()
                .with_context(|| format!("cannot read {}", source.display()))?;
            if !meta.is_file() || meta.len() != member.size {
                bail!(
                    "{} changed while it was being packaged (planned {} bytes, found {}): re-run once nothing writes into the truss directory",
                    source.display(),
                    member.size,
                    meta.len()
                );
            }
            let mut header = base_header(&meta, EntryType::Regular);
            header.set_size(member.size);
            let mut hasher = blake3::Hasher::new();
            let body = ExactLen {
                inner: &mut file,
                remaining: member.size,
                hasher: &mut hasher,
            };
            builder.append_data(&mut header, &member.path, body)?;
            if file.read(&mut [0u8; 1])? != 0 {
                bail!(
                    "{} grew while it was being packaged: re-run once nothing writes into the truss directory",
                    source.display()
                );
            }
            Ok(*hasher.finalize().as_bytes())
        }
        MemberKind::Symlink { target } => {
            let meta = fs::symlink_metadata(&source)
                .with_context(|| format!("cannot read the symlink {}", source.display()))?;
            if !meta.file_type().is_symlink() {
                bail!(
                    "{} changed from a symlink while it was being packaged: re-run once nothing writes into the truss directory",
                    source.display()
                );
            }
            let mut header = base_header(&meta, EntryType::Symlink);
            builder.append_link(&mut header, &member.path, target)?;
            let (digest, _) = file_digest(&source)
                .with_context(|| format!("cannot read the file {} points at", source.display()))?;
            Ok(digest)
        }
    }
}

fn base_header(meta: &Metadata, kind: EntryType) -> Header {
    // A fresh GNU header is zeroed: owner names stay empty.
    let mut header = Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(permission_bits(meta));
    header.set_mtime(mtime_secs(meta));
    header.set_uid(0);
    header.set_gid(0);
    header.set_size(0);
    header
}

#[cfg(unix)]
fn permission_bits(meta: &Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn permission_bits(meta: &Metadata) -> u32 {
    if meta.permissions().readonly() {
        0o444
    } else {
        0o644
    }
}

/// Whole seconds since the epoch; a pre-epoch or unknown time becomes 0.
fn mtime_secs(meta: &Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |age| age.as_secs())
}

/// Yields exactly `remaining` bytes or fails: the tar header already promised
/// that size, and a short body would corrupt every member after it.
struct ExactLen<'h, R> {
    inner: R,
    remaining: u64,
    /// Sees every byte that goes into the tar.
    hasher: &'h mut blake3::Hasher,
}

impl<R: Read> Read for ExactLen<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.remaining == 0 || buf.is_empty() {
            return Ok(0);
        }
        let cap = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let got = self.inner.read(&mut buf[..cap])?;
        if got == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file shrank while it was being packaged: re-run once nothing writes into the truss directory",
            ));
        }
        self.remaining -= got as u64;
        self.hasher.update(&buf[..got]);
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
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
}
