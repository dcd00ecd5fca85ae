//! What drift says: a line per target, the `drift-report` JSON, and the
//! summary's table (one row per target, a reviewer reads it in five
//! seconds: the state first, then what serves and why).

use serde_json::{Value, json};

use super::verdict::{Drift, Verdict};
use crate::ci::Cell;
use crate::content::record::DriftFound;
use crate::kind::Kind;

/// One target's verdict, with how it is named.
#[derive(Clone, Debug)]
pub(crate) struct Checked {
    /// The target as `truss-directory` resolved it.
    pub(crate) shown: String,
    pub(crate) kind: Kind,
    pub(crate) name: String,
    pub(crate) verdict: Verdict,
}

/// A chain's verdict: not checked.
pub(crate) fn chain() -> Verdict {
    Verdict {
        drift: Drift::NotChecked,
        serving: None,
        serving_hash: None,
        source_hash: None,
        changed: None,
        why: "a chain's deployments carry no content label, so drift cannot compare them".into(),
    }
}

/// The log line of one target.
pub(crate) fn line(c: &Checked) -> String {
    format!(
        "  {}: {} ({:?}): {}",
        c.verdict.drift.word(),
        c.shown,
        c.name,
        c.verdict.why
    )
}

fn object(env: &str, c: &Checked) -> Value {
    let v = &c.verdict;
    let changed_by = v.changed.as_ref().map(|t| {
        json!({
            "who": t.who.described(),
            "source": t.who.source,
            "email": t.who.email,
            "api_key_prefix": t.who.key_prefix,
            "event": t.event_type.chars().all(|ch| ch.is_ascii_uppercase() || ch == '_').then_some(&t.event_type),
            "deployment_id": t.deployment_id,
            "at": t.created,
        })
    });
    json!({
        "target": c.shown,
        "kind": c.kind.as_str(),
        "name": c.name,
        "environment": env,
        "state": v.drift.word(),
        "serving_deployment_id": v.serving,
        "serving_hash": v.serving_hash,
        "source_hash": v.source_hash,
        "changed_by": changed_by,
        "why": v.why,
    })
}

/// The `drift-report` output: a JSON array, one object per target, in
/// the targets' order.
pub(crate) fn json_report(env: &str, checked: &[Checked]) -> String {
    Value::Array(checked.iter().map(|c| object(env, c)).collect()).to_string()
}

/// What the run keeps: the outputs and the summary's table.
pub(crate) fn found(env: &str, checked: &[Checked]) -> DriftFound {
    let count = |d: Drift| checked.iter().filter(|c| c.verdict.drift == d).count();
    let drifted = checked.iter().filter(|c| c.verdict.drift.drifted()).count();
    let (in_sync, unknown) = (count(Drift::InSync), count(Drift::Unknown));
    // The verdict's count first (drifted, else unknown, else in sync),
    // the other states after it.
    let first = match (drifted, unknown) {
        (0, 0) => "in sync",
        (0, _) => "unknown",
        _ => "drifted",
    };
    let mut rest = Vec::new();
    for (n, words) in [
        (in_sync, "in sync"),
        (drifted, "drifted"),
        (unknown, "unknown"),
        (count(Drift::NotChecked), "not checked"),
    ] {
        if n > 0 && words != first {
            rest.push(format!("{n} {words}"));
        }
    }
    let n = match first {
        "in sync" => in_sync,
        "unknown" => unknown,
        _ => drifted,
    };
    let total = checked.len();
    let targets = if total == 1 { "target" } else { "targets" };
    let mut heading = format!("Drift in {env}: {n} of {total} {targets} {first}");
    if !rest.is_empty() {
        heading.push_str(&format!(" ({})", rest.join(", ")));
    }
    let rows = checked
        .iter()
        .map(|c| {
            vec![
                Cell::Code(c.shown.clone()),
                Cell::Code(c.verdict.drift.word().into()),
                Cell::Code(c.verdict.serving.clone().unwrap_or_default()),
                Cell::Text(c.verdict.why.clone()),
            ]
        })
        .collect();
    DriftFound {
        drifted: drifted > 0,
        report: json_report(env, checked),
        heading,
        rows,
        details: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift::verdict::{Touch, Who};

    fn checked(shown: &str, drift: Drift, changed: Option<Touch>) -> Checked {
        Checked {
            shown: shown.into(),
            kind: Kind::Model,
            name: shown.into(),
            verdict: Verdict {
                drift,
                serving: Some("d1".into()),
                serving_hash: None,
                source_hash: Some("ab".repeat(32)),
                changed,
                why: "because".into(),
            },
        }
    }

    #[test]
    fn the_report_and_the_table_name_every_target_in_order() {
        let by_hand = Touch {
            at: crate::history::instant("2026-12-01T10:00:00Z").unwrap(),
            created: "2026-12-01T10:00:00Z".into(),
            event_type: "MODEL_DEPLOYMENT_PROMOTED".into(),
            deployment_id: Some("d1".into()),
            environment: Some("production".into()),
            who: Who {
                source: Some("UI".into()),
                kind: Some("USER".into()),
                key_prefix: None,
                email: Some("ann@example.com".into()),
            },
        };
        let all = [
            checked("models/a", Drift::InSync, None),
            checked("models/b", Drift::SourceChanged, None),
            checked("models/c", Drift::ChangedOutside, Some(by_hand)),
            Checked {
                shown: "chains/x.py".into(),
                kind: Kind::Chain,
                name: String::new(),
                verdict: chain(),
            },
        ];
        let f = found("production", &all);
        assert!(f.drifted);
        assert_eq!(
            f.heading,
            "Drift in production: 2 of 4 targets drifted (1 in sync, 1 not checked)"
        );
        let report: Value = serde_json::from_str(&f.report).unwrap();
        let states: Vec<&str> = report
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["state"].as_str().unwrap())
            .collect();
        assert_eq!(
            states,
            [
                "in-sync",
                "source-changed",
                "changed-outside",
                "not-checked"
            ]
        );
        assert_eq!(report[2]["changed_by"]["email"], "ann@example.com");
        assert_eq!(report[2]["changed_by"]["at"], "2026-12-01T10:00:00Z");
        assert_eq!(report[2]["changed_by"]["who"], "ann@example.com (UI)");
        assert_eq!(report[3]["kind"], "chain");
        assert!(report[0]["changed_by"].is_null());
        assert_eq!(f.rows.len(), 4);
        assert_eq!(f.rows[1][1], Cell::Code("source-changed".into()));
        let in_sync = found("production", &all[..1]);
        assert!(!in_sync.drifted);
        assert_eq!(
            in_sync.heading,
            "Drift in production: 1 of 1 target in sync"
        );
    }
}
