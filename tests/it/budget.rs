//! The run's one budget, walked through the binary with a clock that jumps:
//! a debug build reads the scripted clock `TRUSS_PUSH_TEST_CLOCK` names,
//! which moves forward by large steps at chosen requests and prints, at
//! the run's end, every request the run checked before sending it — its
//! phase, the clock then, and its deadline. No real time passes beyond a
//! fast run; the clock says the run took most of its budget.

use std::collections::BTreeSet;

use fake_baseten::FakeBaseten;
use fake_baseten::github::FakeGitHub;

use crate::harness::*;

const GH_TOKEN: &str = "ghs_budget_canary_0a1b2c";
const SHA: &str = "89abcdef0123456789abcdef0123456789abcdef";

/// One request as the scripted clock recorded it (milliseconds from the
/// run's start on that clock).
#[derive(Debug)]
struct Sent {
    phase: String,
    went: String,
    at_ms: u64,
    due_ms: Option<u64>,
    what: String,
}

fn record(text: &str) -> Vec<Sent> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("test-clock: "))
        .map(|l| {
            let mut words = l.splitn(5, ' ');
            let mut next = || words.next().unwrap_or_default().to_string();
            let (phase, went, at, due, what) = (next(), next(), next(), next(), next());
            Sent {
                phase,
                went,
                at_ms: at.trim_start_matches("at=").parse().unwrap(),
                due_ms: due.trim_start_matches("due=").parse().ok(),
                what,
            }
        })
        .collect()
}

/// The example model serves production through `v1dep001`; a new
/// deployment is ready in a moment; a promotion ramps up and never
/// settles; both deployments answer the cases.
fn platform() -> FakeBaseten {
    fake(
        "time_scale: 20
models:
  - id: budgetmd
    name: hello-truss-push
    deployments: [{id: v1dep001, name: v1, environment: production}]
deployments:
  default: [[0, BUILDING], [1, DEPLOYING], [2, ACTIVE]]
traffic:
  seed: 3
  by_payload:
    - {when: {task: classify}, response: {labels: [{name: positive, score: 0.9}]}}
promote:
  default:
    steps:
      - [0, {status: RELEASING}]
      - [1, {status: RAMPING_UP, percent: 50}]
      - [100000, {status: SUCCEEDED, percent: 100}]
  ramp_down_seconds: 1
",
    )
}

const CASES: &str = r#"
- name: classify
  payload: {task: classify, text: "I love this phone"}
  json: {labels: [{name: positive}]}
"#;

/// Checks every request the scripted clock recorded in `run` against its
/// deadline (sent or ended by it; refused only once past it) and answers
/// the record.
fn checked(run: &Outcome) -> Vec<Sent> {
    let sent = record(&format!("{}\n{}", run.stdout, run.stderr));
    let shown = sent
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!sent.is_empty(), "no record: {run:?}");
    for s in &sent {
        let due = s
            .due_ms
            .unwrap_or_else(|| panic!("a request without a deadline: {s:?}\n{shown}"));
        match s.went.as_str() {
            "sent" | "ended" => assert!(
                s.at_ms <= due,
                "{} {}: at +{} ms, past its deadline +{due} ms\n{shown}",
                s.phase,
                s.what,
                s.at_ms,
            ),
            "refused" => assert!(s.at_ms >= due, "{s:?}"),
            other => panic!("{other}: {s:?}"),
        }
    }
    sent
}

/// The phases of `sent` that sent a request.
fn phases_sent(sent: &[Sent]) -> BTreeSet<&str> {
    sent.iter()
        .filter(|s| s.went == "sent")
        .map(|s| s.phase.as_str())
        .collect()
}

/// A gated run with evidence, GitHub reporting and cleanup, whose clock
/// jumps: 550 s into the wait (the deploy's budget is 600 s), 200 s at the
/// smoke test, 50 s into the sample before the promotion (its share is
/// half of the 150 s then left), then past the run's end (600 s +
/// `predict-timeout` 300 s) during the promotion, which is refused and so
/// rolled back; cleanup and GitHub's report share what is left of the
/// minute after it. Every phase sends, none past its deadline.
#[test]
fn a_jumping_clock_never_gets_a_request_past_its_phases_deadline() {
    let fake = platform();
    let gh = FakeGitHub::builder(GH_TOKEN)
        .start_in_background()
        .expect("the fake GitHub starts");
    let (_dir, cases) = file_in_temp_dir("cases.yaml", CASES);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("promotion", "after-predict")
        .arg("environment", "production")
        .arg("wait-timeout-seconds", "600")
        .arg("predict-timeout", "300")
        .arg("predict-cases", cases.to_str().unwrap())
        .arg("predict-requests", "10")
        .arg("cleanup", "true")
        .arg("github-token", GH_TOKEN)
        .arg("github-deployment", "true")
        .arg("commit-status", "true")
        .env("GITHUB_API_URL", gh.api_url())
        .env("GITHUB_REPOSITORY", gh.repository())
        .env("GITHUB_SHA", SHA)
        .env("GITHUB_REF", "refs/heads/main")
        .env(
            "TRUSS_PUSH_TEST_CLOCK",
            "Wait#1+550,Smoke#1+200,EvidenceBeforePromotion#3+50,Promotion#3+100",
        )
        .run();
    if !cfg!(debug_assertions) {
        // A release build has no scripted clock: nothing to walk.
        assert!(!run.stdout.contains("test-clock:"), "{run:?}");
        return;
    }

    // The documented end: the promotion ran out of the run's time, was
    // rolled back, and what the run created was cleaned up.
    assert_eq!(run.status(), "deploy_timeout", "{run:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    let created = run.out("deployment-id").to_string();
    let prod = fake
        .environment("hello-truss-push", "production")
        .expect("production");
    assert_eq!(prod.current.as_deref(), Some("v1dep001"), "{run:?}");
    assert!(
        fake.requests()
            .iter()
            .any(|e| e.endpoint.starts_with("rest.deactivate") && e.path.contains(&created)),
        "cleanup deactivated {created}"
    );

    let deployments = gh.deployments();
    assert_eq!(deployments.len(), 1, "{deployments:?}");
    assert_eq!(
        deployments[0].states(),
        ["in_progress", "error"],
        "GitHub heard of the start and of the end"
    );

    let sent = checked(&run);
    let shown = || {
        sent.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // Every phase sent something, and the clock's jumps were seen: one
    // request was refused past its deadline, and the run's end holds.
    let phases = phases_sent(&sent);
    for phase in [
        "Setup",
        "Upload",
        "Create",
        "Wait",
        "Smoke",
        "EvidenceBeforePromotion",
        "Promotion",
        "Rollback",
        "Cleanup",
        "Announce",
        "Report",
    ] {
        assert!(
            phases.contains(phase),
            "no request of {phase}:\n{}",
            shown()
        );
    }
    assert!(
        sent.iter()
            .any(|s| s.phase == "Promotion" && s.went == "refused"),
        "the jump past the run's end refused the promotion's next read:\n{}",
        shown()
    );
    let (wait, predict, cleanup) = (600_000, 300_000, 60_000);
    let last = sent.iter().map(|s| s.at_ms).max().unwrap();
    assert!(last >= wait + predict, "the clock did jump: +{last} ms");
    for s in &sent {
        assert!(
            s.due_ms.unwrap() <= wait + predict + cleanup,
            "a deadline past the run's end: {s:?}"
        );
    }

    // Every request the platform and GitHub received was checked first:
    // one record per request (S3's requests go between the upload's start
    // and its recorded end), in the order the fakes saw them.
    let platform: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|e| !e.endpoint.starts_with("s3."))
        .collect();
    let checked_platform = sent
        .iter()
        .filter(|s| s.went == "sent" && !s.what.starts_with("GitHub ") && s.phase != "Upload")
        .count();
    assert_eq!(
        platform.len(),
        checked_platform,
        "the platform saw {:?}\n{}",
        platform.iter().map(|e| &e.endpoint).collect::<Vec<_>>(),
        shown()
    );
    let checked_github = sent
        .iter()
        .filter(|s| s.went == "sent" && s.what.starts_with("GitHub "))
        .count();
    assert_eq!(gh.requests().len(), checked_github, "{}", shown());
    let log = fake.requests();
    let s3: Vec<usize> = (0..log.len())
        .filter(|&i| log[i].endpoint.starts_with("s3."))
        .collect();
    let create = log
        .iter()
        .position(|e| e.graphql.as_ref().is_some_and(|_| e.mutation))
        .expect("a create");
    assert!(!s3.is_empty() && s3.iter().all(|&i| i < create), "{log:?}");
    let upload = sent
        .iter()
        .find(|s| s.phase == "Upload" && s.went == "ended")
        .expect("the upload's end");
    assert!(upload.at_ms <= upload.due_ms.unwrap());
}

/// The sample of a plain deploy (no promotion follows) is the `Evidence`
/// phase, by the run's end: a clock that jumps 550 s into the wait, 200 s
/// at the smoke test and 100 s into the sample still gets every request
/// in before its deadline, and the run passes.
#[test]
fn a_plain_deploys_sample_is_walked_on_the_same_clock() {
    let fake = platform();
    let (_dir, cases) = file_in_temp_dir("cases.yaml", CASES);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("wait-timeout-seconds", "600")
        .arg("predict-timeout", "300")
        .arg("predict-cases", cases.to_str().unwrap())
        .arg("predict-requests", "10")
        .env(
            "TRUSS_PUSH_TEST_CLOCK",
            "Wait#1+550,Smoke#1+200,Evidence#3+100",
        )
        .run();
    if !cfg!(debug_assertions) {
        assert!(!run.stdout.contains("test-clock:"), "{run:?}");
        return;
    }
    assert_eq!(run.status(), "success", "{run:?}");
    let sent = checked(&run);
    let phases = phases_sent(&sent);
    for phase in [
        "Setup", "Upload", "Create", "Wait", "Smoke", "Evidence", "Cleanup",
    ] {
        assert!(phases.contains(phase), "no request of {phase}: {sent:?}");
    }
    let last = sent.iter().map(|s| s.at_ms).max().unwrap();
    assert!(last >= 850_000, "the clock did jump: +{last} ms");
}
