//! Table tests of the retirement rules.

use super::*;

const NOW: i64 = 1_000_000;
const DAY: i64 = 86_400;

/// A labelled, settled deployment created `days` before [`NOW`].
fn dep(id: &str, days: i64) -> Seen {
    Seen {
        id: id.into(),
        name: format!("n-{id}"),
        status: "ACTIVE".into(),
        created: Some(NOW - days * DAY),
        labelled: true,
        pull_request: None,
        development: false,
        production: false,
        environment: None,
        instance_type: None,
        min_replica: None,
    }
}

fn env(current: Option<&str>, candidate: Option<&str>) -> Env {
    Env {
        current: current.map(str::to_string),
        candidate: candidate.map(str::to_string),
        ..Env::default()
    }
}

fn retired(v: &[(Seen, Verdict)]) -> Vec<&str> {
    v.iter()
        .filter(|(_, v)| *v == Verdict::Retire)
        .map(|(d, _)| d.id.as_str())
        .collect()
}

fn verdict_of<'a>(v: &'a [(Seen, Verdict)], id: &str) -> &'a Verdict {
    &v.iter().find(|(d, _)| d.id == id).unwrap().1
}

/// The model: nine deployments — one serving production, the
/// previous production, one building, one unlabelled, five labelled.
fn nine() -> (Vec<Seen>, BTreeMap<String, Protected>) {
    let mut ds = vec![
        dep("prod", 1),
        dep("prev", 20),
        Seen {
            status: "BUILDING".into(),
            ..dep("building", 0)
        },
        Seen {
            labelled: false,
            ..dep("unlabelled", 40)
        },
    ];
    for (i, days) in [2, 5, 10, 30, 50].into_iter().enumerate() {
        ds.push(dep(&format!("l{i}"), days));
    }
    let envs = [("production".to_string(), env(Some("prod"), None))];
    let g = guards(&envs, &[("production".into(), "prev".into())]);
    (ds, g)
}

fn age(keep: Option<u32>, older_days: Option<i64>) -> Option<Age> {
    Some(Age {
        keep,
        older_than_secs: older_days.map(|d| (d * DAY) as u64),
        now: NOW,
    })
}

#[test]
fn prune_by_keep_older_than_and_both() {
    let (ds, g) = nine();
    for (scope, a, want) in [
        // keep 2 of the five labelled: the three oldest go.
        (Scope::Labelled, age(Some(2), None), vec!["l2", "l3", "l4"]),
        (Scope::Labelled, age(None, Some(7)), vec!["l2", "l3", "l4"]),
        (Scope::Labelled, age(None, Some(40)), vec!["l4"]),
        // Both: past the 4 newest and older than 7 days.
        (Scope::Labelled, age(Some(4), Some(7)), vec!["l4"]),
        // Both: older than 40 days wins over a small keep.
        (Scope::Labelled, age(Some(1), Some(40)), vec!["l4"]),
        (Scope::Labelled, age(Some(5), None), vec![]),
        (Scope::Labelled, age(Some(1000), Some(1)), vec![]),
        // prune-unlabelled: the unlabelled one (40 days) is a candidate too.
        (
            Scope::Everything,
            age(Some(2), None),
            vec!["unlabelled", "l2", "l3", "l4"],
        ),
    ] {
        let v = select(&ds, &scope, Retire::Delete, a, &g);
        assert_eq!(retired(&v), want, "{scope:?} {a:?}");
        // Whatever the inputs, the safety rules hold.
        for id in ["prod", "prev", "building"] {
            assert!(
                matches!(verdict_of(&v, id), Verdict::Protected(_)),
                "{id} {scope:?} {a:?}"
            );
        }
    }
}

#[test]
fn each_safety_rule_protects_and_says_why() {
    let envs = [
        ("production".to_string(), env(Some("p"), Some("cand"))),
        ("staging".to_string(), env(Some("s"), None)),
    ];
    let g = guards(&envs, &[("staging".into(), "prev-s".into())]);
    let ds = [
        dep("p", 1),
        dep("cand", 1),
        dep("s", 1),
        dep("prev-s", 1),
        Seen {
            development: true,
            production: false,
            ..dep("dev", 1)
        },
        Seen {
            environment: Some("canary".into()),
            ..dep("listed-in-env", 1)
        },
        Seen {
            status: "DEPLOYING".into(),
            ..dep("deploying", 1)
        },
        Seen {
            status: "SOMETHING_NEW".into(),
            ..dep("unknown-status", 1)
        },
        Seen {
            status: "WAKING_UP".into(),
            ..dep("waking", 1)
        },
        Seen {
            created: None,
            ..dep("no-time", 1)
        },
        dep("free", 1),
    ];
    for (scope, a) in [
        (Scope::Labelled, None),
        (Scope::Everything, age(None, Some(0))),
    ] {
        let v = select(&ds, &scope, Retire::Delete, a, &g);
        for (id, want) in [
            ("p", Protected::Serving("production".into())),
            ("cand", Protected::Candidate("production".into())),
            ("s", Protected::Serving("staging".into())),
            ("prev-s", Protected::PreviousServing("staging".into())),
            ("dev", Protected::Development),
            ("listed-in-env", Protected::Serving("canary".into())),
            ("deploying", Protected::Unsettled("DEPLOYING".into())),
            (
                "unknown-status",
                Protected::Unsettled("SOMETHING_NEW".into()),
            ),
            ("waking", Protected::Unsettled("WAKING_UP".into())),
        ] {
            assert_eq!(verdict_of(&v, id), &Verdict::Protected(want), "{id}");
        }
        let no_time = verdict_of(&v, "no-time");
        match a {
            // Teardown needs no age.
            None => assert_eq!(no_time, &Verdict::Retire),
            Some(_) => assert_eq!(no_time, &Verdict::Protected(Protected::NoCreationTime)),
        }
        assert_eq!(verdict_of(&v, "free"), &Verdict::Retire);
    }
    assert!(
        Protected::PreviousServing("production".into())
            .describe()
            .contains("rollback target")
    );
}

#[test]
fn teardown_selects_its_pull_requests_value_exactly() {
    let pr = |id: &str, v: Option<&str>| Seen {
        pull_request: v.map(str::to_string),
        ..dep(id, 1)
    };
    let ds = [
        pr("mine", Some("acme/models#12")),
        pr("other-repo", Some("mirror/models#12")),
        pr("other-pr", Some("acme/models#120")),
        pr("prefix", Some("acme/models#1")),
        pr("none", None),
        Seen {
            environment: Some("production".into()),
            ..pr("mine-serving", Some("acme/models#12"))
        },
    ];
    let v = select(
        &ds,
        &Scope::PullRequest("acme/models#12".into()),
        Retire::Delete,
        None,
        &BTreeMap::new(),
    );
    let ids: Vec<&str> = v.iter().map(|(d, _)| d.id.as_str()).collect();
    assert_eq!(ids, ["mine", "mine-serving"]);
    assert_eq!(retired(&v), ["mine"]);
}

#[test]
fn deactivate_skips_what_is_inactive_and_keep_counts_only_what_it_can_retire() {
    let ds = [
        Seen {
            status: "INACTIVE".into(),
            ..dep("old-inactive", 9)
        },
        dep("a", 1),
        dep("b", 2),
        dep("c", 3),
    ];
    let g = BTreeMap::new();
    let v = select(
        &ds,
        &Scope::Labelled,
        Retire::Deactivate,
        age(Some(2), None),
        &g,
    );
    assert_eq!(verdict_of(&v, "old-inactive"), &Verdict::AlreadyInactive);
    assert_eq!(verdict_of(&v, "a"), &Verdict::Kept(1));
    assert_eq!(verdict_of(&v, "b"), &Verdict::Kept(2));
    assert_eq!(retired(&v), ["c"]);
    // Deleting: an inactive deployment is retired like any other.
    let v = select(
        &ds,
        &Scope::Labelled,
        Retire::Delete,
        age(Some(2), None),
        &g,
    );
    assert_eq!(retired(&v), ["old-inactive", "c"]);
}

#[test]
fn ties_in_age_are_ordered_by_id_so_two_runs_agree() {
    let ds = [dep("b", 3), dep("a", 3), dep("c", 3)];
    let v = select(
        &ds,
        &Scope::Labelled,
        Retire::Delete,
        age(Some(1), None),
        &BTreeMap::new(),
    );
    assert_eq!(verdict_of(&v, "a"), &Verdict::Kept(1));
    assert_eq!(retired(&v), ["b", "c"]);
}

#[test]
fn a_fresh_reading_protects_a_promotion_started_since_the_listing() {
    let listed = [
        ("production".to_string(), env(Some("p"), None)),
        ("staging".to_string(), env(None, None)),
    ];
    let fresh = [
        ("production".to_string(), env(Some("p"), Some("x"))),
        ("staging".to_string(), env(None, None)),
    ];
    assert_eq!(
        still_free("x", &listed, &fresh),
        Some(Protected::Candidate("production".into()))
    );
    assert_eq!(
        still_free("p", &listed, &fresh),
        Some(Protected::Serving("production".into()))
    );
    assert_eq!(still_free("y", &listed, &fresh), None);
    // What serves changed since the listing (two promotions, or one that
    // ended): the previous serving one is not the one the run read.
    for fresh in [
        [
            ("production".to_string(), env(Some("q"), None)),
            ("staging".to_string(), env(None, None)),
        ],
        [
            ("production".to_string(), env(Some("p"), None)),
            ("staging".to_string(), env(Some("s"), None)),
        ],
    ] {
        assert!(
            matches!(
                still_free("y", &listed, &fresh),
                Some(Protected::Changed(_))
            ),
            "{fresh:?}"
        );
    }
    // An environment created since, serving something: changed too.
    let more = [
        ("production".to_string(), env(Some("p"), None)),
        ("staging".to_string(), env(None, None)),
        ("canary".to_string(), env(Some("c"), None)),
    ];
    assert_eq!(
        still_free("y", &listed, &more),
        Some(Protected::Changed("canary".into()))
    );
    let empty_new = [
        ("production".to_string(), env(Some("p"), None)),
        ("staging".to_string(), env(None, None)),
        ("canary".to_string(), env(None, None)),
    ];
    assert_eq!(still_free("y", &listed, &empty_new), None);
    // Traffic moving with no candidate named: nothing is free.
    let moving = |status: &str| {
        let mut e = env(Some("p"), None);
        e.in_progress = Some(crate::promotion::InProgressPromotion {
            status: status.into(),
            percent: Some(30.0),
            error_message: None,
            rolling: None,
        });
        vec![("production".to_string(), e)]
    };
    assert_eq!(
        still_free("y", &listed, &moving("RAMPING_DOWN")),
        Some(Protected::Moving("production".into()))
    );
    assert_eq!(still_free("y", &listed, &moving("SUCCEEDED")), None);
}

#[test]
fn names_from_the_platform_are_shown_safely() {
    for (raw, shown) in [
        ("pr-12_abc.1", "pr-12_abc.1"),
        ("my model", "my model"),
        ("a\nb", "a\\u{a}b"),
        ("$(rm -rf)", "\\u{24}\\u{28}rm -rf\\u{29}"),
        ("é", "\\u{e9}"),
    ] {
        assert_eq!(shown_name(raw), shown);
    }
    assert_eq!(shown_name(&"x".repeat(500)).len(), NAME_MAX_CHARS);
}

#[test]
fn actions_are_words() {
    assert_eq!(Action::of(Retire::Delete, false).word(), "deleted");
    assert_eq!(Action::of(Retire::Deactivate, false).word(), "deactivated");
    assert_eq!(Action::of(Retire::Delete, true).word(), "would-delete");
    assert_eq!(
        Action::of(Retire::Deactivate, true).word(),
        "would-deactivate"
    );
}

#[test]
fn creation_times_as_the_platform_writes_them() {
    for (text, want) in [
        ("1970-01-01T00:00:00Z", Some(0)),
        ("2026-12-01T10:00:00Z", Some(1_796_119_200)),
        ("2026-12-01T10:00:00.123456Z", Some(1_796_119_200)),
        ("2026-12-01T10:00:00+00:00", Some(1_796_119_200)),
        ("2026-12-01T12:00:00+02:00", None),
        ("2026-13-01T10:00:00Z", None),
        ("2026-12-01", None),
        ("yesterday", None),
        ("", None),
    ] {
        assert_eq!(epoch_seconds(text), want, "{text}");
    }
}
