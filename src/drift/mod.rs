//! `command: drift`: whether what serves each model target's environment
//! is what the repository says, read only (no mutation is ever sent).
//!
//! Every target `truss-directory` names (and `changed-since` keeps) is
//! checked against one environment (`environment`, or `promote: true`
//! for production; none is an input error). The targets are read
//! [`TARGETS_AT_ONCE`] at a time, as a plan by content reads them
//! (`content::plan`), all by one deadline from the run's budget; each one's
//! reads (`read`) are typed and decided by a pure function
//! (`verdict::decide`). A chain is `not-checked`. The run then says a
//! line per target, and keeps the `drift` and `drift-report` outputs and
//! the summary's table in the run's state (`report`): exit 0 when every
//! model target is in sync, 7 (`EXIT_DRIFTED`, status `success`) when one
//! drifted, and 1 (`deploy_failed`) when any read failed — a failed read
//! is `unknown`, never in sync, and wins over drift.

use std::time::Instant;

use anyhow::anyhow;

use crate::baseten::Api;
use crate::budget::{Budget, Clock, Phase};
use crate::config::Target;
use crate::content::plan::{TARGETS_AT_ONCE, Workspace, at_once};
use crate::handles::Run;
use crate::kind::Kind;
use crate::outcome::{CancelReason, Failure};
use crate::plan::Planned;
use crate::secret::Secret;
use crate::settings::CommandSettings;

mod read;
mod report;
pub(crate) mod verdict;

use report::Checked;
use verdict::{Drift, Reads};

/// A stand-in for the deployment name a deploy would make, so that each
/// target is resolved exactly as a deploy resolves it; never sent.
const NAME_STAND_IN: &str = "drift";

/// Runs `command: drift`; a signal stops it where it is (it only reads).
pub(crate) async fn run(run: &Run, cs: &CommandSettings, key: &Secret) -> Result<(), Failure> {
    let Some(settings) = cs.settings.as_ref() else {
        return Err(Failure::InvalidInput(
            "command drift checks the targets truss-directory names: set truss-directory".into(),
        ));
    };
    let Some(env) = settings.environment.clone() else {
        return Err(Failure::InvalidInput(
            "command drift checks what serves one environment: set environment (or promote: true for production)".into(),
        ));
    };
    // Every target checked as a deploy would check it, under a stand-in
    // deployment name (drift creates nothing, and reads no name).
    let mut settings = settings.clone();
    settings.given_deployment_name = Some(NAME_STAND_IN.into());
    let settings = &settings;
    let (_, planned) = crate::plan::prepare(settings, &run.ci).map_err(Failure::InvalidInput)?;
    let platform = run.platform(key)?;
    let budget = Budget::new(run.started, settings.wait_timeout, settings.predict_timeout)
        .on(run.clock.clone());
    let deadline = budget.deadline(Phase::Setup);
    let checking = check(run, &planned, &env, key, platform.net, deadline);
    let mut signals = run.signals().await;
    let checked = tokio::select! {
        checked = checking => checked,
        sig = signals.next() => return Err(Failure::Cancelled(CancelReason::Signal(sig))),
    };
    let found = report::found(&env, &checked);
    {
        let mut rep = run.rep.lock().unwrap();
        let drifted = checked.iter().filter(|c| c.verdict.drift.drifted()).count();
        rep.line(&format!(
            "Drift: {} of {} targets drifted from the repository in {env}",
            drifted,
            checked.len()
        ));
        for c in checked.iter().filter(|c| c.verdict.drift.drifted()) {
            rep.warning(&format!("drift: {}", report::line(c).trim_start()));
        }
    }
    run.state.lock().unwrap().drift = Some(found);
    let unknown: Vec<&str> = checked
        .iter()
        .filter(|c| c.verdict.drift == Drift::Unknown)
        .map(|c| c.shown.as_str())
        .collect();
    match unknown.as_slice() {
        [] => Ok(()),
        names => Err(Failure::Deploy(anyhow!(
            "drift could not be decided for {} of {} targets ({}): a read failed, and a failed read is never in sync; drift-report says which read",
            names.len(),
            checked.len(),
            names.join(", ")
        ))),
    }
}

/// Every target's verdict, in the targets' order, each line said as it
/// is decided.
async fn check(
    run: &Run,
    planned: &[Planned],
    env: &str,
    key: &Secret,
    net: &crate::net::Network,
    deadline: Instant,
) -> Vec<Checked> {
    let clock = &run.clock;
    let http = net.api_client();
    let prefix = read::key_prefix(key);
    let workspace = Workspace::default();
    run.rep.lock().unwrap().line(&format!(
        "Drift: reading what serves {env} for {} targets, {TARGETS_AT_ONCE} at a time",
        planned.len()
    ));
    let reads = planned.iter().map(|p| {
        let api = Api::new(http.clone(), p.cfg.endpoints.clone(), key.clone())
            .on(clock.clone())
            .within(Phase::Setup, deadline);
        let (workspace, prefix) = (&workspace, prefix.as_str());
        async move {
            let cfg = &p.cfg;
            let shown = p.found.path.display().to_string();
            let verdict = match &cfg.target {
                Target::Chain { .. } => report::chain(),
                Target::Model {
                    dir, raw_config, ..
                } => {
                    let reading = read::reads(
                        &api,
                        workspace,
                        (&cfg.model_name, cfg.team.as_deref()),
                        dir,
                        env,
                    );
                    let reads = in_time(clock, deadline, reading).await;
                    let ours = String::from_utf8_lossy(raw_config);
                    verdict::decide(env, &reads, &ours, prefix)
                }
            };
            Checked {
                shown,
                kind: cfg.target.kind(),
                name: match cfg.target.kind() {
                    Kind::Model => cfg.model_name.clone(),
                    Kind::Chain => p.found.name.clone(),
                },
                verdict,
            }
        }
    });
    let mut checked = Vec::with_capacity(planned.len());
    let mut answers = std::pin::pin!(at_once(reads, |r| r));
    while let Some(c) = futures_util::StreamExt::next(&mut answers).await {
        run.rep.lock().unwrap().line(&report::line(&c));
        checked.push(c);
    }
    checked
}

/// The reads, or, past the deadline, reads that all failed for want of
/// time.
async fn in_time(clock: &Clock, deadline: Instant, reading: impl Future<Output = Reads>) -> Reads {
    #[expect(
        clippy::disallowed_methods,
        reason = "a timer on the drift check's deadline (its budget's Setup phase), through Clock::timer"
    )]
    let timed = tokio::time::timeout_at(clock.timer(deadline).into(), reading).await;
    timed.unwrap_or_else(|_| {
        let out = "the check's time budget ran out before it was read".to_string();
        Reads {
            source_hash: Err(out.clone()),
            serves: Err(out),
            config: None,
            audit: None,
        }
    })
}
