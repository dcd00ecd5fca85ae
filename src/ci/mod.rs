//! CI reporting: everything a user sees in CI besides the deploy flow's
//! plain log lines.
//!
//! - `detect`: which CI system runs us, and the CI variables the run
//!   needs, from a lookup (nothing here reads the environment itself).
//! - `outputs/`: the step outputs and their files, a file per format plus
//!   the threaded writer. `$GITHUB_OUTPUT` gets
//!   every entry in heredoc form with a fresh `ghadelimiter_<32 hex>`
//!   delimiter that occurs in neither name nor value; other CI systems get a
//!   dotenv file (GitLab `artifacts:reports:dotenv`, Bitbucket output
//!   variables: `TRUSS_PUSH_<NAME>=<value>`, unquoted, one line each, long
//!   values cut to stay under 5 KiB; not for a shell to `source`), a shell
//!   file of single-quoted assignments that is safe to `source`, or one JSON
//!   object of strings. A destination that cannot be written is an error the
//!   caller reports; writes never block the process for long.
//! - `outputs/file`: the one sink every file the run writes goes through
//!   (`write_file` for the rest of the crate): redacted, bounded in time,
//!   refusing what cannot hold text, its error naming the file.
//! - `summary`: the Markdown step summary, one page with one budget
//!   (GitHub's 1 MiB) that every section, the evidence included, draws
//!   from.
//! - `markdown`: escaping for every Markdown page (the summary, the
//!   evidence section, the pull-request comment).
//! - `reporter`: the `Reporter` that owns stdout and stderr — groups,
//!   annotations, masking and upload progress in the CI system's own form.
//! - `progress`: what upload progress shows and when (a CI line at most
//!   every 5 s, a terminal bar per whole percent), for the reporter to print.
//! - `runner_text`: where GitHub's runner ends a line and what it reads
//!   as a workflow command, for the reporter's sink.
//! - `json`: the `--json` result, one object on stdout, and the
//!   several-target `results` output, from serde types.
//! - `format`: durations, byte sizes and UTC times as people read them.
//!
//! Rendering is done by pure functions over plain values; the few functions
//! that touch the file system only append or write what those rendered.
//! Every sink here — the reporter, the outputs writers, both summaries and
//! the JSON documents — redacts the secrets registered in `crate::secret`
//! itself, so no caller has to remember to.

mod detect;
mod format;
#[cfg(test)]
pub(crate) mod hostile_text;
mod json;
pub(crate) mod markdown;
mod outputs;
mod progress;
mod reporter;
mod runner_text;
mod summary;

pub(crate) use detect::CiEnv;
pub(crate) use format::format_deploy_time;
pub(crate) use format::{format_bytes, format_utc, human_duration as human};
pub(crate) use json::render_result;
pub(crate) use json::{TargetResult, results_json};
pub(crate) use outputs::OutputsFormat;
pub(crate) use outputs::replace_file as write_file;
pub(crate) use outputs::{Command, HourlyPrice, Outputs, append_github_output, write_outputs_file};
pub use outputs::{EXTRA_OUTPUT_NAMES, PYTHON_ACTION_OUTPUT_NAMES, dotenv_variables};
pub(crate) use reporter::{Level, Reporter, Sink};
pub(crate) use summary::{Cell, TableSummary, append_table_summary};
pub(crate) use summary::{PredictStats, ServesNow, StatusEvent};
pub(crate) use summary::{StreamStats, SummaryInput, append_step_summary};
