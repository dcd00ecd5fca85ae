//! The cleanup decision for models and chains alike: deactivate what was
//! created unless it serves an environment and cleanup was not asked for
//! explicitly. A check that fails counts as serving, because a failed check
//! must never take production down.

use anyhow::anyhow;

use super::create::InFlight;
use super::{Ctx, State};
use crate::baseten::{Api, ApiError};
use crate::budget::Phase;
use crate::outcome::Failure;

/// Whether a deployment may be serving traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Serving {
    No,
    Environment(String),
    /// The check failed: treated as serving.
    Unknown(String),
}

/// What the cleanup rules read from the inputs.
#[derive(Clone, Copy, Debug)]
struct Rules {
    /// `cleanup` is on (set, or by default).
    enabled: bool,
    /// The user set `cleanup` rather than leaving the default.
    explicit: bool,
    /// The deploy went into an environment.
    environment: bool,
    /// A gated promotion (`promotion: after-predict`).
    gated: bool,
}

/// The cleanup's first choice, before anything is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FirstChoice {
    /// Cleanup is off; `say` when a deployment into an environment is
    /// kept only because that is the default.
    Off { say: bool },
    /// `cleanup: true` outside a gate: deactivate even a serving one.
    Deactivate,
    /// Check whether it serves an environment first.
    Check,
}

fn start(r: Rules) -> FirstChoice {
    if !r.enabled {
        return FirstChoice::Off {
            say: r.environment && !r.explicit && !r.gated,
        };
    }
    // Behind a gated promotion what serves is what passed: always checked.
    if r.explicit && !r.gated {
        FirstChoice::Deactivate
    } else {
        FirstChoice::Check
    }
}

/// The cleanup's choice once it knows whether the deployment serves.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Act {
    Deactivate,
    /// A gated promotion's deployment serves: kept, as designed.
    Keep {
        why: String,
    },
    /// Serving (or unknown) outside a gate: left running, with a warning.
    Leave {
        why: String,
    },
}

fn after_check(gated: bool, serving: &Serving) -> Act {
    match serving {
        Serving::No => Act::Deactivate,
        Serving::Environment(env) if gated => Act::Keep {
            why: format!("it serves the {env} environment"),
        },
        Serving::Environment(env) => Act::Leave {
            why: format!("it serves the {env} environment"),
        },
        Serving::Unknown(e) => Act::Leave {
            why: format!(
                "could not check whether it serves an environment ({e}), so it is left running: deactivate it in Baseten if nothing uses it"
            ),
        },
    }
}

/// Decides ([`start`], [`after_check`]) and performs cleanup. `serving`
/// checks whether the deployment serves an environment; `deactivate`
/// deactivates it; both make their requests through the handle they are
/// given (the cleanup's budget).
async fn cleanup_deployment(
    ctx: &Ctx<'_>,
    id: &str,
    label: &str,
    serving: impl AsyncFnOnce(&Api) -> Serving,
    deactivate: impl AsyncFnOnce(&Api) -> Result<(), ApiError>,
) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let gated = cfg.gated_environment().is_some();
    let rules = Rules {
        enabled: cfg.cleanup.enabled,
        explicit: cfg.cleanup.explicit,
        environment: cfg.environment.is_some(),
        gated,
    };
    let first = start(rules);
    if let FirstChoice::Off { say } = first {
        if say {
            let msg = "cleanup off: deployments into an environment are kept by default";
            ctx.say(msg);
            ctx.note(msg.into());
        }
        return Ok(());
    }
    // Its allowance from now, whatever the deploy budget left, yet never
    // past the run's end plus the cleanup minute; after a signal, one
    // tail for the rollback and every deployment's cleanup together.
    let api = ctx.api_for(Phase::Cleanup);
    ctx.group("Cleanup");
    let act = match first {
        FirstChoice::Check => after_check(gated, &serving(&api).await),
        _ => Act::Deactivate,
    };
    // Kept or left on purpose, or deactivated: settled (a cancelled run
    // whose cleanup did not get here says what is left running).
    let settled = || ctx.state.lock().unwrap().settled.push(id.to_string());
    let result = match act {
        Act::Keep { why } => {
            ctx.say(&format!("keeping {label}: {why}"));
            ctx.event("", "kept: serving");
            settled();
            Ok(())
        }
        Act::Leave { why } => {
            let msg = format!(
                "not deactivating {label}: {why}; set cleanup: true to deactivate it anyway"
            );
            ctx.warn(&msg);
            ctx.note(msg);
            ctx.event("", "cleanup skipped");
            settled();
            Ok(())
        }
        Act::Deactivate => {
            ctx.say(&format!("Deactivating {label}"));
            match deactivate(&api).await {
                Ok(()) => {
                    ctx.event("", "deactivated");
                    ctx.say("Deactivated");
                    settled();
                    Ok(())
                }
                Err(e) => Err(Failure::Cleanup(anyhow!(e))),
            }
        }
    };
    ctx.end_group();
    result
}

/// What cleanup asks of one kind of target (a model's deployments, a
/// chain's), implemented by `model` and `chain`: the flow never reaches
/// up to them. The owner is the model or the chain.
pub(crate) trait Owner {
    /// Its deployments' name in messages ("deployment", "chain deployment").
    const WHAT: &'static str;
    /// The owner's id in the state, once one was created or found.
    fn owner(st: &State) -> &Option<String>;
    /// Records a create found after a cancel as this run's.
    fn adopt(st: &mut State, owner: String, id: String);
    /// The owner and deployment a create in flight when the run was
    /// cancelled made, if the platform shows one provably this run's.
    async fn find_cancelled(
        &self,
        api: &Api,
        in_flight: &InFlight,
    ) -> Result<Option<(String, String)>, ApiError>;
    /// What serves deployment `id` of `owner`.
    async fn serving(&self, api: &Api, owner: &str, id: &str) -> Serving;
    async fn deactivate(&self, api: &Api, owner: &str, id: &str) -> Result<(), ApiError>;
}

/// A run cancelled while its create was in flight: finds what the create
/// made, within the lookup's allowance (the signal's seconds), by `find`
/// over what was recorded before it was sent (`Owner::find_cancelled`
/// answers the owner and the deployment this run can prove is its own,
/// none, or why it cannot tell). What it finds goes into the state through
/// `Owner::adopt`, for cleanup
/// to deactivate (or keep, with cleanup off) and the outputs to name; the
/// log and the summary say which. When it cannot tell, nothing is touched
/// and cleanup is recorded as unfinished.
async fn find_cancelled_create<T: Owner>(ctx: &Ctx<'_>, target: &T) {
    let kind = T::WHAT;
    // Kept in the state until the lookup ends: a second signal that cuts
    // it short leaves it there, for the run to say what may be left.
    let Some(in_flight) = ctx.state.lock().unwrap().in_flight.clone() else {
        return;
    };
    ctx.say(&format!(
        "the run was cancelled while its {kind} was being created: reading what the platform holds now"
    ));
    let api = ctx.api_for(Phase::Lookup);
    let found = target.find_cancelled(&api, &in_flight).await;
    ctx.state.lock().unwrap().in_flight = None;
    match found {
        Ok(Some((owner, id))) => {
            let then = match ctx.cfg.cleanup.enabled {
                true => "its cleanup follows",
                false => "cleanup is off: it is kept, running",
            };
            let msg = format!(
                "cancelled while the {kind} was being created: the platform shows {kind} {id}, created by this run; {then}"
            );
            ctx.say(&msg);
            ctx.note(msg);
            ctx.event("", &format!("{kind} created (read after the cancel)"));
            T::adopt(&mut ctx.state.lock().unwrap(), owner, id);
        }
        Ok(None) => {
            let msg = format!(
                "cancelled while the {kind} was being created: the platform showed no {kind} created by this run when read"
            );
            ctx.say(&msg);
            ctx.note(msg);
        }
        Err(why) => {
            let msg = format!(
                "cancelled while the {kind} was being created, and whether the platform created it cannot be told ({why}), so nothing was deactivated: check {} and deactivate any deployment this run left",
                in_flight.check
            );
            ctx.warn(&msg);
            ctx.state.lock().unwrap().unsettled.push(msg);
        }
    }
}

/// Cleanup of what this run created of `target`: first a create in flight
/// when the run was cancelled is looked for ([`find_cancelled_create`]),
/// then every deployment this run created (with a gated promotion, the
/// tested one and the one the platform promoted), once one was: each
/// decided by [`cleanup_deployment`].
pub(crate) async fn cleanup_created<T: Owner>(ctx: &Ctx<'_>, target: &T) -> Result<(), Failure> {
    find_cancelled_create(ctx, target).await;
    let Some((owner_id, ids)) = ctx.created_all(T::owner) else {
        return Ok(());
    };
    let mut result = Ok(());
    for id in ids {
        let r = cleanup_deployment(
            ctx,
            &id,
            &format!("{} {id}", T::WHAT),
            async |api: &Api| target.serving(api, &owner_id, &id).await,
            async |api: &Api| target.deactivate(api, &owner_id, &id).await,
        )
        .await;
        result = result.and(r);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_choice() {
        let r = |enabled, explicit, environment, gated| Rules {
            enabled,
            explicit,
            environment,
            gated,
        };
        // (rules, expected)
        let cases = [
            (
                r(false, false, false, false),
                FirstChoice::Off { say: false },
            ),
            (r(false, false, true, false), FirstChoice::Off { say: true }),
            (r(false, true, true, false), FirstChoice::Off { say: false }),
            (r(false, false, true, true), FirstChoice::Off { say: false }),
            (r(true, false, false, false), FirstChoice::Check),
            (r(true, false, true, true), FirstChoice::Check),
            (r(true, true, true, false), FirstChoice::Deactivate),
            (r(true, true, false, false), FirstChoice::Deactivate),
            (r(true, true, true, true), FirstChoice::Check),
        ];
        for (rules, want) in cases {
            assert_eq!(start(rules), want, "{rules:?}");
        }
    }

    #[test]
    fn the_choice_after_the_check() {
        let env = || Serving::Environment("production".into());
        let unknown = || Serving::Unknown("503".into());
        let served = "it serves the production environment".to_string();
        let cases = [
            (false, Serving::No, Act::Deactivate),
            (true, Serving::No, Act::Deactivate),
            (
                true,
                env(),
                Act::Keep {
                    why: served.clone(),
                },
            ),
            (false, env(), Act::Leave { why: served }),
        ];
        for (gated, serving, want) in cases {
            assert_eq!(after_check(gated, &serving), want, "{gated} {serving:?}");
        }
        // A failed check counts as serving, gated or not.
        for gated in [false, true] {
            assert!(matches!(
                after_check(gated, &unknown()),
                Act::Leave { why } if why.contains("(503)")
            ));
        }
    }
}
