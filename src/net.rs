//! The one HTTP client: bundled public roots plus the CAs named by
//! `SSL_CERT_FILE`/`SSL_CERT_DIR` (TLS-intercepting proxies), proxies from
//! `HTTPS_PROXY`/`NO_PROXY`, and sane timeouts.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::env_vars as ev;

pub(crate) const CONNECT_TIMEOUT_SECS: u64 = 10;
/// `truss-push/<version> (truss/<pinned>)`: this client, and the truss
/// version whose wire format it speaks.
pub(crate) fn user_agent() -> String {
    format!(
        "truss-push/{} (truss/{})",
        env!("CARGO_PKG_VERSION"),
        crate::flow::TRUSS_COMPAT_VERSION
    )
}

fn pem_certs(path: &Path) -> Result<Vec<reqwest::Certificate>> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading CA file {}", path.display()))?;
    reqwest::Certificate::from_pem_bundle(&bytes)
        .with_context(|| format!("{} holds no PEM certificates", path.display()))
}

/// Extra CA certificates from the environment, on top of the bundled roots.
pub(crate) fn extra_roots(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<reqwest::Certificate>> {
    let mut certs = Vec::new();
    if let Some(file) = env(ev::SSL_CERT_FILE).filter(|s| !s.is_empty()) {
        certs.extend(pem_certs(Path::new(&file)).context("SSL_CERT_FILE")?);
    }
    if let Some(dir) = env(ev::SSL_CERT_DIR).filter(|s| !s.is_empty()) {
        for d in std::env::split_paths(&dir) {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            let mut paths: Vec<_> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            paths.sort();
            for p in paths {
                // c_rehash directories hold hash-named links next to other
                // files; anything that is not PEM is skipped, not fatal.
                if let Ok(c) = pem_certs(&p) {
                    certs.extend(c);
                }
            }
        }
    }
    Ok(certs)
}

/// Redirects the API client follows: a few, and only within one origin
/// (scheme, host and port), because a followed redirect carries the API
/// key — to another host, or in cleartext after `https` → `http`.
const MAX_REDIRECTS: usize = 3;

/// Whether the API client follows a redirect from `from` to `to` after
/// `hops` requests: only within one origin, so the key never travels to
/// another host, port, or from `https` to `http`.
fn follows(from: &reqwest::Url, to: &reqwest::Url, hops: usize) -> bool {
    hops <= MAX_REDIRECTS && from.origin() == to.origin()
}

/// Builds the client used for the Baseten hosts.
pub(crate) fn client(env: &dyn Fn(&str) -> Option<String>) -> Result<reqwest::Client> {
    let same_origin = reqwest::redirect::Policy::custom(|attempt| {
        let from = attempt.previous().last();
        if from.is_some_and(|f| follows(f, attempt.url(), attempt.previous().len())) {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    builder(env)?
        .redirect(same_origin)
        .build()
        .context("building the HTTP client")
}

/// Builds the client for S3: redirects are not followed, because a followed
/// redirect would carry a signature made for another host.
pub(crate) fn s3_client(env: &dyn Fn(&str) -> Option<String>) -> Result<reqwest::Client> {
    builder(env)?
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("building the S3 HTTP client")
}

fn builder(env: &dyn Fn(&str) -> Option<String>) -> Result<reqwest::ClientBuilder> {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .user_agent(user_agent())
        .connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_SECS))
        .pool_idle_timeout(Duration::from_secs(30));
    for cert in extra_roots(env)? {
        b = b.add_root_certificate(cert);
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_are_followed_only_within_one_origin() {
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        let from = u("https://api.baseten.co/v1/models");
        assert!(follows(&from, &u("https://api.baseten.co/v1/models/"), 1));
        for to in [
            "http://api.baseten.co/v1/models",
            "https://api.baseten.co:8443/v1/models",
            "https://evil.example/v1/models",
            "https://app.baseten.co/v1/models",
        ] {
            assert!(!follows(&from, &u(to), 1), "{to}");
        }
        assert!(!follows(&from, &from, MAX_REDIRECTS + 1));
    }

    const CA: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/certs/test-ca.pem"
    );

    #[test]
    fn extra_roots_from_file_and_dir_on_top_of_the_bundle() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(CA, dir.path().join("a.pem")).unwrap();
        std::fs::write(dir.path().join("README"), "not a certificate").unwrap();
        let d = dir.path().to_str().unwrap().to_string();
        let env = |k: &str| match k {
            "SSL_CERT_FILE" => Some(CA.to_string()),
            "SSL_CERT_DIR" => Some(d.clone()),
            _ => None,
        };
        assert_eq!(extra_roots(&env).unwrap().len(), 2);
        assert!(client(&env).is_ok());
        assert!(extra_roots(&|_| None).unwrap().is_empty());
    }

    #[test]
    fn a_bad_ssl_cert_file_is_a_clear_error() {
        let env = |k: &str| (k == "SSL_CERT_FILE").then(|| "/nonexistent/ca.pem".to_string());
        let err = format!("{:#}", extra_roots(&env).unwrap_err());
        assert!(
            err.contains("SSL_CERT_FILE") && err.contains("/nonexistent/ca.pem"),
            "{err}"
        );
    }
}
