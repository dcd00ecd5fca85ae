//! The deploy story, in the order the seed tells it: validate, package,
//! upload, create, wait until the platform says ready, predict, clean up.
//! No HTTP details live here; `baseten`, `s3`, `archive` and `ci` own those.

use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, anyhow};
use base64::Engine;
use serde_json::Value;

use crate::baseten::{Api, ApiError, CreateRequest, Created, LogLine, Team, UploadCredentials};
use crate::ci::{Level, PredictStats, Reporter, StatusEvent, StreamStats};
use crate::config::{Config, RAW_CONFIG_MAX_BYTES, Target};
use crate::outcome::Failure;
use crate::status::{self, Readiness};
use crate::{archive, git, promotion, retry, s3};

/// The truss client version whose archive and wire format we reproduce; sent
/// in `truss_user_env` so the platform treats the upload as that client's.
/// The repository's `truss-version` file is its one definition, shared with
/// the chain helper and `scripts/python-env`.
pub const TRUSS_COMPAT_VERSION: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/truss-version")).trim_ascii();
/// First bytes of a predict response kept in outputs and logs.
pub const PREDICT_RESPONSE_MAX_CHARS: usize = 4096;
/// Log lines remembered for de-duplication.
pub const LOG_DEDUP_WINDOW: usize = 10_000;
/// How far back each log poll reaches, to survive clock skew.
pub const LOG_OVERLAP_MILLIS: u64 = 60_000;

/// What the run learned, kept outside the flow so that a cancelled or
/// failed flow still leaves what cleanup and outputs need.
#[derive(Debug, Default)]
pub struct State {
    pub model_id: Option<String>,
    /// Chains only.
    pub chain_id: Option<String>,
    pub deployment_id: Option<String>,
    pub model_name: String,
    pub deploy_time: Option<Duration>,
    pub last_status: Option<String>,
    pub predict_response: Option<String>,
    pub predict: Option<PredictStats>,
    pub history: Vec<StatusEvent>,
    pub notes: Vec<String>,
}

/// Shared handles for one run.
pub struct Ctx<'a> {
    pub cfg: &'a Config,
    pub api: &'a Api,
    pub http: &'a reqwest::Client,
    /// S3 uploads: no redirects followed.
    pub s3_http: &'a reqwest::Client,
    pub rep: Arc<Mutex<Reporter>>,
    pub state: &'a Mutex<State>,
    pub started: Instant,
}

impl Ctx<'_> {
    fn say(&self, msg: &str) {
        self.rep.lock().unwrap().line(msg);
    }

    fn warn(&self, msg: &str) {
        self.rep.lock().unwrap().warning(msg);
    }

    fn group(&self, title: &str) {
        self.rep.lock().unwrap().group(title);
    }

    fn end_group(&self) {
        self.rep.lock().unwrap().end_group();
    }

    fn event(&self, status: &str, event: &str) {
        self.state.lock().unwrap().history.push(StatusEvent {
            at: SystemTime::now(),
            elapsed: self.started.elapsed(),
            status: status.to_string(),
            event: event.to_string(),
        });
    }

    fn note(&self, note: String) {
        self.state.lock().unwrap().notes.push(note);
    }
}

/// `1m05s`-style durations for log lines.
pub fn human(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        let total = s.round() as u64;
        let (h, m, sec) = (total / 3600, (total % 3600) / 60, total % 60);
        if h > 0 {
            format!("{h}h{m:02}m{sec:02}s")
        } else {
            format!("{m}m{sec:02}s")
        }
    }
}

/// Picks the team: the one named; the only one; the one that already has a
/// model of this name; the default one. Anything else needs a name.
pub fn resolve_team(
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

/// TrussUserEnv, fields in the client's order.
#[derive(serde::Serialize)]
struct TrussUserEnv<'a> {
    truss_client_version: &'a str,
    python_version: &'a str,
    pydantic_version: &'a str,
    mypy_version: Option<&'a str>,
    git_info: Option<&'a git::GitInfo>,
}

/// Fetches the teams and picks one by `resolve_team`'s rules. `owners`
/// lists the ids of teams that already hold a model (or chain) of this name;
/// it is asked only when several teams and no team input make it matter.
pub async fn pick_team(
    ctx: &Ctx<'_>,
    owners: impl AsyncFnOnce() -> anyhow::Result<Vec<String>>,
) -> Result<Option<Team>, Failure> {
    let teams = ctx.api.teams().await.map_err(Failure::Deploy)?;
    let owners = if ctx.cfg.team.is_none() && teams.len() > 1 {
        owners().await.map_err(Failure::Deploy)?
    } else {
        Vec::new()
    };
    resolve_team(&teams, ctx.cfg.team.as_deref(), &owners).map_err(Failure::InvalidInput)
}

/// The `truss_user_env` JSON string.
pub fn truss_user_env(git_info: Option<&git::GitInfo>) -> String {
    serde_json::to_string(&TrussUserEnv {
        truss_client_version: TRUSS_COMPAT_VERSION,
        python_version: "3.11.7",
        pydantic_version: "2.11.7",
        mypy_version: None,
        git_info,
    })
    .expect("plain data serializes")
}

/// The config as sent in `config`: base64 of the JSON of config.yaml, with
/// `model_name` set to the name actually deployed (hazard H13).
pub fn encode_config(config: &Value, model_name: &str) -> String {
    let mut c = config.clone();
    if let Some(o) = c.as_object_mut() {
        o.insert("model_name".into(), Value::String(model_name.to_string()));
    }
    base64::engine::general_purpose::STANDARD.encode(c.to_string())
}

/// Push, create, wait and predict a model. Updates `ctx.state` as it goes.
pub async fn deploy_model(ctx: &Ctx<'_>) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let Target::Model {
        dir,
        config,
        raw_config,
    } = &cfg.target
    else {
        unreachable!("deploy_model is only called for models");
    };
    let name = cfg.model_name.as_str();
    let fail = |e: anyhow::Error| Failure::Deploy(e);

    ctx.group(&format!("Deploy {name}"));
    let team = pick_team(ctx, async || {
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
        .map_err(fail)?
        .into_iter()
        .find(|m| m.name == name);
    if let Some(t) = &team {
        ctx.say(&format!("Team: {}", t.name));
    }
    match &existing {
        Some(m) => ctx.say(&format!(
            "Model {name:?} exists ({}): creating a new deployment",
            m.id
        )),
        None => ctx.say(&format!("Model {name:?} is new: creating it")),
    }

    let config_b64 = encode_config(config, name);
    validate_config(ctx, &config_b64, &truss_user_env(None), "config.yaml").await?;
    let creds = ctx.api.model_upload_credentials().await.map_err(fail)?;
    package_and_upload(ctx, dir, &creds, "the truss").await?;

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
    let created: Created = ctx
        .api
        .create(&CreateRequest {
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
        })
        .await
        .map_err(fail)?;
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
    let waited = wait_model(ctx, &created.model_id, &created.deployment_id).await;
    ctx.end_group();
    waited?;
    let ready_after = ctx.started.elapsed();
    ctx.state.lock().unwrap().deploy_time = Some(ready_after);
    ctx.say(&format!("Ready after {}", human(ready_after)));

    if let Some(payload) = &cfg.predict_payload {
        ctx.group("Predict");
        let r = predict(ctx, &created.model_id, &created.deployment_id, payload).await;
        ctx.end_group();
        r?;
    } else {
        ctx.say("No predict payload configured, skipping predict check");
    }
    Ok(())
}

/// Asks the platform to validate a config (`truss_validation`): warnings
/// are shown; `success: false` fails even without error lines (hazard H9).
pub async fn validate_config(
    ctx: &Ctx<'_>,
    config_b64: &str,
    user_env: &str,
    what: &str,
) -> Result<(), Failure> {
    let validation = ctx
        .api
        .truss_validation(config_b64, user_env)
        .await
        .map_err(Failure::Deploy)?;
    for w in &validation.warnings {
        ctx.warn(&format!("truss validation of {what}: {w}"));
    }
    if validation.success {
        return Ok(());
    }
    let detail = if validation.errors.is_empty() {
        "the platform gave no details".to_string()
    } else {
        validation.errors.join("; ")
    };
    Err(Failure::Deploy(anyhow!(
        "the platform rejected {what}: {detail}"
    )))
}

/// A private temporary directory for the archive: the system's temp dir,
/// else the working directory (a `FROM scratch` container or a bare chroot
/// may have no `/tmp`), never inside the truss being archived.
pub fn scratch_dir(truss: &Path) -> anyhow::Result<tempfile::TempDir> {
    let system = tempfile::tempdir();
    if let Ok(d) = system {
        return Ok(d);
    }
    let cwd = std::env::current_dir().context("finding a place for the archive")?;
    let truss = std::fs::canonicalize(truss).unwrap_or_else(|_| truss.to_path_buf());
    let base = if cwd.starts_with(&truss) {
        truss.parent().map(Path::to_path_buf).unwrap_or(cwd)
    } else {
        cwd
    };
    tempfile::Builder::new()
        .prefix(".truss-push-")
        .tempdir_in(&base)
        .with_context(|| {
            format!(
                "creating a temporary directory: the system temp dir is unusable and {} is not writable; set TMPDIR to a writable directory",
                base.display()
            )
        })
}

/// Archives `dir` into a temporary tar and uploads it with `creds`,
/// showing progress. Memory stays flat: the archive is streamed to disk and
/// the upload reads it back part by part.
pub async fn package_and_upload(
    ctx: &Ctx<'_>,
    dir: &Path,
    creds: &UploadCredentials,
    label: &str,
) -> Result<(), Failure> {
    let fail = |e: anyhow::Error| Failure::Deploy(e);
    let tmp = scratch_dir(dir).map_err(fail)?;
    let tar_path = tmp.path().join("truss.tar");
    let (dir2, tar2) = (dir.to_path_buf(), tar_path.clone());
    let archive = tokio::task::spawn_blocking(move || archive::write(&dir2, &tar2))
        .await
        .map_err(|e| fail(anyhow!(e)))?
        .map_err(|e| fail(e.context(format!("packaging {label}"))))?;
    ctx.say(&format!(
        "Packaged {label}: {} files ({})",
        archive.members.len(),
        crate::ci::format_bytes(archive.size)
    ));
    let uploader = s3::Uploader::new(
        ctx.s3_http.clone(),
        s3::Options {
            endpoint: ctx.cfg.endpoints.s3.clone(),
            ..s3::Options::default()
        },
    );
    let target = s3::Target {
        bucket: creds.s3_bucket.clone(),
        key: creds.s3_key.clone(),
        credentials: s3::Credentials {
            access_key_id: creds.aws_access_key_id.clone(),
            secret_access_key: s3::Secret::new(creds.aws_secret_access_key.clone()),
            session_token: s3::Secret::new(creds.aws_session_token.clone()),
        },
    };
    ctx.rep
        .lock()
        .unwrap()
        .upload_started(&format!("Uploading {label}"), archive.size);
    let progress = |done: u64, _total: u64| ctx.rep.lock().unwrap().upload_progress(done);
    let upload = uploader
        .upload_file(&target, &archive.path, &progress)
        .await;
    ctx.rep.lock().unwrap().upload_finished();
    let report = upload.map_err(|e| fail(e.context(format!("uploading {label}"))))?;
    let secs = report.elapsed.as_secs_f64().max(1e-3);
    ctx.say(&format!(
        "Uploaded {label}: {} in {} ({}/s)",
        crate::ci::format_bytes(report.bytes),
        human(report.elapsed),
        crate::ci::format_bytes((report.bytes as f64 / secs) as u64)
    ));
    Ok(())
}

/// One poll's reading.
pub enum Poll {
    Ready,
    Failed(Failure),
    Wait,
}

/// Polls until `poll` reads ready or failed, or the deadline passes — the
/// one wait loop for models and chains. It owns the wall-clock deadline
/// (which holds even when every poll fails), backoff with jitter and
/// Retry-After on transient errors, and the sleep between polls; `poll`
/// owns reading and reporting. `what` names the thing waited for.
pub async fn poll_until(
    ctx: &Ctx<'_>,
    deadline: Instant,
    what: &str,
    mut poll: impl AsyncFnMut() -> Result<Poll, ApiError>,
) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let mut failures_in_a_row: u32 = 0;
    loop {
        let now = Instant::now();
        if now >= deadline {
            let last = ctx.state.lock().unwrap().last_status.clone();
            let last = last.unwrap_or_else(|| "no status read".into());
            ctx.event(&last, "deadline passed");
            return Err(Failure::Timeout(format!(
                "{what} was not ready after {} (last status: {last}); raise deploy-timeout-minutes or check the logs",
                human(cfg.wait_timeout)
            )));
        }
        let sleep_for = match tokio::time::timeout(deadline - now, poll()).await {
            // The deadline hit mid-request; the top of the loop reports it.
            Err(_) => continue,
            Ok(Ok(Poll::Ready)) => return Ok(()),
            Ok(Ok(Poll::Failed(f))) => return Err(f),
            Ok(Ok(Poll::Wait)) => {
                failures_in_a_row = 0;
                cfg.poll_interval
            }
            Ok(Err(ApiError::Transient {
                message,
                retry_after,
            })) => {
                if failures_in_a_row == 0 {
                    ctx.say(&format!("poll failed, retrying: {message}"));
                    let last = ctx.state.lock().unwrap().last_status.clone();
                    ctx.event(
                        last.as_deref().unwrap_or(""),
                        &format!("poll failed: {message}"),
                    );
                }
                failures_in_a_row += 1;
                retry::delay_for(failures_in_a_row - 1, retry_after).max(cfg.poll_interval)
            }
            Ok(Err(ApiError::Permanent(message))) => return Err(Failure::Deploy(anyhow!(message))),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(sleep_for.min(left)).await;
    }
}

/// Polls the model deployment's status until it is ready (and, with an
/// environment, serving it), failed, or the deadline passes.
async fn wait_model(ctx: &Ctx<'_>, model_id: &str, deployment_id: &str) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let deadline = Instant::now() + cfg.wait_timeout;
    let logs = (cfg.stream_logs).then(|| spawn_log_stream(ctx, model_id, deployment_id));
    let mut last: Option<String> = None;
    let mut warned_unknown: HashSet<String> = HashSet::new();
    let mut promo = PromotionTrack::default();
    let result = poll_until(ctx, deadline, "the deployment", async || {
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
                    check_promotion(ctx, &mut promo, deployment_id, env, environment)
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

/// What the wait remembers about the promotion between polls.
#[derive(Default)]
pub struct PromotionTrack {
    last: Option<String>,
    fallback_noted: bool,
}

/// Our deployment (a model deployment or a chain deployment) is ready; is
/// it the one serving the environment yet? `environment` is the
/// environment's answer (EnvironmentV1 or ChainEnvironmentV1).
pub fn check_promotion(
    ctx: &Ctx<'_>,
    track: &mut PromotionTrack,
    deployment_id: &str,
    env: &str,
    environment: Result<Value, ApiError>,
) -> Result<Poll, ApiError> {
    let json = environment?;
    let view = promotion::read(&json, deployment_id);
    let line = match &view {
        promotion::View::Serving => {
            format!("environment {env} now serves deployment {deployment_id}")
        }
        promotion::View::InFlight { status, percent } => match percent {
            Some(p) => format!("promotion into {env}: {status}, {p:.0}% of traffic"),
            None => format!("promotion into {env}: {status}"),
        },
        promotion::View::Failed { status, message } => {
            format!("promotion into {env}: {status}: {message}")
        }
        promotion::View::NotYet { current } => format!(
            "environment {env} still serves {}; waiting for the promotion",
            current.as_deref().unwrap_or("no deployment")
        ),
        promotion::View::Unsupported => String::new(),
    };
    if !line.is_empty() && track.last.as_deref() != Some(line.as_str()) {
        ctx.say(&line);
        ctx.event("", &line);
        track.last = Some(line);
    }
    Ok(match view {
        promotion::View::Serving => Poll::Ready,
        promotion::View::InFlight { .. } | promotion::View::NotYet { .. } => Poll::Wait,
        promotion::View::Failed { status, message } => Poll::Failed(Failure::Deploy(anyhow!(
            "the promotion into {env} ended {status}: {message}"
        ))),
        promotion::View::Unsupported => {
            if !track.fallback_noted {
                track.fallback_noted = true;
                ctx.rep.lock().unwrap().notice(&format!(
                    "the environment API does not report promotions here: readiness in {env} is judged by the deployment status alone"
                ));
                ctx.note(format!(
                    "promotion into {env} not observable; status-only readiness"
                ));
            }
            Poll::Ready
        }
    })
}

/// Streams deployment logs while waiting: polled, de-duplicated within a
/// bounded window, printed as they come.
fn spawn_log_stream(
    ctx: &Ctx<'_>,
    model_id: &str,
    deployment_id: &str,
) -> tokio::task::JoinHandle<()> {
    let api = ctx.api.clone();
    let interval = ctx.cfg.poll_interval.max(Duration::from_millis(500));
    let (model_id, deployment_id) = (model_id.to_string(), deployment_id.to_string());
    let rep = Arc::clone(&ctx.rep);
    tokio::spawn(async move {
        let mut seen: HashSet<LogLine> = HashSet::new();
        let mut order: VecDeque<LogLine> = VecDeque::new();
        let mut since_ms: Option<u64> = None;
        loop {
            let now_ms = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
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

/// Sends the smoke-test predict and reads the answer under one deadline.
async fn predict(
    ctx: &Ctx<'_>,
    model_id: &str,
    deployment_id: &str,
    payload: &Value,
) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let url = match (&cfg.environment, cfg.regional_environment) {
        (Some(env), true) => format!(
            "{}/predict",
            cfg.endpoints
                .inference_base("model", &format!("{model_id}-{env}"))
        ),
        _ => format!(
            "{}/deployment/{deployment_id}/predict",
            cfg.endpoints.inference_base("model", model_id)
        ),
    };
    let url = reqwest::Url::parse(&url)
        .map_err(|e| Failure::Predict(anyhow!("bad predict URL {url}: {e}")))?;
    let streaming = payload
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    ctx.say(&format!(
        "POST {url}{}",
        if streaming { " (streaming)" } else { "" }
    ));
    let started = Instant::now();
    let work = async {
        let resp = ctx
            .api
            .post_inference(url.clone(), payload)
            .await
            .map_err(|e| anyhow!(e))?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            let head: String = body.chars().take(500).collect();
            anyhow::bail!("predict answered HTTP {status}: {head}");
        }
        if streaming {
            read_sse(resp, started).await
        } else {
            let body = resp.text().await.context("reading the predict response")?;
            Ok((body, None))
        }
    };
    match tokio::time::timeout(cfg.predict_timeout, work).await {
        Err(_) => Err(Failure::Predict(anyhow!(
            "predict did not finish within predict-timeout ({})",
            human(cfg.predict_timeout)
        ))),
        Ok(Err(e)) => Err(Failure::Predict(e)),
        Ok(Ok((body, stream))) => {
            let total = started.elapsed().as_secs_f64();
            let shown: String = body.chars().take(PREDICT_RESPONSE_MAX_CHARS).collect();
            ctx.say(&format!("Predict OK in {total:.2}s"));
            if let Some(s) = &stream {
                ctx.say(&format!(
                    "  first token after {:.2}s, {} tokens, {:.1} tokens/s",
                    s.ttfb_secs, s.tokens, s.tokens_per_sec
                ));
            }
            ctx.say(&format!(
                "  response: {}",
                shown.chars().take(500).collect::<String>()
            ));
            let mut st = ctx.state.lock().unwrap();
            st.predict_response = Some(shown);
            st.predict = Some(PredictStats {
                total_secs: total,
                stream,
            });
            Ok(())
        }
    }
}

/// Reads an OpenAI-style SSE stream: each `data:` chunk with a non-empty
/// `choices[0].delta.content` is one token.
async fn read_sse(
    resp: reqwest::Response,
    started: Instant,
) -> anyhow::Result<(String, Option<StreamStats>)> {
    use futures_util::StreamExt;
    let mut body = resp.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut text = String::new();
    let mut tokens = 0u64;
    let mut ttfb: Option<f64> = None;
    let mut done = false;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.context("reading the predict stream")?;
        buf.extend_from_slice(&chunk);
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\r', '\n']);
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            let data = data.trim();
            if data == "[DONE]" {
                done = true;
                break;
            }
            let Ok(v) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            if let Some(c) = v
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                && !c.is_empty()
            {
                tokens += 1;
                ttfb.get_or_insert_with(|| started.elapsed().as_secs_f64());
                if text.chars().count() < PREDICT_RESPONSE_MAX_CHARS {
                    text.push_str(c);
                }
            }
        }
        if done {
            break;
        }
    }
    if tokens == 0 {
        anyhow::bail!("the predict stream (stream: true) produced no tokens");
    }
    let total = started.elapsed().as_secs_f64();
    Ok((
        text,
        Some(StreamStats {
            ttfb_secs: ttfb.unwrap_or(total),
            tokens,
            tokens_per_sec: tokens as f64 / total.max(1e-9),
        }),
    ))
}

/// Cleanup of the model deployment.
pub async fn cleanup(ctx: &Ctx<'_>, cancelled: bool) -> Result<(), Failure> {
    let (model_id, deployment_id) = {
        let st = ctx.state.lock().unwrap();
        match (&st.model_id, &st.deployment_id) {
            (Some(m), Some(d)) => (m.clone(), d.clone()),
            _ => return Ok(()),
        }
    };
    cleanup_deployment(
        ctx,
        cancelled,
        &format!("deployment {deployment_id}"),
        serving_environment(ctx, &model_id, &deployment_id),
        ctx.api.deactivate(&model_id, &deployment_id),
    )
    .await
}

/// How long cleanup may take once the run is cancelled (GitHub sends
/// SIGTERM 7.5 s after SIGINT, and kills 2.5 s later).
pub const CANCELLED_CLEANUP_BUDGET_SECS: u64 = 3;

/// Decides and performs cleanup for models and chains alike. Never
/// deactivates a deployment that serves an environment unless cleanup was
/// set explicitly; a check that fails counts as serving.
pub async fn cleanup_deployment(
    ctx: &Ctx<'_>,
    cancelled: bool,
    label: &str,
    serving: impl Future<Output = Serving>,
    deactivate: impl Future<Output = anyhow::Result<()>>,
) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    if !cfg.cleanup.enabled {
        if cfg.environment.is_some() && !cfg.cleanup.explicit {
            let msg = "cleanup off: deployments into an environment are kept by default";
            ctx.say(msg);
            ctx.note(msg.into());
        }
        return Ok(());
    }
    let budget = Duration::from_secs(CANCELLED_CLEANUP_BUDGET_SECS);
    ctx.group("Cleanup");
    let serving = if cfg.cleanup.explicit {
        Serving::No
    } else if cancelled {
        tokio::time::timeout(budget, serving)
            .await
            .unwrap_or_else(|_| Serving::Unknown("the check did not finish in time".into()))
    } else {
        serving.await
    };
    let why = match &serving {
        Serving::No => None,
        Serving::Environment(env) => Some(format!("it serves the {env} environment")),
        Serving::Unknown(e) => Some(format!(
            "could not check whether it serves an environment ({e})"
        )),
    };
    let result = match why {
        Some(why) => {
            let msg = format!(
                "not deactivating {label}: {why}; set cleanup: true to deactivate it anyway"
            );
            ctx.warn(&msg);
            ctx.note(msg);
            ctx.event("", "cleanup skipped");
            Ok(())
        }
        None => {
            ctx.say(&format!("Deactivating {label}"));
            let r = if cancelled {
                tokio::time::timeout(budget, deactivate)
                    .await
                    .unwrap_or_else(|_| Err(anyhow!("deactivate did not finish in time")))
            } else {
                deactivate.await
            };
            match r {
                Ok(()) => {
                    ctx.event("", "deactivated");
                    ctx.say("Deactivated");
                    Ok(())
                }
                Err(e) => Err(Failure::Cleanup(e)),
            }
        }
    };
    ctx.end_group();
    result
}

/// Whether a deployment may be serving traffic.
pub enum Serving {
    No,
    Environment(String),
    /// The check failed: treated as serving, because a failed check must
    /// not take production down.
    Unknown(String),
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
        // Older APIs without the list: the production flag above decided.
        Err(ApiError::Permanent(_)) => Serving::No,
        Err(e) => Serving::Unknown(e.to_string()),
    }
}

/// Emits a level-tagged message through the reporter.
pub fn annotate(rep: &Mutex<Reporter>, level: Level, msg: &str) {
    rep.lock().unwrap().annotate(level, None, msg);
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
    fn config_encoding_uses_the_deployed_name() {
        let c = json!({"model_name": "file-name", "resources": {"cpu": "1"}});
        let b = encode_config(&c, "override");
        let back: Value =
            serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(b).unwrap())
                .unwrap();
        assert_eq!(back["model_name"], "override");
        assert_eq!(back["resources"]["cpu"], "1");
    }

    #[test]
    fn human_durations() {
        assert_eq!(human(Duration::from_millis(12_900)), "12.9s");
        assert_eq!(human(Duration::from_secs(631)), "10m31s");
        assert_eq!(human(Duration::from_secs(3 * 3600 + 5)), "3h00m05s");
    }
}
