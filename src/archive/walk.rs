//! The one walk of a truss: its members and directories as truss's ignore
//! rules leave them, in the archive's order; nothing is read but metadata
//! (and `.truss_ignore`), though every member is opened once, so a file
//! the running user cannot read is refused here, before any request.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::{Member, MemberKind, Walk};
use crate::files;

/// A file in the truss root whose patterns replace the defaults.
pub(crate) const TRUSS_IGNORE_FILE: &str = ".truss_ignore";

/// A `.truss_ignore` larger than this (MiB) is refused: patterns, not data.
const TRUSS_IGNORE_MAX_MIB: u64 = 1;

/// truss's bundled `truss/util/.truss_ignore` patterns, in file order.
pub(super) const DEFAULT_PATTERNS: &str = include_str!("truss_ignore_default.txt");

/// Walks `root` applying the ignore rules; nothing is read but metadata
/// (each member is opened, unread, to prove it readable).
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
                Action::Store => {
                    if found.target.is_none() {
                        readable(root, &rel)?;
                    }
                    members.push(Member {
                        path: member_path(&rel)?,
                        size: found.size,
                        kind: match found.target {
                            Some(target) => MemberKind::Symlink {
                                target: target_text(&rel, target)?,
                            },
                            None => MemberKind::File,
                        },
                    });
                }
                Action::Refuse => return Err(refusal(root, &rel, found)),
            }
        }
        pending.extend(subdirs.into_iter().rev());
    }
    Ok(Walk { members, dirs })
}

/// The kinds of directory entry the walk tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Dir,
    File,
    LinkToFile,
    LinkToDir,
    BrokenLink,
    /// Socket, FIFO or device, or a symlink to one: nothing truss can ship.
    Special,
}

impl Shape {
    /// truss (via `os.walk`) files a symlinked directory among directories, so
    /// directory-only patterns apply to it; a broken link counts as a file.
    pub(super) fn tested_as_dir(self) -> bool {
        matches!(self, Shape::Dir | Shape::LinkToDir)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    Descend,
    Store,
    Skip,
    Refuse,
}

/// What the walk does with an entry. Ignore rules come first, so an ignored
/// broken link or socket is no error.
pub(super) fn action(shape: Shape, ignored: bool) -> Action {
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
    /// What a link points at when that is neither a file nor a directory
    /// (a FIFO would block the hash's read, a device never end it).
    link_special: Option<&'static str>,
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
        link_special: None,
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
            Ok(meta) if meta.is_file() => found.shape = Shape::LinkToFile,
            Ok(meta) => found.link_special = Some(files::describe(meta.file_type())),
            Err(err) => {
                found.shape = Shape::BrokenLink;
                found.link_error = Some(err);
            }
        }
    }
    Ok(found)
}

/// A member the running user cannot open would pass the walk and fail
/// the upload midway (S3 requests sent, the cause misread as a change):
/// it is opened here, read nothing, and refused by name and permission.
fn readable(root: &Path, rel: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let shown = root.join(rel);
    match files::open_regular(&shown) {
        Ok(_) => Ok(()),
        Err(files::ReadError::Io(e)) if e.kind() == io::ErrorKind::PermissionDenied => {
            let mode = fs::metadata(&shown)
                .map(|m| format!("mode {:04o}", m.permissions().mode() & 0o7777))
                .unwrap_or_else(|_| "its mode unreadable".to_owned());
            Err(anyhow::anyhow!(
                "{} cannot be read by the user running truss-push (permission denied, {mode}): make it readable to that user (chmod a+r) or list it in {TRUSS_IGNORE_FILE}",
                shown.display()
            ))
        }
        Err(e) => Err(anyhow::anyhow!(
            "{} cannot be opened ({e}): make it a readable regular file or list it in {TRUSS_IGNORE_FILE}",
            shown.display()
        )),
    }
}

fn refusal(root: &Path, rel: &Path, found: Found) -> anyhow::Error {
    let shown = root.join(rel);
    match (found.target, found.link_error, found.link_special) {
        (Some(target), Some(err), _) => anyhow::anyhow!(
            "{} is a symlink to {}, which cannot be opened ({err}): fix or remove the link, or list it in {TRUSS_IGNORE_FILE}",
            shown.display(),
            target.display()
        ),
        (Some(target), None, Some(kind)) => anyhow::anyhow!(
            "{} is a symlink to {}, which is a {kind}, not a regular file or directory: remove the link or list it in {TRUSS_IGNORE_FILE}",
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
pub(super) fn pattern_lines(text: &str) -> impl Iterator<Item = &str> {
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

pub(super) fn build_matcher(text: &str, origin: Option<&Path>) -> anyhow::Result<Gitignore> {
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
