//! The rollback's one decision: from a fresh reading of the environment,
//! what the rollback does next — read again, send one request, or end and
//! say how. A pure function over typed values (the reading, what the
//! rollback puts back, what it sent, the target's [`Kind`] and the time it
//! has); `rollback` performs its answer and reports what the next read
//! shows.

use crate::budget::Allowance;
use crate::kind::Kind;
use crate::promotion::Env;

/// Each kind of rollback request is sent at most this often.
pub(super) const ROLLBACK_SENDS_MAX: u32 = 3;
/// The promotion status of a cancelled promotion moving traffic back.
const RAMPING_DOWN: &str = "RAMPING_DOWN";

/// The deployments a rollback is about: the one it puts back, and over
/// which.
#[derive(Clone, Copy, Debug)]
pub(super) struct RollbackDeployments<'a> {
    /// The deployment this run promoted.
    pub(super) ours: &'a str,
    /// The deployment to put back.
    pub(super) prev: &'a str,
    /// The id our promote of `prev` answered (the platform may copy it).
    pub(super) back: Option<&'a str>,
    /// Our own promote's answer came: `ours` is known to be this run's.
    /// Without it, a deployment that displaced ours cannot be told from a
    /// platform copy of it.
    pub(super) ours_known: bool,
}

/// What the rollback has sent so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Sent {
    pub(super) cancels: u32,
    pub(super) promotes: u32,
}

impl Sent {
    /// Something was sent: the rollback acted.
    pub(super) fn acted(self) -> bool {
        self.cancels + self.promotes > 0
    }

    /// Counts the request `s` sends.
    pub(super) fn count(&mut self, s: &Step) {
        match s {
            Step::Cancel { .. } => self.cancels += 1,
            Step::ChainInterrupt | Step::ChainEndOurs | Step::PromoteBack => self.promotes += 1,
            Step::Wait | Step::End(_) => {}
        }
    }
}

/// The rollback's next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Done, one way or another; [`Ending::text`] says how.
    End(Ending),
    /// A cancelled promotion is moving traffic back, or our promote of the
    /// previous deployment is under way: read again after the poll interval.
    Wait,
    /// Our promotion is in flight (models): cancel it; `force` only for a
    /// rolling promotion when a signal left seconds.
    Cancel { force: bool },
    /// Our promotion is in flight (chains, which have no cancel): promote
    /// the previous deployment again, and if the platform refuses while one
    /// is in flight, deactivate our candidate so that it ends.
    ChainInterrupt,
    /// Our chain promotion is in flight but the environment serves another
    /// client's deployment: only end ours (deactivate our candidate), never
    /// promote the previous one over theirs.
    ChainEndOurs,
    /// Ours serves: promote the previous deployment back.
    PromoteBack,
}

/// How a rollback ended; [`Ending::text`] says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Ending {
    /// Nothing had to be sent: the previous deployment still serves.
    Stayed,
    /// The previous deployment serves again; `as_` when the platform
    /// re-created it under another id.
    Back { as_: Option<String> },
    /// Another deployment took the environment, and the promote's answer
    /// never came: it cannot be told from ours.
    Unconfirmed { by: String, seen: String },
    /// Another client moved the environment: left to them.
    Displaced { by: String, seen: String },
    /// Each kind of request was sent [`ROLLBACK_SENDS_MAX`] times.
    TriedOut { seen: String },
    /// The rollback's time ran out; `seen` is the last read.
    Unfinished { seen: String },
    /// The environment could not be read (`seen`: the last read, if any).
    Unreadable { err: String, seen: Option<String> },
    /// A request of the rollback failed for good.
    Failed { why: String },
}

/// The rollback's next step over the reading `e` of the environment `env`:
/// done once `deployments.prev` (or the copy our promote answered) serves with
/// nothing moving; our promotion in flight is cancelled (a chain's ended:
/// chains have no cancel), force-cancelled only when rolling and a signal
/// left seconds; ours serving is replaced by `deployments.prev`; another client's
/// move is left to them. What was `sent` caps each kind of request.
pub(super) fn next_step(
    e: &Env,
    env: &str,
    deployments: RollbackDeployments<'_>,
    sent: Sent,
    kind: Kind,
    time: Allowance,
) -> Step {
    let RollbackDeployments {
        ours,
        prev,
        back,
        ours_known,
    } = deployments;
    let seen = || e.describe(env);
    let restored = |id: &str| id == prev || Some(id) == back;
    let displaced = |by: &str| {
        let by = by.to_string();
        Step::End(match ours_known {
            true => Ending::Displaced { by, seen: seen() },
            false => Ending::Unconfirmed { by, seen: seen() },
        })
    };
    let capped = |step: Step, used: u32| match used < ROLLBACK_SENDS_MAX {
        true => step,
        false => Step::End(Ending::TriedOut { seen: seen() }),
    };
    if e.settled_on(prev) || back.is_some_and(|b| e.settled_on(b)) {
        if !sent.acted() {
            return Step::End(Ending::Stayed);
        }
        let serving = e.current.clone().unwrap_or_default();
        return Step::End(Ending::Back {
            as_: (serving != prev).then_some(serving),
        });
    }
    if let Some(c) = e.candidate.as_deref() {
        if restored(c) {
            return Step::Wait;
        }
        if c != ours {
            return displaced(c);
        }
        if kind == Kind::Chain {
            let foreign_current = e
                .current
                .as_deref()
                .is_some_and(|cur| !restored(cur) && cur != ours);
            let step = match foreign_current {
                true => Step::ChainEndOurs,
                false => Step::ChainInterrupt,
            };
            return capped(step, sent.promotes);
        }
        let force = match &e.in_progress {
            Some(f) if f.status.eq_ignore_ascii_case(RAMPING_DOWN) => return Step::Wait,
            Some(f) => matches!(time, Allowance::Signal { .. }) && f.rolling == Some(true),
            None => false,
        };
        return capped(Step::Cancel { force }, sent.cancels);
    }
    match e.current.as_deref() {
        Some(cur) if cur == ours => capped(Step::PromoteBack, sent.promotes),
        // A cancelled promotion ramping down with no candidate shown.
        Some(cur) if restored(cur) => Step::Wait,
        Some(cur) => displaced(cur),
        None => displaced("no deployment"),
    }
}

impl Ending {
    /// Whether traffic was moved back.
    pub(super) fn rolled_back(&self) -> bool {
        matches!(self, Ending::Back { .. })
    }

    /// The ending in words; `prev` is the deployment put back, `time` what
    /// the rollback had.
    pub(super) fn text(&self, env: &str, prev: &str, time: Allowance) -> String {
        match self {
            Ending::Stayed => format!("traffic stays on the previous deployment {prev}"),
            Ending::Back { as_: None } => {
                format!("rolled back: traffic is back on the previous deployment {prev}")
            }
            Ending::Back { as_: Some(serving) } => format!(
                "rolled back: traffic is back on the previous deployment {prev} (the platform re-created it as {serving})"
            ),
            Ending::Unconfirmed { by, seen } => format!(
                "not rolled back: {seen}; the promote's answer never came, so deployment {by} cannot be confirmed as this run's (the platform may have copied ours, or another client promoted it): it is left as it is — check {env} in the Baseten UI"
            ),
            Ending::Displaced { by, seen } => format!(
                "not rolled back: another client moved {env} meanwhile ({seen}); deployment {by} was not created by this run, so the rollback does not fight it"
            ),
            Ending::TriedOut { seen } => format!(
                "the rollback was tried {ROLLBACK_SENDS_MAX} times and {seen}: promote {prev} again in the Baseten UI"
            ),
            Ending::Unfinished { seen } => {
                let budget = match time {
                    Allowance::Signal { .. } => "the seconds a cancelled run has",
                    Allowance::Run => "the run's budget",
                };
                format!(
                    "the rollback did not finish within {budget}: {seen}; the platform may still finish it — check {env} in the Baseten UI"
                )
            }
            Ending::Unreadable { err, seen } => {
                let seen = seen
                    .as_ref()
                    .map(|s| format!(" (last read: {s})"))
                    .unwrap_or_default();
                format!(
                    "the rollback could not read {env} ({err}){seen}: whether {prev} serves again is unknown; check {env} in the Baseten UI and promote {prev} if it does not"
                )
            }
            Ending::Failed { why } => why.clone(),
        }
    }
}

/// A failed read during the rollback: out of time once a read was seen
/// and the time is up, else the read failure itself.
pub(super) fn unread(err: String, last: Option<&Env>, env: &str, out_of_time: bool) -> Ending {
    match last {
        Some(l) if out_of_time => Ending::Unfinished {
            seen: l.describe(env),
        },
        _ => Ending::Unreadable {
            err,
            seen: last.map(|l| l.describe(env)),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::promotion::InProgressPromotion;

    fn in_progress(status: &str, rolling: Option<bool>) -> Option<InProgressPromotion> {
        Some(InProgressPromotion {
            status: status.into(),
            percent: Some(40.0),
            error_message: None,
            rolling,
        })
    }

    /// A model environment's reading.
    fn model(cur: Option<&str>, cand: Option<&str>, f: Option<InProgressPromotion>) -> Env {
        Env {
            current: cur.map(Into::into),
            candidate: cand.map(Into::into),
            in_progress: f,
            reports_promotions: true,
            reports_status: true,
            rolling_settings: None,
        }
    }

    /// A chain environment's reading: a candidate, never a status.
    fn chain(cur: &str, cand: Option<&str>) -> Env {
        Env {
            reports_status: false,
            ..model(Some(cur), cand, None)
        }
    }

    #[test]
    fn the_rollback_decision() {
        let run = Allowance::Run;
        let signal = Allowance::Signal { at: Instant::now() };
        let (m, c) = (Kind::Model, Kind::Chain);
        let none = Sent::default();
        let one = Sent {
            cancels: 1,
            promotes: 0,
        };
        let spent = Sent {
            cancels: ROLLBACK_SENDS_MAX,
            promotes: ROLLBACK_SENDS_MAX,
        };
        let seen = |e: &Env| e.describe("prod");
        let theirs = || "theirs".to_string();
        let prev_serves = model(Some("prev"), None, None);
        let ours_serve = model(Some("ours"), None, None);
        let theirs_serve = model(Some("theirs"), None, None);
        let rolling_up = model(
            Some("prev"),
            Some("ours"),
            in_progress("RAMPING_UP", Some(true)),
        );
        // (reading, sent, kind, time, ours_known, expected)
        let cases = [
            // Done: nothing sent, or put back (under the id our promote answered).
            (
                prev_serves.clone(),
                none,
                m,
                run,
                true,
                Step::End(Ending::Stayed),
            ),
            (
                model(Some("prev"), None, in_progress("CANCELED", None)),
                none,
                m,
                run,
                true,
                Step::End(Ending::Stayed),
            ),
            (
                prev_serves.clone(),
                one,
                m,
                run,
                true,
                Step::End(Ending::Back { as_: None }),
            ),
            (
                model(Some("copy"), None, None),
                one,
                m,
                run,
                true,
                Step::End(Ending::Back {
                    as_: Some("copy".into()),
                }),
            ),
            (
                chain("prev", None),
                none,
                c,
                run,
                true,
                Step::End(Ending::Stayed),
            ),
            // Our promotion in flight: cancelled; forced only when rolling
            // and a signal left seconds.
            (
                model(
                    Some("prev"),
                    Some("ours"),
                    in_progress("RAMPING_UP", Some(false)),
                ),
                none,
                m,
                signal,
                true,
                Step::Cancel { force: false },
            ),
            (
                rolling_up.clone(),
                none,
                m,
                signal,
                true,
                Step::Cancel { force: true },
            ),
            (
                rolling_up.clone(),
                one,
                m,
                run,
                true,
                Step::Cancel { force: false },
            ),
            (
                model(Some("prev"), Some("ours"), None),
                none,
                m,
                run,
                true,
                Step::Cancel { force: false },
            ),
            // An ended promotion still naming its candidate is not settled.
            (
                model(Some("prev"), Some("ours"), in_progress("SUCCEEDED", None)),
                none,
                m,
                signal,
                true,
                Step::Cancel { force: false },
            ),
            (
                rolling_up.clone(),
                spent,
                m,
                run,
                true,
                Step::End(Ending::TriedOut {
                    seen: seen(&rolling_up),
                }),
            ),
            // Traffic moving back: read again.
            (
                model(
                    Some("prev"),
                    Some("ours"),
                    in_progress("RAMPING_DOWN", None),
                ),
                none,
                m,
                run,
                true,
                Step::Wait,
            ),
            (
                model(Some("ours"), Some("prev"), in_progress("RAMPING_UP", None)),
                one,
                m,
                run,
                true,
                Step::Wait,
            ),
            (chain("ours", Some("prev")), none, c, run, true, Step::Wait),
            // Ours serves: promote the previous deployment back.
            (ours_serve.clone(), none, m, run, true, Step::PromoteBack),
            (chain("ours", None), none, c, run, true, Step::PromoteBack),
            (
                ours_serve.clone(),
                spent,
                m,
                run,
                true,
                Step::End(Ending::TriedOut {
                    seen: seen(&ours_serve),
                }),
            ),
            // A chain has no cancel.
            (
                chain("prev", Some("ours")),
                none,
                c,
                signal,
                true,
                Step::ChainInterrupt,
            ),
            (
                chain("theirs", Some("ours")),
                none,
                c,
                signal,
                true,
                Step::ChainEndOurs,
            ),
            // Another client's move is left to them; named unconfirmed when
            // our own promote's answer never came.
            (
                model(
                    Some("ours"),
                    Some("theirs"),
                    in_progress("RAMPING_UP", None),
                ),
                none,
                m,
                run,
                true,
                Step::End(Ending::Displaced {
                    by: theirs(),
                    seen: seen(&model(
                        Some("ours"),
                        Some("theirs"),
                        in_progress("RAMPING_UP", None),
                    )),
                }),
            ),
            (
                theirs_serve.clone(),
                none,
                m,
                run,
                true,
                Step::End(Ending::Displaced {
                    by: theirs(),
                    seen: seen(&theirs_serve),
                }),
            ),
            (
                theirs_serve.clone(),
                none,
                m,
                run,
                false,
                Step::End(Ending::Unconfirmed {
                    by: theirs(),
                    seen: seen(&theirs_serve),
                }),
            ),
            (
                model(None, None, None),
                none,
                m,
                run,
                true,
                Step::End(Ending::Displaced {
                    by: "no deployment".into(),
                    seen: seen(&model(None, None, None)),
                }),
            ),
        ];
        for (e, sent, kind, time, ours_known, want) in cases {
            let deployments = RollbackDeployments {
                ours: "ours",
                prev: "prev",
                back: Some("copy"),
                ours_known,
            };
            assert_eq!(
                next_step(&e, "prod", deployments, sent, kind, time),
                want,
                "{e:?} {sent:?} {kind:?} {time:?} known={ours_known}"
            );
        }
    }

    #[test]
    fn each_request_counts_against_its_own_cap() {
        let mut sent = Sent::default();
        assert!(!sent.acted());
        for s in [
            Step::Wait,
            Step::Cancel { force: false },
            Step::PromoteBack,
            Step::ChainEndOurs,
        ] {
            sent.count(&s);
        }
        assert_eq!(
            sent,
            Sent {
                cancels: 1,
                promotes: 2
            }
        );
        assert!(sent.acted());
    }

    #[test]
    fn endings_in_words() {
        let signal = Allowance::Signal { at: Instant::now() };
        let cases = [
            (
                Ending::Stayed,
                false,
                "traffic stays on the previous deployment old",
            ),
            (
                Ending::Back { as_: None },
                true,
                "rolled back: traffic is back on the previous deployment old",
            ),
            (
                Ending::Unfinished { seen: "s".into() },
                false,
                "the rollback did not finish within the seconds a cancelled run has: s; the platform may still finish it — check prod in the Baseten UI",
            ),
        ];
        for (ending, rolled_back, text) in cases {
            assert_eq!(ending.rolled_back(), rolled_back);
            assert_eq!(ending.text("prod", "old", signal), text);
        }
        let last = model(Some("x"), None, None);
        let out_of_time = unread("reset".into(), Some(&last), "prod", true);
        assert!(matches!(out_of_time, Ending::Unfinished { .. }));
        let unreadable = unread("reset".into(), None, "prod", true);
        assert_eq!(
            unreadable,
            Ending::Unreadable {
                err: "reset".into(),
                seen: None
            }
        );
    }
}
