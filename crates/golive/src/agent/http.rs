//! Sending one chat-completions request (streamed or not) and turning whatever comes
//! back — an answer, an HTTP error, a timeout, a broken connection — into an [`Outcome`].
//! The request goes through the load's client ([`OpenAiClient::send_reconnecting`]), so
//! agent stage, `--agent-mix` and load share one connection pool and one keep-alive rule.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;

use super::stream::Assembler;
use super::validate::{mentions_parser, parse_completion, quote, Outcome, Problem, ProblemCode};
use crate::client::OpenAiClient;
use crate::report::Owner;
use crate::sse::SseDecoder;

/// What one request produced.
#[derive(Debug, Clone)]
pub struct Sent {
    /// What came back.
    pub outcome: Outcome,
    /// From sending to the end of the answer, ms.
    pub duration_ms: u64,
    /// The first send failed at once on a reused connection and was sent again.
    pub retried_connection: bool,
}

/// Sends `body` to `url` (`.../v1/chat/completions`); gives up after `deadline`.
pub async fn send(client: &OpenAiClient, url: &str, body: &Value, deadline: Duration) -> Sent {
    let started = Instant::now();
    let streamed = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let ms = |s: Instant| s.elapsed().as_millis() as u64;
    let mut retried = false;
    let fut = async {
        // A pooled keep-alive connection the server had just closed fails at once; the
        // client sends once more on a fresh connection to tell that race apart.
        let (attempt, reconnected) = client
            .send_reconnecting(
                |c| c.post(url).json(body).timeout(deadline),
                tokio::time::Instant::now() + deadline,
            )
            .await;
        retried = reconnected;
        let resp = match attempt {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return (transport(&e, deadline), None),
            Err(_) => {
                return (
                    Outcome::Timeout {
                        after_ms: ms(started),
                    },
                    None,
                )
            }
        };
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let text = crate::client::read_limited(resp, 64 << 10)
                .await
                .map(|b| String::from_utf8_lossy(&b.bytes).into_owned())
                .unwrap_or_default();
            return (http_error(status, &text), None);
        }
        if streamed {
            (read_stream(resp, status, deadline).await, None)
        } else {
            let max = crate::client::MAX_BODY;
            match crate::client::read_limited(resp, max)
                .await
                .map(|b| (b.cut, b.bytes))
            {
                Err(e) => (transport(&e, deadline), None),
                Ok((true, _)) => (
                    Outcome::Transport {
                        connect: false,
                        error: crate::client::LimitedBody::too_large(max),
                    },
                    None,
                ),
                Ok((false, bytes)) => match serde_json::from_slice::<Value>(&bytes) {
                    Ok(json) => {
                        let (reply, envelope) = parse_completion(&json);
                        (
                            Outcome::Reply {
                                status,
                                reply,
                                envelope,
                            },
                            Some(json),
                        )
                    }
                    Err(e) => (
                        Outcome::Reply {
                            status,
                            reply: Default::default(),
                            envelope: vec![Problem::fail(
                                Owner::Server,
                                ProblemCode::BodyNotJson,
                                format!(
                                    "HTTP {status} body is not JSON ({e}): {}",
                                    quote(&String::from_utf8_lossy(&bytes), 160)
                                ),
                            )],
                        },
                        None,
                    ),
                },
            }
        }
    };
    // The client's own timeout covers the body too; this outer one is a safety net.
    // (The parsed body beside the outcome is no longer kept: nothing read it.)
    let (outcome, _body) = match tokio::time::timeout(deadline + Duration::from_secs(1), fut).await
    {
        Ok(r) => r,
        Err(_) => (
            Outcome::Timeout {
                after_ms: ms(started),
            },
            None,
        ),
    };
    Sent {
        outcome,
        duration_ms: ms(started),
        retried_connection: retried,
    }
}

fn transport(e: &reqwest::Error, deadline: Duration) -> Outcome {
    if e.is_timeout() {
        return Outcome::Timeout {
            after_ms: deadline.as_millis() as u64,
        };
    }
    Outcome::Transport {
        connect: e.is_connect(),
        error: error_chain(e),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// An error answer: keeps the API error message when the body is JSON.
pub fn http_error(status: u16, text: &str) -> Outcome {
    let json: Option<Value> = serde_json::from_str(text).ok();
    let message = json.as_ref().and_then(|j| {
        [
            "/error/message",
            "/message",
            "/detail",
            "/error",
            "/detail/0/msg",
        ]
        .iter()
        .find_map(|p| j.pointer(p).and_then(Value::as_str))
        .map(str::to_string)
    });
    Outcome::HttpError {
        status,
        message,
        body_excerpt: text.chars().take(300).collect(),
        json_body: json.is_some(),
    }
}

async fn read_stream(resp: reqwest::Response, status: u16, deadline: Duration) -> Outcome {
    let mut decoder = SseDecoder::new();
    let mut asm = Assembler::new();
    let mut bytes = resp.bytes_stream();
    let mut cut = None;
    while let Some(chunk) = bytes.next().await {
        match chunk {
            Ok(b) => {
                if let Err(e) = decoder.push(&b) {
                    cut = Some(e.to_string());
                    break;
                }
                while let Some(event) = decoder.next_event() {
                    asm.push(&event);
                }
            }
            Err(e) => {
                cut = Some(if e.is_timeout() {
                    format!("no end of stream within {} ms", deadline.as_millis())
                } else {
                    error_chain(&e)
                });
                break;
            }
        }
    }
    let (reply, envelope) = asm.finish(cut, decoder.pending_bytes());
    Outcome::Reply {
        status,
        reply,
        envelope,
    }
}

/// Follows the server's log file (`--server-log`) so that parser exceptions printed
/// while a request ran can be attached to that request.
#[derive(Debug)]
pub struct LogWatch {
    path: PathBuf,
    offset: u64,
}

impl LogWatch {
    /// Watches the server log at `path`, from its current end.
    pub fn new(path: PathBuf) -> Self {
        let offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        LogWatch { path, offset }
    }

    /// Lines written since the last call that read like parser exceptions (at most 3).
    pub fn parser_lines(&mut self) -> Vec<String> {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            self.offset = 0; // rotated or truncated
        }
        // Read at most the last 1 MiB of new text.
        let start = self.offset.max(len.saturating_sub(1 << 20));
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(start)).is_err() || f.read_to_end(&mut buf).is_err() {
            return Vec::new();
        }
        self.offset = len;
        String::from_utf8_lossy(&buf)
            .lines()
            .filter(|l| mentions_parser(l))
            .take(3)
            .map(|l| l.chars().take(300).collect())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_error_message_is_kept() {
        let o = http_error(
            400,
            r#"{"error":{"code":400,"message":"bad schema","type":"invalid_request_error"}}"#,
        );
        match o {
            Outcome::HttpError {
                message, json_body, ..
            } => {
                assert_eq!(message.as_deref(), Some("bad schema"));
                assert!(json_body);
            }
            other => panic!("{other:?}"),
        }
        match http_error(502, "<html>Bad Gateway</html>") {
            Outcome::HttpError {
                message, json_body, ..
            } => assert!(message.is_none() && !json_body),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn log_watch_sees_only_new_parser_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        std::fs::write(
            &log,
            "ERROR Error in extracting tool call from response (old)\n",
        )
        .unwrap();
        let mut w = LogWatch::new(log.clone());
        assert!(w.parser_lines().is_empty());
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::io::Write::write_all(
            &mut f,
            b"INFO 200 OK\nERROR hermes_tool_parser: Error in extracting tool call from response.\n",
        )
        .unwrap();
        let lines = w.parser_lines();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("hermes_tool_parser"));
        assert!(w.parser_lines().is_empty());
    }
}
