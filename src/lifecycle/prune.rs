//! `command: prune`: old deployments of the targets' models retired. By
//! default only deployments carrying truss-push's labels are candidates
//! (`prune-unlabelled` widens it to every deployment of the model); `keep`
//! keeps the newest retirable ones, `older-than` retires only what is
//! older. Chains: their deployments carry no labels and the published
//! audit log is the models' only, so which chain deployment served an
//! environment before the current one cannot be read: nothing of a chain
//! is retired, and with `prune-unlabelled` the run says why and ends
//! `cleanup_failed`.

use super::retire::{Job, Model};
use super::{Age, Scope, Seen, shown_name};
use crate::baseten::ModelRef;
use crate::kind::Kind;
use crate::targets::Found;

/// The model of each target's name among the models the key sees, with
/// `team` when given: `Err` (why) when two teams have a model of that name
/// and no team was given; `Ok(None)` when there is none.
pub(crate) fn model_named<'a>(
    models: &'a [ModelRef],
    name: &str,
    team: Option<&str>,
) -> Result<Option<&'a ModelRef>, String> {
    let same: Vec<&ModelRef> = models
        .iter()
        .filter(|m| {
            m.name == name && team.is_none_or(|want| m.team_name.as_deref() == Some(want))
        })
        .collect();
    match same.as_slice() {
        [] => Ok(None),
        [m] => Ok(Some(m)),
        _ => Err(format!(
            "{} models are named {name:?} among those the key sees: set team to say which",
            same.len()
        )),
    }
}

/// Prunes each target's model.
pub(crate) async fn prune(
    job: &Job<'_>,
    targets: &[Found],
    team: Option<&str>,
    scope: &Scope,
    age: Age,
) -> Result<(), String> {
    let models = job
        .api
        .models_seen()
        .await
        .map_err(|e| format!("the team's models could not be listed, so nothing was retired: {e}"))?;
    let mut picks = Vec::new();
    for t in targets {
        let named = Model {
            id: String::new(),
            name: shown_name(&t.name),
        };
        if t.kind == Kind::Chain {
            match scope {
                Scope::Everything => job.undecided(
                    &named,
                    "a chain's previous serving deployment cannot be read (the published audit log is the models' only), so none of its deployments is retired".into(),
                ),
                _ => job.note(format!(
                    "chain {}: chain deployments carry no labels in the published API, so none is a candidate without prune-unlabelled",
                    named.name
                )),
            }
            continue;
        }
        let m = match model_named(&models, &t.name, team) {
            Ok(Some(m)) => m,
            Ok(None) => {
                job.note(format!("model {}: the key sees no model of that name, nothing to prune", named.name));
                continue;
            }
            Err(why) => {
                job.undecided(&named, why);
                continue;
            }
        };
        let model = Model {
            id: m.id.clone(),
            name: named.name,
        };
        match job.api.deployments_of(&m.id).await {
            Ok(list) => {
                let seen: Vec<Seen> = list.iter().map(Seen::from_listed).collect();
                picks.extend(job.assess(&model, &seen, scope, Some(age)).await);
            }
            Err(e) => job.undecided(&model, format!("its deployments could not be listed: {e}")),
        }
    }
    job.retire_all(picks).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: &str, name: &str, team: Option<&str>) -> ModelRef {
        ModelRef {
            id: id.into(),
            name: name.into(),
            team_name: team.map(str::to_string),
        }
    }

    #[test]
    fn a_targets_model_is_found_by_name_and_team() {
        let models = [m("a1", "a", Some("ml")), m("a2", "a", Some("web")), m("b1", "b", None)];
        assert_eq!(model_named(&models, "b", None).unwrap().unwrap().id, "b1");
        assert_eq!(model_named(&models, "a", Some("web")).unwrap().unwrap().id, "a2");
        assert!(model_named(&models, "a", None).unwrap_err().contains("set team"));
        assert!(model_named(&models, "c", None).unwrap().is_none());
        assert!(model_named(&models, "b", Some("ml")).unwrap().is_none());
    }
}
