//! The evidence inputs (`predict-cases`, `predict-requests`, the
//! objectives, `analysis-file`) read into `evidence::Settings`, the cases file
//! checked whole before any request.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::number;
use crate::cli::Input;
use crate::cli::Inputs;
use crate::evidence::Settings;
use crate::evidence::cases::{self, Case};
use crate::evidence::verdict::Objectives;

/// The inputs that turn the evidence on; without any of them the smoke
/// test stays one request.
const EVIDENCE_INPUTS: &[Input] = &[
    Input::PredictCases,
    Input::PredictRequests,
    Input::MaxErrorRate,
    Input::MaxLatencyP95Ms,
    Input::MaxLatencyRegression,
    Input::AnalysisFile,
];

/// The fewest counted requests a side may have when the regression is
/// judged: below it the test could detect only slowdowns far past any
/// limit a user would set.
pub(crate) const MIN_REGRESSION_REQUESTS: usize = 20;
/// Counted requests a side gets with `max-latency-regression` and no
/// `predict-requests`: enough for the test to detect a slowdown about 10 %
/// past the limit at a typical spread.
pub(crate) const DEFAULT_REGRESSION_REQUESTS: usize = 100;

/// The evidence inputs as given, every number checked (even when the
/// evidence is off, so a typo is never ignored); the cases file is read
/// when the target is known ([`Given::resolve`]).
#[derive(Clone, Debug)]
pub(crate) struct Given {
    /// Whether any input that turns the evidence on was given.
    on: bool,
    cases_file: Option<PathBuf>,
    requests: Option<usize>,
    concurrency: usize,
    warmup: usize,
    objectives: Objectives,
    analysis_file: Option<PathBuf>,
}

pub(crate) fn parse(inputs: &Inputs) -> Result<Given, String> {
    let given = |input: Input| inputs.trimmed(input).is_some();
    let requests = given(Input::PredictRequests)
        .then(|| number(inputs, Input::PredictRequests))
        .transpose()?
        .map(|n| n as usize);
    let concurrency = number(inputs, Input::PredictConcurrency)? as usize;
    let warmup = number(inputs, Input::PredictWarmup)? as usize;
    let max_error_rate = number(inputs, Input::MaxErrorRate)?;
    let max_latency_p95_ms = given(Input::MaxLatencyP95Ms)
        .then(|| number(inputs, Input::MaxLatencyP95Ms))
        .transpose()?;
    let max_latency_regression = given(Input::MaxLatencyRegression)
        .then(|| number(inputs, Input::MaxLatencyRegression))
        .transpose()?;
    if let (Some(n), Some(_)) = (requests, max_latency_regression)
        && n < MIN_REGRESSION_REQUESTS
    {
        return Err(format!(
            "predict-requests {n} is too few to judge max-latency-regression: set at least {MIN_REGRESSION_REQUESTS} (each side gets as many; without predict-requests it is {DEFAULT_REGRESSION_REQUESTS})"
        ));
    }
    Ok(Given {
        on: EVIDENCE_INPUTS.iter().any(|&input| given(input)),
        cases_file: inputs.trimmed(Input::PredictCases).map(PathBuf::from),
        requests,
        concurrency,
        warmup,
        objectives: Objectives {
            max_error_rate,
            max_latency_p95_ms,
            max_latency_regression,
        },
        analysis_file: inputs.trimmed(Input::AnalysisFile).map(PathBuf::from),
    })
}

/// What the smoke test sends, and the evidence settings.
#[derive(Debug)]
pub(crate) struct Resolved {
    /// The smoke test's payload; `None`: no smoke test.
    pub(crate) payload: Option<Value>,
    /// `None` when the evidence is off.
    pub(crate) evidence: Option<Settings>,
}

impl Given {
    /// The smoke test's payload and the evidence settings, one precedence
    /// for both: an explicit `predict-payload` is the smoke test (and,
    /// without a cases file, the one case); else a cases file's **first
    /// case** is the smoke test, its status expected, even when
    /// config.yaml has an example input (the cases are what the user
    /// asked to be sent); else config.yaml's `example_model_input` (the
    /// one case, when evidence inputs are given). Cases files are read
    /// relative to `root`.
    pub(crate) fn resolve(
        &self,
        given: Option<Value>,
        example: Option<Value>,
        root: &Path,
    ) -> Result<Resolved, String> {
        let explicit = given.is_some();
        if !self.on {
            return Ok(Resolved {
                payload: given.or(example),
                evidence: None,
            });
        }
        let (cases, payload, smoke_status) = match (&self.cases_file, given.or(example)) {
            // An explicit predict-payload stays the smoke test.
            (Some(path), Some(p)) if explicit => (cases::load(path, root)?, Some(p), None),
            (Some(path), _) => {
                let cases = cases::load(path, root)?;
                let (payload, status) = (cases[0].payload.clone(), cases[0].status);
                (cases, Some(payload), Some(status))
            }
            (None, Some(p)) => (
                vec![Case {
                    name: "predict-payload".into(),
                    payload: p.clone(),
                    status: 200,
                    json: None,
                    pointers: Vec::new(),
                    contains: None,
                    stream: p.get("stream").and_then(Value::as_bool) == Some(true),
                    max_ms: None,
                }],
                Some(p),
                None,
            ),
            (None, None) => {
                return Err(
                    "the evidence inputs need something to send: set predict-cases (a cases file) or predict-payload".into(),
                );
            }
        };
        // Latency is measured on the cases that expect a success only (a
        // refusal's latency says nothing of the model's): an objective
        // over it needs one.
        let latency_objective = [
            (
                self.objectives.max_latency_p95_ms.is_some(),
                "max-latency-p95-ms",
            ),
            (
                self.objectives.max_latency_regression.is_some(),
                "max-latency-regression",
            ),
        ]
        .into_iter()
        .find(|(set, _)| *set);
        if let Some((_, input)) = latency_objective
            && !cases.iter().any(|c| (200..300).contains(&c.status))
        {
            return Err(format!(
                "{input} is judged on the latency of successful answers, and every case expects a refusal (a status that is not 2xx): add a case that expects a 2xx"
            ));
        }
        let default = match self.objectives.max_latency_regression {
            Some(_) => DEFAULT_REGRESSION_REQUESTS,
            None => cases.len(),
        };
        Ok(Resolved {
            payload,
            evidence: Some(Settings {
                requests: self.requests.unwrap_or(default),
                smoke_status,
                cases,
                concurrency: self.concurrency,
                warmup: self.warmup,
                objectives: self.objectives.clone(),
                analysis_file: self.analysis_file.clone(),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(pairs: &[(&'static str, &str)]) -> Result<Given, String> {
        parse(&Inputs::from_pairs(pairs))
    }

    const CASES: &str =
        "- {name: refused, payload: {task: nope}, status: 422}\n- {name: ok, payload: {task: a}}\n";

    /// Resolves `pairs` plus a cases file holding `cases`, with the given
    /// `predict-payload` and config.yaml example input.
    fn resolved(
        pairs: &[(&'static str, &str)],
        cases: &str,
        given_payload: Option<Value>,
        example: Option<Value>,
    ) -> Result<Resolved, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cases.yaml"), cases).unwrap();
        let mut pairs = pairs.to_vec();
        pairs.push(("predict-cases", "cases.yaml"));
        given(&pairs)
            .unwrap()
            .resolve(given_payload, example, dir.path())
    }

    fn settings(pairs: &[(&'static str, &str)]) -> Settings {
        let r = resolved(pairs, CASES, None, None).unwrap();
        assert_eq!(r.payload, Some(serde_json::json!({"task": "nope"})));
        r.evidence.unwrap()
    }

    #[test]
    fn the_regression_needs_a_sample_of_twenty_and_defaults_to_a_hundred() {
        let e = given(&[
            ("predict-requests", "19"),
            ("max-latency-regression", "1.2"),
        ])
        .unwrap_err();
        assert!(
            e.starts_with(
                "predict-requests 19 is too few to judge max-latency-regression: set at least 20"
            ),
            "{e}"
        );
        assert!(
            given(&[("predict-requests", "19")]).is_ok(),
            "no regression, no minimum"
        );
        assert_eq!(settings(&[("max-latency-regression", "1.2")]).requests, 100);
        assert_eq!(
            settings(&[
                ("predict-requests", "20"),
                ("max-latency-regression", "1.2")
            ])
            .requests,
            20
        );
        assert_eq!(settings(&[]).requests, 2, "one per case");
    }

    #[test]
    fn the_first_case_is_the_smoke_test_unless_predict_payload_is_given() {
        use serde_json::json;
        assert_eq!(settings(&[]).smoke_status, Some(422));
        // config.yaml's example input does not displace the cases.
        let r = resolved(&[], CASES, None, Some(json!({"prompt": "hi"}))).unwrap();
        assert_eq!(r.payload, Some(json!({"task": "nope"})));
        assert_eq!(r.evidence.unwrap().smoke_status, Some(422));
        // An explicit predict-payload does.
        let r = resolved(&[], CASES, Some(json!({"x": 1})), Some(json!({"p": 1}))).unwrap();
        assert_eq!(r.payload, Some(json!({"x": 1})));
        let s = r.evidence.unwrap();
        assert_eq!(s.smoke_status, None, "predict-payload stays the smoke test");
        assert_eq!(s.cases.len(), 2, "and the cases are the sample");
        // Without a cases file the payload (given, else the example input)
        // is the one case.
        let dir = tempfile::tempdir().unwrap();
        let r = given(&[("max-error-rate", "0.1")])
            .unwrap()
            .resolve(None, Some(json!({"p": 1})), dir.path())
            .unwrap();
        assert_eq!(r.payload, Some(json!({"p": 1})));
        let s = r.evidence.unwrap();
        assert_eq!(
            (s.smoke_status, s.cases[0].payload.clone()),
            (None, json!({"p": 1}))
        );
        // Without evidence inputs nothing changes: predict-payload, else
        // the example input.
        let r = given(&[])
            .unwrap()
            .resolve(None, Some(json!({"p": 1})), dir.path())
            .unwrap();
        assert_eq!(
            (r.payload, r.evidence.is_none()),
            (Some(json!({"p": 1})), true)
        );
    }

    #[test]
    fn a_regression_needs_a_case_that_expects_a_success() {
        let e = resolved(
            &[("max-latency-regression", "1.2")],
            "- {name: refused, payload: {task: nope}, status: 422}\n",
            None,
            None,
        )
        .unwrap_err();
        assert!(e.contains("every case expects a refusal"), "{e}");
    }
}
