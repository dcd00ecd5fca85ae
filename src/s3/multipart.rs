//! A multipart upload: create it, send the parts with bounded concurrency,
//! complete it, and abort it if anything fails so no part is left behind.
//!
//! An abort is not the end of the parts by itself: AWS documents that a
//! part upload in progress during AbortMultipartUpload may still succeed,
//! and that the abort may need repeating until ListParts shows none. So
//! the part requests are stopped first ([`Parts`]): a part still sending
//! its body is cut (S3 discards a body that never ended), but a part whose
//! whole body is out gets its answer, within a bound, since S3 may store it
//! whatever the client does; then the upload is aborted and listed, and
//! aborted again while parts remain. An abort answered `NoSuchUpload` may
//! mean the upload had completed: the object is read (HEAD) before saying
//! what is left.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use super::call::Call;
use super::complete::{Completion, stored_whole};
use super::payload::{Delivery, checksum_text};
use super::xml::{StoredPart, xml_text};
use super::{Ended, Job, Open, Progress, Uploader};
use crate::archive::ByRange;

/// Aborts sent for one upload at most: each waits for S3's answer and a
/// listing, and a part lands after an abort only if it was in flight then.
const ABORT_ROUNDS_MAX: u32 = 5;

/// How long a stopped upload waits for the answers to parts whose whole
/// body is out before it cuts them and aborts. S3 answers a part as soon
/// as it stored it; one that takes longer is cut, and the abort rounds
/// find it if it lands.
pub(super) const DRAIN_WAIT: Duration = Duration::from_secs(10);

/// How long a cut part task may take to end: it ends at its next await,
/// at once unless a read of the disk holds its thread.
const CUT_WAIT: Duration = Duration::from_millis(500);

/// The part requests of one multipart upload. Each runs in a task of its
/// own, which a dropped upload does not take down with it: stopping (a part
/// failed, or the run dropped the upload) cuts at once the parts still
/// sending, and [`Parts::drain`] lets those whose body is out get their
/// answer first.
#[derive(Default)]
pub(super) struct Parts {
    stopping: AtomicBool,
    stop: Notify,
    running: AtomicUsize,
    idle: Notify,
    /// Every part task started, to cut those left when the drain's time is up.
    tasks: Mutex<Vec<AbortHandle>>,
}

impl Parts {
    /// Stops the upload's parts: a part still sending its body is cut, a
    /// part awaiting the answer to its whole body gets it (and is not sent
    /// again).
    pub(super) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.stop.notify_waiters();
    }

    /// Returns when the part whose body `delivery` follows must be cut:
    /// the upload stopped, and none of its body is out whole awaiting an
    /// answer.
    async fn cut(&self, delivery: &Delivery) {
        loop {
            let stop = self.stop.notified();
            let changed = delivery.changed();
            let mut stop = std::pin::pin!(stop);
            stop.as_mut().enable();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            if self.stopping.load(Ordering::SeqCst) && !delivery.body_out() {
                return;
            }
            tokio::select! {
                () = stop => {}
                () = changed => {}
            }
        }
    }

    /// Stops the parts and returns once none runs: those awaiting the
    /// answer to a whole body get until `until`, then every part left is
    /// cut (and gets [`CUT_WAIT`] to end; the abort goes out regardless).
    #[expect(
        clippy::disallowed_methods,
        reason = "the drain's timer, on a deadline handed over as a timer"
    )]
    pub(super) async fn drain(&self, until: Instant) {
        self.stop();
        if tokio::time::timeout_at(until.into(), self.stopped())
            .await
            .is_err()
        {
            for task in self.tasks.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                task.abort();
            }
            let _ = tokio::time::timeout(CUT_WAIT, self.stopped()).await;
        }
    }

    /// Returns once no part task runs.
    async fn stopped(&self) {
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

    fn enter(self: &Arc<Self>) -> Running {
        self.running.fetch_add(1, Ordering::SeqCst);
        Running(Arc::clone(self))
    }

    fn track(&self, task: AbortHandle) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }
}

/// Held by a part task; dropped when it ends or is cut.
struct Running(Arc<Parts>);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// Stops the parts when the upload that sent them ends, whether it
/// returned or was dropped (a signal, a spent deadline): the run's cleanup
/// then drains and aborts them ([`Uploader::abort_unfinished`]).
struct StopOnDrop(Arc<Parts>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

impl Uploader {
    pub(super) async fn upload_multipart(
        &self,
        job: &Arc<Job>,
        size: u64,
        layout: &[(u64, u64)],
        progress: &Progress<'_>,
        ranges: &mut ByRange,
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
        let parts_sent = Arc::new(Parts::default());
        self.inner.set_open(Some(Open {
            job: Arc::clone(job),
            upload_id: upload_id.clone(),
            parts: Arc::clone(&parts_sent),
            completing: None,
        }));
        let count = u32::try_from(parts).context("part count exceeds u32")?;
        let sent = self
            .upload_parts(
                job,
                &upload_id,
                &parts_sent,
                (size, layout),
                progress,
                ranges,
            )
            .await;
        let error = match sent {
            Ok(stored) => match self.complete(job, &upload_id, &stored).await {
                Ok(note) => {
                    self.inner.set_open(None);
                    return Ok((count, note));
                }
                Err(Completion::Refused(error)) => error,
                Err(Completion::Unsettled(error)) => {
                    self.inner.set_open(None);
                    return Err(error);
                }
            },
            Err(error) => error,
        };
        // Best effort: a leftover upload only costs storage until the
        // bucket's lifecycle rule removes it; the first error matters. It
        // stays marked open until the abort is answered, so a run stopped
        // during the abort still aborts it in its cleanup. The parts were
        // stopped and drained already (`upload_parts`), and a completion
        // was answered: S3 completes nothing while it is aborted.
        match self.abort_fully(job, &upload_id).await {
            Ok(ended) => tracing::debug!("S3 multipart upload ended: {ended:?}"),
            Err(abort_error) => {
                tracing::warn!("could not abort the S3 multipart upload: {abort_error:#}");
            }
        }
        self.inner.set_open(None);
        Err(error)
    }

    /// Sends every part of `layout` (offset and length, in part order, of
    /// an archive of `size` bytes) with at most `concurrency` in flight,
    /// each in a task `parts` follows; returns what S3 stored of each, in
    /// ascending part order, and keeps in `ranges` the digests each stored
    /// part's reads gave. On a failure the other parts are stopped and
    /// drained before it returns; dropped, it leaves that to the run's
    /// cleanup ([`Uploader::abort_unfinished`]).
    async fn upload_parts(
        &self,
        job: &Arc<Job>,
        upload_id: &str,
        parts: &Arc<Parts>,
        (size, layout): (u64, &[(u64, u64)]),
        progress: &Progress<'_>,
        ranges: &mut ByRange,
    ) -> anyhow::Result<Vec<StoredPart>> {
        let _stop = StopOnDrop(Arc::clone(parts));
        let count = layout.len() as u64;
        let concurrency = self.inner.options.concurrency.max(1);
        // Handles, not a JoinSet: dropping them leaves the tasks running,
        // so a part whose body is out can still be drained.
        let mut in_flight = FuturesUnordered::new();
        let mut next: u64 = 1;
        let mut stored = Vec::new();
        let mut sent: u64 = 0;
        loop {
            while in_flight.len() < concurrency && next <= count {
                let (offset, len) = layout[(next - 1) as usize];
                let number = u32::try_from(next).context("part number exceeds u32")?;
                let inner = Arc::clone(&self.inner);
                let job = Arc::clone(job);
                let upload_id = upload_id.to_owned();
                let running = parts.enter();
                let stopping = Arc::clone(parts);
                let task = tokio::spawn(async move {
                    let _running = running;
                    let delivery = Arc::new(Delivery::default());
                    let call =
                        Call::upload_part(number, &upload_id, (offset, len), Arc::clone(&delivery));
                    // Polled first: an answer that came is taken before a
                    // stop that came with it.
                    let reply = tokio::select! {
                        biased;
                        reply = inner.call(&job, &call) => reply?,
                        () = stopping.cut(&delivery) => {
                            return Err(anyhow!("part {number} was stopped with the upload"));
                        }
                    };
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
                parts.track(task.abort_handle());
                in_flight.push(task);
                next += 1;
            }
            let Some(joined) = in_flight.next().await else {
                break;
            };
            let failure = match joined {
                Ok(Ok((part, (offset, len), digests))) => {
                    stored.push(part);
                    if let Some(digests) = digests {
                        ranges.stored((offset, len), digests);
                    }
                    sent += len;
                    progress(sent, size);
                    continue;
                }
                Ok(Err(error)) => error,
                Err(join_error) => anyhow!("an upload task stopped unexpectedly: {join_error}"),
            };
            // Stop the other parts before the caller aborts the upload: cut
            // those still sending, and let those whose body is out get
            // their answer, so none lands after the abort.
            #[expect(
                clippy::disallowed_methods,
                reason = "after a failed part the others' answers are awaited at most DRAIN_WAIT; the upload phase's own timer still ends it"
            )]
            parts.drain(Instant::now() + DRAIN_WAIT).await;
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
                    return Err(failure
                        .into_error(abort.operation, tries)
                        .context(format!("S3 did not abort the multipart upload {upload_id}")));
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
        match self.read_object(job).await {
            Ok(Some(bytes)) => stored_whole(job, upload_id, bytes),
            Ok(None) => Ok(Ended::Gone {
                upload_id: upload_id.to_owned(),
            }),
            Err(why) => Ok(Ended::Unknown {
                upload_id: upload_id.to_owned(),
                why: format!("{why:#}"),
            }),
        }
    }
}
