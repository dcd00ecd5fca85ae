//! One target's deploy from a validated `Config` to its result: the
//! checks a dry run or `print-config` stop at, the flow raced against the
//! signals (or a several-target run's halt), and the cleanup that follows
//! whatever happened. `run` calls it for one target, `multi` for each.

use std::sync::{Arc, Mutex};

use crate::budget::{Budget, Phase};
use crate::ci::{self, Reporter};
use crate::config::{Config, Target};
use crate::flow::{self, Ctx, State};
use crate::handles::{Handles, Platform, Signals};
use crate::kind::Kind;
use crate::outcome::{CancelReason, Failure};
use crate::{archive, baseten, chain, github, model};

/// Why the targets of a several-target run should stop: the signals the
/// process received, and whether `fail-fast` called the others off.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StopRequest {
    pub(crate) signals: u32,
    pub(crate) last_signal: &'static str,
    pub(crate) fail_fast: bool,
}

/// What stops one deploy: the process's own signals (one target), or the
/// [`StopRequest`] every target of a several-target run watches.
pub(crate) enum Stop<'a> {
    Process(&'a mut Signals),
    Shared {
        halt: tokio::sync::watch::Receiver<StopRequest>,
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

/// What GitHub reporting gets of a target's config: its settings, what is
/// deployed and its pages, never the config itself (which would hand it
/// every input). `None` when nothing will be deployed (dry run,
/// print-config).
pub(crate) fn github_job(cfg: &Config) -> Option<github::Job> {
    if cfg.dry_run || cfg.print_config {
        return None;
    }
    let (kind, name) = match &cfg.target {
        Target::Model { .. } => (Kind::Model, cfg.model_name.clone()),
        // A chain's name is the one in its code, read as the plan reads
        // it (codegen confirms it later): every `chain.py` gets its own
        // environment and commit-status context from the start.
        Target::Chain { file } if cfg.model_name.is_empty() => (
            Kind::Chain,
            crate::targets::chain_name(file).unwrap_or_else(|_| {
                file.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            }),
        ),
        Target::Chain { .. } => (Kind::Chain, cfg.model_name.clone()),
    };
    Some(github::Job {
        settings: cfg.github.clone(),
        kind,
        name,
        environment: cfg.environment.clone(),
        endpoints: cfg.endpoints.clone(),
        pull_request: cfg.pull_request_label.clone(),
    })
}

/// Whether the target's deploy makes requests: not `print-config`, not a
/// dry run. Only such a deploy is given the platform ([`execute`]); the
/// others end in [`without_requests`].
pub(crate) fn makes_requests(cfg: &Config) -> bool {
    !cfg.print_config && !cfg.dry_run
}

/// `print-config` or a dry run: what the deploy would send, and no
/// request. A dry run says why the platform was not asked (`key_given`:
/// whether a key was).
pub(crate) fn without_requests(
    cfg: &Config,
    rep: &Arc<Mutex<Reporter>>,
    key_given: bool,
) -> Result<(), Failure> {
    if cfg.print_config {
        return print_config(cfg, rep);
    }
    dry_run(cfg, rep)?;
    let why = match (key_given, &cfg.target) {
        (_, Target::Chain { .. }) => "a chain has no documented preflight",
        (false, _) => "no baseten-api-key was given",
        (true, _) => "its preflight was not asked for",
    };
    rep.lock().unwrap().line(&format!(
        "Dry run: the local checks ran; the platform was not asked ({why})"
    ));
    Ok(())
}

/// One target's whole deploy, its files already checked (`plan::check_files`)
/// and making requests ([`makes_requests`]): the flow raced against `stop`
/// (and GitHub told of the start alongside), its cleanup, and GitHub told
/// of the end. The key in `platform` is held only by the platform's
/// client built here.
pub(crate) async fn execute(
    target: Handles<'_>,
    platform: Platform<'_>,
    stop: &mut Stop<'_>,
    gh: Option<&github::Session>,
) -> Result<(), Failure> {
    execute_work(target, platform, stop, gh, &Deploy).await
}

/// What one target's run does between the platform's client being built
/// and the outputs: a deploy and its cleanup ([`Deploy`]), or a command
/// that works on one target the same way (`rollback`), with the same
/// budget, signals and GitHub reporting.
pub(crate) trait Work {
    /// The flow, raced against the signals.
    async fn run(&self, ctx: &Ctx<'_>) -> Result<(), Failure>;
    /// What follows it whatever happened (`cancelled`: a signal stopped it).
    async fn cleanup(&self, ctx: &Ctx<'_>, cancelled: bool) -> Result<(), Failure>;
}

/// A deploy: the model's or the chain's flow, then its cleanup.
struct Deploy;

impl Work for Deploy {
    async fn run(&self, ctx: &Ctx<'_>) -> Result<(), Failure> {
        deploy(ctx).await
    }

    async fn cleanup(&self, ctx: &Ctx<'_>, cancelled: bool) -> Result<(), Failure> {
        cleanup(ctx, cancelled).await
    }
}

/// [`execute`] with `work` in place of the deploy.
pub(crate) async fn execute_work<W: Work>(
    target: Handles<'_>,
    Platform { key, net }: Platform<'_>,
    stop: &mut Stop<'_>,
    gh: Option<&github::Session>,
    work: &W,
) -> Result<(), Failure> {
    debug_assert!(
        makes_requests(target.cfg),
        "print-config and dry runs make no request"
    );
    let (api, budget) = client(&target, Platform { key, net }, target.cfg.wait_timeout);
    let Handles {
        cfg,
        rep,
        state,
        started,
        ..
    } = target;
    if cfg.gated_environment().is_some() {
        // A gated run says `rolled-back: false` unless a read proved a
        // rollback, whatever phase it ends in.
        state.lock().unwrap().rolled_back = Some(false);
    }
    let ctx = Ctx {
        cfg,
        api: &api,
        net,
        rep: Arc::clone(rep),
        state,
        started,
        budget: &budget,
    };
    // GitHub hears of the start alongside the deploy, never ahead of it.
    let deploying = async {
        let begin = async {
            if let Some(gh) = gh {
                gh.begin(&budget).await;
            }
        };
        tokio::join!(begin, work.run(&ctx)).1
    };
    let (flow, cancelled) = tokio::select! {
        r = deploying => (r, false),
        why = stop.flow() => {
            rep.lock().unwrap().finish();
            budget.cancel(budget.now());
            (Err(Failure::Cancelled(why)), true)
        }
    };
    // Cleanup runs whatever happened, once something was created. A signal
    // during cleanup (a second one, after a cancel) stops it at once: the
    // outputs are still written.
    let (cleaned, interrupted) = tokio::select! {
        r = work.cleanup(&ctx, cancelled) => (r, None),
        sig = stop.cleanup() => {
            rep.lock().unwrap().finish();
            if cancelled {
                ctx.note(format!("cleanup abandoned: {sig} arrived during it"));
                (Ok(()), Some(sig))
            } else {
                (Err(Failure::Cancelled(CancelReason::Signal(sig))), Some(sig))
            }
        }
    };
    let result = ending(cfg, state, flow, cleaned, interrupted);
    // The reads that only informed are told now, after every mutation
    // (each at most its own short deadline; none after a signal).
    crate::flow::inform::settle_for_report(&ctx).await;
    // GitHub hears of the end by the budget's deadline for it, or until
    // the next signal: the outputs follow, whatever GitHub does.
    if let Some(gh) = gh {
        let outputs = crate::report::final_outputs(&state.lock().unwrap(), &result, Some(cfg));
        gh.finish_within(&result, &outputs, state, &budget, stop.cleanup())
            .await;
    }
    result
}

/// The platform's client for the target (its retries said in the
/// target's log) and the target's budget, built once: every phase asks
/// it for its deadline. The client starts under the setup phase's.
fn client(
    target: &Handles<'_>,
    Platform { key, net }: Platform<'_>,
    wait: std::time::Duration,
) -> (baseten::Api, Budget) {
    let Handles {
        cfg,
        rep,
        clock,
        started,
        ..
    } = *target;
    // One warning for CA certificates that could not be used (they are
    // skipped, the rest are used), from the first target that needs them.
    if let Some(w) = net.take_roots_warning() {
        rep.lock().unwrap().warning(&w);
    }
    let http = net.api_client();
    // Each retry of a platform call is said in the run's log.
    let retry_log = Arc::clone(rep);
    let api = baseten::Api::new(http, cfg.endpoints.clone(), key.clone())
        .with_retry_notes(Arc::new(move |line: &str| {
            retry_log.lock().unwrap().line(line)
        }))
        .on(clock.clone());
    let budget = Budget::new(started, wait, cfg.predict_timeout).on(clock.clone());
    let api = api.within(Phase::Setup, budget.deadline(Phase::Setup));
    (api, budget)
}

/// A dry run's platform reads (the teams, the models, the preflight) end
/// within this, whatever `wait-timeout-seconds` says: nothing waits.
const DRY_RUN_READS_SECS: u64 = 60;

/// Whether a dry run with a key asks the platform's preflight: a model's
/// dry run (chains have no documented preflight), not `print-config`.
pub(crate) fn asks_preflight(cfg: &Config) -> bool {
    cfg.dry_run && !cfg.print_config && matches!(cfg.target, Target::Model { .. })
}

/// A model's dry run with a key: the local checks and the packaging, then
/// the platform's preflight on the payload the create would carry,
/// raced against `stop`; nothing uploaded or created. Says which ran.
pub(crate) async fn dry_run_asking(
    target: Handles<'_>,
    platform: Platform<'_>,
    stop: &mut Stop<'_>,
) -> Result<(), Failure> {
    let Target::Model {
        dir,
        config,
        raw_config,
    } = &target.cfg.target
    else {
        return without_requests(target.cfg, target.rep, true);
    };
    dry_run(target.cfg, target.rep)?;
    // A dry run waits for nothing: its reads get their own minute, or
    // wait-timeout when that is longer.
    let wait = target
        .cfg
        .wait_timeout
        .max(std::time::Duration::from_secs(DRY_RUN_READS_SECS));
    let (api, budget) = client(&target, platform, wait);
    let ctx = Ctx {
        cfg: target.cfg,
        api: &api,
        net: platform.net,
        rep: Arc::clone(target.rep),
        state: target.state,
        started: target.started,
        budget: &budget,
    };
    let asked = tokio::select! {
        r = flow::preflight::preflight_only(&ctx, dir, config, raw_config) => r?,
        why = stop.flow() => {
            target.rep.lock().unwrap().finish();
            return Err(Failure::Cancelled(why));
        }
    };
    let said = match asked {
        flow::preflight::Asked::Passed => {
            "Dry run: the local checks ran, and so did the platform's preflight, which passed"
                .to_string()
        }
        flow::preflight::Asked::Skipped(why) => {
            format!("Dry run: the local checks ran; the platform's preflight was skipped ({why})")
        }
        flow::preflight::Asked::Off => {
            "Dry run: the local checks ran; the platform was not asked (preflight: false)"
                .to_string()
        }
    };
    target.rep.lock().unwrap().line(&said);
    Ok(())
}

/// How a deploy ends once cleanup ran (or was `interrupted` by a signal):
/// a cancelled run whose cleanup (when on) left something running says
/// what, with its own exit code; otherwise the flow's failure comes
/// first, then cleanup's.
fn ending(
    cfg: &Config,
    state: &Mutex<State>,
    flow: Result<(), Failure>,
    cleaned: Result<(), Failure>,
    interrupted: Option<&'static str>,
) -> Result<(), Failure> {
    let reason = match (&flow, interrupted) {
        (Err(Failure::Cancelled(why)), _) => Some(*why),
        (_, Some(sig)) => Some(CancelReason::Signal(sig)),
        _ => None,
    };
    let left = match cfg.cleanup.enabled {
        true => state.lock().unwrap().left_running(),
        false => Vec::new(),
    };
    if let Some(reason) = reason
        && !left.is_empty()
    {
        let why = match (interrupted, &cleaned) {
            (Some(sig), _) => format!("{sig} arrived during it, the run's cleanup was abandoned"),
            (None, Err(e)) => e.to_string(),
            (None, Ok(())) => "what the create in flight made could not be told".to_string(),
        };
        return Err(Failure::CleanupUnfinished {
            reason,
            why,
            left: format!("{}; deactivate what is left in Baseten", left.join("; ")),
        });
    }
    // A cleanup that failed without a signal says, as a cancelled one
    // does, what it may have left running.
    let cleaned = match cleaned {
        Err(e) if !left.is_empty() => Err(e.context(format!(
            "cleanup did not finish: {}; deactivate what is left in Baseten",
            left.join("; ")
        ))),
        cleaned => cleaned,
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
    flow::abort_unfinished_uploads(ctx).await;
    flow::cleanup_gated(ctx, cancelled).await;
    match ctx.cfg.target {
        Target::Model { .. } => model::cleanup(ctx).await,
        Target::Chain { .. } => chain::cleanup(ctx).await,
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
    // The archive's layout gives its size without writing it.
    let a = archive::layout(dir).map_err(Failure::Deploy)?;
    let mut r = rep.lock().unwrap();
    r.line(&format!(
        "Dry run: inputs are valid; {} would be deployed as {:?} ({} files, {}). Nothing was uploaded or created.",
        cfg.model_name,
        cfg.deployment_name,
        a.member_count(),
        ci::format_bytes(a.size())
    ));
    for m in a.members() {
        r.line(&format!("  {}", m.path));
    }
    Ok(())
}
