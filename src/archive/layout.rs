//! The tar [`super::reference`]'s writer would produce, as a plan: each
//! member's offset, header length and the metadata its header carries,
//! computed from the walk without reading a file's contents.

use std::collections::HashMap;
use std::fs::{self, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use tar::{EntryType, Header};

use super::{Member, MemberKind, Walk, walk};

/// Tar's block: headers are one, contents are padded to whole ones.
pub(super) const BLOCK: u64 = 512;

/// The two zero blocks that end the tar.
const END_BYTES: u64 = 2 * BLOCK;

/// The tar [`write`] would produce, as a plan: each member's header bytes
/// are generated from the metadata recorded here, its contents read from
/// its file when their range is asked for.
#[derive(Debug)]
pub(crate) struct Layout {
    pub(super) root: PathBuf,
    pub(super) entries: Vec<Entry>,
    /// The directories the walk descended into, which the content hash
    /// counts although the tar stores none.
    dirs: Vec<String>,
    pub(super) size: u64,
    /// Whether readers of a range hash the files they read
    /// ([`Layout::with_digests`]).
    pub(super) digests: bool,
}

/// One member placed in the tar.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) member: Member,
    /// The tar offset of its first header byte.
    pub(super) start: u64,
    /// Long-name records plus its header: the bytes before its contents.
    pub(super) head_len: u64,
    /// Permission bits and modification time, as the header carries them.
    pub(super) mode: u32,
    /// The file as the layout saw it; its bytes are read only while it
    /// still looks the same.
    pub(super) seen: Seen,
}

/// What tells a file apart from the one the layout measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) len: u64,
    pub(super) modified: Option<SystemTime>,
    /// Device and inode: another file renamed over the path (an editor's
    /// or a download's atomic write) is not the same file.
    pub(super) identity: Option<(u64, u64)>,
}

impl Seen {
    pub(super) fn of(meta: &Metadata) -> Self {
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
    pub(super) fn span(&self) -> u64 {
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
        digests: false,
    })
}

/// The bytes before a member's contents, as the `tar` crate writes them:
/// GNU long-name (`L`) and long-link (`K`) records when a name does not
/// fit, then the member's own header.
pub(super) fn head_bytes(entry: &Entry) -> io::Result<Vec<u8>> {
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

    /// Readers of a range ([`super::Reader::for_range`]) hash each file's
    /// share of it as they read, for the content hash
    /// ([`super::digest::merge`]).
    pub(crate) fn with_digests(mut self) -> Self {
        self.digests = true;
        self
    }

    /// For each member, when it is a symlink to a file that is itself a
    /// member (the same file, as the layout saw it), that member's index.
    pub(crate) fn linked_members(&self) -> Vec<Option<usize>> {
        let files: HashMap<(u64, u64), usize> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.member.kind == MemberKind::File)
            .filter_map(|(i, e)| Some((e.seen.identity?, i)))
            .collect();
        self.entries
            .iter()
            .map(|e| {
                if e.member.kind == MemberKind::File {
                    return None;
                }
                let meta = fs::metadata(self.root.join(&e.member.path)).ok()?;
                let seen = Seen::of(&meta);
                let index = *files.get(&seen.identity?)?;
                (self.entries[index].seen == seen).then_some(index)
            })
            .collect()
    }

    /// Whether readers of a range hash the files they read.
    pub(crate) fn hashes_files(&self) -> bool {
        self.digests
    }

    /// [`Self::entry_at`], trying first the entry `near` and the one after
    /// it: a range is read front to back, a chunk at a time.
    pub(super) fn entry_near(&self, at: u64, near: usize) -> Option<usize> {
        let holds = |i: usize| {
            self.entries
                .get(i)
                .is_some_and(|e| e.start <= at && at < e.start + e.span())
        };
        if holds(near) {
            return Some(near);
        }
        if holds(near + 1) {
            return Some(near + 1);
        }
        self.entry_at(at)
    }

    /// Where a tar offset falls: the index of the entry holding it, or
    /// `None` in the end blocks.
    pub(super) fn entry_at(&self, at: u64) -> Option<usize> {
        let after = self.entries.partition_point(|e| e.start <= at);
        let index = after.checked_sub(1)?;
        let entry = &self.entries[index];
        (at < entry.start + entry.span()).then_some(index)
    }
}

#[cfg(unix)]
pub(super) fn permission_bits(meta: &Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
pub(super) fn permission_bits(meta: &Metadata) -> u32 {
    if meta.permissions().readonly() {
        0o444
    } else {
        0o644
    }
}

pub(super) fn secs_since_epoch(time: Option<SystemTime>) -> u64 {
    time.and_then(|time| time.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |age| age.as_secs())
}
