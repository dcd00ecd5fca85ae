//! The one HTTP client: bundled public roots plus the CAs named by
//! `SSL_CERT_FILE`/`SSL_CERT_DIR` (TLS-intercepting proxies), proxies from
//! `HTTPS_PROXY`/`NO_PROXY`, and sane timeouts; and the reading of every
//! answer body within a cap, so no server can make the run hold more than
//! what it needs.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::env_vars as ev;

pub(crate) const CONNECT_TIMEOUT_SECS: u64 = 10;

/// The truss client version whose archive and wire format we reproduce; sent
/// in the user agent and in `truss_user_env` so the platform treats the
/// upload as that client's. The repository's `truss-version` file is its one
/// definition, shared with the chain helper and `scripts/python-env`. It
/// lives here, at the bottom of the import graph, because the user agent
/// needs it and every layer above may read it.
pub(crate) const TRUSS_COMPAT_VERSION: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/truss-version")).trim_ascii();

/// `truss-push/<version> (truss/<pinned>)`: this client, and the truss
/// version whose wire format it speaks.
pub(crate) fn user_agent() -> String {
    format!(
        "truss-push/{} (truss/{})",
        env!("CARGO_PKG_VERSION"),
        TRUSS_COMPAT_VERSION
    )
}

const PEM_BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const PEM_END: &str = "-----END CERTIFICATE-----";

/// The `CERTIFICATE` blocks of a PEM text, each on its own so that one
/// broken block cannot hide the others.
fn pem_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(begin) = rest.find(PEM_BEGIN) {
        let block = &rest[begin..];
        match block.find(PEM_END) {
            Some(end) => {
                blocks.push(&block[..end + PEM_END.len()]);
                rest = &block[end + PEM_END.len()..];
            }
            None => {
                blocks.push(block);
                break;
            }
        }
    }
    blocks
}

/// One PEM block as a root the TLS stack accepts, or `None`. Whether the
/// DER inside is a certificate only shows when a client is built with it,
/// so a client with this root alone is built to find out.
fn usable_root(block: &str) -> Option<reqwest::Certificate> {
    let cert = reqwest::Certificate::from_pem(block.as_bytes()).ok()?;
    reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(cert.clone())
        .build()
        .ok()
        .map(|_| cert)
}

/// Extra CA certificates from the environment, and what was skipped.
#[derive(Debug, Default)]
pub(crate) struct ExtraRoots {
    pub(crate) certs: Vec<reqwest::Certificate>,
    /// `path (certificate n)` for each block that could not be used.
    pub(crate) skipped: Vec<String>,
}

impl ExtraRoots {
    /// The one warning about skipped certificates, if any were.
    pub(crate) fn warning(&self) -> Option<String> {
        let (first, rest) = self.skipped.split_first()?;
        let more = match rest.len() {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        Some(format!(
            "skipped {} certificate(s) that cannot be parsed: {first}{more}; the other {} extra CA certificate(s) are used (fix or remove the broken ones in SSL_CERT_FILE / SSL_CERT_DIR)",
            self.skipped.len(),
            self.certs.len()
        ))
    }

    /// Adds the usable certificates of one PEM file. A file with no
    /// certificate block at all is not a CA file (c_rehash directories
    /// hold other files) and is passed over quietly.
    fn add_file(&mut self, path: &Path, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        for (i, block) in pem_blocks(&text).into_iter().enumerate() {
            match usable_root(block) {
                Some(c) => self.certs.push(c),
                None => self
                    .skipped
                    .push(format!("{} (certificate {})", path.display(), i + 1)),
            }
        }
    }
}

/// The regular files of the `SSL_CERT_DIR` directories, each directory's
/// in name order; a directory that cannot be listed is passed over.
fn cert_dir_files(env: &dyn Fn(&str) -> Option<String>) -> Vec<std::path::PathBuf> {
    let Some(dirs) = env(ev::SSL_CERT_DIR).filter(|s| !s.is_empty()) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for d in std::env::split_paths(&dirs) {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut paths: Vec<_> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        files.extend(paths);
    }
    files
}

/// Extra CA certificates from the environment, on top of the bundled roots.
/// A certificate that cannot be parsed is skipped (and listed) rather than
/// failing every request: one stale entry in a corporate bundle must not
/// stop deploys that never needed it. An unreadable `SSL_CERT_FILE` is an
/// error: the user named that file.
pub(crate) fn extra_roots(env: &dyn Fn(&str) -> Option<String>) -> Result<ExtraRoots> {
    let mut roots = ExtraRoots::default();
    if let Some(file) = env(ev::SSL_CERT_FILE).filter(|s| !s.is_empty()) {
        let bytes = std::fs::read(&file)
            .with_context(|| format!("reading CA file {file}"))
            .context("SSL_CERT_FILE")?;
        let found = roots.certs.len() + roots.skipped.len();
        roots.add_file(Path::new(&file), &bytes);
        if roots.certs.len() + roots.skipped.len() == found {
            anyhow::bail!(
                "SSL_CERT_FILE: {file} holds no PEM certificate (-----BEGIN CERTIFICATE-----): point it at a PEM bundle"
            );
        }
    }
    for p in cert_dir_files(env) {
        if let Ok(bytes) = std::fs::read(&p) {
            roots.add_file(&p, &bytes);
        }
    }
    Ok(roots)
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
    for cert in extra_roots(env)?.certs {
        b = b.add_root_certificate(cert);
    }
    Ok(b)
}

/// Why an answer body could not be read whole.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// It is longer than `cap` bytes, the most its kind may need.
    TooLarge { cap: usize },
    /// The connection failed while the body was read.
    Read(reqwest::Error),
}

impl BodyError {
    /// What went wrong, naming the cap when that was it.
    pub(crate) fn describe(&self) -> String {
        match self {
            BodyError::TooLarge { cap } => format!(
                "the answer is larger than {}, the most truss-push reads for it",
                size(*cap)
            ),
            BodyError::Read(e) => format!("the answer could not be read: {e}"),
        }
    }
}

/// `cap` bytes for people (caps are whole KiB or MiB).
pub(crate) fn size(cap: usize) -> String {
    if cap >= 1 << 20 && cap.is_multiple_of(1 << 20) {
        format!("{} MiB", cap >> 20)
    } else if cap >= 1 << 10 && cap.is_multiple_of(1 << 10) {
        format!("{} KiB", cap >> 10)
    } else {
        format!("{cap} bytes")
    }
}

/// Reads the whole body, refusing it once it passes `cap` bytes; a declared
/// length over the cap is refused before any of it is read.
pub(crate) async fn read_capped(
    resp: &mut reqwest::Response,
    cap: usize,
) -> Result<Vec<u8>, BodyError> {
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        return Err(BodyError::TooLarge { cap });
    }
    // The chunks are kept as they came and joined once at the end: a
    // growing buffer would double (and copy) on the way to the cap.
    let mut chunks = Vec::new();
    let mut len = 0;
    while let Some(chunk) = resp.chunk().await.map_err(BodyError::Read)? {
        len += chunk.len();
        if len > cap {
            return Err(BodyError::TooLarge { cap });
        }
        chunks.push(chunk);
    }
    let mut body = Vec::with_capacity(len);
    for c in chunks {
        body.extend_from_slice(&c);
    }
    Ok(body)
}

/// Reads the body's first `keep` bytes. With `drain` the rest is read and
/// only counted (the call ends when the server's answer does, as a smoke
/// test should); without, reading stops there (an error page, of which a
/// few hundred characters are shown). Returns the head and how many bytes
/// were read in all.
pub(crate) async fn read_head(
    resp: &mut reqwest::Response,
    keep: usize,
    drain: bool,
) -> Result<(Vec<u8>, u64), reqwest::Error> {
    let mut head = Vec::new();
    let mut total = 0u64;
    while let Some(chunk) = resp.chunk().await? {
        total += chunk.len() as u64;
        let room = keep.saturating_sub(head.len());
        head.extend_from_slice(&chunk[..room.min(chunk.len())]);
        if head.len() >= keep && !drain {
            break;
        }
    }
    Ok((head, total))
}

/// The first `max` bytes of a body for a message: escaped (a line break or
/// a control character in it cannot start a log line of its own) and
/// quoted, or `an empty body`.
pub(crate) fn show_bytes(bytes: &[u8], max: usize) -> String {
    if bytes.is_empty() {
        return "an empty body".into();
    }
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(max)]);
    let more = if bytes.len() > max { "…" } else { "" };
    format!("{:?}{more}", head.as_ref())
}

/// The extra CA certificates of [`extra_roots`] as DER, for the S3 data
/// connections that do their own TLS (`s3::wire`), so they trust what the
/// reqwest clients trust. Unreadable files and broken blocks are passed
/// over (`extra_roots` already refused or reported them; the TLS root
/// store skips DER that is no certificate).
pub(crate) fn extra_root_ders(env: &dyn Fn(&str) -> Option<String>) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    if let Some(file) = env(ev::SSL_CERT_FILE).filter(|s| !s.is_empty()) {
        files.push(file.into());
    }
    files.extend(cert_dir_files(env));
    let mut ders = Vec::new();
    for path in files {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        for block in pem_blocks(&text) {
            let body: String = block
                .trim_start_matches(PEM_BEGIN)
                .trim_end_matches(PEM_END)
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(body) {
                ders.push(der);
            }
        }
    }
    ders
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
        let roots = extra_roots(&env).unwrap();
        assert_eq!((roots.certs.len(), roots.skipped.len()), (2, 0));
        assert!(roots.warning().is_none());
        assert!(client(&env).is_ok());
        assert!(extra_roots(&|_| None).unwrap().certs.is_empty());
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

    #[test]
    fn a_broken_certificate_is_skipped_and_the_rest_used() {
        let good = std::fs::read_to_string(CA).unwrap();
        let broken_base64 = format!("{PEM_BEGIN}\nnot base64 at all!!\n{PEM_END}\n");
        let not_der = format!("{PEM_BEGIN}\nAAECAwQFBgcICQ==\n{PEM_END}\n");
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("bundle.pem");
        std::fs::write(&bundle, format!("{broken_base64}{good}{not_der}")).unwrap();
        let file = bundle.to_str().unwrap().to_string();
        let env = |k: &str| (k == "SSL_CERT_FILE").then(|| file.clone());
        let roots = extra_roots(&env).unwrap();
        assert_eq!(roots.certs.len(), 1);
        assert_eq!(
            roots.skipped,
            [
                format!("{file} (certificate 1)"),
                format!("{file} (certificate 3)")
            ]
        );
        let w = roots.warning().unwrap();
        assert!(
            w.contains("skipped 2 certificate(s)") && w.contains("and 1 more"),
            "{w}"
        );
        assert!(client(&env).is_ok());
    }

    #[test]
    fn bodies_are_shown_escaped_and_cut() {
        assert_eq!(show_bytes(b"", 10), "an empty body");
        assert_eq!(
            show_bytes(b"\xEF\xBB\xBF<html>\r\n::error::x", 64),
            r#""\u{feff}<html>\r\n::error::x""#
        );
        assert_eq!(show_bytes(b"abcdef", 3), "\"abc\"…");
        assert_eq!(size(16 << 20), "16 MiB");
        assert_eq!(size(64 << 10), "64 KiB");
        assert_eq!(size(100), "100 bytes");
    }
}
