//! Fake S3: the upload target the platform's temporary credentials point at.
//!
//! Serves path-style (`/{bucket}/{key}`) and virtual-host-style
//! (`Host: {bucket}.…`) requests, verifies AWS SigV4 (header and presigned)
//! against the credentials it issued, answers a request signed for the wrong
//! region the way S3 does, and keeps uploaded objects on disk so tests can
//! open them.
//!
//! Bodies are streamed to files while being hashed, never held whole in
//! memory: multi-GiB uploads must keep the fake's footprint flat. Like S3,
//! completing a multipart upload copies nothing: the object is its parts,
//! read back one after the other, so the answer comes at once whatever the
//! size and a benchmark measures the client rather than the fake's disk.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use futures_util::StreamExt as _;
use md5::Md5;
use serde::Serialize;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, BufWriter};

use crate::sigv4::{
    self, AuthError, AuthForm, AwsChunkedDecoder, ChunkError, ChunkSigning, PayloadMode,
    RequestView, SigningParams,
};

/// The region the fake bucket lives in unless configured otherwise; not
/// `us-east-1`, so that clients must follow S3's region answer.
pub const DEFAULT_REGION: &str = "us-west-2";
/// S3's minimum size for every part of a multipart upload but the last.
pub const MIN_PART_BYTES: u64 = 5 * 1024 * 1024;
const MAX_PART_NUMBER: u32 = 10_000;
/// S3's limit for a single PUT.
const MAX_SINGLE_PUT_BYTES: u64 = 5 * 1024 * 1024 * 1024;
/// Request bodies that are parsed, not stored (the Complete part list).
const MAX_SMALL_BODY_BYTES: usize = 4 * 1024 * 1024;
const FILE_BUFFER_BYTES: usize = 1024 * 1024;
const READ_CHUNK_BYTES: usize = 64 * 1024;
const XMLNS: &str = "http://s3.amazonaws.com/doc/2006-03-01/";
const DEFAULT_CONTENT_TYPE: &str = "binary/octet-stream";

/// Where the fake bucket lives and where objects are kept.
#[derive(Clone, Debug)]
pub struct S3Config {
    pub bucket: String,
    pub region: String,
    pub store_dir: PathBuf,
}

impl S3Config {
    /// A bucket in [`DEFAULT_REGION`].
    pub fn new(bucket: impl Into<String>, store_dir: impl Into<PathBuf>) -> Self {
        Self {
            bucket: bucket.into(),
            region: DEFAULT_REGION.to_owned(),
            store_dir: store_dir.into(),
        }
    }
}

/// What `model_s3_upload_credentials` / `chain_s3_upload_credentials` return.
#[derive(Clone, Debug, Serialize)]
pub struct IssuedCredentials {
    pub s3_bucket: String,
    pub s3_key: String,
    pub aws_access_key_id: String,
    pub aws_secret_access_key: String,
    pub aws_session_token: String,
}

/// One S3 request as the fake judged it.
///
/// `payload_mode` is `sha256` for a real body hash, the literal
/// `x-amz-content-sha256` value for the special modes (`UNSIGNED-PAYLOAD`,
/// `STREAMING-…`), or `none` when the request got no further than that.
#[derive(Clone, Debug, Serialize)]
pub struct S3Event {
    pub operation: String,
    pub key: String,
    pub signature_verified: bool,
    pub signed_region: Option<String>,
    pub payload_mode: String,
    pub status: u16,
    pub error_code: Option<String>,
    /// UploadPart's `partNumber`, when it parsed.
    pub part_number: Option<u32>,
    /// The body's CRC32, computed here, matched the one the client sent
    /// (header or trailer) and was stored with the part.
    pub crc32_verified: bool,
    /// Bytes of the request body the fake read (as framed on the wire). A
    /// request refused at its headers reads none: to a client that sent
    /// `Expect: 100-continue` no `100` went out, so none were sent either.
    pub body_bytes: u64,
    /// The request carried `Expect: 100-continue`.
    pub expect_continue: bool,
}

/// A refusal S3 makes from a request's headers alone, before it reads any
/// of the body (tests script it with [`FakeS3::refuse_at_headers`]). The
/// signature is still checked and recorded first, as S3 does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 403 `AccessDenied`, as a bucket policy or a revoked key answers.
    AccessDenied,
    /// 400 `ExpiredToken`: the temporary credentials ran out.
    ExpiredToken,
}

impl Refusal {
    fn error(self) -> S3Error {
        match self {
            Self::AccessDenied => access_denied("Access Denied"),
            Self::ExpiredToken => S3Error::new(
                StatusCode::BAD_REQUEST,
                "ExpiredToken",
                "The provided token has expired.",
            ),
        }
    }
}

/// An answer given from a request's head alone, before any of its body is
/// read, that is not S3's own refusal: what a broken S3-compatible server
/// or something on the way (a gateway, a proxy) answers. Scripted with
/// [`FakeS3::answer_before_body`]; nothing is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EarlyAnswer {
    /// `200 OK` with an ETag to a data request whose body was never read,
    /// and so never stored.
    OkUnread,
    /// `417 Expectation Failed` to a request that sent `Expect:
    /// 100-continue`, as a server or proxy that implements no expectations
    /// answers (RFC 9110 §15.5.18); a request without `Expect` is served
    /// as usual and does not count.
    ExpectationFailed,
}

#[derive(Debug)]
struct ScriptedEarly {
    operation: String,
    answer: EarlyAnswer,
    left: u32,
}

#[derive(Debug)]
struct ScriptedDelay {
    operation: String,
    delay: std::time::Duration,
    left: u32,
}

#[derive(Debug)]
struct ScriptedRefusal {
    operation: String,
    refusal: Refusal,
    left: u32,
}

/// Temporary credentials, good for one key only.
#[derive(Clone, Debug)]
struct Grant {
    secret: String,
    token: String,
    key: String,
}

#[derive(Clone, Debug)]
struct PartRecord {
    md5: [u8; 16],
    size: u64,
    crc32: u32,
    path: PathBuf,
}

#[derive(Debug)]
struct Upload {
    key: String,
    dir: PathBuf,
    content_type: String,
    /// `x-amz-checksum-algorithm` of CreateMultipartUpload: every part must
    /// then carry that checksum, and the completion list must repeat it.
    checksum_algorithm: Option<String>,
    parts: BTreeMap<u32, PartRecord>,
    /// Aborted, but parts that were in progress landed after the abort:
    /// their storage stays (ListParts lists them) until it is aborted
    /// again, and nothing new may be added or completed.
    aborted: bool,
    /// A CompleteMultipartUpload of it is held in progress
    /// ([`FakeS3::hold_completion`]): it is stored at the release, and an
    /// abort meanwhile is answered as [`AbortWhileCompleting`] says.
    completing: bool,
}

/// How an AbortMultipartUpload is answered while a CompleteMultipartUpload
/// of the same upload is in progress (held). AWS documents neither; two
/// S3-compatible servers were seen to differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AbortWhileCompleting {
    /// 404 `NoSuchUpload`, and the completion stores the object after
    /// (moto): ListParts, UploadPart and a second Complete know the upload
    /// no more either.
    #[default]
    NoSuchUpload,
    /// 403 `AccessDenied`, the upload kept as it is until the completion
    /// stores the object (s3s-fs 0.14.1): ListParts still lists its parts.
    AccessDenied,
}

/// A CompleteMultipartUpload held in progress: what it stores at the
/// release, whether its client is still there or not.
#[derive(Debug)]
struct HeldCompletion {
    upload_id: String,
    key: String,
    object: StoredObject,
    /// Parts the completion did not list: removed when it is stored.
    unlisted: Vec<PathBuf>,
}

#[derive(Clone, Debug)]
struct StoredObject {
    /// The object's bytes in order: one file for a single PUT, the listed
    /// parts, where UploadPart wrote them, for a multipart upload.
    segments: Vec<PathBuf>,
    /// A multipart object's upload directory, removed with the object.
    dir: Option<PathBuf>,
    size: u64,
    etag: String,
    content_type: String,
    last_modified_secs: u64,
}

#[derive(Debug, Default)]
struct State {
    grants: HashMap<String, Grant>,
    uploads: HashMap<String, Upload>,
    objects: BTreeMap<String, StoredObject>,
    events: Vec<S3Event>,
    refusals: Vec<ScriptedRefusal>,
    early: Vec<ScriptedEarly>,
    delays: Vec<ScriptedDelay>,
    /// Requests to hold when they come ([`FakeS3::hold_part`],
    /// [`FakeS3::hold_completion`]), and those held now.
    holds: Vec<HoldOn>,
    held_parts: Vec<HeldPart>,
    held_completions: Vec<HeldCompletion>,
    abort_while_completing: AbortWhileCompleting,
    /// Parts whose connection to cut after so many bytes of their body
    /// ([`FakeS3::cut_part_body`]): part number and bytes.
    cuts: Vec<(u32, u64)>,
    /// Bumped by [`FakeS3::release_held`].
    releases: u64,
    next_hold_id: u64,
}

/// What a test asked the fake to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HoldOn {
    Part(u32),
    /// A part that lands late on its own ([`FakeS3::land_part_late`]).
    PartLate {
        number: u32,
        at_most: std::time::Duration,
    },
    Completion,
}

/// An UploadPart whose body arrived and is held before it is stored.
#[derive(Debug)]
struct HeldPart {
    id: u64,
    upload_id: String,
    /// The upload's key, for a part that lands after its upload is gone.
    key: String,
    number: u32,
    record: PartRecord,
    released: bool,
    /// It lands after its upload's first ListParts (or its own wait),
    /// never at an abort.
    lands_after_list: bool,
}

pub struct FakeS3 {
    cfg: S3Config,
    state: Mutex<State>,
    /// Wakes held requests when they are released or their upload aborted.
    wake: tokio::sync::Notify,
}

impl FakeS3 {
    pub fn new(cfg: S3Config) -> Self {
        Self {
            cfg,
            state: Mutex::new(State::default()),
            wake: tokio::sync::Notify::new(),
        }
    }

    /// Holds the next UploadPart numbered `number` once its whole body has
    /// arrived and its checksum was checked, before the part is stored and
    /// answered: the client has sent everything and waits. It stays held
    /// until [`Self::release_held`], or until its upload is aborted: then
    /// the part lands just after the abort, as AWS documents for part
    /// uploads in progress during an AbortMultipartUpload ("might or might
    /// not succeed", so the abort may need repeating): its storage stays,
    /// and ListParts lists it, until the upload is aborted again.
    pub fn hold_part(&self, number: u32) {
        self.lock().holds.push(HoldOn::Part(number));
    }

    /// Holds the next UploadPart numbered `number` once its whole body has
    /// arrived, as [`Self::hold_part`] does, but it lands on its own:
    /// `at_most` later (then it is stored and answered, as a slow S3
    /// would), or just after its upload's first ListParts, whichever comes
    /// first — not at an abort. A client that cut its connection at the
    /// abort sees no part in that listing, and the part lands after it
    /// (AWS documents that a part in progress may land after the abort);
    /// a client that waited for its answer before aborting sees it stored
    /// first, and the abort removes it.
    pub fn land_part_late(&self, number: u32, at_most: std::time::Duration) {
        self.lock().holds.push(HoldOn::PartLate { number, at_most });
    }

    /// Cuts the connection of the next UploadPart numbered `number` once
    /// `after_bytes` of its body arrived (or all of it, if fewer): a reset
    /// mid-body, nothing stored, no answer.
    pub fn cut_part_body(&self, number: u32, after_bytes: u64) {
        self.lock().cuts.push((number, after_bytes));
    }

    /// Holds the next CompleteMultipartUpload in progress once its part
    /// list was checked, before the object is stored, until
    /// [`Self::release_held`]: then the object is stored (whether the
    /// client is still connected or not: a request S3 received is carried
    /// out) and, to a client still there, answered. An abort meanwhile is
    /// answered as [`Self::abort_while_completing`] set (404 `NoSuchUpload`
    /// unless told otherwise).
    pub fn hold_completion(&self) {
        self.lock().holds.push(HoldOn::Completion);
    }

    /// How an abort is answered while a completion of its upload is held.
    pub fn abort_while_completing(&self, answer: AbortWhileCompleting) {
        self.lock().abort_while_completing = answer;
    }

    /// Requests held now.
    pub fn held(&self) -> usize {
        let state = self.lock();
        state.held_parts.iter().filter(|h| !h.released).count() + state.held_completions.len()
    }

    /// Lets every held request go on; a held completion stores its object
    /// now.
    pub fn release_held(&self) {
        let completions = {
            let mut state = self.lock();
            state.releases += 1;
            for held in &mut state.held_parts {
                held.released = true;
            }
            std::mem::take(&mut state.held_completions)
        };
        for held in completions {
            self.lock().uploads.remove(&held.upload_id);
            for path in &held.unlisted {
                let _ = std::fs::remove_file(path);
            }
            self.store_object(&held.key, held.object);
        }
        self.wake.notify_waiters();
    }

    /// The wait a late landing was asked with for part `number`, taking it.
    fn take_late_landing(&self, number: u32) -> Option<std::time::Duration> {
        let mut state = self.lock();
        let at = state
            .holds
            .iter()
            .position(|h| matches!(h, HoldOn::PartLate { number: n, .. } if *n == number))?;
        match state.holds.remove(at) {
            HoldOn::PartLate { at_most, .. } => Some(at_most),
            _ => None,
        }
    }

    /// The bytes after which to cut part `number`'s body, taking it.
    fn take_cut(&self, number: u32) -> Option<u64> {
        let mut state = self.lock();
        let at = state.cuts.iter().position(|(n, _)| *n == number)?;
        Some(state.cuts.remove(at).1)
    }

    /// Whether a hold was asked for `what`, taking it.
    fn take_hold(&self, what: HoldOn) -> bool {
        let mut state = self.lock();
        let Some(at) = state.holds.iter().position(|h| *h == what) else {
            return false;
        };
        state.holds.remove(at);
        true
    }

    /// Waits until `done` holds, rechecked whenever held requests are woken.
    async fn wait_until(&self, done: impl Fn(&State) -> bool) {
        loop {
            let notified = self.wake.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if done(&self.lock()) {
                return;
            }
            notified.await;
        }
    }

    /// Holds a received part when a test asked for it. `Some(temp)`: store
    /// it as usual (not held, or released); `None`: it landed after its
    /// upload was aborted and is stored there already.
    async fn hold_received_part(
        &self,
        (upload_id, key): (&str, &str),
        number: u32,
        temp: TempFile,
        digest: &BodyDigest,
    ) -> Result<Option<TempFile>, S3Error> {
        let late = self.take_late_landing(number);
        if late.is_none() && !self.take_hold(HoldOn::Part(number)) {
            return Ok(Some(temp));
        }
        let path = self
            .cfg
            .store_dir
            .join("held")
            .join(random_string(ALNUM_LOWER, 24));
        temp.persist(&path)?;
        let id = {
            let mut state = self.lock();
            state.next_hold_id += 1;
            let id = state.next_hold_id;
            state.held_parts.push(HeldPart {
                id,
                upload_id: upload_id.to_owned(),
                key: key.to_owned(),
                number,
                record: PartRecord {
                    md5: digest.md5,
                    size: digest.len,
                    crc32: digest.crc32,
                    path,
                },
                released: false,
                lands_after_list: late.is_some(),
            });
            id
        };
        let gone_or_released = |state: &State| {
            state
                .held_parts
                .iter()
                .find(|h| h.id == id)
                .is_none_or(|h| h.released)
        };
        match late {
            Some(at_most) => {
                // Landed by a ListParts meanwhile, or now by itself.
                let _ = tokio::time::timeout(at_most, self.wait_until(gone_or_released)).await;
                let mut state = self.lock();
                if let Some(at) = state.held_parts.iter().position(|h| h.id == id) {
                    let held = state.held_parts.remove(at);
                    land(&mut state, &self.cfg.store_dir, held);
                }
                return Ok(None);
            }
            None => self.wait_until(gone_or_released).await,
        }
        let mut state = self.lock();
        let Some(at) = state.held_parts.iter().position(|h| h.id == id) else {
            return Ok(None);
        };
        let held = state.held_parts.remove(at);
        Ok(Some(TempFile {
            path: held.record.path,
        }))
    }

    pub fn bucket(&self) -> &str {
        &self.cfg.bucket
    }

    pub fn region(&self) -> &str {
        &self.cfg.region
    }

    /// Mints temporary credentials (with a session token) for one new key
    /// under `key_prefix` (`models` or `chains`).
    pub fn issue_credentials(&self, key_prefix: &str) -> IssuedCredentials {
        let prefix = key_prefix.trim_matches('/');
        let key = format!("{prefix}/{}.tgz", random_string(ALNUM_LOWER, 32));
        // Shaped like STS output: an ASIA key id, a 40-character secret and
        // a long base64 token whose `+`, `/` and `=` exercise URL encoding.
        let grant = Grant {
            secret: random_string(BASE64_CHARS, 40),
            token: format!("FwoGZXIvYXdzE{}==", random_string(BASE64_CHARS, 300)),
            key: key.clone(),
        };
        let access_key_id = format!("ASIA{}", random_string(ALNUM_UPPER, 16));
        self.lock()
            .grants
            .insert(access_key_id.clone(), grant.clone());
        IssuedCredentials {
            s3_bucket: self.cfg.bucket.clone(),
            s3_key: key,
            aws_access_key_id: access_key_id,
            aws_secret_access_key: grant.secret,
            aws_session_token: grant.token,
        }
    }

    /// Refuses the next `times` requests of `operation` (`s3.put_object`,
    /// `s3.upload_part`, …) with `refusal`, answered from the headers
    /// without reading the body.
    pub fn refuse_at_headers(&self, operation: &str, refusal: Refusal, times: u32) {
        self.lock().refusals.push(ScriptedRefusal {
            operation: operation.to_owned(),
            refusal,
            left: times,
        });
    }

    /// Answers the next `times` requests of `operation` with `answer`,
    /// from the head alone (before signature checks: what answers is not
    /// S3).
    pub fn answer_before_body(&self, operation: &str, answer: EarlyAnswer, times: u32) {
        self.lock().early.push(ScriptedEarly {
            operation: operation.to_owned(),
            answer,
            left: times,
        });
    }

    /// Holds the answer to the next `times` requests of `operation` for
    /// `delay` before serving them (a slow S3).
    pub fn delay_answer(&self, operation: &str, delay: std::time::Duration, times: u32) {
        self.lock().delays.push(ScriptedDelay {
            operation: operation.to_owned(),
            delay,
            left: times,
        });
    }

    fn scripted_early(&self, operation: &str, expect_continue: bool) -> Option<EarlyAnswer> {
        let mut state = self.lock();
        let scripted = state.early.iter_mut().find(|r| {
            r.operation == operation
                && r.left > 0
                && (expect_continue || r.answer != EarlyAnswer::ExpectationFailed)
        })?;
        scripted.left -= 1;
        Some(scripted.answer)
    }

    fn scripted_delay(&self, operation: &str) -> Option<std::time::Duration> {
        let mut state = self.lock();
        let scripted = state
            .delays
            .iter_mut()
            .find(|r| r.operation == operation && r.left > 0)?;
        scripted.left -= 1;
        Some(scripted.delay)
    }

    fn scripted_refusal(&self, operation: Op) -> Option<Refusal> {
        let mut state = self.lock();
        let scripted = state
            .refusals
            .iter_mut()
            .find(|r| r.operation == operation.name() && r.left > 0)?;
        scripted.left -= 1;
        Some(scripted.refusal)
    }

    /// True when the request is addressed to the bucket (path-style first
    /// segment, or a `Host` that starts with `{bucket}.`).
    pub fn matches(&self, host: Option<&str>, path: &str) -> bool {
        locate(&self.cfg.bucket, host, path).is_some()
    }

    /// A stable name for the S3 operation, used by fault injection and the
    /// request log: `s3.put_object`, `s3.create_multipart_upload`,
    /// `s3.upload_part`, `s3.complete_multipart_upload`,
    /// `s3.abort_multipart_upload`, `s3.list_parts`, `s3.head_object`, `s3.get_object`,
    /// `s3.head_bucket`, `s3.other`.
    ///
    /// Without the `Host` this cannot tell a virtual-host object with a
    /// one-segment key (`/x.tgz`) from a path-style bucket (`/bucket`); it
    /// takes a one-segment path for the bucket. Issued keys always have two.
    pub fn operation_name(method: &Method, uri: &Uri) -> &'static str {
        let trimmed = uri.path().trim_start_matches('/');
        let has_key = trimmed
            .split_once('/')
            .is_some_and(|(_, rest)| !rest.is_empty());
        let query = sigv4::decoded_query_pairs(uri.query().unwrap_or(""));
        classify(method, has_key, &query).name()
    }

    /// Serves one S3 request.
    pub async fn handle(&self, req: Request) -> Response {
        self.handle_on_connection(req, &tokio::sync::Notify::new())
            .await
    }

    /// Serves one S3 request arrived on a connection that `kill` drops (a
    /// part cut mid-body by [`Self::cut_part_body`]).
    pub async fn handle_on_connection(&self, req: Request, kill: &tokio::sync::Notify) -> Response {
        let (parts, body) = req.into_parts();
        let expect_continue = expects_continue(&parts.headers);
        let operation = Self::operation_name(&parts.method, &parts.uri);
        if let Some(delay) = self.scripted_delay(operation) {
            tokio::time::sleep(delay).await;
        }
        if let Some(answer) = self.scripted_early(operation, expect_continue) {
            // The body is dropped unread: hyper sends no `100` for it.
            drop(body);
            let mut response = match answer {
                EarlyAnswer::OkUnread => with_headers(
                    StatusCode::OK,
                    &[("etag", "\"d41d8cd98f00b204e9800998ecf8427e\"".to_owned())],
                    Body::empty(),
                ),
                EarlyAnswer::ExpectationFailed => with_headers(
                    StatusCode::EXPECTATION_FAILED,
                    &[("content-type", "text/plain".to_owned())],
                    Body::from("Expectation Failed"),
                ),
            };
            add_common_headers(response.headers_mut());
            self.lock().events.push(S3Event {
                operation: operation.to_owned(),
                key: String::new(),
                signature_verified: false,
                signed_region: None,
                payload_mode: "none".to_owned(),
                status: response.status().as_u16(),
                error_code: None,
                part_number: None,
                crc32_verified: false,
                body_bytes: 0,
                expect_continue,
            });
            return response;
        }
        let mut judged = Judged::default();
        // Counted as the handlers pull it, so a body never pulled counts
        // zero (and hyper never sends `100 Continue` for it).
        let counted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = std::sync::Arc::clone(&counted);
        let cut_after = (operation == Op::UploadPart.name())
            .then(|| {
                let query = sigv4::decoded_query_pairs(parts.uri.query().unwrap_or(""));
                parse_part_number(&query_value(&query, "partNumber")?)
            })
            .flatten()
            .and_then(|number| self.take_cut(number));
        let reached = std::sync::Arc::new(tokio::sync::Notify::new());
        let reaching = std::sync::Arc::clone(&reached);
        let body = Body::from_stream(body.into_data_stream().map(move |frame| {
            if let Ok(bytes) = &frame {
                let before =
                    counter.fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
                if cut_after.is_some_and(|cut| before + bytes.len() as u64 >= cut) {
                    reaching.notify_one();
                }
            }
            frame
        }));
        let mut body = Some(body);
        let serving = self.serve(&parts, &mut body, &mut judged);
        let outcome = tokio::select! {
            outcome = serving => outcome,
            () = reached.notified() => {
                // Nothing is stored and nothing answers: the connection is
                // dropped with the rest of the body unread (a reset).
                self.lock().events.push(S3Event {
                    operation: operation.to_owned(),
                    key: String::new(),
                    signature_verified: false,
                    signed_region: None,
                    payload_mode: "none".to_owned(),
                    status: 0,
                    error_code: Some("ConnectionCut".to_owned()),
                    part_number: judged.part_number,
                    crc32_verified: false,
                    body_bytes: counted.load(std::sync::atomic::Ordering::Relaxed),
                    expect_continue,
                });
                kill.notify_one();
                return std::future::pending().await;
            }
        };
        let error_code = outcome.as_ref().err().map(|e| e.code.to_owned());
        if let (true, Some(rest)) = (outcome.is_err(), body.take()) {
            drain_unread(&parts.headers, rest).await;
        }
        let mut response = match outcome {
            Ok(response) => response,
            Err(err) => err.render(&self.cfg.region, parts.method == Method::HEAD),
        };
        add_common_headers(response.headers_mut());
        self.lock().events.push(S3Event {
            operation: judged.operation.name().to_owned(),
            key: judged.key,
            signature_verified: judged.signature_verified,
            signed_region: judged.signed_region,
            payload_mode: judged.payload_mode.unwrap_or_else(|| "none".to_owned()),
            status: response.status().as_u16(),
            error_code,
            part_number: judged.part_number,
            crc32_verified: judged.crc32_verified,
            body_bytes: counted.load(std::sync::atomic::Ordering::Relaxed),
            expect_continue,
        });
        response
    }

    /// The files holding a stored object's bytes, in order: one for a
    /// single PUT, one per listed part for a multipart upload.
    pub fn object_files(&self, key: &str) -> Option<Vec<PathBuf>> {
        self.lock().objects.get(key).map(|o| o.segments.clone())
    }

    /// Whether an object is stored under `key` and all its files are there.
    pub fn object_exists(&self, key: &str) -> bool {
        self.object_files(key)
            .is_some_and(|files| files.iter().all(|f| f.exists()))
    }

    /// A stored object's bytes, read whole (for tests of small objects).
    pub fn object_bytes(&self, key: &str) -> Option<Vec<u8>> {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut self.object_reader(key)?, &mut bytes).ok()?;
        Some(bytes)
    }

    /// Reads a stored object from the start, file after file.
    pub fn object_reader(&self, key: &str) -> Option<ObjectReader> {
        Some(ObjectReader {
            files: self.object_files(key)?.into(),
            current: None,
        })
    }

    /// A stored object's size and a body streaming its bytes.
    pub fn object_body(&self, key: &str) -> Option<(u64, Body)> {
        let object = self.lock().objects.get(key).cloned()?;
        Some((
            object.size,
            Body::from_stream(segments_stream(object.segments)),
        ))
    }

    /// Every stored object: key and size in bytes.
    pub fn objects(&self) -> Vec<(String, u64)> {
        self.lock()
            .objects
            .iter()
            .map(|(k, o)| (k.clone(), o.size))
            .collect()
    }

    /// Every S3 request judged so far, oldest first.
    pub fn events(&self) -> Vec<S3Event> {
        self.lock().events.clone()
    }

    /// The quoted ETag S3 would report for a stored object.
    pub fn object_etag(&self, key: &str) -> Option<String> {
        self.lock().objects.get(key).map(|o| o.etag.clone())
    }

    /// How many multipart uploads are started and neither completed nor
    /// aborted.
    pub fn open_uploads(&self) -> usize {
        self.lock().uploads.len()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in another request must not take the whole fake down.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn serve(
        &self,
        parts: &Parts,
        body: &mut Option<Body>,
        judged: &mut Judged,
    ) -> Result<Response, S3Error> {
        let host = host_of(parts);
        let raw_query = parts.uri.query().unwrap_or("");
        let query = sigv4::decoded_query_pairs(raw_query);
        let Some(target) = locate(&self.cfg.bucket, host.as_deref(), parts.uri.path()) else {
            return Err(S3Error::new(
                StatusCode::NOT_FOUND,
                "NoSuchBucket",
                "The specified bucket does not exist",
            ));
        };
        let key = match target {
            Target::Bucket => None,
            Target::Object(key) => Some(key),
        };
        judged.key = key.clone().unwrap_or_default();
        judged.operation = classify(&parts.method, key.is_some(), &query);
        let authed = self.authenticate(parts, raw_query, judged)?;
        if let Some(refusal) = self.scripted_refusal(judged.operation) {
            return Err(refusal.error());
        }
        if let Some(key) = &key
            && *key != authed.grant.key
        {
            return Err(access_denied("Access Denied"));
        }
        if authed.payload == PayloadMode::StreamingSignedTrailer {
            return Err(S3Error::new(
                StatusCode::NOT_IMPLEMENTED,
                "NotImplemented",
                "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER is not implemented by this fake",
            ));
        }
        let key = key.unwrap_or_default();
        let ctx = OpContext {
            parts,
            query: &query,
            key: &key,
            authed: &authed,
        };
        match judged.operation {
            Op::PutObject => self.put_object(&ctx, body).await,
            Op::CreateMultipartUpload => self.create_multipart_upload(&ctx, body).await,
            Op::UploadPart => self.upload_part(&ctx, body, judged).await,
            Op::CompleteMultipartUpload => self.complete_multipart_upload(&ctx, body).await,
            Op::AbortMultipartUpload => self.abort_multipart_upload(&ctx, body).await,
            Op::ListParts => self.list_parts(&ctx, body).await,
            Op::HeadObject | Op::GetObject => self.read_object(&ctx, body).await,
            Op::HeadBucket => {
                receive_small(&ctx, body).await?;
                Ok(with_headers(
                    StatusCode::OK,
                    &[("x-amz-bucket-region", self.cfg.region.clone())],
                    Body::empty(),
                ))
            }
            Op::Other => Err(S3Error::new(
                StatusCode::NOT_IMPLEMENTED,
                "NotImplemented",
                "A header you provided implies functionality that is not implemented",
            )),
        }
    }

    /// Whether the request's signature is right for its own credential
    /// scope (issued key, matching token), whatever the scope's region.
    fn signature_matches(&self, parts: &Parts, raw_query: &str, auth: &sigv4::SignedAuth) -> bool {
        let cred = &auth.credential;
        let Some(grant) = self.lock().grants.get(&cred.access_key_id).cloned() else {
            return false;
        };
        if auth.security_token.as_deref() != Some(grant.token.as_str()) {
            return false;
        }
        let Ok(payload) = sigv4::payload_mode(auth.form, &parts.headers) else {
            return false;
        };
        compute_for(parts, raw_query, auth, &grant.secret, &payload).signature == auth.signature
    }

    /// The checks S3 makes before touching the body, in S3's order: the
    /// region comes first so any signed request teaches a client the
    /// bucket's region, then the key id, token, clock and signature.
    fn authenticate(
        &self,
        parts: &Parts,
        raw_query: &str,
        judged: &mut Judged,
    ) -> Result<Authed, S3Error> {
        let auth = sigv4::parse_auth(&parts.headers, raw_query).map_err(auth_error)?;
        let cred = &auth.credential;
        judged.signed_region = Some(cred.region.clone());
        if cred.region != self.cfg.region {
            // S3 answers the region before judging anything else. The fake
            // still checks the signature against the request's own scope
            // and records it, so tests can prove that even this first,
            // wrong-region request was signed correctly.
            judged.signature_verified = self.signature_matches(parts, raw_query, &auth);
            return Err(wrong_region(auth.form, &cred.region, &self.cfg.region));
        }
        if cred.service != sigv4::SERVICE {
            return Err(malformed(
                auth.form,
                &format!(
                    "the service '{}' is wrong; expecting '{}'",
                    cred.service,
                    sigv4::SERVICE
                ),
            ));
        }
        if cred.terminator != sigv4::TERMINATOR {
            return Err(malformed(
                auth.form,
                &format!(
                    "the Credential terminator '{}' is wrong; expecting '{}'",
                    cred.terminator,
                    sigv4::TERMINATOR
                ),
            ));
        }
        let payload = sigv4::payload_mode(auth.form, &parts.headers).map_err(auth_error)?;
        judged.payload_mode = Some(payload.label().to_owned());
        let Some(signed_at) = sigv4::parse_amz_date(&auth.amz_date) else {
            return Err(match auth.form {
                AuthForm::Header => {
                    access_denied("AWS authentication requires a valid Date or x-amz-date header")
                }
                AuthForm::Presigned => malformed(
                    auth.form,
                    "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"",
                ),
            });
        };
        if !auth.amz_date.starts_with(&cred.date) {
            return Err(malformed(
                auth.form,
                "Invalid credential date. Date is not the same as X-Amz-Date.",
            ));
        }
        let unsigned = unsigned_headers(&parts.headers, &auth.signed_headers);
        if !unsigned.is_empty() {
            return Err(access_denied(
                "There were headers present in the request which were not signed",
            )
            .with("HeadersNotSigned", unsigned.join(", ")));
        }
        let grant = self
            .lock()
            .grants
            .get(&cred.access_key_id)
            .cloned()
            .ok_or_else(|| {
                S3Error::new(
                    StatusCode::FORBIDDEN,
                    "InvalidAccessKeyId",
                    "The AWS Access Key Id you provided does not exist in our records.",
                )
                .with("AWSAccessKeyId", cred.access_key_id.clone())
            })?;
        match &auth.security_token {
            None => {
                return Err(access_denied(
                    "These temporary credentials need the X-Amz-Security-Token they were issued with",
                ));
            }
            Some(token) if *token != grant.token => {
                return Err(S3Error::new(
                    StatusCode::BAD_REQUEST,
                    "InvalidToken",
                    "The provided token is malformed or otherwise invalid.",
                ));
            }
            Some(_) => {}
        }
        check_clock(&auth, signed_at, now_secs())?;
        let computed = compute_for(parts, raw_query, &auth, &grant.secret, &payload);
        if computed.signature != auth.signature {
            return Err(signature_mismatch(
                &cred.access_key_id,
                &computed.string_to_sign,
                &auth.signature,
                &computed.canonical_request,
            ));
        }
        judged.signature_verified = true;
        let chunk_signing = matches!(
            payload,
            PayloadMode::StreamingSigned | PayloadMode::StreamingSignedTrailer
        )
        .then(|| ChunkSigning {
            key: computed.signing_key,
            amz_date: auth.amz_date.clone(),
            scope: computed.scope.clone(),
            seed_signature: computed.signature.clone(),
        });
        Ok(Authed {
            grant,
            payload,
            chunk_signing,
        })
    }

    async fn put_object(
        &self,
        ctx: &OpContext<'_>,
        body: &mut Option<Body>,
    ) -> Result<Response, S3Error> {
        if ctx.parts.headers.contains_key("x-amz-copy-source") {
            return Err(S3Error::new(
                StatusCode::NOT_IMPLEMENTED,
                "NotImplemented",
                "CopyObject is not implemented by this fake",
            ));
        }
        let declared = declared_length(ctx)?;
        if declared.is_some_and(|n| n > MAX_SINGLE_PUT_BYTES) {
            return Err(S3Error::new(
                StatusCode::BAD_REQUEST,
                "EntityTooLarge",
                "Your proposed upload exceeds the maximum allowed size",
            )
            .with("ProposedSize", declared.unwrap_or_default().to_string())
            .with("MaxSizeAllowed", MAX_SINGLE_PUT_BYTES.to_string()));
        }
        let (temp, digest) = self.receive_to_file(ctx, body).await?;
        let etag = format!("\"{}\"", hex::encode(digest.md5));
        let path = self.object_file(ctx.key);
        {
            // Under the lock, so a concurrent PUT of the same key cannot
            // interleave its rename and its record with ours.
            let _state = self.lock();
            temp.persist(&path)?;
        }
        self.store_object(
            ctx.key,
            StoredObject {
                segments: vec![path],
                dir: None,
                size: digest.len,
                etag: etag.clone(),
                content_type: content_type(&ctx.parts.headers),
                last_modified_secs: now_secs(),
            },
        );
        Ok(with_headers(
            StatusCode::OK,
            &stored_headers(&etag, &digest),
            Body::empty(),
        ))
    }

    async fn create_multipart_upload(
        &self,
        ctx: &OpContext<'_>,
        body: &mut Option<Body>,
    ) -> Result<Response, S3Error> {
        let checksum_algorithm = ctx
            .parts
            .headers
            .get("x-amz-checksum-algorithm")
            .map(|v| v.to_str().unwrap_or_default().trim().to_ascii_uppercase());
        if let Some(algorithm) = checksum_algorithm.as_deref().filter(|a| *a != "CRC32") {
            return Err(S3Error::new(
                StatusCode::NOT_IMPLEMENTED,
                "NotImplemented",
                &format!(
                    "x-amz-checksum-algorithm {algorithm} is not implemented by this fake; it checks CRC32"
                ),
            ));
        }
        receive_small(ctx, body).await?;
        let upload_id = random_string(ALNUM, 64);
        let dir = self.cfg.store_dir.join("uploads").join(&upload_id);
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| internal(&format!("creating {}: {e}", dir.display())))?;
        self.lock().uploads.insert(
            upload_id.clone(),
            Upload {
                key: ctx.key.to_owned(),
                dir,
                content_type: content_type(&ctx.parts.headers),
                checksum_algorithm,
                parts: BTreeMap::new(),
                aborted: false,
                completing: false,
            },
        );
        let xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUploadResult xmlns=\"{XMLNS}\"><Bucket>{}</Bucket><Key>{}</Key><UploadId>{}</UploadId></InitiateMultipartUploadResult>",
            xml_escape(&self.cfg.bucket),
            xml_escape(ctx.key),
            upload_id
        );
        Ok(xml_response(StatusCode::OK, xml))
    }

    async fn upload_part(
        &self,
        ctx: &OpContext<'_>,
        body: &mut Option<Body>,
        judged: &mut Judged,
    ) -> Result<Response, S3Error> {
        let raw_number = query_value(ctx.query, "partNumber").unwrap_or_default();
        let number = parse_part_number(&raw_number).ok_or_else(|| {
            S3Error::new(
                StatusCode::BAD_REQUEST,
                "InvalidArgument",
                "Part number must be an integer between 1 and 10000, inclusive",
            )
            .with("ArgumentName", "partNumber".to_owned())
            .with("ArgumentValue", raw_number.clone())
        })?;
        judged.part_number = Some(number);
        let upload_id = query_value(ctx.query, "uploadId").unwrap_or_default();
        self.upload_dir(&upload_id, ctx.key)?;
        let (temp, digest) = self.receive_to_file(ctx, body).await?;
        let etag = format!("\"{}\"", hex::encode(digest.md5));
        let Some(temp) = self
            .hold_received_part((&upload_id, ctx.key), number, temp, &digest)
            .await?
        else {
            judged.crc32_verified = digest.crc32_echo.is_some();
            return Ok(with_headers(
                StatusCode::OK,
                &stored_headers(&etag, &digest),
                Body::empty(),
            ));
        };
        {
            // Checked again: the upload may have been aborted meanwhile.
            let mut state = self.lock();
            let upload = state
                .uploads
                .get_mut(&upload_id)
                .filter(|u| u.key == ctx.key && !u.aborted)
                .ok_or_else(|| no_such_upload(&upload_id))?;
            if let Some(algorithm) = &upload.checksum_algorithm
                && digest.crc32_echo.is_none()
            {
                return Err(S3Error::new(
                    StatusCode::BAD_REQUEST,
                    "InvalidRequest",
                    &format!(
                        "Checksum Type mismatch occurred, expected checksum Type: {}, actual checksum Type: null",
                        algorithm.to_ascii_lowercase()
                    ),
                ));
            }
            let path = upload.dir.join(format!("part-{number:05}"));
            temp.persist(&path)?;
            upload.parts.insert(
                number,
                PartRecord {
                    md5: digest.md5,
                    size: digest.len,
                    crc32: digest.crc32,
                    path,
                },
            );
            // `check_checksums` echoes a sent CRC32 only when it matched.
            judged.crc32_verified = digest.crc32_echo.is_some();
        }
        Ok(with_headers(
            StatusCode::OK,
            &stored_headers(&etag, &digest),
            Body::empty(),
        ))
    }

    async fn complete_multipart_upload(
        &self,
        ctx: &OpContext<'_>,
        body: &mut Option<Body>,
    ) -> Result<Response, S3Error> {
        let upload_id = query_value(ctx.query, "uploadId").unwrap_or_default();
        self.upload_dir(&upload_id, ctx.key)?;
        let xml = receive_small(ctx, body).await?;
        let requested = std::str::from_utf8(&xml)
            .ok()
            .and_then(parse_complete_xml)
            .ok_or_else(malformed_xml)?;
        let held = self.take_hold(HoldOn::Completion);
        let (upload_dir, content_type, parts, unlisted) = {
            let mut state = self.lock();
            let upload = state
                .uploads
                .get_mut(&upload_id)
                .filter(|u| u.key == ctx.key && !u.aborted && !u.completing)
                .ok_or_else(|| no_such_upload(&upload_id))?;
            validate_completion(
                &requested,
                &upload.parts,
                upload.checksum_algorithm.as_deref(),
            )
            .map_err(completion_error)?;
            let parts: Vec<PartRecord> = requested
                .iter()
                .filter_map(|r| upload.parts.get(&r.number).cloned())
                .collect();
            // S3 keeps only the listed parts.
            let unlisted: Vec<PathBuf> = upload
                .parts
                .iter()
                .filter(|(number, _)| !requested.iter().any(|r| r.number == **number))
                .map(|(_, part)| part.path.clone())
                .collect();
            let found = (
                upload.dir.clone(),
                upload.content_type.clone(),
                parts,
                unlisted,
            );
            if held {
                upload.completing = true;
            } else {
                state.uploads.remove(&upload_id);
            }
            found
        };
        let etag = multipart_etag(&parts);
        let object = StoredObject {
            segments: parts.iter().map(|p| p.path.clone()).collect(),
            dir: Some(upload_dir),
            size: parts.iter().map(|p| p.size).sum(),
            etag: etag.clone(),
            content_type,
            last_modified_secs: now_secs(),
        };
        if held {
            // In progress until the release, which stores the object even
            // when this request's client is gone.
            let seen = {
                let mut state = self.lock();
                state.held_completions.push(HeldCompletion {
                    upload_id: upload_id.clone(),
                    key: ctx.key.to_owned(),
                    object,
                    unlisted,
                });
                state.releases
            };
            self.wait_until(|state| state.releases > seen).await;
        } else {
            for path in &unlisted {
                let _ = tokio::fs::remove_file(path).await;
            }
            self.store_object(ctx.key, object);
        }
        let location = format!(
            "http://{}.s3.{}.amazonaws.com/{}",
            self.cfg.bucket,
            self.cfg.region,
            sigv4::uri_encode(ctx.key.as_bytes(), false)
        );
        let xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUploadResult xmlns=\"{XMLNS}\"><Location>{}</Location><Bucket>{}</Bucket><Key>{}</Key><ETag>{}</ETag></CompleteMultipartUploadResult>",
            xml_escape(&location),
            xml_escape(&self.cfg.bucket),
            xml_escape(ctx.key),
            xml_escape(&etag)
        );
        Ok(xml_response(StatusCode::OK, xml))
    }

    async fn abort_multipart_upload(
        &self,
        ctx: &OpContext<'_>,
        body: &mut Option<Body>,
    ) -> Result<Response, S3Error> {
        let upload_id = query_value(ctx.query, "uploadId").unwrap_or_default();
        self.upload_known(&upload_id, ctx.key)?;
        receive_small(ctx, body).await?;
        let removed = {
            let mut state = self.lock();
            match state.uploads.get(&upload_id) {
                Some(u) if u.key == ctx.key && u.completing => {
                    return Err(match state.abort_while_completing {
                        AbortWhileCompleting::NoSuchUpload => no_such_upload(&upload_id),
                        AbortWhileCompleting::AccessDenied => access_denied("Access Denied"),
                    });
                }
                Some(u) if u.key == ctx.key => state.uploads.remove(&upload_id),
                _ => None,
            }
        };
        let upload = removed.ok_or_else(|| no_such_upload(&upload_id))?;
        self.land_late_parts(&upload_id);
        let _ = tokio::fs::remove_dir_all(&upload.dir).await;
        self.wake.notify_waiters();
        Ok(with_headers(StatusCode::NO_CONTENT, &[], Body::empty()))
    }

    /// Parts held in progress when their upload was aborted land now: the
    /// upload lingers, aborted, holding them (those that land late on their
    /// own wait).
    fn land_late_parts(&self, upload_id: &str) {
        let mut state = self.lock();
        let (late, kept): (Vec<HeldPart>, Vec<HeldPart>) = std::mem::take(&mut state.held_parts)
            .into_iter()
            .partition(|h| h.upload_id == upload_id && !h.released && !h.lands_after_list);
        state.held_parts = kept;
        for held in late {
            land(&mut state, &self.cfg.store_dir, held);
        }
    }

    /// Held parts of `upload_id` that land after its first listing.
    fn land_after_list(&self, upload_id: &str) {
        let mut state = self.lock();
        let (late, kept): (Vec<HeldPart>, Vec<HeldPart>) = std::mem::take(&mut state.held_parts)
            .into_iter()
            .partition(|h| h.upload_id == upload_id && !h.released && h.lands_after_list);
        state.held_parts = kept;
        let landed = !late.is_empty();
        for held in late {
            land(&mut state, &self.cfg.store_dir, held);
        }
        drop(state);
        if landed {
            self.wake.notify_waiters();
        }
    }

    /// ListParts: the parts an upload holds, aborted or not (one page: this
    /// fake never holds more than S3's 1,000 a page for the tests).
    async fn list_parts(
        &self,
        ctx: &OpContext<'_>,
        body: &mut Option<Body>,
    ) -> Result<Response, S3Error> {
        let upload_id = query_value(ctx.query, "uploadId").unwrap_or_default();
        receive_small(ctx, body).await?;
        let parts: Option<Vec<(u32, PartRecord)>> = {
            let state = self.lock();
            let hides_completing =
                state.abort_while_completing == AbortWhileCompleting::NoSuchUpload;
            state
                .uploads
                .get(&upload_id)
                .filter(|u| u.key == ctx.key && !(u.completing && hides_completing))
                .map(|u| u.parts.iter().map(|(n, p)| (*n, p.clone())).collect())
        };
        // Parts that land after a listing land now: this answer's list is
        // already taken.
        self.land_after_list(&upload_id);
        let parts = parts.ok_or_else(|| no_such_upload(&upload_id))?;
        let mut xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListPartsResult xmlns=\"{XMLNS}\"><Bucket>{}</Bucket><Key>{}</Key><UploadId>{}</UploadId><IsTruncated>false</IsTruncated>",
            xml_escape(&self.cfg.bucket),
            xml_escape(ctx.key),
            xml_escape(&upload_id)
        );
        for (number, part) in parts {
            xml.push_str(&format!(
                "<Part><PartNumber>{number}</PartNumber><ETag>&quot;{}&quot;</ETag><Size>{}</Size></Part>",
                hex::encode(part.md5),
                part.size
            ));
        }
        xml.push_str("</ListPartsResult>");
        Ok(xml_response(StatusCode::OK, xml))
    }

    async fn read_object(
        &self,
        ctx: &OpContext<'_>,
        body: &mut Option<Body>,
    ) -> Result<Response, S3Error> {
        receive_small(ctx, body).await?;
        let object = self.lock().objects.get(ctx.key).cloned().ok_or_else(|| {
            S3Error::new(
                StatusCode::NOT_FOUND,
                "NoSuchKey",
                "The specified key does not exist.",
            )
            .with("Key", ctx.key.to_owned())
        })?;
        let headers = [
            ("content-length", object.size.to_string()),
            ("content-type", object.content_type.clone()),
            ("etag", object.etag.clone()),
            ("last-modified", http_date(object.last_modified_secs)),
            ("accept-ranges", "bytes".to_owned()),
        ];
        let body = if ctx.parts.method == Method::HEAD {
            Body::empty()
        } else {
            Body::from_stream(segments_stream(object.segments))
        };
        Ok(with_headers(StatusCode::OK, &headers, body))
    }

    /// Records `object` under `key` and deletes the files of the object it
    /// replaces (except those it reuses: a single PUT renames over its own
    /// path).
    fn store_object(&self, key: &str, object: StoredObject) {
        let new_files = object.segments.clone();
        let old = self.lock().objects.insert(key.to_owned(), object);
        let Some(old) = old else { return };
        for file in old.segments.iter().filter(|f| !new_files.contains(f)) {
            let _ = std::fs::remove_file(file);
        }
        if let Some(dir) = old.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// NoSuchUpload unless `upload_id` is open for `key` (neither aborted
    /// nor being completed).
    fn upload_dir(&self, upload_id: &str, key: &str) -> Result<PathBuf, S3Error> {
        self.lock()
            .uploads
            .get(upload_id)
            .filter(|u| u.key == key && !u.aborted && !u.completing)
            .map(|u| u.dir.clone())
            .ok_or_else(|| no_such_upload(upload_id))
    }

    /// NoSuchUpload unless `upload_id` is known for `key`, open or aborted
    /// with parts left.
    fn upload_known(&self, upload_id: &str, key: &str) -> Result<(), S3Error> {
        self.lock()
            .uploads
            .get(upload_id)
            .filter(|u| u.key == key)
            .map(|_| ())
            .ok_or_else(|| no_such_upload(upload_id))
    }

    fn object_file(&self, key: &str) -> PathBuf {
        let objects = self.cfg.store_dir.join("objects");
        if is_safe_relative_path(key) {
            objects.join(key)
        } else {
            objects.join("_").join(hex::encode(key))
        }
    }

    async fn temp_file(&self) -> Result<TempFile, S3Error> {
        let dir = self.cfg.store_dir.join("tmp");
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| internal(&format!("creating {}: {e}", dir.display())))?;
        Ok(TempFile {
            path: dir.join(random_string(ALNUM_LOWER, 24)),
        })
    }

    async fn receive_to_file(
        &self,
        ctx: &OpContext<'_>,
        body: &mut Option<Body>,
    ) -> Result<(TempFile, BodyDigest), S3Error> {
        let temp = self.temp_file().await?;
        let file = tokio::fs::File::create(&temp.path)
            .await
            .map_err(|e| internal(&format!("creating {}: {e}", temp.path.display())))?;
        let mut sink = Sink::File(BufWriter::with_capacity(FILE_BUFFER_BYTES, file));
        let digest = receive(ctx, body.take().unwrap_or_default(), &mut sink).await?;
        if let Sink::File(mut writer) = sink {
            writer
                .flush()
                .await
                .map_err(|e| internal(&format!("writing {}: {e}", temp.path.display())))?;
        }
        Ok((temp, digest))
    }
}

/// What the request log keeps about a request as it is judged.
#[derive(Debug)]
struct Judged {
    operation: Op,
    key: String,
    signature_verified: bool,
    signed_region: Option<String>,
    payload_mode: Option<String>,
    part_number: Option<u32>,
    crc32_verified: bool,
}

impl Default for Judged {
    fn default() -> Self {
        Self {
            operation: Op::Other,
            key: String::new(),
            signature_verified: false,
            signed_region: None,
            payload_mode: None,
            part_number: None,
            crc32_verified: false,
        }
    }
}

#[derive(Debug)]
struct Authed {
    grant: Grant,
    payload: PayloadMode,
    chunk_signing: Option<ChunkSigning>,
}

struct OpContext<'a> {
    parts: &'a Parts,
    query: &'a [(String, String)],
    key: &'a str,
    authed: &'a Authed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    PutObject,
    CreateMultipartUpload,
    UploadPart,
    CompleteMultipartUpload,
    AbortMultipartUpload,
    ListParts,
    HeadObject,
    GetObject,
    HeadBucket,
    Other,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::PutObject => "s3.put_object",
            Op::CreateMultipartUpload => "s3.create_multipart_upload",
            Op::UploadPart => "s3.upload_part",
            Op::CompleteMultipartUpload => "s3.complete_multipart_upload",
            Op::AbortMultipartUpload => "s3.abort_multipart_upload",
            Op::ListParts => "s3.list_parts",
            Op::HeadObject => "s3.head_object",
            Op::GetObject => "s3.get_object",
            Op::HeadBucket => "s3.head_bucket",
            Op::Other => "s3.other",
        }
    }
}

fn classify(method: &Method, has_key: bool, query: &[(String, String)]) -> Op {
    let has = |name: &str| query.iter().any(|(k, _)| k == name);
    match (method.as_str(), has_key) {
        ("PUT", true) if has("partNumber") && has("uploadId") => Op::UploadPart,
        ("PUT", true) if !has("uploadId") && !has("partNumber") && query_is_plain(query) => {
            Op::PutObject
        }
        ("POST", true) if has("uploads") => Op::CreateMultipartUpload,
        ("POST", true) if has("uploadId") => Op::CompleteMultipartUpload,
        ("DELETE", true) if has("uploadId") => Op::AbortMultipartUpload,
        ("GET", true) if has("uploadId") => Op::ListParts,
        ("HEAD", true) if query_is_plain(query) => Op::HeadObject,
        ("GET", true) if query_is_plain(query) => Op::GetObject,
        ("HEAD", false) if query_is_plain(query) => Op::HeadBucket,
        _ => Op::Other,
    }
}

/// Stores a held part where its upload keeps its parts: the upload still
/// open, or the aborted one lingering with the parts that landed after its
/// abort (created if the upload is gone), which ListParts lists until the
/// upload is aborted again.
fn land(state: &mut State, store_dir: &Path, held: HeldPart) {
    let upload = state
        .uploads
        .entry(held.upload_id.clone())
        .or_insert_with(|| Upload {
            key: held.key.clone(),
            dir: store_dir.join("uploads").join(format!(
                "{}-late-{}",
                held.upload_id,
                random_string(ALNUM_LOWER, 8)
            )),
            content_type: String::new(),
            checksum_algorithm: None,
            parts: BTreeMap::new(),
            aborted: true,
            completing: false,
        });
    let _ = std::fs::create_dir_all(&upload.dir);
    let path = upload.dir.join(format!("part-{:05}", held.number));
    if std::fs::rename(&held.record.path, &path).is_ok() {
        upload.parts.insert(
            held.number,
            PartRecord {
                path,
                ..held.record
            },
        );
    }
}

/// True when the query holds only auth or response parameters, not a
/// sub-resource such as `?acl` or `?tagging` that names another operation.
fn query_is_plain(query: &[(String, String)]) -> bool {
    query
        .iter()
        .all(|(k, _)| k.starts_with("X-Amz-") || k.starts_with("response-") || k == "x-id")
}

fn query_value(query: &[(String, String)], name: &str) -> Option<String> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

fn parse_part_number(raw: &str) -> Option<u32> {
    raw.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_PART_NUMBER).contains(n))
}

#[derive(Debug, PartialEq, Eq)]
enum Target {
    Bucket,
    Object(String),
}

/// Where a request points, or `None` when it is not for this bucket.
/// A `Host` of `{bucket}.…` means virtual-host style and wins over the path.
fn locate(bucket: &str, host: Option<&str>, raw_path: &str) -> Option<Target> {
    let path = raw_path.strip_prefix('/').unwrap_or(raw_path);
    let rest = if host.is_some_and(|h| is_virtual_host(bucket, h)) {
        path
    } else {
        let (first, rest) = path.split_once('/').unwrap_or((path, ""));
        if sigv4::percent_decode(first) != bucket.as_bytes() {
            return None;
        }
        rest
    };
    if rest.is_empty() {
        Some(Target::Bucket)
    } else {
        Some(Target::Object(
            String::from_utf8_lossy(&sigv4::percent_decode(rest)).into_owned(),
        ))
    }
}

fn is_virtual_host(bucket: &str, host: &str) -> bool {
    let host = strip_port(host).to_ascii_lowercase();
    host.strip_prefix(&bucket.to_ascii_lowercase())
        .is_some_and(|rest| rest.starts_with('.') && rest.len() > 1)
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host
            .split_once(']')
            .map_or(host, |(h, _)| &host[..h.len() + 1]);
    }
    match host.rsplit_once(':') {
        Some((h, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

fn host_of(parts: &Parts) -> Option<String> {
    parts
        .headers
        .get("host")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| parts.uri.authority().map(|a| a.as_str().to_owned()))
}

/// `x-amz-*` headers present but not signed, and `host` if unsigned:
/// S3 refuses both.
fn unsigned_headers(headers: &HeaderMap, signed: &[String]) -> Vec<String> {
    let mut missing: Vec<String> = headers
        .keys()
        .map(HeaderName::as_str)
        .filter(|name| name.starts_with("x-amz-") && !signed.iter().any(|s| s == name))
        .map(str::to_owned)
        .collect();
    if !signed.iter().any(|s| s == "host") {
        missing.push("host".to_owned());
    }
    missing.sort();
    missing.dedup();
    missing
}

fn check_clock(auth: &sigv4::SignedAuth, signed_at: u64, now: u64) -> Result<(), S3Error> {
    match auth.expires_secs {
        None if signed_at.abs_diff(now) > sigv4::MAX_CLOCK_SKEW_SECS => Err(S3Error::new(
            StatusCode::FORBIDDEN,
            "RequestTimeTooSkewed",
            "The difference between the request time and the current time is too large.",
        )
        .with("RequestTime", auth.amz_date.clone())
        .with("ServerTime", iso8601(now))
        .with(
            "MaxAllowedSkewMilliseconds",
            (sigv4::MAX_CLOCK_SKEW_SECS * 1000).to_string(),
        )),
        Some(_) if signed_at > now + sigv4::MAX_CLOCK_SKEW_SECS => {
            Err(access_denied("Request is not valid yet"))
        }
        Some(expires) if now > signed_at + expires => Err(access_denied("Request has expired")
            .with("X-Amz-Expires", expires.to_string())
            .with("Expires", iso8601(signed_at + expires))
            .with("ServerTime", iso8601(now))),
        _ => Ok(()),
    }
}

/// What was learnt about a body while it streamed past.
#[derive(Clone, Debug)]
struct BodyDigest {
    len: u64,
    md5: [u8; 16],
    crc32: u32,
    /// Set when the client sent a CRC32 (header or trailer); S3 echoes it.
    crc32_echo: Option<String>,
}

enum Sink {
    File(BufWriter<tokio::fs::File>),
    Memory(Vec<u8>),
}

impl Sink {
    async fn write(&mut self, data: &[u8]) -> Result<(), S3Error> {
        match self {
            Sink::File(w) => w
                .write_all(data)
                .await
                .map_err(|e| internal(&format!("writing upload: {e}"))),
            Sink::Memory(buf) if buf.len() + data.len() > MAX_SMALL_BODY_BYTES => {
                Err(S3Error::new(
                    StatusCode::BAD_REQUEST,
                    "MaxMessageLengthExceeded",
                    "Your request was too big.",
                ))
            }
            Sink::Memory(buf) => {
                buf.extend_from_slice(data);
                Ok(())
            }
        }
    }
}

struct Hashers {
    md5: Md5,
    crc32: crc32fast::Hasher,
    sha256: Option<Sha256>,
    len: u64,
}

impl Hashers {
    async fn absorb(&mut self, data: &[u8], sink: &mut Sink) -> Result<(), S3Error> {
        self.md5.update(data);
        self.crc32.update(data);
        if let Some(sha) = &mut self.sha256 {
            sha.update(data);
        }
        self.len += data.len() as u64;
        sink.write(data).await
    }
}

/// Streams the body into `sink`, decoding aws-chunked framing and checking
/// every digest the client committed to: the signed SHA-256, chunk
/// signatures, CRC32 (header or trailer) and Content-MD5.
async fn receive(ctx: &OpContext<'_>, body: Body, sink: &mut Sink) -> Result<BodyDigest, S3Error> {
    let headers = &ctx.parts.headers;
    let payload = &ctx.authed.payload;
    let expected_len = declared_length(ctx)?;
    let mut decoder = payload
        .is_aws_chunked()
        .then(|| AwsChunkedDecoder::new(ctx.authed.chunk_signing.clone()));
    let mut hashers = Hashers {
        md5: Md5::new(),
        crc32: crc32fast::Hasher::new(),
        sha256: matches!(payload, PayloadMode::Sha256(_)).then(Sha256::new),
        len: 0,
    };
    let mut stream = body.into_data_stream();
    let mut ranges = Vec::new();
    while let Some(frame) = stream.next().await {
        let bytes: Bytes = frame.map_err(|_| incomplete_body())?;
        match &mut decoder {
            Some(d) => {
                ranges.clear();
                d.feed(&bytes, &mut ranges).map_err(chunk_error)?;
                for r in &ranges {
                    hashers.absorb(&bytes[r.clone()], sink).await?;
                }
            }
            None => hashers.absorb(&bytes, sink).await?,
        }
    }
    let trailers = match &decoder {
        Some(d) => {
            d.finish().map_err(chunk_error)?;
            d.trailers().to_vec()
        }
        None => Vec::new(),
    };
    if decoder.is_some() && expected_len.is_some_and(|n| n != hashers.len) {
        return Err(incomplete_body());
    }
    let md5: [u8; 16] = hashers.md5.finalize().into();
    let crc32 = hashers.crc32.finalize();
    if let (PayloadMode::Sha256(claimed), Some(sha)) = (payload, hashers.sha256) {
        let computed = hex::encode(sha.finalize());
        if computed != *claimed {
            return Err(S3Error::new(
                StatusCode::BAD_REQUEST,
                "XAmzContentSHA256Mismatch",
                "The provided 'x-amz-content-sha256' header does not match what was computed.",
            )
            .with("ClientComputedContentSHA256", claimed.clone())
            .with("S3ComputedContentSHA256", computed));
        }
    }
    let crc32_echo = check_checksums(headers, &trailers, md5, crc32)?;
    Ok(BodyDigest {
        len: hashers.len,
        md5,
        crc32,
        crc32_echo,
    })
}

/// Reads a body that is parsed rather than stored, with all the same checks.
async fn receive_small(ctx: &OpContext<'_>, body: &mut Option<Body>) -> Result<Vec<u8>, S3Error> {
    let mut sink = Sink::Memory(Vec::new());
    receive(ctx, body.take().unwrap_or_default(), &mut sink).await?;
    match sink {
        Sink::Memory(buf) => Ok(buf),
        Sink::File(_) => unreachable!("receive_small always uses a memory sink"),
    }
}

/// The decoded body length the client declared, when it is aws-chunked.
fn declared_length(ctx: &OpContext<'_>) -> Result<Option<u64>, S3Error> {
    let headers = &ctx.parts.headers;
    if ctx.authed.payload.is_aws_chunked() {
        let value = headers
            .get("x-amz-decoded-content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        return match value {
            Some(n) => Ok(Some(n)),
            None => Err(S3Error::new(
                StatusCode::LENGTH_REQUIRED,
                "MissingContentLength",
                "You must provide the Content-Length HTTP header.",
            )),
        };
    }
    Ok(headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok()))
}

/// Verifies CRC32 (header or trailer) and Content-MD5; returns the CRC32 to
/// echo when the client sent one.
fn check_checksums(
    headers: &HeaderMap,
    trailers: &[(String, String)],
    md5: [u8; 16],
    crc32: u32,
) -> Result<Option<String>, S3Error> {
    let ours = BASE64.encode(crc32.to_be_bytes());
    let declared_trailer = headers
        .get("x-amz-trailer")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase());
    if let Some(name) = &declared_trailer
        && !trailers.iter().any(|(n, _)| n == name)
    {
        return Err(S3Error::new(
            StatusCode::BAD_REQUEST,
            "MalformedTrailerError",
            "The request contained trailing data that was not well-formed or did not conform to our published schema.",
        ));
    }
    let header_crc = headers
        .get("x-amz-checksum-crc32")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned());
    let trailer_crc = trailers
        .iter()
        .find(|(n, _)| n == "x-amz-checksum-crc32")
        .map(|(_, v)| v.clone());
    let mut echo = None;
    let sent = [(header_crc, "header"), (trailer_crc, "trailing header")];
    for (theirs, place) in sent.iter().filter_map(|(v, p)| Some((v.clone()?, *p))) {
        let well_formed = BASE64.decode(&theirs).is_ok_and(|d| d.len() == 4);
        if !well_formed {
            return Err(S3Error::new(
                StatusCode::BAD_REQUEST,
                "InvalidRequest",
                &format!("Value for x-amz-checksum-crc32 {place} is invalid."),
            ));
        }
        if theirs != ours {
            return Err(S3Error::new(
                StatusCode::BAD_REQUEST,
                "BadDigest",
                "The CRC32 you specified did not match the calculated checksum.",
            ));
        }
        echo = Some(theirs);
    }
    if let Some(value) = headers.get("content-md5").and_then(|v| v.to_str().ok()) {
        let decoded = BASE64.decode(value.trim()).ok().filter(|d| d.len() == 16);
        let Some(theirs) = decoded else {
            return Err(S3Error::new(
                StatusCode::BAD_REQUEST,
                "InvalidDigest",
                "The Content-MD5 you specified is not valid.",
            ));
        };
        if theirs != md5 {
            return Err(S3Error::new(
                StatusCode::BAD_REQUEST,
                "BadDigest",
                "The Content-MD5 you specified did not match what we received.",
            )
            .with("ExpectedDigest", value.trim().to_owned())
            .with("CalculatedDigest", BASE64.encode(md5)));
        }
    }
    Ok(echo)
}

/// One `<Part>` of a CompleteMultipartUpload body.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RequestedPart {
    number: u32,
    etag: String,
    crc32: Option<String>,
}

/// Reads the part list; `None` when it is not the documented shape.
fn parse_complete_xml(xml: &str) -> Option<Vec<RequestedPart>> {
    if !xml.contains("<CompleteMultipartUpload") {
        return None;
    }
    let mut parts = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find("<Part>") {
        let after = &rest[start + "<Part>".len()..];
        let end = after.find("</Part>")?;
        let part = &after[..end];
        rest = &after[end + "</Part>".len()..];
        parts.push(RequestedPart {
            number: element_text(part, "PartNumber")?.trim().parse().ok()?,
            etag: xml_unescape(element_text(part, "ETag")?.trim()),
            crc32: element_text(part, "ChecksumCRC32").map(|v| xml_unescape(v.trim())),
        });
    }
    Some(parts)
}

fn element_text<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&close)? + start;
    Some(&xml[start..end])
}

#[derive(Debug, PartialEq, Eq)]
enum CompletionError {
    NoParts,
    InvalidPartOrder,
    InvalidPart(u32),
    EntityTooSmall {
        number: u32,
        size: u64,
    },
    /// The upload was created with this checksum algorithm and the list
    /// leaves out this part's checksum.
    MissingChecksum {
        algorithm: String,
        number: u32,
    },
}

/// S3's checks on a part list, in S3's order: ascending numbers, each part
/// uploaded with that ETag (and CRC32, if given), every part but the last
/// at least [`MIN_PART_BYTES`].
fn validate_completion(
    requested: &[RequestedPart],
    uploaded: &BTreeMap<u32, PartRecord>,
    checksum_algorithm: Option<&str>,
) -> Result<(), CompletionError> {
    if requested.is_empty() {
        return Err(CompletionError::NoParts);
    }
    if requested.windows(2).any(|w| w[0].number >= w[1].number) {
        return Err(CompletionError::InvalidPartOrder);
    }
    for part in requested {
        if let Some(algorithm) = checksum_algorithm
            && part.crc32.is_none()
        {
            return Err(CompletionError::MissingChecksum {
                algorithm: algorithm.to_ascii_lowercase(),
                number: part.number,
            });
        }
        let Some(record) = uploaded.get(&part.number) else {
            return Err(CompletionError::InvalidPart(part.number));
        };
        let etag = part.etag.trim_matches('"').to_ascii_lowercase();
        let crc_ok = part
            .crc32
            .as_ref()
            .is_none_or(|c| *c == BASE64.encode(record.crc32.to_be_bytes()));
        if etag != hex::encode(record.md5) || !crc_ok {
            return Err(CompletionError::InvalidPart(part.number));
        }
    }
    let (_, all_but_last) = requested.split_last().expect("checked non-empty");
    for part in all_but_last {
        let size = uploaded[&part.number].size;
        if size < MIN_PART_BYTES {
            return Err(CompletionError::EntityTooSmall {
                number: part.number,
                size,
            });
        }
    }
    Ok(())
}

/// S3's multipart ETag: MD5 of the parts' binary MD5s, then `-{count}`.
fn multipart_etag(parts: &[PartRecord]) -> String {
    let mut md5 = Md5::new();
    for part in parts {
        md5.update(part.md5);
    }
    format!("\"{}-{}\"", hex::encode(md5.finalize()), parts.len())
}

/// The bytes of `files`, one after the other, read a chunk at a time.
fn segments_stream(
    files: Vec<PathBuf>,
) -> impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send {
    futures_util::stream::iter(files)
        .then(tokio::fs::File::open)
        .map(|opened| match opened {
            Ok(file) => file_stream(file).left_stream(),
            Err(e) => futures_util::stream::once(async move { Err(e) }).right_stream(),
        })
        .flatten()
}

/// A stored object read from the start: its files one after the other.
pub struct ObjectReader {
    files: std::collections::VecDeque<PathBuf>,
    current: Option<std::fs::File>,
}

impl std::io::Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some(file) = &mut self.current {
                let n = file.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                self.current = None;
            }
            let Some(next) = self.files.pop_front() else {
                return Ok(0);
            };
            self.current = Some(std::fs::File::open(next)?);
        }
    }
}

fn file_stream(
    file: tokio::fs::File,
) -> impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send {
    futures_util::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0u8; READ_CHUNK_BYTES];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}

/// A file under `store_dir/tmp` that disappears unless persisted, so a
/// failed or abandoned upload leaves nothing behind.
struct TempFile {
    path: PathBuf,
}

impl TempFile {
    fn persist(self, dest: &Path) -> Result<(), S3Error> {
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| internal(&format!("creating {}: {e}", parent.display())))?;
        }
        std::fs::rename(&self.path, dest)
            .map_err(|e| internal(&format!("storing {}: {e}", dest.display())))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        // After a successful persist the path is gone and this is a no-op.
        let _ = std::fs::remove_file(&self.path);
    }
}

fn is_safe_relative_path(key: &str) -> bool {
    !key.is_empty()
        && key
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != ".." && !seg.contains(['\\', '\0']))
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or(DEFAULT_CONTENT_TYPE)
        .to_owned()
}

fn stored_headers(etag: &str, digest: &BodyDigest) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("etag", etag.to_owned()),
        ("x-amz-server-side-encryption", "AES256".to_owned()),
    ];
    if let Some(crc) = &digest.crc32_echo {
        headers.push(("x-amz-checksum-crc32", crc.clone()));
    }
    headers
}

/// The signature S3 would compute for this request with `secret`, over the
/// request's own credential scope.
fn compute_for(
    parts: &Parts,
    raw_query: &str,
    auth: &sigv4::SignedAuth,
    secret: &str,
    payload: &PayloadMode,
) -> sigv4::Computed {
    let cred = &auth.credential;
    sigv4::compute(
        &RequestView {
            method: parts.method.as_str(),
            raw_path: parts.uri.path(),
            raw_query,
            headers: &parts.headers,
        },
        &SigningParams {
            secret,
            amz_date: &auth.amz_date,
            region: &cred.region,
            service: &cred.service,
            signed_headers: &auth.signed_headers,
            payload_hash: payload.claimed(),
            form: auth.form,
        },
    )
}

/// Reads and discards what the client is still sending, so it gets to read
/// the error instead of a reset connection. A client that asked
/// `Expect: 100-continue` has sent nothing yet and will not.
async fn drain_unread(headers: &HeaderMap, body: Body) {
    if expects_continue(headers) {
        return;
    }
    let mut stream = body.into_data_stream();
    while let Some(Ok(_)) = stream.next().await {}
}

fn expects_continue(headers: &HeaderMap) -> bool {
    headers
        .get("expect")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
}

/// An S3 error as the wire shows it.
#[derive(Debug)]
struct S3Error {
    status: StatusCode,
    code: &'static str,
    message: String,
    extra: Vec<(&'static str, String)>,
}

impl S3Error {
    fn new(status: StatusCode, code: &'static str, message: &str) -> Self {
        Self {
            status,
            code,
            message: message.to_owned(),
            extra: Vec::new(),
        }
    }

    fn with(mut self, element: &'static str, value: String) -> Self {
        self.extra.push((element, value));
        self
    }

    /// `x-amz-bucket-region` rides on every error: botocore's redirector
    /// reads it from the header first, and a HEAD answer has no body.
    fn render(&self, bucket_region: &str, is_head: bool) -> Response {
        let headers = [("x-amz-bucket-region", bucket_region.to_owned())];
        if is_head {
            return with_headers(self.status, &headers, Body::empty());
        }
        let mut xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{}</Code><Message>{}</Message>",
            self.code,
            xml_escape(&self.message)
        );
        for (element, value) in &self.extra {
            xml.push_str(&format!("<{element}>{}</{element}>", xml_escape(value)));
        }
        xml.push_str(&format!(
            "<RequestId>{}</RequestId><HostId>{}</HostId></Error>",
            random_string(HEX_UPPER, 16),
            random_string(BASE64_CHARS, 76)
        ));
        let mut response = xml_response(self.status, xml);
        response.headers_mut().insert(
            "x-amz-bucket-region",
            HeaderValue::from_str(bucket_region).unwrap_or(HeaderValue::from_static("")),
        );
        response
    }
}

fn access_denied(message: &str) -> S3Error {
    S3Error::new(StatusCode::FORBIDDEN, "AccessDenied", message)
}

fn internal(message: &str) -> S3Error {
    S3Error::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message)
}

fn incomplete_body() -> S3Error {
    S3Error::new(
        StatusCode::BAD_REQUEST,
        "IncompleteBody",
        "You did not provide the number of bytes specified by the Content-Length HTTP header",
    )
}

fn malformed_xml() -> S3Error {
    S3Error::new(
        StatusCode::BAD_REQUEST,
        "MalformedXML",
        "The XML you provided was not well-formed or did not validate against our published schema",
    )
}

fn no_such_upload(upload_id: &str) -> S3Error {
    S3Error::new(
        StatusCode::NOT_FOUND,
        "NoSuchUpload",
        "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.",
    )
    .with("UploadId", upload_id.to_owned())
}

fn malformed(form: AuthForm, reason: &str) -> S3Error {
    match form {
        AuthForm::Header => S3Error::new(
            StatusCode::BAD_REQUEST,
            "AuthorizationHeaderMalformed",
            &format!("The authorization header is malformed; {reason}"),
        ),
        AuthForm::Presigned => S3Error::new(
            StatusCode::BAD_REQUEST,
            "AuthorizationQueryParametersError",
            reason,
        ),
    }
}

/// The answer botocore's region redirector acts on: the code, a `<Region>`
/// element, and (added by `render`) the `x-amz-bucket-region` header.
fn wrong_region(form: AuthForm, signed: &str, bucket_region: &str) -> S3Error {
    let reason = format!("the region '{signed}' is wrong; expecting '{bucket_region}'");
    let err = match form {
        AuthForm::Header => malformed(form, &reason),
        AuthForm::Presigned => malformed(
            form,
            &format!("Error parsing the X-Amz-Credential parameter; {reason}"),
        ),
    };
    err.with("Region", bucket_region.to_owned())
}

fn auth_error(err: AuthError) -> S3Error {
    match err {
        AuthError::Missing => access_denied("Access Denied"),
        AuthError::BothForms => S3Error::new(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified",
        ),
        AuthError::UnsupportedAlgorithm(_) => S3Error::new(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.",
        ),
        AuthError::Malformed { form, reason } => malformed(form, &reason),
        AuthError::MissingDate => {
            access_denied("AWS authentication requires a valid Date or x-amz-date header")
        }
        AuthError::MissingContentSha256 => S3Error::new(
            StatusCode::BAD_REQUEST,
            "InvalidRequest",
            "Missing required header for this request: x-amz-content-sha256",
        ),
        AuthError::InvalidContentSha256(_) => S3Error::new(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value.",
        )
        .with("ArgumentName", "x-amz-content-sha256".to_owned()),
    }
}

fn chunk_error(err: ChunkError) -> S3Error {
    match err {
        ChunkError::Signature { .. } => S3Error::new(
            StatusCode::FORBIDDEN,
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
        ),
        ChunkError::Malformed(reason) => S3Error::new(
            StatusCode::BAD_REQUEST,
            "IncompleteBody",
            &format!("The aws-chunked body is malformed: {reason}"),
        ),
    }
}

fn completion_error(err: CompletionError) -> S3Error {
    match err {
        CompletionError::NoParts => malformed_xml(),
        CompletionError::InvalidPartOrder => S3Error::new(
            StatusCode::BAD_REQUEST,
            "InvalidPartOrder",
            "The list of parts was not in ascending order. Parts must be ordered by part number.",
        ),
        CompletionError::InvalidPart(number) => S3Error::new(
            StatusCode::BAD_REQUEST,
            "InvalidPart",
            "One or more of the specified parts could not be found.  The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.",
        )
        .with("PartNumber", number.to_string()),
        CompletionError::EntityTooSmall { number, size } => S3Error::new(
            StatusCode::BAD_REQUEST,
            "EntityTooSmall",
            "Your proposed upload is smaller than the minimum allowed object size.",
        )
        .with("ProposedSize", size.to_string())
        .with("MinSizeAllowed", MIN_PART_BYTES.to_string())
        .with("PartNumber", number.to_string()),
        CompletionError::MissingChecksum { algorithm, number } => S3Error::new(
            StatusCode::BAD_REQUEST,
            "InvalidRequest",
            &format!(
                "The upload was created using a {algorithm} checksum. The complete request must include the checksum for each part. It was missing for part {number} in the request."
            ),
        ),
    }
}

fn signature_mismatch(
    access_key_id: &str,
    string_to_sign: &str,
    provided: &str,
    canonical_request: &str,
) -> S3Error {
    let spaced_hex = |s: &str| {
        s.bytes()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    S3Error::new(
        StatusCode::FORBIDDEN,
        "SignatureDoesNotMatch",
        "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
    )
    .with("AWSAccessKeyId", access_key_id.to_owned())
    .with("StringToSign", string_to_sign.to_owned())
    .with("SignatureProvided", provided.to_owned())
    .with("StringToSignBytes", spaced_hex(string_to_sign))
    .with("CanonicalRequest", canonical_request.to_owned())
    .with("CanonicalRequestBytes", spaced_hex(canonical_request))
}

fn xml_response(status: StatusCode, xml: String) -> Response {
    with_headers(
        status,
        &[("content-type", "application/xml".to_owned())],
        Body::from(xml),
    )
}

fn with_headers(status: StatusCode, headers: &[(&'static str, String)], body: Body) -> Response {
    let mut response = (status, body).into_response();
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(value) {
            response
                .headers_mut()
                .insert(HeaderName::from_static(name), value);
        }
    }
    response
}

fn add_common_headers(headers: &mut HeaderMap) {
    let pairs = [
        ("x-amz-request-id", random_string(HEX_UPPER, 16)),
        ("x-amz-id-2", random_string(BASE64_CHARS, 76)),
        ("server", "AmazonS3".to_owned()),
    ];
    for (name, value) in pairs {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

fn xml_unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#34;", "\"")
        .replace("&#x22;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `2013-05-24T00:00:00Z`, as S3 writes times in error bodies.
fn iso8601(epoch_secs: u64) -> String {
    let d = sigv4::format_amz_date(epoch_secs);
    format!(
        "{}-{}-{}T{}:{}:{}Z",
        &d[0..4],
        &d[4..6],
        &d[6..8],
        &d[9..11],
        &d[11..13],
        &d[13..15]
    )
}

/// `Fri, 24 May 2013 00:00:00 GMT`, for `Last-Modified`.
fn http_date(epoch_secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let d = sigv4::format_amz_date(epoch_secs);
    let month: usize = d[4..6].parse().unwrap_or(1);
    format!(
        "{}, {} {} {} {}:{}:{} GMT",
        DAYS[(epoch_secs / 86_400 % 7) as usize],
        &d[6..8],
        MONTHS[month - 1],
        &d[0..4],
        &d[9..11],
        &d[11..13],
        &d[13..15]
    )
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const ALNUM_LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const ALNUM_UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const HEX_UPPER: &[u8] = b"0123456789ABCDEF";
const BASE64_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn random_string(alphabet: &[u8], len: usize) -> String {
    (0..len)
        .map(|_| alphabet[fastrand::usize(..alphabet.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The router runs `handle` on a multi-threaded runtime.
    #[test]
    fn handle_future_is_send() {
        fn assert_send<T: Send>(_: &T) {}
        let fake = FakeS3::new(S3Config::new("b", "/nonexistent"));
        assert_send(&fake.handle(Request::new(Body::empty())));
    }

    #[test]
    fn locate_reads_both_addressing_styles() {
        let cases: &[(Option<&str>, &str, Option<Target>)] = &[
            (
                Some("b.s3.amazonaws.com"),
                "/models/x.tgz",
                Some(Target::Object("models/x.tgz".into())),
            ),
            (
                Some("b.s3.us-west-2.amazonaws.com"),
                "/",
                Some(Target::Bucket),
            ),
            (
                Some("b.localhost:8080"),
                "/k%20y",
                Some(Target::Object("k y".into())),
            ),
            (
                Some("B.S3.AMAZONAWS.COM"),
                "/k",
                Some(Target::Object("k".into())),
            ),
            (
                Some("s3.amazonaws.com"),
                "/b/models/x.tgz",
                Some(Target::Object("models/x.tgz".into())),
            ),
            (Some("127.0.0.1:9000"), "/b", Some(Target::Bucket)),
            (Some("127.0.0.1:9000"), "/b/", Some(Target::Bucket)),
            (None, "/b/a/b//c", Some(Target::Object("a/b//c".into()))),
            (Some("127.0.0.1:9000"), "/other/k", None),
            (Some("127.0.0.1:9000"), "/bb/k", None),
            (Some("bb.s3.amazonaws.com"), "/k", None),
            (Some("b."), "/k", None),
            (Some("127.0.0.1:9000"), "/graphql/", None),
        ];
        for (host, path, want) in cases {
            assert_eq!(&locate("b", *host, path), want, "{host:?} {path}");
        }
    }

    #[test]
    fn strip_port_handles_names_and_ipv6() {
        for (input, want) in [
            ("b.s3.amazonaws.com:443", "b.s3.amazonaws.com"),
            ("b.s3.amazonaws.com", "b.s3.amazonaws.com"),
            ("[::1]:8080", "[::1]"),
            ("[::1]", "[::1]"),
        ] {
            assert_eq!(strip_port(input), want);
        }
    }

    #[test]
    fn operations_are_classified_like_s3() {
        let cases = [
            ("PUT", "/b/models/k.tgz", Op::PutObject),
            (
                "PUT",
                "/b/models/k.tgz?partNumber=3&uploadId=abc",
                Op::UploadPart,
            ),
            ("POST", "/b/models/k.tgz?uploads", Op::CreateMultipartUpload),
            (
                "POST",
                "/b/models/k.tgz?uploads=",
                Op::CreateMultipartUpload,
            ),
            (
                "POST",
                "/b/models/k.tgz?uploadId=abc",
                Op::CompleteMultipartUpload,
            ),
            (
                "DELETE",
                "/b/models/k.tgz?uploadId=abc",
                Op::AbortMultipartUpload,
            ),
            ("HEAD", "/b/models/k.tgz", Op::HeadObject),
            ("GET", "/b/models/k.tgz", Op::GetObject),
            (
                "GET",
                "/b/models/k.tgz?X-Amz-Algorithm=AWS4-HMAC-SHA256",
                Op::GetObject,
            ),
            ("HEAD", "/b", Op::HeadBucket),
            ("HEAD", "/", Op::HeadBucket),
            ("GET", "/b", Op::Other),
            ("PUT", "/b/models/k.tgz?tagging", Op::Other),
            ("DELETE", "/b/models/k.tgz", Op::Other),
            ("GET", "/b/models/k.tgz?uploadId=abc", Op::ListParts),
        ];
        for (method, uri, want) in cases {
            let method: Method = method.parse().unwrap();
            let uri: Uri = uri.parse().unwrap();
            assert_eq!(
                FakeS3::operation_name(&method, &uri),
                want.name(),
                "{method} {uri}"
            );
        }
    }

    fn record(md5_of: &[u8], size: u64) -> PartRecord {
        PartRecord {
            md5: Md5::digest(md5_of).into(),
            size,
            crc32: crc32fast::hash(md5_of),
            path: PathBuf::new(),
        }
    }

    fn requested(number: u32, content: &[u8]) -> RequestedPart {
        RequestedPart {
            number,
            etag: format!("\"{}\"", hex::encode(Md5::digest(content))),
            crc32: None,
        }
    }

    #[test]
    fn completion_is_validated_in_s3_order() {
        let big = MIN_PART_BYTES;
        let uploaded: BTreeMap<u32, PartRecord> = [
            (1, record(b"one", big)),
            (2, record(b"two", big)),
            (3, record(b"three", 10)),
            (4, record(b"four", 10)),
        ]
        .into();
        let wrong_crc = RequestedPart {
            crc32: Some("AAAAAA==".into()),
            ..requested(1, b"one")
        };
        let right_crc = RequestedPart {
            crc32: Some(BASE64.encode(crc32fast::hash(b"one").to_be_bytes())),
            ..requested(1, b"one")
        };
        let unquoted = RequestedPart {
            etag: hex::encode(Md5::digest(b"one")).to_uppercase(),
            ..requested(1, b"one")
        };
        use CompletionError as E;
        let cases: Vec<(Vec<RequestedPart>, Result<(), E>)> = vec![
            (
                vec![
                    requested(1, b"one"),
                    requested(2, b"two"),
                    requested(3, b"three"),
                ],
                Ok(()),
            ),
            (vec![requested(3, b"three")], Ok(())),
            (vec![requested(1, b"one"), requested(3, b"three")], Ok(())),
            (vec![right_crc, requested(2, b"two")], Ok(())),
            (vec![unquoted], Ok(())),
            (vec![], Err(E::NoParts)),
            (
                vec![requested(2, b"two"), requested(1, b"one")],
                Err(E::InvalidPartOrder),
            ),
            (
                vec![requested(1, b"one"), requested(1, b"one")],
                Err(E::InvalidPartOrder),
            ),
            (
                vec![requested(1, b"one"), requested(5, b"five")],
                Err(E::InvalidPart(5)),
            ),
            (
                vec![requested(1, b"one"), requested(2, b"not two")],
                Err(E::InvalidPart(2)),
            ),
            (vec![wrong_crc], Err(E::InvalidPart(1))),
            (
                vec![
                    requested(1, b"one"),
                    requested(3, b"three"),
                    requested(4, b"four"),
                ],
                Err(E::EntityTooSmall {
                    number: 3,
                    size: 10,
                }),
            ),
            // Order is judged before existence, as S3 does.
            (
                vec![requested(9, b"x"), requested(1, b"one")],
                Err(E::InvalidPartOrder),
            ),
        ];
        for (parts, want) in cases {
            assert_eq!(
                validate_completion(&parts, &uploaded, None),
                want,
                "{parts:?}"
            );
        }
        // An upload created with a checksum algorithm needs every part's.
        let crc_of_one = BASE64.encode(crc32fast::hash(b"one").to_be_bytes());
        let with_crc = RequestedPart {
            crc32: Some(crc_of_one),
            ..requested(1, b"one")
        };
        assert_eq!(
            validate_completion(std::slice::from_ref(&with_crc), &uploaded, Some("CRC32")),
            Ok(())
        );
        assert_eq!(
            validate_completion(
                &[with_crc, requested(3, b"three")],
                &uploaded,
                Some("CRC32")
            ),
            Err(E::MissingChecksum {
                algorithm: "crc32".into(),
                number: 3
            })
        );
    }

    #[test]
    fn complete_xml_is_parsed_as_botocore_writes_it() {
        let xml = r#"<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part><ETag>"aa"</ETag><PartNumber>1</PartNumber></Part><Part><ChecksumCRC32>AAAAAA==</ChecksumCRC32><ETag>&quot;bb&quot;</ETag><PartNumber>2</PartNumber></Part></CompleteMultipartUpload>"#;
        assert_eq!(
            parse_complete_xml(xml),
            Some(vec![
                RequestedPart {
                    number: 1,
                    etag: "\"aa\"".into(),
                    crc32: None
                },
                RequestedPart {
                    number: 2,
                    etag: "\"bb\"".into(),
                    crc32: Some("AAAAAA==".into())
                },
            ])
        );
        assert_eq!(parse_complete_xml("<Other/>"), None);
        assert_eq!(
            parse_complete_xml(
                "<CompleteMultipartUpload><Part><PartNumber>x</PartNumber><ETag>a</ETag></Part></CompleteMultipartUpload>"
            ),
            None
        );
        assert_eq!(
            parse_complete_xml(
                "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>"
            ),
            None
        );
    }

    #[test]
    fn multipart_etag_is_md5_of_md5s_with_count() {
        let parts = [record(b"a", 1), record(b"b", 1)];
        let mut joined = Vec::new();
        joined.extend_from_slice(&Md5::digest(b"a"));
        joined.extend_from_slice(&Md5::digest(b"b"));
        assert_eq!(
            multipart_etag(&parts),
            format!("\"{}-2\"", hex::encode(Md5::digest(&joined)))
        );
    }

    #[test]
    fn part_numbers_are_one_to_ten_thousand() {
        for (raw, want) in [
            ("1", Some(1)),
            ("10000", Some(10_000)),
            ("0", None),
            ("10001", None),
            ("-1", None),
            ("", None),
            ("2x", None),
        ] {
            assert_eq!(parse_part_number(raw), want, "{raw}");
        }
    }

    #[test]
    fn clock_rules_differ_for_header_and_presigned() {
        let auth = |expires: Option<u64>| sigv4::SignedAuth {
            form: if expires.is_some() {
                AuthForm::Presigned
            } else {
                AuthForm::Header
            },
            credential: sigv4::Credential::parse("A/20240101/us-west-2/s3/aws4_request").unwrap(),
            signed_headers: vec!["host".into()],
            signature: String::new(),
            amz_date: "20240101T000000Z".into(),
            expires_secs: expires,
            security_token: None,
        };
        let t = 1_704_067_200; // 2024-01-01T00:00:00Z
        let code = |r: Result<(), S3Error>| r.err().map(|e| (e.code, e.message));
        let skewed = Some((
            "RequestTimeTooSkewed",
            "The difference between the request time and the current time is too large.".to_owned(),
        ));
        assert_eq!(code(check_clock(&auth(None), t, t + 900)), None);
        assert_eq!(code(check_clock(&auth(None), t, t + 901)), skewed);
        assert_eq!(code(check_clock(&auth(None), t + 901, t)), skewed);
        assert_eq!(code(check_clock(&auth(Some(3600)), t, t + 3600)), None);
        assert_eq!(
            code(check_clock(&auth(Some(3600)), t, t + 3601)),
            Some(("AccessDenied", "Request has expired".to_owned()))
        );
        assert_eq!(
            code(check_clock(&auth(Some(60)), t + 901, t)),
            Some(("AccessDenied", "Request is not valid yet".to_owned()))
        );
    }

    #[test]
    fn unsigned_amz_headers_and_host_are_reported() {
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("h"));
        headers.insert("x-amz-date", HeaderValue::from_static("d"));
        headers.insert("x-amz-meta-a", HeaderValue::from_static("v"));
        headers.insert("content-type", HeaderValue::from_static("t"));
        let signed = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(
            unsigned_headers(&headers, &signed(&["host", "x-amz-date", "x-amz-meta-a"])).is_empty()
        );
        assert_eq!(
            unsigned_headers(&headers, &signed(&["host", "x-amz-date"])),
            ["x-amz-meta-a"]
        );
        assert_eq!(
            unsigned_headers(&headers, &signed(&["x-amz-date", "x-amz-meta-a"])),
            ["host"]
        );
    }

    #[test]
    fn dates_are_formatted_for_s3() {
        assert_eq!(iso8601(1_369_353_600), "2013-05-24T00:00:00Z");
        assert_eq!(http_date(1_369_353_600), "Fri, 24 May 2013 00:00:00 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    }

    #[test]
    fn unsafe_keys_never_become_paths() {
        for (key, safe) in [
            ("models/abc.tgz", true),
            ("../etc/passwd", false),
            ("/abs", false),
            ("a//b", false),
            ("a/./b", false),
            ("", false),
        ] {
            assert_eq!(is_safe_relative_path(key), safe, "{key}");
        }
    }
}
