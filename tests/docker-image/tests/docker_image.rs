//! The Docker image, run through testcontainers with the host network
//! against the fake: a deploy succeeds and writes its outputs into a mounted
//! directory; a bad input exits with the documented code. The image is built
//! from local files by `scripts/docker-test`, which runs these tests with
//! `TRUSS_PUSH_TEST_IMAGE` set (`cargo test -p truss-push-docker-tests --
//! --ignored`); they are ignored otherwise.

use std::path::{Path, PathBuf};

use testcontainers::core::wait::ExitWaitStrategy;
use testcontainers::core::{Mount, WaitFor};
use testcontainers::runners::SyncRunner;
use testcontainers::{GenericImage, ImageExt};

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::Scenario;

/// The same canary key the binary tests use; the image gets it from the
/// environment, as a CI job would pass it.
const API_KEY: &str = "sk-canary-9f8e7d6c5b4a";

/// Absolute and without `..`, as Docker wants a bind mount's source.
fn example_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/hello-model")
        .canonicalize()
        .expect("examples/hello-model exists")
}

fn fake(yaml: &str) -> FakeBaseten {
    let scenario = Scenario::from_yaml(yaml)
        .expect("scenario parses")
        .with_api_key(API_KEY);
    FakeBaseten::start_in_background(scenario).expect("fake starts")
}

/// Runs the image to completion; returns its exit code.
fn run_image(fake: &FakeBaseten, out: &Path, args: &[&str]) -> i64 {
    let image = std::env::var("TRUSS_PUSH_TEST_IMAGE")
        .expect("TRUSS_PUSH_TEST_IMAGE names the image scripts/docker-test built");
    let (name, tag) = image.rsplit_once(':').unwrap_or((&image, "latest"));
    let container = GenericImage::new(name, tag)
        .with_wait_for(WaitFor::exit(ExitWaitStrategy::new()))
        .with_network("host")
        .with_env_var("BASETEN_API_KEY", API_KEY)
        .with_env_var("TRUSS_PUSH_APP_URL", fake.graphql_base())
        .with_env_var("TRUSS_PUSH_API_URL", fake.rest_base())
        .with_env_var("TRUSS_PUSH_INFERENCE_URL", fake.inference_template())
        .with_env_var("TRUSS_PUSH_S3_ENDPOINT", fake.s3_endpoint())
        .with_env_var("TRUSS_PUSH_POLL_INTERVAL_SECONDS", "0.1")
        .with_mount(Mount::bind_mount(
            example_model().to_str().unwrap(),
            "/model",
        ))
        .with_mount(Mount::bind_mount(out.to_str().unwrap(), "/out"))
        .with_cmd(args.iter().map(|a| a.to_string()))
        .start()
        .expect("the container runs");
    container
        .exit_code()
        .expect("docker reports the exit code")
        .expect("the container exited")
}

#[test]
#[ignore = "needs the image scripts/docker-test builds"]
fn the_image_deploys_and_writes_outputs_to_a_mounted_directory() {
    let fake = fake("deployments:\n  default: [[0, BUILDING], [0.3, ACTIVE]]\n");
    let out = tempfile::tempdir().unwrap();
    let code = run_image(
        &fake,
        out.path(),
        &[
            "--truss-directory",
            "/model",
            "--deployment-name",
            "in-docker",
            "--output-file",
            "/out/outputs.json",
        ],
    );
    assert_eq!(code, 0);
    let outputs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("outputs.json")).unwrap())
            .unwrap();
    assert_eq!(outputs["status"], "success");
    assert_eq!(outputs["last-status"], "ACTIVE");
    assert!(!outputs["deployment-id"].as_str().unwrap().is_empty());
}

#[test]
#[ignore = "needs the image scripts/docker-test builds"]
fn a_bad_input_exits_2_with_outputs_and_nothing_deployed() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let out = tempfile::tempdir().unwrap();
    let code = run_image(
        &fake,
        out.path(),
        &[
            "--truss-directory",
            "/model",
            "--deploy-timeout-minutes",
            "5",
            "--output-file",
            "/out/outputs.json",
        ],
    );
    assert_eq!(code, 2);
    let outputs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("outputs.json")).unwrap())
            .unwrap();
    assert_eq!(outputs["status"], "deploy_failed");
    assert!(
        fake.requests()
            .iter()
            .all(|r| !r.mutation && !r.endpoint.starts_with("s3."))
    );
}
