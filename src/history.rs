//! What served an environment before: derived from the audit log's
//! promotions, never from the order the answer happens to list them in.
//!
//! The derivation, for environment `E` now served by deployment `C`:
//!
//! 1. Take the entries that place a deployment in `E`: a
//!    `MODEL_DEPLOYMENT_PROMOTED` into `E`, and a `MODEL_DEPLOYED` naming
//!    `E` (a create straight into the environment, as `promotion:
//!    at-create` makes, which writes no promotion entry) — sorted by the
//!    time the action occurred, newest first. A time that does not parse
//!    as the log's ISO 8601 makes the log undecided.
//! 2. Leave out the entries of deployments that have not served (the
//!    caller says which, from reads: the candidate of a promotion in
//!    flight, whose entry the platform writes when it starts, and a
//!    deployment still building or deploying, or whose build or deploy
//!    failed — it never came up). `C` itself is never left out.
//! 3. The newest remaining entry must place `C`: otherwise the log does
//!    not explain what serves (a change the log does not show), and it
//!    decides nothing.
//! 4. Going back from there, skip the entries promoting `C` again; the
//!    first entry promoting another deployment names what served `E`
//!    before `C`. Two different deployments promoted at the same instant
//!    leave it undecided. No such entry: nothing served `E` before `C`
//!    (as the log shows it).
//! 5. A promotion whose entry names no environment (the published schema
//!    lets `environment_name` be null) may have been into `E`: when one of
//!    a deployment other than `C` and the one step 4 found is as new as
//!    that one's entry or newer (any at all when step 4 found none), the
//!    log does not decide it.
//!
//! A deployment the entry names may since have been deleted: the caller
//! reads it before acting on it.

use std::cmp::Reverse;

/// One promotion as the audit log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Promoted {
    /// When it occurred, as the log writes it (ISO 8601).
    pub(crate) at: String,
    pub(crate) deployment: String,
    /// `None` when the entry names no environment.
    pub(crate) environment: Option<String>,
}

/// What the log says served an environment before the current deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Previous {
    /// `Some(id)`: it served just before; `None`: nothing did, as far as the
    /// log shows.
    Decided(Option<String>),
    /// The log does not decide it, and why, in words.
    Undecided(String),
}

/// The deployment that served `environment` just before `current`
/// (see the module's derivation). `not_served` says, from the caller's
/// reads, which deployments have not served: the candidate of a promotion
/// in flight, and those [`crate::status::never_served`] names.
pub(crate) fn previous_serving(
    placements: &[Promoted],
    environment: &str,
    current: &str,
    not_served: &dyn Fn(&str) -> bool,
) -> Previous {
    let mut into: Vec<(u128, &Promoted)> = Vec::new();
    let mut nowhere: Vec<(u128, &Promoted)> = Vec::new();
    for p in placements
        .iter()
        .filter(|p| p.environment.is_none() || p.environment.as_deref() == Some(environment))
        .filter(|p| p.deployment == current || !not_served(&p.deployment))
    {
        match (instant(&p.at), p.environment.is_some()) {
            (Some(t), true) => into.push((t, p)),
            (Some(t), false) => nowhere.push((t, p)),
            (None, _) => {
                return Previous::Undecided(format!(
                    "the audit log has a promotion into {environment} at {:?}, a time it cannot be sorted by",
                    p.at
                ));
            }
        }
    }
    let found = match before_current(&mut into, environment, current) {
        Ok(found) => found,
        Err(why) => return Previous::Undecided(why),
    };
    let since = found.as_ref().map_or(0, |(t, _)| *t);
    let named = found.as_ref().map(|(_, id)| id.as_str());
    if let Some((_, p)) = nowhere.iter().find(|(t, p)| {
        *t >= since && p.deployment != current && Some(p.deployment.as_str()) != named
    }) {
        return Previous::Undecided(format!(
            "the audit log has a promotion of {} at {} that names no environment: it may have served {environment} before {current}",
            p.deployment, p.at
        ));
    }
    Previous::Decided(found.map(|(_, id)| id))
}

/// Steps 3 and 4 of the derivation over the entries placing a deployment
/// in `environment`: the one before `current`, with its entry's instant.
fn before_current(
    into: &mut [(u128, &Promoted)],
    environment: &str,
    current: &str,
) -> Result<Option<(u128, String)>, String> {
    into.sort_by_key(|&(t, _)| Reverse(t));
    let mut rest = into.iter().peekable();
    match rest.peek() {
        None => {
            return Err(format!(
                "the audit log records no promotion of {current} into {environment}, which it serves, nor its create there: it does not say what served before"
            ));
        }
        Some((_, p)) if p.deployment != current => {
            return Err(format!(
                "the audit log's newest promotion into {environment} is of {}, but {current} serves it: the log does not explain what serves",
                p.deployment
            ));
        }
        Some(_) => {}
    }
    let mut before = rest.skip_while(|(_, p)| p.deployment == current);
    let Some(&(t, p)) = before.next() else {
        return Ok(None);
    };
    if into
        .iter()
        .any(|&(u, q)| u == t && q.deployment != p.deployment)
    {
        return Err(format!(
            "the audit log promotes two deployments into {environment} at the same instant ({}): which came first is not known",
            p.at
        ));
    }
    Ok(Some((t, p.deployment.clone())))
}

/// An ISO 8601 UTC time (`2026-12-07T10:00:00Z`, fractions and `+00:00`
/// allowed) as nanoseconds since 1970, for sorting; `None` when it is not
/// one.
pub(crate) fn instant(at: &str) -> Option<u128> {
    let b = at.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let s = at.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut rest = &at[19..];
    let mut nanos: u128 = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let padded: String = frac[..digits]
            .chars()
            .chain(std::iter::repeat('0'))
            .take(9)
            .collect();
        nanos = padded.parse().ok()?;
        rest = &frac[digits..];
    }
    if !matches!(rest, "Z" | "z" | "+00:00" | "") {
        return None;
    }
    // Days since 1970-01-01 (Howard Hinnant's civil-from-days, inverted).
    let (y, mo, d) = (y as i64, mo as i64, d as i64);
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + (h * 3600 + mi * 60 + s) as i64;
    u128::try_from(secs).ok().map(|s| s * 1_000_000_000 + nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(at: &str, dep: &str, env: &str) -> Promoted {
        Promoted {
            at: at.into(),
            deployment: dep.into(),
            environment: Some(env.into()),
        }
    }

    #[test]
    fn the_previous_deployment_is_the_one_promoted_before_the_current_whatever_the_answers_order() {
        let log = [
            p("2026-12-01T10:00:00Z", "a", "production"),
            p("2026-12-03T10:00:00Z", "c", "production"),
            p("2026-12-02T10:00:00Z", "b", "production"),
            p("2026-12-02T11:00:00Z", "x", "staging"),
        ];
        let none = |_: &str| false;
        assert_eq!(
            previous_serving(&log, "production", "c", &none),
            Previous::Decided(Some("b".into()))
        );
        // c promoted twice in a row: still b before it.
        let mut twice = log.to_vec();
        twice.push(p("2026-12-04T00:00:00.5Z", "c", "production"));
        assert_eq!(
            previous_serving(&twice, "production", "c", &none),
            Previous::Decided(Some("b".into()))
        );
        // A promotion to d in flight: c still serves, b is before it.
        let mut flight = log.to_vec();
        flight.push(p("2026-12-05T00:00:00Z", "d", "production"));
        assert_eq!(
            previous_serving(&flight, "production", "c", &|id| id == "d"),
            Previous::Decided(Some("b".into()))
        );
        // Without knowing of the flight, the log does not explain c.
        assert!(matches!(
            previous_serving(&flight, "production", "c", &none),
            Previous::Undecided(_)
        ));
        // The first deployment ever promoted had nothing before it.
        let first = [p("2026-12-01T10:00:00Z", "a", "production")];
        assert_eq!(
            previous_serving(&first, "production", "a", &none),
            Previous::Decided(None)
        );
    }

    #[test]
    fn creates_into_the_environment_place_and_deployments_that_never_came_up_do_not() {
        let created = |at: &str, dep: &str| p(at, dep, "production");
        // a at-create, b at-create, then c failed its build, d still
        // building: b serves, a served before it.
        let log = [
            created("2026-12-01T10:00:00Z", "a"),
            created("2026-12-02T10:00:00Z", "b"),
            created("2026-12-03T10:00:00Z", "c"),
            created("2026-12-04T10:00:00Z", "d"),
        ];
        let failed = |id: &str| matches!(id, "c" | "d");
        assert_eq!(
            previous_serving(&log, "production", "b", &failed),
            Previous::Decided(Some("a".into()))
        );
        // A failed one between a and b never served: a is still before b.
        let between = [
            created("2026-12-01T10:00:00Z", "a"),
            created("2026-12-02T10:00:00Z", "c"),
            created("2026-12-03T10:00:00Z", "b"),
        ];
        assert_eq!(
            previous_serving(&between, "production", "b", &failed),
            Previous::Decided(Some("a".into()))
        );
        // What serves is never left out, whatever the caller says of it.
        assert_eq!(
            previous_serving(&log, "production", "d", &failed),
            Previous::Decided(Some("b".into()))
        );
    }

    #[test]
    fn a_log_that_does_not_explain_what_serves_decides_nothing() {
        let log = [
            p("2026-12-01T10:00:00Z", "a", "production"),
            p("2026-12-02T10:00:00Z", "b", "production"),
        ];
        // Something else serves: a create straight into the environment,
        // or a change the log does not show.
        assert!(matches!(
            previous_serving(&log, "production", "z", &|_| false),
            Previous::Undecided(m) if m.contains("newest promotion into production is of b")
        ));
        // Nothing recorded for this environment at all.
        assert!(matches!(
            previous_serving(&log, "staging", "z", &|_| false),
            Previous::Undecided(m) if m.contains("no promotion of z")
        ));
        // Two others at one instant before the current one.
        let tie = [
            p("2026-12-01T10:00:00Z", "a", "production"),
            p("2026-12-01T10:00:00Z", "b", "production"),
            p("2026-12-02T10:00:00Z", "c", "production"),
        ];
        assert!(matches!(
            previous_serving(&tie, "production", "c", &|_| false),
            Previous::Undecided(m) if m.contains("same instant")
        ));
        // A time that cannot be sorted.
        let bad = [
            p("yesterday", "a", "production"),
            p("2026-12-02T10:00:00Z", "c", "production"),
        ];
        assert!(matches!(
            previous_serving(&bad, "production", "c", &|_| false),
            Previous::Undecided(_)
        ));
    }

    #[test]
    fn a_promotion_naming_no_environment_may_be_the_previous_one() {
        let nowhere = |at: &str, dep: &str| Promoted {
            at: at.into(),
            deployment: dep.into(),
            environment: None,
        };
        let none = |_: &str| false;
        let log = [
            p("2026-12-01T10:00:00Z", "a", "production"),
            nowhere("2026-12-02T10:00:00Z", "x"),
            p("2026-12-03T10:00:00Z", "c", "production"),
        ];
        assert!(matches!(
            previous_serving(&log, "production", "c", &none),
            Previous::Undecided(m) if m.contains("names no environment")
        ));
        // Older than the previous one, or of the previous or the current
        // deployment, or of one that never served: it changes nothing.
        for other in [
            nowhere("2026-11-01T10:00:00Z", "x"),
            nowhere("2026-12-02T10:00:00Z", "a"),
            nowhere("2026-12-02T10:00:00Z", "c"),
        ] {
            let mut l = log.to_vec();
            l[1] = other;
            assert_eq!(
                previous_serving(&l, "production", "c", &none),
                Previous::Decided(Some("a".into()))
            );
        }
        assert_eq!(
            previous_serving(&log, "production", "c", &|id| id == "x"),
            Previous::Decided(Some("a".into()))
        );
        // Nothing named before the current one: any such entry may be.
        let first = [
            nowhere("2026-01-01T10:00:00Z", "x"),
            p("2026-12-03T10:00:00Z", "c", "production"),
        ];
        assert!(matches!(
            previous_serving(&first, "production", "c", &none),
            Previous::Undecided(_)
        ));
    }

    #[test]
    fn times_sort_as_instants() {
        assert_eq!(instant("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(instant("1970-01-02T00:00:01.5Z"), Some(86_401_500_000_000));
        assert_eq!(
            instant("2026-12-07T10:00:00+00:00"),
            instant("2026-12-07T10:00:00.000000Z")
        );
        assert!(instant("2026-12-07T10:00:00Z") < instant("2026-12-07T10:00:00.000001Z"));
        assert_eq!(
            instant("2000-03-01T00:00:00Z"),
            Some(951_868_800 * 1_000_000_000)
        );
        for bad in [
            "",
            "2026-13-01T00:00:00Z",
            "2026-12-07T10:00:00+02:00",
            "2026-12-07",
            "2026-12-07T10:00:00.Z",
            "２026-12-07T10:00:00Z",
        ] {
            assert_eq!(instant(bad), None, "{bad:?}");
        }
    }
}
