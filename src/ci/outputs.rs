//! The step outputs and the files they are written to: `$GITHUB_OUTPUT`
//! (heredocs), and the dotenv, shell or JSON outputs file for other CI
//! systems.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::str::FromStr;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

use super::format::format_deploy_time;
use crate::outcome::Status;

/// The anchor keeps the first 4096 characters of the predict response.
const PREDICT_RESPONSE_MAX_CHARS: usize = 4096;
/// Error messages are free text (sometimes a whole server reply): keep
/// outputs and files bounded the same way as the predict response.
const ERROR_MESSAGE_MAX_CHARS: usize = 4096;
/// GitLab accepts a dotenv artifact only when its size is *below* 5 KiB.
const DOTENV_MAX_BYTES: usize = 5 * 1024 - 1;
/// Prefix of every dotenv name: dotenv variables become environment
/// variables of later jobs, and un-prefixed names such as `MODEL_NAME` are
/// inputs of truss-push itself, so a second deploy job would inherit them.
const DOTENV_PREFIX: &str = "TRUSS_PUSH_";
/// Budget for the error message inside the dotenv file, leaving the rest of
/// the 5 KiB to the predict response.
const DOTENV_ERROR_MESSAGE_MAX_BYTES: usize = 1024;
/// Ends a dotenv value that was cut to fit the file.
const DOTENV_CUT_MARKER: &str = "…";
/// How long writing one outputs file may take. Opening a FIFO nobody reads
/// blocks forever, and so can a stuck network file system; past this the
/// write is abandoned and reported as failed, so the process still ends.
const FILE_WRITE_TIMEOUT_MILLIS: u64 = 3_000;

/// The step outputs. Empty strings mean "unknown / not applicable", which is
/// how every writer renders them (the summary shows `N/A`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outputs {
    pub(crate) deployment_id: String,
    pub(crate) model_id: String,
    pub(crate) chain_id: String,
    pub(crate) model_name: String,
    /// Push → ready, rendered with one decimal; empty when unknown.
    pub(crate) deploy_time_seconds: Option<f64>,
    /// Full response body; writers keep the first 4096 characters.
    pub(crate) predict_response: String,
    /// How the run ended; written as its status word.
    pub(crate) status: Status,
    pub(crate) error_message: String,
    /// Last platform status observed while waiting.
    pub(crate) last_status: String,
    pub(crate) logs_url: String,
    /// The URL the smoke test used (the last one, when there were two).
    pub(crate) predict_url: String,
    /// The URL that serves the environment, when the deploy has one.
    pub(crate) environment_url: String,
    /// The deployment that served the environment before this run.
    pub(crate) previous_deployment_id: String,
    /// The deployment the first smoke test ran on, when a promotion
    /// created another one that serves now.
    pub(crate) tested_deployment_id: String,
    /// `true` when this run moved the environment back to the previous
    /// deployment; empty when no promotion was gated.
    pub(crate) rolled_back: Option<bool>,
    /// Plan mode: the targets as a CI matrix (`{"include": [...]}`).
    /// Written only when set, like the next two, so a single-target run's
    /// outputs stay exactly as they were.
    pub(crate) matrix: Option<String>,
    /// Plan mode and several targets: how many targets were planned or run.
    pub(crate) targets_count: Option<usize>,
    /// Several targets: a JSON array with every target's outputs.
    pub(crate) results: Option<String>,
    /// The evidence outputs (`cases-passed` …), only when evidence ran.
    pub(crate) evidence: Vec<(&'static str, String)>,
}

impl Outputs {
    /// Outputs with the given status and everything else unknown.
    pub(crate) fn new(status: Status) -> Self {
        Self {
            deployment_id: String::new(),
            model_id: String::new(),
            chain_id: String::new(),
            model_name: String::new(),
            deploy_time_seconds: None,
            predict_response: String::new(),
            status,
            error_message: String::new(),
            last_status: String::new(),
            logs_url: String::new(),
            predict_url: String::new(),
            environment_url: String::new(),
            previous_deployment_id: String::new(),
            tested_deployment_id: String::new(),
            rolled_back: None,
            matrix: None,
            targets_count: None,
            results: None,
            evidence: Vec::new(),
        }
    }

    /// Replaces `secret` with `***` in every text output, so a secret that
    /// reached an error message or a response never lands in a file.
    pub(crate) fn redact(&mut self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        for field in [
            &mut self.deployment_id,
            &mut self.model_id,
            &mut self.chain_id,
            &mut self.model_name,
            &mut self.predict_response,
            &mut self.error_message,
            &mut self.last_status,
            &mut self.logs_url,
            &mut self.predict_url,
            &mut self.environment_url,
            &mut self.previous_deployment_id,
            &mut self.tested_deployment_id,
        ] {
            if let Cow::Owned(clean) = redact(field, secret) {
                *field = clean;
            }
        }
        for field in [&mut self.matrix, &mut self.results].into_iter().flatten() {
            if let Cow::Owned(clean) = redact(field, secret) {
                *field = clean;
            }
        }
    }

    /// `(name, value)` in writing order: the Python action's seven outputs
    /// first, in the order it writes them, then the ones this project adds.
    pub(crate) fn entries(&self) -> Vec<(&'static str, String)> {
        let mut entries = vec![
            ("deployment-id", self.deployment_id.clone()),
            ("model-id", self.model_id.clone()),
            ("chain-id", self.chain_id.clone()),
            ("model-name", self.model_name.clone()),
            (
                "deploy-time-seconds",
                format_deploy_time(self.deploy_time_seconds),
            ),
            (
                "predict-response",
                truncate_chars(&self.predict_response, PREDICT_RESPONSE_MAX_CHARS).to_owned(),
            ),
            ("status", self.status.as_str().to_owned()),
            (
                "error-message",
                truncate_chars(&self.error_message, ERROR_MESSAGE_MAX_CHARS).to_owned(),
            ),
            ("last-status", self.last_status.clone()),
            ("logs-url", self.logs_url.clone()),
            ("predict-url", self.predict_url.clone()),
            ("environment-url", self.environment_url.clone()),
            (
                "previous-deployment-id",
                self.previous_deployment_id.clone(),
            ),
            ("tested-deployment-id", self.tested_deployment_id.clone()),
            (
                "rolled-back",
                self.rolled_back.map(|b| b.to_string()).unwrap_or_default(),
            ),
        ];
        if let Some(m) = &self.matrix {
            entries.push(("matrix", m.clone()));
        }
        if let Some(n) = self.targets_count {
            entries.push(("targets-count", n.to_string()));
        }
        if let Some(r) = &self.results {
            entries.push(("results", r.clone()));
        }
        entries.extend(self.evidence.iter().cloned());
        entries
    }
}

/// `text` with every occurrence of `secret` replaced by `***`; borrowed when
/// there is none (or the secret is empty).
pub(crate) fn redact<'a>(text: &'a str, secret: &str) -> Cow<'a, str> {
    crate::secret::redact(text, &[secret])
}

/// The first `max` characters (Unicode scalar values, as Python counts).
pub(super) fn truncate_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

/// The longest prefix of `s` that is at most `max` bytes and ends on a char boundary.
pub(super) fn truncate_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

// ---------------------------------------------------------------------------
// $GITHUB_OUTPUT
// ---------------------------------------------------------------------------

/// How many fresh delimiters to try before giving up; a random 128-bit
/// delimiter colliding even once means someone forged it, so this only
/// matters for injected generators.
const DELIMITER_ATTEMPTS: usize = 16;

/// A fresh `ghadelimiter_<32 hex>` from `rng`.
fn random_delimiter(rng: &mut fastrand::Rng) -> String {
    format!("ghadelimiter_{:032x}", rng.u128(..))
}

/// `[A-Za-z_][A-Za-z0-9_-]*`: what GitHub accepts as an output id and what
/// the runner's file parser cannot misread (no `=`, no `<<`).
fn is_valid_output_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Renders entries for `$GITHUB_OUTPUT`: each as `name<<DELIM` LF value LF
/// `DELIM` LF, with a delimiter from `next_delimiter` that occurs in neither
/// name nor value (a new one is drawn on collision).
fn render_github_output(
    entries: &[(&str, String)],
    next_delimiter: &mut dyn FnMut() -> String,
) -> anyhow::Result<String> {
    let mut text = String::new();
    for (name, value) in entries {
        if !is_valid_output_name(name) {
            bail!(
                "output name {name:?} is not valid: expected a letter or '_' followed by letters, digits, '_' or '-'"
            );
        }
        let delimiter = pick_delimiter(name, value, next_delimiter)?;
        let _ = write!(text, "{name}<<{delimiter}\n{value}\n{delimiter}\n");
    }
    Ok(text)
}

fn pick_delimiter(
    name: &str,
    value: &str,
    next_delimiter: &mut dyn FnMut() -> String,
) -> anyhow::Result<String> {
    for _ in 0..DELIMITER_ATTEMPTS {
        let delimiter = next_delimiter();
        let usable = !delimiter.is_empty()
            && !delimiter.contains(['\n', '\r'])
            && !name.contains(&delimiter)
            && !value.contains(&delimiter);
        if usable {
            return Ok(delimiter);
        }
    }
    bail!(
        "could not find a heredoc delimiter absent from output {name:?} after {DELIMITER_ATTEMPTS} attempts"
    )
}

/// Appends all outputs to the `$GITHUB_OUTPUT` file at `path` (created if
/// missing, so local runs can point it at any file). Nothing is written when
/// rendering fails.
pub(crate) fn append_github_output(path: &Path, outputs: &Outputs) -> anyhow::Result<()> {
    let mut rng = fastrand::Rng::new();
    let text = render_github_output(&outputs.entries(), &mut || random_delimiter(&mut rng))?;
    append_file(path, text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}

/// Appends `bytes` to the file at `path`, creating it if missing. When the
/// file does not end with a newline, one is written first, so the first
/// line of `bytes` is never glued to someone else's last line (both the
/// runner's output file and Markdown skip a blank line).
pub(super) fn append_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_with_timeout(path, bytes, WriteMode::Append)
}

/// Replaces the file at `path` with `bytes`.
fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_with_timeout(path, bytes, WriteMode::Replace)
}

#[derive(Clone, Copy)]
enum WriteMode {
    Append,
    Replace,
}

/// Writes on a helper thread and gives up after [`FILE_WRITE_TIMEOUT_MILLIS`]:
/// a blocked `open` cannot be interrupted, but it can be left behind (the
/// process exits soon after the outputs are written).
fn write_with_timeout(path: &Path, bytes: &[u8], mode: WriteMode) -> io::Result<()> {
    let (tx, rx) = mpsc::sync_channel(1);
    let (owned_path, owned_bytes) = (path.to_path_buf(), bytes.to_vec());
    std::thread::Builder::new()
        .name("outputs-write".into())
        .spawn(move || {
            let _ = tx.send(write_now(&owned_path, &owned_bytes, mode));
        })?;
    let timeout = Duration::from_millis(FILE_WRITE_TIMEOUT_MILLIS);
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the write did not finish within {} s (a FIFO that nobody reads?)",
                timeout.as_secs()
            ),
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(io::Error::other(
            "the writing thread ended without a result",
        )),
    }
}

fn write_now(path: &Path, bytes: &[u8], mode: WriteMode) -> io::Result<()> {
    check_destination(path)?;
    let mut options = std::fs::OpenOptions::new();
    options.create(true);
    let mut text = Vec::with_capacity(bytes.len() + 1);
    match mode {
        WriteMode::Append => {
            options.append(true);
            if lacks_final_newline(path) {
                text.push(b'\n');
            }
        }
        WriteMode::Replace => {
            options.write(true).truncate(true);
        }
    }
    text.extend_from_slice(bytes);
    let mut file = options.open(path)?;
    // One write for the whole text so a concurrent writer cannot land inside an entry.
    file.write_all(&text)?;
    file.flush()
}

/// Refuses what can never hold outputs, with a message better than the
/// system's: directories, block devices, sockets, a missing directory.
/// Regular files, character devices (`/dev/null`, a terminal) and pipes
/// (`/dev/stdout` in CI) are written; a FIFO without a reader is caught by
/// the write timeout.
fn check_destination(path: &Path) -> io::Result<()> {
    let refuse = |what: &str| Err(io::Error::other(format!("it is {what}, not a file")));
    match std::fs::metadata(path) {
        Ok(meta) => {
            let kind = meta.file_type();
            if kind.is_dir() {
                refuse("a directory")
            } else if kind.is_block_device() {
                refuse("a block device")
            } else if kind.is_socket() {
                refuse("a socket")
            } else {
                Ok(())
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("its directory {} does not exist", dir.display()),
            )),
            _ => Ok(()),
        },
        Err(e) => Err(e),
    }
}

/// Whether `path` is a non-empty regular file whose last byte is not a
/// newline. When that cannot be read, a newline is assumed to be missing:
/// an extra blank line is harmless, a glued line is not.
pub(super) fn lacks_final_newline(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if !meta.is_file() || meta.len() == 0 {
        return false;
    }
    let last = std::fs::File::open(path).and_then(|mut f| {
        f.seek(SeekFrom::End(-1))?;
        let mut byte = [0u8; 1];
        f.read_exact(&mut byte)?;
        Ok(byte[0])
    });
    last.map_or(true, |b| b != b'\n')
}

// ---------------------------------------------------------------------------
// Outputs file for other CI systems (dotenv, JSON)
// ---------------------------------------------------------------------------

/// Format of the outputs file for CI systems other than GitHub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputsFormat {
    /// GitLab dotenv report rules; see [`render_dotenv`]. Not for the
    /// shell: values are written unquoted.
    Dotenv,
    /// POSIX shell assignments, safe to `source`; see [`render_shell`].
    Shell,
    /// One JSON object with the hyphenated output names.
    Json,
}

impl FromStr for OutputsFormat {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "dotenv" | "env" => Ok(OutputsFormat::Dotenv),
            "shell" | "sh" => Ok(OutputsFormat::Shell),
            "json" => Ok(OutputsFormat::Json),
            other => bail!("outputs format {other:?} is not known: expected dotenv, shell or json"),
        }
    }
}

/// `deployment-id` → `TRUSS_PUSH_DEPLOYMENT_ID`.
fn dotenv_name(output_name: &str) -> String {
    let mut name = String::from(DOTENV_PREFIX);
    name.extend(output_name.chars().map(|c| match c {
        '-' => '_',
        c => c.to_ascii_uppercase(),
    }));
    name
}

/// Makes `value` single-line: `\` → `\\`, LF → `\n`, CR → `\r`, stopping
/// before the result would exceed `max_bytes` (never inside an escape).
/// Returns the text and whether anything was cut.
fn escape_single_line(value: &str, max_bytes: usize) -> (String, bool) {
    let mut out = String::new();
    for c in value.chars() {
        let piece: Cow<str> = match c {
            '\\' => "\\\\".into(),
            '\n' => "\\n".into(),
            '\r' => "\\r".into(),
            c => c.to_string().into(),
        };
        if out.len() + piece.len() > max_bytes {
            return (out, true);
        }
        out.push_str(&piece);
    }
    (out, false)
}

/// The single-line form of a predict response: compact JSON when the
/// response is JSON (directly usable with `jq`), else escaped text.
fn single_line_predict_response(response: &str, max_bytes: usize) -> (String, bool) {
    if let Some(compact) = compact_json(response) {
        let kept = truncate_bytes(&compact, max_bytes);
        return (kept.to_owned(), kept.len() < compact.len());
    }
    escape_single_line(response, max_bytes)
}

/// `text` without the whitespace between JSON tokens, if it is valid JSON.
/// Working on the text rather than re-serializing keeps key order and
/// number spelling exactly as the model sent them. Valid JSON has no raw
/// line breaks inside strings, so the result is one line.
fn compact_json(text: &str) -> Option<String> {
    serde_json::from_str::<serde::de::IgnoredAny>(text).ok()?;
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            in_string = c == '"';
            out.push(c);
        }
    }
    Some(out)
}

/// Renders the outputs as a GitLab dotenv report.
///
/// Every rule GitLab enforces holds: one `NAME=value` line per output, names
/// `TRUSS_PUSH_` + the output name upper-cased with `-` → `_`, no blank
/// lines, no comments, no quoting, at most 20 variables, under 5 KiB.
/// Values are single-line: `predict-response` is compact JSON when the
/// response was JSON; it and every other value otherwise escape `\` as `\\`,
/// LF as `\n` and CR as `\r`. GitLab strips leading and trailing whitespace
/// from values.
///
/// Every variable is always present; long values are cut instead. Short
/// values are kept whole first, and the long ones share what is left of the
/// 5 KiB equally (the error message keeps at most 1 KiB). A cut value ends
/// with `…`, except the predict response, where the extra variable
/// `TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED` says (`true`/`false`) whether it
/// was cut shorter than the `predict-response` output (a marker would break
/// its JSON).
///
/// The values are not quoted, so the file must not be `source`d by a shell
/// (a `$(…)` in a value would run): use the shell format for that.
fn render_dotenv(outputs: &Outputs) -> String {
    const PREDICT: &str = "predict-response";
    const PREDICT_TRUNCATED: &str = "predict-response-truncated";
    let entries = outputs.entries();
    let line_for = |name: &str, value: &str| format!("{}={value}\n", dotenv_name(name));

    // The lines without their values; the flag is counted at its longer value.
    let overhead: usize = entries
        .iter()
        .map(|(name, _)| line_for(name, "").len())
        .sum::<usize>()
        + line_for(PREDICT_TRUNCATED, "false").len();
    let wants: Vec<usize> = entries
        .iter()
        .map(|(name, value)| {
            let whole = if *name == PREDICT {
                single_line_predict_response(value, usize::MAX).0.len()
            } else {
                escape_single_line(value, usize::MAX).0.len()
            };
            match *name {
                "error-message" => whole.min(DOTENV_ERROR_MESSAGE_MAX_BYTES),
                _ => whole,
            }
        })
        .collect();
    let budgets = share_bytes(&wants, DOTENV_MAX_BYTES.saturating_sub(overhead));

    let mut text = String::new();
    for ((name, value), budget) in entries.iter().zip(budgets) {
        if *name == PREDICT {
            let (predict, truncated) = single_line_predict_response(value, budget);
            text.push_str(&line_for(name, &predict));
            let flag = if truncated { "true" } else { "false" };
            text.push_str(&line_for(PREDICT_TRUNCATED, flag));
        } else {
            text.push_str(&line_for(name, &dotenv_value(value, budget)));
        }
    }
    text
}

/// Splits `total` bytes between values wanting `wants` bytes: the smallest
/// wants are met in full, and whatever they leave is shared equally by the
/// rest, so one huge value cannot starve the others.
fn share_bytes(wants: &[usize], total: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..wants.len()).collect();
    order.sort_by_key(|&i| wants[i]);
    let mut budgets = vec![0; wants.len()];
    let mut left = total;
    for (done, &i) in order.iter().enumerate() {
        let share = left / (wants.len() - done);
        budgets[i] = wants[i].min(share);
        left -= budgets[i];
    }
    budgets
}

/// A non-predict output's dotenv value: escaped to one line within
/// `max_bytes`, ending with [`DOTENV_CUT_MARKER`] when it was cut.
fn dotenv_value(value: &str, max_bytes: usize) -> String {
    let (whole, cut) = escape_single_line(value, max_bytes);
    if !cut {
        return whole;
    }
    let room = max_bytes.saturating_sub(DOTENV_CUT_MARKER.len());
    let (mut kept, _) = escape_single_line(value, room);
    if kept.len() + DOTENV_CUT_MARKER.len() <= max_bytes {
        kept.push_str(DOTENV_CUT_MARKER);
    }
    kept
}

/// Renders the outputs as POSIX shell assignments, one per output:
/// `TRUSS_PUSH_<NAME>='value'`, names as in the dotenv file. Every value is
/// single-quoted, with `'` written as `'\''`, so sourcing the file (`. file`)
/// only assigns: nothing in a value is expanded or run. Values keep their
/// line breaks and are as long as the outputs themselves; NUL characters,
/// which a shell variable cannot hold, are dropped. Use `set -a` before
/// sourcing to export them.
fn render_shell(outputs: &Outputs) -> String {
    let mut text = String::new();
    for (name, value) in outputs.entries() {
        let _ = writeln!(text, "{}={}", dotenv_name(name), shell_quote(&value));
    }
    text
}

/// `value` as one POSIX single-quoted word.
fn shell_quote(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    for c in value.chars() {
        match c {
            '\'' => quoted.push_str("'\\''"),
            '\0' => {}
            c => quoted.push(c),
        }
    }
    quoted.push('\'');
    quoted
}

/// Renders the outputs as a JSON object with the hyphenated names in writing
/// order; every value is a string, exactly as in `$GITHUB_OUTPUT`.
fn render_json(outputs: &Outputs) -> String {
    let mut text = String::from("{\n");
    let entries = outputs.entries();
    for (i, (name, value)) in entries.iter().enumerate() {
        let comma = if i + 1 < entries.len() { "," } else { "" };
        let _ = writeln!(
            text,
            "  {}: {}{comma}",
            serde_json::Value::from(*name),
            serde_json::Value::from(value.as_str())
        );
    }
    text.push_str("}\n");
    text
}

/// Writes (replacing) the outputs file in the requested format.
pub(crate) fn write_outputs_file(
    path: &Path,
    format: OutputsFormat,
    outputs: &Outputs,
) -> anyhow::Result<()> {
    let text = match format {
        OutputsFormat::Dotenv => render_dotenv(outputs),
        OutputsFormat::Shell => render_shell(outputs),
        OutputsFormat::Json => render_json(outputs),
    };
    replace_file(path, text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
pub(super) mod tests {
    use fake_baseten::runner::{
        DOTENV_MAX_VARS, parse_github_output, parse_gitlab_dotenv, unescape_dotenv_value,
    };

    use super::*;

    /// The Python action's seven outputs, in the order it writes them.
    const ANCHOR_OUTPUT_NAMES: [&str; 7] = [
        "deployment-id",
        "model-id",
        "chain-id",
        "model-name",
        "deploy-time-seconds",
        "predict-response",
        "status",
    ];
    /// Outputs this project adds after the anchor's seven.
    const EXTRA_OUTPUT_NAMES: [&str; 8] = [
        "error-message",
        "last-status",
        "logs-url",
        "predict-url",
        "environment-url",
        "previous-deployment-id",
        "tested-deployment-id",
        "rolled-back",
    ];

    fn seeded() -> impl FnMut() -> String {
        let mut rng = fastrand::Rng::with_seed(7);
        move || random_delimiter(&mut rng)
    }

    /// A successful model deploy with every output known; the summary's
    /// tests start from it too.
    pub(in crate::ci) fn full_outputs() -> Outputs {
        Outputs {
            deployment_id: "dep456".into(),
            model_id: "abc123".into(),
            chain_id: String::new(),
            model_name: "my-model".into(),
            deploy_time_seconds: Some(42.46),
            predict_response: "{\"output\": \"hi\"}".into(),
            status: Status::Success,
            error_message: String::new(),
            last_status: "ACTIVE".into(),
            logs_url: "https://app.baseten.co/models/abc123/logs/dep456".into(),
            predict_url: "https://model-abc123.api.baseten.co/deployment/dep456/predict".into(),
            ..Outputs::new(Status::Success)
        }
    }

    // --- Outputs ----------------------------------------------------------

    #[test]
    fn entries_put_the_anchor_outputs_first_in_its_order() {
        let names: Vec<&str> = full_outputs().entries().iter().map(|(n, _)| *n).collect();
        assert_eq!(names[..7], ANCHOR_OUTPUT_NAMES);
        assert_eq!(names[7..], EXTRA_OUTPUT_NAMES);
    }

    #[test]
    fn predict_response_keeps_the_first_4096_characters() {
        let mut outputs = full_outputs();
        outputs.predict_response = "é".repeat(5000);
        let entries = outputs.entries();
        let value = &entries
            .iter()
            .find(|(n, _)| *n == "predict-response")
            .unwrap()
            .1;
        assert_eq!(value.chars().count(), 4096);
        assert_eq!(value.len(), 8192, "characters, not bytes");

        assert_eq!(truncate_chars("abc", 2), "ab");
        assert_eq!(truncate_chars("abc", 3), "abc");
        assert_eq!(truncate_chars("", 3), "");
    }

    // --- $GITHUB_OUTPUT ---------------------------------------------------

    #[test]
    fn github_output_round_trips_through_the_runner_rules() {
        let values = [
            "simple",
            "",
            "line one\nline two",
            "EOF",
            "before\nEOF\nafter",
            "x=y",
            "a<<b",
            "name<<EOF",
            "trailing newline\n",
            "\n",
            "\n\nleading blank lines",
            "windows\r\nline",
            "ghadelimiter_",
            "{\"a\": [1, 2]}",
            "日本語 ✅",
        ];
        let entries: Vec<(&str, String)> = values.iter().map(|v| ("out", v.to_string())).collect();
        let text = render_github_output(&entries, &mut seeded()).unwrap();
        assert!(
            !text.contains('\r') || text.contains("windows\r\n"),
            "LF only of our own"
        );
        let parsed = parse_github_output(&text).unwrap();
        let got: Vec<&str> = parsed.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(got, values);
        assert!(parsed.iter().all(|(n, _)| n == "out"));
    }

    #[test]
    fn every_entry_is_a_heredoc_with_its_own_delimiter() {
        let entries = vec![("a", "1".to_string()), ("b", "2".to_string())];
        let text = render_github_output(&entries, &mut seeded()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6);
        let delim_a = lines[0].strip_prefix("a<<").unwrap();
        let delim_b = lines[3].strip_prefix("b<<").unwrap();
        assert!(delim_a.starts_with("ghadelimiter_") && delim_a.len() == 13 + 32);
        assert_ne!(delim_a, delim_b);
        assert_eq!(lines[2], delim_a);
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn a_value_containing_the_delimiter_gets_a_new_one() {
        let forged = "ghadelimiter_00000000000000000000000000000001";
        let value = format!("payload\n{forged}\nstatus=success");
        let mut candidates = vec![
            forged.to_string(),
            "ghadelimiter_00000000000000000000000000000002".to_string(),
        ]
        .into_iter();
        let text = render_github_output(&[("predict-response", value.clone())], &mut || {
            candidates.next().unwrap()
        })
        .unwrap();
        assert!(
            text.starts_with("predict-response<<ghadelimiter_00000000000000000000000000000002\n")
        );
        let parsed = parse_github_output(&text).unwrap();
        assert_eq!(parsed, vec![("predict-response".to_string(), value)]);
    }

    #[test]
    fn a_generator_that_always_collides_is_an_error_not_a_forgery() {
        let result = render_github_output(&[("x", "DELIM".to_string())], &mut || "DELIM".into());
        assert!(result.is_err());
        let bad = ["", "a\nb"];
        for delim in bad {
            let result = render_github_output(&[("x", "v".to_string())], &mut || delim.into());
            assert!(result.is_err(), "{delim:?}");
        }
    }

    #[test]
    fn output_names_are_validated() {
        for good in ["status", "deploy-time-seconds", "_x", "A1_b-2"] {
            assert!(is_valid_output_name(good), "{good}");
        }
        for bad in ["", "1abc", "-a", "a=b", "a<<b", "a b", "é", "a\nb"] {
            assert!(!is_valid_output_name(bad), "{bad:?}");
            assert!(render_github_output(&[(bad, "v".into())], &mut seeded()).is_err());
        }
    }

    #[test]
    fn the_fixed_eof_delimiter_of_the_python_action_is_forgeable_and_ours_is_not() {
        // What the Python action writes for a predict response holding an `EOF` line.
        let response = "ok\nEOF\nstatus=success";
        let python =
            format!("predict-response<<EOF\n{response}\nEOF\nstatus<<EOF\npredict_failed\nEOF\n");
        assert!(parse_github_output(&python).is_err());

        let mut outputs = Outputs::new(Status::PredictFailed);
        outputs.predict_response = response.into();
        let text = render_github_output(&outputs.entries(), &mut seeded()).unwrap();
        let parsed = parse_github_output(&text).unwrap();
        let get = |n: &str| parsed.iter().find(|(k, _)| k == n).unwrap().1.clone();
        assert_eq!(get("predict-response"), response);
        assert_eq!(get("status"), "predict_failed");
    }

    #[test]
    fn append_github_output_appends_every_output_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("set_output_x");
        std::fs::write(&path, "earlier=1\n").unwrap();
        let mut outputs = full_outputs();
        outputs.error_message = "line 1\nline 2".into();
        append_github_output(&path, &outputs).unwrap();

        let text = std::fs::read_to_string(&path).unwrap();
        let parsed = parse_github_output(&text).unwrap();
        assert_eq!(parsed[0], ("earlier".to_string(), "1".to_string()));
        let want: Vec<(String, String)> = outputs
            .entries()
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect();
        assert_eq!(parsed[1..], want);
        assert!(want.contains(&("deploy-time-seconds".into(), "42.5".into())));
    }

    // --- dotenv / JSON ----------------------------------------------------

    /// Every rule GitLab's dotenv upload enforces, checked on the bytes.
    fn assert_gitlab_accepts(text: &str) -> Vec<(String, String)> {
        assert!(text.len() < 5 * 1024, "size {}", text.len());
        assert!(text.ends_with('\n'));
        for line in text.lines() {
            assert!(!line.trim().is_empty(), "blank line");
            assert!(!line.starts_with('#'), "comment line");
            let (name, value) = line.split_once('=').expect("NAME=value");
            assert!(name.starts_with(DOTENV_PREFIX));
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
                "{name}"
            );
            assert!(!value.contains('\r'), "{name} has a CR");
        }
        let vars = parse_gitlab_dotenv(text.as_bytes()).expect("GitLab accepts the file");
        assert!(vars.len() <= DOTENV_MAX_VARS);
        assert_eq!(vars.len(), text.lines().count(), "one variable per line");
        vars
    }

    fn var<'a>(vars: &'a [(String, String)], name: &str) -> &'a str {
        &vars.iter().find(|(k, _)| k == name).unwrap().1
    }

    #[test]
    fn dotenv_obeys_gitlab_rules_with_a_10kb_multiline_predict_response() {
        let mut outputs = full_outputs();
        // Short lines, so escaping the newlines pushes the 4096 characters past the budget.
        outputs.predict_response = "#\"\\\n".repeat(2600);
        assert!(outputs.predict_response.len() > 10_000);
        outputs.error_message = "first\r\nsecond".into();

        let text = render_dotenv(&outputs);
        let vars = assert_gitlab_accepts(&text);
        assert_eq!(vars.len(), 16);
        assert_eq!(var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED"), "true");
        let kept = unescape_dotenv_value(var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE"));
        assert!(kept.len() > 3000, "uses the budget: {}", kept.len());
        assert!(kept.len() < 4096);
        assert!(outputs.predict_response.starts_with(&kept));
        assert_eq!(
            unescape_dotenv_value(var(&vars, "TRUSS_PUSH_ERROR_MESSAGE")),
            "first\r\nsecond"
        );
        assert_eq!(var(&vars, "TRUSS_PUSH_STATUS"), "success");
        assert_eq!(var(&vars, "TRUSS_PUSH_DEPLOY_TIME_SECONDS"), "42.5");
        assert_eq!(var(&vars, "TRUSS_PUSH_CHAIN_ID"), "");
    }

    #[test]
    fn dotenv_stays_under_5kb_with_multibyte_text_and_a_huge_error() {
        let mut outputs = full_outputs();
        outputs.predict_response = "日本語のテキスト\n".repeat(2000);
        outputs.error_message = "エラー\n".repeat(3000);
        let vars = assert_gitlab_accepts(&render_dotenv(&outputs));
        let error = var(&vars, "TRUSS_PUSH_ERROR_MESSAGE");
        assert!(error.len() <= DOTENV_ERROR_MESSAGE_MAX_BYTES);
        let kept = error
            .strip_suffix(DOTENV_CUT_MARKER)
            .expect("marked as cut");
        assert!(
            outputs
                .error_message
                .starts_with(&unescape_dotenv_value(kept))
        );
    }

    #[test]
    fn dotenv_cuts_every_long_value_instead_of_dropping_the_file() {
        let mut outputs = full_outputs();
        outputs.model_name = "m".repeat(10_000);
        outputs.last_status = "S\n".repeat(4000);
        outputs.logs_url = format!("https://app.baseten.co/{}", "l".repeat(6000));
        outputs.predict_response = "p".repeat(9000);
        outputs.error_message = "e".repeat(9000);
        let vars = assert_gitlab_accepts(&render_dotenv(&outputs));
        assert_eq!(vars.len(), 16);
        for name in [
            "TRUSS_PUSH_MODEL_NAME",
            "TRUSS_PUSH_LAST_STATUS",
            "TRUSS_PUSH_LOGS_URL",
            "TRUSS_PUSH_ERROR_MESSAGE",
        ] {
            let value = var(&vars, name);
            assert!(value.ends_with(DOTENV_CUT_MARKER), "{name}: {value}");
            assert!(
                value.len() > 500,
                "{name} keeps a fair share: {}",
                value.len()
            );
        }
        // An escape is never cut in half.
        let status = var(&vars, "TRUSS_PUSH_LAST_STATUS");
        let status = status.strip_suffix(DOTENV_CUT_MARKER).unwrap();
        assert!(
            outputs
                .last_status
                .starts_with(&unescape_dotenv_value(status))
        );
        assert_eq!(var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED"), "true");
        // Short values are whole.
        assert_eq!(var(&vars, "TRUSS_PUSH_STATUS"), "success");
        assert_eq!(var(&vars, "TRUSS_PUSH_DEPLOYMENT_ID"), "dep456");
        assert_eq!(var(&vars, "TRUSS_PUSH_DEPLOY_TIME_SECONDS"), "42.5");
    }

    #[test]
    fn byte_sharing_meets_small_wants_and_splits_the_rest() {
        let cases: &[(&[usize], usize, &[usize])] = &[
            (&[10, 20, 30], 100, &[10, 20, 30]),
            (&[10, 1000, 1000], 100, &[10, 45, 45]),
            (&[10, 1000, 50], 100, &[10, 45, 45]),
            (&[1000, 1000, 1000], 10, &[3, 3, 4]),
            (&[], 10, &[]),
            (&[5], 0, &[0]),
        ];
        for (wants, total, want) in cases {
            let got = share_bytes(wants, *total);
            assert_eq!(got, *want, "{wants:?} in {total}");
            assert!(got.iter().sum::<usize>() <= *total);
        }
    }

    #[test]
    fn a_cut_dotenv_value_ends_with_the_marker_within_its_budget() {
        assert_eq!(dotenv_value("abcdef", 6), "abcdef");
        assert_eq!(dotenv_value("abcdefg", 6), "abc…");
        assert_eq!(dotenv_value("a\nbcdefg", 6), "a\\n…");
        assert_eq!(dotenv_value("abcdefg", 2), "");
    }

    #[test]
    fn shell_quoting_is_one_literal_word() {
        let cases = [
            ("plain", "'plain'"),
            ("", "''"),
            ("it's", "'it'\\''s'"),
            ("$(x) `y` $HOME \\", "'$(x) `y` $HOME \\'"),
            ("a\nb", "'a\nb'"),
            ("nul\0here", "'nulhere'"),
        ];
        for (raw, quoted) in cases {
            assert_eq!(shell_quote(raw), quoted, "{raw:?}");
        }
        let text = render_shell(&full_outputs());
        assert!(
            text.starts_with("TRUSS_PUSH_DEPLOYMENT_ID='dep456'\n"),
            "{text}"
        );
        assert!(text.contains("TRUSS_PUSH_STATUS='success'\n"), "{text}");
        assert_eq!(text.lines().count(), 15);
    }

    #[test]
    fn appending_adds_a_newline_only_when_the_file_lacks_one() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [("", "x\n"), ("a=1", "a=1\nx\n"), ("a=1\n", "a=1\nx\n")];
        for (before, after) in cases {
            let path = dir.path().join("out");
            std::fs::write(&path, before).unwrap();
            append_file(&path, b"x\n").unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), after, "{before:?}");
        }
        let missing = dir.path().join("new");
        append_file(&missing, b"x\n").unwrap();
        assert_eq!(std::fs::read_to_string(&missing).unwrap(), "x\n");
    }

    #[test]
    fn destinations_that_cannot_hold_outputs_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let err = append_file(dir.path(), b"x").unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        let err = replace_file(&dir.path().join("no/such/file"), b"x").unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        assert!(append_file(Path::new("/dev/full"), b"x").is_err());
        assert!(append_file(Path::new("/dev/null"), b"x").is_ok());
    }

    #[test]
    fn dotenv_writes_a_json_predict_response_as_compact_json() {
        let mut outputs = full_outputs();
        outputs.predict_response = "{\n  \"text\": \"a\\nb\",\n  \"n\": [1, 2]\n}\n".into();
        let vars = assert_gitlab_accepts(&render_dotenv(&outputs));
        assert_eq!(
            var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE"),
            r#"{"text":"a\nb","n":[1,2]}"#
        );
        assert_eq!(var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED"), "false");
    }

    #[test]
    fn dotenv_keeps_the_whole_predict_output_when_it_fits() {
        let mut outputs = full_outputs();
        outputs.predict_response = format!("{}\n{}", "a".repeat(3000), "b".repeat(3000));
        let vars = assert_gitlab_accepts(&render_dotenv(&outputs));
        let want = truncate_chars(&outputs.predict_response, PREDICT_RESPONSE_MAX_CHARS);
        assert_eq!(
            unescape_dotenv_value(var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE")),
            want
        );
        assert_eq!(var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED"), "false");
    }

    #[test]
    fn compact_json_keeps_order_and_spelling() {
        let cases = [
            (
                "{\"b\": 1.0, \"a\": [1e3, 2]}",
                Some("{\"b\":1.0,\"a\":[1e3,2]}"),
            ),
            (
                "{ \"s\": \"keep  spaces \\\" and \\\\\" }",
                Some("{\"s\":\"keep  spaces \\\" and \\\\\"}"),
            ),
            ("\r\n[ ]\n", Some("[]")),
            (
                "123456789012345678901234567890",
                Some("123456789012345678901234567890"),
            ),
            ("not json", None),
            ("{\"a\": 1} trailing", None),
            ("", None),
        ];
        for (raw, want) in cases {
            assert_eq!(compact_json(raw).as_deref(), want, "{raw:?}");
        }
    }

    #[test]
    fn dotenv_names_are_prefixed_and_upper_snake_case() {
        assert_eq!(dotenv_name("deployment-id"), "TRUSS_PUSH_DEPLOYMENT_ID");
        assert_eq!(
            dotenv_name("deploy-time-seconds"),
            "TRUSS_PUSH_DEPLOY_TIME_SECONDS"
        );
        let text = render_dotenv(&Outputs::new(Status::DeployFailed));
        let names: Vec<&str> = text.lines().map(|l| l.split_once('=').unwrap().0).collect();
        assert_eq!(
            names,
            [
                "TRUSS_PUSH_DEPLOYMENT_ID",
                "TRUSS_PUSH_MODEL_ID",
                "TRUSS_PUSH_CHAIN_ID",
                "TRUSS_PUSH_MODEL_NAME",
                "TRUSS_PUSH_DEPLOY_TIME_SECONDS",
                "TRUSS_PUSH_PREDICT_RESPONSE",
                "TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED",
                "TRUSS_PUSH_STATUS",
                "TRUSS_PUSH_ERROR_MESSAGE",
                "TRUSS_PUSH_LAST_STATUS",
                "TRUSS_PUSH_LOGS_URL",
                "TRUSS_PUSH_PREDICT_URL",
                "TRUSS_PUSH_ENVIRONMENT_URL",
                "TRUSS_PUSH_PREVIOUS_DEPLOYMENT_ID",
                "TRUSS_PUSH_TESTED_DEPLOYMENT_ID",
                "TRUSS_PUSH_ROLLED_BACK",
            ]
        );
    }

    #[test]
    fn single_line_escaping_is_reversible_and_respects_the_budget() {
        let cases = [
            ("plain", "plain"),
            ("a\nb", "a\\nb"),
            ("a\r\nb", "a\\r\\nb"),
            ("C:\\path", "C:\\\\path"),
            ("literal \\n", "literal \\\\n"),
        ];
        for (raw, escaped) in cases {
            assert_eq!(
                escape_single_line(raw, usize::MAX),
                (escaped.to_string(), false)
            );
            assert_eq!(unescape_dotenv_value(escaped), raw);
        }
        // Never cuts an escape in half.
        assert_eq!(escape_single_line("ab\ncd", 3), ("ab".to_string(), true));
        assert_eq!(escape_single_line("ab\ncd", 4), ("ab\\n".to_string(), true));
    }

    #[test]
    fn json_file_is_an_object_of_strings_in_output_order() {
        let mut outputs = full_outputs();
        outputs.error_message = "quote \" and\nnewline".into();
        let text = render_json(&outputs);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let object = value.as_object().unwrap();
        for (name, want) in outputs.entries() {
            assert_eq!(object[name], serde_json::Value::String(want), "{name}");
        }
        assert_eq!(object.len(), 15);
        let positions: Vec<usize> = outputs
            .entries()
            .iter()
            .map(|(n, _)| text.find(&format!("\"{n}\"")).unwrap())
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    }

    #[test]
    fn outputs_file_format_names() {
        assert_eq!(
            "dotenv".parse::<OutputsFormat>().unwrap(),
            OutputsFormat::Dotenv
        );
        assert_eq!(
            "JSON".parse::<OutputsFormat>().unwrap(),
            OutputsFormat::Json
        );
        assert_eq!(
            "shell".parse::<OutputsFormat>().unwrap(),
            OutputsFormat::Shell
        );
        assert!("yaml".parse::<OutputsFormat>().is_err());
    }

    #[test]
    fn write_outputs_file_replaces_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deploy.env");
        std::fs::write(&path, "STALE=1\n").unwrap();
        write_outputs_file(&path, OutputsFormat::Dotenv, &full_outputs()).unwrap();
        let vars = assert_gitlab_accepts(&std::fs::read_to_string(&path).unwrap());
        assert!(vars.iter().all(|(k, _)| k != "STALE"));
    }

    #[test]
    fn outputs_redact_a_secret_everywhere() {
        let mut outputs = full_outputs();
        outputs.error_message = "401 for key sk-123456: denied".into();
        outputs.predict_response = "echo sk-123456".into();
        outputs.redact("sk-123456");
        outputs.redact("");
        assert_eq!(outputs.error_message, "401 for key ***: denied");
        assert_eq!(outputs.predict_response, "echo ***");
        assert_eq!(outputs.model_name, "my-model");
    }
}
