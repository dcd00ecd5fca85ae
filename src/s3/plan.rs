//! How a file of a given size is sent: one PUT, or a multipart upload whose
//! part size keeps within S3's limits.

use anyhow::bail;

use super::MIB;

/// S3's limits: every part but the last is at least 5 MiB, at most 5 GiB,
/// at most 10 000 parts, 5 GiB per single PUT, 5 TiB per object.
const MIN_PART_SIZE_BYTES: u64 = 5 * MIB;
const MAX_PART_SIZE_BYTES: u64 = 5 * 1024 * MIB;
pub(super) const MAX_PARTS: u64 = 10_000;
const MAX_SINGLE_PUT_BYTES: u64 = 5 * 1024 * MIB;
pub(super) const MAX_OBJECT_BYTES: u64 = 5 * 1024 * 1024 * MIB;

/// How a file is sent.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Plan {
    Single,
    Multipart { part_size: u64, parts: u64 },
}

pub(super) fn plan(size: u64, threshold: u64, part_size: u64) -> anyhow::Result<Plan> {
    if size > MAX_OBJECT_BYTES {
        bail!(
            "the archive is {size} bytes; S3 objects are limited to 5 TiB: exclude large files from the upload"
        );
    }
    if size <= threshold.min(MAX_SINGLE_PUT_BYTES) {
        return Ok(Plan::Single);
    }
    let needed = size.div_ceil(MAX_PARTS).div_ceil(MIB) * MIB;
    let part_size = part_size
        .clamp(MIN_PART_SIZE_BYTES, MAX_PART_SIZE_BYTES)
        .max(needed);
    Ok(Plan::Multipart {
        part_size,
        parts: size.div_ceil(part_size),
    })
}
