//! The inference hosts: one smoke-test call (model `predict`, chain
//! `run_remote`), answered in full or as an OpenAI-style SSE stream.

use std::time::{Duration, Instant};

use anyhow::anyhow;
use serde_json::Value;

use super::error::{self, ERROR_BODY_READ_BYTES};
use super::sse::Decoder;
use super::{Api, ApiError};
use crate::net;
use crate::retry::{self, CallKind, Classify, Policy};

/// Characters of an error answer kept in the message.
const ERROR_HEAD_CHARS: usize = 500;
/// Bytes of a smoke-test answer kept: the outputs keep 4096 characters of
/// it, and what is kept beyond serves checks of the answer. The rest is
/// read to its end and counted, never held.
pub(crate) const ANSWER_KEPT_BYTES: usize = 1 << 20;
/// The largest streamed event (one SSE `data` payload): a token is a few
/// bytes, and a stream that never ends its line must not grow without end.
pub(crate) const STREAM_EVENT_MAX_BYTES: usize = 1 << 20;

/// What a smoke-test call answered.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    /// The body, or the streamed text (first `max_chars` characters).
    pub(crate) text: String,
    pub(crate) stream: Option<StreamReading>,
}

/// What reading a streamed answer measured: when its first token came and
/// how many came. The step reports them as `ci::StreamStats`, with the rate
/// over the whole call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamReading {
    pub(crate) first_token: Duration,
    pub(crate) tokens: u64,
}

impl Api {
    /// POSTs `payload` to `url` and reads the answer: the whole body, or
    /// with `streaming` the SSE tokens. `label` names the call in messages
    /// (`predict`, `run_remote`). A smoke test is safe to repeat, so what
    /// did not reach the model (no connection, a reset, a broken stream,
    /// 429, 502, 503, 504) is tried again until `deadline`, each retry said
    /// in the log; the model's own error answer (4xx, 500) fails at once
    /// (`Policy::PREDICT`). The caller also holds `deadline` as a hard limit.
    pub(crate) async fn invoke(
        &self,
        label: &str,
        url: &str,
        payload: &Value,
        streaming: bool,
        max_chars: usize,
        deadline: Instant,
    ) -> anyhow::Result<Answer> {
        let url = reqwest::Url::parse(url).map_err(|e| anyhow!("bad {label} URL {url}: {e}"))?;
        self.retrying(Policy::PREDICT, Some(deadline), |_| {
            self.invoke_once(label, url.clone(), payload, streaming, max_chars)
        })
        .await
        .map_err(|e| match e {
            Attempt::Api(e) => anyhow!(e),
            Attempt::Read(e) => e,
        })
    }

    async fn invoke_once(
        &self,
        label: &str,
        url: reqwest::Url,
        payload: &Value,
        streaming: bool,
        max_chars: usize,
    ) -> Result<Answer, Attempt> {
        #[expect(
            clippy::disallowed_methods,
            reason = "times the answer (first token, tokens per second): a measurement, not a deadline"
        )]
        let started = Instant::now();
        let req = self.http.post(url).json(payload);
        let mut resp = self.send_authed(label, req).await.map_err(Attempt::Api)?;
        let status = resp.status();
        if !status.is_success() {
            let retry_after = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(retry::parse_retry_after);
            let (body, _) = net::read_head(&mut resp, ERROR_BODY_READ_BYTES, false)
                .await
                .unwrap_or_default();
            // Redacted before it is cut, so no part of a secret survives.
            let head: String = crate::secret::scrub(&String::from_utf8_lossy(&body))
                .chars()
                .take(ERROR_HEAD_CHARS)
                .collect();
            let message = format!("{label} answered HTTP {status}: {head}");
            return Err(Attempt::Api(error::by_status(status, message, retry_after)));
        }
        if streaming {
            read_stream(resp, started, max_chars).await
        } else {
            match net::read_head(&mut resp, ANSWER_KEPT_BYTES, true).await {
                Ok((kept, _)) => Ok(Answer {
                    text: String::from_utf8_lossy(&kept).into_owned(),
                    stream: None,
                }),
                Err(e) => Err(Attempt::Api(ApiError::Ambiguous {
                    message: format!("reading the {label} response: {e}"),
                })),
            }
        }
    }
}

/// Why one smoke-test try failed: the request, or the answer's content.
enum Attempt {
    Api(ApiError),
    /// The answer came whole but says no (a stream without tokens).
    Read(anyhow::Error),
}

impl Classify for Attempt {
    fn kind(&self) -> CallKind {
        match self {
            Attempt::Api(e) => e.kind(),
            Attempt::Read(_) => CallKind::Permanent,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Attempt::Api(e) => e.retry_after(),
            Attempt::Read(_) => None,
        }
    }
}

impl std::fmt::Display for Attempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Attempt::Api(e) => write!(f, "{e}"),
            Attempt::Read(e) => write!(f, "{e:#}"),
        }
    }
}

/// Reads an OpenAI-style SSE stream: each event whose JSON has a non-empty
/// `choices[0].delta.content` is one token; `[DONE]` ends it.
async fn read_stream(
    resp: reqwest::Response,
    started: Instant,
    max_chars: usize,
) -> Result<Answer, Attempt> {
    use futures_util::StreamExt;
    let mut body = resp.bytes_stream();
    let mut decoder = Decoder::default();
    let mut text = String::new();
    let mut chars = 0;
    let mut tokens = 0u64;
    let mut first_token: Option<Duration> = None;
    'read: while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| {
            Attempt::Api(ApiError::Ambiguous {
                message: format!("reading the predict stream: {e}"),
            })
        })?;
        let events = decoder.feed(&chunk);
        if decoder.pending_bytes() > STREAM_EVENT_MAX_BYTES {
            return Err(Attempt::Read(anyhow!(
                "the predict stream sent an event larger than {}, the most truss-push reads for one event: is this an OpenAI-style token stream?",
                net::size(STREAM_EVENT_MAX_BYTES)
            )));
        }
        for event in events {
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
        return Err(Attempt::Read(anyhow!(
            "the predict stream (stream: true) produced no tokens"
        )));
    }
    Ok(Answer {
        text,
        stream: Some(StreamReading {
            first_token: first_token.unwrap_or_else(|| started.elapsed()),
            tokens,
        }),
    })
}
