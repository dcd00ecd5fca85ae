//! The `fake-baseten` binary: starts, prints its bases, serves, logs to a
//! file, and exits cleanly on SIGTERM.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::scenario_path;

#[test]
fn binary_prints_its_bases_serves_and_stops_on_sigterm() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let log = dir.join("requests.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-baseten"))
        .arg("--scenario")
        .arg(scenario_path("demo.yaml"))
        .args([
            "--port",
            "0",
            "--api-key",
            "bin-secret-key",
            "--time-scale",
            "1000",
        ])
        .arg("--store-dir")
        .arg(dir.join("store"))
        .arg("--request-log")
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let bases: Value = serde_json::from_str(&first).unwrap_or_else(|e| panic!("{e}: {first:?}"));
    let url = bases["url"].as_str().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{bases}");
    assert_eq!(bases["graphql_base"], url);
    assert_eq!(bases["rest_base"], url);
    assert_eq!(bases["s3_endpoint"], url);
    assert_eq!(
        bases["inference_template"],
        format!("{url}/{{prefix}}-{{id}}")
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let status = rt.block_on(async {
        crate::common::http()
            .post(format!("{url}/graphql/"))
            .header("Authorization", "Api-Key bin-secret-key")
            .json(&serde_json::json!({"query": "{ teams { name } }"}))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    });
    assert_eq!(status["data"]["teams"][0]["name"], "demo-team");

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(lines.lines().count(), 1);
    assert!(lines.contains("graphql.teams"));
    assert!(!lines.contains("bin-secret-key"));
}
