//! The scripted clock a debug build reads when `TRUSS_PUSH_TEST_CLOCK` is
//! set, so a test of the whole binary can make time jump: the monotonic
//! clock plus an offset that grows at chosen requests. It records every
//! request the run checks before sending (its phase, the clock at the
//! check, its deadline, whether it went) for the run to print at its end.
//! Compiled only with debug assertions: a release build has no way to
//! read it.
//!
//! The script is a comma-separated list of jumps, `PHASE#N+SECS`: just
//! before the `N`th request of `PHASE` is checked, the clock moves `SECS`
//! seconds forward (`Wait#1+590,Promotion#3+400`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Phase, Spent};

/// One jump of the script.
#[derive(Debug, PartialEq)]
struct Jump {
    phase: String,
    nth: u32,
    by: Duration,
}

#[derive(Default)]
struct Moves {
    offset: Duration,
    sent: HashMap<&'static str, u32>,
    record: Vec<String>,
}

pub(crate) struct Scripted {
    /// The clock's zero: every time in the record is counted from it.
    origin: Instant,
    jumps: Vec<Jump>,
    moves: Mutex<Moves>,
}

impl Scripted {
    pub(crate) fn parse(script: &str) -> Result<Scripted, String> {
        let bad =
            |j: &str| format!("TRUSS_PUSH_TEST_CLOCK: {j:?} is not PHASE#N+SECS (Wait#1+590)");
        let mut jumps = Vec::new();
        for j in script.split(',').map(str::trim).filter(|j| !j.is_empty()) {
            let (phase, rest) = j.split_once('#').ok_or_else(|| bad(j))?;
            let (nth, secs) = rest.split_once('+').ok_or_else(|| bad(j))?;
            jumps.push(Jump {
                phase: phase.to_string(),
                nth: nth.parse().map_err(|_| bad(j))?,
                by: Duration::from_secs_f64(secs.parse::<f64>().map_err(|_| bad(j))?),
            });
        }
        Ok(Scripted {
            #[expect(
                clippy::disallowed_methods,
                reason = "the scripted clock is the budget's, and starts from the monotonic clock"
            )]
            origin: Instant::now(),
            jumps,
            moves: Mutex::default(),
        })
    }

    fn moves(&self) -> std::sync::MutexGuard<'_, Moves> {
        self.moves.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "the scripted clock is the budget's, moved forward from the monotonic clock"
    )]
    pub(crate) fn now(&self) -> Instant {
        Instant::now() + self.moves().offset
    }

    fn ms(&self, t: Instant) -> String {
        format!("{}", t.saturating_duration_since(self.origin).as_millis())
    }

    pub(crate) fn send(
        &self,
        phase: Option<Phase>,
        deadline: Option<Instant>,
        what: &str,
    ) -> Result<Option<Duration>, Spent> {
        let name = phase.map_or("none", Phase::name);
        let mut m = self.moves();
        let n = {
            let n = m.sent.entry(name).or_insert(0);
            *n += 1;
            *n
        };
        for j in self.jumps.iter().filter(|j| j.phase == name && j.nth == n) {
            m.offset += j.by;
        }
        #[expect(
            clippy::disallowed_methods,
            reason = "the scripted clock is the budget's, moved forward from the monotonic clock"
        )]
        let now = Instant::now() + m.offset;
        let left = deadline.map(|d| d.saturating_duration_since(now));
        let (went, due) = match (left, deadline) {
            (Some(l), Some(d)) if l.is_zero() => ("refused", self.ms(d)),
            (_, Some(d)) => ("sent", self.ms(d)),
            (_, None) => ("undated", "-".to_string()),
        };
        let line = format!(
            "test-clock: {name} {went} at={} due={due} {what}",
            self.ms(now)
        );
        m.record.push(line);
        match left {
            Some(l) if l.is_zero() => Err(Spent),
            left => Ok(left),
        }
    }

    pub(crate) fn ended(&self, phase: Phase, deadline: Instant, what: &str) {
        let now = self.now();
        let line = format!(
            "test-clock: {} ended at={} due={} {what}",
            phase.name(),
            self.ms(now),
            self.ms(deadline)
        );
        self.moves().record.push(line);
    }

    pub(crate) fn record(&self) -> Vec<String> {
        self.moves().record.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_happen_at_their_request_and_every_request_is_recorded() {
        let c = Scripted::parse("Wait#2+100, Smoke#1+0.5").unwrap();
        let t0 = c.now();
        let due = t0 + Duration::from_secs(50);
        assert!(c.send(Some(Phase::Wait), Some(due), "poll").is_ok());
        assert!(c.now() < t0 + Duration::from_secs(1));
        assert!(c.send(Some(Phase::Wait), Some(due), "poll").is_err());
        assert!(c.now() >= t0 + Duration::from_secs(100));
        assert!(c.send(None, None, "x").unwrap().is_none());
        let r = c.record();
        assert_eq!(r.len(), 3);
        assert!(r[0].starts_with("test-clock: Wait sent at="), "{r:?}");
        assert!(r[1].starts_with("test-clock: Wait refused at=100"), "{r:?}");
        assert!(r[1].ends_with(" due=50000 poll"), "{r:?}");
        assert!(r[2].starts_with("test-clock: none undated"), "{r:?}");
        for bad in ["Wait", "Wait#x+1", "Wait#1+", "Wait#1-3"] {
            assert!(Scripted::parse(bad).is_err(), "{bad}");
        }
    }
}
