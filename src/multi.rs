//! Several targets in one step: every target validated before any request,
//! then at most `max-parallel` deploying at once, each with its own budget,
//! wait, smoke test and cleanup (`execute`) and its own log, shown as
//! one group when it ends (CI groups cannot interleave). A signal stops and
//! cleans up every target in flight and starts no other; `fail-fast` does
//! the same when one fails. The step's `status` is the worst of the
//! targets' in this order, worst first: `deploy_failed`, `deploy_timeout`,
//! `predict_failed`, `cleanup_failed`, `success`.

use std::io::{Read, Seek, SeekFrom};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;

use crate::ci::{Cell, Level};
use crate::handles::{Platform, Run};
use crate::secret::Secret;
use crate::settings::Settings;

use crate::execute::{self, Stop, StopRequest};
use crate::flow::State;
use crate::outcome::{CancelReason, Failure, Status};
use crate::plan::{self, Planned, Selection};
use crate::report::{Fanout, outputs_of};
use crate::targets;
use crate::{ci, github};

/// Whether the inputs ask for the several-target mode: more than one
/// target (a list, a glob, a folder of models) or change detection.
pub(crate) fn wanted(settings: &Settings) -> bool {
    settings.changed_since.is_some() || targets::is_several(&settings.truss_directory)
}

/// A target's end.
struct Done {
    index: usize,
    /// False when it never started (a signal or fail-fast came first).
    ran: bool,
    state: State,
    result: Result<(), Failure>,
}

/// Status words from worst (0) to best.
fn rank(s: Status) -> usize {
    match s {
        Status::DeployFailed => 0,
        Status::DeployTimeout => 1,
        Status::PredictFailed => 2,
        Status::CleanupFailed => 3,
        Status::Success => 4,
    }
}

/// The failure that speaks for the step: the worst status; among equals, a
/// target that ran and failed on its own before one that was called off.
fn worst<'a>(results: impl Iterator<Item = &'a Result<(), Failure>>) -> Option<&'a Failure> {
    results
        .filter_map(|r| r.as_ref().err())
        .min_by_key(|f| (rank(f.status()), matches!(f, Failure::Cancelled(_))))
}

fn status_of(r: &Result<(), Failure>) -> Status {
    match r {
        Ok(()) => Status::Success,
        Err(f) => f.status(),
    }
}

/// Validates every target and runs them; returns the step's result and
/// what it adds to the report. `state` receives what the outputs show
/// outside `results`: the one target's when there is one.
pub(crate) async fn run(
    run: &Run,
    settings: &Settings,
    key: Option<&Secret>,
) -> (Result<(), Failure>, Option<Fanout>) {
    let (rep, state) = (&run.rep, &run.state);
    state.lock().unwrap().model_name = String::new();
    let (sel, planned) = match plan::prepare(settings, &run.ci) {
        Ok(p) => p,
        Err(e) => return (Err(Failure::InvalidInput(e)), None),
    };
    plan::say_selection(&sel, rep);
    if planned.is_empty() {
        let since = sel.since.as_ref().map_or(String::new(), |(s, _)| s.clone());
        rep.lock().unwrap().line(&format!(
            "No target changed since {since}: nothing to deploy"
        ));
        let fanout = Fanout {
            targets_count: Some(0),
            results: Some("[]".into()),
            heading: format!("Truss Deploy: no target changed since {since}"),
            columns: COLUMNS,
            details: unchanged_details(&sel),
            ..Fanout::default()
        };
        return (Ok(()), Some(fanout));
    }
    // A dry run without a key makes no request; every other run reaches
    // the platform (a dry run only for its preflight), and cannot without
    // its network settings.
    let platform = match key {
        None => None,
        Some(key) => match run.platform(key) {
            Ok(p) => Some(p),
            Err(f) => return (Err(f), None),
        },
    };
    let mut done = deploy_all(run, &planned, platform, settings).await;
    done.sort_by_key(|d| d.index);
    let halt_signal = done.iter().find_map(|d| match &d.result {
        Err(
            Failure::Cancelled(CancelReason::Signal(s))
            | Failure::CleanupUnfinished {
                reason: CancelReason::Signal(s),
                ..
            },
        ) => Some(*s),
        _ => None,
    });
    finish(&sel, &planned, done, state, halt_signal)
}

/// Runs the targets, `max_parallel` at a time, until all have ended.
/// `platform` is `None` for a dry run, which makes no request.
async fn deploy_all(
    run: &Run,
    planned: &[Planned],
    platform: Option<Platform<'_>>,
    settings: &Settings,
) -> Vec<Done> {
    let rep = &run.rep;
    let mut signals = run.signals().await;
    let (max_parallel, fail_fast) = (settings.max_parallel, settings.fail_fast);
    let (tx, rx) = tokio::sync::watch::channel(StopRequest::default());
    let mut running = futures_util::stream::iter(planned)
        .map(|p| deploy_one(run, p, platform, rx.clone()))
        .buffer_unordered(max_parallel);
    let mut done = Vec::with_capacity(planned.len());
    loop {
        tokio::select! {
            next = running.next() => match next {
                Some(d) => {
                    if fail_fast && d.ran && d.result.is_err() && !tx.borrow().fail_fast {
                        rep.lock().unwrap().line(
                            "fail-fast: a target failed; stopping the others (each cleans up) and starting no more",
                        );
                        tx.send_modify(|h| h.fail_fast = true);
                    }
                    done.push(d);
                }
                None => break,
            },
            sig = signals.next() => {
                rep.lock().unwrap().line(&format!(
                    "{sig}: stopping every target in flight (each cleans up) and starting no more"
                ));
                tx.send_modify(|h| {
                    h.signals += 1;
                    h.last_signal = sig;
                });
            }
        }
    }
    done
}

/// One target, start to end, its log kept apart and shown as one group
/// when it ends.
async fn deploy_one(
    run: &Run,
    p: &Planned,
    platform: Option<Platform<'_>>,
    halt: tokio::sync::watch::Receiver<StopRequest>,
) -> Done {
    let (rep, clock) = (&run.rep, &run.clock);
    let label = format!("{} {}", p.found.kind.as_str(), p.found.path.display());
    let h = *halt.borrow();
    if h.signals > 0 || h.fail_fast {
        let why = if h.signals > 0 {
            CancelReason::Signal(h.last_signal)
        } else {
            CancelReason::FailFast
        };
        return Done {
            index: p.index,
            ran: false,
            state: State {
                model_name: p.found.name.clone(),
                ..State::default()
            },
            result: Err(Failure::Cancelled(why)),
        };
    }
    rep.lock()
        .unwrap()
        .line(&format!("▶ {label}: deploying {:?}", p.found.name));
    // The log waits in an unnamed temporary file, not in memory: streamed
    // deployment logs of several targets can be long.
    #[expect(
        clippy::disallowed_methods,
        reason = "an unnamed temporary file (gone when closed) holding one target's log until it is replayed: never a file the user named"
    )]
    let mut file = tempfile::tempfile().ok();
    let sink: ci::Sink = match file.as_ref().and_then(|f| f.try_clone().ok()) {
        Some(f) => Box::new(f),
        None => Box::new(std::io::sink()),
    };
    let own = Arc::new(Mutex::new(rep.lock().unwrap().buffered(sink)));
    let state = Mutex::new(State {
        model_name: p.cfg.model_name.clone(),
        ..State::default()
    });
    let started = clock.now();
    let mut stop = Stop::Shared { halt, seen: 0 };
    for n in &p.cfg.notices {
        own.lock().unwrap().notice(n);
    }
    let target = crate::handles::Handles {
        cfg: &p.cfg,
        rep: &own,
        state: &state,
        clock,
        started,
    };
    let result = match platform {
        Some(platform) if execute::asks_preflight(&p.cfg) => {
            execute::dry_run_asking(target, platform, &mut stop).await
        }
        key if !execute::makes_requests(&p.cfg) => {
            execute::without_requests(&p.cfg, &own, key.is_some())
        }
        None => Err(Failure::InvalidInput(
            "baseten-api-key is required: pass your Baseten API key from a secret".into(),
        )),
        Some(platform) => {
            // Each target is its own GitHub deployment, comment and status.
            let gh = execute::github_job(&p.cfg)
                .and_then(|job| github::Session::open(job, platform.net, &own));
            execute::execute(target, platform, &mut stop, gh.as_ref()).await
        }
    };
    let status = status_of(&result);
    {
        let mut o = own.lock().unwrap();
        if let Err(f) = &result {
            o.annotate(Level::Error, Some(status.as_str()), &f.to_string());
        }
        o.line(&format!("Final status: {status}"));
        o.finish();
    }
    let mut log = String::new();
    if let Some(f) = file.as_mut() {
        let _ = f.seek(SeekFrom::Start(0));
        let _ = f.read_to_string(&mut log);
    }
    let mut r = rep.lock().unwrap();
    r.replay(
        &format!(
            "{label} ({:?}): {status} after {}",
            state.lock().unwrap().model_name,
            ci::human(clock.now().saturating_duration_since(started))
        ),
        &log,
    );
    if let Err(f) = &result {
        r.annotate(
            Level::Error,
            Some(&format!("{label}: {status}")),
            &f.to_string(),
        );
    }
    drop(r);
    Done {
        index: p.index,
        ran: true,
        state: state.into_inner().unwrap(),
        result,
    }
}

const COLUMNS: &[&str] = &[
    "Target",
    "Kind",
    "Name",
    "Status",
    "Deployment ID",
    "Deploy Time",
    "Logs",
];

fn unchanged_details(sel: &Selection) -> Vec<String> {
    let since = sel.since.as_ref().map_or("", |(s, _)| s.as_str());
    sel.unchanged
        .iter()
        .map(|f| format!("{}: unchanged since {since}, skipped", f.path.display()))
        .collect()
}

/// The step's result, its outputs and its summary from every target's end.
fn finish(
    sel: &Selection,
    planned: &[Planned],
    done: Vec<Done>,
    state: &Mutex<State>,
    halt_signal: Option<&'static str>,
) -> (Result<(), Failure>, Option<Fanout>) {
    let mut results = Vec::with_capacity(done.len());
    let mut rows = Vec::with_capacity(done.len());
    let mut details = Vec::new();
    for (d, p) in done.iter().zip(planned) {
        let status = status_of(&d.result);
        let mut out = outputs_of(&d.state, status, Some(&p.cfg));
        if let Err(f) = &d.result {
            out.error_message = if d.ran {
                f.to_string()
            } else {
                format!("not started: {f}")
            };
            details.push(format!("{}: {}", p.found.path.display(), out.error_message));
        }
        for n in &d.state.notes {
            details.push(format!("{}: {n}", p.found.path.display()));
        }
        results.push(ci::TargetResult::new(
            p.found.path.to_string_lossy().into_owned(),
            p.found.kind,
            &out,
        ));
        let time = match ci::format_deploy_time(out.deploy_time_seconds) {
            t if t.is_empty() => String::new(),
            t => format!("{t}s"),
        };
        rows.push(vec![
            Cell::Code(p.found.path.display().to_string()),
            Cell::Text(p.found.kind.as_str().into()),
            Cell::Text(out.model_name.clone()),
            Cell::Code(status.as_str().into()),
            Cell::Code(out.deployment_id.clone()),
            Cell::Text(time),
            Cell::Link {
                label: if out.logs_url.is_empty() {
                    String::new()
                } else {
                    "logs".into()
                },
                url: out.logs_url.clone(),
            },
        ]);
    }
    details.extend(unchanged_details(sel));
    let hourly_price = step_price(&done, planned);
    details.extend(hourly_price.as_ref().map(|p| p.line.clone()));

    let failed: Vec<(usize, &Done)> = done
        .iter()
        .enumerate()
        .filter(|(_, d)| d.result.is_err())
        .collect();
    let n = done.len();
    // A target whose cleanup could not finish speaks for the step, whatever
    // halted it (a signal or fail-fast) and wherever it stands in the
    // list: what it left running is named, with its own exit code (8).
    let unfinished = done.iter().find_map(|d| match &d.result {
        Err(f @ Failure::CleanupUnfinished { .. }) => Some(f),
        _ => None,
    });
    let result = if let Some(w) = unfinished {
        let left: Vec<String> = done
            .iter()
            .filter_map(|d| match &d.result {
                Err(Failure::CleanupUnfinished { left, .. }) => {
                    Some(format!("{}: {left}", planned[d.index].found.path.display()))
                }
                _ => None,
            })
            .collect();
        Err(same_kind(w, left.join("; ")))
    } else if let Some(sig) = halt_signal {
        Err(Failure::Cancelled(CancelReason::Signal(sig)))
    } else {
        match worst(done.iter().map(|d| &d.result)) {
            None => Ok(()),
            Some(w) => {
                let list: Vec<String> = failed
                    .iter()
                    .map(|(i, d)| {
                        format!(
                            "{} ({})",
                            planned[*i].found.path.display(),
                            status_of(&d.result)
                        )
                    })
                    .collect();
                let msg = format!(
                    "{} of {n} targets did not succeed: {}",
                    failed.len(),
                    list.join(", ")
                );
                Err(same_kind(w, msg))
            }
        }
    };
    let ok = n - failed.len();
    let heading = format!(
        "Truss Deploy: {n} target{} ({ok} succeeded{})",
        if n == 1 { "" } else { "s" },
        if failed.is_empty() {
            String::new()
        } else {
            format!(", {} did not", failed.len())
        }
    );
    // With one target, the step's own outputs are that target's.
    let mut done = done;
    if let [only] = done.as_mut_slice() {
        *state.lock().unwrap() = std::mem::take(&mut only.state);
    }
    let fanout = Fanout {
        targets_count: Some(n),
        results: Some(ci::results_json(&results)),
        hourly_price,
        heading,
        columns: COLUMNS,
        rows,
        details,
        ..Fanout::default()
    };
    (result, Some(fanout))
}

/// The step's hourly price with several targets: their sum when every
/// target was priced (each `results` entry carries its own). One target's
/// is its own, from its state.
fn step_price(done: &[Done], planned: &[Planned]) -> Option<ci::HourlyPrice> {
    if done.len() < 2 {
        return None;
    }
    // What stands for what serves at each target's end (after a gated
    // rollback: what serves again, not the rolled-back deployment).
    let each: Vec<(String, crate::flow::price::PriceRecord)> = done
        .iter()
        .zip(planned)
        .map(|(d, p)| {
            let price = crate::flow::price::standing(&d.state);
            (p.found.path.display().to_string(), price)
        })
        .collect();
    let each: Vec<(String, &crate::flow::price::PriceRecord)> =
        each.iter().map(|(t, r)| (t.clone(), r)).collect();
    crate::flow::price::sum(&each)
}

/// A failure like `f` (same status word and exit code) saying `msg`.
fn same_kind(f: &Failure, msg: String) -> Failure {
    match f {
        Failure::InvalidInput(_) => Failure::InvalidInput(msg),
        Failure::Deploy(_) => Failure::Deploy(anyhow::anyhow!(msg)),
        Failure::Timeout(_) => Failure::Timeout(msg),
        Failure::Predict(_) => Failure::Predict(anyhow::anyhow!(msg)),
        Failure::Cleanup(_) => Failure::Cleanup(anyhow::anyhow!(msg)),
        Failure::Cancelled(_) => Failure::Deploy(anyhow::anyhow!(msg)),
        Failure::CleanupUnfinished { reason, why, .. } => Failure::CleanupUnfinished {
            reason: *reason,
            why: why.clone(),
            left: msg,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_failure_speaks_for_the_step() {
        let timeout = || Err(Failure::Timeout("t".into()));
        let deploy = || Err(Failure::Deploy(anyhow::anyhow!("d")));
        let cleanup = || Err(Failure::Cleanup(anyhow::anyhow!("c")));
        let called_off = || Err(Failure::Cancelled(CancelReason::Signal("SIGINT")));
        type Case = (Vec<Result<(), Failure>>, Option<&'static str>);
        let cases: [Case; 5] = [
            (vec![Ok(()), Ok(())], None),
            (vec![Ok(()), cleanup(), timeout()], Some("t")),
            (vec![cleanup(), Ok(())], Some("c")),
            // A target called off is deploy_failed too; the one that failed
            // on its own speaks first, in whatever order they ended.
            (vec![called_off(), deploy(), timeout()], Some("d")),
            (vec![timeout(), called_off()], Some("cancelled by SIGINT")),
        ];
        for (results, want) in cases {
            let got = worst(results.iter()).map(|f| f.to_string());
            assert_eq!(got.as_deref(), want, "{results:?}");
        }
    }
}
