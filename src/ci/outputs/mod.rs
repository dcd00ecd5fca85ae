//! The step outputs and the files they are written to: `$GITHUB_OUTPUT`
//! (heredocs, `github`), and for other CI systems one outputs file in the
//! dotenv (`dotenv`), shell (`shell`) or JSON (`json`) format, each written
//! by the threaded writer (`file`) that gives up on a destination that
//! blocks.

use std::borrow::Cow;
use std::path::Path;

use super::format::format_deploy_time;
use crate::outcome::Status;

mod command;
mod dotenv;
mod file;
mod github;
mod json;

pub(in crate::ci) use json::{Entries, top_level_lines};
mod shell;

pub(crate) use command::Command;
pub use dotenv::dotenv_variables;
pub(crate) use file::{append_sized, replace_file};
pub(crate) use github::append_github_output;

/// The Python action (`basetenlabs/action-truss-push`) keeps the first 4096 characters of the predict response.
const PREDICT_RESPONSE_MAX_CHARS: usize = 4096;
/// Error messages are free text (sometimes a whole server reply): keep
/// outputs and files bounded the same way as the predict response.
const ERROR_MESSAGE_MAX_CHARS: usize = 4096;

/// The Python action's (`basetenlabs/action-truss-push`) seven outputs, in
/// the order it writes them: every run writes them first, in this order.
/// Public so the integration tests read the one list.
pub const PYTHON_ACTION_OUTPUT_NAMES: [&str; 7] = [
    "deployment-id",
    "model-id",
    "chain-id",
    "model-name",
    "deploy-time-seconds",
    "predict-response",
    "status",
];
/// The outputs this project adds: every run writes them, after the Python
/// action's seven and in this order. Outputs that only apply to some runs
/// (`unchanged`, `matrix`, `results`, the evidence) are not here.
pub const EXTRA_OUTPUT_NAMES: [&str; 8] = [
    "error-message",
    "last-status",
    "logs-url",
    "predict-url",
    "environment-url",
    "previous-deployment-id",
    "tested-deployment-id",
    "rolled-back",
];

/// `hourly-price-min` and `hourly-price-max` (USD per hour at the minimum
/// and the maximum replicas, two decimals) and the line the summary and
/// the pull-request comment show. Both values are empty when the price
/// was not read (the line then says why); written only by runs a price
/// applies to (a deploy that got ready or was unchanged, a chain).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct HourlyPrice {
    pub(crate) min: String,
    pub(crate) max: String,
    pub(crate) line: String,
}

impl HourlyPrice {
    /// Empty values, and the line saying why.
    pub(crate) fn not_read(why: &str) -> Self {
        HourlyPrice {
            line: format!("Price not read: {why}"),
            ..HourlyPrice::default()
        }
    }
}

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
    /// `true` when this run moved the environment back: a gated promotion
    /// that put the previous deployment back, or `command: rollback` that
    /// put its target in; empty when neither applies.
    pub(crate) rolled_back: Option<bool>,
    /// With `skip-unchanged`: `true` when the source already served the
    /// environment and nothing was deployed. Written only when set.
    pub(crate) unchanged: Option<bool>,
    /// With `skip-unchanged`: `true` when an older deployment made from
    /// this source was promoted instead of building. Written only when set.
    pub(crate) reused: Option<bool>,
    /// `command: drift`: `true` when any target drifted. Written only
    /// then, like the next one.
    pub(crate) drift: Option<bool>,
    /// `command: drift`: a JSON array, one object per target (never in a
    /// dotenv file: it is JSON, and the 5 KiB would cut it).
    pub(crate) drift_report: Option<String>,
    /// The deploy's hourly price, when one applies.
    pub(crate) hourly_price: Option<HourlyPrice>,
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
    /// `teardown` and `prune`: a JSON array of what was retired (or would
    /// be, in a dry run), how many, and how many a safety rule kept.
    /// Written only by those commands.
    pub(crate) retired: Option<String>,
    pub(crate) retired_count: Option<usize>,
    pub(crate) protected_count: Option<usize>,
    /// What the run was asked to do: which outputs its dotenv file holds.
    pub(crate) command: Command,
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
            unchanged: None,
            reused: None,
            drift: None,
            drift_report: None,
            hourly_price: None,
            matrix: None,
            targets_count: None,
            results: None,
            evidence: Vec::new(),
            retired: None,
            retired_count: None,
            protected_count: None,
            command: Command::Deploy,
        }
    }

    /// A copy with every registered secret replaced by `***`, for the
    /// sinks that read fields rather than [`Self::entries`] (the summary).
    pub(crate) fn redacted(&self) -> Outputs {
        let mut clean = self.clone();
        clean.redact_with(crate::secret::scrub);
        clean
    }

    fn redact_with(&mut self, clean: impl Fn(&str) -> Cow<'_, str>) {
        let texts = [
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
        ];
        let price = self.hourly_price.as_mut().map(|p| &mut p.line);
        let optional = [
            &mut self.matrix,
            &mut self.results,
            &mut self.drift_report,
            &mut self.retired,
        ]
        .into_iter()
        .flatten()
        .chain(price);
        let evidence = self.evidence.iter_mut().map(|(_, v)| v);
        for field in texts.into_iter().chain(optional).chain(evidence) {
            if let Cow::Owned(c) = clean(field) {
                *field = c;
            }
        }
    }

    /// `(name, value)` in writing order: the Python action's seven outputs
    /// first, in the order it writes them, then the ones this project adds.
    /// Every value is redacted of the registered secrets (before it is cut,
    /// so no part of one is left): every writer reads its values here.
    pub(crate) fn entries(&self) -> Vec<(&'static str, String)> {
        let clean = self.redacted();
        clean.raw_entries()
    }

    fn raw_entries(&self) -> Vec<(&'static str, String)> {
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
        if let Some(u) = self.unchanged {
            entries.push(("unchanged", u.to_string()));
        }
        if let Some(r) = self.reused {
            entries.push(("reused", r.to_string()));
        }
        if let Some(d) = self.drift {
            entries.push(("drift", d.to_string()));
        }
        if let Some(r) = &self.drift_report {
            entries.push(("drift-report", r.clone()));
        }
        if let Some(p) = &self.hourly_price {
            entries.push(("hourly-price-min", p.min.clone()));
            entries.push(("hourly-price-max", p.max.clone()));
        }
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
        if let Some(r) = &self.retired {
            entries.push(("retired", r.clone()));
        }
        if let Some(n) = self.retired_count {
            entries.push(("retired-count", n.to_string()));
        }
        if let Some(n) = self.protected_count {
            entries.push(("protected-count", n.to_string()));
        }
        entries
    }
}

/// The first `max` characters (Unicode scalar values, as Python counts).
pub(in crate::ci) fn truncate_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

/// The longest prefix of `s` that is at most `max` bytes and ends on a char boundary.
pub(in crate::ci) fn truncate_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

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

/// Writes (replacing) the outputs file in the requested format.
pub(crate) fn write_outputs_file(
    path: &Path,
    format: OutputsFormat,
    outputs: &Outputs,
) -> anyhow::Result<()> {
    let text = match format {
        OutputsFormat::Dotenv => dotenv::render_dotenv(outputs),
        OutputsFormat::Shell => shell::render_shell(outputs),
        OutputsFormat::Json => json::render_json(outputs),
    };
    Ok(file::replace_file(path, &text)?)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

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
    fn entries_put_the_python_actions_outputs_first_in_its_order() {
        let names: Vec<&str> = full_outputs().entries().iter().map(|(n, _)| *n).collect();
        assert_eq!(names[..7], PYTHON_ACTION_OUTPUT_NAMES);
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

    #[test]
    fn entries_are_redacted_of_registered_secrets_before_the_cut() {
        crate::secret::register("sk-entries-canary");
        let mut outputs = full_outputs();
        outputs.predict_response = format!("{}sk-entries-canary", "x".repeat(4090));
        outputs.results = Some("[\"sk-entries-canary\"]".into());
        outputs.evidence = vec![("cases-failed", "sk-entries-canary".into())];
        let all: String = outputs.entries().into_iter().map(|(_, v)| v).collect();
        assert!(!all.contains("sk-entries"), "{all}");
        assert!(all.contains(&format!("{}***", "x".repeat(4090))));
    }

    #[test]
    fn outputs_redact_a_secret_everywhere() {
        crate::secret::register("sk-123456");
        crate::secret::register("");
        let mut outputs = full_outputs();
        outputs.error_message = "401 for key sk-123456: denied".into();
        outputs.predict_response = "echo sk-123456".into();
        let outputs = outputs.redacted();
        assert_eq!(outputs.error_message, "401 for key ***: denied");
        assert_eq!(outputs.predict_response, "echo ***");
        assert_eq!(outputs.model_name, "my-model");
    }
}
