//! What reviewers read: the pull-request comment (found again by its
//! hidden marker) and the one-line descriptions of statuses. Pure
//! functions over the run's outputs.

use std::fmt::Write as _;

use crate::ci::{Outputs, PredictStats, markdown};
use crate::kind::Kind;
use crate::outcome::Status;

/// GitHub cuts status descriptions at this many characters.
pub(super) const DESCRIPTION_MAX_CHARS: usize = 140;
/// Longest error text quoted in the comment: the whole message is in the
/// job log and the outputs.
const COMMENT_ERROR_MAX_CHARS: usize = 2000;

/// The hidden first line that names the model (or chain) the comment is
/// about, so the next run finds and edits it instead of adding another.
/// The name is percent-encoded: whatever it holds, it cannot end the HTML
/// comment or look like another model's marker.
pub(super) fn marker(kind: Kind, name: &str) -> String {
    let mut encoded = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
            encoded.push(b as char);
        } else {
            let _ = write!(encoded, "%{b:02X}");
        }
    }
    format!("<!-- truss-push: {} {encoded} -->", kind.as_str())
}

/// Whether `body` is the comment that `marker` names: the marker is its
/// first line.
pub(super) fn is_ours(body: &str, marker: &str) -> bool {
    body.lines().next().map(str::trim) == Some(marker)
}

/// Everything the comment shows besides the outputs.
pub(super) struct View<'a> {
    pub(super) kind: Kind,
    pub(super) outputs: &'a Outputs,
    pub(super) predict: Option<PredictStats>,
    /// The model's or chain's page in the Baseten app; empty when unknown.
    pub(super) page_url: &'a str,
    /// The commit deployed, shown at the bottom.
    pub(super) sha: Option<&'a str>,
    /// `2026-12-01 02:00:00`, when the comment was written.
    pub(super) at: &'a str,
    /// What the deploy changes in production (deploy by content), as
    /// Markdown; redacted here like everything else.
    pub(super) changes: Option<&'a str>,
}

/// The verdict in a few words, for statuses and the comment's title.
pub(super) fn verdict(outputs: &Outputs) -> String {
    match outputs.status {
        Status::Success if outputs.unchanged == Some(true) => "unchanged, already serving".into(),
        // Only `command: rollback` succeeds having moved traffic back (a
        // gate that rolls back has failed).
        Status::Success if outputs.rolled_back == Some(true) => {
            format!("rolled back to deployment {}", outputs.deployment_id)
        }
        Status::Success => match outputs.deploy_time_seconds {
            Some(s) => format!("deployed and ready in {s:.1}s"),
            None => "deployed".to_string(),
        },
        Status::DeployFailed => "deploy failed".into(),
        Status::DeployTimeout => "deploy timed out".into(),
        Status::PredictFailed => "predict check failed".into(),
        Status::CleanupFailed => "cleanup failed".into(),
    }
}

/// A status description: the verdict, then the start of the error, cut to
/// GitHub's limit.
pub(super) fn description(outputs: &Outputs) -> String {
    let mut text = verdict(outputs);
    if !outputs.error_message.is_empty() {
        text.push_str(": ");
        text.push_str(&outputs.error_message.replace(['\r', '\n'], " "));
    }
    cut(&text, DESCRIPTION_MAX_CHARS)
}

/// The first `max` characters, ending in `…` when cut.
pub(super) fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The comment's Markdown.
pub(super) fn render(v: &View<'_>) -> String {
    let o = v.outputs;
    let mut text = marker(v.kind, &o.model_name);
    text.push('\n');
    let icon = if o.status == Status::Success {
        "✅"
    } else {
        "❌"
    };
    let _ = writeln!(
        text,
        "### {icon} Baseten {}: {} {}\n",
        v.kind.as_str(),
        markdown::code(&o.model_name),
        verdict(o)
    );
    text.push_str("| | |\n|---|---|\n");
    let mut row = |name: &str, value: String| {
        if !value.is_empty() {
            let _ = writeln!(text, "| {name} | {value} |");
        }
    };
    row("Status", format!("`{}`", o.status));
    if !o.deployment_id.is_empty() {
        row("Deployment", markdown::link(&o.deployment_id, v.page_url));
    }
    row(
        "Logs",
        if o.logs_url.is_empty() {
            String::new()
        } else {
            markdown::link("logs", &o.logs_url)
        },
    );
    if !o.environment_url.is_empty() {
        row(
            "Environment",
            markdown::link(&o.environment_url, &o.environment_url),
        );
    } else if !o.predict_url.is_empty() {
        row("Predict URL", markdown::cell(&o.predict_url));
    }
    if let Some(s) = o.deploy_time_seconds {
        row("Deploy time", format!("{s:.1}s"));
    }
    if let Some(p) = v.predict {
        row("Predict latency", format!("{:.2}s", p.total_secs));
        if let Some(s) = p.stream {
            row("Time to first token", format!("{:.2}s", s.ttfb_secs));
            row("Tokens per second", format!("{:.1}", s.tokens_per_sec));
        }
    }
    if let Some(p) = &o.hourly_price {
        row(
            "Hourly price",
            markdown::dollars(&markdown::inline(&p.line)),
        );
    }
    if o.status != Status::Success && !o.last_status.is_empty() {
        row("Last platform status", markdown::code(&o.last_status));
    }
    if !o.error_message.is_empty() {
        text.push('\n');
        text.push_str(&markdown::fenced(
            &cut(&o.error_message, COMMENT_ERROR_MAX_CHARS),
            "text",
        ));
    }
    if let Some(changes) = v.changes {
        text.push('\n');
        text.push_str(&crate::secret::scrub(changes));
    }
    let commit = v
        .sha
        .map(|s| format!(" for {}", s.chars().take(7).collect::<String>()))
        .unwrap_or_default();
    let _ = write!(
        text,
        "\n<sub>Updated {} UTC{commit} by truss-push.</sub>\n",
        v.at
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ci::StreamStats;

    fn outputs(status: Status) -> Outputs {
        let mut o = Outputs::new(status);
        o.model_name = "my model".into();
        o.deployment_id = "dep1".into();
        o.deploy_time_seconds = Some(12.34);
        o.logs_url = "https://app.example/models/m/logs/dep1".into();
        o
    }

    #[test]
    fn the_marker_names_the_model_and_cannot_be_closed_early() {
        assert_eq!(
            marker(Kind::Model, "hello"),
            "<!-- truss-push: model hello -->"
        );
        let m = marker(Kind::Chain, "a --> b\n<!--");
        assert_eq!(m.matches("-->").count(), 1, "{m}");
        assert!(m.starts_with("<!-- truss-push: chain a%20--%3E%20b%0A%3C%21--"));
        assert_ne!(marker(Kind::Model, "a b"), marker(Kind::Model, "a%20b"));
        let body = render(&View {
            kind: Kind::Model,
            outputs: &outputs(Status::Success),
            predict: None,
            page_url: "",
            sha: None,
            at: "2026-01-01 00:00:00",
            changes: None,
        });
        assert!(is_ours(&body, &marker(Kind::Model, "my model")));
        assert!(!is_ours(&body, &marker(Kind::Model, "my")));
        assert!(!is_ours(&body, &marker(Kind::Chain, "my model")));
    }

    #[test]
    fn a_success_shows_the_links_and_the_numbers() {
        let mut o = outputs(Status::Success);
        o.environment_url = "https://model-m.api.example/environments/production/predict".into();
        let body = render(&View {
            kind: Kind::Model,
            outputs: &o,
            predict: Some(PredictStats {
                total_secs: 0.5,
                stream: Some(StreamStats {
                    ttfb_secs: 0.12,
                    tokens: 40,
                    tokens_per_sec: 80.0,
                }),
            }),
            page_url: "https://app.example/models/m/overview",
            sha: Some("abcdef0123"),
            at: "2026-01-01 00:00:00",
            changes: None,
        });
        for want in [
            "### ✅ Baseten model: `my model` deployed and ready in 12.3s",
            "| Deployment | [dep1](https://app.example/models/m/overview) |",
            "| Logs | [logs](https://app.example/models/m/logs/dep1) |",
            "| Environment | [https://model-m",
            "| Deploy time | 12.3s |",
            "| Predict latency | 0.50s |",
            "| Time to first token | 0.12s |",
            "| Tokens per second | 80.0 |",
            "for abcdef0 by truss-push",
        ] {
            assert!(body.contains(want), "{want:?} in\n{body}");
        }
        assert!(!body.contains("Last platform status"));
    }

    #[test]
    fn a_failure_shows_the_error_and_the_last_status() {
        let mut o = outputs(Status::DeployFailed);
        o.deploy_time_seconds = None;
        o.last_status = "BUILD_FAILED".into();
        o.error_message = "build failed:\n```\npip error | x".into();
        let body = render(&View {
            kind: Kind::Model,
            outputs: &o,
            predict: None,
            page_url: "",
            sha: None,
            at: "2026-01-01 00:00:00",
            changes: None,
        });
        assert!(body.contains("### ❌ Baseten model: `my model` deploy failed"));
        assert!(body.contains("| Last platform status | `BUILD_FAILED` |"));
        assert!(
            body.contains("````text\nbuild failed:\n```\npip error | x\n````"),
            "{body}"
        );
    }

    #[test]
    fn the_hourly_price_is_one_row_its_dollars_escaped() {
        let mut o = outputs(Status::Success);
        o.hourly_price = Some(crate::ci::HourlyPrice {
            min: "1.21".into(),
            max: "3.62".into(),
            line: "Costs $1.21–$3.62 per hour: 1–3 replicas of A10Gx4x16 (1 × A10G)".into(),
        });
        fn view(o: &Outputs) -> View<'_> {
            View {
                kind: Kind::Model,
                outputs: o,
                predict: None,
                page_url: "",
                sha: None,
                at: "2026-01-01 00:00:00",
                changes: None,
            }
        }
        let body = render(&view(&o));
        assert!(
            body.contains(
                r"| Hourly price | Costs \$1.21–\$3.62 per hour: 1–3 replicas of A10Gx4x16 (1 × A10G) |"
            ),
            "{body}"
        );
        o.hourly_price = None;
        assert!(!render(&view(&o)).contains("Hourly price"));
    }

    #[test]
    fn descriptions_fit_githubs_limit() {
        let mut o = outputs(Status::PredictFailed);
        o.error_message = "x".repeat(500);
        let d = description(&o);
        assert_eq!(d.chars().count(), DESCRIPTION_MAX_CHARS);
        assert!(d.starts_with("predict check failed: xxx") && d.ends_with('…'));
        assert_eq!(
            description(&outputs(Status::Success)),
            "deployed and ready in 12.3s"
        );
    }
}
