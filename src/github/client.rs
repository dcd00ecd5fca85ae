//! The few GitHub REST calls truss-push makes, with the token attached only
//! to the configured API base over HTTPS (plain HTTP to loopback only), and
//! failures typed so the retry loop and the warnings can tell them apart.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use reqwest::{Method, Url};
use serde_json::Value;

use crate::budget::{Clock, Phase, Spent};
use crate::retry::{self, CallKind, Classify, Policy};
use crate::secret::Secret;

/// One GitHub request may take this long; a slow GitHub must not hold the
/// deploy (or the end of the run) for long.
const REQUEST_TIMEOUT_SECS: u64 = 10;
/// The REST API version the requests are written against.
const API_VERSION: &str = "2022-11-28";
/// The largest GitHub answer read: a page of 100 comments at GitHub's own
/// limit of 65,536 characters each fits; anything larger is not an answer
/// to what was asked, and is never held whole.
pub(crate) const ANSWER_MAX_BYTES: usize = 8 << 20;

/// A create that would show twice if applied twice (a deployment, a
/// comment): sent again only when it surely never arrived.
pub(super) const CREATE: Policy = Policy {
    attempts: 3,
    max_delay: Duration::from_secs(2),
    retry_after_cap: Duration::from_secs(5),
    ..Policy::MUTATION
};

/// A request whose repetition changes nothing visible (reads, an edit, a
/// status whose latest value wins): every transient failure is tried again,
/// a few times, quickly.
pub(super) const REPEATABLE: Policy = Policy {
    attempts: 3,
    max_delay: Duration::from_secs(2),
    retry_after_cap: Duration::from_secs(5),
    ..Policy::READ
};

/// Why a GitHub request failed.
#[derive(Debug)]
pub(super) enum GhError {
    /// It never left: connection refused, DNS, TLS.
    NotSent(String),
    /// It may have arrived: the connection broke or timed out after sending.
    Ambiguous(String),
    /// GitHub answered with an error status.
    Status {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// Not sent on purpose, or the answer made no sense.
    Refused(String),
}

impl std::fmt::Display for GhError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GhError::NotSent(m) | GhError::Ambiguous(m) | GhError::Refused(m) => f.write_str(m),
            GhError::Status {
                status, message, ..
            } if message.is_empty() => write!(f, "HTTP {status}"),
            GhError::Status {
                status, message, ..
            } => write!(f, "HTTP {status}: {message}"),
        }
    }
}

impl Classify for GhError {
    fn kind(&self) -> CallKind {
        match self {
            GhError::NotSent(_) => CallKind::NotSent,
            GhError::Ambiguous(_) => CallKind::Ambiguous,
            GhError::Status { status, .. } => CallKind::Transient { status: *status },
            GhError::Refused(_) => CallKind::Permanent,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            GhError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

impl GhError {
    /// The HTTP status GitHub answered, if it answered.
    pub(super) fn status(&self) -> Option<u16> {
        match self {
            GhError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Whether a request to `url` may carry the token: HTTPS, or plain HTTP to
/// this machine (tests), the same rule as the Baseten key's.
pub(crate) fn may_carry_token(url: &Url) -> bool {
    url.scheme() == "https" || (url.scheme() == "http" && crate::baseten::is_loopback(url))
}

/// `owner/name` with only the characters GitHub allows in either part, so
/// the repository can be placed in a URL path as it is.
pub(crate) fn is_valid_repository(repo: &str) -> bool {
    let ok = |part: &str| {
        !part.is_empty()
            && part != "."
            && part != ".."
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    matches!(repo.split_once('/'), Some((owner, name)) if ok(owner) && ok(name))
}

/// The deadline of the phase GitHub's requests are made in, from the
/// run's budget, and the clock it is measured on.
#[derive(Clone, Debug)]
pub(super) struct Due {
    pub(super) phase: Phase,
    pub(super) until: Instant,
    pub(super) clock: Clock,
}

/// The REST client for one repository.
pub(super) struct Client {
    http: crate::net::HttpClient,
    base: Url,
    token: Secret,
    repo: String,
    /// The phase now under way (the start's, then the end's): every
    /// request is checked against its deadline before it is sent.
    due: Mutex<Option<Due>>,
}

impl Client {
    /// `base` must already satisfy [`may_carry_token`]; `repo` must be
    /// [`is_valid_repository`].
    pub(super) fn new(
        http: crate::net::HttpClient,
        base: Url,
        token: Secret,
        repo: String,
    ) -> Self {
        Self {
            http,
            base,
            token,
            repo,
            due: Mutex::new(None),
        }
    }

    /// From now on, requests are `due`'s phase's.
    pub(super) fn set_due(&self, due: Due) {
        *self.due.lock().unwrap_or_else(|p| p.into_inner()) = Some(due);
    }

    /// `{base}/repos/{owner}/{name}/{rest…}`, each piece one path segment.
    fn url(&self, rest: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut segs) = url.path_segments_mut() {
            segs.pop_if_empty();
            segs.push("repos");
            segs.extend(self.repo.split('/'));
            segs.extend(rest);
        }
        url
    }

    /// `GET {api}/user`: who the token is, for the tokens that may ask.
    pub(super) async fn authenticated_user(&self) -> Result<Value, GhError> {
        let mut url = self.base.clone();
        if let Ok(mut segs) = url.path_segments_mut() {
            segs.pop_if_empty();
            segs.push("user");
        }
        self.send_to(&REPEATABLE, Method::GET, url, None).await
    }

    /// Sends one request under `policy` and returns the answer's JSON
    /// (`null` for an empty body).
    pub(super) async fn send(
        &self,
        policy: &Policy,
        method: Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Value, GhError> {
        let mut url = self.url(path);
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        self.send_to(policy, method, url, body).await
    }

    async fn send_to(
        &self,
        policy: &Policy,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<Value, GhError> {
        if !may_carry_token(&url) {
            return Err(GhError::Refused(format!(
                "refusing to send the GitHub token to {} over plain HTTP",
                url.origin().ascii_serialization()
            )));
        }
        let due = self.due.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let timer = due.as_ref().map(|d| d.clock.timer(d.until));
        retry::run(policy, timer, |_| {
            self.once(due.as_ref(), method.clone(), url.clone(), body)
        })
        .await
    }

    async fn once(
        &self,
        due: Option<&Due>,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<Value, GhError> {
        // The one check before every request to GitHub: is there time
        // left in the run's budget for this phase?
        let what = format!("GitHub {method} {}", url.path());
        let left = match due {
            Some(d) => d.clock.send(Some(d.phase), Some(d.until), &what),
            None => Clock::default().send(None, None, &what),
        }
        .map_err(|Spent| GhError::Refused(format!("{what}: the run's time for GitHub is spent")))?;
        let timeout = Duration::from_secs(REQUEST_TIMEOUT_SECS).min(left.unwrap_or(Duration::MAX));
        let mut auth =
            reqwest::header::HeaderValue::from_str(&format!("Bearer {}", self.token.expose()))
                .map_err(|_| {
                    GhError::Refused("the GitHub token is not a valid header value".into())
                })?;
        auth.set_sensitive(true);
        let mut req = self
            .http
            .request(method, url)
            .timeout(timeout)
            .header(reqwest::header::AUTHORIZATION, auth)
            .header(reqwest::header::ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", API_VERSION);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| {
            let text = crate::secret::scrub(&describe(&e)).into_owned();
            if e.is_connect() {
                GhError::NotSent(text)
            } else {
                GhError::Ambiguous(text)
            }
        })?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(retry::parse_retry_after);
        let mut resp = resp;
        let body = crate::net::read_capped(&mut resp, ANSWER_MAX_BYTES)
            .await
            .map_err(|e| match e {
                crate::net::BodyError::Read(e) => GhError::Ambiguous(describe(&e)),
                too_large => GhError::Refused(format!("GitHub: {}", too_large.describe())),
            })?;
        let text = String::from_utf8_lossy(&body);
        if !(200..300).contains(&status) {
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_default();
            let message = crate::secret::scrub(&message).into_owned();
            return Err(GhError::Status {
                status,
                message: message.chars().take(300).collect(),
                retry_after,
            });
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| {
            GhError::Refused(format!("GitHub answered something that is not JSON: {e}"))
        })
    }
}

/// A reqwest error in a few words, without its URL (which holds nothing
/// secret, but is noise in a warning).
fn describe(e: &reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_body() || e.is_decode() {
        "the answer could not be read"
    } else {
        "the request failed"
    };
    let mut source = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    if detail.is_empty() {
        what.to_string()
    } else {
        format!("{what}: {detail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_goes_to_https_or_loopback_only() {
        for ok in [
            "https://api.github.com",
            "https://ghe.example.com/api/v3",
            "http://127.0.0.1:8080",
            "http://localhost:1/api/v3",
            "http://[::1]:9",
        ] {
            assert!(may_carry_token(&Url::parse(ok).unwrap()), "{ok}");
        }
        for bad in [
            "http://api.github.com",
            "http://10.0.0.1",
            "ftp://127.0.0.1",
        ] {
            assert!(!may_carry_token(&Url::parse(bad).unwrap()), "{bad}");
        }
    }

    #[test]
    fn repositories_are_owner_slash_name() {
        for ok in ["octo/repo", "my-org/my.repo_2"] {
            assert!(is_valid_repository(ok), "{ok}");
        }
        for bad in [
            "", "octo", "octo/", "/repo", "a/b/c", "a/..", "a b/c", "a/%2e",
        ] {
            assert!(!is_valid_repository(bad), "{bad}");
        }
    }

    #[test]
    fn urls_keep_the_enterprise_path_prefix() {
        let c = Client::new(
            crate::net::HttpClient::plain(),
            Url::parse("https://ghe.example.com/api/v3/").unwrap(),
            Secret::new("t"),
            "octo/repo".into(),
        );
        assert_eq!(
            c.url(&["deployments", "7", "statuses"]).as_str(),
            "https://ghe.example.com/api/v3/repos/octo/repo/deployments/7/statuses"
        );
        let c = Client::new(
            crate::net::HttpClient::plain(),
            Url::parse("https://api.github.com").unwrap(),
            Secret::new("t"),
            "octo/repo".into(),
        );
        assert_eq!(
            c.url(&["statuses", "abc"]).as_str(),
            "https://api.github.com/repos/octo/repo/statuses/abc"
        );
    }
}
