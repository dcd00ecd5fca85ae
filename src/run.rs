//! One run from inputs to exit code: validate, deploy (racing the
//! cancellation signals), clean up, and write the outputs on every path.
//!
//! The signals are watched from the first moment (a plan races them too:
//! every mode stops on one). The inputs are read once, here, the only
//! place besides `main` that reads the process environment: first
//! `settings::Preliminary` (what a run needs before validation), then
//! `Settings`. The run value (`handles::Run`: reporter, state, clock and
//! start, CI context, signals, the network read once) is built here and
//! handed to each `Mode`; a mode that makes requests resolves its
//! `Platform` from it. A new command is a new mode taking that value.

use std::sync::{Arc, Mutex};

use crate::budget::Clock;
use crate::ci::{CiEnv, Reporter};
use crate::ci_context::CiContext;
use crate::cli::{Cli, EnvLookup, Input};
use crate::config::Config;
use crate::env_vars::TRUSS_PUSH_PYTHON;
use crate::execute::{self, Stop};
use crate::flow::State;
use crate::github;
use crate::handles::{Run, Signals};
use crate::kind::Kind;
use crate::outcome::{CancelReason, Failure};
use crate::plan::check_files;
use crate::report::{Ended, install_panic_hook, report};
use crate::secret::Secret;
use crate::settings::command::Lifecycle;
use crate::settings::pull_request::closed_event_refusal;
use crate::settings::{Command, CommandInput, CommandSettings, Preliminary, Settings};

/// Runs the whole job and returns the process exit code. `parse_error` is a
/// command-line error already found by clap: it is reported like any bad
/// input, with outputs written.
pub async fn run(cli: Cli, parse_error: Option<String>) -> u8 {
    #[expect(
        clippy::disallowed_methods,
        reason = "the run reads its environment once, through the lookup it hands down"
    )]
    let env: EnvLookup<'_> = &|k: &str| std::env::var(k);
    let signals = Signals::install();
    let ci_env = CiEnv::from_lookup(|k| env(k).ok());
    let ci_context = CiContext::from_lookup(&|k| env(k).ok());
    let rep = Arc::new(Mutex::new(Reporter::stdio(ci_env.kind())));
    let inputs = cli.gather(env);
    // Every network setting, read once from the environment the run was
    // given; a target that needs the network and cannot have it fails
    // with this as its input error.
    let net = crate::net::Network::from_vars(env).map_err(|e| format!("{e:#}"));
    // The chain helper's interpreter, when set (a value that is not text
    // is read as unset: the default interpreter runs).
    let chain_python = env(TRUSS_PUSH_PYTHON).ok();
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
    let state = Arc::new(Mutex::new(State {
        model_name: preliminary.model_name.clone(),
        ..State::default()
    }));
    install_panic_hook(ci_env.clone(), out_settings.clone(), Arc::clone(&state));
    let run = Run::new(
        rep,
        state,
        clock,
        ci_context,
        out_settings.json,
        signals,
        net,
    );

    let command = preliminary.command.clone();
    // A malformed key is refused in every mode; a missing one only where
    // it is needed (a plan needs none).
    let key = preliminary.deploy_key();
    let malformed = preliminary.api_key.clone().err();
    // A bad `command` or `plan` is an input error like the others found
    // before validation.
    let input_error = parse_error
        .or(preliminary.outputs_error)
        .or_else(|| command.clone().err())
        .or(malformed)
        .or(clock_error);
    // Which dotenv row the outputs take: a plan's says the plan's own
    // status, never a deploy's, even when its inputs are refused.
    let reported_command = command.clone().unwrap_or(Command::Deploy);
    // A plan, several targets or change detection each run in their own
    // mode; one target named plainly runs as it always has; every other
    // command is a mode of its own.
    // `rolled-back` is said on every rollback, one refused for its inputs
    // too: it did not roll back.
    if let Ok(Command::Rollback) = &command {
        run.state.lock().unwrap().rolled_back = Some(false);
    }
    let mode = match (input_error, command) {
        (Some(e), _) | (None, Err(e)) => Err(e),
        (None, Ok(c)) => c.check_unread(&inputs).and_then(|()| {
            // Every command's lifecycle inputs checked (a deploy reads
            // `pull-request` for its label).
            let lifecycle = Lifecycle::parse(&inputs, &run.ci)?;
            match c {
                // The key is used by a plan only to read (skip-unchanged).
                Command::Plan => Ok(Mode::Plan(key.clone().ok())),
                Command::Deploy => {
                    // A deploy on a pull request being closed would leave
                    // a preview behind its teardown.
                    if let Some(why) = closed_event_refusal(&run.ci) {
                        return Err(why);
                    }
                    Settings::parse(&inputs, &run.ci).and_then(|s| {
                        // A dry run asks the platform only when given a key.
                        let key = match (key, s.dry_run) {
                            (Ok(k), _) => Some(k),
                            (Err(_), true) => None,
                            (Err(e), false) => return Err(e),
                        };
                        let s = s.with_chain_python(chain_python);
                        Ok(match crate::multi::wanted(&s) {
                            true => Mode::Several(s, key),
                            false => Mode::One(s, key),
                        })
                    })
                }
                command => {
                    let settings = match (command, inputs.trimmed(Input::TrussDirectory)) {
                        // Teardown needs no targets, but reads the hosts,
                        // team, budget and dry-run.
                        (Command::Teardown, None) => {
                            Some(Settings::parse_targets_optional(&inputs, &run.ci)?)
                        }
                        _ => {
                            Some(Settings::parse(&inputs, &run.ci)?.with_chain_python(chain_python))
                        }
                    };
                    let cs = CommandSettings {
                        command,
                        lifecycle,
                        settings,
                    };
                    Ok(Mode::Command(cs, key?))
                }
            }
        }),
    };
    let (result, kind, cfg, fanout) = match mode {
        Err(e) => (Err(Failure::InvalidInput(e)), Kind::Model, None, None),
        Ok(Mode::Plan(key)) => {
            // A plan only reads: a signal stops it where it is.
            let planned = crate::plan::run(&run, &inputs, key.as_ref());
            let mut signals = run.signals().await;
            let (r, fanout) = tokio::select! {
                done = planned => done,
                sig = signals.next() => {
                    run.rep.lock().unwrap().finish();
                    (Err(Failure::Cancelled(CancelReason::Signal(sig))), None)
                }
            };
            (r, Kind::Model, None, fanout)
        }
        Ok(Mode::Several(s, key)) => {
            let (r, fanout) = crate::multi::run(&run, &s, key.as_ref()).await;
            (r, Kind::Model, None, fanout)
        }
        Ok(Mode::Command(cs, key)) => {
            let result = match cs.command {
                Command::Teardown => crate::lifecycle::teardown::run(&run, &cs, &key).await,
                Command::Prune => crate::lifecycle::prune::run(&run, &cs, &key).await,
                Command::Rollback => crate::rollback::run(&run, &cs, &key).await,
                Command::Drift => crate::drift::run(&run, &cs, &key).await,
                Command::Deploy | Command::Plan => {
                    unreachable!("deploy and plan have modes of their own")
                }
            };
            (result, Kind::Model, None, None)
        }
        Ok(Mode::One(s, key)) => match one(&run, &s, key.as_ref()).await {
            Err(e) => (Err(Failure::InvalidInput(e)), Kind::Model, None, None),
            Ok((r, cfg)) => (r, cfg.target.kind(), Some(cfg), None),
        },
    };
    for line in run.clock.record() {
        run.rep.lock().unwrap().line(&line);
    }
    let ended = Ended {
        kind,
        cfg: cfg.as_ref(),
        result: &result,
        fanout: fanout.as_ref(),
        command: reported_command,
    };
    report(&run.rep, &ci_env, &out_settings, &run.state, &ended)
}

/// One target named plainly: its config and files checked (an input
/// error), then its deploy. The platform is reached only by a deploy that
/// makes requests (not `print-config`, not a dry run).
async fn one(
    run: &Run,
    s: &Settings,
    key: Option<&Secret>,
) -> Result<(Result<(), Failure>, Config), String> {
    let cfg = Config::resolve(s, s.truss_directory.trim(), &run.ci)
        .and_then(|cfg| check_files(&cfg).map(|()| cfg))?;
    run.state.lock().unwrap().model_name = cfg.model_name.clone();
    for n in &cfg.notices {
        run.rep.lock().unwrap().notice(n);
    }
    let target = run.target(&cfg);
    let result = match (execute::makes_requests(&cfg), key) {
        (false, Some(key)) if execute::asks_preflight(&cfg) => match run.platform(key) {
            Err(f) => Err(f),
            Ok(platform) => {
                let mut signals = run.signals().await;
                let stop = &mut Stop::Process(&mut signals);
                execute::dry_run_asking(target, platform, stop).await
            }
        },
        (false, key) => execute::without_requests(&cfg, &run.rep, key.is_some()),
        (true, None) => Err(Failure::InvalidInput(
            "baseten-api-key is required: pass your Baseten API key from a secret".into(),
        )),
        (true, Some(key)) => match run.platform(key) {
            Err(f) => Err(f),
            Ok(platform) => {
                let gh = execute::github_job(&cfg)
                    .and_then(|job| github::Session::open(job, platform.net, &run.rep));
                let mut signals = run.signals().await;
                let stop = &mut Stop::Process(&mut signals);
                execute::execute(target, platform, stop, gh.as_ref()).await
            }
        },
    };
    Ok((result, cfg))
}
/// The run's mode, chosen once its inputs parsed.
enum Mode {
    /// `plan`: print the targets, deploy nothing (the key, when given,
    /// only reads what serves each environment).
    Plan(Option<Secret>),
    /// Several targets, or change detection (no key: a dry run).
    Several(Settings, Option<Secret>),
    /// One target named plainly (no key: a dry run).
    One(Settings, Option<Secret>),
    /// `teardown`, `prune`, `rollback` or `drift`.
    Command(CommandSettings, Secret),
}
