//! `golive probe`: one tiny streamed generation (1-4 tokens) with a deadline, through
//! the timed client. An engine can be alive but stuck: `/health` answers 200 and the
//! running-requests gauge reads 0 while nothing is generated (vLLM #46811). Only a
//! request that must produce a token tells the two apart. Fit for a Kubernetes exec
//! probe, a cron check, and `golive watch`'s `stalled` trigger.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use crate::client::{Api, ErrorKind, OpenAiClient, RequestRecord, RequestSpec};
use crate::target::{Target, TargetOptions};

/// What `golive probe` runs: one server, a deadline, a token limit.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Base URL of the OpenAI-compatible server.
    pub url: String,
    /// The whole probe (model lookup, first token, end of the answer) must fit in this.
    pub deadline: Duration,
    /// Output limit of the probe request (1-4).
    pub max_tokens: u32,
    /// Credentials, model and timeouts of the server.
    pub target: TargetOptions,
}

/// Why a probe failed. The names are stable (JSON, exit-code documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeReason {
    /// No connection (refused, DNS, TLS).
    Connect,
    /// A non-2xx answer, or an error object in the stream.
    HttpStatus,
    /// The deadline passed before any token (headers or not).
    NoFirstToken,
    /// A token came, but the answer did not end before the deadline.
    StalledMidStream,
    /// The stream broke or was not the OpenAI format (closed early, malformed events).
    BrokenStream,
}

impl ProbeReason {
    /// The stable name, as in the JSON and `--help` (`no_first_token`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeReason::Connect => "connect",
            ProbeReason::HttpStatus => "http_status",
            ProbeReason::NoFirstToken => "no_first_token",
            ProbeReason::StalledMidStream => "stalled_mid_stream",
            ProbeReason::BrokenStream => "broken_stream",
        }
    }
}

/// What one probe saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeOutcome {
    /// Base URL of the probed server (no credentials).
    pub url: String,
    /// The model asked; `None`: it could not be learned from `/v1/models`.
    pub model: Option<String>,
    /// A token arrived and the answer ended within the deadline.
    pub ok: bool,
    /// Why it failed; `None` when `ok`.
    pub reason: Option<ProbeReason>,
    /// Status code of a non-2xx answer.
    pub http_status: Option<u16>,
    /// The deadline, in seconds.
    pub deadline_s: f64,
    /// Time to the first token, ms; `None`: no token came.
    pub ttft_ms: Option<f64>,
    /// Time from the start (model lookup included) to the end or the failure, ms.
    pub elapsed_ms: f64,
    /// Chunks that carried output.
    pub output_chunks: usize,
    /// One line, secret-free: what happened.
    pub detail: String,
}

impl ProbeOutcome {
    /// Did the server fail to produce tokens (as opposed to refusing the connection or
    /// answering with an error)? These are the stalled-engine reasons.
    pub fn stalled(&self) -> bool {
        matches!(
            self.reason,
            Some(ProbeReason::NoFirstToken | ProbeReason::StalledMidStream)
        )
    }
}

/// Runs one probe.
pub async fn run(opts: &ProbeOptions) -> crate::Result<ProbeOutcome> {
    crate::error::ensure_input!(
        (1..=4).contains(&opts.max_tokens),
        "--max-tokens must be 1 to 4: the probe asks for the smallest generation"
    );
    crate::error::ensure_input!(!opts.deadline.is_zero(), "--deadline-s must be above zero");
    let target = Target::new(&opts.url, &opts.target)?;
    let client = OpenAiClient::new(&target)?;
    Ok(probe(
        &client,
        target.model.as_deref(),
        opts.deadline,
        opts.max_tokens,
    )
    .await)
}

/// One probe with `client`: resolves the model from `/v1/models` when `model` is not
/// given (within the same deadline), then streams `max_tokens` tokens.
pub async fn probe(
    client: &OpenAiClient,
    model: Option<&str>,
    deadline: Duration,
    max_tokens: u32,
) -> ProbeOutcome {
    let started = Instant::now();
    let mut out = ProbeOutcome {
        url: client.base_url.clone(),
        model: model.map(str::to_string),
        ok: false,
        reason: None,
        http_status: None,
        deadline_s: deadline.as_secs_f64(),
        ttft_ms: None,
        elapsed_ms: 0.0,
        output_chunks: 0,
        detail: String::new(),
    };
    let model = match model {
        Some(m) => m.to_string(),
        None => match first_model(client, deadline).await {
            Ok(m) => {
                out.model = Some(m.clone());
                m
            }
            Err((reason, status, detail)) => {
                out.reason = Some(reason);
                out.http_status = status;
                out.detail = detail;
                out.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
                return out;
            }
        },
    };
    let body = json!({
        "model": model,
        "messages": [{"role": "user", "content": "Reply with the word OK."}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": true,
    });
    let mut timed = client.clone();
    timed.request_timeout = deadline.saturating_sub(started.elapsed());
    let rec = timed
        .send_now(&RequestSpec::from_json(Api::Chat, &body, false))
        .await;
    judge(&mut out, &rec);
    out.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    out
}

/// The probe's verdict on its one request.
fn judge(out: &mut ProbeOutcome, rec: &RequestRecord) {
    out.http_status = rec.http_status;
    out.ttft_ms = rec.ttft_ms();
    out.output_chunks = rec.token_us.len();
    let deadline = format!("{:.1} s", out.deadline_s);
    let (reason, detail) = match rec.error {
        None if rec.first_token_us.is_some() => {
            out.ok = true;
            out.detail = format!(
                "first token after {:.0} ms, answer complete after {:.0} ms",
                rec.ttft_ms().unwrap_or(0.0),
                rec.e2e_ms()
            );
            return;
        }
        None => (
            ProbeReason::NoFirstToken,
            format!(
                "the answer ended without any token ({} events, finish_reason {:?})",
                rec.chunks, rec.finish_reason
            ),
        ),
        Some(ErrorKind::Connect) => (ProbeReason::Connect, rec.error_detail.clone()),
        Some(ErrorKind::HttpStatus) => (ProbeReason::HttpStatus, rec.error_detail.clone()),
        Some(ErrorKind::Timeout) if rec.first_token_us.is_some() => (
            ProbeReason::StalledMidStream,
            format!(
                "first token after {:.0} ms, then no end of the answer within {deadline} ({} output chunks)",
                rec.ttft_ms().unwrap_or(0.0),
                rec.token_us.len()
            ),
        ),
        Some(ErrorKind::Timeout) => (
            ProbeReason::NoFirstToken,
            format!(
                "no token within {deadline}: {}{}",
                rec.error_detail,
                rec.http_status
                    .map(|s| format!(" (HTTP {s} headers came)"))
                    .unwrap_or_default()
            ),
        ),
        Some(ErrorKind::MalformedStream | ErrorKind::EarlyClose) => {
            (ProbeReason::BrokenStream, rec.error_detail.clone())
        }
    };
    out.reason = Some(reason);
    out.detail = detail;
}

/// The first model of `/v1/models`, or why there is none.
async fn first_model(
    client: &OpenAiClient,
    deadline: Duration,
) -> Result<String, (ProbeReason, Option<u16>, String)> {
    match client.get_text("/v1/models", deadline).await {
        Ok((status, body)) if (200..300).contains(&status) => {
            let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| {
                (
                    ProbeReason::BrokenStream,
                    Some(status),
                    format!("/v1/models is not JSON ({e}); pass --model"),
                )
            })?;
            v["data"][0]["id"].as_str().map(str::to_string).ok_or((
                ProbeReason::HttpStatus,
                Some(status),
                "/v1/models lists no model; pass --model".to_string(),
            ))
        }
        Ok((status, body)) => Err((
            ProbeReason::HttpStatus,
            Some(status),
            format!(
                "GET /v1/models answered HTTP {status}: {}",
                crate::text::truncate(body.trim(), 200)
            ),
        )),
        Err((ErrorKind::Connect, detail)) => Err((ProbeReason::Connect, None, detail)),
        Err((_, detail)) => Err((
            ProbeReason::NoFirstToken,
            None,
            format!("{detail} (the model lookup; pass --model to skip it)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> ProbeOutcome {
        ProbeOutcome {
            url: "http://x".into(),
            model: None,
            ok: false,
            reason: None,
            http_status: None,
            deadline_s: 2.0,
            ttft_ms: None,
            elapsed_ms: 0.0,
            output_chunks: 0,
            detail: String::new(),
        }
    }

    #[test]
    fn each_request_fate_has_its_reason() {
        let timed_out = |token: Option<u64>| RequestRecord {
            http_status: Some(200),
            error: Some(ErrorKind::Timeout),
            first_token_us: token,
            token_us: token.map(|t| vec![t as u32]).unwrap_or_default(),
            ..Default::default()
        };
        let mut o = outcome();
        judge(&mut o, &timed_out(None));
        assert_eq!(o.reason, Some(ProbeReason::NoFirstToken));
        assert!(o.stalled() && !o.ok);
        assert!(o.detail.contains("HTTP 200 headers came"), "{}", o.detail);
        let mut o = outcome();
        judge(&mut o, &timed_out(Some(5_000)));
        assert_eq!(o.reason, Some(ProbeReason::StalledMidStream));
        let mut o = outcome();
        judge(
            &mut o,
            &RequestRecord {
                http_status: Some(503),
                error: Some(ErrorKind::HttpStatus),
                ..Default::default()
            },
        );
        assert_eq!(o.reason, Some(ProbeReason::HttpStatus));
        assert_eq!(o.http_status, Some(503));
        assert!(!o.stalled());
        let mut o = outcome();
        judge(
            &mut o,
            &RequestRecord {
                first_token_us: Some(1_000),
                token_us: vec![1_000],
                end_us: 2_000,
                ..Default::default()
            },
        );
        assert!(o.ok && o.reason.is_none(), "{o:?}");
    }
}
