//! The gated promotion's choices, as pure functions over what the gate
//! knows (a reading of the environment, the counts of what it sent, the
//! clock): each answers an action, which `gate` performs and reports. The
//! readings of one environment (`promotion::lookup`,
//! `promotion::rollback_step`) live in `promotion`; these are the gate's
//! own rules around them.

use std::time::{Duration, Instant};

use super::{Gate, Phase};
use crate::baseten::ApiError;
use crate::promotion::{Env, Lookup, Step, lookup};

/// A rollback started by a signal gets this long (the runner kills the
/// job 7.5 s after its first signal; cleanup needs the rest).
pub(super) const CANCELLED_ROLLBACK_SECS: u64 = 3;
/// A rollback started when the run's budget is (nearly) spent still gets
/// this long, taken from the cleanup's minute.
pub(super) const ROLLBACK_FLOOR_SECS: u64 = 10;
/// Each kind of rollback request is sent at most this often.
pub(super) const ROLLBACK_SENDS_MAX: u32 = 3;

/// What the first reading of the environment allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Start {
    /// Another promotion is in flight: nothing is promoted.
    Busy,
    /// The platform already promotes the tested deployment (a new model's
    /// or chain's first deployment): nothing to send.
    Already { previous: Option<String> },
    /// Promote the tested deployment; `previous` is the rollback target.
    Promote { previous: Option<String> },
}

pub(super) fn start(before: &Env, tested: &str) -> Start {
    if before.candidate.as_deref().is_some_and(|d| d != tested) {
        return Start::Busy;
    }
    let previous = before.current.clone().filter(|d| d != tested);
    let already = [&before.current, &before.candidate]
        .into_iter()
        .any(|d| d.as_deref() == Some(tested));
    if already {
        Start::Already { previous }
    } else {
        Start::Promote { previous }
    }
}

/// A promote that failed: was its answer lost (so it may have been
/// applied and is looked up), rather than refused?
pub(super) fn answer_lost(e: &ApiError) -> bool {
    matches!(
        e,
        ApiError::Ambiguous { .. } | ApiError::Transient { .. } | ApiError::NotSent { .. }
    )
}

/// A refused promote, sent after an earlier answer was lost: the refusal
/// may be our first promote, applied late, which the reading `now` shows.
pub(super) fn refusal_is_ours(
    lost_before: bool,
    now: Option<&Env>,
    target: &str,
    before: Option<&str>,
) -> bool {
    lost_before && now.is_some_and(|n| lookup(n, target, before) == Lookup::Applied)
}

/// When a rollback must end, and whether that is past the run's budget
/// (then the run says so): a signal's few seconds from the signal, else
/// the run's end but at least [`ROLLBACK_FLOOR_SECS`] from `now`.
pub(super) fn rollback_until(
    now: Instant,
    hurry: bool,
    cancelled_at: Option<Instant>,
    run_until: Instant,
) -> (Instant, bool) {
    if hurry {
        let signalled = cancelled_at.unwrap_or(now);
        (
            signalled + Duration::from_secs(CANCELLED_ROLLBACK_SECS),
            false,
        )
    } else {
        let until = run_until.max(now + Duration::from_secs(ROLLBACK_FLOOR_SECS));
        (until, until > run_until)
    }
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

    /// Counts the request `m` sends.
    pub(super) fn count(&mut self, m: &Move) {
        match m {
            Move::Cancel { .. } => self.cancels += 1,
            Move::ChainInterrupt | Move::ChainEndOurs | Move::PromoteBack => self.promotes += 1,
            Move::Wait | Move::End(_) => {}
        }
    }
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

/// The rollback's next move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Move {
    End(Ending),
    /// Read again after the poll interval.
    Wait,
    Cancel {
        force: bool,
    },
    ChainInterrupt,
    ChainEndOurs,
    PromoteBack,
}

/// The rollback's next move from `step` (`promotion::rollback_step` over
/// the reading `e`, putting `prev` back): what was `sent` caps each kind
/// of request, and a
/// deployment that displaced ours is named as unconfirmed when our own
/// promote's answer never came (`ours_known` false).
pub(super) fn next_move(
    step: Step,
    e: &Env,
    env: &str,
    prev: &str,
    sent: Sent,
    ours_known: bool,
) -> Move {
    let seen = || e.describe(env);
    match step {
        Step::Done if !sent.acted() => Move::End(Ending::Stayed),
        Step::Done => {
            let serving = e.current.clone().unwrap_or_default();
            Move::End(Ending::Back {
                as_: (serving != prev).then_some(serving),
            })
        }
        Step::Displaced { by } if !ours_known => {
            Move::End(Ending::Unconfirmed { by, seen: seen() })
        }
        Step::Displaced { by } => Move::End(Ending::Displaced { by, seen: seen() }),
        Step::Wait => Move::Wait,
        Step::Cancel { force } if sent.cancels < ROLLBACK_SENDS_MAX => Move::Cancel { force },
        Step::ChainInterrupt if sent.promotes < ROLLBACK_SENDS_MAX => Move::ChainInterrupt,
        Step::ChainEndOurs if sent.promotes < ROLLBACK_SENDS_MAX => Move::ChainEndOurs,
        Step::PromoteBack if sent.promotes < ROLLBACK_SENDS_MAX => Move::PromoteBack,
        Step::Cancel { .. } | Step::ChainInterrupt | Step::ChainEndOurs | Step::PromoteBack => {
            Move::End(Ending::TriedOut { seen: seen() })
        }
    }
}

impl Ending {
    /// Whether traffic was moved back.
    pub(super) fn rolled_back(&self) -> bool {
        matches!(self, Ending::Back { .. })
    }

    /// The ending in words; `prev` is the deployment put back, `hurry` a
    /// signal's short budget.
    pub(super) fn text(&self, env: &str, prev: &str, hurry: bool) -> String {
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
                let budget = if hurry {
                    "the seconds a cancelled run has"
                } else {
                    "the run's budget"
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

/// What a signal during a gated promotion leaves to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum OnSignal {
    /// Not cancelled, no gate, or the gate settled: nothing.
    Nothing,
    /// The environment's first deployment: left as it is, noted.
    LeaveFirst,
    /// Put `prev` back over `ours` (the promoted deployment, else the
    /// tested one when the promote's answer never came).
    RollBack { ours: String, prev: String },
}

pub(super) fn on_signal(gate: Option<&Gate>, cancelled: bool) -> OnSignal {
    let Some(g) = gate else {
        return OnSignal::Nothing;
    };
    if !cancelled || g.phase == Phase::Settled {
        return OnSignal::Nothing;
    }
    match &g.previous {
        None => OnSignal::LeaveFirst,
        Some(prev) => OnSignal::RollBack {
            ours: g.promoted.clone().unwrap_or_else(|| g.tested.clone()),
            prev: prev.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::Kind;

    fn env(current: Option<&str>, candidate: Option<&str>) -> Env {
        Env {
            current: current.map(Into::into),
            candidate: candidate.map(Into::into),
            reports_promotions: true,
            reports_status: true,
            ..Env::default()
        }
    }

    #[test]
    fn the_first_read_decides_what_to_promote() {
        let old = Some("old".to_string());
        // (current, candidate, expected) for the tested deployment "t"
        let cases = [
            (
                Some("old"),
                None,
                Start::Promote {
                    previous: old.clone(),
                },
            ),
            (None, None, Start::Promote { previous: None }),
            (Some("old"), Some("t"), Start::Already { previous: old }),
            (Some("t"), None, Start::Already { previous: None }),
            (Some("old"), Some("theirs"), Start::Busy),
            (Some("t"), Some("theirs"), Start::Busy),
        ];
        for (current, candidate, want) in cases {
            assert_eq!(
                start(&env(current, candidate), "t"),
                want,
                "{current:?} {candidate:?}"
            );
        }
    }

    #[test]
    fn only_a_lost_answer_is_looked_up() {
        let cases = [
            (
                ApiError::Ambiguous {
                    message: String::new(),
                },
                true,
            ),
            (
                ApiError::NotSent {
                    message: String::new(),
                },
                true,
            ),
            (
                ApiError::Transient {
                    status: 502,
                    message: String::new(),
                    retry_after: None,
                },
                true,
            ),
            (ApiError::permanent(String::new()), false),
            (
                ApiError::OutOfTime {
                    message: String::new(),
                },
                false,
            ),
        ];
        for (e, want) in cases {
            assert_eq!(answer_lost(&e), want, "{e:?}");
        }
    }

    #[test]
    fn a_refusal_is_ours_only_after_a_lost_answer_and_by_identity() {
        let taking = env(Some("old"), Some("t"));
        let untouched = env(Some("old"), None);
        let cases = [
            (true, Some(&taking), true),
            (false, Some(&taking), false),
            (true, Some(&untouched), false),
            (true, None, false),
        ];
        for (lost_before, now, want) in cases {
            assert_eq!(refusal_is_ours(lost_before, now, "t", Some("old")), want);
        }
    }

    #[test]
    fn the_rollback_deadline() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // (now, hurry, cancelled_at, run_until, expected)
        let cases = [
            (t0, false, None, t0 + s(100), (t0 + s(100), false)),
            (t0, false, None, t0 + s(4), (t0 + s(10), true)),
            (t0 + s(50), false, None, t0, (t0 + s(60), true)),
            (t0 + s(1), true, Some(t0), t0 + s(100), (t0 + s(3), false)),
            (t0, true, None, t0 + s(100), (t0 + s(3), false)),
        ];
        for (now, hurry, at, run_until, want) in cases {
            assert_eq!(rollback_until(now, hurry, at, run_until), want);
        }
    }

    #[test]
    fn the_rollback_moves() {
        let e = env(Some("old"), None);
        let none = Sent::default();
        let some = Sent {
            cancels: 1,
            promotes: 0,
        };
        let spent = Sent {
            cancels: ROLLBACK_SENDS_MAX,
            promotes: ROLLBACK_SENDS_MAX,
        };
        let seen = e.describe("prod");
        let by = || "theirs".to_string();
        // (step, sent, ours_known, expected)
        let cases = [
            (Step::Done, none, true, Move::End(Ending::Stayed)),
            (
                Step::Done,
                some,
                true,
                Move::End(Ending::Back { as_: None }),
            ),
            (Step::Wait, none, true, Move::Wait),
            (
                Step::Cancel { force: true },
                some,
                true,
                Move::Cancel { force: true },
            ),
            (Step::ChainInterrupt, some, true, Move::ChainInterrupt),
            (Step::ChainEndOurs, none, true, Move::ChainEndOurs),
            (Step::PromoteBack, none, true, Move::PromoteBack),
            (
                Step::Displaced { by: by() },
                none,
                true,
                Move::End(Ending::Displaced {
                    by: by(),
                    seen: seen.clone(),
                }),
            ),
            (
                Step::Displaced { by: by() },
                none,
                false,
                Move::End(Ending::Unconfirmed {
                    by: by(),
                    seen: seen.clone(),
                }),
            ),
            (
                Step::Cancel { force: false },
                spent,
                true,
                Move::End(Ending::TriedOut { seen: seen.clone() }),
            ),
            (
                Step::PromoteBack,
                spent,
                true,
                Move::End(Ending::TriedOut { seen: seen.clone() }),
            ),
        ];
        for (step, sent, known, want) in cases {
            assert_eq!(
                next_move(step.clone(), &e, "prod", "old", sent, known),
                want,
                "{step:?}"
            );
        }
        // Put back under another id: the platform re-created it.
        let copy = env(Some("old-copy"), None);
        assert_eq!(
            next_move(Step::Done, &copy, "prod", "old", some, true),
            Move::End(Ending::Back {
                as_: Some("old-copy".into())
            })
        );
    }

    #[test]
    fn each_request_counts_against_its_own_cap() {
        let mut sent = Sent::default();
        assert!(!sent.acted());
        for m in [
            Move::Wait,
            Move::Cancel { force: false },
            Move::PromoteBack,
            Move::ChainEndOurs,
        ] {
            sent.count(&m);
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
            assert_eq!(ending.text("prod", "old", true), text);
        }
        let out_of_time = unread("reset".into(), Some(&env(Some("x"), None)), "prod", true);
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

    #[test]
    fn a_signal_rolls_back_only_an_unsettled_gate_with_a_previous_deployment() {
        let gate = |previous: Option<&str>, promoted: Option<&str>, phase| Gate {
            owner: Kind::Model,
            owner_id: "m".into(),
            env: "prod".into(),
            previous: previous.map(Into::into),
            tested: "t".into(),
            promoted: promoted.map(Into::into),
            back: None,
            phase,
        };
        let back = |ours: &str| OnSignal::RollBack {
            ours: ours.into(),
            prev: "old".into(),
        };
        let cases = [
            (None, true, OnSignal::Nothing),
            (
                Some(gate(Some("old"), Some("p"), Phase::Serving)),
                false,
                OnSignal::Nothing,
            ),
            (
                Some(gate(Some("old"), Some("p"), Phase::Settled)),
                true,
                OnSignal::Nothing,
            ),
            (
                Some(gate(None, Some("p"), Phase::Promoting)),
                true,
                OnSignal::LeaveFirst,
            ),
            (
                Some(gate(Some("old"), Some("p"), Phase::Serving)),
                true,
                back("p"),
            ),
            (
                Some(gate(Some("old"), None, Phase::Promoting)),
                true,
                back("t"),
            ),
            (
                Some(gate(Some("old"), Some("p"), Phase::RollingBack)),
                true,
                back("p"),
            ),
        ];
        for (g, cancelled, want) in cases {
            assert_eq!(on_signal(g.as_ref(), cancelled), want, "{g:?}");
        }
    }
}
