//! One run from inputs to exit code: validate, deploy (racing the
//! cancellation signals), clean up, and write the outputs on every path.

use std::sync::{Arc, Mutex};

use crate::budget::Clock;
use crate::ci::{CiEnv, Reporter};
use crate::ci_context::CiContext;
use crate::cli::{Cli, EnvLookup};
use crate::config::Config;
use crate::execute::{self, Signals, Stop};
use crate::flow::State;
use crate::github;
use crate::kind::Kind;
use crate::outcome::{CancelReason, Failure};
use crate::plan::check_files;
use crate::report::{install_panic_hook, report};
use crate::secret::Secret;
use crate::settings::{Preliminary, Settings};

/// Runs the whole job and returns the process exit code. `parse_error` is a
/// command-line error already found by clap: it is reported like any bad
/// input, with outputs written.
pub async fn run(cli: Cli, parse_error: Option<String>) -> u8 {
    #[expect(
        clippy::disallowed_methods,
        reason = "the run reads its environment once, through the lookup it hands down"
    )]
    let env: EnvLookup<'_> = &|k: &str| std::env::var(k);
    let mut signals = Signals::install();
    let ci_env = CiEnv::from_lookup(|k| env(k).ok());
    let ci_context = CiContext::from_lookup(&|k| env(k).ok());
    let rep = Arc::new(Mutex::new(Reporter::stdio(ci_env.kind())));
    let inputs = cli.gather(env);
    // Every network setting, read once from the environment the run was
    // given; a target that needs the network and cannot have it fails
    // with this as its input error.
    let net = crate::net::Network::from_vars(env).map_err(|e| format!("{e:#}"));
    let preliminary = Preliminary::read(&inputs);
    let out_settings = preliminary.outputs.clone();
    if preliminary.stdout_is_data {
        // Nothing but the document goes to stdout from here on, masks
        // included (the runner reads commands on stderr too): an empty
        // piece of data turns every log line to stderr.
        rep.lock().unwrap().data("");
    }
    // Registered before anything can print: every sink redacts them.
    for k in &preliminary.secrets {
        rep.lock().unwrap().mask(k.expose());
    }
    // The clock every deadline of the run is measured on (a scripted one
    // only in a debug build that is given one).
    let (clock, clock_error) = match Clock::of_run(&|k| env(k).ok()) {
        Ok(c) => (c, None),
        Err(e) => (Clock::default(), Some(e)),
    };
    let started = clock.now();
    let state = Arc::new(Mutex::new(State {
        model_name: preliminary.model_name.clone(),
        ..State::default()
    }));
    install_panic_hook(ci_env.clone(), out_settings.clone(), Arc::clone(&state));

    let plan = preliminary.plan.clone();
    // A malformed key is refused in every mode; a missing one only where
    // it is needed (a plan needs none).
    let key = preliminary.deploy_key();
    let malformed = preliminary.api_key.clone().err();
    // A bad `plan` is an input error like the others found before validation.
    let input_error = parse_error
        .or(preliminary.outputs_error)
        .or_else(|| plan.clone().err())
        .or(malformed)
        .or(clock_error);
    // A plan, several targets or change detection each run in their own
    // mode; one target named plainly runs as it always has.
    let mode = match input_error {
        Some(e) => Err(e),
        // The key is used by a plan only to read (skip-unchanged).
        None if plan == Ok(true) => Ok(Mode::Plan(key.clone().ok())),
        None => Settings::parse(&inputs, &ci_context).and_then(|s| {
            let key = key?;
            Ok(match crate::multi::wanted(&s) {
                true => Mode::Several(s, key),
                false => Mode::One(s, key),
            })
        }),
    };
    let (result, kind, cfg, fanout) = match mode {
        Err(e) => (Err(Failure::InvalidInput(e)), Kind::Model, None, None),
        Ok(Mode::Plan(key)) => {
            // A plan only reads: a signal stops it where it is.
            let planned = crate::plan::run(
                &inputs,
                &ci_context,
                &rep,
                out_settings.json,
                key.as_ref(),
                &net,
                (&clock, started),
            );
            let (r, fanout) = tokio::select! {
                done = planned => done,
                sig = signals.next() => {
                    rep.lock().unwrap().finish();
                    (Err(Failure::Cancelled(CancelReason::Signal(sig))), None)
                }
            };
            (r, Kind::Model, None, fanout)
        }
        Ok(Mode::Several(s, key)) => {
            let (r, fanout) = crate::multi::run(
                &s,
                crate::multi::PlatformAccess {
                    key: &key,
                    net: &net,
                    clock: &clock,
                },
                env,
                &ci_context,
                &rep,
                &state,
                &mut signals,
            )
            .await;
            (r, Kind::Model, None, fanout)
        }
        Ok(Mode::One(s, key)) => match Config::resolve(&s, s.truss_directory.trim(), &ci_context)
            .and_then(|cfg| check_files(&cfg).map(|()| cfg))
        {
            Err(e) => (Err(Failure::InvalidInput(e)), Kind::Model, None, None),
            Ok(cfg) => {
                let kind = cfg.target.kind();
                state.lock().unwrap().model_name = cfg.model_name.clone();
                for n in &cfg.notices {
                    rep.lock().unwrap().notice(n);
                }
                let gh = execute::github_job(&cfg)
                    .and_then(|job| github::Session::open(job, &net, &rep));
                let r = execute::execute(
                    &cfg,
                    &key,
                    &rep,
                    &state,
                    (&clock, started),
                    &|k| env(k).ok(),
                    &net,
                    &mut Stop::Process(&mut signals),
                    gh.as_ref(),
                )
                .await;
                (r, kind, Some(cfg), None)
            }
        },
    };
    for line in clock.record() {
        rep.lock().unwrap().line(&line);
    }
    report(
        &rep,
        &ci_env,
        &out_settings,
        &state,
        kind,
        cfg.as_ref(),
        &result,
        fanout.as_ref(),
    )
}

/// The run's mode, chosen once its inputs parsed.
enum Mode {
    /// `plan`: print the targets, deploy nothing (the key, when given,
    /// only reads what serves each environment).
    Plan(Option<Secret>),
    /// Several targets, or change detection.
    Several(Settings, Secret),
    /// One target named plainly.
    One(Settings, Secret),
}
