//! Putting an existing model deployment into an environment, for reuse by
//! content and `command: rollback`: activate it when it is inactive and
//! wait until it is ready (after the run's own activate, `INACTIVE` means
//! waking, not failed: [`after_activate`]), promote it exactly once in
//! effect (the gate's `promote_once`), and wait until a read of the
//! environment shows it — or the copy the platform made of it on
//! promotion — serving. What serves is always said from a read
//! ([`what_serves`]); nothing here deactivates anything.

use anyhow::anyhow;

use super::gate::promote_once;
use super::{Ctx, Poll, PromotionTrack, check_promotion, poll_until};
use crate::baseten::Api;
use crate::budget::Phase;
use crate::kind::Kind;
use crate::outcome::Failure;
use crate::status::{self, Readiness};

/// How a status read after the run's own activate is classified: the
/// platform may still show `INACTIVE` for a moment (the deployment is
/// waking), so it is in progress; every other status as always.
pub(crate) fn after_activate(status: &str) -> Readiness {
    match status {
        "INACTIVE" => Readiness::InProgress,
        s => status::classify_model(s),
    }
}

/// Activates deployment `id` of model `model_id` (read `INACTIVE`) and
/// waits until it is ready, within the wait's deadline.
pub(crate) async fn wake(ctx: &Ctx<'_>, model_id: &str, id: &str) -> Result<(), Failure> {
    ctx.say(&format!("Deployment {id} is INACTIVE: activating it"));
    ctx.event("INACTIVE", &format!("activate {id}"));
    ctx.api_for(Phase::Wait)
        .activate(model_id, id)
        .await
        .map_err(|e| {
            super::deploy_error(e).context(format!(
                "activating deployment {id} failed; nothing was promoted"
            ))
        })?;
    let mut last: Option<String> = None;
    poll_until(
        ctx,
        Phase::Wait,
        &format!("the activation of deployment {id}"),
        async |ctx: &Ctx<'_>, api: &Api| {
            let d = api.deployment(model_id, id).await?;
            let st = d.status.trim().to_string();
            let class = after_activate(&st);
            ctx.state.lock().unwrap().last_status = Some(st.clone());
            if last.as_deref() != Some(st.as_str()) {
                let waking = match st.as_str() {
                    "INACTIVE" => " (waking after this run's activate)",
                    _ => "",
                };
                ctx.say(&format!("status {st} ({}){waking}", class.as_str()));
                ctx.event(&st, class.as_str());
                last = Some(st.clone());
            }
            Ok(match class {
                Readiness::Ready => Poll::Ready,
                Readiness::InProgress => Poll::Wait,
                Readiness::Failed => Poll::Failed(Failure::Deploy(anyhow!(
                    "deployment {id} ended {st} after it was activated; nothing was promoted: see the logs: {}",
                    ctx.cfg.endpoints.logs_page(model_id, id)
                ))),
            })
        },
    )
    .await
}

/// Promotes `id` into `env` in place of `previous` (what served it when
/// the run read it first) and waits until a read of the environment shows
/// it serving, within the promotion's deadline. The environment is read
/// again first: if it moved meanwhile (another run's deploy or promotion),
/// nothing is promoted — this never replaces a deployment the run did not
/// see. The promote is sent once in effect. Answers the deployment that
/// serves: `id`, or the copy the platform made of it on promotion.
pub(crate) async fn promote_and_wait(
    ctx: &Ctx<'_>,
    model_id: &str,
    env: &str,
    id: &str,
    previous: Option<&str>,
) -> Result<String, Failure> {
    let api = ctx.api_for(Phase::Promotion);
    let ctx = &ctx.with_api(&api);
    let now = ctx
        .api
        .read_environment(Kind::Model, model_id, env)
        .await
        .map_err(|e| super::deploy_error(e).context("nothing was promoted"))?;
    ctx.saw(env, &now);
    still_on(env, previous, &now)?;
    let promoted = promote_once(ctx, Kind::Model, model_id, env, id, previous).await?;
    if promoted != id {
        let msg = format!(
            "the platform promotes a new deployment {promoted}, created from {id} (the environment's instance type or its re-deploy setting asked for one)"
        );
        ctx.say(&msg);
        ctx.note(msg);
    }
    ctx.event("", &format!("promotion of {promoted} into {env} started"));
    let mut track = PromotionTrack::gate(previous.map(str::to_string));
    poll_until(
        ctx,
        Phase::Promotion,
        &format!("the promotion into {env}"),
        async |ctx: &Ctx<'_>, api: &Api| {
            let read = api.environment_of(Kind::Model, model_id, env).await;
            check_promotion(ctx, &mut track, &promoted, env, read)
        },
    )
    .await?;
    Ok(promoted)
}

/// The environment read again just before a promote: still on what the
/// promote replaces, nothing in flight.
fn still_on(env: &str, before: Option<&str>, now: &crate::promotion::Env) -> Result<(), Failure> {
    if now.moving() || now.current.as_deref() != before {
        return Err(Failure::Deploy(anyhow!(
            "{env} moved since it was first read (it served {} then; now {}): nothing was promoted; run again if it is still wanted",
            before.unwrap_or("no deployment"),
            now.describe(env)
        )));
    }
    Ok(())
}

/// What serves `env` now, from a read with its own allowance (the run's
/// deadline may be what ended the step before): the environment's current
/// deployment (during a promotion in flight too: it still takes traffic,
/// and the words say what is in flight), and the read in words.
pub(crate) async fn what_serves(ctx: &Ctx<'_>, model_id: &str, env: &str) -> Serves {
    let api = ctx.api_for(Phase::Lookup);
    match api.read_environment(Kind::Model, model_id, env).await {
        Ok(e) => {
            ctx.saw(env, &e);
            Serves {
                settled: e.current.clone(),
                words: e.describe(env),
            }
        }
        Err(err) => Serves {
            settled: None,
            words: format!(
                "what serves {env} could not be read ({err}): look at it in the Baseten UI"
            ),
        },
    }
}

/// What a read of an environment showed.
#[derive(Debug)]
pub(crate) struct Serves {
    /// The environment's current deployment, when the read showed one.
    pub(crate) settled: Option<String>,
    pub(crate) words: String,
}

/// `command: rollback`'s verdict on its page, in words, from the
/// outputs: what the rollback of `env` did (what serves is the page's own line, from a read).
pub(crate) fn rollback_headline(out: &crate::ci::Outputs, env: &str) -> String {
    let ok = out.status == crate::outcome::Status::Success;
    let target = match out.tested_deployment_id.as_str() {
        "" => out.deployment_id.as_str(),
        copied => copied,
    };
    let from = match out.previous_deployment_id.as_str() {
        "" => "no deployment",
        id => id,
    };
    match (out.rolled_back == Some(true), ok) {
        (true, true) => {
            format!("Rollback of {env}: back to deployment {target}, in place of {from}")
        }
        (true, false) => format!(
            "Rollback of {env}: traffic moved off {from}, then {}",
            match out.status {
                crate::outcome::Status::PredictFailed => "the smoke test failed",
                _ => "the run failed",
            }
        ),
        (false, true) => format!("Rollback of {env}: nothing changed"),
        (false, false) => format!("Rollback of {env}: not completed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headline_says_what_the_rollback_did() {
        use crate::ci::Outputs;
        use crate::outcome::Status;
        let mut out = Outputs::new(Status::Success);
        out.rolled_back = Some(true);
        out.deployment_id = "c1".into();
        out.tested_deployment_id = "d1".into();
        out.previous_deployment_id = "d0".into();
        assert_eq!(
            rollback_headline(&out, "production"),
            "Rollback of production: back to deployment d1, in place of d0"
        );
        out.status = Status::PredictFailed;
        assert_eq!(
            rollback_headline(&out, "production"),
            "Rollback of production: traffic moved off d0, then the smoke test failed"
        );
        out.rolled_back = Some(false);
        assert_eq!(
            rollback_headline(&out, "production"),
            "Rollback of production: not completed"
        );
        out.status = Status::Success;
        assert_eq!(
            rollback_headline(&out, "production"),
            "Rollback of production: nothing changed"
        );
    }

    #[test]
    fn the_environment_must_not_move_before_the_promote() {
        use serde_json::json;
        let env = |v: serde_json::Value| crate::promotion::Env::parse(&v);
        let on = |id: &str| env(json!({"name": "production", "current_deployment": {"id": id}}));
        assert!(still_on("production", Some("d0"), &on("d0")).is_ok());
        let e = still_on("production", Some("d0"), &on("d9"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("it served d0 then; now production serves deployment d9"),
            "{e}"
        );
        let flying = env(
            json!({"name": "production", "current_deployment": {"id": "d0"}, "candidate_deployment": {"id": "d9"}, "in_progress_promotion": {"status": "RELEASING"}}),
        );
        assert!(still_on("production", Some("d0"), &flying).is_err());
        let empty = env(json!({"name": "production", "current_deployment": null}));
        assert!(still_on("production", None, &empty).is_ok());
        assert!(still_on("production", Some("d0"), &empty).is_err());
    }

    #[test]
    fn inactive_is_waking_only_after_our_activate() {
        assert_eq!(after_activate("INACTIVE"), Readiness::InProgress);
        assert_eq!(status::classify_model("INACTIVE"), Readiness::Failed);
        assert_eq!(after_activate("ACTIVE"), Readiness::Ready);
        assert_eq!(after_activate("SCALED_TO_ZERO"), Readiness::Ready);
        assert_eq!(after_activate("WAKING_UP"), Readiness::InProgress);
        assert_eq!(after_activate("DEPLOYING"), Readiness::InProgress);
        assert_eq!(after_activate("DEPLOY_FAILED"), Readiness::Failed);
        assert_eq!(after_activate("UNHEALTHY"), Readiness::Failed);
        assert_eq!(after_activate("SOMETHING_NEW"), Readiness::InProgress);
    }
}
