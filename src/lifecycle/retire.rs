//! The part `teardown` and `prune` share once they know their models: for
//! each model, the reads that decide (its environments, then its audit
//! log's promotions when anything in scope is not protected already), the
//! verdicts of the pure rules recorded in the run's state, and the
//! retirements performed [`RETIRE_AT_ONCE`] at a time, each after its own
//! fresh reading of the model's environments. Every retirement is recorded
//! the moment it lands, so a cancelled run reports what it did.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;

use super::{Action, Age, Protected, Retire, Scope, Seen, Verdict};
use crate::baseten::audit::{self, PLACEMENT_GROUPS};
use crate::baseten::{Api, AuditEntry, Deletion, id};
use crate::budget::{Budget, Phase};
use crate::ci::Reporter;
use crate::flow::State;
use crate::flow::retired::{Kept, RetiredEntry, Retirements};
use crate::handles::Run;
use crate::history::{self, Previous, Promoted};
use crate::kind::Kind;
use crate::outcome::{CancelReason, Failure};
use crate::promotion::Env;
use crate::secret::Secret;
use crate::settings::Settings;
use crate::status;

/// Retirements in flight at once: a few, so 500 deployments through a
/// 100 ms round trip (a fresh environments read and the retirement each)
/// take about 500 × 0.2 s / 8 ≈ 13 s, and the platform never sees a burst.
pub(crate) const RETIRE_AT_ONCE: usize = 8;
/// Models read at once (their deployments, environments, audit log).
pub(crate) const MODELS_AT_ONCE: usize = 4;

/// What a command's retirements run with.
pub(crate) struct Job<'a> {
    /// Its requests end by the run's deadline for them.
    pub(crate) api: Api,
    /// The run's budget, built once: the GitHub report after a teardown
    /// asks it for its deadline too.
    pub(crate) budget: Budget,
    pub(crate) rep: &'a Arc<Mutex<Reporter>>,
    pub(crate) state: &'a Arc<Mutex<State>>,
    pub(crate) retire: Retire,
    pub(crate) dry_run: bool,
    /// The run's start, in seconds since the epoch: ages are measured to it.
    pub(crate) now: i64,
}

/// The job a teardown or a prune runs with: the platform's client for
/// `key`, its requests ending by the run's deadline for them, and the
/// run's record started.
pub(crate) fn job<'a>(
    run: &'a Run,
    command: &'static str,
    settings: &Settings,
    retire: Retire,
    key: &Secret,
) -> Result<Job<'a>, Failure> {
    let net = run.platform(key)?.net;
    if let Some(w) = net.take_roots_warning() {
        run.rep.lock().unwrap().warning(&w);
    }
    let retry_log = Arc::clone(&run.rep);
    let budget = Budget::new(run.started, settings.wait_timeout, settings.predict_timeout)
        .on(run.clock.clone());
    let api = Api::new(net.api_client(), settings.endpoints.clone(), key.clone())
        .with_retry_notes(Arc::new(move |line: &str| {
            retry_log.lock().unwrap().line(line)
        }))
        .on(run.clock.clone())
        .within(Phase::Setup, budget.deadline(Phase::Setup));
    run.state.lock().unwrap().retirements = Some(Retirements {
        command,
        ..Retirements::default()
    });
    Ok(Job {
        api,
        budget,
        rep: &run.rep,
        state: &run.state,
        retire,
        dry_run: settings.dry_run,
        now: i64::try_from(crate::baseten::now_epoch_millis() / 1000).unwrap_or(i64::MAX),
    })
}

/// Runs `work` (a teardown's or a prune's) raced against the run's
/// signals, and ends it: `cleanup_failed` when a retirement failed or a
/// model's deciding read did not decide; a signal is a cancel (exit 130)
/// whose `retired` lists what landed before it.
pub(crate) async fn finish(
    run: &Run,
    work: impl Future<Output = Result<(), String>>,
) -> Result<(), Failure> {
    let mut signals = run.signals().await;
    let done = tokio::select! {
        r = work => r.map_err(|e| Failure::Cleanup(anyhow::anyhow!(e))),
        sig = signals.next() => {
            run.rep.lock().unwrap().finish();
            Err(Failure::Cancelled(CancelReason::Signal(sig)))
        }
    };
    let mut st = run.state.lock().unwrap();
    if let Some(r) = st.retirements.as_mut() {
        r.sort();
    }
    let r = st.retirements.clone().unwrap_or_default();
    st.notes.extend(r.protected_lines());
    if let Err(Failure::Cancelled(_)) = &done {
        // Sent, unanswered when the signal came: the platform may have
        // carried them out; `retired` lists only what it confirmed.
        st.notes.extend(r.in_flight.iter().map(|f| {
            format!("{f}: its retirement was sent when the run was cancelled and may have happened; check it in Baseten")
        }));
    }
    done?;
    let mut problems: Vec<String> = r.failed.clone();
    problems.extend(
        r.undecided
            .iter()
            .map(|(m, why)| format!("nothing retired in {m}: {why}")),
    );
    match problems.as_slice() {
        [] => Ok(()),
        p => Err(Failure::Cleanup(anyhow::anyhow!(
            "{}: {} retired, but not everything it selected: {}",
            r.command,
            r.retired.len(),
            p.join("; ")
        ))),
    }
}

/// One model (or chain) the command looks at: every read and retirement
/// switches on its kind, so the rules stay one copy for both.
#[derive(Clone, Debug)]
pub(crate) struct Model {
    pub(crate) kind: Kind,
    pub(crate) id: String,
    /// As [`super::shown_name`] made it.
    pub(crate) name: String,
}

impl Model {
    /// `model NAME` or `chain NAME`, for the run's lines.
    pub(crate) fn shown(&self) -> String {
        format!("{} {}", self.kind.as_str(), self.name)
    }
}

/// A deployment the rules chose to retire.
#[derive(Clone, Debug)]
pub(crate) struct Pick {
    pub(crate) model: Model,
    pub(crate) seen: Seen,
    /// The reading of the model's environments the decision was made from.
    pub(crate) listed: Arc<Vec<(String, Env)>>,
    /// The model's deployments the listing shows never served (building,
    /// deploying, or failed to): their audit entries changed nothing.
    pub(crate) never: Arc<Never>,
}

impl Job<'_> {
    fn record(&self, f: impl FnOnce(&mut Retirements)) {
        let mut st = self.state.lock().unwrap();
        f(st.retirements.get_or_insert_with(Retirements::default));
    }

    fn say(&self, line: &str) {
        self.rep.lock().unwrap().line(line);
    }

    fn warn(&self, line: &str) {
        self.rep.lock().unwrap().warning(line);
    }

    fn age(&self, d: &Seen) -> Option<i64> {
        d.created.map(|c| self.now.saturating_sub(c).max(0))
    }

    fn kept(&self, model: &Model, d: &Seen, why: String) -> Kept {
        Kept {
            model_name: model.name.clone(),
            deployment_id: d.id.clone(),
            deployment_name: d.name.clone(),
            status: d.status.clone(),
            age_seconds: self.age(d),
            why,
        }
    }

    /// Something the run says about what it did not look at.
    pub(crate) fn note(&self, line: String) {
        self.say(&line);
        self.record(|r| r.notes.push(line));
    }

    /// A model whose deciding read failed or did not decide: nothing of it
    /// is retired, and the run says why.
    pub(crate) fn undecided(&self, model: &Model, why: String) {
        self.warn(&format!(
            "nothing retired in {} ({}): {why}",
            model.shown(),
            model.id
        ));
        self.record(|r| r.undecided.push((model.shown(), why)));
    }

    /// Reads what decides for `model` and records the verdicts on its
    /// `deployments`; returns what to retire. A failed or undeciding read
    /// records the model as undecided and returns nothing.
    pub(crate) async fn assess(
        &self,
        model: &Model,
        deployments: &[Seen],
        scope: &Scope,
        age: Option<Age>,
    ) -> Vec<Pick> {
        if !deployments.iter().any(|d| scope.selects(d)) {
            return Vec::new();
        }
        // One deployment listed twice contradicts itself (building in one
        // entry, settled in the other): which is true is not known.
        let mut ids = HashSet::new();
        if let Some(twice) = deployments.iter().find(|d| !ids.insert(d.id.as_str())) {
            self.undecided(
                model,
                format!(
                    "the listing of its deployments names deployment {} twice, so what it says of it is not known",
                    twice.id
                ),
            );
            return Vec::new();
        }
        let envs = match self.api.environment_readings(model.kind, &model.id).await {
            Ok(e) => e,
            Err(e) => {
                self.undecided(model, format!("its environments could not be read: {e}"));
                return Vec::new();
            }
        };
        if let Some(env) = super::unnamed_candidate(&envs) {
            self.undecided(
                model,
                format!(
                    "a promotion into {env} is moving traffic and the platform's answer names no candidate, so which deployment takes part of the traffic is not known"
                ),
            );
            return Vec::new();
        }
        let never: Arc<Never> = Arc::new(
            deployments
                .iter()
                .filter(|d| status::never_served(&d.status))
                .map(|d| (d.id.clone(), built_never(&d.status)))
                .collect(),
        );
        let first = super::guards(&envs, &[]);
        let open = deployments
            .iter()
            .any(|d| scope.selects(d) && super::protection(d, &first).is_none());
        let previous = match open {
            true => match previous_serving(&self.api, model, &envs, &never).await {
                Ok(p) => p,
                Err(why) => {
                    self.undecided(model, why);
                    return Vec::new();
                }
            },
            false => Vec::new(),
        };
        let guards = super::guards(&envs, &previous);
        let listed = Arc::new(envs);
        let verdicts = super::select(deployments, scope, self.retire, age, &guards);
        let mut picks = Vec::new();
        for (d, v) in verdicts {
            match v {
                Verdict::Retire => picks.push(Pick {
                    model: model.clone(),
                    seen: d,
                    listed: Arc::clone(&listed),
                    never: Arc::clone(&never),
                }),
                Verdict::Protected(p) => {
                    self.say(&format!(
                        "Protected: deployment {} of {} ({}): it {}",
                        shown(&d),
                        model.shown(),
                        d.status,
                        p.describe()
                    ));
                    let k = self.kept(model, &d, p.describe());
                    self.record(|r| r.protected.push(k));
                }
                Verdict::Kept(rank) => {
                    let k = self.kept(
                        model,
                        &d,
                        format!("kept: the {} newest retirable (keep)", ordinal(rank)),
                    );
                    self.record(|r| r.kept.push(k));
                }
                Verdict::TooRecent => {
                    let k = self.kept(model, &d, "kept: not older than older-than".into());
                    self.record(|r| r.kept.push(k));
                }
                Verdict::AlreadyInactive => {
                    let k = self.kept(model, &d, "inactive already".into());
                    self.record(|r| r.kept.push(k));
                }
            }
        }
        picks
    }

    /// Retires every pick, [`RETIRE_AT_ONCE`] at a time, then says the
    /// hourly floor they freed (`freed`: a read that only informs).
    pub(crate) async fn retire_all(&self, picks: Vec<Pick>) {
        futures_util::stream::iter(picks)
            .map(|p| async move { self.retire_one(&p).await })
            .buffer_unordered(RETIRE_AT_ONCE)
            .collect::<Vec<()>>()
            .await;
        self.say_freed().await;
    }

    /// Says the hourly floor the retirements freed (`freed`), in the
    /// record's stable order whatever order they finished in.
    async fn say_freed(&self) {
        let mut retired = Vec::new();
        self.record(|r| {
            r.sort();
            retired = r.retired.clone();
        });
        let freed = super::freed::weigh(&self.api, &self.budget, &retired, self.dry_run).await;
        if let Some(line) = freed {
            self.say(&line);
            self.record(|r| r.freed = Some(line));
        }
    }

    async fn retire_one(&self, p: &Pick) {
        let Pick {
            model,
            seen: d,
            listed,
            never,
        } = p;
        let action = Action::of(self.retire, self.dry_run);
        let entry = || RetiredEntry {
            model_name: model.name.clone(),
            model_id: model.id.clone(),
            deployment_id: d.id.clone(),
            deployment_name: d.name.clone(),
            action: action.word(),
            status: d.status.clone(),
            age_seconds: self.age(d),
            instance_type: d.instance_type.clone(),
            min_replica: d.min_replica,
        };
        let shown = shown(d);
        if self.dry_run {
            self.say(&format!(
                "Dry run: {} deployment {shown} of {}",
                action.word(),
                model.shown()
            ));
            self.record(|r| r.retired.push(entry()));
            return;
        }
        // Just before the retirement: what serves and what is being
        // promoted, read again (a promotion started since the listing
        // protects its deployments).
        let fresh: Vec<(String, Env)> = match self
            .api
            .environment_readings(model.kind, &model.id)
            .await
        {
            Ok(f) => f,
            Err(e) => {
                let why = format!(
                    "deployment {shown} of {} not retired: its environments could not be read again just before ({e})",
                    model.shown()
                );
                self.warn(&why);
                self.record(|r| r.failed.push(why));
                return;
            }
        };
        let kept = match super::still_free(&d.id, listed, &fresh) {
            // What serves changed since the listing: the audit log, read
            // again, says what served before the new one (undecided or
            // unreadable: kept).
            Some(Protected::Changed(env)) => {
                match previous_serving(&self.api, model, &fresh, never).await {
                    Ok(previous) => previous
                        .into_iter()
                        .find(|(_, id)| *id == d.id)
                        .map(|(e, _)| Protected::PreviousServing(super::shown_name(&e))),
                    Err(why) => {
                        self.say(&format!(
                            "What serves {env} in {} changed during the run, and the audit log read again does not say what served before it: {why}",
                            model.shown()
                        ));
                        Some(Protected::Changed(env))
                    }
                }
            }
            other => other,
        };
        if let Some(p) = kept {
            self.say(&format!(
                "Kept deployment {shown} of {}, read again just before its retirement: it {}",
                model.shown(),
                p.describe()
            ));
            let k = self.kept(
                model,
                d,
                format!("{} (read again just before its retirement)", p.describe()),
            );
            self.record(|r| r.protected.push(k));
            return;
        }
        // Until its answer comes, this retirement may or may not happen: a
        // cancel meanwhile says so rather than leaving it out.
        let in_flight = format!("deployment {shown} of {}", model.shown());
        self.record(|r| r.in_flight.push(in_flight.clone()));
        let done = match self.retire {
            Retire::Delete => {
                self.api
                    .delete_deployment(model.kind, &model.id, &d.id)
                    .await
            }
            Retire::Deactivate => match model.kind {
                Kind::Model => self.api.deactivate(&model.id, &d.id).await,
                Kind::Chain => self.api.deactivate_chain(&model.id, &d.id).await,
            }
            .map(|()| Deletion::Done),
        };
        self.record(|r| r.in_flight.retain(|f| *f != in_flight));
        match done {
            Ok(Deletion::Done) => {
                self.say(&format!(
                    "Retired: {} deployment {shown} of {}",
                    action.word(),
                    model.shown()
                ));
                self.record(|r| r.retired.push(entry()));
            }
            Ok(Deletion::Gone) => {
                self.say(&format!(
                    "Gone already: deployment {shown} of {} (another run or a person retired it first)",
                    model.shown()
                ));
                let k = self.kept(model, d, "gone already (404)".into());
                self.record(|r| r.gone.push(k));
            }
            Ok(Deletion::Refused(why)) => {
                let why = format!(
                    "deployment {shown} of {} was not retired: {why}",
                    model.shown()
                );
                self.warn(&why);
                self.record(|r| r.failed.push(why));
            }
            Err(e) => {
                let why = format!(
                    "deployment {shown} of {} was not retired: {e}",
                    model.shown()
                );
                self.warn(&why);
                self.record(|r| r.failed.push(why));
            }
        }
    }
}

/// A deployment in a line: its id, and its name when it has another.
fn shown(d: &Seen) -> String {
    match d.name.is_empty() || d.name == d.id {
        true => d.id.clone(),
        false => format!("{} ({})", d.id, d.name),
    }
}

/// `1st`, `2nd`, … for "kept: the 2nd newest".
fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The deployments the listing shows as never having served, each with
/// whether that is sure: a build that runs or failed never made an image
/// (`true`); one deploying or whose deploy failed may have served before
/// and been activated again (`false`).
pub(crate) type Never = std::collections::HashMap<String, bool>;

/// A status no deployment that served can be in: its build runs or failed.
fn built_never(status: &str) -> bool {
    ["BUILDING", "BUILD_FAILED", "BUILD_STOPPED"]
        .iter()
        .any(|s| s.eq_ignore_ascii_case(status.trim()))
}

/// The deployment that served each environment just before its current
/// one, from the model's audit log (`history::previous_serving`): `(env,
/// id)`. A log that cannot be read, or that does not decide one
/// environment, is the reason nothing of the model is retired.
async fn previous_serving(
    api: &Api,
    model: &Model,
    envs: &[(String, Env)],
    never: &Never,
) -> Result<Vec<(String, String)>, String> {
    let entries = api
        .audit_log_of(model.kind, &model.id, &PLACEMENT_GROUPS)
        .await
        .map_err(|e| {
        format!(
            "its audit log could not be read, so what served each environment before its current deployment (the rollback target) is not known: {e}"
        )
    })?;
    if let Some(why) = audit::not_of(&entries, model.kind, &model.id) {
        return Err(format!(
            "{why}: what served each environment before its current deployment (the rollback target) is not known"
        ));
    }
    let promoted: Vec<Promoted> = entries.iter().filter_map(AuditEntry::placement).collect();
    // Every id the derivation reads is the platform's answer: an entry
    // placing a deployment (in an environment read here, or in none it
    // names) by an id that is not one decides nothing.
    let read = |e: &Option<String>| e.as_ref().is_none_or(|e| envs.iter().any(|(n, _)| n == e));
    if let Some(refused) = promoted
        .iter()
        .filter(|p| read(&p.environment))
        .find_map(|p| id::check(&p.deployment).err())
    {
        return Err(format!(
            "its audit log names a promoted deployment by an id that is not one ({refused}), so what served each environment before its current deployment (the rollback target) is not known"
        ));
    }
    let mut out = Vec::new();
    for (name, env) in envs {
        let Some(current) = &env.current else {
            continue;
        };
        let not_served = |id: &str| env.candidate.as_deref() == Some(id) || never.contains_key(id);
        match history::previous_serving(&promoted, name, current, &not_served) {
            Previous::Decided(Some(id)) => out.push((name.clone(), id)),
            Previous::Decided(None) => {}
            Previous::Undecided(why) => return Err(why),
        }
        // One deploying or whose deploy failed may have served before and
        // been activated again: the previous one, were it counted, is
        // protected too.
        let surely =
            |id: &str| env.candidate.as_deref() == Some(id) || never.get(id) == Some(&true);
        if let Previous::Decided(Some(id)) =
            history::previous_serving(&promoted, name, current, &surely)
        {
            out.push((name.clone(), id));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals() {
        for (n, s) in [
            (1, "1st"),
            (2, "2nd"),
            (3, "3rd"),
            (4, "4th"),
            (11, "11th"),
            (12, "12th"),
            (21, "21st"),
            (102, "102nd"),
        ] {
            assert_eq!(ordinal(n), s);
        }
    }
}
