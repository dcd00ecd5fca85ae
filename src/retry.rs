//! When to try a request again, and how long to wait first.

use std::time::Duration;

/// First backoff delay.
pub const BACKOFF_BASE_MILLIS: u64 = 500;
/// Longest backoff delay (a Retry-After may ask for more; it is honoured up
/// to `RETRY_AFTER_MAX_SECS`).
pub const BACKOFF_MAX_MILLIS: u64 = 15_000;
/// A server cannot park us for longer than this with Retry-After.
pub const RETRY_AFTER_MAX_SECS: u64 = 120;

/// HTTP statuses worth another try: throttling, timeouts, server faults.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 425 | 429 | 500 | 502 | 503 | 504)
}

/// Exponential backoff with "equal jitter": half the exponential step is
/// fixed, half is random, so retries from many CI jobs spread out but never
/// collapse to zero. `unit` is a random number in [0, 1).
pub fn next_delay(attempt: u32, unit: f64) -> Duration {
    let exp = BACKOFF_BASE_MILLIS.saturating_mul(1u64 << attempt.min(16));
    let capped = exp.min(BACKOFF_MAX_MILLIS);
    let half = capped / 2;
    let jitter = (half as f64 * unit.clamp(0.0, 1.0)) as u64;
    Duration::from_millis(half + jitter)
}

/// Reads a `Retry-After` header: delta-seconds only (HTTP dates are not
/// worth a date parser here; a date falls back to backoff).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    Some(Duration::from_secs_f64(
        secs.min(RETRY_AFTER_MAX_SECS as f64),
    ))
}

/// The delay before the next try: the server's Retry-After when it gave
/// one, else backoff.
pub fn delay_for(attempt: u32, retry_after: Option<Duration>) -> Duration {
    retry_after.unwrap_or_else(|| next_delay(attempt, fastrand::f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_jitter_stays_in_range() {
        let table = [
            (0, 250, 500),
            (1, 500, 1000),
            (2, 1000, 2000),
            (5, 7500, 15000),
            (30, 7500, 15000),
        ];
        for (attempt, lo, hi) in table {
            let min = next_delay(attempt, 0.0).as_millis() as u64;
            let max = next_delay(attempt, 0.999_999).as_millis() as u64;
            assert_eq!(min, lo, "attempt {attempt}");
            assert!(max <= hi && max >= hi - 1, "attempt {attempt}: {max}");
        }
    }

    #[test]
    fn retryable_statuses() {
        for s in [429, 500, 502, 503, 504, 408] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [200, 400, 401, 403, 404, 409, 422] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }

    #[test]
    fn retry_after_parsing() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(
            parse_retry_after("9999"),
            Some(Duration::from_secs(RETRY_AFTER_MAX_SECS))
        );
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(
            delay_for(0, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
    }
}
