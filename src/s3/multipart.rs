//! A multipart upload: create it, send the parts with bounded concurrency,
//! complete it, and abort it if anything fails so no part is left behind.

use std::sync::Arc;

use anyhow::{Context as _, anyhow};
use tokio::task::JoinSet;

use super::call::Call;
use super::payload::checksum_text;
use super::xml::{StoredPart, xml_text};
use super::{Job, Progress, Uploader};

impl Uploader {
    pub(super) async fn upload_multipart(
        &self,
        job: &Arc<Job>,
        size: u64,
        layout: &[(u64, u64)],
        progress: &Progress<'_>,
    ) -> anyhow::Result<u32> {
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
        let outcome = match self
            .upload_parts(job, &upload_id, size, layout, progress)
            .await
        {
            Ok(stored) => self
                .inner
                .call(job, &Call::complete_multipart(&upload_id, &stored))
                .await
                .map(|_| ()),
            Err(error) => Err(error),
        };
        match outcome {
            Ok(()) => {
                self.inner.set_open(None);
                u32::try_from(parts).context("part count exceeds u32")
            }
            Err(error) => {
                // Best effort: a leftover upload only costs storage until the
                // bucket's lifecycle rule removes it; the first error matters.
                // It stays marked open until the abort is answered, so a run
                // stopped during the abort still aborts it in its cleanup.
                if let Err(abort_error) = self
                    .inner
                    .call(job, &Call::abort_multipart(&upload_id))
                    .await
                {
                    tracing::warn!("could not abort the S3 multipart upload: {abort_error:#}");
                }
                self.inner.set_open(None);
                Err(error)
            }
        }
    }

    /// Sends every part of `layout` (offset and length, in part order)
    /// with at most `concurrency` in flight; returns what S3 stored of
    /// each, in ascending part order.
    async fn upload_parts(
        &self,
        job: &Arc<Job>,
        upload_id: &str,
        size: u64,
        layout: &[(u64, u64)],
        progress: &Progress<'_>,
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
                in_flight.spawn(async move {
                    let call = Call::upload_part(number, &upload_id, offset, len);
                    let reply = inner.call(&job, &call).await?;
                    let etag = reply
                        .headers
                        .get(reqwest::header::ETAG)
                        .and_then(|v| v.to_str().ok())
                        .filter(|v| !v.is_empty())
                        .ok_or_else(|| anyhow!("S3 stored part {number} but sent no ETag"))?
                        .to_owned();
                    let crc32 = reply.checksum.ok_or_else(|| {
                        anyhow!("S3 stored part {number} before its body was read to the end")
                    })?;
                    let part = StoredPart {
                        number,
                        etag,
                        checksum_crc32: checksum_text(crc32),
                    };
                    anyhow::Ok((part, len))
                });
                next += 1;
            }
            let Some(joined) = in_flight.join_next().await else {
                break;
            };
            let failure = match joined {
                Ok(Ok((part, len))) => {
                    stored.push(part);
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
}
