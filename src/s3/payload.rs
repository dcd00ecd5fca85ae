//! What a request carries and how it goes on the wire: nothing, a small XML
//! document, or a byte range of the archive read from its [`Source`]: the
//! truss's own files through the archive's layout (no tar is written; the
//! tests also send a file that holds one).
//!
//! Archive bytes are sent the way boto3 sends them: the signature covers the
//! headers only (`STREAMING-UNSIGNED-PAYLOAD-TRAILER`), the body is framed
//! as aws-chunked, and a CRC32 of the bytes follows them as a trailer, so
//! every byte is read from the file exactly once and checksummed on the way
//! out. S3 recomputes the CRC32 and refuses a mismatch (`BadDigest`), so a
//! byte changed between the file and S3 is still caught. Signing the body
//! instead needs its SHA-256 before the first byte is sent: a second read
//! of every part and about 1.5 CPU-seconds per GiB of hashing, for no check
//! the trailer does not already give.
//!
//! A range is read front to back once per attempt, and its source checks
//! at the end ([`Ranges::finish`]) that what it read did not change while
//! it was read, before the last chunk and trailer go out: a part whose
//! bytes S3 could store always matches the headers sent before it.
//!
//! A file body goes out one way: written straight to the connection by
//! `wire` ([`FileBody::write_to`]: each chunk read into one buffer behind
//! room for its header, checksummed and written while in cache, no copy).

#[cfg(test)]
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[cfg(test)]
use anyhow::anyhow;
use base64::Engine as _;

use super::sigv4;
use crate::archive::{self, Layout};

/// Bytes read from the archive per step, and so the aws-chunked chunk size
/// (S3 wants at least 8 KiB in every chunk but the last). 256 KiB: a chunk
/// is read, hashed, checksummed and written to the socket while it is
/// still in the core's cache (a quarter of a 1 MiB L2), in a quarter of
/// the rounds 64 KiB took (4,096 reads and writes per GiB). With 1 MiB
/// chunks each byte was copied twice through memory (file to buffer,
/// buffer to socket), and on a 2 GiB loopback upload those two copies were
/// most of the CPU (BENCHMARKS.md, "Upload CPU: the profile"). A part in
/// flight holds one such buffer: 6 MiB at the default 24.
pub(super) const STREAM_CHUNK_BYTES: u64 = 256 * 1024;

/// Room kept before each chunk's bytes for its `{hex size}\r\n` header, so
/// header, bytes and CRLF leave in one write from one buffer.
const HEADER_ROOM: usize = 16;

/// The `x-amz-content-sha256` value of a body with unsigned chunks and a
/// trailer.
pub(super) const STREAMING_UNSIGNED_TRAILER: &str = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";

/// The checksum S3 verifies each data request by: CRC32 is botocore's
/// default, so it is what S3 sees from the official client too.
pub(super) const CHECKSUM_ALGORITHM: &str = "CRC32";
/// The trailer (and `CompleteMultipartUpload` element) carrying it.
const CHECKSUM_TRAILER: &str = "x-amz-checksum-crc32";

/// Where an upload's bytes come from.
pub(crate) trait Source: Send + Sync + 'static {
    /// A reader for one attempt's range of `len` bytes at `offset`.
    fn ranges(self: Arc<Self>, offset: u64, len: u64) -> Box<dyn Ranges>;
}

/// Reads one range of a [`Source`], front to back.
pub(crate) trait Ranges: Send {
    /// Fills `buffer` with the bytes at `offset`.
    fn read_exact_at(&mut self, buffer: &mut [u8], offset: u64) -> std::io::Result<()>;
    /// The range was read to its end: fails if what was read changed
    /// meanwhile, else answers the digests of the files it read, when the
    /// source hashes them.
    fn finish(&mut self) -> std::io::Result<Option<archive::RangeDigests>>;
}

/// An archive already written to a file.
#[cfg(test)]
impl Source for File {
    fn ranges(self: Arc<Self>, _: u64, _: u64) -> Box<dyn Ranges> {
        Box::new(FileRanges(self))
    }
}

#[cfg(test)]
struct FileRanges(Arc<File>);

#[cfg(test)]
impl Ranges for FileRanges {
    fn read_exact_at(&mut self, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
        archive::read_exact_at(&self.0, buffer, offset).map_err(short_read)
    }

    fn finish(&mut self) -> std::io::Result<Option<archive::RangeDigests>> {
        Ok(None)
    }
}

/// The truss's files, through the tar's layout.
impl Source for Layout {
    fn ranges(self: Arc<Self>, offset: u64, len: u64) -> Box<dyn Ranges> {
        Box::new(archive::Reader::for_range(self, offset, len))
    }
}

impl Ranges for archive::Reader {
    fn read_exact_at(&mut self, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
        archive::Reader::read_exact_at(self, buffer, offset)
    }

    fn finish(&mut self) -> std::io::Result<Option<archive::RangeDigests>> {
        archive::Reader::finish(self)
    }
}

/// What [`Payload::prepare`] takes as the source: any `Arc` of one.
pub(super) trait AsSource {
    fn as_source(&self) -> Arc<dyn Source>;
}

impl<S: Source> AsSource for Arc<S> {
    fn as_source(&self) -> Arc<dyn Source> {
        Arc::clone(self) as Arc<dyn Source>
    }
}

impl AsSource for Arc<dyn Source> {
    fn as_source(&self) -> Arc<dyn Source> {
        Arc::clone(self)
    }
}

pub(super) enum Payload {
    Empty,
    Xml(String),
    /// A byte range of the job's source, read afresh for every attempt;
    /// a part's says through `delivery` when its whole body is out.
    File {
        offset: u64,
        len: u64,
        delivery: Option<Arc<Delivery>>,
    },
}

/// Whether an attempt's whole body is out (written and flushed: in the
/// kernel or beyond) and its answer awaited: a stopped upload lets such a
/// part get its answer before the abort, where it cuts a part still
/// sending (S3 discards a body that never ended). Set by the body once
/// its last byte went out, cleared when the attempt ends, answered or not.
#[derive(Debug, Default)]
pub(crate) struct Delivery {
    whole: AtomicBool,
    changed: tokio::sync::Notify,
}

impl Delivery {
    /// Whether the current attempt's whole body is out.
    pub(super) fn body_out(&self) -> bool {
        self.whole.load(Ordering::SeqCst)
    }

    /// Completes once [`Self::body_out`] may have changed since it was
    /// made.
    pub(super) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    fn set(&self, whole: bool) {
        self.whole.store(whole, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

/// One attempt's body: bytes in memory, or a range of the archive.
pub(super) enum Content {
    Bytes(Vec<u8>),
    File(FileBody),
}

/// A range of the archive, framed as aws-chunked with its CRC32 trailer.
pub(super) struct FileBody {
    source: Arc<dyn Source>,
    offset: u64,
    len: u64,
    read: ReadCell,
    sent: Arc<AtomicU64>,
    delivery: Option<Arc<Delivery>>,
}

impl Drop for FileBody {
    /// The attempt is over (its body dropped with it): whatever its
    /// answer was, none is awaited any more.
    fn drop(&mut self) {
        if let Some(delivery) = &self.delivery {
            delivery.set(false);
        }
    }
}

/// What reading a body's range gave, known once it was read to the end
/// (so whenever S3 accepted it): the CRC32 of its bytes and, from an
/// archive that hashes its files, their digests.
#[derive(Debug)]
pub(super) struct BodyRead {
    pub(super) crc32: u32,
    pub(super) digests: Option<archive::RangeDigests>,
}

/// Where a body leaves its [`BodyRead`]; a retry builds a new cell, so it
/// is set once.
type ReadCell = Arc<Mutex<Option<BodyRead>>>;

/// Why a file body could not be written.
#[derive(Debug)]
pub(super) enum WriteError {
    /// Reading the archive failed (or it got shorter): not the network's fault.
    File(std::io::Error),
    /// Writing to the connection failed.
    Net(std::io::Error),
}

impl FileBody {
    /// Writes the framed body to `out`: each chunk is read into one buffer
    /// behind room for its header, checksummed, and written with its header
    /// and CRLF in one call, so no byte is copied into a framing buffer.
    /// The read is a blocking `pread` of a chunk on the task's own thread,
    /// taken on purpose: a truss just checked out comes from the page cache
    /// in microseconds, where a trip through the blocking pool costs two
    /// thread wake-ups per chunk and hands the bytes to another core's cache.
    pub(super) async fn write_to<W>(&self, out: &mut W) -> Result<(), WriteError>
    where
        W: tokio::io::AsyncWrite + Unpin,
    {
        self.write_within(out, WRITE_STALL).await
    }

    /// [`Self::write_to`], each write failing after `stall` without progress.
    async fn write_within<W>(&self, out: &mut W, stall: Duration) -> Result<(), WriteError>
    where
        W: tokio::io::AsyncWrite + Unpin,
    {
        use tokio::io::AsyncWriteExt as _;
        let chunk = usize::try_from(self.len.min(STREAM_CHUNK_BYTES))
            .map_err(|e| WriteError::File(std::io::Error::other(e)))?;
        let mut buffer = vec![0u8; HEADER_ROOM + chunk + 2];
        let mut crc = crc32fast::Hasher::new();
        let mut watchdog = Watchdog::new(stall);
        // A body sent again on a new connection is mid-body once more.
        if let Some(delivery) = &self.delivery {
            delivery.set(false);
        }
        let mut ranges = Arc::clone(&self.source).ranges(self.offset, self.len);
        let (mut at, mut left) = (self.offset, self.len);
        while left > 0 {
            let n = left.min(STREAM_CHUNK_BYTES);
            let start = put_chunk_header(n, &mut buffer[..HEADER_ROOM]);
            let data_end = HEADER_ROOM + n as usize;
            ranges
                .read_exact_at(&mut buffer[HEADER_ROOM..data_end], at)
                .map_err(WriteError::File)?;
            crc.update(&buffer[HEADER_ROOM..data_end]);
            buffer[data_end..data_end + 2].copy_from_slice(b"\r\n");
            watchdog
                .write(out.write_all(&buffer[start..data_end + 2]))
                .await?;
            self.sent.fetch_add(n, Ordering::Relaxed);
            at += n;
            left -= n;
        }
        // Without its last chunk S3 stores nothing of a range that changed.
        let digests = ranges.finish().map_err(WriteError::File)?;
        let crc32 = crc.finalize();
        watchdog
            .write(out.write_all(final_chunk(crc32).as_bytes()))
            .await?;
        watchdog.write(out.flush()).await?;
        *self.read.lock().unwrap_or_else(|e| e.into_inner()) = Some(BodyRead { crc32, digests });
        if let Some(delivery) = &self.delivery {
            delivery.set(true);
        }
        Ok(())
    }
}

/// How long one write of the body may take: a connection that takes
/// less than a chunk in this long has stalled (a peer that stopped
/// reading, a path that dropped), and the part is better retried on a new
/// one than left to the run's deadline.
const WRITE_STALL: Duration = Duration::from_secs(60);

/// Fails a write of the body that takes longer than `stall`, with one
/// timer for the whole body: a write notes when it started, and the timer
/// is moved on only when it fires early, where a timeout per write would
/// set and clear a timer for every chunk. Time spent reading the files
/// between writes never counts.
struct Watchdog {
    stall: Duration,
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    started: tokio::time::Instant,
}

impl Watchdog {
    fn new(stall: Duration) -> Self {
        Self {
            stall,
            timer: Box::pin(tokio::time::sleep(stall)),
            #[expect(
                clippy::disallowed_methods,
                reason = "the stall watchdog of one body's writes: a bound inside one request, not a phase's deadline"
            )]
            started: tokio::time::Instant::now(),
        }
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "the stall watchdog of one body's writes: a bound inside one request, not a phase's deadline"
    )]
    async fn write(
        &mut self,
        write: impl std::future::Future<Output = std::io::Result<()>>,
    ) -> Result<(), WriteError> {
        self.started = tokio::time::Instant::now();
        let mut write = std::pin::pin!(write);
        loop {
            tokio::select! {
                biased;
                done = &mut write => return done.map_err(WriteError::Net),
                () = self.timer.as_mut() => {
                    let due = self.started + self.stall;
                    if tokio::time::Instant::now() >= due {
                        return Err(WriteError::Net(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!(
                                "S3 took no data for {} s while the body was being sent",
                                self.stall.as_secs_f64()
                            ),
                        )));
                    }
                    self.timer.as_mut().reset(due);
                }
            }
        }
    }
}

/// One attempt's body and the headers that describe it.
pub(super) struct Prepared {
    pub(super) body: Content,
    /// The `x-amz-content-sha256` value, which the signature covers.
    pub(super) content_sha256: String,
    /// Sent as `Content-Length`: S3 needs the length up front, and a
    /// streamed body would otherwise go out with HTTP chunking, which some
    /// S3-compatible stores refuse. For aws-chunked bodies this is the
    /// framed length, known in advance because the chunk size is fixed.
    pub(super) length: u64,
    pub(super) content_type: Option<&'static str>,
    /// Headers that describe the framing; all are signed.
    pub(super) headers: Vec<(&'static str, String)>,
    /// What reading an archive range gave, once read to the end.
    pub(super) read: Option<ReadCell>,
}

impl Payload {
    /// Whether the request carries archive bytes (and so should not be sent
    /// to a region that is only a guess).
    pub(super) fn carries_data(&self) -> bool {
        matches!(self, Self::File { .. })
    }

    /// A fresh body for one attempt; `source` holds the archive's bytes,
    /// `sent` counts the archive bytes written.
    pub(super) fn prepare(&self, source: &impl AsSource, sent: &Arc<AtomicU64>) -> Prepared {
        match self {
            Self::Empty => Prepared {
                body: Content::Bytes(Vec::new()),
                content_sha256: sigv4::EMPTY_SHA256.to_owned(),
                length: 0,
                content_type: None,
                headers: Vec::new(),
                read: None,
            },
            Self::Xml(xml) => Prepared {
                body: Content::Bytes(xml.clone().into_bytes()),
                content_sha256: sigv4::sha256_hex(xml.as_bytes()),
                length: xml.len() as u64,
                content_type: Some("application/xml"),
                headers: Vec::new(),
                read: None,
            },
            Self::File {
                offset,
                len,
                delivery,
            } => {
                let read = ReadCell::default();
                Prepared {
                    body: Content::File(FileBody {
                        source: source.as_source(),
                        offset: *offset,
                        len: *len,
                        read: Arc::clone(&read),
                        sent: Arc::clone(sent),
                        delivery: delivery.clone(),
                    }),
                    content_sha256: STREAMING_UNSIGNED_TRAILER.to_owned(),
                    length: encoded_length(*len),
                    content_type: None,
                    headers: vec![
                        ("content-encoding", "aws-chunked".to_owned()),
                        ("x-amz-decoded-content-length", len.to_string()),
                        (
                            "x-amz-sdk-checksum-algorithm",
                            CHECKSUM_ALGORITHM.to_owned(),
                        ),
                        ("x-amz-trailer", CHECKSUM_TRAILER.to_owned()),
                    ],
                    read: Some(read),
                }
            }
        }
    }
}

/// The checksum as S3 writes it: base64 of the big-endian CRC32.
pub(super) fn checksum_text(crc32: u32) -> String {
    base64::engine::general_purpose::STANDARD.encode(crc32.to_be_bytes())
}

/// Writes `{hex size}\r\n`, a chunk's header, at the end of `room`, and
/// answers where it starts: no string is made per chunk.
fn put_chunk_header(len: u64, room: &mut [u8]) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = hex_digits(len);
    let start = room.len() - digits - 2;
    for (i, slot) in room[start..start + digits].iter_mut().enumerate() {
        let shift = 4 * (digits - 1 - i);
        *slot = HEX[((len >> shift) & 0xf) as usize];
    }
    room[start + digits..].copy_from_slice(b"\r\n");
    start
}

/// How many hex digits `len` takes (one for zero).
fn hex_digits(len: u64) -> usize {
    (64 - len.leading_zeros() as usize).div_ceil(4).max(1)
}

/// The closing zero-length chunk and the trailer.
fn final_chunk(crc32: u32) -> String {
    format!("0\r\n{CHECKSUM_TRAILER}:{}\r\n\r\n", checksum_text(crc32))
}

/// Bytes on the wire for `len` bytes of data framed in
/// [`STREAM_CHUNK_BYTES`] chunks: each chunk adds its header and a CRLF,
/// and the trailer's length does not depend on the checksum's value.
pub(super) fn encoded_length(len: u64) -> u64 {
    let framed = |n: u64| hex_digits(n) as u64 + 2 + n + 2;
    let full = len / STREAM_CHUNK_BYTES;
    let rest = len % STREAM_CHUNK_BYTES;
    full * framed(STREAM_CHUNK_BYTES)
        + if rest > 0 { framed(rest) } else { 0 }
        + final_chunk(0).len() as u64
}

#[cfg(test)]
fn short_read(error: std::io::Error) -> std::io::Error {
    if error.kind() == std::io::ErrorKind::UnexpectedEof {
        std::io::Error::other(anyhow!(
            "the archive got shorter while it was being uploaded"
        ))
    } else {
        error
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    /// Decodes an aws-chunked body: the data and the trailer lines.
    fn decode(mut wire: &[u8]) -> (Vec<u8>, Vec<String>) {
        let mut data = Vec::new();
        loop {
            let end = wire.windows(2).position(|w| w == b"\r\n").unwrap();
            let size =
                usize::from_str_radix(std::str::from_utf8(&wire[..end]).unwrap(), 16).unwrap();
            wire = &wire[end + 2..];
            if size == 0 {
                let text = std::str::from_utf8(wire).unwrap();
                assert!(text.ends_with("\r\n\r\n"), "{text:?}");
                let trailers = text.trim_end().split("\r\n").map(str::to_owned).collect();
                return (data, trailers);
            }
            assert!(size as u64 <= STREAM_CHUNK_BYTES);
            data.extend_from_slice(&wire[..size]);
            assert_eq!(&wire[size..size + 2], b"\r\n");
            wire = &wire[size + 2..];
        }
    }

    fn archive(data: &[u8]) -> (tempfile::TempDir, Arc<File>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("archive");
        std::fs::write(&path, data).unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        (dir, file)
    }

    /// The bytes the body of `prepared` writes over the range, and the
    /// CRC32 it set once written.
    async fn wire_of(data: &[u8], offset: u64, len: u64) -> (Vec<u8>, Prepared, u32) {
        let (_dir, file) = archive(data);
        let prepared = Payload::File {
            offset,
            len,
            delivery: None,
        }
        .prepare(&file, &Arc::default());
        let Content::File(body) = &prepared.body else {
            unreachable!("a file payload has a file body")
        };
        let mut wire = Vec::new();
        body.write_to(&mut wire).await.unwrap();
        let crc = body
            .read
            .lock()
            .unwrap()
            .as_ref()
            .expect("the checksum is known at the end")
            .crc32;
        (wire, prepared, crc)
    }

    #[tokio::test]
    async fn ranges_are_framed_with_the_crc32_trailer_and_the_announced_length() {
        let chunk = STREAM_CHUNK_BYTES as usize;
        let mut data = vec![0; 3 * chunk + 77];
        fastrand::Rng::with_seed(7).fill(&mut data);
        // (offset, len): empty, less than a chunk, exactly one, several with a rest.
        for (offset, len) in [
            (0, 0),
            (5, 1000),
            (0, chunk),
            (3, 2 * chunk + 70),
            (0, data.len()),
        ] {
            let (wire, prepared, streamed_crc) = wire_of(&data, offset as u64, len as u64).await;
            let range = &data[offset..offset + len];
            let (decoded, trailers) = decode(&wire);
            assert!(decoded == range, "offset {offset} len {len}");
            let crc = crc32fast::hash(range);
            assert_eq!(
                trailers,
                [format!("x-amz-checksum-crc32:{}", checksum_text(crc))]
            );
            assert_eq!(
                wire.len() as u64,
                prepared.length,
                "offset {offset} len {len}"
            );
            assert_eq!(prepared.length, encoded_length(len as u64));
            assert_eq!(streamed_crc, crc);
            assert_eq!(
                prepared
                    .read
                    .unwrap()
                    .lock()
                    .unwrap()
                    .as_ref()
                    .map(|r| r.crc32),
                Some(crc),
                "set once sent"
            );
            assert_eq!(prepared.content_sha256, STREAMING_UNSIGNED_TRAILER);
            assert!(
                prepared
                    .headers
                    .contains(&("x-amz-decoded-content-length", len.to_string()))
            );
        }
    }

    #[tokio::test]
    async fn a_peer_that_stops_reading_fails_the_body_after_the_stall_time() {
        let data = vec![7u8; 4 * STREAM_CHUNK_BYTES as usize];
        let (_dir, file) = archive(&data);
        let prepared = Payload::File {
            offset: 0,
            len: data.len() as u64,
            delivery: None,
        }
        .prepare(&file, &Arc::default());
        let Content::File(body) = prepared.body else {
            unreachable!("a file payload has a file body")
        };
        // The other end takes 1 KiB and then never reads again.
        let (mut out, _peer) = tokio::io::duplex(1024);
        let stall = Duration::from_millis(200);
        let e = body.write_within(&mut out, stall).await.unwrap_err();
        let WriteError::Net(e) = e else {
            panic!("{e:?}")
        };
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        assert!(e.to_string().contains("took no data for 0.2 s"), "{e}");
        // Only what the peer took was counted as sent.
        assert!(body.sent.load(Ordering::Relaxed) <= 1024);
    }

    #[test]
    fn a_chunk_header_is_the_size_in_lowercase_hex_and_crlf() {
        for len in [
            0u64,
            1,
            9,
            10,
            15,
            16,
            255,
            4096,
            65_536,
            262_144,
            0xabcdef,
            0xffff_ffff,
        ] {
            let mut room = [b'.'; HEADER_ROOM];
            let start = put_chunk_header(len, &mut room);
            assert_eq!(&room[start..], format!("{len:x}\r\n").as_bytes(), "{len}");
            assert!(room[..start].iter().all(|b| *b == b'.'), "{len}");
        }
    }

    /// A source whose every read takes `delay` (a slow disk).
    struct Slow {
        file: Arc<File>,
        delay: Duration,
    }

    impl Source for Slow {
        fn ranges(self: Arc<Self>, _: u64, _: u64) -> Box<dyn Ranges> {
            Box::new(SlowRanges(self))
        }
    }

    struct SlowRanges(Arc<Slow>);

    impl Ranges for SlowRanges {
        fn read_exact_at(&mut self, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
            std::thread::sleep(self.0.delay);
            archive::read_exact_at(&self.0.file, buffer, offset)
        }

        fn finish(&mut self) -> std::io::Result<Option<archive::RangeDigests>> {
            Ok(None)
        }
    }

    #[tokio::test]
    async fn a_slow_read_between_writes_is_no_stalled_connection() {
        // Each read takes longer than the stall time; each write is quick.
        let data = vec![3u8; 3 * STREAM_CHUNK_BYTES as usize];
        let (_dir, file) = archive(&data);
        let source = Arc::new(Slow {
            file,
            delay: Duration::from_millis(300),
        });
        let prepared = Payload::File {
            offset: 0,
            len: data.len() as u64,
            delivery: None,
        }
        .prepare(&source, &Arc::default());
        let Content::File(body) = &prepared.body else {
            unreachable!("a file payload has a file body")
        };
        // A peer that reads steadily, a little at a time: every write waits
        // on it, so the stall timer is looked at after each slow read.
        let (mut out, mut peer) = tokio::io::duplex(16 * 1024);
        let reading = tokio::spawn(async move {
            let mut got = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut peer, &mut got)
                .await
                .unwrap();
            got.len()
        });
        body.write_within(&mut out, Duration::from_millis(200))
            .await
            .unwrap();
        drop(out);
        assert_eq!(reading.await.unwrap() as u64, prepared.length);
    }

    #[test]
    fn checksum_text_is_base64_of_big_endian_crc32() {
        // CRC32 of "hello world" is 0x0d4a1185.
        assert_eq!(checksum_text(crc32fast::hash(b"hello world")), "DUoRhQ==");
        assert_eq!(checksum_text(0), "AAAAAA==");
    }

    #[tokio::test]
    async fn a_file_shorter_than_announced_fails_the_body() {
        let (_dir, file) = archive(&[1u8; 100]);
        let prepared = Payload::File {
            offset: 0,
            len: 200,
            delivery: None,
        }
        .prepare(&file, &Arc::default());
        let Content::File(body) = &prepared.body else {
            unreachable!("a file payload has a file body")
        };
        let mut written = Vec::new();
        let error = body.write_to(&mut written).await.unwrap_err();
        assert!(matches!(error, WriteError::File(_)), "{error:?}");
        assert!(body.read.lock().unwrap().is_none());
    }
}
