//! One run from inputs to exit code: validate, deploy (racing the
//! cancellation signals), clean up, and write the outputs on every path.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::ci::{CiEnv, Reporter};
use crate::cli::Cli;
use crate::config::{self, Config, Target};
use crate::execute::{Signals, Stop, execute};
use crate::flow::State;
use crate::github;
use crate::kind::Kind;
use crate::outcome::Failure;
use crate::report::{self, install_panic_hook, report};

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
