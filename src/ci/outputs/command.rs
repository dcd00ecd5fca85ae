//! What a run was asked to do ([`Command`]) and, in ONE table
//! ([`DOTENV`]), the variables each command hands later GitLab jobs
//! through its dotenv report.
//!
//! GitLab refuses a dotenv artifact of more than 20 variables (the
//! self-managed default) or of 5 KB or more, and a refused artifact fails
//! the job after the deploy succeeded. So the dotenv file is not "every
//! output": it is a fixed, documented list per command, the scalar outputs
//! people branch on, most used first, each always written (empty when it
//! does not apply). JSON-valued outputs (`results`, `matrix`, and the ones
//! other commands add: `retired`, `drift-report`) are never in it; the
//! JSON outputs file (`--json`, kept by the GitLab components as the
//! artifact `truss-push.json`) holds every output.
//!
//! A new command (`cli::commands::Command`) adds its row to [`DOTENV`];
//! the tests below then hold its row to GitLab's limits.

pub(crate) use crate::cli::commands::Command;

/// One dotenv variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Var {
    /// The output of this name, as `TRUSS_PUSH_<NAME>` (`deployment-id`
    /// → `TRUSS_PUSH_DEPLOYMENT_ID`). `predict-response` brings
    /// `TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED` right after it.
    Output(&'static str),
    /// The output of this name under another name after `TRUSS_PUSH_`:
    /// a plan's status is the plan's, so it is not `TRUSS_PUSH_STATUS`.
    Renamed(&'static str, &'static str),
}

impl Var {
    /// The output the variable carries.
    pub(crate) fn output(self) -> &'static str {
        match self {
            Var::Output(o) | Var::Renamed(o, _) => o,
        }
    }
}

/// Each command's dotenv variables, most used first. A new command's row
/// goes here, one line with its `Command` value.
pub(crate) const DOTENV: &[(Command, &[Var])] = &[
    (
        Command::Deploy,
        &[
            Var::Output("status"),
            Var::Output("deployment-id"),
            Var::Output("model-id"),
            Var::Output("chain-id"),
            Var::Output("model-name"),
            Var::Output("error-message"),
            Var::Output("environment-url"),
            Var::Output("predict-url"),
            Var::Output("logs-url"),
            Var::Output("previous-deployment-id"),
            Var::Output("rolled-back"),
            Var::Output("unchanged"),
            Var::Output("reused"),
            Var::Output("targets-count"),
            Var::Output("cases-failed"),
            Var::Output("latency-p95-ms"),
            Var::Output("deploy-time-seconds"),
            Var::Output("predict-response"),
        ],
    ),
    (
        Command::Plan,
        &[
            Var::Renamed("status", "PLAN_STATUS"),
            Var::Output("targets-count"),
            Var::Output("error-message"),
        ],
    ),
    (
        Command::Teardown,
        &[
            Var::Output("status"),
            Var::Output("retired-count"),
            Var::Output("protected-count"),
            Var::Output("error-message"),
        ],
    ),
    (
        Command::Prune,
        &[
            Var::Output("status"),
            Var::Output("retired-count"),
            Var::Output("protected-count"),
            Var::Output("targets-count"),
            Var::Output("error-message"),
        ],
    ),
    (
        Command::Rollback,
        &[
            Var::Output("status"),
            Var::Output("deployment-id"),
            Var::Output("previous-deployment-id"),
            Var::Output("rolled-back"),
            Var::Output("model-id"),
            Var::Output("model-name"),
            Var::Output("error-message"),
            Var::Output("environment-url"),
            Var::Output("predict-url"),
            Var::Output("tested-deployment-id"),
            Var::Output("predict-response"),
        ],
    ),
    (
        Command::Drift,
        &[
            Var::Output("status"),
            Var::Output("drift"),
            Var::Output("targets-count"),
            Var::Output("error-message"),
        ],
    ),
];

/// The dotenv row of `command`.
pub(crate) fn dotenv_row(command: Command) -> &'static [Var] {
    DOTENV
        .iter()
        .find(|(c, _)| *c == command)
        .map_or(&[], |(_, row)| row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ci::outputs::{EXTRA_OUTPUT_NAMES, PYTHON_ACTION_OUTPUT_NAMES};

    /// The outputs whose value is JSON (and the ones the lifecycle
    /// commands add): never a dotenv variable.
    const JSON_OUTPUTS: &[&str] = &["results", "matrix", "retired", "drift-report"];

    /// GitLab's default cap on a dotenv report's variables.
    const DOTENV_MAX_VARS: usize = 20;

    /// How many variables a row writes: the predict response brings its
    /// `…_TRUNCATED` flag.
    fn variables_in(row: &[Var]) -> usize {
        row.len()
            + row
                .iter()
                .filter(|v| v.output() == "predict-response")
                .count()
    }

    /// Outputs that exist in some runs only (`Outputs::raw_entries`).
    const SOMETIMES: &[&str] = &[
        "unchanged",
        "reused",
        "retired-count",
        "protected-count",
        "drift",
        "matrix",
        "targets-count",
        "results",
        "cases-passed",
        "cases-failed",
        "latency-p50-ms",
        "latency-p95-ms",
        "baseline-p95-ms",
    ];

    #[test]
    fn every_command_has_one_row_within_gitlabs_limits_and_no_json() {
        for command in Command::ALL {
            let rows = DOTENV.iter().filter(|(c, _)| *c == command).count();
            assert_eq!(rows, 1, "{command:?}");
            let row = dotenv_row(command);
            assert!(variables_in(row) <= DOTENV_MAX_VARS, "{command:?}");
            let known = |o: &str| {
                PYTHON_ACTION_OUTPUT_NAMES.contains(&o)
                    || EXTRA_OUTPUT_NAMES.contains(&o)
                    || SOMETIMES.contains(&o)
            };
            for var in row {
                assert!(!JSON_OUTPUTS.contains(&var.output()), "{var:?}");
                assert!(known(var.output()), "{var:?} is no output");
            }
            let mut names: Vec<&str> = row.iter().map(|v| v.output()).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), row.len(), "{command:?}: a variable twice");
        }
    }

    #[test]
    fn a_plans_row_never_says_a_deploys_status() {
        let row = dotenv_row(Command::Plan);
        assert!(!row.contains(&Var::Output("status")));
        assert!(row.contains(&Var::Renamed("status", "PLAN_STATUS")));
    }
}
