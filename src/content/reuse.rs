//! Reuse by content (`skip-unchanged`): when what serves the environment
//! was made from other content, an older deployment of the same model
//! made from this very source is promoted instead of building again (the
//! revert case). Pure decisions over the platform's reads; the flow
//! performs them (`crate::flow::content`).
//!
//! Which deployment: of the model's deployments (one list read), those
//! whose [`LABEL_KEY`] is exactly this source's hash, that also carry
//! truss-push's run label ([`RUN_LABEL_KEY`], written by every create
//! since run labels exist), that are not the one serving, and whose status
//! can serve after at most an activate (`ACTIVE`, `SCALED_TO_ZERO`,
//! `WAKING_UP`, `INACTIVE`): a build or deploy failure, one building or
//! deactivating, and a deleted one (absent from the list) never. The
//! newest by `created_at` wins; one whose `created_at` cannot be read is
//! never chosen over one whose can (nor at all when several match).
//!
//! A label is a claim anyone with a key can write. A hash label without
//! our run label is not ours and never reused. One carrying both is
//! reused only when the platform's own copy of its `config.yaml` says the
//! same as ours, or keeps none (then the hash decides, and the log says
//! so): [`config_agrees`].

use serde_json::Value;

use super::skip::Why;
use crate::baseten::Deployment;
use crate::label::{LABEL_KEY, RUN_LABEL_KEY};

/// The statuses a reused deployment may have: ready, waking, or inactive
/// (activated first).
const REUSABLE: &[&str] = &["ACTIVE", "SCALED_TO_ZERO", "WAKING_UP", "INACTIVE"];

/// An older deployment made from this source.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reusable {
    pub(crate) id: String,
    pub(crate) name: Option<String>,
    /// `created_at` as the platform wrote it.
    pub(crate) created: String,
    pub(crate) status: String,
}

impl Reusable {
    /// Whether it must be activated before it can serve.
    pub(crate) fn inactive(&self) -> bool {
        self.status == "INACTIVE"
    }

    /// Its name and when it was built, for the log and the summary.
    pub(crate) fn described(&self) -> String {
        match &self.name {
            Some(n) => format!("{} ({n}, built {})", self.id, self.created),
            None => format!("{} (built {})", self.id, self.created),
        }
    }
}

/// Whether the skip verdict's reason leaves room for reuse: the model and
/// the environment were read, nothing is in flight, and what serves was
/// read and is not this source ready to serve. A read that failed, a
/// promotion in flight or an environment that moved deploys as before.
pub(crate) fn looked_for(why: &Why) -> bool {
    matches!(
        why,
        Why::ServesNothing { .. }
            | Why::NotReady { .. }
            | Why::Unlabelled { .. }
            | Why::OtherContent { .. }
            | Why::NotAHash { .. }
    )
}

/// The choice over the model's deployments, with a line for each one
/// that carries this source's hash and was left, and why.
#[derive(Debug, PartialEq)]
pub(crate) struct Choice {
    pub(crate) chosen: Option<Reusable>,
    pub(crate) left: Vec<String>,
}

fn label<'a>(d: &'a Deployment, key: &str) -> Option<&'a Value> {
    d.labels.as_ref()?.get(key)
}

/// Picks the deployment to reuse among `listed` (the model's deployments)
/// for the source hashed `ours`, `serving` being what serves now.
pub(crate) fn choose(listed: &[Deployment], ours: &str, serving: Option<&str>) -> Choice {
    let mut left = Vec::new();
    let mut fit: Vec<(Option<Moment>, Reusable)> = Vec::new();
    for d in listed {
        if label(d, LABEL_KEY).and_then(Value::as_str) != Some(ours) || serving == Some(&d.id) {
            continue;
        }
        let status = d.status.trim().to_string();
        let run = label(d, RUN_LABEL_KEY).and_then(Value::as_str);
        if run.is_none_or(str::is_empty) {
            left.push(format!(
                "deployment {} carries this source's hash but no {RUN_LABEL_KEY} label, so truss-push did not make it (a label written by hand?): not reused",
                d.id
            ));
            continue;
        }
        if !REUSABLE.contains(&status.as_str()) {
            left.push(format!(
                "deployment {} was made from this source but is {status}: not reused",
                d.id
            ));
            continue;
        }
        let created = d.created_at.clone().unwrap_or_default();
        fit.push((
            moment(&created),
            Reusable {
                id: d.id.clone(),
                // The platform's answer: shown only when it is a name a
                // deployment may have.
                name: d
                    .name
                    .clone()
                    .filter(|n| crate::settings::is_valid_deployment_name(n)),
                created,
                status,
            },
        ));
    }
    let unreadable: Vec<String> = fit
        .iter()
        .filter(|(m, _)| m.is_none())
        .map(|(_, r)| r.id.clone())
        .collect();
    let dated = fit.iter().filter(|(m, _)| m.is_some());
    // The newest; a tie between two is not decided by list order.
    let newest = dated.clone().map(|(m, _)| *m).max().flatten();
    let tied: Vec<&Reusable> = dated
        .filter(|(m, _)| *m == newest && newest.is_some())
        .map(|(_, r)| r)
        .collect();
    let chosen = match (tied.as_slice(), fit.len()) {
        ([one], _) => Some((*one).clone()),
        ([], 0) => None,
        ([], _) => {
            left.push(format!(
                "deployments {} were made from this source but none has a creation time that can be read, so which is newest cannot be told: none reused",
                unreadable.join(", ")
            ));
            None
        }
        (many, _) => {
            let ids: Vec<&str> = many.iter().map(|r| r.id.as_str()).collect();
            left.push(format!(
                "deployments {} were made from this source at the same moment, so which is newest cannot be told: none reused",
                ids.join(", ")
            ));
            None
        }
    };
    if chosen.is_some() && !unreadable.is_empty() {
        left.push(format!(
            "deployments {} were made from this source but their creation time cannot be read: not reused",
            unreadable.join(", ")
        ));
    }
    Choice { chosen, left }
}

/// Whether the platform's copy of the candidate's `config.yaml` agrees
/// with ours: `Ok(None)` when it keeps none (the hash decides), `Err`
/// with why not when it differs.
pub(crate) fn config_agrees(
    ours: &str,
    theirs: Option<&str>,
    id: &str,
) -> Result<Option<()>, String> {
    match theirs {
        None => Ok(None),
        Some(t) if ours.lines().eq(t.lines()) => Ok(Some(())),
        Some(_) => Err(format!(
            "deployment {id} carries this source's hash but the config.yaml the platform keeps for it differs from this truss's: its label does not describe it, so it is not reused"
        )),
    }
}

/// A moment in time read from an ISO 8601 text (`YYYY-MM-DDTHH:MM:SS`,
/// optional fraction, `Z` or `±HH:MM`): seconds since the epoch and
/// nanoseconds, comparable across offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Moment(i64, u32);

/// Reads `text` as [`Moment`]; `None` when it is not that shape.
pub(crate) fn moment(text: &str) -> Option<Moment> {
    let t = text.trim();
    let num = |s: &str| -> Option<i64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
    };
    let (date, rest) = t.split_at_checked(10)?;
    let mut d = date.split('-');
    let (y, mo, da) = (num(d.next()?)?, num(d.next()?)?, num(d.next()?)?);
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (hms, mut tail) = rest.split_at_checked(8)?;
    let mut h = hms.split(':');
    let (hh, mm, ss) = (num(h.next()?)?, num(h.next()?)?, num(h.next()?)?);
    let mut nanos = 0u32;
    if let Some(frac) = tail.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let kept: String = frac[..digits]
            .chars()
            .chain("000000000".chars())
            .take(9)
            .collect();
        nanos = kept.parse().ok()?;
        tail = &frac[digits..];
    }
    let offset = match tail {
        "Z" | "z" | "" => 0,
        o if o.len() == 6 && o.as_bytes()[3] == b':' => {
            let sign = match o.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            sign * (num(&o[1..3])? * 3600 + num(&o[4..6])? * 60)
        }
        _ => return None,
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + da - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(Moment(
        days * 86_400 + hh * 3600 + mm * 60 + ss - offset,
        nanos,
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const OURS: &str = "81f01b92a435973ad68866f0191aab81a8755a5d4e4c857fd9d732d5cf7aa32f";

    fn dep(id: &str, status: &str, created: &str, labels: Value) -> Deployment {
        serde_json::from_value(json!({
            "id": id, "status": status, "labels": labels,
            "created_at": created, "name": format!("n-{id}"),
        }))
        .unwrap()
    }

    fn ours(run: &str) -> Value {
        json!({LABEL_KEY: OURS, RUN_LABEL_KEY: run})
    }

    #[test]
    fn the_newest_of_ours_that_can_serve_is_chosen() {
        let other = "0".repeat(64);
        let listed = [
            dep("a", "INACTIVE", "2026-12-01T10:00:00Z", ours("r1")),
            dep("b", "SCALED_TO_ZERO", "2026-12-02T10:00:00Z", ours("r2")),
            // Newer, but not ours in one way or another.
            dep("c", "BUILD_FAILED", "2026-12-03T10:00:00Z", ours("r3")),
            dep(
                "d",
                "ACTIVE",
                "2026-12-04T10:00:00Z",
                json!({LABEL_KEY: OURS}),
            ),
            dep(
                "e",
                "ACTIVE",
                "2026-12-05T10:00:00Z",
                json!({LABEL_KEY: other, RUN_LABEL_KEY: "r5"}),
            ),
            dep("f", "BUILDING", "2026-12-06T10:00:00Z", ours("r6")),
            dep(
                "g",
                "ACTIVE",
                "2026-12-07T10:00:00Z",
                json!({LABEL_KEY: OURS.to_uppercase(), RUN_LABEL_KEY: "r7"}),
            ),
            // What serves is never "reused".
            dep("s", "ACTIVE", "2026-12-08T10:00:00Z", ours("r8")),
        ];
        let c = choose(&listed, OURS, Some("s"));
        assert_eq!(c.chosen.as_ref().map(|r| r.id.as_str()), Some("b"));
        assert!(!c.chosen.unwrap().inactive());
        let left = c.left.join("\n");
        assert!(
            left.contains("deployment c was made from this source but is BUILD_FAILED"),
            "{left}"
        );
        assert!(
            left.contains("deployment f was made from this source but is BUILDING"),
            "{left}"
        );
        assert!(
            left.contains("deployment d carries this source's hash but no truss_push_run"),
            "{left}"
        );
        assert!(
            !left.contains("deployment e") && !left.contains("deployment g"),
            "{left}"
        );
        // Only the inactive one: chosen, activated first.
        let c = choose(&listed[..1], OURS, None);
        assert!(c.chosen.unwrap().inactive());
        assert_eq!(
            choose(&[], OURS, None),
            Choice {
                chosen: None,
                left: vec![]
            }
        );
    }

    #[test]
    fn moments_order_across_offsets_and_ties_decide_nothing() {
        let listed = [
            // 10:30 at +01:00 is 09:30Z: older than b.
            dep("a", "ACTIVE", "2026-12-01T10:30:00+01:00", ours("r1")),
            dep("b", "ACTIVE", "2026-12-01T10:00:00Z", ours("r2")),
        ];
        assert_eq!(choose(&listed, OURS, None).chosen.unwrap().id, "b");
        let tied = [
            dep("a", "ACTIVE", "2026-12-01T11:00:00+01:00", ours("r1")),
            dep("b", "ACTIVE", "2026-12-01T10:00:00.000Z", ours("r2")),
        ];
        let c = choose(&tied, OURS, None);
        assert_eq!(c.chosen, None);
        assert!(c.left[0].contains("at the same moment"), "{:?}", c.left);
        let unreadable = [
            dep("a", "ACTIVE", "yesterday", ours("r1")),
            dep("b", "ACTIVE", "2026-12-01T10:00:00Z", ours("r2")),
        ];
        let c = choose(&unreadable, OURS, None);
        assert_eq!(c.chosen.unwrap().id, "b");
        assert!(
            c.left[0].contains("deployments a were made"),
            "{:?}",
            c.left
        );
        let c = choose(&unreadable[..1], OURS, None);
        assert_eq!(c.chosen, None);
        assert!(
            c.left[0].contains("none has a creation time"),
            "{:?}",
            c.left
        );
    }

    #[test]
    fn what_moments_read() {
        assert_eq!(moment("1970-01-01T00:00:00Z"), Some(Moment(0, 0)));
        assert_eq!(
            moment("1970-01-02T00:00:01.5Z"),
            Some(Moment(86_401, 500_000_000))
        );
        assert_eq!(moment("2000-03-01T00:00:00Z"), Some(Moment(951_868_800, 0)));
        assert_eq!(
            moment("2026-12-01T10:00:00-02:00"),
            moment("2026-12-01T12:00:00Z")
        );
        for bad in [
            "",
            "2026-12-01",
            "2026-13-01T00:00:00Z",
            "2026-12-01T00:00:00+0100",
            "2026-12-01T00:00:00.Z",
            "２０２６-12-01T00:00:00Z",
        ] {
            assert_eq!(moment(bad), None, "{bad}");
        }
        assert!(moment("2026-12-01T10:00:00Z") > moment("2026-12-01T09:00:00Z"));
    }

    #[test]
    fn reuse_is_looked_for_only_when_what_serves_was_read() {
        let env = || "production".to_string();
        let id = || "d1".to_string();
        assert!(looked_for(&Why::ServesNothing { env: env() }));
        assert!(looked_for(&Why::Unlabelled { id: id() }));
        assert!(looked_for(&Why::OtherContent {
            id: id(),
            theirs: "a".into(),
            ours: "b".into()
        }));
        assert!(!looked_for(&Why::NoModel { env: env() }));
        assert!(!looked_for(&Why::InFlight("x".into())));
        assert!(!looked_for(&Why::EnvironmentUnread {
            env: env(),
            cause: "x".into()
        }));
        assert!(!looked_for(&Why::Moved {
            env: env(),
            from: id(),
            to: "d2".into()
        }));
        assert!(!looked_for(&Why::DeploymentUnreadToSkip {
            id: id(),
            cause: "x".into()
        }));
    }

    #[test]
    fn a_config_the_platform_keeps_must_agree() {
        assert_eq!(config_agrees("a: 1\n", None, "d"), Ok(None));
        assert_eq!(config_agrees("a: 1\n", Some("a: 1\r\n"), "d"), Ok(Some(())));
        let why = config_agrees("a: 1\n", Some("a: 2\n"), "d").unwrap_err();
        assert!(
            why.contains("deployment d carries this source's hash"),
            "{why}"
        );
    }
}
