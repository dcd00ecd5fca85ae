//! The JSON documents: the run's result as one object on stdout
//! (`--json`), for scripts — every output under its own name and as the
//! same string the outputs file holds, then the exit code, the status
//! history, the notes and the evidence —, and the several-target `results`
//! output. Serde types over the outputs' entries, written by one formatter:
//! the top level one member a line, anything nested compact.

use std::borrow::Cow;

use serde::Serialize;

use super::format::format_utc;
use super::outputs::{Entries, Outputs, top_level_lines};
use super::summary::StatusEvent;
use crate::secret::scrub;

/// One row of the status history. Fields in alphabetical order, the order
/// this document has always had.
#[derive(Serialize)]
struct HistoryEvent<'a> {
    #[serde(rename = "elapsed-seconds")]
    elapsed_seconds: f64,
    event: Cow<'a, str>,
    status: Cow<'a, str>,
    time: String,
}

impl<'a> From<&'a StatusEvent> for HistoryEvent<'a> {
    fn from(e: &'a StatusEvent) -> Self {
        HistoryEvent {
            elapsed_seconds: (e.elapsed.as_secs_f64() * 10.0).round() / 10.0,
            event: scrub(&e.event),
            status: scrub(&e.status),
            // `2026-12-01 02:03:04` → `2026-12-01T02:03:04Z`.
            time: format!("{}Z", format_utc(e.at).replacen(' ', "T", 1)),
        }
    }
}

/// The `--json` document.
#[derive(Serialize)]
struct RunResult<'a, E: Serialize + ?Sized> {
    #[serde(flatten)]
    outputs: Entries,
    #[serde(rename = "exit-code")]
    exit_code: u8,
    history: Vec<HistoryEvent<'a>>,
    notes: Vec<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    evidence: Option<&'a E>,
}

/// One target's entry in the several-target `results` output: where it
/// is, its kind, then its outputs.
#[derive(Serialize)]
pub(crate) struct TargetResult {
    target: String,
    kind: &'static str,
    #[serde(flatten)]
    outputs: Entries,
}

impl TargetResult {
    pub(crate) fn new(target: String, kind: crate::kind::Kind, outputs: &Outputs) -> Self {
        TargetResult {
            target,
            kind: kind.as_str(),
            outputs: outputs.into(),
        }
    }
}

/// The `results` output: one compact JSON array of every target's result.
pub(crate) fn results_json(results: &[TargetResult]) -> String {
    serde_json::to_string(results).expect("plain data serializes")
}

/// The JSON object, one member a line, ending in a newline. Outputs keep
/// their writing order; `exit-code`, `history`, `notes` and, when there
/// is any, `evidence` follow them. Every text is redacted of the
/// registered secrets, and the whole document once more.
pub(crate) fn render_result<E: Serialize + ?Sized>(
    outputs: &Outputs,
    exit_code: u8,
    history: &[StatusEvent],
    notes: &[String],
    evidence: Option<&E>,
) -> String {
    let doc = top_level_lines(&RunResult {
        outputs: outputs.into(),
        exit_code,
        history: history.iter().map(HistoryEvent::from).collect(),
        notes: notes.iter().map(|n| scrub(n)).collect(),
        evidence,
    });
    scrub(&doc).into_owned()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use serde_json::{Value, json};

    use super::*;
    use crate::outcome::Status;

    fn history() -> [StatusEvent; 2] {
        [
            StatusEvent {
                at: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
                elapsed: Duration::from_millis(1234),
                status: "BUILD_FAILED".into(),
                event: "failed \"quoted\"".into(),
            },
            StatusEvent {
                at: UNIX_EPOCH + Duration::from_secs(1_700_000_060),
                elapsed: Duration::from_secs(61),
                status: String::new(),
                event: "created".into(),
            },
        ]
    }

    #[test]
    fn one_object_with_every_output_the_code_and_the_history() {
        let mut o = Outputs::new(Status::DeployFailed);
        o.deployment_id = "d1".into();
        o.error_message = "line one\n\"quoted\"".into();
        o.deploy_time_seconds = Some(12.345);
        let history = &history()[..1];
        let text = render_result::<()>(&o, 1, history, &["cleanup skipped".into()], None);
        let v: Value = serde_json::from_str(&text).unwrap();
        let obj = v.as_object().unwrap();
        for (name, value) in o.entries() {
            assert_eq!(obj[name], Value::from(value), "{name}");
        }
        assert_eq!(v["status"], "deploy_failed");
        assert_eq!(v["deploy-time-seconds"], "12.3");
        assert_eq!(v["error-message"], "line one\n\"quoted\"");
        assert_eq!(v["exit-code"], 1);
        assert_eq!(
            v["history"],
            json!([{"time": "2023-11-14T22:13:20Z", "elapsed-seconds": 1.2,
                    "status": "BUILD_FAILED", "event": "failed \"quoted\""}])
        );
        assert_eq!(v["notes"], json!(["cleanup skipped"]));
        assert!(v.get("evidence").is_none());
        assert!(text.ends_with("}\n"));
    }

    #[test]
    fn the_document_keeps_its_bytes_top_level_one_a_line_nested_compact() {
        let mut o = Outputs::new(Status::DeployFailed);
        o.deployment_id = "d1".into();
        o.deploy_time_seconds = Some(12.345);
        o.evidence = vec![("cases-passed", "3".into())];
        let notes = ["a".to_string(), "b\"".into()];
        let evidence = [json!({"p50": 1.5, "ok": true})];
        let text = render_result(&o, 1, &history(), &notes, Some(&evidence[..]));
        let want = r#"{
  "deployment-id": "d1",
  "model-id": "",
  "chain-id": "",
  "model-name": "",
  "deploy-time-seconds": "12.3",
  "predict-response": "",
  "status": "deploy_failed",
  "error-message": "",
  "last-status": "",
  "logs-url": "",
  "predict-url": "",
  "environment-url": "",
  "previous-deployment-id": "",
  "tested-deployment-id": "",
  "rolled-back": "",
  "cases-passed": "3",
  "exit-code": 1,
  "history": [{"elapsed-seconds":1.2,"event":"failed \"quoted\"","status":"BUILD_FAILED","time":"2023-11-14T22:13:20Z"},{"elapsed-seconds":61.0,"event":"created","status":"","time":"2023-11-14T22:14:20Z"}],
  "notes": ["a","b\""],
  "evidence": [{"ok":true,"p50":1.5}]
}
"#;
        assert_eq!(text, want);
        let empty = render_result::<()>(&o, 1, &[], &[], None);
        assert!(
            empty.ends_with("  \"history\": [],\n  \"notes\": []\n}\n"),
            "{empty}"
        );
    }

    #[test]
    fn results_are_one_compact_array_target_and_kind_first() {
        let mut o = Outputs::new(Status::Success);
        o.model_name = "m\n".into();
        let one = TargetResult::new("models/a".into(), crate::kind::Kind::Model, &o);
        let text = results_json(&[one]);
        assert!(
            text.starts_with(r#"[{"target":"models/a","kind":"model","deployment-id":"","#),
            "{text}"
        );
        assert!(text.contains(r#""model-name":"m\n","#), "{text}");
        assert!(text.ends_with(r#""rolled-back":""}]"#), "{text}");
        assert_eq!(results_json(&[]), "[]");
    }
}
