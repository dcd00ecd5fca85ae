//! The proxy's rules: what a rule matches, when it fires, and the fault it
//! applies; plain data that parses from YAML or JSON, and the pure decision
//! of which rule (if any) fires for a request.

use serde::{Deserialize, Deserializer, Serialize};

/// A rules file: `{seed, rules: [...]}`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RuleSet {
    /// Seeds the random draws of `probability` rules and of the choice
    /// among several faults, so a run can be repeated exactly.
    pub seed: u64,
    pub rules: Vec<Rule>,
}

impl RuleSet {
    /// Parses YAML (JSON is YAML too).
    pub fn from_yaml(text: &str) -> anyhow::Result<Self> {
        let mut set: RuleSet = serde_yaml::from_str(text)?;
        set.name_rules();
        set.validate()?;
        Ok(set)
    }

    pub fn from_file(path: impl AsRef<std::path::Path>) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("while reading the proxy rules {}", path.display()))?;
        Self::from_yaml(&text)
            .with_context(|| format!("while parsing the proxy rules {}", path.display()))
    }

    /// Rules without an id are called `rule-<index>` so the log can name them.
    fn name_rules(&mut self) {
        for (i, r) in self.rules.iter_mut().enumerate() {
            if r.id.is_empty() {
                r.id = format!("rule-{i}");
            }
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        for r in &self.rules {
            r.validate()?;
        }
        Ok(())
    }
}

/// One rule: requests it matches, which of them it fires on, and the fault.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Rule {
    /// Named in the proxy log; `rule-<index>` when left empty in a file.
    pub id: String,
    #[serde(rename = "match")]
    pub matcher: Match,
    pub when: When,
    /// One fault, or several to pick from at random (seeded) each time the
    /// rule fires. `fault:` is accepted for a single one, and the word
    /// `soak` for [`Fault::soak_set`].
    #[serde(alias = "fault", deserialize_with = "one_or_many")]
    pub faults: Vec<Fault>,
}

impl Rule {
    /// A rule that applies `fault` to every request (narrow it with the
    /// `method`/`path`/`graphql`/`host` builders and `when`).
    pub fn new(id: impl Into<String>, fault: Fault) -> Self {
        Self {
            id: id.into(),
            matcher: Match::default(),
            when: When::Every,
            faults: vec![fault],
        }
    }

    /// The soak mode: each request, whatever it is, is faulted with
    /// probability `fraction`, the fault drawn from `faults`.
    pub fn chaos(id: impl Into<String>, fraction: f64, faults: Vec<Fault>) -> Self {
        Self {
            id: id.into(),
            matcher: Match::default(),
            when: When::Probability(fraction),
            faults,
        }
    }

    pub fn method(mut self, method: &str) -> Self {
        self.matcher.method = Some(method.to_string());
        self
    }

    pub fn path(mut self, prefix: &str) -> Self {
        self.matcher.path_prefix = Some(prefix.to_string());
        self
    }

    /// Matches the whole path against `pattern`, where a `*` segment
    /// stands for any one segment: `/v1/models/m1/deployments/*` is a
    /// deployment's status read, not its `/logs`.
    pub fn path_like(mut self, pattern: &str) -> Self {
        self.matcher.path_like = Some(pattern.to_string());
        self
    }

    /// Matches a GraphQL request whose operation name or one of whose root
    /// fields is `name` (`create_model_from_truss`).
    pub fn graphql(mut self, name: &str) -> Self {
        self.matcher.graphql = Some(name.to_string());
        self
    }

    pub fn host(mut self, prefix: &str) -> Self {
        self.matcher.host_prefix = Some(prefix.to_string());
        self
    }

    pub fn when(mut self, when: When) -> Self {
        self.when = when;
        self
    }

    /// Fires on the `n`-th matching request only (1-based).
    pub fn nth(self, n: u32) -> Self {
        self.when(When::Nth(n))
    }

    /// Fires on the first `n` matching requests.
    pub fn first(self, n: u32) -> Self {
        self.when(When::First(n))
    }

    /// Fires on every matching request after the first `n`.
    pub fn after(self, n: u32) -> Self {
        self.when(When::After(n))
    }

    fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.faults.is_empty(),
            "rule {}: give a `fault` or a list of `faults`",
            self.id
        );
        match self.when {
            When::Nth(0) => anyhow::bail!("rule {}: `nth` counts from 1, got 0", self.id),
            When::Probability(p) if !(0.0..=1.0).contains(&p) => {
                anyhow::bail!(
                    "rule {}: `probability` must be within 0..=1, got {p}",
                    self.id
                )
            }
            _ => {}
        }
        for f in &self.faults {
            f.validate()
                .map_err(|e| anyhow::anyhow!("rule {}: {e}", self.id))?;
        }
        Ok(())
    }
}

/// What a rule looks at; every field given must match.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Match {
    /// HTTP method, any case.
    pub method: Option<String>,
    /// Prefix of the path (query excluded): `/v1/`, `/graphql/`, `/model-`.
    #[serde(alias = "path")]
    pub path_prefix: Option<String>,
    /// The whole path (query excluded), a `*` segment standing for any one
    /// segment: `/v1/models/m1/deployments/*`.
    pub path_like: Option<String>,
    /// A GraphQL operation name or root field name sent in the body.
    pub graphql: Option<String>,
    /// Prefix of the `Host` header.
    #[serde(alias = "host")]
    pub host_prefix: Option<String>,
}

/// What the proxy knows of a request when it decides.
#[derive(Clone, Debug, Default)]
pub struct RequestFacts<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub host: &'a str,
    /// Operation names and root fields of a GraphQL body; empty otherwise.
    pub graphql: &'a [String],
}

impl Match {
    pub fn matches(&self, seen: &RequestFacts<'_>) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(seen.method))
            && self
                .path_prefix
                .as_deref()
                .is_none_or(|p| seen.path.starts_with(p))
            && self
                .path_like
                .as_deref()
                .is_none_or(|p| path_like(seen.path, p))
            && self
                .host_prefix
                .as_deref()
                .is_none_or(|h| seen.host.starts_with(h))
            && self
                .graphql
                .as_deref()
                .is_none_or(|g| seen.graphql.iter().any(|n| n == g))
    }
}

/// Whether `path` has `pattern`'s segments, a `*` matching any one.
fn path_like(path: &str, pattern: &str) -> bool {
    let (mut path, mut pattern) = (path.split('/'), pattern.split('/'));
    loop {
        match (path.next(), pattern.next()) {
            (None, None) => return true,
            (Some(seg), Some(want)) if want == "*" || want == seg => {}
            _ => return false,
        }
    }
}

/// Which matching requests a rule fires on, counted per rule. Written
/// `every`, `{nth: 2}`, `{first: 3}` or `{probability: 0.2}`.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(try_from = "WhenRepr", into = "WhenRepr")]
pub enum When {
    #[default]
    Every,
    /// Only the n-th (1-based).
    Nth(u32),
    /// The first n.
    First(u32),
    /// Every one after the first n.
    After(u32),
    /// Each with this probability, drawn from the seeded generator.
    Probability(f64),
}

/// What the proxy does instead of (or on top of) forwarding.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Forward, read the fake's whole answer, then close the connection
    /// without sending a byte: the request took effect, the client never
    /// hears of it.
    DropAfterForward,
    /// Read the request, then reset the connection (RST) without
    /// forwarding: nothing took effect.
    ResetBeforeForward,
    /// Never answer; the connection stays open until the client closes it.
    Hang,
    /// Forward, then send the answer (status line and headers included)
    /// `bytes` at a time, `interval_ms` apart.
    Drip {
        #[serde(default = "one")]
        bytes: usize,
        #[serde(default = "hundred")]
        interval_ms: u64,
    },
    /// Answer 429 with this `Retry-After` without forwarding.
    TooManyRequests {
        #[serde(deserialize_with = "text_or_number")]
        retry_after: String,
    },
    /// Answer an HTML error page (a load balancer's) without forwarding;
    /// `echo` is written into the page verbatim.
    HtmlError {
        #[serde(default = "bad_gateway")]
        status: u16,
        #[serde(default)]
        echo: Option<String>,
    },
    /// Answer any status and body without forwarding.
    Status {
        status: u16,
        #[serde(default, deserialize_with = "opt_text_or_number")]
        retry_after: Option<String>,
        #[serde(default)]
        body: Option<String>,
        #[serde(default)]
        content_type: Option<String>,
    },
    /// Forward, then send only the first `keep` bytes of the body (half
    /// when absent), declaring either the cut length (a well-formed answer
    /// with broken JSON) or the original one (the connection closes short).
    TruncatedJson {
        #[serde(default)]
        keep: Option<usize>,
        #[serde(default)]
        content_length: DeclaredLength,
    },
    /// Answer a redirect without forwarding.
    Redirect {
        #[serde(default = "temporary_redirect")]
        status: u16,
        to: RedirectTo,
    },
}

/// The `Content-Length` a truncated answer declares.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum DeclaredLength {
    /// The length of what is sent: framing is right, the JSON is cut.
    #[default]
    Truncated,
    /// The fake's full length: the connection closes before the body ends.
    Original,
}

/// Where a redirect points. Written `http_same_host`, `sink`,
/// `{path: /other}` or `{url: "http://…"}`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(try_from = "RedirectRepr", into = "RedirectRepr")]
pub enum RedirectTo {
    /// The same host (the request's `Host`), another path.
    Path(String),
    /// `http://` + the request's `Host` + the same path and query: the
    /// plain-HTTP form of where the client already is.
    HttpSameHost,
    /// The proxy's sink server (another loopback port), same path and query.
    Sink,
    /// Exactly this `Location`.
    Url(String),
}

impl Fault {
    /// A short name for the log: `drop_after_forward`, `status 503`, ….
    pub fn describe(&self) -> String {
        match self {
            Fault::DropAfterForward => "drop_after_forward".into(),
            Fault::ResetBeforeForward => "reset_before_forward".into(),
            Fault::Hang => "hang".into(),
            Fault::Drip { bytes, interval_ms } => format!("drip {bytes}B/{interval_ms}ms"),
            Fault::TooManyRequests { retry_after } => format!("429 retry-after {retry_after}"),
            Fault::HtmlError { status, .. } => format!("html {status}"),
            Fault::Status { status, .. } => format!("status {status}"),
            Fault::TruncatedJson { content_length, .. } => match content_length {
                DeclaredLength::Truncated => "truncated_json".into(),
                DeclaredLength::Original => "truncated_json original-length".into(),
            },
            Fault::Redirect { status, to } => {
                let to = match to {
                    RedirectTo::Path(p) => format!("path {p}"),
                    RedirectTo::HttpSameHost => "http same host".into(),
                    RedirectTo::Sink => "sink".into(),
                    RedirectTo::Url(u) => format!("url {u}"),
                };
                format!("redirect {status} {to}")
            }
        }
    }

    /// Whether the fake sees the request.
    pub fn forwards(&self) -> bool {
        matches!(
            self,
            Fault::DropAfterForward | Fault::Drip { .. } | Fault::TruncatedJson { .. }
        )
    }

    /// The faults of the soak: resets before and after the body, 5xx,
    /// 429 and slow answers.
    pub fn soak_set() -> Vec<Fault> {
        vec![
            Fault::ResetBeforeForward,
            Fault::DropAfterForward,
            Fault::Status {
                status: 503,
                retry_after: None,
                body: None,
                content_type: None,
            },
            Fault::HtmlError {
                status: 502,
                echo: None,
            },
            Fault::TooManyRequests {
                retry_after: "1".into(),
            },
            Fault::Drip {
                bytes: 64,
                interval_ms: 20,
            },
        ]
    }

    fn validate(&self) -> anyhow::Result<()> {
        let status = match self {
            Fault::HtmlError { status, .. } | Fault::Status { status, .. } => Some(*status),
            Fault::Redirect { status, .. } => {
                anyhow::ensure!(
                    matches!(status, 301 | 302 | 303 | 307 | 308),
                    "a redirect status is 301, 302, 303, 307 or 308, got {status}"
                );
                None
            }
            Fault::Drip { bytes: 0, .. } => anyhow::bail!("`drip` needs `bytes` of at least 1"),
            _ => None,
        };
        if let Some(s) = status {
            anyhow::ensure!((100..=999).contains(&s), "status {s} is not an HTTP status");
        }
        Ok(())
    }
}

// serde_yaml reads externally tagged enums only from `!tag` syntax; these
// plain shapes accept the `word` and `{key: value}` forms YAML and JSON
// writers expect.
#[derive(Deserialize, Serialize)]
#[serde(untagged, deny_unknown_fields)]
enum WhenRepr {
    Word(String),
    Nth { nth: u32 },
    First { first: u32 },
    After { after: u32 },
    Probability { probability: f64 },
}

impl TryFrom<WhenRepr> for When {
    type Error = String;
    fn try_from(r: WhenRepr) -> Result<Self, String> {
        Ok(match r {
            WhenRepr::Word(w) if w == "every" => When::Every,
            WhenRepr::Word(w) => {
                return Err(format!(
                    "`when` is `every`, {{nth: N}}, {{first: N}}, {{after: N}} or {{probability: P}}, got {w:?}"
                ));
            }
            WhenRepr::Nth { nth } => When::Nth(nth),
            WhenRepr::First { first } => When::First(first),
            WhenRepr::After { after } => When::After(after),
            WhenRepr::Probability { probability } => When::Probability(probability),
        })
    }
}

impl From<When> for WhenRepr {
    fn from(w: When) -> Self {
        match w {
            When::Every => WhenRepr::Word("every".into()),
            When::Nth(nth) => WhenRepr::Nth { nth },
            When::First(first) => WhenRepr::First { first },
            When::After(after) => WhenRepr::After { after },
            When::Probability(probability) => WhenRepr::Probability { probability },
        }
    }
}

#[derive(Deserialize, Serialize)]
#[serde(untagged, deny_unknown_fields)]
enum RedirectRepr {
    Word(String),
    Path { path: String },
    Url { url: String },
}

impl TryFrom<RedirectRepr> for RedirectTo {
    type Error = String;
    fn try_from(r: RedirectRepr) -> Result<Self, String> {
        Ok(match r {
            RedirectRepr::Word(w) if w == "http_same_host" => RedirectTo::HttpSameHost,
            RedirectRepr::Word(w) if w == "sink" => RedirectTo::Sink,
            RedirectRepr::Word(w) => {
                return Err(format!(
                    "a redirect goes `to` http_same_host, sink, {{path: P}} or {{url: U}}, got {w:?}"
                ));
            }
            RedirectRepr::Path { path } => RedirectTo::Path(path),
            RedirectRepr::Url { url } => RedirectTo::Url(url),
        })
    }
}

impl From<RedirectTo> for RedirectRepr {
    fn from(t: RedirectTo) -> Self {
        match t {
            RedirectTo::HttpSameHost => RedirectRepr::Word("http_same_host".into()),
            RedirectTo::Sink => RedirectRepr::Word("sink".into()),
            RedirectTo::Path(path) => RedirectRepr::Path { path },
            RedirectTo::Url(url) => RedirectRepr::Url { url },
        }
    }
}

fn one() -> usize {
    1
}
fn hundred() -> u64 {
    100
}
fn bad_gateway() -> u16 {
    502
}
fn temporary_redirect() -> u16 {
    307
}

/// Goes through a YAML value rather than an untagged enum so that a bad
/// fault is reported as itself (`unknown variant explode`), not as "did not
/// match any variant".
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Fault>, D::Error> {
    use serde::de::Error as _;
    let v = serde_yaml::Value::deserialize(d)?;
    if v.as_str() == Some("soak") {
        Ok(Fault::soak_set())
    } else if v.is_sequence() {
        serde_yaml::from_value(v).map_err(D::Error::custom)
    } else {
        serde_yaml::from_value(v)
            .map(|f| vec![f])
            .map_err(D::Error::custom)
    }
}

/// `Retry-After: 999999` reads as a number in YAML; the header is text
/// (it may also be an HTTP date or deliberate junk).
#[derive(Deserialize)]
#[serde(untagged)]
enum TextOrNumber {
    Text(String),
    Int(u64),
    Float(f64),
}

impl TextOrNumber {
    fn into_text(self) -> String {
        match self {
            TextOrNumber::Text(s) => s,
            TextOrNumber::Int(n) => n.to_string(),
            TextOrNumber::Float(f) => f.to_string(),
        }
    }
}

fn text_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(TextOrNumber::deserialize(d)?.into_text())
}

fn opt_text_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<TextOrNumber>::deserialize(d)?.map(TextOrNumber::into_text))
}

/// Per-rule counts and the seeded generator: decides which rule fires.
#[derive(Debug)]
pub struct Book {
    rules: Vec<(Rule, u32)>,
    rng: fastrand::Rng,
}

/// A rule that fired and the fault it picked.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub rule: String,
    pub fault: Fault,
}

impl Book {
    pub fn new(set: RuleSet) -> Self {
        Self {
            rules: set.rules.into_iter().map(|r| (r, 0)).collect(),
            rng: fastrand::Rng::with_seed(set.seed),
        }
    }

    pub fn add(&mut self, rule: Rule) {
        self.rules.push((rule, 0));
    }

    pub fn clear(&mut self) {
        self.rules.clear();
    }

    /// Counts the request against every rule it matches; the first of those
    /// (in order) that fires decides.
    pub fn decide(&mut self, seen: &RequestFacts<'_>) -> Option<Decision> {
        let mut fired = None;
        for (rule, count) in &mut self.rules {
            if !rule.matcher.matches(seen) {
                continue;
            }
            *count = count.saturating_add(1);
            if fired.is_some() {
                continue;
            }
            let fires = match rule.when {
                When::Every => true,
                When::Nth(n) => *count == n,
                When::First(n) => *count <= n,
                When::After(n) => *count > n,
                When::Probability(p) => self.rng.f64() < p,
            };
            if fires && !rule.faults.is_empty() {
                let i = if rule.faults.len() == 1 {
                    0
                } else {
                    self.rng.usize(..rule.faults.len())
                };
                fired = Some(Decision {
                    rule: rule.id.clone(),
                    fault: rule.faults[i].clone(),
                });
            }
        }
        fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen<'a>(method: &'a str, path: &'a str, graphql: &'a [String]) -> RequestFacts<'a> {
        RequestFacts {
            method,
            path,
            host: "127.0.0.1:1",
            graphql,
        }
    }

    #[test]
    fn matchers() {
        let create = vec!["create_model_from_truss".to_string()];
        let r = Rule::new("r", Fault::Hang)
            .method("post")
            .path("/graphql/")
            .graphql("create_model_from_truss");
        assert!(r.matcher.matches(&seen("POST", "/graphql/", &create)));
        assert!(!r.matcher.matches(&seen("GET", "/graphql/", &create)));
        assert!(!r.matcher.matches(&seen("POST", "/graphql/", &[])));
        assert!(!r.matcher.matches(&seen("POST", "/v1/x", &create)));
        let h = Rule::new("h", Fault::Hang).host("model-");
        assert!(!h.matcher.matches(&seen("POST", "/", &[])));
        assert!(
            Rule::new("any", Fault::Hang)
                .matcher
                .matches(&seen("PUT", "/b/k", &[]))
        );
        let status = Rule::new("s", Fault::Hang).path_like("/v1/models/m1/deployments/*");
        assert!(
            status
                .matcher
                .matches(&seen("GET", "/v1/models/m1/deployments/d1", &[]))
        );
        for other in [
            "/v1/models/m1/deployments/d1/logs",
            "/v1/models/m1/deployments",
            "/v1/models/m2/deployments/d1",
        ] {
            assert!(!status.matcher.matches(&seen("GET", other, &[])), "{other}");
        }
    }

    #[test]
    fn occurrences_count_per_rule() {
        let mut book = Book::new(RuleSet {
            seed: 1,
            rules: vec![
                Rule::new("second", Fault::Hang).path("/a").nth(2),
                Rule::new("first-two", Fault::ResetBeforeForward).first(2),
            ],
        });
        let fired: Vec<Option<String>> = ["/a", "/a", "/b", "/a"]
            .into_iter()
            .map(|p| book.decide(&seen("GET", p, &[])).map(|d| d.rule))
            .collect();
        assert_eq!(
            fired,
            [Some("first-two".into()), Some("second".into()), None, None]
        );
    }

    #[test]
    fn probability_is_seeded() {
        let run = |seed| {
            let mut book = Book::new(RuleSet {
                seed,
                rules: vec![Rule::chaos("soak", 0.2, Fault::soak_set())],
            });
            (0..1000)
                .map(|_| {
                    book.decide(&seen("GET", "/", &[]))
                        .map(|d| d.fault.describe())
                })
                .collect::<Vec<_>>()
        };
        let a = run(7);
        assert_eq!(a, run(7));
        let hits = a.iter().flatten().count();
        assert!((150..250).contains(&hits), "{hits} of 1000 faulted");
        let kinds: std::collections::BTreeSet<_> = a.iter().flatten().collect();
        assert_eq!(kinds.len(), Fault::soak_set().len());
    }

    #[test]
    fn yaml_rules() {
        let set = RuleSet::from_yaml(
            r#"
seed: 42
rules:
  - id: drop-create
    match: {graphql: create_model_from_truss}
    when: {nth: 1}
    fault: {kind: drop_after_forward}
  - match: {method: GET, path: /v1/}
    fault: {kind: too_many_requests, retry_after: 999999}
  - match: {host: "model-"}
    fault: {kind: redirect, status: 308, to: sink}
  - fault: {kind: redirect, to: {path: /elsewhere}}
  - fault: {kind: html_error, echo: "key=abc"}
  - {when: {probability: 0.1}, faults: soak}
  - when: {probability: 0.2}
    faults:
      - kind: reset_before_forward
      - {kind: drip, bytes: 16, interval_ms: 5}
      - {kind: truncated_json, content_length: original}
      - {kind: status, status: 503, retry_after: 1}
"#,
        )
        .unwrap();
        assert_eq!(set.seed, 42);
        assert_eq!(set.rules[0].id, "drop-create");
        assert_eq!(set.rules[0].when, When::Nth(1));
        assert_eq!(set.rules[1].id, "rule-1");
        assert_eq!(
            set.rules[1].faults,
            [Fault::TooManyRequests {
                retry_after: "999999".into()
            }]
        );
        assert_eq!(
            set.rules[2].faults[0],
            Fault::Redirect {
                status: 308,
                to: RedirectTo::Sink
            }
        );
        assert_eq!(
            set.rules[3].faults[0],
            Fault::Redirect {
                status: 307,
                to: RedirectTo::Path("/elsewhere".into())
            }
        );
        assert_eq!(set.rules[5].faults, Fault::soak_set());
        assert_eq!(set.rules[6].when, When::Probability(0.2));
        assert_eq!(set.rules[6].faults.len(), 4);
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(RuleSet::from_yaml(&json).unwrap(), set);
    }

    #[test]
    fn bad_rules_are_refused() {
        for (text, want) in [
            ("rules: [{match: {}}]", "give a `fault`"),
            (
                "rules: [{when: {nth: 0}, fault: {kind: hang}}]",
                "counts from 1",
            ),
            (
                "rules: [{when: {probability: 2}, fault: {kind: hang}}]",
                "within 0..=1",
            ),
            (
                "rules: [{fault: {kind: redirect, status: 200, to: sink}}]",
                "redirect status",
            ),
            ("rules: [{fault: {kind: explode}}]", "explode"),
        ] {
            let err = format!("{:#}", RuleSet::from_yaml(text).unwrap_err());
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
