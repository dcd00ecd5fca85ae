//! The smoke test: one request to the new deployment, read under the
//! predict deadline, its answer kept for the outputs.

use std::time::Instant;

use anyhow::anyhow;
use serde_json::Value;

use super::{Candidate, Ctx, human, promote_after_predict};
use crate::budget::Phase;
use crate::ci::{PredictStats, StreamStats};
use crate::kind::Kind;
use crate::outcome::Failure;

/// First characters of a predict response kept in outputs.
pub(crate) const PREDICT_RESPONSE_MAX_CHARS: usize = 4096;
/// First characters of a predict response shown in the log.
const SHOWN_RESPONSE_CHARS: usize = 500;

/// After the wait, for models and chains alike: the smoke test of the
/// deployment itself (a model's `predict`, a chain's `run_remote`; a
/// model's payload may ask for a stream), then, with `promotion:
/// after-predict`, the gated promotion. Nothing without a payload.
pub(crate) async fn test_and_promote(
    ctx: &Ctx<'_>,
    owner: Kind,
    owner_id: &str,
    deployment_id: &str,
) -> Result<(), Failure> {
    let cfg = ctx.cfg;
    let Some(payload) = &cfg.predict_payload else {
        ctx.say("No predict payload configured, skipping predict check");
        return Ok(());
    };
    // A gated promotion tests the deployment itself first.
    let regional = cfg
        .create_environment()
        .filter(|_| cfg.regional_environment);
    let (title, endpoint, url, streaming) = match owner {
        Kind::Model => (
            "Predict",
            "predict",
            cfg.endpoints
                .model_predict(owner_id, deployment_id, regional),
            payload
                .get("stream")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        ),
        Kind::Chain => (
            "Predict (run_remote)",
            "run_remote",
            cfg.endpoints
                .chain_run_remote(owner_id, deployment_id, regional),
            false,
        ),
    };
    ctx.group(title);
    // Before a gated promotion the evidence gets its share of the run's
    // budget, and the promotion the rest.
    let gated = cfg.gated_environment().is_some();
    let evidence = match gated {
        true => Phase::EvidenceBeforePromotion,
        false => Phase::Evidence,
    };
    let r = smoke_test_then(ctx, endpoint, &url, payload, streaming, evidence).await;
    ctx.end_group();
    r?;
    if gated {
        let candidate = Candidate {
            owner,
            owner_id,
            tested: deployment_id,
            endpoint,
            payload,
            streaming,
        };
        promote_after_predict(ctx, &candidate).await?;
    }
    Ok(())
}

/// Sends `payload` to `url` (`label` is `predict` or `run_remote`) and
/// records the answer; with `streaming` the answer is read as SSE tokens.
/// With evidence inputs the sample follows, by the run's end.
pub(crate) async fn smoke_test(
    ctx: &Ctx<'_>,
    label: &str,
    url: &str,
    payload: &Value,
    streaming: bool,
) -> Result<(), Failure> {
    smoke_test_then(ctx, label, url, payload, streaming, Phase::Evidence).await
}

/// The smoke test, then the evidence sample (with evidence inputs) by the
/// deadline the run's budget gives `evidence`.
async fn smoke_test_then(
    ctx: &Ctx<'_>,
    label: &str,
    url: &str,
    payload: &Value,
    streaming: bool,
    evidence: Phase,
) -> Result<(), Failure> {
    ctx.say(&format!(
        "POST {url}{}",
        if streaming { " (streaming)" } else { "" }
    ));
    ctx.state.lock().unwrap().predict_url = Some(url.to_string());
    // The smoke test's deadline, from the run's budget: predict-timeout
    // from now, cut to the run's end (which the message then names).
    let until = ctx.until(Phase::Smoke);
    {
        let api = ctx.api.within(Phase::Smoke, until);
        let ctx = &ctx.with_api(&api);
        // A cases file whose first case expects an answer that is not a
        // 2xx (a negative case) smoke-tests with that case and its status.
        match ctx.evidence().filter(|run| {
            run.settings
                .smoke_status
                .is_some_and(|s| !(200..300).contains(&s))
        }) {
            Some(run) => {
                let (text, status, took) =
                    crate::evidence::smoke_case(&run, label, url, until).await?;
                ctx.say(&format!(
                    "Predict OK in {:.2}s: HTTP {status}, as the first case {:?} expects",
                    took.as_secs_f64(),
                    run.settings.cases[0].name
                ));
                let shown: String = text.chars().take(PREDICT_RESPONSE_MAX_CHARS).collect();
                let mut st = ctx.state.lock().unwrap();
                st.predict_response = Some(shown);
                st.predict = Some(PredictStats {
                    total_secs: took.as_secs_f64(),
                    stream: None,
                });
            }
            None => one_request(ctx, label, url, payload, streaming, until).await?,
        }
    }
    // With evidence inputs: the sample and its verdict, within the
    // evidence's own deadline from the run's budget.
    let api = ctx.api_for(evidence);
    let ctx = &ctx.with_api(&api);
    match ctx.evidence() {
        Some(run) => {
            let run = crate::evidence::Run {
                until: ctx.until(evidence),
                ..run
            };
            let before_promotion = evidence == Phase::EvidenceBeforePromotion;
            crate::evidence::after_smoke(&run, label, url, before_promotion).await
        }
        None => Ok(()),
    }
}

/// The ordinary smoke test: `payload` once, by `until`, its answer
/// recorded.
async fn one_request(
    ctx: &Ctx<'_>,
    label: &str,
    url: &str,
    payload: &Value,
    streaming: bool,
    until: Instant,
) -> Result<(), Failure> {
    #[expect(clippy::disallowed_methods, reason = "times the smoke test's answer")]
    let started = Instant::now();
    let call = ctx.api.invoke(
        label,
        url,
        payload,
        streaming,
        PREDICT_RESPONSE_MAX_CHARS,
        until,
    );
    // Cut when the run's end, not predict-timeout, set the deadline: a
    // question for the budget, not a comparison of two clock readings
    // (which a few microseconds between them would always call "cut").
    let cut = until >= ctx.budget.run_end();
    let out_of_time = || match cut {
        true => Failure::Predict(anyhow!(
            "{label} did not finish within the run's budget (wait budget + predict-timeout, {} in all)",
            human(ctx.budget.run_length())
        )),
        false => Failure::Predict(anyhow!(
            "{label} did not finish within predict-timeout ({})",
            human(ctx.cfg.predict_timeout)
        )),
    };
    // The request's own timeout is cut to the same deadline: whichever
    // fires first, running out of time is said as such.
    #[expect(
        clippy::disallowed_methods,
        reason = "a timer on the smoke test's deadline, through Ctx::timer"
    )]
    let answer = match tokio::time::timeout_at(ctx.timer(until), call).await {
        Ok(Ok(a)) => a,
        Err(_) => return Err(out_of_time()),
        Ok(Err(_)) if ctx.left(until).is_zero() => return Err(out_of_time()),
        Ok(Err(e)) => return Err(Failure::Predict(e)),
    };
    let total = started.elapsed().as_secs_f64();
    let shown: String = answer
        .text
        .chars()
        .take(PREDICT_RESPONSE_MAX_CHARS)
        .collect();
    ctx.say(&format!("Predict OK in {total:.2}s"));
    let stream = answer.stream.map(|s| StreamStats {
        ttfb_secs: s.first_token.as_secs_f64(),
        tokens: s.tokens,
        tokens_per_sec: s.tokens as f64 / total.max(1e-9),
    });
    if let Some(s) = &stream {
        ctx.say(&format!(
            "  first token after {:.2}s, {} tokens, {:.1} tokens/s",
            s.ttfb_secs, s.tokens, s.tokens_per_sec
        ));
    }
    ctx.say(&format!(
        "  response: {}",
        shown.chars().take(SHOWN_RESPONSE_CHARS).collect::<String>()
    ));
    let mut st = ctx.state.lock().unwrap();
    st.predict_response = Some(shown);
    st.predict = Some(PredictStats {
        total_secs: total,
        stream,
    });
    Ok(())
}
