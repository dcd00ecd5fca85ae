//! GitLab takes a dotenv report of at most 20 variables and under 5 KB,
//! and fails the job at artifact upload otherwise — after the deploy
//! succeeded. The widest run of each command writes its fixed list:
//! a gated deploy with every evidence output, a skip-unchanged deploy, a
//! deploy of several targets (its JSON `results` stays out) and a plan
//! (its own status, never `TRUSS_PUSH_STATUS`; its matrix stays out).

use fake_baseten::runner::parse_gitlab_dotenv;

use crate::harness::*;

/// The deploy's variables, in the order the file writes them: the
/// binary's own table (`ci/outputs/command.rs`), as the docs show it.
fn deploy() -> Vec<String> {
    let all = truss_push::dotenv_variables();
    let (_, names) = all.iter().find(|(c, _)| *c == "deploy").unwrap();
    assert_eq!(names.len(), 19, "{names:?}");
    names.clone()
}

/// The dotenv file of `run`, parsed as GitLab's upload parses it (at most
/// 20 variables, under 5 KB), its names in order, and its byte count.
fn accepted(what: &str, run: &Outcome) -> (Vec<(String, String)>, usize) {
    let text = run
        .outputs_file
        .clone()
        .unwrap_or_else(|| panic!("{what}: no outputs file: {run:?}"));
    let vars = parse_gitlab_dotenv(text.as_bytes())
        .unwrap_or_else(|e| panic!("{what}: GitLab refuses the file ({e:?}):\n{text}"));
    assert!(vars.len() <= 20 && text.len() < 5 * 1024, "{what}");
    for json in ["RESULTS", "MATRIX"] {
        assert!(!text.contains(json), "{what}: JSON in dotenv:\n{text}");
    }
    (vars, text.len())
}

fn names(vars: &[(String, String)]) -> Vec<&str> {
    vars.iter().map(|(k, _)| k.as_str()).collect()
}

fn value<'a>(vars: &'a [(String, String)], name: &str) -> &'a str {
    &vars.iter().find(|(k, _)| k == name).unwrap().1
}

#[test]
fn a_gated_deploy_with_every_evidence_output_fits() {
    let fake = fake(
        "time_scale: 20
models:
  - id: evmodel1
    name: hello-truss-push
    deployments: [{id: v1dep001, name: v1, environment: production}]
deployments:
  default: [[0, BUILDING], [1, DEPLOYING], [2, ACTIVE]]
traffic:
  seed: 9
  deployments:
    - {name: v1, median_ms: 3, spread: 0.1}
    - {created: 0, median_ms: 3, spread: 0.1}
  by_payload:
    - {when: {task: classify}, response: {labels: [{name: positive, score: 0.9}]}}
promote:
  default:
    steps: [[0, {status: RELEASING}], [1, {status: SUCCEEDED, percent: 100}]]
",
    );
    let (_d, cases) = file_in_temp_dir(
        "cases.jsonl",
        "{\"name\": \"classify\", \"payload\": {\"task\": \"classify\"}, \"pointer\": {\"/labels/0/score\": {\"type\": \"number\"}}}\n",
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("promotion", "after-predict")
        .arg("environment", "production")
        .arg("predict-timeout", "5")
        .arg("predict-cases", cases.to_str().unwrap())
        .arg("predict-requests", "20")
        .arg("max-latency-regression", "1.5")
        .arg("max-latency-p95-ms", "5000")
        .outputs_file("outputs.env")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    // Every evidence output is set in GitHub's outputs; the file keeps its list.
    assert!(!run.out("baseline-p95-ms").is_empty(), "{run:?}");
    let (vars, bytes) = accepted("evidence", &run);
    assert_eq!(names(&vars), deploy(), "{bytes} bytes");
    assert_eq!(value(&vars, "TRUSS_PUSH_CASES_FAILED"), "0");
    assert_eq!(
        value(&vars, "TRUSS_PUSH_LATENCY_P95_MS"),
        run.out("latency-p95-ms")
    );
    assert_eq!(
        value(&vars, "TRUSS_PUSH_PREVIOUS_DEPLOYMENT_ID"),
        "v1dep001"
    );
    assert_eq!(value(&vars, "TRUSS_PUSH_ROLLED_BACK"), "false");
}

#[test]
fn a_skip_unchanged_deploy_fits() {
    let fake = fake(
        "manual_clock: true\ndeactivation_seconds: 0\ndeployments:\n  default: [[0, ACTIVE]]\n",
    );
    let dir = model_dir("model_name: by-content\n");
    let push = |name: &'static str| {
        Invocation::new(&fake)
            .model(dir.path())
            .arg("environment", "production")
            .arg("skip-unchanged", "true")
            .arg("predict-payload", r#"{"x": 1}"#)
            .arg("deployment-name", name)
            .outputs_file("outputs.env")
            .run()
    };
    let first = push("first");
    assert_eq!(first.out("unchanged"), "false", "{first:?}");
    let run = push("second");
    assert_eq!(run.out("unchanged"), "true", "{run:?}");
    let (vars, _) = accepted("skip-unchanged", &run);
    assert_eq!(names(&vars), deploy());
    assert_eq!(value(&vars, "TRUSS_PUSH_UNCHANGED"), "true");
}

#[test]
fn a_deploy_of_several_targets_fits_and_leaves_its_results_to_json() {
    let fake = fake(
        "deployments:\n  default: [[0, BUILDING], [0.3, ACTIVE]]\n  by_model:\n    broken: [[0, BUILDING], [0.2, BUILD_FAILED]]\n",
    );
    let (_root, dirs) = model_dirs(&["first", "broken", "third", "fourth", "fifth"]);
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .outputs_file("outputs.env")
        .run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(run.out("results").len() > 1000, "results are wide");
    let (vars, _) = accepted("several targets", &run);
    assert_eq!(names(&vars), deploy());
    assert_eq!(value(&vars, "TRUSS_PUSH_TARGETS_COUNT"), "5");
    assert_eq!(value(&vars, "TRUSS_PUSH_STATUS"), "deploy_failed");
}

#[test]
fn a_plans_file_says_the_plans_status_and_no_deploys() {
    let (_root, dirs) = model_dirs(&["first", "second", "third"]);
    let run = Invocation::bare()
        .arg("plan", "true")
        .arg("truss-directory", target_list(&dirs))
        .outputs_file("plan.env")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    let (vars, _) = accepted("plan", &run);
    assert_eq!(
        names(&vars),
        [
            "TRUSS_PUSH_PLAN_STATUS",
            "TRUSS_PUSH_TARGETS_COUNT",
            "TRUSS_PUSH_ERROR_MESSAGE"
        ]
    );
    assert_eq!(value(&vars, "TRUSS_PUSH_PLAN_STATUS"), "success");
    assert_eq!(value(&vars, "TRUSS_PUSH_TARGETS_COUNT"), "3");
}

/// Prune's widest run: many deployments retired, some protected, a price
/// line, a JSON `retired` of every one — the file keeps its four
/// variables and no JSON.
#[test]
fn a_prune_of_many_deployments_fits_and_leaves_retired_to_json() {
    const HASH: &str = "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4";
    let mut y = String::from(
        "manual_clock: true\nmodels:\n  - id: prune009\n    name: pruned\n    deployments:\n",
    );
    y += &format!(
        "      - {{id: prod0009, name: prod0009, created_at: -3600, environment: production, labels: {{truss_push_content_hash: \"{HASH}\"}}}}\n"
    );
    for i in 0..60 {
        y += &format!(
            "      - {{id: old{i:05}, name: {}, created_at: -{}, labels: {{truss_push_content_hash: \"{HASH}\"}}}}\n",
            "n".repeat(60),
            86_400 * (i + 2)
        );
    }
    y += "audit_log:\n  entries:\n    - {at: -3600, event_type: MODEL_DEPLOYED, model: pruned, deployment: prod0009, environment: production}\n";
    let fake = fake(&y);
    let dir = model_dir("model_name: pruned\n");
    let run = Invocation::new(&fake)
        .command("prune")
        .arg("truss-directory", dir.path().to_str().unwrap())
        .arg("keep", "1")
        .outputs_file("outputs.env")
        .run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.out("retired-count"), "59", "{run:?}");
    assert!(
        run.out("retired").len() > 5 * 1024,
        "the JSON alone would not fit"
    );
    let (vars, bytes) = accepted("prune", &run);
    assert_eq!(
        names(&vars),
        [
            "TRUSS_PUSH_STATUS",
            "TRUSS_PUSH_RETIRED_COUNT",
            "TRUSS_PUSH_PROTECTED_COUNT",
            "TRUSS_PUSH_TARGETS_COUNT",
            "TRUSS_PUSH_ERROR_MESSAGE"
        ],
        "{bytes} bytes"
    );
    assert_eq!(value(&vars, "TRUSS_PUSH_RETIRED_COUNT"), "59");
}
