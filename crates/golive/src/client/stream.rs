//! Reading a response body: the SSE stream loop with its per-token timing, the whole
//! (non-streaming) answer, and the fast/full scanners for one event's payload.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use memchr::memmem;
use serde_json::Value;

use super::{
    error_chain, ErrorKind, OpenAiClient, Output, RequestRecord, RequestSpec, ServerTimings,
};
use crate::sse::{SseDecoder, SseEvent};
use crate::wire::{Answer, Choice, Lax, LaxField};

impl OpenAiClient {
    pub(super) async fn read_stream(
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

    pub(super) async fn read_whole(
        &self,
        resp: reqwest::Response,
        deadline: tokio::time::Instant,
        rec: &mut RequestRecord,
    ) {
        let read = super::read_limited(resp, super::MAX_BODY);
        let body = match tokio::time::timeout_at(deadline, read).await {
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
            Ok(Ok(b)) if b.cut => {
                let error = super::LimitedBody::too_large(super::MAX_BODY);
                rec.fail(ErrorKind::MalformedStream, error);
                return;
            }
            Ok(Ok(b)) => b.bytes,
        };
        let now = self.micros(Instant::now());
        rec.first_byte_us = Some(now);
        match read_answer(&body, rec) {
            Err(detail) => rec.fail(
                ErrorKind::MalformedStream,
                format!("answer is not the OpenAI JSON shape: {detail}"),
            ),
            Ok(None) => {}
            Ok(Some(err)) => rec.fail(ErrorKind::HttpStatus, format!("error object: {err}")),
        }
    }
}

/// Reads a whole (non-streamed) answer into `rec`: its usage, finish_reason and text. The
/// answer's error object comes back when it has no choice. A body that is not JSON, or a
/// field of the wrong type, is an error and leaves `rec` as it was.
fn read_answer(body: &[u8], rec: &mut RequestRecord) -> Result<Option<String>, String> {
    let answer = match Answer::read(body).map_err(|e| e.to_string())? {
        Lax::Typed(answer) => answer,
        Lax::Other(v) => {
            return Err(format!(
                "{} is not an object",
                excerpt(v.to_string().as_bytes())
            ))
        }
    };
    let counts = Counts::of(&answer).map_err(|e| e.to_string())?;
    let Some(choice) = answer.choices.strict("choices")?.and_then(|c| c.first()) else {
        counts.apply(rec);
        return Ok(answer.error().map(Value::to_string));
    };
    let choice = strict_choice(choice)?;
    let finish_reason = choice.finish_reason.strict("finish_reason")?;
    let mut text = String::new();
    if let Some(m) = choice.message.strict("message")? {
        if let Some(c) = m.content.strict("content")? {
            text.push_str(c);
        }
        if let Some(tc) = &m.tool_calls {
            text.push_str(&tc.to_string());
        }
    }
    if let Some(t) = choice.text.strict("text")? {
        text.push_str(t);
    }
    counts.apply(rec);
    rec.finish_reason = finish_reason.map(|f| f.to_string());
    rec.text.push_str(&text);
    Ok(None)
}

/// One entry of `choices`, which must be an object.
fn strict_choice<'x, 'a>(choice: &'x Lax<Choice<'a>>) -> Result<&'x Choice<'a>, String> {
    match choice {
        Lax::Typed(c) => Ok(c),
        Lax::Other(v) => Err(format!("`choices[]` is {v}")),
    }
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
        || REASONING_KEY.find_iter(body).any(|p| {
            // `"reasoning":"..."` or `"reasoning_content":"..."`: either name may come first
            // with `null` or `""` while the other carries the text.
            let rest = &body[p + REASONING_KEY.needle().len()..];
            let colon = memchr::memchr(b':', rest).unwrap_or(0);
            non_empty_string_after(rest, colon, 1)
        });
    Ok(has_text.then_some(Output::Text))
}

/// An answer's usage and llama-server timings, read before anything of the answer is
/// taken into the record.
struct Counts {
    usage: Option<crate::wire::Usage>,
    timings: Option<ServerTimings>,
}

impl Counts {
    fn of(answer: &Answer<'_>) -> serde_json::Result<Counts> {
        Ok(Counts {
            usage: answer.usage().transpose()?,
            timings: answer.timings().transpose()?,
        })
    }

    fn apply(self, rec: &mut RequestRecord) {
        if let Some(u) = self.usage {
            rec.usage.prompt_tokens = u.prompt_tokens.or(rec.usage.prompt_tokens);
            rec.usage.completion_tokens = u.completion_tokens.or(rec.usage.completion_tokens);
            if let Some(c) = u.prompt_tokens_details.and_then(|d| d.cached_tokens) {
                rec.usage.cached_tokens = Some(c);
            }
        }
        if self.timings.is_some() {
            rec.timings = self.timings;
        }
    }
}

#[cfg(feature = "fuzz")]
/// Fuzz entry: both event readers on one `data:` payload, then on the same chunk as a server
/// writes it. On the payload as given they may disagree (the fast one looks for the output
/// keys without parsing, and crafted text fools it), but neither may panic. Where the full
/// reader accepts the payload, the chunk it read is written again as a server does (see
/// `server_written`) and on that text both must agree: output, finish_reason, usage and
/// timings.
#[doc(hidden)]
pub fn fuzz_scan_event(data: &[u8]) {
    let _ = scan_event_fast(data, &mut RequestRecord::default());
    if scan_event_full(data, &mut RequestRecord::default()).is_err() {
        return;
    }
    let Some(event) = server_written(data) else {
        return;
    };
    let read = |scan: fn(&[u8], &mut RequestRecord) -> _| {
        let mut rec = RequestRecord::default();
        let output: Result<Option<Output>, (ErrorKind, String)> = scan(&event, &mut rec);
        (output, rec.finish_reason, rec.usage, rec.timings)
    };
    let (fast, full) = (read(scan_event_fast), read(scan_event_full));
    assert_eq!(
        fast,
        full,
        "the fast and full event readers disagree on {}",
        String::from_utf8_lossy(&event)
    );
}

#[cfg(feature = "fuzz")]
/// The chunk in `data` written as servers write one: compact JSON of the fields the wire
/// model knows, one choice, no whole-answer `message`, `tool_calls` only as an array and a
/// finish_reason only where it needs no escape.
fn server_written(data: &[u8]) -> Option<Vec<u8>> {
    let Ok(Lax::Typed(mut chunk)) = Answer::read(data) else {
        return None;
    };
    chunk.object = None;
    if let Some(Lax::Typed(choices)) = &mut chunk.choices {
        choices.truncate(1);
        if let Some(Lax::Typed(choice)) = choices.first_mut() {
            choice.message = None;
            let plain = |f: &str| !f.contains(['"', '\\']) && !f.contains(char::is_control);
            if !choice.finish_reason.typed().is_none_or(|f| plain(f)) {
                choice.finish_reason = None;
            }
            if let Some(Lax::Typed(delta)) = &mut choice.delta {
                delta.tool_calls.take_if(|t| !t.is_array());
            }
        }
    }
    serde_json::to_vec(&chunk).ok()
}

/// Slow path: full (borrowed) parse of one chunk; keeps the text in collect mode.
fn scan_event_full(
    data: &[u8],
    rec: &mut RequestRecord,
) -> Result<Option<Output>, (ErrorKind, String)> {
    let malformed = |detail: String| {
        (
            ErrorKind::MalformedStream,
            format!("event is not valid JSON ({detail}): {}", excerpt(data)),
        )
    };
    let chunk = match Answer::read(data).map_err(|e| malformed(e.to_string()))? {
        Lax::Typed(chunk) => chunk,
        Lax::Other(_) => {
            return Err((
                ErrorKind::MalformedStream,
                format!("event is not a JSON object: {}", excerpt(data)),
            ))
        }
    };
    let counts = Counts::of(&chunk).map_err(|e| malformed(e.to_string()))?;
    // A chunk with a wrong field or an error object takes nothing into the record.
    let (text_len, finish_reason) = (rec.text.len(), rec.finish_reason.clone());
    let output = chunk_output(&chunk, rec);
    let err = chunk.error();
    if output.is_err() || err.is_some() {
        rec.text.truncate(text_len);
        rec.finish_reason = finish_reason;
    }
    let output = output.map_err(malformed)?;
    if let Some(err) = err {
        return Err((
            ErrorKind::HttpStatus,
            format!(
                "error event in the stream: {}",
                excerpt(err.to_string().as_bytes())
            ),
        ));
    }
    counts.apply(rec);
    Ok(output)
}

/// What one parsed chunk carries, with its finish_reason and text taken into `rec`.
fn chunk_output(chunk: &Answer<'_>, rec: &mut RequestRecord) -> Result<Option<Output>, String> {
    let mut has_output = false;
    let mut tool_call = false;
    for choice in chunk.choices.strict("choices")?.into_iter().flatten() {
        let choice = strict_choice(choice)?;
        if let Some(f) = choice.finish_reason.strict("finish_reason")? {
            rec.finish_reason = Some(f.to_string());
        }
        if let Some(t) = choice.text.strict("text")?.filter(|t| !t.is_empty()) {
            has_output = true;
            rec.text.push_str(t);
        }
        if let Some(d) = choice.delta.strict("delta")? {
            if let Some(c) = d.content.strict("content")?.filter(|t| !t.is_empty()) {
                has_output = true;
                rec.text.push_str(c);
            }
            for reasoning in [&d.reasoning, &d.reasoning_content] {
                if reasoning
                    .strict("reasoning")?
                    .is_some_and(|t| !t.is_empty())
                {
                    has_output = true;
                }
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
        let second = br#"{"choices":[{"delta":{"reasoning":null,"reasoning_content":"think"}}]}"#;
        assert_eq!(scan_event_fast(second, &mut rec), Ok(Some(Output::Text)));
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
    fn a_wrong_field_or_an_error_object_takes_nothing_into_the_record() {
        let mut rec = RequestRecord::default();
        let null_error = br#"{"error":null,"choices":[{"delta":{"content":"x"}}]}"#;
        assert_eq!(
            scan_event_full(null_error, &mut rec),
            Ok(Some(Output::Text))
        );
        let wrong = br#"{"choices":[{"delta":{"content":"a"},"finish_reason":"stop"},{"delta":{"content":5}}],"usage":{"prompt_tokens":3}}"#;
        let err = scan_event_full(wrong, &mut rec).unwrap_err();
        assert_eq!(err.0, ErrorKind::MalformedStream);
        assert!(err.1.contains("`content` is 5"), "{}", err.1);
        let errored = br#"{"error":{"message":"boom"},"choices":[{"delta":{"content":"b"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3}}"#;
        assert_eq!(
            scan_event_full(errored, &mut rec).unwrap_err().0,
            ErrorKind::HttpStatus
        );
        let usage = br#"{"choices":[],"usage":{"prompt_tokens":"3"}}"#;
        assert_eq!(
            scan_event_full(usage, &mut rec).unwrap_err().0,
            ErrorKind::MalformedStream
        );
        assert_eq!(
            (
                rec.text.as_str(),
                rec.finish_reason.as_deref(),
                rec.usage.prompt_tokens
            ),
            ("x", None, None)
        );
        assert_eq!(
            scan_event_full(b"[1]", &mut rec).unwrap_err().0,
            ErrorKind::MalformedStream
        );
    }

    #[test]
    fn a_whole_answer_is_read_through_the_wire_model() {
        let mut rec = RequestRecord::default();
        let body = br#"{"object":"chat.completion","choices":[{"message":{"content":"hi","tool_calls":[{"id":"c"}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"prompt_tokens_details":{"cached_tokens":1}},"error":null}"#;
        assert_eq!(read_answer(body, &mut rec), Ok(None));
        assert_eq!(rec.text, r#"hi[{"id":"c"}]"#);
        assert_eq!(
            (rec.finish_reason.as_deref(), rec.cached_tokens()),
            (Some("stop"), Some(1))
        );
        let err = read_answer(br#"{"error":{"message":"x"},"choices":[]}"#, &mut rec);
        assert_eq!(err, Ok(Some(r#"{"message":"x"}"#.to_string())));
        let mut rec = RequestRecord::default();
        let wrong = br#"{"choices":[{"message":{"content":5},"finish_reason":"stop"}],"usage":{"prompt_tokens":2}}"#;
        assert_eq!(
            read_answer(wrong, &mut rec),
            Err("`content` is 5".to_string())
        );
        assert_eq!(
            (rec.finish_reason.as_deref(), rec.usage.prompt_tokens),
            (None, None)
        );
        assert!(read_answer(b"{", &mut rec).unwrap_err().contains("EOF"));
    }

    /// Speed of the two event readers on a vLLM-shaped stream (256 one-token chunks, a
    /// tool-call delta, the finish and usage chunks). Not a test: run it optimised with
    /// `cargo test -p golive --lib --config 'profile.dev.package.golive.opt-level=3'
    /// --config 'profile.dev.package.serde_json.opt-level=3' --config
    /// 'profile.dev.package.memchr.opt-level=3' --config 'profile.dev.package.serde.opt-level=3'
    /// -- --ignored --nocapture scanner_speed`.
    #[test]
    #[ignore]
    fn scanner_speed() {
        use std::io::Write;
        let head = r#"{"id":"chatcmpl-8a1f","object":"chat.completion.chunk","created":1733333333,"model":"Qwen/Qwen2.5-0.5B-Instruct","choices":[{"index":0,"delta":"#;
        let mut events: Vec<String> = Vec::new();
        events.push(format!(
            r#"{head}{{"role":"assistant","content":""}},"logprobs":null,"finish_reason":null}}]}}"#
        ));
        for i in 0..256 {
            events.push(format!(
                r#"{head}{{"content":" tok{i}"}},"logprobs":null,"finish_reason":null}}]}}"#
            ));
        }
        events.push(format!(r#"{head}{{"tool_calls":[{{"index":0,"id":"call_1","type":"function","function":{{"name":"get_weather","arguments":"{{\"city\": \"Berlin\"}}"}}}}]}},"logprobs":null,"finish_reason":null}}]}}"#));
        events.push(format!(
            r#"{head}{{}},"logprobs":null,"finish_reason":"stop"}}]}}"#
        ));
        events.push(r#"{"id":"chatcmpl-8a1f","object":"chat.completion.chunk","created":1733333333,"model":"m","choices":[],"usage":{"prompt_tokens":12,"total_tokens":270,"completion_tokens":258,"prompt_tokens_details":{"cached_tokens":8}}}"#.to_string());
        type Reader = fn(&[u8], &mut RequestRecord) -> Result<Option<Output>, (ErrorKind, String)>;
        for (name, read) in [
            ("fast", scan_event_fast as Reader),
            ("full", scan_event_full as Reader),
        ] {
            let mut best = f64::MAX;
            for _ in 0..7 {
                let t = Instant::now();
                let rounds = 200;
                for _ in 0..rounds {
                    let mut rec = RequestRecord::default();
                    for e in &events {
                        std::hint::black_box(read(std::hint::black_box(e.as_bytes()), &mut rec))
                            .unwrap();
                    }
                }
                let ns = t.elapsed().as_nanos() as f64 / (rounds * events.len()) as f64;
                best = best.min(ns);
            }
            let _ = writeln!(
                std::io::stderr(),
                "scanner_speed {name}: {best:.0} ns/event (best of 7 x 200 streams of {} events)",
                events.len()
            );
        }
    }
}
