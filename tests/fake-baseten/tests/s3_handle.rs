//! The fake S3 end to end through `FakeS3::handle`, with requests signed in
//! Rust: what a client sees for good uploads, bad signatures, the wrong
//! region, multipart uploads and aws-chunked bodies.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use fake_baseten::s3::{AbortWhileCompleting, FakeS3, IssuedCredentials, MIN_PART_BYTES, S3Config};
use fake_baseten::sigv4::{self, SignerCredentials};
use http_body_util::BodyExt as _;
use sha2::{Digest as _, Sha256};

const BUCKET: &str = "fake-truss-uploads";

use tempfile::TempDir;

struct Harness {
    fake: FakeS3,
    creds: IssuedCredentials,
    dir: TempDir,
}

impl Harness {
    fn new() -> Self {
        Self::with(|_| {}, "models")
    }

    fn with(configure: impl FnOnce(&mut S3Config), prefix: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = S3Config::new(BUCKET, dir.path().join("store"));
        configure(&mut cfg);
        let fake = FakeS3::new(cfg);
        let creds = fake.issue_credentials(prefix);
        Self { fake, creds, dir }
    }

    fn signer(&self) -> SignerCredentials<'_> {
        SignerCredentials {
            access_key_id: &self.creds.aws_access_key_id,
            secret: &self.creds.aws_secret_access_key,
            session_token: Some(&self.creds.aws_session_token),
        }
    }

    fn vhost(&self) -> String {
        format!("{BUCKET}.s3.amazonaws.com")
    }

    fn key_path(&self) -> String {
        format!("/{}", self.creds.s3_key)
    }

    async fn send(&self, req: Request) -> Reply {
        let response = self.fake.handle(req).await;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            headers,
            body,
        }
    }

    fn tmp_files(&self) -> usize {
        std::fs::read_dir(self.dir.path().join("store/tmp")).map_or(0, |d| d.count())
    }
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn code(&self) -> Option<String> {
        element(&self.text(), "Code")
    }

    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }
}

fn element(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{tag}>"))? + start;
    Some(xml[start..end].to_owned())
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

fn md5_raw(data: &[u8]) -> Vec<u8> {
    use md5::Digest as _;
    md5::Md5::digest(data).to_vec()
}

fn md5_hex(data: &[u8]) -> String {
    hex::encode(md5_raw(data))
}

/// What one signed request is made of.
struct Spec<'a> {
    method: Method,
    host: String,
    path: String,
    query: &'a str,
    headers: Vec<(&'static str, String)>,
    payload_hash: String,
    region: &'a str,
    amz_date: String,
    creds: SignerCredentials<'a>,
}

impl<'a> Spec<'a> {
    fn new(h: &'a Harness, method: Method, query: &'a str, body: &[u8]) -> Self {
        Self {
            method,
            host: h.vhost(),
            path: h.key_path(),
            query,
            headers: Vec::new(),
            payload_hash: sha256_hex(body),
            region: "us-west-2",
            amz_date: sigv4::format_amz_date(now_secs()),
            creds: h.signer(),
        }
    }

    fn signed_headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_str(&self.host).unwrap());
        for (name, value) in &self.headers {
            headers.insert(
                HeaderName::from_static(name),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        sigv4::sign_headers(
            sigv4::RequestLine {
                method: self.method.as_str(),
                raw_path: &self.path,
                raw_query: self.query,
            },
            &mut headers,
            self.creds,
            self.region,
            &self.amz_date,
            &self.payload_hash,
        );
        headers
    }

    fn request(&self, body: Body) -> Request {
        let headers = self.signed_headers();
        build(self.method.clone(), &self.path, self.query, headers, body)
    }
}

fn build(method: Method, path: &str, query: &str, headers: HeaderMap, body: Body) -> Request {
    let uri = if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    };
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .body(body)
        .unwrap();
    *req.headers_mut() = headers;
    req
}

async fn put(h: &Harness, body: &[u8]) -> Reply {
    let spec = Spec::new(h, Method::PUT, "", body);
    h.send(spec.request(Body::from(body.to_vec()))).await
}

#[tokio::test]
async fn put_object_stores_the_bytes_with_an_md5_etag() {
    let h = Harness::new();
    let body = b"a tarball, honestly".repeat(100);
    let reply = put(&h, &body).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(
        reply.header("etag"),
        Some(format!("\"{}\"", md5_hex(&body)))
    );
    assert!(reply.header("x-amz-request-id").is_some());

    let stored = h.fake.object_bytes(&h.creds.s3_key).expect("object stored");
    assert_eq!(stored, body);
    assert_eq!(
        h.fake.objects(),
        [(h.creds.s3_key.clone(), body.len() as u64)]
    );
    let event = h.fake.events().pop().unwrap();
    assert_eq!(event.operation, "s3.put_object");
    assert_eq!(event.key, h.creds.s3_key);
    assert!(event.signature_verified);
    assert_eq!(event.signed_region.as_deref(), Some("us-west-2"));
    assert_eq!(event.payload_mode, "sha256");
    assert_eq!((event.status, event.error_code), (200, None));
    assert_eq!(h.tmp_files(), 0);
}

#[tokio::test]
async fn path_style_and_regional_virtual_hosts_reach_the_same_bucket() {
    let h = Harness::new();
    for (host, path) in [
        (
            "s3.us-west-2.amazonaws.com".to_owned(),
            format!("/{BUCKET}{}", h.key_path()),
        ),
        (
            "127.0.0.1:4566".to_owned(),
            format!("/{BUCKET}{}", h.key_path()),
        ),
        (format!("{BUCKET}.s3.us-west-2.amazonaws.com"), h.key_path()),
        (format!("{BUCKET}.localhost:8443"), h.key_path()),
    ] {
        assert!(h.fake.matches(Some(&host), &path), "{host} {path}");
        let mut spec = Spec::new(&h, Method::PUT, "", b"x");
        spec.host = host.clone();
        spec.path = path.clone();
        let reply = h.send(spec.request(Body::from("x"))).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "{host} {path}: {}",
            reply.text()
        );
    }
    assert!(!h.fake.matches(Some("127.0.0.1:4566"), "/graphql/"));
    assert!(!h.fake.matches(Some("app.baseten.co"), "/v1/models/abc"));
}

#[tokio::test]
async fn wrong_secret_is_signature_does_not_match() {
    let h = Harness::new();
    let mut spec = Spec::new(&h, Method::PUT, "", b"body");
    spec.creds.secret = "not-the-secret";
    let reply = h.send(spec.request(Body::from("body"))).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(reply.code().as_deref(), Some("SignatureDoesNotMatch"));
    let xml = reply.text();
    assert!(xml.starts_with("<?xml"), "{xml}");
    for tag in [
        "Message",
        "AWSAccessKeyId",
        "StringToSign",
        "SignatureProvided",
        "CanonicalRequest",
        "RequestId",
        "HostId",
    ] {
        assert!(element(&xml, tag).is_some(), "no <{tag}> in {xml}");
    }
    assert_eq!(
        reply.header("content-type").as_deref(),
        Some("application/xml")
    );
    assert!(h.fake.objects().is_empty());
    let event = h.fake.events().pop().unwrap();
    assert!(!event.signature_verified);
    assert_eq!(event.error_code.as_deref(), Some("SignatureDoesNotMatch"));
}

#[tokio::test]
async fn signed_for_us_east_1_gets_the_answer_botocore_redirects_on() {
    let h = Harness::new();
    let mut spec = Spec::new(&h, Method::PUT, "", b"body");
    spec.region = "us-east-1";
    let reply = h.send(spec.request(Body::from("body"))).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        reply.code().as_deref(),
        Some("AuthorizationHeaderMalformed")
    );
    assert_eq!(
        element(&reply.text(), "Region").as_deref(),
        Some("us-west-2")
    );
    assert_eq!(
        reply.header("x-amz-bucket-region").as_deref(),
        Some("us-west-2")
    );
    let event = h.fake.events().pop().unwrap();
    assert_eq!(event.signed_region.as_deref(), Some("us-east-1"));
    // Answered with the region, but the signature (for its own scope) was
    // still checked and recorded.
    assert!(event.signature_verified);

    // The region is judged before the signature, as S3 does; the record
    // shows the bad signature.
    spec.creds.secret = "wrong";
    let reply = h.send(spec.request(Body::from("body"))).await;
    assert_eq!(
        reply.code().as_deref(),
        Some("AuthorizationHeaderMalformed")
    );
    assert!(!h.fake.events().pop().unwrap().signature_verified);

    // HeadBucket has no body to carry <Region>: the header must do.
    let mut head = Spec::new(&h, Method::HEAD, "", b"");
    head.path = "/".into();
    head.region = "us-east-1";
    let reply = h.send(head.request(Body::empty())).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.body.is_empty());
    assert_eq!(
        reply.header("x-amz-bucket-region").as_deref(),
        Some("us-west-2")
    );
    head.region = "us-west-2";
    let reply = h.send(head.request(Body::empty())).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        reply.header("x-amz-bucket-region").as_deref(),
        Some("us-west-2")
    );
    assert_eq!(h.fake.events().pop().unwrap().operation, "s3.head_bucket");
}

#[tokio::test]
async fn the_bucket_region_is_configurable() {
    let h = Harness::with(|cfg| cfg.region = "eu-central-1".into(), "chains");
    assert!(h.creds.s3_key.starts_with("chains/"));
    let reply = put(&h, b"x").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        element(&reply.text(), "Region").as_deref(),
        Some("eu-central-1")
    );
    let mut spec = Spec::new(&h, Method::PUT, "", b"x");
    spec.region = "eu-central-1";
    assert_eq!(
        h.send(spec.request(Body::from("x"))).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn session_token_must_be_the_one_issued_with_the_key() {
    let h = Harness::new();
    let mut spec = Spec::new(&h, Method::PUT, "", b"x");
    spec.creds.session_token = None;
    let reply = h.send(spec.request(Body::from("x"))).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::FORBIDDEN, Some("AccessDenied"))
    );

    let other = h.fake.issue_credentials("models");
    spec.creds.session_token = Some(&other.aws_session_token);
    let reply = h.send(spec.request(Body::from("x"))).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::BAD_REQUEST, Some("InvalidToken"))
    );

    spec.creds = h.signer();
    spec.creds.access_key_id = "ASIANOTISSUED0000000";
    let reply = h.send(spec.request(Body::from("x"))).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::FORBIDDEN, Some("InvalidAccessKeyId"))
    );

    let anonymous = build(
        Method::PUT,
        &h.key_path(),
        "",
        host_only(&h.vhost()),
        Body::from("x"),
    );
    let reply = h.send(anonymous).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::FORBIDDEN, Some("AccessDenied"))
    );
    assert!(h.fake.objects().is_empty());
}

fn host_only(host: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("host", HeaderValue::from_str(host).unwrap());
    headers
}

#[tokio::test]
async fn credentials_write_only_the_key_they_were_issued_for() {
    let h = Harness::new();
    let other = h.fake.issue_credentials("models");
    assert_ne!(other.s3_key, h.creds.s3_key);
    assert_ne!(other.aws_access_key_id, h.creds.aws_access_key_id);
    let mut spec = Spec::new(&h, Method::PUT, "", b"x");
    spec.path = format!("/{}", other.s3_key);
    let reply = h.send(spec.request(Body::from("x"))).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::FORBIDDEN, Some("AccessDenied"))
    );
    let event = h.fake.events().pop().unwrap();
    assert!(
        event.signature_verified,
        "the signature was fine; the key was not"
    );
    assert!(h.fake.objects().is_empty());
}

#[tokio::test]
async fn body_that_does_not_match_its_signed_hash_is_refused() {
    let h = Harness::new();
    let spec = Spec::new(&h, Method::PUT, "", b"what was signed");
    let reply = h.send(spec.request(Body::from("what was sent!!"))).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.code().as_deref(), Some("XAmzContentSHA256Mismatch"));
    assert_eq!(
        element(&reply.text(), "ClientComputedContentSHA256"),
        Some(sha256_hex(b"what was signed"))
    );
    assert!(h.fake.objects().is_empty());
    assert_eq!(h.tmp_files(), 0, "the partial upload is removed");
}

#[tokio::test]
async fn unsigned_payload_is_accepted_and_content_md5_still_checked() {
    let h = Harness::new();
    let mut spec = Spec::new(&h, Method::PUT, "", b"");
    spec.payload_hash = sigv4::UNSIGNED_PAYLOAD.into();
    let reply = h.send(spec.request(Body::from("anything"))).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        h.fake.events().pop().unwrap().payload_mode,
        "UNSIGNED-PAYLOAD"
    );

    spec.headers = vec![("content-md5", BASE64.encode(md5_raw(b"other")))];
    let reply = h.send(spec.request(Body::from("anything"))).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::BAD_REQUEST, Some("BadDigest"))
    );
}

#[tokio::test]
async fn clock_skew_beyond_fifteen_minutes_is_refused() {
    let h = Harness::new();
    let mut spec = Spec::new(&h, Method::PUT, "", b"x");
    spec.amz_date = sigv4::format_amz_date(now_secs() - 20 * 60);
    let reply = h.send(spec.request(Body::from("x"))).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(reply.code().as_deref(), Some("RequestTimeTooSkewed"));
    assert_eq!(
        element(&reply.text(), "MaxAllowedSkewMilliseconds").as_deref(),
        Some("900000")
    );

    spec.amz_date = sigv4::format_amz_date(now_secs() - 10 * 60);
    assert_eq!(
        h.send(spec.request(Body::from("x"))).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn unsigned_amz_headers_are_refused() {
    let h = Harness::new();
    let spec = Spec::new(&h, Method::PUT, "", b"x");
    let mut headers = spec.signed_headers();
    headers.insert("x-amz-meta-sneaky", HeaderValue::from_static("1"));
    let reply = h
        .send(build(
            Method::PUT,
            &h.key_path(),
            "",
            headers,
            Body::from("x"),
        ))
        .await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::FORBIDDEN, Some("AccessDenied"))
    );
    assert_eq!(
        element(&reply.text(), "HeadersNotSigned").as_deref(),
        Some("x-amz-meta-sneaky")
    );
}

fn presigned(h: &Harness, method: Method, region: &str, amz_date: &str, expires: u64) -> Request {
    let headers = host_only(&h.vhost());
    let query = sigv4::presign_query(
        sigv4::RequestLine {
            method: method.as_str(),
            raw_path: &h.key_path(),
            raw_query: "",
        },
        &headers,
        h.signer(),
        region,
        amz_date,
        expires,
    );
    build(
        method,
        &h.key_path(),
        &query,
        headers,
        Body::from("presigned body"),
    )
}

#[tokio::test]
async fn presigned_urls_are_verified_and_expire() {
    let h = Harness::new();
    let now = sigv4::format_amz_date(now_secs());
    let reply = h
        .send(presigned(&h, Method::PUT, "us-west-2", &now, 3600))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let event = h.fake.events().pop().unwrap();
    assert!(event.signature_verified);
    assert_eq!(event.payload_mode, "UNSIGNED-PAYLOAD");
    assert_eq!(
        h.fake.object_bytes(&h.creds.s3_key).unwrap(),
        b"presigned body"
    );

    let two_hours_ago = sigv4::format_amz_date(now_secs() - 7200);
    let reply = h
        .send(presigned(
            &h,
            Method::PUT,
            "us-west-2",
            &two_hours_ago,
            3600,
        ))
        .await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::FORBIDDEN, Some("AccessDenied"))
    );
    assert_eq!(
        element(&reply.text(), "Message").as_deref(),
        Some("Request has expired")
    );

    let reply = h
        .send(presigned(&h, Method::PUT, "us-east-1", &now, 3600))
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        reply.code().as_deref(),
        Some("AuthorizationQueryParametersError")
    );
    assert_eq!(
        element(&reply.text(), "Region").as_deref(),
        Some("us-west-2")
    );
    assert_eq!(
        reply.header("x-amz-bucket-region").as_deref(),
        Some("us-west-2")
    );

    let mut tampered = presigned(&h, Method::PUT, "us-west-2", &now, 3600);
    let uri = tampered
        .uri()
        .to_string()
        .replace("X-Amz-Expires=3600", "X-Amz-Expires=3601");
    *tampered.uri_mut() = uri.parse().unwrap();
    let reply = h.send(tampered).await;
    assert_eq!(reply.code().as_deref(), Some("SignatureDoesNotMatch"));
}

async fn create_upload(h: &Harness) -> String {
    let spec = Spec::new(h, Method::POST, "uploads", b"");
    let reply = h.send(spec.request(Body::empty())).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(element(&reply.text(), "Key"), Some(h.creds.s3_key.clone()));
    element(&reply.text(), "UploadId").expect("UploadId in the answer")
}

async fn upload_part(h: &Harness, upload_id: &str, number: u32, data: &[u8]) -> Reply {
    let query = format!("partNumber={number}&uploadId={upload_id}");
    let spec = Spec::new(h, Method::PUT, &query, data);
    h.send(spec.request(Body::from(data.to_vec()))).await
}

async fn complete(h: &Harness, upload_id: &str, parts: &[(u32, String)]) -> Reply {
    let mut xml = String::from(
        r#"<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">"#,
    );
    for (number, etag) in parts {
        xml.push_str(&format!(
            "<Part><ETag>{etag}</ETag><PartNumber>{number}</PartNumber></Part>"
        ));
    }
    xml.push_str("</CompleteMultipartUpload>");
    let query = format!("uploadId={upload_id}");
    let spec = Spec::new(h, Method::POST, &query, xml.as_bytes());
    h.send(spec.request(Body::from(xml))).await
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[tokio::test]
async fn multipart_upload_joins_parts_with_a_multipart_etag() {
    let h = Harness::new();
    let upload_id = create_upload(&h).await;
    assert_eq!(h.fake.open_uploads(), 1);
    let chunks = [
        pattern(MIN_PART_BYTES as usize, 1),
        pattern(MIN_PART_BYTES as usize, 2),
        pattern(1234, 3),
    ];
    let mut listed = Vec::new();
    // Uploaded out of order, as concurrent clients do.
    for number in [3u32, 1, 2] {
        let data = &chunks[number as usize - 1];
        let reply = upload_part(&h, &upload_id, number, data).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        let etag = reply.header("etag").unwrap();
        assert_eq!(etag, format!("\"{}\"", md5_hex(data)));
        listed.push((number, etag));
    }
    listed.sort();
    let reply = complete(&h, &upload_id, &listed).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let etag = element(&reply.text(), "ETag").unwrap();
    assert!(etag.ends_with("-3&quot;"), "{etag}");
    assert_eq!(
        h.fake.object_etag(&h.creds.s3_key).unwrap(),
        etag.replace("&quot;", "\"")
    );

    let stored = h.fake.object_bytes(&h.creds.s3_key).unwrap();
    assert_eq!(stored, chunks.concat());
    assert_eq!(h.fake.open_uploads(), 0);
    // Like S3, completing copies nothing: the object is its parts, in order.
    let files = h.fake.object_files(&h.creds.s3_key).unwrap();
    let upload_dir = h.dir.path().join("store/uploads").join(&upload_id);
    assert_eq!(files.len(), 3);
    assert!(
        files.iter().all(|f| f.starts_with(&upload_dir)),
        "{files:?}"
    );
    let mut sorted = files.clone();
    sorted.sort();
    assert_eq!(files, sorted, "segments are read in part order");
    let ops: Vec<String> = h.fake.events().into_iter().map(|e| e.operation).collect();
    assert_eq!(
        ops,
        [
            "s3.create_multipart_upload",
            "s3.upload_part",
            "s3.upload_part",
            "s3.upload_part",
            "s3.complete_multipart_upload"
        ]
    );

    // The completed object reads back whole.
    let get = Spec::new(&h, Method::GET, "", b"");
    let reply = h.send(get.request(Body::empty())).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body.len(), stored.len());
    assert!(reply.body == stored);
    let head = Spec::new(&h, Method::HEAD, "", b"");
    let reply = h.send(head.request(Body::empty())).await;
    assert_eq!(
        reply.header("content-length"),
        Some(stored.len().to_string())
    );
}

#[tokio::test]
async fn multipart_completion_errors_are_s3_errors() {
    let h = Harness::new();
    let upload_id = create_upload(&h).await;
    let small = [pattern(100, 1), pattern(100, 2)];
    let mut etags = Vec::new();
    for (i, data) in small.iter().enumerate() {
        let reply = upload_part(&h, &upload_id, i as u32 + 1, data).await;
        etags.push(reply.header("etag").unwrap());
    }
    let cases = [
        (
            vec![(1, etags[0].clone()), (2, etags[1].clone())],
            "EntityTooSmall",
        ),
        (
            vec![
                (1, etags[0].clone()),
                (2, "\"00000000000000000000000000000000\"".into()),
            ],
            "InvalidPart",
        ),
        (
            vec![(1, etags[0].clone()), (3, etags[1].clone())],
            "InvalidPart",
        ),
        (
            vec![(2, etags[1].clone()), (1, etags[0].clone())],
            "InvalidPartOrder",
        ),
        (vec![], "MalformedXML"),
    ];
    for (parts, code) in cases {
        let reply = complete(&h, &upload_id, &parts).await;
        assert_eq!(
            (reply.status, reply.code()),
            (StatusCode::BAD_REQUEST, Some(code.to_owned())),
            "{parts:?}"
        );
    }
    // A failed completion leaves the upload open; the last part may be small.
    let reply = complete(&h, &upload_id, &[(2, etags[1].clone())]).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());

    let reply = upload_part(&h, "no-such-upload", 1, b"x").await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::NOT_FOUND, Some("NoSuchUpload"))
    );
    let reply = upload_part(&h, &upload_id, 10_001, b"x").await;
    assert_eq!(reply.code().as_deref(), Some("InvalidArgument"));
}

#[tokio::test]
async fn aborted_upload_is_gone_with_its_parts() {
    let h = Harness::new();
    let upload_id = create_upload(&h).await;
    let reply = upload_part(&h, &upload_id, 1, &pattern(1000, 1)).await;
    let etag = reply.header("etag").unwrap();
    let dir = h.dir.path().join("store/uploads").join(&upload_id);
    assert!(dir.exists());

    let query = format!("uploadId={upload_id}");
    let abort = Spec::new(&h, Method::DELETE, &query, b"");
    let reply = h.send(abort.request(Body::empty())).await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT);
    assert_eq!(
        h.fake.events().pop().unwrap().operation,
        "s3.abort_multipart_upload"
    );
    assert_eq!(h.fake.open_uploads(), 0);
    assert!(!dir.exists());

    let reply = upload_part(&h, &upload_id, 2, b"late").await;
    assert_eq!(reply.code().as_deref(), Some("NoSuchUpload"));
    let reply = complete(&h, &upload_id, &[(1, etag)]).await;
    assert_eq!(reply.code().as_deref(), Some("NoSuchUpload"));
    let reply = h.send(abort.request(Body::empty())).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::NOT_FOUND, Some("NoSuchUpload"))
    );
    assert!(h.fake.objects().is_empty());
}

/// `data` framed as aws-chunked with the given chunk size, then trailers.
fn aws_chunked(data: &[u8], chunk: usize, trailers: &[(&str, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in data.chunks(chunk) {
        out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n");
    for (name, value) in trailers {
        out.extend_from_slice(format!("{name}:{value}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// A body delivered in small frames, so the decoder sees every boundary.
fn framed(bytes: Vec<u8>, frame: usize) -> Body {
    let frames: Vec<Result<Bytes, std::io::Error>> = bytes
        .chunks(frame)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    Body::from_stream(futures_util::stream::iter(frames))
}

fn boto3_style_put<'a>(h: &'a Harness, data: &[u8]) -> Spec<'a> {
    let mut spec = Spec::new(h, Method::PUT, "", b"");
    spec.payload_hash = sigv4::STREAMING_UNSIGNED_TRAILER.into();
    spec.headers = vec![
        ("content-encoding", "aws-chunked".into()),
        ("x-amz-decoded-content-length", data.len().to_string()),
        ("x-amz-sdk-checksum-algorithm", "CRC32".into()),
        ("x-amz-trailer", "x-amz-checksum-crc32".into()),
    ];
    spec
}

#[tokio::test]
async fn aws_chunked_body_with_crc32_trailer_is_decoded_and_checked() {
    let h = Harness::new();
    let data = pattern(200_000, 7);
    let crc = BASE64.encode(crc32fast::hash(&data).to_be_bytes());
    let spec = boto3_style_put(&h, &data);
    let body = aws_chunked(&data, 65_536, &[("x-amz-checksum-crc32", crc.clone())]);
    let reply = h.send(spec.request(framed(body, 1000))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.header("x-amz-checksum-crc32"), Some(crc.clone()));
    assert_eq!(
        reply.header("etag"),
        Some(format!("\"{}\"", md5_hex(&data)))
    );
    let stored = h.fake.object_bytes(&h.creds.s3_key).unwrap();
    assert!(stored == data, "the stored object is the decoded payload");
    assert_eq!(
        h.fake.events().pop().unwrap().payload_mode,
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    );

    let bad = aws_chunked(
        &data,
        65_536,
        &[("x-amz-checksum-crc32", "AAAAAA==".into())],
    );
    let reply = h.send(spec.request(framed(bad, 777))).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::BAD_REQUEST, Some("BadDigest"))
    );

    let missing = aws_chunked(&data, 65_536, &[]);
    let reply = h.send(spec.request(Body::from(missing))).await;
    assert_eq!(reply.code().as_deref(), Some("MalformedTrailerError"));

    let short = aws_chunked(
        &data[..1000],
        65_536,
        &[(
            "x-amz-checksum-crc32",
            BASE64.encode(crc32fast::hash(&data[..1000]).to_be_bytes()),
        )],
    );
    let reply = h.send(spec.request(Body::from(short))).await;
    assert_eq!(reply.code().as_deref(), Some("IncompleteBody"));
    assert_eq!(h.tmp_files(), 0);
}

#[tokio::test]
async fn signed_chunks_are_verified_one_by_one() {
    let h = Harness::new();
    let data = pattern(150_000, 9);
    let mut spec = Spec::new(&h, Method::PUT, "", b"");
    spec.payload_hash = sigv4::STREAMING_SIGNED.into();
    spec.headers = vec![
        ("content-encoding", "aws-chunked".into()),
        ("x-amz-decoded-content-length", data.len().to_string()),
    ];
    let headers = spec.signed_headers();
    let auth = sigv4::parse_auth(&headers, "").unwrap();
    let key = sigv4::signing_key(
        &h.creds.aws_secret_access_key,
        &auth.credential.date,
        "us-west-2",
        "s3",
    );
    let scope = auth.credential.scope();
    let encode = |tamper: bool| {
        let mut previous = auth.signature.clone();
        let mut out = Vec::new();
        let mut pieces: Vec<&[u8]> = data.chunks(65_536).collect();
        pieces.push(&[]);
        for piece in pieces {
            let sig = sigv4::chunk_signature(&key, &spec.amz_date, &scope, &previous, piece);
            out.extend_from_slice(
                format!("{:x};chunk-signature={sig}\r\n", piece.len()).as_bytes(),
            );
            out.extend_from_slice(piece);
            out.extend_from_slice(b"\r\n");
            previous = sig;
        }
        if tamper {
            out[70_000] ^= 1;
        }
        out
    };
    let good = build(
        Method::PUT,
        &h.key_path(),
        "",
        headers.clone(),
        framed(encode(false), 4096),
    );
    let reply = h.send(good).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let stored = h.fake.object_bytes(&h.creds.s3_key).unwrap();
    assert!(stored == data);
    assert_eq!(
        h.fake.events().pop().unwrap().payload_mode,
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
    );

    for file in h.fake.object_files(&h.creds.s3_key).unwrap() {
        std::fs::remove_file(file).unwrap();
    }
    let bad = build(
        Method::PUT,
        &h.key_path(),
        "",
        headers,
        framed(encode(true), 4096),
    );
    let reply = h.send(bad).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::FORBIDDEN, Some("SignatureDoesNotMatch"))
    );
    assert!(
        !h.fake.object_exists(&h.creds.s3_key),
        "a tampered body is not stored"
    );
}

#[tokio::test]
async fn get_and_head_of_a_missing_object_say_no_such_key() {
    let h = Harness::new();
    let get = Spec::new(&h, Method::GET, "", b"");
    let reply = h.send(get.request(Body::empty())).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::NOT_FOUND, Some("NoSuchKey"))
    );
    let head = Spec::new(&h, Method::HEAD, "", b"");
    let reply = h.send(head.request(Body::empty())).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert!(reply.body.is_empty());
    let other = Spec::new(&h, Method::GET, "acl", b"");
    let reply = h.send(other.request(Body::empty())).await;
    assert_eq!(reply.code().as_deref(), Some("NotImplemented"));
    assert_eq!(h.fake.events().pop().unwrap().operation, "s3.other");
}

#[test]
fn issued_credentials_are_fresh_and_shaped_like_sts() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeS3::new(S3Config::new(BUCKET, dir.path().to_path_buf()));
    assert_eq!((fake.bucket(), fake.region()), (BUCKET, "us-west-2"));
    let a = fake.issue_credentials("models");
    let b = fake.issue_credentials("models");
    assert_eq!(a.s3_bucket, BUCKET);
    assert!(
        a.s3_key.starts_with("models/") && a.s3_key.ends_with(".tgz"),
        "{}",
        a.s3_key
    );
    assert!(a.aws_access_key_id.starts_with("ASIA"));
    assert_eq!(a.aws_access_key_id.len(), 20);
    assert_eq!(a.aws_secret_access_key.len(), 40);
    assert!(a.aws_session_token.len() > 100);
    assert_ne!(a.s3_key, b.s3_key);
    assert_ne!(a.aws_access_key_id, b.aws_access_key_id);
    assert_ne!(a.aws_secret_access_key, b.aws_secret_access_key);
    assert_ne!(a.aws_session_token, b.aws_session_token);
}

/// The CRC32 of `data` as S3 writes it.
fn crc32_text(data: &[u8]) -> String {
    BASE64.encode(crc32fast::hash(data).to_be_bytes())
}

/// `spec` sent with `data` aws-chunked and the given CRC32 trailer value.
async fn send_chunked(h: &Harness, spec: &Spec<'_>, data: &[u8], crc: &str) -> Reply {
    let body = aws_chunked(data, 65_536, &[("x-amz-checksum-crc32", crc.to_owned())]);
    h.send(spec.request(framed(body, 4096))).await
}

#[tokio::test]
async fn one_corrupted_byte_in_the_body_or_the_trailer_is_refused_with_bad_digest() {
    let h = Harness::new();
    let data = pattern(300_000, 9);
    let crc = crc32_text(&data);
    let spec = boto3_style_put(&h, &data);
    let reply = send_chunked(&h, &spec, &data, &crc).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());

    // One byte changed on the way, the trailer still the sender's.
    let mut corrupted = pattern(300_000, 9);
    corrupted[123_456] ^= 0x01;
    let reply = send_chunked(&h, &spec, &corrupted, &crc).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::BAD_REQUEST, Some("BadDigest")),
        "{}",
        reply.text()
    );
    assert!(
        reply
            .text()
            .contains("The CRC32 you specified did not match the calculated checksum."),
        "{}",
        reply.text()
    );

    // One byte of the trailer changed: still a well-formed CRC32, the wrong one.
    let mut raw = crc32fast::hash(&data).to_be_bytes();
    raw[3] ^= 0x80;
    let reply = send_chunked(&h, &spec, &data, &BASE64.encode(raw)).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::BAD_REQUEST, Some("BadDigest"))
    );

    // A trailer that is not a CRC32 at all is a malformed request instead.
    let reply = send_chunked(&h, &spec, &data, "not a crc").await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::BAD_REQUEST, Some("InvalidRequest"))
    );
    assert!(
        reply.text().contains("trailing header is invalid"),
        "{}",
        reply.text()
    );

    assert_eq!(
        h.fake.object_bytes(&h.creds.s3_key).unwrap(),
        data,
        "refused bodies leave the stored object alone"
    );
    assert_eq!(h.tmp_files(), 0);
}

fn boto3_style_part<'a>(h: &'a Harness, query: &'a str, data: &[u8]) -> Spec<'a> {
    let mut spec = boto3_style_put(h, data);
    spec.query = query;
    spec
}

async fn complete_with_checksums(
    h: &Harness,
    upload_id: &str,
    parts: &[(u32, String, Option<String>)],
) -> Reply {
    let mut xml = String::from(
        r#"<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">"#,
    );
    for (number, etag, crc) in parts {
        let crc = crc
            .as_ref()
            .map(|c| format!("<ChecksumCRC32>{c}</ChecksumCRC32>"))
            .unwrap_or_default();
        xml.push_str(&format!(
            "<Part><ETag>{etag}</ETag>{crc}<PartNumber>{number}</PartNumber></Part>"
        ));
    }
    xml.push_str("</CompleteMultipartUpload>");
    let query = format!("uploadId={upload_id}");
    let spec = Spec::new(h, Method::POST, &query, xml.as_bytes());
    h.send(spec.request(Body::from(xml))).await
}

#[tokio::test]
async fn an_upload_created_with_crc32_needs_each_part_checksum_as_s3_does() {
    let h = Harness::new();
    let mut create = Spec::new(&h, Method::POST, "uploads", b"");
    create.headers = vec![("x-amz-checksum-algorithm", "CRC32".into())];
    let reply = h.send(create.request(Body::empty())).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let upload_id = element(&reply.text(), "UploadId").unwrap();

    let reply = upload_part(&h, &upload_id, 1, b"no checksum").await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::BAD_REQUEST, Some("InvalidRequest"))
    );
    assert!(
        reply.text().contains("Checksum Type mismatch"),
        "{}",
        reply.text()
    );

    let chunks = [pattern(MIN_PART_BYTES as usize, 1), pattern(999, 2)];
    let mut listed = Vec::new();
    for (i, data) in chunks.iter().enumerate() {
        let number = i as u32 + 1;
        let query = format!("partNumber={number}&uploadId={upload_id}");
        let spec = boto3_style_part(&h, &query, data);
        let reply = send_chunked(&h, &spec, data, &crc32_text(data)).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        assert_eq!(reply.header("x-amz-checksum-crc32"), Some(crc32_text(data)));
        listed.push((
            number,
            reply.header("etag").unwrap(),
            Some(crc32_text(data)),
        ));
    }

    let without: Vec<_> = listed
        .iter()
        .map(|(n, e, _)| (*n, e.clone(), None))
        .collect();
    let reply = complete_with_checksums(&h, &upload_id, &without).await;
    assert_eq!(
        (reply.status, reply.code().as_deref()),
        (StatusCode::BAD_REQUEST, Some("InvalidRequest"))
    );
    assert!(
        reply
            .text()
            .contains("It was missing for part 1 in the request."),
        "{}",
        reply.text()
    );

    let reply = complete_with_checksums(&h, &upload_id, &listed).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(
        h.fake.object_bytes(&h.creds.s3_key).unwrap(),
        chunks.concat()
    );

    // Replacing the object removes the parts it was made of.
    let parts = h.fake.object_files(&h.creds.s3_key).unwrap();
    let reply = put(&h, b"replacement").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(parts.iter().all(|p| !p.exists()), "{parts:?}");
    assert!(!h.dir.path().join("store/uploads").join(&upload_id).exists());
    assert_eq!(
        h.fake.object_bytes(&h.creds.s3_key).unwrap(),
        b"replacement"
    );
}

/// An upload of one part whose completion the fake holds in progress: the
/// harness, the upload's id and the completion's part list.
async fn upload_to_complete(answer: AbortWhileCompleting) -> (Harness, String, Vec<(u32, String)>) {
    let h = Harness::new();
    h.fake.abort_while_completing(answer);
    let upload_id = create_upload(&h).await;
    let reply = upload_part(&h, &upload_id, 1, &pattern(1234, 1)).await;
    let etag = reply.header("etag").unwrap();
    h.fake.hold_completion();
    (h, upload_id, vec![(1, etag)])
}

async fn until_held(h: &Harness) {
    while h.fake.held() == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// While the completion is held: an abort, a listing and a HEAD of the
/// object, then the release. Their answers, the completion's, and the
/// events in the order they were answered.
async fn abort_during_completion(answer: AbortWhileCompleting) -> (Harness, [Reply; 4]) {
    let (h, upload_id, parts) = upload_to_complete(answer).await;
    let query = format!("uploadId={upload_id}");
    let meanwhile = async {
        until_held(&h).await;
        let abort = Spec::new(&h, Method::DELETE, &query, b"");
        let abort = h.send(abort.request(Body::empty())).await;
        let list = Spec::new(&h, Method::GET, &query, b"");
        let list = h.send(list.request(Body::empty())).await;
        let head = Spec::new(&h, Method::HEAD, "", b"");
        let head = h.send(head.request(Body::empty())).await;
        h.fake.release_held();
        (abort, list, head)
    };
    let (completed, (abort, list, head)) =
        tokio::join!(complete(&h, &upload_id, &parts), meanwhile);
    (h, [completed, abort, list, head])
}

#[tokio::test]
async fn an_abort_during_a_completion_is_no_such_upload_and_the_object_is_stored_after() {
    let (h, [completed, abort, list, head]) =
        abort_during_completion(AbortWhileCompleting::NoSuchUpload).await;
    assert_eq!(abort.status, StatusCode::NOT_FOUND);
    assert_eq!(abort.code().as_deref(), Some("NoSuchUpload"));
    assert_eq!(list.code().as_deref(), Some("NoSuchUpload"));
    assert_eq!(head.status, StatusCode::NOT_FOUND, "not stored yet");
    assert_eq!(completed.status, StatusCode::OK, "{}", completed.text());
    assert_eq!(h.fake.object_bytes(&h.creds.s3_key), Some(pattern(1234, 1)));
    assert_eq!(h.fake.open_uploads(), 0);
}

#[tokio::test]
async fn an_abort_during_a_completion_can_be_refused_with_access_denied() {
    let (h, [completed, abort, list, head]) =
        abort_during_completion(AbortWhileCompleting::AccessDenied).await;
    assert_eq!(abort.status, StatusCode::FORBIDDEN);
    assert_eq!(abort.code().as_deref(), Some("AccessDenied"));
    assert_eq!(list.status, StatusCode::OK, "the parts stay listed");
    assert!(list.text().contains("<PartNumber>1</PartNumber>"));
    assert_eq!(head.status, StatusCode::NOT_FOUND, "not stored yet");
    assert_eq!(completed.status, StatusCode::OK, "{}", completed.text());
    assert_eq!(h.fake.object_bytes(&h.creds.s3_key), Some(pattern(1234, 1)));
    assert_eq!(h.fake.open_uploads(), 0);
}

#[tokio::test]
async fn a_held_completion_whose_client_left_still_stores_the_object_at_its_release() {
    let (h, upload_id, parts) = upload_to_complete(AbortWhileCompleting::default()).await;
    tokio::select! {
        _ = complete(&h, &upload_id, &parts) => panic!("the completion was held"),
        () = until_held(&h) => {}
    }
    // The request's future is gone, as when its connection closes.
    assert!(h.fake.object_files(&h.creds.s3_key).is_none());
    h.fake.release_held();
    assert_eq!(h.fake.object_bytes(&h.creds.s3_key), Some(pattern(1234, 1)));
    assert_eq!(h.fake.open_uploads(), 0);
}
