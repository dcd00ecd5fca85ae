//! One evidence request and the environment's metrics: a single try each,
//! answered whatever the HTTP status (a case may expect a 4xx), the body
//! capped. Retrying would hide the very errors the error rate counts.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::sse::Decoder;
use super::{Api, ApiError, error};

/// Bytes of an evidence answer kept for checking; the rest is read and
/// dropped so the latency still covers the whole answer.
const PROBE_BODY_MAX_BYTES: usize = 1024 * 1024;
/// The metrics read is one small JSON document.
const METRICS_TIMEOUT_SECS: u64 = 10;
const METRICS_BODY_MAX_BYTES: usize = 1024 * 1024;

/// What one evidence request got.
#[derive(Clone, Debug)]
pub(crate) struct Probe {
    pub(crate) status: u16,
    /// The body, or for a stream the assembled text of its events.
    pub(crate) text: String,
    /// From sending the request to the end of the answer.
    pub(crate) elapsed: Duration,
}

impl Api {
    /// POSTs `payload` to `url` once and reads the whole answer (an SSE
    /// stream assembled when `stream`), within `timeout`.
    pub(crate) async fn probe(
        &self,
        label: &str,
        url: &str,
        payload: &Value,
        stream: bool,
        timeout: Duration,
    ) -> Result<Probe, ApiError> {
        let url = reqwest::Url::parse(url)
            .map_err(|e| ApiError::permanent(format!("bad {label} URL {url}: {e}")))?;
        #[expect(
            clippy::disallowed_methods,
            reason = "times one evidence request: its latency is the measurement"
        )]
        let started = Instant::now();
        let req = self.http.post(url).timeout(timeout).json(payload);
        let resp = self.send_authed(label, req).await?;
        let status = resp.status().as_u16();
        let bytes =
            read_capped(resp, PROBE_BODY_MAX_BYTES)
                .await
                .map_err(|e| ApiError::Ambiguous {
                    message: format!("reading the {label} answer: {e}"),
                })?;
        let elapsed = started.elapsed();
        let text = if stream && (200..300).contains(&status) {
            assemble_stream(&bytes)
        } else {
            String::from_utf8_lossy(&bytes).into_owned()
        };
        Ok(Probe {
            status,
            text,
            elapsed,
        })
    }

    /// `GET /v1/models/{id}/environments/{env}/metrics` (the platform marks
    /// it unstable): the current snapshot of the environment's default
    /// metrics, as JSON. One try; the caller polls.
    pub(crate) async fn environment_metrics(
        &self,
        model_id: &str,
        env: &str,
    ) -> Result<Value, ApiError> {
        let what = "reading the environment's metrics";
        let url = self
            .endpoints
            .rest(&["models", model_id, "environments", env, "metrics"]);
        let req = self
            .http
            .get(url)
            .timeout(Duration::from_secs(METRICS_TIMEOUT_SECS));
        let resp = self.send(what, req).await?;
        let bytes = read_capped(resp, METRICS_BODY_MAX_BYTES)
            .await
            .map_err(|e| ApiError::Ambiguous {
                message: format!("{what}: {e}"),
            })?;
        serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::permanent(format!("{what}: the answer is not JSON ({e})")))
    }
}

/// The body, at most `max` bytes kept; the rest is read and dropped.
async fn read_capped(resp: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    use futures_util::StreamExt;
    let mut body = resp.bytes_stream();
    let mut kept = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| error::describe(&e))?;
        let room = max.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
    Ok(kept)
}

/// The text of an SSE answer: each event's `choices[0].delta.content` (or
/// `choices[0].text`) in order; events that are not such JSON count as
/// text themselves. `[DONE]` ends it.
fn assemble_stream(bytes: &[u8]) -> String {
    let mut decoder = Decoder::default();
    let mut text = String::new();
    for event in decoder.feed(bytes) {
        let data = event.data.trim();
        if data == "[DONE]" {
            break;
        }
        let piece = serde_json::from_str::<Value>(data).ok().and_then(|v| {
            ["/choices/0/delta/content", "/choices/0/text"]
                .iter()
                .find_map(|p| v.pointer(p).and_then(Value::as_str).map(str::to_string))
        });
        text.push_str(piece.as_deref().unwrap_or(data));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_assembled_from_its_events() {
        let sse = b"data: {\"choices\": [{\"delta\": {\"content\": \"Sum\"}}]}\n\ndata: {\"choices\": [{\"delta\": {\"content\": \"mary\"}}]}\n\ndata: [DONE]\n\n";
        assert_eq!(assemble_stream(sse), "Summary");
        assert_eq!(assemble_stream(b"data: plain\n\n"), "plain");
    }
}
