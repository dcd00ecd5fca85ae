//! The tests' reference: a plain tar written with the `tar` crate, member
//! by member, which the [`super::Layout`]'s bytes are held identical to.

use std::fs::{self, File, Metadata};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use tar::{EntryType, Header};

use super::layout::{permission_bits, secs_since_epoch};
use super::{Member, MemberKind, Walk, file_digest, walk};

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

/// Writes the tar for `root` into `dest` (a file path in a temp dir the
/// caller owns): the writer the [`Layout`] is held byte-identical to.
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

/// The caller's temp dir must not sit inside the truss: the archive would
/// otherwise be shipped inside the next one.
pub(super) fn refuse_dest_inside(root: &Path, dest: &Path) -> anyhow::Result<()> {
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

/// Whole seconds since the epoch; a pre-epoch or unknown time becomes 0.
fn mtime_secs(meta: &Metadata) -> u64 {
    secs_since_epoch(meta.modified().ok())
}

/// Yields exactly `remaining` bytes or fails: the tar header already promised
/// that size, and a short body would corrupt every member after it.
pub(super) struct ExactLen<'h, R> {
    pub(super) inner: R,
    pub(super) remaining: u64,
    /// Sees every byte that goes into the tar.
    pub(super) hasher: &'h mut blake3::Hasher,
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
