//! A gated promotion (`promotion: after-predict`), for models and chains
//! alike: the deployment was created outside any environment and passed its
//! own smoke test; now read what serves the environment, promote, wait for
//! the promotion (following the id the platform answers, which is a new
//! deployment when it could not reuse ours), test again through the
//! environment's URL, and put the previous deployment back when the
//! promotion or that test fails.
//!
//! Where traffic is comes from a read, never from an answer: after every
//! promote, cancel and rollback the environment is read, and the run
//! reports what that read shows. A deployment this run cannot prove it
//! promoted (another client's, or a platform copy whose answer was lost) is
//! never adopted, cancelled, rolled over or deactivated. The decisions are
//! pure functions over a typed reading (`promotion::Env`): the gate's
//! choices in `rules`, the rollback's one decision in `step`; this module
//! performs them and reports.

use anyhow::anyhow;
use serde_json::Value;

use super::{Ctx, Poll, PromotionTrack, check_promotion, deploy_error, poll_until, smoke_test};
use crate::baseten::{Api, PromoteFlags};
use crate::budget;
use crate::kind::Kind;
use crate::outcome::Failure;

mod rollback;
mod rules;
mod step;

pub(crate) use rollback::cleanup_gated;
use rollback::roll_back;
use rules::{BeforePromote, Lookup};

/// How often a promote whose answer was lost, and which the environment
/// shows no trace of, is sent again.
const PROMOTE_ROUNDS: u32 = 3;

/// Where a gated promotion stands, for cleanup and a cancellation (a
/// stage of the gate, not a budget phase: those are `budget::Phase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
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
    pub(crate) owner: Kind,
    pub(crate) owner_id: String,
    pub(crate) env: String,
    /// What served the environment before; the rollback target.
    pub(crate) previous: Option<String>,
    /// The deployment that passed its own smoke test.
    pub(crate) tested: String,
    /// The deployment the platform promotes (ours, or one it created);
    /// `None` while the promote's answer has not come.
    pub(crate) promoted: Option<String>,
    /// What our promote of the previous deployment answered, during a
    /// rollback (a copy of it, when the platform made one).
    pub(crate) back: Option<String>,
    pub(crate) stage: Stage,
}

/// What the gate tests and promotes.
pub(crate) struct Candidate<'a> {
    pub(crate) owner: Kind,
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
    owner: Kind,
    existing: Option<&str>,
) -> Result<(), Failure> {
    let (Some(env), Some(id)) = (ctx.cfg.gated_environment(), existing) else {
        return Ok(());
    };
    match ctx.api.read_environment(owner, id, env).await {
        // What serves the environment before this run is known from here
        // on: a run that fails before its promote still says it
        // (`previous-deployment-id`); the promote's own read replaces it.
        Ok(before) => {
            ctx.saw(env, &before);
            ctx.state.lock().unwrap().previous_deployment_id = before.current;
            Ok(())
        }
        Err(e) if e.permanent_status() == Some(404) => Err(Failure::Deploy(anyhow!(
            "the {} has no environment {env:?} to promote into ({e}): create it in the Baseten UI or fix environment; nothing was created",
            owner.as_str()
        ))),
        Err(e) => Err(deploy_error(e)),
    }
}

fn set_stage(ctx: &Ctx<'_>, stage: Stage) {
    if let Some(g) = ctx.state.lock().unwrap().gate.as_mut() {
        g.stage = stage;
    }
}

fn flags(ctx: &Ctx<'_>) -> PromoteFlags {
    PromoteFlags {
        scale_down_previous_deployment: !ctx.cfg.preserve_previous_deployment,
        preserve_env_instance_type: ctx.cfg.preserve_env_instance_type,
    }
}

async fn gate(ctx: &Ctx<'_>, c: &Candidate<'_>, env: &str) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let word = c.owner.as_str();
    {
        let mut st = ctx.state.lock().unwrap();
        st.tested_deployment_id = Some(c.tested.to_string());
        st.rolled_back = Some(false);
    }
    // The promotion's deadline, from the run's budget: the promotion and
    // the environment's test end by the run's end (a smoke test asks for
    // its own, a rollback for its own).
    let api = ctx.api_for(budget::Phase::Promotion);
    let ctx = &ctx.with_api(&api);
    let before = ctx
        .api
        .read_environment(c.owner, c.owner_id, env)
        .await
        .map_err(|e| deploy_error(e).context("nothing was promoted"))?;
    ctx.saw(env, &before);
    // A new model's (or chain's) first deployment is promoted into
    // production by the platform itself: there is nothing to gate or to
    // roll back to.
    let (already, previous) = match rules::start(&before, c.tested) {
        BeforePromote::Busy => {
            return Err(Failure::Deploy(anyhow!(
                "{}: another promotion is in progress, so nothing was promoted; wait for it to finish (or cancel it), then run again",
                before.describe(env)
            )));
        }
        BeforePromote::Already { previous } => (true, previous),
        BeforePromote::Promote { previous } => (false, previous),
    };
    {
        let mut st = ctx.state.lock().unwrap();
        st.previous_deployment_id = previous.clone();
        st.gate = Some(Gate {
            owner: c.owner,
            owner_id: c.owner_id.to_string(),
            env: env.to_string(),
            previous: previous.clone(),
            tested: c.tested.to_string(),
            promoted: None,
            back: None,
            stage: Stage::Promoting,
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
        promote_once(ctx, c.owner, c.owner_id, env, c.tested, previous.as_deref()).await?
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

    let mut track = PromotionTrack::gate(previous.clone());
    let mut live = crate::evidence::Watch::default();
    let waited = poll_until(
        ctx,
        budget::Phase::Promotion,
        &format!("the promotion into {env}"),
        async |ctx: &Ctx<'_>, api: &Api| {
            let read = api.environment_of(c.owner, c.owner_id, env).await;
            // Real traffic breaking an objective cancels a rolling promotion.
            let seen = read.as_ref().ok();
            let ctx = &ctx.with_api(api);
            // The metrics read decides, under its own short deadline: a
            // hung endpoint never stalls the poll past it.
            let metrics = ctx.api_for(budget::Phase::Metrics);
            if let Some(run) = ctx.evidence()
                && let Some(f) = crate::evidence::watch(
                    &run, &metrics, &mut live, c.owner, c.owner_id, env, seen,
                )
                .await
            {
                return Ok(Poll::Failed(f));
            }
            check_promotion(ctx, &mut track, &promoted, env, read)
        },
    )
    .await;
    // A failure from here on puts the previous deployment back first, and
    // says where traffic is.
    let rolled_back = async |f: Failure| -> Result<(), Failure> {
        let outcome = roll_back(
            ctx,
            c.owner,
            c.owner_id,
            env,
            &promoted,
            previous.as_deref(),
        )
        .await;
        Err(f.context(outcome))
    };
    if let Err(f) = waited {
        return rolled_back(f).await;
    }
    set_stage(ctx, Stage::Serving);

    let url = cfg.endpoints.environment_invoke(
        word,
        c.owner_id,
        env,
        c.endpoint,
        cfg.regional_environment,
    );
    ctx.say(&format!("Smoke test through {env}"));
    // The environment's test gets predict-timeout, cut to what is left of
    // the run's budget (`Phase::Smoke`).
    let test = smoke_test(ctx, c.endpoint, &url, c.payload, c.streaming).await;
    match test {
        Ok(()) => {
            ctx.promotion_event("", &format!("{env} passed its smoke test on {promoted}"));
            set_stage(ctx, Stage::Settled);
            Ok(())
        }
        Err(f) => {
            ctx.promotion_event("", &format!("{env} failed its smoke test on {promoted}"));
            rolled_back(f).await
        }
    }
}

/// Sends the promote of `target` exactly once in effect. An answer lost on
/// the way (or unreadable) is looked up in the environment by identity:
/// `target` serving or being promoted is ours; nothing moved means it never
/// took effect and it is sent again; any other deployment is never claimed
/// (`rules::lookup`). `before` is what served the environment when it
/// was sent. Answers the id the platform promotes.
pub(super) async fn promote_once(
    ctx: &Ctx<'_>,
    owner: Kind,
    owner_id: &str,
    env: &str,
    target: &str,
    before: Option<&str>,
) -> Result<String, Failure> {
    let mut lost_before = false;
    for _ in 0..PROMOTE_ROUNDS {
        ctx.say(&format!("Promoting deployment {target} into {env}"));
        let e = match ctx
            .api
            .promote(owner, owner_id, env, target, flags(ctx))
            .await
        {
            Ok(id) => return Ok(id),
            Err(e) if rules::answer_lost(&e) => e,
            Err(e) => {
                // Refused: say what the environment shows (another
                // client's promotion in flight names both deployments).
                // After a lost answer, the refusal may be our own first
                // promote, applied late: looked up by identity once more.
                // The read has its own allowance: the promotion's deadline
                // may be what ended the promote.
                let lookup = ctx.api_for(budget::Phase::Lookup);
                let now = lookup.read_environment(owner, owner_id, env).await;
                if let Ok(n) = &now {
                    ctx.saw(env, n);
                }
                if rules::refusal_is_ours(lost_before, now.as_ref().ok(), target, before) {
                    ctx.say(&format!(
                        "the promotion did start: {env} is taking {target}"
                    ));
                    return Ok(target.to_string());
                }
                let place = match now {
                    Ok(n) => format!("nothing was promoted; {}", n.describe(env)),
                    // Unread after an earlier lost answer: that promote
                    // may have been applied.
                    Err(_) if lost_before => {
                        format!(
                            "whether it was promoted is unknown: look at {env} in the Baseten UI"
                        )
                    }
                    Err(_) => "nothing was promoted".to_string(),
                };
                return Err(deploy_error(e).context(place));
            }
        };
        lost_before = true;
        ctx.say(&format!(
            "the promote request got no usable answer ({e}); looking at {env}"
        ));
        // The look-up has its own allowance (`Phase::Lookup`): a promote
        // cut by the promotion's deadline is looked up all the same.
        let lookup = ctx.api_for(budget::Phase::Lookup);
        let now = lookup.read_environment(owner, owner_id, env).await.map_err(|r| {
            deploy_error(r).context(format!(
                "the promote request got no usable answer ({e}) and whether it was promoted is unknown: look at {env} in the Baseten UI"
            ))
        })?;
        ctx.saw(env, &now);
        match rules::lookup(&now, target, before) {
            Lookup::Applied => {
                ctx.say(&format!(
                    "the promotion did start: {env} is taking {target}"
                ));
                return Ok(target.to_string());
            }
            Lookup::Untouched => continue,
            Lookup::Other { by } => {
                return Err(Failure::Deploy(anyhow!(
                    "the promote request got no usable answer ({e}) and {}; deployment {by} cannot be confirmed as this run's (a copy the platform made of {target} names no source, and another client may have promoted it), so it was neither adopted nor cancelled: check {env} in the Baseten UI",
                    now.describe(env)
                )));
            }
        }
    }
    let now = ctx
        .api_for(budget::Phase::Lookup)
        .read_environment(owner, owner_id, env)
        .await
        .map(|n| n.describe(env))
        .unwrap_or_else(|_| format!("{env} could not be read"));
    Err(Failure::Deploy(anyhow!(
        "the promote request got no usable answer {PROMOTE_ROUNDS} times and {env} shows no promotion of {target}: nothing was promoted; {now}"
    )))
}
