//! `command: prune`: old deployments of the targets' models retired. By
//! default only deployments carrying truss-push's labels are candidates
//! (`prune-unlabelled` widens it to every deployment of the model); `keep`
//! keeps the newest retirable ones, `older-than` retires only what is
//! older. Chains: their deployments carry no labels, so a chain is pruned
//! only with `prune-unlabelled` (every chain deployment a candidate), by
//! the same rules and reads as a model's (`retire`, switched on the kind:
//! the chain's environments, its audit log's `CHAIN_DEPLOYMENT_PROMOTED`
//! entries for what served before, the listing's status).

use super::retire::{self, Job, Model, Pick};
use super::{Age, Scope, Seen, shown_name};
use crate::baseten::{ModelRef, Named};
use crate::handles::Run;
use crate::kind::Kind;
use crate::outcome::Failure;
use crate::secret::Secret;
use crate::settings::CommandSettings;
use crate::targets::Found;

/// Runs `command: prune`: the targets (every one `truss-directory` names,
/// or what `changed-since` touched), the age rules checked, then each
/// target's model.
pub(crate) async fn run(run: &Run, cs: &CommandSettings, key: &Secret) -> Result<(), Failure> {
    let Some(settings) = &cs.settings else {
        return Err(Failure::InvalidInput(
            "prune retires old deployments of the targets' models: set truss-directory".into(),
        ));
    };
    let l = &cs.lifecycle;
    if l.keep.is_none() && l.older_than_secs.is_none() {
        return Err(Failure::InvalidInput(
            "prune needs keep (the newest retirable deployments to keep, e.g. keep: 5), older-than (e.g. older-than: 14d) or both: without either it would retire everything it may".into(),
        ));
    }
    let chosen = crate::plan::select(settings, &run.ci).map_err(Failure::InvalidInput)?;
    let found: Vec<Found> = chosen.chosen.into_iter().map(|(f, _)| f).collect();
    let scope = match l.prune_unlabelled {
        true => Scope::Everything,
        false => Scope::Labelled,
    };
    let job = retire::job(run, "prune", settings, l.retire, key)?;
    let age = Age {
        keep: l.keep,
        older_than_secs: l.older_than_secs,
        now: job.now,
    };
    run.rep.lock().unwrap().line(&format!(
        "Prune of {} target(s): {}{}{}",
        found.len(),
        match scope {
            Scope::Everything => "every deployment (prune-unlabelled)",
            _ => "deployments truss-push labelled",
        },
        [
            l.keep
                .map(|k| format!(", keeping the {k} newest retirable")),
            l.older_than_secs
                .map(|s| format!(", older than {}", age_words(s))),
        ]
        .into_iter()
        .flatten()
        .collect::<String>(),
        if settings.dry_run {
            " (dry run: nothing is changed)"
        } else {
            ""
        }
    ));
    let team = settings.team.as_deref();
    retire::finish(run, prune(&job, &found, team, &scope, age)).await
}

/// `older-than` as the user wrote it: whole days, else hours.
fn age_words(secs: u64) -> String {
    match secs % 86_400 {
        0 => format!("{}d", secs / 86_400),
        _ => format!("{}h", secs / 3600),
    }
}

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
        .filter(|m| m.name == name && team.is_none_or(|want| m.team_name.as_deref() == Some(want)))
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
    let models = job.api.models_seen().await.map_err(|e| {
        format!("the team's models could not be listed, so nothing was retired: {e}")
    })?;
    let mut picks = Vec::new();
    // The chains the key sees, listed once, when a chain is pruned.
    let mut chains: Option<Result<Vec<Named>, String>> = None;
    for t in targets {
        let named = Model {
            kind: t.kind,
            id: String::new(),
            name: shown_name(&t.name),
        };
        if t.kind == Kind::Chain {
            match scope {
                Scope::Everything => {
                    picks.extend(prune_chain(job, &mut chains, named, scope, age).await);
                }
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
                job.note(format!(
                    "model {}: the key sees no model of that name, nothing to prune",
                    named.name
                ));
                continue;
            }
            Err(why) => {
                job.undecided(&named, why);
                continue;
            }
        };
        let model = Model {
            kind: Kind::Model,
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

/// Prunes one chain (`prune-unlabelled`): found by name among the chains
/// the key sees (exactly one of that name, else nothing of it is retired),
/// its deployments listed, then the models' assessment.
async fn prune_chain(
    job: &Job<'_>,
    chains: &mut Option<Result<Vec<Named>, String>>,
    named: Model,
    scope: &Scope,
    age: Age,
) -> Vec<Pick> {
    if chains.is_none() {
        *chains = Some(job.api.chains(None).await.map_err(|e| e.to_string()));
    }
    let seen_chains = match chains.as_ref() {
        Some(Ok(c)) => c,
        Some(Err(e)) => {
            job.undecided(
                &named,
                format!("the chains the key sees could not be listed: {e}"),
            );
            return Vec::new();
        }
        None => return Vec::new(),
    };
    let same: Vec<&Named> = seen_chains
        .iter()
        .filter(|c| c.name == named.name)
        .collect();
    let c = match same.as_slice() {
        [] => {
            job.note(format!(
                "chain {}: the key sees no chain of that name, nothing to prune",
                named.name
            ));
            return Vec::new();
        }
        [c] => c,
        _ => {
            job.undecided(
                &named,
                format!(
                    "{} chains are named {:?} among those the key sees, so which one to prune is not known",
                    same.len(),
                    named.name
                ),
            );
            return Vec::new();
        }
    };
    let chain = Model {
        id: c.id.clone(),
        ..named
    };
    match job.api.chain_deployments_of(&chain.id).await {
        Ok(list) => {
            if let Some(other) = list.iter().find(|d| d.chain_id != chain.id) {
                job.undecided(
                    &chain,
                    format!(
                        "the listing of its deployments answered chain deployment {} of another chain ({}), so it decides nothing",
                        other.id, other.chain_id
                    ),
                );
                return Vec::new();
            }
            let seen: Vec<Seen> = list.iter().map(Seen::from_chain).collect();
            job.assess(&chain, &seen, scope, Some(age)).await
        }
        Err(e) => {
            job.undecided(&chain, format!("its deployments could not be listed: {e}"));
            Vec::new()
        }
    }
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
        let models = [
            m("a1", "a", Some("ml")),
            m("a2", "a", Some("web")),
            m("b1", "b", None),
        ];
        assert_eq!(model_named(&models, "b", None).unwrap().unwrap().id, "b1");
        assert_eq!(
            model_named(&models, "a", Some("web")).unwrap().unwrap().id,
            "a2"
        );
        assert!(
            model_named(&models, "a", None)
                .unwrap_err()
                .contains("set team")
        );
        assert!(model_named(&models, "c", None).unwrap().is_none());
        assert!(model_named(&models, "b", Some("ml")).unwrap().is_none());
    }
}
