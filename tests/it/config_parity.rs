//! The config payload truss-push computes equals the one the real truss
//! 0.18.36 computes, for every config.yaml in tests/fixtures/configs/, and
//! every config truss refuses is refused (differential test).

use crate::chain_harness::{fixture, truss_venv};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

/// Files where truss-push still differs from truss, each with the reason.
/// The test fails when one of them starts to agree, so the list only shrinks.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

/// What truss computes for each file: `Ok(config)` or `Err(refusal)`.
fn oracle(files: &[String]) -> BTreeMap<String, Result<Value, String>> {
    let mut child = Command::new(truss_venv().join("bin/python"))
        .arg(fixture("configs/oracle.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the venv's python starts");
    let mut stdin = child.stdin.take().unwrap();
    for f in files {
        writeln!(stdin, "{f}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "oracle.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            let file = v["file"].as_str().unwrap().to_string();
            let result = match v.get("config") {
                Some(c) => Ok(c.clone()),
                None => Err(v["refused"].as_str().unwrap().to_string()),
            };
            (file, result)
        })
        .collect()
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn every_corpus_config_matches_truss() {
    let dir = fixture("configs");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    files.sort();
    assert!(files.len() >= 150, "the corpus holds {} files", files.len());
    let truss = oracle(&files);
    assert_eq!(truss.len(), files.len(), "oracle answered every file");

    let mut differ = BTreeMap::new();
    for f in &files {
        let name = f.rsplit('/').next().unwrap().to_string();
        let ours = truss_push::truss_config::normalize(&std::fs::read(f).unwrap());
        let verdict = match (&truss[f], &ours) {
            (Ok(a), Ok(b)) if a == b => None,
            (Err(_), Err(_)) => None,
            (Ok(a), Ok(b)) => Some(format!(
                "payloads differ:\n truss:      {a}\n truss-push: {b}"
            )),
            (Ok(_), Err(e)) => Some(format!("truss accepts, truss-push refuses: {e}")),
            (Err(e), Ok(_)) => Some(format!("truss refuses, truss-push accepts: {e}")),
        };
        if let Some(v) = verdict {
            differ.insert(name, v);
        }
    }
    let unexpected: Vec<String> = differ
        .iter()
        .filter(|(name, _)| !KNOWN_DIFFERENCES.iter().any(|(k, _)| k == name))
        .map(|(name, why)| format!("{name}: {why}"))
        .collect();
    let now_agree: Vec<&str> = KNOWN_DIFFERENCES
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !differ.contains_key(*k))
        .collect();
    assert!(
        unexpected.is_empty() && now_agree.is_empty(),
        "{} corpus files differ from truss:\n{}\nlisted as known differences but now agree: {now_agree:?}",
        unexpected.len(),
        unexpected.join("\n")
    );
}
