//! `command: teardown`: a pull request's previews retired, in every model
//! the key sees — not only the targets' (a model renamed or deleted in the
//! pull request still has previews, and GitLab's `on_stop` jobs often run
//! with no checkout) — by the `truss_push_pull_request` label's exact value
//! (`<owner>/<repo>#<n>`, so another repository's pull request of the same
//! number is never touched). Chain deployments carry no labels in the
//! published API and truss-push records none of their ids, so a chain
//! target is refused before any request: nothing is retired on a guess.

use futures_util::StreamExt;

use super::retire::{self, Job, MODELS_AT_ONCE, Model, Pick};
use super::{Scope, Seen, shown_name};
use crate::handles::Run;
use crate::kind::Kind;
use crate::outcome::Failure;
use crate::secret::Secret;
use crate::settings::CommandSettings;
use crate::targets::{self, Found};

/// Runs `command: teardown`: the pull request and its label's value, a
/// chain target refused, then every model the key sees.
pub(crate) async fn run(run: &Run, cs: &CommandSettings, key: &Secret) -> Result<(), Failure> {
    let Some(settings) = &cs.settings else {
        return Err(Failure::InvalidInput(
            "teardown reads the hosts and the budget from its settings, and none were parsed"
                .into(),
        ));
    };
    let Some(number) = cs.lifecycle.pull_request else {
        return Err(Failure::InvalidInput(
            "teardown retires a pull request's previews, and this run belongs to none: set pull-request (e.g. pull-request: 12), or run it on the pull request's event (GitHub: on: pull_request: types: [closed]; GitLab: the merge request's environment on_stop job)".into(),
        ));
    };
    let value = crate::settings::pull_request::label_value(number, &run.ci)
        .map_err(Failure::InvalidInput)?;
    if !settings.truss_directory.trim().is_empty() {
        let found = targets::resolve(
            &settings.truss_directory,
            settings.given_model_name.as_deref(),
        )
        .map_err(Failure::InvalidInput)?;
        let chains: Vec<&Found> = found.iter().filter(|f| f.kind == Kind::Chain).collect();
        if let Some(why) = chain_refusal(&chains) {
            return Err(Failure::InvalidInput(why));
        }
    }
    if settings.github.pr_comment || settings.github.commit_status {
        run.rep.lock().unwrap().notice(
            "pr-comment and commit-status have no effect on teardown: it writes no comment and no commit status (github-deployment marks the pull request's GitHub deployments inactive)",
        );
    }
    run.rep.lock().unwrap().line(&format!(
        "Teardown of {value}: every deployment labelled truss_push_pull_request={value}, in every model the key sees{}",
        if settings.dry_run { " (dry run: nothing is changed)" } else { "" }
    ));
    let job = retire::job(run, "teardown", settings, cs.lifecycle.retire, key)?;
    if let Some(r) = run.state.lock().unwrap().retirements.as_mut() {
        r.of = Some(format!("pull request #{number}"));
    }
    let team = settings.team.as_deref();
    retire::finish(run, tear_down(&job, &value, team)).await?;
    // GitHub hears of it only once every preview is retired (not in a dry
    // run): a deployment shown inactive must not still run.
    if settings.github.deployment && !settings.dry_run {
        let gh = crate::github::Job {
            settings: settings.github.clone(),
            kind: Kind::Model,
            name: String::new(),
            environment: None,
            endpoints: settings.endpoints.clone(),
            pull_request: Some(value.clone()),
        };
        let net = run.platform(key)?.net;
        if let Some(session) = crate::github::Session::open(gh, net, &run.rep) {
            session.retire_pull_request(&value, &job.budget).await;
        }
    }
    Ok(())
}

/// Why a teardown refuses a chain target, before any request.
pub(crate) fn chain_refusal(chains: &[&Found]) -> Option<String> {
    let first = chains.first()?;
    Some(format!(
        "teardown cannot retire chain {:?}'s previews: chain deployments carry no labels in the published API and truss-push records no chain deployment ids, so this pull request's chain deployments cannot be told from another's; nothing was retired. Deactivate or delete the chain's preview in Baseten, and leave the chain out of truss-directory for teardown",
        first.name
    ))
}

/// Retires every deployment, in every model the key sees (of `team`
/// only, when given), whose pull-request label is `value`. Returns `Err`
/// only when the models could not be listed (nothing was retired).
pub(crate) async fn tear_down(
    job: &Job<'_>,
    value: &str,
    team: Option<&str>,
) -> Result<(), String> {
    let models = job.api.models_seen().await.map_err(|e| {
        format!("the team's models could not be listed, so nothing was retired: {e}")
    })?;
    let models: Vec<_> = models
        .into_iter()
        .filter(|m| team.is_none_or(|t| m.team_name.as_deref() == Some(t)))
        .collect();
    let scope = Scope::PullRequest(value.to_string());
    let picks: Vec<Vec<Pick>> = futures_util::stream::iter(models)
        .map(|m| {
            let scope = &scope;
            async move {
                let model = Model {
                    kind: crate::kind::Kind::Model,
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
