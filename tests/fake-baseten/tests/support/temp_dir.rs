//! A directory under the system temp dir, removed when dropped, for the
//! S3 test binaries (each includes this file by path; the fake has no
//! dev-dependency for it).

use std::path::PathBuf;

/// The directory's path is `.0`.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh directory named after `prefix`, the process and a random
    /// number, so parallel tests and runs never share one.
    pub fn new(prefix: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "{prefix}-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
