//! Reuse by content inside a model deploy with `skip-unchanged`: what
//! serves the environment was made from other content, but an older
//! deployment of the model was made from this very source
//! (`content::reuse::choose`): it is activated when inactive, promoted
//! and smoke-tested like a deploy into that environment — with
//! `promotion: after-predict`, smoke-tested itself before the gate
//! promotes it — instead of building again. Nothing is uploaded or
//! created, and the reused deployment is never cleaned up (the run did
//! not create it).

use super::{Ctx, switch, test_and_promote};
use crate::content::reuse::{self, Reusable};
use crate::content::skip::{Why, short};
use crate::kind::Kind;
use crate::outcome::Failure;

/// Looks for a deployment of `model_id` made from the source hashed
/// `hash` (whose `config.yaml` is `raw_config`) and, when one is found,
/// puts it into `env` in place of `current`: `Ok(true)` then (the deploy
/// is done, or failed saying what serves), `Ok(false)` to build. Every
/// read here decides: one that fails builds, which is always safe.
pub(crate) async fn reuse_if_built(
    ctx: &Ctx<'_>,
    model_id: &str,
    env: &str,
    hash: &str,
    raw_config: &[u8],
    why: &Why,
    current: Option<&str>,
) -> Result<bool, Failure> {
    let listed = match ctx.api.deployments(model_id).await {
        Ok(l) => l,
        Err(e) => {
            ctx.say(&format!(
                "Whether an older deployment was made from this source could not be read ({e}): building"
            ));
            return Ok(false);
        }
    };
    let choice = reuse::choose(&listed, hash, current);
    for line in &choice.left {
        ctx.say(line);
        ctx.note(line.clone());
    }
    let Some(found) = choice.chosen else {
        return Ok(false);
    };
    // The label is a claim: the platform's own copy of its config.yaml,
    // when it keeps one, must agree with ours.
    let ours = String::from_utf8_lossy(raw_config);
    match ctx.api.deployment_raw_config(model_id, &found.id).await {
        Ok(theirs) => match reuse::config_agrees(&ours, theirs.as_deref(), &found.id) {
            Ok(Some(())) => {}
            Ok(None) => ctx.say(&format!(
                "the platform keeps no config.yaml for deployment {}: its content hash label decides",
                found.id
            )),
            Err(refused) => {
                ctx.warn(&refused);
                ctx.note(refused);
                return Ok(false);
            }
        },
        Err(e) => {
            ctx.say(&format!(
                "deployment {}'s config.yaml could not be read ({e}): building instead of reusing it",
                found.id
            ));
            return Ok(false);
        }
    }
    reuse(ctx, model_id, env, &found, hash, why, current).await?;
    Ok(true)
}

/// The summary's line for a reused deployment: which one, when it was
/// built, and why it was needed.
pub(crate) fn reused_line(found: &Reusable, hash: &str, env: &str, why: &Why) -> String {
    format!(
        "Reused: deployment {} was made from this source (content hash {}…) and goes into {env} instead of a build; nothing was uploaded or created ({why})",
        found.described(),
        short(hash)
    )
}

async fn reuse(
    ctx: &Ctx<'_>,
    model_id: &str,
    env: &str,
    found: &Reusable,
    hash: &str,
    why: &Why,
    current: Option<&str>,
) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    {
        let mut st = ctx.state.lock().unwrap();
        st.model_id = Some(model_id.to_string());
        st.deployment_id = Some(found.id.clone());
        st.last_status = Some(found.status.clone());
        st.previous_deployment_id = current.map(str::to_string);
        st.environment_url = Some(cfg.endpoints.environment_invoke(
            "model",
            model_id,
            env,
            "predict",
            cfg.regional_environment,
        ));
        st.by_content.reused = Some(true);
    }
    let line = reused_line(found, hash, env, why);
    ctx.notice(&line);
    ctx.note(line);
    ctx.event(&found.status, "reused: made from this source");
    ctx.end_group();
    if found.inactive() {
        ctx.group(&format!("Activate {}", found.id));
        let woke = switch::wake(ctx, model_id, &found.id).await;
        ctx.end_group();
        woke?;
    }
    ctx.ready();
    // What the promote replaces, and its price, read on the side before
    // it, for the summary's change.
    if let Some(current) = current {
        super::price::replaced_by_id_later(ctx, model_id, current);
    }
    // Gated: the reused deployment is smoke-tested itself, then the gate
    // promotes it (and puts the previous one back on failure).
    // The gated path prices the deployment it tests, as a gated deploy
    // does (the report says so when the gate puts the previous one back).
    if cfg.gated_environment().is_some() {
        super::price::later(ctx, model_id, &found.id);
        return test_and_promote(ctx, Kind::Model, model_id, &found.id).await;
    }
    ctx.group(&format!("Promote into {env}"));
    let promoted = switch::promote_and_wait(ctx, model_id, env, &found.id, current).await;
    ctx.end_group();
    let promoted = match promoted {
        Ok(p) => p,
        Err(f) => {
            let now = switch::what_serves(ctx, model_id, env).await;
            ctx.state.lock().unwrap().deployment_id = now.settled.clone();
            return Err(f.context(now.words));
        }
    };
    {
        let mut st = ctx.state.lock().unwrap();
        if promoted != found.id {
            st.tested_deployment_id = Some(found.id.clone());
        }
        st.deployment_id = Some(promoted.clone());
    }
    // What serves now (the read after the promote said which) costs this
    // per hour, read on the side.
    super::price::later(ctx, model_id, &promoted);
    test_and_promote(ctx, Kind::Model, model_id, &promoted).await
}
