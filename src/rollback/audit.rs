//! The rollback target from the model's audit log: the entries that place
//! a deployment in an environment (promotions, creates into it) read whole (`Api::audit_log`, every
//! page or an error) and `history::previous_serving`, the one derivation
//! of what served an environment before the current deployment. A read
//! that fails, or a log that does not decide, refuses before any
//! mutation and says why.

use std::collections::HashSet;

use anyhow::anyhow;

use crate::baseten::audit::PLACEMENT_GROUPS;
use crate::baseten::{AuditEntry, id};
use crate::flow::{Ctx, deploy_error};
use crate::history::{Previous, previous_serving};
use crate::outcome::Failure;
use crate::status;

/// The deployment that served `env` before `current`, per the audit log.
pub(super) async fn target(
    ctx: &Ctx<'_>,
    model_id: &str,
    env: &str,
    current: &str,
) -> Result<String, Failure> {
    let entries = ctx
        .api
        .audit_log(model_id, &PLACEMENT_GROUPS)
        .await
        .map_err(|e| {
            deploy_error(e).context(format!(
                "what served {env} before {current} could not be read from the model's audit log; nothing was changed (to-deployment names a deployment without it)"
            ))
        })?;
    if let Some(why) = crate::baseten::audit::not_of_model(&entries, model_id) {
        return Err(Failure::Deploy(anyhow!(
            "{why}: what served {env} before {current} is not known; nothing was changed (to-deployment names a deployment without it)"
        )));
    }
    let promotions: Vec<_> = entries.iter().filter_map(AuditEntry::placement).collect();
    // Which of the model's deployments never served (building, deploying
    // or failed to), from a read: their entries changed nothing.
    let listed = ctx.api.deployments(model_id).await.map_err(|e| {
        deploy_error(e).context(format!(
            "the model's deployments could not be listed, so what served {env} before {current} is not known; nothing was changed (to-deployment names a deployment without it)"
        ))
    })?;
    let never: HashSet<String> = listed
        .iter()
        .filter(|d| status::never_served(&d.status))
        .map(|d| d.id.clone())
        .collect();
    let deploying: HashSet<String> = listed
        .iter()
        .filter(|d| d.status.trim().eq_ignore_ascii_case("DEPLOYING"))
        .map(|d| d.id.clone())
        .collect();
    // Every id the derivation reads is the platform's answer: one that is
    // not a deployment id decides nothing (and is never shown as it is).
    if let Some(refused) = promotions
        .iter()
        .filter(|p| p.environment.is_none() || p.environment.as_deref() == Some(env))
        .find_map(|p| id::check(&p.deployment).err())
    {
        return Err(Failure::Deploy(anyhow!(
            "the model's audit log names a deployment promoted into {env} by an id that is not one ({refused}), so it does not decide what served before {current}; nothing was changed (to-deployment names a deployment without it)"
        )));
    }
    // A deployment DEPLOYING may be deploying for the first time (never
    // served) or waking after an activate (having served): when passing
    // over it changes the answer, the log does not decide.
    let surely = previous_serving(&promotions, env, current, &|id| {
        never.contains(id) && !deploying.contains(id)
    });
    let derived = previous_serving(&promotions, env, current, &|id| never.contains(id));
    if let (Previous::Decided(Some(waking)), Previous::Decided(other)) = (&surely, &derived)
        && Some(waking) != other.as_ref()
    {
        return Err(Failure::InvalidInput(format!(
            "the audit log shows deployment {waking} in {env} just before {current}, and it is DEPLOYING now: it may be waking after an activate (so it served) or deploying for the first time (so it never did), which the platform does not say; nothing was changed: wait until it settles, or name the target with to-deployment"
        )));
    }
    // A promotion in flight was refused before: there is no candidate.
    decided(derived, env, current).inspect(|id| {
        ctx.say(&format!(
            "The audit log names deployment {id} as what served {env} before {current}"
        ))
    })
}

/// The log's answer as the rollback's target, or the refusal.
fn decided(previous: Previous, env: &str, current: &str) -> Result<String, Failure> {
    match previous {
        Previous::Decided(Some(id)) => Ok(id),
        Previous::Decided(None) => Err(Failure::InvalidInput(format!(
            "the audit log shows nothing that served {env} before {current}: nothing to go back to; nothing was changed (to-deployment names a deployment to put in)"
        ))),
        Previous::Undecided(why) => Err(Failure::InvalidInput(format!(
            "the audit log does not decide what served {env} before {current} ({why}); nothing was changed: name the deployment with to-deployment"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_decided_log_names_a_target() {
        let ok = decided(Previous::Decided(Some("d1".into())), "production", "d2");
        assert_eq!(ok.unwrap(), "d1");
        let none = decided(Previous::Decided(None), "production", "d2").unwrap_err();
        assert!(matches!(none, Failure::InvalidInput(_)));
        assert!(
            none.to_string()
                .contains("nothing that served production before d2")
        );
        let why = decided(
            Previous::Undecided("two at once".into()),
            "production",
            "d2",
        )
        .unwrap_err();
        assert!(matches!(why, Failure::InvalidInput(_)));
        assert!(why.to_string().contains("(two at once)"), "{why}");
    }
}
