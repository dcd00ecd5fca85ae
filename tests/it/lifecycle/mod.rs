//! `command: teardown` and `command: prune` against the fake, asserting
//! what it was asked (its request log, the deployments it deleted): a pull
//! request's previews retired in every model the key sees and nothing
//! else; old deployments pruned by `keep` and `older-than`; and, whatever
//! the inputs, nothing retired that serves, is being promoted, served just
//! before, is still building or is the development deployment.

use fake_baseten::FakeBaseten;
use fake_baseten::reqlog::LogEntry;
use serde_json::Value;

use crate::harness::*;

mod freed;
mod hostile;
mod prune;
mod teardown;

const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const DAY: i64 = 86_400;
const REPO: &str = "acme/models";

/// A run of `command` against `fake`, with only the key and the fake's
/// hosts (no deploy input: a command that does not read one refuses it).
fn command<'a>(fake: &'a FakeBaseten, command: &str) -> Invocation<'a> {
    let mut inv = Invocation::bare().arg("command", command);
    inv.fake = Some(fake);
    inv.arg("baseten-api-key", API_KEY)
}

/// The run of a GitHub job on `event` (JSON) of repository [`REPO`].
fn on_github<'a>(inv: Invocation<'a>, event: &str) -> (Invocation<'a>, tempfile::TempDir) {
    let (dir, path) = file_in_temp_dir("event.json", event);
    let inv = inv
        .env("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567")
        .env("GITHUB_REPOSITORY", REPO)
        .env("GITHUB_EVENT_PATH", path.to_str().unwrap());
    (inv, dir)
}

fn closed(n: u64) -> String {
    format!(
        r#"{{"action": "closed", "number": {n}, "pull_request": {{"number": {n}, "head": {{"sha": "abc"}}}}}}"#
    )
}

/// A scenario deployment line: `id`, created `days` ago, with `labels`.
fn dep(id: &str, days: i64, rest: &str) -> String {
    format!(
        "      - {{id: {id}, name: {id}, created_at: {}{rest}}}\n",
        -days * DAY
    )
}

fn labelled() -> String {
    format!(", labels: {{truss_push_content_hash: \"{HASH}\"}}")
}

fn pr_label(value: &str) -> String {
    format!(
        ", labels: {{truss_push_content_hash: \"{HASH}\", truss_push_pull_request: \"{value}\"}}"
    )
}

fn deleted(fake: &FakeBaseten) -> Vec<String> {
    let mut d = fake.deleted_deployments();
    d.sort();
    d
}

fn mutations_of(fake: &FakeBaseten) -> Vec<LogEntry> {
    fake.requests()
        .into_iter()
        .filter(|e| e.method != "GET" || e.mutation)
        .collect()
}

fn retired(run: &Outcome) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(run.out("retired")).expect("retired is JSON");
    let mut out: Vec<(String, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["deployment-id"].as_str().unwrap().to_string(),
                e["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn pairs(ids: &[&str], action: &str) -> Vec<(String, String)> {
    ids.iter()
        .map(|i| (i.to_string(), action.to_string()))
        .collect()
}
