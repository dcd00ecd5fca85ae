//! The truss archive: walk a truss directory with truss's ignore rules and
//! read it as a plain tar, straight from its files.
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
//! * Hardlinks. truss's `tarfile` stores a second name of a file it already
//!   added (the same inode) as a hardlink entry pointing at the first. We
//!   store every name as a regular file with its bytes: the archive is
//!   larger by those bytes, but the extracted tree is the same, and so is
//!   the content hash (it is computed over the files, not the tar).
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
//!
//! The files: `walk` (the one walk and truss's ignore rules), `layout`
//! (the tar's byte layout: headers, padding, end blocks), `reader` (any
//! range of it read from the files, checked), `digest` (each file's blake3
//! digest from those same reads, for the content hash), and, for the tests
//! only, `reference` (a plain tar writer the layout is held identical to).

mod digest;
mod layout;
mod reader;
#[cfg(test)]
mod reference;
mod walk;

#[cfg(test)]
pub(crate) use self::digest::merge as merge_digests;
pub(crate) use self::digest::{ByRange, RangeDigests, file_digest};
pub(crate) use self::layout::{Layout, layout};
pub(crate) use self::reader::Reader;
#[cfg(test)]
pub(crate) use self::reader::read_exact_at;
#[cfg(test)]
pub(crate) use self::reference::{Archive, write};
pub(crate) use self::walk::{load_matcher, plan, walk};

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

/// What the walk found: the members the archive stores and, for the
/// content hash (which counts directories although the archive stores
/// none), every directory it descended into, in walk order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Walk {
    pub members: Vec<Member>,
    /// Relative to the truss root, `/`-separated, empty ones included.
    pub dirs: Vec<String>,
}

#[cfg(test)]
mod tests;
