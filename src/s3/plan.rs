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
pub(super) enum Transfer {
    Single,
    Multipart { part_size: u64, parts: u64 },
}

pub(super) fn plan(size: u64, threshold: u64, part_size: u64) -> anyhow::Result<Transfer> {
    if size > MAX_OBJECT_BYTES {
        bail!(
            "the archive is {size} bytes; S3 objects are limited to 5 TiB: exclude large files from the upload"
        );
    }
    if size <= threshold.min(MAX_SINGLE_PUT_BYTES) {
        return Ok(Transfer::Single);
    }
    let needed = size.div_ceil(MAX_PARTS).div_ceil(MIB) * MIB;
    let part_size = part_size
        .clamp(MIN_PART_SIZE_BYTES, MAX_PART_SIZE_BYTES)
        .max(needed);
    Ok(Transfer::Multipart {
        part_size,
        parts: size.div_ceil(part_size),
    })
}

/// Where each part of a multipart upload starts and how long it is, in part
/// order. With more parts than fit in one round of `concurrency`, the first
/// round's parts grow in steps from near S3's 5 MiB minimum up to
/// `part_size`, and every later part is `part_size` (the last one: the
/// rest). Equal parts started together end together, so every connection
/// then stops at the same moment for the next part's round trips (its
/// answer, and the `100 Continue` of the next), and the link idles for two
/// round trips per round; staggered, the connections reach their ends at
/// different moments and the others fill the link meanwhile. Falls back to
/// equal parts where staggering would pass S3's 10,000-part limit.
pub(super) fn layout(size: u64, part_size: u64, parts: u64, concurrency: usize) -> Vec<(u64, u64)> {
    let concurrency = concurrency.max(1) as u64;
    let step = part_size.saturating_sub(MIN_PART_SIZE_BYTES) / concurrency;
    let stagger = concurrency > 1 && step > 0 && parts > concurrency;
    let mut layout = Vec::new();
    let mut offset = 0;
    while offset < size {
        let index = layout.len() as u64;
        let len = if stagger && index < concurrency {
            part_size - (concurrency - 1 - index) * step
        } else {
            part_size
        };
        let len = len.min(size - offset);
        layout.push((offset, len));
        offset += len;
    }
    if layout.len() as u64 > MAX_PARTS {
        return (0..parts)
            .map(|n| (n * part_size, part_size.min(size - n * part_size)))
            .collect();
    }
    layout
}
