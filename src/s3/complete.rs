//! Completing a multipart upload, and what its cleanup may do once the
//! CompleteMultipartUpload is sent.
//!
//! S3 may take a while to complete an upload (AWS: "processing … could
//! take several minutes"), and what an abort sent meanwhile does is not
//! documented: S3-compatible servers refuse it (s3s-fs: 403 `AccessDenied`)
//! or answer it `NoSuchUpload` and store the object after (moto). So the
//! completion runs in a task of its own, which a dropped upload (a signal,
//! a spent deadline) leaves running, and nothing is aborted until S3 has
//! answered it: then either the object is read back (HEAD), or S3 refused
//! the completion and the upload is aborted until no part is left (a
//! refusal of a retry, once an earlier try may have reached S3 unanswered,
//! is no refusal: S3 may refuse it because it is completing the upload,
//! so the object is read back). With
//! no answer, or one that cannot settle it, the archive may be stored, and
//! the run says so rather than "nothing is left".

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

use super::call::{Call, Operation};
use super::error::AttemptError;
use super::xml::StoredPart;
use super::{Ended, Job, Open, Uploader};

/// The read-back after a completion ends this long before the cleanup's
/// bound, so that what it found (or that it found nothing in time) is told
/// rather than cut off with the rest.
const TELL_MARGIN: Duration = Duration::from_millis(200);

/// What S3's answers to a CompleteMultipartUpload settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Answered {
    /// S3 answered with the object's ETag.
    Completed,
    /// S3 refused it (an invalid part, a denied request…): the upload is
    /// still open, and S3 completes nothing of it.
    Refused,
    /// No answer settles it (`why`): the last try got none from S3, or S3
    /// no longer knew the upload (an earlier try may have completed it).
    /// S3 may have completed it, or be completing it.
    Unsure { why: String },
}

impl Answered {
    /// What the tries of one CompleteMultipartUpload settled: the `last`
    /// try's failure, after `earlier`, why an earlier try left S3 maybe
    /// completing the upload (no answer, a server error). S3 may refuse a
    /// later try because it is completing the upload (s3s-fs answers 403
    /// `AccessDenied`): after such a try a refusal settles nothing.
    fn after(earlier: Option<String>, last: &AttemptError) -> Answered {
        match (Answered::of(last), earlier) {
            (Answered::Refused, Some(why)) => Answered::Unsure {
                why: format!(
                    "an earlier try of its CompleteMultipartUpload left S3 maybe completing it ({why}), and S3 answered a later try {last}"
                ),
            },
            (answered, _) => answered,
        }
    }

    fn of(failure: &AttemptError) -> Answered {
        match (failure.s3_status(), failure.s3_code()) {
            (Some(_), Some("NoSuchUpload")) => Answered::Unsure {
                why: "S3 answered its CompleteMultipartUpload NoSuchUpload (an earlier try may have completed it)".to_owned(),
            },
            (Some(status), _) if (400..500).contains(&status) => Answered::Refused,
            // A server error: S3 may have started completing it.
            (Some(_), _) => Answered::Unsure {
                why: format!("S3 answered its CompleteMultipartUpload {failure}"),
            },
            (None, _) => Answered::Unsure {
                why: format!("its CompleteMultipartUpload got no answer from S3 ({failure})"),
            },
        }
    }
}

/// A CompleteMultipartUpload sent: the request runs in a task of its own,
/// which outlives the upload that sent it, so the run's cleanup waits for
/// its answer instead of aborting an upload S3 may be completing.
pub(super) struct Completing {
    /// `None` until S3's answers settle something.
    answer: watch::Receiver<Option<Answered>>,
    task: AbortHandle,
}

impl Completing {
    /// Whether its answer has yet to come.
    pub(super) fn unanswered(&self) -> bool {
        self.answer.borrow().is_none()
    }

    /// Its answer, awaited `wait` at most; `None` when none came (its
    /// request is then cut: the run says the archive may be stored).
    async fn answer_within(&self, wait: Duration) -> Option<Answered> {
        let mut answer = self.answer.clone();
        let answered = tokio::time::timeout(wait, async {
            answer.wait_for(Option::is_some).await.ok()?.clone()
        })
        .await;
        match answered {
            Ok(answered) => answered,
            Err(_) => {
                self.task.abort();
                None
            }
        }
    }
}

/// Why a completion did not store the archive.
pub(super) enum Completion {
    /// S3 refused it: the upload is to be aborted.
    Refused(anyhow::Error),
    /// S3 may have completed it, or be completing it, and the object does
    /// not read back whole: nothing may be aborted, and the error says the
    /// archive may be stored.
    Unsettled(anyhow::Error),
}

/// [`Ended::Stored`] when S3 holds `bytes`, the archive's size.
pub(super) fn stored_whole(job: &Job, upload_id: &str, bytes: u64) -> anyhow::Result<Ended> {
    if bytes == job.size {
        Ok(Ended::Stored {
            upload_id: upload_id.to_owned(),
            location: job.location(),
            bytes,
        })
    } else {
        Err(anyhow::anyhow!(
            "S3 knows no multipart upload {upload_id} open, and the object {} holds {bytes} bytes where the archive has {}",
            job.location(),
            job.size
        ))
    }
}

impl Uploader {
    /// Completes `upload_id` with the `stored` parts; `Ok` with a note
    /// for the user when the answer was lost but the object reads back
    /// whole.
    pub(super) async fn complete(
        &self,
        job: &Arc<Job>,
        upload_id: &str,
        stored: &[StoredPart],
    ) -> Result<Option<String>, Completion> {
        let task = self.send_completion(job, upload_id, stored);
        let (answered, result) = match task.await {
            Ok(done) => done,
            Err(stopped) => (
                Answered::Unsure {
                    why: format!("its CompleteMultipartUpload's task stopped ({stopped})"),
                },
                Err(anyhow::anyhow!(
                    "the CompleteMultipartUpload's task stopped: {stopped}"
                )),
            ),
        };
        let error = match (answered, result) {
            (_, Ok(())) => return Ok(None),
            (Answered::Refused, Err(error)) => return Err(Completion::Refused(error)),
            (_, Err(error)) => error,
        };
        match self.read_completed(job).await {
            Ok(bytes) => Ok(Some(format!(
                "S3 CompleteMultipartUpload failed ({error:#}), but S3 holds the archive whole ({bytes} bytes, read back): going on"
            ))),
            Err(read) => Err(Completion::Unsettled(error.context(format!(
                "the archive may be stored at {}: {read}; S3 may be completing it, so nothing was aborted",
                job.location()
            )))),
        }
    }

    /// Sends the CompleteMultipartUpload in a task of its own, marked on
    /// the open upload, so a run that drops the upload meanwhile still
    /// hears S3's answer in its cleanup.
    fn send_completion(
        &self,
        job: &Arc<Job>,
        upload_id: &str,
        stored: &[StoredPart],
    ) -> JoinHandle<(Answered, anyhow::Result<()>)> {
        let (tell, answer) = watch::channel(None);
        let inner = Arc::clone(&self.inner);
        let job = Arc::clone(job);
        let call = Call::complete_multipart(upload_id, stored);
        let task = tokio::spawn(async move {
            // Why an earlier try may have left S3 completing the upload.
            let mut earlier: Option<String> = None;
            let sent = inner
                .call_failing_seen(&job, &call, |failure| {
                    if let (None, Answered::Unsure { why }) = (&earlier, Answered::of(failure)) {
                        earlier = Some(why);
                    }
                })
                .await;
            let (answered, result) = match sent {
                Ok(_) => (Answered::Completed, Ok(())),
                Err((failure, tries)) => (
                    Answered::after(earlier, &failure),
                    Err(failure.into_error(call.operation, tries)),
                ),
            };
            tell.send_replace(Some(answered.clone()));
            (answered, result)
        });
        self.inner.set_completing(Completing {
            answer,
            task: task.abort_handle(),
        });
        task
    }

    /// The cleanup of an upload dropped after its CompleteMultipartUpload
    /// was sent, with `left` until the cleanup's bound: its answer is
    /// awaited three quarters of it at most, then the object is read back
    /// (completed, or unsure) within the rest, or the upload aborted
    /// (refused); no answer: it may be stored, and nothing is aborted.
    pub(super) async fn after_completion(
        &self,
        open: &Open,
        completing: &Completing,
        left: Duration,
    ) -> anyhow::Result<Ended> {
        let (job, upload_id) = (&open.job, open.upload_id.as_str());
        let wait = left * 3 / 4;
        let read_within = (left / 4).saturating_sub(TELL_MARGIN);
        let why = match completing.answer_within(wait).await {
            Some(Answered::Refused) => return self.abort_fully(job, upload_id).await,
            Some(Answered::Completed) => {
                "S3 answered its CompleteMultipartUpload with success".to_owned()
            }
            Some(Answered::Unsure { why }) => why,
            None => {
                return Ok(Ended::MaybeStored {
                    upload_id: upload_id.to_owned(),
                    location: job.location(),
                    why: format!(
                        "S3 had not answered its CompleteMultipartUpload after {:.1} s of waiting",
                        wait.as_secs_f64()
                    ),
                });
            }
        };
        let read = tokio::time::timeout(read_within, self.read_completed(job))
            .await
            .unwrap_or_else(|_| Err("the object's read-back got no answer in time".to_owned()));
        Ok(match read {
            Ok(bytes) => Ended::Stored {
                upload_id: upload_id.to_owned(),
                location: job.location(),
                bytes,
            },
            Err(read) => Ended::MaybeStored {
                upload_id: upload_id.to_owned(),
                location: job.location(),
                why: format!("{why}, and {read}"),
            },
        })
    }

    /// The object of an upload S3 completed, or may have, read back: its
    /// size when it is whole, else what the read found.
    async fn read_completed(&self, job: &Arc<Job>) -> Result<u64, String> {
        match self.read_object(job).await {
            Ok(Some(bytes)) if bytes == job.size => Ok(bytes),
            Ok(Some(bytes)) => Err(format!(
                "the object reads back {bytes} bytes where the archive has {}",
                job.size
            )),
            Ok(None) => Err("the object does not read back (HEAD: 404)".to_owned()),
            Err(read) => Err(format!("the object could not be read back: {read:#}")),
        }
    }

    /// The size of the object under the upload's key, by S3's HEAD; `None`
    /// when S3 holds none (404).
    pub(super) async fn read_object(&self, job: &Arc<Job>) -> anyhow::Result<Option<u64>> {
        match self.inner.call_failing(job, &Call::head_object()).await {
            Ok(reply) => Ok(Some(
                reply
                    .headers
                    .get(reqwest::header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            )),
            Err((failure, _)) if failure.s3_status() == Some(404) => Ok(None),
            Err((failure, tries)) => Err(failure.into_error(Operation::HeadObject, tries)),
        }
    }
}

#[cfg(test)]
mod tests {
    use reqwest::StatusCode;

    use super::*;
    use crate::s3::wire;
    use crate::s3::xml::S3Error;

    fn s3(status: u16, code: Option<&str>) -> AttemptError {
        AttemptError::S3 {
            status: StatusCode::from_u16(status).unwrap(),
            error: S3Error {
                code: code.map(str::to_owned),
                message: None,
                region: None,
            },
            header_region: None,
            retry_after: None,
        }
    }

    /// Only S3's own 4xx refusal (but NoSuchUpload) lets the upload be
    /// aborted: anything else may mean S3 completed it or is completing it.
    #[test]
    fn only_a_refusal_by_s3_lets_the_upload_be_aborted() {
        let refused = |failure: AttemptError| Answered::of(&failure) == Answered::Refused;
        assert!(refused(s3(400, Some("InvalidPart"))));
        assert!(refused(s3(400, Some("EntityTooSmall"))));
        assert!(refused(s3(403, Some("AccessDenied"))));
        assert!(refused(s3(400, None)));
        assert!(!refused(s3(404, Some("NoSuchUpload"))));
        assert!(!refused(s3(500, Some("InternalError"))));
        assert!(!refused(s3(200, Some("InternalError"))));
        assert!(!refused(s3(503, Some("SlowDown"))));
        assert!(!refused(AttemptError::Wire(wire::Error::Exchange(
            std::io::Error::other("reset")
        ))));
        assert!(!refused(AttemptError::NotItsAnswer("a gateway's page")));
    }

    /// A retried completion: once an earlier try may have reached S3 and
    /// got no answer (or a server error), a later try's 4xx may be S3
    /// refusing it because it is completing the upload (s3s-fs: 403
    /// `AccessDenied`): unsure, never a refusal that lets it be aborted.
    #[test]
    fn a_refusal_after_a_try_that_may_have_reached_s3_is_unsure() {
        let unanswered = || match Answered::of(&AttemptError::Wire(wire::Error::Exchange(
            std::io::Error::other("reset"),
        ))) {
            Answered::Unsure { why } => Some(why),
            other => panic!("{other:?}"),
        };
        let denied = s3(403, Some("AccessDenied"));
        assert_eq!(Answered::after(None, &denied), Answered::Refused);
        let after = Answered::after(unanswered(), &denied);
        let Answered::Unsure { why } = after else {
            panic!("{after:?}")
        };
        assert!(
            why.contains("AccessDenied") && why.contains("reset"),
            "{why}"
        );
        assert!(matches!(
            Answered::after(unanswered(), &s3(400, Some("InvalidPart"))),
            Answered::Unsure { .. }
        ));
        // What settles on its own stays settled.
        assert_eq!(
            Answered::after(unanswered(), &s3(404, Some("NoSuchUpload"))),
            Answered::of(&s3(404, Some("NoSuchUpload")))
        );
    }
}
