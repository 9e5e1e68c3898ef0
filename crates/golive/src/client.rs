//! OpenAI-compatible client with per-request timing (scheduled start, start, first
//! byte, first token, every token, end), for `golive accept` and `golive load`.
//!
//! The streaming hot path costs one SSE decode and a few `memchr` scans per chunk:
//! no JSON DOM, no per-token allocation (token times go into a vector reserved once
//! per request). Only chunks that carry `usage`/`timings` (the last ones) are parsed
//! with serde, into borrowed structs. `collect` mode parses every chunk fully and
//! keeps the text, for the few requests whose answer is judged.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use hdrhistogram::Histogram;
use memchr::memmem;
use serde::{Deserialize, Serialize};

use crate::report::Percentiles;
use crate::sse::{SseDecoder, SseEvent};
use crate::target::Target;

/// Which OpenAI endpoint a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `/v1/chat/completions`
    #[default]
    Chat,
    /// `/v1/completions`
    Completions,
}

impl Api {
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Completions => "/v1/completions",
        }
    }
}

/// Why a request failed. The names are stable (JSON, CSV, reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// No connection (refused, DNS, TLS, connect timeout).
    Connect,
    /// The request ran past its deadline (before or after the first byte).
    Timeout,
    /// A non-2xx answer, or an `error` object inside the stream.
    HttpStatus,
    /// The stream is not the OpenAI SSE format (bad event, wrong content type).
    MalformedStream,
    /// The connection ended before the answer was complete.
    EarlyClose,
}

/// What a failed request is evidence of. Only `Capacity` may fail a load step on
/// capacity (and so lead to `expand`): a transport race is not a lack of GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// Timeouts and the overload answers 429, 503, 504.
    Capacity,
    /// The connection: refused, reset, closed before the answer was complete, 502.
    Transport,
    /// Any other error answer or a malformed stream: the server (or its parser) is wrong.
    Server,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Capacity => "capacity",
            ErrorClass::Transport => "transport",
            ErrorClass::Server => "server",
        }
    }

    /// The class of a failed request from its error kind and HTTP status.
    pub fn of(kind: ErrorKind, http_status: Option<u16>) -> Self {
        match kind {
            ErrorKind::Timeout => ErrorClass::Capacity,
            ErrorKind::Connect | ErrorKind::EarlyClose => ErrorClass::Transport,
            ErrorKind::MalformedStream => ErrorClass::Server,
            ErrorKind::HttpStatus => match http_status {
                Some(429 | 503 | 504) => ErrorClass::Capacity,
                Some(502) => ErrorClass::Transport,
                _ => ErrorClass::Server,
            },
        }
    }
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::HttpStatus => "http_status",
            ErrorKind::MalformedStream => "malformed_stream",
            ErrorKind::EarlyClose => "early_close",
        }
    }
}

/// One request to send: endpoint and a pre-serialised JSON body.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub api: Api,
    pub body: Bytes,
    /// The body asks for `stream: true`.
    pub stream: bool,
    /// Parse every chunk and keep the answer text (slow path, for judged requests).
    pub collect: bool,
    /// Capacity to reserve for token times (the output limit).
    pub expected_tokens: usize,
}

impl RequestSpec {
    /// A request from a JSON body; `stream` is read from the body.
    pub fn from_json(api: Api, body: &serde_json::Value, collect: bool) -> Self {
        let stream = body["stream"].as_bool().unwrap_or(false);
        let expected_tokens = body["max_tokens"]
            .as_u64()
            .or_else(|| body["max_completion_tokens"].as_u64())
            .unwrap_or(64)
            .min(1 << 16) as usize;
        RequestSpec {
            api,
            body: Bytes::from(serde_json::to_vec(body).unwrap_or_default()),
            stream,
            collect,
            expected_tokens,
        }
    }
}

/// Token counts from the answer's `usage` (and its cached-token detail).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`.
    pub cached_tokens: Option<u64>,
}

/// llama.cpp's per-response `timings` (cache reuse and prefill time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTimings {
    pub cache_n: Option<u64>,
    pub prompt_n: Option<u64>,
    pub prompt_ms: Option<f64>,
    pub predicted_n: Option<u64>,
    pub predicted_ms: Option<f64>,
}

/// Everything measured about one request. Times are microseconds since the client's epoch.
#[derive(Debug, Clone, Default)]
pub struct RequestRecord {
    pub index: u64,
    pub scheduled_us: u64,
    pub start_us: u64,
    pub first_byte_us: Option<u64>,
    pub first_token_us: Option<u64>,
    pub end_us: u64,
    /// Arrival of every chunk that carried output (content, reasoning or tool-call text),
    /// in microseconds after `start_us`.
    pub token_us: Vec<u32>,
    pub http_status: Option<u16>,
    pub error: Option<ErrorKind>,
    /// Short, secret-free description of the error.
    pub error_detail: String,
    pub usage: Usage,
    pub timings: Option<ServerTimings>,
    pub finish_reason: Option<String>,
    /// `data: [DONE]` was received (streaming only).
    pub done_marker: bool,
    pub chunks: u64,
    /// The answer (collect mode and non-streaming requests only).
    pub text: String,
    /// Wall-clock time of the end, for "last successful request" records.
    pub ended_at: Option<DateTime<Utc>>,
    /// The first send failed on a pooled connection before anything came back, and the
    /// request was sent once more on a fresh connection (see [`OpenAiClient::send`]).
    pub reconnected: bool,
    /// Longest silence between two output deltas of the stream (µs); `None` with fewer
    /// than two. Agent clients time out on this, not on the whole request.
    pub longest_gap_us: Option<u32>,
    /// The longest gap fell inside a tool call (a tool-call delta on both sides): the
    /// tokens were generated but the tool parser held them back.
    pub longest_gap_in_tool_call: bool,
    /// Arrival of the first tool-call delta (µs after `start_us`).
    pub first_tool_call_us: Option<u32>,
}

/// What one stream event carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Content, reasoning or completion text.
    Text,
    /// A `tool_calls` delta.
    ToolCall,
}

impl RequestRecord {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }
    /// What the error (if any) is evidence of.
    pub fn error_class(&self) -> Option<ErrorClass> {
        self.error.map(|k| ErrorClass::of(k, self.http_status))
    }
    pub fn ttft_ms(&self) -> Option<f64> {
        self.first_token_us
            .map(|t| t.saturating_sub(self.start_us) as f64 / 1000.0)
    }
    pub fn e2e_ms(&self) -> f64 {
        self.end_us.saturating_sub(self.start_us) as f64 / 1000.0
    }
    /// Time from the scheduled start to the actual start (client-side queueing).
    pub fn schedule_lag_ms(&self) -> f64 {
        self.start_us.saturating_sub(self.scheduled_us) as f64 / 1000.0
    }
    /// Mean time per output token after the first (`None` with fewer than two).
    pub fn tpot_ms(&self) -> Option<f64> {
        let n = self.token_us.len();
        if n < 2 {
            return None;
        }
        let span = self.token_us[n - 1].saturating_sub(self.token_us[0]) as f64 / 1000.0;
        // Prefer the server's token count: one chunk may carry several tokens.
        let tokens = self
            .usage
            .completion_tokens
            .filter(|&t| t as usize >= n)
            .unwrap_or(n as u64);
        Some(span / (tokens - 1) as f64)
    }
    /// Inter-token latencies (between chunks that carried output), in microseconds.
    pub fn itl_us(&self) -> impl Iterator<Item = u32> + '_ {
        self.token_us.windows(2).map(|w| w[1].saturating_sub(w[0]))
    }
    /// The longest gap between output deltas, in ms.
    pub fn longest_gap_ms(&self) -> Option<f64> {
        self.longest_gap_us.map(|g| f64::from(g) / 1000.0)
    }
    pub fn output_tokens(&self) -> u64 {
        self.usage
            .completion_tokens
            .unwrap_or(self.token_us.len() as u64)
    }
    /// Tokens the server reports as served from its prefix cache (usage or llama.cpp timings).
    pub fn cached_tokens(&self) -> Option<u64> {
        self.usage
            .cached_tokens
            .or(self.timings.and_then(|t| t.cache_n))
    }

    fn fail(&mut self, kind: ErrorKind, detail: impl Into<String>) {
        if self.error.is_none() {
            self.error = Some(kind);
            self.error_detail = detail.into();
        }
    }
}

/// The timed client for one server.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    pub http: reqwest::Client,
    /// Keeps no idle connection: the one retry after a reuse race goes out on a new one.
    pub fresh: reqwest::Client,
    pub base_url: String,
    pub request_timeout: Duration,
    /// Zero point of every `*_us` time.
    pub epoch: Instant,
}

impl OpenAiClient {
    pub fn new(target: &Target) -> anyhow::Result<Self> {
        Ok(OpenAiClient {
            http: target.http_client()?,
            fresh: target.fresh_connection_client()?,
            base_url: target.base_url.clone(),
            request_timeout: target.request_timeout,
            epoch: Instant::now(),
        })
    }

    pub fn micros(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_micros() as u64
    }

    /// Sends one request now.
    pub async fn send_now(&self, spec: &RequestSpec) -> RequestRecord {
        self.send(spec, Instant::now(), 0).await
    }

    /// Sends one request; `scheduled` is when it should have started (rate mode).
    /// Never runs past `request_timeout`, whatever the server does.
    pub async fn send(&self, spec: &RequestSpec, scheduled: Instant, index: u64) -> RequestRecord {
        let start = Instant::now();
        let deadline = tokio::time::Instant::from_std(start + self.request_timeout);
        let mut rec = RequestRecord {
            index,
            scheduled_us: self.micros(scheduled),
            start_us: self.micros(start),
            token_us: Vec::with_capacity(if spec.stream { spec.expected_tokens } else { 0 }),
            ..Default::default()
        };
        let url = format!("{}{}", self.base_url, spec.api.path());
        let post = |client: &reqwest::Client| {
            client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(spec.body.clone())
        };
        let (sent, reconnected) = self.send_reconnecting(post, deadline).await;
        rec.reconnected = reconnected;
        match sent {
            Err(_) => rec.fail(
                ErrorKind::Timeout,
                "no response headers before the deadline",
            ),
            Ok(Err(e)) => {
                let (kind, detail) = classify_send_error(&e);
                if rec.reconnected {
                    rec.fail(kind, format!("on a fresh connection too: {detail}"));
                } else {
                    rec.fail(kind, detail);
                }
            }
            Ok(Ok(resp)) => self.read_response(resp, spec, deadline, &mut rec).await,
        }
        if rec.end_us == 0 || rec.error.is_some() {
            rec.end_us = self.micros(Instant::now());
        }
        rec.ended_at = Some(Utc::now());
        rec
    }

    async fn read_response(
        &self,
        mut resp: reqwest::Response,
        spec: &RequestSpec,
        deadline: tokio::time::Instant,
        rec: &mut RequestRecord,
    ) {
        let status = resp.status();
        rec.http_status = Some(status.as_u16());
        if !status.is_success() {
            let body = read_excerpt(&mut resp, deadline, 1024).await;
            rec.fail(
                ErrorKind::HttpStatus,
                format!("HTTP {}: {}", status.as_u16(), body.trim()),
            );
            return;
        }
        if spec.stream {
            let content_type = resp
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_ascii_lowercase();
            if !content_type.starts_with("text/event-stream") {
                let body = read_excerpt(&mut resp, deadline, 512).await;
                rec.fail(
                    ErrorKind::MalformedStream,
                    format!(
                        "expected text/event-stream, got {content_type:?}: {}",
                        body.trim()
                    ),
                );
                return;
            }
            self.read_stream(resp, spec, deadline, rec).await;
        } else {
            self.read_whole(resp, deadline, rec).await;
        }
    }

    async fn read_stream(
        &self,
        mut resp: reqwest::Response,
        spec: &RequestSpec,
        deadline: tokio::time::Instant,
        rec: &mut RequestRecord,
    ) {
        let mut decoder = SseDecoder::new();
        let mut last_output: Option<Output> = None;
        loop {
            let chunk = match tokio::time::timeout_at(deadline, resp.chunk()).await {
                Err(_) => {
                    rec.fail(
                        ErrorKind::Timeout,
                        format!(
                            "stream still open at the deadline after {} chunks",
                            rec.chunks
                        ),
                    );
                    return;
                }
                Ok(Err(e)) => {
                    let kind = if e.is_timeout() {
                        ErrorKind::Timeout
                    } else {
                        ErrorKind::EarlyClose
                    };
                    rec.fail(
                        kind,
                        format!(
                            "stream broke after {} chunks: {}",
                            rec.chunks,
                            error_chain(&e)
                        ),
                    );
                    return;
                }
                Ok(Ok(None)) => break,
                Ok(Ok(Some(bytes))) => bytes,
            };
            let now = Instant::now();
            if rec.first_byte_us.is_none() {
                rec.first_byte_us = Some(self.micros(now));
            }
            if let Err(e) = decoder.push(&chunk) {
                rec.fail(ErrorKind::MalformedStream, e.to_string());
                return;
            }
            while let Some(event) = decoder.next_event() {
                match event {
                    SseEvent::Done => {
                        rec.done_marker = true;
                    }
                    SseEvent::Data(data) => {
                        if rec.done_marker {
                            rec.fail(ErrorKind::MalformedStream, "data after [DONE]");
                            return;
                        }
                        rec.chunks += 1;
                        let outcome = if spec.collect {
                            scan_event_full(&data, rec)
                        } else {
                            scan_event_fast(&data, rec)
                        };
                        match outcome {
                            Ok(Some(kind)) => {
                                let t = self.micros(now);
                                if rec.first_token_us.is_none() {
                                    rec.first_token_us = Some(t);
                                }
                                let at = t.saturating_sub(rec.start_us).min(u32::MAX as u64) as u32;
                                // Stream silence, measured here once for every caller.
                                if let (Some(&prev), Some(prev_kind)) =
                                    (rec.token_us.last(), last_output)
                                {
                                    let gap = at.saturating_sub(prev);
                                    if rec.longest_gap_us.is_none_or(|g| gap > g) {
                                        rec.longest_gap_us = Some(gap);
                                        rec.longest_gap_in_tool_call = prev_kind
                                            == Output::ToolCall
                                            && kind == Output::ToolCall;
                                    }
                                }
                                if kind == Output::ToolCall && rec.first_tool_call_us.is_none() {
                                    rec.first_tool_call_us = Some(at);
                                }
                                last_output = Some(kind);
                                rec.token_us.push(at);
                            }
                            Ok(None) => {}
                            Err((kind, detail)) => {
                                rec.fail(kind, detail);
                                return;
                            }
                        }
                    }
                }
            }
            if rec.done_marker {
                // The answer is complete: its end is now. Then read the body to its end
                // (usually already buffered), so the connection goes back to the pool
                // instead of being closed; a server that keeps the stream open after
                // [DONE] costs at most a short wait.
                rec.end_us = self.micros(Instant::now());
                let drain = async { while let Ok(Some(_)) = resp.chunk().await {} };
                let limit = deadline.min(tokio::time::Instant::now() + Duration::from_millis(200));
                let _ = tokio::time::timeout_at(limit, drain).await;
                return;
            }
        }
        if !rec.done_marker {
            if rec.finish_reason.is_none() {
                let pending = decoder.pending_bytes();
                rec.fail(
                    ErrorKind::EarlyClose,
                    format!(
                        "stream ended without [DONE] or finish_reason after {} chunks ({pending} bytes of an unfinished event)",
                        rec.chunks
                    ),
                );
            } else if decoder.pending_bytes() > 0 {
                rec.fail(ErrorKind::MalformedStream, "stream ended inside an event");
            }
        }
    }

    async fn read_whole(
        &self,
        resp: reqwest::Response,
        deadline: tokio::time::Instant,
        rec: &mut RequestRecord,
    ) {
        let body = match tokio::time::timeout_at(deadline, resp.bytes()).await {
            Err(_) => {
                rec.fail(ErrorKind::Timeout, "body not complete before the deadline");
                return;
            }
            Ok(Err(e)) => {
                let kind = if e.is_timeout() {
                    ErrorKind::Timeout
                } else {
                    ErrorKind::EarlyClose
                };
                rec.fail(kind, format!("body broke: {}", error_chain(&e)));
                return;
            }
            Ok(Ok(b)) => b,
        };
        let now = self.micros(Instant::now());
        rec.first_byte_us = Some(now);
        let parsed: Result<WholeAnswer<'_>, _> = serde_json::from_slice(&body);
        match parsed {
            Err(e) => rec.fail(
                ErrorKind::MalformedStream,
                format!("answer is not the OpenAI JSON shape: {e}"),
            ),
            Ok(answer) => {
                apply_usage(rec, answer.usage.as_ref(), answer.timings.as_ref());
                if let Some(choice) = answer.choices.first() {
                    rec.finish_reason = choice.finish_reason.map(str::to_string);
                    if let Some(m) = &choice.message {
                        if let Some(c) = &m.content {
                            rec.text.push_str(c);
                        }
                        if let Some(tc) = &m.tool_calls {
                            rec.text.push_str(&tc.to_string());
                        }
                    }
                    if let Some(t) = &choice.text {
                        rec.text.push_str(t);
                    }
                } else if let Some(err) = answer.error {
                    rec.fail(ErrorKind::HttpStatus, format!("error object: {err}"));
                }
            }
        }
    }

    /// Sends the request built by `build` on the pooled client. When that send fails in a
    /// keep-alive race (the server closed the pooled connection as the request went out
    /// on it, so nothing came back and the server never answered it), sends it once more
    /// on a fresh connection; if that fails too, its error counts. The flag says whether
    /// the second send happened.
    pub(crate) async fn send_reconnecting(
        &self,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
        deadline: tokio::time::Instant,
    ) -> (
        Result<Result<reqwest::Response, reqwest::Error>, tokio::time::error::Elapsed>,
        bool,
    ) {
        let start = Instant::now();
        let sent = tokio::time::timeout_at(deadline, build(&self.http).send()).await;
        match &sent {
            Ok(Err(e)) if is_reuse_race(e, start.elapsed()) => (
                tokio::time::timeout_at(deadline, build(&self.fresh).send()).await,
                true,
            ),
            _ => (sent, false),
        }
    }

    /// GET `path` with a short timeout; `(status, body)`.
    pub async fn get_text(
        &self,
        path: &str,
        timeout: Duration,
    ) -> Result<(u16, String), (ErrorKind, String)> {
        let url = format!("{}{}", self.base_url, path);
        let deadline = tokio::time::Instant::now() + timeout;
        let fut = async {
            let resp = match self.send_reconnecting(|c| c.get(&url), deadline).await.0 {
                Ok(r) => r?,
                Err(_) => return Ok(None),
            };
            let status = resp.status().as_u16();
            let text = resp.text().await?;
            Ok::<_, reqwest::Error>(Some((status, text)))
        };
        match tokio::time::timeout_at(deadline, fut).await {
            Err(_) | Ok(Ok(None)) => Err((
                ErrorKind::Timeout,
                format!("GET {path}: no answer within {timeout:?}"),
            )),
            Ok(Err(e)) => Err(classify_send_error(&e)),
            Ok(Ok(Some(x))) => Ok(x),
        }
    }

    /// POST a JSON body to `path` with a short timeout; `(status, body)`.
    pub async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
        timeout: Duration,
    ) -> Result<(u16, String), (ErrorKind, String)> {
        let url = format!("{}{}", self.base_url, path);
        let deadline = tokio::time::Instant::now() + timeout;
        let fut = async {
            let resp = match self
                .send_reconnecting(|c| c.post(&url).json(body), deadline)
                .await
                .0
            {
                Ok(r) => r?,
                Err(_) => return Ok(None),
            };
            let status = resp.status().as_u16();
            let text = resp.text().await?;
            Ok::<_, reqwest::Error>(Some((status, text)))
        };
        match tokio::time::timeout_at(deadline, fut).await {
            Err(_) | Ok(Ok(None)) => Err((
                ErrorKind::Timeout,
                format!("POST {path}: no answer within {timeout:?}"),
            )),
            Ok(Err(e)) => Err(classify_send_error(&e)),
            Ok(Ok(Some(x))) => Ok(x),
        }
    }
}

/// The error and its causes on one line (reqwest hides the useful part in `source`).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        src = s.source();
    }
    parts.join(": ")
}

/// How soon after the start a failed send still counts as a reuse race: the server had
/// closed the connection already, so the failure comes at once (on loopback within
/// milliseconds). A connection that dies later, after the server took the request, is
/// a real early close and is not retried.
const REUSE_RACE_WINDOW: Duration = Duration::from_secs(5);

/// The send failed before any response byte on a connection that was open: not a
/// timeout, not a refused or failed connect.
fn is_reuse_race(e: &reqwest::Error, elapsed: Duration) -> bool {
    !e.is_timeout() && !e.is_connect() && !e.is_builder() && elapsed < REUSE_RACE_WINDOW
}

fn classify_send_error(e: &reqwest::Error) -> (ErrorKind, String) {
    let kind = if e.is_timeout() {
        ErrorKind::Timeout
    } else if e.is_connect() {
        ErrorKind::Connect
    } else {
        // The connection was taken and then dropped before a response: an early close.
        ErrorKind::EarlyClose
    };
    (kind, error_chain(e))
}

async fn read_excerpt(
    resp: &mut reqwest::Response,
    deadline: tokio::time::Instant,
    max: usize,
) -> String {
    let mut out = Vec::new();
    let limit = deadline.min(tokio::time::Instant::now() + Duration::from_secs(5));
    while out.len() < max {
        match tokio::time::timeout_at(limit, resp.chunk()).await {
            Ok(Ok(Some(b))) => out.extend_from_slice(&b),
            _ => break,
        }
    }
    out.truncate(max);
    String::from_utf8_lossy(&out).into_owned()
}

static CONTENT_KEY: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\"content\":"));
static TEXT_KEY: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\"text\":"));
static REASONING_KEY: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\"reasoning"));
static TOOL_CALLS_KEY: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\"tool_calls\":["));
static USAGE_KEY: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\"usage\":{"));
static TIMINGS_KEY: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\"timings\":{"));
static FINISH_KEY: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\"finish_reason\":\""));
static ERROR_KEY: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\"error\":"));

fn trim_ascii(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end]
}

/// True when the value after `key` at `pos` is a non-empty JSON string.
fn non_empty_string_after(data: &[u8], pos: usize, key_len: usize) -> bool {
    let rest = &data[pos + key_len..];
    let rest = &rest[rest
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(rest.len())..];
    rest.len() >= 2 && rest[0] == b'"' && rest[1] != b'"'
}

/// Hot path: does this chunk carry output? Scans bytes; parses JSON only for the
/// rare chunks with `usage`/`timings`/`error`.
fn scan_event_fast(
    data: &[u8],
    rec: &mut RequestRecord,
) -> Result<Option<Output>, (ErrorKind, String)> {
    let body = trim_ascii(data);
    if body.first() != Some(&b'{') || body.last() != Some(&b'}') {
        return Err((
            ErrorKind::MalformedStream,
            format!("event is not a JSON object: {}", excerpt(body)),
        ));
    }
    if USAGE_KEY.find(body).is_some()
        || TIMINGS_KEY.find(body).is_some()
        || ERROR_KEY.find(body).is_some()
    {
        // Rare: parse it properly (also validates it).
        return scan_event_full(data, rec);
    }
    if let Some(p) = FINISH_KEY.find(body) {
        let rest = &body[p + FINISH_KEY.needle().len()..];
        if let Some(end) = memchr::memchr(b'"', rest) {
            rec.finish_reason = Some(String::from_utf8_lossy(&rest[..end]).into_owned());
        }
    }
    if TOOL_CALLS_KEY.find(body).is_some() {
        return Ok(Some(Output::ToolCall));
    }
    let has_text = CONTENT_KEY
        .find(body)
        .is_some_and(|p| non_empty_string_after(body, p, CONTENT_KEY.needle().len()))
        || TEXT_KEY
            .find(body)
            .is_some_and(|p| non_empty_string_after(body, p, TEXT_KEY.needle().len()))
        || REASONING_KEY.find(body).is_some_and(|p| {
            // `"reasoning":"..."` or `"reasoning_content":"..."`
            let rest = &body[p + REASONING_KEY.needle().len()..];
            let colon = memchr::memchr(b':', rest).unwrap_or(0);
            non_empty_string_after(rest, colon, 1)
        });
    Ok(has_text.then_some(Output::Text))
}

#[derive(Deserialize)]
struct ChunkUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
}
#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}
#[derive(Deserialize)]
struct ChunkTimings {
    cache_n: Option<u64>,
    prompt_n: Option<u64>,
    prompt_ms: Option<f64>,
    predicted_n: Option<u64>,
    predicted_ms: Option<f64>,
}
#[derive(Deserialize)]
struct StreamChunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<StreamChoice<'a>>,
    usage: Option<ChunkUsage>,
    timings: Option<ChunkTimings>,
    error: Option<serde_json::Value>,
}
#[derive(Deserialize)]
struct StreamChoice<'a> {
    #[serde(borrow)]
    delta: Option<Delta<'a>>,
    /// Completions API.
    #[serde(borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
    finish_reason: Option<&'a str>,
}
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    reasoning: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    reasoning_content: Option<std::borrow::Cow<'a, str>>,
    tool_calls: Option<serde_json::Value>,
}
#[derive(Deserialize)]
struct WholeAnswer<'a> {
    #[serde(default, borrow)]
    choices: Vec<WholeChoice<'a>>,
    usage: Option<ChunkUsage>,
    timings: Option<ChunkTimings>,
    error: Option<serde_json::Value>,
}
#[derive(Deserialize)]
struct WholeChoice<'a> {
    #[serde(borrow)]
    message: Option<WholeMessage<'a>>,
    #[serde(borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
    finish_reason: Option<&'a str>,
}
#[derive(Deserialize)]
struct WholeMessage<'a> {
    #[serde(borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
    tool_calls: Option<serde_json::Value>,
}

fn apply_usage(
    rec: &mut RequestRecord,
    usage: Option<&ChunkUsage>,
    timings: Option<&ChunkTimings>,
) {
    if let Some(u) = usage {
        rec.usage.prompt_tokens = u.prompt_tokens.or(rec.usage.prompt_tokens);
        rec.usage.completion_tokens = u.completion_tokens.or(rec.usage.completion_tokens);
        if let Some(c) = u
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
        {
            rec.usage.cached_tokens = Some(c);
        }
    }
    if let Some(t) = timings {
        rec.timings = Some(ServerTimings {
            cache_n: t.cache_n,
            prompt_n: t.prompt_n,
            prompt_ms: t.prompt_ms,
            predicted_n: t.predicted_n,
            predicted_ms: t.predicted_ms,
        });
    }
}

/// Fuzz entry: both event scanners on one `data:` payload. They may disagree on crafted
/// chunks (the fast one looks for output keys without parsing), but neither may panic.
#[doc(hidden)]
pub fn fuzz_scan_event(data: &[u8]) {
    let _ = scan_event_fast(data, &mut RequestRecord::default());
    let _ = scan_event_full(data, &mut RequestRecord::default());
}

/// Slow path: full (borrowed) parse of one chunk; keeps the text in collect mode.
fn scan_event_full(
    data: &[u8],
    rec: &mut RequestRecord,
) -> Result<Option<Output>, (ErrorKind, String)> {
    let chunk: StreamChunk<'_> = serde_json::from_slice(data).map_err(|e| {
        (
            ErrorKind::MalformedStream,
            format!("event is not valid JSON ({e}): {}", excerpt(data)),
        )
    })?;
    if let Some(err) = &chunk.error {
        return Err((
            ErrorKind::HttpStatus,
            format!(
                "error event in the stream: {}",
                excerpt(err.to_string().as_bytes())
            ),
        ));
    }
    apply_usage(rec, chunk.usage.as_ref(), chunk.timings.as_ref());
    let mut has_output = false;
    let mut tool_call = false;
    for choice in &chunk.choices {
        if let Some(f) = choice.finish_reason {
            rec.finish_reason = Some(f.to_string());
        }
        if let Some(t) = choice.text.as_deref().filter(|t| !t.is_empty()) {
            has_output = true;
            rec.text.push_str(t);
        }
        if let Some(d) = &choice.delta {
            if let Some(c) = d.content.as_deref().filter(|t| !t.is_empty()) {
                has_output = true;
                rec.text.push_str(c);
            }
            if d.reasoning.as_deref().is_some_and(|t| !t.is_empty())
                || d.reasoning_content
                    .as_deref()
                    .is_some_and(|t| !t.is_empty())
            {
                has_output = true;
            }
            if let Some(tc) = &d.tool_calls {
                tool_call = true;
                rec.text.push_str(&tc.to_string());
            }
        }
    }
    Ok(if tool_call {
        Some(Output::ToolCall)
    } else {
        has_output.then_some(Output::Text)
    })
}

fn excerpt(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(200)]);
    s.into_owned()
}

/// Latency statistics over many requests (histograms in microseconds).
#[derive(Debug, Clone)]
pub struct LatencyStats {
    pub ttft: Histogram<u64>,
    pub itl: Histogram<u64>,
    pub tpot: Histogram<u64>,
    pub e2e: Histogram<u64>,
    pub requests: u64,
    pub errors: u64,
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Failed requests by what they are evidence of (`capacity`, `transport`, `server`).
    pub errors_by_class: BTreeMap<String, u64>,
    /// HTTP status of every failed request that got one.
    pub errors_by_status: BTreeMap<u16, u64>,
    /// Requests sent a second time on a fresh connection after a reuse race (not errors).
    pub reconnects: u64,
    /// First error's detail per kind (evidence).
    pub error_examples: BTreeMap<String, String>,
    pub output_tokens: u64,
    pub chunks: u64,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub last_success_at: Option<DateTime<Utc>>,
    /// Longest gap between output deltas, one value per streamed request (µs).
    pub stream_gap: Histogram<u64>,
    /// The longest of those gaps that fell inside a tool call (µs), if any did.
    pub tool_call_gap_max_us: Option<u64>,
    /// Time to the first tool-call delta, per request that streamed a tool call (µs).
    pub first_tool_call: Histogram<u64>,
}

impl Default for LatencyStats {
    fn default() -> Self {
        // 1 µs .. 1 h at 3 significant figures; saturating_record clamps outliers.
        let h = || new_histogram();
        LatencyStats {
            ttft: h(),
            itl: h(),
            tpot: h(),
            e2e: h(),
            requests: 0,
            errors: 0,
            errors_by_kind: BTreeMap::new(),
            errors_by_class: BTreeMap::new(),
            errors_by_status: BTreeMap::new(),
            reconnects: 0,
            error_examples: BTreeMap::new(),
            output_tokens: 0,
            chunks: 0,
            prompt_tokens: 0,
            cached_tokens: 0,
            last_success_at: None,
            stream_gap: h(),
            tool_call_gap_max_us: None,
            first_tool_call: h(),
        }
    }
}

impl LatencyStats {
    pub fn record(&mut self, r: &RequestRecord) {
        self.requests += 1;
        self.reconnects += u64::from(r.reconnected);
        if let Some(kind) = r.error {
            self.errors += 1;
            *self
                .errors_by_class
                .entry(ErrorClass::of(kind, r.http_status).as_str().to_string())
                .or_default() += 1;
            if let Some(status) = r.http_status {
                *self.errors_by_status.entry(status).or_default() += 1;
            }
            *self
                .errors_by_kind
                .entry(kind.as_str().to_string())
                .or_default() += 1;
            self.error_examples
                .entry(kind.as_str().to_string())
                .or_insert_with(|| r.error_detail.clone());
            return;
        }
        if let Some(t) = r.first_token_us {
            self.ttft
                .saturating_record(t.saturating_sub(r.start_us).max(1));
        }
        for itl in r.itl_us() {
            self.itl.saturating_record(u64::from(itl).max(1));
        }
        if let Some(tpot) = r.tpot_ms() {
            self.tpot.saturating_record(((tpot * 1000.0) as u64).max(1));
        }
        self.e2e
            .saturating_record(r.end_us.saturating_sub(r.start_us).max(1));
        if let Some(gap) = r.longest_gap_us {
            self.stream_gap.saturating_record(u64::from(gap).max(1));
            if r.longest_gap_in_tool_call {
                self.tool_call_gap_max_us = self.tool_call_gap_max_us.max(Some(u64::from(gap)));
            }
        }
        if let Some(t) = r.first_tool_call_us {
            self.first_tool_call.saturating_record(u64::from(t).max(1));
        }
        self.output_tokens += r.output_tokens();
        self.chunks += r.chunks;
        self.prompt_tokens += r.usage.prompt_tokens.unwrap_or(0);
        self.cached_tokens += r.cached_tokens().unwrap_or(0);
        if r.ended_at > self.last_success_at {
            self.last_success_at = r.ended_at;
        }
    }

    /// Failed requests of one class.
    pub fn errors_of(&self, class: ErrorClass) -> u64 {
        self.errors_by_class
            .get(class.as_str())
            .copied()
            .unwrap_or(0)
    }

    pub fn error_rate(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.errors as f64 / self.requests as f64
        }
    }

    pub fn ttft_ms(&self) -> Percentiles {
        percentiles(&self.ttft)
    }
    pub fn itl_ms(&self) -> Percentiles {
        percentiles(&self.itl)
    }
    pub fn tpot_ms(&self) -> Percentiles {
        percentiles(&self.tpot)
    }
    pub fn e2e_ms(&self) -> Percentiles {
        percentiles(&self.e2e)
    }
    /// Percentiles of the per-request longest gap between output deltas.
    pub fn stream_gap_ms(&self) -> Percentiles {
        percentiles(&self.stream_gap)
    }
    pub fn first_tool_call_ms(&self) -> Percentiles {
        percentiles(&self.first_tool_call)
    }
    /// The longest gap inside a tool call, in ms.
    pub fn tool_call_gap_max_ms(&self) -> Option<f64> {
        self.tool_call_gap_max_us.map(|us| us as f64 / 1000.0)
    }
}

/// A microsecond histogram from 1 µs to one hour, 3 significant figures.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("static bounds are valid")
}

/// Percentiles (ms) of a microsecond histogram.
pub fn percentiles(h: &Histogram<u64>) -> Percentiles {
    if h.is_empty() {
        return Percentiles::default();
    }
    let ms = |us: u64| us as f64 / 1000.0;
    Percentiles {
        count: h.len(),
        mean: h.mean() / 1000.0,
        p50: ms(h.value_at_quantile(0.50)),
        p90: ms(h.value_at_quantile(0.90)),
        p95: ms(h.value_at_quantile(0.95)),
        p99: ms(h.value_at_quantile(0.99)),
        max: ms(h.max()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_scan_finds_output_and_finish_without_parsing() {
        let mut rec = RequestRecord::default();
        let chunk =
            br#"{"id":"x","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#;
        assert_eq!(scan_event_fast(chunk, &mut rec), Ok(Some(Output::Text)));
        let role = br#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#;
        assert_eq!(scan_event_fast(role, &mut rec), Ok(None));
        let stop = br#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#;
        assert_eq!(scan_event_fast(stop, &mut rec), Ok(None));
        assert_eq!(rec.finish_reason.as_deref(), Some("stop"));
        let usage = br#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}},"timings":{"cache_n":8,"prompt_n":4,"prompt_ms":1.5}}"#;
        assert_eq!(scan_event_fast(usage, &mut rec), Ok(None));
        assert_eq!(rec.usage.prompt_tokens, Some(12));
        assert_eq!(rec.cached_tokens(), Some(8));
        assert_eq!(rec.timings.unwrap().prompt_ms, Some(1.5));
        let reasoning = br#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#;
        assert_eq!(scan_event_fast(reasoning, &mut rec), Ok(Some(Output::Text)));
        let completion = br#"{"choices":[{"text":" a","index":0}]}"#;
        assert_eq!(
            scan_event_fast(completion, &mut rec),
            Ok(Some(Output::Text))
        );
    }

    #[test]
    fn tool_call_deltas_are_told_apart_from_text() {
        let mut rec = RequestRecord::default();
        let call = br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#;
        assert_eq!(scan_event_fast(call, &mut rec), Ok(Some(Output::ToolCall)));
        assert_eq!(scan_event_full(call, &mut rec), Ok(Some(Output::ToolCall)));
        let text = br#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#;
        assert_eq!(scan_event_full(text, &mut rec), Ok(Some(Output::Text)));
    }

    #[test]
    fn stream_gaps_are_summarised_per_request() {
        let gap = |us: u32, in_tool: bool, first_tool: Option<u32>| RequestRecord {
            start_us: 0,
            first_token_us: Some(10),
            token_us: vec![10, 10 + us],
            end_us: u64::from(us) + 20,
            longest_gap_us: Some(us),
            longest_gap_in_tool_call: in_tool,
            first_tool_call_us: first_tool,
            ..Default::default()
        };
        let mut s = LatencyStats::default();
        s.record(&gap(2_000_000, false, None));
        s.record(&gap(500_000, true, Some(40_000)));
        s.record(&gap(30_000, false, None));
        let p = s.stream_gap_ms();
        assert_eq!(p.count, 3);
        assert!((p.max - 2000.0).abs() < 2.0, "{p:?}");
        // Only the gap inside a tool call counts as the parser's.
        assert_eq!(s.tool_call_gap_max_ms(), Some(500.0));
        assert_eq!(s.first_tool_call_ms().count, 1);
    }

    #[test]
    fn malformed_and_error_events_are_classified() {
        let mut rec = RequestRecord::default();
        let bad = scan_event_fast(b"not json", &mut rec).unwrap_err();
        assert_eq!(bad.0, ErrorKind::MalformedStream);
        let err = scan_event_fast(br#"{"error":{"message":"boom"}}"#, &mut rec).unwrap_err();
        assert_eq!(err.0, ErrorKind::HttpStatus);
        let cut =
            scan_event_full(br#"{"choices":[{"delta":{"content":"x"}"#, &mut rec).unwrap_err();
        assert_eq!(cut.0, ErrorKind::MalformedStream);
    }

    #[test]
    fn full_scan_collects_text() {
        let mut rec = RequestRecord::default();
        assert_eq!(
            scan_event_full(br#"{"choices":[{"delta":{"content":"a\"b"}}]}"#, &mut rec),
            Ok(Some(Output::Text))
        );
        assert_eq!(rec.text, "a\"b");
    }

    #[test]
    fn stats_from_token_times() {
        let rec = RequestRecord {
            start_us: 1000,
            first_token_us: Some(11_000),
            token_us: vec![10_000, 12_000, 14_000, 16_000],
            end_us: 18_000,
            chunks: 4,
            ..Default::default()
        };
        assert_eq!(rec.ttft_ms(), Some(10.0));
        assert_eq!(rec.tpot_ms(), Some(2.0));
        assert_eq!(rec.e2e_ms(), 17.0);
        let mut s = LatencyStats::default();
        s.record(&rec);
        let itl = s.itl_ms();
        assert_eq!(itl.count, 3);
        assert!((itl.p50 - 2.0).abs() < 0.01, "{itl:?}");
        let mut failed = rec.clone();
        failed.error = Some(ErrorKind::EarlyClose);
        s.record(&failed);
        assert_eq!(s.errors_by_kind.get("early_close"), Some(&1));
        assert_eq!(s.error_rate(), 0.5);
    }
}
