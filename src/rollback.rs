//! `command: rollback`: puts back the deployment that served an
//! environment before the current one — the one the model's audit log
//! names (`crate::history::previous_serving`), or the one `to-deployment`
//! names — without a build: activated when inactive (and waited on, its
//! `INACTIVE` read as waking after the run's own activate), promoted,
//! waited on until a read of the environment shows it (or the copy the
//! platform made of it) serving, then the environment smoke-tested.
//!
//! One model target, an environment (`environment`, or `promote: true`
//! for production). Every read before the promote decides and fails
//! closed: the model, the environment (settled, nothing in flight), the
//! target (a deployment of this model that can serve), the audit log when
//! it names the target, and the environment read again just before the
//! promote (another run moving it meanwhile stops the rollback, nothing
//! changed). Nothing is uploaded, created or deactivated, and no third
//! deployment is tried when the promote or the smoke test fails: the run
//! says what serves, from a read. The decisions are pure functions
//! ([`needs`], and `flow::switch`'s) with table tests; `run` performs them through
//! `execute`'s one-target machinery (budget, signals, GitHub).

mod audit;

use anyhow::anyhow;
use serde_json::Value;

use crate::baseten::{ApiError, Deployment};
use crate::config::{Config, Target};
use crate::execute::{self, Stop, Work};
use crate::flow::{self, Ctx, deploy_error, smoke_test, switch};
use crate::handles::Run;
use crate::kind::Kind;
use crate::outcome::Failure;
use crate::secret::Secret;
use crate::settings::{CommandSettings, Promotion};

/// The statuses a rollback target may have: ready, waking, or inactive
/// (activated first).
const CAN_SERVE: &[&str] = &["ACTIVE", "SCALED_TO_ZERO", "WAKING_UP", "INACTIVE"];

/// Runs `command: rollback`.
pub(crate) async fn run(run: &Run, cs: &CommandSettings, key: &Secret) -> Result<(), Failure> {
    let cfg = config(run, cs).map_err(Failure::InvalidInput)?;
    let env = cfg
        .environment
        .clone()
        .expect("config() refuses a rollback without an environment");
    let dry = cs.settings.as_ref().is_some_and(|s| s.dry_run);
    {
        let mut st = run.state.lock().unwrap();
        st.model_name = cfg.model_name.clone();
        st.rolled_back = Some(false);
    }
    for n in &cfg.notices {
        run.rep.lock().unwrap().notice(n);
    }
    let platform = run.platform(key)?;
    // A dry run changes nothing, so GitHub hears of nothing.
    let gh = match dry {
        true => None,
        false => execute::github_job(&cfg)
            .and_then(|job| crate::github::Session::open(job, platform.net, &run.rep)),
    };
    let work = Rollback {
        env,
        to: cs.lifecycle.to_deployment.clone(),
        dry,
        changing: std::sync::Mutex::new(None),
    };
    let mut signals = run.signals().await;
    let stop = &mut Stop::Process(&mut signals);
    execute::execute_work(run.target(&cfg), platform, stop, gh.as_ref(), &work).await
}

/// The one model target a rollback works on, its inputs checked: one
/// model (not several, not a chain), an environment. The run's own
/// settings for it: no cleanup (nothing is created), no gate (the
/// rollback's promote is its own), and the dry run kept apart (its reads
/// are made; its mutations are not).
fn config(run: &Run, cs: &CommandSettings) -> Result<Config, String> {
    let s = cs
        .settings
        .as_ref()
        .ok_or("command rollback needs truss-directory: the model whose environment goes back")?;
    if crate::multi::wanted(s) {
        return Err(
            "command rollback takes one model target: truss-directory names several (or changed-since is set); run one rollback per model".into(),
        );
    }
    // A rollback creates nothing, so it names no deployment: the name
    // `Config` asks for (from the CI's commit, else git) is never used,
    // and its absence outside CI is no error here.
    let mut s = s.clone();
    s.given_deployment_name = Some("rollback".into());
    let mut cfg = Config::resolve(&s, s.truss_directory.trim(), &run.ci)?;
    if let Target::Chain { .. } = cfg.target {
        return Err(
            "command rollback takes a model: a chain cannot be rolled back by this tool (the published API has no chain activate); promote the chain deployment in the Baseten UI".into(),
        );
    }
    // Only config.yaml is read (the model's name): nothing is packaged,
    // so the truss's other files are not checked.
    if cfg.environment.is_none() {
        return Err(
            "command rollback needs an environment: set environment (or promote: true for production)".into(),
        );
    }
    cfg.settings.cleanup.enabled = false;
    cfg.settings.dry_run = false;
    cfg.settings.promotion = Promotion::AtCreate;
    Ok(cfg)
}

/// The rollback of one environment.
struct Rollback {
    env: String,
    /// `to-deployment`, when given.
    to: Option<String>,
    dry: bool,
    /// The target, once the changes start: a cancel then says whether it
    /// serves (the rollback happened) from its read.
    changing: std::sync::Mutex<Option<String>>,
}

impl Work for Rollback {
    async fn run(&self, ctx: &Ctx<'_>) -> Result<(), Failure> {
        ctx.group(&format!(
            "Rollback of {} in {}",
            ctx.cfg.model_name, self.env
        ));
        let r = roll_back(ctx, self).await;
        ctx.end_group();
        r
    }

    /// Nothing is cleaned up: a rollback creates nothing, and what it
    /// promoted is what the user asked to serve. Stopped by a signal, it
    /// reads what serves, so the outputs say it.
    async fn cleanup(&self, ctx: &Ctx<'_>, cancelled: bool) -> Result<(), Failure> {
        let model_id = ctx.state.lock().unwrap().model_id.clone();
        if let (true, Some(model_id)) = (cancelled, model_id) {
            let now = switch::what_serves(ctx, &model_id, &self.env).await;
            let target = self.changing.lock().unwrap().clone();
            served(ctx, target.as_deref(), now.settled);
            ctx.note(format!("stopped during the rollback: {}", now.words));
        }
        Ok(())
    }
}

/// What the reads decided, before any mutation.
#[derive(Clone, Debug, PartialEq)]
enum Needs {
    /// The target already serves the environment.
    NothingToDo,
    /// Activate it (when `activate`), then promote it.
    Promote { activate: bool },
}

/// The target's reading: whether it can serve and what it needs. `read`
/// is the target's read; `current`, what serves the environment.
fn needs(
    id: &str,
    model: &str,
    read: Result<&Deployment, &ApiError>,
    current: Option<&str>,
) -> Result<Needs, Failure> {
    let d = match read {
        Ok(d) => d,
        Err(e) if e.permanent_status() == Some(404) => {
            return Err(Failure::InvalidInput(format!(
                "deployment {id} is not a deployment of model {model} (the platform has no such deployment of it: another model's, or deleted); nothing was changed"
            )));
        }
        Err(e) => {
            return Err(Failure::Deploy(anyhow!(
                "deployment {id} could not be read ({e}); nothing was changed"
            )));
        }
    };
    if current == Some(id) {
        return Ok(Needs::NothingToDo);
    }
    let status = d.status.trim();
    if !CAN_SERVE.contains(&status) {
        return Err(Failure::InvalidInput(format!(
            "deployment {id} is {status}: only a deployment that is ACTIVE, SCALED_TO_ZERO, WAKING_UP or INACTIVE can be put back; nothing was changed"
        )));
    }
    Ok(Needs::Promote {
        activate: status == "INACTIVE",
    })
}

async fn roll_back(ctx: &Ctx<'_>, r: &Rollback) -> Result<(), Failure> {
    match choose(ctx, r).await? {
        Some(chosen) => {
            *r.changing.lock().unwrap() = Some(chosen.target.clone());
            put_in(ctx, &r.env, &chosen).await
        }
        None => Ok(()),
    }
}

/// What a read after the changes stopped says serves, in the outputs:
/// `deployment-id`, and `rolled-back` true exactly when the target serves
/// (a promotion that landed before a cancel or a failed wait is a
/// rollback that happened).
fn served(ctx: &Ctx<'_>, target: Option<&str>, settled: Option<String>) {
    let mut st = ctx.state.lock().unwrap();
    if let Some(t) = target {
        st.rolled_back = Some(settled.as_deref() == Some(t));
    }
    st.deployment_id = settled;
}

/// What the reads chose: the model, what serves, the target and whether
/// it must be woken first.
struct Chosen {
    model_id: String,
    current: Option<String>,
    target: String,
    activate: bool,
}

/// Every read before a change, and every refusal: the model, the
/// environment, the target and its state. `None` when there is nothing
/// to change (the target serves already, or a dry run said what it would
/// do).
async fn choose(ctx: &Ctx<'_>, r: &Rollback) -> Result<Option<Chosen>, Failure> {
    let (cfg, env) = (ctx.cfg, r.env.as_str());
    let name = cfg.model_name.as_str();
    let (_team, models) = flow::team_and_models(ctx).await?;
    let Some(model) = models.into_iter().find(|m| m.name == name) else {
        return Err(Failure::InvalidInput(format!(
            "model {name:?} does not exist in this workspace: nothing to roll back"
        )));
    };
    let model_id = model.id.as_str();
    ctx.state.lock().unwrap().model_id = Some(model_id.to_string());
    let before = match ctx.api.read_environment(Kind::Model, model_id, env).await {
        Ok(e) => e,
        Err(e) if e.permanent_status() == Some(404) => {
            return Err(Failure::InvalidInput(format!(
                "model {name:?} has no environment {env:?}: nothing to roll back"
            )));
        }
        Err(e) => return Err(deploy_error(e).context("nothing was changed")),
    };
    if before.moving() {
        return Err(Failure::Deploy(anyhow!(
            "{}: a promotion is in flight, so what serves is not settled; nothing was changed: run the rollback once it ends (or cancel it)",
            before.describe(env)
        )));
    }
    let current = before.current.clone();
    ctx.saw(env, &before);
    ctx.say(&before.describe(env));
    let target = match &r.to {
        Some(id) => {
            ctx.say(&format!("to-deployment names deployment {id}"));
            id.clone()
        }
        None => {
            let Some(current) = current.as_deref() else {
                return Err(Failure::InvalidInput(format!(
                    "{env} serves no deployment: nothing to roll back from"
                )));
            };
            audit::target(ctx, model_id, env, current).await?
        }
    };
    let read = ctx.api.deployment(model_id, &target).await;
    let todo = needs(&target, name, read.as_ref(), current.as_deref()).map_err(|f| match (&r.to, f) {
        // The log named it; the platform no longer has it.
        (None, Failure::InvalidInput(_)) if read.as_ref().is_err() => Failure::InvalidInput(format!(
            "the audit log names deployment {target} as what served {env} before, but the platform no longer has it (deleted): nothing to go back to; nothing was changed (to-deployment names another)"
        )),
        (_, f) => f,
    })?;
    let status = read.as_ref().map(|d| d.status.clone()).unwrap_or_default();
    {
        let mut st = ctx.state.lock().unwrap();
        st.deployment_id = current.clone();
        st.last_status = Some(status.clone());
        st.environment_url = Some(cfg.endpoints.environment_invoke(
            "model",
            model_id,
            env,
            "predict",
            cfg.regional_environment,
        ));
    }
    let activate = match todo {
        Needs::NothingToDo => {
            let line = format!(
                "Nothing to do: deployment {target} already serves {env}; nothing was changed"
            );
            ctx.notice(&line);
            ctx.note(line);
            // What serves costs this per hour, read on the side.
            flow::price::later(ctx, model_id, &target);
            return Ok(None);
        }
        Needs::Promote { activate } => activate,
    };
    let from = current.as_deref().unwrap_or("no deployment");
    if r.dry {
        let line = format!(
            "Dry run: would {}promote deployment {target} ({status}) into {env} in place of {from}; nothing was changed",
            if activate { "activate and " } else { "" }
        );
        ctx.notice(&line);
        ctx.note(line);
        return Ok(None);
    }
    Ok(Some(Chosen {
        model_id: model_id.to_string(),
        current,
        target,
        activate,
    }))
}

/// The changes: wake the target when inactive, promote it, wait until it
/// serves, smoke-test the environment. A failure says what serves, from a
/// read, and tries no other deployment.
async fn put_in(ctx: &Ctx<'_>, env: &str, chosen: &Chosen) -> Result<(), Failure> {
    let Chosen {
        model_id,
        current,
        target,
        activate,
    } = chosen;
    let (model_id, target) = (model_id.as_str(), target.as_str());
    let from = current.as_deref().unwrap_or("no deployment");
    let status = ctx
        .state
        .lock()
        .unwrap()
        .last_status
        .clone()
        .unwrap_or_default();
    ctx.state.lock().unwrap().previous_deployment_id = current.clone();
    ctx.say(&format!(
        "Rolling {env} back from {from} to deployment {target} ({status})"
    ));
    ctx.end_group();
    // What the promote replaces, and its price, read on the side before
    // it, for the summary's change.
    if let Some(from) = current.as_deref() {
        flow::price::replaced_by_id_later(ctx, model_id, from);
    }
    let promoted = async {
        if *activate {
            ctx.group(&format!("Activate {target}"));
            let woke = switch::wake(ctx, model_id, target).await;
            ctx.end_group();
            woke?;
        }
        ctx.group(&format!("Promote into {env}"));
        let promoted =
            switch::promote_and_wait(ctx, model_id, env, target, current.as_deref()).await;
        ctx.end_group();
        promoted
    };
    let serving = match promoted.await {
        Ok(s) => s,
        Err(f) => {
            let now = switch::what_serves(ctx, model_id, env).await;
            served(ctx, Some(target), now.settled.clone());
            ctx.state.lock().unwrap().reason = Some(format!("{f}; no other deployment was tried"));
            return Err(f.context(format!("{}; no other deployment was tried", now.words)));
        }
    };
    {
        let mut st = ctx.state.lock().unwrap();
        st.deployment_id = Some(serving.clone());
        if serving != target {
            st.tested_deployment_id = Some(target.to_string());
        }
        st.rolled_back = Some(true);
    }
    // What serves now (the read after the promote said which) costs
    // this per hour, read on the side.
    flow::price::later(ctx, model_id, &serving);
    // The log's notice; the page says it in its heading and serves line.
    ctx.notice(&summary_line(env, &serving, target, from));
    ctx.event("", &format!("{env} rolled back to {serving}"));
    smoke(ctx, model_id, env).await
}

/// The summary's line for a rollback that moved the environment.
pub(crate) fn summary_line(env: &str, serving: &str, target: &str, from: &str) -> String {
    match serving == target {
        true => format!("Rolled back: {env} serves deployment {serving} again, in place of {from}"),
        false => format!(
            "Rolled back: {env} serves deployment {serving}, the platform's copy of {target} made on promotion, in place of {from}"
        ),
    }
}

/// The environment's smoke test (the `predict-payload`/`predict-cases`
/// rules, evidence included). A failure says what serves, from a read.
async fn smoke(ctx: &Ctx<'_>, model_id: &str, env: &str) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let Some(payload) = &cfg.predict_payload else {
        ctx.say("No predict payload configured, skipping predict check");
        return Ok(());
    };
    let url = cfg.endpoints.environment_invoke(
        "model",
        model_id,
        env,
        "predict",
        cfg.regional_environment,
    );
    let streaming = payload
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    ctx.group(&format!("Predict ({env})"));
    let tested = smoke_test(ctx, "predict", &url, payload, streaming).await;
    ctx.end_group();
    if let Err(f) = tested {
        let now = switch::what_serves(ctx, model_id, env).await;
        let mut st = ctx.state.lock().unwrap();
        if now.settled.is_some() {
            st.deployment_id = now.settled.clone();
        }
        st.reason = Some(format!("{f}; the rollback does not try another deployment"));
        drop(st);
        return Err(f.context(format!(
            "{}; the rollback does not try another deployment",
            now.words
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn dep(status: &str) -> Deployment {
        serde_json::from_value(json!({"id": "d1", "status": status})).unwrap()
    }

    #[test]
    fn what_the_target_needs() {
        let ok = |status: &str, current: Option<&str>| {
            needs("d1", "m", Ok(&dep(status)), current).map_err(|f| f.to_string())
        };
        assert_eq!(
            ok("ACTIVE", Some("d0")),
            Ok(Needs::Promote { activate: false })
        );
        assert_eq!(
            ok("SCALED_TO_ZERO", None),
            Ok(Needs::Promote { activate: false })
        );
        assert_eq!(
            ok("INACTIVE", Some("d0")),
            Ok(Needs::Promote { activate: true })
        );
        assert_eq!(ok("ACTIVE", Some("d1")), Ok(Needs::NothingToDo));
        for bad in [
            "BUILD_FAILED",
            "BUILDING",
            "DEACTIVATING",
            "DEPLOY_FAILED",
            "UNHEALTHY",
        ] {
            let e = needs("d1", "m", Ok(&dep(bad)), Some("d0")).unwrap_err();
            assert!(matches!(e, Failure::InvalidInput(_)), "{bad}");
            assert!(e.to_string().contains(&format!("is {bad}")), "{e}");
        }
        let missing = ApiError::Permanent {
            status: Some(404),
            message: "not found".into(),
        };
        let e = needs("d1", "m", Err(&missing), Some("d0")).unwrap_err();
        assert!(matches!(e, Failure::InvalidInput(_)), "{e}");
        assert!(
            e.to_string().contains("is not a deployment of model m"),
            "{e}"
        );
        let lost = ApiError::Ambiguous {
            message: "reset".into(),
        };
        let e = needs("d1", "m", Err(&lost), Some("d0")).unwrap_err();
        assert!(
            matches!(e, Failure::Deploy(_)),
            "a failed read fails closed: {e}"
        );
    }

    #[test]
    fn the_summary_names_a_copy() {
        assert_eq!(
            summary_line("production", "d1", "d1", "d0"),
            "Rolled back: production serves deployment d1 again, in place of d0"
        );
        assert!(summary_line("production", "c1", "d1", "d0").contains("copy of d1"));
    }
}
