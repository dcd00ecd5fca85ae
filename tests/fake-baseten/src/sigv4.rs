//! AWS Signature Version 4 as S3 checks it, written from the published spec.
//!
//! Pure functions only: parsing the two auth forms (Authorization header and
//! presigned query), building the canonical request and string to sign,
//! deriving the signing key, and decoding `aws-chunked` bodies (with or
//! without per-chunk signatures). The fake S3 decides what to do with the
//! results; signers here exist so tests (and only tests) can build requests.
//!
//! S3 differs from other services in two ways that matter here: the path is
//! URI-encoded once (never twice) and is not normalised (`//` and `.` stay),
//! and the payload hash is always the `x-amz-content-sha256` value.

use std::ops::Range;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";
pub const SERVICE: &str = "s3";
pub const TERMINATOR: &str = "aws4_request";
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
pub const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";
pub const STREAMING_UNSIGNED_TRAILER: &str = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";
pub const STREAMING_SIGNED: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
pub const STREAMING_SIGNED_TRAILER: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
/// S3 refuses presigned URLs valid for longer than seven days.
pub const MAX_PRESIGN_EXPIRES_SECS: u64 = 604_800;
/// S3 tolerates this much difference between the signing clock and its own.
pub const MAX_CLOCK_SKEW_SECS: u64 = 15 * 60;
/// A chunk header or trailer line longer than this is not a real client.
const MAX_CHUNK_LINE_BYTES: usize = 4096;

type HmacSha256 = Hmac<Sha256>;

/// What the client promised about the body, from `x-amz-content-sha256`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PayloadMode {
    /// Lowercase hex SHA-256 of the whole body.
    Sha256(String),
    Unsigned,
    /// aws-chunked, no chunk signatures, checksum in a trailer (boto3 ≥ 1.36).
    StreamingUnsignedTrailer,
    /// aws-chunked with chained chunk signatures.
    StreamingSigned,
    /// aws-chunked with chunk signatures and a signed trailer.
    StreamingSignedTrailer,
}

impl PayloadMode {
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            UNSIGNED_PAYLOAD => Some(Self::Unsigned),
            STREAMING_UNSIGNED_TRAILER => Some(Self::StreamingUnsignedTrailer),
            STREAMING_SIGNED => Some(Self::StreamingSigned),
            STREAMING_SIGNED_TRAILER => Some(Self::StreamingSignedTrailer),
            v if is_lower_hex_sha256(v) => Some(Self::Sha256(v.to_owned())),
            _ => None,
        }
    }

    /// The value that goes into the canonical request.
    pub fn claimed(&self) -> &str {
        match self {
            Self::Sha256(h) => h,
            Self::Unsigned => UNSIGNED_PAYLOAD,
            Self::StreamingUnsignedTrailer => STREAMING_UNSIGNED_TRAILER,
            Self::StreamingSigned => STREAMING_SIGNED,
            Self::StreamingSignedTrailer => STREAMING_SIGNED_TRAILER,
        }
    }

    /// A short name for logs: `sha256` for a real hash, else the literal.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Sha256(_) => "sha256",
            Self::Unsigned => UNSIGNED_PAYLOAD,
            Self::StreamingUnsignedTrailer => STREAMING_UNSIGNED_TRAILER,
            Self::StreamingSigned => STREAMING_SIGNED,
            Self::StreamingSignedTrailer => STREAMING_SIGNED_TRAILER,
        }
    }

    pub fn is_aws_chunked(&self) -> bool {
        matches!(
            self,
            Self::StreamingUnsignedTrailer | Self::StreamingSigned | Self::StreamingSignedTrailer
        )
    }
}

fn is_lower_hex_sha256(v: &str) -> bool {
    v.len() == 64
        && v.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `AKID/20130524/us-east-1/s3/aws4_request`, split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    pub access_key_id: String,
    pub date: String,
    pub region: String,
    pub service: String,
    pub terminator: String,
}

impl Credential {
    pub fn parse(value: &str) -> Option<Self> {
        let parts: Vec<&str> = value.split('/').collect();
        let [akid, date, region, service, terminator] = parts.as_slice() else {
            return None;
        };
        if akid.is_empty() || region.is_empty() || service.is_empty() {
            return None;
        }
        if date.len() != 8 || !date.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Self {
            access_key_id: (*akid).to_owned(),
            date: (*date).to_owned(),
            region: (*region).to_owned(),
            service: (*service).to_owned(),
            terminator: (*terminator).to_owned(),
        })
    }

    /// The credential scope of the string to sign: `date/region/service/aws4_request`.
    pub fn scope(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.date, self.region, self.service, self.terminator
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthForm {
    /// `Authorization: AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`
    Header,
    /// `?X-Amz-Algorithm=…&X-Amz-Credential=…&…&X-Amz-Signature=…`
    Presigned,
}

/// The signature claims of one request, before any of them is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedAuth {
    pub form: AuthForm,
    pub credential: Credential,
    pub signed_headers: Vec<String>,
    pub signature: String,
    pub amz_date: String,
    /// Presigned only.
    pub expires_secs: Option<u64>,
    pub security_token: Option<String>,
}

/// Why a request's auth could not even be parsed; S3 answers each differently.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthError {
    /// Neither form present: an anonymous request.
    Missing,
    /// Both an Authorization header and presigned query parameters.
    BothForms,
    /// An algorithm other than SigV4 (SigV2 `AWS …`, or a typo).
    UnsupportedAlgorithm(String),
    /// The Authorization header or query parameters are malformed.
    Malformed {
        form: AuthForm,
        reason: String,
    },
    /// Header form without `x-amz-date`.
    MissingDate,
    /// Header form without `x-amz-content-sha256`.
    MissingContentSha256,
    InvalidContentSha256(String),
}

/// Reads the auth claims from either form. The query is the raw (still
/// percent-encoded) query string.
pub fn parse_auth(headers: &HeaderMap, raw_query: &str) -> Result<SignedAuth, AuthError> {
    let query = decoded_query_pairs(raw_query);
    let query_get = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let header = headers.get("authorization").map(header_text);
    let presigned =
        query_get("X-Amz-Algorithm").is_some() || query_get("X-Amz-Signature").is_some();
    match (header, presigned) {
        (None, false) => Err(AuthError::Missing),
        (Some(_), true) => Err(AuthError::BothForms),
        (Some(value), false) => parse_authorization_header(&value, headers),
        (None, true) => parse_presigned(&query_get, headers),
    }
}

fn parse_authorization_header(value: &str, headers: &HeaderMap) -> Result<SignedAuth, AuthError> {
    let malformed = |reason: &str| AuthError::Malformed {
        form: AuthForm::Header,
        reason: reason.to_owned(),
    };
    let value = value.trim();
    let (algorithm, rest) = value.split_once(' ').unwrap_or((value, ""));
    if algorithm != ALGORITHM {
        return Err(AuthError::UnsupportedAlgorithm(algorithm.to_owned()));
    }
    let mut credential = None;
    let mut signed_headers = None;
    let mut signature = None;
    for component in rest.split(',') {
        let component = component.trim();
        if component.is_empty() {
            continue;
        }
        let Some((name, val)) = component.split_once('=') else {
            return Err(malformed(&format!(
                "the component '{component}' has no '='"
            )));
        };
        match name.trim() {
            "Credential" => credential = Some(val.trim().to_owned()),
            "SignedHeaders" => signed_headers = Some(val.trim().to_owned()),
            "Signature" => signature = Some(val.trim().to_owned()),
            other => return Err(malformed(&format!("unknown component '{other}'"))),
        }
    }
    let credential = credential.ok_or_else(|| malformed("missing Credential"))?;
    let credential = Credential::parse(&credential).ok_or_else(|| {
        malformed(&format!(
            "the Credential '{credential}' is not AKID/date/region/service/aws4_request"
        ))
    })?;
    let signed_headers =
        parse_signed_headers(&signed_headers.ok_or_else(|| malformed("missing SignedHeaders"))?)
            .ok_or_else(|| {
                malformed("SignedHeaders is empty or not lowercase, sorted and ';'-separated")
            })?;
    let signature = signature.ok_or_else(|| malformed("missing Signature"))?;
    let amz_date = headers
        .get("x-amz-date")
        .map(header_text)
        .ok_or(AuthError::MissingDate)?;
    Ok(SignedAuth {
        form: AuthForm::Header,
        credential,
        signed_headers,
        signature,
        amz_date,
        expires_secs: None,
        security_token: headers.get("x-amz-security-token").map(header_text),
    })
}

fn parse_presigned(
    get: &dyn Fn(&str) -> Option<String>,
    headers: &HeaderMap,
) -> Result<SignedAuth, AuthError> {
    let malformed = |reason: &str| AuthError::Malformed {
        form: AuthForm::Presigned,
        reason: reason.to_owned(),
    };
    let required = "Query-string authentication version 4 requires the X-Amz-Algorithm, \
                    X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, \
                    and X-Amz-Expires parameters.";
    let algorithm = get("X-Amz-Algorithm").ok_or_else(|| malformed(required))?;
    if algorithm != ALGORITHM {
        return Err(AuthError::UnsupportedAlgorithm(algorithm));
    }
    let credential = get("X-Amz-Credential").ok_or_else(|| malformed(required))?;
    let signature = get("X-Amz-Signature").ok_or_else(|| malformed(required))?;
    let amz_date = get("X-Amz-Date").ok_or_else(|| malformed(required))?;
    let signed_headers = get("X-Amz-SignedHeaders").ok_or_else(|| malformed(required))?;
    let expires = get("X-Amz-Expires").ok_or_else(|| malformed(required))?;
    let credential = Credential::parse(&credential).ok_or_else(|| {
        malformed(&format!(
            "Error parsing the X-Amz-Credential parameter; the Credential '{credential}' is malformed"
        ))
    })?;
    let signed_headers = parse_signed_headers(&signed_headers).ok_or_else(|| {
        malformed("X-Amz-SignedHeaders is empty or not lowercase, sorted and ';'-separated")
    })?;
    let expires_secs: u64 = expires
        .parse()
        .map_err(|_| malformed("X-Amz-Expires should be a number"))?;
    if expires_secs == 0 {
        return Err(malformed("X-Amz-Expires must be non-negative"));
    }
    if expires_secs > MAX_PRESIGN_EXPIRES_SECS {
        return Err(malformed(
            "X-Amz-Expires must be less than a week (in seconds) that is 604800",
        ));
    }
    Ok(SignedAuth {
        form: AuthForm::Presigned,
        credential,
        signed_headers,
        signature,
        amz_date,
        expires_secs: Some(expires_secs),
        security_token: get("X-Amz-Security-Token")
            .or_else(|| headers.get("x-amz-security-token").map(header_text)),
    })
}

/// `host;x-amz-date` → `["host", "x-amz-date"]`; `None` unless lowercase and sorted.
pub fn parse_signed_headers(value: &str) -> Option<Vec<String>> {
    let names: Vec<String> = value.split(';').map(str::to_owned).collect();
    let well_formed = names
        .iter()
        .all(|n| !n.is_empty() && !n.bytes().any(|b| b.is_ascii_uppercase() || b == b' '));
    let sorted = names.windows(2).all(|w| w[0] < w[1]);
    (well_formed && sorted).then_some(names)
}

/// The payload mode the canonical request uses. Presigned URLs default to
/// `UNSIGNED-PAYLOAD` because their signer never sees the body.
pub fn payload_mode(form: AuthForm, headers: &HeaderMap) -> Result<PayloadMode, AuthError> {
    match (headers.get("x-amz-content-sha256").map(header_text), form) {
        (None, AuthForm::Presigned) => Ok(PayloadMode::Unsigned),
        (None, AuthForm::Header) => Err(AuthError::MissingContentSha256),
        (Some(v), _) => PayloadMode::parse(&v).ok_or(AuthError::InvalidContentSha256(v)),
    }
}

/// Everything of a request that its signature covers.
#[derive(Clone, Copy, Debug)]
pub struct RequestView<'a> {
    pub method: &'a str,
    /// As sent: still percent-encoded.
    pub raw_path: &'a str,
    /// As sent: still percent-encoded, without `?`.
    pub raw_query: &'a str,
    pub headers: &'a HeaderMap,
}

/// The inputs of a signature apart from the request itself.
#[derive(Clone, Copy, Debug)]
pub struct SigningParams<'a> {
    pub secret: &'a str,
    pub amz_date: &'a str,
    pub region: &'a str,
    pub service: &'a str,
    pub signed_headers: &'a [String],
    pub payload_hash: &'a str,
    pub form: AuthForm,
}

/// The intermediate strings, kept because S3 echoes them in
/// `SignatureDoesNotMatch` and they are what one compares when debugging.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Computed {
    pub canonical_request: String,
    pub string_to_sign: String,
    pub signature: String,
    pub signing_key: [u8; 32],
    pub scope: String,
}

pub fn compute(req: &RequestView<'_>, p: &SigningParams<'_>) -> Computed {
    let date = p.amz_date.get(..8).unwrap_or(p.amz_date);
    let scope = format!("{date}/{}/{}/{TERMINATOR}", p.region, p.service);
    let canonical = canonical_request(req, p.signed_headers, p.payload_hash, p.form);
    let sts = string_to_sign(p.amz_date, &scope, &canonical);
    let key = signing_key(p.secret, date, p.region, p.service);
    Computed {
        signature: hmac_hex(&key, sts.as_bytes()),
        canonical_request: canonical,
        string_to_sign: sts,
        signing_key: key,
        scope,
    }
}

pub fn canonical_request(
    req: &RequestView<'_>,
    signed_headers: &[String],
    payload_hash: &str,
    form: AuthForm,
) -> String {
    format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        req.method,
        canonical_uri(req.raw_path),
        canonical_query(req.raw_query, form == AuthForm::Presigned),
        canonical_headers(req.headers, signed_headers),
        signed_headers.join(";"),
        payload_hash
    )
}

pub fn string_to_sign(amz_date: &str, scope: &str, canonical_request: &str) -> String {
    format!(
        "{ALGORITHM}\n{amz_date}\n{scope}\n{}",
        hex::encode(Sha256::digest(canonical_request.as_bytes()))
    )
}

pub fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> [u8; 32] {
    let k_date = hmac(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac(&k_date, region.as_bytes());
    let k_service = hmac(&k_region, service.as_bytes());
    hmac(&k_service, TERMINATOR.as_bytes())
}

pub fn hmac(key: &[u8], msg: &[u8]) -> [u8; 32] {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(msg);
    mac.finalize().into_bytes().into()
}

pub fn hmac_hex(key: &[u8], msg: &[u8]) -> String {
    hex::encode(hmac(key, msg))
}

/// S3's canonical URI: the decoded path encoded once, `/` kept, nothing
/// normalised.
pub fn canonical_uri(raw_path: &str) -> String {
    if raw_path.is_empty() {
        return "/".to_owned();
    }
    uri_encode(&percent_decode(raw_path), false)
}

/// Pairs decoded, re-encoded the canonical way, sorted by name then value.
/// `X-Amz-Signature` is left out of presigned requests (it is the output).
pub fn canonical_query(raw_query: &str, presigned: bool) -> String {
    let mut pairs: Vec<(String, String)> = raw_query
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (
                uri_encode(&percent_decode(k), true),
                uri_encode(&percent_decode(v), true),
            )
        })
        .filter(|(k, _)| !(presigned && k == "X-Amz-Signature"))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// One `name:value\n` line per signed header. Repeated headers are joined
/// with `,`; a signed header the request lacks gets an empty value, which
/// simply makes the signature not match.
pub fn canonical_headers(headers: &HeaderMap, signed_headers: &[String]) -> String {
    let mut out = String::new();
    for name in signed_headers {
        let values: Vec<String> = headers
            .get_all(name.as_str())
            .iter()
            .map(|v| trim_all(&String::from_utf8_lossy(v.as_bytes())))
            .collect();
        out.push_str(name);
        out.push(':');
        out.push_str(&values.join(","));
        out.push('\n');
    }
    out
}

/// Trims and collapses runs of spaces (the spec's `Trimall`).
pub fn trim_all(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// RFC 3986 encoding as SigV4 wants it: unreserved bytes kept, everything
/// else `%XX` in uppercase hex; `/` kept only in paths.
pub fn uri_encode(input: &[u8], encode_slash: bool) -> String {
    let mut out = String::with_capacity(input.len());
    for &b in input {
        let unreserved = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
        if unreserved || (b == b'/' && !encode_slash) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX`; a `%` not followed by two hex digits stays literal, and
/// `+` stays `+` (S3 does not treat it as a space).
pub fn percent_decode(input: &str) -> Vec<u8> {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex_val(bytes[i + 1]), hex_val(bytes[i + 2]))
        {
            out.push(h << 4 | l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The query as decoded `(name, value)` pairs, in order.
pub fn decoded_query_pairs(raw_query: &str) -> Vec<(String, String)> {
    raw_query
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (
                String::from_utf8_lossy(&percent_decode(k)).into_owned(),
                String::from_utf8_lossy(&percent_decode(v)).into_owned(),
            )
        })
        .collect()
}

fn header_text(v: &HeaderValue) -> String {
    String::from_utf8_lossy(v.as_bytes()).trim().to_owned()
}

/// `20130524T000000Z` → seconds since the Unix epoch.
pub fn parse_amz_date(value: &str) -> Option<u64> {
    let b = value.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let digits = |r: Range<usize>| -> Option<u64> {
        let s = value.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (year, month, day) = (digits(0..4)?, digits(4..6)?, digits(6..8)?);
    let (hour, min, sec) = (digits(9..11)?, digits(11..13)?, digits(13..15)?);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || min > 59 || sec > 60 || year < 1970 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + min * 60 + sec)
}

/// Seconds since the Unix epoch → `20130524T000000Z`.
pub fn format_amz_date(epoch_secs: u64) -> String {
    let (y, m, d) = civil_from_days(epoch_secs / 86_400);
    let rem = epoch_secs % 86_400;
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn is_leap(y: u64) -> bool {
    (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400)
}

fn days_in_month(y: u64, m: u64) -> u64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 for a proleptic Gregorian date (year ≥ 1970).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let mut days = 0;
    for year in 1970..y {
        days += if is_leap(year) { 366 } else { 365 };
    }
    for month in 1..m {
        days += days_in_month(y, month);
    }
    days + d - 1
}

fn civil_from_days(mut days: u64) -> (u64, u64, u64) {
    let mut y = 1970;
    loop {
        let len = if is_leap(y) { 366 } else { 365 };
        if days < len {
            break;
        }
        days -= len;
        y += 1;
    }
    let mut m = 1;
    while days >= days_in_month(y, m) {
        days -= days_in_month(y, m);
        m += 1;
    }
    (y, m, days + 1)
}

/// The string to sign for one signed chunk of a streaming upload.
pub fn chunk_string_to_sign(
    amz_date: &str,
    scope: &str,
    previous_signature: &str,
    chunk_sha256_hex: &str,
) -> String {
    format!(
        "AWS4-HMAC-SHA256-PAYLOAD\n{amz_date}\n{scope}\n{previous_signature}\n{EMPTY_SHA256}\n{chunk_sha256_hex}"
    )
}

/// The signature of one chunk, chained on the previous one (the seed
/// signature for the first chunk).
pub fn chunk_signature(
    key: &[u8; 32],
    amz_date: &str,
    scope: &str,
    previous_signature: &str,
    data: &[u8],
) -> String {
    let sts = chunk_string_to_sign(
        amz_date,
        scope,
        previous_signature,
        &hex::encode(Sha256::digest(data)),
    );
    hmac_hex(key, sts.as_bytes())
}

/// How the chunk signatures of a signed streaming body are checked.
#[derive(Clone, Debug)]
pub struct ChunkSigning {
    pub key: [u8; 32],
    pub amz_date: String,
    pub scope: String,
    pub seed_signature: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkError {
    Malformed(String),
    /// A chunk's signature did not match; carries the chunk's index.
    Signature {
        chunk: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkState {
    Header,
    Data,
    /// Expecting the CRLF after chunk data; counts the bytes seen.
    DataEnd(u8),
    Trailer,
    Done,
}

/// Incremental decoder of an `aws-chunked` body: `hex-size[;ext]\r\n data
/// \r\n … 0[;ext]\r\n` then trailer lines `name:value\r\n` and a blank line.
/// It never copies data: `feed` reports which byte ranges of its input are
/// payload, so memory stays flat however large the object.
#[derive(Debug)]
pub struct AwsChunkedDecoder {
    signing: Option<ChunkSigning>,
    previous_signature: String,
    state: ChunkState,
    line: Vec<u8>,
    remaining: u64,
    chunk_hasher: Sha256,
    chunk_signature: Option<String>,
    chunk_index: u64,
    decoded_len: u64,
    trailers: Vec<(String, String)>,
}

impl AwsChunkedDecoder {
    pub fn new(signing: Option<ChunkSigning>) -> Self {
        Self {
            previous_signature: signing
                .as_ref()
                .map(|s| s.seed_signature.clone())
                .unwrap_or_default(),
            signing,
            state: ChunkState::Header,
            line: Vec::new(),
            remaining: 0,
            chunk_hasher: Sha256::new(),
            chunk_signature: None,
            chunk_index: 0,
            decoded_len: 0,
            trailers: Vec::new(),
        }
    }

    /// Consumes `input`; pushes the ranges of `input` that are payload.
    pub fn feed(
        &mut self,
        input: &[u8],
        payload: &mut Vec<Range<usize>>,
    ) -> Result<(), ChunkError> {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                ChunkState::Header | ChunkState::Trailer => {
                    match input[i..].iter().position(|&b| b == b'\n') {
                        Some(pos) => {
                            self.line.extend_from_slice(&input[i..i + pos]);
                            i += pos + 1;
                            let line = std::mem::take(&mut self.line);
                            self.end_of_line(&line)?;
                        }
                        None => {
                            self.line.extend_from_slice(&input[i..]);
                            i = input.len();
                        }
                    }
                    if self.line.len() > MAX_CHUNK_LINE_BYTES {
                        return Err(ChunkError::Malformed(
                            "chunk header or trailer line too long".into(),
                        ));
                    }
                }
                ChunkState::Data => {
                    let available = (input.len() - i) as u64;
                    let take = available.min(self.remaining) as usize;
                    if self.signing.is_some() {
                        self.chunk_hasher.update(&input[i..i + take]);
                    }
                    payload.push(i..i + take);
                    i += take;
                    self.remaining -= take as u64;
                    self.decoded_len += take as u64;
                    if self.remaining == 0 {
                        self.end_of_chunk()?;
                        self.state = ChunkState::DataEnd(0);
                    }
                }
                ChunkState::DataEnd(seen) => {
                    if input[i] != b"\r\n"[seen as usize] {
                        return Err(ChunkError::Malformed(
                            "chunk data not followed by CRLF".into(),
                        ));
                    }
                    i += 1;
                    self.state = if seen == 1 {
                        ChunkState::Header
                    } else {
                        ChunkState::DataEnd(1)
                    };
                }
                ChunkState::Done => {
                    return Err(ChunkError::Malformed("data after the final chunk".into()));
                }
            }
        }
        Ok(())
    }

    /// Checks that the body ended where the encoding says it may. A body that
    /// stops right after the last chunk or the last trailer (no blank line)
    /// is accepted: nothing is missing from it.
    pub fn finish(&self) -> Result<(), ChunkError> {
        match self.state {
            ChunkState::Done => Ok(()),
            ChunkState::Trailer if self.line.is_empty() => Ok(()),
            _ => Err(ChunkError::Malformed("body ended inside a chunk".into())),
        }
    }

    /// Trailer lines seen after the final chunk, names lowercased.
    pub fn trailers(&self) -> &[(String, String)] {
        &self.trailers
    }

    pub fn decoded_len(&self) -> u64 {
        self.decoded_len
    }

    fn end_of_line(&mut self, line: &[u8]) -> Result<(), ChunkError> {
        let Some(line) = line.strip_suffix(b"\r") else {
            return Err(ChunkError::Malformed("line not terminated by CRLF".into()));
        };
        let line = std::str::from_utf8(line)
            .map_err(|_| ChunkError::Malformed("chunk header is not UTF-8".into()))?;
        if self.state == ChunkState::Trailer {
            if line.is_empty() {
                self.state = ChunkState::Done;
                return Ok(());
            }
            let Some((name, value)) = line.split_once(':') else {
                return Err(ChunkError::Malformed(format!(
                    "trailer line '{line}' has no ':'"
                )));
            };
            self.trailers
                .push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
            return Ok(());
        }
        let mut fields = line.split(';');
        let size_hex = fields.next().unwrap_or("").trim();
        if size_hex.is_empty() || size_hex.len() > 16 {
            return Err(ChunkError::Malformed(format!(
                "bad chunk size '{size_hex}'"
            )));
        }
        let size = u64::from_str_radix(size_hex, 16)
            .map_err(|_| ChunkError::Malformed(format!("bad chunk size '{size_hex}'")))?;
        self.chunk_signature = fields
            .filter_map(|f| f.split_once('='))
            .find(|(k, _)| k.trim() == "chunk-signature")
            .map(|(_, v)| v.trim().to_owned());
        if self.signing.is_some() && self.chunk_signature.is_none() {
            return Err(ChunkError::Malformed(
                "signed chunk without chunk-signature".into(),
            ));
        }
        self.chunk_hasher = Sha256::new();
        self.remaining = size;
        if size == 0 {
            self.end_of_chunk()?;
            self.state = ChunkState::Trailer;
        } else {
            self.state = ChunkState::Data;
        }
        Ok(())
    }

    fn end_of_chunk(&mut self) -> Result<(), ChunkError> {
        let index = self.chunk_index;
        self.chunk_index += 1;
        let Some(signing) = &self.signing else {
            return Ok(());
        };
        let hasher = std::mem::replace(&mut self.chunk_hasher, Sha256::new());
        let sts = chunk_string_to_sign(
            &signing.amz_date,
            &signing.scope,
            &self.previous_signature,
            &hex::encode(hasher.finalize()),
        );
        let expected = hmac_hex(&signing.key, sts.as_bytes());
        if self.chunk_signature.as_deref() != Some(expected.as_str()) {
            return Err(ChunkError::Signature { chunk: index });
        }
        self.previous_signature = expected;
        Ok(())
    }
}

/// Credentials a test signer uses.
#[derive(Clone, Copy, Debug)]
pub struct SignerCredentials<'a> {
    pub access_key_id: &'a str,
    pub secret: &'a str,
    pub session_token: Option<&'a str>,
}

/// A request's method, path and query as sent (still percent-encoded,
/// the query without `?`): what a signer is given besides its headers.
#[derive(Clone, Copy, Debug)]
pub struct RequestLine<'a> {
    pub method: &'a str,
    pub raw_path: &'a str,
    pub raw_query: &'a str,
}

/// Signs a request in the header form, the way an SDK does: sets
/// `x-amz-date`, `x-amz-content-sha256` and the session token, signs every
/// header present, and sets `Authorization`. Returns the seed signature.
/// For tests; `headers` must already hold `host`.
pub fn sign_headers(
    line: RequestLine<'_>,
    headers: &mut HeaderMap,
    creds: SignerCredentials<'_>,
    region: &str,
    amz_date: &str,
    payload_hash: &str,
) -> String {
    let set = |headers: &mut HeaderMap, name: &'static str, value: &str| {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_str(value).expect("signer header values are ASCII"),
        );
    };
    headers.remove("authorization");
    set(headers, "x-amz-date", amz_date);
    set(headers, "x-amz-content-sha256", payload_hash);
    if let Some(token) = creds.session_token {
        set(headers, "x-amz-security-token", token);
    }
    let mut signed: Vec<String> = headers.keys().map(|k| k.as_str().to_owned()).collect();
    signed.sort();
    signed.dedup();
    let RequestLine {
        method,
        raw_path,
        raw_query,
    } = line;
    let computed = compute(
        &RequestView {
            method,
            raw_path,
            raw_query,
            headers,
        },
        &SigningParams {
            secret: creds.secret,
            amz_date,
            region,
            service: SERVICE,
            signed_headers: &signed,
            payload_hash,
            form: AuthForm::Header,
        },
    );
    let value = format!(
        "{ALGORITHM} Credential={}/{}, SignedHeaders={}, Signature={}",
        creds.access_key_id,
        computed.scope,
        signed.join(";"),
        computed.signature
    );
    set(headers, "authorization", &value);
    computed.signature
}

/// Presigns a request: returns the full query string (the operation's own
/// parameters first, then the auth ones, then `X-Amz-Signature`). Signs only
/// `host`. For tests; `headers` must hold `host`.
pub fn presign_query(
    line: RequestLine<'_>,
    headers: &HeaderMap,
    creds: SignerCredentials<'_>,
    region: &str,
    amz_date: &str,
    expires_secs: u64,
) -> String {
    let RequestLine {
        method,
        raw_path,
        raw_query,
    } = line;
    let date = amz_date.get(..8).unwrap_or(amz_date);
    let credential = format!(
        "{}/{date}/{region}/{SERVICE}/{TERMINATOR}",
        creds.access_key_id
    );
    let mut query = String::from(raw_query);
    let mut add = |name: &str, value: &str| {
        if !query.is_empty() {
            query.push('&');
        }
        query.push_str(name);
        query.push('=');
        query.push_str(&uri_encode(value.as_bytes(), true));
    };
    add("X-Amz-Algorithm", ALGORITHM);
    add("X-Amz-Credential", &credential);
    add("X-Amz-Date", amz_date);
    add("X-Amz-Expires", &expires_secs.to_string());
    add("X-Amz-SignedHeaders", "host");
    if let Some(token) = creds.session_token {
        add("X-Amz-Security-Token", token);
    }
    let signed = ["host".to_owned()];
    let computed = compute(
        &RequestView {
            method,
            raw_path,
            raw_query: &query,
            headers,
        },
        &SigningParams {
            secret: creds.secret,
            amz_date,
            region,
            service: SERVICE,
            signed_headers: &signed,
            payload_hash: UNSIGNED_PAYLOAD,
            form: AuthForm::Presigned,
        },
    );
    format!("{query}&X-Amz-Signature={}", computed.signature)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Credentials of the AWS S3 SigV4 examples (Signature Calculations for
    /// the Authorization Header / Query String / Multiple Chunks).
    const S3_EXAMPLE_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    const S3_EXAMPLE_DATE: &str = "20130524T000000Z";
    /// Credentials of the AWS SigV4 test suite and general examples.
    const SUITE_SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn names(list: &str) -> Vec<String> {
        parse_signed_headers(list).unwrap()
    }

    fn signature_of(
        request: RequestView<'_>,
        signed: &str,
        payload: &str,
        secret: &str,
        amz_date: &str,
        service: &str,
        form: AuthForm,
    ) -> String {
        compute(
            &request,
            &SigningParams {
                secret,
                amz_date,
                region: "us-east-1",
                service,
                signed_headers: &names(signed),
                payload_hash: payload,
                form,
            },
        )
        .signature
    }

    #[test]
    fn signing_key_matches_the_published_derivation_example() {
        let key = signing_key(SUITE_SECRET, "20120215", "us-east-1", "iam");
        assert_eq!(
            hex::encode(key),
            "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"
        );
    }

    #[test]
    fn test_suite_get_vanilla() {
        let h = headers(&[
            ("host", "example.amazonaws.com"),
            ("x-amz-date", "20150830T123600Z"),
        ]);
        let req = RequestView {
            method: "GET",
            raw_path: "/",
            raw_query: "",
            headers: &h,
        };
        assert_eq!(
            canonical_request(
                &req,
                &names("host;x-amz-date"),
                EMPTY_SHA256,
                AuthForm::Header
            ),
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let sig = signature_of(
            RequestView {
                method: "GET",
                raw_path: "/",
                raw_query: "",
                headers: &h,
            },
            "host;x-amz-date",
            EMPTY_SHA256,
            SUITE_SECRET,
            "20150830T123600Z",
            "service",
            AuthForm::Header,
        );
        assert_eq!(
            sig,
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        );
    }

    #[test]
    fn test_suite_get_vanilla_query_order() {
        let h = headers(&[
            ("host", "example.amazonaws.com"),
            ("x-amz-date", "20150830T123600Z"),
        ]);
        let sig = signature_of(
            RequestView {
                method: "GET",
                raw_path: "/",
                raw_query: "Param2=value2&Param1=value1",
                headers: &h,
            },
            "host;x-amz-date",
            EMPTY_SHA256,
            SUITE_SECRET,
            "20150830T123600Z",
            "service",
            AuthForm::Header,
        );
        assert_eq!(
            sig,
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
        );
    }

    #[test]
    fn s3_example_get_object() {
        let h = headers(&[
            ("host", "examplebucket.s3.amazonaws.com"),
            ("range", "bytes=0-9"),
            ("x-amz-content-sha256", EMPTY_SHA256),
            ("x-amz-date", S3_EXAMPLE_DATE),
        ]);
        let sig = signature_of(
            RequestView {
                method: "GET",
                raw_path: "/test.txt",
                raw_query: "",
                headers: &h,
            },
            "host;range;x-amz-content-sha256;x-amz-date",
            EMPTY_SHA256,
            S3_EXAMPLE_SECRET,
            S3_EXAMPLE_DATE,
            "s3",
            AuthForm::Header,
        );
        assert_eq!(
            sig,
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn s3_example_put_object_encodes_the_dollar_once() {
        let body_hash = hex::encode(Sha256::digest(b"Welcome to Amazon S3."));
        let h = headers(&[
            ("date", "Fri, 24 May 2013 00:00:00 GMT"),
            ("host", "examplebucket.s3.amazonaws.com"),
            ("x-amz-content-sha256", &body_hash),
            ("x-amz-date", S3_EXAMPLE_DATE),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        ]);
        let signed = "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class";
        // Whether the client sent `$` raw or `%24`, S3 signs `%24`.
        for path in ["/test$file.text", "/test%24file.text"] {
            let sig = signature_of(
                RequestView {
                    method: "PUT",
                    raw_path: path,
                    raw_query: "",
                    headers: &h,
                },
                signed,
                &body_hash,
                S3_EXAMPLE_SECRET,
                S3_EXAMPLE_DATE,
                "s3",
                AuthForm::Header,
            );
            assert_eq!(
                sig,
                "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
            );
        }
    }

    #[test]
    fn s3_example_get_bucket_lifecycle_has_an_empty_value_parameter() {
        let h = headers(&[
            ("host", "examplebucket.s3.amazonaws.com"),
            ("x-amz-content-sha256", EMPTY_SHA256),
            ("x-amz-date", S3_EXAMPLE_DATE),
        ]);
        let sig = signature_of(
            RequestView {
                method: "GET",
                raw_path: "/",
                raw_query: "lifecycle",
                headers: &h,
            },
            "host;x-amz-content-sha256;x-amz-date",
            EMPTY_SHA256,
            S3_EXAMPLE_SECRET,
            S3_EXAMPLE_DATE,
            "s3",
            AuthForm::Header,
        );
        assert_eq!(
            sig,
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"
        );
    }

    #[test]
    fn s3_example_list_objects_sorts_the_query() {
        let h = headers(&[
            ("host", "examplebucket.s3.amazonaws.com"),
            ("x-amz-content-sha256", EMPTY_SHA256),
            ("x-amz-date", S3_EXAMPLE_DATE),
        ]);
        let sig = signature_of(
            RequestView {
                method: "GET",
                raw_path: "/",
                raw_query: "prefix=J&max-keys=2",
                headers: &h,
            },
            "host;x-amz-content-sha256;x-amz-date",
            EMPTY_SHA256,
            S3_EXAMPLE_SECRET,
            S3_EXAMPLE_DATE,
            "s3",
            AuthForm::Header,
        );
        assert_eq!(
            sig,
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
        );
    }

    #[test]
    fn s3_example_presigned_get() {
        let h = headers(&[("host", "examplebucket.s3.amazonaws.com")]);
        let query = "X-Amz-Algorithm=AWS4-HMAC-SHA256\
            &X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request\
            &X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host\
            &X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";
        let sig = signature_of(
            RequestView {
                method: "GET",
                raw_path: "/test.txt",
                raw_query: query,
                headers: &h,
            },
            "host",
            UNSIGNED_PAYLOAD,
            S3_EXAMPLE_SECRET,
            S3_EXAMPLE_DATE,
            "s3",
            AuthForm::Presigned,
        );
        assert_eq!(
            sig,
            "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
        );
        let auth = parse_auth(&h, query).unwrap();
        assert_eq!(auth.form, AuthForm::Presigned);
        assert_eq!(auth.expires_secs, Some(86_400));
        assert_eq!(auth.credential.access_key_id, "AKIAIOSFODNN7EXAMPLE");
        assert_eq!(auth.signature, sig);
    }

    /// The example body of "Transferring Payload in Multiple Chunks":
    /// 65536 + 1024 bytes of `a`, in 64 KiB chunks.
    fn example_streaming_body() -> (HeaderMap, Vec<u8>, [&'static str; 4]) {
        let sigs = [
            "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
            "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
            "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
            "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
        ];
        let h = headers(&[
            ("content-encoding", "aws-chunked"),
            ("content-length", "66824"),
            ("host", "s3.amazonaws.com"),
            ("x-amz-content-sha256", STREAMING_SIGNED),
            ("x-amz-date", S3_EXAMPLE_DATE),
            ("x-amz-decoded-content-length", "66560"),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        ]);
        let mut body = Vec::new();
        for (size, sig) in [(65_536usize, sigs[1]), (1024, sigs[2]), (0, sigs[3])] {
            body.extend_from_slice(format!("{size:x};chunk-signature={sig}\r\n").as_bytes());
            body.extend(std::iter::repeat_n(b'a', size));
            body.extend_from_slice(b"\r\n");
        }
        (h, body, sigs)
    }

    #[test]
    fn s3_example_streaming_seed_and_chunks() {
        let (h, body, sigs) = example_streaming_body();
        assert_eq!(body.len(), 66_824, "the example's Content-Length");
        let signed = "content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;\
                      x-amz-decoded-content-length;x-amz-storage-class";
        let seed = signature_of(
            RequestView {
                method: "PUT",
                raw_path: "/examplebucket/chunkObject.txt",
                raw_query: "",
                headers: &h,
            },
            signed,
            STREAMING_SIGNED,
            S3_EXAMPLE_SECRET,
            S3_EXAMPLE_DATE,
            "s3",
            AuthForm::Header,
        );
        assert_eq!(seed, sigs[0]);
        let key = signing_key(S3_EXAMPLE_SECRET, "20130524", "us-east-1", "s3");
        let scope = "20130524/us-east-1/s3/aws4_request";
        let chunk1 = chunk_signature(&key, S3_EXAMPLE_DATE, scope, sigs[0], &[b'a'; 65_536]);
        assert_eq!(chunk1, sigs[1]);

        // Fed in awkward pieces, the decoder still checks every signature.
        let signing = ChunkSigning {
            key,
            amz_date: S3_EXAMPLE_DATE.into(),
            scope: scope.into(),
            seed_signature: seed,
        };
        for piece in [1usize, 7, 4096, body.len()] {
            let mut dec = AwsChunkedDecoder::new(Some(signing.clone()));
            let mut payload = 0u64;
            for part in body.chunks(piece) {
                let mut ranges = Vec::new();
                dec.feed(part, &mut ranges).unwrap();
                for r in ranges {
                    assert!(part[r.clone()].iter().all(|&b| b == b'a'));
                    payload += r.len() as u64;
                }
            }
            dec.finish().unwrap();
            assert_eq!((payload, dec.decoded_len()), (66_560, 66_560));
        }
    }

    #[test]
    fn streaming_rejects_a_tampered_chunk_or_broken_chain() {
        let (_, body, sigs) = example_streaming_body();
        let signing = ChunkSigning {
            key: signing_key(S3_EXAMPLE_SECRET, "20130524", "us-east-1", "s3"),
            amz_date: S3_EXAMPLE_DATE.into(),
            scope: "20130524/us-east-1/s3/aws4_request".into(),
            seed_signature: sigs[0].into(),
        };
        let run = |body: &[u8], signing: ChunkSigning| {
            let mut dec = AwsChunkedDecoder::new(Some(signing));
            dec.feed(body, &mut Vec::new()).and_then(|()| dec.finish())
        };
        let mut tampered = body.clone();
        tampered[200] = b'b';
        assert_eq!(
            run(&tampered, signing.clone()),
            Err(ChunkError::Signature { chunk: 0 })
        );
        let wrong_seed = ChunkSigning {
            seed_signature: sigs[1].into(),
            ..signing.clone()
        };
        assert_eq!(
            run(&body, wrong_seed),
            Err(ChunkError::Signature { chunk: 0 })
        );
        // Dropping the middle chunk breaks the chain at the final chunk:
        // each chunk is `header(86|88 bytes) data CRLF`.
        let first_end = 88 + 65_536 + 2;
        let second_end = first_end + 86 + 1024 + 2;
        let mut skipped = body[..first_end].to_vec();
        skipped.extend_from_slice(&body[second_end..]);
        assert_eq!(
            run(&skipped, signing),
            Err(ChunkError::Signature { chunk: 1 })
        );
    }

    #[test]
    fn unsigned_trailer_body_is_decoded_with_its_trailers() {
        let body = b"5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n";
        for piece in [1usize, 3, body.len()] {
            let mut dec = AwsChunkedDecoder::new(None);
            let mut out = Vec::new();
            for part in body.chunks(piece) {
                let mut ranges = Vec::new();
                dec.feed(part, &mut ranges).unwrap();
                for r in ranges {
                    out.extend_from_slice(&part[r]);
                }
            }
            dec.finish().unwrap();
            assert_eq!(out, b"hello world");
            assert_eq!(
                dec.trailers(),
                [("x-amz-checksum-crc32".to_owned(), "DUoRhQ==".to_owned())]
            );
        }
    }

    #[test]
    fn malformed_chunked_bodies_are_refused() {
        let cases: &[&[u8]] = &[
            b"zz\r\nhello\r\n0\r\n\r\n",
            b"5\r\nhelloXX0\r\n\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"0\r\n\r\nextra",
            b"0\r\nno-colon\r\n\r\n",
        ];
        for body in cases {
            let mut dec = AwsChunkedDecoder::new(None);
            let result = dec.feed(body, &mut Vec::new()).and_then(|()| dec.finish());
            assert!(matches!(result, Err(ChunkError::Malformed(_))), "{body:?}");
        }
        let truncated: &[&[u8]] = &[b"5\r\nhel", b"5\r\nhello\r", b"5\r\nhello\r\n0\r\nx-amz-a"];
        for body in truncated {
            let mut dec = AwsChunkedDecoder::new(None);
            dec.feed(body, &mut Vec::new()).unwrap();
            assert!(dec.finish().is_err(), "{body:?}");
        }
        let mut signed = AwsChunkedDecoder::new(Some(ChunkSigning {
            key: [0; 32],
            amz_date: S3_EXAMPLE_DATE.into(),
            scope: "s".into(),
            seed_signature: "x".into(),
        }));
        assert!(matches!(
            signed.feed(b"5\r\nhello\r\n", &mut Vec::new()),
            Err(ChunkError::Malformed(_))
        ));
    }

    #[test]
    fn uri_encoding_follows_rfc3986_unreserved() {
        let cases: &[(&[u8], bool, &str)] = &[
            (b"AZaz09-._~", true, "AZaz09-._~"),
            (b"a/b", false, "a/b"),
            (b"a/b", true, "a%2Fb"),
            (b"a b+c=d", true, "a%20b%2Bc%3Dd"),
            (b"$", false, "%24"),
            ("é".as_bytes(), true, "%C3%A9"),
        ];
        for (input, encode_slash, want) in cases {
            assert_eq!(uri_encode(input, *encode_slash), *want);
        }
    }

    #[test]
    fn canonical_uri_decodes_then_encodes_once_without_normalising() {
        for (raw, want) in [
            ("", "/"),
            ("/", "/"),
            ("/models/a b.tgz", "/models/a%20b.tgz"),
            ("/models/a%20b.tgz", "/models/a%20b.tgz"),
            ("/a%2Fb", "/a/b"),
            ("/a//./b", "/a//./b"),
            ("/%7Ekey", "/~key"),
            ("/100%", "/100%25"),
        ] {
            assert_eq!(canonical_uri(raw), want, "{raw}");
        }
    }

    #[test]
    fn canonical_query_sorts_encodes_and_drops_the_presigned_signature() {
        let cases = [
            ("", false, ""),
            ("uploads", false, "uploads="),
            (
                "uploadId=abc&partNumber=2",
                false,
                "partNumber=2&uploadId=abc",
            ),
            ("a=2&a=1&B=x", false, "B=x&a=1&a=2"),
            ("k=a%2fb&s=x%20y", false, "k=a%2Fb&s=x%20y"),
            ("k=a+b", false, "k=a%2Bb"),
            ("X-Amz-Signature=s&a=1", true, "a=1"),
            ("X-Amz-Signature=s&a=1", false, "X-Amz-Signature=s&a=1"),
        ];
        for (raw, presigned, want) in cases {
            assert_eq!(canonical_query(raw, presigned), want, "{raw}");
        }
    }

    #[test]
    fn header_values_are_trimmed_and_collapsed_and_repeats_joined() {
        let h = headers(&[
            ("my-header1", "  value1  "),
            ("my-header2", "\"a   b   c\""),
            ("my-header3", "one"),
            ("my-header3", "two"),
        ]);
        assert_eq!(
            canonical_headers(&h, &names("my-header1;my-header2;my-header3;x-absent")),
            "my-header1:value1\nmy-header2:\"a b c\"\nmy-header3:one,two\nx-absent:\n"
        );
    }

    #[test]
    fn payload_modes_parse_strictly() {
        let hash = "a".repeat(64);
        let cases = [
            (UNSIGNED_PAYLOAD, Some(PayloadMode::Unsigned)),
            (
                STREAMING_UNSIGNED_TRAILER,
                Some(PayloadMode::StreamingUnsignedTrailer),
            ),
            (STREAMING_SIGNED, Some(PayloadMode::StreamingSigned)),
            (
                STREAMING_SIGNED_TRAILER,
                Some(PayloadMode::StreamingSignedTrailer),
            ),
            (hash.as_str(), Some(PayloadMode::Sha256(hash.clone()))),
            (&hash[1..], None),
            ("A".repeat(64).leak(), None),
            ("unsigned-payload", None),
        ];
        for (value, want) in cases {
            assert_eq!(PayloadMode::parse(value), want, "{value}");
        }
        let presigned = payload_mode(AuthForm::Presigned, &HeaderMap::new());
        assert_eq!(presigned, Ok(PayloadMode::Unsigned));
        let header = payload_mode(AuthForm::Header, &HeaderMap::new());
        assert_eq!(header, Err(AuthError::MissingContentSha256));
    }

    #[test]
    fn authorization_header_is_parsed_or_refused() {
        let date = headers(&[("x-amz-date", S3_EXAMPLE_DATE)]);
        let good = "AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, \
                    SignedHeaders=host;x-amz-date, Signature=abc";
        let auth = parse_authorization_header(good, &date).unwrap();
        assert_eq!(auth.credential.region, "us-east-1");
        assert_eq!(auth.signed_headers, ["host", "x-amz-date"]);
        assert_eq!(auth.signature, "abc");
        assert_eq!(auth.amz_date, S3_EXAMPLE_DATE);
        let compact = good.replace(", ", ",");
        assert_eq!(parse_authorization_header(&compact, &date).unwrap(), auth);

        let malformed = [
            "AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3, SignedHeaders=host, Signature=a",
            "AWS4-HMAC-SHA256 Credential=AKID/2013052/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=a",
            "AWS4-HMAC-SHA256 SignedHeaders=host, Signature=a",
            "AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, Signature=a",
            "AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, SignedHeaders=host",
            "AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, SignedHeaders=x-amz-date;host, Signature=a",
            "AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, SignedHeaders=Host, Signature=a",
            "AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=a, Extra=b",
        ];
        for value in malformed {
            assert!(
                matches!(
                    parse_authorization_header(value, &date),
                    Err(AuthError::Malformed { .. })
                ),
                "{value}"
            );
        }
        assert_eq!(
            parse_authorization_header("AWS AKID:sig", &date),
            Err(AuthError::UnsupportedAlgorithm("AWS".into()))
        );
        assert_eq!(
            parse_authorization_header(good, &HeaderMap::new()),
            Err(AuthError::MissingDate)
        );
    }

    #[test]
    fn auth_forms_are_exclusive_and_presigned_needs_every_parameter() {
        let with_auth = headers(&[("authorization", "AWS4-HMAC-SHA256 x")]);
        assert_eq!(parse_auth(&HeaderMap::new(), ""), Err(AuthError::Missing));
        assert_eq!(
            parse_auth(&with_auth, "X-Amz-Algorithm=AWS4-HMAC-SHA256"),
            Err(AuthError::BothForms)
        );
        let full = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=A%2F20130524%2Fus-east-1%2Fs3%2Faws4_request\
                    &X-Amz-Date=20130524T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=s\
                    &X-Amz-Security-Token=a%2Bb%2Fc%3D";
        let auth = parse_auth(&HeaderMap::new(), full).unwrap();
        assert_eq!(auth.security_token.as_deref(), Some("a+b/c="));
        for drop in [
            "X-Amz-Credential",
            "X-Amz-Date",
            "X-Amz-Expires",
            "X-Amz-SignedHeaders",
            "X-Amz-Signature",
        ] {
            let partial: Vec<&str> = full.split('&').filter(|p| !p.starts_with(drop)).collect();
            assert!(
                matches!(
                    parse_auth(&HeaderMap::new(), &partial.join("&")),
                    Err(AuthError::Malformed { .. })
                ),
                "without {drop}"
            );
        }
        for expires in ["0", "604801", "x"] {
            let q = full.replace("X-Amz-Expires=60", &format!("X-Amz-Expires={expires}"));
            assert!(matches!(
                parse_auth(&HeaderMap::new(), &q),
                Err(AuthError::Malformed { .. })
            ));
        }
    }

    #[test]
    fn amz_dates_round_trip_and_bad_ones_are_refused() {
        for (text, secs) in [
            ("19700101T000000Z", 0),
            ("20130524T000000Z", 1_369_353_600),
            ("20150830T123600Z", 1_440_938_160),
            ("20240229T235959Z", 1_709_251_199),
        ] {
            assert_eq!(parse_amz_date(text), Some(secs), "{text}");
            assert_eq!(format_amz_date(secs), text);
        }
        for bad in [
            "20130524T000000",
            "2013-05-24T00:00:00Z",
            "20130230T000000Z",
            "20131324T000000Z",
            "20130524T250000Z",
            "2013052aT000000Z",
        ] {
            assert_eq!(parse_amz_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn test_signers_produce_what_the_parser_reads_back() {
        let creds = SignerCredentials {
            access_key_id: "ASIAEXAMPLE",
            secret: "secret",
            session_token: Some("to+k/en="),
        };
        let mut h = headers(&[("host", "b.s3.amazonaws.com")]);
        let sig = sign_headers(
            RequestLine {
                method: "PUT",
                raw_path: "/k",
                raw_query: "",
            },
            &mut h,
            creds,
            "us-west-2",
            S3_EXAMPLE_DATE,
            UNSIGNED_PAYLOAD,
        );
        let auth = parse_auth(&h, "").unwrap();
        assert_eq!(auth.signature, sig);
        assert_eq!(
            auth.signed_headers,
            [
                "host",
                "x-amz-content-sha256",
                "x-amz-date",
                "x-amz-security-token"
            ]
        );
        assert_eq!(auth.security_token.as_deref(), Some("to+k/en="));

        let h = headers(&[("host", "b.s3.amazonaws.com")]);
        let query = presign_query(
            RequestLine {
                method: "GET",
                raw_path: "/k",
                raw_query: "",
            },
            &h,
            creds,
            "us-west-2",
            S3_EXAMPLE_DATE,
            60,
        );
        let auth = parse_auth(&h, &query).unwrap();
        assert_eq!(auth.security_token.as_deref(), Some("to+k/en="));
        assert_eq!(auth.credential.region, "us-west-2");
    }
}
