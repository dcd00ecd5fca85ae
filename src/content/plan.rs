//! The plan by content: with `skip-unchanged` and a key, each model
//! target going into an environment is hashed and its environment read the
//! way a deploy reads it (`skip::check`); a target whose source already
//! serves is left out of the matrix, so CI does not start its job. A
//! target that cannot be compared (its hash or a read failed, or the
//! plan's time ran out) stays in the matrix with the reason: its job
//! decides again. Without a key the plan cannot read anything and says so.

use std::future::Future;
use std::time::Instant;

use anyhow::anyhow;
use futures_util::{Stream, StreamExt, stream};
use tokio::sync::OnceCell;

use super::skip::{self, Serving, Verdict, Why};
use crate::baseten::{Api, Named, Team};
use crate::budget::{self, Clock, Phase};
use crate::config::{Config, Target};
use crate::net::Network;
use crate::secret::Secret;

/// A planned target: its place in the selection, how it is shown, its
/// resolved config.
pub(crate) struct Planned<'a> {
    pub(crate) index: usize,
    pub(crate) shown: String,
    pub(crate) cfg: &'a Config,
}

/// What the plan learned of one target: left out (the deployment that
/// serves its source), or kept with the reason.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Seen {
    Unchanged(Serving),
    Deploys(String),
}

/// How many targets a plan by content or a drift check reads at once:
/// 50 targets through a 100 ms round trip are decided in about a second
/// (BENCHMARKS.md), and the platform never sees more than this many of
/// our reads in flight.
pub(crate) const TARGETS_AT_ONCE: usize = 16;
// Issue 39: at least 8 targets at a time.
const _: () = assert!(TARGETS_AT_ONCE >= 8);

/// `read` over `items`, at most [`TARGETS_AT_ONCE`] under way at a time,
/// answered in the items' order (so what is said of them reads in order).
pub(crate) fn at_once<I, F, R>(items: I, read: F) -> impl Stream<Item = R::Output>
where
    I: IntoIterator,
    F: FnMut(I::Item) -> R,
    R: Future,
{
    stream::iter(items).map(read).buffered(TARGETS_AT_ONCE)
}

/// The workspace's teams and models, each listed once for all the targets
/// of a plan or a drift check (the first target to need a list reads it;
/// the others wait for that one read).
#[derive(Default)]
pub(crate) struct Workspace {
    teams: OnceCell<Result<Vec<Team>, Why>>,
    models: OnceCell<Result<Vec<Named>, Why>>,
}

impl Workspace {
    /// The id of the model named `name` (in `team`, when named), if
    /// exactly one is visible; several of that name is a reason to deploy
    /// (the job resolves its team), and a drift check's `unknown`.
    pub(crate) async fn model_id(
        &self,
        api: &Api,
        name: &str,
        team: Option<&str>,
    ) -> Result<Option<String>, Why> {
        let team_id = match team {
            None => None,
            Some(t) => {
                let teams = self
                    .teams
                    .get_or_init(|| async {
                        api.teams().await.map_err(|e| Why::TeamsUnread {
                            cause: e.to_string(),
                        })
                    })
                    .await
                    .as_ref()
                    .map_err(Clone::clone)?;
                let found = teams.iter().find(|x| x.name == t);
                Some(
                    found
                        .ok_or_else(|| Why::TeamNotVisible {
                            team: t.to_string(),
                        })?
                        .id
                        .clone(),
                )
            }
        };
        let models = self
            .models
            .get_or_init(|| async {
                api.models(None).await.map_err(|e| Why::ModelsUnread {
                    cause: e.to_string(),
                })
            })
            .await
            .as_ref()
            .map_err(Clone::clone)?;
        let named: Vec<_> = models
            .iter()
            .filter(|m| m.name == name)
            .filter(|m| team_id.is_none() || m.team.as_ref().map(|mt| &mt.id) == team_id.as_ref())
            .collect();
        match named.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one.id.clone())),
            _ => Err(Why::SeveralModels {
                name: name.to_string(),
            }),
        }
    }
}

/// Reads what serves each planned model target with an environment and
/// decides, [`TARGETS_AT_ONCE`] targets at a time (the model list read
/// once for all); `(index in the selection, what was seen)` for each one
/// read, in the selection's order. Every read and hash ends by `deadline`
/// (the plan's, from its budget): what is not done by then deploys.
pub(crate) async fn by_content(
    planned: &[Planned<'_>],
    key: &Secret,
    net: &Network,
    (clock, deadline): (&Clock, Instant),
    say: &dyn Fn(&str),
) -> Vec<(usize, Seen)> {
    let http = net.api_client();
    let workspace = Workspace::default();
    let workspace = &workspace;
    let reads = planned.iter().filter_map(|p| {
        let cfg = p.cfg;
        let (Target::Model { dir, .. }, Some(environment)) =
            (&cfg.target, cfg.environment.as_deref())
        else {
            return None;
        };
        let api = Api::new(http.clone(), cfg.endpoints.clone(), key.clone())
            .on(clock.clone())
            .within(Phase::Setup, deadline);
        let (index, shown) = (p.index, p.shown.clone());
        Some(async move {
            #[expect(
                clippy::disallowed_methods,
                reason = "a timer on the plan's deadline (its budget's Setup phase), through Clock::timer"
            )]
            let verdict = tokio::time::timeout_at(
                clock.timer(deadline).into(),
                compare(&api, workspace, cfg, dir, environment, (clock, deadline)),
            )
            .await
            .unwrap_or(Err(NotCompared::OutOfTime));
            (index, seen(&shown, cfg, environment, verdict))
        })
    });
    let mut seen = Vec::new();
    let mut answers = std::pin::pin!(at_once(reads, |r| r));
    while let Some((index, (s, line))) = answers.next().await {
        say(&line);
        seen.push((index, s));
    }
    seen
}

/// What one comparison shows, with its line.
fn seen(
    shown: &str,
    cfg: &Config,
    environment: &str,
    verdict: Result<(Verdict, String), NotCompared>,
) -> (Seen, String) {
    match verdict {
        Ok((Verdict::Unchanged(serving), hash)) => {
            let line = format!(
                "  unchanged: {shown} ({:?}) is served in {environment} by deployment {} (content hash {}…)",
                cfg.model_name,
                serving.deployment_id,
                skip::short(&hash)
            );
            (Seen::Unchanged(serving), line)
        }
        Ok((Verdict::Deploy { why, .. }, _)) => {
            let line = format!("  deploys: {shown} ({:?}): {why}", cfg.model_name);
            (Seen::Deploys(why.to_string()), line)
        }
        Err(why) => {
            let why = format!("not compared: {why}; its job decides");
            let line = format!("  deploys: {shown} ({:?}): {why}", cfg.model_name);
            (Seen::Deploys(why), line)
        }
    }
}

/// Why a target was not compared: its job decides.
#[derive(Debug, thiserror::Error)]
enum NotCompared {
    #[error("hashing the truss failed ({0:#})")]
    Hash(anyhow::Error),
    #[error("the plan's time budget ran out before it was compared")]
    OutOfTime,
}

/// One target's hash and verdict; `Err` when it could not be hashed. An
/// unchanged target's "promoted at" words only inform: read under a
/// short deadline of their own (`budget::short_read_until`), unread when
/// it passes.
async fn compare(
    api: &Api,
    workspace: &Workspace,
    cfg: &Config,
    dir: &std::path::Path,
    environment: &str,
    (clock, deadline): (&Clock, Instant),
) -> Result<(Verdict, String), NotCompared> {
    let root = dir.to_path_buf();
    let hash = tokio::task::spawn_blocking(move || super::hash(&root))
        .await
        .map_err(|e| anyhow!(e))
        .and_then(|r| r)
        .map_err(NotCompared::Hash)?;
    let verdict = match workspace
        .model_id(api, &cfg.model_name, cfg.team.as_deref())
        .await
    {
        Ok(id) => match skip::check(api, id.as_deref(), environment, &hash.hex).await {
            Verdict::Unchanged(serving) => {
                let until = budget::short_read_until(clock, deadline);
                let short = api.within(Phase::Inform, until);
                let model_id = id.as_deref().expect("a serving deployment has a model");
                let read = skip::promoted_at(&short, model_id, &serving.deployment_id, environment);
                let promoted = tokio::time::timeout(clock.left(until), read)
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .flatten();
                Verdict::Unchanged(Serving {
                    promoted,
                    ..serving
                })
            }
            deploys => deploys,
        },
        Err(why) => Verdict::Deploy {
            why: why.clone(),
            serving: Err(why),
        },
    };
    Ok((verdict, hash.hex))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures_util::StreamExt;

    use super::*;

    /// `at_once` keeps exactly `TARGETS_AT_ONCE` reads under way while
    /// there are more, and answers in the items' order.
    #[tokio::test]
    async fn reads_run_side_by_side_bounded_and_answer_in_order() {
        let (now, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let answers: Vec<usize> = at_once(0..40, |i| {
            let (now, most) = (&now, &most);
            async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                // Later items finish first: the answers keep their order.
                for _ in 0..(40 - i) {
                    tokio::task::yield_now().await;
                }
                now.fetch_sub(1, Ordering::SeqCst);
                i
            }
        })
        .collect()
        .await;
        assert_eq!(answers, (0..40).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), TARGETS_AT_ONCE);
    }
}
