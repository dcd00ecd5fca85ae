//! Any byte range of a [`Layout`]'s tar, read straight from the truss's
//! files and checked against what the layout measured.

use std::fs::{self, File, Metadata};
use std::io;
use std::path::Path;
use std::sync::Arc;

use super::MemberKind;
use super::digest::{RangeDigests, RangeHasher};
use super::layout::{Layout, Seen, head_bytes};

/// Reads byte ranges of a [`Layout`]'s tar, front to back within a range:
/// headers generated, contents read from the files, padding and end blocks
/// as zeros. Keeps the file it is in open between reads.
pub(crate) struct Reader {
    layout: Arc<Layout>,
    /// The member whose file is open, and the file.
    open: Option<(usize, File)>,
    /// The member whose head was generated last, and its bytes.
    head: Option<(usize, Vec<u8>)>,
    /// The member the last read fell in: the next read most likely does.
    last: usize,
    /// Each file's share of the range hashed as it is read, when the
    /// layout asks for digests.
    digest: Option<RangeHasher>,
}

impl Reader {
    pub(crate) fn new(layout: Arc<Layout>) -> Self {
        Self {
            layout,
            open: None,
            head: None,
            last: 0,
            digest: None,
        }
    }

    /// A reader of the range of `len` bytes at `offset` alone, front to
    /// back; with a layout that asks for digests ([`Layout::with_digests`]),
    /// it hashes each file's share of the range from the bytes it reads,
    /// handed out by [`Self::finish`].
    pub(crate) fn for_range(layout: Arc<Layout>, offset: u64, len: u64) -> Self {
        let digest = layout.digests.then(|| RangeHasher::new(offset, len));
        Self {
            digest,
            ..Self::new(layout)
        }
    }

    /// Fills `buf` with the tar's bytes from offset `at`. Fails, naming the
    /// file, when a member's file no longer looks as the layout saw it.
    pub(crate) fn read_exact_at(&mut self, mut buf: &mut [u8], mut at: u64) -> io::Result<()> {
        while !buf.is_empty() {
            let Some(index) = self.layout.entry_near(at, self.last) else {
                // The end blocks, and nothing after them.
                let left = self.layout.size.saturating_sub(at);
                if (buf.len() as u64) > left {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "a read past the end of the archive",
                    ));
                }
                buf.fill(0);
                return Ok(());
            };
            self.last = index;
            let entry = &self.layout.entries[index];
            let (head_len, size, span) = (entry.head_len, entry.member.size, entry.span());
            let within = at - entry.start;
            let n = if within < head_len {
                let head = self.head_of(index)?;
                let from = usize::try_from(within).map_err(io::Error::other)?;
                let n = buf.len().min(head.len() - from);
                buf[..n].copy_from_slice(&head[from..from + n]);
                n
            } else if within < head_len + size {
                let offset = within - head_len;
                let left = size - offset;
                let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                self.read_contents(index, &mut buf[..n], offset)?;
                if offset + n as u64 == size {
                    // Its last byte is read: it must still be what was read.
                    self.close_checked()?;
                }
                n
            } else {
                let left = span - within;
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
    /// its bytes were read. Answers the range's digests when it hashed
    /// them ([`Self::for_range`]) and every read was accounted for.
    pub(crate) fn finish(&mut self) -> io::Result<Option<RangeDigests>> {
        self.close_checked()?;
        Ok(self.digest.take().and_then(RangeHasher::finish))
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
        let entry = &self.layout.entries[index];
        read_exact_at(file, buf, offset).map_err(|e| {
            let source = self.layout.root.join(&entry.member.path);
            match e.kind() {
                io::ErrorKind::UnexpectedEof => changed(&source, "it got shorter"),
                _ => changed(&source, &format!("it can no longer be read: {e}")),
            }
        })?;
        if let Some(digest) = &mut self.digest {
            let contents = (entry.start + entry.head_len, entry.member.size);
            digest.update(index, contents, offset, buf);
        }
        Ok(())
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
        )?;
        // Only now do the bytes read count for its digest.
        if let Some(digest) = &mut self.digest {
            digest.checked(index);
        }
        Ok(())
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
