//! The model deploy, in the order the platform expects it: team, validate,
//! package and upload, create, wait until the platform says ready (with an
//! environment: until it serves it), predict; and the model's cleanup.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use base64::Engine;
use serde_json::Value;

use crate::baseten::{
    Api, ApiError, CreateRequest, Created, Environment, LogLine, now_epoch_millis,
};
use crate::budget::Phase;
use crate::config::RAW_CONFIG_MAX_BYTES;
use crate::content;
use crate::flow::{
    self, Ctx, ExistingDeployments, InFlight, Poll, PromotionTrack, Serving, deploy_error,
    encode_config, human, truss_user_env,
};
use crate::kind::Kind;
use crate::outcome::Failure;
use crate::status::{self, Readiness};
use crate::{ci::Reporter, git};

/// New log lines printed per poll; a flood is summarized, not printed.
const LOG_LINES_PER_POLL_MAX: usize = 1_000;
/// How far back each log poll reaches, to survive clock skew.
const LOG_OVERLAP_MILLIS: u64 = 60_000;
/// The log stream polls at most this often.
const LOG_POLL_MIN_MILLIS: u64 = 500;

/// Push, create, wait and predict the model in `dir`, whose parsed
/// `config.yaml` is `config` and raw text `raw_config`. Updates `ctx.state`
/// as it goes.
pub(crate) async fn deploy(
    ctx: &Ctx<'_>,
    dir: &Path,
    config: &Value,
    raw_config: &[u8],
) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let name = cfg.model_name.as_str();

    ctx.group(&format!("Deploy {name}"));
    let (team, existing) = flow::model_team_and_existing(ctx).await?;
    flow::check_gate_target(ctx, Kind::Model, existing.as_ref().map(|m| m.id.as_str())).await?;
    // With skip-unchanged the source is hashed before anything is
    // packaged (a pass of its own: it decides whether to upload at all);
    // otherwise the upload hashes each file from the very reads that send
    // it to S3.
    if cfg.skip_unchanged {
        // `unchanged: false` until a read proves otherwise, whatever stops
        // the run.
        {
            let mut st = ctx.state.lock().unwrap();
            st.by_content.unchanged = Some(false);
            st.by_content.reused = Some(false);
        }
        let hash = flow::content::hash(ctx, dir).await?;
        let model_id = existing.as_ref().map(|m| m.id.as_str());
        if flow::content::skip_if_unchanged(ctx, model_id, &hash, raw_config).await? {
            return Ok(());
        }
    }

    let config_b64 = encode_config(config);
    flow::validate_config(ctx, &config_b64, &truss_user_env(None), "config.yaml").await?;
    flow::preflight_secrets(ctx, team.as_ref(), &flow::secret_names(config));
    let git_info = if cfg.include_git_info {
        git::collect_git_info(dir, cfg.ci_revision.as_ref())
    } else {
        None
    };
    // Every create records the source's content hash among the labels, and
    // a value unique to this run, by which it finds its own deployment when
    // the create's answer is lost or the run is cancelled meanwhile.
    let run = flow::run_label();
    let user_env = truss_user_env(git_info.as_ref());
    // The platform's verdict on the create's payload, before the first
    // byte is uploaded.
    let payload = flow::preflight::Payload {
        model_id: existing.as_ref().map(|m| m.id.as_str()),
        team_id: team.as_ref().map(|t| t.id.as_str()),
        config,
        raw_config,
        user_env: &user_env,
        run: &run,
    };
    flow::preflight::ask(ctx, &payload).await?;
    let creds = ctx
        .api
        .model_upload_credentials()
        .await
        .map_err(deploy_error)?;
    // Into an environment, what serves it is read on the side (with
    // skip-unchanged its verdict read it already), so the summary can say
    // what the deploy changes: a read that only informs, which the upload
    // and the create never wait for.
    if let (false, Some(env)) = (cfg.skip_unchanged, cfg.environment.as_deref()) {
        let model_id = existing.as_ref().map(|m| m.id.as_str());
        flow::content::compare_later(ctx, model_id, env, None, raw_config);
    }
    // What the deploy replaces there, and its price, for the summary.
    if let Some(env) = cfg.environment.as_deref() {
        flow::price::replaced_later(ctx, existing.as_ref().map(|m| m.id.as_str()), env);
    }
    let packaged = flow::package_and_upload(ctx, dir, &creds, "the truss", true)
        .await?
        .expect("asked for the content hash");
    let hash = flow::content::packaged(ctx, &packaged);
    // What the informing reads already answered is told now; the rest is
    // told by the report.
    crate::flow::inform::tell_finished(ctx);

    let labels_json = Some(
        content::labels_with(
            cfg.labels.as_ref(),
            &hash,
            &run,
            cfg.pull_request_label.as_deref(),
        )
        .dumps(),
    );
    let raw_config_b64 = if raw_config.len() <= RAW_CONFIG_MAX_BYTES {
        Some(base64::engine::general_purpose::STANDARD.encode(raw_config))
    } else {
        ctx.warn(&format!(
            "config.yaml is larger than {RAW_CONFIG_MAX_BYTES} bytes: its raw text is not attached (the parsed config is)"
        ));
        None
    };
    // What already carries this deployment name, so that a deployment of
    // that name another run makes meanwhile can be named as such.
    let list = async |api: &Api, model_id: &str| {
        let named = api
            .deployments_named(model_id, &cfg.deployment_name)
            .await?;
        Ok(named.into_iter().map(|d| d.id).collect())
    };
    let before = std::cell::RefCell::new(
        ExistingDeployments::take(ctx.api, existing.as_ref().map(|m| m.id.as_str()), &list).await,
    );
    let request = CreateRequest {
        existing_model_id: existing.as_ref().map(|m| m.id.as_str()),
        model_name: name,
        s3_key: &creds.s3_key,
        config_b64: &config_b64,
        deployment_name: &cfg.deployment_name,
        environment: cfg.create_environment(),
        scale_down_old_production: !cfg.preserve_previous_deployment,
        preserve_env_instance_type: cfg.preserve_env_instance_type,
        deploy_timeout_minutes: cfg.deploy_timeout_minutes,
        team_id: team.as_ref().map(|t| t.id.as_str()),
        truss_user_env: &user_env,
        labels_json,
        raw_config_b64,
    };
    let check = match &existing {
        Some(m) => format!(
            "the deployments of model {name:?} ({}) for one named {:?}",
            cfg.endpoints.model_page(&m.id),
            cfg.deployment_name
        ),
        None => format!("whether a model {name:?} now exists in your workspace"),
    };
    let in_flight = InFlight {
        before: before.borrow().clone(),
        name: name.to_string(),
        team_id: team.as_ref().map(|t| t.id.clone()),
        check,
        entrypoint: None,
        run: Some(run),
    };
    let create = NewDeployment {
        ctx,
        request,
        before,
        lookup: in_flight.clone(),
    };
    let created = flow::create_once(ctx, "the deployment", in_flight, &create).await?;
    {
        let mut st = ctx.state.lock().unwrap();
        st.model_id = Some(created.model_id.clone());
        st.deployment_id = Some(created.deployment_id.clone());
        st.environment_url = cfg.environment.as_deref().map(|env| {
            cfg.endpoints.environment_invoke(
                "model",
                &created.model_id,
                env,
                "predict",
                cfg.regional_environment,
            )
        });
    }
    ctx.event("", "deployment created");
    ctx.say(&format!(
        "Created deployment {} ({}) of model {}",
        created.deployment_id, cfg.deployment_name, created.model_id
    ));
    ctx.say(&format!(
        "Logs: {}",
        cfg.endpoints
            .logs_page(&created.model_id, &created.deployment_id)
    ));
    crate::flow::inform::tell_finished(ctx);
    ctx.end_group();

    ctx.group(&format!(
        "Wait for ready (timeout: {})",
        human(cfg.wait_timeout)
    ));
    let waited = wait(ctx, &created.model_id, &created.deployment_id).await;
    ctx.end_group();
    waited?;
    ctx.ready();
    // What it costs per hour, read on the side.
    flow::price::later(ctx, &created.model_id, &created.deployment_id);

    flow::test_and_promote(ctx, Kind::Model, &created.model_id, &created.deployment_id).await
}

/// Polls the model deployment's status until it is ready (and, with an
/// environment, serving it), failed, or the deadline passes.
async fn wait(ctx: &Ctx<'_>, model_id: &str, deployment_id: &str) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let logs = (cfg.stream_logs).then(|| {
        spawn_log_stream(
            ctx.api_for(Phase::Wait),
            Arc::clone(&ctx.rep),
            cfg.poll_interval,
            cfg.endpoints.logs_page(model_id, deployment_id),
            model_id,
            deployment_id,
        )
    });
    let mut last: Option<String> = None;
    let mut warned_unknown: HashSet<String> = HashSet::new();
    let mut promo = PromotionTrack::default();
    let waited = async |ctx: &Ctx<'_>, api: &Api| {
        let dep = api.deployment(model_id, deployment_id).await?;
        let st = dep.status.trim().to_string();
        let class = status::classify_model(&st);
        ctx.state.lock().unwrap().last_status = Some(st.clone());
        if last.as_deref() != Some(st.as_str()) {
            let left = ctx.left(ctx.until(Phase::Wait));
            ctx.say(&format!(
                "status {st} ({}) after {}, {} left",
                class.as_str(),
                human(ctx.started.elapsed()),
                human(left)
            ));
            ctx.event(&st, class.as_str());
            if !status::is_known_model_status(&st) && warned_unknown.insert(st.clone()) {
                ctx.warn(&format!(
                    "unknown deployment status {st:?}: treating it as in progress and polling on"
                ));
            }
            last = Some(st.clone());
        }
        match class {
            Readiness::Ready => match cfg.create_environment() {
                None => Ok(Poll::Ready),
                Some(env) => {
                    let environment = api.environment_of(Kind::Model, model_id, env).await;
                    flow::check_promotion(ctx, &mut promo, deployment_id, env, environment)
                }
            },
            Readiness::Failed => Ok(Poll::Failed(Failure::Deploy(anyhow!(
                "the deployment failed with status {st}; see the logs: {}",
                cfg.endpoints.logs_page(model_id, deployment_id)
            )))),
            Readiness::InProgress => Ok(Poll::Wait),
        }
    };
    let result = flow::poll_until(ctx, Phase::Wait, "the deployment", waited).await;
    if let Some(h) = logs {
        h.abort();
    }
    result
}

/// Which log lines are new. Each poll asks for the last minute again (to
/// survive clock skew), so lines come back several times: a line is new
/// unless seen, and a seen line is forgotten only once it is older than
/// anything a later poll can return — however many lines a poll brings.
#[derive(Default)]
struct LogWindow {
    /// Seen lines by their timestamp (nanoseconds since the epoch).
    seen: BTreeMap<u128, HashSet<LogLine>>,
}

impl LogWindow {
    /// The lines of one answer that were not seen before, in order.
    fn fresh(&mut self, lines: Vec<LogLine>) -> Vec<LogLine> {
        lines
            .into_iter()
            .filter(|l| {
                let at = l.timestamp.trim().parse::<u128>().unwrap_or(u128::MAX);
                self.seen.entry(at).or_default().insert(l.clone())
            })
            .collect()
    }

    /// Forgets lines older than `since_ms`, the start of the next request.
    fn forget_before(&mut self, since_ms: u64) {
        let keep = self.seen.split_off(&(u128::from(since_ms) * 1_000_000));
        self.seen = keep;
    }
}

/// Streams deployment logs while waiting: polled, de-duplicated, printed
/// as they come, at most `LOG_LINES_PER_POLL_MAX` a poll.
fn spawn_log_stream(
    api: Api,
    rep: Arc<std::sync::Mutex<Reporter>>,
    poll_interval: Duration,
    logs_page: String,
    model_id: &str,
    deployment_id: &str,
) -> tokio::task::JoinHandle<()> {
    let interval = poll_interval.max(Duration::from_millis(LOG_POLL_MIN_MILLIS));
    let (model_id, deployment_id) = (model_id.to_string(), deployment_id.to_string());
    tokio::spawn(async move {
        let mut window = LogWindow::default();
        let mut since_ms: Option<u64> = None;
        loop {
            let now_ms = now_epoch_millis();
            if let Ok(lines) = api.logs(&model_id, &deployment_id, since_ms).await {
                let fresh = window.fresh(lines);
                let skipped = fresh.len().saturating_sub(LOG_LINES_PER_POLL_MAX);
                let mut r = rep.lock().unwrap();
                if skipped > 0 {
                    r.line(&format!(
                        "  … {skipped} log lines not shown here; all of them: {logs_page}"
                    ));
                }
                for l in &fresh[skipped..] {
                    let text = match &l.replica {
                        Some(rep) if !rep.is_empty() => {
                            format!("  [{rep}] {}", l.message.trim_end())
                        }
                        _ => format!("  {}", l.message.trim_end()),
                    };
                    r.line(&text);
                }
                drop(r);
                let next = now_ms.saturating_sub(LOG_OVERLAP_MILLIS);
                window.forget_before(next);
                since_ms = Some(next);
            }
            tokio::time::sleep(interval).await;
        }
    })
}

/// The model deployment's create, as the flow's create-exactly-once asks
/// of it.
struct NewDeployment<'r, 'c> {
    ctx: &'r Ctx<'c>,
    request: CreateRequest<'r>,
    /// What carried this deployment name before the create, so that a
    /// lost answer's deployment is told from earlier ones: taken again
    /// when the model turns out to have been created meanwhile.
    before: std::cell::RefCell<ExistingDeployments>,
    /// What a lookup after a lost answer needs: the name, the team and
    /// this run's label value (its `before` is taken from the field above).
    lookup: InFlight,
}

impl NewDeployment<'_, '_> {
    async fn list(&self, api: &Api, model_id: &str) -> Result<Vec<String>, ApiError> {
        let named = api
            .deployments_named(model_id, self.request.deployment_name)
            .await?;
        Ok(named.into_iter().map(|d| d.id).collect())
    }

    /// The model of this name (in the team, when named), if one exists.
    async fn model(&self, api: &Api) -> Result<Option<String>, ApiError> {
        let models = api.models(self.request.team_id).await?;
        Ok(models
            .into_iter()
            .find(|m| m.name == self.request.model_name)
            .map(|m| m.id))
    }
}

impl flow::Create for NewDeployment<'_, '_> {
    type Made = Created;

    async fn send(&self, api: &Api) -> Result<Created, ApiError> {
        let (ctx, request, name) = (self.ctx, &self.request, self.request.model_name);
        match api.create(request).await {
            // Refused, for a model that did not exist when we looked:
            // another run may have created it since (two first deploys
            // racing). If it exists now, push a version of it.
            Err(refused @ ApiError::Permanent { .. }) if request.existing_model_id.is_none() => {
                let Ok(Some(model_id)) = self.model(api).await else {
                    return Err(refused);
                };
                ctx.warn(&format!(
                    "model {name:?} was created by someone else since this run looked ({model_id}): pushing this deployment as a new version of it"
                ));
                ctx.note(format!(
                    "model {name:?} was created meanwhile by another client; this deployment is a version of it"
                ));
                // What the model holds now, so that a lost answer to the
                // version is never taken for the other run's deployment.
                let list = async |api: &Api, model_id: &str| self.list(api, model_id).await;
                let now = ExistingDeployments::take(api, Some(&model_id), &list).await;
                if let Some(f) = ctx.state.lock().unwrap().in_flight.as_mut() {
                    f.before = now.clone();
                }
                *self.before.borrow_mut() = now;
                let version = CreateRequest {
                    existing_model_id: Some(&model_id),
                    ..request.clone()
                };
                api.create(&version).await
            }
            r => r,
        }
    }

    async fn find(&self, api: &Api) -> Result<Option<Created>, ApiError> {
        let f = InFlight {
            before: self.before.borrow().clone(),
            ..self.lookup.clone()
        };
        let found = find_own(self.ctx, api, &f).await?;
        Ok(found.map(|(model_id, deployment_id)| Created {
            model_id,
            deployment_id,
        }))
    }
}

/// Cleanup of the model deployment (with a gated promotion: of each one
/// this run created), once one was created.
pub(crate) async fn cleanup(ctx: &Ctx<'_>) -> Result<(), Failure> {
    // An unchanged source created nothing: the deployment in the state is
    // the one serving the environment, never this run's to deactivate.
    // Nor did a reused one (reuse by content): promoted, never created.
    let by_content = ctx.state.lock().unwrap().by_content.clone();
    if by_content.unchanged == Some(true) || by_content.reused == Some(true) {
        return Ok(());
    }
    flow::cleanup_created(ctx, &Model { ctx }).await
}

/// A model's deployments, as the flow's cleanup asks of them.
struct Model<'r, 'c> {
    /// The run, whose label a create in flight when it was cancelled is
    /// found by, as a lost answer is.
    ctx: &'r Ctx<'c>,
}

impl flow::Owner for Model<'_, '_> {
    const WHAT: &'static str = "deployment";

    fn owner(st: &flow::State) -> &Option<String> {
        &st.model_id
    }

    fn adopt(st: &mut flow::State, model_id: String, id: String) {
        st.model_id = Some(model_id);
        st.deployment_id = Some(id);
    }

    async fn find_cancelled(
        &self,
        api: &Api,
        f: &InFlight,
    ) -> Result<Option<(String, String)>, ApiError> {
        find_own(self.ctx, api, f).await
    }

    async fn serving(&self, api: &Api, model_id: &str, id: &str) -> Serving {
        serving_environment(api, model_id, id).await
    }

    async fn deactivate(&self, api: &Api, model_id: &str, id: &str) -> Result<(), ApiError> {
        api.deactivate(model_id, id).await
    }
}

/// The deployment this run created, after a lost create answer or a cancel
/// while the create was in flight: of the model's deployments with this
/// run's deployment name, the one whose labels (read from the platform)
/// carry this run's value under [`crate::label::RUN_LABEL_KEY`]; `None` when the
/// model does not exist, or when no deployment of the name is this run's and
/// every new one is provably another's. A new one of the same name that is
/// not this run's (a re-run of the commit, the older run of a
/// cancel-in-progress group) is named, in the log and the summary, and left
/// alone. A new one without any run label cannot be told from this run's
/// (a platform that dropped the labels would show ours so): an error, so
/// that nothing is resent, adopted or deactivated on it.
async fn find_own(
    ctx: &Ctx<'_>,
    api: &Api,
    f: &InFlight,
) -> Result<Option<(String, String)>, ApiError> {
    let run = f.run.as_deref().unwrap_or_default();
    let model_id = match f.before.owner() {
        Some(m) => m.to_string(),
        None => {
            let models = api.models(f.team_id.as_deref()).await?;
            match models.into_iter().find(|m| m.name == f.name) {
                Some(m) => m.id,
                None => return Ok(None),
            }
        }
    };
    let named = api
        .deployments_named(&model_id, &ctx.cfg.deployment_name)
        .await?;
    let run_of = |d: &crate::baseten::Listed| {
        d.labels
            .as_ref()
            .and_then(|l| l.get(crate::label::RUN_LABEL_KEY))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let (mut ours, mut theirs, mut unlabelled) = (vec![], vec![], vec![]);
    for d in named.iter().filter(|d| f.before.is_new(&d.id)) {
        match run_of(d) {
            Some(r) if !run.is_empty() && r == run => ours.push(d.id.clone()),
            Some(_) => theirs.push(d.id.clone()),
            None => unlabelled.push(d.id.clone()),
        }
    }
    // With ours read back carrying its label, the platform keeps labels: a
    // new one without ours is another client's.
    if !ours.is_empty() {
        theirs.append(&mut unlabelled);
    }
    if !theirs.is_empty() {
        let msg = match theirs.as_slice() {
            [one] => format!(
                "deployment {one} of the same name ({:?}), created by another run, was left alone",
                ctx.cfg.deployment_name
            ),
            many => format!(
                "deployments {} of the same name ({:?}), created by other runs, were left alone",
                many.join(", "),
                ctx.cfg.deployment_name
            ),
        };
        ctx.warn(&msg);
        ctx.note(msg);
    }
    let key = crate::label::RUN_LABEL_KEY;
    match (ours.as_slice(), unlabelled.as_slice()) {
        ([one], _) => Ok(Some((model_id, one.clone()))),
        ([], []) => Ok(None),
        ([], unknown) => Err(ApiError::permanent(format!(
            "new deployments of the same name carry no {key} label ({}), so whether one is this run's cannot be told",
            unknown.join(", ")
        ))),
        (many, _) => Err(ApiError::permanent(format!(
            "{} deployments carry this run's label ({key}: {run}): {}, so which one is this run's cannot be told",
            many.len(),
            many.join(", ")
        ))),
    }
}

/// The environment that serves this model deployment, if any: the
/// deployment's own production flag first, then the environments' list.
async fn serving_environment(api: &Api, model_id: &str, deployment_id: &str) -> Serving {
    let flag = api.deployment(model_id, deployment_id).await;
    if let Some(known) = serving_by_flag(flag.as_ref().map(|d| d.is_production)) {
        return known;
    }
    serving_by_list(api.environments(model_id).await, deployment_id)
}

/// What the deployment's record settles: production serves, a failed read
/// counts as serving; `None` when the environments must be asked.
fn serving_by_flag(is_production: Result<bool, &ApiError>) -> Option<Serving> {
    match is_production {
        Ok(true) => Some(Serving::Environment("production".into())),
        Ok(false) => None,
        Err(e) => Some(Serving::Unknown(e.to_string())),
    }
}

/// The environment whose current deployment is `deployment_id`. Older
/// APIs without the list answer 4xx: the production flag decided.
fn serving_by_list(list: Result<Vec<Environment>, ApiError>, deployment_id: &str) -> Serving {
    match list {
        Ok(envs) => envs
            .into_iter()
            .find(|e| {
                e.current_deployment
                    .as_ref()
                    .is_some_and(|d| d.id == deployment_id)
            })
            .map_or(Serving::No, |e| Serving::Environment(e.name)),
        Err(e) if e.permanent_status().is_some() => Serving::No,
        Err(e) => Serving::Unknown(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(ns: u128, msg: &str) -> LogLine {
        LogLine {
            timestamp: ns.to_string(),
            message: msg.into(),
            replica: None,
        }
    }

    #[test]
    fn what_serves_a_model_deployment() {
        let refused = ApiError::Permanent {
            status: Some(404),
            message: "no list here".into(),
        };
        let lost = || ApiError::Ambiguous {
            message: "reset".into(),
        };
        let flag_cases = [
            (Ok(true), Some(Serving::Environment("production".into()))),
            (Ok(false), None),
            (Err(&lost()), Some(Serving::Unknown(lost().to_string()))),
        ];
        for (flag, want) in flag_cases {
            assert_eq!(serving_by_flag(flag), want);
        }
        let env = |name: &str, current: Option<&str>| -> Environment {
            let current = current.map(|id| serde_json::json!({"id": id, "status": "ACTIVE"}));
            serde_json::from_value(serde_json::json!({"name": name, "current_deployment": current}))
                .unwrap()
        };
        let list_cases = [
            (
                Ok(vec![
                    env("staging", Some("other")),
                    env("canary", Some("d1")),
                ]),
                Serving::Environment("canary".into()),
            ),
            (Ok(vec![env("staging", None)]), Serving::No),
            (Ok(vec![]), Serving::No),
            (Err(refused), Serving::No),
            (Err(lost()), Serving::Unknown(lost().to_string())),
        ];
        for (list, want) in list_cases {
            assert_eq!(serving_by_list(list, "d1"), want);
        }
    }

    #[test]
    fn lines_come_once_however_many_a_poll_returns() {
        let mut w = LogWindow::default();
        // One poll returns 15,000 lines (more than any count-based window),
        // the next returns them again plus one.
        let batch: Vec<_> = (0..15_000u128)
            .map(|i| line(1_000_000_000_000 + i, &format!("l{i}")))
            .collect();
        assert_eq!(w.fresh(batch.clone()).len(), 15_000);
        w.forget_before(0);
        let mut again = batch;
        again.push(line(2_000_000_000_000, "new"));
        let fresh = w.fresh(again);
        assert_eq!(fresh.len(), 1);
        assert_eq!(fresh[0].message, "new");
    }

    #[test]
    fn only_lines_older_than_the_next_request_are_forgotten() {
        let mut w = LogWindow::default();
        let old = line(1_000_000_000, "old"); // 1 s after the epoch
        let recent = line(5_000_000_000, "recent");
        assert_eq!(w.fresh(vec![old.clone(), recent.clone()]).len(), 2);
        w.forget_before(2_000); // the next request starts at 2 s
        assert!(w.fresh(vec![recent.clone()]).is_empty());
        // Same text, another moment: a new line.
        assert_eq!(w.fresh(vec![line(6_000_000_000, "recent")]).len(), 1);
    }
}
