//! CI reporting: step outputs, outputs files for other CI systems, the step summary, workflow commands, and the `Reporter` that owns stdout/stderr.
//!
//! Everything a user sees in CI besides the deploy flow's plain log lines is
//! produced here. Rendering is done by pure functions over plain values; the
//! few functions that touch the file system only append or write what those
//! functions rendered. Nothing here reads environment variables except
//! [`CiEnv::from_env`], which `main` calls once.
//!
//! Formats, in short:
//! - `$GITHUB_OUTPUT`: every entry in heredoc form with a fresh
//!   `ghadelimiter_<32 hex>` delimiter that occurs in neither name nor value.
//! - dotenv (GitLab `artifacts:reports:dotenv`, Bitbucket output variables,
//!   `source`-able elsewhere): `TRUSS_PUSH_<NAME>=<value>`, see
//!   [`render_dotenv`] for the single-line encoding and the 5 KB budget.
//! - JSON: one object with the hyphenated output names, every value a string.
//! - Step summary: the Python action's table plus links, error, notes and the
//!   status history, capped at 1 MiB.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};

/// `true` on GitHub Actions runners; enables workflow commands and masking.
pub const GITHUB_ACTIONS: &str = "GITHUB_ACTIONS";
/// Path of the per-step file that GitHub reads step outputs from.
pub const GITHUB_OUTPUT: &str = "GITHUB_OUTPUT";
/// Path of the per-step Markdown file that GitHub shows as the job summary.
pub const GITHUB_STEP_SUMMARY: &str = "GITHUB_STEP_SUMMARY";
/// Set (to `true`) by GitLab CI jobs.
pub const GITLAB_CI: &str = "GITLAB_CI";
/// Set (to `true`) by Buildkite agents.
pub const BUILDKITE: &str = "BUILDKITE";
/// Set (to `true`) by CircleCI jobs.
pub const CIRCLECI: &str = "CIRCLECI";
/// Jenkins server URL, set in every Jenkins build.
pub const JENKINS_URL: &str = "JENKINS_URL";
/// Set (to `True`) by Azure Pipelines agents.
pub const TF_BUILD: &str = "TF_BUILD";
/// Build URI set by Azure Pipelines agents (second Azure marker).
pub const BUILD_BUILDURI: &str = "BUILD_BUILDURI";
/// Build number set by Bitbucket Pipelines.
pub const BITBUCKET_BUILD_NUMBER: &str = "BITBUCKET_BUILD_NUMBER";

/// Status word: every phase passed (cleanup succeeded or was skipped).
pub const STATUS_SUCCESS: &str = "success";
/// Status word: config or deploy failed, or the platform reported a failed status.
pub const STATUS_DEPLOY_FAILED: &str = "deploy_failed";
/// Status word: the deployment was still in progress at the deadline.
pub const STATUS_DEPLOY_TIMEOUT: &str = "deploy_timeout";
/// Status word: the deployment became ready but the predict check failed.
pub const STATUS_PREDICT_FAILED: &str = "predict_failed";
/// Status word: everything passed but deactivating the deployment failed.
pub const STATUS_CLEANUP_FAILED: &str = "cleanup_failed";
/// The five status words, as the Python action spells them.
pub const STATUS_WORDS: [&str; 5] = [
    STATUS_SUCCESS,
    STATUS_DEPLOY_FAILED,
    STATUS_DEPLOY_TIMEOUT,
    STATUS_PREDICT_FAILED,
    STATUS_CLEANUP_FAILED,
];

/// The Python action's seven outputs, in the order it writes them.
pub const ANCHOR_OUTPUT_NAMES: [&str; 7] = [
    "deployment-id",
    "model-id",
    "chain-id",
    "model-name",
    "deploy-time-seconds",
    "predict-response",
    "status",
];
/// Outputs this project adds after the anchor's seven.
pub const EXTRA_OUTPUT_NAMES: [&str; 3] = ["error-message", "last-status", "logs-url"];

/// The anchor keeps the first 4096 characters of the predict response.
pub const PREDICT_RESPONSE_MAX_CHARS: usize = 4096;
/// Error messages are free text (sometimes a whole server reply): keep
/// outputs and files bounded the same way as the predict response.
pub const ERROR_MESSAGE_MAX_CHARS: usize = 4096;
/// GitHub drops a step summary larger than 1024 KiB (bytes on disk).
pub const STEP_SUMMARY_MAX_BYTES: usize = 1024 * 1024;
/// GitLab accepts a dotenv artifact only when its size is *below* 5 KiB.
pub const DOTENV_MAX_BYTES: usize = 5 * 1024 - 1;
/// GitLab's self-managed default limit on dotenv variables.
pub const DOTENV_MAX_VARS: usize = 20;
/// Prefix of every dotenv name: dotenv variables become environment
/// variables of later jobs, and un-prefixed names such as `MODEL_NAME` are
/// inputs of truss-push itself, so a second deploy job would inherit them.
pub const DOTENV_PREFIX: &str = "TRUSS_PUSH_";
/// Budget for the error message inside the dotenv file, leaving the rest of
/// the 5 KiB to the predict response.
pub const DOTENV_ERROR_MESSAGE_MAX_BYTES: usize = 1024;

// ---------------------------------------------------------------------------
// CI detection
// ---------------------------------------------------------------------------

/// Which CI system the process runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CiKind {
    GitHub,
    GitLab,
    Buildkite,
    CircleCi,
    Jenkins,
    Azure,
    Bitbucket,
    Local,
}

impl CiKind {
    /// Human name for log lines.
    pub fn name(self) -> &'static str {
        match self {
            CiKind::GitHub => "GitHub Actions",
            CiKind::GitLab => "GitLab CI",
            CiKind::Buildkite => "Buildkite",
            CiKind::CircleCi => "CircleCI",
            CiKind::Jenkins => "Jenkins",
            CiKind::Azure => "Azure Pipelines",
            CiKind::Bitbucket => "Bitbucket Pipelines",
            CiKind::Local => "local",
        }
    }
}

/// The CI-related environment, read once so nothing deeper needs `std::env`.
/// Empty values count as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CiEnv {
    pub github_actions: Option<String>,
    pub github_output: Option<PathBuf>,
    pub github_step_summary: Option<PathBuf>,
    pub gitlab_ci: Option<String>,
    pub buildkite: Option<String>,
    pub circleci: Option<String>,
    pub jenkins_url: Option<String>,
    pub tf_build: Option<String>,
    pub build_builduri: Option<String>,
    pub bitbucket_build_number: Option<String>,
}

impl CiEnv {
    /// Reads the process environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Builds from any name → value lookup (tests pass a closure over a table).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| lookup(name).filter(|v| !v.is_empty());
        Self {
            github_actions: get(GITHUB_ACTIONS),
            github_output: get(GITHUB_OUTPUT).map(PathBuf::from),
            github_step_summary: get(GITHUB_STEP_SUMMARY).map(PathBuf::from),
            gitlab_ci: get(GITLAB_CI),
            buildkite: get(BUILDKITE),
            circleci: get(CIRCLECI),
            jenkins_url: get(JENKINS_URL),
            tf_build: get(TF_BUILD),
            build_builduri: get(BUILD_BUILDURI),
            bitbucket_build_number: get(BITBUCKET_BUILD_NUMBER),
        }
    }

    /// The CI system, from the markers in ci-conventions §3. GitHub needs
    /// exactly `GITHUB_ACTIONS=true` (as the Python action checks); the others
    /// need their marker set. Jenkins comes last because its marker is a
    /// plain URL variable that other tools may also set.
    pub fn kind(&self) -> CiKind {
        if self.github_actions.as_deref() == Some("true") {
            CiKind::GitHub
        } else if self.gitlab_ci.is_some() {
            CiKind::GitLab
        } else if self.buildkite.is_some() {
            CiKind::Buildkite
        } else if self.circleci.is_some() {
            CiKind::CircleCi
        } else if self.tf_build.is_some() || self.build_builduri.is_some() {
            CiKind::Azure
        } else if self.bitbucket_build_number.is_some() {
            CiKind::Bitbucket
        } else if self.jenkins_url.is_some() {
            CiKind::Jenkins
        } else {
            CiKind::Local
        }
    }
}

// ---------------------------------------------------------------------------
// Outputs
// ---------------------------------------------------------------------------

/// The step outputs. Empty strings mean "unknown / not applicable", which is
/// how every writer renders them (the summary shows `N/A`).
#[derive(Debug, Clone, PartialEq)]
pub struct Outputs {
    pub deployment_id: String,
    pub model_id: String,
    pub chain_id: String,
    pub model_name: String,
    /// Push → ready, rendered with one decimal; empty when unknown.
    pub deploy_time_seconds: Option<f64>,
    /// Full response body; writers keep the first 4096 characters.
    pub predict_response: String,
    /// One of [`STATUS_WORDS`].
    pub status: &'static str,
    pub error_message: String,
    /// Last platform status observed while waiting.
    pub last_status: String,
    pub logs_url: String,
}

impl Outputs {
    /// Outputs with the given status and everything else unknown.
    pub fn new(status: &'static str) -> Self {
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
        }
    }

    /// Replaces `secret` with `***` in every text output, so a secret that
    /// reached an error message or a response never lands in a file.
    pub fn redact(&mut self, secret: &str) {
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
        ] {
            if field.contains(secret) {
                *field = field.replace(secret, "***");
            }
        }
    }

    /// `(name, value)` in writing order: the anchor's seven first, in its
    /// order, then [`EXTRA_OUTPUT_NAMES`].
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        vec![
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
            ("status", self.status.to_owned()),
            (
                "error-message",
                truncate_chars(&self.error_message, ERROR_MESSAGE_MAX_CHARS).to_owned(),
            ),
            ("last-status", self.last_status.clone()),
            ("logs-url", self.logs_url.clone()),
        ]
    }
}

/// `12.3` for a known time (like Python's `f"{x:.1f}"`), empty otherwise.
pub fn format_deploy_time(seconds: Option<f64>) -> String {
    match seconds {
        Some(s) if s.is_finite() => format!("{s:.1}"),
        _ => String::new(),
    }
}

/// The first `max` characters (Unicode scalar values, as Python counts).
pub fn truncate_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

/// The longest prefix of `s` that is at most `max` bytes and ends on a char boundary.
fn truncate_bytes(s: &str, max: usize) -> &str {
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
pub fn random_delimiter(rng: &mut fastrand::Rng) -> String {
    format!("ghadelimiter_{:032x}", rng.u128(..))
}

/// `[A-Za-z_][A-Za-z0-9_-]*`: what GitHub accepts as an output id and what
/// the runner's file parser cannot misread (no `=`, no `<<`).
pub fn is_valid_output_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Renders entries for `$GITHUB_OUTPUT`: each as `name<<DELIM` LF value LF
/// `DELIM` LF, with a delimiter from `next_delimiter` that occurs in neither
/// name nor value (a new one is drawn on collision).
pub fn render_github_output(
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
pub fn append_github_output(path: &Path, outputs: &Outputs) -> anyhow::Result<()> {
    let mut rng = fastrand::Rng::new();
    let text = render_github_output(&outputs.entries(), &mut || random_delimiter(&mut rng))?;
    append_file(path, text.as_bytes())
        .with_context(|| format!("while writing step outputs to {}", path.display()))
}

fn append_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    // One write for the whole text so a concurrent writer cannot land inside an entry.
    file.write_all(bytes)?;
    file.flush()
}

// ---------------------------------------------------------------------------
// Outputs file for other CI systems (dotenv, JSON)
// ---------------------------------------------------------------------------

/// Format of the outputs file for CI systems other than GitHub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputsFormat {
    /// GitLab dotenv report rules; see [`render_dotenv`].
    Dotenv,
    /// One JSON object with the hyphenated output names.
    Json,
}

impl FromStr for OutputsFormat {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "dotenv" | "env" => Ok(OutputsFormat::Dotenv),
            "json" => Ok(OutputsFormat::Json),
            other => bail!("outputs format {other:?} is not known: expected dotenv or json"),
        }
    }
}

/// `deployment-id` → `TRUSS_PUSH_DEPLOYMENT_ID`.
pub fn dotenv_name(output_name: &str) -> String {
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
pub fn escape_single_line(value: &str, max_bytes: usize) -> (String, bool) {
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
pub fn compact_json(text: &str) -> Option<String> {
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
/// LF as `\n` and CR as `\r`. The error message keeps at most 1 KiB; the
/// predict response gets what is left of the 5 KiB, and the extra variable
/// `TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED` says (`true`/`false`) whether it
/// was cut shorter than the `predict-response` output. GitLab strips
/// leading and trailing whitespace from values.
pub fn render_dotenv(outputs: &Outputs) -> anyhow::Result<String> {
    const PREDICT: &str = "predict-response";
    const PREDICT_TRUNCATED: &str = "predict-response-truncated";
    let entries = outputs.entries();
    let line_for = |name: &str, value: &str| format!("{}={value}\n", dotenv_name(name));

    // Everything but the predict response has a fixed size; the flag is
    // counted at its longer value.
    let fixed_len: usize = entries
        .iter()
        .filter(|(name, _)| *name != PREDICT)
        .map(|(name, value)| line_for(name, &dotenv_value(name, value)).len())
        .sum::<usize>()
        + line_for(PREDICT, "").len()
        + line_for(PREDICT_TRUNCATED, "false").len();
    let Some(budget) = DOTENV_MAX_BYTES.checked_sub(fixed_len) else {
        bail!(
            "the dotenv outputs need {fixed_len} bytes without the predict response, over GitLab's limit of {DOTENV_MAX_BYTES}"
        );
    };

    let mut text = String::new();
    for (name, value) in &entries {
        if *name == PREDICT {
            let (predict, truncated) = single_line_predict_response(value, budget);
            text.push_str(&line_for(name, &predict));
            let flag = if truncated { "true" } else { "false" };
            text.push_str(&line_for(PREDICT_TRUNCATED, flag));
        } else {
            text.push_str(&line_for(name, &dotenv_value(name, value)));
        }
    }
    Ok(text)
}

/// A non-predict output's dotenv value: escaped to one line, the error
/// message within its budget.
fn dotenv_value(name: &str, value: &str) -> String {
    let max = if name == "error-message" {
        DOTENV_ERROR_MESSAGE_MAX_BYTES
    } else {
        usize::MAX
    };
    escape_single_line(value, max).0
}

/// Renders the outputs as a JSON object with the hyphenated names in writing
/// order; every value is a string, exactly as in `$GITHUB_OUTPUT`.
pub fn render_json(outputs: &Outputs) -> String {
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
pub fn write_outputs_file(
    path: &Path,
    format: OutputsFormat,
    outputs: &Outputs,
) -> anyhow::Result<()> {
    let text = match format {
        OutputsFormat::Dotenv => render_dotenv(outputs)?,
        OutputsFormat::Json => render_json(outputs),
    };
    std::fs::write(path, text)
        .with_context(|| format!("while writing the outputs file {}", path.display()))
}

// ---------------------------------------------------------------------------
// Step summary
// ---------------------------------------------------------------------------

/// What was deployed; picks the heading word and the id row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeployKind {
    Model,
    Chain,
}

/// Timing of the predict check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PredictStats {
    pub total_secs: f64,
    /// Present for streaming (SSE) predictions only.
    pub stream: Option<StreamStats>,
}

/// Streaming predict figures, as the Python action measures them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamStats {
    pub ttfb_secs: f64,
    pub tokens: u64,
    pub tokens_per_sec: f64,
}

/// One row of the status history table.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusEvent {
    pub at: SystemTime,
    /// Time since the deploy started.
    pub elapsed: Duration,
    /// Platform status seen; empty for events without one (e.g. "created").
    pub status: String,
    /// Classification or event, e.g. `in progress`, `ready`, `HTTP 503, retrying`.
    pub event: String,
}

/// Everything the step summary shows.
#[derive(Debug, Clone)]
pub struct SummaryInput<'a> {
    pub kind: DeployKind,
    pub outputs: &'a Outputs,
    pub predict: Option<PredictStats>,
    /// Model or chain page in the Baseten app; empty to omit the link.
    pub page_url: &'a str,
    /// Free-form notes, e.g. `cleanup skipped: environment deployments are kept`.
    pub notes: &'a [String],
    pub history: &'a [StatusEvent],
}

/// Longest error message or note kept in the summary, so the table and
/// links always fit under the size cap.
const SUMMARY_TEXT_MAX_CHARS: usize = 64 * 1024;
const SUMMARY_TRUNCATED_MARKER: &str = "\n\n_Summary truncated to fit GitHub's 1 MiB limit._\n";

/// Renders the summary Markdown, at most `max_bytes` long: history rows are
/// dropped from the middle first (keeping the first row and the latest
/// ones), and only then is the text cut.
pub fn render_summary(input: &SummaryInput<'_>, max_bytes: usize) -> String {
    let rows = input.history.len();
    let mut text = render_summary_with(input, rows);
    let mut keep = rows;
    while text.len() > max_bytes && keep > 0 {
        keep /= 2;
        text = render_summary_with(input, keep);
    }
    if text.len() > max_bytes {
        let cut = truncate_bytes(
            &text,
            max_bytes.saturating_sub(SUMMARY_TRUNCATED_MARKER.len()),
        );
        let mut cut = cut.to_owned();
        if cut.len() + SUMMARY_TRUNCATED_MARKER.len() <= max_bytes {
            cut.push_str(SUMMARY_TRUNCATED_MARKER);
        }
        text = cut;
    }
    text
}

/// Renders with at most `keep` history rows: the first and the latest `keep - 1`.
fn render_summary_with(input: &SummaryInput<'_>, keep: usize) -> String {
    let out = input.outputs;
    let ok = out.status == STATUS_SUCCESS;
    let (kind_word, id_label, id) = match input.kind {
        DeployKind::Model => ("Model", "Model ID", &out.model_id),
        DeployKind::Chain => ("Chain", "Chain ID", &out.chain_id),
    };
    let name = if out.model_name.is_empty() {
        "unknown"
    } else {
        &out.model_name
    };
    let mut lines: Vec<String> = vec![
        format!(
            "## {} Truss Deploy ({kind_word}): {}",
            if ok { "✅" } else { "❌" },
            escape_inline(name)
        ),
        String::new(),
        "| Metric | Value |".into(),
        "|--------|-------|".into(),
        metric_row("Status", &code_cell(out.status)),
        metric_row(id_label, &code_or_na(id)),
        metric_row("Deployment ID", &code_or_na(&out.deployment_id)),
        metric_row(
            "Deploy Time",
            &match out.deploy_time_seconds {
                Some(s) if s.is_finite() => format!("{s:.1}s"),
                _ => "N/A".into(),
            },
        ),
    ];
    if let Some(predict) = input.predict {
        lines.push(metric_row(
            "Predict Total Time",
            &format!("{:.2}s", predict.total_secs),
        ));
        if let Some(stream) = predict.stream {
            lines.push(metric_row("TTFB", &format!("{:.2}s", stream.ttfb_secs)));
            lines.push(metric_row("Tokens", &stream.tokens.to_string()));
            lines.push(metric_row(
                "Tokens/sec",
                &format!("{:.1}", stream.tokens_per_sec),
            ));
        }
    }
    if !out.last_status.is_empty() {
        lines.push(metric_row(
            "Last Platform Status",
            &code_cell(&out.last_status),
        ));
    }

    let mut links = Vec::new();
    if !out.logs_url.is_empty() {
        links.push(format!("[View logs]({})", link_target(&out.logs_url)));
    }
    if !input.page_url.is_empty() {
        links.push(format!(
            "[{kind_word} page]({})",
            link_target(input.page_url)
        ));
    }
    if !links.is_empty() {
        lines.push(String::new());
        lines.push(links.join(" · "));
    }

    if !ok && !out.error_message.is_empty() {
        let message = truncate_chars(&out.error_message, SUMMARY_TEXT_MAX_CHARS);
        let fence = code_fence(message);
        lines.push(String::new());
        lines.push("**Error:**".into());
        lines.push(String::new());
        lines.push(format!("{fence}text"));
        lines.push(message.trim_end_matches(['\n', '\r']).to_owned());
        lines.push(fence);
    }

    if !input.notes.is_empty() {
        lines.push(String::new());
        lines.push("**Notes:**".into());
        lines.push(String::new());
        for note in input.notes {
            lines.push(format!(
                "- {}",
                escape_inline(truncate_chars(note, SUMMARY_TEXT_MAX_CHARS))
            ));
        }
    }

    if !input.history.is_empty() {
        lines.push(String::new());
        lines.push("### Status history".into());
        lines.push(String::new());
        lines.push("| Time (UTC) | Elapsed | Status | Event |".into());
        lines.push("|------------|---------|--------|-------|".into());
        let rows = input.history;
        let (head, tail) = match keep {
            k if k >= rows.len() => (rows.len(), 0),
            0 => (0, 0),
            k => (1, k - 1),
        };
        for event in &rows[..head] {
            lines.push(history_row(event));
        }
        let omitted = rows.len() - head - tail;
        if omitted > 0 {
            lines.push(format!("| … | | | {omitted} rows omitted |"));
        }
        for event in &rows[rows.len() - tail..] {
            lines.push(history_row(event));
        }
    }

    let mut text = lines.join("\n");
    text.push('\n');
    text
}

fn metric_row(label: &str, value: &str) -> String {
    format!("| **{label}** | {value} |")
}

fn history_row(event: &StatusEvent) -> String {
    let status = if event.status.is_empty() {
        String::new()
    } else {
        code_cell(&event.status)
    };
    format!(
        "| {} | {} | {status} | {} |",
        format_utc(event.at),
        format_elapsed(event.elapsed),
        escape_cell(&event.event)
    )
}

fn code_or_na(id: &str) -> String {
    if id.is_empty() {
        "N/A".into()
    } else {
        code_cell(id)
    }
}

/// A value as an inline code span inside a table cell. Code spans show text
/// literally, so only the table's own syntax (`|`, line breaks) is escaped;
/// a value with a backtick cannot be a simple code span and is shown as text.
pub fn code_cell(value: &str) -> String {
    if value.contains('`') || value.is_empty() {
        return escape_cell(value);
    }
    let one_line = value.replace(['\r', '\n'], " ");
    format!("`{}`", one_line.replace('|', "\\|"))
}

/// Text for a Markdown table cell: `|` escaped, line breaks as `<br>`, and
/// HTML-significant characters as entities so a value cannot inject markup.
pub fn escape_cell(value: &str) -> String {
    let normalized = value.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(normalized.len());
    for c in normalized.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '\n' => out.push_str("<br>"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Text for a heading or list item: one line, no markup injection.
fn escape_inline(value: &str) -> String {
    escape_cell(value).replace("<br>", " ")
}

/// Percent-encodes the characters that would end or break a Markdown link target.
fn link_target(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    for c in url.chars() {
        match c {
            ' ' => out.push_str("%20"),
            '(' => out.push_str("%28"),
            ')' => out.push_str("%29"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            '\n' | '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// A backtick fence longer than any backtick run in `text` (at least three).
fn code_fence(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// `2023-11-14 22:13:20` (UTC, whole seconds); times before 1970 show the epoch.
pub fn format_utc(at: SystemTime) -> String {
    let secs = at
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01, by counting
/// 400-year eras (146097 days) and a March-based year so the leap day is last.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let shifted = days + 719_468; // days from 0000-03-01 to 1970-01-01
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// `12.9s` under a minute, `10m18s` under an hour, `1h02m03s` beyond.
pub fn format_elapsed(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    if secs < 60 {
        // Tenths, truncated, so 59.99 s never renders as "60.0s".
        let tenths = elapsed.as_millis() / 100;
        format!("{}.{}s", tenths / 10, tenths % 10)
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m{:02}s", secs / 3600, secs % 3600 / 60, secs % 60)
    }
}

/// Appends the summary to the `$GITHUB_STEP_SUMMARY` file at `path`, keeping
/// the whole file within GitHub's 1 MiB (content already there counts).
pub fn append_step_summary(path: &Path, input: &SummaryInput<'_>) -> anyhow::Result<()> {
    let existing = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let existing = usize::try_from(existing).unwrap_or(usize::MAX);
    // Separate from earlier content that does not end its last line.
    let needs_newline = existing > 0 && !file_ends_with_newline(path);
    let separator = if needs_newline { "\n" } else { "" };
    let budget = STEP_SUMMARY_MAX_BYTES
        .saturating_sub(existing)
        .saturating_sub(separator.len());
    if budget == 0 {
        return Ok(());
    }
    let text = format!("{separator}{}", render_summary(input, budget));
    append_file(path, text.as_bytes())
        .with_context(|| format!("while writing the step summary to {}", path.display()))
}

fn file_ends_with_newline(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let mut last = [0u8; 1];
    file.seek(SeekFrom::End(-1)).is_ok() && file.read_exact(&mut last).is_ok() && last[0] == b'\n'
}

// ---------------------------------------------------------------------------
// Workflow commands (GitHub Actions)
// ---------------------------------------------------------------------------

/// Escapes a workflow command's data (message): `%`, CR, LF.
pub fn escape_data(value: &str) -> String {
    value
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command's property value: as data, plus `:` and `,`.
pub fn escape_property(value: &str) -> String {
    escape_data(value).replace(':', "%3A").replace(',', "%2C")
}

/// `::name k=v,k=v::data`; properties with empty values are left out, as the
/// toolkit does.
pub fn workflow_command(name: &str, properties: &[(&str, &str)], data: &str) -> String {
    let props: Vec<String> = properties
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", escape_property(v)))
        .collect();
    if props.is_empty() {
        format!("::{name}::{}", escape_data(data))
    } else {
        format!("::{name} {}::{}", props.join(","), escape_data(data))
    }
}

/// Severity of an annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Error,
    Warning,
    Notice,
}

impl Level {
    fn word(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Notice => "notice",
        }
    }
}

/// An annotation as a workflow command, e.g. `::error title=Deploy::boom`.
pub fn annotation_command(level: Level, title: Option<&str>, message: &str) -> String {
    workflow_command(level.word(), &[("title", title.unwrap_or(""))], message)
}

/// The same annotation as a plain line for other CI systems: `error: boom`.
pub fn annotation_line(level: Level, title: Option<&str>, message: &str) -> String {
    match title {
        Some(t) if !t.is_empty() => format!("{}: {t}: {message}", level.word()),
        _ => format!("{}: {message}", level.word()),
    }
}

/// A group start: `::group::title` on GitHub, a plain heading elsewhere.
pub fn group_start(kind: CiKind, title: &str) -> String {
    match kind {
        CiKind::GitHub => workflow_command("group", &[], title),
        _ => format!("==> {title}"),
    }
}

/// Whether GitHub's runner would read `line` as a workflow command: it
/// starts with `::` after leading whitespace, or holds the legacy `##[`
/// form, which the runner matches anywhere in a line.
pub fn looks_like_command(line: &str) -> bool {
    line.trim_start().starts_with("::") || line.contains("##[")
}

// ---------------------------------------------------------------------------
// Reporter
// ---------------------------------------------------------------------------

/// Output sink; tests pass a [`testing::Capture`].
pub type Sink = Box<dyn Write + Send>;

struct Upload {
    label: String,
    total: u64,
    /// Last 10 % step printed in CI mode (0..=10).
    last_step: Option<u8>,
    /// Last whole percent drawn in terminal mode.
    last_percent: Option<u8>,
}

/// Owns stdout/stderr for the run: plain lines, groups, annotations,
/// masking and upload progress, each in the form the CI system understands.
///
/// On GitHub everything goes to stdout, because groups and the text inside
/// them must share a stream to be shown together; elsewhere errors and
/// warnings go to stderr. Registered secrets are replaced by `***` in
/// everything this reporter prints. Write errors are ignored: losing a log
/// line must not fail a deploy.
pub struct Reporter {
    kind: CiKind,
    terminal: bool,
    out: Sink,
    err: Sink,
    secrets: Vec<String>,
    group_open: bool,
    upload: Option<Upload>,
    /// A terminal progress bar is on the current line and needs a newline
    /// before anything else is printed.
    bar_on_line: bool,
    rng: fastrand::Rng,
}

impl Reporter {
    /// A reporter writing to `out`/`err`. `stdout_is_terminal` enables the
    /// redrawn progress bar (only outside CI, where logs are not terminals
    /// even when a TTY is allocated).
    pub fn new(kind: CiKind, stdout_is_terminal: bool, out: Sink, err: Sink) -> Self {
        Self {
            kind,
            terminal: stdout_is_terminal,
            out,
            err,
            secrets: Vec::new(),
            group_open: false,
            upload: None,
            bar_on_line: false,
            rng: fastrand::Rng::new(),
        }
    }

    /// A reporter on the process's stdout and stderr.
    pub fn stdio(kind: CiKind) -> Self {
        let terminal = std::io::stdout().is_terminal();
        Self::new(
            kind,
            terminal,
            Box::new(std::io::stdout()),
            Box::new(std::io::stderr()),
        )
    }

    pub fn kind(&self) -> CiKind {
        self.kind
    }

    fn progress_redraws(&self) -> bool {
        self.terminal && self.kind == CiKind::Local
    }

    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = Cow::Owned(text.replace(secret.as_str(), "***"));
            }
        }
        text
    }

    fn end_bar(&mut self) {
        if self.bar_on_line {
            self.bar_on_line = false;
            let _ = self.out.write_all(b"\n");
        }
    }

    fn write_out(&mut self, text: &str) {
        self.end_bar();
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
    }

    fn write_err(&mut self, text: &str) {
        self.end_bar();
        let _ = self.out.flush();
        let _ = self.err.write_all(text.as_bytes());
        let _ = self.err.flush();
    }

    /// A plain log line (may hold several lines). On GitHub, a line the
    /// runner would take for a workflow command (e.g. streamed model logs
    /// printing `::set-output`) is fenced with `stop-commands` so it is shown,
    /// not executed.
    pub fn line(&mut self, msg: &str) {
        let msg = self.redact(msg).into_owned();
        // One trailing newline is the caller's line end, not an extra blank line.
        let msg = msg.strip_suffix('\n').unwrap_or(&msg);
        let mut text = String::new();
        for line in msg.split('\n') {
            if self.kind == CiKind::GitHub && looks_like_command(line) {
                let token = format!("{:032x}", self.rng.u128(..));
                let _ = write!(text, "::stop-commands::{token}\n{line}\n::{token}::\n");
            } else {
                text.push_str(line);
                text.push('\n');
            }
        }
        self.write_out(&text);
    }

    /// Starts a collapsible group (a heading outside GitHub). GitHub does not
    /// nest groups, so an open one is closed first.
    pub fn group(&mut self, title: &str) {
        self.end_group();
        let title = self.redact(title).into_owned();
        let line = group_start(self.kind, &title);
        self.write_out(&format!("{line}\n"));
        self.group_open = true;
    }

    /// Ends the open group, if any.
    pub fn end_group(&mut self) {
        if self.group_open {
            self.group_open = false;
            if self.kind == CiKind::GitHub {
                self.write_out("::endgroup::\n");
            }
        }
    }

    /// An annotation with an optional title.
    pub fn annotate(&mut self, level: Level, title: Option<&str>, msg: &str) {
        let msg = self.redact(msg).into_owned();
        let title = title.map(|t| self.redact(t).into_owned());
        if self.kind == CiKind::GitHub {
            let line = annotation_command(level, title.as_deref(), &msg);
            self.write_out(&format!("{line}\n"));
        } else {
            let line = annotation_line(level, title.as_deref(), &msg);
            match level {
                Level::Notice => self.write_out(&format!("{line}\n")),
                Level::Error | Level::Warning => self.write_err(&format!("{line}\n")),
            }
        }
    }

    pub fn error(&mut self, msg: &str) {
        self.annotate(Level::Error, None, msg);
    }

    pub fn warning(&mut self, msg: &str) {
        self.annotate(Level::Warning, None, msg);
    }

    pub fn notice(&mut self, msg: &str) {
        self.annotate(Level::Notice, None, msg);
    }

    /// Hides `secret` from now on: `::add-mask::` on GitHub (so the runner
    /// also masks it in other steps' output), and `***` in everything this
    /// reporter prints on every CI. Blank values are ignored, as the runner
    /// ignores them (with a warning).
    pub fn mask(&mut self, secret: &str) {
        if secret.trim().is_empty() || self.secrets.iter().any(|s| s == secret) {
            return;
        }
        if self.kind == CiKind::GitHub {
            let line = workflow_command("add-mask", &[], secret);
            self.write_out(&format!("{line}\n"));
        }
        self.secrets.push(secret.to_owned());
    }

    /// Starts reporting an upload of `total_bytes`.
    pub fn upload_started(&mut self, label: &str, total_bytes: u64) {
        self.end_bar();
        self.upload = Some(Upload {
            label: self.redact(label).into_owned(),
            total: total_bytes,
            last_step: None,
            last_percent: None,
        });
        self.upload_progress(0);
    }

    /// Reports `done_bytes` uploaded so far. In CI a line is printed each
    /// time a new 10 % step is reached (at most 11 per upload); on a
    /// terminal the bar is redrawn when the whole percent changes.
    pub fn upload_progress(&mut self, done_bytes: u64) {
        let redraw = self.progress_redraws();
        let Some(upload) = self.upload.as_mut() else {
            return;
        };
        let percent = percent_done(done_bytes, upload.total);
        if redraw {
            if upload.last_percent == Some(percent) {
                return;
            }
            upload.last_percent = Some(percent);
            let bar = progress_bar(&upload.label, done_bytes, upload.total);
            let _ = write!(self.out, "\r{bar}");
            let _ = self.out.flush();
            self.bar_on_line = true;
        } else {
            let step = percent / 10;
            if upload.last_step.is_some_and(|last| step <= last) {
                return;
            }
            upload.last_step = Some(step);
            let line = progress_line(&upload.label, step * 10, done_bytes, upload.total);
            self.write_out(&format!("{line}\n"));
        }
    }

    /// Ends the upload report (a failed upload simply stops short of 100 %).
    pub fn upload_finished(&mut self) {
        self.upload = None;
        self.end_bar();
    }

    /// Closes an open group and flushes both streams.
    pub fn finish(&mut self) {
        self.end_group();
        self.end_bar();
        let _ = self.out.flush();
        let _ = self.err.flush();
    }
}

/// Whole percent of `done` out of `total`, clamped to 0..=100; an empty
/// upload is complete.
pub fn percent_done(done: u64, total: u64) -> u8 {
    if total == 0 {
        return 100;
    }
    let percent = u128::from(done.min(total)) * 100 / u128::from(total);
    u8::try_from(percent).unwrap_or(100)
}

/// `Uploading model: 40% (12.0 MiB of 30.0 MiB)`.
pub fn progress_line(label: &str, percent: u8, done: u64, total: u64) -> String {
    format!(
        "{label}: {percent}% ({} of {})",
        format_bytes(done.min(total)),
        format_bytes(total)
    )
}

/// `Uploading model [########------------]  40% 12.0 MiB/30.0 MiB`.
pub fn progress_bar(label: &str, done: u64, total: u64) -> String {
    const WIDTH: usize = 20;
    let percent = percent_done(done, total);
    let filled = usize::from(percent) * WIDTH / 100;
    format!(
        "{label} [{}{}] {percent:>3}% {}/{}",
        "#".repeat(filled),
        "-".repeat(WIDTH - filled),
        format_bytes(done.min(total)),
        format_bytes(total)
    )
}

/// Binary units with one decimal: `512 B`, `1.5 KiB`, `12.0 MiB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

// ---------------------------------------------------------------------------
// Test support: the consumers' parsers
// ---------------------------------------------------------------------------

/// Parsers that read files the way their consumers do (GitHub's runner,
/// GitLab's dotenv upload), and a capturing writer; for this crate's tests
/// and black-box tests of the binary.
#[doc(hidden)]
pub mod testing {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// Why GitHub's runner would reject an environment file; messages are
    /// the runner's own.
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    pub enum RunnerFileError {
        #[error("Invalid format '{0}'. Name must not be empty and delimiter must not be empty")]
        EmptyNameOrDelimiter(String),
        #[error("Invalid value. Matching delimiter not found '{0}'")]
        DelimiterNotFound(String),
        #[error("Invalid value. EOF marker missing new line.")]
        EofMissingNewline,
        #[error("Invalid format '{0}'")]
        InvalidFormat(String),
    }

    /// Reads the next line starting at `*index` (LF line ends, as the Linux
    /// and macOS runners do; a CR stays in the line). Returns the line and
    /// whether it ended with a newline.
    fn read_line<'a>(text: &'a str, index: &mut usize) -> Option<(&'a str, bool)> {
        if *index >= text.len() {
            return None;
        }
        let start = *index;
        match text[start..].find('\n') {
            Some(offset) => {
                *index = start + offset + 1;
                Some((&text[start..start + offset], true))
            }
            None => {
                *index = text.len();
                Some((&text[start..], false))
            }
        }
    }

    /// Parses `$GITHUB_OUTPUT` (also `$GITHUB_ENV`/`$GITHUB_STATE`) exactly
    /// as the runner does on Linux: empty lines skipped; `name=value` when
    /// the first `=` comes before any `<<`; heredoc `name<<DELIM` when `<<`
    /// comes first, the value running to the first line exactly equal to
    /// DELIM, without the newline before it. Entries are returned in file
    /// order; for duplicates the runner keeps the last.
    pub fn parse_github_output(text: &str) -> Result<Vec<(String, String)>, RunnerFileError> {
        let mut entries = Vec::new();
        let mut index = 0;
        while let Some((line, _)) = read_line(text, &mut index) {
            if line.is_empty() {
                continue;
            }
            let equals = line.find('=');
            let heredoc = line.find("<<");
            match (equals, heredoc) {
                // The runner does not reject an empty name here (it checks the
                // wrong variable), so neither does this mirror.
                (Some(eq), h) if h.is_none_or(|h| eq < h) => {
                    entries.push((line[..eq].to_owned(), line[eq + 1..].to_owned()));
                }
                (_, Some(h)) => {
                    let (name, delimiter) = (&line[..h], &line[h + 2..]);
                    if name.is_empty() || delimiter.is_empty() {
                        return Err(RunnerFileError::EmptyNameOrDelimiter(line.to_owned()));
                    }
                    let start = index;
                    let mut end = index;
                    loop {
                        match read_line(text, &mut index) {
                            None => {
                                return Err(RunnerFileError::DelimiterNotFound(
                                    delimiter.to_owned(),
                                ));
                            }
                            Some((l, _)) if l == delimiter => break,
                            Some((_, false)) => return Err(RunnerFileError::EofMissingNewline),
                            Some((_, true)) => end = index - 1,
                        }
                    }
                    let value = if end > start { &text[start..end] } else { "" };
                    entries.push((name.to_owned(), value.to_owned()));
                }
                _ => return Err(RunnerFileError::InvalidFormat(line.to_owned())),
            }
        }
        Ok(entries)
    }

    /// Why GitLab would reject a dotenv report; messages are GitLab's own.
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    pub enum DotenvError {
        #[error("Dotenv Artifact Too Big. Maximum Allowable Size: 5120")]
        TooBig,
        #[error("dotenv file is not UTF-8")]
        NotUtf8,
        #[error("Invalid Format")]
        InvalidFormat,
        #[error("Dotenv files cannot have more than 20 variables")]
        TooManyVariables,
        #[error("Validation failed: Key can't be blank")]
        BlankKey,
        #[error("Validation failed: Key can contain only letters, digits and '_'.")]
        InvalidKey,
    }

    /// Ruby's `String#strip`: ASCII whitespace and NUL at both ends.
    fn ruby_strip(s: &str) -> &str {
        s.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | '\0'))
    }

    /// Parses a dotenv report as GitLab's upload does: size below 5 KiB;
    /// every line (blank ones included) must contain `=`; name and value are
    /// the text around the first `=`, stripped; quotes and `#` are literal;
    /// at most 20 variables; names non-empty `[A-Za-z0-9_]+`.
    pub fn parse_gitlab_dotenv(bytes: &[u8]) -> Result<Vec<(String, String)>, DotenvError> {
        if bytes.len() >= 5 * 1024 {
            return Err(DotenvError::TooBig);
        }
        let text = std::str::from_utf8(bytes).map_err(|_| DotenvError::NotUtf8)?;
        let mut variables = Vec::new();
        for line in text.split_inclusive('\n') {
            let content = line.strip_suffix('\n').unwrap_or(line);
            let (key, value) = content.split_once('=').ok_or(DotenvError::InvalidFormat)?;
            variables.push((ruby_strip(key).to_owned(), ruby_strip(value).to_owned()));
        }
        if variables.len() > 20 {
            return Err(DotenvError::TooManyVariables);
        }
        for (key, _) in &variables {
            if key.is_empty() {
                return Err(DotenvError::BlankKey);
            }
            if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(DotenvError::InvalidKey);
            }
        }
        Ok(variables)
    }

    /// Reverses the dotenv single-line escaping (`\\`, `\n`, `\r`).
    pub fn unescape_dotenv_value(value: &str) -> String {
        let mut out = String::with_capacity(value.len());
        let mut chars = value.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        }
        out
    }

    /// A clonable in-memory writer, to hand to a [`super::Reporter`] and read back.
    #[derive(Clone, Default)]
    pub struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Capture {
        /// Everything written so far, as (lossy) UTF-8.
        pub fn text(&self) -> String {
            let bytes = self.0.lock().unwrap_or_else(|e| e.into_inner());
            String::from_utf8_lossy(&bytes).into_owned()
        }
    }

    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut bytes = self.0.lock().unwrap_or_else(|e| e.into_inner());
            bytes.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    type Pairs = Vec<(String, String)>;

    fn seeded() -> impl FnMut() -> String {
        let mut rng = fastrand::Rng::with_seed(7);
        move || random_delimiter(&mut rng)
    }

    fn full_outputs() -> Outputs {
        Outputs {
            deployment_id: "dep456".into(),
            model_id: "abc123".into(),
            chain_id: String::new(),
            model_name: "my-model".into(),
            deploy_time_seconds: Some(42.46),
            predict_response: "{\"output\": \"hi\"}".into(),
            status: STATUS_SUCCESS,
            error_message: String::new(),
            last_status: "ACTIVE".into(),
            logs_url: "https://app.baseten.co/models/abc123/logs/dep456".into(),
        }
    }

    // --- CI detection -----------------------------------------------------

    #[test]
    fn ci_kind_follows_the_markers() {
        let cases: &[(&[(&str, &str)], CiKind)] = &[
            (&[], CiKind::Local),
            (&[(GITHUB_ACTIONS, "true")], CiKind::GitHub),
            (&[(GITHUB_ACTIONS, "false")], CiKind::Local),
            (&[(GITHUB_ACTIONS, "")], CiKind::Local),
            (&[(GITLAB_CI, "true")], CiKind::GitLab),
            (&[(BUILDKITE, "true")], CiKind::Buildkite),
            (&[(CIRCLECI, "true")], CiKind::CircleCi),
            (&[(TF_BUILD, "True")], CiKind::Azure),
            (&[(BUILD_BUILDURI, "vstfs:///Build/Build/1")], CiKind::Azure),
            (&[(BITBUCKET_BUILD_NUMBER, "12")], CiKind::Bitbucket),
            (&[(JENKINS_URL, "https://ci.example/")], CiKind::Jenkins),
            // A GitHub job that happens to carry another system's marker is GitHub.
            (
                &[(GITHUB_ACTIONS, "true"), (GITLAB_CI, "true")],
                CiKind::GitHub,
            ),
            (&[(JENKINS_URL, "x"), (GITLAB_CI, "true")], CiKind::GitLab),
        ];
        for (vars, want) in cases {
            let env = CiEnv::from_lookup(|name| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            });
            assert_eq!(env.kind(), *want, "{vars:?}");
        }
    }

    #[test]
    fn ci_env_treats_empty_paths_as_unset() {
        let env = CiEnv::from_lookup(|name| match name {
            GITHUB_OUTPUT => Some("/tmp/out".into()),
            GITHUB_STEP_SUMMARY => Some(String::new()),
            _ => None,
        });
        assert_eq!(env.github_output, Some(PathBuf::from("/tmp/out")));
        assert_eq!(env.github_step_summary, None);
    }

    // --- Outputs ----------------------------------------------------------

    #[test]
    fn entries_put_the_anchor_outputs_first_in_its_order() {
        let names: Vec<&str> = full_outputs().entries().iter().map(|(n, _)| *n).collect();
        assert_eq!(names[..7], ANCHOR_OUTPUT_NAMES);
        assert_eq!(names[7..], EXTRA_OUTPUT_NAMES);
    }

    #[test]
    fn deploy_time_has_one_decimal_or_is_empty() {
        let cases = [
            (Some(42.46), "42.5"),
            (Some(0.0), "0.0"),
            (Some(12.25), "12.2"),
            (Some(600.0), "600.0"),
            (None, ""),
            (Some(f64::NAN), ""),
        ];
        for (input, want) in cases {
            assert_eq!(format_deploy_time(input), want, "{input:?}");
        }
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
    fn runner_parser_mirrors_the_runner_including_errors() {
        let ok = |pairs: &[(&str, &str)]| -> Result<Pairs, RunnerFileError> {
            Ok(pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect())
        };
        let cases: Vec<(&str, Result<Pairs, RunnerFileError>)> = vec![
            ("a=1\nb=2\n", ok(&[("a", "1"), ("b", "2")])),
            ("\n\na=1\n\n", ok(&[("a", "1")])),
            ("a=b=c<<d\n", ok(&[("a", "b=c<<d")])),
            ("a=\n", ok(&[("a", "")])),
            ("=x\n", ok(&[("", "x")])),
            ("a<<b=c\nv\nb=c\n", ok(&[("a", "v")])),
            ("a<<EOF\nEOF\n", ok(&[("a", "")])),
            ("a<<EOF\n\nEOF\n", ok(&[("a", "")])),
            ("a<<EOF\nx\n\nEOF\n", ok(&[("a", "x\n")])),
            ("a<<EOF\n EOF\nEOF\n", ok(&[("a", " EOF")])),
            ("a<<EOF\nx\nEOF", ok(&[("a", "x")])),
            ("a<<EOF\r\nx\r\nEOF\r\n", ok(&[("a", "x\r")])),
            ("a<<E\n1\nE\nb<<F\n2\nF\n", ok(&[("a", "1"), ("b", "2")])),
            ("a=1\na=2\n", ok(&[("a", "1"), ("a", "2")])),
            (
                "a<<\n",
                Err(RunnerFileError::EmptyNameOrDelimiter("a<<".into())),
            ),
            (
                "<<EOF\nx\nEOF\n",
                Err(RunnerFileError::EmptyNameOrDelimiter("<<EOF".into())),
            ),
            (
                "a<<EOF\nx\n",
                Err(RunnerFileError::DelimiterNotFound("EOF".into())),
            ),
            (
                "a<<EOF",
                Err(RunnerFileError::DelimiterNotFound("EOF".into())),
            ),
            ("a<<EOF\nx", Err(RunnerFileError::EofMissingNewline)),
            (
                "just text\n",
                Err(RunnerFileError::InvalidFormat("just text".into())),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse_github_output(text), want, "{text:?}");
        }
        assert_eq!(
            RunnerFileError::DelimiterNotFound("EOF".into()).to_string(),
            "Invalid value. Matching delimiter not found 'EOF'"
        );
    }

    #[test]
    fn the_fixed_eof_delimiter_of_the_python_action_is_forgeable_and_ours_is_not() {
        // What the Python action writes for a predict response holding an `EOF` line.
        let response = "ok\nEOF\nstatus=success";
        let python =
            format!("predict-response<<EOF\n{response}\nEOF\nstatus<<EOF\npredict_failed\nEOF\n");
        assert!(parse_github_output(&python).is_err());

        let mut outputs = Outputs::new(STATUS_PREDICT_FAILED);
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

        let text = render_dotenv(&outputs).unwrap();
        let vars = assert_gitlab_accepts(&text);
        assert_eq!(vars.len(), 11);
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
        let vars = assert_gitlab_accepts(&render_dotenv(&outputs).unwrap());
        let error = var(&vars, "TRUSS_PUSH_ERROR_MESSAGE");
        assert!(error.len() <= DOTENV_ERROR_MESSAGE_MAX_BYTES);
        assert!(
            outputs
                .error_message
                .starts_with(&unescape_dotenv_value(error))
        );
    }

    #[test]
    fn dotenv_writes_a_json_predict_response_as_compact_json() {
        let mut outputs = full_outputs();
        outputs.predict_response = "{\n  \"text\": \"a\\nb\",\n  \"n\": [1, 2]\n}\n".into();
        let vars = assert_gitlab_accepts(&render_dotenv(&outputs).unwrap());
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
        let vars = assert_gitlab_accepts(&render_dotenv(&outputs).unwrap());
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
        let text = render_dotenv(&Outputs::new(STATUS_DEPLOY_FAILED)).unwrap();
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
    fn gitlab_parser_rejects_what_gitlab_rejects() {
        let cases: &[(&str, Result<Pairs, DotenvError>)] = &[
            ("KEY1=VAR1\n", Ok(vec![("KEY1".into(), "VAR1".into())])),
            ("KEY1 = V A R \n", Ok(vec![("KEY1".into(), "V A R".into())])),
            ("K=a=b\n", Ok(vec![("K".into(), "a=b".into())])),
            ("K=\"q\"\n", Ok(vec![("K".into(), "\"q\"".into())])),
            ("K=x # c\n", Ok(vec![("K".into(), "x # c".into())])),
            ("K=\n", Ok(vec![("K".into(), String::new())])),
            ("A=1\n\nB=2\n", Err(DotenvError::InvalidFormat)),
            ("# comment\n", Err(DotenvError::InvalidFormat)),
            ("A=1\ncontinued line\n", Err(DotenvError::InvalidFormat)),
            ("=V\n", Err(DotenvError::BlankKey)),
            ("K-1=V\n", Err(DotenvError::InvalidKey)),
            ("K E Y=V\n", Err(DotenvError::InvalidKey)),
        ];
        for (text, want) in cases {
            assert_eq!(&parse_gitlab_dotenv(text.as_bytes()), want, "{text:?}");
        }
        let many: String = (0..21).map(|i| format!("K{i}=v\n")).collect();
        assert_eq!(
            parse_gitlab_dotenv(many.as_bytes()),
            Err(DotenvError::TooManyVariables)
        );
        let big = format!("K={}\n", "x".repeat(5 * 1024));
        assert_eq!(
            parse_gitlab_dotenv(big.as_bytes()),
            Err(DotenvError::TooBig)
        );
        assert_eq!(parse_gitlab_dotenv(b"K=\xff\n"), Err(DotenvError::NotUtf8));
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
        assert_eq!(object.len(), 10);
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

    // --- Step summary -----------------------------------------------------

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn summary_for_a_successful_model_deploy() {
        let outputs = full_outputs();
        let history = [
            StatusEvent {
                at: at(1_700_000_000),
                elapsed: Duration::ZERO,
                status: String::new(),
                event: "deployment created".into(),
            },
            StatusEvent {
                at: at(1_700_000_042),
                elapsed: Duration::from_millis(42_460),
                status: "ACTIVE".into(),
                event: "ready".into(),
            },
        ];
        let notes = ["cleanup: deployment deactivated".to_string()];
        let input = SummaryInput {
            kind: DeployKind::Model,
            outputs: &outputs,
            predict: Some(PredictStats {
                total_secs: 0.534,
                stream: None,
            }),
            page_url: "https://app.baseten.co/models/abc123/overview",
            notes: &notes,
            history: &history,
        };
        let want = "\
## ✅ Truss Deploy (Model): my-model

| Metric | Value |
|--------|-------|
| **Status** | `success` |
| **Model ID** | `abc123` |
| **Deployment ID** | `dep456` |
| **Deploy Time** | 42.5s |
| **Predict Total Time** | 0.53s |
| **Last Platform Status** | `ACTIVE` |

[View logs](https://app.baseten.co/models/abc123/logs/dep456) · [Model page](https://app.baseten.co/models/abc123/overview)

**Notes:**

- cleanup: deployment deactivated

### Status history

| Time (UTC) | Elapsed | Status | Event |
|------------|---------|--------|-------|
| 2023-11-14 22:13:20 | 0.0s |  | deployment created |
| 2023-11-14 22:14:02 | 42.4s | `ACTIVE` | ready |
";
        assert_eq!(render_summary(&input, STEP_SUMMARY_MAX_BYTES), want);
    }

    #[test]
    fn summary_for_a_failed_chain_deploy() {
        let mut outputs = Outputs::new(STATUS_DEPLOY_TIMEOUT);
        outputs.chain_id = "ch1".into();
        outputs.model_name = "my|chain".into();
        outputs.error_message =
            "chainlet Hello still DEPLOYING after 45m00s\nlast poll: HTTP 503 ```busy```".into();
        let history = [StatusEvent {
            at: at(1_709_164_800),
            elapsed: Duration::from_secs(2700),
            status: "DEPLOYING".into(),
            event: "deadline reached | <giving up>".into(),
        }];
        let notes = ["cleanup skipped: no deployment was created".to_string()];
        let input = SummaryInput {
            kind: DeployKind::Chain,
            outputs: &outputs,
            predict: None,
            page_url: "",
            notes: &notes,
            history: &history,
        };
        let want = "\
## ❌ Truss Deploy (Chain): my\\|chain

| Metric | Value |
|--------|-------|
| **Status** | `deploy_timeout` |
| **Chain ID** | `ch1` |
| **Deployment ID** | N/A |
| **Deploy Time** | N/A |

**Error:**

````text
chainlet Hello still DEPLOYING after 45m00s
last poll: HTTP 503 ```busy```
````

**Notes:**

- cleanup skipped: no deployment was created

### Status history

| Time (UTC) | Elapsed | Status | Event |
|------------|---------|--------|-------|
| 2024-02-29 00:00:00 | 45m00s | `DEPLOYING` | deadline reached \\| &lt;giving up&gt; |
";
        assert_eq!(render_summary(&input, STEP_SUMMARY_MAX_BYTES), want);
    }

    #[test]
    fn summary_shows_streaming_figures() {
        let outputs = full_outputs();
        let input = SummaryInput {
            kind: DeployKind::Model,
            outputs: &outputs,
            predict: Some(PredictStats {
                total_secs: 2.0,
                stream: Some(StreamStats {
                    ttfb_secs: 0.25,
                    tokens: 42,
                    tokens_per_sec: 21.0,
                }),
            }),
            page_url: "",
            notes: &[],
            history: &[],
        };
        let text = render_summary(&input, STEP_SUMMARY_MAX_BYTES);
        assert!(text.contains(
            "| **Predict Total Time** | 2.00s |\n| **TTFB** | 0.25s |\n| **Tokens** | 42 |\n| **Tokens/sec** | 21.0 |\n"
        ));
        assert!(!text.contains("Status history"));
        assert!(!text.contains("**Error:**"), "no error block on success");
    }

    #[test]
    fn summary_drops_middle_history_rows_to_fit_the_cap() {
        let outputs = full_outputs();
        let history: Vec<StatusEvent> = (0..5000)
            .map(|i| StatusEvent {
                at: at(1_700_000_000 + i),
                elapsed: Duration::from_secs(i),
                status: if i == 4999 { "ACTIVE" } else { "DEPLOYING" }.into(),
                event: format!("poll {i}"),
            })
            .collect();
        let input = SummaryInput {
            kind: DeployKind::Model,
            outputs: &outputs,
            predict: None,
            page_url: "",
            notes: &[],
            history: &history,
        };
        let full = render_summary(&input, STEP_SUMMARY_MAX_BYTES);
        assert!(full.contains("poll 2500"), "everything fits under 1 MiB");

        let capped = render_summary(&input, 8 * 1024);
        assert!(capped.len() <= 8 * 1024);
        assert!(capped.contains("| poll 0 |"), "first row kept");
        assert!(capped.contains("| poll 4999 |"), "latest row kept");
        assert!(capped.contains("rows omitted |"));
        assert!(capped.contains("| **Status** | `success` |"));
    }

    #[test]
    fn summary_is_cut_when_even_the_text_is_too_big() {
        let mut outputs = Outputs::new(STATUS_DEPLOY_FAILED);
        outputs.error_message = "x".repeat(100_000);
        let input = SummaryInput {
            kind: DeployKind::Model,
            outputs: &outputs,
            predict: None,
            page_url: "",
            notes: &[],
            history: &[],
        };
        let capped = render_summary(&input, 4096);
        assert!(capped.len() <= 4096);
        assert!(capped.ends_with(SUMMARY_TRUNCATED_MARKER));
        assert!(capped.starts_with("## ❌ Truss Deploy (Model): unknown\n"));
    }

    #[test]
    fn append_step_summary_counts_existing_content_against_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("step_summary_x");
        std::fs::write(&path, "earlier text without newline").unwrap();
        let outputs = full_outputs();
        let input = SummaryInput {
            kind: DeployKind::Model,
            outputs: &outputs,
            predict: None,
            page_url: "",
            notes: &[],
            history: &[],
        };
        append_step_summary(&path, &input).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(
                "earlier text without newline\n## ✅ Truss Deploy (Model): my-model\n"
            )
        );

        let full = dir.path().join("step_summary_full");
        std::fs::write(&full, "x".repeat(STEP_SUMMARY_MAX_BYTES - 100)).unwrap();
        append_step_summary(&full, &input).unwrap();
        assert!(std::fs::metadata(&full).unwrap().len() <= STEP_SUMMARY_MAX_BYTES as u64);
    }

    #[test]
    fn cells_escape_table_syntax_and_markup() {
        let cases = [
            ("plain", "plain"),
            ("a|b", "a\\|b"),
            ("one\ntwo", "one<br>two"),
            ("one\r\ntwo", "one<br>two"),
            ("<script>&", "&lt;script&gt;&amp;"),
        ];
        for (raw, want) in cases {
            assert_eq!(escape_cell(raw), want, "{raw:?}");
        }
        assert_eq!(code_cell("a|b"), "`a\\|b`");
        assert_eq!(code_cell("a\nb"), "`a b`");
        assert_eq!(code_cell("a`b"), "a`b");
        assert_eq!(code_fence("no ticks"), "```");
        assert_eq!(code_fence("has ```` four"), "`````");
        assert_eq!(link_target("https://x/a b(c)"), "https://x/a%20b%28c%29");
    }

    #[test]
    fn utc_and_elapsed_formatting() {
        let times = [
            (0, "1970-01-01 00:00:00"),
            (1_700_000_000, "2023-11-14 22:13:20"),
            (1_709_164_800, "2024-02-29 00:00:00"),
            (951_782_400, "2000-02-29 00:00:00"),
            (1_709_251_199, "2024-02-29 23:59:59"),
            (4_107_542_400, "2100-03-01 00:00:00"),
        ];
        for (secs, want) in times {
            assert_eq!(format_utc(at(secs)), want, "{secs}");
        }
        let elapsed = [
            (Duration::ZERO, "0.0s"),
            (Duration::from_millis(12_949), "12.9s"),
            (Duration::from_millis(59_999), "59.9s"),
            (Duration::from_secs(60), "1m00s"),
            (Duration::from_secs(618), "10m18s"),
            (Duration::from_secs(3723), "1h02m03s"),
        ];
        for (d, want) in elapsed {
            assert_eq!(format_elapsed(d), want, "{d:?}");
        }
    }

    // --- Workflow commands -------------------------------------------------

    /// The runner's reverse mapping (`%25` last), to prove escapes round-trip.
    fn runner_unescape(s: &str, property: bool) -> String {
        let mut s = s.replace("%0D", "\r").replace("%0A", "\n");
        if property {
            s = s.replace("%3A", ":").replace("%2C", ",");
        }
        s.replace("%25", "%")
    }

    #[test]
    fn workflow_command_escaping_table() {
        let cases = [
            // (raw, data, property)
            ("plain", "plain", "plain"),
            ("100%", "100%25", "100%25"),
            ("a\nb", "a%0Ab", "a%0Ab"),
            ("a\r\nb", "a%0D%0Ab", "a%0D%0Ab"),
            ("k: v, w", "k: v, w", "k%3A v%2C w"),
            ("%0A", "%250A", "%250A"),
            ("%3A", "%253A", "%253A"),
            ("::error::x", "::error::x", "%3A%3Aerror%3A%3Ax"),
        ];
        for (raw, data, property) in cases {
            assert_eq!(escape_data(raw), data, "data {raw:?}");
            assert_eq!(escape_property(raw), property, "property {raw:?}");
            assert_eq!(runner_unescape(data, false), raw);
            assert_eq!(runner_unescape(property, true), raw);
        }
    }

    #[test]
    fn workflow_commands_render() {
        let cases = [
            (
                annotation_command(Level::Error, None, "boom"),
                "::error::boom",
            ),
            (
                annotation_command(Level::Error, Some("Deploy: failed, sadly"), "a\nb"),
                "::error title=Deploy%3A failed%2C sadly::a%0Ab",
            ),
            (
                annotation_command(Level::Warning, Some(""), "w"),
                "::warning::w",
            ),
            (
                annotation_command(Level::Notice, Some("t"), "n"),
                "::notice title=t::n",
            ),
            (
                workflow_command("add-mask", &[], "s%cr\net"),
                "::add-mask::s%25cr%0Aet",
            ),
            (group_start(CiKind::GitHub, "Deploy m"), "::group::Deploy m"),
            (group_start(CiKind::GitLab, "Deploy m"), "==> Deploy m"),
            (annotation_line(Level::Error, None, "boom"), "error: boom"),
            (
                annotation_line(Level::Warning, Some("Cleanup"), "w"),
                "warning: Cleanup: w",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
        for (line, command) in [
            ("::error::x", true),
            ("   ::set-output name=a::b", true),
            ("log ##[group]x", true),
            ("a :: b", false),
            ("plain", false),
        ] {
            assert_eq!(looks_like_command(line), command, "{line:?}");
        }
    }

    // --- Reporter ----------------------------------------------------------

    fn reporter(kind: CiKind, terminal: bool) -> (Reporter, Capture, Capture) {
        let (out, err) = (Capture::default(), Capture::default());
        let r = Reporter::new(kind, terminal, Box::new(out.clone()), Box::new(err.clone()));
        (r, out, err)
    }

    #[test]
    fn reporter_on_github_uses_workflow_commands_on_stdout() {
        let (mut r, out, err) = reporter(CiKind::GitHub, false);
        r.mask("sk-secret-123");
        r.group("Deploy my-model");
        r.line("using key sk-secret-123");
        r.annotate(
            Level::Error,
            Some("deploy_failed"),
            "BUILD_FAILED\nsee logs",
        );
        r.notice("done");
        r.group("Predict");
        r.finish();
        assert_eq!(
            out.text(),
            "::add-mask::sk-secret-123\n\
             ::group::Deploy my-model\n\
             using key ***\n\
             ::error title=deploy_failed::BUILD_FAILED%0Asee logs\n\
             ::notice::done\n\
             ::endgroup::\n\
             ::group::Predict\n\
             ::endgroup::\n"
        );
        assert_eq!(err.text(), "");
    }

    #[test]
    fn reporter_elsewhere_prints_headings_and_plain_annotations() {
        let (mut r, out, err) = reporter(CiKind::GitLab, false);
        r.mask("sk-secret-123");
        r.group("Deploy my-model");
        r.line("key=sk-secret-123");
        r.warning("slow");
        r.error("boom");
        r.notice("fyi");
        r.end_group();
        assert_eq!(out.text(), "==> Deploy my-model\nkey=***\nnotice: fyi\n");
        assert_eq!(err.text(), "warning: slow\nerror: boom\n");
    }

    #[test]
    fn reporter_fences_untrusted_lines_that_look_like_commands() {
        let (mut r, out, _) = reporter(CiKind::GitHub, false);
        r.line("model log\n::set-output name=status::success");
        let text = out.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "model log");
        let token = lines[1].strip_prefix("::stop-commands::").unwrap();
        assert_eq!(token.len(), 32);
        assert_eq!(lines[2], "::set-output name=status::success");
        assert_eq!(lines[3], format!("::{token}::"));
        assert_eq!(lines.len(), 4);

        let (mut r, out, _) = reporter(CiKind::Local, false);
        r.line("::set-output name=status::success");
        assert_eq!(out.text(), "::set-output name=status::success\n");
    }

    #[test]
    fn reporter_is_send_and_lines_end_once() {
        fn assert_send<T: Send>() {}
        assert_send::<Reporter>();
        let (mut r, out, _) = reporter(CiKind::Local, false);
        r.line("a\n");
        r.line("b\nc");
        r.line("");
        assert_eq!(out.text(), "a\nb\nc\n\n");
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

    #[test]
    fn blank_masks_are_ignored() {
        let (mut r, out, _) = reporter(CiKind::GitHub, false);
        r.mask("  ");
        r.mask("");
        r.line("a b");
        assert_eq!(out.text(), "a b\n");
    }

    fn progress_lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn ci_progress_prints_a_line_per_10_percent_step() {
        let (mut r, out, _) = reporter(CiKind::GitHub, true);
        r.upload_started("Uploading model", 1000);
        for done in (0..=1000).step_by(7).chain([1000]) {
            r.upload_progress(done);
        }
        r.upload_finished();
        let lines = progress_lines(&out.text());
        assert_eq!(lines.len(), 11, "{lines:#?}");
        for (i, line) in lines.iter().enumerate() {
            assert!(
                line.starts_with(&format!("Uploading model: {}% (", i * 10)),
                "{line}"
            );
        }
        assert_eq!(lines[10], "Uploading model: 100% (1000 B of 1000 B)");
        assert!(!out.text().contains('\r'));
    }

    #[test]
    fn ci_progress_skips_steps_it_jumps_over() {
        let (mut r, out, _) = reporter(CiKind::Buildkite, false);
        r.upload_started("up", 3 * 1024 * 1024);
        r.upload_progress(2 * 1024 * 1024);
        r.upload_progress(1024 * 1024); // going back (a retried part) prints nothing
        r.upload_progress(3 * 1024 * 1024);
        r.upload_finished();
        assert_eq!(
            progress_lines(&out.text()),
            [
                "up: 0% (0 B of 3.0 MiB)",
                "up: 60% (2.0 MiB of 3.0 MiB)",
                "up: 100% (3.0 MiB of 3.0 MiB)",
            ]
        );
    }

    #[test]
    fn terminal_progress_redraws_one_line() {
        let (mut r, out, _) = reporter(CiKind::Local, true);
        r.upload_started("up", 200);
        for done in 0..=200 {
            r.upload_progress(done);
        }
        r.line("after");
        r.upload_finished();
        let text = out.text();
        assert_eq!(
            text.matches('\r').count(),
            101,
            "one redraw per whole percent"
        );
        assert!(text.ends_with("\rup [####################] 100% 200 B/200 B\nafter\n"));
    }

    #[test]
    fn progress_helpers() {
        for (done, total, want) in [
            (0, 0, 100),
            (0, 10, 0),
            (5, 10, 50),
            (9, 10, 90),
            (20, 10, 100),
        ] {
            assert_eq!(percent_done(done, total), want, "{done}/{total}");
        }
        assert_eq!(percent_done(u64::MAX - 1, u64::MAX), 99);
        for (bytes, want) in [
            (0, "0 B"),
            (1023, "1023 B"),
            (1536, "1.5 KiB"),
            (30 * 1024 * 1024, "30.0 MiB"),
            (5 * 1024 * 1024 * 1024, "5.0 GiB"),
        ] {
            assert_eq!(format_bytes(bytes), want);
        }
    }
}
