//! The fake S3's verifier checked against botocore, the signer Python truss
//! uploads with: requests botocore signs must pass, and the same requests
//! with one byte, header, secret, token or region changed must not. Then
//! boto3's own `upload_file` (truss's upload call) runs against the fake.
//!
//! Needs `python3` with `botocore` and `boto3` importable; fails loudly
//! (never skips) when they are not, because CI installs them.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use fake_baseten::s3::{FakeS3, S3Config, S3Event};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

const BUCKET: &str = "fake-truss-uploads";
/// The script's exit code for "botocore/boto3 cannot be imported".
const MISSING_MODULE_EXIT: i32 = 3;

/// Runs a Python script with JSON on stdin and parses JSON from stdout.
/// The environment is cleared of `AWS_*` and pointed at no config files, so
/// a developer's own AWS setup cannot change what botocore does.
fn run_python(script: &str, input: &Value, scratch: &Path) -> Value {
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(script);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AWS_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("AWS_CONFIG_FILE", scratch.join("no-aws-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            scratch.join("no-aws-credentials"),
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        panic!("python3 could not be started ({e}); the botocore cross-check needs python3 with botocore and boto3 (pip install boto3)")
    });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(MISSING_MODULE_EXIT) {
        panic!(
            "{stderr}python3 cannot import botocore/boto3: install them (pip install boto3); CI does"
        );
    }
    assert!(out.status.success(), "python3 failed: {stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("python3 printed no JSON ({e}): {stderr}"))
}

const SIGN_SCRIPT: &str = r#"
import base64, hashlib, json, sys
from urllib.parse import quote, urlsplit
try:
    from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.config import Config
    from botocore.credentials import Credentials
except ImportError as err:
    sys.stderr.write(f"botocore is not importable: {err}\n")
    sys.exit(3)

p = json.load(sys.stdin)
bucket, key, region = p["bucket"], p["key"], p["region"]
body = base64.b64decode(p["body_b64"])

def text(v):
    return v if isinstance(v, str) else v.decode()

def emit(req, data):
    u = urlsplit(req.url)
    return {"method": req.method, "host": u.netloc, "path": u.path, "query": u.query,
            "headers": [[k, text(v)] for k, v in req.headers.items()],
            "body_b64": base64.b64encode(data).decode()}

def header_form(method, url, data, headers=None, unsigned=False, creds=None, signing_region=None):
    req = AWSRequest(method=method, url=url, data=data, headers=headers or {})
    if unsigned:
        req.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    S3SigV4Auth(creds, "s3", signing_region).add_auth(req)
    return emit(req, data)

def query_form(method, url, data, creds=None, signing_region=None):
    req = AWSRequest(method=method, url=url)
    S3SigV4QueryAuth(creds, "s3", signing_region, expires=900).add_auth(req)
    return emit(req, data)

k = quote(key, safe="/~")
odd = quote("models/a b$+=~\u00e9(1)&.tgz", safe="/~")
vhost = f"http://{bucket}.s3.{region}.amazonaws.com"
tls = f"https://{bucket}.s3.amazonaws.com"
path_style = f"http://s3.{region}.amazonaws.com/{bucket}"
md5 = base64.b64encode(hashlib.md5(body).digest()).decode()

cases = [
    ("put_sha256", lambda **kw: header_form("PUT", f"{vhost}/{k}", body,
        {"Content-Type": "application/x-tar", "x-amz-meta-note": "two   spaces"}, **kw)),
    ("put_unsigned_payload", lambda **kw: header_form("PUT", f"{tls}/{k}", body,
        {"Content-MD5": md5}, unsigned=True, **kw)),
    ("put_path_style", lambda **kw: header_form("PUT", f"{path_style}/{k}", body, **kw)),
    ("presigned_put", lambda **kw: query_form("PUT", f"{vhost}/{k}", body, **kw)),
    ("presigned_get", lambda **kw: query_form("GET",
        f"{vhost}/{k}?response-content-type=text%2Fplain", b"", **kw)),
    ("create_multipart", lambda **kw: header_form("POST", f"{vhost}/{k}?uploads", b"", **kw)),
    ("odd_key", lambda **kw: header_form("PUT", f"{vhost}/{odd}", body, **kw)),
]
# The credentials are random: a tampered one must differ whatever they are
# ("x" + secret[1:] was the secret itself one run in 64).
def changed_at(s, i):
    chars = list(s)
    chars[i] = "y" if chars[i] == "x" else "x"
    return "".join(chars)

good = Credentials(p["access_key"], p["secret"], p["token"])
variants = [
    ("good", good, region),
    ("wrong_secret", Credentials(p["access_key"], changed_at(p["secret"], 0), p["token"]), region),
    ("us_east_1", good, "us-east-1"),
    ("wrong_token", Credentials(p["access_key"], p["secret"], changed_at(p["token"], -3)), region),
]
json.dump([{"case": name, "variant": v, "request": make(creds=c, signing_region=r)}
           for name, make in cases for v, c, r in variants], sys.stdout)
"#;

/// One request as botocore signed it, replayable through `handle`.
#[derive(Clone, Debug)]
struct Signed {
    method: String,
    host: String,
    path: String,
    query: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Signed {
    fn from_json(v: &Value) -> Self {
        let s = |name: &str| v[name].as_str().unwrap().to_owned();
        Self {
            method: s("method"),
            host: s("host"),
            path: s("path"),
            query: s("query"),
            headers: v["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|pair| {
                    (
                        pair[0].as_str().unwrap().to_owned(),
                        pair[1].as_str().unwrap().to_owned(),
                    )
                })
                .collect(),
            body: BASE64.decode(s("body_b64")).unwrap(),
        }
    }

    fn request(&self) -> Request {
        let uri = if self.query.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, self.query)
        };
        let mut req = Request::builder()
            .method(self.method.parse::<Method>().unwrap())
            .uri(uri)
            .body(Body::from(self.body.clone()))
            .unwrap();
        let headers = req.headers_mut();
        headers.insert("host", HeaderValue::from_str(&self.host).unwrap());
        headers.insert("content-length", HeaderValue::from(self.body.len()));
        for (name, value) in &self.headers {
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        req
    }

    fn is_presigned(&self) -> bool {
        self.query.contains("X-Amz-Signature=")
    }

    fn set_header(&mut self, name: &str, value: String) {
        let slot = self
            .headers
            .iter_mut()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .unwrap_or_else(|| panic!("botocore did not send {name}"));
        slot.1 = value;
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

async fn judge(fake: &FakeS3, signed: &Signed) -> (StatusCode, Option<String>, S3Event, Vec<u8>) {
    let response = fake.handle(signed.request()).await;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    let xml = String::from_utf8_lossy(&body).into_owned();
    let code = xml
        .split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(code, _)| code.to_owned());
    (status, code, fake.events().pop().unwrap(), body)
}

/// What S3 answers each variant of each case.
fn expected(case: &str, variant: &str, presigned: bool) -> (StatusCode, Option<&'static str>) {
    match variant {
        "wrong_secret" => (StatusCode::FORBIDDEN, Some("SignatureDoesNotMatch")),
        "us_east_1" if presigned => (
            StatusCode::BAD_REQUEST,
            Some("AuthorizationQueryParametersError"),
        ),
        "us_east_1" => (
            StatusCode::BAD_REQUEST,
            Some("AuthorizationHeaderMalformed"),
        ),
        "wrong_token" => (StatusCode::BAD_REQUEST, Some("InvalidToken")),
        _ if case == "odd_key" => (StatusCode::FORBIDDEN, Some("AccessDenied")),
        _ => (StatusCode::OK, None),
    }
}

#[tokio::test]
async fn botocore_signed_requests_pass_and_tampered_ones_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeS3::new(S3Config::new(BUCKET, dir.path().join("store")));
    let creds = fake.issue_credentials("models");
    let body = b"a tar stream, signed by botocore\n".repeat(64);
    let out = run_python(
        SIGN_SCRIPT,
        &json!({
            "bucket": BUCKET,
            "key": creds.s3_key,
            "region": fake.region(),
            "access_key": creds.aws_access_key_id,
            "secret": creds.aws_secret_access_key,
            "token": creds.aws_session_token,
            "body_b64": BASE64.encode(&body),
        }),
        dir.path(),
    );
    let entries = out.as_array().unwrap();
    assert_eq!(entries.len(), 7 * 4);

    let mut goods = Vec::new();
    for entry in entries {
        let case = entry["case"].as_str().unwrap();
        let variant = entry["variant"].as_str().unwrap();
        let signed = Signed::from_json(&entry["request"]);
        let (status, code, event, reply) = judge(&fake, &signed).await;
        let want = expected(case, variant, signed.is_presigned());
        assert_eq!(
            (status, code.as_deref()),
            want,
            "{case}/{variant}: {}",
            String::from_utf8_lossy(&reply)
        );
        // A request signed correctly for us-east-1 is answered with the
        // region, but its signature (for its own scope) still verifies.
        assert_eq!(
            event.signature_verified,
            variant == "good" || variant == "us_east_1",
            "{case}/{variant}"
        );
        if variant == "good" {
            goods.push((case.to_owned(), signed));
        }
        if case == "presigned_get" && variant == "good" {
            assert_eq!(reply, body, "the presigned GET reads back the PUT's bytes");
        }
    }
    let create = goods.iter().find(|(c, _)| c == "create_multipart").unwrap();
    assert!(create.1.query.starts_with("uploads"), "{}", create.1.query);

    // Each accepted request, changed in one place, must be refused.
    for (case, signed) in &goods {
        let mut host = signed.clone();
        host.host = if signed.host.starts_with(BUCKET) {
            format!("{BUCKET}.s3.dualstack.us-west-2.amazonaws.com")
        } else {
            "s3.amazonaws.com".to_owned()
        };
        let (_, code, ..) = judge(&fake, &host).await;
        assert_eq!(
            code.as_deref(),
            Some("SignatureDoesNotMatch"),
            "{case}: host changed"
        );

        let mut path = signed.clone();
        path.path = format!("{}x", signed.path);
        let (_, code, ..) = judge(&fake, &path).await;
        assert_eq!(
            code.as_deref(),
            Some("SignatureDoesNotMatch"),
            "{case}: path changed"
        );

        let mut signed_field = signed.clone();
        if signed.is_presigned() {
            signed_field.query = signed
                .query
                .replace("X-Amz-Expires=900", "X-Amz-Expires=901");
            assert_ne!(signed_field.query, signed.query);
        } else {
            let date = signed.header("X-Amz-Date").unwrap();
            let bumped = fake_baseten::sigv4::parse_amz_date(date).unwrap() + 1;
            signed_field.set_header("X-Amz-Date", fake_baseten::sigv4::format_amz_date(bumped));
        }
        let (_, code, ..) = judge(&fake, &signed_field).await;
        assert_eq!(
            code.as_deref(),
            Some("SignatureDoesNotMatch"),
            "{case}: signed field changed"
        );

        if !signed.body.is_empty() {
            let mut byte = signed.clone();
            byte.body[10] ^= 0x20;
            let (status, code, ..) = judge(&fake, &byte).await;
            let want = match case.as_str() {
                // Nothing commits a presigned PUT to its body: S3 takes it.
                "presigned_put" => None,
                "put_unsigned_payload" => Some("BadDigest"),
                "odd_key" => Some("AccessDenied"),
                _ => Some("XAmzContentSHA256Mismatch"),
            };
            assert_eq!(
                code.as_deref(),
                want,
                "{case}: body byte changed ({status})"
            );
        }
    }
    let odd = goods.iter().find(|(c, _)| c == "odd_key").unwrap();
    assert!(
        odd.1.path.contains("%24") && odd.1.path.contains("%20"),
        "{}",
        odd.1.path
    );
}

const UPLOAD_SCRIPT: &str = r#"
import hashlib, http.client, json, os, sys, threading
from urllib.parse import urlsplit
try:
    import boto3, botocore
    from boto3.s3.transfer import TransferConfig
    from botocore.awsrequest import AWSResponse
except ImportError as err:
    sys.stderr.write(f"boto3/botocore is not importable: {err}\n")
    sys.exit(3)

p = json.load(sys.stdin)
lock = threading.Lock()
seen = []

class Raw:
    def __init__(self, data):
        self.data = data
    def stream(self, *args, **kwargs):
        if self.data:
            yield self.data
    def read(self, *args, **kwargs):
        data, self.data = self.data, b""
        return data

def forward(request, **kwargs):
    # botocore built this request for https://{bucket}.s3…amazonaws.com;
    # send the very same bytes to the fake over loopback.
    u = urlsplit(request.url)
    body = request.body
    if body is None:
        data = b""
    elif isinstance(body, (bytes, bytearray)):
        data = bytes(body)
    elif isinstance(body, str):
        data = body.encode()
    else:
        data = body.read()
    headers = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
    headers["Host"] = u.netloc
    # http.client cannot wait for "100 Continue" and would send the body
    # regardless; claiming Expect would let the server answer early and
    # reset the connection under the body. The header is not signed.
    headers = {k: v for k, v in headers.items() if k.lower() != "expect"}
    target = u.path + ("?" + u.query if u.query else "")
    conn = http.client.HTTPConnection("127.0.0.1", p["port"], timeout=120)
    if headers.get("Transfer-Encoding", "").lower() == "chunked":
        conn.request(request.method, target, body=iter([data]), headers=headers, encode_chunked=True)
    else:
        conn.request(request.method, target, body=data, headers=headers)
    resp = conn.getresponse()
    content = resp.read()
    conn.close()
    with lock:
        seen.append({"method": request.method, "url": request.url, "status": resp.status})
    return AWSResponse(request.url, resp.status, dict(resp.getheaders()), Raw(content))

def upload(creds, path):
    # As truss does: a resource with only the three credentials, no region,
    # no endpoint, then upload_file with 10 threads.
    s3 = boto3.resource("s3", aws_access_key_id=creds["aws_access_key_id"],
                        aws_secret_access_key=creds["aws_secret_access_key"],
                        aws_session_token=creds["aws_session_token"])
    s3.meta.client.meta.events.register("before-send.s3", forward)
    s3.Object(creds["s3_bucket"], creds["s3_key"]).upload_file(
        path, Config=TransferConfig(max_concurrency=10, use_threads=True))

result = {"botocore": botocore.__version__}
for name, size in [("small", 3000), ("large", 20 * 1024 * 1024 + 12345)]:
    path = os.path.join(p["dir"], name + ".tgz")
    data = os.urandom(size)
    with open(path, "wb") as f:
        f.write(data)
    upload(p[name], path)
    result[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": size}
result["requests"] = seen
json.dump(result, sys.stdout)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boto3_upload_file_like_truss_lands_both_objects() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeS3::new(S3Config::new(BUCKET, dir.path().join("store"))));
    let small = fake.issue_credentials("models");
    let large = fake.issue_credentials("models");
    let served = Arc::clone(&fake);
    let app = axum::Router::new().fallback(move |req: Request| {
        let fake = Arc::clone(&served);
        async move { fake.handle(req).await }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let input = json!({ "port": port, "dir": dir.path(), "small": small, "large": large });
    let scratch = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || run_python(UPLOAD_SCRIPT, &input, &scratch))
        .await
        .unwrap();
    server.abort();

    for (name, creds) in [("small", &small), ("large", &large)] {
        let stored = fake
            .object_bytes(&creds.s3_key)
            .unwrap_or_else(|| panic!("{name} not stored; requests: {}", out["requests"]));
        assert_eq!(
            stored.len() as u64,
            out[name]["size"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            hex::encode(Sha256::digest(&stored)),
            out[name]["sha256"].as_str().unwrap(),
            "{name}"
        );
    }
    assert!(
        fake.object_etag(&large.s3_key).unwrap().ends_with("-3\""),
        "8 MiB parts: 3 of them"
    );
    assert_eq!(fake.open_uploads(), 0);

    let events = fake.events();
    // Each fresh client signs for us-east-1 first and must be told the region.
    let redirects: Vec<&S3Event> = events
        .iter()
        .filter(|e| e.error_code.as_deref() == Some("AuthorizationHeaderMalformed"))
        .collect();
    assert_eq!(redirects.len(), 2, "{events:#?}");
    assert!(
        redirects
            .iter()
            .all(|e| e.signed_region.as_deref() == Some("us-east-1"))
    );
    let accepted: Vec<&S3Event> = events.iter().filter(|e| e.status == 200).collect();
    assert!(
        accepted
            .iter()
            .all(|e| e.signature_verified && e.signed_region.as_deref() == Some("us-west-2"))
    );
    let ops: Vec<&str> = accepted.iter().map(|e| e.operation.as_str()).collect();
    assert_eq!(
        ops.iter().filter(|o| **o == "s3.put_object").count(),
        1,
        "{ops:?}"
    );
    assert_eq!(
        ops.iter()
            .filter(|o| **o == "s3.create_multipart_upload")
            .count(),
        1,
        "{ops:?}"
    );
    assert_eq!(
        ops.iter().filter(|o| **o == "s3.upload_part").count(),
        3,
        "{ops:?}"
    );
    assert_eq!(
        ops.iter()
            .filter(|o| **o == "s3.complete_multipart_upload")
            .count(),
        1,
        "{ops:?}"
    );
    assert_eq!(
        events.len(),
        accepted.len() + 2,
        "nothing else failed: {events:#?}"
    );

    // boto3 ≥ 1.36 sends data as aws-chunked with a CRC32 trailer over TLS.
    let version: Vec<u32> = out["botocore"]
        .as_str()
        .unwrap()
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    if version.as_slice() >= [1, 36].as_slice() {
        for e in accepted
            .iter()
            .filter(|e| matches!(e.operation.as_str(), "s3.put_object" | "s3.upload_part"))
        {
            assert_eq!(
                e.payload_mode, "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                "{e:?}"
            );
        }
    }
}
