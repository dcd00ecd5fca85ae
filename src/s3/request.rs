//! One logical S3 request ([`Call`]) and how it is sent: each attempt is
//! addressed, signed and sent afresh, and the crate's retry helper decides
//! whether another attempt follows.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::anyhow;
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, Url};

use super::error::Failure;
use super::payload::{CHECKSUM_ALGORITHM, Payload};
use super::region::region_to_follow;
use super::url::{bucket_url, object_url, set_query};
use super::xml::{StoredPart, complete_xml, s3_error};
use super::{Credentials, Inner, Job, sigv4};
use crate::retry;

/// The S3 operations this module sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Operation {
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

/// One logical request; `Inner::call` turns it into attempts.
pub(super) struct Call {
    pub(super) operation: Operation,
    method: Method,
    /// Decoded; encoded identically for the wire and for signing.
    query: Vec<(String, String)>,
    /// Sent and signed besides the authentication and framing headers.
    pub(super) headers: Vec<(&'static str, String)>,
    payload: Payload,
}

impl Call {
    pub(super) fn put_object(size: u64) -> Self {
        Self {
            operation: Operation::PutObject,
            method: Method::PUT,
            query: Vec::new(),
            headers: Vec::new(),
            payload: Payload::File {
                offset: 0,
                len: size,
            },
        }
    }

    pub(super) fn create_multipart() -> Self {
        Self {
            operation: Operation::CreateMultipartUpload,
            method: Method::POST,
            query: vec![("uploads".to_owned(), String::new())],
            // As boto3 does: S3 then keeps each part's CRC32 and checks the
            // list in CompleteMultipartUpload against them.
            headers: vec![("x-amz-checksum-algorithm", CHECKSUM_ALGORITHM.to_owned())],
            payload: Payload::Empty,
        }
    }

    pub(super) fn upload_part(number: u32, upload_id: &str, offset: u64, len: u64) -> Self {
        Self {
            operation: Operation::UploadPart(number),
            method: Method::PUT,
            query: vec![
                ("partNumber".to_owned(), number.to_string()),
                ("uploadId".to_owned(), upload_id.to_owned()),
            ],
            headers: Vec::new(),
            payload: Payload::File { offset, len },
        }
    }

    pub(super) fn complete_multipart(upload_id: &str, parts: &[StoredPart]) -> Self {
        Self {
            operation: Operation::CompleteMultipartUpload,
            method: Method::POST,
            query: vec![("uploadId".to_owned(), upload_id.to_owned())],
            headers: Vec::new(),
            payload: Payload::Xml(complete_xml(parts)),
        }
    }

    pub(super) fn head_bucket() -> Self {
        Self {
            operation: Operation::HeadBucket,
            method: Method::HEAD,
            query: Vec::new(),
            headers: Vec::new(),
            payload: Payload::Empty,
        }
    }

    pub(super) fn abort_multipart(upload_id: &str) -> Self {
        Self {
            operation: Operation::AbortMultipartUpload,
            method: Method::DELETE,
            query: vec![("uploadId".to_owned(), upload_id.to_owned())],
            headers: Vec::new(),
            payload: Payload::Empty,
        }
    }
}

/// A successful answer.
pub(super) struct Reply {
    pub(super) headers: HeaderMap,
    pub(super) body: String,
    /// The CRC32 of the archive bytes the request carried (S3 verified it).
    pub(super) checksum: Option<u32>,
}

impl Inner {
    /// Sends `call` until it succeeds or the uploader's retry policy gives
    /// up, re-signing once for the bucket's real region when S3 names it.
    pub(super) async fn call(&self, job: &Job, call: &Call) -> anyhow::Result<Reply> {
        if call.payload.carries_data() && self.regions.known(&job.bucket).is_none() {
            self.probe_region(job).await;
        }
        let policy = &self.options.retry;
        let note = |failed: u32, wait: Duration, failure: &Failure| {
            tracing::warn!(
                "S3 {} failed ({failure}); retrying in {} ms (attempt {} of {})",
                call.operation,
                wait.as_millis(),
                failed + 1,
                policy.attempts
            );
        };
        // Atomics shared by reference rather than `&mut` captures: the retry
        // loop takes a closure that returns a future (part tries run in
        // spawned tasks, see `retry::run_noting`), and such a future cannot
        // borrow the closure's own state.
        let tries = AtomicU32::new(0);
        let followed_region = AtomicBool::new(false);
        let (tries_ref, followed_ref) = (&tries, &followed_region);
        let outcome = retry::run_noting(policy, None, note, move |try_number| async move {
            tries_ref.store(try_number, Ordering::Relaxed);
            self.try_once(job, call, followed_ref).await
        })
        .await;
        outcome.map_err(|failure| {
            let secrets = [
                job.credentials.secret_access_key.expose(),
                job.credentials.session_token.expose(),
            ];
            failure.into_error(call.operation, tries.load(Ordering::Relaxed), &secrets)
        })
    }

    /// One try of `call`: an attempt signed for the region known now, and,
    /// when S3 answers that the bucket is elsewhere, one more signed for
    /// that region. Following the region is not a failed try, and happens
    /// once per call (`followed_region`) so two answers cannot bounce us
    /// back and forth.
    async fn try_once(
        &self,
        job: &Job,
        call: &Call,
        followed_region: &AtomicBool,
    ) -> Result<Reply, Failure> {
        loop {
            let region = self.regions.for_bucket(&job.bucket);
            let failure = match self.attempt(job, call, &region).await {
                Ok(reply) => {
                    if self.regions.known(&job.bucket).is_none() {
                        self.regions.remember(&job.bucket, &region);
                    }
                    return Ok(reply);
                }
                Err(failure) => failure,
            };
            if let Some(new_region) = region_to_follow(&failure, &region)
                && !followed_region.swap(true, Ordering::Relaxed)
            {
                tracing::debug!(bucket = %job.bucket, %new_region, "S3 bucket is in another region; re-signing");
                self.regions.remember(&job.bucket, &new_region);
                continue;
            }
            return Err(failure);
        }
    }

    /// One attempt of `call`, signed for `region`.
    pub(super) async fn attempt(
        &self,
        job: &Job,
        call: &Call,
        region: &str,
    ) -> Result<Reply, Failure> {
        let endpoint = self.options.endpoint.as_ref();
        let url = if call.operation == Operation::HeadBucket {
            bucket_url(endpoint, &job.bucket, region)
        } else {
            object_url(endpoint, &job.bucket, &job.key, region)
        };
        let mut url = url.map_err(Failure::Local)?;
        set_query(&mut url, &call.query);
        let payload = call.payload.prepare(&job.file, &job.buffers, &job.sent);
        let mut extra = call.headers.clone();
        extra.extend(payload.headers.iter().cloned());
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let headers = signed_headers(
            call.method.as_str(),
            &url,
            &call.query,
            &payload.content_sha256,
            &extra,
            &job.credentials,
            region,
            &sigv4::amz_date(now),
        );
        let sent_url = url.clone();
        let mut request = self
            .client
            .request(call.method.clone(), url)
            .header(reqwest::header::CONTENT_LENGTH, payload.length)
            .body(payload.body);
        if let Some(content_type) = payload.content_type {
            request = request.header(reqwest::header::CONTENT_TYPE, content_type);
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
            None => Ok(Reply {
                headers,
                body,
                checksum: payload.checksum.and_then(|c| c.get().copied()),
            }),
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

pub(super) fn header_str(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
}

/// The headers to send for one request: `extra` (framing and options,
/// names in lower case), then `x-amz-content-sha256`, `x-amz-date`,
/// `x-amz-security-token` (when there is a token) and `authorization`, whose
/// signature covers them all. `host` is signed as the HTTP client will send
/// it. S3 refuses `x-amz-*` headers that are sent but not signed.
#[allow(
    clippy::too_many_arguments,
    reason = "one plain value per part of the signed request"
)]
pub(super) fn signed_headers(
    method: &str,
    url: &Url,
    query: &[(String, String)],
    payload_sha256: &str,
    extra: &[(&'static str, String)],
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
    to_sign.extend(extra.iter().map(|(name, value)| (*name, value.as_str())));
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
    let mut headers = extra.to_vec();
    headers.extend([
        ("x-amz-content-sha256", payload_sha256.to_owned()),
        ("x-amz-date", amz_date.to_owned()),
    ]);
    if !token.is_empty() {
        headers.push(("x-amz-security-token", token.to_owned()));
    }
    headers.push(("authorization", authorization));
    headers
}
