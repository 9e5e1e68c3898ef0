//! The timed client itself: sending a request (with the one keep-alive-race retry),
//! reading the response head, and the short GET/POST helpers; send errors classified.

use std::time::{Duration, Instant};

use chrono::Utc;

use super::{ErrorKind, RequestRecord, RequestSpec};
use crate::target::Target;

/// The timed client for one server.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    /// The HTTP client; keeps idle connections for `--pool-idle-timeout`.
    pub http: reqwest::Client,
    /// Keeps no idle connection: the one retry after a reuse race goes out on a new one.
    pub fresh: reqwest::Client,
    /// The server's base URL, e.g. `http://127.0.0.1:8000`.
    pub base_url: String,
    /// Further replicas of the same server (`load --url A --url B`): requests go to
    /// `base_url` and these in turn, by request index.
    pub spread: Vec<String>,
    /// Deadline of one request, end to end (`--request-timeout`).
    pub request_timeout: Duration,
    /// Zero point of every `*_us` time.
    pub epoch: Instant,
}

impl OpenAiClient {
    /// A client for `target`, its clock started now.
    pub fn new(target: &Target) -> anyhow::Result<Self> {
        Ok(OpenAiClient {
            http: target.http_client()?,
            fresh: target.fresh_connection_client()?,
            base_url: target.base_url.clone(),
            spread: Vec::new(),
            request_timeout: target.request_timeout,
            epoch: Instant::now(),
        })
    }

    /// The same client, sending request `i` to the `i mod n`-th of `base_url` and `more` (base
    /// URLs of further replicas, reached with the same key and TLS settings).
    pub fn spread_over(mut self, more: Vec<String>) -> Self {
        self.spread = more;
        self
    }

    /// The base URL request `index` goes to.
    pub fn base_for(&self, index: u64) -> &str {
        let n = 1 + self.spread.len() as u64;
        match (index % n) as usize {
            0 => &self.base_url,
            k => &self.spread[k - 1],
        }
    }

    /// Microseconds from [`OpenAiClient::epoch`] to `t`.
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
            request_id: spec.request_id.clone(),
            start_us: self.micros(start),
            token_us: Vec::with_capacity(if spec.stream { spec.expected_tokens } else { 0 }),
            ..Default::default()
        };
        let url = format!("{}{}", self.base_for(index), spec.api.path());
        let post = |client: &reqwest::Client| {
            let post = client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json");
            match &spec.request_id {
                Some(id) => post.header("X-Request-Id", id.as_str()),
                None => post,
            }
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
        self.short_exchange("GET", path, timeout, |c, url| c.get(url))
            .await
    }

    /// POST a JSON body to `path` with a short timeout; `(status, body)`.
    pub async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
        timeout: Duration,
    ) -> Result<(u16, String), (ErrorKind, String)> {
        self.short_exchange("POST", path, timeout, |c, url| c.post(url).json(body))
            .await
    }

    /// One short request (`build` makes it for the URL of `path`), sent with the
    /// keep-alive-race retry and read whole within `timeout`; `(status, body)`.
    async fn short_exchange(
        &self,
        method: &str,
        path: &str,
        timeout: Duration,
        build: impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
    ) -> Result<(u16, String), (ErrorKind, String)> {
        let url = format!("{}{}", self.base_url, path);
        let deadline = tokio::time::Instant::now() + timeout;
        let fut = async {
            let resp = match self.send_reconnecting(|c| build(c, &url), deadline).await.0 {
                Ok(r) => r?,
                Err(_) => return Ok(None),
            };
            let status = resp.status().as_u16();
            let body = super::read_limited(resp, super::MAX_BODY).await?;
            Ok::<_, reqwest::Error>(Some((status, body)))
        };
        match tokio::time::timeout_at(deadline, fut).await {
            Err(_) | Ok(Ok(None)) => Err((
                ErrorKind::Timeout,
                format!("{method} {path}: no answer within {timeout:?}"),
            )),
            Ok(Err(e)) => Err(classify_send_error(&e)),
            Ok(Ok(Some((_, body)))) if body.cut => Err((
                ErrorKind::MalformedStream,
                format!(
                    "{method} {path}: {}",
                    super::LimitedBody::too_large(super::MAX_BODY)
                ),
            )),
            Ok(Ok(Some((status, body)))) => {
                Ok((status, String::from_utf8_lossy(&body.bytes).into_owned()))
            }
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
