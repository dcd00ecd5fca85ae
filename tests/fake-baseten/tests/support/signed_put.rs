//! The headers of an S3 PUT signed like an S3 client with the temporary
//! credentials the fake issued, for the test binaries that upload through
//! HTTP (each includes this file by path).

use fake_baseten::sigv4::{self, SignerCredentials};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;

/// The path-style path (`/bucket/key`) of the issued key and the headers
/// of a PUT to it through `host`, payload unsigned, signed for `region` at
/// the current time by the fake's own test signer. `host` is signed but not
/// returned: the client sends its own.
pub fn signed_put_headers(host: &str, region: &str, creds: &Value) -> (String, HeaderMap) {
    let s = |k: &str| creds[k].as_str().unwrap();
    let path = format!("/{}/{}", s("s3_bucket"), s("s3_key"));
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut headers = HeaderMap::new();
    headers.insert("host", HeaderValue::from_str(host).unwrap());
    sigv4::sign_headers(
        sigv4::RequestLine {
            method: "PUT",
            raw_path: &path,
            raw_query: "",
        },
        &mut headers,
        SignerCredentials {
            access_key_id: s("aws_access_key_id"),
            secret: s("aws_secret_access_key"),
            session_token: Some(s("aws_session_token")),
        },
        region,
        &sigv4::format_amz_date(secs),
        "UNSIGNED-PAYLOAD",
    );
    headers.remove("host");
    (path, headers)
}
