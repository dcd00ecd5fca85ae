//! A command line clap refuses is still reported where the user asked:
//! `--json` keeps stdout for the JSON document whatever the argument order.

use serde_json::Value;

use crate::harness::*;

#[test]
fn an_unknown_flag_anywhere_still_gets_the_json_document() {
    let orders: [&[&str]; 4] = [
        &["--bogus-flag", "x", "--json"],
        &["--team", "ml", "--json", "--bogus-flag", "x", "--dry-run"],
        &["--json", "--bogus-flag", "x"],
        &["--json", "--bogus-flag"],
    ];
    for args in orders {
        let mut run = Invocation::bare();
        run.args = args.iter().map(|a| a.to_string()).collect();
        let run = run.run();
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        let doc: Value = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: stdout is not the JSON document ({e}): {run:?}"));
        assert_eq!(doc["status"], "deploy_failed", "{args:?}");
        assert_eq!(doc["exit-code"], 2, "{args:?}");
        let message = doc["error-message"].as_str().unwrap_or_default();
        assert!(
            message.contains("unexpected argument '--bogus-flag'"),
            "{args:?}: {message}"
        );
    }
}

/// Every order of `--json`, `--team ml` and an unknown flag written each
/// way (short or long, its value apart, `=`-joined or attached) or a bare
/// `--`: exit 2 and the JSON document on stdout, naming what was refused.
#[test]
fn json_survives_every_order_of_short_long_joined_and_bare_dashes() {
    // (the arguments, what the message names)
    let unknown: [(&[&str], &str); 7] = [
        (&["-z", "x"], "'-z'"),
        (&["-z=x"], "'-z'"),
        (&["-zx"], "'-z'"),
        (&["--bogus=x"], "'--bogus'"),
        (&["--bogus", "x"], "'--bogus'"),
        (&["--", "x"], "'x'"),
        (&["--"], ""),
    ];
    let json: &[&str] = &["--json"];
    let team: &[&str] = &["--team", "ml"];
    for (u, named) in unknown {
        for order in [
            [json, team, u],
            [json, u, team],
            [u, json, team],
            [team, json, u],
            [team, u, json],
            [u, team, json],
        ] {
            let args: Vec<String> = order
                .iter()
                .flat_map(|g| g.iter())
                .map(|a| a.to_string())
                .collect();
            let mut run = Invocation::bare();
            run.args = args.clone();
            let run = run.run();
            assert_eq!(run.code, 2, "{args:?}: {run:?}");
            let doc: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
                panic!("{args:?}: stdout is not the JSON document ({e}): {run:?}")
            });
            assert_eq!(doc["status"], "deploy_failed", "{args:?}");
            let message = doc["error-message"].as_str().unwrap_or_default();
            assert!(message.contains(named), "{args:?}: {message}");
        }
    }
}
