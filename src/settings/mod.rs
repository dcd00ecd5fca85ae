//! Stage two of the inputs: the raw values parsed into typed settings, each
//! rule written once. Nothing here decides what to deploy or reads more
//! than the user's small files; `config` assembles the run's `Config` from
//! these pieces and resolves the target.
//!
//! `Preliminary` is what a run needs before anything is validated (where
//! outputs go, which secrets to mask, the name to report), so that even a
//! bad input gets its outputs.

pub(crate) mod command;
mod deploy;
pub(crate) mod evidence;
pub(crate) mod github;
pub(crate) mod pull_request;

pub(crate) use command::{Command, CommandInput, CommandSettings};
#[cfg(test)]
pub(crate) use deploy::Cleanup;
pub(crate) use deploy::{Promotion, Settings};

use std::path::{Path, PathBuf};

use reqwest::Url;
use serde_json::Value;

use crate::ci::OutputsFormat as OutputFormat;
use crate::cli::{Input, Inputs, ValueKind};
use crate::files::read_regular_file;
use crate::secret::Secret;

/// A config.yaml larger than this is not a Truss config; it is refused
/// before it is read into memory.
pub(crate) const CONFIG_YAML_MAX_MIB: u64 = 1;

/// The inputs whose values are secrets: masked in the CI log and redacted
/// from everything the run writes.
pub(crate) const SECRET_INPUTS: [Input; 2] = [Input::BasetenApiKey, Input::GithubToken];

/// What the run reads before validating anything. The secrets are held
/// as [`Secret`], so no `Debug` of it prints them.
#[derive(Clone, Debug)]
pub(crate) struct Preliminary {
    pub(crate) outputs: OutputSettings,
    /// A bad `output-format` or `json`, reported after the outputs are
    /// written in the default format.
    pub(crate) outputs_error: Option<String>,
    /// stdout carries a document (`json`, `print-config`, `plan`).
    pub(crate) stdout_is_data: bool,
    /// The secret values given, to mask and redact.
    pub(crate) secrets: Vec<Secret>,
    /// The Baseten API key, checked when given (`None`: not given). A
    /// deploy needs it ([`Preliminary::deploy_key`]); a plan sends nothing and
    /// needs none. Only `execute` builds the platform's client from it; no
    /// `Config` carries it.
    pub(crate) api_key: Result<Option<Secret>, String>,
    /// `model-name`, or `model_name` from config.yaml, or empty.
    pub(crate) model_name: String,
    /// `command` (and `plan`) parsed; its error is an input error of the run.
    pub(crate) command: Result<Command, String>,
}

impl Preliminary {
    pub(crate) fn read(inputs: &Inputs) -> Self {
        let (outputs, outputs_error) = output_settings(inputs);
        Preliminary {
            stdout_is_data: outputs.json || stdout_is_data(inputs),
            outputs,
            outputs_error,
            secrets: SECRET_INPUTS
                .iter()
                .filter_map(|&input| inputs.trimmed(input))
                .map(Secret::new)
                .collect(),
            api_key: api_key(inputs),
            model_name: best_effort_model_name(inputs),
            command: Command::parse(inputs),
        }
    }
}

impl Preliminary {
    /// The key a deploy needs: given, and one word.
    pub(crate) fn deploy_key(&self) -> Result<Secret, String> {
        self.api_key.clone()?.ok_or_else(|| {
            "baseten-api-key is required: pass your Baseten API key from a secret, e.g. baseten-api-key: ${{ secrets.BASETEN_API_KEY }}".to_string()
        })
    }
}

/// The Baseten API key when given: one word.
fn api_key(inputs: &Inputs) -> Result<Option<Secret>, String> {
    let Some(key) = inputs
        .trimmed(Input::BasetenApiKey)
        .filter(|k| !k.is_empty())
    else {
        return Ok(None);
    };
    one_word("baseten-api-key", key, "the secret's value")?;
    Ok(Some(Secret::new(key)))
}

/// A key or token is sent as an HTTP header: one word of visible ASCII,
/// refused here (never echoed) rather than at its first request.
pub(crate) fn one_word(name: &str, value: &str, check: &str) -> Result<(), String> {
    if value.chars().any(char::is_whitespace) {
        return Err(format!(
            "{name} contains whitespace inside it: check {check}"
        ));
    }
    if !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "{name} contains a control or non-ASCII character, which an HTTP header cannot carry: check {check}"
        ));
    }
    Ok(())
}

/// The environment name becomes part of the regional predict host
/// `model-<id>-<environment>`: one DNS label (63 characters at most) that
/// also holds an 8-character id.
pub(crate) const ENVIRONMENT_MAX_CHARS: usize = 48;
/// Model and team names longer than this are a pasting mistake, not a name.
pub(crate) const NAME_MAX_CHARS: usize = 256;

/// Where outputs go; resolved first so that even a bad input gets them.
#[derive(Clone, Debug, Default)]
pub(crate) struct OutputSettings {
    pub file: Option<(PathBuf, OutputFormat)>,
    /// The result as one JSON object on stdout; logs on stderr.
    pub json: bool,
}

/// Resolves the outputs file. A bad format is reported after outputs are
/// written (in the default format), so the user still gets them.
pub(crate) fn output_settings(inputs: &Inputs) -> (OutputSettings, Option<String>) {
    let (json, json_err) =
        match parse_bool("json", inputs.or_default(Input::Json).unwrap_or("false")) {
            Ok(b) => (b, None),
            Err(e) => (false, Some(e)),
        };
    let (mut settings, err) = output_file_settings(inputs);
    settings.json = json;
    (settings, err.or(json_err))
}

/// Whether stdout carries a document (`print-config`, `plan`) rather than
/// the log: then every log line, `::add-mask::` included, goes to stderr.
/// A value that is not a boolean is refused later; here it counts as off.
pub(crate) fn stdout_is_data(inputs: &Inputs) -> bool {
    let switched = [Input::PrintConfig, Input::Plan].iter().any(|&input| {
        inputs
            .trimmed(input)
            .is_some_and(|v| parse_bool(input.name(), v) == Ok(true))
    });
    switched || Command::parse(inputs) == Ok(Command::Plan)
}

fn output_file_settings(inputs: &Inputs) -> (OutputSettings, Option<String>) {
    let Some(path) = inputs.trimmed(Input::OutputFile) else {
        return (OutputSettings::default(), None);
    };
    let path = PathBuf::from(path);
    let by_ext = if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        OutputFormat::Json
    } else {
        OutputFormat::Dotenv
    };
    let (format, err) = match inputs
        .trimmed(Input::OutputFormat)
        .map(str::to_ascii_lowercase)
    {
        None => (by_ext, None),
        Some(f) if f == "dotenv" || f == "env" => (OutputFormat::Dotenv, None),
        Some(f) if f == "json" => (OutputFormat::Json, None),
        Some(f) if f == "shell" || f == "sh" => (OutputFormat::Shell, None),
        Some(f) => (
            by_ext,
            Some(format!(
                "output-format must be dotenv or json or shell, got {f:?}"
            )),
        ),
    };
    let err = err.or_else(|| unwritable_place(&path));
    (
        OutputSettings {
            file: Some((path, format)),
            json: false,
        },
        err,
    )
}

/// Why `output-file` cannot be written, when that can be told before the
/// run: it is a directory, or its directory does not exist. Found after
/// the deploy, the run would have changed the platform and still fail.
fn unwritable_place(path: &Path) -> Option<String> {
    let shown = path.display();
    if path.is_dir() {
        return Some(format!(
            "output-file {shown} is a directory: point output-file at a file"
        ));
    }
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => Some(format!(
            "output-file {shown}: its directory {} does not exist: create it first or point output-file elsewhere",
            dir.display()
        )),
        _ => None,
    }
}

/// Parses a strict boolean: true/false, 1/0, yes/no in any case.
pub(crate) fn parse_bool(name: &str, value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!(
            "{name} must be true or false (also 1/0, yes/no), got {value:?}: set {name} to 'true' or 'false'"
        )),
    }
}

/// True when `name` is a whole match of `[0-9A-Za-z_.-]+`, so no trailing
/// newline slips through as a regex with `$` would let it.
pub(crate) fn is_valid_deployment_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Checks an environment name: it is placed in a host name and in URL paths,
/// so only letters, digits, `_` and `-` are allowed.
pub(crate) fn check_environment(v: &str) -> Result<(), String> {
    if !v
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
    {
        return Err(format!(
            "environment may contain only letters, digits, '_' and '-', got {v:?}: use the environment's name as the Baseten UI shows it, e.g. production"
        ));
    }
    if v.chars().count() > ENVIRONMENT_MAX_CHARS {
        return Err(format!(
            "environment must be at most {ENVIRONMENT_MAX_CHARS} characters, got {}",
            v.chars().count()
        ));
    }
    Ok(())
}

/// Characters that change how text around them is displayed without being
/// seen: bidirectional overrides, embeddings and isolates (U+202E turns
/// `model-exe.txt` around), zero-width characters, and the Unicode line and
/// paragraph separators. In a name they make a PR comment or a summary
/// show something other than what was deployed.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{61c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}'
            | '\u{feff}'
    )
}

/// Checks a model or team name given as free text. Line feeds pass because
/// every place a name is shown escapes them; other control characters
/// (terminal escapes, carriage returns, NUL) would reach logs raw, and
/// invisible formatting characters would disguise the name.
pub(crate) fn check_name(what: &str, v: &str) -> Result<(), String> {
    check_name_characters(what, v)?;
    if v.chars().count() > NAME_MAX_CHARS {
        return Err(format!(
            "{what} must be at most {NAME_MAX_CHARS} characters, got {}",
            v.chars().count()
        ));
    }
    Ok(())
}

/// The characters [`check_name`] refuses: control characters but line
/// feeds, and invisible formatting characters.
fn check_name_characters(what: &str, v: &str) -> Result<(), String> {
    if let Some(c) = v.chars().find(|&c| c.is_control() && c != '\n') {
        return Err(format!(
            "{what} contains a control character ({c:?}) in {v:?}: remove it"
        ));
    }
    if let Some((at, c)) = v.chars().enumerate().find(|&(_, c)| is_invisible_format(c)) {
        return Err(format!(
            "{what} contains an invisible formatting character (U+{:04X}, e.g. a right-to-left override) at character {}: it makes the name display as something it is not; remove it",
            u32::from(c),
            at + 1
        ));
    }
    Ok(())
}

/// Parses a URL that will carry the API key: HTTPS, or plain HTTP to
/// loopback only (tests).
pub(crate) fn key_url(name: &str, value: &str) -> Result<Url, String> {
    let url = Url::parse(value.trim()).map_err(|e| {
        format!("{name} must be a URL like https://example.com, got {value:?}: {e}")
    })?;
    // Not echoed: what sits before the host may be a password.
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{name} carries a user name or password before its host: give the URL without them (the API key travels in its own header)"
        ));
    }
    // Paths are appended to it: after a query or fragment they would be
    // part of that instead of the path.
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "{name} has a query or fragment ('?' or '#'): give the base URL only, like https://example.com"
        ));
    }
    match url.scheme() {
        "https" => Ok(url),
        "http" if crate::baseten::is_loopback(&url) => Ok(url),
        "http" => Err(format!(
            "{name} is {value}: the API key is only sent over HTTPS (plain http is allowed to loopback only); use an https:// URL"
        )),
        other => Err(format!(
            "{name} must be an http(s) URL, got scheme {other:?}"
        )),
    }
}

/// Reads a numeric input (or its default) and checks it against the range
/// declared for it, so no later conversion to a `Duration` or an `Instant`
/// can overflow.
pub(crate) fn number(inputs: &Inputs, input: Input) -> Result<f64, String> {
    let name = input.name();
    let ValueKind::Number(r) = input.spec().kind else {
        unreachable!("{name} is declared as a number");
    };
    let v = inputs.or_default(input).unwrap_or_default();
    let unit = r.unit.word();
    let parsed = if r.whole {
        v.parse::<u64>().ok().map(|n| n as f64)
    } else {
        v.parse::<f64>().ok()
    };
    match parsed {
        // NaN fails both comparisons.
        Some(x) if r.min <= x && x <= r.max => Ok(x),
        Some(_) => Err(format!(
            "{name} must be between {} and {} {unit}, got {v:?}",
            r.min, r.max
        )),
        None => Err(format!(
            "{name} must be a {}number of {unit} between {} and {}, got {v:?}",
            if r.whole { "whole " } else { "" },
            r.min,
            r.max
        )),
    }
}

/// What a run reports as `model-name` before validation finished: the
/// input, else `model_name` from config.yaml — empty when the name holds
/// a character [`check_name`] refuses, so a name refused for its terminal
/// escapes or right-to-left override never reaches the outputs or the
/// summary (a name refused only for its length is shown, cut).
pub(crate) fn best_effort_model_name(inputs: &Inputs) -> String {
    let name = match inputs.trimmed(Input::ModelName) {
        Some(n) => n.to_string(),
        None => model_name_in_config(inputs),
    };
    match check_name_characters("model-name", &name) {
        Ok(()) => name,
        Err(_) => String::new(),
    }
}

/// `model_name` from config.yaml as written, or empty.
fn model_name_in_config(inputs: &Inputs) -> String {
    inputs
        .trimmed(Input::TrussDirectory)
        .and_then(|d| {
            read_regular_file(&Path::new(d).join("config.yaml"), CONFIG_YAML_MAX_MIB).ok()
        })
        .and_then(|raw| serde_yaml::from_slice::<serde_yaml::Value>(&raw).ok())
        .and_then(|v| {
            v.get("model_name")
                .and_then(|n| n.as_str().map(str::to_string))
        })
        .unwrap_or_default()
}

pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The Python action skips predict for a falsy payload (`null`, `{}`, `[]`,
/// `""`, `0`, `false`).
pub(crate) fn is_falsy(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_that_carries_the_key_is_a_bare_base() {
        assert!(key_url("app-url", "https://app.baseten.co").is_ok());
        assert!(key_url("app-url", "http://127.0.0.1:8080/base").is_ok());
        for (value, says) in [
            (
                "https://user:sk-canary@app.baseten.co",
                "user name or password",
            ),
            ("https://sk-canary@app.baseten.co", "user name or password"),
            ("https://app.baseten.co/?k=v", "query or fragment"),
            ("https://app.baseten.co/#top", "query or fragment"),
        ] {
            let err = key_url("app-url", value).unwrap_err();
            assert!(err.starts_with("app-url "), "{err}");
            assert!(err.contains(says), "{value}: {err}");
            assert!(!err.contains("sk-canary"), "{value}: {err}");
        }
    }

    #[test]
    fn the_preliminary_settings_hold_the_secrets_and_never_print_them() {
        let inputs = Inputs::from_pairs(&[
            ("baseten-api-key", " sk-preliminary-canary \n"),
            ("github-token", "ghs-preliminary-canary"),
        ]);
        let preliminary = Preliminary::read(&inputs);
        let shown = format!("{preliminary:?}");
        assert!(!shown.contains("preliminary-canary"), "{shown}");
        let key = preliminary.deploy_key().map(|k| k.expose().to_string());
        assert_eq!(key, Ok("sk-preliminary-canary".into()));
        let exposed: Vec<&str> = preliminary.secrets.iter().map(Secret::expose).collect();
        assert_eq!(exposed, ["sk-preliminary-canary", "ghs-preliminary-canary"]);
        // A deploy needs the key, one word; a plan needs none, but one
        // given malformed is refused in every mode.
        for (given, err) in [
            ("", "is required"),
            ("sk a", "whitespace"),
            ("sk\u{7f}a", "control or non-ASCII"),
            ("sk\u{e9}a", "control or non-ASCII"),
        ] {
            let e = Preliminary::read(&Inputs::from_pairs(&[("baseten-api-key", given)]));
            assert!(e.deploy_key().is_err_and(|m| m.contains(err)), "{given:?}");
        }
        let none = Preliminary::read(&Inputs::from_pairs(&[]));
        assert_eq!(none.api_key, Ok(None));
        let bad = Preliminary::read(&Inputs::from_pairs(&[("baseten-api-key", "sk a")]));
        assert!(bad.api_key.is_err());
    }
}
