//! Only the sink (src/ci/outputs/file.rs) writes files.

use std::fs::OpenOptions; // fires
use std::path::Path;

pub fn write(p: &Path) {
    let _ = std::fs::write(p, b"x"); // fires
    let _ = std::fs::File::create(p); // fires
    let _ = OpenOptions::new().append(true).open(p); // fires
    let _ = std::fs::copy(p, p); // fires
    let _ = std::os::unix::fs::symlink(p, p); // fires
    #[allow(deprecated, reason = "the rule, not the deprecation, is under test")]
    let _ = std::fs::soft_link(p, p); // fires
    let _ = tempfile::tempfile(); // fires
    let _ = tempfile::NamedTempFile::new(); // fires
}

pub async fn write_async(p: &Path) {
    let _ = tokio::fs::write(p, b"x").await; // fires
}
