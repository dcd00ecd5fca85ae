use super::*;

const OURS: &str = "81f01b92a435973ad68866f0191aab81a8755a5d4e4c857fd9d732d5cf7aa32f";
const OTHER: &str = "0000000000000000000000000000000000000000000000000000000000000000";
const PREFIX: &str = "ourkey01";
const CONFIG: &str = "model_name: m\n";

fn api(prefix: &str) -> Who {
    Who {
        source: Some("API".into()),
        kind: Some("API_KEY".into()),
        key_prefix: Some(prefix.into()),
        email: None,
    }
}

fn ui() -> Who {
    Who {
        source: Some("UI".into()),
        kind: Some("USER".into()),
        key_prefix: None,
        email: Some("ann@example.com".into()),
    }
}

fn system() -> Who {
    Who {
        source: Some("SYSTEM".into()),
        kind: Some("BASETEN_SYSTEM".into()),
        ..Who::default()
    }
}

fn touch(secs: u32, event: &str, dep: &str, env: Option<&str>, who: Who) -> Touch {
    let created = format!("2026-12-01T10:{:02}:{:02}Z", secs / 60, secs % 60);
    Touch {
        at: crate::history::instant(&created).unwrap(),
        created,
        event_type: event.into(),
        deployment_id: Some(dep.into()),
        environment: env.map(str::to_string),
        who,
    }
}

fn promoted(secs: u32, dep: &str, who: Who) -> Touch {
    touch(secs, PROMOTED, dep, Some("production"), who)
}

fn serving(label: Option<&str>, config: Option<&str>, audit: Vec<Touch>) -> Reads {
    Reads {
        source_hash: Ok(OURS.into()),
        serves: Ok(Serves::Deployment {
            id: "d1".into(),
            label: label.map(str::to_string),
        }),
        config: Some(Ok(config.map(str::to_string))),
        audit: Some(Ok(audit)),
    }
}

fn decided(reads: &Reads) -> Verdict {
    decide("production", reads, CONFIG, PREFIX)
}

#[test]
fn the_five_model_states() {
    let cases: Vec<(Reads, Drift, &str)> = vec![
        (
            serving(Some(OURS), Some(CONFIG), vec![]),
            Drift::InSync,
            "hash and config.yaml equal",
        ),
        (
            serving(Some(OURS), Some("model_name: m\r\n"), vec![]),
            Drift::InSync,
            "hash and config.yaml equal",
        ),
        (
            serving(Some(OURS), None, vec![]),
            Drift::InSync,
            "keeps no raw config.yaml for it: the hash decided",
        ),
        (
            serving(Some(OTHER), Some("model_name: old\n"), vec![]),
            Drift::SourceChanged,
            "from content 000000000000…; the repository's is 81f01b92a435…",
        ),
        (
            serving(None, None, vec![]),
            Drift::ChangedOutside,
            "carries no truss_push_content_hash label",
        ),
        (
            serving(Some("v1"), None, vec![]),
            Drift::ChangedOutside,
            "not a content hash",
        ),
        (
            serving(Some(OURS), Some("model_name: edited\n"), vec![]),
            Drift::ChangedOutside,
            "its label does not describe it",
        ),
    ];
    for (reads, drift, why) in cases {
        let v = decided(&reads);
        assert_eq!(v.drift, drift, "{v:?}");
        assert!(v.why.contains(why), "{} lacks {why}", v.why);
        assert_eq!(v.serving.as_deref(), Some("d1"));
    }
    let not_deployed = [
        (Serves::NoModel, "the model does not exist"),
        (Serves::NoEnvironment, "no production environment"),
        (Serves::Nothing, "serves no deployment"),
    ];
    for (serves, why) in not_deployed {
        let reads = Reads {
            serves: Ok(serves),
            config: None,
            audit: None,
            ..serving(None, None, vec![])
        };
        let v = decided(&reads);
        assert_eq!(v.drift, Drift::NotDeployed, "{v:?}");
        assert!(v.why.contains(why), "{}", v.why);
        assert!(v.drift.drifted());
    }
}

#[test]
fn a_failed_read_is_unknown_whatever_else_was_read() {
    let audit_500 = Reads {
        audit: Some(Err("reading the model's audit log: 500".into())),
        ..serving(Some(OURS), Some(CONFIG), vec![])
    };
    let config_lost = Reads {
        config: Some(Err("connection reset".into())),
        ..serving(Some(OTHER), None, vec![])
    };
    let hash_failed = Reads {
        source_hash: Err("cannot read model/x.py".into()),
        serves: Ok(Serves::NoModel),
        config: None,
        audit: None,
    };
    let env_unread = Reads {
        serves: Err("could not read the environments (timed out)".into()),
        config: None,
        audit: None,
        ..serving(None, None, vec![])
    };
    // Drift that a read would otherwise show stays unknown too.
    let drift_and_failure = Reads {
        audit: Some(Err("500".into())),
        ..serving(None, None, vec![promoted(5, "d1", ui())])
    };
    for (reads, why) in [
        (audit_500, "audit log: 500"),
        (config_lost, "connection reset"),
        (hash_failed, "cannot read model/x.py"),
        (env_unread, "timed out"),
        (drift_and_failure, "500"),
    ] {
        let v = decided(&reads);
        assert_eq!(v.drift, Drift::Unknown, "{v:?}");
        assert!(!v.drift.drifted());
        assert!(
            v.why.starts_with("not decided: ") && v.why.contains(why),
            "{}",
            v.why
        );
    }
}

#[test]
fn a_change_by_someone_else_after_our_last_placement_is_outside() {
    let ours = api(PREFIX);
    let other_key = api("otherkey");
    let deployed = |secs, dep, who| touch(secs, DEPLOYED, dep, Some("production"), who);
    let changed = |secs, event, dep, who| touch(secs, event, dep, None, who);
    let cases: Vec<(Vec<Touch>, Option<usize>)> = vec![
        // Ours only: in sync.
        (
            vec![
                deployed(1, "d0", ours.clone()),
                promoted(2, "d1", ours.clone()),
            ],
            None,
        ),
        // Promoted by hand after our promotion.
        (
            vec![promoted(1, "d1", ours.clone()), promoted(2, "d1", ui())],
            Some(1),
        ),
        // By another key, however the answer orders it.
        (
            vec![
                promoted(3, "d1", other_key.clone()),
                deployed(1, "d1", ours.clone()),
            ],
            Some(0),
        ),
        // Before our last placement: history, not drift.
        (
            vec![promoted(1, "d0", ui()), promoted(2, "d1", ours.clone())],
            None,
        ),
        // No placement of ours in the log: every entry counts.
        (vec![promoted(1, "d1", ui())], Some(0)),
        // Into another environment: not this one's business.
        (
            vec![
                promoted(1, "d1", ours.clone()),
                touch(2, PROMOTED, "d9", Some("staging"), ui()),
            ],
            None,
        ),
        // The serving deployment rescaled, moved or woken by hand.
        (
            vec![
                promoted(1, "d1", ours.clone()),
                changed(
                    2,
                    "MODEL_DEPLOYMENT_AUTOSCALING_SETTINGS_CHANGED",
                    "d1",
                    ui(),
                ),
            ],
            Some(1),
        ),
        (
            vec![
                promoted(1, "d1", ours.clone()),
                changed(
                    2,
                    "MODEL_DEPLOYMENT_INSTANCE_TYPE_CHANGED",
                    "d1",
                    other_key.clone(),
                ),
            ],
            Some(1),
        ),
        (
            vec![
                promoted(1, "d1", ours.clone()),
                changed(2, "MODEL_DEPLOYMENT_ACTIVATED", "d1", ui()),
            ],
            Some(1),
        ),
        // Another deployment's settings, the platform's own cleanup, our
        // own deactivation: not drift.
        (
            vec![
                promoted(1, "d1", ours.clone()),
                changed(
                    2,
                    "MODEL_DEPLOYMENT_AUTOSCALING_SETTINGS_CHANGED",
                    "d0",
                    ui(),
                ),
                changed(3, "MODEL_DEPLOYMENT_DEACTIVATED", "d1", system()),
                changed(4, "MODEL_DEPLOYMENT_DEACTIVATED", "d0", ours.clone()),
            ],
            None,
        ),
        // At the same instant as our placement: counted.
        (
            vec![promoted(1, "d1", ours.clone()), promoted(1, "d1", ui())],
            Some(1),
        ),
        // An API key the log does not name is not ours.
        (
            vec![
                promoted(1, "d1", ours.clone()),
                promoted(
                    2,
                    "d1",
                    Who {
                        key_prefix: None,
                        ..ours.clone()
                    },
                ),
            ],
            Some(1),
        ),
    ];
    for (n, (log, want)) in cases.into_iter().enumerate() {
        let got = outside(&log, "production", "d1", PREFIX);
        assert_eq!(got, want.map(|i| &log[i]), "case {n}: {log:#?}");
        let v = decided(&serving(Some(OURS), Some(CONFIG), log.clone()));
        let drift = if want.is_some() {
            Drift::ChangedOutside
        } else {
            Drift::InSync
        };
        assert_eq!(v.drift, drift, "case {n}: {v:?}");
        assert_eq!(v.changed.as_ref(), want.map(|i| &log[i]));
    }
}

#[test]
fn the_outside_change_is_said_with_who_and_when() {
    let log = vec![promoted(1, "d1", api(PREFIX)), promoted(2, "d1", ui())];
    // Outside wins over a changed source: both are true, the hand change
    // is what a reviewer must see.
    let v = decided(&serving(Some(OTHER), Some("model_name: old\n"), log));
    assert_eq!(v.drift, Drift::ChangedOutside);
    assert_eq!(
        v.why,
        "promoted by ann@example.com (UI) at 2026-12-01T10:00:02Z (audit log), after truss-push last put a deployment into production"
    );
    let by_key = api("otherkey").described();
    assert_eq!(by_key, "API key otherkey… (API)");
    assert_eq!(system().described(), "baseten system (SYSTEM)");
}

#[test]
fn states_that_drift() {
    let drifted: Vec<&str> = [
        Drift::InSync,
        Drift::SourceChanged,
        Drift::ChangedOutside,
        Drift::NotDeployed,
        Drift::Unknown,
        Drift::NotChecked,
    ]
    .into_iter()
    .filter(|d| d.drifted())
    .map(Drift::word)
    .collect();
    assert_eq!(
        drifted,
        ["source-changed", "changed-outside", "not-deployed"]
    );
}
