//! The run's result as one JSON object on stdout (`--json`), for scripts:
//! every output under its own name and as the same string the outputs
//! file holds, then the exit code, the status history and the notes.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::format::format_utc;
use super::outputs::Outputs;
use super::summary::StatusEvent;

/// `2026-12-01 02:03:04` → `2026-12-01T02:03:04Z`.
fn iso(at: std::time::SystemTime) -> String {
    format!("{}Z", format_utc(at).replacen(' ', "T", 1))
}

/// The JSON object, pretty-printed, ending in a newline. Outputs keep their
/// writing order; `exit-code`, `history` and `notes` follow them.
pub(crate) fn render_result(
    outputs: &Outputs,
    exit_code: u8,
    history: &[StatusEvent],
    notes: &[String],
) -> String {
    let mut text = String::from("{\n");
    for (name, value) in outputs.entries() {
        let _ = writeln!(text, "  {}: {},", Value::from(name), Value::from(value));
    }
    let _ = writeln!(text, "  \"exit-code\": {exit_code},");
    let events: Vec<Value> = history
        .iter()
        .map(|e| {
            json!({
                "time": iso(e.at),
                "elapsed-seconds": (e.elapsed.as_secs_f64() * 10.0).round() / 10.0,
                "status": e.status,
                "event": e.event,
            })
        })
        .collect();
    let _ = writeln!(
        text,
        "  \"history\": {},",
        serde_json::to_string(&events).expect("plain data serializes")
    );
    let _ = writeln!(
        text,
        "  \"notes\": {}",
        serde_json::to_string(notes).expect("plain data serializes")
    );
    text.push_str("}\n");
    text
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::outcome::Status;

    #[test]
    fn one_object_with_every_output_the_code_and_the_history() {
        let mut o = Outputs::new(Status::DeployFailed);
        o.deployment_id = "d1".into();
        o.error_message = "line one\n\"quoted\"".into();
        o.deploy_time_seconds = Some(12.345);
        let history = [StatusEvent {
            at: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            elapsed: Duration::from_millis(1234),
            status: "BUILD_FAILED".into(),
            event: "failed".into(),
        }];
        let text = render_result(&o, 1, &history, &["cleanup skipped".into()]);
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
                    "status": "BUILD_FAILED", "event": "failed"}])
        );
        assert_eq!(v["notes"], json!(["cleanup skipped"]));
        assert!(text.ends_with("}\n"));
    }
}
