//! Promote on evidence: contract cases, objectives over a sample, a
//! baseline side by side, and real traffic during a rolling promotion.
//! The fake gives each deployment a latency distribution drawn from a
//! fixed seed (a few real milliseconds, so these runs stay fast) and
//! answers chosen by the payload; assertions are on exit codes, outputs,
//! and the order of what the fake recorded.

use std::path::Path;

use fake_baseten::FakeBaseten;
use fake_baseten::reqlog::LogEntry;

use crate::harness::*;

/// The example model exists and `v1dep001` (named v1) serves production.
/// `traffic` is the fake's traffic section; `promote` its promotions.
fn served(traffic: &str, promote: &str) -> FakeBaseten {
    fake(&format!(
        "time_scale: 20
models:
  - id: evmodel1
    name: hello-truss-push
    deployments: [{{id: v1dep001, name: v1, environment: production}}]
deployments:
  default: [[0, BUILDING], [1, DEPLOYING], [2, ACTIVE]]
traffic:
{traffic}
{promote}"
    ))
}

const QUICK_PROMOTION: &str = "promote:
  default:
    steps: [[0, {status: RELEASING}], [1, {status: SUCCEEDED, percent: 100}]]
";

const CASES: &str = r#"
- name: classify
  payload: {task: classify, text: "I love this phone"}
  json: {labels: [{name: positive}]}
  pointer:
    /labels/0/score: {type: number}
- name: summarize
  payload: {task: summarize, text: "long text"}
  pointer:
    /choices/0/text: {matches: "^Summary: "}
  contains: Summary
"#;

/// Answers for the two cases; `score` is the classify score as YAML.
fn answers(score: &str) -> String {
    format!(
        "  by_payload:
    - {{when: {{task: classify}}, response: {{labels: [{{name: positive, score: {score}}}]}}}}
    - {{when: {{task: summarize}}, response: {{choices: [{{text: 'Summary: short'}}]}}}}
"
    )
}

fn gated_run<'a>(fake: &'a FakeBaseten, cases: &Path) -> Invocation<'a> {
    Invocation::new(fake)
        .model(example_model())
        .arg("promotion", "after-predict")
        .arg("environment", "production")
        .arg("predict-timeout", "5")
        .arg("predict-cases", cases.to_str().unwrap())
}

fn position(log: &[LogEntry], endpoint: &str) -> Option<usize> {
    log.iter().position(|e| e.endpoint == endpoint)
}

fn predicts_to<'l>(log: &'l [LogEntry], deployment: &str) -> Vec<&'l LogEntry> {
    let path = format!("/deployment/{deployment}/predict");
    log.iter().filter(|e| e.path.ends_with(&path)).collect()
}

/// Which deployment serves `env`, read from the fake's own state.
fn serving(fake: &FakeBaseten, env: &str) -> Vec<String> {
    fake.deployments()
        .into_iter()
        .filter(|d| d.environment.as_deref() == Some(env))
        .map(|d| d.id)
        .collect()
}

#[test]
fn a_case_failing_a_pointer_expectation_fails_the_predict_before_any_promote() {
    let fake = served(&format!("  seed: 1\n{}", answers("high")), QUICK_PROMOTION);
    let (_d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let run = gated_run(&fake, &cases).run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    assert_eq!(run.code, 4);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("case \"classify\": pointer /labels/0/score: expected type number"),
        "{said}"
    );
    assert!(said.contains("\"high\" (string)"), "{said}");
    assert_eq!(run.out("cases-failed"), "1");
    assert_eq!(run.out("cases-passed"), "1");
    let log = fake.requests();
    assert_eq!(position(&log, "rest.promote"), None, "nothing promoted");
    assert_eq!(serving(&fake, "production"), ["v1dep001"]);
    assert!(run.summary.contains("❌ fail"), "{}", run.summary);
    assert!(run.summary.contains("```diff"), "{}", run.summary);
}

/// Latencies of tens of milliseconds keep a loaded machine's own delay
/// (added to both sides alike; up to 160 ms here before it hides a 2×
/// slowdown from the 1.2× test) small beside the difference judged.
#[test]
fn a_candidate_twice_as_slow_as_the_baseline_is_a_regression_and_is_not_promoted() {
    let fake = served(
        &format!(
            "  seed: 3
  deployments:
    - {{name: v1, median_ms: 40, spread: 0.1}}
    - {{created: 0, median_ms: 80, spread: 0.1}}
{}",
            answers("0.9")
        ),
        QUICK_PROMOTION,
    );
    let (d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let analysis = d.path().join("analysis.json");
    let run = gated_run(&fake, &cases)
        .arg("predict-requests", "40")
        .arg("predict-concurrency", "4")
        .arg("max-latency-regression", "1.2")
        .arg("analysis-file", analysis.to_str().unwrap())
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("latency regression: the candidate is slower than 1.2× the baseline (one-sided Mann–Whitney U: candidate slower than 1.2 × baseline; exact p over 40 candidate requests and 40 baseline answers × 1.2: U = "),
        "{said}"
    );
    // A p this small is printed in scientific notation, two digits.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&analysis).unwrap()).unwrap();
    let p = doc["analyses"][0]["regression"]["p_value"]
        .as_f64()
        .unwrap();
    assert!(p < 1e-4, "{p}");
    let shown = format!(", p = {p:.1e} < 0.05)");
    assert!(said.contains(&shown), "{shown}\n{said}");
    let p95: f64 = run.out("latency-p95-ms").parse().unwrap();
    let base: f64 = run.out("baseline-p95-ms").parse().unwrap();
    // The outputs come from the analysis that decided.
    assert!(p95 > base, "{p95} vs {base}");
    let heading = run
        .summary
        .lines()
        .find(|l| l.starts_with("### ❌ Evidence failed (deployment): latency "))
        .unwrap_or_else(|| panic!("{}", run.summary));
    assert!(
        heading.ends_with("× the baseline (limit 1.2×)"),
        "{heading}"
    );
    assert!(heading.chars().count() < 100, "{heading}");
    let log = fake.requests();
    assert_eq!(position(&log, "rest.promote"), None, "not promoted");
    assert_eq!(serving(&fake, "production"), ["v1dep001"]);
    // The baseline got as many requests as the candidate (plus the
    // candidate's smoke test), interleaved: the first evidence request to
    // the baseline comes before the candidate's last.
    let cand = run.out("deployment-id");
    let to_cand = predicts_to(&log, cand);
    let to_base = predicts_to(&log, "v1dep001");
    assert_eq!(to_base.len(), 41, "warm-up and 40 counted");
    assert_eq!(to_cand.len(), 42, "smoke test, warm-up and 40 counted");
    assert!(to_base[0].seq < to_cand.last().unwrap().seq);
}

/// Latencies of tens of milliseconds keep the loaded test machine's own
/// jitter (a few milliseconds) small beside the distribution's spread.
#[test]
fn equal_distributions_over_twenty_seeds_never_regress() {
    let (_d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let cases = &cases;
                s.spawn(move || {
                    let mut bad = Vec::new();
                    for seed in (1..=20).filter(|n| n % 4 == t) {
                        let fake = served(
                            &format!(
                                "  seed: {seed}
  deployments:
    - {{name: v1, median_ms: 30, spread: 0.2}}
    - {{created: 0, median_ms: 30, spread: 0.2}}
{}",
                                answers("0.9")
                            ),
                            QUICK_PROMOTION,
                        );
                        let run = gated_run(&fake, cases)
                            .arg("predict-requests", "60")
                            .arg("predict-concurrency", "8")
                            .arg("max-latency-regression", "1.2")
                            .run();
                        if run.status() != "success" {
                            bad.push(format!("seed {seed}: {}", run.stdout));
                        }
                    }
                    bad
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A rolling promotion that stays at 20% of traffic for 60 scenario
/// seconds (3 real seconds).
const ROLLING: &str = "promote:
  default:
    rolling_deploy: true
    steps:
      - [0, {status: RELEASING}]
      - [1, {status: RAMPING_UP, percent: 20}]
      - [60, {status: SUCCEEDED, percent: 100}]
  ramp_down_seconds: 2
";

#[test]
fn real_traffic_breaking_the_error_rate_cancels_a_rolling_promotion() {
    let fake = served(
        &format!(
            "  seed: 5
  deployments:
    - {{name: v1, median_ms: 1}}
    - {{created: 0, median_ms: 1, live: {{median_ms: 1, error_rate: 0.5}}}}
{}",
            answers("0.9")
        ),
        ROLLING,
    );
    let (_d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let run = gated_run(&fake, &cases).run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains(
            "real traffic during the rolling promotion into production broke an objective"
        ),
        "{said}"
    );
    assert_eq!(run.out("rolled-back"), "true");
    let log = fake.requests();
    let read = position(&log, "rest.get_environment_metrics").expect("metrics read");
    let cancel = position(&log, "rest.cancel_promotion").expect("a cancel");
    let promote = position(&log, "rest.promote").expect("promoted first");
    assert!(promote < read && read < cancel, "{promote} {read} {cancel}");
    // The platform's own state, read back: the previous deployment serves.
    assert_eq!(serving(&fake, "production"), ["v1dep001"]);
}

#[test]
fn without_the_metrics_endpoint_one_notice_and_the_synthetic_verdict_decides() {
    let fake = served(
        &format!("  seed: 6\n  metrics: false\n{}", answers("0.9")),
        &ROLLING.replace("[60,", "[3,"),
    );
    let (_d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let run = gated_run(&fake, &cases).run();
    assert_eq!(run.status(), "success", "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    let notice = "the environment metrics of production cannot be read";
    assert_eq!(said.matches(notice).count(), 1, "{said}");
    let log = fake.requests();
    let reads = log
        .iter()
        .filter(|e| e.endpoint == "rest.get_environment_metrics")
        .count();
    assert_eq!(reads, 1, "asked once, then left alone");
    assert_eq!(serving(&fake, "production"), [run.out("deployment-id")]);
    assert_eq!(run.out("cases-passed"), "2");
}

#[test]
fn a_passing_sample_reports_every_number() {
    let fake = served(
        &format!(
            "  seed: 9
  deployments:
    - {{name: v1, median_ms: 3, spread: 0.1}}
    - {{created: 0, median_ms: 3, spread: 0.1}}
{}",
            answers("0.9")
        ),
        QUICK_PROMOTION,
    );
    let (d, cases) = file_in_temp_dir("cases.jsonl", "");
    std::fs::write(
        &cases,
        "{\"name\": \"classify\", \"payload\": {\"task\": \"classify\"}, \"pointer\": {\"/labels/0/score\": {\"type\": \"number\"}}}\n",
    )
    .unwrap();
    let analysis = d.path().join("analysis.json");
    let run = gated_run(&fake, &cases)
        .arg("predict-requests", "20")
        .arg("max-latency-regression", "1.5")
        .arg("max-latency-p95-ms", "5000")
        .arg("analysis-file", analysis.to_str().unwrap())
        .arg("json", "true")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("cases-passed"), "1");
    assert_eq!(run.out("cases-failed"), "0");
    for k in ["latency-p50-ms", "latency-p95-ms", "baseline-p95-ms"] {
        let v: f64 = run.out(k).parse().unwrap_or_else(|_| panic!("{k}"));
        assert!(v > 0.0, "{k}");
    }
    // Before the promote against the deployment with the baseline beside
    // it, after it through the environment.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&analysis).unwrap()).unwrap();
    let phases: Vec<&str> = doc["analyses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["deployment", "environment"]);
    assert_eq!(doc["analyses"][0]["baseline_deployment_id"], "v1dep001");
    assert!(doc["analyses"][0]["regression"]["u"].is_number());
    assert!(doc["analyses"][0]["regression"]["p_value"].is_number());
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("stdout is JSON");
    assert_eq!(json["evidence"], doc["analyses"]);
    assert_eq!(json["cases-passed"], "1");
    // The summary: the verdict line on top of its section, a row per case,
    // and the chart.
    let section = run
        .summary
        .split("### ✅ Evidence passed (deployment)")
        .nth(1)
        .unwrap_or_else(|| panic!("{}", run.summary));
    assert!(section.contains("| classify | ✅ pass | 20 |"), "{section}");
    assert!(section.contains("\nxychart-beta\n"), "{section}");
    assert!(section.contains("    line \"baseline\" ["), "{section}");
    // Two named series in contrasting colours (the palette in the init
    // block), a legend, and a legend line under the chart.
    let init = section
        .lines()
        .find(|l| l.starts_with("%%{init:"))
        .unwrap_or_else(|| panic!("{section}"));
    assert!(
        init.contains("\"showLegend\": true")
            && init.contains("\"plotColorPalette\": \"#2f81f7, #c96a00\""),
        "{init}"
    );
    assert!(section.contains("    bar \"candidate\" ["), "{section}");
    // Bars from zero: a bar's length is its value.
    assert!(section.contains("    y-axis \"ms\" 0 --> "), "{section}");
    // Each percentile's values in its label: candidate / baseline.
    let x_axis = section
        .lines()
        .find(|l| l.starts_with("    x-axis ["))
        .unwrap_or_else(|| panic!("{section}"));
    assert!(
        x_axis.contains("\"p50 ") && x_axis.contains(" / "),
        "{x_axis}"
    );
    assert!(
        section.lines().any(|l| l.starts_with(
            "🟦 candidate (bars) · 🟧 baseline (line) · labels: candidate / baseline ms · the y-axis starts at 0"
        )),
        "{section}"
    );
    // One analysis gives the outputs, and says so.
    let from: Vec<bool> = doc["analyses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outputs"].as_bool().unwrap())
        .collect();
    assert_eq!(from, [true, false], "the one that judged the regression");
    assert_eq!(
        run.out("baseline-p95-ms"),
        format!(
            "{:.1}",
            doc["analyses"][0]["baseline"]["p95_ms"].as_f64().unwrap()
        )
    );
}

#[test]
fn bad_evidence_inputs_exit_2_before_any_request() {
    let (_d, unknown) = file_in_temp_dir("a.yaml", "- {name: a, payload: {}, colour: red}");
    let (_e, pointer) = file_in_temp_dir(
        "b.yaml",
        "- {name: a, payload: {}, pointer: {a/b: {type: number}}}",
    );
    let (_f, outside) = file_in_temp_dir("c.yaml", "- {name: a, payload: ../../etc/passwd}");
    let (_g, good) = file_in_temp_dir("d.yaml", "- {name: a, payload: {}}");
    let bad: Vec<(&str, &str, String)> = vec![
        (
            "predict-cases",
            "unknown field `colour`",
            unknown.display().to_string(),
        ),
        (
            "predict-cases",
            "not an RFC 6901",
            pointer.display().to_string(),
        ),
        (
            "predict-cases",
            "leaves the repository",
            outside.display().to_string(),
        ),
        (
            "predict-cases",
            "cannot be read",
            "/no/such/cases.yaml".into(),
        ),
        ("predict-requests", "between 1 and 1000", "1001".into()),
        ("predict-concurrency", "between 1 and 16", "17".into()),
        ("max-error-rate", "between 0 and 1", "1.5".into()),
        ("max-latency-regression", "between 1 and 100", "0.5".into()),
    ];
    for (input, why, value) in bad {
        let fake = served("  seed: 1", "");
        let mut inv = Invocation::new(&fake)
            .model(example_model())
            .arg(input, &value);
        if input != "predict-cases" {
            inv = inv.arg("predict-cases", good.to_str().unwrap());
        }
        let run = inv.run();
        assert_eq!(run.code, 2, "{input}={value}: {run:?}");
        assert!(run.stderr.contains(why), "{input}: {}", run.stderr);
        assert!(fake.requests().is_empty(), "{input}: a request was sent");
    }
}

#[test]
fn a_latency_objective_over_refusals_only_is_an_input_error_before_any_request() {
    let (_d, cases) = file_in_temp_dir("cases.yaml", REFUSAL_CASE);
    for (input, value) in [
        ("max-latency-p95-ms", "100"),
        ("max-latency-regression", "1.2"),
    ] {
        let fake = served("  seed: 1", "");
        let run = gated_run(&fake, &cases).arg(input, value).run();
        assert_eq!(run.code, 2, "{input}: {run:?}");
        assert!(
            run.stderr.contains(&format!(
                "{input} is judged on the latency of successful answers, and every case expects a refusal"
            )),
            "{input}: {}",
            run.stderr
        );
        assert!(fake.requests().is_empty(), "{input}: a request was sent");
    }
}

#[test]
fn a_regression_check_outside_a_gated_promotion_is_an_input_error() {
    // A plain deploy has no environment to compare with, and at-create
    // moves traffic before the sample: neither could measure a baseline.
    let (_d, cases) = file_in_temp_dir("cases.yaml", CASES);
    for env in [None, Some("production")] {
        let fake = served("  seed: 1", "");
        let mut inv = Invocation::new(&fake)
            .model(example_model())
            .arg("predict-cases", cases.to_str().unwrap())
            .arg("max-latency-regression", "1.2");
        if let Some(e) = env {
            inv = inv.arg("environment", e);
        }
        let run = inv.run();
        assert_eq!(run.code, 2, "{env:?}: {run:?}");
        assert!(
            run.stderr
                .contains("only a gated promotion measures: set environment"),
            "{env:?}: {}",
            run.stderr
        );
        assert!(fake.requests().is_empty(), "{env:?}: a request was sent");
        assert_eq!(run.status(), "deploy_failed", "{run:?}");
    }
}

#[test]
fn a_plain_deploy_samples_the_deployment_and_at_create_the_environment() {
    let (d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let traffic = format!("  seed: 2\n{}", answers("0.9"));
    for (env, phase, path) in [
        (None, "deployment", "/deployment/"),
        (Some("production"), "environment", "/production/predict"),
    ] {
        let fake = served(&traffic, "");
        let analysis = d.path().join(format!("{phase}.json"));
        let mut inv = Invocation::new(&fake)
            .model(example_model())
            .arg("predict-cases", cases.to_str().unwrap())
            .arg("predict-requests", "20")
            .arg("analysis-file", analysis.to_str().unwrap());
        if let Some(e) = env {
            inv = inv.arg("environment", e);
        }
        let run = inv.run();
        assert_eq!(run.status(), "success", "{run:?}");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&analysis).unwrap()).unwrap();
        let a = &doc["analyses"][0];
        assert_eq!(a["phase"], phase);
        assert!(a["url"].as_str().unwrap().contains(path), "{a}");
        assert!(a["baseline_url"].is_null(), "no baseline: {a}");
        assert_eq!(run.out("baseline-p95-ms"), "");
        let sampled = fake
            .requests()
            .iter()
            .filter(|e| e.endpoint == "inference.predict" && e.path.contains(path))
            .count();
        assert!(
            sampled >= 21,
            "warm-up and 20 counted through {path}: {sampled}"
        );
    }
}

#[test]
fn a_streaming_case_is_checked_on_the_assembled_stream() {
    let fake = served("  seed: 4", "");
    let (_d, cases) = file_in_temp_dir(
        "cases.yaml",
        "- {name: stream, payload: {prompt: hi, stream: true}, stream: true, contains: toktoktok}\n\
         - {name: stream-too-long, payload: {prompt: hi, stream: true}, stream: true, contains: tokx}\n",
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("predict-cases", cases.to_str().unwrap())
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("case \"stream\": pass"), "{said}");
    assert!(
        said.contains("case \"stream-too-long\": contains: expected text containing \"tokx\""),
        "{said}"
    );
    assert_eq!(run.out("cases-passed"), "1");
}

#[test]
fn the_error_rate_and_the_p95_are_judged_against_their_limits() {
    let (_d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let traffic = format!(
        "  seed: 8\n  deployments:\n    - {{created: 0, median_ms: 2, error_rate: 0.25}}\n{}",
        answers("0.9")
    );
    let run_with = |extra: &[(&str, &str)]| {
        let fake = served(&traffic, "");
        let mut inv = Invocation::new(&fake)
            .model(example_model())
            .arg("predict-cases", cases.to_str().unwrap())
            .arg("predict-requests", "40")
            .arg("predict-warmup", "0");
        for (k, v) in extra {
            inv = inv.arg(k, v);
        }
        // The smoke test retries a 500 and may itself be unlucky; the
        // evidence is what these runs look at.
        inv.arg("predict-timeout", "5").run()
    };
    let strict = run_with(&[]);
    assert_eq!(strict.status(), "predict_failed", "{strict:?}");
    let said = format!("{}{}", strict.stdout, strict.stderr);
    assert!(said.contains("is above max-error-rate 0.0%"), "{said}");

    let lenient = run_with(&[("max-error-rate", "0.6")]);
    assert_eq!(lenient.status(), "success", "{lenient:?}");

    let slow = run_with(&[("max-error-rate", "0.6"), ("max-latency-p95-ms", "1")]);
    assert_eq!(slow.status(), "predict_failed", "{slow:?}");
    let said = format!("{}{}", slow.stdout, slow.stderr);
    assert!(said.contains("is above max-latency-p95-ms 1"), "{said}");
}

#[test]
fn a_case_whose_requests_partly_got_no_answer_says_how_many_failed() {
    // A quarter of the new deployment's requests are answered 500, none
    // breaks an expectation: each case still failed some of its requests.
    let (_d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let traffic = format!(
        "  seed: 8\n  deployments:\n    - {{created: 0, median_ms: 2, error_rate: 0.25}}\n{}",
        answers("0.9")
    );
    let run_with = |max_error_rate: &str| {
        let fake = served(&traffic, "");
        // One at a time and no warm-up: the last 40 predicts are the
        // counted ones, in order, so case i % 2.
        let run = Invocation::new(&fake)
            .model(example_model())
            .arg("predict-cases", cases.to_str().unwrap())
            .arg("predict-requests", "40")
            .arg("predict-warmup", "0")
            .arg("predict-concurrency", "1")
            .arg("predict-timeout", "5")
            .arg("max-error-rate", max_error_rate)
            .run();
        let log = fake.requests();
        let all = statuses(&log, run.out("deployment-id"));
        let counted = &all[all.len() - 40..];
        let failed: Vec<usize> = (0..2)
            .map(|c| {
                counted
                    .iter()
                    .skip(c)
                    .step_by(2)
                    .filter(|s| **s == Some(500))
                    .count()
            })
            .collect();
        (run, failed)
    };
    let (strict, failed) = run_with("0");
    assert!(
        failed.iter().any(|&k| k > 0 && k < 20),
        "a case that failed part of its requests: {failed:?}"
    );
    assert_eq!(strict.status(), "predict_failed", "{strict:?}");
    let said = format!("{}{}", strict.stdout, strict.stderr);
    for (name, k) in ["classify", "summarize"].into_iter().zip(&failed) {
        let cell = match k {
            0 => "✅ pass".to_string(),
            k => format!("❌ failed {k} of 20"),
        };
        let row = format!("| {name} | {cell} | 20 | {k} |");
        assert!(strict.summary.contains(&row), "{row}\n{}", strict.summary);
        if *k > 0 {
            assert!(
                said.contains(&format!("\"{name}\" (failed {k} of 20)")),
                "{said}"
            );
            assert!(
                said.contains(&format!("an answer failed {k} of 20")),
                "{said}"
            );
        }
    }
    // A max-error-rate that allows them: the run passes, and the rows
    // still say what failed.
    let (lenient, failed_too) = run_with("0.6");
    assert_eq!(failed_too, failed, "the same seed, the same answers");
    assert_eq!(lenient.status(), "success", "{lenient:?}");
    for (name, k) in ["classify", "summarize"].into_iter().zip(&failed) {
        let cell = match k {
            0 => "✅ pass".to_string(),
            k => format!("⚠️ failed {k} of 20 (no answer, allowed)"),
        };
        let row = format!("| {name} | {cell} | 20 | {k} |");
        assert!(lenient.summary.contains(&row), "{row}\n{}", lenient.summary);
    }
    assert_eq!(lenient.out("cases-passed"), "2");
}

#[test]
fn without_an_answer_no_latency_is_output_and_the_verdict_says_not_measured() {
    // The smoke test is the refusal case; every classify request is
    // answered 500: no request that measures latency was answered.
    let traffic = "  seed: 21\n  by_payload:\n    - {when: {task: nope}, status: 422, response: {error: unknown task}}\n    - {when: {task: classify}, status: 500, response: {error: boom}}\n";
    let fake = served(traffic, "");
    let (d, cases) = file_in_temp_dir(
        "cases.yaml",
        &format!("{REFUSAL_CASE}- {{name: classify, payload: {{task: classify}}}}\n"),
    );
    let analysis = d.path().join("analysis.json");
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("predict-cases", cases.to_str().unwrap())
        .arg("predict-requests", "10")
        .arg("max-latency-p95-ms", "1000")
        .arg("analysis-file", analysis.to_str().unwrap())
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    assert_eq!(run.out("latency-p50-ms"), "");
    assert_eq!(run.out("latency-p95-ms"), "");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("max-latency-p95-ms cannot be judged: none of the 5 requests to cases that expect a success was answered (first failure HTTP 500"),
        "{said}"
    );
    assert!(
        said.contains("latency not measured: none of the 5 requests to cases that expect a success was answered (10 of 10 requests)"),
        "{said}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&analysis).unwrap()).unwrap();
    let a = &doc["analyses"][0];
    for k in ["p50_ms", "p90_ms", "p95_ms", "p99_ms"] {
        assert!(a["candidate"][k].is_null(), "{k}: {a}");
    }
    assert!(a["cases"][1]["p95_ms"].is_null(), "{a}");
    assert!(!run.summary.contains("xychart-beta"), "{}", run.summary);
    assert!(run.summary.contains("No latency chart"), "{}", run.summary);
    assert!(
        run.summary
            .contains("| classify | ❌ failed 5 of 5 | 5 | 5 | – | – |"),
        "{}",
        run.summary
    );
}

/// The serving deployment answers every request with `status_or_error`
/// (a `reject` status, or an error rate of 1).
fn broken_baseline(rule: &str) -> FakeBaseten {
    served(
        &format!(
            "  seed: 11
  deployments:
    - {{name: v1, median_ms: 2, {rule}}}
    - {{created: 0, median_ms: 2}}
{}",
            answers("0.9")
        ),
        QUICK_PROMOTION,
    )
}

#[test]
fn a_baseline_that_answers_nothing_comparable_fails_the_run_naming_it_and_nothing_is_promoted() {
    let (d, cases) = file_in_temp_dir("cases.yaml", CASES);
    for (rule, first) in [
        (
            "reject: 422",
            "first failure HTTP 422: {\"error\":\"Scripted rejection",
        ),
        (
            "error_rate: 1.0",
            "first failure HTTP 500: {\"error\":\"Scripted error",
        ),
    ] {
        let fake = broken_baseline(rule);
        let analysis = d.path().join("analysis.json");
        let run = gated_run(&fake, &cases)
            .arg("predict-requests", "20")
            .arg("max-latency-regression", "1.2")
            .arg("analysis-file", analysis.to_str().unwrap())
            .run();
        assert_eq!(run.status(), "predict_failed", "{rule}: {run:?}");
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(
            said.contains("the serving deployment v1dep001 answered 0 of 20 requests with a 2xx"),
            "{rule}: {said}"
        );
        assert!(said.contains(first), "{rule}: {said}");
        assert!(
            said.contains("the regression cannot be judged"),
            "{rule}: {said}"
        );
        // Nothing promoted, the previous deployment still serves.
        assert_eq!(position(&fake.requests(), "rest.promote"), None, "{rule}");
        assert_eq!(serving(&fake, "production"), ["v1dep001"], "{rule}");
        // No baseline that was not measured: not output, not drawn.
        assert_eq!(run.out("baseline-p95-ms"), "", "{rule}");
        assert!(
            !run.summary.contains("line \"baseline\""),
            "{rule}: {}",
            run.summary
        );
        assert!(run.summary.contains("no baseline was measured"), "{rule}");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&analysis).unwrap()).unwrap();
        assert!(doc["analyses"][0]["baseline"].is_null(), "{rule}: {doc}");
        assert!(doc["analyses"][0]["regression"].is_null(), "{rule}: {doc}");
        // The baseline's answers were not checked against the cases: the
        // candidate's passed.
        assert_eq!(run.out("cases-passed"), "2", "{rule}");
        assert_eq!(
            predicts_to(&fake.requests(), "v1dep001").len(),
            21,
            "{rule}"
        );
    }
}

#[test]
fn a_first_deploy_has_no_baseline_says_so_once_and_judges_the_other_objectives() {
    let fake = fake(&format!(
        "time_scale: 20
deployments:
  default: [[0, BUILDING], [1, DEPLOYING], [2, ACTIVE]]
traffic:
  seed: 12
  deployments: [{{created: 0, median_ms: 20}}]
{}
{QUICK_PROMOTION}",
        answers("0.9")
    ));
    let (d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let analysis = d.path().join("analysis.json");
    let run = gated_run(&fake, &cases)
        .arg("predict-requests", "20")
        .arg("max-latency-regression", "1.2")
        .arg("max-latency-p95-ms", "5")
        .arg("analysis-file", analysis.to_str().unwrap())
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    let notice =
        "max-latency-regression is not judged here: nothing serves production yet (a first deploy)";
    assert_eq!(said.matches(notice).count(), 1, "{said}");
    assert!(said.contains("is above max-latency-p95-ms 5.0"), "{said}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&analysis).unwrap()).unwrap();
    assert!(doc["analyses"][0]["regression"].is_null(), "{doc}");
    assert!(
        doc["analyses"][0]["skipped"][0]
            .as_str()
            .unwrap()
            .contains("a first deploy")
    );
    assert_eq!(run.out("baseline-p95-ms"), "");
    assert!(
        run.summary
            .contains("- ⚠️ max-latency-regression is not judged here"),
        "{}",
        run.summary
    );
    assert_eq!(position(&fake.requests(), "rest.promote"), None);
}

#[test]
fn timed_out_requests_count_in_the_p95_over_every_request() {
    // Every 20th request to the new deployment hangs: 5 of the 100 counted
    // (the smoke test and the warm-up are its first two).
    let fake = served(
        &format!(
            "  seed: 13\n  deployments:\n    - {{created: 0, median_ms: 5, spread: 0.1, hang_every: 20}}\n{}",
            answers("0.9")
        ),
        "",
    );
    let (_d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("predict-cases", cases.to_str().unwrap())
        .arg("predict-requests", "100")
        .arg("predict-concurrency", "4")
        .arg("predict-timeout", "2")
        .arg("max-error-rate", "0.1")
        .arg("max-latency-p95-ms", "100")
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("is above max-latency-p95-ms 100.0 (over all 100 requests; 5 failed and count as slower than every answer)"),
        "{said}"
    );
    // The error rate (5 %) is within its bound: only the p95 failed.
    assert!(!said.contains("is above max-error-rate"), "{said}");
    let p95: f64 = run.out("latency-p95-ms").parse().unwrap();
    assert!(p95 > 100.0, "{p95}");
}

#[test]
fn a_case_that_fails_some_of_its_answers_says_how_many() {
    // The summarize answer is wrong on every 10th request.
    let traffic = format!(
        "  seed: 14\n  by_payload:\n    - {{when: {{task: summarize}}, every: 10, response: {{choices: [{{text: 'oops'}}]}}}}\n{}",
        answers("0.9").trim_start_matches("  by_payload:\n")
    );
    let fake = served(&traffic, "");
    let (_d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("predict-cases", cases.to_str().unwrap())
        .arg("predict-requests", "200")
        .arg("predict-concurrency", "8")
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("1 of 2 cases failed: \"summarize\" (failed 10 of 100)"),
        "{said}"
    );
    assert!(
        said.contains("pointer /choices/0/text failed 10 of 100"),
        "{said}"
    );
    assert!(
        run.summary
            .contains("| summarize | ❌ failed 10 of 100 | 100 |"),
        "{}",
        run.summary
    );
    assert!(
        run.summary.contains("| classify | ✅ pass | 100 |"),
        "{}",
        run.summary
    );
    assert_eq!(run.out("cases-failed"), "1");
}

/// Answers `{task: nope}` with a 422 (on every deployment), besides the
/// two cases' answers.
fn with_refusal(traffic_head: &str) -> String {
    format!(
        "{traffic_head}  by_payload:\n    - {{when: {{task: nope}}, status: 422, response: {{error: unknown task}}}}\n{}",
        answers("0.9").trim_start_matches("  by_payload:\n")
    )
}

const REFUSAL_CASE: &str =
    "- {name: unknown-task, payload: {task: nope}, status: 422, json: {error: unknown task}}\n";

/// Statuses the fake answered to predicts on `deployment`, in order.
fn statuses(log: &[LogEntry], deployment: &str) -> Vec<Option<u16>> {
    predicts_to(log, deployment)
        .iter()
        .map(|e| e.status)
        .collect()
}

#[test]
fn a_negative_first_case_is_the_smoke_test_and_the_deploy_proceeds() {
    // The example model's config.yaml has an example input ({prompt: …},
    // answered 200 by the fake): with a cases file and no predict-payload
    // the first case goes first anyway.
    let fake = served(&with_refusal("  seed: 15\n"), QUICK_PROMOTION);
    let (_d, cases) = file_in_temp_dir("cases.yaml", &format!("{REFUSAL_CASE}{CASES}"));
    let run = gated_run(&fake, &cases).arg("predict-requests", "6").run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("cases-passed"), "3");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains(": HTTP 422, as the first case \"unknown-task\" expects"),
        "{said}"
    );
    assert!(said.contains("case \"unknown-task\": pass"), "{said}");
    // The smoke test's request carried the first case's payload (only
    // {task: nope} is answered 422) and its 422 was accepted.
    let log = fake.requests();
    let cand = run.out("deployment-id");
    assert_eq!(statuses(&log, cand)[0], Some(422), "{log:#?}");
    // The deploy went on: promoted, and the environment's own smoke test
    // (through production, after the promote) sent the same case.
    let promote = position(&log, "rest.promote").expect("promoted");
    let through_env: Vec<&LogEntry> = log
        .iter()
        .filter(|e| e.endpoint == "inference.predict" && e.path.contains("/production/"))
        .collect();
    assert!(through_env[0].seq > log[promote].seq);
    assert_eq!(through_env[0].status, Some(422));
    assert_eq!(serving(&fake, "production"), [cand]);
}

#[test]
fn half_the_cases_negative_still_judge_the_regression_on_the_others() {
    // Both deployments refuse {task: nope}; on classify the candidate is
    // twice as slow. The refusals are left out, not counted as baseline
    // failures: the regression is judged, and fires.
    let fake = served(
        &with_refusal(
            "  seed: 19
  deployments:
    - {name: v1, median_ms: 40, spread: 0.1}
    - {created: 0, median_ms: 80, spread: 0.1}
",
        ),
        QUICK_PROMOTION,
    );
    let (d, cases) = file_in_temp_dir(
        "cases.yaml",
        &format!(
            "{REFUSAL_CASE}- {{name: classify, payload: {{task: classify}}, json: {{labels: [{{name: positive}}]}}}}\n"
        ),
    );
    let analysis = d.path().join("analysis.json");
    let run = gated_run(&fake, &cases)
        .arg("predict-requests", "60")
        .arg("predict-concurrency", "4")
        .arg("max-latency-regression", "1.2")
        .arg("analysis-file", analysis.to_str().unwrap())
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("latency regression: the candidate is slower than 1.2× the baseline"),
        "{said}"
    );
    assert!(!said.contains("the regression cannot be judged"), "{said}");
    assert!(
        said.contains("30 of 60 candidate requests are left out of the comparison: 30 to cases that expect a refusal, whose latency is not the model's (\"unknown-task\")"),
        "{said}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&analysis).unwrap()).unwrap();
    let a = &doc["analyses"][0];
    assert_eq!(a["regression"]["candidate_n"], 30, "{a}");
    assert_eq!(a["regression"]["baseline_n"], 30, "{a}");
    // The baseline's 422s to the refusal case are not its failures.
    assert_eq!(a["baseline"]["requests"], 30, "{a}");
    assert_eq!(a["baseline"]["errors"], 0, "{a}");
    assert_eq!(a["candidate"]["latency_requests"], 30, "{a}");
    assert_eq!(run.out("cases-passed"), "2");
    assert_eq!(position(&fake.requests(), "rest.promote"), None);
    assert_eq!(serving(&fake, "production"), ["v1dep001"]);
}

#[test]
fn a_baseline_refusing_new_cases_is_compared_on_the_case_it_knows() {
    // The serving model does not know the two summarize cases (a 422 to
    // them): they are left out on both sides, and the regression is judged
    // on classify; the rule of half counts over the requests that could be
    // compared (20 of 20, not 20 of 60).
    let fake = served(
        &format!(
            "  seed: 20
  deployments:
    - {{name: v1, median_ms: 30, spread: 0.2, reject: 422, reject_when: {{new: true}}}}
    - {{created: 0, median_ms: 30, spread: 0.2}}
{}",
            answers("0.9")
        ),
        QUICK_PROMOTION,
    );
    let (d, cases) = file_in_temp_dir(
        "cases.yaml",
        r#"
- name: classify
  payload: {task: classify, text: "I love this phone"}
  json: {labels: [{name: positive}]}
- name: summarize
  payload: {task: summarize, text: "long text", new: true}
  contains: Summary
- name: summarize-longer
  payload: {task: summarize, text: "longer text", new: true}
  contains: Summary
"#,
    );
    let analysis = d.path().join("analysis.json");
    let run = gated_run(&fake, &cases)
        .arg("predict-requests", "60")
        .arg("predict-concurrency", "8")
        .arg("max-latency-regression", "1.2")
        .arg("analysis-file", analysis.to_str().unwrap())
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    let left_out = "40 of 60 candidate requests are left out of the comparison: 40 to cases the serving deployment never answered with a 2xx, so there is nothing to compare them with (\"summarize\", \"summarize-longer\")";
    assert!(said.contains(left_out), "{said}");
    assert!(
        run.summary.contains(&format!("- {left_out}")),
        "{}",
        run.summary
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&analysis).unwrap()).unwrap();
    let a = &doc["analyses"][0];
    assert_eq!(a["regression"]["candidate_n"], 20, "{a}");
    assert_eq!(a["regression"]["baseline_n"], 20, "{a}");
    assert_eq!(a["regression"]["left_out_requests"], 40, "{a}");
    assert_eq!(a["regression"]["regressed"], false, "{a}");
    // Its refusals are counted as its errors, and shown.
    assert_eq!(a["baseline"]["requests"], 60, "{a}");
    assert_eq!(a["baseline"]["errors"], 40, "{a}");
    assert!(a["cases"][1]["baseline_p95_ms"].is_null(), "{a}");
    assert!(a["cases"][0]["baseline_p95_ms"].is_number(), "{a}");
    // The fake refused the new cases, and only those, on the baseline.
    let refused = statuses(&fake.requests(), "v1dep001")
        .into_iter()
        .filter(|s| *s == Some(422))
        .count();
    assert_eq!(refused, 40, "the baseline's 422s");
    assert_eq!(serving(&fake, "production"), [run.out("deployment-id")]);
}

#[test]
fn too_few_requests_for_the_regression_are_an_input_error_before_any_request() {
    let fake = served("  seed: 1", "");
    let (_d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("predict-cases", cases.to_str().unwrap())
        .arg("predict-requests", "5")
        .arg("max-latency-regression", "1.2")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains(
            "predict-requests 5 is too few to judge max-latency-regression: set at least 20"
        ),
        "{}",
        run.stderr
    );
    assert!(fake.requests().is_empty(), "a request was sent");
}

#[test]
fn a_sample_that_cannot_finish_in_the_budget_fails_saying_how_far_it_got() {
    // 1000 requests of 200 ms one at a time need 200 s; the budget is
    // wait-timeout 5 s + predict-timeout 5 s.
    let fake = served(
        &format!(
            "  seed: 16\n  deployments:\n    - {{created: 0, median_ms: 200}}\n{}",
            answers("0.9")
        ),
        "",
    );
    let (_d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("predict-cases", cases.to_str().unwrap())
        .arg("predict-requests", "1000")
        .arg("predict-concurrency", "1")
        .arg("wait-timeout-seconds", "5")
        .arg("predict-timeout", "5")
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains(
            "the sample did not finish inside the run's budget (wait budget + predict-timeout): "
        ),
        "{said}"
    );
    assert!(
        said.contains(" of 1000 candidate requests had finished when it ran out"),
        "{said}"
    );
    assert!(
        run.elapsed < std::time::Duration::from_secs(5 + 5 + 60),
        "{:?}",
        run.elapsed
    );
    let sent = fake
        .requests()
        .iter()
        .filter(|e| e.endpoint == "inference.predict")
        .count();
    assert!(sent < 200, "the sample stopped: {sent}");
    // The outputs were written from the partial analysis.
    assert_eq!(run.out("cases-passed"), "2", "{:?}", run.outputs);
    // The cleanup ran after it (a plain deploy that failed is deactivated).
    let dep = run.out("deployment-id").to_string();
    assert!(
        fake.deployments()
            .iter()
            .any(|d| d.id == dep && d.deactivated),
        "cleaned up"
    );
}

#[test]
fn a_sample_before_a_gated_promotion_gets_its_share_and_the_promotion_the_rest() {
    // 200 requests of about 200 ms one at a time need about 40 s, more than
    // the whole run's budget (wait-timeout 30 s + predict-timeout 5 s), so
    // the sample cannot finish either way. What is judged is where it stops:
    // before a gated promote it gets half of what is left (under 17.5 s:
    // about 85 requests), not the run's end (about 170). The 30 s wait
    // leaves a loaded runner ample time to reach the sample; how fast it
    // gets there only shortens the share, never passes the bound.
    let fake = served(
        &format!(
            "  seed: 22\n  deployments:\n    - {{created: 0, median_ms: 200}}\n{}",
            answers("0.9")
        ),
        QUICK_PROMOTION,
    );
    let (_d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let run = gated_run(&fake, &cases)
        .arg("predict-requests", "200")
        .arg("predict-concurrency", "1")
        .arg("wait-timeout-seconds", "30")
        .run();
    assert_eq!(run.status(), "predict_failed", "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    let says = "the sample did not finish inside its share of the run's budget (half of what was left when it started: the gated promotion, the environment's test and its sample keep the rest): ";
    let at = said.find(says).unwrap_or_else(|| panic!("{said}")) + says.len();
    let done: usize = said[at..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        said[at..].starts_with(&format!("{done} of 200 candidate requests and ")),
        "{said}"
    );
    assert!(
        done <= 120,
        "the sample ran past its share, towards the run's end: {done} of 200"
    );
    assert!(
        run.elapsed < std::time::Duration::from_secs(30 + 5 + 60),
        "{:?}",
        run.elapsed
    );
    let log = fake.requests();
    assert_eq!(position(&log, "rest.promote"), None, "nothing promoted");
    assert_eq!(serving(&fake, "production"), ["v1dep001"]);
    assert_eq!(run.out("cases-passed"), "2", "{:?}", run.outputs);
    let dep = run.out("deployment-id").to_string();
    assert!(
        fake.deployments()
            .iter()
            .any(|d| d.id == dep && d.deactivated),
        "cleaned up"
    );
}

#[test]
fn an_analysis_file_that_cannot_be_written_fails_the_run_with_outputs_and_cleanup() {
    let (d, cases) = file_in_temp_dir("cases.yaml", CASES);
    let fifo = d.path().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let dangling = d.path().join("dangling");
    std::os::unix::fs::symlink("/nonexistent-truss-push-dir/analysis.json", &dangling).unwrap();
    let dir = d.path().join("a-dir");
    std::fs::create_dir(&dir).unwrap();
    for (path, why) in [
        // A FIFO nobody reads: the write is abandoned after 3 s.
        (&fifo, "the write did not finish within 3 s".to_string()),
        (
            &dangling,
            "it is a symbolic link to /nonexistent-truss-push-dir/analysis.json, which does not exist"
                .to_string(),
        ),
        (&dir, "it is a directory, not a file".to_string()),
    ] {
        let fake = served(&format!("  seed: 17\n{}", answers("0.9")), QUICK_PROMOTION);
        let run = gated_run(&fake, &cases)
            .arg("analysis-file", path.to_str().unwrap())
            .run();
        assert_eq!(run.status(), "predict_failed", "{path:?}: {run:?}");
        let said = format!("{}{}", run.stdout, run.stderr);
        let error = format!("cannot write {}: {why}", path.display());
        assert!(said.contains(&error), "{error}\n{said}");
        assert!(
            said.contains("the evidence is not recorded, so the run does not pass"),
            "{path:?}: {said}"
        );
        // The other outputs were written, nothing was promoted, and the
        // new deployment was cleaned up.
        assert_eq!(run.out("cases-passed"), "2", "{path:?}");
        assert!(!run.out("latency-p95-ms").is_empty(), "{path:?}");
        assert!(run.summary.contains("### ✅ Evidence passed (deployment)"), "{path:?}");
        assert_eq!(position(&fake.requests(), "rest.promote"), None, "{path:?}");
        assert_eq!(serving(&fake, "production"), ["v1dep001"]);
        let dep = run.out("deployment-id").to_string();
        assert!(
            fake.deployments()
                .iter()
                .any(|d| d.id == dep && d.deactivated),
            "{path:?}: cleaned up"
        );
    }
}

#[test]
fn hostile_metrics_answers_are_unreadable_said_once_and_the_synthetic_verdict_decides() {
    let lat = "[0.01, 0.02, 0.03, 0.04, 0.02]";
    for (values, why) in [
        (format!("[[[1], [-5, 0, 0], {lat}]]"), "is -5, not a count"),
        (
            format!(
                "[[[1], [900, 0, 0], {lat}], [[1], [900, 0, 0], [0.05, 0.04, 0.03, 0.02, 0.03]]]"
            ),
            "the 0.9 quantile of baseten_end_to_end_response_time_seconds (0.04 s) is below the 0.5 quantile (0.05 s)",
        ),
        (
            "[[[1], [900, 0, 0], [0.01, -1, 0.03, 0.04, 0.02]]]".to_string(),
            "not a count or a duration",
        ),
    ] {
        let fake = served(
            &format!("  seed: 18\n  metrics_values: {values}\n{}", answers("0.9")),
            ROLLING,
        );
        let (d, cases) = file_in_temp_dir("cases.yaml", CASES);
        let analysis = d.path().join("analysis.json");
        let run = gated_run(&fake, &cases)
            .arg("max-error-rate", "0.05")
            .arg("analysis-file", analysis.to_str().unwrap())
            .run();
        assert_eq!(run.status(), "success", "{why}: {run:?}");
        let said = format!("{}{}", run.stdout, run.stderr);
        let notice =
            "the environment metrics of production cannot be read: its answer is unreadable";
        assert_eq!(said.matches(notice).count(), 1, "{why}: {said}");
        assert!(said.contains(why), "{why}: {said}");
        // Never read as "no errors": no reading was kept after it.
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&analysis).unwrap()).unwrap();
        let live: Vec<&serde_json::Value> = doc["analyses"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|a| a["live"].as_array().unwrap())
            .collect();
        let kept = if why.starts_with("the 0.9 quantile") {
            1
        } else {
            0
        };
        assert_eq!(live.len(), kept, "{why}: {live:?}");
        assert_eq!(serving(&fake, "production"), [run.out("deployment-id")]);
    }
}
