//! Shipping: `action.yml` is a drop-in for `basetenlabs/action-truss-push`
//! and feeds the binary every input it declares; `scripts/install-binary`
//! verifies release assets (its shell test against a local HTTP server).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_yaml::Value;
use truss_push::cli::{INPUTS, env_names};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn action() -> Value {
    let text = std::fs::read_to_string(repo().join("action.yml")).expect("action.yml exists");
    serde_yaml::from_str(&text).expect("action.yml is YAML")
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// The Python action's (`basetenlabs/action-truss-push`) inputs and their defaults (None = required), except
/// `cleanup`, whose default is left empty on purpose (see action.yml).
const PYTHON_ACTION_INPUTS: &[(&str, Option<&str>)] = &[
    ("truss-directory", None),
    ("baseten-api-key", None),
    ("model-name", Some("")),
    ("environment", Some("")),
    ("include-git-info", Some("true")),
    ("labels", Some("")),
    ("deployment-name", Some("")),
    ("cleanup", Some("")),
    ("predict-payload", Some("")),
    ("deploy-timeout-minutes", Some("45")),
    ("predict-timeout", Some("300")),
    ("regional-environment", Some("false")),
    ("team", Some("")),
];

#[test]
fn action_declares_the_python_actions_inputs_with_its_defaults() {
    let a = action();
    let inputs = a["inputs"].as_mapping().expect("inputs");
    for (name, default) in PYTHON_ACTION_INPUTS {
        let input = &inputs[*name];
        assert!(!input.is_null(), "input {name} is missing");
        match default {
            None => assert_eq!(input["required"].as_bool(), Some(true), "{name}"),
            Some(d) => assert_eq!(str_of(&input["default"]), *d, "default of {name}"),
        }
    }
}

#[test]
fn action_exposes_every_output_from_the_deploy_step() {
    let a = action();
    for name in crate::harness::output_names() {
        let value = str_of(&a["outputs"][name]["value"]);
        assert_eq!(
            value,
            format!("${{{{ steps.push.outputs.{name} }}}}"),
            "output {name}"
        );
    }
}

/// Inputs the action itself reads (the install step), not the binary.
const ACTION_ONLY_INPUTS: &[&str] = &["verify-provenance"];

#[test]
fn the_install_step_reads_verify_provenance() {
    let a = action();
    assert_eq!(str_of(&a["inputs"]["verify-provenance"]["default"]), "true");
    let steps = a["runs"]["steps"].as_sequence().expect("steps");
    let install = steps
        .iter()
        .find(|s| str_of(&s["id"]) == "binary")
        .expect("a step with id binary");
    assert_eq!(
        str_of(&install["env"]["VERIFY_PROVENANCE"]),
        "${{ inputs.verify-provenance }}"
    );
    assert!(
        str_of(&install["run"]).contains("--verify-provenance \"$VERIFY_PROVENANCE\""),
        "the install step must pass verify-provenance to scripts/install-binary"
    );
}

#[test]
fn every_action_input_reaches_the_binary_under_a_name_it_reads() {
    let a = action();
    let steps = a["runs"]["steps"].as_sequence().expect("steps");
    let deploy = steps
        .iter()
        .find(|s| str_of(&s["id"]) == "push")
        .expect("a step with id push");
    let env: BTreeMap<String, String> = deploy["env"]
        .as_mapping()
        .expect("deploy env")
        .iter()
        .map(|(k, v)| (str_of(k).to_string(), str_of(v).to_string()))
        .collect();
    for (name, _) in a["inputs"].as_mapping().expect("inputs") {
        let name = str_of(name);
        if ACTION_ONLY_INPUTS.contains(&name) {
            continue;
        }
        let spec = INPUTS
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("action input {name} is not a truss-push input"));
        let var = &env_names(spec)[1];
        assert_eq!(
            env.get(var).map(String::as_str),
            Some(format!("${{{{ inputs.{name} }}}}").as_str()),
            "input {name} must be passed as {var}"
        );
    }
    assert!(
        str_of(&deploy["run"]).trim_start().starts_with("exec "),
        "the binary must replace the shell to receive the runner's signals"
    );
}

#[test]
fn no_run_step_splices_inputs_into_script_text() {
    let a = action();
    for step in a["runs"]["steps"].as_sequence().expect("steps") {
        let run = str_of(&step["run"]);
        assert!(!run.contains("${{"), "expression in run text: {run}");
    }
}

#[test]
fn install_binary_verifies_release_assets_against_a_local_server() {
    let out = Command::new("bash")
        .arg(repo().join("tests/fixtures/ship/install-binary-test.sh"))
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(" 0 failed"),
        "install-binary test failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
