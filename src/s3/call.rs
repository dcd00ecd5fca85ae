//! The S3 calls the uploader makes, as plain values: which operation, its
//! method, query, extra headers and payload. The lowest module of `s3/`:
//! it names things the others share and uses none of them but `payload`
//! and `xml`.

use std::fmt;
use std::sync::Arc;

use reqwest::Method;
use reqwest::header::HeaderMap;

use super::payload::{CHECKSUM_ALGORITHM, Delivery, Payload};
use super::xml::{StoredPart, complete_xml};

/// The S3 operations this module sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Operation {
    PutObject,
    CreateMultipartUpload,
    UploadPart(u32),
    CompleteMultipartUpload,
    AbortMultipartUpload,
    ListParts,
    HeadObject,
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
            Self::ListParts => f.write_str("ListParts"),
            Self::HeadObject => f.write_str("HeadObject"),
            Self::HeadBucket => f.write_str("HeadBucket"),
        }
    }
}

/// One logical request; `Inner::call` turns it into attempts.
pub(super) struct Call {
    pub(super) operation: Operation,
    pub(super) method: Method,
    /// Decoded; encoded identically for the wire and for signing.
    pub(super) query: Vec<(String, String)>,
    /// Sent and signed besides the authentication and framing headers.
    pub(super) headers: Vec<(&'static str, String)>,
    pub(super) payload: Payload,
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
                delivery: None,
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

    /// Part `number`, the archive's `len` bytes at `offset`; `delivery`
    /// hears when its whole body is out.
    pub(super) fn upload_part(
        number: u32,
        upload_id: &str,
        (offset, len): (u64, u64),
        delivery: Arc<Delivery>,
    ) -> Self {
        Self {
            operation: Operation::UploadPart(number),
            method: Method::PUT,
            query: vec![
                ("partNumber".to_owned(), number.to_string()),
                ("uploadId".to_owned(), upload_id.to_owned()),
            ],
            headers: Vec::new(),
            payload: Payload::File {
                offset,
                len,
                delivery: Some(delivery),
            },
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

    /// The parts S3 still holds for an upload (the first page: any part
    /// at all is what matters after an abort).
    pub(super) fn list_parts(upload_id: &str) -> Self {
        Self {
            operation: Operation::ListParts,
            method: Method::GET,
            query: vec![("uploadId".to_owned(), upload_id.to_owned())],
            headers: Vec::new(),
            payload: Payload::Empty,
        }
    }

    pub(super) fn head_object() -> Self {
        Self {
            operation: Operation::HeadObject,
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

/// A header's value as trimmed text, when it is text.
pub(super) fn header_str(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
}
