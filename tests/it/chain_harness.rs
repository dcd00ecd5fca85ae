//! Chain test helpers: the Python venv with the real truss (made by
//! `scripts/python-env`), fixture chains, and a run of the real
//! `truss chains push` against a fake, to compare wire traffic with ours.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use fake_baseten::FakeBaseten;
use serde_json::Value;

use crate::harness::Invocation;

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The venv holding truss 0.18.36 and ruff; created once per test binary.
/// Creating it installs from PyPI, so every test that reaches it is
/// `#[ignore]`d: plain `cargo test` stays offline, and `scripts/test` runs
/// them with `--ignored` after making the venv.
pub fn truss_venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/python-env"))
            .output()
            .expect("scripts/python-env runs");
        assert!(
            out.status.success(),
            "scripts/python-env failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

/// PATH with the venv's `bin` first (python3, truss, ruff).
pub fn venv_path() -> String {
    let mut dirs = vec![truss_venv().join("bin")];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).unwrap().into_string().unwrap()
}

/// `tests/fixtures/<rel>`.
pub fn fixture(rel: &str) -> PathBuf {
    repo_root().join("tests/fixtures").join(rel)
}

/// A truss-push run on a chain file, with the venv on PATH.
pub fn chain_run<'a>(fake: &'a FakeBaseten, file: &Path) -> Invocation<'a> {
    Invocation::new(fake)
        .arg("truss-directory", file.to_str().unwrap())
        .env("PATH", venv_path())
}

/// The arguments of every GraphQL call to `root_field` the fake logged.
pub fn graphql_calls(fake: &FakeBaseten, root_field: &str) -> Vec<Value> {
    fake.requests()
        .into_iter()
        .filter_map(|r| r.graphql)
        .filter(|g| g.root_fields.first().map(String::as_str) == Some(root_field))
        .map(|g| g.arguments.get(root_field).cloned().unwrap_or(Value::Null))
        .collect()
}

/// Runs the real `truss chains push --publish` of `source` against `fake`
/// in a sandboxed HOME/TMPDIR; returns its output.
pub fn real_truss_chains_push(fake: &FakeBaseten, source: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["chains", "push", "--publish"];
    args.extend_from_slice(extra);
    real_truss(fake, &args, source)
}

/// Runs the real `truss push --publish` of the model in `dir` against
/// `fake`; returns its output.
pub fn real_truss_push(fake: &FakeBaseten, dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["push", "--publish"];
    args.extend_from_slice(extra);
    real_truss(fake, &args, dir)
}

/// Runs the real `truss` CLI with `args` then `target` against `fake`, in a
/// sandboxed HOME/TMPDIR routed to the fake.
fn real_truss(fake: &FakeBaseten, args: &[&str], target: &Path) -> Output {
    let source = target;
    let sandbox = tempfile::tempdir().unwrap();
    let home = sandbox.path().join("home");
    let tmp = sandbox.path().join("tmp");
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(
        home.join(".trussrc"),
        format!(
            "[baseten]\nremote_provider = baseten\napi_key = {}\nremote_url = {}\n",
            fake.api_key(),
            fake.graphql_base()
        ),
    )
    .unwrap();
    std::fs::write(
        home.join(".aws/config"),
        format!(
            "[default]\nendpoint_url = {}\ns3 =\n    addressing_style = path\n",
            fake.s3_endpoint()
        ),
    )
    .unwrap();
    Command::new(truss_venv().join("bin/truss"))
        .args(args)
        .arg(source)
        .args(["--remote", "baseten", "--non-interactive"])
        .current_dir(sandbox.path())
        .env_clear()
        .env("PATH", venv_path())
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .env("TRUSS_NO_UPDATE_CHECK", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("truss runs")
}

/// Member paths of the tar the fake stored under `key`.
pub fn tar_members(fake: &FakeBaseten, key: &str) -> std::collections::BTreeSet<String> {
    let object = fake
        .s3()
        .object_reader(key)
        .unwrap_or_else(|| panic!("the fake stored no object {key}"));
    let mut archive = tar::Archive::new(object);
    archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
        .collect()
}
