//! The model deploy, in the order the seed tells it: team, validate,
//! package and upload, create, wait until the platform says ready (with an
//! environment: until it serves it), predict; and the model's cleanup.

use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use base64::Engine;
use serde_json::Value;

use crate::baseten::{Api, CreateRequest, Created, LogLine, now_epoch_millis};
use crate::config::RAW_CONFIG_MAX_BYTES;
use crate::flow::{
    self, Ctx, Poll, PromotionTrack, Serving, Trace, deploy_error, encode_config, human,
    truss_user_env,
};
use crate::outcome::Failure;
use crate::status::{self, Readiness};
use crate::{ci::Reporter, git};

/// Log lines remembered for de-duplication.
const LOG_DEDUP_WINDOW: usize = 10_000;
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
    let team = flow::pick_team(ctx, async || {
        let models = ctx.api.models(None).await?;
        Ok(models
            .into_iter()
            .filter(|m| m.name == name)
            .filter_map(|m| m.team.map(|t| t.id))
            .collect())
    })
    .await?;
    let existing = ctx
        .api
        .models(team.as_ref().map(|t| t.id.as_str()))
        .await
        .map_err(deploy_error)?
        .into_iter()
        .find(|m| m.name == name);
    match &existing {
        Some(m) => ctx.say(&format!(
            "Model {name:?} exists ({}): creating a new deployment",
            m.id
        )),
        None => ctx.say(&format!("Model {name:?} is new: creating it")),
    }

    let config_b64 = encode_config(config, name);
    flow::validate_config(ctx, &config_b64, &truss_user_env(None), "config.yaml").await?;
    let creds = ctx
        .api
        .model_upload_credentials()
        .await
        .map_err(deploy_error)?;
    flow::package_and_upload(ctx, dir, &creds, "the truss").await?;

    let git_info = if cfg.include_git_info {
        git::collect_git_info(dir, cfg.ci_revision.as_ref())
    } else {
        None
    };
    let labels_json = cfg
        .labels
        .as_ref()
        .map(|l| Value::Object(l.clone()).to_string());
    let raw_config_b64 = if raw_config.len() <= RAW_CONFIG_MAX_BYTES {
        Some(base64::engine::general_purpose::STANDARD.encode(raw_config))
    } else {
        ctx.warn(&format!(
            "config.yaml is larger than {RAW_CONFIG_MAX_BYTES} bytes: its raw text is not attached (the parsed config is)"
        ));
        None
    };
    // What already carries this deployment name, so that a create whose
    // answer is lost can tell its own deployment from earlier ones.
    let list = async |model_id: &str| ctx.api.deployment_ids(model_id, &cfg.deployment_name).await;
    let trace = Trace::take(existing.as_ref().map(|m| m.id.as_str()), &list).await;
    let request = CreateRequest {
        existing_model_id: existing.as_ref().map(|m| m.id.as_str()),
        model_name: name,
        s3_key: &creds.s3_key,
        config_b64: &config_b64,
        deployment_name: &cfg.deployment_name,
        environment: cfg.environment.as_deref(),
        deploy_timeout_minutes: cfg.deploy_timeout_minutes,
        team_id: team.as_ref().map(|t| t.id.as_str()),
        truss_user_env: &truss_user_env(git_info.as_ref()),
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
    let created = flow::create_once(
        ctx,
        "the deployment",
        &check,
        async || ctx.api.create(&request).await,
        async || {
            let find_model = async || {
                let team_id = team.as_ref().map(|t| t.id.as_str());
                let models = ctx.api.models(team_id).await?;
                Ok(models.into_iter().find(|m| m.name == name).map(|m| m.id))
            };
            let found = trace.find_new(find_model, &list).await?;
            Ok(found.map(|(model_id, deployment_id)| Created {
                model_id,
                deployment_id,
            }))
        },
    )
    .await?;
    {
        let mut st = ctx.state.lock().unwrap();
        st.model_id = Some(created.model_id.clone());
        st.deployment_id = Some(created.deployment_id.clone());
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
    ctx.end_group();

    ctx.group(&format!(
        "Wait for ready (timeout: {})",
        human(cfg.wait_timeout)
    ));
    let waited = wait(ctx, &created.model_id, &created.deployment_id).await;
    ctx.end_group();
    waited?;
    ctx.ready();

    let Some(payload) = &cfg.predict_payload else {
        ctx.say("No predict payload configured, skipping predict check");
        return Ok(());
    };
    ctx.group("Predict");
    let regional = cfg
        .environment
        .as_deref()
        .filter(|_| cfg.regional_environment);
    let url = cfg
        .endpoints
        .model_predict(&created.model_id, &created.deployment_id, regional);
    let streaming = payload
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let r = flow::smoke_test(ctx, "predict", &url, payload, streaming).await;
    ctx.end_group();
    r
}

/// Polls the model deployment's status until it is ready (and, with an
/// environment, serving it), failed, or the deadline passes.
async fn wait(ctx: &Ctx<'_>, model_id: &str, deployment_id: &str) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let deadline = ctx.deploy_until;
    let logs = (cfg.stream_logs).then(|| {
        spawn_log_stream(
            ctx.api.clone(),
            Arc::clone(&ctx.rep),
            cfg.poll_interval,
            model_id,
            deployment_id,
        )
    });
    let mut last: Option<String> = None;
    let mut warned_unknown: HashSet<String> = HashSet::new();
    let mut promo = PromotionTrack::default();
    let result = flow::poll_until(ctx, deadline, "the deployment", async || {
        let dep = ctx.api.deployment(model_id, deployment_id).await?;
        let st = dep.status.trim().to_string();
        let class = status::classify_model(&st);
        ctx.state.lock().unwrap().last_status = Some(st.clone());
        if last.as_deref() != Some(st.as_str()) {
            let left = deadline.saturating_duration_since(Instant::now());
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
            Readiness::Ready => match &cfg.environment {
                None => Ok(Poll::Ready),
                Some(env) => {
                    let environment = ctx.api.environment_json(model_id, env).await;
                    flow::check_promotion(ctx, &mut promo, deployment_id, env, environment)
                }
            },
            Readiness::Failed => Ok(Poll::Failed(Failure::Deploy(anyhow!(
                "the deployment failed with status {st}; see the logs: {}",
                cfg.endpoints.logs_page(model_id, deployment_id)
            )))),
            Readiness::InProgress => Ok(Poll::Wait),
        }
    })
    .await;
    if let Some(h) = logs {
        h.abort();
    }
    result
}

/// Streams deployment logs while waiting: polled, de-duplicated within a
/// bounded window, printed as they come.
fn spawn_log_stream(
    api: Api,
    rep: Arc<std::sync::Mutex<Reporter>>,
    poll_interval: Duration,
    model_id: &str,
    deployment_id: &str,
) -> tokio::task::JoinHandle<()> {
    let interval = poll_interval.max(Duration::from_millis(LOG_POLL_MIN_MILLIS));
    let (model_id, deployment_id) = (model_id.to_string(), deployment_id.to_string());
    tokio::spawn(async move {
        let mut seen: HashSet<LogLine> = HashSet::new();
        let mut order: VecDeque<LogLine> = VecDeque::new();
        let mut since_ms: Option<u64> = None;
        loop {
            let now_ms = now_epoch_millis();
            if let Ok(lines) = api.logs(&model_id, &deployment_id, since_ms).await {
                for l in lines {
                    if seen.contains(&l) {
                        continue;
                    }
                    let text = match &l.replica {
                        Some(r) if !r.is_empty() => format!("  [{r}] {}", l.message.trim_end()),
                        _ => format!("  {}", l.message.trim_end()),
                    };
                    rep.lock().unwrap().line(&text);
                    seen.insert(l.clone());
                    order.push_back(l);
                    if order.len() > LOG_DEDUP_WINDOW
                        && let Some(old) = order.pop_front()
                    {
                        seen.remove(&old);
                    }
                }
                since_ms = Some(now_ms.saturating_sub(LOG_OVERLAP_MILLIS));
            }
            tokio::time::sleep(interval).await;
        }
    })
}

/// Cleanup of the model deployment, once one was created.
pub(crate) async fn cleanup(ctx: &Ctx<'_>, cancelled: bool) -> Result<(), Failure> {
    let (model_id, deployment_id) = {
        let st = ctx.state.lock().unwrap();
        match (&st.model_id, &st.deployment_id) {
            (Some(m), Some(d)) => (m.clone(), d.clone()),
            _ => return Ok(()),
        }
    };
    flow::cleanup_deployment(
        ctx,
        cancelled,
        &format!("deployment {deployment_id}"),
        serving_environment(ctx, &model_id, &deployment_id),
        ctx.api.deactivate(&model_id, &deployment_id),
    )
    .await
}

/// The environment that serves this model deployment, if any.
async fn serving_environment(ctx: &Ctx<'_>, model_id: &str, deployment_id: &str) -> Serving {
    match ctx.api.deployment(model_id, deployment_id).await {
        Ok(d) if d.is_production => return Serving::Environment("production".into()),
        Ok(_) => {}
        Err(e) => return Serving::Unknown(e.to_string()),
    }
    match ctx.api.environments(model_id).await {
        Ok(envs) => envs
            .into_iter()
            .find(|e| {
                e.current_deployment
                    .as_ref()
                    .is_some_and(|d| d.id == deployment_id)
            })
            .map_or(Serving::No, |e| Serving::Environment(e.name)),
        // Older APIs without the list answer 4xx: the production flag above
        // decided.
        Err(e) if e.permanent_status().is_some() => Serving::No,
        Err(e) => Serving::Unknown(e.to_string()),
    }
}
