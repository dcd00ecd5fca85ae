//! The run's handles, one value built once by `run::run` and handed to
//! every mode (a plan, several targets, one target; a new command is one
//! more mode taking it): a leaf below the modes, so `run` and the modes it
//! chooses import it and never each other in a circle.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::budget::Clock;
use crate::ci::Reporter;
use crate::ci_context::CiContext;
use crate::config::Config;
use crate::flow::State;
use crate::net::Network;
use crate::outcome::Failure;
use crate::secret::Secret;

/// The run's handles, built once by `run::run` and handed to every mode (a
/// plan, several targets, one target; a new command is one more mode
/// taking this value): where the run reports, what its outputs show, the
/// clock every deadline is measured on and the moment it started, the CI
/// context, the signals that stop it, and the network settings, read
/// once.
pub(crate) struct Run {
    pub(crate) rep: Arc<Mutex<Reporter>>,
    /// What the outputs show: the one target's (a several-target run
    /// fills it from its one target).
    pub(crate) state: Arc<Mutex<State>>,
    /// The run's clock: every budget measures its deadlines on it.
    pub(crate) clock: Clock,
    /// When the run started, on `clock`.
    pub(crate) started: Instant,
    pub(crate) ci: CiContext,
    /// The result object carries the data (`json`): stdout stays one
    /// document.
    pub(crate) json: bool,
    /// The signals that stop the run, installed at its start: the mode
    /// running holds them ([`Run::signals`]).
    signals: tokio::sync::Mutex<Signals>,
    /// Every network setting, or why they could not be built: read only
    /// through [`Run::network`] (and [`Run::platform`]), by a mode about to
    /// make a request.
    net: Result<Network, String>,
}

/// What a mode that talks to the platform holds: the checked key and the
/// run's network.
#[derive(Clone, Copy)]
pub(crate) struct Platform<'a> {
    pub(crate) key: &'a Secret,
    pub(crate) net: &'a Network,
}

impl Run {
    /// The run's handles, its start read now from `clock`.
    pub(crate) fn new(
        rep: Arc<Mutex<Reporter>>,
        state: Arc<Mutex<State>>,
        clock: Clock,
        ci: CiContext,
        json: bool,
        signals: Signals,
        net: Result<Network, String>,
    ) -> Run {
        Run {
            rep,
            state,
            started: clock.now(),
            clock,
            ci,
            json,
            signals: tokio::sync::Mutex::new(signals),
            net,
        }
    }

    /// The platform's access for a mode about to make a request: a network
    /// that could not be built fails it as an input error.
    pub(crate) fn platform<'a>(&'a self, key: &'a Secret) -> Result<Platform<'a>, Failure> {
        Ok(Platform {
            key,
            net: self.network()?,
        })
    }

    /// The run's network; bad network settings are an input error.
    pub(crate) fn network(&self) -> Result<&Network, Failure> {
        self.net
            .as_ref()
            .map_err(|e| Failure::InvalidInput(e.clone()))
    }

    /// The run's signals, for the mode that waits on them.
    pub(crate) async fn signals(&self) -> tokio::sync::MutexGuard<'_, Signals> {
        self.signals.lock().await
    }

    /// The handles one target's deploy runs with: the run's own reporter
    /// and outputs' state, its clock and start.
    pub(crate) fn target<'a>(&'a self, cfg: &'a Config) -> Handles<'a> {
        Handles {
            cfg,
            rep: &self.rep,
            state: &self.state,
            clock: &self.clock,
            started: self.started,
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
    pub(crate) fn install() -> Self {
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

/// One target's handles: its config, where it reports, the outputs' state
/// it fills, the run's clock and the moment it started (a target of a
/// several-target run has its own reporter, state and start).
pub(crate) struct Handles<'a> {
    pub(crate) cfg: &'a Config,
    pub(crate) rep: &'a Arc<Mutex<Reporter>>,
    pub(crate) state: &'a Mutex<State>,
    pub(crate) clock: &'a Clock,
    /// Read from `clock`, which the budget measures every deadline on.
    pub(crate) started: Instant,
}
