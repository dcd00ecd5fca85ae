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
//! Payloads are always signed with their real SHA-256. Each part (or the
//! single PUT) is read twice, a chunk at a time: once to hash it, once to
//! stream it to S3, so memory stays at a few chunks per request in flight
//! whatever the part size (the benchmark measured 72–80 MiB peak RSS with
//! whole 8 MiB part buffers, most of it glibc keeping freed buffers). The
//! second read comes from the page cache. Measured on a 2-core runner with
//! SHA extensions: SHA-256 runs at ~1.35 GB/s per core and a cached read at
//! ~1.3 GB/s, so a 2 GiB archive costs ~1.5 CPU-seconds of hashing on the
//! blocking pool while other parts are on the wire. In exchange S3 verifies
//! every byte it stores (`XAmzContentSHA256Mismatch` otherwise) and
//! plain-HTTP endpoints are never sent unsigned payloads.
//! botocore makes the same call: it skips payload signing only over HTTPS
//! *and* with a separate checksum header.

mod sigv4;

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, anyhow, bail};
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use tokio::task::JoinSet;

use crate::retry;
pub use crate::secret::Secret;

const MIB: u64 = 1024 * 1024;

/// Files up to this size go in one PUT (boto3's threshold too). A smaller
/// file would be a single part anyway, and multipart costs two extra round
/// trips.
pub const DEFAULT_MULTIPART_THRESHOLD_BYTES: u64 = 8 * MIB;
/// 8 MiB parts: 256 parts for a 2 GiB archive, a failed part costs at most
/// 8 MiB of resending, and part buffers stay within the 64 MiB RSS budget.
pub const DEFAULT_PART_SIZE_BYTES: u64 = 8 * MIB;
/// Four parts in flight saturate a CI runner's uplink in practice and bound
/// part buffers to 32 MiB.
pub const DEFAULT_CONCURRENCY: usize = 4;
/// Attempts per request (the first one included), as botocore's legacy mode.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// S3's limits: every part but the last is at least 5 MiB, at most 5 GiB,
/// at most 10 000 parts, 5 GiB per single PUT, 5 TiB per object.
const MIN_PART_SIZE_BYTES: u64 = 5 * MIB;
const MAX_PART_SIZE_BYTES: u64 = 5 * 1024 * MIB;
const MAX_PARTS: u64 = 10_000;
const MAX_SINGLE_PUT_BYTES: u64 = 5 * 1024 * MIB;
const MAX_OBJECT_BYTES: u64 = 5 * 1024 * 1024 * MIB;
/// The region boto3 signs for when nothing else is known; S3 answers with the
/// bucket's real region.
const DEFAULT_REGION: &str = "us-east-1";

/// The temporary credentials `model_s3_upload_credentials` hands out.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: Secret,
    /// Sent as `x-amz-security-token`; an empty token is not sent.
    pub session_token: Secret,
}

/// Where one archive goes.
#[derive(Clone, Debug)]
pub struct Target {
    pub bucket: String,
    pub key: String,
    pub credentials: Credentials,
}

/// How to upload. `Default` is the production setting.
#[derive(Clone, Debug)]
pub struct Options {
    /// `None`: AWS, virtual-hosted `https://{bucket}.s3[.{region}].amazonaws.com/{key}`.
    /// `Some(url)`: path-style `{url}/{bucket}/{key}` (tests, S3-compatible stores).
    pub endpoint: Option<Url>,
    /// Files of at most this many bytes are sent in one PUT (and buffered
    /// whole); S3 caps single PUTs at 5 GiB.
    pub multipart_threshold: u64,
    /// Bytes per part, raised to S3's 5 MiB minimum and, for huge files, to
    /// what keeps the count within 10 000 parts.
    pub part_size: u64,
    /// Parts in flight at once (at least 1). Memory ≈ concurrency × part size.
    pub concurrency: usize,
    /// Attempts per request, the first included (at least 1).
    pub max_attempts: u32,
    /// Scales the crate's backoff policy (`retry::next_delay`): the default is
    /// its base step; tests shrink it to keep retries instant.
    pub retry_base_delay: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            endpoint: None,
            multipart_threshold: DEFAULT_MULTIPART_THRESHOLD_BYTES,
            part_size: DEFAULT_PART_SIZE_BYTES,
            concurrency: DEFAULT_CONCURRENCY,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            retry_base_delay: Duration::from_millis(retry::BACKOFF_BASE_MILLIS),
        }
    }
}

/// What an upload did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadReport {
    pub bytes: u64,
    /// Data-carrying requests: 1 for a single PUT, else the part count.
    pub parts: u32,
    /// The region the upload was finally signed for.
    pub region: String,
    pub elapsed: Duration,
}

/// Uploads files to S3. Cheap to share; remembers each bucket's region for
/// its lifetime so only the first request to a bucket pays for discovery.
///
/// The `reqwest::Client` should not follow redirects for S3: a followed 307
/// drops the signature on the new host. S3's region answers are handled here.
pub struct Uploader {
    inner: Arc<Inner>,
}

struct Inner {
    client: reqwest::Client,
    options: Options,
    regions: Mutex<HashMap<String, String>>,
}

/// One upload's fixed facts, shared by its concurrent part tasks.
struct Job {
    bucket: String,
    key: String,
    credentials: Credentials,
    file: Arc<File>,
}

impl Uploader {
    pub fn new(client: reqwest::Client, options: Options) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                options,
                regions: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Uploads the file at `path` to `target`, calling `progress(sent, total)`
    /// once at the start and then as each part (or the single PUT) is stored.
    pub async fn upload_file(
        &self,
        target: &Target,
        path: &Path,
        progress: &(dyn Fn(u64, u64) + Send + Sync),
    ) -> anyhow::Result<UploadReport> {
        let started = Instant::now();
        self.upload(target, path, progress, started)
            .await
            .with_context(|| {
                format!(
                    "while uploading {} to s3://{}/{}",
                    path.display(),
                    target.bucket,
                    target.key
                )
            })
    }

    async fn upload(
        &self,
        target: &Target,
        path: &Path,
        progress: &(dyn Fn(u64, u64) + Send + Sync),
        started: Instant,
    ) -> anyhow::Result<UploadReport> {
        if target.bucket.is_empty() || target.key.is_empty() {
            bail!("the platform returned an empty S3 bucket or key; cannot upload");
        }
        let file = File::open(path).context("could not open the archive")?;
        let size = file
            .metadata()
            .context("could not read the archive's size")?
            .len();
        let options = &self.inner.options;
        let plan = plan(size, options.multipart_threshold, options.part_size)?;
        let job = Arc::new(Job {
            bucket: target.bucket.clone(),
            key: target.key.clone(),
            credentials: target.credentials.clone(),
            file: Arc::new(file),
        });
        progress(0, size);
        let parts = match plan {
            Plan::Single => {
                self.inner.call(&job, &Call::put_object(size)).await?;
                progress(size, size);
                1
            }
            Plan::Multipart { part_size, parts } => {
                self.upload_multipart(&job, size, part_size, parts, progress)
                    .await?
            }
        };
        Ok(UploadReport {
            bytes: size,
            parts,
            region: self.inner.region_for(&job.bucket),
            elapsed: started.elapsed(),
        })
    }

    async fn upload_multipart(
        &self,
        job: &Arc<Job>,
        size: u64,
        part_size: u64,
        parts: u64,
        progress: &(dyn Fn(u64, u64) + Send + Sync),
    ) -> anyhow::Result<u32> {
        let created = self.inner.call(job, &Call::create_multipart()).await?;
        let upload_id = xml_text(&created.body, "UploadId")
            .filter(|id| !id.is_empty())
            .ok_or_else(|| anyhow!("S3 started a multipart upload but returned no UploadId"))?;
        let outcome = match self
            .upload_parts(job, &upload_id, size, part_size, parts, progress)
            .await
        {
            Ok(etags) => self
                .inner
                .call(job, &Call::complete_multipart(&upload_id, &etags))
                .await
                .map(|_| ()),
            Err(error) => Err(error),
        };
        match outcome {
            Ok(()) => u32::try_from(parts).context("part count exceeds u32"),
            Err(error) => {
                // Best effort: a leftover upload only costs storage until the
                // bucket's lifecycle rule removes it; the first error matters.
                if let Err(abort_error) = self
                    .inner
                    .call(job, &Call::abort_multipart(&upload_id))
                    .await
                {
                    tracing::warn!("could not abort the S3 multipart upload: {abort_error:#}");
                }
                Err(error)
            }
        }
    }

    /// Sends every part with at most `concurrency` in flight; returns
    /// `(part number, ETag)` in ascending part order.
    async fn upload_parts(
        &self,
        job: &Arc<Job>,
        upload_id: &str,
        size: u64,
        part_size: u64,
        parts: u64,
        progress: &(dyn Fn(u64, u64) + Send + Sync),
    ) -> anyhow::Result<Vec<(u32, String)>> {
        let concurrency = self.inner.options.concurrency.max(1);
        let mut in_flight = JoinSet::new();
        let mut next: u64 = 1;
        let mut etags = Vec::new();
        let mut sent: u64 = 0;
        loop {
            while in_flight.len() < concurrency && next <= parts {
                let offset = (next - 1) * part_size;
                let len = part_size.min(size - offset);
                let number = u32::try_from(next).context("part number exceeds u32")?;
                let inner = Arc::clone(&self.inner);
                let job = Arc::clone(job);
                let upload_id = upload_id.to_owned();
                in_flight.spawn(async move {
                    let call = Call::upload_part(number, &upload_id, offset, len);
                    let reply = inner.call(&job, &call).await?;
                    let etag = reply
                        .headers
                        .get(reqwest::header::ETAG)
                        .and_then(|v| v.to_str().ok())
                        .filter(|v| !v.is_empty())
                        .ok_or_else(|| anyhow!("S3 stored part {number} but sent no ETag"))?
                        .to_owned();
                    anyhow::Ok((number, etag, len))
                });
                next += 1;
            }
            let Some(joined) = in_flight.join_next().await else {
                break;
            };
            let failure = match joined {
                Ok(Ok((number, etag, len))) => {
                    etags.push((number, etag));
                    sent += len;
                    progress(sent, size);
                    continue;
                }
                Ok(Err(error)) => error,
                Err(join_error) => anyhow!("an upload task stopped unexpectedly: {join_error}"),
            };
            // Cancel the other parts before the caller aborts the upload, so
            // no part lands after the abort.
            in_flight.shutdown().await;
            return Err(failure);
        }
        etags.sort_by_key(|(number, _)| *number);
        Ok(etags)
    }
}

/// How a file is sent.
#[derive(Debug, PartialEq, Eq)]
enum Plan {
    Single,
    Multipart { part_size: u64, parts: u64 },
}

fn plan(size: u64, threshold: u64, part_size: u64) -> anyhow::Result<Plan> {
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

/// The S3 operations this module sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    PutObject,
    CreateMultipartUpload,
    UploadPart(u32),
    CompleteMultipartUpload,
    AbortMultipartUpload,
    HeadBucket,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PutObject => f.write_str("PutObject"),
            Self::CreateMultipartUpload => f.write_str("CreateMultipartUpload"),
            Self::UploadPart(n) => write!(f, "UploadPart {n}"),
            Self::CompleteMultipartUpload => f.write_str("CompleteMultipartUpload"),
            Self::AbortMultipartUpload => f.write_str("AbortMultipartUpload"),
            Self::HeadBucket => f.write_str("HeadBucket"),
        }
    }
}

enum Payload {
    Empty,
    Xml(String),
    /// A byte range of the job's file, read afresh for every attempt.
    File {
        offset: u64,
        len: u64,
    },
}

/// One logical request; `Inner::call` turns it into attempts.
struct Call {
    operation: Operation,
    method: Method,
    /// Decoded; encoded identically for the wire and for signing.
    query: Vec<(String, String)>,
    payload: Payload,
}

impl Call {
    fn put_object(size: u64) -> Self {
        Self {
            operation: Operation::PutObject,
            method: Method::PUT,
            query: Vec::new(),
            payload: Payload::File {
                offset: 0,
                len: size,
            },
        }
    }

    fn create_multipart() -> Self {
        Self {
            operation: Operation::CreateMultipartUpload,
            method: Method::POST,
            query: vec![("uploads".to_owned(), String::new())],
            payload: Payload::Empty,
        }
    }

    fn upload_part(number: u32, upload_id: &str, offset: u64, len: u64) -> Self {
        Self {
            operation: Operation::UploadPart(number),
            method: Method::PUT,
            query: vec![
                ("partNumber".to_owned(), number.to_string()),
                ("uploadId".to_owned(), upload_id.to_owned()),
            ],
            payload: Payload::File { offset, len },
        }
    }

    fn complete_multipart(upload_id: &str, etags: &[(u32, String)]) -> Self {
        Self {
            operation: Operation::CompleteMultipartUpload,
            method: Method::POST,
            query: vec![("uploadId".to_owned(), upload_id.to_owned())],
            payload: Payload::Xml(complete_xml(etags)),
        }
    }

    fn head_bucket() -> Self {
        Self {
            operation: Operation::HeadBucket,
            method: Method::HEAD,
            query: Vec::new(),
            payload: Payload::Empty,
        }
    }

    fn abort_multipart(upload_id: &str) -> Self {
        Self {
            operation: Operation::AbortMultipartUpload,
            method: Method::DELETE,
            query: vec![("uploadId".to_owned(), upload_id.to_owned())],
            payload: Payload::Empty,
        }
    }
}

/// A successful answer.
struct Reply {
    headers: HeaderMap,
    body: String,
}

/// Why one attempt failed.
enum Failure {
    /// No HTTP answer (connect, TLS, reset, timeout) or a request that could
    /// not be built.
    Transport(reqwest::Error),
    /// S3 answered with an error (possibly inside a 200, as Complete can).
    S3 {
        status: StatusCode,
        error: S3Error,
        header_region: Option<String>,
        retry_after: Option<Duration>,
    },
    /// A local problem (reading the file, building the URL): never retried.
    Local(anyhow::Error),
}

impl Failure {
    fn retryable(&self) -> bool {
        match self {
            Self::Transport(error) => !error.is_builder(),
            Self::S3 { status, error, .. } => retryable(status.as_u16(), error.code.as_deref()),
            Self::Local(_) => false,
        }
    }

    fn into_error(self, operation: Operation, attempts: u32, secrets: &[&str]) -> anyhow::Error {
        let tries = if attempts > 1 {
            format!(", after {attempts} attempts")
        } else {
            String::new()
        };
        match self {
            Self::Transport(error) => anyhow::Error::new(error)
                .context(format!("could not complete S3 {operation}{tries}")),
            Self::S3 { status, error, .. } => {
                anyhow!(rejection_message(
                    operation, status, &error, &tries, secrets
                ))
            }
            Self::Local(error) => error,
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Transport(error) => format!("{error}"),
            Self::S3 { status, error, .. } => {
                format!(
                    "HTTP {} {}",
                    status.as_u16(),
                    error.code.as_deref().unwrap_or("")
                )
            }
            Self::Local(error) => format!("{error:#}"),
        }
    }
}

impl Inner {
    fn region_for(&self, bucket: &str) -> String {
        self.known_region(bucket)
            .unwrap_or_else(|| DEFAULT_REGION.to_owned())
    }

    /// The region S3 confirmed for `bucket`, if any request has yet.
    fn known_region(&self, bucket: &str) -> Option<String> {
        self.regions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(bucket)
            .cloned()
    }

    fn remember_region(&self, bucket: &str, region: &str) {
        self.regions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(bucket.to_owned(), region.to_owned());
    }

    /// Sends `call` until it succeeds, re-signing once for the bucket's real
    /// region when S3 names it, and retrying transient failures.
    async fn call(&self, job: &Job, call: &Call) -> anyhow::Result<Reply> {
        if matches!(call.payload, Payload::File { .. }) && self.known_region(&job.bucket).is_none()
        {
            self.probe_region(job).await;
        }
        let max_attempts = self.options.max_attempts.max(1);
        let mut attempt: u32 = 1;
        let mut followed_region = false;
        loop {
            let region = self.region_for(&job.bucket);
            let failure = match self.attempt(job, call, &region).await {
                Ok(reply) => {
                    if self.known_region(&job.bucket).is_none() {
                        self.remember_region(&job.bucket, &region);
                    }
                    return Ok(reply);
                }
                Err(failure) => failure,
            };
            if let Failure::S3 {
                status,
                error,
                header_region,
                ..
            } = &failure
                && !followed_region
                && let Some(new_region) = redirect_region(
                    status.as_u16(),
                    error.code.as_deref(),
                    header_region.as_deref(),
                    error.region.as_deref(),
                    &region,
                )
            {
                tracing::debug!(bucket = %job.bucket, %new_region, "S3 bucket is in another region; re-signing");
                self.remember_region(&job.bucket, &new_region);
                followed_region = true;
                continue;
            }
            if attempt < max_attempts && failure.retryable() {
                let delay = match &failure {
                    Failure::S3 {
                        retry_after: Some(wait),
                        ..
                    } => *wait,
                    _ => backoff_delay(attempt, self.options.retry_base_delay, fastrand::f64()),
                };
                tracing::warn!(
                    "S3 {} failed ({}); retrying in {} ms (attempt {} of {max_attempts})",
                    call.operation,
                    failure.describe(),
                    delay.as_millis(),
                    attempt + 1
                );
                tokio::time::sleep(delay).await;
                attempt += 1;
                continue;
            }
            let secrets = [
                job.credentials.secret_access_key.expose(),
                job.credentials.session_token.expose(),
            ];
            return Err(failure.into_error(call.operation, attempt, &secrets));
        }
    }

    /// Learns the bucket's region with a bodiless HeadBucket before the first
    /// request that carries data. S3 rejects a wrong-region PUT before
    /// reading its body and closes the connection, which the client sees as
    /// a broken pipe rather than the region answer (botocore avoids this
    /// with `Expect: 100-continue`, which our HTTP client cannot send).
    /// S3 names the region in `x-amz-bucket-region` whatever the status,
    /// even when the credentials may not list the bucket. Best effort: on no
    /// answer the data request still follows a region answer itself.
    async fn probe_region(&self, job: &Job) {
        let region = match self
            .attempt(job, &Call::head_bucket(), DEFAULT_REGION)
            .await
        {
            Ok(reply) => Some(
                header_str(&reply.headers, "x-amz-bucket-region")
                    .unwrap_or_else(|| DEFAULT_REGION.to_owned()),
            ),
            Err(Failure::S3 { header_region, .. }) => header_region,
            Err(failure) => {
                tracing::debug!("S3 HeadBucket gave no region: {}", failure.describe());
                None
            }
        };
        if let Some(region) = region.filter(|r| valid_region(r)) {
            tracing::debug!(bucket = %job.bucket, %region, "S3 bucket region");
            self.remember_region(&job.bucket, &region);
        }
    }

    async fn attempt(&self, job: &Job, call: &Call, region: &str) -> Result<Reply, Failure> {
        let endpoint = self.options.endpoint.as_ref();
        let url = if call.operation == Operation::HeadBucket {
            bucket_url(endpoint, &job.bucket, region)
        } else {
            object_url(endpoint, &job.bucket, &job.key, region)
        };
        let mut url = url.map_err(Failure::Local)?;
        set_query(&mut url, &call.query);
        let (body, payload_sha256, length) = match &call.payload {
            Payload::Empty => (
                reqwest::Body::from(Vec::new()),
                sigv4::EMPTY_SHA256.to_owned(),
                0,
            ),
            Payload::Xml(xml) => (
                reqwest::Body::from(xml.clone().into_bytes()),
                sigv4::sha256_hex(xml.as_bytes()),
                xml.len() as u64,
            ),
            Payload::File { offset, len } => {
                let sha256 = hash_range(Arc::clone(&job.file), *offset, *len)
                    .await
                    .map_err(Failure::Local)?;
                (
                    range_body(Arc::clone(&job.file), *offset, *len),
                    sha256,
                    *len,
                )
            }
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let headers = signed_headers(
            call.method.as_str(),
            &url,
            &call.query,
            &payload_sha256,
            &job.credentials,
            region,
            &sigv4::amz_date(now),
        );
        let sent_url = url.clone();
        // S3 needs the length up front; a streamed body would otherwise go
        // out chunked, which S3 refuses without aws-chunked framing.
        let mut request = self
            .client
            .request(call.method.clone(), url)
            .header(reqwest::header::CONTENT_LENGTH, length)
            .body(body);
        if matches!(call.payload, Payload::Xml(_)) {
            request = request.header(reqwest::header::CONTENT_TYPE, "application/xml");
        }
        for (name, value) in headers {
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                Failure::Local(anyhow!(
                    "the upload credentials contain characters that cannot be sent in an HTTP header"
                ))
            })?;
            if matches!(name, "authorization" | "x-amz-security-token") {
                value.set_sensitive(true);
            }
            request = request.header(name, value);
        }
        let response = request.send().await.map_err(Failure::Transport)?;
        if response.url() != &sent_url {
            // A followed redirect loses the signature on the new host, and S3
            // would then answer a misleading AccessDenied.
            return Err(Failure::Local(anyhow!(
                "S3 redirected {} to {}, and the HTTP client followed it; S3 uploads need a client that does not follow redirects",
                call.operation,
                response.url().host_str().unwrap_or("another host")
            )));
        }
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.text().await.map_err(Failure::Transport)?;
        match s3_error(status.as_u16(), &body) {
            None => Ok(Reply { headers, body }),
            Some(error) => Err(Failure::S3 {
                status,
                error,
                header_region: header_str(&headers, "x-amz-bucket-region"),
                retry_after: header_str(&headers, "retry-after")
                    .as_deref()
                    .and_then(retry::parse_retry_after),
            }),
        }
    }
}

fn header_str(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
}

/// Bytes read from the archive per step, when hashing and when sending.
const STREAM_CHUNK_BYTES: u64 = 256 * 1024;

fn short_read(error: std::io::Error) -> anyhow::Error {
    if error.kind() == std::io::ErrorKind::UnexpectedEof {
        anyhow!("the archive got shorter while it was being uploaded")
    } else {
        anyhow::Error::new(error).context("could not read the archive")
    }
}

/// Hashes `len` bytes at `offset` on the blocking pool, a chunk at a time,
/// so neither the reads nor the hashing stall the async runtime.
async fn hash_range(file: Arc<File>, offset: u64, len: u64) -> anyhow::Result<String> {
    use sha2::Digest as _;
    tokio::task::spawn_blocking(move || {
        let mut hasher = sha2::Sha256::new();
        let mut buffer = vec![0; STREAM_CHUNK_BYTES.min(len) as usize];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(STREAM_CHUNK_BYTES) as usize;
            read_exact_at(&file, &mut buffer[..n], offset + done).map_err(short_read)?;
            hasher.update(&buffer[..n]);
            done += n as u64;
        }
        Ok(hex::encode(hasher.finalize()))
    })
    .await
    .context("the archive reader stopped unexpectedly")?
}

/// Streams `len` bytes at `offset` as a request body, a chunk at a time.
/// Every retry builds a new body, so a retried part is read afresh.
fn range_body(file: Arc<File>, offset: u64, len: u64) -> reqwest::Body {
    let chunks =
        futures_util::stream::try_unfold((file, offset, len), |(file, at, left)| async move {
            if left == 0 {
                return Ok(None);
            }
            let n = left.min(STREAM_CHUNK_BYTES);
            let reader = Arc::clone(&file);
            let chunk = tokio::task::spawn_blocking(move || {
                let mut buffer = vec![0; n as usize];
                read_exact_at(&reader, &mut buffer, at).map(|()| buffer)
            })
            .await
            .map_err(std::io::Error::other)??;
            Ok::<_, std::io::Error>(Some((chunk, (file, at + n, left - n))))
        });
    reqwest::Body::wrap_stream(chunks)
}

#[cfg(unix)]
fn read_exact_at(file: &File, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buffer, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buffer: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt as _;
    while !buffer.is_empty() {
        match file.seek_read(buffer, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buffer = &mut buffer[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// The object's URL for `region`. The key is encoded once, the way SigV4
/// signs it; a key the URL parser would rewrite (`.`/`..` segments) is refused
/// rather than signed for a path that is not sent.
fn object_url(
    endpoint: Option<&Url>,
    bucket: &str,
    key: &str,
    region: &str,
) -> anyhow::Result<Url> {
    s3_url(endpoint, bucket, Some(key), region)
}

/// The bucket's own URL (HeadBucket): the object URL without a key.
fn bucket_url(endpoint: Option<&Url>, bucket: &str, region: &str) -> anyhow::Result<Url> {
    s3_url(endpoint, bucket, None, region)
}

fn s3_url(
    endpoint: Option<&Url>,
    bucket: &str,
    key: Option<&str>,
    region: &str,
) -> anyhow::Result<Url> {
    if !valid_region(region) {
        bail!("{region:?} is not an AWS region name");
    }
    // "/{key}" after the bucket (path-style) or the host (virtual-hosted).
    let key_path = key.map_or(String::new(), |key| {
        format!("/{}", sigv4::uri_encode(key, false))
    });
    let (text, path) = match endpoint {
        Some(endpoint) => {
            let host = endpoint
                .host_str()
                .ok_or_else(|| anyhow!("the S3 endpoint {endpoint} has no host"))?;
            let authority = match endpoint.port() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_owned(),
            };
            let path = format!(
                "{}/{}{key_path}",
                endpoint.path().trim_end_matches('/'),
                sigv4::uri_encode(bucket, true)
            );
            (format!("{}://{authority}{path}", endpoint.scheme()), path)
        }
        None => {
            let service_host = if region == DEFAULT_REGION {
                "s3.amazonaws.com".to_owned()
            } else {
                format!("s3.{region}.amazonaws.com")
            };
            if virtual_host_ok(bucket) {
                let path = if key_path.is_empty() {
                    "/".to_owned()
                } else {
                    key_path
                };
                (format!("https://{bucket}.{service_host}{path}"), path)
            } else {
                let path = format!("/{}{key_path}", sigv4::uri_encode(bucket, true));
                (format!("https://{service_host}{path}"), path)
            }
        }
    };
    let url =
        Url::parse(&text).with_context(|| format!("could not form an S3 URL from {text:?}"))?;
    if url.path() != path {
        bail!(
            "the S3 key {key:?} would be rewritten in transit (it has `.` or `..` segments); the platform should issue another key"
        );
    }
    Ok(url)
}

/// Region names become part of a host name, so only `[a-z0-9-]` passes:
/// a hostile `x-amz-bucket-region` cannot point the upload elsewhere.
fn valid_region(region: &str) -> bool {
    !region.is_empty()
        && region.len() <= 32
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Whether `{bucket}.s3….amazonaws.com` works over HTTPS: a DNS label of
/// lower-case letters, digits and hyphens. Dotted names break the wildcard
/// certificate, so they go path-style, as boto3 does.
fn virtual_host_ok(bucket: &str) -> bool {
    let bytes = bucket.as_bytes();
    (3..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// Writes the query as SigV4 canonicalises it (`uploads` keeps no `=`, which
/// S3 reads the same).
fn set_query(url: &mut Url, pairs: &[(String, String)]) {
    if pairs.is_empty() {
        url.set_query(None);
        return;
    }
    let query = pairs
        .iter()
        .map(|(name, value)| {
            let name = sigv4::uri_encode(name, true);
            if value.is_empty() {
                name
            } else {
                format!("{name}={}", sigv4::uri_encode(value, true))
            }
        })
        .collect::<Vec<_>>()
        .join("&");
    url.set_query(Some(&query));
}

/// The headers that authenticate one request: `x-amz-content-sha256`,
/// `x-amz-date`, `x-amz-security-token` (when there is a token) and
/// `authorization`. `host` is signed as the HTTP client will send it.
fn signed_headers(
    method: &str,
    url: &Url,
    query: &[(String, String)],
    payload_sha256: &str,
    credentials: &Credentials,
    region: &str,
    amz_date: &str,
) -> Vec<(&'static str, String)> {
    let host = match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        (None, _) => String::new(),
    };
    let token = credentials.session_token.expose();
    let mut to_sign: Vec<(&str, &str)> = vec![
        ("host", &host),
        ("x-amz-content-sha256", payload_sha256),
        ("x-amz-date", amz_date),
    ];
    if !token.is_empty() {
        to_sign.push(("x-amz-security-token", token));
    }
    let authorization = sigv4::Signer {
        access_key_id: &credentials.access_key_id,
        secret_access_key: credentials.secret_access_key.expose(),
        region,
        service: "s3",
        amz_date,
    }
    .authorization(&sigv4::Request {
        method,
        canonical_uri: url.path(),
        query,
        headers: &to_sign,
        payload_sha256,
    });
    let mut headers = vec![
        ("x-amz-content-sha256", payload_sha256.to_owned()),
        ("x-amz-date", amz_date.to_owned()),
    ];
    if !token.is_empty() {
        headers.push(("x-amz-security-token", token.to_owned()));
    }
    headers.push(("authorization", authorization));
    headers
}

/// An S3 error document's fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct S3Error {
    code: Option<String>,
    message: Option<String>,
    region: Option<String>,
}

/// The error in an answer: any non-2xx status, or a 2xx whose document is an
/// `<Error>` (S3 does that for CompleteMultipartUpload).
fn s3_error(status: u16, body: &str) -> Option<S3Error> {
    let is_error_document = root_element(body) == Some("Error");
    if (200..300).contains(&status) && !is_error_document {
        return None;
    }
    Some(S3Error {
        code: xml_text(body, "Code"),
        message: xml_text(body, "Message"),
        region: xml_text(body, "Region"),
    })
}

fn root_element(body: &str) -> Option<&str> {
    let mut rest = body.trim_start();
    while let Some(after) = rest.strip_prefix("<?").or_else(|| rest.strip_prefix("<!")) {
        rest = after.split_once('>')?.1.trim_start();
    }
    let rest = rest.strip_prefix('<')?;
    let end = rest.find(|c: char| c == '>' || c == '/' || c.is_whitespace())?;
    Some(&rest[..end])
}

/// Text of the first `<tag>…</tag>`, entities decoded. Enough for S3's flat
/// answers; not a general XML parser.
fn xml_text(body: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = body.find(&open)? + open.len();
    let len = body[start..].find(&close)?;
    Some(xml_unescape(body[start..start + len].trim()))
}

fn xml_unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The CompleteMultipartUpload body; parts must already be in ascending order.
fn complete_xml(etags: &[(u32, String)]) -> String {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">",
    );
    for (number, etag) in etags {
        xml.push_str(&format!(
            "<Part><PartNumber>{number}</PartNumber><ETag>{}</ETag></Part>",
            xml_escape(etag)
        ));
    }
    xml.push_str("</CompleteMultipartUpload>");
    xml
}

/// The bucket's region when an answer is S3 saying "wrong region" (the 400
/// `AuthorizationHeaderMalformed` or a 301/307 redirect), preferring the
/// `x-amz-bucket-region` header over the XML `<Region>` as botocore does.
/// `None` when there is nothing new to follow.
fn redirect_region(
    status: u16,
    code: Option<&str>,
    header_region: Option<&str>,
    body_region: Option<&str>,
    current_region: &str,
) -> Option<String> {
    let is_region_answer = matches!(status, 301 | 302 | 307)
        || matches!(
            code,
            Some("AuthorizationHeaderMalformed" | "PermanentRedirect" | "TemporaryRedirect")
        );
    if !is_region_answer {
        return None;
    }
    header_region
        .filter(|r| valid_region(r))
        .or(body_region.filter(|r| valid_region(r)))
        .filter(|r| *r != current_region)
        .map(str::to_owned)
}

/// Whether a failed answer is worth another attempt: the crate's retryable
/// statuses, plus S3's own transient codes (its idle-socket `RequestTimeout`
/// comes as a 400, and Complete's `InternalError` inside a 200).
fn retryable(status: u16, code: Option<&str>) -> bool {
    retry::RETRYABLE_STATUSES.contains(&status)
        || matches!(
            code,
            Some("RequestTimeout" | "SlowDown" | "InternalError" | "ServiceUnavailable")
        )
}

/// The crate's backoff (`retry::Policy::READ`) scaled so its first step is
/// `base`; `failed_attempt` counts from 1, `unit` is jitter in [0, 1].
fn backoff_delay(failed_attempt: u32, base: Duration, unit: f64) -> Duration {
    let scale =
        base.as_secs_f64() / Duration::from_millis(retry::BACKOFF_BASE_MILLIS).as_secs_f64();
    retry::Policy::READ
        .delay(failed_attempt, None, unit)
        .mul_f64(scale)
}

/// "S3 rejected the upload: Code: Message (HTTP 403 on PutObject): hint".
/// Only `<Code>` and `<Message>` are shown: S3's other fields (the canonical
/// request, the string to sign) carry the session token.
fn rejection_message(
    operation: Operation,
    status: StatusCode,
    error: &S3Error,
    tries: &str,
    secrets: &[&str],
) -> String {
    let what = match (&error.code, &error.message) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.clone(),
        (None, _) => format!(
            "HTTP {} {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        )
        .trim_end()
        .to_owned(),
    };
    let mut message = format!(
        "S3 rejected the upload: {what} (HTTP {} on {operation}{tries})",
        status.as_u16()
    );
    if let Some(hint) = error.code.as_deref().and_then(hint) {
        message.push_str(": ");
        message.push_str(hint);
    }
    redact(&message, secrets)
}

fn hint(code: &str) -> Option<&'static str> {
    Some(match code {
        "SignatureDoesNotMatch" => {
            "the request was not signed with the secret S3 expects; check that no proxy rewrites S3 requests, or report it"
        }
        "ExpiredToken" | "TokenRefreshRequired" => {
            "the platform's temporary upload credentials expired; run the deploy again"
        }
        "InvalidAccessKeyId" | "InvalidToken" | "AccessDenied" => {
            "the platform's temporary upload credentials were refused for this bucket and key; run the deploy again, and report it if it persists"
        }
        "RequestTimeTooSkewed" => {
            "this machine's clock is more than 15 minutes off; fix its time (NTP) and retry"
        }
        _ => return None,
    })
}

fn redact(text: &str, secrets: &[&str]) -> String {
    secrets
        .iter()
        .filter(|s| s.len() >= 4)
        .fold(text.to_owned(), |text, secret| text.replace(secret, "***"))
}

#[cfg(test)]
mod tests;
