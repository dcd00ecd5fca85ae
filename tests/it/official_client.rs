//! Our REST requests next to the official client's for the same job. The
//! binary runs a job against a fake; then the real truss 0.18.36 makes, on
//! the same fake and with the same ids, each REST call it has for that job
//! (through its own `BasetenApi`: the `truss` command line makes none of
//! these when pointed at a fake). Where both clients make the same call,
//! method, path, query parameter names and the body's fields and their
//! JSON types must agree.
//!
//! Calls without an official counterpart are not compared here (the fake's
//! schema check holds them to the published API): the official client
//! promotes only through GraphQL at create time (no REST promote, cancel,
//! activate), reads chain statuses through GraphQL, never deactivates a
//! model deployment, and POSTs for logs where we GET.

use std::collections::BTreeMap;
use std::process::Command;

use fake_baseten::FakeBaseten;
use fake_baseten::reqlog::LogEntry;
use serde_json::{Value, json};

use crate::chain_harness::{chain_run, fixture, truss_venv};
use crate::harness::*;

/// What a request looks like to the platform, values aside.
#[derive(Debug, PartialEq)]
struct Shape {
    method: String,
    path: String,
    query: Vec<String>,
    /// Body field → JSON type; no body is no fields (the official client
    /// sends `{}` where the API defines no body, we send nothing).
    fields: BTreeMap<String, &'static str>,
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn shape(e: &LogEntry) -> Shape {
    let mut query: Vec<String> = e
        .query
        .as_deref()
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| kv.split('=').next().unwrap_or(kv).to_string())
        .collect();
    query.sort();
    let fields = match &e.body {
        Some(Value::Object(o)) => o.iter().map(|(k, v)| (k.clone(), json_type(v))).collect(),
        _ => BTreeMap::new(),
    };
    Shape {
        method: e.method.clone(),
        path: e.path.clone(),
        query,
        fields,
    }
}

/// Runs `calls` ([method name, *args]) through the official client's API
/// class against `fake`.
fn official(fake: &FakeBaseten, calls: Value) {
    let script = fixture("official-client/rest_calls.py");
    let out = Command::new(truss_venv().join("bin/python"))
        .arg(script)
        .arg(fake.url())
        .arg(fake.api_key())
        .arg(calls.to_string())
        .env_clear()
        .env("HOME", std::env::temp_dir())
        .env("TRUSS_NO_UPDATE_CHECK", "1")
        .output()
        .expect("the venv's python runs");
    assert!(
        out.status.success(),
        "the official client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// For each REST endpoint the official client called after `from` (log
/// position), our first request to it (before `from`) has the same shape.
fn assert_same_calls(fake: &FakeBaseten, from: usize, want: &[&str]) {
    let log = fake.requests();
    let (ours, theirs) = log.split_at(from);
    let theirs: Vec<&LogEntry> = theirs
        .iter()
        .filter(|e| e.endpoint.starts_with("rest."))
        .collect();
    let called: Vec<&str> = theirs.iter().map(|e| e.endpoint.as_str()).collect();
    assert_eq!(called, want, "the official client's calls");
    for t in theirs {
        let o = ours
            .iter()
            .find(|o| o.endpoint == t.endpoint)
            .unwrap_or_else(|| panic!("we never called {}", t.endpoint));
        assert_eq!(shape(o), shape(t), "{}", t.endpoint);
        assert_eq!(t.status, Some(200), "{t:?}");
    }
}

/// The segment of `path` after `after`.
fn segment_after<'a>(path: &'a str, after: &str) -> &'a str {
    let segs: Vec<&str> = path.split('/').collect();
    let at = segs.iter().position(|s| *s == after).expect(after);
    segs[at + 1]
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn a_model_deploy_reads_status_and_team_secrets_as_the_official_client_does() {
    let fake = fake(
        "teams: [{id: teamaaaa, name: ml}]\nsecrets: [hf_access_token]\ndeployments:\n  default: [[0, BUILDING], [0.2, ACTIVE]]\n",
    );
    let dir = model_dir("model_name: secretive\nsecrets:\n  hf_access_token: null\n");
    let run = Invocation::new(&fake).model(dir.path()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    let from = fake.requests().len();
    let (model, deployment) = (run.out("model-id"), run.out("deployment-id"));
    official(
        &fake,
        json!([
            ["get_deployment", model, deployment],
            ["get_team_secrets", "teamaaaa"],
        ]),
    );
    assert_same_calls(
        &fake,
        from,
        &["rest.get_deployment", "rest.list_team_secrets"],
    );
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn a_chain_deploy_deactivates_as_the_official_client_does() {
    let fake =
        fake("time_scale: 1\nchainlets:\n  default: [[0, BUILDING_MODEL], [0.3, MODEL_READY]]\n");
    let run = chain_run(&fake, &fixture("chains/two/two_chain.py"))
        .arg("cleanup", "true")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let from = fake.requests().len();
    let ours = fake
        .requests()
        .into_iter()
        .find(|e| e.endpoint == "rest.deactivate_chain_deployment")
        .expect("cleanup deactivated the chain deployment");
    let chain = segment_after(&ours.path, "chains");
    let deployment = segment_after(&ours.path, "deployments");
    official(
        &fake,
        json!([["deactivate_chain_deployment", chain, deployment]]),
    );
    assert_same_calls(&fake, from, &["rest.deactivate_chain_deployment"]);
}
