//! The chain deploy: generate one truss per chainlet with the real
//! `truss_chains` (`codegen`), push each chainlet, create the chain
//! deployment atomically, wait with the CHAIN status sets, `run_remote`, and
//! the chain's cleanup.

mod codegen;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, anyhow};
use serde_json::Value;

use crate::baseten::{
    Api, ApiError, ChainDeployed, ChainletData, ChainletStatus, DeployChainRequest, Team,
};
use crate::budget::Phase;
use crate::flow::{
    self, Ctx, ExistingDeployments, InFlight, Poll, PromotionTrack, Serving, deploy_error,
    encode_config, human,
};
use crate::git;
use crate::kind::Kind;
use crate::outcome::Failure;
use crate::status::{self, Readiness};

use codegen::{GeneratedChainlet, generate, python_program};

/// Chains cannot carry labels; said once, as a warning.
const LABELS_IGNORED_WARNING: &str = "labels are not supported for chains by the platform: they were not attached to this chain deployment";

/// A chain deployment's state from its chainlets' raw statuses.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ChainVerdict {
    Ready,
    /// The first failed chainlet and its status.
    Failed {
        chainlet: String,
        status: String,
    },
    InProgress,
}

/// All chainlets ready → ready; any failed → failed at once; an empty list
/// is not ready (a chain deployment lists its chainlets only once the
/// platform has created them).
fn chain_verdict(chainlets: &[ChainletStatus]) -> ChainVerdict {
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
fn representative_status(chainlets: &[ChainletStatus]) -> Option<String> {
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

/// Reads a generated chainlet's config.yaml.
fn chainlet_config(c: &GeneratedChainlet) -> Result<Value, Failure> {
    let path = c.truss_dir.join("config.yaml");
    let raw = std::fs::read(&path)
        .with_context(|| format!("reading {}", path.display()))
        .map_err(Failure::Deploy)?;
    serde_yaml::from_slice(&raw)
        .with_context(|| format!("parsing {}", path.display()))
        .map_err(Failure::Deploy)
}

/// Validates, packages and uploads one generated chainlet truss.
async fn push_chainlet(
    ctx: &Ctx<'_>,
    c: &GeneratedChainlet,
    config: &Value,
    user_env: &str,
) -> Result<ChainletData, Failure> {
    let encoded_config = encode_config(config);
    let label = format!("chainlet {}", c.display_name);
    flow::validate_config(ctx, &encoded_config, user_env, &label).await?;
    let creds = ctx
        .api
        .model_upload_credentials()
        .await
        .map_err(deploy_error)?;
    flow::package_and_upload(ctx, &c.truss_dir, &creds, &label, false).await?;
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
    flow::pick_team(ctx, async || {
        let all = ctx.api.chains(None).await?;
        Ok(all
            .into_iter()
            .filter(|c| c.name == name)
            .filter_map(|c| c.team.map(|t| t.id))
            .collect())
    })
    .await
}

/// Generate, push, create, wait and predict the chain in `file`. Updates
/// `ctx.state` (chain id, chain deployment id; the model id stays empty).
pub(crate) async fn deploy(ctx: &Ctx<'_>, file: &Path) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let fail = |e: anyhow::Error| Failure::Deploy(e);

    ctx.group(&format!("Generate chainlets from {}", file.display()));
    #[expect(
        clippy::disallowed_methods,
        reason = "the directory the chain helper generates its trusses in, removed with the run"
    )]
    let gen_dir = tempfile::tempdir()
        .context("creating a temporary directory")
        .map_err(fail)?;
    let python = python_program(cfg.chain_python.as_deref());
    let requested = Some(cfg.model_name.as_str()).filter(|n| !n.is_empty());
    let generated = ctx.within_deploy_budget("chain code generation", async {
        generate(&python, file, requested, gen_dir.path())
            .await
            .map_err(|msg| Failure::Deploy(anyhow!(msg)))
    });
    let manifest = match generated.await {
        Ok(m) => m,
        Err(f) => {
            ctx.end_group();
            return Err(f);
        }
    };
    let name = manifest.chain_name.clone();
    ctx.state.lock().unwrap().model_name = name.clone();
    ctx.say(&format!(
        "Chain {name:?}: {} chainlets ({}), generated with truss {}",
        manifest.chainlets.len(),
        manifest
            .chainlets
            .iter()
            .map(|c| c.display_name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        manifest.truss_version
    ));
    ctx.end_group();

    ctx.group(&format!("Deploy chain {name}"));
    if cfg.labels.is_some() {
        ctx.warn(LABELS_IGNORED_WARNING);
    }
    let team = chain_team(ctx, &name).await?;
    let git_info = if cfg.include_git_info {
        git::collect_git_info(&manifest.chain_root, cfg.ci_revision.as_ref())
    } else {
        None
    };
    let user_env = flow::truss_user_env(git_info.as_ref());
    let configs = manifest
        .chainlets
        .iter()
        .map(chainlet_config)
        .collect::<Result<Vec<_>, _>>()?;
    let wanted = configs.iter().flat_map(flow::secret_names).collect();
    flow::preflight_secrets(ctx, team.as_ref(), &wanted);
    let mut pushed = Vec::with_capacity(manifest.chainlets.len());
    for (c, config) in manifest.chainlets.iter().zip(&configs) {
        pushed.push(push_chainlet(ctx, c, config, &user_env).await?);
    }
    let creds = ctx
        .api
        .chain_upload_credentials()
        .await
        .map_err(deploy_error)?;
    flow::package_and_upload(ctx, &manifest.chain_root, &creds, "the chain source", false).await?;
    drop(gen_dir);
    // The secrets check answered by now, most likely: said here if so,
    // else by the report.
    crate::flow::inform::tell_finished(ctx);

    let chains = ctx
        .api
        .chains(team.as_ref().map(|t| t.id.as_str()))
        .await
        .map_err(deploy_error)?;
    let existing = flow::existing(ctx, "Chain", &name, chains);
    flow::check_gate_target(ctx, Kind::Chain, existing.as_ref().map(|c| c.id.as_str())).await?;
    let (entrypoint, dependencies) = pushed
        .split_first()
        .expect("the manifest has an entrypoint");
    // The chain's deployments before this one, so that a create whose answer
    // is lost can tell its own deployment from earlier ones.
    let list = async |api: &Api, chain_id: &str| api.chain_deployment_ids(chain_id).await;
    let before =
        ExistingDeployments::take(ctx.api, existing.as_ref().map(|c| c.id.as_str()), &list).await;
    let request = DeployChainRequest {
        existing_chain_id: existing.as_ref().map(|c| c.id.as_str()),
        chain_name: &name,
        environment: cfg.create_environment(),
        source_s3_key: Some(&creds.s3_key),
        team_id: team.as_ref().map(|t| t.id.as_str()),
        deployment_name: Some(&cfg.deployment_name),
        entrypoint,
        dependencies,
    };
    let check = match &existing {
        Some(c) => format!(
            "the deployments of chain {name:?} ({})",
            cfg.endpoints.chain_page(&c.id)
        ),
        None => format!("whether a chain {name:?} now exists in your workspace"),
    };
    let in_flight = InFlight {
        before,
        name: name.clone(),
        team_id: team.as_ref().map(|t| t.id.clone()),
        check,
        entrypoint: Some(entrypoint.display_name.clone()),
        run: None,
    };
    let create = NewChainDeployment {
        request: &request,
        user_env: &user_env,
        lookup: in_flight.clone(),
    };
    let deployed = flow::create_once(ctx, "the chain deployment", in_flight, &create).await?;
    let (chain_id, chain_deployment_id) = (&deployed.chain_id, &deployed.chain_deployment_id);
    {
        let mut st = ctx.state.lock().unwrap();
        st.chain_id = Some(chain_id.clone());
        st.deployment_id = Some(chain_deployment_id.clone());
        st.model_id = None;
        st.environment_url = cfg.environment.as_deref().map(|env| {
            cfg.endpoints.environment_invoke(
                "chain",
                chain_id,
                env,
                "run_remote",
                cfg.regional_environment,
            )
        });
    }
    ctx.event("", "chain deployment created");
    ctx.say(&format!(
        "Created chain deployment {chain_deployment_id} ({}) of chain {chain_id}",
        cfg.deployment_name
    ));
    ctx.say(&format!(
        "Chain page: {}",
        cfg.endpoints.chain_page(chain_id)
    ));
    ctx.end_group();

    ctx.group(&format!(
        "Wait for all chainlets to be ready (timeout: {})",
        human(cfg.wait_timeout)
    ));
    let waited = wait(ctx, chain_id, chain_deployment_id).await;
    ctx.end_group();
    waited?;
    ctx.ready();
    // No price is published per chainlet: the price outputs stay empty.
    flow::price::chain(ctx);

    flow::test_and_promote(ctx, Kind::Chain, chain_id, chain_deployment_id).await
}

/// Polls the chain deployment until every chainlet is ready, one failed,
/// or the deadline passes.
async fn wait(ctx: &Ctx<'_>, chain_id: &str, chain_deployment_id: &str) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut logs_shown: BTreeSet<String> = BTreeSet::new();
    let mut warned_unknown: BTreeSet<String> = BTreeSet::new();
    let mut promo = PromotionTrack::default();
    let logs_url = |id: &str| {
        cfg.endpoints
            .chainlet_logs(chain_id, chain_deployment_id, id)
    };
    flow::poll_until(
        ctx,
        Phase::Wait,
        "the chain",
        async |ctx: &Ctx<'_>, api: &Api| {
            let chainlets = api.chain_deployment_status(chain_deployment_id).await?;
            for c in &chainlets {
                let key = if c.id.is_empty() { &c.name } else { &c.id };
                if seen.get(key) != Some(&c.status) {
                    let class = status::classify_chainlet(&c.status);
                    let shown = if c.status.is_empty() {
                        "(none)"
                    } else {
                        &c.status
                    };
                    ctx.say(&format!(
                        "chainlet {} status {shown} ({}) after {}",
                        c.name,
                        class.as_str(),
                        human(ctx.started.elapsed())
                    ));
                    ctx.event(&c.status, &format!("{}: {}", c.name, class.as_str()));
                    seen.insert(key.clone(), c.status.clone());
                    if !c.status.is_empty()
                        && !status::is_known_chainlet_status(&c.status)
                        && warned_unknown.insert(c.status.clone())
                    {
                        ctx.warn(&format!(
                        "unknown chainlet status {:?}: treating it as in progress and polling on",
                        c.status
                    ));
                    }
                }
                if !c.id.is_empty() && logs_shown.insert(c.id.clone()) {
                    ctx.say(&format!("  logs of {}: {}", c.name, logs_url(&c.id)));
                }
            }
            ctx.state.lock().unwrap().last_status = representative_status(&chainlets);
            match chain_verdict(&chainlets) {
                ChainVerdict::Ready => match cfg.create_environment() {
                    None => Ok(Poll::Ready),
                    // Ready chainlets do not mean the environment serves this
                    // chain deployment yet: wait for the promotion.
                    Some(env) => {
                        let environment = api.chain_environment(chain_id, env).await;
                        flow::check_promotion(
                            ctx,
                            &mut promo,
                            chain_deployment_id,
                            env,
                            environment,
                        )
                    }
                },
                ChainVerdict::Failed { chainlet, status } => {
                    let logs = chainlets
                        .iter()
                        .find(|c| c.name == chainlet && !c.id.is_empty())
                        .map(|c| format!("; see its logs: {}", logs_url(&c.id)))
                        .unwrap_or_default();
                    Ok(Poll::Failed(Failure::Deploy(anyhow!(
                        "chainlet {chainlet} failed with status {status}{logs}"
                    ))))
                }
                ChainVerdict::InProgress => Ok(Poll::Wait),
            }
        },
    )
    .await
}

/// The environment a chain deployment serves, if the platform says so.
async fn serving_environment(api: &Api, chain_id: &str, chain_deployment_id: &str) -> Serving {
    chain_serving(api.chain_deployment(chain_id, chain_deployment_id).await)
}

/// A chain deployment's answer names the environment it serves; a failed
/// read counts as serving.
fn chain_serving(answer: Result<Value, ApiError>) -> Serving {
    match answer {
        Ok(v) => match v["environment"].as_str().filter(|s| !s.is_empty()) {
            Some(env) => Serving::Environment(env.to_string()),
            None => Serving::No,
        },
        Err(e) => Serving::Unknown(e.to_string()),
    }
}

/// The chain deployment a create whose answer never came made, when this
/// run can prove it its own: a chain deployment has no name to find it
/// by, so it must be the only one new since the create was sent, and read
/// back it must run this run's entrypoint (`f.entrypoint`). Anything else
/// names the candidates (the error) and touches none.
async fn find_own(api: &Api, f: &InFlight) -> Result<Option<(String, String)>, ApiError> {
    let entrypoint = f.entrypoint.as_deref().unwrap_or_default();
    let find_chain = async |api: &Api| {
        let chains = api.chains(f.team_id.as_deref()).await?;
        Ok(chains.into_iter().find(|c| c.name == f.name).map(|c| c.id))
    };
    let list = async |api: &Api, chain_id: &str| api.chain_deployment_ids(chain_id).await;
    let Some((chain_id, new)) = f.before.new_since(api, find_chain, &list).await? else {
        return Ok(None);
    };
    match new.as_slice() {
        [] => Ok(None),
        [id] => {
            let read = api.chain_deployment(&chain_id, id).await.map_err(|e| {
                ApiError::permanent(format!("chain deployment {id} is new, but it could not be read back ({e}) to prove it this run's"))
            })?;
            match runs_entrypoint(&read, entrypoint) {
                true => Ok(Some((chain_id, id.clone()))),
                false => Err(ApiError::permanent(format!(
                    "chain deployment {id} is new, but read back it shows no chainlet {entrypoint:?}, this run's entrypoint, so it cannot be proven this run's"
                ))),
            }
        }
        many => Err(ApiError::permanent(format!(
            "{} new chain deployments ({}) appeared meanwhile and none can be proven this run's",
            many.len(),
            many.join(", ")
        ))),
    }
}

/// Whether a chain deployment read back (ChainDeploymentV1) has a
/// chainlet named `entrypoint`.
fn runs_entrypoint(read: &Value, entrypoint: &str) -> bool {
    read["chainlets"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["name"].as_str() == Some(entrypoint)))
}

/// Cleanup of the chain deployment (with a gated promotion: of each one
/// this run created), by the rules models follow; first, a create in
/// flight when the run was cancelled is looked for ([`find_own`]).
pub(crate) async fn cleanup(ctx: &Ctx<'_>) -> Result<(), Failure> {
    flow::cleanup_created(ctx, &Chain).await
}

/// The chain deployment's create, as the flow's create-exactly-once asks
/// of it: after a lost answer, this run's own is found ([`find_own`]).
struct NewChainDeployment<'r> {
    request: &'r DeployChainRequest<'r>,
    user_env: &'r str,
    lookup: InFlight,
}

impl flow::Create for NewChainDeployment<'_> {
    type Made = ChainDeployed;

    async fn send(&self, api: &Api) -> Result<ChainDeployed, ApiError> {
        api.deploy_chain_atomic(self.request, self.user_env).await
    }

    async fn find(&self, api: &Api) -> Result<Option<ChainDeployed>, ApiError> {
        let found = find_own(api, &self.lookup).await?;
        Ok(found.map(|(chain_id, chain_deployment_id)| ChainDeployed {
            chain_id,
            chain_deployment_id,
        }))
    }
}

/// A chain's deployments, as the flow's cleanup asks of them.
struct Chain;

impl flow::Owner for Chain {
    const WHAT: &'static str = "chain deployment";

    fn owner(st: &flow::State) -> &Option<String> {
        &st.chain_id
    }

    fn adopt(st: &mut flow::State, chain_id: String, id: String) {
        st.chain_id = Some(chain_id);
        st.deployment_id = Some(id);
        st.model_id = None;
    }

    async fn find_cancelled(
        &self,
        api: &Api,
        f: &InFlight,
    ) -> Result<Option<(String, String)>, ApiError> {
        find_own(api, f).await
    }

    async fn serving(&self, api: &Api, chain_id: &str, id: &str) -> Serving {
        serving_environment(api, chain_id, id).await
    }

    async fn deactivate(&self, api: &Api, chain_id: &str, id: &str) -> Result<(), ApiError> {
        api.deactivate_chain(chain_id, id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_chain_deployment_read_back_is_ours_only_with_our_entrypoint() {
        let read = json!({"chainlets": [{"name": "Front"}, {"name": "Doubler"}]});
        assert!(runs_entrypoint(&read, "Front"));
        assert!(!runs_entrypoint(&read, "Other"));
        assert!(!runs_entrypoint(&json!({"chainlets": []}), "Front"));
        assert!(!runs_entrypoint(&json!({}), "Front"));
        assert!(!runs_entrypoint(
            &json!({"chainlets": [{"id": "x"}]}),
            "Front"
        ));
    }

    #[test]
    fn what_serves_a_chain_deployment() {
        let cases = [
            (
                Ok(json!({"environment": "production"})),
                Serving::Environment("production".into()),
            ),
            (Ok(json!({"environment": ""})), Serving::No),
            (Ok(json!({"environment": null})), Serving::No),
            (Ok(json!({})), Serving::No),
            (
                Err(ApiError::permanent("gone".into())),
                Serving::Unknown("gone".into()),
            ),
        ];
        for (answer, want) in cases {
            assert_eq!(chain_serving(answer), want);
        }
    }

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
}
