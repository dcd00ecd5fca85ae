//! The evidence inputs (`predict-cases`, `predict-requests`, the
//! objectives, `analysis-file`) read into `Settings`, the cases file
//! checked whole before any request.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::number;
use crate::cli::Input;
use crate::cli::Inputs;
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

/// The evidence inputs, validated.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) cases: Vec<Case>,
    /// Counted requests to the candidate (a baseline gets as many).
    pub(crate) requests: usize,
    pub(crate) concurrency: usize,
    pub(crate) warmup: usize,
    pub(crate) objectives: Objectives,
    pub(crate) analysis_file: Option<PathBuf>,
    /// The smoke test sends the first case (no `predict-payload` was
    /// given) and that case expects this status.
    pub(crate) smoke_status: Option<u16>,
}

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

impl Given {
    /// The evidence settings, `None` when the evidence is off. `payload`
    /// is the one-case shorthand (`predict-payload`); when only cases are
    /// given, the first case's payload becomes the smoke test's. Cases
    /// files are read relative to `root`.
    pub(crate) fn resolve(
        &self,
        payload: &mut Option<Value>,
        root: &Path,
    ) -> Result<Option<Settings>, String> {
        if !self.on {
            return Ok(None);
        }
        let cases = match (&self.cases_file, payload.as_ref()) {
            (Some(path), _) => cases::load(path, root)?,
            (None, Some(p)) => vec![Case {
                name: "predict-payload".into(),
                payload: p.clone(),
                status: 200,
                json: None,
                pointers: Vec::new(),
                contains: None,
                stream: p.get("stream").and_then(Value::as_bool) == Some(true),
                max_ms: None,
            }],
            (None, None) => {
                return Err(
                    "the evidence inputs need something to send: set predict-cases (a cases file) or predict-payload".into(),
                );
            }
        };
        let smoke_status = payload.is_none().then_some(cases[0].status);
        if payload.is_none() {
            *payload = Some(cases[0].payload.clone());
        }
        let default = match self.objectives.max_latency_regression {
            Some(_) => DEFAULT_REGRESSION_REQUESTS,
            None => cases.len(),
        };
        Ok(Some(Settings {
            requests: self.requests.unwrap_or(default),
            smoke_status,
            cases,
            concurrency: self.concurrency,
            warmup: self.warmup,
            objectives: self.objectives.clone(),
            analysis_file: self.analysis_file.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(pairs: &[(&'static str, &str)]) -> Result<Given, String> {
        parse(&Inputs::from_pairs(pairs))
    }

    fn settings(pairs: &[(&'static str, &str)]) -> Settings {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cases.yaml"),
            "- {name: refused, payload: {task: nope}, status: 422}\n- {name: ok, payload: {task: a}}\n",
        )
        .unwrap();
        let mut pairs = pairs.to_vec();
        pairs.push(("predict-cases", "cases.yaml"));
        let mut payload = None;
        let s = given(&pairs)
            .unwrap()
            .resolve(&mut payload, dir.path())
            .unwrap()
            .unwrap();
        assert_eq!(payload, Some(serde_json::json!({"task": "nope"})));
        s
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
    fn the_first_case_and_its_status_are_the_smoke_test_without_a_payload() {
        assert_eq!(settings(&[]).smoke_status, Some(422));
        let dir = tempfile::tempdir().unwrap();
        let mut payload = Some(serde_json::json!({"x": 1}));
        let s = given(&[("max-error-rate", "0.1")])
            .unwrap()
            .resolve(&mut payload, dir.path())
            .unwrap()
            .unwrap();
        assert_eq!(s.smoke_status, None, "predict-payload stays the smoke test");
    }
}
