//! Reads that only inform (SPEC, "Reads are of two kinds"): the one way to
//! run a read whose answer nothing is decided on — the serving
//! deployment's config for the summary's diff (and the environment list
//! that names it, without `skip-unchanged`), the "promoted at" words of
//! an unchanged run, the secrets pre-check, the hourly price (`price`).
//!
//! Such a read runs on a task of its own, started at once, on a platform
//! handle whose deadline is [`Phase::Inform`]'s ([`SHORT_READ_SECS`] from
//! its start): it never holds what the flow does meanwhile. When it fails
//! or runs out of time its output stays empty and it is said: [`NotRead`]
//! ("not read: timed out after 5 s", or the failure), in the log and in
//! the summary.
//!
//! Two ways to take its outcome, and no other:
//! - [`for_report`]: the flow gets nothing back. The outcome goes to the
//!   report — applied as soon as it is in when the flow passes a point
//!   that cannot wait ([`tell_finished`], which never awaits), or by the
//!   report after the flow and its cleanup ([`settle_for_report`], called
//!   once, by `execute`). No mutation can await it.
//! - [`start`] and [`Informing::settle`], awaited in place: only where no
//!   mutation follows (an unchanged run's line).
//!
//! `tests/it/structure.rs` (`informing`) holds this: it lists where `settle`
//! may be called and fails when a file that calls it names a platform
//! mutation, and when the report's settle is called anywhere but in
//! `execute`, after its cleanup. The black-box tests
//! (`tests/it/informing.rs`) hold each read open and check the create
//! goes out first.
//!
//! A read that decides (the environment before a promotion, the metrics a
//! gate judges, the reads of a cleanup or a rollback) is not one of
//! these: it runs under its phase and fails closed where it is used.

use std::future::Future;

use futures_util::FutureExt;
use tokio::task::JoinHandle;

use super::Ctx;
use crate::baseten::Api;
use crate::budget::{Phase, SHORT_READ_SECS};

/// Why an informing read gave nothing; shown as `not read: {why}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NotRead(String);

impl NotRead {
    fn timed_out() -> NotRead {
        NotRead(format!("timed out after {SHORT_READ_SECS} s"))
    }
}

impl std::fmt::Display for NotRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not read: {}", self.0)
    }
}

/// An informing read's outcome.
pub(crate) type Informed<T> = Result<T, NotRead>;

/// An informing read under way on its own task.
#[must_use = "an informing read is settled where no mutation follows, or given to the report"]
pub(crate) struct Informing<T> {
    task: JoinHandle<Informed<T>>,
}

impl<T> Informing<T> {
    /// Its outcome: at most what is left of its own short deadline.
    pub(crate) async fn settle(self) -> Informed<T> {
        joined(self.task.await)
    }
}

fn joined<T>(r: Result<Informed<T>, tokio::task::JoinError>) -> Informed<T> {
    r.unwrap_or_else(|e| Err(NotRead(format!("its task ended ({e})"))))
}

/// Runs `read` on its own task, on a platform handle under
/// [`Phase::Inform`]'s deadline, and answers its outcome through `then`
/// on that task. A read that fails at or past its deadline timed out,
/// whatever the failure says.
fn spawn<T, E, F, R>(
    ctx: &Ctx<'_>,
    read: impl FnOnce(Api) -> F,
    then: impl FnOnce(Informed<T>) -> R + Send + 'static,
) -> JoinHandle<R>
where
    F: Future<Output = Result<T, E>> + Send + 'static,
    E: std::fmt::Display,
    T: Send + 'static,
    R: Send + 'static,
{
    let until = ctx.until(Phase::Inform);
    let api = ctx.api.within(Phase::Inform, until);
    let clock = ctx.budget.clock().clone();
    let left = ctx.left(until);
    let reading = read(api);
    tokio::spawn(async move {
        let out = match tokio::time::timeout(left, reading).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) if clock.left(until).is_zero() => Err(NotRead::timed_out()),
            Ok(Err(why)) => Err(NotRead(why.to_string())),
            Err(_) => Err(NotRead::timed_out()),
        };
        then(out)
    })
}

/// Starts an informing read whose outcome is awaited in place
/// ([`Informing::settle`]), where no mutation follows.
pub(crate) fn start<T, E, F>(ctx: &Ctx<'_>, read: impl FnOnce(Api) -> F) -> Informing<T>
where
    F: Future<Output = Result<T, E>> + Send + 'static,
    E: std::fmt::Display,
    T: Send + 'static,
{
    Informing {
        task: spawn(ctx, read, |out| out),
    }
}

/// What the report does with an informing read's outcome.
type Tell = Box<dyn for<'a, 'b> FnOnce(&'a Ctx<'b>) + Send>;

/// One read for the report: what it is (for "not read" after a cancel)
/// and its task, which answers what to tell.
struct ForReport {
    what: String,
    task: JoinHandle<Tell>,
}

/// The informing reads only the report takes, kept in the run's state.
#[derive(Default)]
pub(crate) struct Pending(Vec<ForReport>);

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|r| &r.what))
            .finish()
    }
}

/// Starts an informing read (`what`, for messages) whose outcome only the
/// report takes: `tell` gets it with the run's context, once it is in and
/// the flow passes [`tell_finished`], or at [`settle_for_report`]. The
/// flow gets nothing back, so nothing it does can wait for the read.
pub(crate) fn for_report<T, E, F>(
    ctx: &Ctx<'_>,
    what: &str,
    read: impl FnOnce(Api) -> F,
    tell: impl for<'a, 'b> FnOnce(Informed<T>, &'a Ctx<'b>) + Send + 'static,
) where
    F: Future<Output = Result<T, E>> + Send + 'static,
    E: std::fmt::Display,
    T: Send + 'static,
{
    let task = spawn(ctx, read, move |out| -> Tell {
        Box::new(move |ctx: &Ctx<'_>| tell(out, ctx))
    });
    ctx.state.lock().unwrap().informing.0.push(ForReport {
        what: what.to_string(),
        task,
    });
}

/// Tells what the reads already in have to say; never waits for one.
pub(crate) fn tell_finished(ctx: &Ctx<'_>) {
    let all = std::mem::take(&mut ctx.state.lock().unwrap().informing.0);
    let mut waiting = Vec::new();
    let mut tells = Vec::new();
    for r in all {
        if !r.task.is_finished() {
            waiting.push(r);
            continue;
        }
        match r.task.now_or_never() {
            Some(Ok(tell)) => tells.push(tell),
            Some(Err(e)) => ctx.note(format!("{}: not read: its task ended ({e})", r.what)),
            None => {}
        }
    }
    ctx.state.lock().unwrap().informing.0.extend(waiting);
    for tell in tells {
        tell(ctx);
    }
}

/// The report's settle, after the flow and its cleanup: every informing
/// read still under way is awaited (each at most what is left of its own
/// deadline) and told. After a signal nothing is awaited: a read not in
/// yet is stopped and said not read.
pub(crate) async fn settle_for_report(ctx: &Ctx<'_>) {
    tell_finished(ctx);
    let all = std::mem::take(&mut ctx.state.lock().unwrap().informing.0);
    let cancelled = matches!(
        ctx.budget.allowance(),
        crate::budget::Allowance::Signal { .. }
    );
    for r in all {
        if cancelled {
            r.task.abort();
            ctx.note(format!(
                "{}: not read: the run was cancelled before it answered",
                r.what
            ));
            continue;
        }
        match r.task.await {
            Ok(tell) => tell(ctx),
            Err(e) => ctx.note(format!("{}: not read: its task ended ({e})", r.what)),
        }
    }
}
