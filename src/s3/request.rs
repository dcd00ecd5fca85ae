//! One logical S3 request ([`Call`]) and how it is sent: each attempt is
//! addressed, signed and sent afresh, and the crate's retry helper decides
//! whether another attempt follows.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::anyhow;
use reqwest::StatusCode;
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderValue};

use super::call::{Call, Operation, header_str};
use super::error::AttemptError;
use super::payload::{BodyRead, Content, Prepared};
use super::region::{DEFAULT_REGION, region_to_follow, valid_region};
use super::url::{bucket_url, object_url, set_query};
use super::xml::{s3_error, xml_text};
use super::{Credentials, Inner, Job, sigv4, wire};
use crate::retry;

/// What happens at most once per call, across its tries.
#[derive(Default)]
struct Once {
    /// S3 named another region and the call was re-signed for it.
    followed_region: AtomicBool,
    /// A success came before the body was sent, and the request was sent
    /// once more.
    repeated_unsent: AtomicBool,
}

/// A successful answer.
pub(super) struct Reply {
    pub(super) headers: HeaderMap,
    pub(super) body: String,
    /// What reading the archive range the request carried gave: its CRC32
    /// (which S3 verified) and its files' digests.
    pub(super) read: Option<BodyRead>,
}

impl Inner {
    /// Sends `call` until it succeeds or the uploader's retry policy gives
    /// up, re-signing once for the bucket's real region when S3 names it.
    pub(super) async fn call(&self, job: &Job, call: &Call) -> anyhow::Result<Reply> {
        self.call_failing(job, call)
            .await
            .map_err(|(failure, tries)| failure.into_error(call.operation, tries))
    }

    /// [`Self::call`], failing with the last attempt's [`AttemptError`] and the
    /// number of tries, for callers that act on what S3 answered.
    pub(super) async fn call_failing(
        &self,
        job: &Job,
        call: &Call,
    ) -> Result<Reply, (AttemptError, u32)> {
        self.call_failing_seen(job, call, |_| {}).await
    }

    /// [`Self::call_failing`], showing `seen` each failed try that is
    /// retried (the last failure is the answer's): a completion's outcome
    /// depends on every try's, not only the last one's.
    pub(super) async fn call_failing_seen(
        &self,
        job: &Job,
        call: &Call,
        mut seen: impl FnMut(&AttemptError),
    ) -> Result<Reply, (AttemptError, u32)> {
        if call.payload.carries_data() && self.regions.known(&job.bucket).is_none() {
            self.probe_region(job)
                .await
                .map_err(|failure| (failure, 1))?;
        }
        let policy = &self.options.retry;
        let note = |failed: u32, wait: Duration, failure: &AttemptError| {
            seen(failure);
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
        let once = Once::default();
        let (tries_ref, once_ref) = (&tries, &once);
        let outcome = retry::run_noting(policy, None, note, move |try_number| async move {
            tries_ref.store(try_number, Ordering::Relaxed);
            // A retry never rides a connection that was open before it.
            let fresh = try_number > 1;
            self.try_once(job, call, once_ref, fresh).await
        })
        .await;
        outcome.map_err(|failure| (failure, tries.load(Ordering::Relaxed)))
    }

    /// One try of `call`: an attempt signed for the region known now, and,
    /// when S3 answers that the bucket is elsewhere, one more signed for
    /// that region. Following the region is not a failed try, and happens
    /// once per call (`Once::followed_region`) so two answers cannot bounce
    /// us back and forth. A success answered before the body was sent is
    /// never taken: the request goes once more, on a new connection
    /// (`Once::repeated_unsent`), and a second such answer is the failure.
    async fn try_once(
        &self,
        job: &Job,
        call: &Call,
        once: &Once,
        mut fresh: bool,
    ) -> Result<Reply, AttemptError> {
        loop {
            let region = self.regions.for_bucket(&job.bucket);
            let failure = match self.attempt(job, call, &region, fresh).await {
                Ok(reply) => {
                    if self.regions.known(&job.bucket).is_none() {
                        self.regions.remember(&job.bucket, &region);
                    }
                    return Ok(reply);
                }
                Err(failure) => failure,
            };
            if let Some(new_region) = region_to_follow(&failure, &region)
                && !once.followed_region.swap(true, Ordering::Relaxed)
            {
                tracing::debug!(bucket = %job.bucket, %new_region, "S3 bucket is in another region; re-signing");
                self.regions.remember(&job.bucket, &new_region);
                continue;
            }
            if let AttemptError::AnsweredUnsent { status } = failure
                && !once.repeated_unsent.swap(true, Ordering::Relaxed)
            {
                tracing::warn!(
                    "S3 answered {} with HTTP {status} before its body was sent; not trusting it, sending it again on a new connection",
                    call.operation
                );
                fresh = true;
                continue;
            }
            return Err(failure);
        }
    }

    /// One attempt of `call`, signed for `region`; with `fresh`, on a new
    /// connection.
    pub(super) async fn attempt(
        &self,
        job: &Job,
        call: &Call,
        region: &str,
        fresh: bool,
    ) -> Result<Reply, AttemptError> {
        let endpoint = self.options.endpoint.as_ref();
        let url = if call.operation == Operation::HeadBucket {
            bucket_url(endpoint, &job.bucket, region)
        } else {
            object_url(endpoint, &job.bucket, &job.key, region)
        };
        let mut url = url.map_err(AttemptError::Local)?;
        set_query(&mut url, &call.query);
        let payload = call.payload.prepare(&job.source, &job.sent);
        let mut extra = call.headers.clone();
        extra.extend(payload.headers.iter().cloned());
        #[expect(
            clippy::disallowed_methods,
            reason = "SigV4 signs with the wall-clock time, not a deadline"
        )]
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let unsigned = Unsigned {
            method: call.method.as_str(),
            url: &url,
            query: &call.query,
            payload_sha256: &payload.content_sha256,
            extra: &extra,
        };
        let headers = signed_headers(&unsigned, &job.credentials, region, &sigv4::amz_date(now));
        let (status, headers, body, sent_whole) =
            self.send_wire(call, &url, &payload, headers, fresh).await?;
        // A success to a data request whose body did not go out whole
        // answered a request the server never read.
        if call.payload.carries_data() && !sent_whole && status.is_success() {
            return Err(AttemptError::AnsweredUnsent {
                status: status.as_u16(),
            });
        }
        match s3_error(status.as_u16(), &body) {
            None if !answers(call.operation, &headers, &body) => Err(AttemptError::NotItsAnswer(
                "S3's success answer to it names what was stored, and this one does not",
            )),
            None => Ok(Reply {
                headers,
                body,
                read: payload
                    .read
                    .and_then(|cell| cell.lock().unwrap_or_else(|e| e.into_inner()).take()),
            }),
            Some(error) => Err(AttemptError::S3 {
                status,
                error,
                header_region: header_str(&headers, "x-amz-bucket-region"),
                retry_after: header_str(&headers, "retry-after")
                    .as_deref()
                    .and_then(retry::parse_retry_after),
            }),
        }
    }

    /// Sends a prepared request on the uploader's own connections (`wire`),
    /// the one way every S3 request goes: a data request with
    /// `Expect: 100-continue`.
    async fn send_wire(
        &self,
        call: &Call,
        url: &Url,
        payload: &Prepared,
        mut headers: Vec<(&'static str, String)>,
        fresh: bool,
    ) -> Result<(StatusCode, HeaderMap, String, bool), AttemptError> {
        // This layer writes the head itself: refuse what could not be sent
        // as a header (a CR or LF would end it early).
        if headers
            .iter()
            .any(|(_, v)| HeaderValue::from_str(v).is_err())
        {
            return Err(unsendable());
        }
        if let Some(content_type) = payload.content_type {
            headers.push(("content-type", content_type.to_owned()));
        }
        let request = wire::Request {
            method: call.method.as_str(),
            url,
            headers: &headers,
            content_length: payload.length,
        };
        let outgoing = match &payload.body {
            Content::Bytes(bytes) => wire::Outgoing::Bytes(bytes),
            Content::File(body) => wire::Outgoing::File(body),
        };
        let answer = self
            .wire
            .send(&request, outgoing, fresh)
            .await
            .map_err(AttemptError::Wire)?;
        if answer.early {
            tracing::debug!(
                status = answer.status,
                "S3 answered {} before its body was sent",
                call.operation
            );
        }
        let status = StatusCode::from_u16(answer.status).map_err(|_| {
            AttemptError::Wire(wire::Error::Exchange(std::io::Error::other(
                "the answer's status is not an HTTP status",
            )))
        })?;
        let body = String::from_utf8_lossy(&answer.body).into_owned();
        Ok((status, answer.headers, body, answer.sent_whole))
    }

    /// Opens the connections `parts` parts will use (at most the
    /// concurrency) but the one the call in flight holds and hands on, when
    /// their host is known already: a fixed endpoint, or a bucket whose
    /// region S3 confirmed.
    pub(super) async fn warm(&self, job: &Job, parts: u64) {
        let endpoint = self.options.endpoint.as_ref();
        let Some(region) = self
            .regions
            .known(&job.bucket)
            .or_else(|| endpoint.map(|_| DEFAULT_REGION.to_owned()))
        else {
            return;
        };
        let Ok(url) = object_url(endpoint, &job.bucket, &job.key, &region) else {
            return;
        };
        // Not through a proxy: a proxy that refuses us would get one
        // refused CONNECT per warmed connection, each with the same
        // credentials; the parts open theirs as they start instead.
        if !self.wire.proxied(&url) {
            let count = usize::try_from(parts).unwrap_or(usize::MAX);
            self.wire
                .warm(&url, self.options.concurrency.max(1).min(count) - 1)
                .await;
        }
    }

    /// Learns the bucket's region with a bodiless HeadBucket before the first
    /// request that carries data, so archive bytes are not offered to a
    /// region that is only a guess (S3 would refuse them at the headers,
    /// costing a round trip). S3 names the
    /// region in `x-amz-bucket-region` whatever the status, even when the
    /// credentials may not list the bucket. Best effort: on no answer the
    /// data request still follows a region answer itself, except when a
    /// proxy refused the tunnel: that refusal is the call's answer.
    pub(super) async fn probe_region(&self, job: &Job) -> Result<(), AttemptError> {
        let region = match self
            .attempt(job, &Call::head_bucket(), DEFAULT_REGION, false)
            .await
        {
            Ok(reply) => Some(
                header_str(&reply.headers, "x-amz-bucket-region")
                    .unwrap_or_else(|| DEFAULT_REGION.to_owned()),
            ),
            Err(AttemptError::S3 { header_region, .. }) => header_region,
            Err(failure) if failure.is_tunnel_refusal() => return Err(failure),
            Err(failure) => {
                tracing::debug!("S3 HeadBucket gave no region: {failure}");
                None
            }
        };
        if let Some(region) = region.filter(|r| valid_region(r)) {
            tracing::debug!(bucket = %job.bucket, %region, "S3 bucket region");
            self.regions.remember(&job.bucket, &region);
        }
        Ok(())
    }
}

/// Whether a success can be S3's answer to `operation`: S3 names what it
/// stored (a PUT's `ETag` header, the new upload's id, the completed
/// object's ETag). A success without it (a proxy's or gateway's page, a
/// stray answer) is another's; the bodiless calls are not read for more.
fn answers(operation: Operation, headers: &HeaderMap, body: &str) -> bool {
    let named = |v: Option<String>| v.is_some_and(|v| !v.is_empty());
    match operation {
        Operation::PutObject | Operation::UploadPart(_) => named(header_str(headers, "etag")),
        Operation::CreateMultipartUpload => named(xml_text(body, "UploadId")),
        Operation::CompleteMultipartUpload => named(xml_text(body, "ETag")),
        Operation::ListParts => named(xml_text(body, "UploadId")),
        Operation::HeadObject => named(header_str(headers, "etag")),
        Operation::AbortMultipartUpload | Operation::HeadBucket => true,
    }
}

fn unsendable() -> AttemptError {
    AttemptError::Local(anyhow!(
        "the upload credentials contain characters that cannot be sent in an HTTP header"
    ))
}

/// One request as it goes out, before it is signed.
pub(super) struct Unsigned<'a> {
    pub(super) method: &'a str,
    pub(super) url: &'a Url,
    pub(super) query: &'a [(String, String)],
    pub(super) payload_sha256: &'a str,
    /// Framing and options, names in lower case.
    pub(super) extra: &'a [(&'static str, String)],
}

/// The headers to send for one request: `extra` (framing and options,
/// names in lower case), then `x-amz-content-sha256`, `x-amz-date`,
/// `x-amz-security-token` (when there is a token) and `authorization`, whose
/// signature covers them all. `host` is signed as the HTTP client will send
/// it. S3 refuses `x-amz-*` headers that are sent but not signed.
pub(super) fn signed_headers(
    request: &Unsigned<'_>,
    credentials: &Credentials,
    region: &str,
    amz_date: &str,
) -> Vec<(&'static str, String)> {
    let &Unsigned {
        method,
        url,
        query,
        payload_sha256,
        extra,
    } = request;
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
