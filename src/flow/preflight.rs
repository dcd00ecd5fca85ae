//! The platform's own verdict before a byte is uploaded: the payload the
//! create will carry, sent to `POST /v1/prepare_model_upload` with
//! `dry_run: true` (Baseten's documented push for CI clients validates
//! exactly this, and issues nothing on a dry run).
//!
//! The payload is the create's: the config as sent (the same JSON the
//! GraphQL create carries base64-encoded), the raw `config.yaml` under
//! the same size rule, the client environment (git info included), the
//! deployment name, the environment, `preserve_env_instance_type`, the
//! deploy timeout, the labels, and the model id (or the name and team of a
//! new model). One field is left out: the content-hash label, whose value
//! comes from the upload's own reads of the files; a second read of a
//! 4 GiB truss to learn it earlier would cost what streaming saves. The
//! preflight never changes what the create sends.
//!
//! A refusal (a 4xx with the platform's error, 401/403 and an unknown
//! model included) ends the run before any upload: exit 2, the platform's
//! reason quoted. An endpoint the platform does not have (404/405 without
//! its error body), or one that keeps failing after its tries, is a
//! notice: the preflight is skipped and the deploy goes on.

use serde_json::{Map, Value, json};

use super::Ctx;
use crate::baseten::{OrderedObject, Preflight, python_json};
use crate::config::RAW_CONFIG_MAX_BYTES;
use crate::label::LABEL_KEY;
use crate::outcome::Failure;

/// What the create will carry, as the preflight needs it.
pub(crate) struct Payload<'a> {
    /// The model a new deployment goes to; `None`: a new model, by the
    /// config's name in `team_id` (the key's default team when `None`).
    pub(crate) model_id: Option<&'a str>,
    pub(crate) team_id: Option<&'a str>,
    pub(crate) config: &'a Value,
    pub(crate) raw_config: &'a [u8],
    /// `truss_user_env` as the create sends it (JSON text).
    pub(crate) user_env: &'a str,
    /// This run's label value ([`RUN_LABEL_KEY`]).
    pub(crate) run: &'a str,
}

/// What became of the preflight, for the dry run's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    /// `preflight: false`.
    Off,
    Passed,
    /// Not asked or not answered: why (the deploy goes on).
    Skipped(String),
}

/// The labels the create will carry (`content::labels_with`, the one
/// place they are composed) but the content hash: the user's, then this
/// run's and the pull request's.
fn labels(
    user: Option<&OrderedObject>,
    run: &str,
    pull_request: Option<&str>,
) -> Map<String, Value> {
    crate::content::labels_with(user, "", run, pull_request)
        .0
        .into_iter()
        .filter(|(k, _)| k != LABEL_KEY)
        .collect()
}

/// The `PrepareModelUploadRequestV1` body, `dry_run: true`.
pub(crate) fn body(ctx: &Ctx<'_>, p: &Payload<'_>) -> Value {
    let cfg = ctx.cfg;
    // The config as the create sends it: Python's JSON of the parsed
    // config, read back as an object.
    let config: Value = serde_json::from_str(&python_json(p.config)).unwrap_or(Value::Null);
    let raw_config = (p.raw_config.len() <= RAW_CONFIG_MAX_BYTES)
        .then(|| std::str::from_utf8(p.raw_config).ok())
        .flatten();
    let user_env: Value = serde_json::from_str(p.user_env).unwrap_or(Value::Null);
    let deployment = json!({
        "config": config,
        "raw_config": raw_config,
        "user_env": user_env,
        "environment_name": cfg.create_environment(),
        "preserve_env_instance_type": cfg.preserve_env_instance_type,
        "deploy_timeout_minutes": cfg.deploy_timeout_minutes,
        "deployment_name": cfg.deployment_name,
        "labels": labels(cfg.labels.as_ref(), p.run, cfg.pull_request_label.as_deref()),
    });
    match p.model_id {
        Some(id) => json!({"deployment": deployment, "model_id": id, "dry_run": true}),
        None => json!({
            "deployment": deployment,
            "name": cfg.model_name,
            "team_id": p.team_id,
            "dry_run": true,
        }),
    }
}

/// Asks the platform's preflight, unless `preflight: false`. A refusal is
/// the run's failure (exit 2); anything else that is not a pass is said
/// and skipped.
pub(crate) async fn ask(ctx: &Ctx<'_>, p: &Payload<'_>) -> Result<Asked, Failure> {
    if !ctx.cfg.preflight {
        return Ok(Asked::Off);
    }
    let skipped = |why: String| {
        let line = format!(
            "The platform's preflight was skipped: {why}. The deploy goes on (the local checks ran)"
        );
        ctx.notice(&line);
        ctx.note(line);
        Ok(Asked::Skipped(why))
    };
    match ctx.api.preflight(&body(ctx, p)).await {
        Ok(Preflight::Passed) => {
            ctx.say(
                "The platform's preflight passed: it validated the payload the create will carry (prepare_model_upload, dry run); nothing is uploaded before it",
            );
            Ok(Asked::Passed)
        }
        Ok(Preflight::Refused { status, reason }) => {
            Err(refused(ctx, p.model_id, status, &reason).await)
        }
        Ok(Preflight::Absent { status }) => skipped(format!(
            "this platform has no prepare_model_upload endpoint (HTTP {status} without the platform's error body)"
        )),
        Err(e) => skipped(format!("it did not answer ({e})")),
    }
}

/// The refusal as the run's failure. A default deployment name (the
/// commit's) that the model already has — read, not guessed from the
/// reason's words — is what a re-run of the same commit sends: the
/// message says so and names the fix.
async fn refused(ctx: &Ctx<'_>, model_id: Option<&str>, status: u16, reason: &str) -> Failure {
    let cfg = ctx.cfg;
    let mut msg = format!(
        "the platform refused this deploy before anything was uploaded (its preflight, prepare_model_upload with dry_run: true, answered HTTP {status}): {reason}"
    );
    if let (None, Some(model_id)) = (&cfg.given_deployment_name, model_id)
        && let Ok(named) = ctx
            .api
            .deployments_named(model_id, &cfg.deployment_name)
            .await
        && !named.is_empty()
    {
        msg.push_str(&format!(
            ". The model already has a deployment named {:?}, the default name for this commit, so a re-run of the same commit sends that name again: set deployment-name to a new one (e.g. {}-2) to deploy this commit again",
            cfg.deployment_name, cfg.deployment_name
        ));
    }
    Failure::InvalidInput(msg)
}

/// A dry run with a key: the platform's preflight on the payload the
/// create would carry; nothing is uploaded or created.
pub(crate) async fn preflight_only(
    ctx: &Ctx<'_>,
    dir: &std::path::Path,
    config: &Value,
    raw_config: &[u8],
) -> Result<Asked, Failure> {
    let cfg = ctx.cfg;
    if !cfg.preflight {
        return Ok(Asked::Off);
    }
    let (team, existing) = super::model_team_and_existing(ctx).await?;
    let git_info = match cfg.include_git_info {
        true => crate::git::collect_git_info(dir, cfg.ci_revision.as_ref()),
        false => None,
    };
    let (run, user_env) = (super::run_label(), super::truss_user_env(git_info.as_ref()));
    let payload = Payload {
        model_id: existing.as_ref().map(|m| m.id.as_str()),
        team_id: team.as_ref().map(|t| t.id.as_str()),
        config,
        raw_config,
        user_env: &user_env,
        run: &run,
    };
    ask(ctx, &payload).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::RUN_LABEL_KEY;

    #[test]
    fn the_labels_are_the_users_and_the_runs_without_a_hash() {
        let user = OrderedObject(vec![
            ("team".into(), json!("ml")),
            (LABEL_KEY.into(), json!("forged")),
            (RUN_LABEL_KEY.into(), json!("forged")),
        ]);
        let l = labels(Some(&user), "r1", None);
        assert_eq!(Value::Object(l), json!({"team": "ml", RUN_LABEL_KEY: "r1"}));
        assert_eq!(
            Value::Object(labels(None, "r2", None)),
            json!({RUN_LABEL_KEY: "r2"})
        );
    }
}
