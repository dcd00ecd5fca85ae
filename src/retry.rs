//! When to try a request again, and how long to wait first: the policy is
//! data, the decision is a pure function of the error's kind, and one loop
//! (`run`) applies it for every caller — GraphQL, REST, S3.

use std::time::{Duration, Instant};

/// What a failed request tells us about whether it reached the server.
/// Deciding a retry from this (never from an error's text) is what keeps a
/// mutation from being applied twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallKind {
    /// The request never left: connection refused, DNS, TLS handshake.
    NotSent,
    /// It may have been applied: the connection closed or timed out after
    /// the request was sent, or the answer could not be read.
    Ambiguous,
    /// The server answered with a status that invites another try (429,
    /// 5xx, …); `status` is that answer's.
    Transient { status: u16 },
    /// Another try will not help.
    Permanent,
}

/// An error the retry loop can judge.
pub(crate) trait Classify {
    fn kind(&self) -> CallKind;
    /// What the server asked for with `Retry-After`, if anything.
    fn retry_after(&self) -> Option<Duration>;
}

/// HTTP statuses worth another try for a read: throttling, timeouts,
/// server faults. A read changes nothing, so even a 500 may be a blip.
pub(crate) const RETRYABLE_STATUSES: &[u16] = &[408, 425, 429, 500, 502, 503, 504];

/// The statuses that say the request did not reach the code it was for:
/// throttled (429), or a gateway that could not reach it (502, 503, 504).
/// A 500 or a 4xx is the answer of that code itself (a model's own error,
/// a deactivation the platform refused), and the same request gets the
/// same answer: it fails at once.
pub(crate) const GATEWAY_STATUSES: &[u16] = &[429, 502, 503, 504];

/// First backoff delay.
pub(crate) const BACKOFF_BASE_MILLIS: u64 = 500;
/// Longest backoff delay.
pub(crate) const BACKOFF_MAX_MILLIS: u64 = 15_000;
/// A server cannot park us for longer than this with Retry-After.
pub(crate) const RETRY_AFTER_MAX_SECS: u64 = 120;

/// Which failures are tried again, how often, and how long to wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    /// Tries in all, the first included.
    pub(crate) attempts: u32,
    /// Whether an `Ambiguous` failure is sent again. Only for requests that
    /// are safe to apply twice (reads, deactivation, S3 part uploads).
    pub(crate) retry_ambiguous: bool,
    /// Answered statuses that are tried again.
    pub(crate) retry_statuses: &'static [u16],
    /// First backoff step; each further step doubles, up to `max_delay`.
    pub(crate) base_delay: Duration,
    pub(crate) max_delay: Duration,
    /// Retry-After is honoured up to this.
    pub(crate) retry_after_cap: Duration,
}

impl Policy {
    /// Queries and REST reads: every transient kind is retried. The run's
    /// deadline bounds the tries in time; the count only stops a server
    /// that fails fast forever.
    pub(crate) const READ: Policy = Policy {
        attempts: 8,
        retry_ambiguous: true,
        retry_statuses: RETRYABLE_STATUSES,
        base_delay: Duration::from_millis(BACKOFF_BASE_MILLIS),
        max_delay: Duration::from_millis(BACKOFF_MAX_MILLIS),
        retry_after_cap: Duration::from_secs(RETRY_AFTER_MAX_SECS),
    };

    /// A mutation that creates something: sent again only when it surely
    /// never arrived (not sent, or refused with 429 before any work). An
    /// ambiguous failure is for the caller to resolve, never a blind resend.
    pub(crate) const MUTATION: Policy = Policy {
        retry_ambiguous: false,
        retry_statuses: &[429],
        ..Policy::READ
    };

    /// A mutation that may safely be applied twice, where a 500 is a
    /// server's blip (an S3 part upload, cancelling a promotion).
    pub(crate) const IDEMPOTENT: Policy = Policy::READ;

    /// Deactivating a deployment: safe to apply twice, so sent again when
    /// it may not have arrived or a gateway stood in the way; never after
    /// the platform's own error answer (a 500 would be said again, and a
    /// cleanup that retries it only delays the verdict).
    pub(crate) const DEACTIVATE: Policy = Policy {
        retry_statuses: GATEWAY_STATUSES,
        ..Policy::READ
    };

    /// A smoke-test call (predict, `run_remote`): safe to repeat, so a
    /// lost connection or a gateway's answer is tried again until the
    /// predict deadline; the model's own error answer (4xx, 500) fails at
    /// once, because the model would only say it again.
    pub(crate) const PREDICT: Policy = Policy {
        attempts: 12,
        retry_statuses: GATEWAY_STATUSES,
        ..Policy::READ
    };

    /// The push preflight (a dry run, which changes nothing): retried like
    /// a read, but three tries in all, so an endpoint that keeps failing
    /// is skipped in a few seconds rather than holding the upload.
    pub(crate) const PREFLIGHT: Policy = Policy {
        attempts: 3,
        ..Policy::READ
    };

    /// The same policy with every delay zero, for tests.
    pub(crate) const fn instant(self) -> Policy {
        Policy {
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
            retry_after_cap: Duration::ZERO,
            ..self
        }
    }

    /// Whether a failure of this kind is worth another try under the policy.
    pub(crate) fn retries(&self, kind: CallKind) -> bool {
        match kind {
            CallKind::NotSent => true,
            CallKind::Ambiguous => self.retry_ambiguous,
            CallKind::Transient { status } => self.retry_statuses.contains(&status),
            CallKind::Permanent => false,
        }
    }

    /// The wait before try `failed + 1`, after `failed` failures: the
    /// server's Retry-After (capped) when given, else exponential backoff
    /// with "equal jitter" — half the step fixed, half random — so many CI
    /// jobs spread out but never retry at once. `unit` is in [0, 1).
    pub(crate) fn delay(&self, failed: u32, retry_after: Option<Duration>, unit: f64) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.retry_after_cap);
        }
        let step = self
            .base_delay
            .saturating_mul(1u32 << failed.saturating_sub(1).min(16));
        let half = step.min(self.max_delay) / 2;
        half + half.mul_f64(unit.clamp(0.0, 1.0))
    }

    /// What to do after `failed` failures ending in `err`: wait this long
    /// and try again, or give up. A wait that would end past `deadline`
    /// gives up instead (the deadline belongs to the whole run).
    pub(crate) fn next(
        &self,
        failed: u32,
        err: &impl Classify,
        deadline: Option<Instant>,
        unit: f64,
    ) -> Option<Duration> {
        if failed >= self.attempts || !self.retries(err.kind()) {
            return None;
        }
        let wait = self.delay(failed, err.retry_after(), unit);
        match deadline {
            #[expect(
                clippy::disallowed_methods,
                reason = "compares with a deadline its callers hand over on the monotonic clock (Clock::timer)"
            )]
            Some(d) if Instant::now() + wait >= d => None,
            _ => Some(wait),
        }
    }
}

/// Runs `op` until it succeeds or the policy gives up, sleeping between
/// tries; `op` gets the number of the try (1 for the first). Each retry is
/// a debug log line.
pub(crate) async fn run<T, E, F>(
    policy: &Policy,
    deadline: Option<Instant>,
    op: impl FnMut(u32) -> F,
) -> Result<T, E>
where
    E: Classify + std::fmt::Display,
    F: Future<Output = Result<T, E>>,
{
    let note = |failed: u32, wait: Duration, err: &E| {
        tracing::debug!("try {failed} failed, retrying in {wait:?}: {err}");
    };
    run_noting(policy, deadline, note, op).await
}

/// [`run`] for callers that report a retry in their own words:
/// `note(failed, wait, err)` is called before each wait. `op` is a closure
/// returning a future (not an `async` closure) so that the loop's future is
/// `Send` inside spawned tasks.
pub(crate) async fn run_noting<T, E: Classify, F: Future<Output = Result<T, E>>>(
    policy: &Policy,
    deadline: Option<Instant>,
    mut note: impl FnMut(u32, Duration, &E),
    mut op: impl FnMut(u32) -> F,
) -> Result<T, E> {
    let mut failed = 0;
    loop {
        let err = match op(failed + 1).await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        failed += 1;
        match policy.next(failed, &err, deadline, fastrand::f64()) {
            Some(wait) => {
                note(failed, wait, &err);
                tokio::time::sleep(wait).await;
            }
            None => return Err(err),
        }
    }
}

/// The log line for one retry: what failed, which try comes next, and how
/// long until it. Said for every retry, so a slow run explains itself.
pub(crate) fn retry_line(
    err: &impl std::fmt::Display,
    failed: u32,
    wait: Duration,
    attempts: u32,
) -> String {
    format!(
        "{err}; retrying in {:.1}s (try {} of {attempts})",
        wait.as_secs_f64(),
        failed + 1
    )
}

/// Reads a `Retry-After` header: delta-seconds only (an HTTP date falls
/// back to backoff; not worth a date parser). Policies cap the value.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    Some(Duration::from_secs_f64(
        secs.min(RETRY_AFTER_MAX_SECS as f64),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct E(CallKind, Option<Duration>);
    impl Classify for E {
        fn kind(&self) -> CallKind {
            self.0
        }
        fn retry_after(&self) -> Option<Duration> {
            self.1
        }
    }
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{:?}", self.0)
        }
    }

    #[test]
    fn backoff_grows_is_capped_and_jitter_stays_in_range() {
        let p = Policy::READ;
        for (failed, lo, hi) in [
            (1, 250, 500),
            (2, 500, 1000),
            (3, 1000, 2000),
            (6, 7500, 15000),
            (31, 7500, 15000),
        ] {
            let min = p.delay(failed, None, 0.0).as_millis() as u64;
            let max = p.delay(failed, None, 0.999_999).as_millis() as u64;
            assert_eq!(min, lo, "after {failed} failures");
            assert!(max <= hi && max >= hi - 1, "after {failed}: {max}");
        }
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let p = Policy::READ;
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3)), 0.5),
            Duration::from_secs(3)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(999_999)), 0.5),
            Duration::from_secs(RETRY_AFTER_MAX_SECS)
        );
    }

    #[test]
    fn which_kinds_retry_for_each_kind_of_call() {
        let t = |status| CallKind::Transient { status };
        // (failure, read and idempotent, mutation, deactivate, predict)
        for (kind, read, mutation, deactivate, predict) in [
            (CallKind::NotSent, true, true, true, true),
            (CallKind::Ambiguous, true, false, true, true),
            (t(429), true, true, true, true),
            (t(500), true, false, false, false),
            (t(502), true, false, true, true),
            (t(503), true, false, true, true),
            (t(504), true, false, true, true),
            (t(408), true, false, false, false),
            (t(425), true, false, false, false),
            (t(404), false, false, false, false),
            (CallKind::Permanent, false, false, false, false),
        ] {
            for (policy, name, want) in [
                (Policy::READ, "read", read),
                (Policy::IDEMPOTENT, "idempotent", read),
                (Policy::MUTATION, "mutation", mutation),
                (Policy::DEACTIVATE, "deactivate", deactivate),
                (Policy::PREDICT, "predict", predict),
            ] {
                assert_eq!(policy.retries(kind), want, "{name} {kind:?}");
            }
        }
    }

    #[test]
    fn an_ambiguous_mutation_is_never_sent_again() {
        let p = Policy::MUTATION.instant();
        for failed in 1..10 {
            assert_eq!(
                p.next(failed, &E(CallKind::Ambiguous, None), None, 0.5),
                None
            );
        }
    }

    #[test]
    fn attempts_and_the_deadline_bound_the_retries() {
        let p = Policy::READ.instant();
        let e = E(CallKind::NotSent, None);
        assert_eq!(p.next(1, &e, None, 0.5), Some(Duration::ZERO));
        assert_eq!(p.next(p.attempts, &e, None, 0.5), None);
        let soon = Some(Instant::now() + Duration::from_secs(1));
        let slow = E(
            CallKind::Transient { status: 429 },
            Some(Duration::from_secs(60)),
        );
        assert_eq!(Policy::READ.next(1, &slow, soon, 0.5), None);
    }

    #[tokio::test]
    async fn run_sends_a_mutation_once_when_the_outcome_is_ambiguous() {
        for (policy, want) in [(Policy::MUTATION, 1), (Policy::READ, Policy::READ.attempts)] {
            let sent = std::cell::Cell::new(0);
            let r: Result<(), E> = run(&policy.instant(), None, |_| {
                sent.set(sent.get() + 1);
                async { Err(E(CallKind::Ambiguous, None)) }
            })
            .await;
            assert!(r.is_err());
            assert_eq!(sent.get(), want);
        }
    }

    #[tokio::test]
    async fn run_noting_notes_each_retry_before_its_wait() {
        let mut noted = Vec::new();
        let r: Result<(), E> = run_noting(
            &Policy::READ.instant(),
            None,
            |failed, wait, _: &E| noted.push((failed, wait)),
            |_| async { Err(E(CallKind::NotSent, None)) },
        )
        .await;
        assert!(r.is_err());
        let expected: Vec<_> = (1..Policy::READ.attempts)
            .map(|failed| (failed, Duration::ZERO))
            .collect();
        assert_eq!(noted, expected);
    }

    #[test]
    fn a_retry_line_names_the_failure_the_next_try_and_the_wait() {
        let line = retry_line(
            &"predict answered HTTP 503",
            1,
            Duration::from_millis(1500),
            12,
        );
        assert_eq!(
            line,
            "predict answered HTTP 503; retrying in 1.5s (try 2 of 12)"
        );
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
        assert_eq!(parse_retry_after("1e400"), None);
    }
}
