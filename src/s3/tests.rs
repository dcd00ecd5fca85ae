//! Tests of the uploader's decisions, of its signing against botocore, and of
//! whole uploads against the fake S3.

use std::path::Path;
use std::sync::Mutex;

use reqwest::StatusCode;

use super::call::{Call, Operation};
use super::error::{AttemptError, answer_kind, rejection_message};
use super::plan::{MAX_OBJECT_BYTES, MAX_PARTS, Transfer, plan};
use super::region::redirect_region;
use super::request::{Unsigned, signed_headers};
use super::url::{bucket_url, object_url, set_query, virtual_host_ok};
use super::xml::{S3Error, StoredPart, complete_xml, root_element, s3_error};
use super::*;
use crate::retry::{CallKind, Classify as _, Policy};

fn url(text: &str) -> Url {
    Url::parse(text).unwrap()
}

fn credentials(key_id: &str, secret: &str, token: &str) -> Credentials {
    Credentials {
        access_key_id: key_id.to_owned(),
        secret_access_key: Secret::new(secret),
        session_token: Secret::new(token),
    }
}

#[test]
fn secrets_never_print() {
    let creds = credentials("AKID", "very-secret-key", "session-token-value");
    let shown = format!(
        "{creds:?} {} {}",
        creds.secret_access_key, creds.session_token
    );
    assert!(!shown.contains("very-secret-key"), "{shown}");
    assert!(!shown.contains("session-token-value"), "{shown}");
    assert!(shown.contains("AKID") && shown.contains("***"), "{shown}");
    assert_eq!(creds.secret_access_key.expose(), "very-secret-key");
}

#[test]
fn the_upload_concurrency_input_defaults_to_the_uploaders_default() {
    let declared = crate::cli::Input::UploadConcurrency.spec().default;
    assert_eq!(declared, Some(DEFAULT_CONCURRENCY.to_string().as_str()));
}

#[test]
fn plan_table() {
    let t = DEFAULT_MULTIPART_THRESHOLD_BYTES;
    let p = DEFAULT_PART_SIZE_BYTES;
    let gib = 1024 * MIB;
    let cases = [
        // (size, threshold, part size) → plan
        (0, t, p, Transfer::Single),
        (t, t, p, Transfer::Single),
        (
            t + 1,
            t,
            p,
            Transfer::Multipart {
                part_size: p,
                parts: 2,
            },
        ),
        (
            2 * gib,
            t,
            p,
            Transfer::Multipart {
                part_size: p,
                parts: (2 * gib).div_ceil(p),
            },
        ),
        // parts below S3's 5 MiB minimum are raised to it
        (
            12 * MIB,
            MIB,
            MIB,
            Transfer::Multipart {
                part_size: 5 * MIB,
                parts: 3,
            },
        ),
        // a huge file grows the part so the count stays within 10 000
        (
            200 * gib,
            t,
            p,
            Transfer::Multipart {
                part_size: 21 * MIB,
                parts: (200 * gib).div_ceil(21 * MIB),
            },
        ),
        // a threshold above S3's single-PUT limit still goes multipart
        (
            6 * gib,
            u64::MAX,
            p,
            Transfer::Multipart {
                part_size: p,
                parts: (6 * gib).div_ceil(p),
            },
        ),
    ];
    for (size, threshold, part_size, expected) in cases {
        let got = plan(size, threshold, part_size).unwrap();
        assert_eq!(
            got, expected,
            "size {size} threshold {threshold} part {part_size}"
        );
        if let Transfer::Multipart { parts, .. } = got {
            assert!(parts <= MAX_PARTS);
        }
    }
    let too_big = plan(MAX_OBJECT_BYTES + 1, t, p).unwrap_err().to_string();
    assert!(too_big.contains("5 TiB"), "{too_big}");
}

#[test]
fn parts_cover_the_file_and_the_first_round_is_staggered() {
    let gib = 1024 * MIB;
    let p = DEFAULT_PART_SIZE_BYTES;
    for (size, concurrency) in [
        (gib + 12_345, 16),
        (12 * MIB, 3),
        (50 * MIB, 1),
        (100 * MIB, 4),
    ] {
        let Transfer::Multipart { part_size, parts } = plan(size, 8 * MIB, p).unwrap() else {
            unreachable!("over the threshold")
        };
        let layout = super::plan::layout(size, part_size, parts, concurrency);
        let mut at = 0;
        for (i, (offset, len)) in layout.iter().enumerate() {
            assert_eq!(*offset, at, "contiguous");
            let last = i == layout.len() - 1;
            assert!(last || *len >= 5 * MIB, "S3's minimum: {len}");
            assert!(*len <= part_size);
            at += len;
        }
        assert_eq!(at, size, "the whole file");
        let first_round: Vec<u64> = layout.iter().take(concurrency).map(|(_, l)| *l).collect();
        let distinct = first_round
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        if parts > concurrency as u64 && concurrency > 1 {
            assert_eq!(distinct, concurrency, "{first_round:?}");
            assert!(
                layout[concurrency..layout.len() - 1]
                    .iter()
                    .all(|(_, l)| *l == part_size)
            );
        } else {
            assert_eq!(layout.len() as u64, parts, "equal parts: {layout:?}");
        }
    }
}

#[test]
fn object_url_table() {
    let local = url("http://127.0.0.1:9000");
    let prefixed = url("https://minio.example/s3/");
    let cases: [(Option<&Url>, &str, &str, &str, &str); 7] = [
        (
            None,
            "bucket-1",
            "models/a.tgz",
            "us-east-1",
            "https://bucket-1.s3.amazonaws.com/models/a.tgz",
        ),
        (
            None,
            "bucket-1",
            "models/a.tgz",
            "us-west-2",
            "https://bucket-1.s3.us-west-2.amazonaws.com/models/a.tgz",
        ),
        // dotted buckets break the wildcard certificate: path-style
        (
            None,
            "my.bucket",
            "k",
            "us-east-1",
            "https://s3.amazonaws.com/my.bucket/k",
        ),
        (
            None,
            "my.bucket",
            "k",
            "eu-west-1",
            "https://s3.eu-west-1.amazonaws.com/my.bucket/k",
        ),
        (
            Some(&local),
            "b",
            "models/x y+z.tgz",
            "us-west-2",
            "http://127.0.0.1:9000/b/models/x%20y%2Bz.tgz",
        ),
        (
            Some(&local),
            "b",
            "k",
            "us-east-1",
            "http://127.0.0.1:9000/b/k",
        ),
        (
            Some(&prefixed),
            "b",
            "a/b",
            "us-east-1",
            "https://minio.example/s3/b/a/b",
        ),
    ];
    for (endpoint, bucket, key, region, expected) in cases {
        let got = object_url(endpoint, bucket, key, region).unwrap();
        assert_eq!(got.as_str(), expected, "{bucket}/{key} in {region}");
    }
}

#[test]
fn bucket_url_table() {
    let local = url("http://127.0.0.1:9000/");
    let cases: [(Option<&Url>, &str, &str, &str); 4] = [
        (
            None,
            "bucket-1",
            "us-east-1",
            "https://bucket-1.s3.amazonaws.com/",
        ),
        (
            None,
            "bucket-1",
            "eu-west-1",
            "https://bucket-1.s3.eu-west-1.amazonaws.com/",
        ),
        (
            None,
            "my.bucket",
            "us-east-1",
            "https://s3.amazonaws.com/my.bucket",
        ),
        (Some(&local), "b", "us-west-2", "http://127.0.0.1:9000/b"),
    ];
    for (endpoint, bucket, region, expected) in cases {
        let got = bucket_url(endpoint, bucket, region).unwrap();
        assert_eq!(got.as_str(), expected, "{bucket} in {region}");
    }
}

#[test]
fn object_url_refuses_what_it_cannot_sign_faithfully() {
    for key in ["a/../b", "a/./b", ".."] {
        let error = object_url(None, "bucket", key, "us-east-1").unwrap_err();
        assert!(error.to_string().contains("rewritten"), "{key}: {error}");
    }
    // A region comes from a response header and becomes part of a host name.
    for region in ["evil.example.com/", "us-west-2.attacker", "", "US-WEST-2"] {
        assert!(
            object_url(None, "bucket", "k", region).is_err(),
            "{region:?}"
        );
    }
}

#[test]
fn virtual_host_table() {
    let cases = [
        ("bucket-1", true),
        ("ab", false),
        ("my.bucket", false),
        ("Bucket", false),
        ("-bucket", false),
        ("bucket-", false),
        ("under_score", false),
        (&*"a".repeat(63), true),
        (&*"a".repeat(64), false),
    ];
    for (bucket, expected) in cases {
        assert_eq!(virtual_host_ok(bucket), expected, "{bucket}");
    }
}

#[test]
fn query_is_written_as_signed() {
    let mut target = url("http://127.0.0.1:9000/b/k");
    let pairs =
        [("partNumber", "3"), ("uploadId", "a/b+c=d")].map(|(k, v)| (k.to_owned(), v.to_owned()));
    set_query(&mut target, &pairs);
    assert_eq!(target.query(), Some("partNumber=3&uploadId=a%2Fb%2Bc%3Dd"));
    set_query(&mut target, &[("uploads".to_owned(), String::new())]);
    assert_eq!(target.query(), Some("uploads"));
    set_query(&mut target, &[]);
    assert_eq!(target.query(), None);
}

#[test]
fn redirect_region_table() {
    let cases = [
        // (status, code, header, body, current) → region to follow
        (
            400,
            Some("AuthorizationHeaderMalformed"),
            Some("us-west-2"),
            Some("us-west-2"),
            "us-east-1",
            Some("us-west-2"),
        ),
        (
            400,
            Some("AuthorizationHeaderMalformed"),
            None,
            Some("eu-west-1"),
            "us-east-1",
            Some("eu-west-1"),
        ),
        (
            301,
            Some("PermanentRedirect"),
            Some("eu-central-1"),
            None,
            "us-east-1",
            Some("eu-central-1"),
        ),
        (
            307,
            Some("TemporaryRedirect"),
            Some("ap-south-1"),
            None,
            "us-east-1",
            Some("ap-south-1"),
        ),
        // the header wins over the body, as in botocore
        (
            400,
            Some("AuthorizationHeaderMalformed"),
            Some("us-west-2"),
            Some("eu-west-1"),
            "us-east-1",
            Some("us-west-2"),
        ),
        // already signed for that region: nothing new to follow
        (
            400,
            Some("AuthorizationHeaderMalformed"),
            Some("us-west-2"),
            None,
            "us-west-2",
            None,
        ),
        // no region named anywhere
        (
            400,
            Some("AuthorizationHeaderMalformed"),
            None,
            None,
            "us-east-1",
            None,
        ),
        // not a region answer
        (
            403,
            Some("SignatureDoesNotMatch"),
            Some("us-west-2"),
            None,
            "us-east-1",
            None,
        ),
        (
            400,
            Some("InvalidArgument"),
            Some("us-west-2"),
            None,
            "us-east-1",
            None,
        ),
        // a malformed region is not followed into a host name
        (
            400,
            Some("AuthorizationHeaderMalformed"),
            Some("x.evil.com"),
            None,
            "us-east-1",
            None,
        ),
    ];
    for (status, code, header, body, current, expected) in cases {
        assert_eq!(
            redirect_region(status, code, header, body, current).as_deref(),
            expected,
            "{status} {code:?} {header:?} {body:?} {current}"
        );
    }
}

#[test]
fn answer_kind_table() {
    let t = |status| CallKind::Transient { status };
    let cases = [
        (500, Some("InternalError"), t(500)),
        (500, None, t(500)),
        (502, None, t(502)),
        // S3's NotImplemented: a feature it lacks will not appear on retry
        (501, Some("NotImplemented"), CallKind::Permanent),
        (503, Some("SlowDown"), t(503)),
        (429, None, t(429)),
        (408, None, t(408)),
        // S3's transient codes under other statuses count as their usual one
        (400, Some("RequestTimeout"), t(408)),
        (200, Some("InternalError"), t(500)),
        (400, Some("SlowDown"), t(503)),
        (
            400,
            Some("AuthorizationHeaderMalformed"),
            CallKind::Permanent,
        ),
        (400, Some("XAmzContentSHA256Mismatch"), CallKind::Permanent),
        (403, Some("SignatureDoesNotMatch"), CallKind::Permanent),
        (403, Some("AccessDenied"), CallKind::Permanent),
        (403, Some("RequestTimeTooSkewed"), CallKind::Permanent),
        (404, Some("NoSuchUpload"), CallKind::Permanent),
    ];
    for (status, code, expected) in cases {
        assert_eq!(answer_kind(status, code), expected, "{status} {code:?}");
        // Every transient answer is one the default policy tries again.
        let retried = Options::default().retry.retries(expected);
        assert_eq!(
            retried,
            expected != CallKind::Permanent,
            "{status} {code:?}"
        );
    }
}

#[test]
fn the_default_policy_may_repeat_any_request() {
    let policy = Options::default().retry;
    assert_eq!(policy, Policy::IDEMPOTENT);
    assert!(policy.retries(CallKind::Ambiguous) && policy.retries(CallKind::NotSent));
    let local = AttemptError::Local(anyhow::anyhow!("could not read the archive"));
    assert_eq!(local.kind(), CallKind::Permanent);
}

#[tokio::test]
async fn a_refused_connection_was_not_sent_and_carries_no_retry_after() {
    // Nothing listens on port 1 (a port just freed could be taken by a
    // test running beside this one).
    let wire = wire::Wire::new(&crate::net::Transport::default());
    let url = reqwest::Url::parse("http://127.0.0.1:1/").unwrap();
    let request = wire::Request {
        method: "GET",
        url: &url,
        headers: &[],
        content_length: 0,
    };
    let refused = wire
        .send(&request, wire::Outgoing::Bytes(&[]), false)
        .await
        .unwrap_err();
    let failure = AttemptError::Wire(refused);
    assert_eq!(failure.kind(), CallKind::NotSent);
    assert_eq!(failure.retry_after(), None);
}

#[test]
fn s3_error_table() {
    let signature = r#"<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match the signature you provided. Check your key and signing method.</Message><AWSAccessKeyId>AKID</AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256 secret-token</StringToSign><RequestId>1</RequestId></Error>"#;
    let region = "<Error><Code>AuthorizationHeaderMalformed</Code><Message>the region &apos;us-east-1&apos; is wrong; expecting &apos;us-west-2&apos;</Message><Region>us-west-2</Region></Error>";
    let complete_ok = "<?xml version=\"1.0\"?><CompleteMultipartUploadResult><ETag>\"x\"</ETag></CompleteMultipartUploadResult>";
    let complete_failed = "<?xml version=\"1.0\"?>\n\n<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>";

    assert_eq!(s3_error(200, ""), None);
    assert_eq!(s3_error(200, complete_ok), None);
    let in_ok = s3_error(200, complete_failed).unwrap();
    assert_eq!(in_ok.code.as_deref(), Some("InternalError"));
    let sig = s3_error(403, signature).unwrap();
    assert_eq!(sig.code.as_deref(), Some("SignatureDoesNotMatch"));
    assert!(sig.message.unwrap().starts_with("The request signature"));
    let reg = s3_error(400, region).unwrap();
    assert_eq!(reg.region.as_deref(), Some("us-west-2"));
    assert_eq!(
        reg.message.as_deref(),
        Some("the region 'us-east-1' is wrong; expecting 'us-west-2'")
    );
    let bare = s3_error(503, "").unwrap();
    assert_eq!(bare, S3Error::default());
}

#[test]
fn rejection_messages_show_code_and_message_only() {
    let error = S3Error {
        code: Some("SignatureDoesNotMatch".to_owned()),
        message: Some("does not match (token tok-123456 echoed)".to_owned()),
        region: None,
    };
    // The flow registers the upload credentials when it receives them;
    // every sink scrubs what S3 echoed of them.
    crate::secret::register("tok-123456");
    let text = rejection_message(
        Operation::UploadPart(3),
        StatusCode::FORBIDDEN,
        &error,
        ", after 2 attempts",
    );
    let text = crate::secret::scrub(&text);
    assert!(
        text.starts_with(
            "S3 rejected the upload: SignatureDoesNotMatch: does not match (token *** echoed) (HTTP 403 on UploadPart 3, after 2 attempts): "
        ),
        "{text}"
    );
    let bare = rejection_message(
        Operation::PutObject,
        StatusCode::SERVICE_UNAVAILABLE,
        &S3Error::default(),
        "",
    );
    assert_eq!(
        bare,
        "S3 rejected the upload: HTTP 503 Service Unavailable (HTTP 503 on PutObject)"
    );
}

fn stored_part(number: u32, etag: &str, crc32: &str) -> StoredPart {
    StoredPart {
        number,
        etag: etag.to_owned(),
        checksum_crc32: crc32.to_owned(),
    }
}

#[test]
fn complete_xml_lists_parts_in_order_with_their_checksums() {
    let xml = complete_xml(&[
        stored_part(1, "\"aa\"", "AAAAAA=="),
        stored_part(2, "\"b&b\"", "DUoRhQ=="),
    ]);
    assert!(xml.contains(
        "<Part><PartNumber>1</PartNumber><ETag>\"aa\"</ETag><ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part><Part><PartNumber>2</PartNumber><ETag>\"b&amp;b\"</ETag><ChecksumCRC32>DUoRhQ==</ChecksumCRC32></Part></CompleteMultipartUpload>"
    ), "{xml}");
    assert_eq!(root_element(&xml), Some("CompleteMultipartUpload"));
}

/// One request signed by us and by botocore's `S3SigV4Auth`.
struct BotocoreCase {
    method: &'static str,
    url: Url,
    query: Vec<(String, String)>,
    /// `None`: an ordinary request, its body signed by its SHA-256.
    /// `Some(range)`: that many bytes of an archive, sent as the uploader
    /// sends them (aws-chunked, unsigned, CRC32 trailer).
    streamed: Option<u64>,
    body: Vec<u8>,
    extra: Vec<(&'static str, String)>,
    credentials: Credentials,
    region: &'static str,
}

impl BotocoreCase {
    /// The payload hash and framing headers the uploader sends.
    fn wire(&self) -> (String, Vec<(&'static str, String)>) {
        let mut extra = self.extra.clone();
        let Some(len) = self.streamed else {
            return (sigv4::sha256_hex(&self.body), extra);
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("archive");
        std::fs::write(&path, vec![7u8; len as usize]).unwrap();
        let file = Arc::new(std::fs::File::open(&path).unwrap());
        let prepared = super::payload::Payload::File {
            offset: 0,
            len,
            delivery: None,
        }
        .prepare(&file, &Arc::default());
        extra.extend(prepared.headers);
        (prepared.content_sha256, extra)
    }
}

const BOTOCORE_SIGNER: &str = r#"
import datetime, json, sys
try:
    import botocore.auth
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError as error:
    sys.exit(f"botocore is not importable ({error}); install it: pip install botocore")
stamp = sys.argv[1]
botocore.auth.get_current_datetime = lambda: datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
out = []
for case in json.load(sys.stdin):
    request = AWSRequest(method=case["method"], url=case["url"], data=bytes.fromhex(case["body"]), headers=case["headers"])
    if case["trailer"]:
        # What botocore's httpchecksum module sets for an upload with a trailing checksum.
        request.context["checksum"] = {"request_algorithm": {"algorithm": "crc32", "in": "trailer", "name": "x-amz-checksum-crc32"}}
    creds = Credentials(case["key_id"], case["secret"], case["token"] or None)
    S3SigV4Auth(creds, "s3", case["region"]).add_auth(request)
    out.append({"authorization": request.headers["Authorization"], "sha256": request.headers["X-Amz-Content-SHA256"]})
json.dump(out, sys.stdout)
"#;

/// The signer agrees with botocore, the signer boto3 (and so the Python
/// truss client) uses, on the requests the uploader sends.
#[test]
fn signatures_match_botocore() {
    let amz_date = "20260129T181502Z";
    let with_query = |mut url: Url, pairs: &[(&str, &str)]| {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        set_query(&mut url, &pairs);
        (url, pairs)
    };
    let local = url("http://127.0.0.1:41234");
    let token = "FwoGZXIvYXdzEJr//////////wEaDOb+token/with=padding==";
    let mut cases = Vec::new();
    let (u, q) = with_query(
        object_url(None, "baseten-uploads", "models/abc/a.tgz", "us-east-1").unwrap(),
        &[],
    );
    cases.push(BotocoreCase {
        method: "PUT",
        url: u,
        query: q,
        streamed: Some(9),
        body: Vec::new(),
        extra: Vec::new(),
        credentials: credentials(
            "ASIAEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            token,
        ),
        region: "us-east-1",
    });
    let (u, q) = with_query(
        object_url(None, "baseten-uploads", "models/x y/é+.tgz", "us-west-2").unwrap(),
        &[("uploads", "")],
    );
    cases.push(BotocoreCase {
        method: "POST",
        url: u,
        query: q,
        streamed: None,
        body: Vec::new(),
        extra: Call::create_multipart().headers,
        credentials: credentials("ASIAEXAMPLE", "secret+/=", token),
        region: "us-west-2",
    });
    let (u, q) = with_query(
        object_url(Some(&local), "fake-bucket", "chains/k.tgz", "us-west-2").unwrap(),
        &[("partNumber", "12"), ("uploadId", "2~abc/DEF+ghi=")],
    );
    cases.push(BotocoreCase {
        method: "PUT",
        url: u,
        query: q,
        streamed: Some(70_000),
        body: Vec::new(),
        extra: Vec::new(),
        credentials: credentials("AKIDNOTOKEN", "s", ""),
        region: "us-west-2",
    });
    let (u, q) = with_query(
        object_url(Some(&local), "fake-bucket", "chains/k.tgz", "eu-west-1").unwrap(),
        &[("uploadId", "u-1")],
    );
    cases.push(BotocoreCase {
        method: "POST",
        url: u,
        query: q,
        streamed: None,
        body: complete_xml(&[
            stored_part(1, "\"e1\"", "AAAAAA=="),
            stored_part(2, "\"e2\"", "DUoRhQ=="),
        ])
        .into_bytes(),
        extra: Vec::new(),
        credentials: credentials("ASIAEXAMPLE", "k", token),
        region: "eu-west-1",
    });
    let (u, q) = with_query(
        object_url(None, "my.dotted.bucket", "k", "us-east-1").unwrap(),
        &[("uploadId", "u-1")],
    );
    cases.push(BotocoreCase {
        method: "DELETE",
        url: u,
        query: q,
        streamed: None,
        body: Vec::new(),
        extra: Vec::new(),
        credentials: credentials("ASIAEXAMPLE", "k", token),
        region: "us-east-1",
    });

    let wires: Vec<_> = cases.iter().map(BotocoreCase::wire).collect();
    let input: Vec<serde_json::Value> = cases
        .iter()
        .zip(&wires)
        .map(|(c, (_, extra))| {
            let headers: serde_json::Map<String, serde_json::Value> = extra
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.clone().into()))
                .collect();
            serde_json::json!({
                "method": c.method,
                "url": c.url.as_str(),
                "body": hex::encode(&c.body),
                "headers": headers,
                "trailer": c.streamed.is_some(),
                "key_id": c.credentials.access_key_id,
                "secret": c.credentials.secret_access_key.expose(),
                "token": c.credentials.session_token.expose(),
                "region": c.region,
            })
        })
        .collect();
    let expected = run_botocore(amz_date, &serde_json::Value::Array(input));
    assert_eq!(expected.len(), cases.len());
    for ((case, (sha, extra)), theirs) in cases.iter().zip(&wires).zip(expected) {
        let unsigned = Unsigned {
            method: case.method,
            url: &case.url,
            query: &case.query,
            payload_sha256: sha,
            extra,
        };
        let ours = signed_headers(&unsigned, &case.credentials, case.region, amz_date);
        let ours_auth = &ours.iter().find(|(n, _)| *n == "authorization").unwrap().1;
        assert_eq!(
            theirs["sha256"].as_str(),
            Some(sha.as_str()),
            "{}",
            case.url
        );
        assert_eq!(
            theirs["authorization"].as_str(),
            Some(ours_auth.as_str()),
            "{} {}",
            case.method,
            case.url
        );
    }
}

fn run_botocore(amz_date: &str, input: &serde_json::Value) -> Vec<serde_json::Value> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new("python3")
        .args(["-c", BOTOCORE_SIGNER, amz_date])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is needed for the botocore cross-check; install python3 and botocore");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the botocore signer failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Whole uploads against the fake S3 (SigV4-verifying, bucket in us-west-2).
mod against_fake {
    use std::path::PathBuf;

    use fake_baseten::FakeBaseten;
    use fake_baseten::s3::{Refusal, S3Event};
    use fake_baseten::scenario::{Fault, Scenario};

    use super::*;

    async fn start() -> FakeBaseten {
        FakeBaseten::start(Scenario::default()).await.unwrap()
    }

    /// Small parts so a 12 MiB file is three parts; instant retries.
    fn uploader(fake: &FakeBaseten, concurrency: usize, attempts: u32) -> Uploader {
        Uploader::new(Options {
            endpoint: Some(url(&fake.s3_endpoint())),
            multipart_threshold: 5 * MIB,
            part_size: 5 * MIB,
            concurrency,
            retry: Policy {
                attempts,
                ..Options::default().retry.instant()
            },
            wire: crate::net::Transport::default(),
        })
    }

    fn target(fake: &FakeBaseten) -> Target {
        let issued = fake.s3().issue_credentials("models");
        Target {
            bucket: issued.s3_bucket,
            key: issued.s3_key,
            credentials: credentials(
                &issued.aws_access_key_id,
                &issued.aws_secret_access_key,
                &issued.aws_session_token,
            ),
        }
    }

    fn archive(dir: &tempfile::TempDir, size: usize, seed: u64) -> (PathBuf, Vec<u8>) {
        let mut data = vec![0; size];
        fastrand::Rng::with_seed(seed).fill(&mut data);
        let path = dir.path().join(format!("archive-{seed}.tar"));
        std::fs::write(&path, &data).unwrap();
        (path, data)
    }

    fn stored(fake: &FakeBaseten, key: &str) -> Vec<u8> {
        fake.s3().object_bytes(key).expect("the object is stored")
    }

    fn events_of<'a>(events: &'a [S3Event], operation: &str) -> Vec<&'a S3Event> {
        events.iter().filter(|e| e.operation == operation).collect()
    }

    /// Progress calls, recorded.
    #[derive(Default)]
    struct Progress(Mutex<Vec<(u64, u64)>>);

    impl Progress {
        fn calls(&self) -> Vec<(u64, u64)> {
            self.0.lock().unwrap().clone()
        }
    }

    async fn upload(
        uploader: &Uploader,
        target: &Target,
        path: &Path,
        progress: &Progress,
    ) -> anyhow::Result<UploadReport> {
        let record = |sent, total| progress.0.lock().unwrap().push((sent, total));
        uploader.upload_file(target, path, &record).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn single_put_is_verified_and_stored_after_one_region_probe() {
        let fake = start().await;
        let dir = tempfile::tempdir().unwrap();
        let (path, data) = archive(&dir, 300_000, 1);
        let target = target(&fake);
        let progress = Progress::default();

        let report = upload(&uploader(&fake, 4, 3), &target, &path, &progress)
            .await
            .unwrap();

        assert_eq!((report.bytes, report.parts), (300_000, 1));
        assert_eq!(report.region, "us-west-2");
        assert_eq!(stored(&fake, &target.key), data);
        assert_eq!(progress.calls(), [(0, 300_000), (300_000, 300_000)]);
        // One bodiless request learns the region (signed for us-east-1, as
        // boto3 would), so the data goes once, to the right region.
        let events = fake.s3().events();
        assert_eq!(events.len(), 2, "{events:#?}");
        assert_eq!(events[0].operation, "s3.head_bucket");
        assert_eq!(events[0].signed_region.as_deref(), Some("us-east-1"));
        let put = &events[1];
        assert_eq!(put.operation, "s3.put_object");
        assert_eq!(put.status, 200);
        assert!(put.signature_verified);
        assert_eq!(put.signed_region.as_deref(), Some("us-west-2"));
        assert_eq!(put.payload_mode, "STREAMING-UNSIGNED-PAYLOAD-TRAILER");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn multipart_parts_are_verified_and_reassembled_in_order() {
        let fake = start().await;
        let dir = tempfile::tempdir().unwrap();
        let size = 12 * MIB as usize + 12_345;
        let (path, data) = archive(&dir, size, 2);
        let target = target(&fake);
        let progress = Progress::default();

        let uploader = uploader(&fake, 3, 3);
        let report = upload(&uploader, &target, &path, &progress).await.unwrap();

        assert_eq!((report.bytes, report.parts), (size as u64, 3));
        assert_eq!(stored(&fake, &target.key), data);
        assert_eq!(fake.s3().open_uploads(), 0);
        let events = fake.s3().events();
        let parts = events_of(&events, "s3.upload_part");
        assert_eq!(parts.len(), 3, "{events:#?}");
        for part in &parts {
            assert_eq!(part.status, 200, "{part:?}");
            assert!(part.signature_verified, "{part:?}");
            assert!(part.crc32_verified, "{part:?}");
            assert_eq!(part.payload_mode, "STREAMING-UNSIGNED-PAYLOAD-TRAILER");
        }
        // The fake said `100 Continue` as S3 does: no part waited for it.
        assert!(
            !uploader
                .inner
                .wire
                .waited_in_vain(&url(&fake.s3_endpoint()))
        );
        let completes = events_of(&events, "s3.complete_multipart_upload");
        assert_eq!(completes.len(), 1);
        assert_eq!(completes[0].status, 200);
        // Progress starts at zero, only grows, and ends at the total.
        let calls = progress.calls();
        assert_eq!(calls.first(), Some(&(0, size as u64)));
        assert_eq!(calls.last(), Some(&(size as u64, size as u64)));
        assert_eq!(calls.len(), 4, "{calls:?}");
        assert!(calls.windows(2).all(|w| w[0].0 < w[1].0), "{calls:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_bucket_region_is_learned_once_per_uploader() {
        let fake = start().await;
        let dir = tempfile::tempdir().unwrap();
        let uploader = uploader(&fake, 2, 3);
        let (big, _) = archive(&dir, 6 * MIB as usize, 3);
        let (small, small_data) = archive(&dir, 1000, 4);

        let first = upload(&uploader, &target(&fake), &big, &Progress::default())
            .await
            .unwrap();
        let after_first = fake.s3().events().len();
        let second_target = target(&fake);
        let second = upload(&uploader, &second_target, &small, &Progress::default())
            .await
            .unwrap();

        assert_eq!(
            (first.region.as_str(), second.region.as_str()),
            ("us-west-2", "us-west-2")
        );
        let events = fake.s3().events();
        let wrong_region: Vec<_> = events
            .iter()
            .filter(|e| e.error_code.as_deref() == Some("AuthorizationHeaderMalformed"))
            .collect();
        // Only the first request of the first upload paid for discovery:
        // CreateMultipartUpload, not a part.
        assert_eq!(wrong_region.len(), 1, "{events:#?}");
        assert_eq!(wrong_region[0].operation, "s3.create_multipart_upload");
        let second_events = &events[after_first..];
        assert_eq!(second_events.len(), 1, "{second_events:#?}");
        assert_eq!(second_events[0].status, 200);
        assert_eq!(second_events[0].signed_region.as_deref(), Some("us-west-2"));
        assert_eq!(stored(&fake, &second_target.key), small_data);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_part_failing_twice_with_500_is_retried_from_the_file() {
        let fake = start().await;
        // The second part request, and the retry after it, answer 500.
        fake.add_fault(Fault::status("s3.upload_part", 500).after(1).times(2));
        let dir = tempfile::tempdir().unwrap();
        let size = 12 * MIB as usize;
        let (path, data) = archive(&dir, size, 5);
        let target = target(&fake);

        let report = upload(&uploader(&fake, 1, 3), &target, &path, &Progress::default())
            .await
            .unwrap();

        assert_eq!(report.parts, 3);
        assert_eq!(stored(&fake, &target.key), data);
        let parts: Vec<_> = fake
            .requests()
            .into_iter()
            .filter(|r| r.endpoint == "s3.upload_part")
            .collect();
        let faulted = parts.iter().filter(|r| r.fault.is_some()).count();
        assert_eq!(faulted, 2, "{parts:#?}");
        assert_eq!(parts.len(), 5, "{parts:#?}");
        assert!(parts[1].query.as_deref().unwrap().contains("partNumber=2"));
        assert!(parts[2].query.as_deref().unwrap().contains("partNumber=2"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wrong_secret_fails_with_signature_does_not_match_and_no_secret_shown() {
        let fake = start().await;
        let dir = tempfile::tempdir().unwrap();
        for (size, seed) in [(1000, 6), (11 * MIB as usize, 7)] {
            let (path, _) = archive(&dir, size, seed);
            let mut target = target(&fake);
            let token = target.credentials.session_token.expose().to_owned();
            let wrong = format!("{}x", target.credentials.secret_access_key.expose());
            target.credentials.secret_access_key = Secret::new(wrong.clone());

            let error = upload(&uploader(&fake, 2, 3), &target, &path, &Progress::default())
                .await
                .unwrap_err();

            let shown = format!("{error:#} {error:?}");
            assert!(
                shown.contains("S3 rejected the upload: SignatureDoesNotMatch: "),
                "{shown}"
            );
            assert!(
                !shown.contains(&wrong) && !shown.contains(&token),
                "{shown}"
            );
            assert!(fake.s3().object_files(&target.key).is_none());
        }
        // Not retried: a 403 will not change. Nothing was left open either.
        let events = fake.s3().events();
        let rejected = events
            .iter()
            .filter(|e| e.error_code.as_deref() == Some("SignatureDoesNotMatch"))
            .count();
        assert_eq!(rejected, 2, "{events:#?}");
        assert_eq!(fake.s3().open_uploads(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refusal_at_the_headers_is_s3s_message_and_no_body_byte_reaches_s3() {
        let fake = start().await;
        fake.s3()
            .refuse_at_headers("s3.upload_part", Refusal::AccessDenied, 1);
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = archive(&dir, 11 * MIB as usize, 9);
        let target = target(&fake);

        let error = upload(&uploader(&fake, 1, 3), &target, &path, &Progress::default())
            .await
            .unwrap_err();

        let shown = format!("{error:#}");
        assert!(
            shown.contains(
                "S3 rejected the upload: AccessDenied: Access Denied (HTTP 403 on UploadPart 1)"
            ),
            "{shown}"
        );
        let events = fake.s3().events();
        let parts = events_of(&events, "s3.upload_part");
        assert_eq!(parts.len(), 1, "a 403 is not retried: {events:#?}");
        assert_eq!(
            (parts[0].status, parts[0].body_bytes),
            (403, 0),
            "{:?}",
            parts[0]
        );
        assert_eq!(fake.s3().open_uploads(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_part_that_keeps_failing_aborts_the_upload_and_reports_the_first_error() {
        let fake = start().await;
        fake.add_fault(Fault::status("s3.upload_part", 500).times(0));
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = archive(&dir, 11 * MIB as usize, 8);
        let target = target(&fake);

        let error = upload(&uploader(&fake, 2, 3), &target, &path, &Progress::default())
            .await
            .unwrap_err();

        // The fake fails the part before reading its body, so the client
        // sees either the 500 or the connection it closed; both are retried.
        let shown = format!("{error:#}");
        assert!(
            shown.contains("UploadPart ") && shown.contains("after 3 attempts"),
            "{shown}"
        );
        let events = fake.s3().events();
        let aborts = events_of(&events, "s3.abort_multipart_upload");
        assert_eq!(aborts.len(), 1, "{events:#?}");
        assert!(
            aborts[0].status < 300 && aborts[0].signature_verified,
            "{:?}",
            aborts[0]
        );
        assert!(events_of(&events, "s3.complete_multipart_upload").is_empty());
        assert_eq!(fake.s3().open_uploads(), 0);
        assert!(fake.s3().objects().is_empty());
    }

    /// A truss whose tar is three 5 MiB parts: `big.bin` (12 MiB) spans
    /// them, cut inside its chunks; small files around it.
    fn truss_across_parts() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut big = vec![0u8; 12 * MIB as usize + 700];
        fastrand::Rng::with_seed(21).fill(&mut big);
        std::fs::write(dir.path().join("big.bin"), &big).unwrap();
        for size in [0usize, 100, 1536, 4096] {
            let mut bytes = vec![0u8; size];
            fastrand::Rng::with_seed(size as u64).fill(&mut bytes);
            std::fs::write(dir.path().join(format!("s{size}.bin")), bytes).unwrap();
        }
        std::fs::write(dir.path().join("config.yaml"), "model_name: m\n").unwrap();
        dir
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_part_reset_mid_body_is_read_again_and_s3_stores_the_reference_tar() {
        let fake = start().await;
        let truss = truss_across_parts();
        let layout = Arc::new(crate::archive::layout(truss.path()).unwrap().with_digests());
        let target = target(&fake);
        // The connection of part 2 drops 1 MiB into its body: S3 stores
        // nothing of it, the part is sent again, read again from the files.
        fake.s3().cut_part_body(2, MIB);

        let report = uploader(&fake, 3, 3)
            .upload_archive(&target, Arc::clone(&layout), &|_, _| {})
            .await
            .unwrap();

        let events = fake.s3().events();
        let part2: Vec<_> = events_of(&events, "s3.upload_part")
            .into_iter()
            .filter(|e| e.part_number == Some(2))
            .map(|e| (e.status, e.error_code.clone()))
            .collect();
        assert_eq!(
            part2,
            [(0, Some("ConnectionCut".to_owned())), (200, None)],
            "{events:#?}"
        );
        // Byte for byte the tar the reference writer writes, headers,
        // padding and end blocks included.
        let out = tempfile::tempdir().unwrap();
        let written = crate::archive::write(truss.path(), &out.path().join("t.tar")).unwrap();
        assert!(stored(&fake, &target.key) == std::fs::read(&written.path).unwrap());
        // The digests come from the reads S3 stored, the retried part's once.
        let digests = report.read.digests(&layout).unwrap();
        assert_eq!(digests.len(), written.members.len());
        for (member, digest) in written.members.iter().zip(&digests) {
            let bytes = std::fs::read(truss.path().join(&member.path)).unwrap();
            assert_eq!(
                *digest,
                Some(*blake3::hash(&bytes).as_bytes()),
                "{}",
                member.path
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_part_whose_body_is_out_gets_its_answer_before_the_abort_so_none_lands_after_it() {
        let fake = start().await;
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = archive(&dir, 15 * MIB as usize, 9);
        let target = target(&fake);
        // Part 2's whole body arrives and S3 stores it only 3 s later (or
        // after the upload's first listing, were one sent first); part 3,
        // sent once part 1 is stored, is cut mid-body and not retried.
        fake.s3().land_part_late(2, Duration::from_secs(3));
        fake.s3().cut_part_body(3, MIB);

        let error = upload(&uploader(&fake, 2, 1), &target, &path, &Progress::default())
            .await
            .unwrap_err();

        assert!(format!("{error:#}").contains("UploadPart 3"), "{error:#}");
        let events = fake.s3().events();
        let order: Vec<(String, Option<u32>, u16)> = events
            .iter()
            .filter(|e| e.operation != "s3.head_bucket")
            .map(|e| (e.operation.clone(), e.part_number, e.status))
            .collect();
        let at = |op: &str, part: Option<u32>| {
            order
                .iter()
                .position(|(o, p, _)| o == op && *p == part)
                .unwrap_or_else(|| panic!("no {op} {part:?}: {order:#?}"))
        };
        // Part 2 was answered (stored) before the one abort, which removed it.
        assert!(
            at("s3.upload_part", Some(2)) < at("s3.abort_multipart_upload", None),
            "{order:#?}"
        );
        assert_eq!(order[at("s3.upload_part", Some(2))].2, 200, "{order:#?}");
        assert_eq!(events_of(&events, "s3.abort_multipart_upload").len(), 1);
        assert_eq!(fake.s3().open_uploads(), 0, "no part remains: {order:#?}");
    }
}
