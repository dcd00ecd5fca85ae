//! A faithful fake of Baseten for truss-push's tests: GraphQL, REST v1,
//! S3 uploads and inference on one loopback port.
//!
//! # What it serves
//!
//! One listener tells the hosts apart by `Host` header and path, so a
//! client pointed at it with base-URL overrides needs no DNS:
//!
//! | request | served as | endpoint names |
//! |---|---|---|
//! | addressed to the bucket (path-style `/{bucket}/…` or `Host: {bucket}.…`) | S3 ([`s3`], SigV4-verified) | `s3.put_object`, `s3.upload_part`, … |
//! | `Host: model-{id}.…` / `chain-{id}.…` / `model-{id}-{env}.…`, or the same as a path prefix (`/model-{id}/deployment/{dep}/predict`, `/model-{id}-{env}/predict`, `/chain-{id}/…/run_remote`) | inference ([`inference`]) | `inference.predict`, `inference.run_remote`, `inference.wake` |
//! | `POST /graphql/` | GraphQL ([`graphql`], [`resolve`]) | `graphql.<first root field>`, `graphql.invalid` |
//! | `/v1/…` | REST ([`rest`]) | `rest.get_deployment`, `rest.deactivate_deployment`, `rest.get_logs`, `rest.get_environment`, `rest.get_chain_deployment`, `rest.promote`, `rest.cancel_promotion`, `rest.force_cancel_promotion` (chains: `rest.promote_chain`), `rest.list_secrets`, `rest.list_team_secrets`, … |
//! | `/__fake/requests`, `/__fake/objects/{key}`, `/__fake/deployments`, `/__fake/clock`, `POST /__fake/others` | admin, no auth, not logged | — |
//!
//! Every REST request and answer is checked against the published
//! management API as it is served ([`schema`]); a dropped fake fails the
//! test that started it over a mismatch (an unknown path included) the test
//! did not claim with [`FakeBaseten::take_violations`]. What the fake
//! decides where the docs are silent is listed in `GUESSES.md`.
//!
//! Everything but S3 and admin needs `Authorization: Api-Key <key>` or
//! `Bearer <key>` with the scenario's key; anything else is 401 (GraphQL
//! too, before any GraphQL processing). Scripted faults ([`scenario::Fault`])
//! are applied before authentication, as a load balancer would.
//!
//! # Behaviour over time
//!
//! A [`scenario::Scenario`] (YAML) scripts each created deployment's status
//! timeline, chainlet timelines (raw statuses), environment promotions,
//! log lines, predict answers and faults, in scenario seconds on a
//! [`clock::Clock`] that is either scaled real time or manual; a manual
//! clock may also move a set step each time the fake answers a poll
//! (`Clock::advance_per_poll`), so a client reads the scenario by the count
//! of its polls, whatever the machine's speed. The first
//! published deployment of a new model (or chain) is promoted to
//! production; the promotion succeeds when the deployment first becomes
//! ready unless the scenario scripts it. Deactivation is DEACTIVATING for
//! `deactivation_seconds` (2 by default), then INACTIVE. Inference on a
//! deployment that is not ready is documented in [`inference`]. Clients
//! may also promote, cancel and force-cancel promotions themselves
//! ([`rest`]); how those behave is scripted under `promote`
//! ([`scenario`]).
//!
//! # Platform rules the fake applies
//!
//! - Create mutations (`create_model_from_truss`,
//!   `create_model_version_from_truss`, `deploy_draft_truss`,
//!   `deploy_chain_atomic`) need an `s3_key` the fake issued **and** an
//!   object stored there (checked through [`s3::FakeS3::object_exists`];
//!   `require_upload: false` in a scenario skips the second half), a
//!   base64 JSON `config`, `deploy_timeout_minutes` within 10..=1440, and a
//!   deployment name (`version_name` in G6, `name` in G7) that fully matches
//!   `[0-9A-Za-z_.-]+`. Refusals are GraphQL errors with
//!   `extensions.code` `VALIDATION_ERROR` or `RESOURCE_NOT_FOUND`.
//! - `create_model_from_truss` for a name that exists in the team is an
//!   error. Its `environment_name` may be `production` or one of the
//!   scenario's `new_model_environments` (anything else is
//!   `RESOURCE_NOT_FOUND`); without one the deployment is promoted to
//!   production.
//! - `create_model_version_from_truss`: unknown `model_id` or an
//!   environment the model lacks is `RESOURCE_NOT_FOUND`; without an
//!   environment the deployment is promoted to production only when
//!   production has nothing yet.
//! - `deploy_chain_atomic` creates the chain (first deployment → production)
//!   and one chainlet model + deployment per input; an existing chain with an
//!   unknown environment is `RESOURCE_NOT_FOUND`.
//! - GraphQL documents are validated against the schema slice truss uses:
//!   unknown fields or arguments, wrong literal types, undeclared or unused
//!   variables are errors in graphql-core's words, before anything runs.
//!
//! # In tests
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use fake_baseten::{FakeBaseten, scenario::Scenario};
//! let fake = FakeBaseten::start(Scenario::default().with_manual_clock()).await?;
//! let graphql = format!("{}/graphql/", fake.graphql_base());
//! fake.clock().advance(12.0);
//! assert!(fake.requests().is_empty());
//! # let _ = graphql; Ok(()) }
//! ```

pub mod clock;
pub mod faults;
pub mod github;
pub mod graphql;
pub mod inference;
pub mod metrics;
pub mod proxy;
pub mod reqlog;
pub mod resolve;
pub mod rest;
pub mod runner;
pub mod s3;
pub mod scenario;
pub mod schema;
pub mod server;
pub mod sigv4;
pub mod state;
pub mod status;
pub mod traffic;
pub mod workflow_log;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use tokio::sync::watch;

use crate::clock::Clock;
use crate::faults::Faults;
use crate::reqlog::{LogEntry, RequestLog};
use crate::s3::{FakeS3, S3Config};
use crate::scenario::{Fault, Scenario};
use crate::server::Shared;
use crate::state::{DeploymentSnapshot, Platform};

/// Options for starting a fake beyond what the scenario says.
#[derive(Clone, Debug)]
pub struct Builder {
    scenario: Scenario,
    host: IpAddr,
    port: u16,
    store_dir: Option<PathBuf>,
    request_log: Option<PathBuf>,
    fail_on_violations: bool,
}

impl Builder {
    /// `false`: a dropped fake does not panic over unclaimed violations of
    /// the published REST API (the `fake-baseten` binary, which records
    /// them in its request log instead). Tests keep the default, `true`.
    pub fn fail_on_violations(mut self, fail: bool) -> Self {
        self.fail_on_violations = fail;
        self
    }

    pub fn host(mut self, host: IpAddr) -> Self {
        self.host = host;
        self
    }

    /// 0 (the default) picks a free port.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Where uploaded objects are kept; a fresh temporary directory
    /// (removed on drop) otherwise.
    pub fn store_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.store_dir = Some(dir.into());
        self
    }

    /// Also append the request log, one JSON object per line, to `path`.
    pub fn request_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.request_log = Some(path.into());
        self
    }

    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.scenario.api_key = key.into();
        self
    }

    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.scenario.region = region.into();
        self
    }

    pub fn time_scale(mut self, scale: f64) -> Self {
        self.scenario.time_scale = scale;
        self
    }

    pub fn manual_clock(mut self) -> Self {
        self.scenario.manual_clock = true;
        self
    }

    /// Starts serving on the current tokio runtime.
    pub async fn start(self) -> anyhow::Result<FakeBaseten> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(self.host, self.port))
            .await
            .with_context(|| format!("while binding {}:{}", self.host, self.port))?;
        let addr = listener
            .local_addr()
            .context("while reading the bound address")?;
        let fail_on_violations = self.fail_on_violations;
        let (shared, store) = self.shared(addr)?;
        let (tx, rx) = watch::channel(false);
        tokio::spawn(server::serve(listener, shared.clone(), rx));
        Ok(FakeBaseten {
            shared,
            addr,
            shutdown: tx,
            runtime: None,
            store,
            fail_on_violations,
        })
    }

    /// Starts serving on a runtime of its own, for tests that are not async.
    pub fn start_in_background(self) -> anyhow::Result<FakeBaseten> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("fake-baseten")
            .build()
            .context("while starting the fake's runtime")?;
        let mut fake = runtime.block_on(self.start())?;
        fake.runtime = Some(runtime);
        Ok(fake)
    }

    fn shared(self, addr: SocketAddr) -> anyhow::Result<(Arc<Shared>, Store)> {
        let sc = self.scenario;
        let clock = Arc::new(if sc.manual_clock {
            Clock::manual()
        } else {
            Clock::scaled(sc.time_scale)
        });
        let store = match self.store_dir {
            Some(dir) => {
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("while creating the store dir {}", dir.display()))?;
                Store::Given(dir)
            }
            None => Store::Own(
                tempfile::Builder::new()
                    .prefix("fake-baseten-")
                    .tempdir()
                    .context("while creating a temp dir for the store")?,
            ),
        };
        let s3 = FakeS3::new(S3Config {
            bucket: sc.bucket.clone(),
            region: sc.region.clone(),
            store_dir: store.dir().to_path_buf(),
        });
        let log = RequestLog::new(self.request_log.as_deref()).with_context(|| {
            format!(
                "while opening the request log {}",
                self.request_log
                    .as_deref()
                    .unwrap_or(Path::new(""))
                    .display()
            )
        })?;
        let faults = Faults::new(&sc.faults);
        let template = format!("http://{addr}/{{prefix}}-{{id}}");
        let api_key = sc.api_key.clone();
        let platform = Platform::new(sc, template, clock.clone());
        Ok((
            Arc::new(Shared::new(api_key, clock, platform, s3, log, faults)),
            store,
        ))
    }
}

/// Where uploaded objects are kept: a directory the caller named, kept
/// after the fake stops, or a temp dir of the fake's own, removed with it.
#[derive(Debug)]
enum Store {
    Given(PathBuf),
    Own(tempfile::TempDir),
}

impl Store {
    fn dir(&self) -> &Path {
        match self {
            Store::Given(dir) => dir,
            Store::Own(temp) => temp.path(),
        }
    }
}

/// A running fake. Stops serving when dropped, and then fails the test
/// (panics) if it recorded exchanges that depart from the published REST
/// API and the test did not claim them with [`FakeBaseten::take_violations`].
pub struct FakeBaseten {
    shared: Arc<Shared>,
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    runtime: Option<tokio::runtime::Runtime>,
    store: Store,
    fail_on_violations: bool,
}

impl FakeBaseten {
    /// Starts a fake on `127.0.0.1`, a free port, on the current runtime.
    pub async fn start(scenario: Scenario) -> anyhow::Result<Self> {
        Self::builder(scenario).start().await
    }

    /// Starts a fake on a runtime of its own (for non-async tests).
    pub fn start_in_background(scenario: Scenario) -> anyhow::Result<Self> {
        Self::builder(scenario).start_in_background()
    }

    pub fn builder(scenario: Scenario) -> Builder {
        Builder {
            scenario,
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            store_dir: None,
            request_log: None,
            fail_on_violations: true,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What a client uses as the app/remote URL; GraphQL is at `{it}/graphql/`.
    pub fn graphql_base(&self) -> String {
        self.url()
    }

    /// The REST base; clients append `/v1/...`.
    pub fn rest_base(&self) -> String {
        self.url()
    }

    /// Path-style S3 endpoint: objects are at `{it}/{bucket}/{key}`.
    pub fn s3_endpoint(&self) -> String {
        self.url()
    }

    /// `http://127.0.0.1:PORT/{prefix}-{id}`: replace `{prefix}` with
    /// `model`/`chain` and `{id}` to get the URL GraphQL reports as
    /// `hostname`.
    pub fn inference_template(&self) -> String {
        format!("{}/{{prefix}}-{{id}}", self.url())
    }

    pub fn api_key(&self) -> &str {
        &self.shared.api_key
    }

    pub fn bucket(&self) -> String {
        self.shared.s3.bucket().to_string()
    }

    pub fn region(&self) -> String {
        self.shared.s3.region().to_string()
    }

    /// Every request answered (or dropped) so far, oldest first.
    pub fn requests(&self) -> Vec<LogEntry> {
        self.shared.log.entries()
    }

    pub fn s3(&self) -> &FakeS3 {
        &self.shared.s3
    }

    /// Scenario time; `set`/`advance` it when the scenario asked for a
    /// manual clock.
    pub fn clock(&self) -> &Clock {
        &self.shared.clock
    }

    /// Every model deployment (chainlets included) at the current
    /// scenario time.
    pub fn deployments(&self) -> Vec<DeploymentSnapshot> {
        let now = self.shared.clock.now();
        self.shared.platform().snapshot(now)
    }

    /// The exchanges so far that depart from the published REST API
    /// ([`schema`]), cleared: a test that provokes one on purpose claims
    /// it here, so the fake does not fail the test when dropped.
    pub fn take_violations(&self) -> Vec<schema::Violation> {
        self.shared.take_violations()
    }

    /// What environment `env` of the model (or else the chain) named
    /// `name` shows now: current and candidate deployment, promotion.
    pub fn environment(&self, name: &str, env: &str) -> Option<crate::state::EnvView> {
        let now = self.shared.clock.now();
        let mut p = self.shared.platform();
        p.settle(now);
        let envs = p
            .models
            .iter()
            .find(|m| m.name == name && m.origin != "CHAINS")
            .map(|m| &m.environments)
            .or_else(|| {
                p.chains
                    .iter()
                    .find(|c| c.name == name)
                    .map(|c| &c.environments)
            })?;
        let e = envs.iter().find(|e| e.name == env)?;
        Some(p.view(e, now))
    }

    /// Another client's action (an `others` entry's `action`), now.
    pub fn act(&self, action: crate::scenario::OtherAction) {
        let now = self.shared.clock.now();
        self.shared.platform().apply_other(action, now);
    }

    /// Ids of the model deployments deleted so far, oldest first.
    pub fn deleted_deployments(&self) -> Vec<String> {
        self.shared.platform().deleted_ids()
    }

    /// Adds a fault while running.
    pub fn add_fault(&self, fault: Fault) {
        self.shared.faults.add(fault);
    }

    /// Where uploaded objects are kept.
    pub fn store_dir(&self) -> &Path {
        self.store.dir()
    }

    /// Ids of the teams, models and chains the scenario started with, by
    /// name (`team:<name>`, `model:<name>`, `chain:<name>`).
    pub fn ids(&self) -> Vec<(String, String)> {
        let p = self.shared.platform();
        p.teams
            .iter()
            .map(|t| (format!("team:{}", t.name), t.id.clone()))
            .chain(
                p.models
                    .iter()
                    .map(|m| (format!("model:{}", m.name), m.id.clone())),
            )
            .chain(
                p.chains
                    .iter()
                    .map(|c| (format!("chain:{}", c.name), c.id.clone())),
            )
            .collect()
    }
}

impl Drop for FakeBaseten {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        // Last, so the fake is stopped either way (its own store dir goes
        // with the `store` field, even when this panics); never while
        // already unwinding (a second panic would abort the tests).
        if self.fail_on_violations && !std::thread::panicking() {
            let left = self.shared.take_violations();
            if !left.is_empty() {
                let lines: Vec<String> = left.iter().map(|v| format!("  {v}")).collect();
                panic!(
                    "the fake served or received {} exchange(s) that the published Baseten REST API does not allow (tests/fake-baseten/src/schema; claim deliberate ones with take_violations()):\n{}",
                    left.len(),
                    lines.join("\n")
                );
            }
        }
    }
}
