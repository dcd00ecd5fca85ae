//! Chainlet code generation: the embedded helper runs the real
//! `truss_chains` generator on the user's chain file (chainlet code is
//! Python, and only the pinned truss generates what the platform expects)
//! and answers with a manifest of one truss per chainlet.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::flow::human;
use crate::net::TRUSS_COMPAT_VERSION;

/// Python interpreter override for chain code generation (else `python3`
/// on PATH).
pub(crate) use crate::env_vars::TRUSS_PUSH_PYTHON as PYTHON_ENV_VAR;
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
/// The end of the helper's stdout that is kept: its answer is the last
/// line, a manifest of a few kilobytes per chainlet.
const STDOUT_TAIL_BYTES: usize = 4 << 20;
/// The end of the helper's stderr that is kept: enough for the lines shown.
const STDERR_TAIL_BYTES: usize = 64 << 10;
/// Once the helper has exited and its group is stopped, its pipes are read
/// to their end for at most this long (a process that left the group could
/// hold them open).
const PIPE_DRAIN_SECS: u64 = 2;

/// The helper's process group (its pid; the helper leads it). Dropping it
/// stops every process in it: the helper and whatever the chain's import
/// started, when the helper is done, fails, times out, or the run is
/// cancelled (the future holding this is dropped).
struct Group(Option<rustix::process::Pid>);

impl Group {
    fn stop(&mut self) {
        if let Some(pgid) = self.0.take() {
            // ESRCH (every member already gone) is the usual, fine outcome.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads `pipe` to its end, keeping only its last `keep` bytes, so a chain
/// that prints without end costs no memory.
async fn read_tail(mut pipe: impl AsyncRead + Unpin, keep: usize) -> Vec<u8> {
    let mut tail = Vec::with_capacity(keep.min(64 << 10));
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > keep * 2 {
            // Trimmed only now and then: each byte is moved about once.
            tail.drain(..tail.len() - keep);
        }
    }
    if tail.len() > keep {
        tail.drain(..tail.len() - keep);
    }
    tail
}

/// A task reading one of the helper's pipes; aborted if the run stops
/// waiting for it.
struct Reader(tokio::task::JoinHandle<Vec<u8>>);

impl Reader {
    fn spawn(pipe: impl AsyncRead + Unpin + Send + 'static, keep: usize) -> Self {
        Self(tokio::spawn(read_tail(pipe, keep)))
    }

    /// What was read, waiting at most `limit` for the pipe's end.
    async fn finish(mut self, limit: Duration) -> Vec<u8> {
        match tokio::time::timeout(limit, &mut self.0).await {
            Ok(Ok(bytes)) => bytes,
            _ => Vec::new(),
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.0.abort();
    }
}

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
    #[expect(
        clippy::disallowed_methods,
        reason = "the chain helper's script, in the temporary directory the run made (chain.rs), never a path the user named"
    )]
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
        // Its own process group, so the helper and everything the chain's
        // import starts can be stopped together.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "{python} was not found: chains need Python with truss=={PINNED_TRUSS_VERSION} and ruff installed (pip install truss=={PINNED_TRUSS_VERSION} ruff); put python3 on PATH or set {PYTHON_ENV_VAR} to the interpreter"
        ),
        _ => format!("cannot run {python}: {e}"),
    })?;
    let mut group = Group(
        child
            .id()
            .and_then(|id| rustix::process::Pid::from_raw(id as i32)),
    );
    let stdout = Reader::spawn(child.stdout.take().expect("piped"), STDOUT_TAIL_BYTES);
    let stderr = Reader::spawn(child.stderr.take().expect("piped"), STDERR_TAIL_BYTES);
    // The helper's exit is the end of code generation, whoever still holds
    // its pipes: a process the chain's import started is stopped with the
    // group rather than waited for.
    let exited = tokio::time::timeout(CODEGEN_TIMEOUT, child.wait()).await;
    group.stop();
    exited
        .map_err(|_| {
            format!(
                "chain code generation did not finish within {}",
                human(CODEGEN_TIMEOUT)
            )
        })?
        .map_err(|e| format!("running {python}: {e}"))?;
    let drain = Duration::from_secs(PIPE_DRAIN_SECS);
    let stdout = stdout.finish(drain).await;
    let stderr = stderr.finish(drain).await;
    parse_helper_output(
        &String::from_utf8_lossy(&stdout),
        &String::from_utf8_lossy(&stderr),
    )
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

    #[tokio::test]
    async fn only_the_tail_of_a_pipe_is_kept() {
        let text: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let tail = read_tail(&text[..], 100).await;
        assert_eq!(tail.len(), 100);
        assert!(text.ends_with(&tail));
        assert!(String::from_utf8(tail).unwrap().ends_with("line 199999\n"));
        assert_eq!(read_tail(&b"short"[..], 100).await, b"short");
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
