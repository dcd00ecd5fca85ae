//! Promote on evidence: contract cases, latency and error objectives over
//! a sample, a side-by-side baseline, and real traffic read during a
//! rolling promotion. `cases`, `check`, `stats`, `metrics` and `verdict`
//! are pure; `sampler` sends; this module wires them into the run from
//! two hooks: after each smoke test ([`after_smoke`]) and during a gated
//! promotion's wait ([`watch`]).
//!
//! A sample request is never retried (its errors are what the error rate
//! counts); evidence never decides where traffic goes (the gate rolls
//! back); nothing passes without a measurement (a skipped objective is
//! said, a missing baseline fails). `side` is what `verdict` and
//! `regression` both speak in; `power` is test only.

pub(crate) mod cases;
mod chart;
mod check;
mod metrics;
#[cfg(test)]
mod power;
mod regression;
mod sampler;
mod side;
mod stats;
mod summary;
pub(crate) mod verdict;

use std::path::PathBuf;

use anyhow::anyhow;
use serde_json::json;

pub(crate) use verdict::Analysis;

use crate::baseten::{Api, ApiError, Endpoints};
use crate::kind::Kind;
use crate::outcome::Failure;
use crate::promotion::Env;
use cases::Case;
use sampler::SampleRequests;
use verdict::Objectives;

/// The evidence inputs, validated: plain data, built by
/// `settings::evidence` from the inputs.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) cases: Vec<Case>,
    /// Counted requests to the candidate (a baseline gets as many).
    pub(crate) requests: usize,
    pub(crate) concurrency: usize,
    pub(crate) warmup: usize,
    pub(crate) objectives: Objectives,
    pub(crate) analysis_file: Option<PathBuf>,
    /// The smoke test sends the first case (a cases file and no
    /// `predict-payload`) and that case expects this status.
    pub(crate) smoke_status: Option<u16>,
}

/// What the evidence hooks need of the run, handed over by the flow,
/// which keeps the run's state and log: evidence never sees the flow.
pub(crate) struct Run<'a> {
    pub(crate) settings: &'a Settings,
    /// The platform, under the calling phase's budget.
    pub(crate) api: &'a Api,
    pub(crate) endpoints: &'a Endpoints,
    /// The environment the deploy goes to, if any.
    pub(crate) environment: Option<&'a str>,
    /// A gated promotion moves that environment (`promotion: after-predict`).
    pub(crate) gated: bool,
    /// Each sample request's bound.
    pub(crate) predict_timeout: std::time::Duration,
    /// The sample's deadline, from the run's budget: the sample, the
    /// baseline and the analysis end by it.
    pub(crate) until: std::time::Instant,
    pub(crate) log: &'a dyn Journal,
}

/// Where the deploy stands when a hook runs.
#[derive(Clone, Debug, Default)]
pub(crate) struct Position {
    /// The model's or the chain's id.
    pub(crate) owner: Option<(Kind, String)>,
    /// This run's deployment.
    pub(crate) deployment_id: Option<String>,
    /// The URL that serves the environment, when there is one.
    pub(crate) environment_url: Option<String>,
}

/// The run's log and record, as the evidence hooks write them.
pub(crate) trait Journal {
    fn position(&self) -> Position;
    /// Changes the run's analyses with `change` and answers them all.
    fn analyses(&self, change: &mut dyn FnMut(&mut Vec<Analysis>)) -> Vec<Analysis>;
    fn say(&self, msg: &str);
    fn warn(&self, msg: &str);
    fn notice(&self, msg: &str);
    /// A note for the summary.
    fn note(&self, msg: String);
}

/// What the sample is compared with.
enum Compared {
    /// The deployment serving the environment: its id and URL.
    Serving(String, String),
    /// Nothing to compare with, and why.
    Nothing(String),
    /// Whether one serves could not be read, and why.
    Unknown(String),
}

/// Where the sample goes: the phase, the URL, and what it is compared with.
async fn target(run: &Run<'_>, url: &str) -> (&'static str, String, Compared) {
    let Position {
        owner,
        deployment_id: ours,
        environment_url: env_url,
    } = run.log.position();
    if env_url.as_deref() == Some(url) {
        // After a gated promote, through the environment: the regression
        // was judged before it.
        return (
            "environment",
            url.into(),
            Compared::Nothing("this test runs through the environment after the promote".into()),
        );
    }
    let Some(env) = run.environment else {
        return (
            "deployment",
            url.into(),
            Compared::Nothing(
                "without an environment no deployment serves users to compare with".into(),
            ),
        );
    };
    if !run.gated {
        // At create the platform already moved the environment to this
        // deployment: test it where users reach it. The previous one no
        // longer serves, so there is nothing to compare with.
        return (
            "environment",
            env_url.unwrap_or_else(|| url.into()),
            Compared::Nothing(format!(
                "the baseline is the deployment serving {env}, measured before a promotion: after-predict promote; with promotion at create the environment already moved"
            )),
        );
    }
    let (Some((kind, id)), Some(ours)) = (owner, ours) else {
        return (
            "deployment",
            url.into(),
            Compared::Unknown("the deployment serving the environment is not known".into()),
        );
    };
    let serving = match run.api.read_environment(kind, &id, env).await {
        Ok(e) => e.current.filter(|d| *d != ours),
        Err(ApiError::Permanent {
            status: Some(404), ..
        }) => None,
        Err(e) => {
            return (
                "deployment",
                url.into(),
                Compared::Unknown(format!("reading {env} failed ({e})")),
            );
        }
    };
    let compared = match serving {
        Some(d) => {
            let u = match kind {
                Kind::Model => run.endpoints.model_predict(&id, &d, None),
                Kind::Chain => run.endpoints.chain_run_remote(&id, &d, None),
            };
            Compared::Serving(d, u)
        }
        None => Compared::Nothing(format!(
            "nothing serves {env} yet (a first deploy), so there is no baseline"
        )),
    };
    ("deployment", url.into(), compared)
}

/// The smoke test's own request when the first case expects an answer
/// that is not a 2xx (a negative case): its payload once, its status and
/// expectations checked, by `until` (the smoke test's deadline). A 429 or
/// 5xx it did not ask for is tried again while time is left, as the
/// ordinary smoke test does. Answers the text, the status and how long it
/// took.
pub(crate) async fn smoke_case(
    run: &Run<'_>,
    label: &str,
    url: &str,
    until: std::time::Instant,
) -> Result<(String, u16, std::time::Duration), Failure> {
    let case = &run.settings.cases[0];
    #[expect(
        clippy::disallowed_methods,
        reason = "times the smoke test's answer when a negative first case is the smoke test"
    )]
    let started = std::time::Instant::now();
    let mut last = String::from("no answer");
    loop {
        let left = run.api.clock().left(until);
        if left.is_zero() {
            return Err(Failure::Predict(anyhow!(
                "{label} did not answer case {:?} within predict-timeout (last: {last})",
                case.name
            )));
        }
        let why = match run
            .api
            .probe(label, url, &case.payload, case.stream, left)
            .await
        {
            Ok(p) if p.status == case.status || !(p.status == 429 || p.status >= 500) => {
                let ms = p.elapsed.as_secs_f64() * 1000.0;
                let broken = check::check(case, p.status, &p.text, ms);
                if let Some(m) = broken.first() {
                    return Err(Failure::Predict(anyhow!(
                        "the smoke test (case {:?}) failed: {m}",
                        case.name
                    )));
                }
                return Ok((p.text, p.status, started.elapsed()));
            }
            Ok(p) => format!("HTTP {}", p.status),
            Err(e) => e.to_string(),
        };
        run.log.say(&format!("  {label} {why}; trying again"));
        last = why;
        tokio::time::sleep(std::time::Duration::from_secs(1).min(left)).await;
    }
}

/// The hook after a smoke test passed on `url`: with evidence inputs, the
/// sample runs there (and on the baseline beside it) and is judged. A
/// failed objective fails the predict, naming what broke.
/// `before_promotion`: a gated promotion follows, and the run's budget
/// gave the sample only its share (`run.until`), for the message when it
/// does not finish.
pub(crate) async fn after_smoke(
    run: &Run<'_>,
    label: &str,
    url: &str,
    before_promotion: bool,
) -> Result<(), Failure> {
    let s = run.settings;
    let (phase, url, compared) = target(run, url).await;
    let baseline = match &compared {
        Compared::Serving(d, u) => Some((d.clone(), u.clone())),
        _ => None,
    };
    if let Compared::Unknown(why) = &compared
        && s.objectives.max_latency_regression.is_none()
    {
        run.log.warn(&format!(
            "no baseline: {why}; the candidate is judged on its own"
        ));
    }
    run.log.say(&format!(
        "Evidence on {url}: {} warm-up and {} counted requests at concurrency {} (they cost inference time){}",
        s.warmup,
        s.requests,
        s.concurrency,
        match &baseline {
            Some((d, _)) => format!(", side by side with the serving deployment {d}"),
            None => String::new(),
        }
    ));
    let first = run.log.analyses(&mut |_| {}).is_empty();
    let mut skipped = Vec::new();
    if let Compared::Nothing(why) = &compared
        && first
        && s.objectives.max_latency_regression.is_some()
    {
        let msg =
            format!("max-latency-regression is not judged here: {why}; the other objectives are");
        run.log.notice(&msg);
        run.log.note(msg.clone());
        skipped.push(msg);
    }
    let plan = SampleRequests {
        api: run.api,
        label,
        candidate: &url,
        baseline: baseline.as_ref().map(|(_, u)| u.as_str()),
        cases: &s.cases,
        warmup: s.warmup,
        requests: s.requests,
        concurrency: s.concurrency,
        timeout: run.predict_timeout,
        until: run.until,
    };
    let sampled = sampler::run(&plan).await;
    let state = match &compared {
        Compared::Serving(..) => verdict::Baseline::Sampled,
        Compared::Nothing(why) => verdict::Baseline::None(why.clone()),
        Compared::Unknown(why) => verdict::Baseline::Unknown(why.clone()),
    };
    let deadline = if before_promotion {
        "its share of the run's budget (half of what was left when it started: the gated promotion, the environment's test and its sample keep the rest)"
    } else {
        "the run's budget (wait budget + predict-timeout)"
    };
    let j = verdict::judge(
        &s.cases,
        &sampled,
        &verdict::PlannedSample {
            requests: s.requests,
            baseline: &state,
            baseline_name: baseline.as_ref().map_or("", |(d, _)| d.as_str()),
            deadline,
        },
        &s.objectives,
    );
    let (baseline_deployment_id, baseline_url) = baseline.unzip();
    let analysis = Analysis {
        phase: phase.into(),
        url: url.clone(),
        baseline_deployment_id,
        baseline_url,
        warmup: s.warmup,
        concurrency: s.concurrency,
        requests_planned: s.requests,
        complete: sampled.complete,
        objectives: s.objectives.clone(),
        cases: j.cases,
        candidate: j.candidate,
        baseline: j.baseline,
        regression: j.regression,
        skipped,
        live: Vec::new(),
        passed: j.reasons.is_empty(),
        headline: j.headline,
        reasons: j.reasons,
        outputs: false,
    };
    for line in analysis.case_lines() {
        run.log.say(&line);
    }
    run.log.say(&analysis.verdict_line());
    for line in analysis
        .left_out_line()
        .into_iter()
        .chain(analysis.detect_line())
    {
        run.log.say(&format!("  {line}"));
    }
    let failure = (!analysis.passed).then(|| failure_message(&analysis));
    let written = record(run, analysis);
    match (failure, written) {
        (Some(m), Ok(())) => Err(Failure::Predict(anyhow!(m))),
        (Some(m), Err(w)) => Err(Failure::Predict(anyhow!("{m}\n{w}"))),
        (None, Err(w)) => Err(Failure::Predict(anyhow!(w))),
        (None, Ok(())) => Ok(()),
    }
}

/// The failure message: every reason, then each failing case with what
/// it expected and a short diff of its first failing answer.
fn failure_message(a: &Analysis) -> String {
    let mut m = format!(
        "evidence failed on the {}: {}",
        a.phase,
        a.reasons.join("; ")
    );
    for c in a.cases.iter().filter(|c| !c.passed) {
        for x in &c.mismatches {
            m.push_str(&format!("\ncase {:?}: {x}", c.name));
        }
    }
    m
}

/// Keeps an analysis for the outputs, the summary and `analysis-file`;
/// `Err` says the file could not be written.
fn record(run: &Run<'_>, analysis: Analysis) -> Result<(), String> {
    let mut analysis = Some(analysis);
    let all = run.log.analyses(&mut |all| {
        all.extend(analysis.take());
        mark_outputs(all);
    });
    write_file(run, &all)
}

/// Writes `analysis-file` through the one bounded writer every outputs
/// file goes through: a FIFO nobody reads, a directory or a dangling link
/// is an error naming the file within its timeout, never a hang.
fn write_file(run: &Run<'_>, all: &[Analysis]) -> Result<(), String> {
    let Some(path) = run.settings.analysis_file.as_ref() else {
        return Ok(());
    };
    let doc = json!({ "analyses": all });
    let text = serde_json::to_string_pretty(&doc).expect("plain data serializes");
    // The sink redacts what an answer quoted in a diff echoed back, and
    // bounds the write (a FIFO nobody reads); its error names the file.
    crate::ci::write_file(path, &(text + "\n"))
        .map_err(|e| format!("{e}: the evidence is not recorded, so the run does not pass"))
}

/// What the metrics watcher remembers between polls.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// The endpoint is missing or its answer unreadable: stop asking.
    off: bool,
}

/// The hook in a gated promotion's wait: while a rolling promotion moves
/// traffic, read the environment's metrics and answer the failure that
/// cancels the promotion when real traffic breaks an objective. Without
/// evidence inputs, for chains (the endpoint is a model's), or when the
/// promotion is not rolling, it reads nothing. The read decides, so it
/// fails closed: a missing endpoint, an unreadable answer (an unknown
/// shape, counts or durations that are negative or not numbers,
/// quantiles out of order) or a read that does not answer within its
/// short deadline (`metrics`: a handle under `budget::Phase::Metrics`, so
/// a hung endpoint never stalls the poll past it) is never taken for
/// "no errors": it is said once, no reading is kept, it is not read
/// again, and the synthetic evidence decides.
pub(crate) async fn watch(
    run: &Run<'_>,
    metrics: &Api,
    w: &mut Watch,
    owner: Kind,
    owner_id: &str,
    env: &str,
    environment: Option<&Env>,
) -> Option<Failure> {
    let s = run.settings;
    if w.off || owner != Kind::Model || !environment.is_some_and(Env::rolling) {
        return None;
    }
    let read = metrics.environment_metrics(owner_id, env);
    let (clock, until) = (metrics.clock(), metrics.deadline());
    let answered = match until {
        Some(until) => tokio::time::timeout(clock.left(until), read).await.ok(),
        None => Some(read.await),
    };
    let spent = until.is_some_and(|u| clock.left(u).is_zero());
    let why = match answered {
        None => timed_out(),
        Some(Err(_)) if spent => timed_out(),
        Some(Ok(v)) => match metrics::read(&v) {
            Ok(live) => {
                let breach = metrics::breach(
                    &live,
                    s.objectives.max_error_rate,
                    s.objectives.max_latency_p95_ms,
                );
                run.log.say(&format!(
                    "live traffic in {env}: {:.0} requests, 5xx {}, p95 {}",
                    live.requests,
                    live.error_rate
                        .map_or("–".into(), |r| format!("{:.1}%", r * 100.0)),
                    live.p95_ms.map_or("–".into(), |p| format!("{p:.0} ms")),
                ));
                let mut live = Some(live);
                let all = run.log.analyses(&mut |all| {
                    if let Some(a) = all.last_mut() {
                        a.live.extend(live.take());
                        if let Some(b) = &breach {
                            a.passed = false;
                            a.reasons.push(format!("during the rolling promotion: {b}"));
                            a.headline =
                                "real traffic broke an objective during the rolling promotion"
                                    .into();
                        }
                    }
                    mark_outputs(all);
                });
                let written = write_file(run, &all);
                return match (breach, written) {
                    (Some(b), _) => Some(Failure::Predict(anyhow!(
                        "real traffic during the rolling promotion into {env} broke an objective: {b}"
                    ))),
                    (None, Err(e)) => Some(Failure::Predict(anyhow!(e))),
                    (None, Ok(())) => None,
                };
            }
            Err(why) => format!("its answer is unreadable ({why})"),
        },
        Some(Err(e @ ApiError::Permanent { .. })) => format!("it is not available ({e})"),
        // A read that failed at once is tried again at the next poll.
        Some(Err(_)) => return None,
    };
    w.off = true;
    let msg = format!(
        "the environment metrics of {env} cannot be read: {why}; the synthetic evidence decides"
    );
    run.log.notice(&msg);
    run.log.note(msg);
    None
}

/// A metrics read its short deadline cut: unread, like an unreadable one.
fn timed_out() -> String {
    format!(
        "its read timed out after {} s",
        crate::budget::SHORT_READ_SECS
    )
}

/// Which analysis gives the evidence outputs: the first that failed (it
/// decided), else the last that judged a regression (the decision to
/// promote was taken on it), else the last.
fn outputs_from(all: &[Analysis]) -> Option<usize> {
    all.iter()
        .position(|a| !a.passed)
        .or_else(|| all.iter().rposition(|a| a.regression.is_some()))
        .or_else(|| all.len().checked_sub(1))
}

/// Marks the analysis that gives the outputs (`outputs: true` in `--json`
/// and `analysis-file`).
fn mark_outputs(all: &mut [Analysis]) {
    let chosen = outputs_from(all);
    for (i, a) in all.iter_mut().enumerate() {
        a.outputs = Some(i) == chosen;
    }
}

/// The evidence outputs (`cases-passed`, `cases-failed`,
/// `latency-p50-ms`, `latency-p95-ms`, `baseline-p95-ms`), all from one
/// analysis ([`outputs_from`]); a baseline that was not measured is
/// empty, an infinite percentile `inf`. None without evidence.
pub(crate) fn output_entries(all: &[Analysis]) -> Vec<(&'static str, String)> {
    let Some(a) = outputs_from(all).map(|i| &all[i]) else {
        return Vec::new();
    };
    let ms = |v: Option<f64>| match v {
        None => String::new(),
        Some(x) if x.is_infinite() => "inf".into(),
        Some(x) => format!("{x:.1}"),
    };
    let passed = a.cases.iter().filter(|c| c.passed).count();
    vec![
        ("cases-passed", passed.to_string()),
        ("cases-failed", (a.cases.len() - passed).to_string()),
        ("latency-p50-ms", ms(a.candidate.p50_ms)),
        ("latency-p95-ms", ms(a.candidate.p95_ms)),
        (
            "baseline-p95-ms",
            ms(a.baseline.as_ref().and_then(|b| b.p95_ms)),
        ),
    ]
}

/// The first failed analysis's verdict in plain words ("Evidence failed
/// (deployment): latency 1.8× the baseline (limit 1.2×)"): the reason the
/// summary's first screen gives when evidence failed the run.
pub(crate) fn failed_reason(all: &[Analysis]) -> Option<String> {
    let a = all.iter().find(|a| !a.passed)?;
    Some(format!("Evidence failed ({}): {}", a.phase, a.headline))
}

/// The step summary's evidence sections, one per analysis.
pub(crate) fn markdown(all: &[Analysis]) -> String {
    all.iter().map(Analysis::markdown).collect()
}
