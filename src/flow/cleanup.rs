//! The cleanup decision for models and chains alike: deactivate what was
//! created unless it serves an environment and cleanup was not asked for
//! explicitly. A check that fails counts as serving, because a failed check
//! must never take production down.

use std::time::{Duration, Instant};

use anyhow::anyhow;

use super::{Ctx, State};
use crate::baseten::{Api, ApiError};
use crate::outcome::Failure;

/// How long cleanup may take: the last part of the run's budget.
pub(crate) const CLEANUP_ALLOWANCE_SECS: u64 = 60;
/// How long cleanup may take once the run is cancelled (GitHub sends
/// SIGTERM 7.5 s after SIGINT, and kills 2.5 s later).
pub(crate) const CANCELLED_CLEANUP_BUDGET_SECS: u64 = 3;
/// Everything after a signal — a gated rollback and every deactivation —
/// ends this long after it, a second before the runner's SIGTERM.
pub(crate) const CANCELLED_TAIL_MILLIS: u64 = 6_500;

/// Whether a deployment may be serving traffic.
pub(crate) enum Serving {
    No,
    Environment(String),
    /// The check failed: treated as serving.
    Unknown(String),
}

/// Decides and performs cleanup. `serving` checks whether the deployment
/// serves an environment; `deactivate` deactivates it; both make their
/// requests through the handle they are given (the cleanup's budget).
async fn cleanup_deployment(
    ctx: &Ctx<'_>,
    cancelled: bool,
    label: &str,
    serving: impl AsyncFnOnce(&Api) -> Serving,
    deactivate: impl AsyncFnOnce(&Api) -> Result<(), ApiError>,
) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let gated = cfg.gated_environment().is_some();
    if !cfg.cleanup.enabled {
        if cfg.environment.is_some() && !cfg.cleanup.explicit && !gated {
            let msg = "cleanup off: deployments into an environment are kept by default";
            ctx.say(msg);
            ctx.note(msg.into());
        }
        return Ok(());
    }
    // Every request of the cleanup (the check and the deactivation) ends
    // within its allowance, whatever the deploy budget left.
    let allowance = if cancelled {
        CANCELLED_CLEANUP_BUDGET_SECS
    } else {
        CLEANUP_ALLOWANCE_SECS
    };
    // A rollback that ran past the run's end took from this minute: the
    // whole run still ends by its end plus the cleanup allowance.
    let mut end = (Instant::now() + Duration::from_secs(allowance))
        .min(ctx.run_until + Duration::from_secs(CLEANUP_ALLOWANCE_SECS));
    // After a signal, one deadline for the rollback and every deployment's
    // cleanup together.
    if let Some(at) = ctx.state.lock().unwrap().cancelled_at {
        end = end.min(at + Duration::from_millis(CANCELLED_TAIL_MILLIS));
    }
    let api = ctx.api.until(Some(end));
    ctx.group("Cleanup");
    // `cleanup: true` deactivates even a serving deployment, except behind
    // a gated promotion: there, what serves is what passed.
    let serving = if cfg.cleanup.explicit && !gated {
        Serving::No
    } else {
        serving(&api).await
    };
    let why = match &serving {
        Serving::No => None,
        Serving::Environment(env) => Some(format!("it serves the {env} environment")),
        Serving::Unknown(e) => Some(format!(
            "could not check whether it serves an environment ({e}), so it is left running: deactivate it in Baseten if nothing uses it"
        )),
    };
    let result = match why {
        Some(why) if gated && matches!(serving, Serving::Environment(_)) => {
            ctx.say(&format!("keeping {label}: {why}"));
            ctx.event("", "kept: serving");
            Ok(())
        }
        Some(why) => {
            let msg = format!(
                "not deactivating {label}: {why}; set cleanup: true to deactivate it anyway"
            );
            ctx.warn(&msg);
            ctx.note(msg);
            ctx.event("", "cleanup skipped");
            Ok(())
        }
        None => {
            ctx.say(&format!("Deactivating {label}"));
            match deactivate(&api).await {
                Ok(()) => {
                    ctx.event("", "deactivated");
                    ctx.say("Deactivated");
                    Ok(())
                }
                Err(e) => Err(Failure::Cleanup(anyhow!(e))),
            }
        }
    };
    ctx.end_group();
    result
}

/// Cleanup of every deployment this run created (with a gated promotion,
/// the tested one and the one the platform promoted), once one was: each
/// decided by [`cleanup_deployment`]. `owner` picks the model or chain id
/// from the state; `kind` names the deployments in messages; `serving` and
/// `deactivate` take the owner id and a deployment id.
pub(crate) async fn cleanup_created(
    ctx: &Ctx<'_>,
    cancelled: bool,
    owner: fn(&State) -> &Option<String>,
    kind: &str,
    serving: impl AsyncFn(&Api, &str, &str) -> Serving,
    deactivate: impl AsyncFn(&Api, &str, &str) -> Result<(), ApiError>,
) -> Result<(), Failure> {
    let Some((owner_id, ids)) = ctx.created_all(owner) else {
        return Ok(());
    };
    let mut result = Ok(());
    for id in ids {
        let r = cleanup_deployment(
            ctx,
            cancelled,
            &format!("{kind} {id}"),
            async |api: &Api| serving(api, &owner_id, &id).await,
            async |api: &Api| deactivate(api, &owner_id, &id).await,
        )
        .await;
        result = result.and(r);
    }
    result
}
