//! AWS Signature Version 4, header form, as S3 checks it: written from the
//! published algorithm so the uploader needs no AWS SDK.
//!
//! Everything here is a pure function of its inputs (no clock, no I/O), so the
//! tests can pin every step against AWS's documented examples and botocore.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The only algorithm S3 accepts for SigV4 header signing.
pub(super) const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// SHA-256 of zero bytes: the payload hash of bodiless requests.
pub(super) const EMPTY_SHA256: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// One request as the signer sees it. `canonical_uri` is the path exactly as
/// sent on the wire (already percent-encoded): S3, unlike other services,
/// neither normalises nor re-encodes it.
pub(super) struct Request<'a> {
    pub method: &'a str,
    pub canonical_uri: &'a str,
    /// Decoded query parameters; encoding and ordering are the signer's job.
    pub query: &'a [(String, String)],
    /// Headers to sign, names in any case; must include `host` and
    /// `x-amz-date`.
    pub headers: &'a [(&'a str, &'a str)],
    pub payload_sha256: &'a str,
}

/// Who signs, for which region, at which instant (`YYYYMMDD'T'HHMMSS'Z'`).
pub(super) struct Signer<'a> {
    pub access_key_id: &'a str,
    pub secret_access_key: &'a str,
    pub region: &'a str,
    pub service: &'a str,
    pub amz_date: &'a str,
}

impl Signer<'_> {
    fn date(&self) -> &str {
        self.amz_date.get(..8).unwrap_or(self.amz_date)
    }

    fn scope(&self) -> String {
        format!(
            "{}/{}/{}/aws4_request",
            self.date(),
            self.region,
            self.service
        )
    }

    /// The `Authorization` header value for `request`.
    pub(super) fn authorization(&self, request: &Request<'_>) -> String {
        let (canonical, signed_headers) = canonical_request(request);
        let to_sign = string_to_sign(self.amz_date, &self.scope(), &canonical);
        let key = signing_key(
            self.secret_access_key,
            self.date(),
            self.region,
            self.service,
        );
        format!(
            "{ALGORITHM} Credential={}/{}, SignedHeaders={signed_headers}, Signature={}",
            self.access_key_id,
            self.scope(),
            hex::encode(hmac(&key, to_sign.as_bytes())),
        )
    }
}

/// The canonical request and its signed-header list (`host;x-amz-date;…`).
pub(super) fn canonical_request(request: &Request<'_>) -> (String, String) {
    let mut headers: Vec<(String, String)> = request
        .headers
        .iter()
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), trim_all(value)))
        .collect();
    // A stable sort keeps repeated headers in sending order before they are
    // joined with commas, as the specification asks.
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    let mut canonical_headers = String::new();
    let mut names: Vec<&str> = Vec::new();
    for (name, value) in &headers {
        if names.last() == Some(&name.as_str()) {
            canonical_headers.pop();
            canonical_headers.push(',');
        } else {
            names.push(name);
            canonical_headers.push_str(name);
            canonical_headers.push(':');
        }
        canonical_headers.push_str(value);
        canonical_headers.push('\n');
    }
    let signed_headers = names.join(";");
    let canonical = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        request.method,
        request.canonical_uri,
        canonical_query(request.query),
        canonical_headers,
        signed_headers,
        request.payload_sha256,
    );
    (canonical, signed_headers)
}

/// `AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hex(sha256(canonical))}`.
pub(super) fn string_to_sign(amz_date: &str, scope: &str, canonical_request: &str) -> String {
    format!(
        "{ALGORITHM}\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical_request.as_bytes())
    )
}

/// The derived key: HMAC chain over date, region, service, `aws4_request`.
pub(super) fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> [u8; 32] {
    let k_date = hmac(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac(&k_date, region.as_bytes());
    let k_service = hmac(&k_region, service.as_bytes());
    hmac(&k_service, b"aws4_request")
}

/// Encoded names and values, sorted by name then value, joined with `&`.
/// A parameter without a value (`?uploads`) becomes `uploads=`.
pub(super) fn canonical_query(pairs: &[(String, String)]) -> String {
    let mut encoded: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (uri_encode(k, true), uri_encode(v, true)))
        .collect();
    encoded.sort();
    encoded
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// RFC 3986 encoding the way SigV4 wants it: unreserved characters stay,
/// every other byte becomes `%XX` (upper-case hex); `/` stays only in paths.
pub(super) fn uri_encode(input: &str, encode_slash: bool) -> String {
    let mut out = String::with_capacity(input.len());
    for byte in input.bytes() {
        let unreserved = byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~');
        if unreserved || (byte == b'/' && !encode_slash) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Lower-case hex SHA-256.
pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `YYYYMMDD'T'HHMMSS'Z'` for seconds since the Unix epoch (UTC).
pub(super) fn amz_date(unix_secs: u64) -> String {
    let days = unix_secs / 86_400;
    let secs_of_day = unix_secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        secs_of_day / 3600,
        secs_of_day % 3600 / 60,
        secs_of_day % 60
    )
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// days-to-civil algorithm, restricted to dates after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Header values are signed with outer spaces removed and inner runs of
/// spaces collapsed to one.
fn trim_all(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    // AWS's documented S3 examples ("Signature Calculations for the
    // Authorization Header: Transferring Payload in a Single Chunk"): bucket
    // `examplebucket`, us-east-1, 2013-05-24T00:00:00Z.
    const S3_EXAMPLE_KEY_ID: &str = "AKIAIOSFODNN7EXAMPLE";
    const S3_EXAMPLE_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    const S3_EXAMPLE_HOST: &str = "examplebucket.s3.amazonaws.com";
    const S3_EXAMPLE_DATE: &str = "20130524T000000Z";

    fn example_signer() -> Signer<'static> {
        Signer {
            access_key_id: S3_EXAMPLE_KEY_ID,
            secret_access_key: S3_EXAMPLE_SECRET,
            region: "us-east-1",
            service: "s3",
            amz_date: S3_EXAMPLE_DATE,
        }
    }

    fn signature_of(authorization: &str) -> &str {
        authorization.rsplit("Signature=").next().unwrap()
    }

    #[test]
    fn aws_get_object_example() {
        let request = Request {
            method: "GET",
            canonical_uri: "/test.txt",
            query: &[],
            headers: &[
                ("Host", S3_EXAMPLE_HOST),
                ("Range", "bytes=0-9"),
                ("x-amz-content-sha256", EMPTY_SHA256),
                ("x-amz-date", S3_EXAMPLE_DATE),
            ],
            payload_sha256: EMPTY_SHA256,
        };
        let (canonical, signed) = canonical_request(&request);
        assert_eq!(signed, "host;range;x-amz-content-sha256;x-amz-date");
        assert_eq!(
            sha256_hex(canonical.as_bytes()),
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"
        );
        assert_eq!(
            example_signer().authorization(&request),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn aws_put_object_example_encodes_the_dollar_in_the_key() {
        let body = b"Welcome to Amazon S3.";
        let payload = sha256_hex(body);
        assert_eq!(
            payload,
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
        );
        let uri = uri_encode("/test$file.text", false);
        assert_eq!(uri, "/test%24file.text");
        let request = Request {
            method: "PUT",
            canonical_uri: &uri,
            query: &[],
            headers: &[
                ("Host", S3_EXAMPLE_HOST),
                ("Date", "Fri, 24 May 2013 00:00:00 GMT"),
                ("x-amz-date", S3_EXAMPLE_DATE),
                ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
                ("x-amz-content-sha256", &payload),
            ],
            payload_sha256: &payload,
        };
        assert_eq!(
            signature_of(&example_signer().authorization(&request)),
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
        );
    }

    #[test]
    fn aws_query_examples_value_less_and_sorted_parameters() {
        let cases: [(&[(&str, &str)], &str); 2] = [
            (
                &[("lifecycle", "")],
                "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
            ),
            (
                &[("prefix", "J"), ("max-keys", "2")],
                "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
            ),
        ];
        for (query, expected) in cases {
            let query: Vec<(String, String)> = query
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            let request = Request {
                method: "GET",
                canonical_uri: "/",
                query: &query,
                headers: &[
                    ("host", S3_EXAMPLE_HOST),
                    ("x-amz-content-sha256", EMPTY_SHA256),
                    ("x-amz-date", S3_EXAMPLE_DATE),
                ],
                payload_sha256: EMPTY_SHA256,
            };
            assert_eq!(
                signature_of(&example_signer().authorization(&request)),
                expected,
                "query {query:?}"
            );
        }
    }

    #[test]
    fn aws_documented_signing_key() {
        // The derived-key example of the general SigV4 documentation.
        let key = signing_key(
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            "20120215",
            "us-east-1",
            "iam",
        );
        assert_eq!(
            hex::encode(key),
            "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"
        );
    }

    #[test]
    fn canonical_headers_trim_collapse_and_join_repeats() {
        let request = Request {
            method: "PUT",
            canonical_uri: "/k",
            query: &[],
            headers: &[
                ("X-Amz-Meta-B", "  two   words "),
                ("host", "h"),
                ("x-amz-meta-a", "1"),
                ("X-AMZ-META-A", "2"),
            ],
            payload_sha256: "p",
        };
        let (canonical, signed) = canonical_request(&request);
        assert_eq!(signed, "host;x-amz-meta-a;x-amz-meta-b");
        assert_eq!(
            canonical,
            "PUT\n/k\n\nhost:h\nx-amz-meta-a:1,2\nx-amz-meta-b:two words\n\nhost;x-amz-meta-a;x-amz-meta-b\np"
        );
    }

    #[test]
    fn uri_encoding_table() {
        let cases = [
            ("models/abc.tgz", false, "models/abc.tgz"),
            ("a b/c+d", false, "a%20b/c%2Bd"),
            ("a/b", true, "a%2Fb"),
            ("~-_.", true, "~-_."),
            ("é", true, "%C3%A9"),
            ("=&?%", true, "%3D%26%3F%25"),
        ];
        for (input, encode_slash, expected) in cases {
            assert_eq!(uri_encode(input, encode_slash), expected, "{input:?}");
        }
    }

    #[test]
    fn canonical_query_sorts_after_encoding() {
        let pairs = [("uploadId", "a/b c"), ("partNumber", "10"), ("uploads", "")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()));
        assert_eq!(
            canonical_query(&pairs),
            "partNumber=10&uploadId=a%2Fb%20c&uploads="
        );
    }

    #[test]
    fn amz_date_table() {
        let cases = [
            (0, "19700101T000000Z"),
            (1_369_353_600, "20130524T000000Z"),
            (951_782_400, "20000229T000000Z"),
            (1_709_251_199, "20240229T235959Z"),
            (1_735_689_599, "20241231T235959Z"),
            (4_107_542_400, "21000301T000000Z"),
        ];
        for (secs, expected) in cases {
            assert_eq!(amz_date(secs), expected, "{secs}");
        }
    }
}
