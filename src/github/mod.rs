//! GitHub, where reviewers look: a deployment with its statuses (the URL
//! that serves predictions, the logs), one pull-request comment per model
//! or chain kept up to date, and a commit status.
//!
//! Everything here is best effort. A missing token, a missing permission
//! or a GitHub outage is a warning that names the permission to add; it
//! never fails the deploy and never holds it for long. The token goes only
//! to `GITHUB_API_URL` (GitHub Enterprise Server included), over HTTPS or
//! to loopback; the Baseten key never goes there, because nothing here
//! holds it.

mod client;
mod comment;
mod pr_comment;
mod replaced;
mod teardown;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use reqwest::{Method, Url};
use serde_json::{Value, json};

use crate::baseten::Endpoints;
use crate::budget::{Budget, Phase};
use crate::ci::{Outputs, PredictStats, Reporter};
use crate::env_vars as ev;
use crate::flow::State;
use crate::kind::Kind;
use crate::outcome::Failure;
use client::{CREATE, Client, Due, GhError, REPEATABLE};
pub(crate) use client::{is_valid_repository, may_carry_token};

/// Comments read while looking for ours, 100 a page: a pull request with
/// more has bigger problems than a second comment.
const COMMENT_PAGES_MAX: u32 = 10;
const COMMENTS_PER_PAGE: usize = 100;

/// The three features, each with the workflow permission it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Feature {
    Deployment,
    Comment,
    CommitStatus,
}

impl Feature {
    fn permission(self) -> &'static str {
        match self {
            Feature::Deployment => "deployments: write",
            Feature::Comment => "pull-requests: write",
            Feature::CommitStatus => "statuses: write",
        }
    }

    fn input(self) -> &'static str {
        match self {
            Feature::Deployment => "github-deployment",
            Feature::Comment => "pr-comment",
            Feature::CommitStatus => "commit-status",
        }
    }
}

/// The warning for a GitHub call that failed: what was tried, what GitHub
/// said, and the permission to add. The deploy goes on either way.
fn failure_warning(feature: Feature, what: &str, e: &GhError) -> String {
    let perm = feature.permission();
    let why = match e.status() {
        Some(401) => "the token was not accepted; check github-token".to_string(),
        Some(403 | 404) => {
            format!("the token may not do this; add `{perm}` to the job's `permissions:`")
        }
        Some(s) if s >= 500 => {
            format!("GitHub is having trouble; nothing to change here (the job needs `{perm}`)")
        }
        _ => format!("the job needs `{perm}` in its `permissions:`"),
    };
    format!("GitHub: could not {what} ({e}): {why}. The deploy itself is not affected.")
}

/// The GitHub deployment state a finished run reports: `success`, a
/// `failure` of the deploy or its smoke test, or an `error` that stopped
/// the run (the deadline, a signal, cleanup).
pub(crate) fn final_state(result: &Result<(), Failure>) -> &'static str {
    match result {
        Ok(()) => "success",
        Err(Failure::Deploy(_) | Failure::Predict(_)) => "failure",
        Err(
            Failure::Timeout(_)
            | Failure::Cleanup(_)
            | Failure::Cancelled(_)
            | Failure::CleanupUnfinished { .. }
            | Failure::InvalidInput(_),
        ) => "error",
    }
}

/// The GitHub environment a deploy is recorded in: the Baseten environment,
/// or `baseten-<name>` (transient) for a deployment outside any.
fn environment_for(environment: Option<&str>, name: &str) -> (String, bool) {
    match environment {
        Some(e) => (e.to_string(), false),
        None => (format!("baseten-{name}"), true),
    }
}

/// What GitHub reporting needs of one target, and nothing more: the
/// reporting settings (the GitHub token among them), what is deployed and
/// where its pages are. Never the Baseten key, which no value here holds.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub(crate) settings: crate::settings::github::Settings,
    pub(crate) kind: Kind,
    /// The name known when the run starts (a chain's may come later).
    pub(crate) name: String,
    pub(crate) environment: Option<String>,
    /// The platform's pages, for the links in statuses and the comment.
    pub(crate) endpoints: Endpoints,
    /// The pull-request label's value (`<owner>/<repo>#<n>`), recorded in
    /// the deployment's payload so a teardown marks only this pull
    /// request's deployments inactive.
    pub(crate) pull_request: Option<String>,
}

/// One run's GitHub reporting.
pub(crate) struct Session {
    client: Client,
    rep: Arc<Mutex<Reporter>>,
    deployment: bool,
    pr_comment: Option<u64>,
    commit_status: bool,
    sha: Option<String>,
    run_url: Option<String>,
    kind: Kind,
    environment: Option<String>,
    /// The name known when the run starts (a chain's may come later).
    early_name: String,
    endpoints: Endpoints,
    /// The pull-request label's value, for the deployment's payload.
    pull_request: Option<String>,
    /// The GitHub deployment, once created.
    deployment_id: Mutex<Option<u64>>,
    /// Whether GitHub counts its environment as production (its answer's
    /// `production_environment`): then GitHub leaves earlier deployments
    /// active, and this run marks the one it replaces inactive.
    production: Mutex<bool>,
    /// Whether `begin` ran: a run refused before it reports nothing.
    begun: Mutex<bool>,
    /// Features GitHub refused (401, 403, 404): asking again would only
    /// repeat the warning.
    refused: Mutex<BTreeSet<Feature>>,
}

impl Session {
    /// The session for `job`, or `None` when no GitHub feature is on, or
    /// something the features need is missing — which is said once, as a
    /// warning.
    pub(crate) fn open(
        job: Job,
        net: &crate::net::Network,
        rep: &Arc<Mutex<Reporter>>,
    ) -> Option<Session> {
        let s = &job.settings;
        if !s.any() {
            return None;
        }
        let warn = |msg: String| {
            rep.lock().unwrap().warning(&msg);
            None
        };
        let asked: Vec<&str> = [
            (s.deployment, Feature::Deployment),
            (s.pr_comment, Feature::Comment),
            (s.commit_status, Feature::CommitStatus),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, f)| f.input())
        .collect();
        let asked = asked.join(", ");
        let Some(token) = s.token.clone() else {
            return warn(format!(
                "GitHub: {asked} is on but no github-token was given, so GitHub is skipped: pass github-token: ${{{{ github.token }}}} and grant the job the permissions it needs (deployments: write, pull-requests: write, statuses: write). The deploy itself is not affected."
            ));
        };
        let Some(repo) = s.repository.clone().filter(|r| is_valid_repository(r)) else {
            return warn(format!(
                "GitHub: {asked} is on but {} is {:?}, not owner/name, so GitHub is skipped: it is set by GitHub Actions; elsewhere set it by hand.",
                ev::GITHUB_REPOSITORY,
                s.repository.clone().unwrap_or_default()
            ));
        };
        let base = match Url::parse(&s.api) {
            Ok(u) if may_carry_token(&u) => u,
            Ok(_) => {
                return warn(format!(
                    "GitHub: {} is {}: the token is only sent over HTTPS (plain http to loopback only), so GitHub is skipped.",
                    ev::GITHUB_API_URL,
                    s.api
                ));
            }
            Err(e) => {
                return warn(format!(
                    "GitHub: {} is not a URL ({e}): {:?}, so GitHub is skipped.",
                    ev::GITHUB_API_URL,
                    s.api
                ));
            }
        };
        let http = net.api_client();
        let mut deployment = s.deployment;
        let mut commit_status = s.commit_status;
        if s.sha.is_none() && (deployment || commit_status) {
            rep.lock().unwrap().warning(&format!(
                "GitHub: no commit is known ({} is not set), so the GitHub deployment and the commit status are skipped.",
                ev::GITHUB_SHA
            ));
            deployment = false;
            commit_status = false;
        }
        let pr_comment = if s.pr_comment { s.pull_request } else { None };
        if s.pr_comment && pr_comment.is_none() {
            rep.lock()
                .unwrap()
                .line("GitHub: not a pull request, so no pull-request comment.");
        }
        Some(Session {
            client: Client::new(http, base, token, repo),
            rep: Arc::clone(rep),
            deployment,
            pr_comment,
            commit_status,
            sha: s.sha.clone(),
            run_url: s.run_url.clone(),
            kind: job.kind,
            environment: job.environment.clone(),
            early_name: job.name.clone(),
            endpoints: job.endpoints.clone(),
            pull_request: job.pull_request.clone(),
            deployment_id: Mutex::new(None),
            production: Mutex::new(false),
            begun: Mutex::new(false),
            refused: Mutex::new(BTreeSet::new()),
        })
    }

    fn warn(&self, feature: Feature, what: &str, e: &GhError) {
        if matches!(e.status(), Some(401 | 403 | 404)) {
            self.refused.lock().unwrap().insert(feature);
        }
        let msg = failure_warning(feature, what, e);
        self.rep.lock().unwrap().warning(&msg);
    }

    /// Whether `feature` is still worth a request.
    fn open_for(&self, feature: Feature) -> bool {
        !self.refused.lock().unwrap().contains(&feature)
    }

    fn context(&self, name: &str) -> String {
        format!("truss-push / {} {name}", self.kind.as_str())
    }

    /// The deploy starts: a GitHub deployment in progress and a pending
    /// commit status, by the deadline the run's budget gives the start
    /// (`Phase::Announce`: a few seconds, within the deploy's budget).
    pub(crate) async fn begin(&self, budget: &Budget) {
        *self.begun.lock().unwrap() = true;
        let until = self.due(budget, Phase::Announce);
        let left = budget.left(until);
        if tokio::time::timeout(left, self.begin_unbounded())
            .await
            .is_err()
        {
            self.rep.lock().unwrap().warning(&format!(
                "GitHub: no answer within {} while recording the start, so it is left unrecorded. The deploy itself is not affected.",
                crate::ci::human(left)
            ));
        }
    }

    /// `phase`'s deadline from the run's budget, which every request of
    /// the client is held to from now on.
    fn due(&self, budget: &Budget, phase: Phase) -> std::time::Instant {
        let until = budget.deadline(phase);
        self.client.set_due(Due {
            phase,
            until,
            clock: budget.clock().clone(),
        });
        until
    }

    async fn begin_unbounded(&self) {
        let Some(sha) = self.sha.as_deref() else {
            return;
        };
        let name = &self.early_name;
        if self.deployment {
            let (environment, transient) = environment_for(self.environment.as_deref(), name);
            let body = json!({
                "ref": sha,
                "task": "deploy",
                "environment": environment,
                "transient_environment": transient,
                // The commit is deployed as it is: no merge of the default
                // branch, and no wait on other checks.
                "auto_merge": false,
                "required_contexts": [],
                "description": comment::cut(&format!("Baseten: {name}"), comment::DESCRIPTION_MAX_CHARS),
                "payload": {"truss_push": match &self.pull_request {
                    Some(pr) => json!({"name": name, "pull_request": pr}),
                    None => json!({"name": name}),
                }},
            });
            match self
                .client
                .send(&CREATE, Method::POST, &["deployments"], &[], Some(&body))
                .await
            {
                Ok(v) => match v.get("id").and_then(Value::as_u64) {
                    Some(id) => {
                        *self.deployment_id.lock().unwrap() = Some(id);
                        *self.production.lock().unwrap() = v
                            .get("production_environment")
                            .and_then(Value::as_bool)
                            .unwrap_or(false);
                        self.say(&format!(
                            "GitHub: deployment {id} in environment {environment}"
                        ));
                        let mut status = json!({
                            "state": "in_progress",
                            "description": "Deploying to Baseten",
                        });
                        if let Some(u) = &self.run_url {
                            status["log_url"] = json!(u);
                        }
                        let path = ["deployments", &id.to_string(), "statuses"];
                        if let Err(e) = self
                            .client
                            .send(&REPEATABLE, Method::POST, &path, &[], Some(&status))
                            .await
                        {
                            self.warn(Feature::Deployment, "mark the deployment in progress", &e);
                        }
                    }
                    None => self.warn(
                        Feature::Deployment,
                        "create a deployment",
                        &GhError::Refused("the answer has no deployment id".into()),
                    ),
                },
                Err(e) => self.warn(Feature::Deployment, "create a deployment", &e),
            }
        }
        if self.commit_status && self.open_for(Feature::CommitStatus) {
            let link = self.run_url.clone();
            self.commit_status(sha, "pending", name, "Deploying to Baseten", link)
                .await;
        }
    }

    /// [`Session::finish`] by the deadline the run's budget gives the end
    /// (`Phase::Report`: out of what cleanup left of its minute, a few
    /// seconds after a signal; never past the run's end), and only until
    /// `stop` (the next signal) arrives: the outputs are written after it,
    /// whatever GitHub does.
    pub(crate) async fn finish_within(
        &self,
        result: &Result<(), Failure>,
        outputs: &Outputs,
        state: &Mutex<State>,
        budget: &Budget,
        stop: impl Future,
    ) {
        let (predict, page, changes) = {
            let st = state.lock().unwrap();
            let page = match (&st.model_id, &st.chain_id) {
                (Some(m), _) => self.endpoints.model_page(m),
                (None, Some(c)) => self.endpoints.chain_page(c),
                _ => String::new(),
            };
            (st.predict, page, st.by_content.markdown())
        };
        if !*self.begun.lock().unwrap() {
            return;
        }
        let until = self.due(budget, Phase::Report);
        let left = budget.left(until);
        if left.is_zero() {
            self.rep.lock().unwrap().warning(
                "GitHub: the run's time is spent (cleanup took the last of it), so the end of the run is not reported there and its statuses may still say it is in progress. The deploy itself is not affected.",
            );
            return;
        }
        tokio::select! {
            () = self.finish(result, outputs, predict, &page, changes.as_deref()) => {}
            _ = tokio::time::sleep(left) => {
                self.rep.lock().unwrap().warning(&format!(
                    "GitHub: still busy after {} at the end of the run, so its statuses or comment may be out of date. The deploy itself is not affected.",
                    crate::ci::human(left)
                ));
            }
            _ = stop => {}
        }
    }

    fn say(&self, msg: &str) {
        self.rep.lock().unwrap().line(msg);
    }

    /// The run ended: the deployment's final status, the pull-request
    /// comment and the commit status. `outputs` are the run's, redacted.
    async fn finish(
        &self,
        result: &Result<(), Failure>,
        outputs: &Outputs,
        predict: Option<PredictStats>,
        page_url: &str,
        changes: Option<&str>,
    ) {
        if !*self.begun.lock().unwrap() {
            return;
        }
        let state = final_state(result);
        let description = comment::description(outputs);
        let name = if outputs.model_name.is_empty() {
            self.early_name.clone()
        } else {
            outputs.model_name.clone()
        };
        let link = [&outputs.logs_url, &page_url.to_string()]
            .into_iter()
            .find(|u| !u.is_empty())
            .cloned()
            .or_else(|| self.run_url.clone());
        let deployment_id = *self.deployment_id.lock().unwrap();
        if let Some(id) = deployment_id
            && self.open_for(Feature::Deployment)
        {
            let served = [&outputs.environment_url, &outputs.predict_url]
                .into_iter()
                .find(|u| !u.is_empty());
            let mut body = json!({
                "state": state,
                "description": description,
                // Earlier deployments of the same environment stop showing
                // as active once this one serves it.
                "auto_inactive": state == "success" && self.environment.is_some(),
            });
            if let Some(u) = served {
                body["environment_url"] = json!(u);
            }
            if let Some(u) = &link {
                body["log_url"] = json!(u);
            }
            let path = ["deployments", &id.to_string(), "statuses"];
            match self
                .client
                .send(&REPEATABLE, Method::POST, &path, &[], Some(&body))
                .await
            {
                Ok(_) => {
                    self.say(&format!("GitHub: deployment {id} is {state}"));
                    if state == "success" && *self.production.lock().unwrap() {
                        self.retire_replaced(id).await;
                    }
                }
                Err(e) => self.warn(Feature::Deployment, "set the deployment's status", &e),
            }
        }
        if let Some(pr) = self.pr_comment
            && self.open_for(Feature::Comment)
        {
            #[expect(
                clippy::disallowed_methods,
                reason = "a wall-clock stamp in the PR comment, not a deadline"
            )]
            let at = crate::ci::format_utc(std::time::SystemTime::now());
            let body = comment::render(&comment::View {
                kind: self.kind,
                outputs,
                predict,
                page_url,
                sha: self.sha.as_deref(),
                at: &at,
                changes,
            });
            let marker = comment::marker(self.kind, &outputs.model_name);
            self.upsert_comment(pr, &marker, &body).await;
        }
        if self.commit_status
            && self.open_for(Feature::CommitStatus)
            && let Some(sha) = self.sha.as_deref()
        {
            self.commit_status(sha, state, &name, &description, link.clone())
                .await;
            // The name codegen found differs from the one the code reads
            // as: the pending status opened under the early name ends too.
            if name != self.early_name {
                let moved = comment::cut(
                    &format!("{description} (see {})", self.context(&name)),
                    comment::DESCRIPTION_MAX_CHARS,
                );
                self.commit_status(sha, state, &self.early_name, &moved, link)
                    .await;
            }
        }
    }

    /// Sets the commit status of `sha` for the model or chain `name`,
    /// linking `link`; a refusal is a warning.
    async fn commit_status(
        &self,
        sha: &str,
        state: &str,
        name: &str,
        description: &str,
        link: Option<String>,
    ) {
        let mut body = json!({
            "state": state,
            "context": self.context(name),
            "description": description,
        });
        if let Some(u) = link {
            body["target_url"] = json!(u);
        }
        if let Err(e) = self
            .client
            .send(
                &REPEATABLE,
                Method::POST,
                &["statuses", sha],
                &[],
                Some(&body),
            )
            .await
        {
            self.warn(Feature::CommitStatus, "set the commit status", &e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_environments() {
        assert_eq!(final_state(&Ok(())), "success");
        assert_eq!(
            final_state(&Err(Failure::Deploy(anyhow::anyhow!("x")))),
            "failure"
        );
        assert_eq!(
            final_state(&Err(Failure::Predict(anyhow::anyhow!("x")))),
            "failure"
        );
        assert_eq!(final_state(&Err(Failure::Timeout("x".into()))), "error");
        assert_eq!(
            final_state(&Err(Failure::Cancelled(
                crate::outcome::CancelReason::Signal("SIGINT")
            ))),
            "error"
        );
        assert_eq!(
            environment_for(Some("production"), "m"),
            ("production".into(), false)
        );
        assert_eq!(environment_for(None, "m"), ("baseten-m".into(), true));
    }

    #[test]
    fn warnings_name_the_permission() {
        let e = GhError::Status {
            status: 403,
            message: "Resource not accessible by integration".into(),
            retry_after: None,
        };
        let w = failure_warning(Feature::Comment, "comment on the pull request", &e);
        assert!(w.contains("`pull-requests: write`"), "{w}");
        assert!(w.contains("HTTP 403: Resource not accessible"), "{w}");
        let e = GhError::Status {
            status: 503,
            message: String::new(),
            retry_after: None,
        };
        let w = failure_warning(Feature::Deployment, "create a deployment", &e);
        assert!(
            w.contains("`deployments: write`") && w.contains("HTTP 503"),
            "{w}"
        );
        let w = failure_warning(
            Feature::CommitStatus,
            "set the commit status",
            &GhError::NotSent("could not connect".into()),
        );
        assert!(w.contains("`statuses: write`"), "{w}");
    }
}
