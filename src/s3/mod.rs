//! Uploads an archive to the S3 object the platform's temporary credentials
//! allow, with our own SigV4 signer: one PUT for small files, a bounded,
//! retried multipart upload for large ones, and boto3-style bucket-region
//! discovery.
//!
//! The bucket's region is learned once per bucket and cached in the
//! [`Uploader`]: from S3's answer to the first bodiless request signed for
//! `us-east-1` (a HeadBucket probe before a single PUT, or the
//! CreateMultipartUpload itself), so no data is sent to the wrong region.
//!
//! The pieces: `plan` picks single PUT or multipart, `multipart` runs the
//! parts, `call` names the calls, `request` sends one (signing, retries),
//! `wire` carries every request (HTTP/1.1, data with `Expect: 100-continue`
//! so S3 can refuse before the body is sent, straight or through a proxy), `payload` builds each
//! attempt's body, `region` finds the bucket's region, `url` addresses S3,
//! `error` and `xml` read S3's answers, `sigv4` signs.
//!
//! Archive bytes go out in one pass, as boto3 sends them: unsigned
//! aws-chunked bodies with a CRC32 trailer that S3 verifies (see `payload`),
//! each part's range read straight from the truss's files through the
//! archive's layout, so no tar is written anywhere.

mod call;
mod complete;
mod error;
mod multipart;
mod payload;
mod plan;
mod region;
mod request;
mod sigv4;
mod url;
mod wire;
mod xml;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use reqwest::Url;

use self::call::Call;
use self::payload::Source;
use self::plan::{Transfer, plan};
use self::region::Regions;
use crate::archive::{self, Layout};
use crate::retry;
pub(crate) use crate::secret::Secret;

const MIB: u64 = 1024 * 1024;

/// Files up to this size go in one PUT (boto3's threshold too). A smaller
/// file would be a single part anyway, and multipart costs two extra round
/// trips.
pub(crate) const DEFAULT_MULTIPART_THRESHOLD_BYTES: u64 = 8 * MIB;
/// 8 MiB parts: 256 parts for a 2 GiB archive, a failed part costs at most
/// 8 MiB of resending, and part buffers stay within the 64 MiB RSS budget.
pub(crate) const DEFAULT_PART_SIZE_BYTES: u64 = 8 * MIB;
/// Parts in flight. Through a link whose connections each get a tenth of
/// its capacity (300 ms round trip in the benchmark), 16 reached 83–86 % of
/// it on 1 GiB and 24 reached 92 % (three runs each; 32: 91 %): each part
/// now pays a round trip for its `100 Continue` besides its answer, and
/// more connections fill the link while some wait. A part in flight costs
/// one 256 KiB chunk buffer and a socket, so 24 stay under 20 MiB of peak
/// RSS on a 2 GiB loopback upload (the budget is 64 MiB); the
/// `upload-concurrency` input sets it.
pub(crate) const DEFAULT_CONCURRENCY: usize = 24;

/// The temporary credentials `model_s3_upload_credentials` hands out.
#[derive(Clone, Debug)]
pub(crate) struct Credentials {
    pub(crate) access_key_id: String,
    pub(crate) secret_access_key: Secret,
    /// Sent as `x-amz-security-token`; an empty token is not sent.
    pub(crate) session_token: Secret,
}

/// Where one archive goes.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub(crate) bucket: String,
    pub(crate) key: String,
    pub(crate) credentials: Credentials,
}

/// How to upload. `Default` is the production setting.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// `None`: AWS, virtual-hosted `https://{bucket}.s3[.{region}].amazonaws.com/{key}`.
    /// `Some(url)`: path-style `{url}/{bucket}/{key}` (tests, S3-compatible stores).
    pub(crate) endpoint: Option<Url>,
    /// Files of at most this many bytes are sent in one PUT; S3 caps single
    /// PUTs at 5 GiB.
    pub(crate) multipart_threshold: u64,
    /// Bytes per part, raised to S3's 5 MiB minimum and, for huge files, to
    /// what keeps the count within 10 000 parts.
    pub(crate) part_size: u64,
    /// Parts in flight at once (at least 1). Memory ≈ concurrency × part size.
    pub(crate) concurrency: usize,
    /// Which failed requests are sent again, how often, and after how long.
    pub(crate) retry: retry::Policy,
    /// The S3 connections' TLS, proxy route, user agent and connect
    /// timeout: the run's network's.
    pub(crate) wire: crate::net::Transport,
}

impl Options {
    /// The defaults, over `wire`: the run's network (`net::Network::
    /// s3_transport`). There is no `Default` outside tests, so no upload
    /// can travel on a transport the run did not build.
    pub(crate) fn new(wire: crate::net::Transport) -> Self {
        Self {
            endpoint: None,
            multipart_threshold: DEFAULT_MULTIPART_THRESHOLD_BYTES,
            part_size: DEFAULT_PART_SIZE_BYTES,
            concurrency: DEFAULT_CONCURRENCY,
            // Every request here may be sent twice without harm, even when
            // the first may have arrived: a part or object PUT overwrites
            // itself with the same bytes, Complete and Abort name one upload,
            // and a second CreateMultipartUpload at worst leaves an empty
            // upload for the bucket's lifecycle rule to remove.
            retry: retry::Policy::IDEMPOTENT,
            wire,
        }
    }
}

/// Tests: the defaults over the bundled roots and no proxy.
#[cfg(test)]
impl Default for Options {
    fn default() -> Self {
        Self::new(crate::net::Transport::default())
    }
}

/// What an upload did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UploadReport {
    pub(crate) bytes: u64,
    /// Data-carrying requests: 1 for a single PUT, else the part count.
    pub(crate) parts: u32,
    /// The region the upload was finally signed for.
    pub(crate) region: String,
    pub(crate) elapsed: Duration,
    /// What the user should know of how it got there: a completion whose
    /// answer was lost, the object read back whole.
    pub(crate) note: Option<String>,
    /// What the archive's reader gave of each range whose bytes S3
    /// stored (its files' digests, when the layout hashes them): carried
    /// whole, read only by the archive.
    pub(crate) read: archive::ByRange,
}

/// How an upload left open by a stopped run ended in its cleanup.
/// `location` is the object's `s3://bucket/key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Aborted, and S3 listed no part left (`rounds` aborts it took: a
    /// part in flight during an abort may still land, so it is repeated).
    Aborted { upload_id: String, rounds: u32 },
    /// Aborted, but the parts left could not be listed (the credentials may
    /// not allow ListParts): what S3 holds is unknown.
    AbortedUnchecked { upload_id: String, why: String },
    /// The upload had completed (S3 answered its CompleteMultipartUpload,
    /// or knew no such upload any more) and the object reads back whole
    /// (`bytes` by S3's HEAD).
    Stored {
        upload_id: String,
        location: String,
        bytes: u64,
    },
    /// S3 knew no such upload and holds no object under the key.
    Gone { upload_id: String },
    /// S3 knew no such upload, and the object could not be read (the
    /// credentials may not allow it): whether it was stored is unknown.
    Unknown { upload_id: String, why: String },
    /// Its CompleteMultipartUpload was sent and `why` (no answer within
    /// the time cleanup had, or an answer the object does not read back
    /// after): S3 may be completing it or have completed it, so nothing
    /// was aborted, and the archive may be stored.
    MaybeStored {
        upload_id: String,
        location: String,
        why: String,
    },
}

/// Called with `(bytes sent, total bytes)`.
type Progress<'a> = dyn Fn(u64, u64) + Send + Sync + 'a;

/// Uploads files to S3. Cheap to share; remembers each bucket's region for
/// its lifetime so only the first request to a bucket pays for discovery.
/// S3's region answers are handled here, and no redirect is followed (a
/// followed 307 would drop the signature on the new host).
#[derive(Clone)]
pub(crate) struct Uploader {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Uploader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uploader").finish_non_exhaustive()
    }
}

struct Inner {
    /// Every request: HTTP/1.1, data with `Expect: 100-continue`.
    wire: wire::Wire,
    options: Options,
    regions: Regions,
    /// The multipart upload S3 holds open for us, if any: set once S3 gave
    /// it an id, cleared once it is completed or aborted. Whoever stops an
    /// upload midway (a cancelled run drops it) aborts what is left here.
    open: std::sync::Mutex<Option<Open>>,
    /// Archive bytes handed to the HTTP client so far (a resent part
    /// counts again), for progress between stored parts.
    sent: Arc<AtomicU64>,
}

/// A multipart upload S3 holds open: its job, its id, its part requests,
/// and its CompleteMultipartUpload once sent, which may all outlive the
/// upload that sent them.
struct Open {
    job: Arc<Job>,
    upload_id: String,
    parts: Arc<multipart::Parts>,
    completing: Option<complete::Completing>,
}

impl Inner {
    fn set_open(&self, open: Option<Open>) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = open;
    }

    /// The open upload's CompleteMultipartUpload was sent (and runs in a
    /// task of its own).
    fn set_completing(&self, completing: complete::Completing) {
        if let Some(open) = self.open.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            open.completing = Some(completing);
        }
    }
}

/// One upload's fixed facts, shared by its concurrent part tasks.
struct Job {
    bucket: String,
    key: String,
    /// The archive's length.
    size: u64,
    credentials: Credentials,
    source: Arc<dyn Source>,
    sent: Arc<AtomicU64>,
}

impl Job {
    /// The object's address, for messages: `s3://bucket/key`.
    fn location(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.key)
    }
}

impl Uploader {
    pub(crate) fn new(options: Options) -> Self {
        Self {
            inner: Arc::new(Inner {
                wire: wire::Wire::new(&options.wire),
                options,
                regions: Regions::default(),
                open: std::sync::Mutex::new(None),
                sent: Arc::default(),
            }),
        }
    }

    /// Archive bytes handed to the HTTP client so far: progress that moves
    /// while parts are on the wire, not only when one is stored.
    pub(crate) fn bytes_sent(&self) -> u64 {
        self.inner.sent.load(Ordering::Relaxed)
    }

    /// Where the archive goes (`s3://bucket/key`) when an upload left open
    /// sent its CompleteMultipartUpload and has no answer yet: its cleanup
    /// waits for that answer before it aborts anything.
    pub(crate) fn completing(&self) -> Option<String> {
        self.inner
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|open| {
                open.completing
                    .as_ref()
                    .is_some_and(complete::Completing::unanswered)
            })
            .map(|open| open.job.location())
    }

    /// Ends the multipart upload left open by an upload that was stopped
    /// midway (its future dropped: a cancelled run, a spent deadline), so
    /// S3 keeps none of its parts. An upload whose CompleteMultipartUpload
    /// was sent is never aborted while S3 may be completing it: its answer
    /// is awaited (for three quarters of the time left before `until` at
    /// most, the rest kept for what follows), then the object is read back
    /// when S3 completed it, or the upload aborted when S3 refused the
    /// completion; with no answer it may be stored, and is left so
    /// ([`Ended::MaybeStored`]). Otherwise its part requests are drained
    /// first (a part still sending was cut when the upload was dropped; a
    /// part whose whole body is out gets its answer, for half the time left
    /// before `until` at most), then it is aborted until S3 lists no part
    /// (see [`Uploader::abort_fully`]). `None` when nothing was open. The
    /// caller bounds the whole by `until`.
    pub(crate) async fn abort_unfinished(&self, until: Instant) -> anyhow::Result<Option<Ended>> {
        let open = self
            .inner
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(open) = open else {
            return Ok(None);
        };
        #[expect(
            clippy::disallowed_methods,
            reason = "the drain's share of the cleanup deadline handed over as a timer: half of what is left, at most multipart::DRAIN_WAIT"
        )]
        let now = Instant::now();
        let left = until.saturating_duration_since(now);
        if let Some(completing) = &open.completing {
            // Every part was stored before the completion was sent: none
            // runs to drain.
            return self
                .after_completion(&open, completing, left)
                .await
                .map(Some);
        }
        // Half the time for the answers, half for the aborts and listings.
        let drain = (left / 2).min(multipart::DRAIN_WAIT);
        open.parts.drain(now + drain).await;
        self.abort_fully(&open.job, &open.upload_id).await.map(Some)
    }

    /// Uploads the tar `layout` plans to `target`, each range read from the
    /// truss's files as it is sent; calls `progress(sent, total)` once at
    /// the start and then as each part (or the single PUT) is stored.
    pub(crate) async fn upload_archive(
        &self,
        target: &Target,
        layout: Arc<Layout>,
        progress: &Progress<'_>,
    ) -> anyhow::Result<UploadReport> {
        #[expect(
            clippy::disallowed_methods,
            reason = "times the upload, for its report"
        )]
        let started = Instant::now();
        let size = layout.size();
        let source = Arc::clone(&layout) as Arc<dyn Source>;
        self.upload(target, source, size, progress, started)
            .await
            .with_context(|| {
                format!(
                    "while uploading the archive to s3://{}/{}",
                    target.bucket, target.key
                )
            })
    }

    /// Uploads an archive already written to `path` (the tests' way in).
    #[cfg(test)]
    pub(crate) async fn upload_file(
        &self,
        target: &Target,
        path: &std::path::Path,
        progress: &Progress<'_>,
    ) -> anyhow::Result<UploadReport> {
        let file = std::fs::File::open(path).context("could not open the archive")?;
        let size = file.metadata().context("could not read its size")?.len();
        self.upload(target, Arc::new(file), size, progress, Instant::now())
            .await
    }

    async fn upload(
        &self,
        target: &Target,
        source: Arc<dyn Source>,
        size: u64,
        progress: &Progress<'_>,
        started: Instant,
    ) -> anyhow::Result<UploadReport> {
        if target.bucket.is_empty() || target.key.is_empty() {
            bail!("the platform returned an empty S3 bucket or key; cannot upload");
        }
        let options = &self.inner.options;
        let plan = plan(size, options.multipart_threshold, options.part_size)?;
        let job = Arc::new(Job {
            bucket: target.bucket.clone(),
            key: target.key.clone(),
            size,
            credentials: target.credentials.clone(),
            source,
            sent: Arc::clone(&self.inner.sent),
        });
        progress(0, size);
        let mut ranges = archive::ByRange::default();
        let (parts, note) = match plan {
            Transfer::Single => {
                let reply = self.inner.call(&job, &Call::put_object(size)).await?;
                if let Some(digests) = reply.read.and_then(|read| read.digests) {
                    ranges.stored((0, size), digests);
                }
                progress(size, size);
                (1, None)
            }
            Transfer::Multipart { part_size, parts } => {
                let layout = plan::layout(size, part_size, parts, options.concurrency);
                self.upload_multipart(&job, size, &layout, progress, &mut ranges)
                    .await?
            }
        };
        let report = UploadReport {
            bytes: size,
            parts,
            region: self.inner.regions.for_bucket(&job.bucket),
            elapsed: started.elapsed(),
            note,
            read: ranges,
        };
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
