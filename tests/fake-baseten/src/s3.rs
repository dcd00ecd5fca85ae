//! Fake S3: the upload target the platform's temporary credentials point at.
//!
//! Serves path-style (`/{bucket}/{key}`) and virtual-host-style
//! (`Host: {bucket}.…`) requests, verifies AWS SigV4 (header and presigned)
//! against the credentials it issued, answers a request signed for the wrong
//! region the way S3 does, and keeps uploaded objects on disk so tests can
//! open them.
//!
//! INTERFACE STUB — owned by the fake-S3 work; the signatures below are the
//! contract the rest of the fake compiles against.

use std::path::PathBuf;

use axum::extract::Request;
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Where the fake bucket lives and where objects are kept.
#[derive(Clone, Debug)]
pub struct S3Config {
    pub bucket: String,
    pub region: String,
    pub store_dir: PathBuf,
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
#[derive(Clone, Debug, Serialize)]
pub struct S3Event {
    pub operation: String,
    pub key: String,
    pub signature_verified: bool,
    pub signed_region: Option<String>,
    pub payload_mode: String,
    pub status: u16,
    pub error_code: Option<String>,
}

pub struct FakeS3 {
    cfg: S3Config,
}

impl FakeS3 {
    pub fn new(cfg: S3Config) -> Self {
        Self { cfg }
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
        IssuedCredentials {
            s3_bucket: self.cfg.bucket.clone(),
            s3_key: format!("{key_prefix}/stub.tgz"),
            aws_access_key_id: String::new(),
            aws_secret_access_key: String::new(),
            aws_session_token: String::new(),
        }
    }

    /// True when the request is addressed to the bucket (path-style first
    /// segment, or a `Host` that starts with `{bucket}.`).
    pub fn matches(&self, host: Option<&str>, path: &str) -> bool {
        let _ = (host, path);
        false
    }

    /// A stable name for the S3 operation, used by fault injection and the
    /// request log: `s3.put_object`, `s3.create_multipart_upload`,
    /// `s3.upload_part`, `s3.complete_multipart_upload`,
    /// `s3.abort_multipart_upload`, `s3.head_object`, `s3.get_object`,
    /// `s3.head_bucket`, `s3.other`.
    pub fn operation_name(method: &Method, uri: &Uri) -> &'static str {
        let _ = (method, uri);
        "s3.other"
    }

    pub async fn handle(&self, req: Request) -> Response {
        let _ = req;
        axum::http::StatusCode::NOT_IMPLEMENTED.into_response()
    }

    /// Path of a stored object's bytes.
    pub fn object_path(&self, key: &str) -> Option<PathBuf> {
        let _ = key;
        None
    }

    /// Every stored object: key and size in bytes.
    pub fn objects(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// Every S3 request judged so far, oldest first.
    pub fn events(&self) -> Vec<S3Event> {
        Vec::new()
    }
}
