//! The run's budget: one value, built once when a target's deploy starts,
//! that every phase asks for its deadline. No phase computes a deadline of
//! its own, so none can get time past the run's end: the wait budget plus
//! `predict-timeout` plus the cleanup's minute (README, "The run's budget").

use std::time::{Duration, Instant};

/// A rollback started by a signal gets this long (the runner kills the
/// job 7.5 s after its first signal; cleanup needs the rest).
pub(crate) const CANCELLED_ROLLBACK_SECS: u64 = 3;
/// A rollback started when the run's budget is (nearly) spent still gets
/// this long, taken from the cleanup's minute.
pub(crate) const ROLLBACK_FLOOR_SECS: u64 = 10;

/// The time what is left of the run may take: the run's own budget, or —
/// once a signal (or a several-target halt) stopped the flow — the few
/// seconds the runner leaves before it kills the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Allowance {
    /// The run goes on within its budget.
    Run,
    /// The run was cancelled at this moment: what follows shares the
    /// seconds after it.
    Signal { at: Instant },
}

/// When a rollback must end, and whether that is past the run's budget
/// (then the run says so): a signal's few seconds from the signal, else
/// the run's end but at least [`ROLLBACK_FLOOR_SECS`] from `now`.
pub(crate) fn rollback_until(now: Instant, time: Allowance, run_until: Instant) -> (Instant, bool) {
    match time {
        Allowance::Signal { at } => (at + Duration::from_secs(CANCELLED_ROLLBACK_SECS), false),
        Allowance::Run => {
            let until = run_until.max(now + Duration::from_secs(ROLLBACK_FLOOR_SECS));
            (until, until > run_until)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rollback_deadline() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let signal = |at| Allowance::Signal { at };
        // (now, allowance, run_until, expected)
        let cases = [
            (t0, Allowance::Run, t0 + s(100), (t0 + s(100), false)),
            (t0, Allowance::Run, t0 + s(4), (t0 + s(10), true)),
            (t0 + s(50), Allowance::Run, t0, (t0 + s(60), true)),
            (t0 + s(1), signal(t0), t0 + s(100), (t0 + s(3), false)),
        ];
        for (now, time, run_until, want) in cases {
            assert_eq!(rollback_until(now, time, run_until), want);
        }
    }
}
