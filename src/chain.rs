//! The chain deploy: generate one truss per chainlet with the real
//! `truss_chains` (an embedded Python helper; chainlet code is Python), push
//! each chainlet natively, create the chain deployment atomically, wait with
//! the CHAIN status sets, `run_remote`, and deactivate the chain deployment.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, anyhow};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::baseten::{Api, ApiError, Team, UploadCredentials, gql_str};
use crate::ci::{PredictStats, StatusEvent};
use crate::config::{Endpoints, Target};
use crate::deploy::{self, Ctx, human};
use crate::git;
use crate::outcome::Failure;
use crate::status::{self, Readiness};

/// Python interpreter override for chain code generation (else `python3`
/// on PATH).
pub const PYTHON_ENV_VAR: &str = "TRUSS_PUSH_PYTHON";
/// The interpreter used when the override is unset.
pub const DEFAULT_PYTHON: &str = "python3";
/// The helper, shipped inside the binary so a release is still one file.
pub const CODEGEN_HELPER: &str = include_str!("chain_codegen.py");
/// The truss version the helper generates chains with; it is passed to the
/// helper on its command line.
pub const PINNED_TRUSS_VERSION: &str = deploy::TRUSS_COMPAT_VERSION;
/// Code generation imports user code and runs ruff per chainlet; a hung
/// import must not hold the job forever.
pub const CODEGEN_TIMEOUT: Duration = Duration::from_secs(600);
/// Chains cannot carry labels; said once, as a warning.
pub const LABELS_IGNORED_WARNING: &str = "labels are not supported for chains by the platform: they were not attached to this chain deployment";

/// One generated chainlet, as the helper describes it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct GeneratedChainlet {
    pub display_name: String,
    pub name: String,
    pub truss_dir: PathBuf,
    pub model_name: String,
    pub is_entrypoint: bool,
}

/// The helper's manifest: entrypoint first, then dependencies.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Manifest {
    pub truss_version: String,
    pub chain_name: String,
    pub chain_root: PathBuf,
    pub chainlets: Vec<GeneratedChainlet>,
}

#[derive(Debug, Deserialize)]
struct HelperError {
    kind: String,
    message: String,
    #[serde(default)]
    traceback: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum HelperAnswer {
    Ok(Manifest),
    Error(HelperError),
}

/// Lines of the helper's stderr shown when it fails without a verdict.
const STDERR_TAIL_LINES: usize = 15;

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Reads what the helper printed into a manifest or a message for people.
pub fn parse_helper_output(stdout: &str, stderr: &str) -> Result<Manifest, String> {
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty());
    let answer = last.and_then(|l| serde_json::from_str::<HelperAnswer>(l).ok());
    let manifest = match answer {
        Some(HelperAnswer::Ok(m)) => m,
        Some(HelperAnswer::Error(e)) => {
            let mut msg = e.message;
            if !e.traceback.is_empty() {
                msg.push_str("\nPython traceback (last lines):\n");
                msg.push_str(&e.traceback.join("\n"));
            }
            return Err(match e.kind.as_str() {
                "import" => format!("the chain file could not be imported: {msg}"),
                "codegen" => format!("chain code generation failed: {msg}"),
                _ => msg,
            });
        }
        None => {
            return Err(format!(
                "the chain code generation helper gave no answer; its last output:\n{}",
                tail(stderr, STDERR_TAIL_LINES)
            ));
        }
    };
    if !manifest.chainlets.first().is_some_and(|c| c.is_entrypoint)
        || manifest
            .chainlets
            .iter()
            .filter(|c| c.is_entrypoint)
            .count()
            != 1
    {
        return Err("the chain code generation helper did not name exactly one entrypoint".into());
    }
    Ok(manifest)
}

/// The interpreter to run: the override when set and non-empty.
pub fn python_program(override_value: Option<&str>) -> String {
    override_value
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or(DEFAULT_PYTHON)
        .to_string()
}

/// Runs the helper on `file`, generating into `gen_dir` (its TMPDIR, so
/// concurrent runs never share `.chains_generated`).
pub async fn generate(
    python: &str,
    file: &Path,
    chain_name: Option<&str>,
    gen_dir: &Path,
) -> Result<Manifest, String> {
    let helper = gen_dir.join("truss_push_chain_codegen.py");
    std::fs::write(&helper, CODEGEN_HELPER)
        .map_err(|e| format!("cannot write the code generation helper: {e}"))?;
    let file = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg("-B")
        .arg(&helper)
        .arg(PINNED_TRUSS_VERSION)
        .arg(&file)
        .arg(chain_name.unwrap_or(""))
        .env("TMPDIR", gen_dir)
        .env("TRUSS_NO_UPDATE_CHECK", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "{python} was not found: chains need Python with truss=={PINNED_TRUSS_VERSION} and ruff installed (pip install truss=={PINNED_TRUSS_VERSION} ruff); put python3 on PATH or set {PYTHON_ENV_VAR} to the interpreter"
        ),
        _ => format!("cannot run {python}: {e}"),
    })?;
    let out = tokio::time::timeout(CODEGEN_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| {
            format!(
                "chain code generation did not finish within {}",
                human(CODEGEN_TIMEOUT)
            )
        })?
        .map_err(|e| format!("running {python}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    parse_helper_output(&stdout, &stderr)
}

/// A chain as `chains(...)` lists it.
#[derive(Clone, Debug, Deserialize)]
pub struct ChainRef {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub team: Option<crate::baseten::TeamRef>,
}

/// Chains visible to the key, in one team or all.
pub async fn chains(api: &Api, team_id: Option<&str>) -> anyhow::Result<Vec<ChainRef>> {
    let arg = match team_id {
        Some(t) => format!("team_id: {}", gql_str(t)),
        None => "all: true".to_string(),
    };
    let q = format!("query {{ chains({arg}) {{ id name team {{ id name }} }} }}");
    let d = api.query("listing chains", &q, None).await?;
    serde_json::from_value(d["chains"].clone()).context("reading the chains list")
}

pub async fn chain_upload_credentials(api: &Api) -> anyhow::Result<UploadCredentials> {
    let d = api
        .query(
            "getting chain upload credentials",
            "query { chain_s3_upload_credentials { s3_bucket s3_key aws_access_key_id aws_secret_access_key aws_session_token } }",
            None,
        )
        .await?;
    serde_json::from_value(d["chain_s3_upload_credentials"].clone())
        .context("reading chain upload credentials")
}

/// One chainlet's part of `deploy_chain_atomic` (`ChainletDataAtomic`).
#[derive(Clone, Debug)]
pub struct ChainletData {
    pub display_name: String,
    pub model_name: String,
    pub s3_key: String,
    pub encoded_config: String,
    pub version_name: Option<String>,
}

/// Everything `deploy_chain_atomic` takes.
#[derive(Clone, Debug)]
pub struct DeployChainRequest<'a> {
    pub existing_chain_id: Option<&'a str>,
    pub chain_name: &'a str,
    pub environment: Option<&'a str>,
    pub source_s3_key: Option<&'a str>,
    pub team_id: Option<&'a str>,
    pub deployment_name: Option<&'a str>,
    pub entrypoint: &'a ChainletData,
    pub dependencies: &'a [ChainletData],
}

fn chainlet_literal(c: &ChainletData) -> String {
    let mut oracle = vec![
        format!("model_name: {}", gql_str(&c.model_name)),
        format!("s3_key: {}", gql_str(&c.s3_key)),
        format!("encoded_config_str: {}", gql_str(&c.encoded_config)),
        "semver_bump: \"MINOR\"".to_string(),
    ];
    if let Some(v) = &c.version_name {
        oracle.push(format!("version_name: {}", gql_str(v)));
    }
    format!(
        "{{ name: {}, oracle: {{ {} }} }}",
        gql_str(&c.display_name),
        oracle.join(", ")
    )
}

/// The `deploy_chain_atomic` document; every string is a GraphQL literal.
pub fn deploy_chain_document(r: &DeployChainRequest<'_>) -> String {
    let mut args = Vec::new();
    match r.existing_chain_id {
        Some(id) => args.push(format!("chain_id: {}", gql_str(id))),
        None => args.push(format!("chain_name: {}", gql_str(r.chain_name))),
    }
    if let Some(env) = r.environment {
        args.push(format!("environment: {}", gql_str(env)));
    }
    if let Some(k) = r.source_s3_key {
        args.push(format!("original_source_artifact_s3_key: {}", gql_str(k)));
    }
    if let Some(t) = r.team_id {
        args.push(format!("team_id: {}", gql_str(t)));
    }
    args.push("is_draft: false".into());
    if let Some(n) = r.deployment_name {
        args.push(format!("deployment_name: {}", gql_str(n)));
    }
    args.push(format!("entrypoint: {}", chainlet_literal(r.entrypoint)));
    args.push(format!(
        "dependencies: [{}]",
        r.dependencies
            .iter()
            .map(chainlet_literal)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    args.push("truss_user_env: $trussUserEnv".into());
    format!(
        "mutation ($trussUserEnv: String) {{\n  deploy_chain_atomic(\n    {}\n  ) {{\n    chain_deployment {{ id chain {{ id hostname }} }}\n  }}\n}}",
        args.join("\n    ")
    )
}

/// What `deploy_chain_atomic` returns.
#[derive(Clone, Debug)]
pub struct ChainDeployed {
    pub chain_deployment_id: String,
    pub chain_id: String,
    pub hostname: Option<String>,
}

/// Sends `deploy_chain_atomic` once: a retry after an ambiguous failure
/// could create a second chain deployment.
pub async fn deploy_chain_atomic(
    api: &Api,
    r: &DeployChainRequest<'_>,
    truss_user_env: &str,
) -> anyhow::Result<ChainDeployed> {
    let what = "creating the chain deployment";
    let d = api
        .graphql_once(
            what,
            &deploy_chain_document(r),
            Some(json!({ "trussUserEnv": truss_user_env })),
        )
        .await
        .map_err(|e| anyhow!(e))?;
    let cd = &d["deploy_chain_atomic"]["chain_deployment"];
    let field = |v: &Value, name: &str| {
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("{what}: the answer has no {name}"))
    };
    Ok(ChainDeployed {
        chain_deployment_id: field(&cd["id"], "chain_deployment.id")?,
        chain_id: field(&cd["chain"]["id"], "chain_deployment.chain.id")?,
        hostname: cd["chain"]["hostname"].as_str().map(str::to_string),
    })
}

/// One chainlet as the `chain_deployment` query reports it; `status` is the
/// raw internal status.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainletStatus {
    pub id: String,
    pub name: String,
    pub is_entrypoint: bool,
    pub status: String,
}

/// One status read of a chain deployment (GraphQL, raw statuses).
pub async fn chain_deployment_status(
    api: &Api,
    chain_deployment_id: &str,
) -> Result<Vec<ChainletStatus>, ApiError> {
    let q = format!(
        "query {{ chain_deployment(id: {}) {{ chainlets {{ id name is_entrypoint oracle_version {{ id current_model_deployment_status {{ status }} }} }} chain {{ id }} }} }}",
        gql_str(chain_deployment_id)
    );
    let d = api
        .graphql_once("reading the chain deployment status", &q, None)
        .await?;
    Ok(read_chainlets(&d["chain_deployment"]["chainlets"]))
}

/// Reads the chainlet list leniently: a missing status is an empty one
/// (in progress), never a crash.
pub fn read_chainlets(v: &Value) -> Vec<ChainletStatus> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|c| ChainletStatus {
                    id: c["id"].as_str().unwrap_or_default().to_string(),
                    name: c["name"].as_str().unwrap_or_default().to_string(),
                    is_entrypoint: c["is_entrypoint"].as_bool().unwrap_or(false),
                    status: c
                        .pointer("/oracle_version/current_model_deployment_status/status")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A chain deployment's state from its chainlets' raw statuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainVerdict {
    Ready,
    /// The first failed chainlet and its status.
    Failed {
        chainlet: String,
        status: String,
    },
    InProgress,
}

/// All chainlets ready → ready; any failed → failed at once; an empty list
/// is not ready (hazard H5).
pub fn chain_verdict(chainlets: &[ChainletStatus]) -> ChainVerdict {
    if let Some(f) = chainlets
        .iter()
        .find(|c| status::classify_chainlet(&c.status) == Readiness::Failed)
    {
        return ChainVerdict::Failed {
            chainlet: f.name.clone(),
            status: f.status.clone(),
        };
    }
    if !chainlets.is_empty()
        && chainlets
            .iter()
            .all(|c| status::classify_chainlet(&c.status) == Readiness::Ready)
    {
        ChainVerdict::Ready
    } else {
        ChainVerdict::InProgress
    }
}

/// The status reported as `last-status`: the failed chainlet's, else the
/// first chainlet not yet ready, else the entrypoint's.
pub fn representative_status(chainlets: &[ChainletStatus]) -> Option<String> {
    let by = |r: Readiness| {
        chainlets
            .iter()
            .find(|c| status::classify_chainlet(&c.status) == r)
    };
    by(Readiness::Failed)
        .or_else(|| by(Readiness::InProgress))
        .or_else(|| chainlets.iter().find(|c| c.is_entrypoint))
        .or(chainlets.first())
        .map(|c| c.status.clone())
}

/// The app page with one chainlet's logs.
pub fn chainlet_logs_url(
    endpoints: &Endpoints,
    chain_id: &str,
    chain_deployment_id: &str,
    chainlet_id: &str,
) -> String {
    format!(
        "{}/chains/{chain_id}/logs/{chain_deployment_id}/{chainlet_id}",
        endpoints.app.as_str().trim_end_matches('/')
    )
}

/// The chain's overview page in the app.
pub fn chain_page(endpoints: &Endpoints, chain_id: &str) -> String {
    format!(
        "{}/chains/{chain_id}/overview",
        endpoints.app.as_str().trim_end_matches('/')
    )
}

/// `run_remote` on the regional environment host when asked, else on this
/// very chain deployment.
pub fn run_remote_url(
    endpoints: &Endpoints,
    chain_id: &str,
    chain_deployment_id: &str,
    environment: Option<&str>,
    regional: bool,
) -> String {
    match (environment, regional) {
        (Some(env), true) => format!(
            "{}/run_remote",
            endpoints.inference_base("chain", &format!("{chain_id}-{env}"))
        ),
        _ => format!(
            "{}/deployment/{chain_deployment_id}/run_remote",
            endpoints.inference_base("chain", chain_id)
        ),
    }
}

fn say(ctx: &Ctx<'_>, msg: &str) {
    ctx.rep.lock().unwrap().line(msg);
}

fn warn(ctx: &Ctx<'_>, msg: &str) {
    ctx.rep.lock().unwrap().warning(msg);
}

fn event(ctx: &Ctx<'_>, status: &str, what: &str) {
    ctx.state.lock().unwrap().history.push(StatusEvent {
        at: SystemTime::now(),
        elapsed: ctx.started.elapsed(),
        status: status.to_string(),
        event: what.to_string(),
    });
}

/// Validates, packages and uploads one generated chainlet truss.
async fn push_chainlet(
    ctx: &Ctx<'_>,
    c: &GeneratedChainlet,
    user_env: &str,
) -> Result<ChainletData, Failure> {
    let fail = |e: anyhow::Error| Failure::Deploy(e);
    let config_path = c.truss_dir.join("config.yaml");
    let raw = std::fs::read(&config_path)
        .with_context(|| format!("reading {}", config_path.display()))
        .map_err(fail)?;
    let config: Value = serde_yaml::from_slice(&raw)
        .with_context(|| format!("parsing {}", config_path.display()))
        .map_err(fail)?;
    let encoded_config = deploy::encode_config(&config, &c.model_name);
    deploy::validate_config(
        ctx,
        &encoded_config,
        user_env,
        &format!("chainlet {}", c.display_name),
    )
    .await?;
    let creds = ctx.api.model_upload_credentials().await.map_err(fail)?;
    deploy::package_and_upload(
        ctx,
        &c.truss_dir,
        &creds,
        &format!("chainlet {}", c.display_name),
    )
    .await?;
    Ok(ChainletData {
        display_name: c.display_name.clone(),
        model_name: c.model_name.clone(),
        s3_key: creds.s3_key,
        encoded_config,
        version_name: Some(ctx.cfg.deployment_name.clone()),
    })
}

/// Picks the team for a chain, like models do: named, only, owning, default.
async fn chain_team(ctx: &Ctx<'_>, name: &str) -> Result<Option<Team>, Failure> {
    deploy::pick_team(ctx, async || {
        let all = chains(ctx.api, None).await?;
        Ok(all
            .into_iter()
            .filter(|c| c.name == name)
            .filter_map(|c| c.team.map(|t| t.id))
            .collect())
    })
    .await
}

/// Generate, push, create, wait and predict a chain. Updates `ctx.state`
/// (chain id, chain deployment id; the model id stays empty).
pub async fn deploy_chain(ctx: &Ctx<'_>) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let Target::Chain { file } = &cfg.target else {
        unreachable!("deploy_chain is only called for chains");
    };
    let fail = |e: anyhow::Error| Failure::Deploy(e);
    let group = |t: &str| ctx.rep.lock().unwrap().group(t);
    let end_group = || ctx.rep.lock().unwrap().end_group();

    group(&format!("Generate chainlets from {}", file.display()));
    let gen_dir = tempfile::tempdir()
        .context("creating a temporary directory")
        .map_err(fail)?;
    let python = python_program(std::env::var(PYTHON_ENV_VAR).ok().as_deref());
    let requested = Some(cfg.model_name.as_str()).filter(|n| !n.is_empty());
    let generated = generate(&python, file, requested, gen_dir.path()).await;
    let manifest = match generated {
        Ok(m) => m,
        Err(msg) => {
            end_group();
            return Err(Failure::Deploy(anyhow!(msg)));
        }
    };
    let name = manifest.chain_name.clone();
    ctx.state.lock().unwrap().model_name = name.clone();
    say(
        ctx,
        &format!(
            "Chain {name:?}: {} chainlets ({}), generated with truss {}",
            manifest.chainlets.len(),
            manifest
                .chainlets
                .iter()
                .map(|c| c.display_name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            manifest.truss_version
        ),
    );
    end_group();

    group(&format!("Deploy chain {name}"));
    if cfg.labels.is_some() {
        warn(ctx, LABELS_IGNORED_WARNING);
    }
    let team = chain_team(ctx, &name).await?;
    if let Some(t) = &team {
        say(ctx, &format!("Team: {}", t.name));
    }
    let git_info = if cfg.include_git_info {
        git::collect_git_info(&manifest.chain_root, cfg.ci_revision.as_ref())
    } else {
        None
    };
    let user_env = deploy::truss_user_env(git_info.as_ref());
    let mut pushed = Vec::with_capacity(manifest.chainlets.len());
    for c in &manifest.chainlets {
        pushed.push(push_chainlet(ctx, c, &user_env).await?);
    }
    let creds = chain_upload_credentials(ctx.api).await.map_err(fail)?;
    deploy::package_and_upload(ctx, &manifest.chain_root, &creds, "the chain source").await?;
    drop(gen_dir);

    let existing = chains(ctx.api, team.as_ref().map(|t| t.id.as_str()))
        .await
        .map_err(fail)?
        .into_iter()
        .find(|c| c.name == name);
    match &existing {
        Some(c) => say(
            ctx,
            &format!(
                "Chain {name:?} exists ({}): creating a new deployment",
                c.id
            ),
        ),
        None => say(ctx, &format!("Chain {name:?} is new: creating it")),
    }
    let (entrypoint, dependencies) = pushed
        .split_first()
        .expect("the manifest has an entrypoint");
    let deployed = deploy_chain_atomic(
        ctx.api,
        &DeployChainRequest {
            existing_chain_id: existing.as_ref().map(|c| c.id.as_str()),
            chain_name: &name,
            environment: cfg.environment.as_deref(),
            source_s3_key: Some(&creds.s3_key),
            team_id: team.as_ref().map(|t| t.id.as_str()),
            deployment_name: Some(&cfg.deployment_name),
            entrypoint,
            dependencies,
        },
        &user_env,
    )
    .await
    .map_err(fail)?;
    {
        let mut st = ctx.state.lock().unwrap();
        st.chain_id = Some(deployed.chain_id.clone());
        st.deployment_id = Some(deployed.chain_deployment_id.clone());
        st.model_id = None;
    }
    event(ctx, "", "chain deployment created");
    say(
        ctx,
        &format!(
            "Created chain deployment {} ({}) of chain {}",
            deployed.chain_deployment_id, cfg.deployment_name, deployed.chain_id
        ),
    );
    say(
        ctx,
        &format!(
            "Chain page: {}",
            chain_page(&cfg.endpoints, &deployed.chain_id)
        ),
    );
    end_group();

    group(&format!(
        "Wait for all chainlets to be ready (timeout: {})",
        human(cfg.wait_timeout)
    ));
    let waited = wait_chain(ctx, &deployed.chain_id, &deployed.chain_deployment_id).await;
    end_group();
    waited?;
    let ready_after = ctx.started.elapsed();
    ctx.state.lock().unwrap().deploy_time = Some(ready_after);
    say(ctx, &format!("Ready after {}", human(ready_after)));

    if let Some(payload) = &cfg.predict_payload {
        group("Predict (run_remote)");
        let r = predict(
            ctx,
            &deployed.chain_id,
            &deployed.chain_deployment_id,
            payload,
        )
        .await;
        end_group();
        r?;
    } else {
        say(ctx, "No predict payload configured, skipping predict check");
    }
    Ok(())
}

/// Polls the chain deployment until every chainlet is ready, one failed,
/// or the deadline passes.
async fn wait_chain(
    ctx: &Ctx<'_>,
    chain_id: &str,
    chain_deployment_id: &str,
) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let deadline = Instant::now() + cfg.wait_timeout;
    let mut seen: std::collections::BTreeMap<String, String> = Default::default();
    let mut logs_shown: std::collections::BTreeSet<String> = Default::default();
    let mut warned_unknown: std::collections::BTreeSet<String> = Default::default();
    let mut promo = deploy::PromotionTrack::default();
    deploy::poll_until(ctx, deadline, "the chain", async || {
        let chainlets = chain_deployment_status(ctx.api, chain_deployment_id).await?;
        for c in &chainlets {
            let key = if c.id.is_empty() { &c.name } else { &c.id };
            if seen.get(key) != Some(&c.status) {
                let class = status::classify_chainlet(&c.status);
                let shown = if c.status.is_empty() { "(none)" } else { &c.status };
                say(
                    ctx,
                    &format!(
                        "chainlet {} status {shown} ({}) after {}",
                        c.name,
                        class.as_str(),
                        human(ctx.started.elapsed())
                    ),
                );
                event(ctx, &c.status, &format!("{}: {}", c.name, class.as_str()));
                seen.insert(key.clone(), c.status.clone());
                if !c.status.is_empty()
                    && !status::is_known_chainlet_status(&c.status)
                    && warned_unknown.insert(c.status.clone())
                {
                    warn(
                        ctx,
                        &format!(
                            "unknown chainlet status {:?}: treating it as in progress and polling on",
                            c.status
                        ),
                    );
                }
            }
            if !c.id.is_empty() && logs_shown.insert(c.id.clone()) {
                let url = chainlet_logs_url(&cfg.endpoints, chain_id, chain_deployment_id, &c.id);
                say(ctx, &format!("  logs of {}: {url}", c.name));
            }
        }
        ctx.state.lock().unwrap().last_status = representative_status(&chainlets);
        match chain_verdict(&chainlets) {
            ChainVerdict::Ready => match &cfg.environment {
                None => Ok(deploy::Poll::Ready),
                // Ready chainlets do not mean the environment serves this
                // chain deployment yet: wait for the promotion.
                Some(env) => {
                    let environment = ctx.api.chain_environment_json(chain_id, env).await;
                    deploy::check_promotion(ctx, &mut promo, chain_deployment_id, env, environment)
                }
            },
            ChainVerdict::Failed { chainlet, status } => {
                let logs = chainlets
                    .iter()
                    .find(|c| c.name == chainlet && !c.id.is_empty())
                    .map(|c| {
                        let url = chainlet_logs_url(&cfg.endpoints, chain_id, chain_deployment_id, &c.id);
                        format!("; see its logs: {url}")
                    })
                    .unwrap_or_default();
                Ok(deploy::Poll::Failed(Failure::Deploy(anyhow!(
                    "chainlet {chainlet} failed with status {status}{logs}"
                ))))
            }
            ChainVerdict::InProgress => Ok(deploy::Poll::Wait),
        }
    })
    .await
}

/// The smoke test: one `run_remote` call, read under one deadline.
async fn predict(
    ctx: &Ctx<'_>,
    chain_id: &str,
    chain_deployment_id: &str,
    payload: &Value,
) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let url = run_remote_url(
        &cfg.endpoints,
        chain_id,
        chain_deployment_id,
        cfg.environment.as_deref(),
        cfg.regional_environment,
    );
    let url = reqwest::Url::parse(&url)
        .map_err(|e| Failure::Predict(anyhow!("bad run_remote URL {url}: {e}")))?;
    say(ctx, &format!("POST {url}"));
    let started = Instant::now();
    let work = async {
        let resp = ctx
            .api
            .post_inference(url.clone(), payload)
            .await
            .map_err(|e| anyhow!(e))?;
        let status = resp.status();
        let body = resp
            .text()
            .await
            .context("reading the run_remote response")?;
        if !status.is_success() {
            let head: String = body.chars().take(500).collect();
            anyhow::bail!("run_remote answered HTTP {status}: {head}");
        }
        Ok(body)
    };
    match tokio::time::timeout(cfg.predict_timeout, work).await {
        Err(_) => Err(Failure::Predict(anyhow!(
            "run_remote did not finish within predict-timeout ({})",
            human(cfg.predict_timeout)
        ))),
        Ok(Err(e)) => Err(Failure::Predict(e)),
        Ok(Ok(body)) => {
            let total = started.elapsed().as_secs_f64();
            let shown: String = body
                .chars()
                .take(deploy::PREDICT_RESPONSE_MAX_CHARS)
                .collect();
            say(ctx, &format!("Predict OK in {total:.2}s"));
            say(
                ctx,
                &format!(
                    "  response: {}",
                    shown.chars().take(500).collect::<String>()
                ),
            );
            let mut st = ctx.state.lock().unwrap();
            st.predict_response = Some(shown);
            st.predict = Some(PredictStats {
                total_secs: total,
                stream: None,
            });
            Ok(())
        }
    }
}

/// The environment a chain deployment serves, if the platform says so.
async fn serving_environment(
    ctx: &Ctx<'_>,
    chain_id: &str,
    chain_deployment_id: &str,
) -> deploy::Serving {
    match ctx
        .api
        .chain_deployment(chain_id, chain_deployment_id)
        .await
    {
        Ok(v) => match v["environment"].as_str().filter(|s| !s.is_empty()) {
            Some(env) => deploy::Serving::Environment(env.to_string()),
            None => deploy::Serving::No,
        },
        Err(e) => deploy::Serving::Unknown(e.to_string()),
    }
}

/// Cleanup of the chain deployment, by the rules models follow.
pub async fn cleanup_chain(ctx: &Ctx<'_>, cancelled: bool) -> Result<(), Failure> {
    let (chain_id, deployment_id) = {
        let st = ctx.state.lock().unwrap();
        match (&st.chain_id, &st.deployment_id) {
            (Some(c), Some(d)) => (c.clone(), d.clone()),
            _ => return Ok(()),
        }
    };
    deploy::cleanup_deployment(
        ctx,
        cancelled,
        &format!("chain deployment {deployment_id}"),
        serving_environment(ctx, &chain_id, &deployment_id),
        ctx.api.deactivate_chain(&chain_id, &deployment_id),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cl(name: &str, status: &str) -> ChainletStatus {
        ChainletStatus {
            id: format!("id-{name}"),
            name: name.into(),
            is_entrypoint: name == "Entry",
            status: status.into(),
        }
    }

    #[test]
    fn chain_verdicts() {
        let failed = |c: &str, s: &str| ChainVerdict::Failed {
            chainlet: c.into(),
            status: s.into(),
        };
        for (chainlets, want) in [
            (vec![], ChainVerdict::InProgress),
            (
                vec![cl("Entry", "MODEL_READY"), cl("Dep", "MODEL_READY")],
                ChainVerdict::Ready,
            ),
            (
                vec![cl("Entry", "SCALED_TO_ZERO"), cl("Dep", "MODEL_READY")],
                ChainVerdict::Ready,
            ),
            (
                vec![
                    cl("Entry", "BUILDING_MODEL"),
                    cl("Dep", "MODEL_DEPLOY_FAILED"),
                ],
                failed("Dep", "MODEL_DEPLOY_FAILED"),
            ),
            (
                vec![
                    cl("Entry", "MODEL_READY"),
                    cl("Dep", "BUILDING_MODEL_STOPPED"),
                ],
                failed("Dep", "BUILDING_MODEL_STOPPED"),
            ),
            (
                vec![cl("Entry", "MODEL_DNE_ERROR")],
                failed("Entry", "MODEL_DNE_ERROR"),
            ),
            (
                vec![cl("Entry", "MODEL_READY"), cl("Dep", "SCALING_FROM_ZERO")],
                ChainVerdict::InProgress,
            ),
            (
                vec![
                    cl("Entry", "MODEL_READY"),
                    cl("Dep", "RESHARDING_SOMETHING"),
                ],
                ChainVerdict::InProgress,
            ),
            (
                vec![cl("Entry", "MODEL_READY"), cl("Dep", "")],
                ChainVerdict::InProgress,
            ),
        ] {
            assert_eq!(chain_verdict(&chainlets), want, "{chainlets:?}");
        }
    }

    #[test]
    fn last_status_names_the_chainlet_that_matters() {
        for (chainlets, want) in [
            (vec![], None),
            (
                vec![cl("Entry", "MODEL_READY"), cl("Dep", "BUILDING_MODEL")],
                Some("BUILDING_MODEL"),
            ),
            (
                vec![
                    cl("Entry", "BUILDING_MODEL"),
                    cl("Dep", "MODEL_DEPLOY_FAILED"),
                ],
                Some("MODEL_DEPLOY_FAILED"),
            ),
            (
                vec![cl("Dep", "SCALED_TO_ZERO"), cl("Entry", "MODEL_READY")],
                Some("MODEL_READY"),
            ),
        ] {
            assert_eq!(
                representative_status(&chainlets).as_deref(),
                want,
                "{chainlets:?}"
            );
        }
    }

    #[test]
    fn chainlets_are_read_leniently() {
        let v = json!([
            {"id": "c1", "name": "Entry", "is_entrypoint": true,
             "oracle_version": {"current_model_deployment_status": {"status": " MODEL_READY "}}},
            {"id": "c2", "name": "Dep", "oracle_version": null},
        ]);
        let got = read_chainlets(&v);
        assert_eq!(got[0].status, "MODEL_READY");
        assert!(got[0].is_entrypoint);
        assert_eq!(got[1].status, "");
        assert!(!got[1].is_entrypoint);
        assert!(read_chainlets(&Value::Null).is_empty());
    }

    fn data(name: &str) -> ChainletData {
        ChainletData {
            display_name: name.into(),
            model_name: format!("{name}-0123abcd"),
            s3_key: format!("models/{name}.tgz"),
            encoded_config: "e30=".into(),
            version_name: Some("v\"1".into()),
        }
    }

    #[test]
    fn deploy_document_escapes_and_picks_chain_id_or_name() {
        let (e, d) = (data("Entry"), [data("Dep")]);
        let req = |id: Option<&'static str>| DeployChainRequest {
            existing_chain_id: id,
            chain_name: "my \"chain\"\n} evil {",
            environment: Some("stag\"ing"),
            source_s3_key: Some("chains/src.tgz"),
            team_id: Some("team1"),
            deployment_name: Some("ci-1"),
            entrypoint: &e,
            dependencies: &d,
        };
        let new = deploy_chain_document(&req(None));
        assert!(
            new.contains(r#"chain_name: "my \"chain\"\n} evil {""#),
            "{new}"
        );
        assert!(!new.contains("chain_id"), "{new}");
        assert!(new.contains(r#"environment: "stag\"ing""#), "{new}");
        assert!(new.contains(r#"version_name: "v\"1""#), "{new}");
        assert!(new.contains(r#"dependencies: [{ name: "Dep""#), "{new}");
        assert!(new.contains("truss_user_env: $trussUserEnv"), "{new}");
        let existing = deploy_chain_document(&req(Some("c\"1")));
        assert!(existing.contains(r#"chain_id: "c\"1""#), "{existing}");
        assert!(!existing.contains("chain_name"), "{existing}");
        let none = deploy_chain_document(&DeployChainRequest {
            dependencies: &[],
            ..req(None)
        });
        assert!(none.contains("dependencies: []"), "{none}");
    }

    #[test]
    fn helper_answers() {
        let ok = r#"{"ok": {"truss_version": "0.18.36", "chain_name": "c", "chain_root": "/r",
            "chainlets": [{"display_name": "E", "name": "E", "truss_dir": "/t/E", "model_name": "E-1", "is_entrypoint": true}]}}"#
            .replace('\n', " ");
        let m = parse_helper_output(&format!("noise\n{ok}\n"), "").unwrap();
        assert_eq!(m.chain_name, "c");
        assert_eq!(m.chainlets[0].model_name, "E-1");

        let import = r#"{"error": {"kind": "import", "message": "importing x.py failed: ModuleNotFoundError: No module named 'nope'", "traceback": ["  File \"x.py\", line 5", "ModuleNotFoundError: No module named 'nope'"]}}"#;
        let e = parse_helper_output(import, "").unwrap_err();
        assert!(e.starts_with("the chain file could not be imported"), "{e}");
        assert!(
            e.contains("traceback (last lines):\n  File \"x.py\", line 5"),
            "{e}"
        );

        let ver = r#"{"error": {"kind": "truss_version", "message": "truss 0.17.1 is installed"}}"#;
        assert_eq!(
            parse_helper_output(ver, "").unwrap_err(),
            "truss 0.17.1 is installed"
        );

        let crash = parse_helper_output("", "line1\nSegfault\n").unwrap_err();
        assert!(crash.ends_with("line1\nSegfault"), "{crash}");

        let no_entry = ok.replace("true", "false");
        assert!(parse_helper_output(&no_entry, "").is_err());
    }

    #[test]
    fn python_override() {
        for (v, want) in [
            (None, "python3"),
            (Some(""), "python3"),
            (Some("  "), "python3"),
            (Some("/opt/py/bin/python"), "/opt/py/bin/python"),
        ] {
            assert_eq!(python_program(v), want);
        }
    }

    #[test]
    fn urls() {
        let ep = Endpoints {
            app: "https://app.example/".parse().unwrap(),
            api: "https://api.example".parse().unwrap(),
            inference: "https://{prefix}-{id}.api.example".into(),
            s3: None,
        };
        assert_eq!(
            run_remote_url(&ep, "c1", "cd1", None, false),
            "https://chain-c1.api.example/deployment/cd1/run_remote"
        );
        assert_eq!(
            run_remote_url(&ep, "c1", "cd1", Some("prod"), false),
            "https://chain-c1.api.example/deployment/cd1/run_remote"
        );
        assert_eq!(
            run_remote_url(&ep, "c1", "cd1", Some("prod"), true),
            "https://chain-c1-prod.api.example/run_remote"
        );
        assert_eq!(
            chainlet_logs_url(&ep, "c1", "cd1", "cl1"),
            "https://app.example/chains/c1/logs/cd1/cl1"
        );
    }

    #[tokio::test]
    async fn a_missing_python_is_named() {
        let d = tempfile::tempdir().unwrap();
        let e = generate("/nonexistent/python3", Path::new("x.py"), None, d.path())
            .await
            .unwrap_err();
        assert!(e.contains("was not found"), "{e}");
        assert!(e.contains(PYTHON_ENV_VAR), "{e}");
    }
}
