//! What the platform receives besides the archive: the config payload (and
//! `print-config`, which shows it without sending anything), labels in the
//! user's order, the User-Agent, an empty deactivate that says so, and the
//! secrets check before the upload.

use base64::Engine;
use serde_json::Value;

use crate::chain_harness::{graphql_calls, real_truss_push};
use crate::harness::*;

const ACTIVE: &str = "deployments:\n  default: [[0, ACTIVE]]\n";

/// The `config` a create mutation carried, decoded.
fn sent_config(fake: &fake_baseten::FakeBaseten) -> Value {
    let args = graphql_calls(fake, "create_model_from_truss");
    let b64 = args[0]["config"].as_str().expect("config is a string");
    serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("base64"),
    )
    .expect("JSON")
}

#[test]
fn print_config_shows_exactly_what_a_deploy_sends_and_sends_nothing() {
    let quiet = fake(ACTIVE);
    let printed = Invocation::new(&quiet)
        .model(example_model())
        .arg("print-config", "true")
        .run();
    assert_eq!(printed.code, 0, "{printed:?}");
    assert!(quiet.requests().is_empty(), "{:?}", endpoints(&quiet));
    let shown: Value = serde_json::from_str(&printed.stdout).expect("stdout is the JSON alone");

    let fake = fake(ACTIVE);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("model-name", "renamed")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    // The override names the model; like truss, the payload keeps the file's name.
    assert_eq!(sent_config(&fake), shown);
    assert_eq!(shown["model_name"], "hello-truss-push");
    assert_eq!(
        graphql_calls(&fake, "create_model_from_truss")[0]["name"],
        "renamed"
    );
}

#[test]
fn print_config_on_a_bad_config_is_an_input_error() {
    let dir = model_dir("model_name: [unclosed\n");
    let run = Invocation::bare()
        .model(dir.path())
        .arg("baseten-api-key", API_KEY)
        .arg("print-config", "true")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.is_empty() || !run.stdout.trim_start().starts_with('{'));
}

#[test]
fn labels_reach_the_platform_in_the_users_order_as_python_writes_them() {
    let fake = fake(ACTIVE);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("labels", r#"{"zeta":"1","alpha":"é","mid":2}"#)
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let args = graphql_calls(&fake, "create_model_from_truss");
    // The user's labels in their order, then the content hash and the
    // run's own label truss-push records on every deployment it creates.
    let sent = args[0]["user_deploy_metadata"].as_str().unwrap();
    let (hash, run_label) = sent
        .strip_prefix(r#"{"zeta": "1", "alpha": "\u00e9", "mid": 2, "truss_push_content_hash": ""#)
        .and_then(|rest| rest.strip_suffix(r#""}"#))
        .and_then(|rest| rest.split_once(r#"", "truss_push_run": ""#))
        .unwrap_or_else(|| panic!("{sent}"));
    assert_eq!(hash.len(), 64, "{sent}");
    assert_eq!(run_label.len(), 32, "{sent}");
    assert!(
        run.stdout.contains(&format!("Content hash {hash}")),
        "{run:?}"
    );
}

#[test]
fn every_request_names_truss_push_and_the_truss_wire_format_and_deactivate_has_a_length() {
    let fake = fake(ACTIVE);
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("cleanup", "true")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let version =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/truss-version")).unwrap();
    let ua = format!(
        "truss-push/{} (truss/{})",
        env!("CARGO_PKG_VERSION"),
        version.trim()
    );
    for r in fake.requests() {
        if !r.endpoint.starts_with("s3.") {
            assert_eq!(r.user_agent.as_deref(), Some(ua.as_str()), "{}", r.endpoint);
        }
    }
    let deactivate = fake
        .requests()
        .into_iter()
        .find(|r| r.endpoint == "rest.deactivate_deployment")
        .expect("deactivated");
    assert_eq!(deactivate.content_length.as_deref(), Some("0"));
}

#[test]
fn missing_secrets_are_named_once_before_the_upload_and_never_fail_the_deploy() {
    let fake = fake("secrets: [hf_access_token]\ndeployments:\n  default: [[0, ACTIVE]]\n");
    let dir = model_dir(
        "model_name: secretive\nsecrets:\n  hf_access_token: null\n  openai_key: null\n  wandb_key: null\n",
    );
    let run = Invocation::new(&fake).model(dir.path()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("secrets team \"default\" does not have"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert!(
        warnings[0].contains("openai_key, wandb_key"),
        "{}",
        warnings[0]
    );
    assert!(!warnings[0].contains("hf_access_token"));
    assert!(warnings[0].contains("/settings/secrets"));
    // Asked before anything was uploaded.
    let order = endpoints(&fake);
    let asked = order
        .iter()
        .position(|e| e == "rest.list_team_secrets")
        .unwrap();
    let uploaded = order.iter().position(|e| e.starts_with("s3.put")).unwrap();
    assert!(asked < uploaded, "{order:?}");
}

/// The team's own list decides, as the official client asks it: a secret
/// another team holds is still missing for this deploy.
#[test]
fn secrets_are_looked_up_in_the_team_the_deploy_goes_to() {
    let fake = fake(
        "teams: [{id: teamaaaa, name: research}, {id: teambbbb, name: serving}]\nsecrets: [{name: hf_access_token, team: research}, {name: openai_key, team: serving}]\ndeployments:\n  default: [[0, ACTIVE]]\n",
    );
    let dir =
        model_dir("model_name: secretive\nsecrets:\n  hf_access_token: null\n  openai_key: null\n");
    let run = Invocation::new(&fake)
        .model(dir.path())
        .arg("team", "serving")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let asked: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/secrets"))
        .map(|r| r.path)
        .collect();
    assert_eq!(asked, ["/v1/teams/teambbbb/secrets"]);
    assert!(
        run.stderr.contains(
            "the truss config names secrets team \"serving\" does not have: hf_access_token;"
        ),
        "{}",
        run.stderr
    );
}

/// A key that lists no teams has no team to ask about: the key's whole
/// list answers.
#[test]
fn without_a_team_the_key_s_secrets_are_looked_up() {
    let fake =
        fake("teams: []\nsecrets: [hf_access_token]\ndeployments:\n  default: [[0, ACTIVE]]\n");
    let dir =
        model_dir("model_name: secretive\nsecrets:\n  hf_access_token: null\n  openai_key: null\n");
    // The fake then refuses the create ("No team available"); the secrets
    // check came before it either way.
    let run = Invocation::new(&fake).model(dir.path()).run();
    let asked: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/secrets"))
        .map(|r| r.path)
        .collect();
    assert_eq!(asked, ["/v1/secrets"], "{run:?}");
    assert!(
        run.stderr
            .contains("the truss config names secrets this workspace does not have: openai_key;"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_failed_secrets_lookup_is_a_notice_and_the_deploy_goes_on() {
    use fake_baseten::proxy::{Fault, FaultProxy, Rule};
    let fake = fake(ACTIVE);
    let proxy = FaultProxy::builder(fake.addr())
        .rule(
            Rule::new(
                "down",
                Fault::HtmlError {
                    status: 500,
                    echo: None,
                },
            )
            .path("/v1/teams/"),
        )
        .start_in_background()
        .unwrap();
    secrets_check_failing_at(&fake, &proxy.rest_base());
}

#[test]
#[ignore = "needs the real truss from PyPI (scripts/python-env); scripts/test runs it"]
fn the_config_sent_equals_what_the_real_truss_push_sends() {
    let dir = model_dir(
        "model_name: parity\nresources:\n  accelerator: T4\n  cpu: '1'\nenvironment_variables:\n  FLAG: true\n  COUNT: 3\nsecrets:\n  hf_access_token: null\nrequirements: [numpy]\n",
    );
    let theirs = fake(ACTIVE);
    let out = real_truss_push(&theirs, dir.path(), &["--model-name", "parity"]);
    assert!(
        out.status.success(),
        "truss push failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = fake("secrets: [hf_access_token]\ndeployments:\n  default: [[0, ACTIVE]]\n");
    let run = Invocation::new(&ours).model(dir.path()).run();
    assert_eq!(run.status(), "success", "{run:?}");
    let (a, b) = (sent_config(&theirs), sent_config(&ours));
    assert_eq!(a, b, "truss sent:\n{a:#}\ntruss-push sent:\n{b:#}");
    assert_eq!(b["resources"]["use_gpu"], true);
    assert_eq!(b["environment_variables"]["COUNT"], "3");

    // truss_user_env: the same fields in the same order with the same JSON
    // types; the client version is the one we reproduce, and the Python and
    // pydantic versions we do not have are empty, not made up.
    let user_env = |fake| -> Value {
        let args = graphql_calls(fake, "create_model_from_truss");
        serde_json::from_str(args[0]["truss_user_env"].as_str().expect("a string")).unwrap()
    };
    let (a, b) = (user_env(&theirs), user_env(&ours));
    let shape = |v: &Value| -> Vec<(String, bool, bool)> {
        v.as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.is_string(), v.is_object()))
            .collect()
    };
    assert_eq!(shape(&a), shape(&b), "truss: {a}\ntruss-push: {b}");
    assert_eq!(a["truss_client_version"], b["truss_client_version"]);
    assert_eq!(
        (&b["python_version"], &b["pydantic_version"]),
        (&"".into(), &"".into())
    );
    assert_eq!(b["mypy_version"], Value::Null);
}
