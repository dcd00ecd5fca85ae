//! The gated promotion's choices before and around the rollback, as pure
//! functions over what the gate knows (a reading of the environment, what
//! it asked for): each answers an action, which `gate` performs and
//! reports. The rollback's own decision is `step::next_step`.

use super::{Gate, Stage};
use crate::baseten::ApiError;
use crate::promotion::Env;

/// What the first reading of the environment allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum BeforePromote {
    /// Another promotion is in flight: nothing is promoted.
    Busy,
    /// The platform already promotes the tested deployment (a new model's
    /// or chain's first deployment): nothing to send.
    Already { previous: Option<String> },
    /// Promote the tested deployment; `previous` is the rollback target.
    Promote { previous: Option<String> },
}

pub(super) fn start(before: &Env, tested: &str) -> BeforePromote {
    if before.candidate.as_deref().is_some_and(|d| d != tested) {
        return BeforePromote::Busy;
    }
    let previous = before.current.clone().filter(|d| d != tested);
    let already = [&before.current, &before.candidate]
        .into_iter()
        .any(|d| d.as_deref() == Some(tested));
    if already {
        BeforePromote::Already { previous }
    } else {
        BeforePromote::Promote { previous }
    }
}

/// After a promote whose answer was lost or unreadable, what the
/// environment says about it. `target` is what we asked to promote,
/// `before` what served the environment when we sent it.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Lookup {
    /// The environment serves or is taking `target` itself: ours.
    Applied,
    /// Nothing moved: the request never took effect (safe to send again).
    Untouched,
    /// Another deployment serves or is being promoted. A platform copy of
    /// ours cannot be told from another run's deployment (a deployment
    /// names no source), so it is never claimed.
    Other { by: String },
}

pub(super) fn lookup(e: &Env, target: &str, before: Option<&str>) -> Lookup {
    if e.candidate.as_deref() == Some(target) || e.current.as_deref() == Some(target) {
        return Lookup::Applied;
    }
    if let Some(c) = &e.candidate {
        return Lookup::Other { by: c.clone() };
    }
    match e.current.as_deref() {
        c if c == before => Lookup::Untouched,
        Some(c) => Lookup::Other { by: c.to_string() },
        None => Lookup::Untouched,
    }
}

/// A promote that failed: was its answer lost (so it may have been
/// applied and is looked up), rather than refused? An answer cut by the
/// deadline after the request was sent is lost, not a refusal: the
/// platform may have applied it.
pub(super) fn answer_lost(e: &ApiError) -> bool {
    matches!(
        e,
        ApiError::Ambiguous { .. }
            | ApiError::Transient { .. }
            | ApiError::NotSent { .. }
            | ApiError::OutOfTime { sent: true, .. }
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
    if !cancelled || g.stage == Stage::Settled {
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
                BeforePromote::Promote {
                    previous: old.clone(),
                },
            ),
            (None, None, BeforePromote::Promote { previous: None }),
            (
                Some("old"),
                Some("t"),
                BeforePromote::Already { previous: old },
            ),
            (Some("t"), None, BeforePromote::Already { previous: None }),
            (Some("old"), Some("theirs"), BeforePromote::Busy),
            (Some("t"), Some("theirs"), BeforePromote::Busy),
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
    fn a_lost_promote_is_claimed_only_by_identity() {
        let e = |cur: Option<&str>, cand: Option<&str>| Env {
            current: cur.map(Into::into),
            candidate: cand.map(Into::into),
            in_progress: None,
            reports_promotions: true,
            reports_status: true,
            rolling_settings: None,
        };
        let cases = [
            (e(Some("old"), Some("mine")), Lookup::Applied),
            (e(Some("mine"), None), Lookup::Applied),
            (e(Some("old"), None), Lookup::Untouched),
            (
                e(Some("old"), Some("copy-or-theirs")),
                Lookup::Other {
                    by: "copy-or-theirs".into(),
                },
            ),
            (
                e(Some("theirs"), None),
                Lookup::Other {
                    by: "theirs".into(),
                },
            ),
            (e(None, None), Lookup::Untouched),
        ];
        for (env, want) in cases {
            assert_eq!(lookup(&env, "mine", Some("old")), want, "{env:?}");
        }
        // A rollback's promote of `old` while `mine` served: applied only
        // when `old` shows up, never because something serves.
        assert_eq!(
            lookup(&e(Some("mine"), None), "old", Some("mine")),
            Lookup::Untouched
        );
        assert_eq!(
            lookup(&e(Some("mine"), Some("old")), "old", Some("mine")),
            Lookup::Applied
        );
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
            // Cut by the deadline after it was sent: the platform may have
            // applied it, so it is looked up (treating it as refused let
            // production move unseen, with no rollback armed).
            (
                ApiError::OutOfTime {
                    message: String::new(),
                    sent: true,
                },
                true,
            ),
            // Never sent: nothing can have been applied.
            (
                ApiError::OutOfTime {
                    message: String::new(),
                    sent: false,
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
    fn a_signal_rolls_back_only_an_unsettled_gate_with_a_previous_deployment() {
        let gate = |previous: Option<&str>, promoted: Option<&str>, stage| Gate {
            owner: Kind::Model,
            owner_id: "m".into(),
            env: "prod".into(),
            previous: previous.map(Into::into),
            tested: "t".into(),
            promoted: promoted.map(Into::into),
            back: None,
            stage,
        };
        let back = |ours: &str| OnSignal::RollBack {
            ours: ours.into(),
            prev: "old".into(),
        };
        let cases = [
            (None, true, OnSignal::Nothing),
            (
                Some(gate(Some("old"), Some("p"), Stage::Serving)),
                false,
                OnSignal::Nothing,
            ),
            (
                Some(gate(Some("old"), Some("p"), Stage::Settled)),
                true,
                OnSignal::Nothing,
            ),
            (
                Some(gate(None, Some("p"), Stage::Promoting)),
                true,
                OnSignal::LeaveFirst,
            ),
            (
                Some(gate(Some("old"), Some("p"), Stage::Serving)),
                true,
                back("p"),
            ),
            (
                Some(gate(Some("old"), None, Stage::Promoting)),
                true,
                back("t"),
            ),
            (
                Some(gate(Some("old"), Some("p"), Stage::RollingBack)),
                true,
                back("p"),
            ),
        ];
        for (g, cancelled, want) in cases {
            assert_eq!(on_signal(g.as_ref(), cancelled), want, "{g:?}");
        }
    }
}
