//! The deploy core that models and chains share: the run's context and
//! state, team resolution, the config as sent, validate/package/upload
//! (`upload`), creating exactly once (`create`), the one wait loop and
//! promotion tracking (`wait`), the smoke test and what follows it
//! (`smoke`), the cleanup decision (`cleanup`) and the gated promotion
//! (`gate`), deploy by content inside a model deploy (`content`) and reads
//! that only inform (`inform`). `model` and `chain` tell their own story
//! with these steps and never use each other. Each phase makes its
//! platform requests through its own `Api` handle (`Api::until`), so its
//! budget is its own.

mod cleanup;
pub(crate) mod content;
mod create;
mod gate;
pub(crate) mod inform;
pub(crate) mod preflight;
pub(crate) mod price;
pub(crate) mod retired;
mod reuse;
mod smoke;
pub(crate) mod switch;
mod upload;
mod wait;

use crate::budget::{Budget, Phase};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use serde_json::Value;

use crate::baseten::{Api, ApiError, Named, Team, python_json};
pub(crate) use crate::ci::human;
use crate::ci::{PredictStats, Reporter, ServesNow, StatusEvent};
use crate::config::Config;
use crate::kind::Kind;
use crate::net::TRUSS_COMPAT_VERSION;
use crate::outcome::Failure;
use crate::{evidence, git};

pub(crate) use cleanup::{Owner, Serving, cleanup_created};
pub(crate) use create::{Create, ExistingDeployments, InFlight, create_once, run_label};
pub(crate) use gate::{Candidate, check_gate_target, cleanup_gated, promote_after_predict};
pub(crate) use smoke::{smoke_test, test_and_promote};
pub(crate) use upload::{
    abort_unfinished_uploads, package_and_upload, preflight_secrets, secret_names, validate_config,
};
pub(crate) use wait::{Poll, PromotionTrack, check_promotion, poll_until};

/// What the run learned, kept outside the flow so that a cancelled or
/// failed flow still leaves what cleanup and outputs need.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) model_id: Option<String>,
    /// Chains only.
    pub(crate) chain_id: Option<String>,
    pub(crate) deployment_id: Option<String>,
    pub(crate) model_name: String,
    pub(crate) deploy_time: Option<Duration>,
    pub(crate) last_status: Option<String>,
    pub(crate) predict_response: Option<String>,
    pub(crate) predict: Option<PredictStats>,
    /// The URL the smoke test used last.
    pub(crate) predict_url: Option<String>,
    /// The URL that serves the environment, when there is one.
    pub(crate) environment_url: Option<String>,
    pub(crate) previous_deployment_id: Option<String>,
    pub(crate) tested_deployment_id: Option<String>,
    pub(crate) rolled_back: Option<bool>,
    /// What the run's latest read of its environment showed serving it:
    /// the one value the summary's "serves now" line is written from.
    pub(crate) serves: Option<ServesNow>,
    /// The failure in plain words for the page's reason, when the error
    /// also says what serves (the page says that once, from `serves`).
    pub(crate) reason: Option<String>,
    pub(crate) history: Vec<StatusEvent>,
    /// A gated promotion's traffic over time and its rollback, for the
    /// summary.
    pub(crate) promotion: Vec<StatusEvent>,
    /// Where a gated promotion stands (`promotion: after-predict`).
    pub(crate) gate: Option<gate::Gate>,
    pub(crate) notes: Vec<String>,
    /// Each evidence analysis, in the order they ran.
    pub(crate) evidence: Vec<crate::evidence::Analysis>,
    /// The run's S3 uploaders, so cleanup can abort a multipart upload the
    /// run was stopped in the middle of.
    pub(crate) uploaders: Vec<crate::s3::Uploader>,
    /// The content hash, the `unchanged` verdict and what changes.
    pub(crate) by_content: crate::content::record::ByContent,
    /// What `command: drift` found.
    pub(crate) drift: Option<crate::content::record::DriftFound>,
    /// The reads that only inform, under way, for the report
    /// (`inform::for_report`).
    pub(crate) informing: inform::Pending,
    /// The hourly price of what serves, and of what it replaces.
    pub(crate) price: price::PriceRecord,
    /// A create sent and not yet answered: what a run cancelled meanwhile
    /// looks up (`find_cancelled_create`).
    pub(crate) in_flight: Option<InFlight>,
    /// The deployments cleanup settled: deactivated, or kept on purpose.
    pub(crate) settled: Vec<String>,
    /// What cleanup could not settle, in words: a create whose outcome a
    /// cancelled run could not learn.
    pub(crate) unsettled: Vec<String>,
    /// `teardown` and `prune`: what was retired and what was kept.
    pub(crate) retirements: Option<retired::Retirements>,
}

impl State {
    /// What this run created that cleanup (when on) has not settled, in
    /// words: each deployment still running, then what could not be told.
    /// Empty once cleanup did all it had to.
    pub(crate) fn left_running(&self) -> Vec<String> {
        // An unchanged source created nothing: the deployment in the state
        // serves the environment and was never this run's.
        // Nor did a reused one (reuse by content).
        let made_nothing =
            self.by_content.unchanged == Some(true) || self.by_content.reused == Some(true);
        let mut created: Vec<&String> = match made_nothing {
            true => Vec::new(),
            false => self
                .tested_deployment_id
                .iter()
                .chain(&self.deployment_id)
                .collect(),
        };
        created.dedup();
        // A create still in flight: its lookup never ended.
        let unlooked = self.in_flight.as_ref().map(|f| {
            format!(
                "a deployment may have been created (its create was in flight and the lookup for it did not finish): check {}",
                f.check
            )
        });
        created
            .into_iter()
            .filter(|id| !self.settled.contains(id))
            .map(|id| {
                format!("deployment {id} may be left running (no deactivation of it was confirmed)")
            })
            .chain(unlooked)
            .chain(self.unsettled.iter().cloned())
            .collect()
    }
}

/// Shared handles for one run.
pub(crate) struct Ctx<'a> {
    pub(crate) cfg: &'a Config,
    pub(crate) api: &'a Api,
    /// The run's network: the S3 connections' settings.
    pub(crate) net: &'a crate::net::Network,
    pub(crate) rep: Arc<Mutex<Reporter>>,
    pub(crate) state: &'a Mutex<State>,
    pub(crate) started: Instant,
    /// The run's budget: every phase's deadline ([`Ctx::until`],
    /// [`Ctx::api_for`]).
    pub(crate) budget: &'a Budget,
}

impl Ctx<'_> {
    /// This phase's deadline, asked now of the run's budget.
    pub(crate) fn until(&self, phase: Phase) -> Instant {
        self.budget.deadline(phase)
    }

    /// The platform's client whose requests end by `phase`'s deadline.
    pub(crate) fn api_for(&self, phase: Phase) -> Api {
        self.api.within(phase, self.until(phase))
    }

    /// The time now, on the run's clock (the budget's): what deadlines
    /// are compared with.
    pub(crate) fn now(&self) -> Instant {
        self.budget.now()
    }

    /// How long until `until` (a deadline from [`Ctx::until`]).
    pub(crate) fn left(&self, until: Instant) -> Duration {
        self.budget.left(until)
    }

    /// `until` for a timer (`tokio::time::timeout_at`, `sleep_until`).
    pub(crate) fn timer(&self, until: Instant) -> tokio::time::Instant {
        self.budget.clock().timer(until).into()
    }

    /// The same run, its platform requests made through `api` (a handle
    /// with a phase's deadline, from [`Ctx::api_for`]).
    pub(crate) fn with_api<'b>(&'b self, api: &'b Api) -> Ctx<'b> {
        Ctx {
            cfg: self.cfg,
            api,
            net: self.net,
            rep: Arc::clone(&self.rep),
            state: self.state,
            started: self.started,
            budget: self.budget,
        }
    }

    /// The owner's id and every deployment this run created, the tested
    /// one first when a gated promotion made the platform create another.
    pub(crate) fn created_all(
        &self,
        owner: fn(&State) -> &Option<String>,
    ) -> Option<(String, Vec<String>)> {
        let st = self.state.lock().unwrap();
        let last = st.deployment_id.clone()?;
        let mut ids: Vec<String> = st
            .tested_deployment_id
            .iter()
            .filter(|t| **t != last)
            .cloned()
            .collect();
        ids.push(last);
        Some((owner(&st).clone()?, ids))
    }

    pub(crate) fn say(&self, msg: &str) {
        self.rep.lock().unwrap().line(msg);
    }

    pub(crate) fn warn(&self, msg: &str) {
        self.rep.lock().unwrap().warning(msg);
    }

    pub(crate) fn notice(&self, msg: &str) {
        self.rep.lock().unwrap().notice(msg);
    }

    pub(crate) fn group(&self, title: &str) {
        self.rep.lock().unwrap().group(title);
    }

    pub(crate) fn end_group(&self) {
        self.rep.lock().unwrap().end_group();
    }

    /// Records a line of the status history shown in the summary.
    pub(crate) fn event(&self, status: &str, event: &str) {
        self.state.lock().unwrap().history.push(StatusEvent {
            #[expect(
                clippy::disallowed_methods,
                reason = "a wall-clock stamp on a line of the status history, not a deadline"
            )]
            at: SystemTime::now(),
            elapsed: self.started.elapsed(),
            status: status.to_string(),
            event: event.to_string(),
        });
    }

    /// Records a step of a gated promotion: in the status history and in
    /// the promotion's own timeline.
    /// Keeps what a read of `env` showed serving it: the latest read is
    /// the one the summary tells, once.
    pub(crate) fn saw(&self, env: &str, read: &crate::promotion::Env) {
        self.state.lock().unwrap().serves = Some(ServesNow {
            env: env.to_string(),
            deployment: read.current.clone(),
            moving_to: read.candidate.clone().filter(|_| read.moving()),
        });
    }

    pub(crate) fn promotion_event(&self, status: &str, event: &str) {
        self.event(status, event);
        let mut st = self.state.lock().unwrap();
        let e = st.history.last().cloned();
        st.promotion.extend(e);
    }

    pub(crate) fn note(&self, note: String) {
        self.state.lock().unwrap().notes.push(note);
    }

    /// What the evidence hooks need of this run (this context's platform
    /// handle, so the phase's budget), when there are evidence inputs.
    pub(crate) fn evidence(&self) -> Option<evidence::Run<'_>> {
        Some(evidence::Run {
            settings: self.cfg.evidence.as_ref()?,
            api: self.api,
            endpoints: &self.cfg.endpoints,
            environment: self.cfg.environment.as_deref(),
            gated: self.cfg.gated_environment().is_some(),
            predict_timeout: self.cfg.predict_timeout,
            // The sampler compares with the monotonic clock and sets its
            // timers by it; its requests are checked on the run's clock.
            until: self.budget.clock().timer(self.until(Phase::Evidence)),
            log: self,
        })
    }

    /// Records the ready moment and says it.
    pub(crate) fn ready(&self) {
        let after = self.started.elapsed();
        self.state.lock().unwrap().deploy_time = Some(after);
        self.say(&format!("Ready after {}", human(after)));
    }
}

/// Picks the team: the one named; the only one; the one that already has a
/// model of this name; the default one. Anything else needs a name.
fn resolve_team(
    teams: &[Team],
    requested: Option<&str>,
    owners: &[String],
) -> Result<Option<Team>, String> {
    let names = || {
        teams
            .iter()
            .map(|t| format!("{:?}", t.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(name) = requested {
        return teams
            .iter()
            .find(|t| t.name == name)
            .cloned()
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "team {name:?} is not visible to this API key; teams: {}",
                    names()
                )
            });
    }
    match teams {
        [] => return Ok(None),
        [only] => return Ok(Some(only.clone())),
        _ => {}
    }
    let owning: Vec<&Team> = teams.iter().filter(|t| owners.contains(&t.id)).collect();
    if let [one] = owning.as_slice() {
        return Ok(Some((*one).clone()));
    }
    if owning.is_empty()
        && let [default] = teams
            .iter()
            .filter(|t| t.default)
            .collect::<Vec<_>>()
            .as_slice()
    {
        return Ok(Some((*default).clone()));
    }
    Err(format!(
        "this API key sees several teams and none could be chosen for this model: set team to one of {}",
        names()
    ))
}

/// Fetches the teams and picks one by `resolve_team`'s rules. `owners`
/// lists the ids of teams that already hold a model (or chain) of this name;
/// it is asked only when several teams and no team input make it matter.
/// The chosen team is said.
pub(crate) async fn pick_team(
    ctx: &Ctx<'_>,
    owners: impl AsyncFnOnce() -> Result<Vec<String>, ApiError>,
) -> Result<Option<Team>, Failure> {
    let teams = ctx.api.teams().await.map_err(deploy_error)?;
    let owners = if ctx.cfg.team.is_none() && teams.len() > 1 {
        owners().await.map_err(deploy_error)?
    } else {
        Vec::new()
    };
    let team =
        resolve_team(&teams, ctx.cfg.team.as_deref(), &owners).map_err(Failure::InvalidInput)?;
    if let Some(t) = &team {
        ctx.say(&format!("Team: {}", t.name));
    }
    Ok(team)
}

/// A model deploy's team (when the key sees several) and the model of
/// its name in it, if one exists.
pub(crate) async fn model_team_and_existing(
    ctx: &Ctx<'_>,
) -> Result<(Option<Team>, Option<Named>), Failure> {
    let (team, models) = team_and_models(ctx).await?;
    Ok((team, existing(ctx, "Model", &ctx.cfg.model_name, models)))
}

/// The team of the config's model (when the key sees several) and the
/// models in it: a model deploy's first reads, and a rollback's.
pub(crate) async fn team_and_models(ctx: &Ctx<'_>) -> Result<(Option<Team>, Vec<Named>), Failure> {
    let name = ctx.cfg.model_name.as_str();
    let team = pick_team(ctx, async || {
        let models = ctx.api.models(None).await?;
        Ok(models
            .into_iter()
            .filter(|m| m.name == name)
            .filter_map(|m| m.team.map(|t| t.id))
            .collect())
    })
    .await?;
    let models = ctx
        .api
        .models(team.as_ref().map(|t| t.id.as_str()))
        .await
        .map_err(deploy_error)?;
    Ok((team, models))
}

/// The model or chain named `name` among `listed`, if it exists, said
/// either way (`kind` is "Model" or "Chain").
pub(crate) fn existing(ctx: &Ctx<'_>, kind: &str, name: &str, listed: Vec<Named>) -> Option<Named> {
    let found = listed.into_iter().find(|m| m.name == name);
    match &found {
        // Whether a deployment is created is said where it is decided:
        // skip-unchanged may find nothing to deploy.
        Some(m) => ctx.say(&format!("{kind} {name:?} exists ({})", m.id)),
        None => ctx.say(&format!("{kind} {name:?} is new: creating it")),
    }
    found
}

impl evidence::Journal for Ctx<'_> {
    fn position(&self) -> evidence::Position {
        let st = self.state.lock().unwrap();
        let owner = match (&st.model_id, &st.chain_id) {
            (Some(m), _) => Some((Kind::Model, m.clone())),
            (None, Some(c)) => Some((Kind::Chain, c.clone())),
            _ => None,
        };
        evidence::Position {
            owner,
            deployment_id: st.deployment_id.clone(),
            environment_url: st.environment_url.clone(),
        }
    }

    fn analyses(
        &self,
        change: &mut dyn FnMut(&mut Vec<evidence::Analysis>),
    ) -> Vec<evidence::Analysis> {
        let mut st = self.state.lock().unwrap();
        change(&mut st.evidence);
        st.evidence.clone()
    }

    fn say(&self, msg: &str) {
        Ctx::say(self, msg);
    }

    fn warn(&self, msg: &str) {
        Ctx::warn(self, msg);
    }

    fn notice(&self, msg: &str) {
        Ctx::notice(self, msg);
    }

    fn note(&self, msg: String) {
        Ctx::note(self, msg);
    }
}

/// A platform error that ends the deploy; one cut short by the run's
/// deadline is a timeout.
pub(crate) fn deploy_error(e: ApiError) -> Failure {
    match e {
        ApiError::OutOfTime { message, .. } => Failure::Timeout(format!(
            "{message}: the deploy did not finish within its budget; raise deploy-timeout-minutes (or wait-timeout-seconds)"
        )),
        e => Failure::Deploy(anyhow::Error::new(e)),
    }
}

impl Ctx<'_> {
    /// Runs `work` (not a platform request: packaging, the upload, code
    /// generation) within the deploy budget.
    pub(crate) async fn within_deploy_budget<T>(
        &self,
        what: &str,
        work: impl Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        let until = self.until(Phase::Upload);
        let clock = self.budget.clock();
        // Checked like a request before it starts, its end recorded: what
        // it sends (the S3 requests) goes between the two.
        let left = clock.send(Some(Phase::Upload), Some(until), what);
        let done = match left {
            Ok(_) => tokio::time::timeout(self.left(until), work).await,
            Err(_) => Ok(Err(Failure::Timeout(format!(
                "{what} could not start: the deploy budget ({}) is spent; raise {}",
                human(self.cfg.wait_timeout),
                self.cfg.wait_timeout_input
            )))),
        };
        clock.ended(Phase::Upload, until, what);
        match done {
            Ok(r) => r,
            Err(_) => Err(Failure::Timeout(format!(
                "{what} did not finish within the deploy budget ({}); raise {}",
                human(self.cfg.wait_timeout),
                self.cfg.wait_timeout_input
            ))),
        }
    }
}

/// `TrussUserEnv` as the official client's model declares it (fields in
/// its order, every one required; `mypy_version` and `git_info` may be
/// null). What it says about this client:
/// - `truss_client_version`: the truss release whose archive and wire
///   format we reproduce ([`TRUSS_COMPAT_VERSION`]), so the platform reads
///   the upload as that client's. This is the field the platform may use
///   to decide how to treat a push (the official client sends its own
///   version here and nowhere else in the push).
/// - `python_version`, `pydantic_version`: empty. No Python interpreter and
///   no pydantic take part in a truss-push model deploy, and a made-up
///   version would mislead whoever reads it; the model types them as
///   strings, and an empty one says "none".
/// - `mypy_version`: null, as the official client sends it without mypy.
/// - `git_info`: the repository facts when `include-git-info` is on (the
///   platform shows them with the deployment), else null.
///
/// truss-push names itself in the `User-Agent` of every request instead.
#[derive(serde::Serialize)]
struct TrussUserEnv<'a> {
    truss_client_version: &'a str,
    python_version: &'a str,
    pydantic_version: &'a str,
    mypy_version: Option<&'a str>,
    git_info: Option<&'a git::GitInfo>,
}

/// The `truss_user_env` JSON string.
pub(crate) fn truss_user_env(git_info: Option<&git::GitInfo>) -> String {
    serde_json::to_string(&TrussUserEnv {
        truss_client_version: TRUSS_COMPAT_VERSION,
        python_version: "",
        pydantic_version: "",
        mypy_version: None,
        git_info,
    })
    .expect("plain data serializes")
}

/// The config as sent in `config`: base64 of the config's JSON, written as
/// the Python client writes it. A `model-name` override names the model,
/// not the config: like `truss push --model-name`, the payload keeps the
/// file's own `model_name`.
pub(crate) fn encode_config(config: &Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(python_json(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn team(id: &str, name: &str, default: bool) -> Team {
        Team {
            id: id.into(),
            name: name.into(),
            default,
        }
    }

    #[test]
    fn what_a_cancelled_run_left_running() {
        let st = |tested: Option<&str>, dep: Option<&str>, settled: &[&str]| State {
            tested_deployment_id: tested.map(Into::into),
            deployment_id: dep.map(Into::into),
            settled: settled.iter().map(|s| s.to_string()).collect(),
            ..State::default()
        };
        let left = |s: &State| s.left_running().join(" | ");
        assert_eq!(left(&st(None, None, &[])), "");
        assert_eq!(left(&st(None, Some("d1"), &["d1"])), "");
        assert!(left(&st(None, Some("d1"), &[])).starts_with("deployment d1 may be left running"));
        // Gated: the tested one and the promoted copy, each once.
        let both = st(Some("t1"), Some("p1"), &["p1"]);
        assert!(left(&both).starts_with("deployment t1 ") && !left(&both).contains("p1"));
        assert_eq!(st(Some("d1"), Some("d1"), &[]).left_running().len(), 1);
        // An unchanged source created nothing.
        let mut unchanged = st(None, Some("serving"), &[]);
        unchanged.by_content.unchanged = Some(true);
        assert_eq!(left(&unchanged), "");
        // Nor did a reused one: promoted, never created.
        let mut reused = st(Some("older"), Some("older"), &[]);
        reused.by_content.reused = Some(true);
        assert_eq!(left(&reused), "");
        // A create whose lookup never ended, and one that could not be told.
        let mut unknown = st(None, None, &[]);
        unknown.unsettled.push("could not be told".into());
        unknown.in_flight = Some(InFlight {
            before: ExistingDeployments::none(),
            name: "m".into(),
            team_id: None,
            check: "the model's page".into(),
            entrypoint: None,
            run: None,
        });
        assert_eq!(
            left(&unknown),
            "a deployment may have been created (its create was in flight and the lookup for it did not finish): check the model's page | could not be told"
        );
    }

    #[test]
    fn team_resolution_rules() {
        let one = [team("t1", "Solo", false)];
        let many = [
            team("t1", "A", false),
            team("t2", "B", true),
            team("t3", "C", false),
        ];
        assert_eq!(resolve_team(&[], None, &[]).unwrap().map(|t| t.id), None);
        assert_eq!(resolve_team(&one, None, &[]).unwrap().unwrap().id, "t1");
        assert_eq!(
            resolve_team(&many, Some("C"), &[]).unwrap().unwrap().id,
            "t3"
        );
        assert!(
            resolve_team(&many, Some("Z"), &[])
                .unwrap_err()
                .contains("\"A\", \"B\", \"C\"")
        );
        assert_eq!(
            resolve_team(&many, None, &["t3".into()])
                .unwrap()
                .unwrap()
                .id,
            "t3"
        );
        // New model: the default team.
        assert_eq!(resolve_team(&many, None, &[]).unwrap().unwrap().id, "t2");
        // The same name in two teams: ambiguous, ask.
        assert!(resolve_team(&many, None, &["t1".into(), "t3".into()]).is_err());
    }

    #[test]
    fn config_encoding_keeps_the_files_name_in_pythons_format() {
        let c = json!({"model_name": "file-name", "resources": {"cpu": "1"}});
        let b = encode_config(&c);
        let text = base64::engine::general_purpose::STANDARD.decode(b).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            r#"{"model_name": "file-name", "resources": {"cpu": "1"}}"#
        );
    }
}
