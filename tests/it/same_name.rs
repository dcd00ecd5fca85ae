//! Two runs with one deployment name (a re-run of a commit, whose default
//! name is its sha7; the older run of a cancel-in-progress group). Run B's
//! create is held by the fault proxy while run A, straight to the fake,
//! creates a deployment of the same name; then B's answer is lost (the
//! create's deadline) or B is cancelled. B must find only what carries its
//! own `truss_push_run` label, as the platform's REST `labels` show it,
//! and never deactivate, smoke-test, adopt or name as its own A's
//! deployment. Each test asserts the fake's request log and the outputs.

use std::cell::RefCell;

use fake_baseten::FakeBaseten;
use fake_baseten::proxy::{Fault, FaultProxy, Rule};

use crate::harness::*;

/// A model that exists, whose deployments become ACTIVE at once.
/// A platform that accepts a deployment name the model already has, in
/// its preflight too (as its GraphQL create does): a re-run of a commit.
const MODEL: &str = "teams: [{id: t1, name: ml, default: true}]\nmodels:\n  - {id: oldmodel, name: hello-truss-push, team: ml, deployments: [{id: olddep, name: v1, status: ACTIVE, environment: production}]}\ndeployments:\n  default: [[0, ACTIVE]]\nprepare_model_upload: {refuse_taken_names: false}\n";

/// The version create, which both runs send.
const CREATE: &str = "create_model_version_from_truss";

/// A proxy in front of `fake` whose first `CREATE` suffers `fault`.
fn proxy(fake: &FakeBaseten, fault: Fault) -> FaultProxy {
    FaultProxy::builder(fake.addr())
        .rule(Rule::new("held", fault).graphql(CREATE).first(1))
        .start_in_background()
        .expect("proxy starts")
}

/// Run B: through `proxy`, with the harness's deployment name.
fn run_b<'a>(fake: &'a FakeBaseten, proxy: &FaultProxy) -> Invocation<'a> {
    Invocation::new(fake)
        .model(example_model())
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
}

/// Run A: straight to the fake, the same model and deployment name,
/// cleanup off; answers A's deployment id and how many requests the fake
/// had logged when A ended.
fn run_a(fake: &FakeBaseten) -> (String, usize) {
    let a = Invocation::new(fake)
        .model(example_model())
        .arg("cleanup", "false")
        .run();
    assert_eq!(a.status(), "success", "run A: {a:?}");
    (a.out("deployment-id").to_string(), fake.requests().len())
}

/// Once B's create is held (the proxy's rule fired), runs A to its end,
/// once; true from then on.
fn a_once_b_is_held<'a>(
    fake: &'a FakeBaseten,
    proxy: &'a FaultProxy,
    a: &'a RefCell<Option<(String, usize)>>,
) -> impl Fn() -> bool + 'a {
    move || {
        if proxy.faulted().is_empty() {
            return false;
        }
        if a.borrow().is_none() {
            *a.borrow_mut() = Some(run_a(fake));
        }
        true
    }
}

/// What B did to A's deployment `a_id` after A ended (the fake's log from
/// `from` on): any request naming it (status read, predict, deactivate).
fn b_touched(fake: &FakeBaseten, a_id: &str, from: usize) -> Vec<String> {
    fake.requests()
        .into_iter()
        .skip(from)
        .filter(|e| {
            let at = format!(
                "{} {} {}",
                e.host.as_deref().unwrap_or_default(),
                e.path,
                e.query.as_deref().unwrap_or_default()
            );
            at.contains(a_id)
        })
        .map(|e| format!("{} {}", e.endpoint, e.path))
        .collect()
}

/// The run label a create carried, from the fake's record of it.
fn run_label_of(fake: &FakeBaseten, id: &str) -> String {
    let d = fake
        .deployments()
        .into_iter()
        .find(|d| d.id == id)
        .expect("the deployment exists");
    d.labels.expect("labels")["truss_push_run"]
        .as_str()
        .expect("a run label")
        .to_string()
}

/// B named A's deployment `a_id` as another run's, left alone: a warning
/// (an annotation) and a line of the summary.
fn said_left_alone(b: &Outcome, a_id: &str) {
    let said = format!(
        "deployment {a_id} of the same name (\"ci-test\"), created by another run, was left alone"
    );
    assert!(b.stderr.contains(&format!("warning: {said}")), "{b:?}");
    assert!(b.summary.contains(&said), "{}", b.summary);
}

#[test]
fn a_cancel_while_the_create_hangs_leaves_another_runs_deployment_of_the_same_name_alone() {
    let fake = fake(MODEL);
    // B's create never reaches the platform.
    let proxy = proxy(&fake, Fault::Hang);
    let a = RefCell::new(None);
    let b = run_b(&fake, &proxy).run_signalled_when(a_once_b_is_held(&fake, &proxy, &a), "TERM");
    let (a_id, a_end) = a.into_inner().expect("run A ran");
    assert_eq!(b.code, 130, "{b:?}");
    assert_eq!(b.out("deployment-id"), "", "A's is not B's: {b:?}");
    let touched = b_touched(&fake, &a_id, a_end);
    assert!(touched.is_empty(), "B touched A's {a_id}: {touched:?}");
    let a_dep = fake.deployments().into_iter().find(|d| d.id == a_id);
    assert!(!a_dep.expect("A's deployment").deactivated);
    // B read the platform after the cancel, and says what it found.
    assert!(
        endpoints(&fake)[a_end..]
            .iter()
            .any(|e| e == "rest.list_deployments"),
        "{b:?}"
    );
    said_left_alone(&b, &a_id);
    assert!(
        b.stdout
            .contains("the platform showed no deployment created by this run when read"),
        "{b:?}"
    );
    assert!(!b.stdout.contains("created by this run;"), "{b:?}");
}

#[test]
fn a_lost_create_answer_is_not_taken_for_another_runs_deployment_of_the_same_name() {
    // The scripted clock (debug builds) leaves B's create 15 s of its
    // deadline (a 20 s budget: the create's own grace): run A ends well
    // within it.
    if !cfg!(debug_assertions) {
        return;
    }
    let fake = fake(MODEL);
    let proxy = proxy(&fake, Fault::Hang);
    let a = RefCell::new(None);
    let ready = a_once_b_is_held(&fake, &proxy, &a);
    let mut running = run_b(&fake, &proxy)
        .arg("cleanup", "true")
        .arg("wait-timeout-seconds", "20")
        .env("TRUSS_PUSH_TEST_CLOCK", "Create#1+45")
        .start();
    while !ready() {
        assert!(!running.exited(), "B ended before its create was held");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let b = running.finish();
    drop(ready);
    let (a_id, a_end) = a.into_inner().expect("run A ran");
    // B looked and found only A's: nothing of its own, so the create
    // could be sent once more — but the clock's jump spent its deadline,
    // so B ends saying so, with no deployment, and A's untouched.
    assert_eq!(b.status(), "deploy_timeout", "{b:?}");
    assert_eq!(b.out("deployment-id"), "", "A's is not B's: {b:?}");
    let touched = b_touched(&fake, &a_id, a_end);
    assert!(touched.is_empty(), "B touched A's {a_id}: {touched:?}");
    let named: Vec<_> = fake
        .deployments()
        .into_iter()
        .filter(|d| d.name == "ci-test")
        .collect();
    assert_eq!(named.len(), 1, "only A's: {named:?}");
    assert!(named[0].id == a_id && !named[0].deactivated, "{named:?}");
    assert!(
        b.stdout
            .contains("the deployment was not created: sending the request once more"),
        "{b:?}"
    );
    said_left_alone(&b, &a_id);
}

/// B's create applied, its answer dripping: A creates meanwhile, then B is
/// cancelled (`signal`) or its create's deadline passes (`clock`).
fn applied_beside_another(signal: bool) -> (FakeBaseten, Outcome, String) {
    let fake = fake(MODEL);
    let proxy = proxy(
        &fake,
        Fault::Drip {
            bytes: 1,
            interval_ms: 400,
        },
    );
    let a = RefCell::new(None);
    let ready = a_once_b_is_held(&fake, &proxy, &a);
    let b = if signal {
        run_b(&fake, &proxy).run_signalled_when(&ready, "TERM")
    } else {
        let mut running = run_b(&fake, &proxy)
            .arg("wait-timeout-seconds", "20")
            .env("TRUSS_PUSH_TEST_CLOCK", "Create#1+45")
            .start();
        while !ready() {
            assert!(!running.exited(), "B ended before its create was held");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        running.finish()
    };
    drop(ready);
    let (a_id, a_end) = a.into_inner().expect("run A ran");
    let touched = b_touched(&fake, &a_id, a_end);
    assert!(touched.is_empty(), "B touched A's {a_id}: {touched:?}");
    (fake, b, a_id)
}

#[test]
fn a_cancelled_run_whose_create_was_applied_finds_its_own_beside_another_runs() {
    let (fake, b, a_id) = applied_beside_another(true);
    assert_eq!(b.code, 130, "{b:?}");
    let b_id = b.out("deployment-id").to_string();
    assert!(!b_id.is_empty() && b_id != a_id, "{b:?}");
    // Each run's deployment carries its own run label.
    assert_ne!(run_label_of(&fake, &a_id), run_label_of(&fake, &b_id));
    let all = fake.deployments();
    assert!(all.iter().find(|d| d.id == b_id).unwrap().deactivated);
    assert!(!all.iter().find(|d| d.id == a_id).unwrap().deactivated);
    assert_in_order(
        &b.stdout,
        &[
            &format!(
                "the platform shows deployment {b_id}, created by this run; its cleanup follows"
            ),
            "Deactivated",
        ],
    );
    said_left_alone(&b, &a_id);
}

#[test]
fn a_lost_answer_to_an_applied_create_adopts_its_own_beside_another_runs() {
    if !cfg!(debug_assertions) {
        return;
    }
    let (fake, b, a_id) = applied_beside_another(false);
    let b_id = b.out("deployment-id").to_string();
    assert!(!b_id.is_empty() && b_id != a_id, "{b:?}");
    // Never sent twice: the lookup found B's own.
    assert_eq!(
        mutations(&fake)
            .iter()
            .filter(|e| e.endpoint == format!("graphql.{CREATE}"))
            .count(),
        2,
        "one create each: {b:?}"
    );
    // Each run's deployment carries its own run label.
    assert_ne!(run_label_of(&fake, &a_id), run_label_of(&fake, &b_id));
    let all = fake.deployments();
    assert!(all.iter().find(|d| d.id == b_id).unwrap().deactivated);
    assert!(!all.iter().find(|d| d.id == a_id).unwrap().deactivated);
    assert!(
        b.stdout
            .contains("the deployment was created although its answer was lost: adopted it"),
        "{b:?}"
    );
    said_left_alone(&b, &a_id);
}

/// A model holding a `ci-test` deployment with `labels` (another client's),
/// whose deployments the run cannot list before its create (so every one
/// counts as new), and whose create is reset before it reaches the
/// platform (not applied, its outcome unknown to the run).
fn unlisted_beside(labels: &str) -> (FakeBaseten, Outcome) {
    let fake = fake(&format!(
        "teams: [{{id: t1, name: ml, default: true}}]\nmodels:\n  - {{id: oldmodel, name: hello-truss-push, team: ml, deployments: [{{id: olddep, name: v1, status: ACTIVE, environment: production}}, {{id: other1, name: ci-test, status: ACTIVE, labels: {labels}}}]}}\ndeployments:\n  default: [[0, ACTIVE]]\nprepare_model_upload: {{refuse_taken_names: false}}\n"
    ));
    let blind = Fault::Status {
        status: 403,
        retry_after: None,
        body: Some(r#"{"message": "forbidden"}"#.into()),
        content_type: Some("application/json".into()),
    };
    let proxy = FaultProxy::builder(fake.addr())
        .rule(
            Rule::new("blind", blind)
                .method("GET")
                .path("/v1/models/oldmodel/deployments")
                .first(1),
        )
        .rule(
            Rule::new("reset", Fault::ResetBeforeForward)
                .graphql(CREATE)
                .first(1),
        )
        .start_in_background()
        .expect("proxy starts");
    let b = run_b(&fake, &proxy).arg("cleanup", "true").run();
    (fake, b)
}

#[test]
fn a_deployment_of_the_same_name_with_another_runs_label_is_left_and_the_create_sent_again() {
    let (fake, b) = unlisted_beside(r#"{truss_push_run: "0123456789abcdef0123456789abcdef"}"#);
    assert_eq!(b.status(), "success", "{b:?}");
    let b_id = b.out("deployment-id");
    assert!(!b_id.is_empty() && b_id != "other1", "{b:?}");
    assert!(
        b.stdout
            .contains("the deployment was not created: sending the request once more"),
        "{b:?}"
    );
    said_left_alone(&b, "other1");
    let touched = b_touched(&fake, "other1", 0);
    assert!(touched.is_empty(), "B touched other1: {touched:?}");
}

#[test]
fn a_new_deployment_of_the_same_name_without_a_run_label_is_neither_adopted_nor_sent_over() {
    let (fake, b) = unlisted_beside(r#"{team: ml}"#);
    // It may be this run's on a platform that dropped the labels: the run
    // fails saying what to check, the create sent once, nothing touched.
    assert_eq!(b.status(), "deploy_failed", "{b:?}");
    assert_eq!(b.out("deployment-id"), "", "{b:?}");
    let msg = b.out("error-message");
    assert!(
        msg.contains("carry no truss_push_run label (other1)")
            && msg.contains("check the deployments of model"),
        "{msg}"
    );
    let creates = fake
        .requests()
        .iter()
        .filter(|e| e.endpoint == format!("graphql.{CREATE}"))
        .count();
    assert_eq!(
        creates, 0,
        "the reset create never reached it, and none was resent"
    );
    let touched = b_touched(&fake, "other1", 0);
    assert!(touched.is_empty(), "B touched other1: {touched:?}");
}
