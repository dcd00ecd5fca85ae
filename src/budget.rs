//! The run's budget: one value, built once when a target's deploy starts,
//! that every phase asks for its deadline ([`Budget::until`]). No phase
//! computes a deadline of its own, so none can get time past the run's end
//! (README, "The run's budget"):
//!
//! - setup, packaging, the upload, the create and the wait end by the
//!   start plus the wait budget (a create may run up to
//!   [`CREATE_GRACE_SECS`] past it); the lookup after a lost create answer
//!   has [`LOOKUP_ALLOWANCE_SECS`] of its own from when it starts, and the
//!   cleanup after it its own minute, whatever the create used up: both
//!   may run past the run's end ([`Budget::end`]), the lookup by at most
//!   its allowance and cleanup by at most its minute after that
//!   ([`Budget::last`]);
//! - the smoke tests (each at most `predict-timeout`), the evidence, a
//!   gated promotion and its rollback end by that plus `predict-timeout`
//!   (the evidence before a gated promotion by half of what is left of
//!   it, so the promotion keeps the rest; a rollback started when that is
//!   spent still gets [`ROLLBACK_FLOOR_SECS`], taken from cleanup's
//!   minute);
//! - cleanup has [`CLEANUP_ALLOWANCE_SECS`] and ends by the run's end
//!   plus that, or, after a lookup, by the lookup's deadline plus that
//!   (never past [`Budget::last`]);
//! - after a signal, what is left (a rollback, every cleanup) shares the
//!   seconds the runner leaves before it kills the job;
//! - GitHub hears of the start within [`ANNOUNCE_MAX_SECS`] and by the end
//!   of the deploy's budget, and of the end within [`REPORT_MAX_SECS`] out
//!   of what cleanup left of its minute: never past cleanup's end;
//! - a short read — one that only informs (`crate::flow::inform`: the config
//!   diff, the "promoted at" words, the secrets pre-check), and the
//!   metrics a gate judges at each poll — gets [`SHORT_READ_SECS`] from its
//!   start, never past the run's end.
//!
//! The budget reads the time from its [`Clock`]: every deadline, every
//! "is there time left" and every request's check before it is sent go
//! through it, so a test can drive a whole run with a clock that jumps.

#[cfg(debug_assertions)]
mod test_clock;

#[cfg(debug_assertions)]
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A create and the lookup after it may run this long past the deploy
/// budget: cutting them short could leave a deployment nobody reports.
pub(crate) const CREATE_GRACE_SECS: u64 = 60;
/// The lookup after a create whose answer was lost (cut by the create's
/// deadline included) gets this long from its start: finding what the run
/// made must not depend on what the create left of its time.
pub(crate) const LOOKUP_ALLOWANCE_SECS: u64 = 30;
/// The same lookup once the run is cancelled (a create in flight when the
/// signal came), within the signal's tail.
pub(crate) const CANCELLED_LOOKUP_SECS: u64 = 3;
/// A rollback started by a signal gets this long (the runner kills the
/// job 7.5 s after its first signal; cleanup needs the rest).
pub(crate) const CANCELLED_ROLLBACK_SECS: u64 = 3;
/// A rollback started when the run's budget is (nearly) spent still gets
/// this long, taken from the cleanup's minute.
pub(crate) const ROLLBACK_FLOOR_SECS: u64 = 10;
/// How long cleanup may take: the last part of the run's budget.
pub(crate) const CLEANUP_ALLOWANCE_SECS: u64 = 60;
/// How long cleanup may take once the run is cancelled (GitHub sends
/// SIGTERM 7.5 s after SIGINT, and kills 2.5 s later).
pub(crate) const CANCELLED_CLEANUP_SECS: u64 = 3;
/// Everything after a signal — a gated rollback and every deactivation —
/// ends this long after it, a second before the runner's SIGTERM.
pub(crate) const CANCELLED_TAIL_MILLIS: u64 = 6_500;
/// Telling GitHub that the deploy started may take this long (and never
/// past the deploy's budget); past it the start is left untold.
pub(crate) const ANNOUNCE_MAX_SECS: u64 = 20;
/// Telling GitHub how the run ended may take this long, out of what
/// cleanup left of its minute: the run's end holds.
pub(crate) const REPORT_MAX_SECS: u64 = 30;
/// The same after a signal: the outputs come after GitHub, and the runner
/// kills the job seconds after its signal.
pub(crate) const CANCELLED_REPORT_SECS: u64 = 3;
/// A short read gets this long from its start: a read that only informs
/// ([`Phase::Inform`]; it never holds a mutation or a verdict, and past
/// this it is "not read") and the metrics read of each gate poll
/// ([`Phase::Metrics`]; it decides, so an unread one fails closed). The
/// one place to set how long either may take.
pub(crate) const SHORT_READ_SECS: u64 = 5;

/// The phases of one target's run, each with its own deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Teams, models, validation, the secrets check.
    Setup,
    /// Packaging, the upload, a chain's code generation.
    Upload,
    /// Creating the deployment.
    Create,
    /// Finding what a create whose answer was lost (or was in flight when
    /// the run was cancelled) made: its own allowance from its start.
    Lookup,
    /// Waiting for the deployment to be ready.
    Wait,
    /// The wait's one last read at its deadline, given `grace` at most.
    LastLook { grace: Duration },
    /// One smoke test: `predict-timeout` from its start, within the run.
    Smoke,
    /// The evidence sample after a smoke test.
    Evidence,
    /// The evidence sample before a gated promotion: half of what is left
    /// of the run, so the promotion, the environment's smoke test and its
    /// sample keep the other half.
    EvidenceBeforePromotion,
    /// A gated promotion: the promote, its wait, the environment's test.
    Promotion,
    /// Putting the previous deployment back.
    Rollback,
    /// Deactivating what the run created.
    Cleanup,
    /// GitHub hears that the deploy started (alongside it).
    Announce,
    /// GitHub hears how the run ended (after cleanup).
    Report,
    /// A read that only informs: [`SHORT_READ_SECS`] from its start.
    Inform,
    /// The environment's metrics, read at a gate poll: [`SHORT_READ_SECS`]
    /// from its start, within the run.
    Metrics,
}

impl Phase {
    /// The phase's name, for the scripted clock's script and record (a
    /// debug build's only).
    #[cfg(debug_assertions)]
    pub(crate) fn name(self) -> &'static str {
        match self {
            Phase::Setup => "Setup",
            Phase::Upload => "Upload",
            Phase::Create => "Create",
            Phase::Lookup => "Lookup",
            Phase::Wait => "Wait",
            Phase::LastLook { .. } => "LastLook",
            Phase::Smoke => "Smoke",
            Phase::Evidence => "Evidence",
            Phase::EvidenceBeforePromotion => "EvidenceBeforePromotion",
            Phase::Promotion => "Promotion",
            Phase::Rollback => "Rollback",
            Phase::Cleanup => "Cleanup",
            Phase::Announce => "Announce",
            Phase::Report => "Report",
            Phase::Inform => "Inform",
            Phase::Metrics => "Metrics",
        }
    }
}

/// A request whose deadline has passed: it is not sent.
#[derive(Debug)]
pub(crate) struct Spent;

/// Where the run reads the time: the monotonic clock. A debug build given
/// `TRUSS_PUSH_TEST_CLOCK` reads a scripted one instead, which jumps
/// forward at chosen requests and records every request (its phase, the
/// time at its send and its deadline) for the test that drives the binary;
/// a release build has no such clock, whatever its environment.
#[derive(Clone, Default)]
pub(crate) struct Clock {
    #[cfg(debug_assertions)]
    scripted: Option<Arc<test_clock::Scripted>>,
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

impl Clock {
    /// The run's clock, from the environment the run was given.
    pub(crate) fn of_run(env: &dyn Fn(&str) -> Option<String>) -> Result<Clock, String> {
        #[cfg(debug_assertions)]
        if let Some(script) = env(crate::env_vars::TRUSS_PUSH_TEST_CLOCK) {
            let scripted = test_clock::Scripted::parse(&script)?;
            return Ok(Clock {
                scripted: Some(Arc::new(scripted)),
            });
        }
        let _ = env;
        Ok(Clock::default())
    }

    /// The time now.
    #[expect(
        clippy::disallowed_methods,
        reason = "the budget is the clock's one reader"
    )]
    pub(crate) fn now(&self) -> Instant {
        #[cfg(debug_assertions)]
        if let Some(s) = &self.scripted {
            return s.now();
        }
        Instant::now()
    }

    /// How long until `deadline`.
    pub(crate) fn left(&self, deadline: Instant) -> Duration {
        deadline.saturating_duration_since(self.now())
    }

    /// `deadline` on the monotonic clock itself, for timers and for code
    /// that compares with it (the retry loop); the same instant in a
    /// product build.
    pub(crate) fn timer(&self, deadline: Instant) -> Instant {
        #[cfg(debug_assertions)]
        if self.scripted.is_some() {
            #[expect(
                clippy::disallowed_methods,
                reason = "the budget converts its deadline to the monotonic clock for timers"
            )]
            return Instant::now() + self.left(deadline);
        }
        deadline
    }

    /// A request of `phase`, due by `deadline`, is about to be sent: the
    /// time it has left (`None` without a deadline), or [`Spent`] when
    /// none is left, and then it is not sent.
    pub(crate) fn send(
        &self,
        phase: Option<Phase>,
        deadline: Option<Instant>,
        what: &str,
    ) -> Result<Option<Duration>, Spent> {
        #[cfg(debug_assertions)]
        if let Some(s) = &self.scripted {
            return s.send(phase, deadline, what);
        }
        let _ = (phase, what);
        match deadline.map(|d| self.left(d)) {
            Some(left) if left.is_zero() => Err(Spent),
            left => Ok(left),
        }
    }

    /// Work of `phase` that is not one request (packaging and the upload)
    /// ended: the scripted clock records when.
    pub(crate) fn ended(&self, phase: Phase, deadline: Instant, what: &str) {
        #[cfg(debug_assertions)]
        if let Some(s) = &self.scripted {
            s.ended(phase, deadline, what);
        }
        let _ = (phase, deadline, what);
    }

    /// What the scripted clock recorded, a line a request; nothing for the
    /// monotonic clock.
    pub(crate) fn record(&self) -> Vec<String> {
        #[cfg(debug_assertions)]
        if let Some(s) = &self.scripted {
            return s.record();
        }
        Vec::new()
    }
}

/// A short read's deadline for code that holds one deadline and no
/// budget (the plan, whose reads share one): [`SHORT_READ_SECS`] from
/// now on `clock`, never past `within`.
pub(crate) fn short_read_until(clock: &Clock, within: Instant) -> Instant {
    (clock.now() + Duration::from_secs(SHORT_READ_SECS)).min(within)
}

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

/// One target's budget, from its start.
#[derive(Debug)]
pub(crate) struct Budget {
    started: Instant,
    wait: Duration,
    predict: Duration,
    cancelled_at: Mutex<Option<Instant>>,
    /// The latest deadline a lookup was given: the cleanup after it keeps
    /// its own minute past that ([`Budget::cleanup_end`]).
    looked_up: Mutex<Option<Instant>>,
    clock: Clock,
}

impl Budget {
    /// The budget of a run started at `started` with the wait budget `wait`
    /// and `predict-timeout` `predict`, on the monotonic clock.
    pub(crate) fn new(started: Instant, wait: Duration, predict: Duration) -> Budget {
        Budget {
            started,
            wait,
            predict,
            cancelled_at: Mutex::new(None),
            looked_up: Mutex::new(None),
            clock: Clock::default(),
        }
    }

    /// The same budget on `clock` (the run's; `started` read from it).
    pub(crate) fn on(self, clock: Clock) -> Budget {
        Budget { clock, ..self }
    }

    /// The budget's clock: what every deadline is measured on.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The time now, on the budget's clock.
    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// `phase`'s deadline, asked now.
    pub(crate) fn deadline(&self, phase: Phase) -> Instant {
        self.until(phase, self.now())
    }

    /// How long until `until`, on the budget's clock.
    pub(crate) fn left(&self, until: Instant) -> Duration {
        self.clock.left(until)
    }

    /// Setup, upload, create and the wait end here.
    pub(crate) fn deploy_end(&self) -> Instant {
        self.started + self.wait
    }

    /// The wait budget plus `predict-timeout`: the run's length but for
    /// cleanup, for messages.
    pub(crate) fn run_length(&self) -> Duration {
        self.wait + self.predict
    }

    /// Everything but cleanup ends here.
    pub(crate) fn run_end(&self) -> Instant {
        self.deploy_end() + self.predict
    }

    /// The run's end plus cleanup's minute: no phase goes past this but
    /// the lookup after a lost answer, the cleanup after it and GitHub's
    /// report of the end (their own allowances, by [`Self::last`]).
    pub(crate) fn end(&self) -> Instant {
        self.run_end() + Duration::from_secs(CLEANUP_ALLOWANCE_SECS)
    }

    /// Nothing of the run goes past this: [`Self::end`] plus a lookup's
    /// allowance and cleanup's minute after it, so that a lookup started
    /// at the run's end, and the cleanup after it, keep their own time.
    pub(crate) fn last(&self) -> Instant {
        self.end() + Duration::from_secs(LOOKUP_ALLOWANCE_SECS + CLEANUP_ALLOWANCE_SECS)
    }

    /// Cleanup and the report after it end here: the run's end, or, after
    /// a lookup, its deadline plus cleanup's minute (never past
    /// [`Self::last`]). A rollback's floor, without a lookup, still comes
    /// out of cleanup's minute.
    fn cleanup_end(&self) -> Instant {
        let looked_up = *self.looked_up.lock().unwrap_or_else(|p| p.into_inner());
        match looked_up {
            Some(l) => self
                .end()
                .max(l + Duration::from_secs(CLEANUP_ALLOWANCE_SECS))
                .min(self.last()),
            None => self.end(),
        }
    }

    /// The flow was stopped at `at` (a signal, a several-target halt):
    /// from now on what is left shares the seconds after it.
    pub(crate) fn cancel(&self, at: Instant) {
        let mut c = self.cancelled_at.lock().unwrap_or_else(|p| p.into_inner());
        c.get_or_insert(at);
    }

    /// The run's budget, or a signal's seconds.
    pub(crate) fn allowance(&self) -> Allowance {
        match *self.cancelled_at.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(at) => Allowance::Signal { at },
            None => Allowance::Run,
        }
    }

    /// When `phase`, asking at `now`, must end; never past [`Self::end`]
    /// but the lookup (by `end` plus its allowance), cleanup and the
    /// report (by [`Self::last`]).
    pub(crate) fn until(&self, phase: Phase, now: Instant) -> Instant {
        let s = Duration::from_secs;
        let deploy = self.deploy_end();
        let run = self.run_end();
        let until = match (phase, self.allowance()) {
            (Phase::Setup | Phase::Upload | Phase::Wait, _) => deploy,
            (Phase::Create, _) => deploy
                .max(now + s(CREATE_GRACE_SECS))
                .min(deploy + s(CREATE_GRACE_SECS)),
            (Phase::Lookup, Allowance::Run) => {
                let until =
                    (now + s(LOOKUP_ALLOWANCE_SECS)).min(self.end() + s(LOOKUP_ALLOWANCE_SECS));
                let mut l = self.looked_up.lock().unwrap_or_else(|p| p.into_inner());
                *l = Some(l.map_or(until, |was| was.max(until)));
                return until;
            }
            (Phase::Lookup, Allowance::Signal { at }) => (now + s(CANCELLED_LOOKUP_SECS))
                .min(at + Duration::from_millis(CANCELLED_TAIL_MILLIS)),
            (Phase::LastLook { grace }, _) => (now + grace).min(run),
            (Phase::Smoke, _) => (now + self.predict).min(run),
            (Phase::Evidence | Phase::Promotion, _) => run,
            (Phase::EvidenceBeforePromotion, _) => {
                (now + run.saturating_duration_since(now) / 2).min(run)
            }
            (Phase::Rollback, Allowance::Run) => run.max(now + s(ROLLBACK_FLOOR_SECS)),
            (Phase::Rollback, Allowance::Signal { at }) => at + s(CANCELLED_ROLLBACK_SECS),
            (Phase::Cleanup, Allowance::Run) => {
                return (now + s(CLEANUP_ALLOWANCE_SECS)).min(self.cleanup_end());
            }
            (Phase::Cleanup, Allowance::Signal { at }) => (now + s(CANCELLED_CLEANUP_SECS))
                .min(at + Duration::from_millis(CANCELLED_TAIL_MILLIS)),
            (Phase::Announce, _) => (now + s(ANNOUNCE_MAX_SECS)).min(deploy),
            (Phase::Report, Allowance::Run) => {
                return (now + s(REPORT_MAX_SECS)).min(self.cleanup_end());
            }
            (Phase::Report, Allowance::Signal { at }) => (now + s(CANCELLED_REPORT_SECS))
                .min(at + Duration::from_millis(CANCELLED_TAIL_MILLIS)),
            (Phase::Inform, _) => now + s(SHORT_READ_SECS),
            (Phase::Metrics, _) => (now + s(SHORT_READ_SECS)).min(run),
        };
        until.min(self.end())
    }

    /// Whether `until` (a rollback's) runs past the run's end: the run
    /// says so.
    pub(crate) fn past_run(&self, until: Instant) -> bool {
        until > self.run_end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Phase; 16] = [
        Phase::Setup,
        Phase::Upload,
        Phase::Create,
        Phase::Lookup,
        Phase::Wait,
        Phase::LastLook {
            grace: Duration::from_secs(5),
        },
        Phase::Smoke,
        Phase::Evidence,
        Phase::EvidenceBeforePromotion,
        Phase::Promotion,
        Phase::Rollback,
        Phase::Cleanup,
        Phase::Announce,
        Phase::Report,
        Phase::Inform,
        Phase::Metrics,
    ];

    /// The documented bound of each phase, from the README's formula.
    fn bound(b: &Budget, phase: Phase, now: Instant) -> Instant {
        let s = Duration::from_secs;
        match phase {
            Phase::Setup | Phase::Upload | Phase::Wait => b.deploy_end(),
            Phase::Create => b.deploy_end() + s(CREATE_GRACE_SECS),
            Phase::LastLook { .. }
            | Phase::Evidence
            | Phase::EvidenceBeforePromotion
            | Phase::Promotion => b.run_end(),
            Phase::Smoke => (now + b.predict).min(b.run_end()),
            Phase::Announce => (now + s(ANNOUNCE_MAX_SECS)).min(b.deploy_end()),
            Phase::Lookup => {
                (now + s(LOOKUP_ALLOWANCE_SECS)).min(b.end() + s(LOOKUP_ALLOWANCE_SECS))
            }
            Phase::Rollback => b.end(),
            Phase::Cleanup | Phase::Report => b.last(),
            Phase::Inform => (now + s(SHORT_READ_SECS)).min(b.end()),
            Phase::Metrics => (now + s(SHORT_READ_SECS)).min(b.run_end()),
        }
    }

    /// A clock that jumps — to the start, inside each part of the budget,
    /// onto its edges and far past its end — and every phase asked at
    /// every moment: no deadline passes its phase's bound nor the run's
    /// end, and a signal shortens what follows it.
    #[test]
    fn no_phase_gets_time_past_its_bound_whatever_the_clock_says() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let b = Budget::new(t0, s(600), s(30));
        assert_eq!(b.deploy_end(), t0 + s(600));
        assert_eq!(b.run_end(), t0 + s(630));
        assert_eq!(b.end(), t0 + s(690));
        assert_eq!(b.last(), t0 + s(780));
        let jumps = [
            0, 1, 300, 599, 600, 601, 620, 629, 630, 631, 650, 689, 690, 700, 86_400,
        ];
        for cancelled in [None, Some(625), Some(700)] {
            let b = Budget::new(t0, s(600), s(30));
            if let Some(at) = cancelled {
                b.cancel(t0 + s(at));
            }
            for &j in &jumps {
                let now = t0 + s(j);
                for phase in ALL {
                    let until = b.until(phase, now);
                    let why = format!("{phase:?} at +{j}s, cancelled {cancelled:?}");
                    assert!(until <= b.last(), "{why}: past the run's last second");
                    if !matches!(phase, Phase::Lookup | Phase::Cleanup | Phase::Report) {
                        assert!(until <= b.end(), "{why}: past the run's end");
                    }
                    assert!(until <= bound(&b, phase, now), "{why}: past its bound");
                    if let (
                        Some(at),
                        Phase::Rollback | Phase::Cleanup | Phase::Report | Phase::Lookup,
                    ) = (cancelled, phase)
                    {
                        let tail = t0 + s(at) + Duration::from_millis(CANCELLED_TAIL_MILLIS);
                        assert!(until <= tail, "{why}: past the signal's seconds");
                    }
                }
            }
        }
    }

    #[test]
    fn each_phase_gets_what_the_readme_says() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let b = Budget::new(t0, s(100), s(20));
        // (phase, asked at +secs, deadline at +secs)
        let cases = [
            (Phase::Setup, 0, 100),
            (Phase::Wait, 50, 100),
            (Phase::Create, 10, 100),
            (Phase::Create, 90, 150),
            (Phase::Create, 200, 160),
            (Phase::Smoke, 100, 120),
            (Phase::Smoke, 110, 120),
            (Phase::Smoke, 10, 30),
            (Phase::Promotion, 105, 120),
            (Phase::EvidenceBeforePromotion, 100, 110),
            (Phase::EvidenceBeforePromotion, 10, 65),
            (Phase::EvidenceBeforePromotion, 130, 120),
            (Phase::Rollback, 50, 120),
            (Phase::Rollback, 115, 125),
            (Phase::Rollback, 175, 180),
            (Phase::Cleanup, 50, 110),
            // Without a lookup, cleanup ends by the run's end (+180): a
            // rollback's floor comes out of its minute.
            (Phase::Cleanup, 150, 180),
            (Phase::Announce, 0, 20),
            (Phase::Announce, 90, 100),
            (Phase::Report, 50, 80),
            (Phase::Report, 170, 180),
            (Phase::Report, 185, 180),
            (Phase::Inform, 10, 10 + SHORT_READ_SECS),
            (Phase::Inform, 178, 180),
            (Phase::Metrics, 105, 105 + SHORT_READ_SECS),
            (Phase::Metrics, 118, 120),
        ];
        for (phase, at, want) in cases {
            assert_eq!(
                b.until(phase, t0 + s(at)),
                t0 + s(want),
                "{phase:?} at +{at}s"
            );
        }
        // The lookup after a lost answer: its own time, even once the
        // create's is spent, past the run's end (+180) too, by its
        // allowance at most; the cleanup and the report after it keep
        // cleanup's minute from the lookup's deadline, by `last` (+270).
        let after_lookup = [
            (Phase::Lookup, 10, 40, 100),
            (Phase::Lookup, 145, 175, 235),
            (Phase::Lookup, 160, 190, 250),
            (Phase::Lookup, 185, 210, 270),
            (Phase::Lookup, 250, 210, 270),
        ];
        for (phase, at, want, cleanup_end) in after_lookup {
            let b = Budget::new(t0, s(100), s(20));
            assert_eq!(b.last(), t0 + s(270));
            assert_eq!(b.until(phase, t0 + s(at)), t0 + s(want), "lookup at +{at}s");
            let cleanup_end = t0 + s(cleanup_end.max(180));
            let cleanup_at = t0 + s(want);
            assert_eq!(
                b.until(Phase::Cleanup, cleanup_at),
                (cleanup_at + s(CLEANUP_ALLOWANCE_SECS)).min(cleanup_end),
                "cleanup after a lookup at +{at}s"
            );
            assert_eq!(
                b.until(Phase::Report, cleanup_at + s(50)),
                (cleanup_at + s(50 + REPORT_MAX_SECS)).min(cleanup_end),
                "report after a lookup at +{at}s"
            );
        }
        assert!(b.past_run(b.until(Phase::Rollback, t0 + s(115))));
        assert!(!b.past_run(b.until(Phase::Rollback, t0 + s(50))));
        // After a signal: a rollback gets its seconds from the signal, and
        // cleanup shares the tail with it.
        b.cancel(t0 + s(40));
        b.cancel(t0 + s(45)); // the first signal counts
        assert_eq!(b.allowance(), Allowance::Signal { at: t0 + s(40) });
        assert_eq!(b.until(Phase::Rollback, t0 + s(41)), t0 + s(43));
        assert_eq!(b.until(Phase::Cleanup, t0 + s(41)), t0 + s(44));
        assert_eq!(b.until(Phase::Lookup, t0 + s(41)), t0 + s(44));
        assert_eq!(
            b.until(Phase::Lookup, t0 + s(46)),
            t0 + s(40) + Duration::from_millis(CANCELLED_TAIL_MILLIS)
        );
        assert_eq!(
            b.until(Phase::Cleanup, t0 + s(45)),
            t0 + s(40) + Duration::from_millis(CANCELLED_TAIL_MILLIS)
        );
        assert_eq!(b.until(Phase::Report, t0 + s(41)), t0 + s(44));
        assert_eq!(
            b.until(Phase::Report, t0 + s(46)),
            t0 + s(40) + Duration::from_millis(CANCELLED_TAIL_MILLIS)
        );
    }
}
