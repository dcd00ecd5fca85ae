//! Reading the user's small files safely: only regular files are opened (a
//! FIFO or a device would block or never end), and only up to a cap.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

/// Why a small file could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("{} does not exist", .0)]
    Missing(String),
    #[error("{} is not a regular file (a directory, FIFO, socket or device)", .0)]
    NotRegular(String),
    #[error("{} is larger than {} bytes", .0, .1)]
    TooLarge(String, u64),
    #[error("{} is not valid UTF-8", .0)]
    NotUtf8(String),
    #[error("cannot read {}: {}", .0, .1)]
    Io(String, io::Error),
}

/// Reads `path` as UTF-8 text of at most `max_bytes`, following symlinks,
/// refusing anything that is not a regular file before opening it.
pub(crate) fn read_text(path: &Path, max_bytes: u64) -> Result<String, ReadError> {
    let shown = || path.display().to_string();
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ReadError::Missing(shown())),
        Err(e) => return Err(ReadError::Io(shown(), e)),
    };
    if !meta.is_file() {
        return Err(ReadError::NotRegular(shown()));
    }
    if meta.len() > max_bytes {
        return Err(ReadError::TooLarge(shown(), max_bytes));
    }
    let file = fs::File::open(path).map_err(|e| ReadError::Io(shown(), e))?;
    let mut bytes = Vec::new();
    // The file may grow between the check and the read.
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::Io(shown(), e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(ReadError::TooLarge(shown(), max_bytes));
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8(shown()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_are_refused_before_they_are_opened() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            // Opening a FIFO with no writer would block forever.
            assert!(matches!(
                read_text(&fifo, 10),
                Err(ReadError::NotRegular(_))
            ));
        }
        assert!(matches!(
            read_text(d.path(), 10),
            Err(ReadError::NotRegular(_))
        ));
        assert!(matches!(
            read_text(Path::new("/dev/zero"), 10),
            Err(ReadError::NotRegular(_))
        ));
        assert!(matches!(
            read_text(&d.path().join("nope"), 10),
            Err(ReadError::Missing(_))
        ));
        let f = d.path().join("f");
        std::fs::write(&f, "0123456789x").unwrap();
        assert!(matches!(read_text(&f, 10), Err(ReadError::TooLarge(..))));
        std::fs::write(&f, b"\xff").unwrap();
        assert!(matches!(read_text(&f, 10), Err(ReadError::NotUtf8(_))));
        std::fs::write(&f, "ok").unwrap();
        assert_eq!(read_text(&f, 10).unwrap(), "ok");
    }
}
