//! Which region a bucket is signed for: learned once per bucket, boto3's
//! way, from S3's answer to a request signed for `us-east-1`, and cached for
//! the uploader's lifetime.

use std::collections::HashMap;
use std::sync::Mutex;

use super::error::AttemptError;

/// The region boto3 signs for when nothing else is known; S3 answers with the
/// bucket's real region.
pub(super) const DEFAULT_REGION: &str = "us-east-1";

/// Each bucket's region as S3 confirmed it.
#[derive(Default)]
pub(super) struct Regions(Mutex<HashMap<String, String>>);

impl Regions {
    /// The region to sign for now: the confirmed one, else the default.
    pub(super) fn for_bucket(&self, bucket: &str) -> String {
        self.known(bucket)
            .unwrap_or_else(|| DEFAULT_REGION.to_owned())
    }

    /// The region S3 confirmed for `bucket`, if any request has yet.
    pub(super) fn known(&self, bucket: &str) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(bucket)
            .cloned()
    }

    pub(super) fn remember(&self, bucket: &str, region: &str) {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(bucket.to_owned(), region.to_owned());
    }
}

/// The region to re-sign for when `failure` is S3 saying the request was
/// signed for the wrong one.
pub(super) fn region_to_follow(failure: &AttemptError, current_region: &str) -> Option<String> {
    let AttemptError::S3 {
        status,
        error,
        header_region,
        ..
    } = failure
    else {
        return None;
    };
    redirect_region(
        status.as_u16(),
        error.code.as_deref(),
        header_region.as_deref(),
        error.region.as_deref(),
        current_region,
    )
}

/// The bucket's region when an answer is S3 saying "wrong region" (the 400
/// `AuthorizationHeaderMalformed` or a 301/307 redirect), preferring the
/// `x-amz-bucket-region` header over the XML `<Region>` as botocore does.
/// `None` when there is nothing new to follow.
pub(super) fn redirect_region(
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

/// Region names become part of a host name, so only `[a-z0-9-]` passes:
/// a hostile `x-amz-bucket-region` cannot point the upload elsewhere.
pub(super) fn valid_region(region: &str) -> bool {
    !region.is_empty()
        && region.len() <= 32
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}
