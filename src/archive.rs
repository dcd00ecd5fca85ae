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
//!
//! The tar is never written whole: [`layout`] computes its byte layout from
//! the walk and each member's metadata (every header, padding and end block
//! is known from them), and a [`Reader`] reads any byte range straight from
//! the truss's files, so an upload cuts its parts from the files themselves
//! in one pass and no copy of the truss lands on disk. A file whose size or
//! modification time differs from the layout's when its bytes are read, or
//! that vanished, fails the read with a message naming it: the header that
//! promised its size may already be on its way.

use std::fs::{self, File, Metadata};
use std::io;
use std::io::Read;
#[cfg(test)]
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

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
#[cfg(test)]
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

/// Writes the tar for `root` into `dest` (a file path in a temp dir the
/// caller owns): the writer the [`Layout`] is held byte-identical to.
#[cfg(test)]
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

/// Tar's block: headers are one, contents are padded to whole ones.
const BLOCK: u64 = 512;

/// The two zero blocks that end the tar.
const END_BYTES: u64 = 2 * BLOCK;

/// The tar [`write`] would produce, as a plan: each member's header bytes
/// are generated from the metadata recorded here, its contents read from
/// its file when their range is asked for.
#[derive(Debug)]
pub(crate) struct Layout {
    root: PathBuf,
    entries: Vec<Entry>,
    /// The directories the walk descended into, which the content hash
    /// counts although the tar stores none.
    dirs: Vec<String>,
    size: u64,
}

/// One member placed in the tar.
#[derive(Debug)]
struct Entry {
    member: Member,
    /// The tar offset of its first header byte.
    start: u64,
    /// Long-name records plus its header: the bytes before its contents.
    head_len: u64,
    /// Permission bits and modification time, as the header carries them.
    mode: u32,
    /// The file as the layout saw it; its bytes are read only while it
    /// still looks the same.
    seen: Seen,
}

/// What tells a file apart from the one the layout measured.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    len: u64,
    modified: Option<SystemTime>,
    /// Device and inode: another file renamed over the path (an editor's
    /// or a download's atomic write) is not the same file.
    identity: Option<(u64, u64)>,
}

impl Seen {
    fn of(meta: &Metadata) -> Self {
        Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            identity: identity(meta),
        }
    }
}

#[cfg(unix)]
fn identity(meta: &Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn identity(_: &Metadata) -> Option<(u64, u64)> {
    None
}

impl Entry {
    /// Head, contents and padding: the member's whole span in the tar.
    fn span(&self) -> u64 {
        self.head_len + self.member.size.div_ceil(BLOCK) * BLOCK
    }
}

/// Plans the tar of `root` without writing it: the walk ([`plan`]), then
/// each member's metadata and header length.
pub(crate) fn layout(root: &Path) -> anyhow::Result<Layout> {
    let Walk { members, dirs } = walk(root)?;
    let mut entries = Vec::with_capacity(members.len());
    let mut start = 0;
    for member in members {
        let source = root.join(&member.path);
        let meta = match &member.kind {
            MemberKind::File => fs::metadata(&source),
            MemberKind::Symlink { .. } => fs::symlink_metadata(&source),
        }
        .with_context(|| format!("cannot read {}: make it readable", source.display()))?;
        if let MemberKind::File = member.kind
            && (!meta.is_file() || meta.len() != member.size)
        {
            bail!(
                "{} changed while it was being packaged (planned {} bytes, found {}): re-run once nothing writes into the truss directory",
                source.display(),
                member.size,
                meta.len()
            );
        }
        let mut entry = Entry {
            member,
            start,
            head_len: 0,
            mode: permission_bits(&meta),
            seen: Seen::of(&meta),
        };
        entry.head_len = head_bytes(&entry)
            .with_context(|| format!("while adding {} to the archive", entry.member.path))?
            .len() as u64;
        start += entry.span();
        entries.push(entry);
    }
    Ok(Layout {
        root: root.to_path_buf(),
        entries,
        dirs,
        size: start + END_BYTES,
    })
}

/// The bytes before a member's contents, as the `tar` crate writes them:
/// GNU long-name (`L`) and long-link (`K`) records when a name does not
/// fit, then the member's own header.
fn head_bytes(entry: &Entry) -> io::Result<Vec<u8>> {
    let kind = match entry.member.kind {
        MemberKind::File => EntryType::Regular,
        MemberKind::Symlink { .. } => EntryType::Symlink,
    };
    let mut header = Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(entry.mode);
    header.set_mtime(secs_since_epoch(entry.seen.modified));
    header.set_uid(0);
    header.set_gid(0);
    header.set_size(0);
    let mut builder = tar::Builder::new(Vec::new());
    match &entry.member.kind {
        MemberKind::File => {
            header.set_size(entry.member.size);
            // No body: the builder writes the records and the header, and
            // pads nothing after zero bytes of contents.
            builder.append_data(&mut header, &entry.member.path, io::empty())?;
        }
        MemberKind::Symlink { target } => {
            builder.append_link(&mut header, &entry.member.path, target)?;
        }
    }
    // Taken before the builder's end blocks go in on drop.
    Ok(std::mem::take(builder.get_mut()))
}

impl Layout {
    /// The tar's length in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// The members, in tar order.
    pub(crate) fn members(&self) -> impl Iterator<Item = &Member> {
        self.entries.iter().map(|e| &e.member)
    }

    /// The directories the walk descended into, in walk order.
    pub(crate) fn dirs(&self) -> &[String] {
        &self.dirs
    }

    /// The truss directory the members are read from.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn member_count(&self) -> usize {
        self.entries.len()
    }

    /// Where a tar offset falls: the index of the entry holding it, or
    /// `None` in the end blocks.
    fn entry_at(&self, at: u64) -> Option<usize> {
        let after = self.entries.partition_point(|e| e.start <= at);
        let index = after.checked_sub(1)?;
        let entry = &self.entries[index];
        (at < entry.start + entry.span()).then_some(index)
    }
}

/// Reads byte ranges of a [`Layout`]'s tar, front to back within a range:
/// headers generated, contents read from the files, padding and end blocks
/// as zeros. Keeps the file it is in open between reads.
pub(crate) struct Reader {
    layout: Arc<Layout>,
    /// The member whose file is open, and the file.
    open: Option<(usize, File)>,
    /// The member whose head was generated last, and its bytes.
    head: Option<(usize, Vec<u8>)>,
}

impl Reader {
    pub(crate) fn new(layout: Arc<Layout>) -> Self {
        Self {
            layout,
            open: None,
            head: None,
        }
    }

    /// Fills `buf` with the tar's bytes from offset `at`. Fails, naming the
    /// file, when a member's file no longer looks as the layout saw it.
    pub(crate) fn read_exact_at(&mut self, mut buf: &mut [u8], mut at: u64) -> io::Result<()> {
        let layout = Arc::clone(&self.layout);
        while !buf.is_empty() {
            let Some(index) = layout.entry_at(at) else {
                // The end blocks, and nothing after them.
                let left = layout.size.saturating_sub(at);
                if (buf.len() as u64) > left {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "a read past the end of the archive",
                    ));
                }
                buf.fill(0);
                return Ok(());
            };
            let entry = &layout.entries[index];
            let within = at - entry.start;
            let n = if within < entry.head_len {
                let head = self.head_of(index)?;
                let from = usize::try_from(within).map_err(io::Error::other)?;
                let n = buf.len().min(head.len() - from);
                buf[..n].copy_from_slice(&head[from..from + n]);
                n
            } else if within < entry.head_len + entry.member.size {
                let offset = within - entry.head_len;
                let left = entry.member.size - offset;
                let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                self.read_contents(index, &mut buf[..n], offset)?;
                if offset + n as u64 == entry.member.size {
                    // Its last byte is read: it must still be what was read.
                    self.close_checked()?;
                }
                n
            } else {
                let left = entry.span() - within;
                let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                buf[..n].fill(0);
                n
            };
            buf = &mut buf[n..];
            at += n as u64;
        }
        Ok(())
    }

    /// The end of a range: the file still open must not have changed while
    /// its bytes were read.
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        self.close_checked()
    }

    fn head_of(&mut self, index: usize) -> io::Result<&[u8]> {
        if self.head.as_ref().is_none_or(|(i, _)| *i != index) {
            let entry = &self.layout.entries[index];
            match &entry.member.kind {
                MemberKind::Symlink { target } => self.check_link(index, target)?,
                // The header promises the size and time the layout saw;
                // an empty file has no other bytes to be checked by.
                MemberKind::File => {
                    let source = self.layout.root.join(&entry.member.path);
                    let meta = fs::metadata(&source).map_err(|e| match e.kind() {
                        io::ErrorKind::NotFound => changed(&source, "it was deleted"),
                        _ => changed(&source, &format!("it can no longer be read: {e}")),
                    })?;
                    same_as_seen(&source, &meta, &entry.seen)?;
                }
            }
            self.head = Some((index, head_bytes(entry)?));
        }
        Ok(self.head.as_ref().map_or(&[][..], |(_, h)| h.as_slice()))
    }

    fn check_link(&self, index: usize, target: &str) -> io::Result<()> {
        let entry = &self.layout.entries[index];
        let source = self.layout.root.join(&entry.member.path);
        let now = fs::symlink_metadata(&source).and_then(|meta| {
            let link = fs::read_link(&source)?;
            Ok((meta, link))
        });
        match now {
            Ok((meta, link))
                if meta.file_type().is_symlink()
                    && link.as_os_str() == target
                    && meta.modified().ok() == entry.seen.modified =>
            {
                Ok(())
            }
            Ok(_) => Err(changed(&source, "the link was replaced or changed")),
            Err(e) => Err(changed(&source, &format!("it can no longer be read: {e}"))),
        }
    }

    fn read_contents(&mut self, index: usize, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if self.open.as_ref().is_none_or(|(i, _)| *i != index) {
            self.close_checked()?;
            let entry = &self.layout.entries[index];
            let source = self.layout.root.join(&entry.member.path);
            // Looked at before it is opened: opening a FIFO put in its place
            // would block until something writes into it.
            match fs::metadata(&source) {
                Ok(meta) if !meta.is_file() => {
                    return Err(changed(&source, "it is no longer a regular file"));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(changed(&source, "it was deleted"));
                }
                _ => {}
            }
            let file = File::open(&source).map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => changed(&source, "it was deleted"),
                _ => changed(&source, &format!("it can no longer be opened: {e}")),
            })?;
            check_unchanged(&source, &file, &entry.seen)?;
            self.open = Some((index, file));
        }
        let Some((_, file)) = &self.open else {
            unreachable!("the member's file was opened above")
        };
        read_exact_at(file, buf, offset).map_err(|e| {
            let source = self
                .layout
                .root
                .join(&self.layout.entries[index].member.path);
            match e.kind() {
                io::ErrorKind::UnexpectedEof => changed(&source, "it got shorter"),
                _ => changed(&source, &format!("it can no longer be read: {e}")),
            }
        })
    }

    fn close_checked(&mut self) -> io::Result<()> {
        let Some((index, file)) = self.open.take() else {
            return Ok(());
        };
        let entry = &self.layout.entries[index];
        check_unchanged(
            &self.layout.root.join(&entry.member.path),
            &file,
            &entry.seen,
        )
    }
}

/// Whether the open `file` is still the one the layout measured: the same
/// size and modification time, and not deleted.
fn check_unchanged(source: &Path, file: &File, seen: &Seen) -> io::Result<()> {
    let meta = file
        .metadata()
        .map_err(|e| changed(source, &format!("it can no longer be read: {e}")))?;
    same_as_seen(source, &meta, seen)
}

/// Whether `meta` still describes the file the layout measured.
fn same_as_seen(source: &Path, meta: &Metadata, seen: &Seen) -> io::Result<()> {
    if deleted(meta) {
        return Err(changed(source, "it was deleted"));
    }
    if !meta.is_file() {
        return Err(changed(source, "it is no longer a regular file"));
    }
    let now = Seen::of(meta);
    if now.identity != seen.identity {
        return Err(changed(source, "another file took its place"));
    }
    if now.len != seen.len {
        return Err(changed(
            source,
            &format!("it was {} bytes, now {}", seen.len, now.len),
        ));
    }
    if now.modified != seen.modified {
        return Err(changed(source, "its modification time changed"));
    }
    Ok(())
}

#[cfg(unix)]
fn deleted(meta: &Metadata) -> bool {
    std::os::unix::fs::MetadataExt::nlink(meta) == 0
}

#[cfg(not(unix))]
fn deleted(_: &Metadata) -> bool {
    false
}

fn changed(source: &Path, what: &str) -> io::Error {
    io::Error::other(format!(
        "{} changed while the archive was being uploaded ({what}): re-run once nothing writes into the truss directory",
        source.display()
    ))
}

#[cfg(unix)]
pub(crate) fn read_exact_at(file: &File, buffer: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buffer, offset)
}

#[cfg(windows)]
pub(crate) fn read_exact_at(file: &File, mut buffer: &mut [u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt as _;
    while !buffer.is_empty() {
        match file.seek_read(buffer, offset)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => {
                buffer = &mut buffer[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
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
#[cfg(test)]
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

#[cfg(test)]
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

#[cfg(test)]
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
#[cfg(test)]
fn mtime_secs(meta: &Metadata) -> u64 {
    secs_since_epoch(meta.modified().ok())
}

fn secs_since_epoch(time: Option<SystemTime>) -> u64 {
    time.and_then(|time| time.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |age| age.as_secs())
}

/// Yields exactly `remaining` bytes or fails: the tar header already promised
/// that size, and a short body would corrupt every member after it.
#[cfg(test)]
struct ExactLen<'h, R> {
    inner: R,
    remaining: u64,
    /// Sees every byte that goes into the tar.
    hasher: &'h mut blake3::Hasher,
}

#[cfg(test)]
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

    /// Every byte of the layout's tar, read in ranges cut at `cuts` (each
    /// range with a reader of its own, as each part has).
    fn read_in_ranges(layout: &Arc<Layout>, cuts: &[u64]) -> Vec<u8> {
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
        for pair in bounds.windows(2) {
            let mut reader = Reader::new(Arc::clone(layout));
            let mut buf = vec![0u8; (pair[1] - pair[0]) as usize];
            // In steps of an odd size, so steps cross every kind of boundary.
            let mut at = 0;
            while at < buf.len() {
                let end = (at + 7919).min(buf.len());
                reader
                    .read_exact_at(&mut buf[at..end], pair[0] + at as u64)
                    .unwrap();
                at = end;
            }
            reader.finish().unwrap();
            out.extend_from_slice(&buf);
        }
        out
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
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
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
