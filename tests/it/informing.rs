//! A read that only informs never holds a deploy, and a read that decides
//! fails closed (SPEC, "Reads are of two kinds"). The fault proxy in front
//! of the REST API holds one read open without an answer; the run must go
//! on past it within the informing reads' own short deadline (5 s), say
//! "not read: timed out", and never wait for it before a mutation.
//!
//! Order is read from the fake's and the proxy's request logs and from the
//! log the run prints; the only clock comparisons are generous: "the
//! create came before the read's deadline would have passed twice over"
//! (10 s, where the unbounded read held it 60 s) and "did not hang".

use std::time::Duration;

use fake_baseten::FakeBaseten;
use fake_baseten::proxy::{Fault, FaultProxy, Rule};
use fake_baseten::reqlog::LogEntry;

use crate::harness::*;

/// The informing reads' deadline (`budget::SHORT_READ_SECS`).
const SHORT_READ_SECS: u64 = 5;

/// A fake whose deployments are ACTIVE at once.
fn platform() -> FakeBaseten {
    fake(
        "name: informing\nmanual_clock: true\ndeactivation_seconds: 0\ndeployments:\n  default: [[0, ACTIVE]]\n",
    )
}

const CONFIG: &str = "model_name: informing\nresources:\n  cpu: '1'\n";

/// A truss whose weights are `weights`.
fn a_truss(config: &str, weights: &[u8]) -> tempfile::TempDir {
    let dir = model_dir(config);
    std::fs::write(dir.path().join("model/weights.bin"), weights).unwrap();
    dir
}

/// A push into production, named `name`.
fn push<'a>(fake: &'a FakeBaseten, dir: &std::path::Path, name: &str) -> Invocation<'a> {
    Invocation::new(fake)
        .model(dir)
        .arg("environment", "production")
        .arg("predict-payload", r#"{"x": 1}"#)
        .arg("deployment-name", name)
}

/// The model's first deployment, which the platform promotes into
/// production itself; its id.
fn first_deploy(fake: &FakeBaseten, dir: &std::path::Path) -> String {
    let run = push(fake, dir, "first").run();
    assert_eq!(run.status(), "success", "{run:?}");
    run.out("deployment-id").to_string()
}

/// A proxy in front of `fake` whose `rules` hold requests open.
fn holding(fake: &FakeBaseten, rules: Vec<Rule>) -> FaultProxy {
    let mut b = FaultProxy::builder(fake.addr());
    for r in rules {
        b = b.rule(r);
    }
    b.start_in_background().expect("proxy starts")
}

/// Milliseconds since midnight of a log entry's wall-clock time
/// (`2026-12-07T08:46:19.123Z`).
fn millis(e: &LogEntry) -> i64 {
    let t = &e.time[11..23];
    let n = |r: std::ops::Range<usize>| t[r].parse::<i64>().unwrap();
    ((n(0..2) * 60 + n(3..5)) * 60 + n(6..8)) * 1000 + n(9..12)
}

/// From `a` to `b` in the log, in milliseconds (across midnight too).
fn apart(a: &LogEntry, b: &LogEntry) -> i64 {
    (millis(b) - millis(a)).rem_euclid(86_400_000)
}

fn last<'l>(log: &'l [LogEntry], endpoint: &str) -> &'l LogEntry {
    log.iter()
        .rfind(|e| e.endpoint == endpoint)
        .unwrap_or_else(|| panic!("no {endpoint} in {log:#?}"))
}

/// The serving deployment's config (for the summary's diff) and the
/// secrets check held open: the create goes out without waiting for
/// either, each is said "not read: timed out" after it, and the summary
/// says the diff was not read.
#[test]
fn a_hung_config_read_and_secrets_check_never_hold_the_create() {
    let fake = platform();
    let config = format!("{CONFIG}secrets:\n  hf_token: null\n");
    let dir = a_truss(&config, b"one");
    first_deploy(&fake, dir.path());
    std::fs::write(dir.path().join("model/weights.bin"), b"two").unwrap();
    let proxy = holding(
        &fake,
        vec![
            Rule::new("config", Fault::Hang).path_like("/v1/models/*/deployments/*/config"),
            Rule::new("secrets", Fault::Hang).path("/v1/secrets"),
            Rule::new("team-secrets", Fault::Hang).path("/v1/teams/"),
        ],
    );
    let before = fake.requests().len();
    // A short wait budget: the create that waited for the read (60 s)
    // ended such a run `deploy_timeout`.
    let run = push(&fake, dir.path(), "second")
        .arg("api-url", proxy.rest_base())
        .arg("wait-timeout-seconds", "30")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    // Both reads were sent, and held.
    let held: Vec<String> = proxy
        .requests()
        .into_iter()
        .filter_map(|e| e.rule)
        .collect();
    assert_eq!(held.len(), 2, "{held:?}");
    assert!(held.contains(&"config".to_string()), "{held:?}");
    // The create went out, and only then did either read run out of time.
    let diff_unread = format!(
        "What the deploy changes in production: not read: timed out after {SHORT_READ_SECS} s"
    );
    let secrets_unread =
        format!("not read: timed out after {SHORT_READ_SECS} s); the deploy goes on");
    assert_in_order(&run.stdout, &["Created deployment", &diff_unread]);
    assert_in_order(&run.everything(), &["Created deployment", &secrets_unread]);
    let log: Vec<LogEntry> = fake.requests().into_iter().skip(before).collect();
    let creates: Vec<&LogEntry> = log
        .iter()
        .filter(|e| e.endpoint.starts_with("graphql.create_model"))
        .collect();
    assert_eq!(creates.len(), 1, "{log:#?}");
    // The config read began right after the environment list it reads
    // first; the create came before its deadline would have passed twice
    // over (it came 60 s late when the create waited for it).
    let listed = last(&log, "rest.list_environments");
    let after = apart(listed, creates[0]);
    assert!(
        after < 2 * 1000 * SHORT_READ_SECS as i64,
        "the create came {after} ms after the config read began"
    );
    assert!(
        run.summary.contains(&format!(
            "Not compared: the serving deployment's config.yaml: not read: timed out after {SHORT_READ_SECS} s."
        )),
        "{}",
        run.summary
    );
    assert!(
        run.summary.contains(&format!(
            "the secrets check: not read: timed out after {SHORT_READ_SECS} s"
        )),
        "{}",
        run.summary
    );
    assert!(run.elapsed < Duration::from_secs(60), "{:?}", run.elapsed);
}

/// An unchanged run (`skip-unchanged`) whose audit-log read hangs: the
/// "promoted at" words are not read, the line says when the deployment
/// was created, and the environment's smoke test follows within the
/// read's own short deadline, not the REST call's minute.
#[test]
fn a_hung_audit_log_read_holds_an_unchanged_run_its_short_deadline_at_most() {
    let fake = platform();
    let dir = a_truss(CONFIG, b"same");
    let first = first_deploy(&fake, dir.path());
    let proxy = holding(
        &fake,
        vec![Rule::new("audit", Fault::Hang).path_like("/v1/models/*/audit_logs")],
    );
    let before = fake.requests().len();
    let run = push(&fake, dir.path(), "again")
        .arg("skip-unchanged", "true")
        .arg("api-url", proxy.rest_base())
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("unchanged"), "true", "{run:?}");
    assert_eq!(run.out("deployment-id"), first);
    assert_eq!(
        proxy
            .requests()
            .iter()
            .filter(|e| e.rule.as_deref() == Some("audit"))
            .count(),
        1,
        "one try"
    );
    let unread = format!(
        "When the audit log saw deployment {first} promoted into production: not read: timed out after {SHORT_READ_SECS} s"
    );
    assert_in_order(
        &run.stdout,
        &[
            &unread,
            &format!("Unchanged: deployment {first} (first, created "),
        ],
    );
    assert!(run.summary.contains(&unread), "{}", run.summary);
    // The environment read that settled the verdict, then the smoke test
    // through the environment: the audit read between them cost at most
    // its own deadline (the REST call's minute before).
    let log: Vec<LogEntry> = fake.requests().into_iter().skip(before).collect();
    let settled = last(&log, "rest.get_environment");
    let predict = last(&log, "inference.predict");
    let held = apart(settled, predict);
    assert!(
        held < 2 * 1000 * SHORT_READ_SECS as i64,
        "the smoke test came {held} ms after the verdict"
    );
    assert_eq!(
        log.iter().filter(|e| e.mutation).count(),
        0,
        "an unchanged run creates nothing: {log:#?}"
    );
}

/// A rolling promotion that ramps for 300 scenario seconds (15 real
/// seconds at `time_scale: 20`).
const LONG_ROLLING: &str = "promote:
  default:
    rolling_deploy: true
    steps:
      - [0, {status: RELEASING}]
      - [1, {status: RAMPING_UP, percent: 20}]
      - [300, {status: SUCCEEDED, percent: 100}]
  ramp_down_seconds: 2
";

const CASES: &str = r#"
- name: classify
  payload: {task: classify, text: "I love this phone"}
  json: {labels: [{name: positive}]}
"#;

/// The gate judges the environment's metrics during a rolling promotion,
/// so that read decides: held open, it is cut at its short deadline (the
/// gate's polls go on at their interval instead of stalling on it), it
/// fails closed — said once, no reading kept, never read again, never
/// taken for "no errors" — and the synthetic evidence decides.
#[test]
fn a_hung_metrics_read_fails_closed_without_stalling_the_gates_polls() {
    let fake = fake(&format!(
        "time_scale: 20
models:
  - id: evmodel1
    name: hello-truss-push
    deployments: [{{id: v1dep001, name: v1, environment: production}}]
deployments:
  default: [[0, BUILDING], [1, DEPLOYING], [2, ACTIVE]]
traffic:
  seed: 7
  by_payload:
    - {{when: {{task: classify}}, response: {{labels: [{{name: positive, score: 0.9}}]}}}}
{LONG_ROLLING}"
    ));
    let proxy = holding(
        &fake,
        vec![Rule::new("metrics", Fault::Hang).path_like("/v1/models/*/environments/*/metrics")],
    );
    let (d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let analysis = d.path().join("analysis.json");
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("promotion", "after-predict")
        .arg("environment", "production")
        .arg("predict-timeout", "60")
        .arg("poll-interval-seconds", "1")
        .arg("predict-cases", cases.to_str().unwrap())
        .arg("analysis-file", analysis.to_str().unwrap())
        .arg("api-url", proxy.rest_base())
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("rolled-back"), "false", "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    let notice = format!(
        "the environment metrics of production cannot be read: its read timed out after {SHORT_READ_SECS} s; the synthetic evidence decides"
    );
    assert_eq!(said.matches(&notice).count(), 1, "{said}");
    // Held once, then never asked again.
    let asked = proxy
        .requests()
        .iter()
        .filter(|e| e.path.ends_with("/metrics"))
        .count();
    assert_eq!(asked, 1, "{:#?}", proxy.requests());
    // The gate kept polling the environment while the promotion ramped:
    // a stalled poll (10 s a read, each poll) would have read it twice.
    let log = fake.requests();
    let promoted = log
        .iter()
        .position(|e| e.endpoint == "rest.promote")
        .expect("promoted");
    let polls = log[promoted..]
        .iter()
        .filter(|e| e.endpoint == "rest.get_environment")
        .count();
    assert!(polls >= 5, "{polls} environment reads during the promotion");
    // No reading was kept: an unread metric is not "no errors".
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&analysis).unwrap()).unwrap();
    let live: usize = doc["analyses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["live"].as_array().unwrap().len())
        .sum();
    assert_eq!(live, 0, "{doc}");
    assert!(run.summary.contains(&notice), "{}", run.summary);
    assert!(run.elapsed < Duration::from_secs(120), "{:?}", run.elapsed);
}

/// The plan by content reads the "promoted at" words of each unchanged
/// target too: held open, they cost their own short deadline, not the
/// REST call's minute, and the target is still left out.
#[test]
fn a_hung_audit_log_read_does_not_hold_the_plan() {
    let fake = platform();
    let dir = a_truss(CONFIG, b"planned");
    first_deploy(&fake, dir.path());
    let proxy = holding(
        &fake,
        vec![Rule::new("audit", Fault::Hang).path_like("/v1/models/*/audit_logs")],
    );
    let run = Invocation::new(&fake)
        .arg("plan", "true")
        .arg("truss-directory", dir.path().to_str().unwrap())
        .arg("environment", "production")
        .arg("skip-unchanged", "true")
        .arg("api-url", proxy.rest_base())
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    let matrix: serde_json::Value = serde_json::from_str(run.out("matrix")).unwrap();
    assert_eq!(matrix["include"], serde_json::json!([]), "{run:?}");
    assert_eq!(
        proxy
            .requests()
            .iter()
            .filter(|e| e.rule.as_deref() == Some("audit"))
            .count(),
        1
    );
    // "Did not hang": the audit read held it a minute before.
    assert!(run.elapsed < Duration::from_secs(45), "{:?}", run.elapsed);
}
