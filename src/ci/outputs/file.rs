//! The one sink every file the run writes for the user goes through
//! (`GITHUB_OUTPUT`, the step summary, `output-file`, the evidence's
//! analysis file): every registered secret redacted from the text, the
//! write on a helper thread abandoned after a timeout (a FIFO nobody
//! reads), what can never hold text refused (a directory, a device, a
//! socket, a link to nothing), an append after a newline of its own when
//! the file lacks one, and an error that names the file.

use std::fmt;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// How long writing one outputs file may take. Opening a FIFO nobody reads
/// blocks forever, and so can a stuck network file system; past this the
/// write is abandoned and reported as failed, so the process still ends.
const FILE_WRITE_TIMEOUT_MILLIS: u64 = 3_000;

/// A file the sink could not write: which, and why.
#[derive(Debug)]
pub(crate) struct WriteError {
    path: PathBuf,
    cause: io::Error,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot write {}: {}", self.path.display(), self.cause)
    }
}

/// The message says the cause itself, so no chain repeats it.
impl std::error::Error for WriteError {}

/// Appends `text`, redacted, to the file at `path`, creating it if missing.
/// When the file does not end with a newline, one is written first, so the
/// first line of `text` is never glued to someone else's last line (both
/// the runner's output file and Markdown skip a blank line).
pub(crate) fn append_file(path: &Path, text: &str) -> Result<(), WriteError> {
    write_with_timeout(path, text, WriteMode::Append)
}

/// Replaces the file at `path` with `text`, redacted.
pub(crate) fn replace_file(path: &Path, text: &str) -> Result<(), WriteError> {
    write_with_timeout(path, text, WriteMode::Replace)
}

/// Appends to the file at `path` what `render` makes of the bytes the
/// file already holds (a newline the append will add first counted in);
/// `None` writes nothing. The file is looked at and written on a helper
/// thread, both within the one [`FILE_WRITE_TIMEOUT_MILLIS`]: a file whose
/// `stat` or `open` hangs (a FIFO, a stuck network file system) holds the
/// run no longer than any other write. `render` runs on the caller's
/// thread, and what it returns is redacted like every write.
pub(crate) fn append_sized(
    path: &Path,
    render: impl FnOnce(u64) -> Option<String>,
) -> Result<(), WriteError> {
    let named = |cause: io::Error| WriteError {
        path: path.to_path_buf(),
        cause,
    };
    #[expect(
        clippy::disallowed_methods,
        reason = "the sink's own bound on one file (3 s), whatever phase writes"
    )]
    let started = std::time::Instant::now();
    let timeout = Duration::from_millis(FILE_WRITE_TIMEOUT_MILLIS);
    let (size_tx, size_rx) = mpsc::sync_channel(1);
    let (text_tx, text_rx) = mpsc::sync_channel::<Option<Vec<u8>>>(1);
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    let owned_path = path.to_path_buf();
    std::thread::Builder::new()
        .name("outputs-write".into())
        .spawn(move || {
            let size = check_destination(&owned_path).map(|()| {
                let held = std::fs::metadata(&owned_path).map_or(0, |m| m.len());
                held + u64::from(lacks_final_newline(&owned_path))
            });
            let ok = size.is_ok();
            let _ = size_tx.send(size);
            if !ok {
                return;
            }
            if let Ok(Some(bytes)) = text_rx.recv() {
                let _ = done_tx.send(write_now(&owned_path, &bytes, WriteMode::Append));
            } else {
                let _ = done_tx.send(Ok(()));
            }
        })
        .map_err(named)?;
    let left = || timeout.saturating_sub(started.elapsed());
    let size = wait_for(&size_rx, left(), timeout).map_err(named)?;
    let text = render(size).map(|t| crate::secret::scrub(&t).into_owned().into_bytes());
    let _ = text_tx.send(text);
    wait_for(&done_rx, left(), timeout).map_err(named)
}

/// The helper thread's answer within `left`, or the timeout's error
/// (`timeout`, the whole write's bound, named in it).
fn wait_for<T>(
    rx: &mpsc::Receiver<io::Result<T>>,
    left: Duration,
    timeout: Duration,
) -> io::Result<T> {
    match rx.recv_timeout(left) {
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

#[derive(Clone, Copy)]
enum WriteMode {
    Append,
    Replace,
}

/// Writes on a helper thread and gives up after [`FILE_WRITE_TIMEOUT_MILLIS`]:
/// a blocked `open` cannot be interrupted, but it can be left behind (the
/// process exits soon after the outputs are written).
fn write_with_timeout(path: &Path, text: &str, mode: WriteMode) -> Result<(), WriteError> {
    let named = |cause: io::Error| WriteError {
        path: path.to_path_buf(),
        cause,
    };
    let bytes = crate::secret::scrub(text).into_owned().into_bytes();
    let (tx, rx) = mpsc::sync_channel(1);
    let owned_path = path.to_path_buf();
    std::thread::Builder::new()
        .name("outputs-write".into())
        .spawn(move || {
            let _ = tx.send(write_now(&owned_path, &bytes, mode));
        })
        .map_err(named)?;
    let timeout = Duration::from_millis(FILE_WRITE_TIMEOUT_MILLIS);
    wait_for(&rx, timeout, timeout).map_err(named)
}

fn write_now(path: &Path, bytes: &[u8], mode: WriteMode) -> io::Result<()> {
    check_destination(path)?;
    #[expect(
        clippy::disallowed_methods,
        clippy::disallowed_types,
        reason = "the sink: the one place that opens a file for writing"
    )]
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
/// system's: directories, block devices, sockets, a link to nothing (which
/// `open` would follow, creating a file wherever it points), a missing
/// directory.
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
        Err(e) if e.kind() == io::ErrorKind::NotFound && path.is_symlink() => {
            let to = std::fs::read_link(path).unwrap_or_default();
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "it is a symbolic link to {}, which does not exist",
                    to.display()
                ),
            ))
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
fn lacks_final_newline(path: &Path) -> bool {
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
            append_file(&path, "x\n").unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), after, "{before:?}");
        }
        let missing = dir.path().join("new");
        append_file(&missing, "x\n").unwrap();
        assert_eq!(std::fs::read_to_string(&missing).unwrap(), "x\n");
    }

    /// The room an append has is measured by the sink (on its helper
    /// thread, within its bound): what the file holds and the newline the
    /// append adds; a file that cannot hold text is refused before
    /// anything is rendered; a FIFO nobody reads fails within the bound.
    #[test]
    fn a_sized_append_measures_the_file_within_the_sinks_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.md");
        std::fs::write(&path, "abc").unwrap();
        let mut seen = None;
        append_sized(&path, |held| {
            seen = Some(held);
            Some("x\n".into())
        })
        .unwrap();
        assert_eq!(seen, Some(4));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "abc\nx\n");
        append_sized(&path, |held| {
            seen = Some(held);
            None
        })
        .unwrap();
        assert_eq!(seen, Some(6));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "abc\nx\n");

        let err =
            append_sized(dir.path(), |_| panic!("nothing to render for a directory")).unwrap_err();
        assert!(err.to_string().contains("it is a directory"), "{err}");

        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let err = append_sized(&fifo, |_| Some("x".into())).unwrap_err();
            let named = format!("cannot write {}", fifo.display());
            assert!(err.to_string().starts_with(&named), "{err}");
            assert!(err.to_string().contains("within 3 s"), "{err}");
        }
    }

    #[test]
    fn what_the_sink_writes_is_redacted() {
        crate::secret::register("sk-sink-canary");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        replace_file(&path, "key=sk-sink-canary\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "key=***\n");
    }

    #[test]
    fn destinations_that_cannot_hold_outputs_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let err = append_file(dir.path(), "x").unwrap_err();
        let named = format!("cannot write {}: it is a directory", dir.path().display());
        assert!(err.to_string().starts_with(&named), "{err}");
        let err = replace_file(&dir.path().join("no/such/file"), "x").unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        let link = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
        let err = append_file(&link, "x").unwrap_err();
        assert!(err.to_string().contains("symbolic link to"), "{err}");
        assert!(!dir.path().join("nowhere").exists(), "nothing created");
        assert!(append_file(Path::new("/dev/full"), "x").is_err());
        assert!(append_file(Path::new("/dev/null"), "x").is_ok());
    }
}
