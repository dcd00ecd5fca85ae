//! Before a deployment exists: the platform validates the config, the
//! truss's tar is laid out from its files and uploaded to S3 straight from
//! them (no archive is written to disk).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;

use super::{Ctx, deploy_error, human};
use crate::baseten::{Team, UploadCredentials};
use crate::budget::Phase;
use crate::ci::format_bytes;
use crate::content::{self, ContentHash};
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

/// Looks up the secrets the config names, in the team the deploy goes to
/// when it is known: missing ones get one warning naming them and where
/// to add them. A read that only informs (`crate::flow::inform`): started here
/// on the side, never waited for by the upload or the create, at most its
/// own short deadline; a failed or unanswered lookup is a notice saying
/// it was not read, and the deploy goes on (a secret may be optional).
pub(crate) fn preflight_secrets(ctx: &Ctx<'_>, team: Option<&Team>, wanted: &BTreeSet<String>) {
    if wanted.is_empty() {
        return;
    }
    let (team_id, holder) = match team {
        Some(t) => (Some(t.id.clone()), format!("team {:?}", t.name)),
        None => (None, "this workspace".to_string()),
    };
    let wanted = wanted.clone();
    let page = ctx.cfg.endpoints.secrets_page();
    crate::flow::inform::for_report(
        ctx,
        "the secrets check",
        move |api| async move {
            api.secret_names(team_id.as_deref())
                .await
                .map_err(|e| e.to_string())
        },
        move |have, ctx| match have {
            Ok(have) => {
                let missing: Vec<&str> = wanted
                    .iter()
                    .filter(|w| !have.contains(w))
                    .map(String::as_str)
                    .collect();
                if !missing.is_empty() {
                    ctx.warn(&format!(
                        "the truss config names secrets {holder} does not have: {}; add them at {page} before the model needs them (or ignore this if it treats them as optional)",
                        missing.join(", ")
                    ));
                }
            }
            Err(not_read) => {
                let line = format!(
                    "could not check the secrets the truss config names ({not_read}); the deploy goes on"
                );
                ctx.notice(&line);
                ctx.note(format!("the secrets check: {not_read}"));
            }
        },
    );
}

/// How often the reporter is asked whether a progress line is due.
const PROGRESS_TICK: Duration = Duration::from_secs(1);

/// Lays out the tar of `dir` and uploads it with `creds`, showing
/// progress. Nothing is written to disk and memory stays flat: each part's
/// bytes are read from the truss's files as the part is sent. With
/// `hash`, the content hash of exactly what was laid out is answered,
/// taken from those same reads (each file's digest from the bytes S3
/// stored): no file is read twice.
pub(crate) async fn package_and_upload(
    ctx: &Ctx<'_>,
    dir: &Path,
    creds: &UploadCredentials,
    label: &str,
    hash: bool,
) -> Result<Option<ContentHash>, Failure> {
    let fail = |e: anyhow::Error| Failure::Deploy(e);
    // The platform's temporary upload credentials are secrets like the key:
    // registered for every sink, so whatever S3 echoes of them is *** wherever
    // the run writes it. (Only this process ever prints them: no
    // `::add-mask::` line is needed for the runner.)
    crate::secret::register(&creds.aws_secret_access_key);
    crate::secret::register(&creds.aws_session_token);
    // The upload's wall time runs from the first file the layout reads to
    // the last part stored: there is no packaging pass apart from it.
    #[expect(
        clippy::disallowed_methods,
        reason = "times the upload, for its report"
    )]
    let began = std::time::Instant::now();
    let root = dir.to_path_buf();
    let packaging = async {
        tokio::task::spawn_blocking(move || {
            archive::layout(&root).map(|l| if hash { l.with_digests() } else { l })
        })
        .await
        .map_err(|e| fail(anyhow!(e)))?
        .map_err(|e| fail(e.context(format!("packaging {label}"))))
    };
    let layout = Arc::new(
        ctx.within_deploy_budget(&format!("packaging {label}"), packaging)
            .await?,
    );
    let size = layout.size();
    ctx.say(&format!(
        "Packaged {label}: {} files ({})",
        layout.member_count(),
        format_bytes(size)
    ));
    let uploader = s3::Uploader::new(s3::Options {
        endpoint: ctx.cfg.endpoints.s3.clone(),
        concurrency: ctx.cfg.upload_concurrency,
        ..s3::Options::new(ctx.net.s3_transport())
    });
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
        .upload_started(&format!("Uploading {label}"), size);
    let progress = |done: u64, _total: u64| ctx.rep.lock().unwrap().upload_progress(done);
    let what = format!("uploading {label}");
    let upload = async {
        let uploading = uploader.upload_archive(&target, Arc::clone(&layout), &progress);
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
            // The archive's own digests from what its reads gave of the
            // bytes S3 stored.
            r = uploading => r
                .and_then(|report| {
                    let digests = layout
                        .hashes_files()
                        .then(|| report.read.digests(&layout))
                        .transpose()?;
                    Ok((report, digests))
                })
                .map_err(|e| fail(e.context(what.clone()))),
            never = ticks => never,
        }
    };
    let report = ctx.within_deploy_budget(&what, upload).await;
    ctx.rep.lock().unwrap().upload_finished();
    let (report, digests) = report?;
    if let Some(note) = &report.note {
        ctx.notice(note);
    }
    let wall = began.elapsed();
    let rate = format_bytes((report.bytes as f64 / wall.as_secs_f64().max(1e-3)) as u64);
    ctx.say(&format!(
        "Uploaded {label}: {} in {} ({rate}/s)",
        format_bytes(report.bytes),
        human(wall),
    ));
    // The summary's history shows the upload's rate against its wall time
    // beside the statuses.
    ctx.event(
        "",
        &format!(
            "uploaded {label}: {} in {} of wall time ({rate}/s), read from its files and sent in one pass",
            format_bytes(report.bytes),
            human(wall),
        ),
    );
    let Some(digests) = &digests else {
        return Ok(None);
    };
    // Only a symlink whose target is no member is read here.
    let hashed = async {
        let layout = Arc::clone(&layout);
        let digests = digests.clone();
        tokio::task::spawn_blocking(move || content::of_upload(&layout, &digests))
            .await
            .map_err(|e| fail(anyhow!(e)))?
            .map_err(|e| fail(e.context(format!("hashing {label}"))))
    };
    ctx.within_deploy_budget(&format!("hashing {label}"), hashed)
        .await
        .map(Some)
}

/// Ends the multipart uploads a stopped run left open (its flow was
/// dropped mid-upload by a signal or the deploy budget), within the cleanup
/// budget, so S3 keeps none of their parts, and says what S3 holds after,
/// each from a read: nothing, the archive stored whole (the stop came
/// during its completion), the archive maybe stored (S3 did not answer
/// its completion in time: nothing is aborted while S3 may be completing
/// it), or what could not be checked. Best effort, like the abort after a
/// failed part: a leftover upload costs storage until the bucket's
/// lifecycle rule removes it, never a wrong deploy. Nothing is created
/// from an archive stored here: the flow that would have is gone.
pub(crate) async fn abort_unfinished_uploads(ctx: &Ctx<'_>) {
    let uploaders = std::mem::take(&mut ctx.state.lock().unwrap().uploaders);
    // Cleanup's deadline, from the run's budget (a signal's seconds after
    // a cancel).
    let until = ctx.until(Phase::Cleanup);
    let budget = ctx.left(until);
    let completing: Vec<String> = uploaders
        .iter()
        .filter_map(s3::Uploader::completing)
        .collect();
    if !completing.is_empty() {
        ctx.say(&format!(
            "S3 is completing the upload (its CompleteMultipartUpload was sent before the stop): waiting for its answer, within the cleanup's {}, before anything is aborted",
            human(budget)
        ));
    }
    // A second signal drops this wait: what S3 may hold is said still.
    let mut unsettled = Unsettled {
        ctx,
        locations: completing,
    };
    // The S3 layer measures its share of that deadline on the monotonic
    // clock, so it is handed over as a timer.
    let timer = ctx.timer(until);
    let aborts = futures_util::future::join_all(
        uploaders
            .iter()
            .map(|u| u.abort_unfinished(timer.into_std())),
    );
    #[expect(
        clippy::disallowed_methods,
        reason = "a timer on cleanup's deadline, through Ctx::timer"
    )]
    let results = tokio::time::timeout_at(timer, aborts).await;
    unsettled.locations.clear();
    let results = match results {
        Ok(results) => results,
        Err(_) => {
            say_left(
                ctx,
                Left::Warn(format!(
                    "could not end the unfinished S3 upload within {}: any part of it left stays until the bucket's lifecycle rule removes it",
                    human(budget)
                )),
            );
            return;
        }
    };
    for result in results {
        let left = match result {
            Ok(None) => continue,
            Ok(Some(ended)) => ended_message(ended),
            Err(e) => Left::Warn(format!(
                "could not abort the unfinished S3 upload: {e:#}; any part of it left stays until the bucket's lifecycle rule removes it"
            )),
        };
        say_left(ctx, left);
    }
}

/// The archives whose completion the cleanup waits for: dropped before
/// the wait ended (a second signal stops the cleanup), it says each may be
/// stored.
struct Unsettled<'a, 'c> {
    ctx: &'a Ctx<'c>,
    locations: Vec<String>,
}

impl Drop for Unsettled<'_, '_> {
    fn drop(&mut self) {
        for location in &self.locations {
            say_left(
                self.ctx,
                Left::Warn(format!(
                    "The archive may be stored at {location}: the cleanup was stopped while S3 was completing the upload. Nothing was aborted; nothing was created from it, and the archive or its parts stay until the bucket's lifecycle rule removes them"
                )),
            );
        }
    }
}

/// What the cleanup says of an upload it ended: a line, or a warning.
enum Left {
    Say(String),
    Warn(String),
}

/// Said in the log (a warning annotated) and kept for the summary's notes.
fn say_left(ctx: &Ctx<'_>, left: Left) {
    let text = match left {
        Left::Say(text) => {
            ctx.say(&text);
            text
        }
        Left::Warn(text) => {
            ctx.warn(&text);
            text
        }
    };
    ctx.note(text);
}

fn ended_message(ended: s3::Ended) -> Left {
    match ended {
        s3::Ended::Aborted { upload_id, rounds } => {
            let repeated = if rounds > 1 {
                format!(" ({rounds} aborts: parts in flight landed after the first)")
            } else {
                String::new()
            };
            Left::Say(format!(
                "Aborted the unfinished S3 upload {upload_id}{repeated}; S3 lists no part of it"
            ))
        }
        s3::Ended::AbortedUnchecked { upload_id, why } => Left::Warn(format!(
            "Aborted the unfinished S3 upload {upload_id}, but could not check that no part is left ({why}); any part left stays until the bucket's lifecycle rule removes it"
        )),
        s3::Ended::Stored {
            upload_id,
            location,
            bytes,
        } => Left::Say(format!(
            "The archive was stored whole at {location} ({}, read back) before the run stopped: S3 had completed the upload {upload_id}, so no parts are left; nothing was created from it",
            format_bytes(bytes)
        )),
        s3::Ended::Gone { upload_id } => Left::Say(format!(
            "S3 knows no upload {upload_id} and holds no archive for it (read back): nothing is left"
        )),
        s3::Ended::Unknown { upload_id, why } => Left::Warn(format!(
            "S3 knows no upload {upload_id} (it may have completed), and the archive could not be read back ({why}): whether it was stored is unknown; no parts of it are left"
        )),
        s3::Ended::MaybeStored {
            upload_id,
            location,
            why,
        } => Left::Warn(format!(
            "The archive may be stored at {location}: {why}. Nothing was aborted, since S3 may be completing the upload {upload_id}; nothing was created from it, and the archive or its parts stay until the bucket's lifecycle rule removes them"
        )),
    }
}
