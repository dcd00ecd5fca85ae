//! The one wait loop for models and chains, and the reading of an
//! environment's promotion while waiting.
//!
//! A wait ends only on READY, FAILED, a permanent API error, the deadline
//! or a signal (with an environment: when the environment serves the
//! deployment). A failed read never ends it early nor makes it hang:
//! answers that are not the JSON expected become permanent only after
//! `baseten::GARBLED_ANSWERS_MAX` in a row.

use std::time::Duration;

use anyhow::anyhow;

use super::{Ctx, human};
use crate::baseten::{Api, ApiError};
use crate::budget::Phase;
use crate::outcome::Failure;
use crate::promotion;
use crate::retry::{Classify, Policy};

/// Failed reads during the wait back off at most this long (or four poll
/// intervals, if longer).
const WAIT_BACKOFF_MAX_SECS: u64 = 5;
/// The last read at the deadline gets this long at most.
const LAST_LOOK_MAX_SECS: u64 = 5;

/// One poll's reading.
pub(crate) enum Poll {
    Ready,
    Failed(Failure),
    Wait,
}

/// Polls until `poll` reads ready or failed, or `phase`'s deadline
/// passes. It derives from `phase` the deadline (asked of the run's
/// budget when the wait starts), the platform's client bound to it and the
/// timers, and owns the wall-clock deadline (which holds even when every
/// poll fails), backoff with jitter and Retry-After on failed reads, and
/// the sleep between polls. `poll` owns reading and reporting: it is given
/// the run bound to `phase` and the handle each read goes through (the
/// last look's has its own short deadline). `what` names the thing waited
/// for. Only a permanent error ends the wait early: reads are safe to
/// repeat, so every other failure is polled through.
pub(crate) async fn poll_until(
    ctx: &Ctx<'_>,
    phase: Phase,
    what: &str,
    mut poll: impl AsyncFnMut(&Ctx<'_>, &Api) -> Result<Poll, ApiError>,
) -> Result<(), Failure> {
    let deadline = ctx.until(phase);
    let api = ctx.api.within(phase, deadline);
    let ctx = &ctx.with_api(&api);
    let cfg = ctx.cfg;
    // Failed reads back off, but never so far that a deployment that became
    // ready is noticed late: a few poll intervals at most.
    let policy = Policy {
        max_delay: (cfg.poll_interval * 4).max(Duration::from_secs(WAIT_BACKOFF_MAX_SECS)),
        ..Policy::READ
    };
    let mut failures_in_a_row: u32 = 0;
    loop {
        let now = ctx.now();
        if now >= deadline {
            // One last read at the deadline: the wait may have slept through
            // the moment the deployment became ready.
            let grace = cfg
                .poll_interval
                .min(Duration::from_secs(LAST_LOOK_MAX_SECS));
            let until = ctx.until(Phase::LastLook { grace });
            let api = ctx.api.within(Phase::LastLook { grace }, until);
            #[expect(
                clippy::disallowed_methods,
                reason = "a timer on the last look's deadline, through Ctx::timer"
            )]
            let look = tokio::time::timeout_at(ctx.timer(until), poll(ctx, &api)).await;
            match look {
                Ok(Ok(Poll::Ready)) => return Ok(()),
                Ok(Ok(Poll::Failed(f))) => return Err(f),
                _ => {}
            }
            let last = ctx.state.lock().unwrap().last_status.clone();
            let last = last.unwrap_or_else(|| "no status read".into());
            ctx.event(&last, "deadline passed");
            return Err(Failure::Timeout(format!(
                "{what} was not ready after {} (last status: {last}); raise {} or check the logs",
                human(cfg.wait_timeout),
                cfg.wait_timeout_input
            )));
        }
        let sleep_for = match tokio::time::timeout(deadline - now, poll(ctx, ctx.api)).await {
            // The deadline hit mid-request; the top of the loop reports it.
            Err(_) => continue,
            Ok(Ok(Poll::Ready)) => return Ok(()),
            Ok(Ok(Poll::Failed(f))) => return Err(f),
            Ok(Ok(Poll::Wait)) => {
                failures_in_a_row = 0;
                cfg.poll_interval
            }
            Ok(Err(e @ ApiError::Permanent { .. })) => return Err(Failure::Deploy(anyhow!(e))),
            // The run's budget ran out mid-read: the top of the loop says so.
            Ok(Err(ApiError::OutOfTime { .. })) => continue,
            Ok(Err(e)) => {
                if failures_in_a_row == 0 {
                    ctx.say(&format!("poll failed, retrying: {e}"));
                    let last = ctx.state.lock().unwrap().last_status.clone();
                    ctx.event(last.as_deref().unwrap_or(""), &format!("poll failed: {e}"));
                }
                failures_in_a_row += 1;
                policy
                    .delay(failures_in_a_row, e.retry_after(), fastrand::f64())
                    .max(cfg.poll_interval)
            }
        };
        let left = ctx.left(deadline);
        tokio::time::sleep(sleep_for.min(left)).await;
    }
}

/// What the wait remembers about the promotion between polls.
#[derive(Default)]
pub(crate) struct PromotionTrack {
    last: Option<String>,
    fallback_noted: bool,
    /// Record each step in the promotion's timeline too (a gated promotion).
    timeline: bool,
    /// A gated promotion: what it replaces, and how far its own promotion
    /// has been seen.
    gate: Option<GateTrack>,
}

struct GateTrack {
    previous: Option<String>,
    /// Our deployment was seen as the candidate (a chain's only sign).
    seen: bool,
    /// Reads in a row that showed no promotion of ours.
    unseen: u32,
}

/// Reads in a row after a promote in which the environment shows no trace
/// of it before the gate says so (a chain environment reports no promotion
/// status to fail on, and a model's may be cleared once it ended).
const UNSEEN_READS_MAX: u32 = 5;

impl PromotionTrack {
    /// A gated promotion's track, its steps in the promotion's timeline:
    /// passes only on evidence that ours serves, and stops when another
    /// client's deployment takes the environment.
    pub(crate) fn gate(previous: Option<String>) -> Self {
        Self {
            timeline: true,
            gate: Some(GateTrack {
                previous,
                seen: false,
                unseen: 0,
            }),
            ..Self::default()
        }
    }
}

/// Our deployment (a model deployment or a chain deployment) is ready; is
/// it the one serving the environment yet? `environment` is the
/// environment's reading (EnvironmentV1 or ChainEnvironmentV1).
pub(crate) fn check_promotion(
    ctx: &Ctx<'_>,
    track: &mut PromotionTrack,
    deployment_id: &str,
    env: &str,
    environment: Result<promotion::Env, ApiError>,
) -> Result<Poll, ApiError> {
    let parsed = environment?;
    ctx.saw(env, &parsed);
    let view = match &track.gate {
        Some(g) => promotion::read_gated(&parsed, deployment_id, g.previous.as_deref()),
        None => promotion::read_env(&parsed, deployment_id),
    };
    let line = match &view {
        promotion::View::Serving => {
            format!("promotion into {env} done: all traffic on deployment {deployment_id}")
        }
        promotion::View::InFlight { status, percent } => match percent {
            Some(p) => format!("promotion into {env}: {status}, {p:.0}% of traffic"),
            None => format!("promotion into {env}: {status}"),
        },
        promotion::View::Failed { status, message } => {
            format!("promotion into {env}: {status}: {message}")
        }
        promotion::View::NotYet { current } => format!(
            "environment {env} still serves {}; waiting for the promotion",
            current.as_deref().unwrap_or("no deployment")
        ),
        promotion::View::Displaced { by } => format!(
            "{}: deployment {by} is not this run's",
            parsed.describe(env)
        ),
        promotion::View::Unsupported => String::new(),
    };
    if !line.is_empty() && track.last.as_deref() != Some(line.as_str()) {
        ctx.say(&line);
        if track.timeline {
            let status = match &view {
                promotion::View::InFlight { status, .. }
                | promotion::View::Failed { status, .. } => status.as_str(),
                promotion::View::Serving => promotion::PROMOTION_SUCCEEDED,
                _ => "",
            };
            ctx.promotion_event(status, &line);
        } else {
            ctx.event("", &line);
        }
        track.last = Some(line);
    }
    if let Some(g) = track.gate.as_mut() {
        let ours_named = parsed.candidate.as_deref() == Some(deployment_id);
        match &view {
            promotion::View::InFlight { .. } => {
                g.seen = true;
                g.unseen = 0;
            }
            // An ended promotion that names no candidate is ours only once
            // ours was seen in flight (else it may be an earlier run's);
            // ours ended without serving when its candidate is gone (a
            // chain environment reports no status at all).
            promotion::View::NotYet { .. } | promotion::View::Failed { .. } if !ours_named => {
                if !g.seen {
                    g.unseen += 1;
                }
                if g.seen || g.unseen >= UNSEEN_READS_MAX {
                    let how = match &view {
                        promotion::View::Failed { status, message } => {
                            format!("ended {status}: {message}")
                        }
                        _ => "ended without it serving".to_string(),
                    };
                    return Ok(Poll::Failed(Failure::Deploy(anyhow!(
                        "the promotion of {deployment_id} into {env} {how}; {}",
                        parsed.describe(env)
                    ))));
                }
                return Ok(Poll::Wait);
            }
            _ => {}
        }
    }
    Ok(match view {
        promotion::View::Serving => Poll::Ready,
        promotion::View::InFlight { .. } | promotion::View::NotYet { .. } => Poll::Wait,
        promotion::View::Failed { status, message } => Poll::Failed(Failure::Deploy(anyhow!(
            "the promotion into {env} ended {status}: {message}"
        ))),
        promotion::View::Displaced { by } => Poll::Failed(Failure::Deploy(anyhow!(
            "another client moved {env} during the promotion: {}; deployment {by} was not created by this run, so it is left as it is",
            parsed.describe(env)
        ))),
        promotion::View::Unsupported if track.gate.is_some() => {
            // Without the promotion fields, only the current deployment
            // being ours is evidence: wait for it.
            if !track.fallback_noted {
                track.fallback_noted = true;
                ctx.notice(&format!(
                    "the environment API does not report promotions here: waiting until {env}'s current deployment is {deployment_id}"
                ));
            }
            Poll::Wait
        }
        promotion::View::Unsupported => {
            if !track.fallback_noted {
                track.fallback_noted = true;
                ctx.notice(&format!(
                    "the environment API does not report promotions here: readiness in {env} is judged by the deployment status alone"
                ));
                ctx.note(format!(
                    "promotion into {env} not observable; status-only readiness"
                ));
            }
            Poll::Ready
        }
    })
}
