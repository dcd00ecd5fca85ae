//! Creating a deployment exactly once. A create whose answer was lost may
//! have been applied: it is never sent again blind. The platform is asked
//! whether the deployment exists; it is adopted if so, sent once more if
//! not, and when the outcome stays unknown the run fails saying what to
//! check — so every deployment the tool made is reported or cleaned up.

use anyhow::anyhow;

use super::{Ctx, deploy_error};
use crate::baseten::{Api, ApiError};
use crate::budget::Phase;
use crate::outcome::Failure;
use crate::retry::{CallKind, Classify};

/// Tries of a create whose answers are lost while the platform says,
/// each time, that nothing was created (so sending again is safe).
const CREATE_ROUNDS: u32 = 5;

/// Whether a failed mutation may have been applied: the connection broke
/// after sending, a server or proxy failed after receiving it, or the
/// run's deadline cut it after it left (an answer dripping in past it). A
/// refusal (4xx, including 429) or a request never sent was not applied.
fn maybe_applied(e: &ApiError) -> bool {
    if let ApiError::OutOfTime { sent, .. } = e {
        return *sent;
    }
    match e.kind() {
        CallKind::Ambiguous => true,
        CallKind::Transient { status } => status != 429,
        CallKind::NotSent | CallKind::Permanent => false,
    }
}

/// Where a created deployment shows up: its owner (the model or chain, when
/// it existed before) and the deployment ids the owner already had, so that
/// after a lost answer a new deployment is told apart from earlier ones.
#[derive(Clone, Debug)]
pub(crate) struct ExistingDeployments {
    owner: Option<String>,
    /// `None` when the list could not be read: nothing can then be adopted.
    before: Option<Vec<String>>,
}

impl ExistingDeployments {
    /// Lists `owner`'s deployment ids before the create; a new owner has
    /// none. `list` lists an owner's deployment ids through `api`.
    pub(crate) async fn take(
        api: &Api,
        owner: Option<&str>,
        list: &impl AsyncFn(&Api, &str) -> Result<Vec<String>, ApiError>,
    ) -> ExistingDeployments {
        let before = match owner {
            Some(o) => list(api, o).await.ok(),
            None => Some(Vec::new()),
        };
        ExistingDeployments {
            owner: owner.map(str::to_string),
            before,
        }
    }

    /// The owner (known, else found by name with `find_owner`) and its
    /// deployment ids that were not there before; `None` when no owner
    /// exists.
    pub(crate) async fn new_since(
        &self,
        api: &Api,
        find_owner: impl AsyncFnOnce(&Api) -> Result<Option<String>, ApiError>,
        list: &impl AsyncFn(&Api, &str) -> Result<Vec<String>, ApiError>,
    ) -> Result<Option<(String, Vec<String>)>, ApiError> {
        let Some(before) = &self.before else {
            return Err(ApiError::permanent(
                "the deployments that existed before could not be listed".into(),
            ));
        };
        let owner = match &self.owner {
            Some(o) => o.clone(),
            None => match find_owner(api).await? {
                Some(o) => o,
                None => return Ok(None),
            },
        };
        let ids = list(api, &owner).await?;
        let new = ids.into_iter().filter(|id| !before.contains(id)).collect();
        Ok(Some((owner, new)))
    }

    /// Nothing recorded (a test's stand-in).
    #[cfg(test)]
    pub(crate) fn none() -> ExistingDeployments {
        ExistingDeployments {
            owner: None,
            before: None,
        }
    }

    /// The owner recorded before the create (`None` for a new one).
    pub(crate) fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// Whether `id` was not among the owner's deployments before the create
    /// (any id is, when they could not be listed).
    pub(crate) fn is_new(&self, id: &str) -> bool {
        self.before
            .as_ref()
            .is_none_or(|before| !before.iter().any(|b| b == id))
    }
}

/// A value for the run's label ([`crate::label::RUN_LABEL_KEY`]) that no
/// other run carries: 32 hex digits from std's `RandomState`, whose keys the
/// operating system's random source seeds for each process, with the
/// process id hashed in. Two runs started in the same second on two
/// machines draw independent 128-bit keys.
pub(crate) fn run_label() -> String {
    use std::hash::BuildHasher;
    let keys = std::collections::hash_map::RandomState::new();
    let half = |part: u8| keys.hash_one((part, std::process::id()));
    format!("{:016x}{:016x}", half(0), half(1))
}

/// A create sent whose answer has not been read yet: what a run cancelled
/// meanwhile needs to find what it made (`cleanup::find_cancelled_create`), the
/// way a lost answer is looked up.
#[derive(Clone, Debug)]
pub(crate) struct InFlight {
    /// What the owner held before the create.
    pub(crate) before: ExistingDeployments,
    /// The model's or chain's name, to find a new owner by.
    pub(crate) name: String,
    pub(crate) team_id: Option<String>,
    /// Where to look when the outcome cannot be learned.
    pub(crate) check: String,
    /// A chain's entrypoint chainlet: how a chain deployment, which has
    /// no name to be found by, is proven this run's.
    pub(crate) entrypoint: Option<String>,
    /// A model deployment's run label value: how it is proven this run's
    /// when another run created one of the same name.
    pub(crate) run: Option<String>,
}

/// One create, as [`create_once`] asks of it: implemented by `model` and
/// `chain`, so the flow never reaches up to them.
pub(crate) trait Create {
    /// What an answered create names (the owner and the deployment).
    type Made;
    /// Sends the create once.
    async fn send(&self, api: &Api) -> Result<Self::Made, ApiError>;
    /// After a lost answer: what the create made, if the platform shows
    /// one provably this run's.
    async fn find(&self, api: &Api) -> Result<Option<Self::Made>, ApiError>;
}

/// Sends a create with `send`; when its outcome is unknown, asks `find`
/// whether it happened, within the lookup's own allowance (the create's
/// may be spent: an answer dripping in past its deadline). `what` names
/// the deployment for people ("the deployment", "the chain deployment");
/// `in_flight` is kept in the run's state while a request is out, for a
/// cancelled run to find what it made; its `check` says where to look when
/// the outcome cannot be learned.
pub(crate) async fn create_once<C: Create>(
    ctx: &Ctx<'_>,
    what: &str,
    in_flight: InFlight,
    create: &C,
) -> Result<C::Made, Failure> {
    let check = in_flight.check.clone();
    ctx.state.lock().unwrap().in_flight = Some(in_flight);
    let r = create_rounds(ctx, what, &check, create).await;
    // Answered, adopted or failed (saying what to check): nothing is in
    // flight any more.
    ctx.state.lock().unwrap().in_flight = None;
    r
}

async fn create_rounds<C: Create>(
    ctx: &Ctx<'_>,
    what: &str,
    check: &str,
    create: &C,
) -> Result<C::Made, Failure> {
    // `send` makes its requests through this handle: the deploy budget,
    // stretched to the create's grace when less is left.
    let api = &ctx.api_for(Phase::Create);
    let mut round = 0;
    loop {
        round += 1;
        let lost = match create.send(api).await {
            Ok(t) => return Ok(t),
            Err(e) if maybe_applied(&e) => e,
            Err(e) => return Err(deploy_error(e)),
        };
        ctx.warn(&format!(
            "the answer to creating {what} was lost ({lost}); asking the platform whether it was created before sending anything again"
        ));
        ctx.event("", &format!("creating {what}: outcome unknown"));
        // The lookup's own allowance, from now: whatever the create used.
        let lookup = ctx.api_for(Phase::Lookup);
        match create.find(&lookup).await {
            Ok(Some(t)) => {
                let msg = format!("{what} was created although its answer was lost: adopted it");
                ctx.say(&msg);
                ctx.note(msg);
                return Ok(t);
            }
            Ok(None) if round < CREATE_ROUNDS => {
                ctx.say(&format!(
                    "{what} was not created: sending the request once more"
                ));
            }
            Ok(None) => {
                return Err(Failure::Deploy(anyhow!(
                    "creating {what}: the platform's answer was lost {round} times and no new deployment was found ({lost}); check {check} and deactivate any deployment this run left"
                )));
            }
            Err(e) => {
                return Err(Failure::Deploy(anyhow!(
                    "creating {what}: the answer was lost ({lost}) and whether it was created could not be checked ({e}); check {check} and deactivate any deployment this run left"
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_labels_differ_and_are_32_hex_digits() {
        let (a, b) = (run_label(), run_label());
        assert_ne!(a, b);
        assert!(
            a.len() == 32 && a.bytes().all(|c| c.is_ascii_hexdigit()),
            "{a}"
        );
    }

    #[test]
    fn only_failures_after_the_request_arrived_may_have_been_applied() {
        let t = |status| ApiError::Transient {
            status,
            message: String::new(),
            retry_after: None,
        };
        assert!(maybe_applied(&ApiError::Ambiguous {
            message: String::new()
        }));
        assert!(maybe_applied(&t(502)));
        assert!(maybe_applied(&t(500)));
        assert!(!maybe_applied(&t(429)));
        assert!(!maybe_applied(&ApiError::NotSent {
            message: String::new()
        }));
        assert!(!maybe_applied(&ApiError::Permanent {
            status: Some(400),
            message: String::new()
        }));
    }
}
