//! Every output on every exit path: one table of runs (bad input, a
//! success, a failed build, a timeout, a gated run failing before its
//! promote, a skip-unchanged run deploying over what served, a rollback), each row naming the outputs that must hold a
//! value and what some of them must say. Every other output of the fixed
//! list is written, and empty ("unknown / not applicable"): an output that
//! is known but left empty, or one filled where it has no meaning, fails
//! its row.

use fake_baseten::FakeBaseten;

use crate::harness::*;

/// The example model exists; `v1dep001` serves production.
fn with_production(extra: &str) -> FakeBaseten {
    fake(&format!(
        "time_scale: 20
models:
  - id: gatedmdl
    name: hello-truss-push
    deployments: [{{id: v1dep001, name: v1, environment: production}}]
deployments:
  default: [[0, BUILDING], [1, DEPLOYING], [2, ACTIVE]]
promote:
  default:
    steps:
      - [0, {{status: RELEASING}}]
      - [1, {{status: SUCCEEDED, percent: 100}}]
{extra}"
    ))
}

fn gated(fake: &FakeBaseten) -> Invocation<'_> {
    Invocation::new(fake)
        .model(example_model())
        .arg("promotion", "after-predict")
        .arg("environment", "production")
        .arg("predict-timeout", "2")
}

/// One exit path: how to get there, the exit code, the outputs that hold
/// a value, and values some of them must have.
struct Path {
    name: &'static str,
    run: fn() -> Outcome,
    code: i32,
    filled: &'static [&'static str],
    values: &'static [(&'static str, &'static str)],
}

const PATHS: &[Path] = &[
    Path {
        name: "bad input",
        run: || {
            let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
            Invocation::new(&fake)
                .model(example_model())
                .arg("predict-timeout", "-1")
                .run()
        },
        code: 2,
        // The name is read from config.yaml before the value is refused.
        filled: &["status", "error-message", "model-name"],
        values: &[("status", "deploy_failed")],
    },
    Path {
        name: "success",
        run: || {
            let fake = fake("deployments:\n  default: [[0, BUILDING], [0.2, ACTIVE]]\n");
            Invocation::new(&fake).model(example_model()).run()
        },
        code: 0,
        filled: &[
            "deployment-id",
            "model-id",
            "model-name",
            "status",
            "last-status",
            "logs-url",
            "deploy-time-seconds",
            "predict-response",
            "predict-url",
        ],
        values: &[("status", "success"), ("last-status", "ACTIVE")],
    },
    Path {
        name: "build failed",
        run: || {
            let fake = fake("deployments:\n  default: [[0, BUILDING], [0.2, BUILD_FAILED]]\n");
            Invocation::new(&fake).model(example_model()).run()
        },
        code: 1,
        filled: &[
            "deployment-id",
            "model-id",
            "model-name",
            "status",
            "last-status",
            "logs-url",
            "error-message",
        ],
        values: &[("status", "deploy_failed"), ("last-status", "BUILD_FAILED")],
    },
    Path {
        name: "timeout",
        run: || {
            let fake = fake("deployments:\n  default: [[0, BUILDING]]\n");
            Invocation::new(&fake)
                .model(example_model())
                .arg("wait-timeout-seconds", "1")
                .run()
        },
        code: 3,
        filled: &[
            "deployment-id",
            "model-id",
            "model-name",
            "status",
            "last-status",
            "logs-url",
            "error-message",
        ],
        values: &[("status", "deploy_timeout"), ("last-status", "BUILDING")],
    },
    Path {
        // The environment was read before anything was created: what
        // served it is known although no promote was sent.
        name: "gated, failed before the promote",
        run: || {
            let fake = with_production(
                "predict:\n  by_deployment:\n    - {created: 0, via: deployment, status: 500, response: {error: broken}}\n",
            );
            gated(&fake).run()
        },
        code: 4,
        filled: &[
            "deployment-id",
            "model-id",
            "model-name",
            "status",
            "last-status",
            "logs-url",
            "deploy-time-seconds",
            "predict-url",
            "error-message",
            // The URL that serves the environment, from the config; the
            // failed answer is in the error, not the predict response.
            "environment-url",
            "previous-deployment-id",
            // Gated, and nothing moved back: false, not unknown.
            "rolled-back",
        ],
        values: &[
            ("status", "predict_failed"),
            ("previous-deployment-id", "v1dep001"),
            ("rolled-back", "false"),
        ],
    },
    Path {
        // skip-unchanged read the environment before deploying over it.
        name: "skip-unchanged, deployed over what served",
        run: || {
            let fake = with_production("");
            Invocation::new(&fake)
                .model(example_model())
                .arg("environment", "production")
                .arg("skip-unchanged", "true")
                .run()
        },
        code: 0,
        filled: &[
            "deployment-id",
            "model-id",
            "model-name",
            "status",
            "last-status",
            "logs-url",
            "deploy-time-seconds",
            "predict-response",
            "predict-url",
            "environment-url",
            "previous-deployment-id",
        ],
        values: &[
            ("status", "success"),
            ("previous-deployment-id", "v1dep001"),
        ],
    },
    Path {
        name: "gated, rolled back",
        run: || {
            let fake = with_production(
                "predict:\n  by_deployment:\n    - {created: 0, via: environment, status: 500, response: {error: wrong}}\n",
            );
            gated(&fake).run()
        },
        code: 4,
        filled: &[
            "deployment-id",
            "model-id",
            "model-name",
            "status",
            "last-status",
            "logs-url",
            "deploy-time-seconds",
            "predict-response",
            "predict-url",
            "error-message",
            "environment-url",
            "previous-deployment-id",
            "tested-deployment-id",
            "rolled-back",
        ],
        values: &[
            ("status", "predict_failed"),
            ("previous-deployment-id", "v1dep001"),
            ("rolled-back", "true"),
        ],
    },
];

#[test]
fn every_output_is_written_on_every_exit_path_and_filled_where_known() {
    let mut wrong = Vec::new();
    for path in PATHS {
        let run = (path.run)();
        if run.code != path.code {
            wrong.push(format!(
                "{}: exit {} (want {})",
                path.name, run.code, path.code
            ));
        }
        for name in output_names() {
            let Some(value) = run.outputs.get(name) else {
                wrong.push(format!("{}: {name} not written", path.name));
                continue;
            };
            let want_filled = path.filled.contains(&name);
            if want_filled == value.is_empty() {
                let what = if want_filled { "empty" } else { "filled" };
                wrong.push(format!("{}: {name} {what} ({value:?})", path.name));
            }
        }
        for (name, want) in path.values {
            if run.outputs.get(*name).map(String::as_str) != Some(*want) {
                wrong.push(format!(
                    "{}: {name} is {:?}, want {want:?}",
                    path.name,
                    run.outputs.get(*name)
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
