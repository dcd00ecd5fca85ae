//! Scenario time: seconds since the fake started, either scaled real time or
//! a manual clock a test sets and advances.
//!
//! Every status timeline, promotion and log line in a scenario is written in
//! scenario seconds. With `time_scale: 100` the 631 s of a real deployment's
//! recorded status history (`scaled-to-zero-history.yaml`) pass in 6.31 real seconds;
//! with a manual clock nothing moves until the test says so, which lets a
//! test read a status at a chosen instant without sleeping.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug)]
enum Mode {
    /// `now = base + elapsed_real * scale`.
    Scaled {
        origin: Instant,
        base_secs: f64,
        scale: f64,
    },
    Manual {
        now_secs: f64,
        /// Moved forward after each status poll the fake answers; 0: never.
        per_poll_secs: f64,
    },
}

/// The fake's clock. Cheap to read; shared by every request handler.
#[derive(Debug)]
pub struct Clock {
    mode: Mutex<Mode>,
    /// Wall-clock milliseconds since the Unix epoch at scenario time 0.
    epoch_ms_at_zero: u64,
    /// Scenario seconds per real second; 1 for a manual clock.
    scale: f64,
}

impl Clock {
    /// Scaled real time: `scale` scenario seconds pass per real second.
    pub fn scaled(scale: f64) -> Self {
        let scale = if scale.is_finite() && scale > 0.0 {
            scale
        } else {
            1.0
        };
        Self {
            mode: Mutex::new(Mode::Scaled {
                origin: Instant::now(),
                base_secs: 0.0,
                scale,
            }),
            epoch_ms_at_zero: now_epoch_ms(),
            scale,
        }
    }

    /// A clock that stands still at 0 until [`Clock::set`] or
    /// [`Clock::advance`] moves it.
    pub fn manual() -> Self {
        Self {
            mode: Mutex::new(Mode::Manual {
                now_secs: 0.0,
                per_poll_secs: 0.0,
            }),
            epoch_ms_at_zero: now_epoch_ms(),
            scale: 1.0,
        }
    }

    pub fn is_manual(&self) -> bool {
        matches!(*self.lock(), Mode::Manual { .. })
    }

    /// Current scenario time in seconds.
    pub fn now(&self) -> f64 {
        match &*self.lock() {
            Mode::Scaled {
                origin,
                base_secs,
                scale,
            } => base_secs + origin.elapsed().as_secs_f64() * scale,
            Mode::Manual { now_secs, .. } => *now_secs,
        }
    }

    /// Jumps to scenario time `secs`. On a scaled clock time keeps running
    /// from there.
    pub fn set(&self, secs: f64) {
        let mut mode = self.lock();
        match &mut *mode {
            Mode::Scaled {
                origin, base_secs, ..
            } => {
                *origin = Instant::now();
                *base_secs = secs;
            }
            Mode::Manual { now_secs, .. } => *now_secs = secs,
        }
    }

    /// Moves scenario time forward by `secs`.
    pub fn advance(&self, secs: f64) {
        let now = self.now();
        self.set(now + secs.max(0.0));
    }

    /// Makes a manual clock move `secs` forward each time the fake has
    /// answered a poll (a status read of a deployment, a chain deployment or
    /// an environment, or a predict; see [`Clock::polled`]), so a client
    /// reads the scenario by the count of its polls, however slow the
    /// machine; 0 stops it. No effect on a scaled clock.
    pub fn advance_per_poll(&self, secs: f64) {
        if let Mode::Manual { per_poll_secs, .. } = &mut *self.lock() {
            *per_poll_secs = secs.max(0.0);
        }
    }

    /// The fake answered a status poll: a manual clock set to move per poll
    /// moves now, before the client can send its next request.
    pub fn polled(&self) {
        if let Mode::Manual {
            now_secs,
            per_poll_secs,
        } = &mut *self.lock()
        {
            *now_secs += *per_poll_secs;
        }
    }

    /// Scenario seconds per real second (1 for a manual clock).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Real time that `scenario_secs` of scenario time take to pass; `None`
    /// on a manual clock, where only the test moves time.
    pub fn real_duration(&self, scenario_secs: f64) -> Option<Duration> {
        if self.is_manual() {
            return None;
        }
        Some(Duration::from_secs_f64(
            (scenario_secs / self.scale).max(0.0),
        ))
    }

    /// Wall-clock epoch milliseconds of scenario time `secs`.
    ///
    /// Scenario time is mapped to the real moment it happened (divided by
    /// the scale), so timestamps stay consistent with a client's own clock:
    /// a log window of "the last minute" asked by a client sees the lines
    /// that were emitted during that real minute.
    pub fn epoch_ms(&self, secs: f64) -> u64 {
        let offset_ms = (secs / self.scale * 1000.0).round();
        (self.epoch_ms_at_zero as f64 + offset_ms).max(0.0) as u64
    }

    /// Inverse of [`Clock::epoch_ms`].
    pub fn scenario_secs_of_epoch_ms(&self, ms: u64) -> f64 {
        (ms as f64 - self.epoch_ms_at_zero as f64) / 1000.0 * self.scale
    }

    /// ISO 8601 UTC timestamp of scenario time `secs`.
    pub fn iso(&self, secs: f64) -> String {
        iso8601_from_epoch_ms(self.epoch_ms(secs))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mode> {
        self.mode.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn now_epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Current wall-clock time as ISO 8601 UTC with milliseconds.
pub fn iso_now() -> String {
    iso8601_from_epoch_ms(now_epoch_ms())
}

/// `2024-05-01T12:34:56.789Z` from epoch milliseconds.
pub fn iso8601_from_epoch_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let millis = ms % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's well-known algorithm, restated).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates_match_known_instants() {
        for (ms, want) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (1_700_000_000_123, "2023-11-14T22:13:20.123Z"),
            (4_102_444_799_999, "2099-12-31T23:59:59.999Z"),
        ] {
            assert_eq!(iso8601_from_epoch_ms(ms), want, "{ms}");
        }
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = Clock::manual();
        assert_eq!(c.now(), 0.0);
        c.advance(12.5);
        assert_eq!(c.now(), 12.5);
        c.set(631.0);
        assert_eq!(c.now(), 631.0);
        assert!(c.real_duration(5.0).is_none());
    }

    #[test]
    fn a_clock_per_poll_moves_one_step_a_poll_and_only_when_manual() {
        let c = Clock::manual();
        c.polled();
        assert_eq!(c.now(), 0.0, "not set to move per poll");
        c.advance_per_poll(1.5);
        c.polled();
        c.polled();
        assert_eq!(c.now(), 3.0);
        c.advance_per_poll(0.0);
        c.polled();
        assert_eq!(c.now(), 3.0);
        let scaled = Clock::scaled(1e-9);
        scaled.advance_per_poll(100.0);
        scaled.polled();
        assert!(scaled.now() < 1.0);
    }

    #[test]
    fn scaled_clock_maps_scenario_time_back_to_real_time() {
        let c = Clock::scaled(100.0);
        let zero = c.epoch_ms(0.0);
        assert_eq!(c.epoch_ms(631.0) - zero, 6310);
        assert!((c.scenario_secs_of_epoch_ms(zero + 6310) - 631.0).abs() < 1e-6);
        assert_eq!(c.real_duration(50.0), Some(Duration::from_millis(500)));
    }
}
