//! OpenAI-compatible client with per-request timing (scheduled start, start, first
//! byte, first token, every token, end), for `golive accept` and `golive load`.
//!
//! The streaming hot path costs one SSE decode and a few `memchr` scans per chunk:
//! no JSON DOM, no per-token allocation (token times go into a vector reserved once
//! per request). Only chunks that carry `usage`/`timings` (the last ones) are parsed
//! with serde, into borrowed structs. `collect` mode parses every chunk fully and
//! keeps the text, for the few requests whose answer is judged.

mod request;
mod stats;
mod stream;

pub(crate) use request::error_chain;
pub use request::OpenAiClient;
pub(crate) use stats::new_histogram;
pub use stats::{percentiles, LatencyStats, Slo};
#[cfg(feature = "fuzz")]
pub(crate) use stream::fuzz_scan_event;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

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
    /// The endpoint's path, e.g. `/v1/chat/completions`.
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
    /// The stable name, as in reports (`capacity`).
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
    /// The stable name, as in reports and CSV (`early_close`).
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
    /// The endpoint.
    pub api: Api,
    /// The JSON body, serialised once.
    pub body: Bytes,
    /// The body asks for `stream: true`.
    pub stream: bool,
    /// Parse every chunk and keep the answer text (slow path, for judged requests).
    pub collect: bool,
    /// Capacity to reserve for token times (the output limit).
    pub expected_tokens: usize,
    /// Sent as `X-Request-Id` and kept in the record, so that a failing request's server log
    /// line and trace can be found.
    pub request_id: Option<String>,
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
            request_id: None,
        }
    }
}

/// Token counts from the answer's `usage` (and its cached-token detail).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`.
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`.
    pub cached_tokens: Option<u64>,
}

/// llama.cpp's per-response `timings` (cache reuse and prefill time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTimings {
    /// Prompt tokens reused from the cache.
    pub cache_n: Option<u64>,
    /// Prompt tokens computed.
    pub prompt_n: Option<u64>,
    /// Prefill time, ms.
    pub prompt_ms: Option<f64>,
    /// Output tokens generated.
    pub predicted_n: Option<u64>,
    /// Generation time, ms.
    pub predicted_ms: Option<f64>,
}

/// Everything measured about one request. Times are microseconds since the client's epoch.
/// It serialises (one event line of `--format json`) without the answer's text and the
/// per-token arrivals, which the raw load results (`--csv`, shard files) keep.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RequestRecord {
    /// The request's number within its load (0 for a single request); picks the replica.
    pub index: u64,
    /// When it should have started (open loop: the schedule).
    pub scheduled_us: u64,
    /// When it was sent.
    pub start_us: u64,
    /// The first byte of the answer; `None`: none came.
    pub first_byte_us: Option<u64>,
    /// The first chunk that carried output; `None`: none came.
    pub first_token_us: Option<u64>,
    /// When the answer ended or the request failed.
    pub end_us: u64,
    /// Arrival of every chunk that carried output (content, reasoning or tool-call text),
    /// in microseconds after `start_us`.
    #[serde(skip)]
    pub token_us: Vec<u32>,
    /// The answer's HTTP status; `None`: no answer.
    pub http_status: Option<u16>,
    /// Why it failed; `None`: it succeeded.
    pub error: Option<ErrorKind>,
    /// Short, secret-free description of the error.
    pub error_detail: String,
    /// The `X-Request-Id` the request carried.
    pub request_id: Option<String>,
    /// Token counts of the answer.
    pub usage: Usage,
    /// llama.cpp's `timings`, when the server sent them.
    pub timings: Option<ServerTimings>,
    /// The answer's `finish_reason` (`stop`, `length`, `tool_calls`).
    pub finish_reason: Option<String>,
    /// `data: [DONE]` was received (streaming only).
    pub done_marker: bool,
    /// `data:` events of the stream (`[DONE]` not counted); 0 when not streamed.
    pub chunks: u64,
    /// The answer (collect mode and non-streaming requests only).
    #[serde(skip)]
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

/// Called with every finished request, as it finishes (progress, live line, events).
pub type OnRecord = std::sync::Arc<dyn Fn(&RequestRecord) + Send + Sync>;

/// What one stream event carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Content, reasoning or completion text.
    Text,
    /// A `tool_calls` delta.
    ToolCall,
}

impl RequestRecord {
    /// No error.
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }
    /// What the error (if any) is evidence of.
    pub fn error_class(&self) -> Option<ErrorClass> {
        self.error.map(|k| ErrorClass::of(k, self.http_status))
    }
    /// Time to the first output chunk, µs; `None`: none came.
    pub fn ttft_us(&self) -> Option<u64> {
        self.first_token_us.map(|t| t.saturating_sub(self.start_us))
    }
    /// Time to the first output chunk, ms; `None`: none came.
    pub fn ttft_ms(&self) -> Option<f64> {
        self.ttft_us().map(|t| t as f64 / 1000.0)
    }
    /// From sending to the end of the answer (or the failure), ms.
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
    /// Output tokens: the server's count, else the chunks that carried output.
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

/// Most bytes golive reads of one whole (not streamed) HTTP answer: an endless or huge
/// body ends at this size with an error instead of growing memory.
pub const MAX_BODY: usize = 16 << 20;

/// A body read whole up to `max` bytes; `cut` when the server sent more (the rest is
/// not read).
pub struct LimitedBody {
    /// The body read, at most `max` bytes.
    pub bytes: Vec<u8>,
    /// The server sent more than `max` bytes.
    pub cut: bool,
}

impl LimitedBody {
    /// The error to show for a cut body.
    pub fn too_large(max: usize) -> String {
        format!(
            "the answer is larger than {} MiB; not read further",
            max >> 20
        )
    }
}

/// Reads `resp`'s body, stopping after `max` bytes.
pub async fn read_limited(
    mut resp: reqwest::Response,
    max: usize,
) -> Result<LimitedBody, reqwest::Error> {
    let mut bytes = Vec::new();
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Ok(LimitedBody { bytes, cut: true });
    }
    while let Some(chunk) = resp.chunk().await? {
        if bytes.len() + chunk.len() > max {
            return Ok(LimitedBody { bytes, cut: true });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(LimitedBody { bytes, cut: false })
}
