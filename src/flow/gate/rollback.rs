//! Putting the previous deployment back: after a failed promotion or
//! environment test (`roll_back`), or when a signal stops a gated promotion
//! midway (`cleanup_gated`). Each round reads the environment, decides
//! (`step::next_step`, the one rollback decision) and performs one
//! request; the run reports what the last read shows.

use std::time::Instant;

use super::rules::{self, OnSignal};
use super::step::{self, Ending, RollbackDeployments, Sent, Step};
use super::{Stage, flags, promote_once, set_stage};
use crate::baseten::ApiError;
use crate::budget::{self, Allowance};
use crate::flow::{Ctx, human};
use crate::kind::Kind;
use crate::promotion::Env;

/// Puts `prev` back into `env` after our promotion of `ours` failed or
/// its environment test did, by `step::next_step` over a fresh read each
/// round, and reports what the last read shows, within the rollback's
/// deadline from the run's budget (a signal's seconds once cancelled).
/// Sets `rolled-back`; answers where traffic is.
pub(crate) async fn roll_back(
    ctx: &Ctx<'_>,
    owner: Kind,
    owner_id: &str,
    env: &str,
    ours: &str,
    previous: Option<&str>,
) -> String {
    let Some(prev) = previous else {
        set_stage(ctx, Stage::Settled);
        ctx.state.lock().unwrap().rolled_back = Some(false);
        let msg = format!(
            "nothing to roll back to: {ours} is the first deployment of {env} and is left as it is"
        );
        ctx.warn(&msg);
        return msg;
    };
    let now = ctx.now();
    let time = ctx.budget.allowance();
    let until = ctx.budget.until(budget::Phase::Rollback, now);
    if time == Allowance::Run && ctx.budget.past_run(until) {
        ctx.say(&format!(
            "the run's budget is spent: the rollback gets {} more",
            human(until - now)
        ));
    }
    let api = ctx.api.within(budget::Phase::Rollback, until);
    let ctx = &ctx.with_api(&api);
    ctx.say(&format!("Rolling {env} back to deployment {prev}"));
    set_stage(ctx, Stage::RollingBack);
    let what = PutBack {
        owner,
        owner_id,
        env,
        ours,
        prev,
    };
    let ending = put_back(ctx, what, time, until).await;
    let (rolled_back, msg) = (ending.rolled_back(), ending.text(env, prev, time));
    set_stage(ctx, Stage::Settled);
    ctx.state.lock().unwrap().rolled_back = Some(rolled_back);
    ctx.promotion_event("", &msg);
    if rolled_back {
        ctx.say(&msg);
    } else {
        ctx.warn(&msg);
    }
    msg
}

/// What a rollback puts back where: `prev` into the `env` of the owner
/// (`owner`, `owner_id`), in place of our `ours`.
#[derive(Clone, Copy)]
struct PutBack<'a> {
    owner: Kind,
    owner_id: &'a str,
    env: &'a str,
    ours: &'a str,
    prev: &'a str,
}

/// The rollback's loop: read, decide ([`step::next_step`]), perform, until
/// an ending, by `until` (`time`: the run's budget or a signal's seconds).
async fn put_back(ctx: &Ctx<'_>, what: PutBack<'_>, time: Allowance, until: Instant) -> Ending {
    let PutBack {
        owner,
        owner_id,
        env,
        ours,
        prev,
    } = what;
    // The id our promote of `prev` answered (a platform copy of it), kept
    // in the gate's state so that a rollback resumed after a signal knows it.
    let (mut back, ours_known) = {
        let st = ctx.state.lock().unwrap();
        let g = st.gate.as_ref();
        (
            g.and_then(|g| g.back.clone()),
            g.is_none_or(|g| g.promoted.is_some()),
        )
    };
    let remember = |back: &mut Option<String>, id: String| {
        if let Some(g) = ctx.state.lock().unwrap().gate.as_mut() {
            g.back = Some(id.clone());
        }
        *back = Some(id);
    };
    let mut sent = Sent::default();
    let mut last: Option<Env> = None;
    // A cancel whose answer was not a success: the next read tells.
    let mut cancel_unsure = false;
    loop {
        let e = match ctx.api.read_environment(owner, owner_id, env).await {
            Ok(e) => {
                ctx.saw(env, &e);
                if std::mem::take(&mut cancel_unsure) {
                    ctx.say(&format!("after the cancel: {}", e.describe(env)));
                }
                e
            }
            Err(err) => {
                let out_of_time = ctx.left(until).is_zero();
                return step::unread(err.to_string(), last.as_ref(), env, out_of_time);
            }
        };
        let deployments = RollbackDeployments {
            ours,
            prev,
            back: back.as_deref(),
            ours_known,
        };
        let next = step::next_step(&e, env, deployments, sent, owner, time);
        sent.count(&next);
        match next {
            Step::End(ending) => return ending,
            Step::Wait => {}
            Step::Cancel { force } => {
                let how = if force {
                    "Force-cancelling the rolling promotion"
                } else {
                    "Cancelling the promotion"
                };
                ctx.say(&format!("{how} into {env}"));
                ctx.promotion_event("", &format!("cancel the promotion of {ours}"));
                // The answer says little; the next read says what happened
                // (a promotion that just finished refuses the cancel, and
                // is then promoted back).
                // A refusal after a lost answer may be our own cancel,
                // applied: the next read says what happened, not this.
                if let Err(err) = ctx.api.cancel_promotion(owner_id, env, force).await {
                    ctx.say(&format!(
                        "the cancel request answered {err}; reading {env} to see whether it was taken"
                    ));
                    cancel_unsure = true;
                }
                continue;
            }
            Step::ChainInterrupt => {
                // Chains have no cancel: promote the previous deployment;
                // while one promotion is in flight the platform refuses a
                // second, and then ending ours is the way back.
                ctx.promotion_event("", &format!("promote {prev} back into {env}"));
                match ctx
                    .api
                    .promote(owner, owner_id, env, prev, flags(ctx))
                    .await
                {
                    Ok(id) => remember(&mut back, id),
                    Err(ApiError::Permanent { .. }) => {
                        // Read again: only a candidate that is still ours
                        // is ended.
                        let again = ctx.api.read_environment(owner, owner_id, env).await;
                        if again.is_ok_and(|a| a.candidate.as_deref() == Some(ours)) {
                            end_chain_candidate(ctx, owner_id, env, ours).await;
                        }
                    }
                    Err(err) => ctx.say(&format!(
                        "the promote of {prev} got no usable answer ({err}); reading {env}"
                    )),
                }
                continue;
            }
            Step::ChainEndOurs => {
                end_chain_candidate(ctx, owner_id, env, ours).await;
                continue;
            }
            Step::PromoteBack => {
                if let Err(msg) = reactivate(ctx, owner, owner_id, prev).await {
                    let why = format!("{msg}; {}", e.describe(env));
                    return Ending::Failed { why };
                }
                ctx.promotion_event("", &format!("promote {prev} back into {env}"));
                match promote_once(ctx, owner, owner_id, env, prev, e.current.as_deref()).await {
                    Ok(id) => remember(&mut back, id),
                    Err(f) => {
                        let why = format!(
                            "the rollback failed ({f}): promote {prev} again in the Baseten UI"
                        );
                        return Ending::Failed { why };
                    }
                }
                continue;
            }
        }
        let left = ctx.left(until);
        if left.is_zero() {
            let seen = e.describe(env);
            return Ending::Unfinished { seen };
        }
        // The percent is the traffic on the promotion's new version: the
        // candidate (the previous deployment while it is promoted back,
        // ours while a cancelled promotion ramps down).
        let new_version = e.candidate.as_deref().unwrap_or(ours);
        if let Some(line) = e.in_progress.as_ref().map(|f| match f.percent {
            Some(p) => format!(
                "rollback: {}, {p:.0}% of traffic on {new_version}",
                f.status
            ),
            None => format!("rollback: {}", f.status),
        }) && last.as_ref().and_then(|l| l.in_progress.as_ref()) != e.in_progress.as_ref()
        {
            ctx.say(&line);
            ctx.promotion_event("", &line);
        }
        last = Some(e);
        tokio::time::sleep(ctx.cfg.poll_interval.min(left)).await;
    }
}

/// Ends our own chain promotion by deactivating our candidate (chains
/// have no cancel endpoint).
async fn end_chain_candidate(ctx: &Ctx<'_>, chain_id: &str, env: &str, ours: &str) {
    ctx.say(&format!(
        "{env} cannot be handed back while {ours} is being promoted: deactivating {ours} (this run's) so that its promotion ends"
    ));
    ctx.promotion_event("", &format!("deactivate {ours} to end its promotion"));
    if let Err(err) = ctx.api.deactivate_chain(chain_id, ours).await {
        ctx.say(&format!(
            "deactivating {ours} failed ({err}); reading {env}"
        ));
    }
}

/// A deployment the environment's cleanup strategy deactivated cannot be
/// promoted: a model's is activated first (documented); a chain's cannot
/// be (there is no chain activate), which the error says.
async fn reactivate(ctx: &Ctx<'_>, owner: Kind, owner_id: &str, prev: &str) -> Result<(), String> {
    let status = ctx
        .api
        .deployment_status_of(owner, owner_id, prev)
        .await
        .unwrap_or_default();
    if !matches!(status.as_str(), "INACTIVE" | "DEACTIVATING") {
        return Ok(());
    }
    match owner {
        Kind::Model => {
            ctx.say(&format!(
                "the previous deployment {prev} is {status} (the environment's cleanup strategy deactivated it): activating it first"
            ));
            ctx.promotion_event("", &format!("activate {prev}"));
            ctx.api.activate(owner_id, prev).await.map_err(|e| {
                format!("the previous deployment {prev} is {status} and activating it failed ({e})")
            })
        }
        Kind::Chain => Err(format!(
            "the previous chain deployment {prev} is {status} (the environment's cleanup strategy deactivated it) and chains cannot be re-activated through the API: redeploy it or promote another one in the Baseten UI"
        )),
    }
}

/// A signal arrived while a gated promotion was under way: the rollback
/// runs with a signal's short budget (a promotion in flight is cancelled —
/// force-cancelled only when rolling — a chain's is ended by promoting the
/// previous deployment or deactivating ours, a promoted deployment whose
/// environment test had not passed is replaced by the previous one), and
/// the run reports what the last read shows.
pub(crate) async fn cleanup_gated(ctx: &Ctx<'_>, cancelled: bool) {
    let gate = ctx.state.lock().unwrap().gate.clone();
    let Some(g) = gate else { return };
    match rules::on_signal(Some(&g), cancelled) {
        OnSignal::Nothing => {}
        OnSignal::LeaveFirst => ctx.note(format!(
            "cancelled during the promotion into {}: it is the environment's first deployment, left as it is",
            g.env
        )),
        OnSignal::RollBack { ours, prev } => {
            let outcome = roll_back(ctx, g.owner, &g.owner_id, &g.env, &ours, Some(&prev)).await;
            let msg = format!("cancelled during the promotion into {}: {outcome}", g.env);
            ctx.note(msg);
        }
    }
}
