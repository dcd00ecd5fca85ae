//! Chainlet code generation: the embedded helper runs the real
//! `truss_chains` generator on the user's chain file (chainlet code is
//! Python, and only the pinned truss generates what the platform expects)
//! and answers with a manifest of one truss per chainlet.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;

use crate::flow::{TRUSS_COMPAT_VERSION, human};

/// Python interpreter override for chain code generation (else `python3`
/// on PATH).
pub(crate) const PYTHON_ENV_VAR: &str = "TRUSS_PUSH_PYTHON";
/// The interpreter used when the override is unset.
pub(crate) const DEFAULT_PYTHON: &str = "python3";
/// The helper, shipped inside the binary so a release is still one file.
pub(crate) const CODEGEN_HELPER: &str = include_str!("codegen.py");
/// The truss version the helper generates chains with; it is passed to the
/// helper on its command line.
pub(crate) const PINNED_TRUSS_VERSION: &str = TRUSS_COMPAT_VERSION;
/// Code generation imports user code and runs ruff per chainlet; a hung
/// import must not hold the job forever.
pub(crate) const CODEGEN_TIMEOUT: Duration = Duration::from_secs(600);

/// One generated chainlet, as the helper describes it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub(crate) struct GeneratedChainlet {
    pub(crate) display_name: String,
    pub(crate) name: String,
    pub(crate) truss_dir: PathBuf,
    pub(crate) model_name: String,
    pub(crate) is_entrypoint: bool,
}

/// The helper's manifest: entrypoint first, then dependencies.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub(crate) struct Manifest {
    pub(crate) truss_version: String,
    pub(crate) chain_name: String,
    pub(crate) chain_root: PathBuf,
    pub(crate) chainlets: Vec<GeneratedChainlet>,
}

#[derive(Debug, Deserialize)]
struct HelperError {
    kind: String,
    message: String,
    #[serde(default)]
    traceback: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum HelperAnswer {
    Ok(Manifest),
    Error(HelperError),
}

/// Lines of the helper's stderr shown when it fails without a verdict.
const STDERR_TAIL_LINES: usize = 15;

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Reads what the helper printed into a manifest or a message for people.
pub(crate) fn parse_helper_output(stdout: &str, stderr: &str) -> Result<Manifest, String> {
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty());
    let answer = last.and_then(|l| serde_json::from_str::<HelperAnswer>(l).ok());
    let manifest = match answer {
        Some(HelperAnswer::Ok(m)) => m,
        Some(HelperAnswer::Error(e)) => {
            let mut msg = e.message;
            if !e.traceback.is_empty() {
                msg.push_str("\nPython traceback (last lines):\n");
                msg.push_str(&e.traceback.join("\n"));
            }
            return Err(match e.kind.as_str() {
                "import" => format!("the chain file could not be imported: {msg}"),
                "codegen" => format!("chain code generation failed: {msg}"),
                _ => msg,
            });
        }
        None => {
            return Err(format!(
                "the chain code generation helper gave no answer; its last output:\n{}",
                tail(stderr, STDERR_TAIL_LINES)
            ));
        }
    };
    if !manifest.chainlets.first().is_some_and(|c| c.is_entrypoint)
        || manifest
            .chainlets
            .iter()
            .filter(|c| c.is_entrypoint)
            .count()
            != 1
    {
        return Err("the chain code generation helper did not name exactly one entrypoint".into());
    }
    Ok(manifest)
}

/// The interpreter to run: the override when set and non-empty.
pub(crate) fn python_program(override_value: Option<&str>) -> String {
    override_value
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or(DEFAULT_PYTHON)
        .to_string()
}

/// Runs the helper on `file`, generating into `gen_dir` (its TMPDIR, so
/// concurrent runs never share `.chains_generated`).
pub(crate) async fn generate(
    python: &str,
    file: &Path,
    chain_name: Option<&str>,
    gen_dir: &Path,
) -> Result<Manifest, String> {
    let helper = gen_dir.join("truss_push_chain_codegen.py");
    std::fs::write(&helper, CODEGEN_HELPER)
        .map_err(|e| format!("cannot write the code generation helper: {e}"))?;
    let file = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg("-B")
        .arg(&helper)
        .arg(PINNED_TRUSS_VERSION)
        .arg(&file)
        .arg(chain_name.unwrap_or(""))
        .env("TMPDIR", gen_dir)
        .env("TRUSS_NO_UPDATE_CHECK", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "{python} was not found: chains need Python with truss=={PINNED_TRUSS_VERSION} and ruff installed (pip install truss=={PINNED_TRUSS_VERSION} ruff); put python3 on PATH or set {PYTHON_ENV_VAR} to the interpreter"
        ),
        _ => format!("cannot run {python}: {e}"),
    })?;
    let out = tokio::time::timeout(CODEGEN_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| {
            format!(
                "chain code generation did not finish within {}",
                human(CODEGEN_TIMEOUT)
            )
        })?
        .map_err(|e| format!("running {python}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    parse_helper_output(&stdout, &stderr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_answers() {
        let ok = r#"{"ok": {"truss_version": "0.18.36", "chain_name": "c", "chain_root": "/r",
            "chainlets": [{"display_name": "E", "name": "E", "truss_dir": "/t/E", "model_name": "E-1", "is_entrypoint": true}]}}"#
            .replace('\n', " ");
        let m = parse_helper_output(&format!("noise\n{ok}\n"), "").unwrap();
        assert_eq!(m.chain_name, "c");
        assert_eq!(m.chainlets[0].model_name, "E-1");

        let import = r#"{"error": {"kind": "import", "message": "importing x.py failed: ModuleNotFoundError: No module named 'nope'", "traceback": ["  File \"x.py\", line 5", "ModuleNotFoundError: No module named 'nope'"]}}"#;
        let e = parse_helper_output(import, "").unwrap_err();
        assert!(e.starts_with("the chain file could not be imported"), "{e}");
        assert!(
            e.contains("traceback (last lines):\n  File \"x.py\", line 5"),
            "{e}"
        );

        let ver = r#"{"error": {"kind": "truss_version", "message": "truss 0.17.1 is installed"}}"#;
        assert_eq!(
            parse_helper_output(ver, "").unwrap_err(),
            "truss 0.17.1 is installed"
        );

        let crash = parse_helper_output("", "line1\nSegfault\n").unwrap_err();
        assert!(crash.ends_with("line1\nSegfault"), "{crash}");

        let no_entry = ok.replace("true", "false");
        assert!(parse_helper_output(&no_entry, "").is_err());
    }

    #[test]
    fn python_override() {
        for (v, want) in [
            (None, "python3"),
            (Some(""), "python3"),
            (Some("  "), "python3"),
            (Some("/opt/py/bin/python"), "/opt/py/bin/python"),
        ] {
            assert_eq!(python_program(v), want);
        }
    }

    #[tokio::test]
    async fn a_missing_python_is_named() {
        let d = tempfile::tempdir().unwrap();
        let e = generate("/nonexistent/python3", Path::new("x.py"), None, d.path())
            .await
            .unwrap_err();
        assert!(e.contains("was not found"), "{e}");
        assert!(e.contains(PYTHON_ENV_VAR), "{e}");
    }
}
