//! A cancel in each window where a request is in flight (sent, its answer
//! not yet read): the fake holds the answer open — the fault proxy drips
//! it one byte every 400 ms after the platform applied the request — and
//! the binary is signalled then. Each test asserts the fake's request log,
//! the outputs and the exit code: what the run made is found, deactivated
//! (or kept, with cleanup off) and named; what it cannot prove its own is
//! named and never touched; a cleanup that cannot finish says what is left
//! (exit 8).

use fake_baseten::FakeBaseten;
use fake_baseten::proxy::{Fault, FaultProxy, Rule};

use crate::cancel::EXISTING;
use crate::harness::*;

/// The platform applies the request, then its answer comes one byte every
/// 400 ms: in flight for minutes.
fn dripping() -> Fault {
    Fault::Drip {
        bytes: 1,
        interval_ms: 400,
    }
}

/// A proxy in front of `fake` with `rules`.
fn proxy_with(fake: &FakeBaseten, rules: Vec<Rule>) -> FaultProxy {
    let mut b = FaultProxy::builder(fake.addr());
    for r in rules {
        b = b.rule(r);
    }
    b.start_in_background().expect("proxy starts")
}

/// A run of the example model through `proxy` (GraphQL and REST).
fn through<'a>(fake: &'a FakeBaseten, proxy: &FaultProxy) -> Invocation<'a> {
    Invocation::new(fake)
        .model(example_model())
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
}

/// The deployments the fake holds named `ci-test` (the harness's name).
fn ours(fake: &FakeBaseten) -> Vec<fake_baseten::state::DeploymentSnapshot> {
    fake.deployments()
        .into_iter()
        .filter(|d| d.name == "ci-test")
        .collect()
}

/// Whether the fake was asked to deactivate `id`.
fn deactivate_sent(fake: &FakeBaseten, id: &str) -> bool {
    fake.requests()
        .iter()
        .any(|e| e.endpoint.starts_with("rest.deactivate") && e.path.contains(id))
}

#[test]
fn a_signal_while_the_create_is_in_flight_finds_the_deployment_and_deactivates_it() {
    for signal in ["TERM", "INT", "HUP"] {
        let fake = fake(EXISTING);
        let proxy = proxy_with(
            &fake,
            vec![Rule::new("drip", dripping()).graphql("create_model_version_from_truss")],
        );
        let run = through(&fake, &proxy)
            .run_signalled_at("graphql.create_model_version_from_truss", signal);
        assert_eq!(run.code, 130, "{signal}: {run:?}");
        let [created] = ours(&fake).try_into().expect("created once");
        assert_eq!(run.out("deployment-id"), created.id, "{signal}: {run:?}");
        assert_eq!(run.out("model-id"), "oldmodel");
        assert_eq!(run.status(), "deploy_failed");
        assert!(
            run.out("error-message").contains(&format!("SIG{signal}")),
            "{run:?}"
        );
        assert!(deactivate_sent(&fake, &created.id), "{signal}: {run:?}");
        assert!(created.deactivated, "{run:?}");
        // The lookup read the model's deployments after the create, and
        // the log and summary say what was found and done.
        let log = endpoints(&fake);
        let create = log
            .iter()
            .position(|e| e == "graphql.create_model_version_from_truss")
            .unwrap();
        assert!(
            log[create..].iter().any(|e| e == "rest.list_deployments"),
            "{log:?}"
        );
        let found = format!(
            "the platform shows deployment {}, created by this run; its cleanup follows",
            created.id
        );
        assert_in_order(&run.stdout, &[&found, "Deactivated"]);
        assert!(run.summary.contains(&found), "{}", run.summary);
    }
}

#[test]
fn with_cleanup_off_a_create_in_flight_is_found_kept_and_named() {
    let fake = fake(EXISTING);
    let proxy = proxy_with(
        &fake,
        vec![Rule::new("drip", dripping()).graphql("create_model_version_from_truss")],
    );
    let run = through(&fake, &proxy)
        .arg("cleanup", "false")
        .run_signalled_at("graphql.create_model_version_from_truss", "TERM");
    assert_eq!(run.code, 130, "{run:?}");
    let [created] = ours(&fake).try_into().expect("created once");
    assert_eq!(run.out("deployment-id"), created.id, "{run:?}");
    assert!(!deactivate_sent(&fake, &created.id), "{run:?}");
    assert!(!created.deactivated);
    assert!(
        run.stdout
            .contains("created by this run; cleanup is off: it is kept, running"),
        "{run:?}"
    );
}

#[test]
fn a_signal_while_a_first_create_is_in_flight_finds_the_new_model() {
    // No model yet: the lookup finds the model by name, then its one
    // deployment (which the platform made serve production: only an
    // explicit cleanup deactivates it).
    let fake = fake(
        "teams: [{id: t1, name: ml, default: true}]\ndeployments:\n  default: [[0, BUILDING]]\n",
    );
    let proxy = proxy_with(
        &fake,
        vec![Rule::new("drip", dripping()).graphql("create_model_from_truss")],
    );
    let run = through(&fake, &proxy)
        .arg("cleanup", "true")
        .run_signalled_at("graphql.create_model_from_truss", "TERM");
    assert_eq!(run.code, 130, "{run:?}");
    let [created] = ours(&fake).try_into().expect("created once");
    assert_eq!(run.out("deployment-id"), created.id, "{run:?}");
    assert!(!run.out("model-id").is_empty(), "{run:?}");
    assert!(deactivate_sent(&fake, &created.id), "{run:?}");
}

#[test]
fn a_second_signal_during_cleanup_says_what_is_left_running_where_people_look() {
    let fake = fake(EXISTING);
    let proxy = proxy_with(
        &fake,
        vec![Rule::new("stuck", Fault::Hang).path_like("/v1/models/*/deployments/*/deactivate")],
    );
    let waiting = || endpoints(&fake).iter().any(|e| e == "rest.get_deployment");
    let deactivating = || {
        proxy
            .faulted()
            .iter()
            .any(|e| e.path.ends_with("/deactivate"))
    };
    let run = through(&fake, &proxy)
        .env("GITHUB_ACTIONS", "true")
        .run_signalled_in_turn(&[(&waiting, "INT"), (&deactivating, "TERM")]);
    assert_eq!(run.code, 8, "{run:?}");
    let [created] = ours(&fake).try_into().expect("created once");
    assert!(
        !created.deactivated,
        "the deactivate never reached the fake"
    );
    assert_eq!(run.out("deployment-id"), created.id, "{run:?}");
    assert_eq!(run.status(), "deploy_failed");
    let msg = run.out("error-message");
    for part in [
        "cancelled by SIGINT, and cleanup did not finish (SIGTERM arrived during it",
        &format!("deployment {} may be left running", created.id),
    ] {
        assert!(msg.contains(part), "{part:?} in {msg:?}");
    }
    // An error annotation, where a reviewer looks first.
    let annotated = format!("{}{}", run.stdout, run.stderr);
    assert!(
        annotated
            .lines()
            .any(|l| l.starts_with("::error") && l.contains("cleanup did not finish")),
        "{run:?}"
    );
}

#[test]
fn a_signal_while_the_plan_reads_stops_it_with_outputs_written() {
    let fake = fake(EXISTING);
    let proxy = proxy_with(&fake, vec![Rule::new("hung", Fault::Hang)]);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("plan", "true")
        .arg("environment", "production")
        .arg("skip-unchanged", "true")
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
        .run_signalled_when(|| !proxy.faulted().is_empty(), "TERM");
    assert_eq!(run.code, 130, "{run:?}");
    assert_eq!(run.status(), "deploy_failed");
    assert!(run.out("error-message").contains("SIGTERM"), "{run:?}");
    let after = run.after_signal.expect("signalled");
    // "Did not hang" only: the hung read would hold it a minute and more.
    assert!(after < std::time::Duration::from_secs(30), "{after:?}");
    assert!(mutations(&fake).is_empty());
}

/// The example model exists and `v1dep001` serves production; a
/// promotion ramps over 4 scenario seconds (0.2 s). `deadline_cuts` uses
/// it too.
pub(crate) const GATED: &str = "time_scale: 20
models:
  - id: gatedmdl
    name: hello-truss-push
    deployments: [{id: v1dep001, name: v1, environment: production}]
deployments:
  default: [[0, BUILDING], [1, DEPLOYING], [2, ACTIVE]]
promote:
  default:
    steps:
      - [0, {status: RELEASING}]
      - [1, {status: RAMPING_UP, percent: 25}]
      - [4, {status: SUCCEEDED, percent: 100}]
  ramp_down_seconds: 2
";

#[test]
fn a_signal_while_the_promote_is_in_flight_puts_the_previous_deployment_back() {
    let fake = fake(GATED);
    let proxy = proxy_with(
        &fake,
        vec![Rule::new("drip", dripping()).path_like("/v1/models/*/environments/*/promote")],
    );
    let run = through(&fake, &proxy)
        .arg("promotion", "after-predict")
        .arg("environment", "production")
        .arg("predict-timeout", "2")
        .run_signalled_at("rest.promote", "TERM");
    assert_eq!(run.code, 130, "{run:?}");
    let [tested] = ours(&fake).try_into().expect("created once");
    assert_eq!(run.out("tested-deployment-id"), tested.id, "{run:?}");
    assert_eq!(run.out("previous-deployment-id"), "v1dep001");
    // Read, then report: the environment serves the previous deployment
    // again, and the run says so from its read.
    let env = fake.environment("hello-truss-push", "production").unwrap();
    assert_eq!(env.current.as_deref(), Some("v1dep001"), "{env:?}");
    assert_eq!(env.candidate, None, "{env:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    assert!(
        run.summary
            .contains("traffic is back on the previous deployment v1dep001"),
        "{}",
        run.summary
    );
    // Nothing half-done: our promotion was cancelled, not waited out, and
    // the tested deployment, serving nothing, was deactivated.
    let log = endpoints(&fake);
    let promote = log.iter().position(|e| e == "rest.promote").unwrap();
    assert!(
        log[promote..].iter().any(|e| e == "rest.cancel_promotion"),
        "{log:?}"
    );
    assert!(deactivate_sent(&fake, &tested.id), "{log:?}");
    assert_eq!(run.out("deployment-id"), tested.id, "{run:?}");
}

/// A create the platform applied whose answer drips in past the create's
/// deadline, at a short and a long wait budget: the lookup after the lost
/// answer has its own allowance, finds the deployment, and cleanup
/// deactivates it. The scripted clock (debug builds) leaves the create 2 s
/// of its deadline when it is sent, so the drip outlasts it in real time.
#[test]
fn a_create_answer_dripping_past_its_deadline_is_looked_up_and_cleaned_up() {
    if !cfg!(debug_assertions) {
        return;
    }
    for (budget, clock) in [
        // The create's deadline is its start plus its grace: 2 s left.
        ("20", "Create#1+58"),
        // The deploy budget holds the create's deadline; a jump in setup
        // makes it the grace again, then 2 s are left.
        ("120", "Setup#1+100,Create#1+58"),
    ] {
        let fake = fake(EXISTING);
        let proxy = proxy_with(
            &fake,
            vec![Rule::new("drip", dripping()).graphql("create_model_version_from_truss")],
        );
        let run = through(&fake, &proxy)
            .arg("wait-timeout-seconds", budget)
            .env("TRUSS_PUSH_TEST_CLOCK", clock)
            .run();
        let why = format!("wait budget {budget}: {run:?}");
        let [created] = ours(&fake).try_into().expect("created once");
        assert_eq!(run.out("deployment-id"), created.id, "{why}");
        assert_eq!(run.status(), "deploy_timeout", "{why}");
        assert_eq!(run.code, 3, "{why}");
        assert!(
            run.stdout
                .contains("the deployment was created although its answer was lost: adopted it"),
            "{why}"
        );
        assert!(deactivate_sent(&fake, &created.id), "{why}");
        assert!(created.deactivated, "{why}");
        // The lookup went in its own phase, after the create's deadline.
        let record = format!("{}{}", run.stdout, run.stderr);
        assert!(record.contains("test-clock: Lookup sent"), "{why}");
        assert!(
            mutations(&fake)
                .iter()
                .filter(|e| e.endpoint == "graphql.create_model_version_from_truss")
                .count()
                == 1,
            "never sent twice: {why}"
        );
    }
}

// ---------------------------------------- a chain's deploy_chain_atomic

/// A run of the two-chainlet fixture chain whose `deploy_chain_atomic`
/// answer drips, signalled once the fake applied it (and, first,
/// `meanwhile` done).
fn chain_create_cancelled(fake: &FakeBaseten, meanwhile: impl Fn()) -> Outcome {
    use crate::chain_harness::{chain_run, fixture};
    let proxy = proxy_with(
        fake,
        vec![Rule::new("drip", dripping()).graphql("deploy_chain_atomic")],
    );
    let done = std::cell::Cell::new(false);
    let ready = || {
        let applied = endpoints(fake)
            .iter()
            .any(|e| e == "graphql.deploy_chain_atomic");
        if applied && !done.replace(true) {
            meanwhile();
        }
        applied
    };
    chain_run(fake, &fixture("chains/two/two_chain.py"))
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
        .arg("cleanup", "true")
        .run_signalled_when(ready, "TERM")
}

fn chain_fake() -> FakeBaseten {
    fake("time_scale: 1\nchainlets:\n  default: [[0, BUILDING_MODEL]]\n")
}

/// The chain deployments the fake holds, by id.
fn chain_deployments(fake: &FakeBaseten) -> std::collections::BTreeSet<String> {
    fake.deployments()
        .into_iter()
        .filter_map(|d| d.chain_deployment_id)
        .collect()
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn a_signal_while_the_chain_create_is_in_flight_deactivates_the_one_it_proves_its_own() {
    let fake = chain_fake();
    let run = chain_create_cancelled(&fake, || {});
    assert_eq!(run.code, 130, "{run:?}");
    let [ours] = chain_deployments(&fake)
        .into_iter()
        .collect::<Vec<_>>()
        .try_into()
        .expect("one chain deployment");
    assert_eq!(run.out("deployment-id"), ours, "{run:?}");
    assert!(!run.out("chain-id").is_empty(), "{run:?}");
    // Proven by a read back: the chain's deployments listed, then ours
    // read, then deactivated.
    let log = endpoints(&fake);
    let create = log
        .iter()
        .position(|e| e == "graphql.deploy_chain_atomic")
        .unwrap();
    assert_in_order(
        &log[create..].join("\n"),
        &[
            "rest.list_chain_deployments",
            "rest.get_chain_deployment",
            "rest.deactivate_chain_deployment",
        ],
    );
    assert!(deactivate_sent(&fake, &ours), "{log:?}");
    assert!(
        run.stdout.contains(&format!(
            "the platform shows chain deployment {ours}, created by this run"
        )),
        "{run:?}"
    );
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn a_chain_create_in_flight_beside_another_new_deployment_touches_none_and_names_them() {
    use crate::chain_harness::graphql_calls;
    let fake = chain_fake();
    // While ours is in flight, another client deploys the same chain.
    let other = || {
        let ours = &graphql_calls(&fake, "deploy_chain_atomic")[0];
        let mut entry = ours["entrypoint"].clone();
        entry["name"] = "Other".into();
        let q = format!(
            "mutation ($e: ChainletInputAtomicGraphene!) {{ deploy_chain_atomic(chain_name: {}, entrypoint: $e, dependencies: [], truss_user_env: \"{{}}\") {{ chain_deployment {{ id }} }} }}",
            ours["chain_name"]
        );
        let body = serde_json::json!({"query": q, "variables": {"e": entry}}).to_string();
        let answer = post(&fake, "/graphql/", &body);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(!answer.contains("\"errors\""), "{answer}");
    };
    let run = chain_create_cancelled(&fake, other);
    let both = chain_deployments(&fake);
    assert_eq!(both.len(), 2, "{both:?}");
    // Cleanup could not tell which is ours: none touched, both named.
    assert_eq!(run.code, 8, "{run:?}");
    assert!(
        !endpoints(&fake)
            .iter()
            .any(|e| e.starts_with("rest.deactivate")),
        "{run:?}"
    );
    let msg = run.out("error-message");
    assert!(msg.contains("cleanup did not finish"), "{msg}");
    for id in &both {
        assert!(msg.contains(id.as_str()), "{id} in {msg}");
    }
    assert_eq!(run.out("deployment-id"), "", "none is proven this run's");
}

/// A raw `POST` of `body` (JSON) to the fake with the canary key: what
/// another client sends meanwhile.
fn post(fake: &FakeBaseten, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(fake.addr()).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Api-Key {API_KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        fake.addr(),
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// A create in flight when the signal comes, whose lookup then hangs (the
/// deployments listed before the create answer; the list after it never
/// does): cleanup cannot tell what the create made.
fn create_lookup_hangs() -> (FakeBaseten, FaultProxy) {
    let fake = fake(EXISTING);
    let proxy = proxy_with(
        &fake,
        vec![
            Rule::new("drip", dripping()).graphql("create_model_version_from_truss"),
            Rule::new("hung", Fault::Hang)
                .method("GET")
                .path_like("/v1/models/*/deployments")
                .after(1),
        ],
    );
    (fake, proxy)
}

#[test]
fn a_lookup_that_cannot_finish_after_a_cancel_says_a_deployment_may_be_left() {
    let (fake, proxy) = create_lookup_hangs();
    let run =
        through(&fake, &proxy).run_signalled_at("graphql.create_model_version_from_truss", "TERM");
    assert_eq!(run.code, 8, "{run:?}");
    // Created, but this run cannot prove which: nothing named, nothing
    // touched, and the message says where to look.
    assert_eq!(ours(&fake).len(), 1);
    assert_eq!(run.out("deployment-id"), "", "{run:?}");
    assert!(
        !endpoints(&fake)
            .iter()
            .any(|e| e.starts_with("rest.deactivate")),
        "{run:?}"
    );
    let msg = run.out("error-message");
    assert!(
        msg.contains("cancelled by SIGTERM, and cleanup did not finish")
            && msg.contains("whether the platform created it cannot be told")
            && msg.contains("for one named \"ci-test\""),
        "{msg}"
    );
}

#[test]
fn a_second_signal_during_the_lookup_says_a_deployment_may_be_left() {
    let (fake, proxy) = create_lookup_hangs();
    let created = || {
        endpoints(&fake)
            .iter()
            .any(|e| e == "graphql.create_model_version_from_truss")
    };
    let looking = || {
        proxy
            .faulted()
            .iter()
            .any(|e| e.rule.as_deref() == Some("hung"))
    };
    let run =
        through(&fake, &proxy).run_signalled_in_turn(&[(&created, "INT"), (&looking, "TERM")]);
    assert_eq!(run.code, 8, "{run:?}");
    assert_eq!(run.out("deployment-id"), "", "{run:?}");
    let msg = run.out("error-message");
    assert!(
        msg.contains("(SIGTERM arrived during it")
            && msg.contains("its create was in flight and the lookup for it did not finish"),
        "{msg}"
    );
}

/// A hostile CI signals at any moment around the create: whatever the run
/// had sent, a deployment it made is deactivated and named, and one it
/// did not make is never claimed. The moments are the fake's answers just
/// before, at and after the create (the answer dripping or not), so the
/// signal lands on each side of the send.
#[test]
fn a_signal_at_any_moment_around_the_create_leaves_nothing_running_unnamed() {
    let moments = [
        "rest.list_deployments",
        "graphql.create_model_version_from_truss",
        "rest.get_deployment",
    ];
    for drip in [false, true] {
        // A dripping create is never answered: nothing after it comes.
        let reached = if drip { &moments[..2] } else { &moments[..] };
        for &moment in reached {
            let fake = fake(EXISTING);
            let rules = match drip {
                true => {
                    vec![Rule::new("drip", dripping()).graphql("create_model_version_from_truss")]
                }
                false => Vec::new(),
            };
            let proxy = proxy_with(&fake, rules);
            let run = through(&fake, &proxy)
                .arg("cleanup", "true")
                .run_signalled_at(moment, "TERM");
            let why = format!("drip {drip}, at {moment}: {run:?}");
            assert_eq!(run.code, 130, "{why}");
            match ours(&fake).as_slice() {
                [] => assert_eq!(run.out("deployment-id"), "", "{why}"),
                [d] => {
                    assert_eq!(run.out("deployment-id"), d.id, "{why}");
                    assert!(d.deactivated, "{why}");
                }
                many => panic!("created more than once: {many:?}\n{why}"),
            }
        }
    }
}

#[test]
fn several_targets_each_find_and_deactivate_their_create_in_flight() {
    let (_root, dirs) = model_dirs(&["alpha", "beta"]);
    let fake = fake(
        "teams: [{id: t1, name: ml, default: true}]\ndeployments:\n  default: [[0, BUILDING]]\n",
    );
    let proxy = proxy_with(
        &fake,
        vec![Rule::new("drip", dripping()).graphql("create_model_from_truss")],
    );
    let both = || {
        endpoints(&fake)
            .iter()
            .filter(|e| *e == "graphql.create_model_from_truss")
            .count()
            == 2
    };
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .arg("app-url", proxy.graphql_base())
        .arg("api-url", proxy.rest_base())
        .arg("cleanup", "true")
        .run_signalled_when(both, "TERM");
    assert_eq!(run.code, 130, "{run:?}");
    let created = ours(&fake);
    assert_eq!(created.len(), 2, "{created:?}");
    let results = run.out("results");
    for d in &created {
        assert!(d.deactivated, "{d:?}: {run:?}");
        assert!(results.contains(&d.id), "{} named in {results}", d.id);
    }
}

#[test]
fn a_signal_while_the_rollback_activates_the_previous_deployment_finishes_putting_it_back() {
    // The environment's cleanup strategy deactivated the previous
    // deployment, and the environment's test fails: the rollback activates
    // it (the answer dripping) and the signal comes then.
    let fake = fake(&format!(
        "{GATED}  deactivate_previous: [production]\npredict:\n  by_deployment:\n    - {{created: 0, via: environment, status: 500, response: {{error: wrong}}}}\n"
    ));
    let proxy = proxy_with(
        &fake,
        vec![Rule::new("drip", dripping()).path_like("/v1/models/*/deployments/*/activate")],
    );
    let run = through(&fake, &proxy)
        .arg("promotion", "after-predict")
        .arg("environment", "production")
        .arg("predict-timeout", "2")
        .arg("inference-url", fake.inference_template())
        .run_signalled_at("rest.activate_deployment", "TERM");
    assert_eq!(run.code, 130, "{run:?}");
    // What was activated is left so, and serves again: said from a read.
    let env = fake.environment("hello-truss-push", "production").unwrap();
    assert_eq!(env.current.as_deref(), Some("v1dep001"), "{env:?}");
    let previous = fake
        .deployments()
        .into_iter()
        .find(|d| d.id == "v1dep001")
        .unwrap();
    assert!(!previous.deactivated, "{previous:?}");
    assert_eq!(run.out("rolled-back"), "true", "{run:?}");
    let log = endpoints(&fake);
    let activate = log
        .iter()
        .position(|e| e == "rest.activate_deployment")
        .unwrap();
    assert!(
        log[activate..].iter().any(|e| e == "rest.promote"),
        "promoted back after the activate: {log:?}"
    );
    assert!(!deactivate_sent(&fake, "v1dep001"), "{log:?}");
}

#[test]
fn a_signal_while_a_promote_that_never_arrived_is_out_leaves_traffic_where_it_was() {
    // The promote hangs before the platform sees it: a read shows nothing
    // moved, so nothing is sent to undo it.
    let fake = fake(GATED);
    let proxy = proxy_with(
        &fake,
        vec![Rule::new("hung", Fault::Hang).path_like("/v1/models/*/environments/*/promote")],
    );
    let run = through(&fake, &proxy)
        .arg("promotion", "after-predict")
        .arg("environment", "production")
        .arg("predict-timeout", "2")
        .run_signalled_when(|| !proxy.faulted().is_empty(), "TERM");
    assert_eq!(run.code, 130, "{run:?}");
    let [tested] = ours(&fake).try_into().expect("created once");
    let env = fake.environment("hello-truss-push", "production").unwrap();
    assert_eq!(env.current.as_deref(), Some("v1dep001"), "{env:?}");
    assert_eq!(env.candidate, None, "{env:?}");
    assert_eq!(run.out("rolled-back"), "false", "{run:?}");
    assert!(
        run.summary
            .contains("traffic stays on the previous deployment v1dep001"),
        "{}",
        run.summary
    );
    let log = endpoints(&fake);
    assert!(
        !log.iter()
            .any(|e| e == "rest.promote" || e == "rest.cancel_promotion"),
        "{log:?}"
    );
    assert!(deactivate_sent(&fake, &tested.id), "{log:?}");
}
