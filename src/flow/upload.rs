//! Before a deployment exists: the platform validates the config, the truss
//! is packaged into a temporary tar and uploaded to S3.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, anyhow};

use super::{Ctx, deploy_error, human};
use crate::baseten::{Team, UploadCredentials};
use crate::ci::format_bytes;
use crate::outcome::Failure;
use crate::{archive, s3};

/// Asks the platform to validate a config (`truss_validation`): warnings
/// are shown; `success: false` fails even without error lines, because the
/// platform sometimes refuses a config without saying why.
pub(crate) async fn validate_config(
    ctx: &Ctx<'_>,
    config_b64: &str,
    user_env: &str,
    what: &str,
) -> Result<(), Failure> {
    let validation = ctx
        .api
        .truss_validation(config_b64, user_env)
        .await
        .map_err(deploy_error)?;
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

/// The secret names a config asks for (`secrets:` keys).
pub(crate) fn secret_names(config: &serde_json::Value) -> BTreeSet<String> {
    config
        .get("secrets")
        .and_then(serde_json::Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Looks up the secrets the config names before the long build starts, in
/// the team the deploy goes to when it is known: missing ones get one
/// warning naming them and where to add them. Never fails the deploy (a
/// secret may be optional); a failed lookup is a notice.
pub(crate) async fn preflight_secrets(
    ctx: &Ctx<'_>,
    team: Option<&Team>,
    wanted: &BTreeSet<String>,
) {
    if wanted.is_empty() {
        return;
    }
    match ctx.api.secret_names(team.map(|t| t.id.as_str())).await {
        Ok(have) => {
            let missing: Vec<&str> = wanted
                .iter()
                .filter(|w| !have.contains(w))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                let holder = match team {
                    Some(t) => format!("team {:?}", t.name),
                    None => "this workspace".to_string(),
                };
                ctx.warn(&format!(
                    "the truss config names secrets {holder} does not have: {}; add them at {} before the model needs them (or ignore this if it treats them as optional)",
                    missing.join(", "),
                    ctx.cfg.endpoints.secrets_page()
                ));
            }
        }
        Err(e) => ctx.notice(&format!(
            "could not check the secrets the truss config names ({e}); the deploy goes on"
        )),
    }
}

/// A private temporary directory for the archive: the system's temp dir,
/// else the working directory (a `FROM scratch` container or a bare chroot
/// may have no `/tmp`), never inside the truss being archived.
pub(crate) fn scratch_dir(truss: &Path) -> anyhow::Result<tempfile::TempDir> {
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

/// How often the reporter is asked whether a progress line is due.
const PROGRESS_TICK: Duration = Duration::from_secs(1);

/// Archives `dir` into a temporary tar and uploads it with `creds`,
/// showing progress, and answers what the archive held. Memory stays flat:
/// the archive is streamed to disk and the upload reads it back part by
/// part.
pub(crate) async fn package_and_upload(
    ctx: &Ctx<'_>,
    dir: &Path,
    creds: &UploadCredentials,
    label: &str,
) -> Result<archive::Archive, Failure> {
    let fail = |e: anyhow::Error| Failure::Deploy(e);
    let tmp = scratch_dir(dir).map_err(fail)?;
    let tar_path = tmp.path().join("truss.tar");
    let (dir2, tar2) = (dir.to_path_buf(), tar_path.clone());
    let packaging = async {
        tokio::task::spawn_blocking(move || archive::write(&dir2, &tar2))
            .await
            .map_err(|e| fail(anyhow!(e)))?
            .map_err(|e| fail(e.context(format!("packaging {label}"))))
    };
    let archive = ctx.within(&format!("packaging {label}"), packaging).await?;
    ctx.say(&format!(
        "Packaged {label}: {} files ({})",
        archive.members.len(),
        format_bytes(archive.size)
    ));
    let uploader = s3::Uploader::new(
        ctx.s3_http.clone(),
        s3::Options {
            endpoint: ctx.cfg.endpoints.s3.clone(),
            concurrency: ctx.cfg.upload_concurrency,
            // The data requests' own connections trust what the reqwest
            // clients trust (the same variables, read the same way).
            wire: s3::WireSettings {
                extra_roots: crate::net::extra_root_ders(ctx.env),
                user_agent: crate::net::user_agent(),
                connect_timeout: Duration::from_secs(crate::net::CONNECT_TIMEOUT_SECS),
            },
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
    ctx.state.lock().unwrap().uploaders.push(uploader.clone());
    ctx.rep
        .lock()
        .unwrap()
        .upload_started(&format!("Uploading {label}"), archive.size);
    let progress = |done: u64, _total: u64| ctx.rep.lock().unwrap().upload_progress(done);
    let what = format!("uploading {label}");
    let upload = async {
        let uploading = uploader.upload_file(&target, &archive.path, &progress);
        // Parts can take longer than a progress line's interval on a slow
        // link: the ticks let the reporter say so even when none finished.
        let ticks = async {
            let mut every = tokio::time::interval(PROGRESS_TICK);
            loop {
                every.tick().await;
                let sent = uploader.bytes_sent();
                ctx.rep.lock().unwrap().upload_tick(sent);
            }
        };
        tokio::select! {
            r = uploading => r.map_err(|e| fail(e.context(what.clone()))),
            never = ticks => never,
        }
    };
    let report = ctx.within(&what, upload).await;
    ctx.rep.lock().unwrap().upload_finished();
    let report = report?;
    let secs = report.elapsed.as_secs_f64().max(1e-3);
    let rate = format_bytes((report.bytes as f64 / secs) as u64);
    ctx.say(&format!(
        "Uploaded {label}: {} in {} ({rate}/s)",
        format_bytes(report.bytes),
        human(report.elapsed),
    ));
    // The summary's history shows the upload's rate beside the statuses.
    ctx.event(
        "",
        &format!(
            "uploaded {label}: {} in {} ({rate}/s)",
            format_bytes(report.bytes),
            human(report.elapsed),
        ),
    );
    // What was packaged (its file already removed with the scratch dir):
    // the members and their digests.
    Ok(archive)
}

/// Aborts the multipart uploads a stopped run left open (its flow was
/// dropped mid-upload by a signal or the deploy budget), within the cleanup
/// budget, so S3 keeps none of their parts. Best effort, like the abort
/// after a failed part: a leftover upload costs storage until the bucket's
/// lifecycle rule removes it, never a wrong deploy.
pub(crate) async fn abort_unfinished_uploads(ctx: &Ctx<'_>, cancelled: bool) {
    let uploaders = std::mem::take(&mut ctx.state.lock().unwrap().uploaders);
    let budget = Duration::from_secs(if cancelled {
        super::cleanup::CANCELLED_CLEANUP_BUDGET_SECS
    } else {
        super::cleanup::CLEANUP_ALLOWANCE_SECS
    });
    let aborts =
        futures_util::future::join_all(uploaders.iter().map(s3::Uploader::abort_unfinished));
    match tokio::time::timeout(budget, aborts).await {
        Err(_) => ctx.warn(&format!(
            "could not abort the unfinished S3 upload within {}; its parts stay until the bucket's lifecycle rule removes them",
            human(budget)
        )),
        Ok(results) => {
            for result in results {
                match result {
                    Ok(Some(upload_id)) => {
                        ctx.say(&format!("Aborted the unfinished S3 upload {upload_id}"));
                    }
                    Ok(None) => {}
                    Err(e) => ctx.warn(&format!(
                        "could not abort the unfinished S3 upload: {e:#}; its parts stay until the bucket's lifecycle rule removes them"
                    )),
                }
            }
        }
    }
}
