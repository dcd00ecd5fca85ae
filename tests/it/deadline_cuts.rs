//! Requests cut by their phase's deadline while in flight (sent, the
//! platform applied them, their answer dripping): the run looks up what
//! happened under the look-up's own allowance and cleans up under its
//! own minute, whatever the cut request used up. Each test asserts what
//! the fake holds afterwards and the fake's request log.

use fake_baseten::FakeBaseten;
use fake_baseten::proxy::{Fault, FaultProxy, Rule};

use crate::cancel_windows::GATED;
use crate::harness::*;

/// The platform applies the request, then its answer comes one byte every
/// 400 ms: in flight for minutes.
fn dripping() -> Fault {
    Fault::Drip {
        bytes: 1,
        interval_ms: 400,
    }
}

/// A proxy in front of `fake` with `rule`.
fn proxy_with(fake: &FakeBaseten, rule: Rule) -> FaultProxy {
    FaultProxy::builder(fake.addr())
        .rule(rule)
        .start_in_background()
        .expect("proxy starts")
}

/// A run of the example model through `proxy` (GraphQL and REST).
fn through<'a>(fake: &'a FakeBaseten, proxy: &FaultProxy) -> Invocation<'a> {
    Invocation::new(fake)
        .model(example_model())
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
}

/// The deployment the run created (named `ci-test` by the harness).
fn created(fake: &FakeBaseten) -> fake_baseten::state::DeploymentSnapshot {
    let [d] = fake
        .deployments()
        .into_iter()
        .filter(|d| d.name == "ci-test")
        .collect::<Vec<_>>()
        .try_into()
        .expect("created once");
    d
}

/// The gated promote is applied, but its answer drips past the run's end
/// (wait budget 20 s plus `predict-timeout` 3 s, in real time): the cut
/// answer is a lost one, not a refusal. The look-up reads production
/// under its own allowance, finds ours serving, and the gate's rollback
/// puts the previous deployment back; cleanup deactivates ours.
#[test]
fn a_promote_cut_by_the_runs_end_is_looked_up_and_rolled_back() {
    let fake = fake(GATED);
    let proxy = proxy_with(
        &fake,
        Rule::new("drip", dripping())
            .path_like("/v1/models/*/environments/*/promote")
            .first(1),
    );
    let run = through(&fake, &proxy)
        .arg("promotion", "after-predict")
        .arg("environment", "production")
        .arg("wait-timeout-seconds", "20")
        .arg("predict-timeout", "3")
        .run();
    let tested = created(&fake);
    assert_eq!(run.out("tested-deployment-id"), tested.id, "{run:?}");
    // Read, then report: production serves the previous deployment again.
    let env = fake.environment("hello-truss-push", "production").unwrap();
    assert_eq!(env.current.as_deref(), Some("v1dep001"), "{run:?}");
    assert_eq!(env.candidate, None, "{env:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    assert_eq!(run.code, 3, "{run:?}");
    assert!(!run.stdout.contains("nothing was promoted"), "{run:?}");
    // The cut promote was sent once, then the rollback's promote of the
    // previous deployment; ours, serving nothing, was deactivated.
    let promotes: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|e| e.endpoint == "rest.promote")
        .map(|e| format!("{:?}", e.body))
        .collect();
    assert_eq!(promotes.len(), 2, "{promotes:?}");
    assert!(promotes[0].contains(&tested.id), "{promotes:?}");
    assert!(promotes[1].contains("v1dep001"), "{promotes:?}");
    assert!(created(&fake).deactivated, "{run:?}");
}

/// Fail-fast halts a slow target whose deactivate hangs: its cleanup, cut
/// by the halt's seconds, could not finish. The step exits 8 with what is
/// left named, wherever that target stands in the list (a failure before
/// it in the list used to speak for the step, exit 1).
#[test]
fn fail_fast_with_a_cleanup_that_could_not_finish_exits_8_naming_what_is_left() {
    let fake = fake(
        // Both exist (so the new deployments serve no environment); the
        // slow one would build for an hour: only fail-fast ends it.
        "models:
  - {id: brokenmd, name: broken, deployments: [{id: brokenv1, name: v1, status: ACTIVE, environment: production}]}
  - {id: slowmodl, name: slow, deployments: [{id: slowv1, name: v1, status: ACTIVE, environment: production}]}
deployments:
  default: [[0, BUILDING], [3600, ACTIVE]]
  by_model:
    broken: [[0, BUILDING], [0.2, BUILD_FAILED]]
",
    );
    let proxy = proxy_with(
        &fake,
        Rule::new("hung", Fault::Hang).path_like("/v1/models/slowmodl/deployments/*/deactivate"),
    );
    let (_root, dirs) = model_dirs(&["broken", "slow"]);
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .arg("fail-fast", "true")
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
        .run();
    assert!(
        run.elapsed < std::time::Duration::from_secs(120),
        "{:?}",
        run.elapsed
    );
    let slow = fake
        .deployments()
        .into_iter()
        .find(|d| d.model_name == "slow" && d.name == "ci-test")
        .expect("slow was created");
    assert!(!slow.deactivated, "its deactivate hung");
    assert_eq!(run.code, 8, "{run:?}");
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let msg = run.out("error-message");
    assert!(msg.contains("slow") && msg.contains(&slow.id), "{msg}");
}

/// A create the platform applied whose answer drips until its grace ends
/// (wait budget 20 s, `predict-timeout` 2 s: the run ends at +22 s and
/// its cleanup minute at +82 s). The scripted clock (debug builds) leaves
/// the create 2 s when it is sent, then jumps past +82 s as the lookup
/// starts and 30 s more as cleanup sends: the lookup still has its own
/// allowance and the cleanup after it its own minute, so the deployment
/// is found and deactivated; no request goes past its deadline, nor past
/// the run's last second (+22 s, a minute, the lookup's 30 s, a minute).
#[test]
fn a_lookup_and_cleanup_past_the_runs_end_keep_their_own_time() {
    if !cfg!(debug_assertions) {
        return;
    }
    let fake = fake(crate::cancel::EXISTING);
    let proxy = proxy_with(
        &fake,
        Rule::new("drip", dripping()).graphql("create_model_version_from_truss"),
    );
    let run = through(&fake, &proxy)
        .arg("wait-timeout-seconds", "20")
        .arg("predict-timeout", "2")
        .env(
            "TRUSS_PUSH_TEST_CLOCK",
            "Create#1+58,Lookup#1+25,Cleanup#1+30",
        )
        .run();
    let created = created(&fake);
    assert_eq!(run.out("deployment-id"), created.id, "{run:?}");
    assert!(
        run.stdout
            .contains("the deployment was created although its answer was lost: adopted it"),
        "{run:?}"
    );
    assert!(created.deactivated, "{run:?}");
    // Each request by its deadline (the scripted clock's record: phase,
    // sent or refused, the clock then, the deadline, in milliseconds).
    let record = format!("{}{}", run.stdout, run.stderr);
    let lines: Vec<Vec<&str>> = record
        .lines()
        .filter_map(|l| l.trim().strip_prefix("test-clock: "))
        .map(|l| l.splitn(5, ' ').collect())
        .collect();
    let ms = |w: &str, key: &str| -> u64 { w.trim_start_matches(key).parse().unwrap() };
    let last_ms = (22 + 60 + 30 + 60) * 1000;
    for l in &lines {
        let (at, due) = (ms(l[2], "at="), ms(l[3], "due="));
        if l[1] == "sent" || l[1] == "ended" {
            assert!(at <= due, "{l:?}");
        }
        assert!(due <= last_ms, "{l:?}");
    }
    let sent_past_end = |phase: &str| {
        lines
            .iter()
            .any(|l| l[0] == phase && l[1] == "sent" && ms(l[2], "at=") > 82_000)
    };
    assert!(sent_past_end("Lookup"), "{lines:?}");
    assert!(sent_past_end("Cleanup"), "{lines:?}");
}
