//! Each file's blake3 digest, for the content hash, taken from the upload's
//! own reads: no file is read a second time to hash it.
//!
//! The upload reads the tar in ranges (its parts), concurrently and in any
//! order, and a big file spans several of them. blake3 hashes its input as
//! a tree of 1 KiB chunks whose shape depends only on the input's length,
//! so each range can hash its share of a file as whole subtrees of that
//! tree (their chaining values), and the root is merged once every range
//! is in. A range that starts or ends inside a chunk (tar contents are
//! 512-aligned, chunks 1 KiB) keeps the bytes of that partial chunk, at
//! most a KiB a side, and the chunk is hashed once its neighbour's bytes
//! are in too. A file wholly inside one range is simply hashed whole.
//!
//! Only bytes the [`super::Reader`] checked go in: a range's pieces are
//! taken when the file it read was found unchanged, and handed out only
//! by a range read to its end. Pieces are kept by range, so a range read
//! twice (a retried part) counts once.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read};
use std::path::Path;

use blake3::hazmat::{HasherExt as _, Mode, left_subtree_len, merge_subtrees_non_root};

use super::layout::Layout;

/// blake3's chunk: the tree's leaves.
const CHUNK: u64 = blake3::CHUNK_LEN as u64;

type Digest = [u8; 32];

/// What one range read of one file's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// All of them: the file's digest.
    Whole(Digest),
    /// A share: the chaining values of the whole subtrees it covers, and
    /// the bytes of the chunks it covers only in part, by offset.
    Share {
        nodes: Vec<(u64, u64, Digest)>,
        fragments: Vec<(u64, Vec<u8>)>,
    },
}

/// What one range's read gave: a piece of each file it read, by member
/// index in the layout. Taken only from a range read to its end, every
/// file checked unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RangeDigests {
    pieces: Vec<(usize, Piece)>,
}

/// A stretch of a file's contents within a range: a subtree of the file's
/// tree, hashed as it streams by, or bytes kept for a chunk the range cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stretch {
    Node { start: u64, end: u64 },
    Fragment { start: u64, end: u64 },
}

impl Stretch {
    fn end(self) -> u64 {
        match self {
            Self::Node { end, .. } | Self::Fragment { end, .. } => end,
        }
    }
}

/// How a range reading `[from, to)` of a file of `len` bytes hashes it:
/// stretches in order, covering it exactly. Empty for the whole file
/// (hashed as one) and for none of it.
fn stretches(len: u64, from: u64, to: u64) -> Vec<Stretch> {
    if from >= to || (from == 0 && to == len) {
        return Vec::new();
    }
    // Whole chunks from the first chunk boundary to the last (or to the
    // file's end: its last chunk may be short).
    let first = from.next_multiple_of(CHUNK);
    let last = if to == len { len } else { to - to % CHUNK };
    if len <= CHUNK || first >= last {
        return vec![Stretch::Fragment {
            start: from,
            end: to,
        }];
    }
    let mut out = Vec::new();
    if from < first {
        out.push(Stretch::Fragment {
            start: from,
            end: first,
        });
    }
    cover(0, len, (first, last), true, &mut out);
    if last < to {
        out.push(Stretch::Fragment {
            start: last,
            end: to,
        });
    }
    out
}

/// The largest subtrees of the node `[lo, hi)` of a file's tree that lie
/// within `[from, to)`, left to right. The root is always split: only it
/// is finalized differently, once, when the pieces are merged.
fn cover(lo: u64, hi: u64, (from, to): (u64, u64), root: bool, out: &mut Vec<Stretch>) {
    if hi <= from || to <= lo {
        return;
    }
    if from <= lo && hi <= to && !root {
        out.push(Stretch::Node { start: lo, end: hi });
        return;
    }
    // Both ends are chunk boundaries (or the file's end), so a node cut
    // by them spans more than one chunk and has children.
    let mid = lo + left_subtree_len(hi - lo);
    cover(lo, mid, (from, to), false, out);
    cover(mid, hi, (from, to), false, out);
}

/// Hashes one file's share of a range as its bytes stream by.
#[derive(Clone)]
pub(super) struct FileHasher {
    /// The next offset in the file expected, and where the share ends.
    next: u64,
    to: u64,
    /// The share is the whole file, hashed as one into `hasher`.
    whole: bool,
    plan: Vec<Stretch>,
    at: usize,
    hasher: blake3::Hasher,
    kept: Vec<u8>,
    done: Vec<(u64, u64, Digest)>,
    fragments: Vec<(u64, Vec<u8>)>,
    /// A read out of order: nothing of this share can be trusted.
    broken: bool,
}

impl FileHasher {
    /// For the bytes `[from, to)` of a file of `len` bytes.
    pub(super) fn new(len: u64, from: u64, to: u64) -> Self {
        let whole = from == 0 && to == len;
        let plan = stretches(len, from, to);
        let mut hasher = blake3::Hasher::new();
        if let Some(Stretch::Node { start, .. }) = plan.first() {
            hasher.set_input_offset(*start);
        }
        Self {
            whole,
            next: from,
            to,
            plan,
            at: 0,
            hasher,
            kept: Vec::new(),
            done: Vec::new(),
            fragments: Vec::new(),
            broken: false,
        }
    }

    /// The file's bytes at `offset`, which must follow the last ones.
    pub(super) fn update(&mut self, offset: u64, mut bytes: &[u8]) {
        if self.broken || offset != self.next || offset + bytes.len() as u64 > self.to {
            self.broken = true;
            return;
        }
        if self.whole {
            self.hasher.update(bytes);
            self.next += bytes.len() as u64;
            return;
        }
        while !bytes.is_empty() {
            let stretch = self.plan[self.at];
            let take = bytes
                .len()
                .min(usize::try_from(stretch.end() - self.next).unwrap_or(usize::MAX));
            match stretch {
                Stretch::Node { .. } => {
                    self.hasher.update(&bytes[..take]);
                }
                Stretch::Fragment { .. } => self.kept.extend_from_slice(&bytes[..take]),
            }
            self.next += take as u64;
            bytes = &bytes[take..];
            if self.next == stretch.end() {
                self.close_stretch(stretch);
            }
        }
    }

    fn close_stretch(&mut self, stretch: Stretch) {
        match stretch {
            Stretch::Node { start, end } => {
                self.done
                    .push((start, end, self.hasher.finalize_non_root()));
            }
            Stretch::Fragment { start, .. } => {
                self.fragments.push((start, std::mem::take(&mut self.kept)));
            }
        }
        self.at += 1;
        self.hasher = blake3::Hasher::new();
        if let Some(Stretch::Node { start, .. }) = self.plan.get(self.at) {
            self.hasher.set_input_offset(*start);
        }
    }

    /// The share, once every byte of it went by in order.
    fn piece(self) -> Option<Piece> {
        if self.broken || self.next != self.to {
            return None;
        }
        if self.whole {
            return Some(Piece::Whole(*self.hasher.finalize().as_bytes()));
        }
        Some(Piece::Share {
            nodes: self.done,
            fragments: self.fragments,
        })
    }
}

/// Gathers the pieces of one range as its reader goes from file to file.
pub(super) struct RangeHasher {
    /// The range, in tar offsets.
    from: u64,
    to: u64,
    /// The file being read: its member index and hasher.
    current: Option<(usize, FileHasher)>,
    pieces: Vec<(usize, Piece)>,
    /// Something was read that no piece can account for.
    broken: bool,
}

impl RangeHasher {
    pub(super) fn new(from: u64, len: u64) -> Self {
        Self {
            from,
            to: from.saturating_add(len),
            current: None,
            pieces: Vec::new(),
            broken: false,
        }
    }

    /// `bytes` of member `index` (a file of `len` bytes whose contents start
    /// at tar offset `start`), read at `offset` within it.
    pub(super) fn update(
        &mut self,
        index: usize,
        (start, len): (u64, u64),
        offset: u64,
        bytes: &[u8],
    ) {
        if self.current.as_ref().is_none_or(|(i, _)| *i != index) {
            if self.current.is_some() {
                // The last file was left without its check.
                self.broken = true;
            }
            let from = self.from.saturating_sub(start).min(len);
            let to = self.to.saturating_sub(start).min(len);
            self.current = Some((index, FileHasher::new(len, from, to)));
        }
        if let Some((_, hasher)) = &mut self.current {
            hasher.update(offset, bytes);
        }
    }

    /// Member `index`'s file was found unchanged after its bytes were read:
    /// its piece counts.
    pub(super) fn checked(&mut self, index: usize) {
        match self.current.take() {
            Some((i, hasher)) if i == index => match hasher.piece() {
                Some(piece) => self.pieces.push((index, piece)),
                None => self.broken = true,
            },
            other => self.current = other,
        }
    }

    /// The range's pieces, once it was read to its end with every file
    /// checked; `None` when its reads could not all be accounted for.
    pub(super) fn finish(self) -> Option<RangeDigests> {
        (!self.broken && self.current.is_none()).then_some(RangeDigests {
            pieces: self.pieces,
        })
    }
}

/// The digests each range's reads gave, by range (offset and length): a
/// range read again (a part retried) replaces its own, never adds to
/// them. The uploader keeps what each stored read gave and hands it back
/// whole; only the archive reads it ([`ByRange::digests`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ByRange(BTreeMap<(u64, u64), RangeDigests>);

impl ByRange {
    /// What a read of `range` gave, its bytes stored.
    pub(crate) fn stored(&mut self, range: (u64, u64), digests: RangeDigests) {
        self.0.insert(range, digests);
    }

    /// Each member's digest ([`merge`]).
    pub(crate) fn digests(&self, layout: &Layout) -> anyhow::Result<Vec<Option<Digest>>> {
        merge(layout, &self.0)
    }
}

/// Each member's digest from the pieces of every range of the tar: a
/// file's blake3 digest, `None` for a symlink (the tar holds no bytes of
/// what it points at). Fails when the pieces of a file do not cover it
/// exactly (a range missing), so a wrong digest is never given.
pub(crate) fn merge(
    layout: &Layout,
    ranges: &BTreeMap<(u64, u64), RangeDigests>,
) -> anyhow::Result<Vec<Option<Digest>>> {
    let mut by_member: HashMap<usize, Vec<&Piece>> = HashMap::new();
    for range in ranges.values() {
        for (index, piece) in &range.pieces {
            by_member.entry(*index).or_default().push(piece);
        }
    }
    layout
        .entries
        .iter()
        .enumerate()
        .map(|(index, entry)| match entry.member.kind {
            super::MemberKind::Symlink { .. } => Ok(None),
            super::MemberKind::File => {
                let pieces = by_member.remove(&index).unwrap_or_default();
                root_of(entry.member.size, &pieces).map(Some).map_err(|why| {
                    anyhow::anyhow!(
                        "could not hash {} from the upload's reads ({why}); this is a bug in truss-push, please report it",
                        entry.member.path
                    )
                })
            }
        })
        .collect()
}

/// The digest of a file of `len` bytes from its pieces.
fn root_of(len: u64, pieces: &[&Piece]) -> Result<Digest, &'static str> {
    if len == 0 {
        return Ok(*blake3::hash(b"").as_bytes());
    }
    let mut nodes: HashMap<(u64, u64), Digest> = HashMap::new();
    let mut fragments: Vec<(u64, &[u8])> = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Whole(digest) => return Ok(*digest),
            Piece::Share {
                nodes: n,
                fragments: f,
            } => {
                for (start, end, cv) in n {
                    nodes.insert((*start, *end), *cv);
                }
                fragments.extend(f.iter().map(|(at, bytes)| (*at, bytes.as_slice())));
            }
        }
    }
    fragments.sort_by_key(|(at, _)| *at);
    // Adjacent fragments make whole chunks (the last may end the file).
    let mut run: Vec<u8> = Vec::new();
    let mut run_start = 0;
    let mut chunks = Vec::new();
    for (at, bytes) in fragments {
        if run.is_empty() {
            run_start = at;
        } else if at != run_start + run.len() as u64 {
            return Err("the pieces leave a gap or overlap");
        }
        run.extend_from_slice(bytes);
        let end = run_start + run.len() as u64;
        if end.is_multiple_of(CHUNK) || end == len {
            chunks.push((run_start, std::mem::take(&mut run)));
        }
    }
    if !run.is_empty() {
        return Err("a chunk's bytes are missing");
    }
    if len <= CHUNK {
        // One chunk is its own root.
        return match chunks.as_slice() {
            [(0, bytes)] if bytes.len() as u64 == len => Ok(*blake3::hash(bytes).as_bytes()),
            _ => Err("the file's only chunk is not whole"),
        };
    }
    for (start, bytes) in chunks {
        if !start.is_multiple_of(CHUNK) {
            return Err("a chunk does not start on a chunk boundary");
        }
        for (i, chunk) in bytes.chunks(CHUNK as usize).enumerate() {
            let at = start + i as u64 * CHUNK;
            let cv = blake3::Hasher::new()
                .set_input_offset(at)
                .update(chunk)
                .finalize_non_root();
            nodes.insert((at, at + chunk.len() as u64), cv);
        }
    }
    // The subtrees must tile the file exactly: together as long as it, and
    // enough to build its root.
    if nodes.iter().map(|((lo, hi), _)| hi - lo).sum::<u64>() != len {
        return Err("the pieces do not add up to the file");
    }
    let mid = left_subtree_len(len);
    let left = node(&nodes, 0, mid)?;
    let right = node(&nodes, mid, len)?;
    Ok(*blake3::hazmat::merge_subtrees_root(&left, &right, Mode::Hash).as_bytes())
}

/// The chaining value of the subtree `[lo, hi)`, found or merged.
fn node(nodes: &HashMap<(u64, u64), Digest>, lo: u64, hi: u64) -> Result<Digest, &'static str> {
    if let Some(cv) = nodes.get(&(lo, hi)) {
        return Ok(*cv);
    }
    if hi - lo <= CHUNK {
        return Err("a chunk is missing");
    }
    let mid = lo + left_subtree_len(hi - lo);
    Ok(merge_subtrees_non_root(
        &node(nodes, lo, mid)?,
        &node(nodes, mid, hi)?,
        Mode::Hash,
    ))
}

/// Read buffer for a digest read on its own (the size truss reads with).
const DIGEST_BUFFER_BYTES: usize = 128 * 1024;

/// The blake3 digest of the file at `path` (followed through a symlink)
/// and its length, read `DIGEST_BUFFER_BYTES` at a time.
pub(crate) fn file_digest(path: &Path) -> io::Result<([u8; 32], u64)> {
    let (mut file, _) = crate::files::open_regular(path).map_err(|e| match e {
        crate::files::ReadError::Io(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidInput, other.to_string()),
    })?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; DIGEST_BUFFER_BYTES];
    let mut total = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((*hasher.finalize().as_bytes(), total))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The digest `data` gets when it is read in the ranges between `cuts`
    /// (offsets within it), each range fed `step` bytes at a time, the
    /// ranges in reverse order (as concurrent parts may finish).
    fn by_ranges(data: &[u8], cuts: &[u64], step: usize) -> Result<Digest, &'static str> {
        let len = data.len() as u64;
        let mut bounds: Vec<u64> = cuts.iter().copied().filter(|c| *c < len).collect();
        bounds.extend([0, len]);
        bounds.sort_unstable();
        bounds.dedup();
        let mut pieces = Vec::new();
        for pair in bounds.windows(2).rev() {
            let (from, to) = (pair[0], pair[1]);
            let mut hasher = FileHasher::new(len, from, to);
            let mut at = from;
            for slice in data[from as usize..to as usize].chunks(step.max(1)) {
                hasher.update(at, slice);
                at += slice.len() as u64;
            }
            pieces.push(hasher.piece().expect("every byte went by in order"));
        }
        let refs: Vec<&Piece> = pieces.iter().collect();
        root_of(len, &refs)
    }

    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut data = vec![0u8; len];
        fastrand::Rng::with_seed(seed).fill(&mut data);
        data
    }

    #[test]
    fn any_cuts_give_the_plain_digest() {
        let k = CHUNK;
        for len in [
            0,
            1,
            511,
            512,
            1023,
            1024,
            1025,
            1536,
            2048,
            3 * 1024 + 512,
            8 * 1024,
            64 * 1024 + 512,
            300 * 1024 + 7,
        ] {
            let data = bytes(len as usize, len);
            let want = *blake3::hash(&data).as_bytes();
            let cut_sets: Vec<Vec<u64>> = vec![
                vec![],
                // Chunk-aligned, 512 off, inside the first chunk, near the end.
                vec![k],
                vec![512],
                vec![k + 512],
                vec![100],
                vec![len.saturating_sub(1)],
                vec![len.saturating_sub(512)],
                // Three and more ranges, odd and even.
                vec![512, k, 2 * k + 512],
                vec![len / 3 / 512 * 512, 2 * len / 3 / 512 * 512],
                (1..len / 512).map(|i| i * 512).collect(),
                (1..len / 1000).map(|i| i * 1000).collect(),
            ];
            for cuts in cut_sets {
                for step in [1, 100, 512, 4096, 65536] {
                    assert_eq!(
                        by_ranges(&data, &cuts, step),
                        Ok(want),
                        "len {len}, cuts {cuts:?}, step {step}"
                    );
                }
            }
        }
    }

    #[test]
    fn missing_or_doubled_pieces_never_give_a_digest() {
        let data = bytes(10 * 1024 + 512, 9);
        let len = data.len() as u64;
        let piece = |from: u64, to: u64| {
            let mut h = FileHasher::new(len, from, to);
            h.update(from, &data[from as usize..to as usize]);
            h.piece().unwrap()
        };
        let (a, b, c) = (piece(0, 2560), piece(2560, 7168), piece(7168, len));
        assert!(root_of(len, &[&a, &b, &c]).is_ok());
        assert!(root_of(len, &[&a, &c]).is_err(), "a gap");
        assert!(root_of(len, &[&a, &b]).is_err(), "the end missing");
        assert!(root_of(len, &[&a, &b, &b, &c]).is_err(), "a piece twice");
        let overlapping = piece(2048, 7168);
        assert!(root_of(len, &[&a, &overlapping, &c]).is_err());
    }

    #[test]
    fn bytes_out_of_order_or_short_give_no_piece() {
        let data = bytes(4096, 3);
        let mut h = FileHasher::new(4096, 1024, 3072);
        h.update(1024, &data[1024..2048]);
        h.update(2560, &data[2560..3072]);
        assert_eq!(h.piece(), None, "a skipped stretch");
        let mut h = FileHasher::new(4096, 1024, 3072);
        h.update(1024, &data[1024..2048]);
        assert_eq!(h.piece(), None, "the share not read to its end");
        let mut h = FileHasher::new(4096, 0, 4096);
        h.update(0, &data[..4000]);
        h.update(4000, &data[4000..]);
        h.update(4096, b"x");
        assert_eq!(h.piece(), None, "a byte past the share");
    }

    #[test]
    fn a_node_is_a_whole_subtree_of_the_files_tree() {
        // 16 chunks: [1.5, 11) of them is 512 bytes, then chunks 2-3, 4-7,
        // 8-9 and 10, then 512 bytes of chunk 11.
        let k = CHUNK;
        let plan = stretches(16 * k, k + 512, 11 * k + 512);
        let nodes: Vec<(u64, u64)> = plan
            .iter()
            .filter_map(|s| match s {
                Stretch::Node { start, end } => Some((start / k, end / k)),
                Stretch::Fragment { .. } => None,
            })
            .collect();
        assert_eq!(nodes, [(2, 4), (4, 8), (8, 10), (10, 11)]);
        assert_eq!(
            plan.first(),
            Some(&Stretch::Fragment {
                start: k + 512,
                end: 2 * k
            })
        );
        assert_eq!(
            plan.last(),
            Some(&Stretch::Fragment {
                start: 11 * k,
                end: 11 * k + 512
            })
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn random_cuts_give_the_plain_digest(
            len in 0usize..40_000,
            cuts in proptest::collection::vec(0u64..40_000, 0..8),
            step in 1usize..9000,
            seed in any::<u64>(),
        ) {
            let data = bytes(len, seed);
            let want = *blake3::hash(&data).as_bytes();
            // Tar contents start on 512-byte blocks and parts on whole
            // KiB, but any cut must work.
            prop_assert_eq!(by_ranges(&data, &cuts, step), Ok(want));
        }
    }
}
