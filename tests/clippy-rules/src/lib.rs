//! Each module breaks one rule of the root clippy.toml on every line
//! marked `// fires` (scripts/clippy-rules counts them); the crate with no
//! feature turned on breaks none.

#[cfg(feature = "sink")]
mod sink;

#[cfg(feature = "clock")]
mod clock;

#[cfg(feature = "net")]
mod net;

#[cfg(feature = "env")]
mod env;

/// Innocent code the rules must let pass: reading files, measuring with a
/// given instant, naming types in signatures.
pub fn innocent(p: &std::path::Path, t: std::time::Instant) -> std::io::Result<String> {
    let _ = t.elapsed();
    let _ = std::fs::File::open(p)?;
    std::fs::read_to_string(p)
}
