//! Promote on evidence: contract cases, latency and error objectives over
//! a sample, a side-by-side baseline, and real traffic read during a
//! rolling promotion. `cases`, `check`, `stats`, `metrics` and `verdict`
//! are pure; `sampler` sends; this module wires them into the run from
//! two hooks: after each smoke test ([`after_smoke`]) and during a gated
//! promotion's wait ([`watch`]).

pub(crate) mod cases;
mod check;
mod metrics;
mod sampler;
mod stats;
pub(crate) mod verdict;

use anyhow::anyhow;
use serde_json::json;

pub(crate) use verdict::Analysis;

use crate::baseten::{Api, ApiError, Endpoints};
use crate::kind::Kind;
use crate::outcome::Failure;
use crate::promotion::Env;
use sampler::Plan;

pub(crate) use crate::settings::evidence::Settings;

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

/// Where the sample goes: the phase, the URL, and the baseline's
/// deployment and URL when the environment is served by another one.
async fn target(run: &Run<'_>, url: &str) -> (&'static str, String, Option<(String, String)>) {
    let Position {
        owner,
        deployment_id: ours,
        environment_url: env_url,
    } = run.log.position();
    if env_url.as_deref() == Some(url) {
        return ("environment", url.into(), None);
    }
    let Some(env) = run.environment else {
        return ("deployment", url.into(), None);
    };
    if !run.gated {
        // At create the platform already moved the environment to this
        // deployment: test it where users reach it. The previous one no
        // longer serves, so there is nothing to compare with.
        return ("environment", env_url.unwrap_or_else(|| url.into()), None);
    }
    let (Some((kind, id)), Some(ours)) = (owner, ours) else {
        return ("deployment", url.into(), None);
    };
    let serving = match run.api.read_environment(kind, &id, env).await {
        Ok(e) => e.current.filter(|d| *d != ours),
        Err(e) => {
            run.log.warn(&format!(
                "no baseline: reading {env} failed ({e}); the candidate is judged on its own"
            ));
            None
        }
    };
    let baseline = serving.map(|d| {
        let u = match kind {
            Kind::Model => run.endpoints.model_predict(&id, &d, None),
            Kind::Chain => run.endpoints.chain_run_remote(&id, &d, None),
        };
        (d, u)
    });
    ("deployment", url.into(), baseline)
}

/// The hook after a smoke test passed on `url`: with evidence inputs, the
/// sample runs there (and on the baseline beside it) and is judged. A
/// failed objective fails the predict, naming what broke.
pub(crate) async fn after_smoke(run: &Run<'_>, label: &str, url: &str) -> Result<(), Failure> {
    let s = run.settings;
    let (phase, url, baseline) = target(run, url).await;
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
    if first && baseline.is_none() && s.objectives.max_latency_regression.is_some() {
        let msg = "max-latency-regression is not judged here: the baseline is the deployment serving the environment, measured before a promotion: after-predict promote, and there is none";
        run.log.notice(msg);
        run.log.note(msg.into());
    }
    let plan = Plan {
        api: run.api,
        label,
        candidate: &url,
        baseline: baseline.as_ref().map(|(_, u)| u.as_str()),
        cases: &s.cases,
        warmup: s.warmup,
        requests: s.requests,
        concurrency: s.concurrency,
        timeout: run.predict_timeout,
    };
    let samples = sampler::run(&plan).await;
    let (cases, candidate, base, regression, reasons) =
        verdict::judge(&s.cases, &samples, &s.objectives, baseline.is_some());
    let (baseline_deployment_id, baseline_url) = baseline.unzip();
    let analysis = Analysis {
        phase: phase.into(),
        url: url.clone(),
        baseline_deployment_id,
        baseline_url,
        warmup: s.warmup,
        concurrency: s.concurrency,
        objectives: s.objectives.clone(),
        cases,
        candidate,
        baseline: base,
        regression,
        live: Vec::new(),
        passed: reasons.is_empty(),
        reasons,
    };
    for c in &analysis.cases {
        run.log.say(&format!(
            "  case {:?}: {} ({} requests, p50 {} ms, p95 {} ms)",
            c.name,
            if c.passed { "pass" } else { "FAIL" },
            c.requests,
            c.p50_ms.map_or("–".into(), |v| format!("{v:.1}")),
            c.p95_ms.map_or("–".into(), |v| format!("{v:.1}")),
        ));
    }
    let line = analysis.verdict_line();
    run.log.say(&line);
    let failure = (!analysis.passed).then(|| failure_message(&analysis));
    record(run, analysis);
    match failure {
        Some(m) => Err(Failure::Predict(anyhow!(m))),
        None => Ok(()),
    }
}

/// The failure message: every reason, then each failing case with what
/// it expected and a short diff of what came back.
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

/// Keeps an analysis for the outputs, the summary and `analysis-file`.
fn record(run: &Run<'_>, analysis: Analysis) {
    let mut analysis = Some(analysis);
    let all = run.log.analyses(&mut |all| all.extend(analysis.take()));
    write_file(run, &all);
}

fn write_file(run: &Run<'_>, all: &[Analysis]) {
    let Some(path) = run.settings.analysis_file.as_ref() else {
        return;
    };
    let doc = json!({ "analyses": all });
    let text = serde_json::to_string_pretty(&doc).expect("plain data serializes");
    // The sink redacts what an answer quoted in a diff echoed back, and
    // bounds the write (a FIFO nobody reads); its error names the file.
    if let Err(e) = crate::ci::write_file(path, &(text + "\n")) {
        run.log.warn(&format!("could not write analysis-file: {e}"));
    }
}

/// What the metrics watcher remembers between polls.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// The endpoint is missing or its answer unknown: stop asking.
    off: bool,
}

/// The hook in a gated promotion's wait: while a rolling promotion moves
/// traffic, read the environment's metrics and answer the failure that
/// cancels the promotion when real traffic breaks an objective. Without
/// evidence inputs, for chains (the endpoint is a model's), or when the
/// promotion is not rolling, it reads nothing. A missing endpoint or an
/// unknown answer is said once; the synthetic evidence then decides.
pub(crate) async fn watch(
    run: &Run<'_>,
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
    let why = match run.api.environment_metrics(owner_id, env).await {
        Ok(v) => match metrics::read(&v) {
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
                        }
                    }
                });
                write_file(run, &all);
                return breach.map(|b| {
                    Failure::Predict(anyhow!(
                        "real traffic during the rolling promotion into {env} broke an objective: {b}"
                    ))
                });
            }
            Err(why) => format!("its answer has an unknown shape ({why})"),
        },
        Err(e @ ApiError::Permanent { .. }) => format!("it is not available ({e})"),
        // A failed read is tried again at the next poll.
        Err(_) => return None,
    };
    w.off = true;
    let msg = format!(
        "the environment metrics of {env} cannot be read: {why}; the synthetic evidence decides"
    );
    run.log.notice(&msg);
    run.log.note(msg);
    None
}

/// The evidence outputs (`cases-passed`, `cases-failed`,
/// `latency-p50-ms`, `latency-p95-ms`, `baseline-p95-ms`) from the
/// analysis that decided: the first that failed, else the first (the one
/// with the baseline beside it). None without evidence.
pub(crate) fn output_entries(all: &[Analysis]) -> Vec<(&'static str, String)> {
    let Some(a) = all.iter().find(|a| !a.passed).or(all.first()) else {
        return Vec::new();
    };
    let ms = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.1}"));
    let passed = a.cases.iter().filter(|c| c.passed).count();
    let baseline = a
        .baseline
        .as_ref()
        .or_else(|| all.iter().find_map(|a| a.baseline.as_ref()))
        .and_then(|b| b.p95_ms);
    vec![
        ("cases-passed", passed.to_string()),
        ("cases-failed", (a.cases.len() - passed).to_string()),
        ("latency-p50-ms", ms(a.candidate.p50_ms)),
        ("latency-p95-ms", ms(a.candidate.p95_ms)),
        ("baseline-p95-ms", ms(baseline)),
    ]
}

/// The step summary's evidence sections, one per analysis.
pub(crate) fn markdown(all: &[Analysis]) -> String {
    all.iter().map(Analysis::markdown).collect()
}
