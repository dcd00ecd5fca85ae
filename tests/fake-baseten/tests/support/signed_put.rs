//! The headers of an S3 PUT signed like an S3 client with the temporary
//! credentials the fake issued, for the test binaries that upload through
//! HTTP (each includes this file by path).

use fake_baseten::sigv4::{self, AuthForm, RequestView, SigningParams};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;

/// The path-style path (`/bucket/key`) of the issued key and the headers
/// of a PUT to it through `host`, payload unsigned, signed for `region` at
/// the current time. `host` is signed but not returned: the client sends
/// its own.
pub fn signed_put_headers(host: &str, region: &str, creds: &Value) -> (String, HeaderMap) {
    let s = |k: &str| creds[k].as_str().unwrap().to_string();
    let path = format!("/{}/{}", s("s3_bucket"), s("s3_key"));
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let amz_date = sigv4::format_amz_date(secs);
    let mut headers = HeaderMap::new();
    headers.insert("host", HeaderValue::from_str(host).unwrap());
    headers.insert(
        "x-amz-content-sha256",
        HeaderValue::from_static("UNSIGNED-PAYLOAD"),
    );
    headers.insert("x-amz-date", HeaderValue::from_str(&amz_date).unwrap());
    headers.insert(
        "x-amz-security-token",
        HeaderValue::from_str(&s("aws_session_token")).unwrap(),
    );
    let signed: Vec<String> = [
        "host",
        "x-amz-content-sha256",
        "x-amz-date",
        "x-amz-security-token",
    ]
    .map(String::from)
    .to_vec();
    let computed = sigv4::compute(
        &RequestView {
            method: "PUT",
            raw_path: &path,
            raw_query: "",
            headers: &headers,
        },
        &SigningParams {
            secret: &s("aws_secret_access_key"),
            amz_date: &amz_date,
            region,
            service: "s3",
            signed_headers: &signed,
            payload_hash: "UNSIGNED-PAYLOAD",
            form: AuthForm::Header,
        },
    );
    let authorization = format!(
        "AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}",
        s("aws_access_key_id"),
        computed.scope,
        signed.join(";"),
        computed.signature
    );
    headers.remove("host");
    headers.insert(
        "authorization",
        HeaderValue::from_str(&authorization).unwrap(),
    );
    (path, headers)
}
