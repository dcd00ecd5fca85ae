//! A gated promotion (`promotion: after-predict`), for models and chains
//! alike: the deployment was created outside any environment and passed its
//! own smoke test; now remember what serves the environment, promote, wait
//! for the promotion (following the id the platform answers, which is a new
//! deployment when it could not reuse ours), test again through the
//! environment's URL, and put the previous deployment back when the
//! promotion or that test fails.

use std::time::{Duration, Instant};

use anyhow::anyhow;
use serde_json::Value;

use super::{Ctx, Poll, PromotionTrack, check_promotion, deploy_error, poll_until, smoke_test};
use crate::baseten::{ApiError, Owner, PromoteFlags};
use crate::outcome::Failure;
use crate::promotion;

/// How often a promote whose answer was lost, and which the environment
/// shows no trace of, is sent again.
const PROMOTE_ROUNDS: u32 = 3;
/// A rollback started by a signal gets this long (the runner kills the
/// job a few seconds after its cancel).
const CANCELLED_ROLLBACK_SECS: u64 = 3;

/// Where the gate stands, for cleanup and a cancellation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The promote request is out (or about to be): traffic may move.
    Promoting,
    /// The promoted deployment serves; the environment's test runs.
    Serving,
    /// Traffic is being moved back to the previous deployment.
    RollingBack,
    /// Passed, or put back (or the rollback failed and said so).
    Settled,
}

/// A gated promotion in progress.
#[derive(Clone, Debug)]
pub(crate) struct Gate {
    pub(crate) owner: Owner,
    pub(crate) owner_id: String,
    pub(crate) env: String,
    /// What served the environment before; the rollback target.
    pub(crate) previous: Option<String>,
    /// The deployment the platform promotes (ours, or one it created).
    pub(crate) promoted: Option<String>,
    pub(crate) phase: Phase,
}

/// What the gate tests and promotes.
pub(crate) struct Candidate<'a> {
    pub(crate) owner: Owner,
    pub(crate) owner_id: &'a str,
    /// The deployment that passed its own smoke test.
    pub(crate) tested: &'a str,
    /// `predict` (models) or `run_remote` (chains).
    pub(crate) endpoint: &'a str,
    pub(crate) payload: &'a Value,
    pub(crate) streaming: bool,
}

/// Promotes `c.tested` into the gated environment and proves it there,
/// rolling back on failure. The error says where traffic is.
pub(crate) async fn promote_after_predict(ctx: &Ctx<'_>, c: &Candidate<'_>) -> Result<(), Failure> {
    let env = ctx
        .cfg
        .gated_environment()
        .expect("a gated promotion has an environment (checked with the inputs)");
    ctx.group(&format!("Promote into {env}"));
    let r = gate(ctx, c, env).await;
    ctx.end_group();
    r
}

/// Before anything is created: the environment a gated promotion goes
/// into must exist (for an existing model or chain; a new one has only
/// production until the platform makes it). A missing one would otherwise
/// be found only after a deployment was built for nothing.
pub(crate) async fn check_gate_target(
    ctx: &Ctx<'_>,
    owner: Owner,
    existing: Option<&str>,
) -> Result<(), Failure> {
    let (Some(env), Some(id)) = (ctx.cfg.gated_environment(), existing) else {
        return Ok(());
    };
    match ctx.api.read_environment(owner, id, env).await {
        Ok(_) => Ok(()),
        Err(e) if e.permanent_status() == Some(404) => Err(Failure::Deploy(anyhow!(
            "the {} has no environment {env:?} to promote into ({e}): create it in the Baseten UI or fix environment; nothing was created",
            owner.word()
        ))),
        Err(e) => Err(deploy_error(e)),
    }
}

fn set_phase(ctx: &Ctx<'_>, phase: Phase) {
    if let Some(g) = ctx.state.lock().unwrap().gate.as_mut() {
        g.phase = phase;
    }
}

async fn gate(ctx: &Ctx<'_>, c: &Candidate<'_>, env: &str) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let word = c.owner.word();
    ctx.state.lock().unwrap().tested_deployment_id = Some(c.tested.to_string());
    // The promotion has its own budget, as the smoke test has.
    let until = Instant::now() + cfg.wait_timeout;
    ctx.api.set_deadline(Some(until));
    let before = ctx
        .api
        .read_environment(c.owner, c.owner_id, env)
        .await
        .map_err(|e| with_outcome(deploy_error(e), "nothing was promoted".into()))?;
    let current = promotion::current(&before);
    let candidate = promotion::candidate(&before);
    // A new model's (or chain's) first deployment is promoted into
    // production by the platform itself: there is nothing to gate or to
    // roll back to.
    let already = [&current, &candidate]
        .into_iter()
        .any(|d| d.as_deref() == Some(c.tested));
    let previous = current.filter(|d| d != c.tested);
    {
        let mut st = ctx.state.lock().unwrap();
        st.previous_deployment_id = previous.clone();
        st.gate = Some(Gate {
            owner: c.owner,
            owner_id: c.owner_id.to_string(),
            env: env.to_string(),
            previous: previous.clone(),
            promoted: None,
            phase: Phase::Promoting,
        });
    }
    match &previous {
        Some(p) => ctx.say(&format!(
            "{env} serves deployment {p} now: the rollback target"
        )),
        None => ctx.say(&format!(
            "{env} serves no deployment yet: this is its first, with nothing to roll back to"
        )),
    }
    let promoted = if already {
        ctx.say(&format!(
            "the platform already promotes {} into {env} (the first deployment of this {word})",
            c.tested
        ));
        c.tested.to_string()
    } else {
        if let Some(other) = candidate {
            return Err(Failure::Deploy(anyhow!(
                "{env} has a promotion of deployment {other} in progress: nothing was promoted; wait for it to finish or cancel it, then run again"
            )));
        }
        promote_once(ctx, c, env, c.tested, previous.as_deref()).await?
    };
    {
        let mut st = ctx.state.lock().unwrap();
        st.deployment_id = Some(promoted.clone());
        if let Some(g) = st.gate.as_mut() {
            g.promoted = Some(promoted.clone());
        }
    }
    if promoted != c.tested {
        let msg = format!(
            "the platform promotes a new deployment {promoted}, created from the tested {} (the environment's instance type or its re-deploy setting asked for one); the environment's smoke test proves it",
            c.tested
        );
        ctx.say(&msg);
        ctx.note(msg);
    }
    ctx.promotion_event("", &format!("promotion of {promoted} into {env} started"));

    let mut track = PromotionTrack::timeline();
    let mut live = crate::evidence::Watch::default();
    let waited = poll_until(
        ctx,
        until,
        &format!("the promotion into {env}"),
        async || {
            let json = ctx.api.environment_of(c.owner, c.owner_id, env).await;
            // Real traffic breaking an objective cancels a rolling promotion.
            let seen = json.as_ref().ok();
            if let Some(f) =
                crate::evidence::watch(ctx, &mut live, c.owner, c.owner_id, env, seen).await
            {
                return Ok(Poll::Failed(f));
            }
            check_promotion(ctx, &mut track, &promoted, env, json)
        },
    )
    .await;
    if let Err(f) = waited {
        let outcome = roll_back(ctx, c, env, &promoted, previous.as_deref()).await;
        return Err(with_outcome(f, outcome));
    }
    set_phase(ctx, Phase::Serving);

    let url = cfg.endpoints.environment_invoke(
        word,
        c.owner_id,
        env,
        c.endpoint,
        cfg.regional_environment,
    );
    ctx.say(&format!("Smoke test through {env}"));
    match smoke_test(ctx, c.endpoint, &url, c.payload, c.streaming).await {
        Ok(()) => {
            ctx.promotion_event("", &format!("{env} passed its smoke test on {promoted}"));
            let mut st = ctx.state.lock().unwrap();
            st.rolled_back = Some(false);
            if let Some(g) = st.gate.as_mut() {
                g.phase = Phase::Settled;
            }
            Ok(())
        }
        Err(f) => {
            ctx.promotion_event("", &format!("{env} failed its smoke test on {promoted}"));
            let outcome = roll_back(ctx, c, env, &promoted, previous.as_deref()).await;
            Err(with_outcome(f, outcome))
        }
    }
}

/// The same failure, its message extended with where traffic is now.
fn with_outcome(f: Failure, outcome: String) -> Failure {
    match f {
        Failure::Deploy(e) => Failure::Deploy(anyhow!("{e:#}; {outcome}")),
        Failure::Predict(e) => Failure::Predict(anyhow!("{e:#}; {outcome}")),
        Failure::Timeout(m) => Failure::Timeout(format!("{m}; {outcome}")),
        other => other,
    }
}

/// Sends the promote exactly once in effect: an answer lost on the way
/// (the request may have been applied) is looked up in the environment,
/// and the request is sent again only while the environment shows no
/// promotion and no new current deployment.
async fn promote_once(
    ctx: &Ctx<'_>,
    c: &Candidate<'_>,
    env: &str,
    deployment_id: &str,
    previous: Option<&str>,
) -> Result<String, Failure> {
    let flags = PromoteFlags {
        scale_down_previous_deployment: !ctx.cfg.preserve_previous_deployment,
        preserve_env_instance_type: ctx.cfg.preserve_env_instance_type,
    };
    let untouched = match previous {
        Some(p) => format!("nothing was promoted; {env} still serves {p}"),
        None => "nothing was promoted".to_string(),
    };
    for _ in 0..PROMOTE_ROUNDS {
        ctx.say(&format!("Promoting deployment {deployment_id} into {env}"));
        let e = match ctx
            .api
            .promote(c.owner, c.owner_id, env, deployment_id, flags)
            .await
        {
            Ok(id) => return Ok(id),
            Err(e @ (ApiError::Ambiguous { .. } | ApiError::Transient { .. })) => e,
            Err(e) => return Err(with_outcome(deploy_error(e), untouched)),
        };
        ctx.say(&format!(
            "the promote request got no usable answer ({e}); looking at {env}"
        ));
        let json = ctx
            .api
            .read_environment(c.owner, c.owner_id, env)
            .await
            .map_err(|e| {
                with_outcome(
                    deploy_error(e),
                    format!(
                        "whether the promotion started is unknown: look at {env} in the Baseten UI"
                    ),
                )
            })?;
        let moved = |d: Option<String>| d.filter(|d| Some(d.as_str()) != previous);
        if let Some(id) = moved(promotion::candidate(&json)).or(moved(promotion::current(&json))) {
            ctx.say(&format!("the promotion did start: {env} is taking {id}"));
            return Ok(id);
        }
    }
    Err(Failure::Deploy(anyhow!(
        "the promote request got no usable answer {PROMOTE_ROUNDS} times and {env} shows no promotion: {untouched}"
    )))
}

/// Puts the previous deployment back into `env`: a promotion still moving
/// traffic is cancelled, a finished one is undone by promoting the previous
/// deployment again. Waits until the environment serves it with nothing in
/// flight, within its own budget. Answers where traffic is, for the error
/// message; sets `rolled-back`.
async fn roll_back(
    ctx: &Ctx<'_>,
    c: &Candidate<'_>,
    env: &str,
    promoted: &str,
    previous: Option<&str>,
) -> String {
    let Some(prev) = previous else {
        set_phase(ctx, Phase::Settled);
        ctx.state.lock().unwrap().rolled_back = Some(false);
        let msg = format!(
            "nothing to roll back to: {promoted} is the first deployment of {env} and is left as it is"
        );
        ctx.warn(&msg);
        return msg;
    };
    ctx.api
        .set_deadline(Some(Instant::now() + ctx.cfg.wait_timeout));
    ctx.say(&format!("Rolling {env} back to deployment {prev}"));
    set_phase(ctx, Phase::RollingBack);
    let back = put_back(ctx, c, env, promoted, prev).await;
    set_phase(ctx, Phase::Settled);
    match back {
        Ok(Back::Already) => {
            ctx.state.lock().unwrap().rolled_back = Some(false);
            ctx.promotion_event("", &format!("{env} kept serving {prev}"));
            format!("traffic stays on the previous deployment {prev}")
        }
        Ok(Back::Moved(serving)) => {
            ctx.state.lock().unwrap().rolled_back = Some(true);
            let msg = if serving == prev {
                format!("rolled back: traffic is back on the previous deployment {prev}")
            } else {
                format!(
                    "rolled back: traffic is back on the previous deployment {prev} (the platform re-created it as {serving})"
                )
            };
            ctx.promotion_event("", &msg);
            ctx.say(&msg);
            msg
        }
        Err(e) => {
            ctx.state.lock().unwrap().rolled_back = Some(false);
            let msg = format!(
                "the rollback failed ({e}): {env} may still send traffic to {promoted}; promote {prev} again in the Baseten UI"
            );
            ctx.promotion_event("", &msg);
            ctx.warn(&msg);
            msg
        }
    }
}

/// How a rollback ended.
enum Back {
    /// The promotion ended by itself (FAILED, CANCELED) and the previous
    /// deployment never stopped serving.
    Already,
    /// Traffic was moved back; the deployment that serves now.
    Moved(String),
}

async fn put_back(
    ctx: &Ctx<'_>,
    c: &Candidate<'_>,
    env: &str,
    promoted: &str,
    prev: &str,
) -> Result<Back, String> {
    let read = async || {
        ctx.api
            .read_environment(c.owner, c.owner_id, env)
            .await
            .map_err(|e| e.to_string())
    };
    let now = read().await?;
    if promotion::settled_on(&now, prev) {
        return Ok(Back::Already);
    }
    let in_flight = promotion::current(&now).as_deref() != Some(promoted);
    let until = ctx.api.deadline().unwrap_or_else(Instant::now);
    if in_flight {
        ctx.say(&format!("Cancelling the promotion into {env}"));
        ctx.promotion_event("", &format!("cancel the promotion of {promoted}"));
        if let Err(e) = ctx
            .api
            .cancel_promotion(c.owner, c.owner_id, env, false)
            .await
        {
            // Refused because it just finished: undo it by promoting back.
            if e.permanent_status().is_none() {
                return Err(e.to_string());
            }
            let after = read().await?;
            if promotion::current(&after).as_deref() == Some(promoted) {
                return promote_back(ctx, c, env, prev, until).await;
            }
        }
        let mut last_percent: Option<String> = None;
        poll_until(ctx, until, &format!("the rollback of {env}"), async || {
            let json = ctx.api.environment_of(c.owner, c.owner_id, env).await?;
            let line = json
                .pointer("/in_progress_promotion/status")
                .and_then(Value::as_str)
                .map(|s| {
                    let p = json
                        .pointer("/in_progress_promotion/percent_traffic_to_new_version")
                        .and_then(Value::as_f64);
                    match p {
                        Some(p) => format!("rollback: {s}, {p:.0}% of traffic on {promoted}"),
                        None => format!("rollback: {s}"),
                    }
                });
            if let Some(line) = line.filter(|l| last_percent.as_ref() != Some(l)) {
                ctx.say(&line);
                ctx.promotion_event("", &line);
                last_percent = Some(line);
            }
            Ok(if promotion::settled_on(&json, prev) {
                Poll::Ready
            } else {
                Poll::Wait
            })
        })
        .await
        .map_err(|f| f.to_string())?;
        return Ok(Back::Moved(prev.to_string()));
    }
    promote_back(ctx, c, env, prev, until).await
}

/// Promotes `prev` into `env` again and waits until whatever the platform
/// promotes for it serves.
async fn promote_back(
    ctx: &Ctx<'_>,
    c: &Candidate<'_>,
    env: &str,
    prev: &str,
    until: Instant,
) -> Result<Back, String> {
    ctx.promotion_event("", &format!("promote {prev} back into {env}"));
    let back = promote_once(ctx, c, env, prev, None)
        .await
        .map_err(|f| f.to_string())?;
    let mut track = PromotionTrack::timeline();
    poll_until(ctx, until, &format!("the rollback of {env}"), async || {
        let json = ctx.api.environment_of(c.owner, c.owner_id, env).await;
        check_promotion(ctx, &mut track, &back, env, json)
    })
    .await
    .map_err(|f| f.to_string())?;
    Ok(Back::Moved(back))
}

/// A signal arrived while a gated promotion was under way: a promotion
/// still moving traffic is force-cancelled (the previous deployment takes
/// all traffic back at once); a promoted deployment whose environment test
/// had not passed is replaced by the previous one again (started, not
/// awaited: the runner allows seconds). Anything else is left alone.
pub(crate) async fn cleanup_gated(ctx: &Ctx<'_>, cancelled: bool) {
    let gate = ctx.state.lock().unwrap().gate.clone();
    let Some(g) = gate else { return };
    if !cancelled || g.phase == Phase::Settled {
        return;
    }
    if g.phase == Phase::RollingBack {
        ctx.state.lock().unwrap().rolled_back = Some(false);
        let prev = g.previous.as_deref().unwrap_or("the previous deployment");
        let msg = format!(
            "cancelled while {} was being rolled back to {prev}: the platform may still finish it; check the environment in the Baseten UI",
            g.env
        );
        ctx.warn(&msg);
        ctx.note(msg);
        return;
    }
    let Some(prev) = g.previous.clone() else {
        ctx.note(format!(
            "cancelled during the promotion into {}: it is the environment's first deployment, left as it is",
            g.env
        ));
        return;
    };
    ctx.api.set_deadline(Some(
        Instant::now() + Duration::from_secs(CANCELLED_ROLLBACK_SECS),
    ));
    let (how, result) = match g.phase {
        Phase::Promoting => (
            "force-cancelled the promotion",
            ctx.api
                .cancel_promotion(g.owner, &g.owner_id, &g.env, true)
                .await
                .map(drop),
        ),
        _ => (
            "started promoting the previous deployment back",
            ctx.api
                .promote(
                    g.owner,
                    &g.owner_id,
                    &g.env,
                    &prev,
                    PromoteFlags {
                        scale_down_previous_deployment: !ctx.cfg.preserve_previous_deployment,
                        preserve_env_instance_type: ctx.cfg.preserve_env_instance_type,
                    },
                )
                .await
                .map(drop),
        ),
    };
    let msg = match result {
        Ok(()) => {
            ctx.state.lock().unwrap().rolled_back = Some(true);
            format!(
                "cancelled during the promotion into {}: {how}; traffic goes back to the previous deployment {prev}",
                g.env
            )
        }
        Err(e) => {
            ctx.state.lock().unwrap().rolled_back = Some(false);
            format!(
                "cancelled during the promotion into {}: the rollback to {prev} could not be started ({e}); check the environment in the Baseten UI",
                g.env
            )
        }
    };
    ctx.promotion_event("", &msg);
    ctx.say(&msg);
    ctx.note(msg);
    set_phase(ctx, Phase::Settled);
}
