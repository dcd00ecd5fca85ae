//! One run from inputs to exit code: validate, deploy (racing the
//! cancellation signals), clean up, and write the outputs on every path.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::ci::{CiEnv, Reporter};
use crate::ci_context::CiContext;
use crate::cli::{Cli, EnvLookup};
use crate::config::Config;
use crate::execute::{Signals, Stop, execute};
use crate::flow::State;
use crate::github;
use crate::kind::Kind;
use crate::outcome::Failure;
use crate::report::{self, install_panic_hook, report};
use crate::settings::{Early, Settings};

/// Runs the whole job and returns the process exit code. `parse_error` is a
/// command-line error already found by clap: it is reported like any bad
/// input, with outputs written.
pub async fn run(cli: Cli, parse_error: Option<String>) -> u8 {
    let env: EnvLookup<'_> = &|k: &str| std::env::var(k);
    let mut signals = Signals::install();
    let ci_env = CiEnv::from_lookup(|k| env(k).ok());
    let ci_context = CiContext::from_lookup(&|k| env(k).ok());
    let rep = Arc::new(Mutex::new(Reporter::stdio(ci_env.kind())));
    let inputs = cli.gather(env);
    let early = Early::read(&inputs);
    let secrets = early.secrets.clone();
    let out_settings = early.outputs.clone();
    if early.stdout_is_data {
        // Nothing but the document goes to stdout from here on, masks
        // included (the runner reads commands on stderr too): an empty
        // piece of data turns every log line to stderr.
        rep.lock().unwrap().data("");
    }
    for k in &early.secrets {
        rep.lock().unwrap().mask(k);
    }
    let started = Instant::now();
    let state = Arc::new(Mutex::new(State {
        model_name: early.model_name.clone(),
        ..State::default()
    }));
    install_panic_hook(
        ci_env.clone(),
        out_settings.clone(),
        Arc::clone(&state),
        early.api_key.clone(),
    );

    let plan = early.plan;
    // A bad `plan` is an input error like the others found this early.
    let early = parse_error
        .or(early.outputs_error)
        .or_else(|| plan.clone().err());
    // A plan, several targets or change detection take their own road;
    // one target named plainly takes today's, unchanged.
    let road = match early {
        Some(e) => Err(e),
        None if plan == Ok(true) => Ok(Road::Plan),
        None => Settings::parse(&inputs, &ci_context).map(|s| match crate::multi::wanted(&s) {
            true => Road::Several(s),
            false => Road::One(s),
        }),
    };
    let (result, kind, cfg, fanout) = match road {
        Err(e) => (Err(Failure::InvalidInput(e)), Kind::Model, None, None),
        Ok(Road::Plan) => {
            let (r, fanout) =
                crate::plan::run(&inputs, &ci_context, &rep, out_settings.json, &|k| {
                    env(k).ok()
                })
                .await;
            (r, Kind::Model, None, fanout)
        }
        Ok(Road::Several(s)) => {
            let (r, fanout) =
                crate::multi::run(&s, env, &ci_context, &rep, &state, &mut signals).await;
            (r, Kind::Model, None, fanout)
        }
        Ok(Road::One(s)) => match Config::resolve(&s, s.truss_directory.trim(), &ci_context) {
            Err(e) => (Err(Failure::InvalidInput(e)), Kind::Model, None, None),
            Ok(cfg) => {
                let kind = cfg.target.kind();
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
                        report::final_outputs(&state.lock().unwrap(), &r, Some(&cfg), &secrets);
                    gh.finish_within(&r, &outputs, &state, &cfg, signals.next())
                        .await;
                }
                (r, kind, Some(cfg), None)
            }
        },
    };
    report(
        &rep,
        &ci_env,
        &out_settings,
        &state,
        kind,
        cfg.as_ref(),
        &secrets,
        &result,
        fanout.as_ref(),
    )
}

/// Which road a run takes once its inputs parsed.
enum Road {
    /// `plan`: print the targets, deploy nothing.
    Plan,
    /// Several targets, or change detection.
    Several(Settings),
    /// One target named plainly.
    One(Settings),
}
