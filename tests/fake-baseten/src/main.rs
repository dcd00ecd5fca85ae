//! `fake-baseten`: run the fake by hand or from scripts.
//!
//! Prints one JSON line with the URL and the four bases once listening
//! (and, with `--proxy-rules`, a `proxy` object with the fault proxy's
//! bases and sink; with `--shaped-link`, a `shaped` object with the shaped
//! link's), then serves until SIGINT/SIGTERM.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fake_baseten::FakeBaseten;
use fake_baseten::proxy::{FaultProxy, RuleSet, Shape, ShapedLink};
use fake_baseten::scenario::Scenario;

/// A faithful fake of Baseten (GraphQL, REST v1, S3, inference) on one port.
#[derive(Debug, Parser)]
#[command(name = "fake-baseten", version)]
struct Args {
    /// Scenario YAML file (see tests/fake-baseten/scenarios/).
    #[arg(long, env = "FAKE_BASETEN_SCENARIO")]
    scenario: PathBuf,
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// API key clients must send (overrides the scenario's).
    #[arg(long, env = "FAKE_BASETEN_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Bucket region (overrides the scenario's).
    #[arg(long)]
    region: Option<String>,
    /// Where uploaded objects are kept (a temporary directory otherwise).
    #[arg(long)]
    store_dir: Option<PathBuf>,
    /// Append the request log here, one JSON object per line.
    #[arg(long)]
    request_log: Option<PathBuf>,
    /// Scenario seconds per real second (overrides the scenario's).
    #[arg(long)]
    time_scale: Option<f64>,
    /// Also start a fault-injecting proxy in front of the fake, driven by
    /// this rules file (YAML or JSON; see the `proxy` module).
    #[arg(long)]
    proxy_rules: Option<PathBuf>,
    /// Append the proxy's log here, one JSON object per line.
    #[arg(long, requires = "proxy_rules")]
    proxy_log: Option<PathBuf>,
    /// Also start a shaped link (round-trip delay, rate caps) in front of
    /// the proxy, or of the fake when there is no proxy:
    /// `rtt=30ms,conn=40MB/s,total=400MB/s` (see the `proxy::shape` module).
    #[arg(long)]
    shaped_link: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fake-baseten: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let scenario = Scenario::from_file(&args.scenario)?;
    let proxy_rules = args
        .proxy_rules
        .as_deref()
        .map(RuleSet::from_file)
        .transpose()?;
    let shape = args.shaped_link.as_deref().map(Shape::parse).transpose()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut b = FakeBaseten::builder(scenario)
            .fail_on_violations(false)
            .host(args.host)
            .port(args.port);
        if let Some(k) = args.api_key {
            b = b.api_key(k);
        }
        if let Some(r) = args.region {
            b = b.region(r);
        }
        if let Some(d) = args.store_dir {
            b = b.store_dir(d);
        }
        if let Some(l) = args.request_log {
            b = b.request_log(l);
        }
        if let Some(s) = args.time_scale {
            anyhow::ensure!(
                s.is_finite() && s > 0.0,
                "--time-scale must be a positive number, got {s}"
            );
            b = b.time_scale(s);
        }
        let signals = Signals::register()?;
        let fake = b.start().await?;
        let mut bases = serde_json::json!({
            "url": fake.url(),
            "graphql_base": fake.graphql_base(),
            "rest_base": fake.rest_base(),
            "s3_endpoint": fake.s3_endpoint(),
            "inference_template": fake.inference_template(),
            "bucket": fake.bucket(),
            "region": fake.region(),
        });
        let proxy = match proxy_rules {
            Some(rules) => {
                let mut p = FaultProxy::builder(fake.addr())
                    .host(args.host)
                    .rules(rules);
                if let Some(l) = args.proxy_log {
                    p = p.log_file(l);
                }
                let proxy = p.start().await?;
                bases["proxy"] = serde_json::json!({
                    "url": proxy.url(),
                    "graphql_base": proxy.graphql_base(),
                    "rest_base": proxy.rest_base(),
                    "s3_endpoint": proxy.s3_endpoint(),
                    "inference_template": proxy.inference_template(),
                    "sink_url": proxy.sink_url(),
                });
                Some(proxy)
            }
            None => None,
        };
        let link = match shape {
            Some(shape) => {
                let upstream = proxy.as_ref().map_or(fake.addr(), FaultProxy::addr);
                let link = ShapedLink::start_on(args.host, upstream, shape).await?;
                bases["shaped"] = serde_json::json!({
                    "url": link.url(),
                    "graphql_base": link.url(),
                    "rest_base": link.url(),
                    "s3_endpoint": link.url(),
                    "inference_template": format!("{}/{{prefix}}-{{id}}", link.url()),
                });
                Some(link)
            }
            None => None,
        };
        println!("{bases}");
        signals.wait().await;
        drop(link);
        drop(proxy);
        drop(fake);
        Ok(())
    })
}

/// SIGINT or SIGTERM. Registered before the listening line is printed, so
/// a script that signals right after reading it is never too early.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn register() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}
