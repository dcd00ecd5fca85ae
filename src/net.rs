//! The run's network, built once ([`Network::from_env`]) from the
//! environment the run was given: bundled public roots plus the CAs named
//! by `SSL_CERT_FILE`/`SSL_CERT_DIR` (TLS-intercepting proxies), one proxy
//! route from `HTTP(S)_PROXY`/`ALL_PROXY`/`NO_PROXY`, the user agent and
//! the timeouts, for the API client and the S3 connections
//! alike; and the reading of every answer body within a cap, so no server
//! can make the run hold more than what it needs.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use hyper_util::client::proxy::matcher::Matcher;

use crate::env_vars::network as ev;

pub(crate) const CONNECT_TIMEOUT_SECS: u64 = 10;

/// The most of one CA file read: a whole public bundle is under 1 MiB.
const CA_FILE_MAX_MIB: u64 = 16;

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

/// The DER inside one PEM block, when the block is base64 and the TLS
/// stack takes it as a trust anchor (a certificate it can parse).
fn usable_root(block: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let body: String = block
        .trim_start_matches(PEM_BEGIN)
        .trim_end_matches(PEM_END)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .ok()?;
    #[expect(clippy::disallowed_types, reason = "net chooses the TLS roots")]
    let mut probe = rustls::RootCertStore::empty();
    probe
        .add(rustls::pki_types::CertificateDer::from(der.clone()))
        .ok()?;
    Some(der)
}

/// Extra CA certificates from the environment, and what was skipped.
#[derive(Debug, Default)]
pub(crate) struct ExtraRoots {
    /// DER, each one the TLS stack accepts as a trust anchor.
    pub(crate) ders: Vec<Vec<u8>>,
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
            self.ders.len()
        ))
    }

    /// Adds the usable certificates of one PEM file. A file with no
    /// certificate block at all is not a CA file (c_rehash directories
    /// hold other files) and is passed over quietly.
    fn add_file(&mut self, path: &Path, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        for (i, block) in pem_blocks(&text).into_iter().enumerate() {
            match usable_root(block) {
                Some(der) => self.ders.push(der),
                None => self
                    .skipped
                    .push(format!("{} (certificate {})", path.display(), i + 1)),
            }
        }
    }
}

/// The regular files of the `SSL_CERT_DIR` directories, each directory's
/// in name order; a directory that cannot be listed is passed over.
fn cert_dir_files(env: Env<'_>) -> Vec<std::path::PathBuf> {
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

/// Extra CA certificates from the environment, on top of the bundled roots,
/// each file read once. A certificate that cannot be parsed is skipped (and
/// listed) rather than failing every request: one stale entry in a
/// corporate bundle must not stop deploys that never needed it. An
/// unreadable `SSL_CERT_FILE` is an error: the user named that file.
pub(crate) fn extra_roots(env: Env<'_>) -> Result<ExtraRoots> {
    let mut roots = ExtraRoots::default();
    if let Some(file) = env(ev::SSL_CERT_FILE).filter(|s| !s.is_empty()) {
        // A regular file only: a FIFO or a device named here would hold
        // the run before its first request.
        let bytes = crate::files::read_regular_file(Path::new(&file), CA_FILE_MAX_MIB)
            .map_err(|e| anyhow::anyhow!("SSL_CERT_FILE: reading CA file {file}: {e}"))?;
        roots.add_file(Path::new(&file), &bytes);
        if roots.ders.is_empty() && roots.skipped.is_empty() {
            anyhow::bail!(
                "SSL_CERT_FILE: {file} holds no PEM certificate (-----BEGIN CERTIFICATE-----): point it at a PEM bundle"
            );
        }
    }
    for p in cert_dir_files(env) {
        if let Ok(bytes) = crate::files::read_regular_file(&p, CA_FILE_MAX_MIB) {
            roots.add_file(&p, &bytes);
        }
    }
    Ok(roots)
}

/// The proxy variables as the run was given them, each read once by curl's
/// names (upper case first): the one route both the API client and
/// the S3 connections follow.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ProxyVars {
    http: String,
    https: String,
    all: String,
    no: String,
    /// `REQUEST_METHOD` is set: a CGI environment, where `HTTP_PROXY` may
    /// come from a request header (httpoxy), so no proxy variable is used.
    cgi: bool,
}

impl ProxyVars {
    fn read(env: Env<'_>) -> Self {
        let first = |names: [&str; 2]| {
            names
                .into_iter()
                .find_map(env)
                .unwrap_or_default()
                .trim()
                .to_owned()
        };
        Self {
            http: first([ev::HTTP_PROXY, ev::HTTP_PROXY_LOWER]),
            https: first([ev::HTTPS_PROXY, ev::HTTPS_PROXY_LOWER]),
            all: first([ev::ALL_PROXY, ev::ALL_PROXY_LOWER]),
            no: first([ev::NO_PROXY, ev::NO_PROXY_LOWER]),
            cgi: env(ev::REQUEST_METHOD).is_some(),
        }
    }

    /// `NO_PROXY` holds `*`: every host goes straight, names and IP
    /// addresses (v4 and v6) alike, as curl reads it. The libraries'
    /// matchers apply `*` to names only, so a loopback or private API URL
    /// given as an address (the API key in plain HTTP) would still go
    /// through the proxy: no proxy is built at all instead.
    fn bypasses_every_host(&self) -> bool {
        self.no.split(',').any(|part| part.trim() == "*")
    }

    /// The S3 connections' route (hyper-util's rules, which reqwest
    /// follows for the same values).
    #[expect(
        clippy::disallowed_methods,
        reason = "net chooses the S3 route's proxies"
    )]
    fn matcher(&self) -> Matcher {
        if self.cgi || self.bypasses_every_host() {
            return Matcher::builder().build();
        }
        Matcher::builder()
            .http(self.http.clone())
            .https(self.https.clone())
            .all(self.all.clone())
            .no(self.no.clone())
            .build()
    }

    /// Refuses a proxy that speaks no HTTP (`socks5://` and the like):
    /// the S3 requests reach S3 through HTTP proxies only (a tunnel for
    /// `https`, a forwarded request for plain `http`), and a proxy URL the
    /// route could not use would otherwise be passed by silently. The
    /// message names the variable, never its value (it may hold a
    /// password).
    fn check(&self) -> Result<()> {
        if self.cgi {
            return Ok(());
        }
        // The API client (reqwest, WHATWG URLs: tabs and line breaks
        // dropped, hosts in any script) and the S3 route (`http::Uri`:
        // neither) read the same value: one they would read apart is
        // refused, so no request goes around a proxy the others go
        // through.
        for (name, value) in [
            (ev::HTTP_PROXY, &self.http),
            (ev::HTTPS_PROXY, &self.https),
            (ev::ALL_PROXY, &self.all),
            (ev::NO_PROXY, &self.no),
        ] {
            if value.chars().any(char::is_control) {
                anyhow::bail!(
                    "{name} holds a control character (a tab, a line break): set it to a plain proxy URL or host list (or unset it)"
                );
            }
            if name == ev::NO_PROXY || value.is_empty() {
                continue;
            }
            let url = match value.contains("://") {
                true => value.clone(),
                false => format!("http://{value}"),
            };
            let host = url
                .parse::<http::Uri>()
                .ok()
                .and_then(|u| u.host().map(str::len));
            if !url.is_ascii() || host.is_none_or(|h| h == 0) {
                anyhow::bail!(
                    "{name} is not a proxy URL every connection can use (an ASCII http://host:port; a host in another script in its punycode form): set it to http://host:port (or unset it)"
                );
            }
        }
        for (name, value) in [
            (ev::HTTP_PROXY, &self.http),
            (ev::HTTPS_PROXY, &self.https),
            (ev::ALL_PROXY, &self.all),
        ] {
            let Some((scheme, _)) = value.split_once("://") else {
                // No scheme: an HTTP proxy, as curl reads it.
                continue;
            };
            if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
                let scheme: String = scheme.chars().take(16).collect();
                anyhow::bail!(
                    "{name} names a proxy of scheme {scheme:?}, which truss-push cannot use: it goes through HTTP proxies only; set {name} to an http:// or https:// proxy URL (or unset it)"
                );
            }
        }
        Ok(())
    }

    /// The same route for reqwest: a proxy per variable set, `NO_PROXY`
    /// on each, the scheme's own before `ALL_PROXY`.
    fn reqwest_proxies(&self) -> Result<Vec<reqwest::Proxy>> {
        if self.cgi || self.bypasses_every_host() {
            return Ok(Vec::new());
        }
        #[expect(clippy::disallowed_methods, reason = "net reads the proxies")]
        let no = || reqwest::NoProxy::from_string(&self.no);
        let mut proxies = Vec::new();
        for (name, value) in [
            (ev::HTTP_PROXY, &self.http),
            (ev::HTTPS_PROXY, &self.https),
            (ev::ALL_PROXY, &self.all),
        ] {
            if value.is_empty() {
                continue;
            }
            #[expect(clippy::disallowed_methods, reason = "net reads the proxies")]
            let proxy = match name {
                ev::HTTP_PROXY => reqwest::Proxy::http(value.as_str()),
                ev::HTTPS_PROXY => reqwest::Proxy::https(value.as_str()),
                _ => reqwest::Proxy::all(value.as_str()),
            }
            .map_err(|e| {
                anyhow::anyhow!("{name} is not a proxy URL ({e}): set it to http://host:port")
            })?;
            proxies.push(proxy.no_proxy(no()));
        }
        Ok(proxies)
    }
}

/// How every S3 request travels (`s3::wire`, its own HTTP/1.1): the TLS
/// config with the run's roots, the proxy route, the user agent and the
/// connect timeout. Built by [`Network::from_env`] alone; tests have a
/// `Default` (the bundled roots, no proxy), product code none, so nothing
/// can travel on a transport the run did not build.
#[derive(Clone)]
pub(crate) struct Transport {
    pub(crate) tls: Arc<rustls::ClientConfig>,
    pub(crate) proxies: Arc<Matcher>,
    pub(crate) user_agent: String,
    pub(crate) connect_timeout: Duration,
    /// Shared by every upload of the run, so what one learned of an
    /// origin holds for the rest of the run.
    pub(crate) expectations: Arc<Expectations>,
}

/// How an origin treats `Expect: 100-continue`, once a request found out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expectation {
    /// It sent no `100` within the wait: bodies go at once, `Expect` kept.
    Ignored,
    /// It answered `417 Expectation Failed`: no `Expect` is sent there.
    Refused,
}

/// What the run learned of each origin's handling of `Expect`, by
/// `scheme://host:port`.
#[derive(Debug, Default)]
pub(crate) struct Expectations(Mutex<std::collections::HashMap<String, Expectation>>);

impl Expectations {
    pub(crate) fn of(&self, origin: &str) -> Option<Expectation> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(origin)
            .copied()
    }

    /// Records `learned`; a refusal is never undone by a later wait.
    pub(crate) fn learn(&self, origin: &str, learned: Expectation) {
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let entry = known.entry(origin.to_owned()).or_insert(learned);
        if learned == Expectation::Refused {
            *entry = learned;
        }
    }
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("user_agent", &self.user_agent)
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

impl Transport {
    fn new(tls: rustls::ClientConfig, proxies: Matcher) -> Self {
        Self {
            tls: Arc::new(tls),
            proxies: Arc::new(proxies),
            user_agent: user_agent(),
            connect_timeout: Duration::from_secs(CONNECT_TIMEOUT_SECS),
            expectations: Arc::default(),
        }
    }
}

#[cfg(test)]
impl Default for Transport {
    fn default() -> Self {
        Self::new(tls_config(&[]), Matcher::builder().build())
    }
}

/// The bundled public roots (those reqwest's `rustls-tls` embeds) plus
/// `extra_roots` (DER that [`extra_roots`] already found usable).
pub(crate) fn tls_config(extra_roots: &[Vec<u8>]) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for der in extra_roots {
        let _ = roots.add(rustls::pki_types::CertificateDer::from(der.clone()));
    }
    #[expect(clippy::disallowed_methods, reason = "net builds the run's TLS config")]
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// The run's HTTP client for Baseten and GitHub (same-origin redirects,
/// the run's roots, proxies, user agent and timeouts), built here alone:
/// other modules hold it and send through it, and cannot make one.
#[derive(Clone, Debug)]
#[expect(clippy::disallowed_types, reason = "net holds the run's client")]
pub(crate) struct HttpClient(reqwest::Client);

#[expect(clippy::disallowed_types, reason = "net hands out the run's client")]
impl std::ops::Deref for HttpClient {
    type Target = reqwest::Client;

    fn deref(&self) -> &reqwest::Client {
        &self.0
    }
}

#[cfg(test)]
impl HttpClient {
    /// Tests: a client of its own, no proxy, the bundled roots.
    pub(crate) fn plain() -> Self {
        Self(
            reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("a plain client builds"),
        )
    }
}

/// The run's network, built once from the environment the run was given
/// ([`Network::from_env`]) and handed down: the HTTP client (Baseten and
/// GitHub), the S3 connections' [`Transport`], and the one warning
/// about CA certificates that were skipped. Nothing below it reads a
/// network variable again, and it is the only builder of an HTTP client.
#[derive(Clone)]
pub(crate) struct Network {
    /// Baseten and GitHub: redirects within one origin only.
    api: HttpClient,
    transport: Transport,
    /// Taken by the first target that uses the network, so a run says it
    /// once.
    roots_warning: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network").finish_non_exhaustive()
    }
}

/// Every variable the network reads.
const NETWORK_VARS: [&str; 11] = [
    ev::SSL_CERT_FILE,
    ev::SSL_CERT_DIR,
    ev::HTTP_PROXY,
    ev::HTTP_PROXY_LOWER,
    ev::HTTPS_PROXY,
    ev::HTTPS_PROXY_LOWER,
    ev::ALL_PROXY,
    ev::ALL_PROXY_LOWER,
    ev::NO_PROXY,
    ev::NO_PROXY_LOWER,
    ev::REQUEST_METHOD,
];

impl Network {
    /// [`Network::from_env`] over the process's environment as the run was
    /// given it, where a value can be other than UTF-8: a network variable
    /// that is not is refused by its name (its value unshown: it may hold
    /// a password). Read as unset, a proxy that cannot be read would be
    /// bypassed without a word.
    pub(crate) fn from_vars(
        env: &dyn Fn(&str) -> Result<String, std::env::VarError>,
    ) -> Result<Self> {
        for name in NETWORK_VARS {
            if let Err(std::env::VarError::NotUnicode(_)) = env(name) {
                anyhow::bail!(
                    "{name} is not valid UTF-8: truss-push cannot read it, and would otherwise go without it; set it as text (or unset it)"
                );
            }
        }
        Self::from_env(&|k| env(k).ok())
    }

    /// Reads `SSL_CERT_FILE`/`SSL_CERT_DIR` and the proxy variables from
    /// `env` (each once) and builds everything the run's requests use.
    pub(crate) fn from_env(env: Env<'_>) -> Result<Self> {
        let roots = extra_roots(env)?;
        let proxies = ProxyVars::read(env);
        proxies.check()?;
        let api = HttpClient(
            builder(&roots, &proxies)?
                .redirect(same_origin_redirects())
                .build()
                .context("building the HTTP client")?,
        );
        Ok(Self {
            api,
            transport: Transport::new(tls_config(&roots.ders), proxies.matcher()),
            roots_warning: Arc::new(Mutex::new(roots.warning())),
        })
    }

    /// The client for the Baseten hosts and GitHub.
    pub(crate) fn api_client(&self) -> HttpClient {
        self.api.clone()
    }

    /// How the S3 requests travel.
    pub(crate) fn s3_transport(&self) -> Transport {
        self.transport.clone()
    }

    /// The warning about skipped CA certificates, the first time it is
    /// asked for.
    pub(crate) fn take_roots_warning(&self) -> Option<String> {
        self.roots_warning
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

/// The environment the run was given, one variable at a time.
pub(crate) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

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

fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let from = attempt.previous().last();
        if from.is_some_and(|f| follows(f, attempt.url(), attempt.previous().len())) {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// The API client's roots, proxies (none read by reqwest itself), user
/// agent and timeouts.
#[expect(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "net builds the run's HTTP clients"
)]
fn builder(roots: &ExtraRoots, proxies: &ProxyVars) -> Result<reqwest::ClientBuilder> {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .user_agent(user_agent())
        .connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_SECS))
        .pool_idle_timeout(Duration::from_secs(30))
        .no_proxy();
    for der in &roots.ders {
        let cert = reqwest::Certificate::from_der(der).context("an extra CA certificate")?;
        b = b.add_root_certificate(cert);
    }
    for proxy in proxies.reqwest_proxies()? {
        b = b.proxy(proxy);
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
        assert_eq!((roots.ders.len(), roots.skipped.len()), (2, 0));
        assert!(roots.warning().is_none());
        assert!(Network::from_env(&env).is_ok());
        assert!(extra_roots(&|_| None).unwrap().ders.is_empty());
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
        assert_eq!(roots.ders.len(), 1);
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
        // The network built from it warns once, for the whole run.
        let net = Network::from_env(&env).unwrap();
        assert_eq!(net.take_roots_warning(), Some(w));
        assert_eq!(net.clone().take_roots_warning(), None);
    }

    /// The route both the API client and the S3 connections
    /// follow comes from the variables the run was given, curl's names.
    #[test]
    fn the_proxy_route_is_read_from_the_given_environment() {
        let uri = |s: &str| s.parse::<http::Uri>().unwrap();
        let given = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let env = given(&[
            ("https_proxy", "http://ci:pw@proxy.corp:3128"),
            ("ALL_PROXY", "proxy.corp:8080"),
            ("NO_PROXY", "localhost,.internal"),
        ]);
        let vars = ProxyVars::read(&env);
        let m = vars.matcher();
        let to = |u: &str| m.intercept(&uri(u)).map(|i| i.uri().to_string());
        assert_eq!(
            to("https://bucket.s3.amazonaws.com/"),
            Some("http://proxy.corp:3128/".into())
        );
        assert_eq!(
            to("http://api.example/"),
            Some("http://proxy.corp:8080/".into())
        );
        assert_eq!(to("https://s3.internal/"), None);
        assert_eq!(to("http://localhost/"), None);
        assert_eq!(vars.reqwest_proxies().unwrap().len(), 2);
        assert!(Network::from_env(&env).is_ok());

        // `NO_PROXY=*`: nothing goes through the proxy.
        // `*` means every host, IP addresses too (curl), alone or in a list.
        for no in ["*", " localhost , * "] {
            let none = move |k: &str| match k {
                "HTTPS_PROXY" | "HTTP_PROXY" => Some("http://p:1".to_owned()),
                "no_proxy" => Some(no.to_owned()),
                _ => None,
            };
            let vars = ProxyVars::read(&none);
            for host in [
                "https://x/",
                "http://127.0.0.1:8080/",
                "https://10.1.2.3/",
                "http://[::1]:8080/",
                "https://[2001:db8::1]/",
            ] {
                assert!(
                    vars.matcher().intercept(&uri(host)).is_none(),
                    "{no}: {host}"
                );
            }
            assert!(vars.reqwest_proxies().unwrap().is_empty(), "{no}");
        }

        // A CGI environment: no proxy variable is trusted.
        let cgi = given(&[("HTTPS_PROXY", "http://p:1"), ("REQUEST_METHOD", "GET")]);
        let vars = ProxyVars::read(&cgi);
        assert!(vars.matcher().intercept(&uri("https://x/")).is_none());
        assert!(vars.reqwest_proxies().unwrap().is_empty());

        // A value reqwest cannot use is the run's error, naming it.
        let bad = given(&[("HTTPS_PROXY", "http://[::1")]);
        let err = format!("{:#}", Network::from_env(&bad).unwrap_err());
        assert!(err.contains("HTTPS_PROXY is not a proxy URL"), "{err}");
        assert!(ProxyVars::read(&|_| None) == ProxyVars::default());
    }

    /// Only HTTP proxies carry the S3 requests: any other scheme is the
    /// run's input error, naming the variable and never its password.
    #[test]
    fn a_proxy_that_speaks_no_http_is_refused_by_name() {
        let vars = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            ProxyVars::read(&move |k: &str| {
                pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
            })
        };
        for ok in ["http://p:1", "HTTPS://u:pw@p:1", "p:3128", ""] {
            assert!(vars(&[("ALL_PROXY", ok)]).check().is_ok(), "{ok}");
        }
        for (name, value) in [
            ("ALL_PROXY", "socks5h://ci:hunter2@p:1080"),
            ("HTTPS_PROXY", "socks4://p:1080"),
            ("HTTP_PROXY", "ftp://p:21"),
        ] {
            let err = vars(&[(name, value)]).check().unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("{name} names a proxy of scheme")),
                "{err}"
            );
            assert!(
                err.contains("http:// or https://") && !err.contains("hunter2"),
                "{err}"
            );
        }
        // A CGI environment uses no proxy variable, so none is refused.
        let cgi = vars(&[("ALL_PROXY", "socks5://p:1"), ("REQUEST_METHOD", "GET")]);
        assert!(cgi.check().is_ok());
    }

    /// A proxy value the API client and the S3 route would read apart (a
    /// tab or a line break, which URLs drop and URIs refuse; a host
    /// outside ASCII) is refused by its name, never its value; before,
    /// the S3 route dropped it silently and went direct.
    #[test]
    fn a_proxy_value_the_two_routes_would_read_apart_is_refused() {
        let vars = |name: &'static str, value: &'static str| {
            ProxyVars::read(&move |k: &str| (k == name).then(|| value.to_string()))
        };
        let uri = |s: &str| s.parse::<http::Uri>().unwrap();
        // What the S3 route made of such a value: no proxy at all.
        let tab = vars(ev::HTTPS_PROXY, "http://corp-pro\txy:3128");
        assert!(
            tab.matcher()
                .intercept(&uri("https://s3.example/"))
                .is_none()
        );
        for (name, value, says) in [
            (
                ev::HTTPS_PROXY,
                "http://corp-pro\txy:3128",
                "control character",
            ),
            (
                ev::HTTP_PROXY,
                "http://p:1\r\nX-Injected: 1",
                "control character",
            ),
            (
                ev::ALL_PROXY,
                "http://prøxy.corp:3128",
                "every connection can use",
            ),
            (ev::HTTPS_PROXY, "http://:3128", "every connection can use"),
            (
                ev::NO_PROXY,
                "localhost,\u{7f}internal",
                "control character",
            ),
        ] {
            let err = match vars(name, value).check() {
                Err(e) => e.to_string(),
                Ok(()) => panic!("{name}={value:?} passed"),
            };
            assert!(
                err.starts_with(name) && err.contains(says),
                "{value:?}: {err}"
            );
            assert!(!err.contains("prøxy") && !err.contains("corp-pro"), "{err}");
        }
        for ok in [
            "http://ci:pw@proxy.corp:3128",
            "proxy.corp:8080",
            "https://[::1]:3128",
            "http://xn--prxy-hra.corp:3128",
        ] {
            assert!(vars(ev::HTTPS_PROXY, ok).check().is_ok(), "{ok}");
        }
    }

    /// A network variable that is not UTF-8 is an error naming it, not a
    /// variable read as unset (a proxy bypassed without a word).
    #[test]
    fn a_network_variable_that_is_not_utf8_is_refused_by_name() {
        use std::os::unix::ffi::OsStringExt;
        for name in NETWORK_VARS {
            let env = |k: &str| {
                if k == name {
                    Err(std::env::VarError::NotUnicode(
                        std::ffi::OsString::from_vec(b"http://p\xffx:1".to_vec()),
                    ))
                } else {
                    Err(std::env::VarError::NotPresent)
                }
            };
            let err = format!("{:#}", Network::from_vars(&env).unwrap_err());
            assert!(
                err.starts_with(&format!("{name} is not valid UTF-8")),
                "{err}"
            );
        }
        let fine = |_: &str| Err(std::env::VarError::NotPresent);
        assert!(Network::from_vars(&fine).is_ok());
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
