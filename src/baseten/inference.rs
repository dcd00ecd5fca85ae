//! The inference hosts: one smoke-test call (model `predict`, chain
//! `run_remote`), answered in full or as an OpenAI-style SSE stream.

use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::Value;

use super::Api;
use super::sse::Decoder;

/// Characters of an error answer kept in the message.
const ERROR_HEAD_CHARS: usize = 500;

/// What a smoke-test call answered.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    /// The body, or the streamed text (first `max_chars` characters).
    pub(crate) text: String,
    pub(crate) stream: Option<StreamStats>,
}

/// A streamed answer's numbers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamStats {
    pub(crate) first_token: Duration,
    pub(crate) tokens: u64,
}

impl Api {
    /// POSTs `payload` to `url` and reads the answer: the whole body, or
    /// with `streaming` the SSE tokens. `label` names the call in messages
    /// (`predict`, `run_remote`); the caller holds the deadline.
    pub(crate) async fn invoke(
        &self,
        label: &str,
        url: &str,
        payload: &Value,
        streaming: bool,
        max_chars: usize,
    ) -> anyhow::Result<Answer> {
        let url = reqwest::Url::parse(url).map_err(|e| anyhow!("bad {label} URL {url}: {e}"))?;
        let started = Instant::now();
        let req = self.http.post(url).json(payload);
        let resp = self.send_authed("predict", req).await?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            let head: String = body.chars().take(ERROR_HEAD_CHARS).collect();
            bail!("{label} answered HTTP {status}: {head}");
        }
        if streaming {
            read_stream(resp, started, max_chars).await
        } else {
            let text = resp
                .text()
                .await
                .with_context(|| format!("reading the {label} response"))?;
            Ok(Answer { text, stream: None })
        }
    }
}

/// Reads an OpenAI-style SSE stream: each event whose JSON has a non-empty
/// `choices[0].delta.content` is one token; `[DONE]` ends it.
async fn read_stream(
    resp: reqwest::Response,
    started: Instant,
    max_chars: usize,
) -> anyhow::Result<Answer> {
    use futures_util::StreamExt;
    let mut body = resp.bytes_stream();
    let mut decoder = Decoder::default();
    let mut text = String::new();
    let mut chars = 0;
    let mut tokens = 0u64;
    let mut first_token: Option<Duration> = None;
    'read: while let Some(chunk) = body.next().await {
        let chunk = chunk.context("reading the predict stream")?;
        for event in decoder.feed(&chunk) {
            let data = event.data.trim();
            if data == "[DONE]" {
                break 'read;
            }
            let Ok(v) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            if let Some(c) = v
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
            {
                tokens += 1;
                first_token.get_or_insert_with(|| started.elapsed());
                if chars < max_chars {
                    text.push_str(c);
                    chars += c.chars().count();
                }
            }
        }
    }
    if tokens == 0 {
        bail!("the predict stream (stream: true) produced no tokens");
    }
    Ok(Answer {
        text,
        stream: Some(StreamStats {
            first_token: first_token.unwrap_or_else(|| started.elapsed()),
            tokens,
        }),
    })
}
