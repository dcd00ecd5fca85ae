//! One run from inputs to exit code: validate, deploy (racing the
//! cancellation signals), clean up, and write the outputs on every path.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::ci::{self, CiEnv, Reporter};
use crate::cli::Cli;
use crate::config::{self, Config, Target};
use crate::flow::{self, Ctx, State};
use crate::kind::Kind;
use crate::outcome::{CancelReason, Failure};
use crate::report::{self, install_panic_hook, report};
use crate::{archive, baseten, chain, github, model, net};

/// Reads one environment variable as `std::env::var` does, so a value that
/// is not UTF-8 is told apart from an unset one.
pub(crate) type EnvLookup = Box<dyn Fn(&str) -> Result<String, std::env::VarError> + Send + Sync>;

/// Everything a run needs from the outside world, so tests can run it
/// in-process.
pub struct Io {
    pub env: EnvLookup,
    pub reporter: Reporter,
    /// Write the outputs and exit 1 should anything panic (the process, not
    /// an in-process test).
    pub exit_on_panic: bool,
}

impl Io {
    /// The real process environment and stdio.
    pub fn process() -> Self {
        let env = |k: &str| std::env::var(k);
        let kind = CiEnv::from_lookup(|k| env(k).ok()).kind();
        Self {
            env: Box::new(env),
            reporter: Reporter::stdio(kind),
            exit_on_panic: true,
        }
    }
}

/// The signals that stop a run: SIGINT (GitHub's cancel, Ctrl-C), SIGTERM
/// (GitHub 7.5 s later, `docker stop`, Kubernetes) and SIGHUP (a closed
/// terminal or a CI agent's session ending). Installed when the run starts,
/// so no phase runs without them.
pub(crate) struct Signals {
    int: Option<tokio::signal::unix::Signal>,
    term: Option<tokio::signal::unix::Signal>,
    hup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn install() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        Self {
            int: signal(SignalKind::interrupt()).ok(),
            term: signal(SignalKind::terminate()).ok(),
            hup: signal(SignalKind::hangup()).ok(),
        }
    }

    /// Waits for the next signal and names it. A signal whose handler could
    /// not be installed keeps its default action (the process ends).
    pub(crate) async fn next(&mut self) -> &'static str {
        async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            _ = recv(&mut self.int) => "SIGINT",
            _ = recv(&mut self.term) => "SIGTERM",
            _ = recv(&mut self.hup) => "SIGHUP",
        }
    }
}

/// Why the targets of a several-target run should stop: the signals the
/// process received, and whether `fail-fast` called the others off.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Halt {
    pub(crate) signals: u32,
    pub(crate) last_signal: &'static str,
    pub(crate) fail_fast: bool,
}

/// What stops one deploy: the process's own signals (one target), or the
/// [`Halt`] every target of a several-target run watches.
pub(crate) enum Stop<'a> {
    Process(&'a mut Signals),
    Shared {
        halt: tokio::sync::watch::Receiver<Halt>,
        /// Signals already acted on.
        seen: u32,
    },
}

impl Stop<'_> {
    /// Waits until the deploy must stop, and says why.
    async fn flow(&mut self) -> CancelReason {
        match self {
            Stop::Process(s) => CancelReason::Signal(s.next().await),
            Stop::Shared { halt, seen } => {
                let h = match halt.wait_for(|h| h.signals > 0 || h.fail_fast).await {
                    Ok(h) => *h,
                    Err(_) => return std::future::pending().await,
                };
                *seen = h.signals;
                if h.signals > 0 {
                    CancelReason::Signal(h.last_signal)
                } else {
                    CancelReason::FailFast
                }
            }
        }
    }

    /// Waits for a signal not yet acted on: during cleanup only a signal
    /// (a second one, after a cancel) stops it, never fail-fast.
    pub(crate) async fn cleanup(&mut self) -> &'static str {
        match self {
            Stop::Process(s) => s.next().await,
            Stop::Shared { halt, seen } => {
                let before = *seen;
                let h = match halt.wait_for(|h| h.signals > before).await {
                    Ok(h) => *h,
                    Err(_) => return std::future::pending().await,
                };
                *seen = h.signals;
                h.last_signal
            }
        }
    }
}

/// Runs the whole job and returns the process exit code. `parse_error` is a
/// command-line error already found by clap: it is reported like any bad
/// input, with outputs written.
pub async fn run(cli: Cli, parse_error: Option<String>, io: Io) -> u8 {
    let env = io.env;
    let mut signals = Signals::install();
    let ci_env = CiEnv::from_lookup(|k| env(k).ok());
    let rep = Arc::new(Mutex::new(io.reporter));
    let inputs = cli.gather(&*env);
    let (out_settings, out_err) = config::output_settings(&inputs);
    if out_settings.json || config::stdout_is_data(&inputs) {
        // Nothing but the document goes to stdout from here on, masks
        // included (the runner reads commands on stderr too): an empty
        // piece of data turns every log line to stderr.
        rep.lock().unwrap().data("");
    }
    for secret in ["baseten-api-key", "github-token"] {
        if let Some(k) = inputs.trimmed(secret) {
            rep.lock().unwrap().mask(k);
            crate::secret::register(k);
        }
    }
    let started = Instant::now();
    let state = Arc::new(Mutex::new(State {
        model_name: config::best_effort_model_name(&inputs),
        ..State::default()
    }));
    if io.exit_on_panic {
        let key = inputs.trimmed("baseten-api-key").unwrap_or_default();
        install_panic_hook(
            ci_env.clone(),
            out_settings.clone(),
            Arc::clone(&state),
            key.to_string(),
        );
    }

    let early = match (parse_error, out_err) {
        (Some(e), _) | (None, Some(e)) => Some(e),
        (None, None) => None,
    };
    // Several targets, a plan or change detection take their own road; one
    // target named plainly takes today's, unchanged.
    if early.is_none() {
        let plan = inputs
            .trimmed("plan")
            .map(|v| config::parse_bool("plan", v))
            .transpose();
        let fan = match plan {
            Err(e) => Some((Err(Failure::InvalidInput(e)), None)),
            Ok(Some(true)) => Some(crate::plan::run(&inputs, &*env, &rep, out_settings.json)),
            Ok(_) if crate::multi::wanted(&inputs) => {
                Some(crate::multi::run(&inputs, &*env, &rep, &state, &mut signals).await)
            }
            Ok(_) => None,
        };
        if let Some((result, fanout)) = fan {
            return report(
                &rep,
                &ci_env,
                &out_settings,
                &state,
                Kind::Model,
                None,
                &inputs,
                &result,
                fanout.as_ref(),
            );
        }
    }
    let validated = match early {
        Some(e) => Err(e),
        None => Config::from_inputs(&inputs, &*env),
    };
    let (result, kind, cfg) = match validated {
        Err(e) => (Err(Failure::InvalidInput(e)), Kind::Model, None),
        Ok(cfg) => {
            let kind = match cfg.target {
                Target::Model { .. } => Kind::Model,
                Target::Chain { .. } => Kind::Chain,
            };
            state.lock().unwrap().model_name = cfg.model_name.clone();
            for n in &cfg.notices {
                rep.lock().unwrap().notice(n);
            }
            let gh = github::Session::open(&cfg, &|k| env(k).ok(), &rep);
            let r = execute(
                &cfg,
                &rep,
                &state,
                started,
                &|k| env(k).ok(),
                &mut Stop::Process(&mut signals),
                gh.as_ref(),
            )
            .await;
            if let Some(gh) = &gh {
                let outputs =
                    report::final_outputs(&state.lock().unwrap(), &r, Some(&cfg), &inputs);
                gh.finish_within(&r, &outputs, &state, &cfg, signals.next())
                    .await;
            }
            (r, kind, Some(cfg))
        }
    };
    report(
        &rep,
        &ci_env,
        &out_settings,
        &state,
        kind,
        cfg.as_ref(),
        &inputs,
        &result,
        None,
    )
}

/// One target's whole deploy: checks, the flow raced against `stop` (and
/// GitHub told of the start alongside), and its cleanup.
#[allow(
    clippy::too_many_arguments,
    reason = "the run's handles, passed as they are; a struct would only rename them"
)]
pub(crate) async fn execute(
    cfg: &Config,
    rep: &Arc<Mutex<Reporter>>,
    state: &Mutex<State>,
    started: Instant,
    env: &dyn Fn(&str) -> Option<String>,
    stop: &mut Stop<'_>,
    gh: Option<&github::Session>,
) -> Result<(), Failure> {
    // What the truss holds is the user's input too: a FIFO, a broken link
    // or a name that is not UTF-8 is refused before any request.
    if let Target::Model { dir, .. } = &cfg.target {
        archive::plan(dir).map_err(|e| Failure::InvalidInput(format!("{e:#}")))?;
    }
    if cfg.print_config {
        return print_config(cfg, rep);
    }
    if cfg.dry_run {
        return dry_run(cfg, rep);
    }
    let http = net::client(env).map_err(|e| Failure::InvalidInput(format!("{e:#}")))?;
    let s3_http = net::s3_client(env).map_err(|e| Failure::InvalidInput(format!("{e:#}")))?;
    // One warning for CA certificates that could not be used (they are
    // skipped, the rest are used).
    if let Some(w) = net::extra_roots(env).ok().and_then(|r| r.warning()) {
        rep.lock().unwrap().warning(&w);
    }
    // Each retry of a platform call is said in the run's log.
    let retry_log = Arc::clone(rep);
    let api = baseten::Api::new(http, cfg.endpoints.clone(), cfg.api_key.clone()).with_retry_notes(
        Arc::new(move |line: &str| retry_log.lock().unwrap().line(line)),
    );
    // The run's budget: setup, upload, create and the wait share the wait
    // budget from the start; the smoke tests, a gated promotion and its
    // rollback end by the wait budget plus predict-timeout; cleanup has its
    // minute after that (flow::smoke_test, flow::gate, flow::cleanup_created).
    let deploy_until = started + cfg.wait_timeout;
    let run_until = deploy_until + cfg.predict_timeout;
    let api = api.until(Some(deploy_until));
    if cfg.gated_environment().is_some() {
        // A gated run says `rolled-back: false` unless a read proved a
        // rollback, whatever phase it ends in.
        state.lock().unwrap().rolled_back = Some(false);
    }
    let ctx = Ctx {
        cfg,
        api: &api,
        s3_http: &s3_http,
        rep: Arc::clone(rep),
        state,
        started,
        deploy_until,
        run_until,
    };
    // GitHub hears of the start alongside the deploy, never ahead of it.
    let deploying = async {
        let begin = async {
            if let Some(gh) = gh {
                gh.begin().await;
            }
        };
        tokio::join!(begin, deploy(&ctx)).1
    };
    let (flow, cancelled) = tokio::select! {
        r = deploying => (r, false),
        why = stop.flow() => {
            rep.lock().unwrap().finish();
            state.lock().unwrap().cancelled_at = Some(Instant::now());
            (Err(Failure::Cancelled(why)), true)
        }
    };
    // Cleanup runs whatever happened, once something was created. A signal
    // during cleanup (a second one, after a cancel) stops it at once: the
    // outputs are still written.
    let cleaned = tokio::select! {
        r = cleanup(&ctx, cancelled) => r,
        sig = stop.cleanup() => {
            rep.lock().unwrap().finish();
            if cancelled {
                ctx.note(format!("cleanup abandoned: {sig} arrived during it"));
                Ok(())
            } else {
                Err(Failure::Cancelled(CancelReason::Signal(sig)))
            }
        }
    };
    match (flow, cleaned) {
        (Ok(()), Err(e)) => Err(e),
        (Err(f), Err(c)) => {
            state
                .lock()
                .unwrap()
                .notes
                .push(format!("cleanup also failed: {c}"));
            Err(f)
        }
        (flow, Ok(())) => flow,
    }
}

/// The deploy flow for the target: a model or a chain.
async fn deploy(ctx: &Ctx<'_>) -> Result<(), Failure> {
    match &ctx.cfg.target {
        Target::Model {
            dir,
            config,
            raw_config,
        } => model::deploy(ctx, dir, config, raw_config).await,
        Target::Chain { file } => chain::deploy(ctx, file).await,
    }
}

/// Cleanup for the target: model deployment or chain deployment.
async fn cleanup(ctx: &Ctx<'_>, cancelled: bool) -> Result<(), Failure> {
    flow::abort_unfinished_uploads(ctx, cancelled).await;
    flow::cleanup_gated(ctx, cancelled).await;
    match ctx.cfg.target {
        Target::Model { .. } => model::cleanup(ctx, cancelled).await,
        Target::Chain { .. } => chain::cleanup(ctx, cancelled).await,
    }
}

/// Prints the config JSON the platform would receive (decoded from the
/// payload, so it is exactly what is sent) on stdout; logs go to stderr.
fn print_config(cfg: &Config, rep: &Arc<Mutex<Reporter>>) -> Result<(), Failure> {
    let Target::Model { config, .. } = &cfg.target else {
        return Err(Failure::InvalidInput(
            "print-config shows a model's config.yaml; a chain's configs are generated by truss_chains at deploy time".into(),
        ));
    };
    let sent = flow::encode_config(config);
    let json = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, sent)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .expect("the payload is base64 of UTF-8 JSON");
    rep.lock().unwrap().data(&format!("{json}\n"));
    Ok(())
}

fn dry_run(cfg: &Config, rep: &Arc<Mutex<Reporter>>) -> Result<(), Failure> {
    let Target::Model { dir, .. } = &cfg.target else {
        return Ok(());
    };
    let tmp = flow::scratch_dir(dir).map_err(Failure::Deploy)?;
    let a = archive::write(dir, &tmp.path().join("truss.tar")).map_err(Failure::Deploy)?;
    let mut r = rep.lock().unwrap();
    r.line(&format!(
        "Dry run: inputs are valid; {} would be deployed as {:?} ({} files, {}). Nothing was uploaded or created.",
        cfg.model_name,
        cfg.deployment_name,
        a.members.len(),
        ci::format_bytes(a.size)
    ));
    for m in &a.members {
        r.line(&format!("  {}", m.path));
    }
    Ok(())
}
