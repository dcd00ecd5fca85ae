//! Where a request's connection goes: straight to S3, through a proxy's
//! `CONNECT` tunnel (for `https` S3), or to a proxy that forwards it (for
//! plain-`http` S3), and how its request line names the target.

use std::io;

use hyper_util::client::proxy::matcher::Matcher;
use reqwest::Url;

/// Scheme, host and port: which connections may carry a request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Origin {
    pub(super) https: bool,
    pub(super) host: String,
    pub(super) port: u16,
}

impl Origin {
    /// `scheme://host:port`, how the run's memory names it.
    pub(super) fn key(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}:{}", self.host, self.port)
    }

    pub(super) fn of(url: &Url) -> io::Result<Self> {
        let https = match url.scheme() {
            "https" => true,
            "http" => false,
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("unsupported scheme {other}"),
                ));
            }
        };
        let host = url
            .host_str()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the URL has no host"))?;
        let port = url
            .port_or_known_default()
            .unwrap_or(if https { 443 } else { 80 });
        Ok(Self {
            https,
            host: unbracket(host),
            port,
        })
    }
}

/// An IPv6 literal is written with brackets in URLs, not for DNS or TLS.
fn unbracket(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned()
}

/// An HTTP proxy: its address, whether it is itself reached over TLS
/// (`https://`), and, when its URL named a user, its
/// `Proxy-Authorization`, which goes to the proxy alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Proxy {
    pub(super) https: bool,
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) auth: Option<String>,
}

/// How a request to a URL travels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// Straight to S3.
    Direct,
    /// To an `https` S3 through the proxy's `CONNECT` tunnel, TLS to S3
    /// end to end (inside the TLS to the proxy, for an `https://` one).
    Tunnel(Proxy),
    /// To a plain-`http` S3 through the proxy, which reads the request
    /// (absolute-form request-target) and forwards it.
    Forward(Proxy),
}

impl Route {
    /// The proxy on the way, if any.
    pub(super) fn proxy(&self) -> Option<&Proxy> {
        match self {
            Self::Direct => None,
            Self::Tunnel(p) | Self::Forward(p) => Some(p),
        }
    }
}

/// The route of a request to `url` by the run's proxy variables
/// (`proxies`). A proxy that speaks no HTTP (SOCKS) is refused when the
/// network is built; one met here anyway is a connect error, never a way
/// around the proxy.
pub(super) fn of(proxies: &Matcher, url: &Url) -> io::Result<Route> {
    let origin = Origin::of(url)?;
    let host = url.host_str().unwrap_or_default();
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let uri = format!("{}://{authority}/", url.scheme())
        .parse::<http::Uri>()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let Some(proxy) = proxies.intercept(&uri) else {
        return Ok(Route::Direct);
    };
    let proxy_uri = proxy.uri();
    let https = match proxy_uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the proxy for {} is a {} proxy; S3 is reached through HTTP proxies only",
                    origin.host,
                    other.unwrap_or("schemeless")
                ),
            ));
        }
    };
    let proxy = Proxy {
        https,
        host: unbracket(proxy_uri.host().unwrap_or_default()),
        port: proxy_uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
        auth: proxy
            .basic_auth()
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    Ok(if origin.https {
        Route::Tunnel(proxy)
    } else {
        Route::Forward(proxy)
    })
}

/// The request-target of a request to `url`: origin-form (`/path?query`),
/// or, to a proxy that forwards it, absolute-form (`http://host/path`).
pub(super) fn target(url: &Url, route: &Route) -> String {
    let mut target = match route {
        Route::Forward(_) => format!("{}://{}", url.scheme(), host_header(url)),
        Route::Direct | Route::Tunnel(_) => String::new(),
    };
    target.push_str(url.path());
    if let Some(query) = url.query() {
        target.push('?');
        target.push_str(query);
    }
    target
}

/// The `Host` header as signed: with the port only when the URL names one.
pub(super) fn host_header(url: &Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        (None, _) => String::new(),
    }
}
