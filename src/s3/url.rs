//! Where a request goes: the object's or the bucket's URL for a region, in
//! AWS's virtual-hosted or path style, with the query written exactly as
//! SigV4 signs it.

use anyhow::{Context as _, anyhow, bail};
use reqwest::Url;

use super::region::{DEFAULT_REGION, valid_region};
use super::sigv4;

/// The object's URL for `region`. The key is encoded once, the way SigV4
/// signs it; a key the URL parser would rewrite (`.`/`..` segments) is refused
/// rather than signed for a path that is not sent.
pub(super) fn object_url(
    endpoint: Option<&Url>,
    bucket: &str,
    key: &str,
    region: &str,
) -> anyhow::Result<Url> {
    s3_url(endpoint, bucket, Some(key), region)
}

/// The bucket's own URL (HeadBucket): the object URL without a key.
pub(super) fn bucket_url(
    endpoint: Option<&Url>,
    bucket: &str,
    region: &str,
) -> anyhow::Result<Url> {
    s3_url(endpoint, bucket, None, region)
}

fn s3_url(
    endpoint: Option<&Url>,
    bucket: &str,
    key: Option<&str>,
    region: &str,
) -> anyhow::Result<Url> {
    if !valid_region(region) {
        bail!("{region:?} is not an AWS region name");
    }
    // "/{key}" after the bucket (path-style) or the host (virtual-hosted).
    let key_path = key.map_or(String::new(), |key| {
        format!("/{}", sigv4::uri_encode(key, false))
    });
    let (text, path) = match endpoint {
        Some(endpoint) => {
            let host = endpoint
                .host_str()
                .ok_or_else(|| anyhow!("the S3 endpoint {endpoint} has no host"))?;
            let authority = match endpoint.port() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_owned(),
            };
            let path = format!(
                "{}/{}{key_path}",
                endpoint.path().trim_end_matches('/'),
                sigv4::uri_encode(bucket, true)
            );
            (format!("{}://{authority}{path}", endpoint.scheme()), path)
        }
        None => {
            let service_host = if region == DEFAULT_REGION {
                "s3.amazonaws.com".to_owned()
            } else {
                format!("s3.{region}.amazonaws.com")
            };
            if virtual_host_ok(bucket) {
                let path = if key_path.is_empty() {
                    "/".to_owned()
                } else {
                    key_path
                };
                (format!("https://{bucket}.{service_host}{path}"), path)
            } else {
                let path = format!("/{}{key_path}", sigv4::uri_encode(bucket, true));
                (format!("https://{service_host}{path}"), path)
            }
        }
    };
    let url =
        Url::parse(&text).with_context(|| format!("could not form an S3 URL from {text:?}"))?;
    if url.path() != path {
        bail!(
            "the S3 key {key:?} would be rewritten in transit (it has `.` or `..` segments); the platform should issue another key"
        );
    }
    Ok(url)
}

/// Whether `{bucket}.s3….amazonaws.com` works over HTTPS: a DNS label of
/// lower-case letters, digits and hyphens. Dotted names break the wildcard
/// certificate, so they go path-style, as boto3 does.
pub(super) fn virtual_host_ok(bucket: &str) -> bool {
    let bytes = bucket.as_bytes();
    (3..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// Writes the query as SigV4 canonicalises it (`uploads` keeps no `=`, which
/// S3 reads the same).
pub(super) fn set_query(url: &mut Url, pairs: &[(String, String)]) {
    if pairs.is_empty() {
        url.set_query(None);
        return;
    }
    let query = pairs
        .iter()
        .map(|(name, value)| {
            let name = sigv4::uri_encode(name, true);
            if value.is_empty() {
                name
            } else {
                format!("{name}={}", sigv4::uri_encode(value, true))
            }
        })
        .collect::<Vec<_>>()
        .join("&");
    url.set_query(Some(&query));
}
