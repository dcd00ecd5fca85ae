//! The commands the step runs, and the one table of the inputs each
//! command reads ([`Command::reads`]): `--help`, the generated reference and
//! the refusal of an input a command does not read all come from it.

use super::Input;

/// What the step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Deploy each target (today's behaviour).
    Deploy,
    /// Print the targets as a CI matrix; deploy nothing.
    Plan,
    /// Retire a pull request's previews in every model the key sees.
    Teardown,
    /// Retire the old deployments of the targets' models.
    Prune,
    /// Put back the deployment that served an environment before.
    Rollback,
    /// Say whether what serves matches the repository.
    Drift,
}

impl Command {
    /// Every command, in the order `--help` lists them.
    pub const ALL: [Command; 6] = [
        Command::Deploy,
        Command::Plan,
        Command::Teardown,
        Command::Prune,
        Command::Rollback,
        Command::Drift,
    ];

    /// The command as the input spells it.
    pub fn word(self) -> &'static str {
        match self {
            Command::Deploy => "deploy",
            Command::Plan => "plan",
            Command::Teardown => "teardown",
            Command::Prune => "prune",
            Command::Rollback => "rollback",
            Command::Drift => "drift",
        }
    }

    /// Whether this command reads `input`. Every command reads the key,
    /// the hosts, the outputs and the budget; `deploy` and `plan` read
    /// every input but the lifecycle ones (`pull-request` labels a deploy).
    pub fn reads(self, input: Input) -> bool {
        use Input as I;
        let every = matches!(
            input,
            I::Command
                | I::Plan
                | I::BasetenApiKey
                | I::AppUrl
                | I::ApiUrl
                | I::InferenceUrl
                | I::S3Endpoint
                | I::OutputFile
                | I::OutputFormat
                | I::Json
                | I::Team
                // The action passes `${{ github.token }}` to every step.
                | I::GithubToken
                | I::DeployTimeoutMinutes
                | I::WaitTimeoutSeconds
                | I::PollIntervalSeconds
        );
        // The targets, as every command but teardown names them (teardown
        // takes them too, and needs none: its previews may be of a model
        // the pull request renamed).
        let targets = matches!(
            input,
            I::TrussDirectory | I::ModelName | I::ChangedSince | I::MaxParallel | I::FailFast
        );
        let github = matches!(input, I::GithubDeployment | I::PrComment | I::CommitStatus);
        let environment = matches!(input, I::Environment | I::Promote);
        let smoke = matches!(
            input,
            I::PredictPayload
                | I::PredictTimeout
                | I::RegionalEnvironment
                | I::PredictCases
                | I::PredictRequests
                | I::PredictConcurrency
                | I::PredictWarmup
                | I::MaxErrorRate
                | I::MaxLatencyP95Ms
                | I::MaxLatencyRegression
                | I::AnalysisFile
                | I::StreamLogs
        );
        let lifecycle_only = matches!(
            input,
            I::Retire | I::Keep | I::OlderThan | I::PruneUnlabelled | I::ToDeployment
        );
        every
            || match self {
                Command::Deploy | Command::Plan => !lifecycle_only,
                Command::Teardown => {
                    targets || github || matches!(input, I::PullRequest | I::Retire | I::DryRun)
                }
                Command::Prune => {
                    targets
                        || matches!(
                            input,
                            I::Retire | I::Keep | I::OlderThan | I::PruneUnlabelled | I::DryRun
                        )
                }
                Command::Rollback => {
                    targets
                        || github
                        || environment
                        || smoke
                        || matches!(input, I::ToDeployment | I::DryRun)
                }
                Command::Drift => targets || environment,
            }
    }
}
