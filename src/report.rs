//! The end of every run: the outputs built from what the run learned and
//! written everywhere they were asked for, the final status line, and — as
//! a last resort — the same outputs from a panic hook.

use std::sync::{Arc, Mutex, TryLockError};

use crate::ci::{self, Cell, CiEnv, Level, Outputs, Reporter, SummaryInput, TableSummary};
use crate::config::Config;
use crate::flow::State;
use crate::kind::Kind;
use crate::outcome::{
    EXIT_DEPLOY_FAILED, EXIT_DRIFTED, EXIT_OUTPUTS_NOT_WRITTEN, EXIT_SUCCESS, Failure, Status,
};
use crate::secret;
use crate::settings::OutputSettings;

/// What a plan or a several-target run adds to its report: the outputs
/// only these modes write, and a summary that is one table.
#[derive(Debug, Default)]
pub(crate) struct Fanout {
    pub(crate) matrix: Option<String>,
    pub(crate) targets_count: Option<usize>,
    pub(crate) results: Option<String>,
    /// Several targets: the sum of their hourly prices (`flow::price::sum`).
    pub(crate) hourly_price: Option<ci::HourlyPrice>,
    pub(crate) heading: String,
    pub(crate) columns: &'static [&'static str],
    pub(crate) rows: Vec<Vec<Cell>>,
    pub(crate) details: Vec<String>,
}

/// The outputs of a run that ended with `status`, from its state: one
/// struct literal with no `..`, so an output added to `Outputs` does not
/// compile until the state says where it comes from.
pub(crate) fn outputs_of(st: &State, status: Status, cfg: Option<&Config>) -> Outputs {
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let logs_url = match (cfg, &st.model_id, &st.chain_id, &st.deployment_id) {
        (Some(cfg), Some(m), _, Some(d)) => cfg.endpoints.logs_page(m, d),
        // Chain logs are per chainlet (printed while waiting); the
        // output points at the chain's page, which links them all.
        (Some(cfg), None, Some(c), Some(_)) => cfg.endpoints.chain_page(c),
        _ => String::new(),
    };
    Outputs {
        deployment_id: text(&st.deployment_id),
        model_id: text(&st.model_id),
        chain_id: text(&st.chain_id),
        model_name: st.model_name.clone(),
        deploy_time_seconds: st.deploy_time.map(|d| d.as_secs_f64()),
        predict_response: text(&st.predict_response),
        status,
        error_message: String::new(),
        last_status: text(&st.last_status),
        logs_url,
        predict_url: text(&st.predict_url),
        environment_url: text(&st.environment_url),
        previous_deployment_id: text(&st.previous_deployment_id),
        tested_deployment_id: text(&st.tested_deployment_id),
        rolled_back: st.rolled_back,
        unchanged: st.by_content.unchanged,
        reused: st.by_content.reused,
        drift: st.drift.as_ref().map(|d| d.drifted),
        drift_report: st.drift.as_ref().map(|d| d.report.clone()),
        hourly_price: crate::flow::price::of_run(st),
        matrix: None,
        targets_count: None,
        results: None,
        evidence: crate::evidence::output_entries(&st.evidence),
        retired: st.retirements.as_ref().map(|r| r.retired_json()),
        retired_count: st.retirements.as_ref().map(|r| r.retired.len()),
        protected_count: st.retirements.as_ref().map(|r| r.protected.len()),
        command: ci::Command::Deploy,
    }
}

/// The outputs of a finished run as every writer (and GitHub) receives
/// them: the status and error from `result`, and no registered secret (the
/// API key, the GitHub token) in any of them, whatever a message, a status
/// or a note happened to quote.
pub(crate) fn final_outputs(
    st: &State,
    result: &Result<(), Failure>,
    cfg: Option<&Config>,
) -> Outputs {
    let status = match result {
        Ok(()) => Status::Success,
        Err(f) => f.status(),
    };
    let mut outputs = outputs_of(st, status, cfg);
    if let Err(f) = result {
        outputs.error_message = f.to_string();
    }
    outputs.redacted()
}

/// Defence in depth: should anything panic, the outputs are still written
/// (status `deploy_failed`, the deployment if one was created, "internal
/// error: …" with the key redacted) and the process exits 1 instead of
/// dying bare.
pub(crate) fn install_panic_hook(ci_env: CiEnv, out: OutputSettings, state: Arc<Mutex<State>>) {
    std::panic::set_hook(Box::new(move |info| {
        let outputs = panic_outputs(&state, &info.to_string());
        eprintln!("error: deploy_failed: {}", outputs.error_message);
        if let Some(path) = &ci_env.github_output {
            let _ = ci::append_github_output(path, &outputs);
        }
        if let Some((path, format)) = &out.file {
            let _ = ci::write_outputs_file(path, *format, &outputs);
        }
        if out.json {
            print!(
                "{}",
                ci::render_result::<()>(&outputs, EXIT_DEPLOY_FAILED, &[], &[], None)
            );
        }
        std::process::exit(i32::from(EXIT_DEPLOY_FAILED));
    }));
}

/// The outputs the panic hook writes for `panic` (the panic's own text):
/// what the state knew, unless a thread panicked holding it, and the
/// message with every registered secret redacted (the run registers them
/// before it installs the hook).
fn panic_outputs(state: &Mutex<State>, panic: &str) -> Outputs {
    let msg = secret::scrub(panic).into_owned();
    let st = match state.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    };
    let mut outputs = match &st {
        Some(st) => outputs_of(st, Status::DeployFailed, None),
        None => Outputs::new(Status::DeployFailed),
    };
    outputs.error_message = format!("internal error: {msg}");
    outputs
}

/// How the run ended: what was deployed (its kind, and its config when
/// one target was), the result, and what a plan or a several-target run
/// adds (`fanout`).
pub(crate) struct Ended<'a> {
    pub(crate) kind: Kind,
    pub(crate) cfg: Option<&'a Config>,
    pub(crate) result: &'a Result<(), Failure>,
    pub(crate) fanout: Option<&'a Fanout>,
    /// What the run was asked to do: its dotenv file's row.
    pub(crate) command: ci::Command,
}

/// Writes the outputs everywhere they were asked for and returns the exit
/// code: the run's own, or `EXIT_OUTPUTS_NOT_WRITTEN` when a successful
/// run's outputs could not be delivered to `GITHUB_OUTPUT` or the outputs
/// file (later steps would read nothing). The step summary is a convenience:
/// losing it is only a warning. `fanout` is what a plan or a several-target run adds: its outputs, and
/// its table in place of the one-deploy summary.
pub(crate) fn report(
    rep: &Arc<Mutex<Reporter>>,
    ci_env: &CiEnv,
    out: &OutputSettings,
    state: &Mutex<State>,
    ended: &Ended<'_>,
) -> u8 {
    let &Ended {
        kind,
        cfg,
        result,
        fanout,
        command,
    } = ended;
    let st = state.lock().unwrap();
    let status = match result {
        Ok(()) => Status::Success,
        Err(f) => f.status(),
    };
    // The writers, the summary, the JSON document and the reporter redact
    // every registered secret (the key and the GitHub token, registered by
    // `run` before anything could print) whatever quoted it.
    let mut outputs = final_outputs(&st, result, cfg);
    outputs.command = command;
    if let Some(f) = fanout {
        outputs.matrix = f.matrix.clone();
        outputs.targets_count = f.targets_count;
        outputs.results = f.results.clone();
        if f.hourly_price.is_some() {
            outputs.hourly_price = f.hourly_price.clone();
        }
    }
    let mut r = rep.lock().unwrap();
    r.finish();
    if let Err(f) = result {
        r.annotate(Level::Error, Some(status.as_str()), &f.to_string());
    }
    r.line(&format!("Final status: {status}"));
    // Where the outputs went and where they could not, told once both
    // were tried: a failure names what did receive them.
    let mut written: Vec<String> = Vec::new();
    let mut failed: Vec<(&str, anyhow::Error)> = Vec::new();
    if let Some(path) = &ci_env.github_output {
        match ci::append_github_output(path, &outputs) {
            Ok(()) => written.push("GITHUB_OUTPUT".into()),
            Err(e) => failed.push(("GITHUB_OUTPUT", e)),
        }
    }
    if let (Some(path), Some(f)) = (&ci_env.github_step_summary, fanout) {
        let table = TableSummary {
            heading: &f.heading,
            ok: status == crate::outcome::Status::Success,
            warn: false,
            reason: None,
            columns: f.columns,
            rows: &f.rows,
            details: &f.details,
        };
        if let Err(e) = ci::append_table_summary(path, &table) {
            r.warning(&format!(
                "could not write the step summary (GITHUB_STEP_SUMMARY): {e:#}"
            ));
        }
    } else if let (Some(path), Some(d)) = (&ci_env.github_step_summary, &st.drift) {
        if let Err(e) = drift_summary(path, d, &outputs) {
            r.warning(&format!(
                "could not write the step summary (GITHUB_STEP_SUMMARY): {e:#}"
            ));
        }
    } else if let Some(path) = &ci_env.github_step_summary {
        let page = match (cfg, &st.model_id, &st.chain_id) {
            (Some(cfg), Some(m), _) => cfg.endpoints.model_page(m),
            (Some(cfg), None, Some(c)) => cfg.endpoints.chain_page(c),
            _ => String::new(),
        };
        // A failed evidence gate says why in its own plain words; so does
        // a failure whose error also says what serves (the page says that
        // once, in its serves line).
        let evidence_reason = match result {
            Err(_) => crate::evidence::failed_reason(&st.evidence).or(st.reason.clone()),
            Ok(()) => None,
        };
        // A command other than deploy says what it did in its heading.
        let environment = cfg
            .and_then(|c| c.environment.as_deref())
            .or(st.serves.as_ref().map(|s| s.env.as_str()));
        let headline = match (command, &st.retirements, environment) {
            (ci::Command::Teardown | ci::Command::Prune, Some(r), _) => Some(r.headline()),
            (ci::Command::Rollback, _, env) => Some(crate::flow::switch::rollback_headline(
                &outputs,
                env.unwrap_or("the environment"),
            )),
            _ => None,
        };
        // The protected deployments are the retirements' own table on
        // the page (the notes carry them for --json and the log).
        let protected = st
            .retirements
            .as_ref()
            .map(|r| r.protected_lines())
            .unwrap_or_default();
        let notes: Vec<String> = st
            .notes
            .iter()
            .filter(|n| !protected.contains(n))
            .cloned()
            .collect();
        let input = SummaryInput {
            kind,
            outputs: &outputs,
            predict: st.predict,
            page_url: &page,
            notes: &notes,
            history: &st.history,
            promotion: &st.promotion,
            serves: st.serves.as_ref(),
            environment,
            reason: evidence_reason.as_deref(),
            headline: headline.as_deref(),
            // What the deploy changes in production, then the evidence:
            // sections of the one page, drawing on its one budget.
            sections: &[
                st.by_content
                    .markdown()
                    .map(|m| format!("\n{m}"))
                    .unwrap_or_default(),
                crate::evidence::markdown(&st.evidence),
                st.retirements
                    .as_ref()
                    .map(|r| r.markdown())
                    .unwrap_or_default(),
                st.retirements
                    .as_ref()
                    .map(|r| r.freed_markdown())
                    .unwrap_or_default(),
            ],
        };
        if let Err(e) = ci::append_step_summary(path, &input) {
            r.warning(&format!(
                "could not write the step summary (GITHUB_STEP_SUMMARY): {e:#}"
            ));
        }
    }
    if let Some((path, format)) = &out.file {
        match ci::write_outputs_file(path, *format, &outputs) {
            Ok(()) => written.push(format!("output-file ({})", path.display())),
            Err(e) => failed.push(("output-file", e)),
        }
    }
    let lost = !failed.is_empty();
    for (what, e) in failed {
        let readers = match written.as_slice() {
            [] => "later steps cannot read its outputs".to_string(),
            w => format!(
                "its outputs were written to {} only: steps that read {what} see none",
                w.join(" and ")
            ),
        };
        r.annotate(
            Level::Error,
            Some("outputs not written"),
            &format!(
                "{what}: {e:#}. The run ended {status}, but {readers}: point {what} at a writable file"
            ),
        );
    }
    r.finish();
    let drifted = st.drift.as_ref().is_some_and(|d| d.drifted);
    let code = match result {
        Ok(()) if lost => EXIT_OUTPUTS_NOT_WRITTEN,
        Ok(()) if drifted => EXIT_DRIFTED,
        Ok(()) => EXIT_SUCCESS,
        Err(f) => f.exit_code(),
    };
    // print-config already put its own document on stdout.
    if out.json && !cfg.is_some_and(|c| c.print_config) {
        let evidence = Some(&st.evidence[..]).filter(|e| !e.is_empty());
        r.data(&ci::render_result(
            &outputs,
            code,
            &st.history,
            &st.notes,
            evidence,
        ));
    }
    code
}

/// `command: drift`'s summary: the verdict (✅ every target in sync, ⚠️
/// one drifted, ❌ a read failed: why, in words), then one table, a row
/// per target: what serves each, the answer.
fn drift_summary(
    path: &std::path::Path,
    d: &crate::content::record::DriftFound,
    outputs: &Outputs,
) -> anyhow::Result<()> {
    let table = TableSummary {
        heading: &d.heading,
        ok: outputs.status == Status::Success,
        warn: d.drifted,
        reason: Some(outputs.error_message.as_str()).filter(|m| !m.is_empty()),
        columns: crate::content::record::DRIFT_COLUMNS,
        rows: &d.rows,
        details: &d.details,
    };
    ci::append_table_summary(path, &table)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hook's outputs name the deployment and never the key, whether
    /// the state is free or held by the thread that panicked; written by
    /// the same writers as every run's.
    #[test]
    fn a_panic_writes_outputs_naming_the_deployment_and_never_the_key() {
        const KEY: &str = "sk-panic-canary-3";
        secret::register(KEY);
        let state = Mutex::new(State {
            deployment_id: Some("dep1".into()),
            ..State::default()
        });
        let panic = format!("panicked at src/model.rs:1:1: key {KEY}");
        let outputs = panic_outputs(&state, &panic);
        assert_eq!(outputs.status, Status::DeployFailed);
        assert_eq!(outputs.deployment_id, "dep1");
        assert_eq!(
            outputs.error_message,
            "internal error: panicked at src/model.rs:1:1: key ***"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("github_output");
        ci::append_github_output(&path, &outputs).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("dep1") && !text.contains(KEY), "{text}");

        let held = state.lock().unwrap();
        let outputs = panic_outputs(&state, &panic);
        drop(held);
        assert_eq!(
            outputs.deployment_id, "",
            "a held state is skipped, not waited for"
        );
        assert!(outputs.error_message.starts_with("internal error:"));
    }
}
