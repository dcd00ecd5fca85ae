//! Opening the user's files safely: only regular files are opened (a FIFO
//! would block forever, a device may never end), and small ones are read
//! whole only up to a cap.

use std::path::Path;

/// Why a small input file could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    Io(std::io::Error),
    /// A directory, FIFO, socket or device: reading a FIFO would block
    /// forever and a device may never end.
    NotRegular(&'static str),
    /// Larger than the cap, in MiB.
    TooLarge(u64),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::NotRegular(kind) => write!(f, "it is a {kind}, not a regular file"),
            ReadError::TooLarge(mib) => write!(f, "it is larger than {mib} MiB"),
        }
    }
}

/// What a file that is not a regular one is, in a user's words.
pub(crate) fn describe(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO (named pipe)"
    } else if t.is_socket() {
        "socket"
    } else if t.is_block_device() || t.is_char_device() {
        "device"
    } else {
        "special file"
    }
}

/// Opens `path` (symlinks followed) only when it is a regular file: looked
/// at before it is opened (opening a FIFO blocks until something writes
/// into it) and again once open (in case the path changed meanwhile; a
/// device's read may never end).
pub(crate) fn open_regular(path: &Path) -> Result<(std::fs::File, std::fs::Metadata), ReadError> {
    let regular = |meta: std::fs::Metadata| {
        if meta.is_file() {
            Ok(meta)
        } else {
            Err(ReadError::NotRegular(describe(meta.file_type())))
        }
    };
    regular(std::fs::metadata(path).map_err(ReadError::Io)?)?;
    let file = std::fs::File::open(path).map_err(ReadError::Io)?;
    let meta = regular(file.metadata().map_err(ReadError::Io)?)?;
    Ok((file, meta))
}

/// Reads a small input file whole: only a regular file (symlinks followed)
/// and at most `max_mib` MiB, checked before reading so neither a FIFO nor a
/// huge file can stall the run.
pub(crate) fn read_regular_file(path: &Path, max_mib: u64) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    let max_bytes = max_mib << 20;
    let checked = |meta: std::fs::Metadata| {
        if meta.len() > max_bytes {
            Err(ReadError::TooLarge(max_mib))
        } else {
            Ok(meta.len())
        }
    };
    let (file, meta) = open_regular(path)?;
    let len = checked(meta)?;
    let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or_default());
    file.take(max_bytes + 1)
        .read_to_end(&mut buf)
        .map_err(ReadError::Io)?;
    if buf.len() as u64 > max_bytes {
        return Err(ReadError::TooLarge(max_mib));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_small_regular_files_are_read() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, vec![b'x'; 1 << 20]).unwrap();
        assert_eq!(read_regular_file(&file, 1).unwrap().len(), 1 << 20);
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(read_regular_file(&link, 1).is_ok());
        std::fs::write(&file, vec![b'x'; (1 << 20) + 1]).unwrap();
        assert!(matches!(
            read_regular_file(&file, 1),
            Err(ReadError::TooLarge(1))
        ));
        let fifo = d.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let e = read_regular_file(&fifo, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is a FIFO (named pipe), not a regular file"
        );
        let e = read_regular_file(d.path(), 1).unwrap_err();
        assert_eq!(e.to_string(), "it is a directory, not a regular file");
        let e = read_regular_file(Path::new("/dev/zero"), 1).unwrap_err();
        assert_eq!(e.to_string(), "it is a device, not a regular file");
        assert!(matches!(
            read_regular_file(&d.path().join("none"), 1),
            Err(ReadError::Io(_))
        ));
    }
}
