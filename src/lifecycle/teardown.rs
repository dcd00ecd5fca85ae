//! `command: teardown`: a pull request's previews retired, in every model
//! the key sees — not only the targets' (a model renamed or deleted in the
//! pull request still has previews, and GitLab's `on_stop` jobs often run
//! with no checkout) — by the `truss_push_pull_request` label's exact value
//! (`<owner>/<repo>#<n>`, so another repository's pull request of the same
//! number is never touched). Chain deployments carry no labels in the
//! published API and truss-push records none of their ids, so a chain
//! target is refused before any request: nothing is retired on a guess.

use futures_util::StreamExt;

use super::retire::{Job, MODELS_AT_ONCE, Model, Pick};
use super::{Scope, Seen, shown_name};
use crate::targets::Found;

/// Why a teardown refuses a chain target, before any request.
pub(crate) fn chain_refusal(chains: &[&Found]) -> Option<String> {
    let first = chains.first()?;
    Some(format!(
        "teardown cannot retire chain {:?}'s previews: chain deployments carry no labels in the published API and truss-push records no chain deployment ids, so this pull request's chain deployments cannot be told from another's; nothing was retired. Deactivate or delete the chain's preview in Baseten, and leave the chain out of truss-directory for teardown",
        first.name
    ))
}

/// Retires every deployment, in every model the key sees, whose
/// pull-request label is `value`. Returns `Err` only when the models
/// could not be listed (nothing was retired).
pub(crate) async fn tear_down(job: &Job<'_>, value: &str) -> Result<(), String> {
    let models = job
        .api
        .models_seen()
        .await
        .map_err(|e| format!("the team's models could not be listed, so nothing was retired: {e}"))?;
    let scope = Scope::PullRequest(value.to_string());
    let picks: Vec<Vec<Pick>> = futures_util::stream::iter(models)
        .map(|m| {
            let scope = &scope;
            async move {
                let model = Model {
                    id: m.id.clone(),
                    name: shown_name(&m.name),
                };
                match job.api.deployments_of(&m.id).await {
                    Ok(list) => {
                        let seen: Vec<Seen> = list.iter().map(Seen::from_listed).collect();
                        job.assess(&model, &seen, scope, None).await
                    }
                    Err(e) => {
                        job.undecided(&model, format!("its deployments could not be listed: {e}"));
                        Vec::new()
                    }
                }
            }
        })
        .buffered(MODELS_AT_ONCE)
        .collect()
        .await;
    job.retire_all(picks.into_iter().flatten().collect()).await;
    Ok(())
}
