//! The one writer every outputs file goes through: on a helper thread,
//! abandoned after a timeout (a FIFO nobody reads), refusing what can
//! never hold outputs, appending after a newline of its own when the file
//! lacks one.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// How long writing one outputs file may take. Opening a FIFO nobody reads
/// blocks forever, and so can a stuck network file system; past this the
/// write is abandoned and reported as failed, so the process still ends.
const FILE_WRITE_TIMEOUT_MILLIS: u64 = 3_000;

/// Appends `bytes` to the file at `path`, creating it if missing. When the
/// file does not end with a newline, one is written first, so the first
/// line of `bytes` is never glued to someone else's last line (both the
/// runner's output file and Markdown skip a blank line).
pub(in crate::ci) fn append_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_with_timeout(path, bytes, WriteMode::Append)
}

/// Replaces the file at `path` with `bytes`.
pub(super) fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_with_timeout(path, bytes, WriteMode::Replace)
}

#[derive(Clone, Copy)]
enum WriteMode {
    Append,
    Replace,
}

/// Writes on a helper thread and gives up after [`FILE_WRITE_TIMEOUT_MILLIS`]:
/// a blocked `open` cannot be interrupted, but it can be left behind (the
/// process exits soon after the outputs are written).
fn write_with_timeout(path: &Path, bytes: &[u8], mode: WriteMode) -> io::Result<()> {
    let (tx, rx) = mpsc::sync_channel(1);
    let (owned_path, owned_bytes) = (path.to_path_buf(), bytes.to_vec());
    std::thread::Builder::new()
        .name("outputs-write".into())
        .spawn(move || {
            let _ = tx.send(write_now(&owned_path, &owned_bytes, mode));
        })?;
    let timeout = Duration::from_millis(FILE_WRITE_TIMEOUT_MILLIS);
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the write did not finish within {} s (a FIFO that nobody reads?)",
                timeout.as_secs()
            ),
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(io::Error::other(
            "the writing thread ended without a result",
        )),
    }
}

fn write_now(path: &Path, bytes: &[u8], mode: WriteMode) -> io::Result<()> {
    check_destination(path)?;
    let mut options = std::fs::OpenOptions::new();
    options.create(true);
    let mut text = Vec::with_capacity(bytes.len() + 1);
    match mode {
        WriteMode::Append => {
            options.append(true);
            if lacks_final_newline(path) {
                text.push(b'\n');
            }
        }
        WriteMode::Replace => {
            options.write(true).truncate(true);
        }
    }
    text.extend_from_slice(bytes);
    let mut file = options.open(path)?;
    // One write for the whole text so a concurrent writer cannot land inside an entry.
    file.write_all(&text)?;
    file.flush()
}

/// Refuses what can never hold outputs, with a message better than the
/// system's: directories, block devices, sockets, a missing directory.
/// Regular files, character devices (`/dev/null`, a terminal) and pipes
/// (`/dev/stdout` in CI) are written; a FIFO without a reader is caught by
/// the write timeout.
fn check_destination(path: &Path) -> io::Result<()> {
    let refuse = |what: &str| Err(io::Error::other(format!("it is {what}, not a file")));
    match std::fs::metadata(path) {
        Ok(meta) => {
            let kind = meta.file_type();
            if kind.is_dir() {
                refuse("a directory")
            } else if kind.is_block_device() {
                refuse("a block device")
            } else if kind.is_socket() {
                refuse("a socket")
            } else {
                Ok(())
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("its directory {} does not exist", dir.display()),
            )),
            _ => Ok(()),
        },
        Err(e) => Err(e),
    }
}

/// Whether `path` is a non-empty regular file whose last byte is not a
/// newline. When that cannot be read, a newline is assumed to be missing:
/// an extra blank line is harmless, a glued line is not.
pub(in crate::ci) fn lacks_final_newline(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if !meta.is_file() || meta.len() == 0 {
        return false;
    }
    let last = std::fs::File::open(path).and_then(|mut f| {
        f.seek(SeekFrom::End(-1))?;
        let mut byte = [0u8; 1];
        f.read_exact(&mut byte)?;
        Ok(byte[0])
    });
    last.map_or(true, |b| b != b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appending_adds_a_newline_only_when_the_file_lacks_one() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [("", "x\n"), ("a=1", "a=1\nx\n"), ("a=1\n", "a=1\nx\n")];
        for (before, after) in cases {
            let path = dir.path().join("out");
            std::fs::write(&path, before).unwrap();
            append_file(&path, b"x\n").unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), after, "{before:?}");
        }
        let missing = dir.path().join("new");
        append_file(&missing, b"x\n").unwrap();
        assert_eq!(std::fs::read_to_string(&missing).unwrap(), "x\n");
    }

    #[test]
    fn destinations_that_cannot_hold_outputs_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let err = append_file(dir.path(), b"x").unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        let err = replace_file(&dir.path().join("no/such/file"), b"x").unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        assert!(append_file(Path::new("/dev/full"), b"x").is_err());
        assert!(append_file(Path::new("/dev/null"), b"x").is_ok());
    }
}
