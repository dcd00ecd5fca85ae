//! Deploy by content inside a model deploy: the hash computed off the
//! runtime's threads within the deploy budget, the verdict before
//! packaging with `skip-unchanged` (the environment smoke-tested when the
//! source already serves it), and what the deploy will change. The
//! verdict's reads decide (`skip::check`); what serves the environment
//! and its raw config, read for the summary's diff, and the audit log's
//! "promoted at" words only inform (`crate::flow::inform`): the first is never
//! awaited by the deploy, the second only by an unchanged run.

use anyhow::anyhow;
use serde_json::Value;

use super::inform;
use super::{Ctx, smoke_test};
use crate::baseten::{Api, ApiError};
use crate::content::diff::{self, Change};
use crate::content::skip::{self, Read, Serving, Verdict, Why};
use crate::outcome::Failure;

/// This truss's content hash, read before packaging, said and kept in
/// the run's state.
pub(crate) async fn hash(ctx: &Ctx<'_>, dir: &std::path::Path) -> Result<String, Failure> {
    let root = dir.to_path_buf();
    let hashing = async {
        tokio::task::spawn_blocking(move || crate::content::hash(&root))
            .await
            .map_err(|e| Failure::Deploy(anyhow!(e)))?
            .map_err(|e| Failure::Deploy(e.context("hashing the truss")))
    };
    let h = ctx
        .within_deploy_budget("hashing the truss", hashing)
        .await?;
    say(ctx, &h, "");
    ctx.state.lock().unwrap().by_content.hash = Some(h.hex.clone());
    Ok(h.hex)
}

/// The content hash of what was packaged (and is labelled): said unless
/// it is the one read before packaging.
pub(crate) fn packaged(ctx: &Ctx<'_>, h: &crate::content::ContentHash) -> String {
    let mut st = ctx.state.lock().unwrap();
    let before = st.by_content.hash.replace(h.hex.clone());
    drop(st);
    match before {
        Some(b) if b == h.hex => {}
        Some(_) => say(
            ctx,
            h,
            " (the truss changed after it was first hashed: this is what was packaged)",
        ),
        None => say(ctx, h, ""),
    }
    h.hex.clone()
}

fn say(ctx: &Ctx<'_>, h: &crate::content::ContentHash, then: &str) {
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    ctx.say(&format!(
        "Content hash {} ({}, {}, {}){then}",
        h.hex,
        plural(h.files, "file", "files"),
        plural(h.dirs, "directory", "directories"),
        crate::ci::format_bytes(h.bytes)
    ));
}

/// With `skip-unchanged`, before anything is packaged: reads the
/// environment and decides. `Ok(true)` when the source already serves it
/// (the environment then smoke-tested and the outputs those of the
/// serving deployment), or when an older deployment made from this source
/// was put into the environment instead of a build (`super::reuse`);
/// `Ok(false)` to deploy, the reason said, and what
/// the deploy changes read for the summary on the side.
pub(crate) async fn skip_if_unchanged(
    ctx: &Ctx<'_>,
    model_id: Option<&str>,
    hash: &str,
    raw_config: &[u8],
) -> Result<bool, Failure> {
    let cfg = ctx.cfg;
    let Some(env) = cfg.environment.as_deref() else {
        return Ok(false);
    };
    match skip::check(ctx.api, model_id, env, hash).await {
        Verdict::Unchanged(serving) => {
            let model_id = model_id.expect("a serving deployment has a model");
            let serving = promoted_words(ctx, model_id, env, serving).await;
            // The read that decided "unchanged" is what serves.
            ctx.state.lock().unwrap().serves = Some(crate::ci::ServesNow {
                env: env.to_string(),
                deployment: Some(serving.deployment_id.clone()),
                moving_to: None,
            });
            unchanged(ctx, model_id, env, &serving, hash).await?;
            Ok(true)
        }
        Verdict::Deploy { why, serving } => {
            // The read found what serves the environment before this run.
            if let Ok(read) = &serving {
                ctx.state.lock().unwrap().previous_deployment_id = Some(read.deployment_id.clone());
            }
            // The revert case: an older deployment made from this source
            // goes in instead of a build.
            if let (Some(model_id), true) = (model_id, crate::content::reuse::looked_for(&why)) {
                ctx.say(&format!(
                    "Not unchanged: {why}; looking for an older deployment made from this source"
                ));
                let current = serving.as_ref().ok().map(|r| r.deployment_id.as_str());
                if super::reuse::reuse_if_built(ctx, model_id, env, hash, raw_config, &why, current)
                    .await?
                {
                    return Ok(true);
                }
            }
            ctx.say(&format!("Deploying: {why}"));
            ctx.note(format!("skip-unchanged: deployed because {why}"));
            compare_later(ctx, model_id, env, Some(serving), raw_config);
            Ok(false)
        }
    }
}

/// When the model's audit log last saw `serving` promoted into `env`: a
/// read that only informs the unchanged line, awaited here because an
/// unchanged run creates, promotes and deactivates nothing; at most its
/// own short deadline. Unread, the line says when it was created.
async fn promoted_words(ctx: &Ctx<'_>, model_id: &str, env: &str, serving: Serving) -> Serving {
    let (m, d, e) = (
        model_id.to_string(),
        serving.deployment_id.clone(),
        env.to_string(),
    );
    let read = inform::start(ctx, move |api| async move {
        skip::promoted_at(&api, &m, &d, &e).await
    });
    match read.settle().await {
        Ok(promoted) => Serving {
            promoted,
            ..serving
        },
        Err(not_read) => {
            let line = format!(
                "When the audit log saw deployment {} promoted into {env}: {not_read}",
                serving.deployment_id
            );
            ctx.say(&line);
            ctx.note(line);
            serving
        }
    }
}

/// What serves the environment a deploy goes into, read to show what the
/// deploy changes: the serving deployment, and its raw config compared
/// with ours (in the read's own task, so nothing of it runs on the
/// deploy's path), or why not.
pub(crate) struct Theirs {
    environment: String,
    serving: Result<Read, Why>,
    /// Our config against the serving one's, before our content hash is
    /// known ([`with_hash`] adds it when the configs are the same).
    compared: diff::What,
}

/// Why the serving deployment's raw config is not there to compare with.
#[derive(Debug, thiserror::Error)]
enum ConfigUnread {
    #[error(
        "the platform keeps no raw config.yaml for the serving deployment {0} (it keeps them for deployments created since 2026-04-30)"
    )]
    NotKept(String),
    #[error("the serving deployment {id}'s config could not be read ({cause})")]
    Unread { id: String, cause: ApiError },
    /// What serves the environment could not be read.
    #[error(transparent)]
    Serving(Why),
    #[error("the model does not exist yet")]
    NoModel,
}

/// An informing read cut by its deadline.
#[derive(Debug, thiserror::Error)]
#[error("timed out")]
struct TimedOut;

/// Reads what serves `env` and its raw config on the side, for the
/// summary's comparison: a read that only informs, whose outcome goes to
/// the report (`inform::for_report`), never to the deploy. `serving` is
/// what `skip-unchanged`'s verdict read already; without it the
/// environment list is read too.
pub(crate) fn compare_later(
    ctx: &Ctx<'_>,
    model_id: Option<&str>,
    env: &str,
    serving: Option<Result<Read, Why>>,
    raw_config: &[u8],
) {
    let (model_id, environment) = (model_id.map(str::to_string), env.to_string());
    let ours = String::from_utf8_lossy(raw_config).into_owned();
    let what = format!("what the deploy changes in {env}");
    let said = what.clone();
    inform::for_report(
        ctx,
        &said,
        move |api| async move {
            let serving = match serving {
                Some(s) => s,
                None => skip::serving(&api, model_id.as_deref(), &environment).await,
            };
            let theirs = config_of(&api, model_id.as_deref(), &environment, serving, &ours).await;
            // A read cut by its deadline is not read (its error, folded
            // into the comparison, would say less).
            match api
                .deadline()
                .is_some_and(|d| api.clock().left(d).is_zero())
            {
                true => Err(TimedOut),
                false => Ok(theirs),
            }
        },
        move |read, ctx| record_change(ctx, read, &what),
    );
}

/// The serving deployment's raw config, once it was read, compared with
/// `ours`.
async fn config_of(
    api: &Api,
    model_id: Option<&str>,
    env: &str,
    serving: Result<Read, Why>,
    ours: &str,
) -> Theirs {
    let config = match (&serving, model_id) {
        (Ok(s), Some(model_id)) => {
            match api.deployment_raw_config(model_id, &s.deployment_id).await {
                Ok(Some(text)) => Ok(text),
                Ok(None) => Err(ConfigUnread::NotKept(s.deployment_id.clone())),
                Err(cause) => Err(ConfigUnread::Unread {
                    id: s.deployment_id.clone(),
                    cause,
                }),
            }
        }
        (Err(why), _) => Err(ConfigUnread::Serving(why.clone())),
        (Ok(_), None) => Err(ConfigUnread::NoModel),
    };
    let compared = diff::change(
        ours,
        config.as_deref().map_err(|e| e as &dyn std::fmt::Display),
        None,
    );
    Theirs {
        environment: env.to_string(),
        serving,
        compared,
    }
}

/// What the deploy changes in the serving deployment, kept for the
/// summary and the pull-request comment once our content hash is known
/// (a run stopped before it knew nothing to compare). A read that timed
/// out or failed leaves the comparison empty, saying so.
fn record_change(ctx: &Ctx<'_>, read: inform::Informed<Theirs>, what: &str) {
    let Some(hash) = ctx.state.lock().unwrap().by_content.hash.clone() else {
        return;
    };
    let theirs = match read {
        Ok(theirs) => theirs,
        Err(not_read) => {
            ctx.say(&format!("{}: {not_read}", capitalized(what)));
            let environment = ctx.cfg.environment.clone().unwrap_or_default();
            let change = Change {
                environment,
                serving: None,
                what: diff::What::Unknown(format!(
                    "the serving deployment's config.yaml: {not_read}"
                )),
            };
            ctx.state.lock().unwrap().by_content.change = Some(change);
            return;
        }
    };
    let same_hash = theirs
        .serving
        .as_ref()
        .ok()
        .and_then(|s| s.recorded.as_deref())
        .filter(|r| crate::content::is_hash(r))
        .map(|r| r == hash);
    let change = Change {
        environment: theirs.environment,
        serving: theirs.serving.ok().map(|s| s.deployment_id),
        what: with_hash(theirs.compared, same_hash),
    };
    ctx.state.lock().unwrap().by_content.change = Some(change);
}

/// What `diff::change` decided without a hash (`same_hash` `None`), once
/// `same_hash` is known: the same answer but for the same config, which
/// the hashes tell apart.
fn with_hash(what: diff::What, same_hash: Option<bool>) -> diff::What {
    match (what, same_hash) {
        (diff::What::ConfigSame, Some(true)) => diff::What::Same,
        (diff::What::ConfigSame, Some(false)) => diff::What::CodeOnly,
        (what, _) => what,
    }
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// The source already serves `env`: the outputs of the serving
/// deployment, one line saying so, and the environment's smoke test.
async fn unchanged(
    ctx: &Ctx<'_>,
    model_id: &str,
    env: &str,
    serving: &Serving,
    hash: &str,
) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let url = cfg.endpoints.environment_invoke(
        "model",
        model_id,
        env,
        "predict",
        cfg.regional_environment,
    );
    {
        let mut st = ctx.state.lock().unwrap();
        st.model_id = Some(model_id.to_string());
        st.deployment_id = Some(serving.deployment_id.clone());
        st.last_status = Some(serving.status.clone());
        st.environment_url = Some(url.clone());
        st.by_content.unchanged = Some(true);
    }
    let line = format!(
        "Unchanged: deployment {}{} serves {env} with this source (content hash {}…, {}); nothing was uploaded or created",
        serving.deployment_id,
        serving.described(env),
        skip::short(hash),
        serving.status
    );
    ctx.notice(&line);
    ctx.note(line);
    ctx.event(&serving.status, "unchanged: already serving");
    // What serves costs this per hour, read on the side.
    super::price::later(ctx, model_id, &serving.deployment_id);
    ctx.end_group();
    let Some(payload) = &cfg.predict_payload else {
        ctx.say("No predict payload configured, skipping predict check");
        return Ok(());
    };
    let streaming = payload
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    ctx.group(&format!("Predict ({env})"));
    let r = smoke_test(ctx, "predict", &url, payload, streaming).await;
    ctx.end_group();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The comparison made in the read's task, without our hash, then the
    /// hash added when it is told, decides as one `diff::change` with it.
    #[test]
    fn comparing_before_the_hash_is_known_decides_the_same() {
        let configs = [
            ("model_name: a\n", "model_name: a\n"),
            ("model_name: a\r\n", "model_name: a\n"),
            ("model_name: a\n", "model_name: b\n"),
        ];
        for (ours, theirs) in configs {
            for same_hash in [None, Some(true), Some(false)] {
                let late = with_hash(diff::change(ours, Ok(theirs), None), same_hash);
                assert_eq!(
                    late,
                    diff::change(ours, Ok(theirs), same_hash),
                    "{ours:?} {theirs:?} {same_hash:?}"
                );
            }
        }
    }
}
