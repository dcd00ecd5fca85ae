//! A multipart upload: create it, send the parts with bounded concurrency,
//! complete it, and abort it if anything fails so no part is left behind.
//!
//! An abort is not the end of the parts by itself: AWS documents that a
//! part upload in progress during AbortMultipartUpload may still succeed,
//! and that the abort may need repeating until ListParts shows none. So
//! the part requests are stopped first (a failed part cancels the others;
//! a stopped run's are cancelled with it, and the abort waits until they
//! are gone), then the upload is aborted and listed, and aborted again
//! while parts remain. An abort answered `NoSuchUpload` may mean the
//! upload had completed: the object is read (HEAD) before saying what is
//! left.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context as _, anyhow};
use tokio::task::JoinSet;

use super::call::Call;
use super::payload::checksum_text;
use super::xml::{StoredPart, xml_text};
use super::{Ended, Job, Progress, RangeDigests, Uploader};

/// Aborts sent for one upload at most: each waits for S3's answer and a
/// listing, and a part lands after an abort only if it was in flight then.
const ABORT_ROUNDS_MAX: u32 = 5;

/// The part requests running now, so an abort can wait until none is.
#[derive(Default)]
pub(super) struct Live {
    running: AtomicUsize,
    idle: tokio::sync::Notify,
}

impl Live {
    fn enter(self: &Arc<Self>) -> LiveGuard {
        self.running.fetch_add(1, Ordering::SeqCst);
        LiveGuard(Arc::clone(self))
    }

    /// Returns once no part request runs.
    pub(super) async fn stopped(&self) {
        loop {
            let notified = self.idle.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Held by a part task; dropped when it ends or is cancelled.
struct LiveGuard(Arc<Live>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Uploader {
    pub(super) async fn upload_multipart(
        &self,
        job: &Arc<Job>,
        size: u64,
        layout: &[(u64, u64)],
        progress: &Progress<'_>,
        ranges: &mut RangeDigests,
    ) -> anyhow::Result<(u32, Option<String>)> {
        let parts = layout.len() as u64;
        // The parts' connections open while CreateMultipartUpload is on its
        // way: the first parts then start without a handshake each.
        let create = Call::create_multipart();
        let warming = self.inner.warm(job, parts);
        let (created, ()) = tokio::join!(self.inner.call(job, &create), warming);
        let created = created?;
        let upload_id = xml_text(&created.body, "UploadId")
            .filter(|id| !id.is_empty())
            .ok_or_else(|| anyhow!("S3 started a multipart upload but returned no UploadId"))?;
        self.inner
            .set_open(Some((Arc::clone(job), upload_id.clone())));
        let mut completing = false;
        let outcome = match self
            .upload_parts(job, &upload_id, size, layout, progress, ranges)
            .await
        {
            Ok(stored) => {
                completing = true;
                self.inner
                    .call(job, &Call::complete_multipart(&upload_id, &stored))
                    .await
                    .map(|_| ())
            }
            Err(error) => Err(error),
        };
        match outcome {
            Ok(()) => {
                self.inner.set_open(None);
                Ok((
                    u32::try_from(parts).context("part count exceeds u32")?,
                    None,
                ))
            }
            Err(error) => {
                // Best effort: a leftover upload only costs storage until the
                // bucket's lifecycle rule removes it; the first error matters.
                // It stays marked open until the abort is answered, so a run
                // stopped during the abort still aborts it in its cleanup.
                // The parts were stopped already (`upload_parts`).
                match self.abort_fully(job, &upload_id).await {
                    // A completion whose answer was lost, and whose resend
                    // S3 no longer knew: the object S3 reads back is whole.
                    Ok(Ended::Stored { bytes, .. }) if completing => {
                        self.inner.set_open(None);
                        let note = format!(
                            "S3 CompleteMultipartUpload failed ({error:#}), but S3 holds the archive whole ({bytes} bytes, read back): going on"
                        );
                        return Ok((
                            u32::try_from(parts).context("part count exceeds u32")?,
                            Some(note),
                        ));
                    }
                    Ok(ended) => tracing::debug!("S3 multipart upload ended: {ended:?}"),
                    Err(abort_error) => {
                        tracing::warn!("could not abort the S3 multipart upload: {abort_error:#}");
                    }
                }
                self.inner.set_open(None);
                Err(error)
            }
        }
    }

    /// Sends every part of `layout` (offset and length, in part order)
    /// with at most `concurrency` in flight; returns what S3 stored of
    /// each, in ascending part order, and keeps in `ranges` the digests
    /// each stored part's reads gave.
    async fn upload_parts(
        &self,
        job: &Arc<Job>,
        upload_id: &str,
        size: u64,
        layout: &[(u64, u64)],
        progress: &Progress<'_>,
        ranges: &mut RangeDigests,
    ) -> anyhow::Result<Vec<StoredPart>> {
        let parts = layout.len() as u64;
        let concurrency = self.inner.options.concurrency.max(1);
        let mut in_flight = JoinSet::new();
        let mut next: u64 = 1;
        let mut stored = Vec::new();
        let mut sent: u64 = 0;
        loop {
            while in_flight.len() < concurrency && next <= parts {
                let (offset, len) = layout[(next - 1) as usize];
                let number = u32::try_from(next).context("part number exceeds u32")?;
                let inner = Arc::clone(&self.inner);
                let job = Arc::clone(job);
                let upload_id = upload_id.to_owned();
                let live = self.inner.live.enter();
                in_flight.spawn(async move {
                    let _live = live;
                    let call = Call::upload_part(number, &upload_id, offset, len);
                    let reply = inner.call(&job, &call).await?;
                    let etag = reply
                        .headers
                        .get(reqwest::header::ETAG)
                        .and_then(|v| v.to_str().ok())
                        .filter(|v| !v.is_empty())
                        .ok_or_else(|| anyhow!("S3 stored part {number} but sent no ETag"))?
                        .to_owned();
                    let read = reply.read.ok_or_else(|| {
                        anyhow!("S3 stored part {number} before its body was read to the end")
                    })?;
                    let part = StoredPart {
                        number,
                        etag,
                        checksum_crc32: checksum_text(read.crc32),
                    };
                    anyhow::Ok((part, (offset, len), read.digests))
                });
                next += 1;
            }
            let Some(joined) = in_flight.join_next().await else {
                break;
            };
            let failure = match joined {
                Ok(Ok((part, (offset, len), digests))) => {
                    stored.push(part);
                    if let Some(digests) = digests {
                        ranges.insert((offset, len), digests);
                    }
                    sent += len;
                    progress(sent, size);
                    continue;
                }
                Ok(Err(error)) => error,
                Err(join_error) => anyhow!("an upload task stopped unexpectedly: {join_error}"),
            };
            // Cancel the other parts before the caller aborts the upload, so
            // no part lands after the abort.
            in_flight.shutdown().await;
            return Err(failure);
        }
        stored.sort_by_key(|part| part.number);
        Ok(stored)
    }

    /// Aborts `upload_id` until ListParts shows no part left (at most
    /// [`ABORT_ROUNDS_MAX`] aborts); a first abort answered `NoSuchUpload`
    /// reads the object to tell a completed upload from a vanished one.
    /// Its part requests must be stopped already.
    pub(super) async fn abort_fully(
        &self,
        job: &Arc<Job>,
        upload_id: &str,
    ) -> anyhow::Result<Ended> {
        let abort = Call::abort_multipart(upload_id);
        let list = Call::list_parts(upload_id);
        let mut round = 0;
        loop {
            round += 1;
            match self.inner.call_failing(job, &abort).await {
                Ok(_) => {}
                Err((failure, _)) if failure.s3_code() == Some("NoSuchUpload") && round == 1 => {
                    return self.after_no_such_upload(job, upload_id).await;
                }
                // A later round: the parts found were removed meanwhile.
                Err((failure, _)) if failure.s3_code() == Some("NoSuchUpload") => {
                    return Ok(Ended::Aborted {
                        upload_id: upload_id.to_owned(),
                        rounds: round,
                    });
                }
                Err((failure, tries)) => {
                    return Err(failure.into_error(abort.operation, tries));
                }
            }
            let left = match self.inner.call_failing(job, &list).await {
                Ok(reply) => reply.body.contains("<Part>"),
                Err((failure, _)) if failure.s3_code() == Some("NoSuchUpload") => false,
                Err((failure, _)) => {
                    return Ok(Ended::AbortedUnchecked {
                        upload_id: upload_id.to_owned(),
                        why: format!("S3 ListParts failed: {failure}"),
                    });
                }
            };
            if !left {
                return Ok(Ended::Aborted {
                    upload_id: upload_id.to_owned(),
                    rounds: round,
                });
            }
            if round >= ABORT_ROUNDS_MAX {
                return Err(anyhow!(
                    "S3 still lists parts of the multipart upload {upload_id} after {round} aborts"
                ));
            }
            tracing::debug!("S3 lists parts of {upload_id} after an abort; aborting again");
        }
    }

    /// What an upload S3 does not know is: completed (its object stored),
    /// or gone.
    async fn after_no_such_upload(&self, job: &Arc<Job>, upload_id: &str) -> anyhow::Result<Ended> {
        match self.inner.call_failing(job, &Call::head_object()).await {
            Ok(reply) => {
                let bytes = reply
                    .headers
                    .get(reqwest::header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                if bytes == job.size {
                    Ok(Ended::Stored {
                        upload_id: upload_id.to_owned(),
                        bytes,
                    })
                } else {
                    Err(anyhow!(
                        "S3 knows no multipart upload {upload_id}, and the object s3://{}/{} holds {bytes} bytes where the archive has {}",
                        job.bucket,
                        job.key,
                        job.size
                    ))
                }
            }
            Err((failure, _)) if failure.s3_status() == Some(404) => Ok(Ended::Gone {
                upload_id: upload_id.to_owned(),
            }),
            Err((failure, tries)) => {
                let why = failure.into_error(super::call::Operation::HeadObject, tries);
                Ok(Ended::Unknown {
                    upload_id: upload_id.to_owned(),
                    why: format!("{why:#}"),
                })
            }
        }
    }
}
