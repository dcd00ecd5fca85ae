//! Every platform URL: the API hosts, the inference hosts, and the app pages
//! shown to people. Ids from the platform are checked where answers are
//! parsed (`id`: letters and digits only) and percent-encoded as path
//! segments besides, so an id can never reach another resource.

use reqwest::Url;

/// The hosts of one platform (production by default; overridable for
/// staging and tests).
#[derive(Clone, Debug)]
pub(crate) struct Endpoints {
    pub(crate) app: Url,
    pub(crate) api: Url,
    /// `{prefix}` is `model` or `chain`, `{id}` the model/chain id (or
    /// `<id>-<environment>` for the regional host).
    pub(crate) inference: String,
    pub(crate) s3: Option<Url>,
}

/// Whether `url` names this machine (plain HTTP is allowed there, for tests).
pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost" || d.ends_with(".localhost"),
        None => false,
    }
}

/// Whether a request to `url` may carry the API key: HTTPS, or plain HTTP
/// to loopback only.
pub(crate) fn may_carry_key(url: &Url) -> bool {
    url.scheme() == "https" || (url.scheme() == "http" && is_loopback(url))
}

/// Percent-encodes one path segment (RFC 3986 unreserved characters stay).
pub(crate) fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Appends `path` to `base` whether or not `base` ends with a slash (a
/// doubled slash, as in `//graphql/`, is a different route on some hosts).
fn join(base: &Url, path: &str) -> Url {
    let mut s = base.as_str().trim_end_matches('/').to_string();
    s.push('/');
    s.push_str(path.trim_start_matches('/'));
    Url::parse(&s).expect("a valid base joined with a plain path is valid")
}

impl Endpoints {
    pub(crate) fn graphql(&self) -> Url {
        join(&self.app, "graphql/")
    }

    /// `{api}/v1/{segments…}`, each segment encoded.
    pub(crate) fn rest(&self, segments: &[&str]) -> Url {
        let path: Vec<String> = segments.iter().map(|s| seg(s)).collect();
        join(&self.api, &format!("v1/{}", path.join("/")))
    }

    /// Base of the inference host for `prefix-id`.
    fn inference_base(&self, prefix: &str, id: &str) -> String {
        self.inference
            .replace("{prefix}", prefix)
            .replace("{id}", &seg(id))
            .trim_end_matches('/')
            .to_string()
    }

    /// The smoke test of a model: the environment's regional host when
    /// asked, else this very deployment.
    pub(crate) fn model_predict(
        &self,
        model_id: &str,
        deployment_id: &str,
        regional_env: Option<&str>,
    ) -> String {
        match regional_env {
            Some(env) => format!(
                "{}/predict",
                self.inference_base("model", &format!("{model_id}-{env}"))
            ),
            None => format!(
                "{}/deployment/{}/predict",
                self.inference_base("model", model_id),
                seg(deployment_id)
            ),
        }
    }

    /// `run_remote` on the chain's regional environment host when asked,
    /// else on this very chain deployment.
    pub(crate) fn chain_run_remote(
        &self,
        chain_id: &str,
        chain_deployment_id: &str,
        regional_env: Option<&str>,
    ) -> String {
        match regional_env {
            Some(env) => format!(
                "{}/run_remote",
                self.inference_base("chain", &format!("{chain_id}-{env}"))
            ),
            None => format!(
                "{}/deployment/{}/run_remote",
                self.inference_base("chain", chain_id),
                seg(chain_deployment_id)
            ),
        }
    }

    /// The URL that serves environment `env` of a model (`prefix` "model",
    /// `endpoint` "predict") or chain ("chain", "run_remote"): the regional
    /// host when asked, else the path form on the shared host.
    pub(crate) fn environment_invoke(
        &self,
        prefix: &str,
        id: &str,
        env: &str,
        endpoint: &str,
        regional: bool,
    ) -> String {
        if regional {
            return format!(
                "{}/{endpoint}",
                self.inference_base(prefix, &format!("{id}-{env}"))
            );
        }
        let base = self.inference_base(prefix, id);
        if env == "production" {
            format!("{base}/production/{endpoint}")
        } else {
            format!("{base}/environments/{}/{endpoint}", seg(env))
        }
    }

    fn app_page(&self, segments: &[&str]) -> String {
        let path: Vec<String> = segments.iter().map(|s| seg(s)).collect();
        join(&self.app, &path.join("/")).to_string()
    }

    /// The model's overview page in the app.
    pub(crate) fn model_page(&self, model_id: &str) -> String {
        self.app_page(&["models", model_id, "overview"])
    }

    /// A model deployment's logs page in the app.
    pub(crate) fn logs_page(&self, model_id: &str, deployment_id: &str) -> String {
        self.app_page(&["models", model_id, "logs", deployment_id])
    }

    /// The workspace's secrets page in the app.
    pub(crate) fn secrets_page(&self) -> String {
        self.app_page(&["settings", "secrets"])
    }

    /// The chain's overview page in the app.
    pub(crate) fn chain_page(&self, chain_id: &str) -> String {
        self.app_page(&["chains", chain_id, "overview"])
    }

    /// The app page with one chainlet's logs.
    pub(crate) fn chainlet_logs(
        &self,
        chain_id: &str,
        chain_deployment_id: &str,
        chainlet_id: &str,
    ) -> String {
        self.app_page(&["chains", chain_id, "logs", chain_deployment_id, chainlet_id])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(app: &str) -> Endpoints {
        Endpoints {
            app: app.parse().unwrap(),
            api: "https://api.example".parse().unwrap(),
            inference: "https://{prefix}-{id}.api.example".into(),
            s3: None,
        }
    }

    #[test]
    fn urls_join_without_double_slashes() {
        for app in ["https://app.example", "https://app.example/"] {
            let e = ep(app);
            assert_eq!(e.graphql().as_str(), "https://app.example/graphql/");
            assert_eq!(e.model_page("m1"), "https://app.example/models/m1/overview");
        }
        assert_eq!(
            ep("https://app.example")
                .rest(&["models", "m", "deployments"])
                .as_str(),
            "https://api.example/v1/models/m/deployments"
        );
    }

    #[test]
    fn ids_cannot_climb_or_leave_the_path() {
        let e = ep("https://app.example");
        assert_eq!(
            e.rest(&["models", "../../x", "deactivate"]).as_str(),
            "https://api.example/v1/models/..%2F..%2Fx/deactivate"
        );
        for bad in ["", ".", "..", "a\nb", "../x", "a/b", "a%2Fb", "a?b", "a b"] {
            assert!(!super::super::id::is_usable(bad), "{bad:?}");
        }
        assert_eq!(
            e.rest(&["models", "a?b#c d"]).as_str(),
            "https://api.example/v1/models/a%3Fb%23c%20d"
        );
        assert_eq!(
            e.model_predict("m@evil", "d", Some("prod")),
            "https://model-m%40evil-prod.api.example/predict"
        );
    }

    #[test]
    fn inference_and_page_urls() {
        let e = ep("https://app.example/");
        assert_eq!(
            e.model_predict("m1", "d1", None),
            "https://model-m1.api.example/deployment/d1/predict"
        );
        assert_eq!(
            e.model_predict("m1", "d1", Some("prod")),
            "https://model-m1-prod.api.example/predict"
        );
        assert_eq!(
            e.chain_run_remote("c1", "cd1", None),
            "https://chain-c1.api.example/deployment/cd1/run_remote"
        );
        assert_eq!(
            e.chain_run_remote("c1", "cd1", Some("prod")),
            "https://chain-c1-prod.api.example/run_remote"
        );
        assert_eq!(
            e.chainlet_logs("c1", "cd1", "cl1"),
            "https://app.example/chains/c1/logs/cd1/cl1"
        );
        assert_eq!(
            e.logs_page("m1", "d1"),
            "https://app.example/models/m1/logs/d1"
        );
        assert_eq!(e.chain_page("c1"), "https://app.example/chains/c1/overview");
    }
}
