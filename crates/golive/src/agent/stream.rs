//! Assembles a streamed chat completion into the same [`Reply`] a non-streamed answer
//! gives: content and reasoning are concatenated, tool-call deltas are joined by
//! `index` (the first delta of an index carries `id` and `function.name`, later ones
//! carry `arguments` fragments), and the final usage chunk is kept. Anything that breaks
//! the wire contract becomes a [`Problem`].

use std::collections::BTreeMap;

use serde_json::Value;

use super::validate::{mentions_parser, quote, Problem, ProblemCode, Reply, ToolCall};
use crate::report::Owner;
use crate::sse::SseEvent;
use crate::wire::{Answer, Choice, Lax, LaxField, Str, ToolCallPart};

/// Feed events with [`Assembler::push`], then call [`Assembler::finish`].
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    reply: Reply,
    calls: BTreeMap<u64, ToolCall>,
    problems: Vec<Problem>,
    chunks: usize,
    done: bool,
    saw_tool_calls_field: bool,
    /// An error event came: the server ended the stream on purpose.
    errored: bool,
}

impl Assembler {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, event: &SseEvent) {
        match event {
            SseEvent::Done => self.done = true,
            SseEvent::Data(bytes) => {
                self.chunks += 1;
                if self.done {
                    self.problems.push(Problem::warn(
                        Owner::Server,
                        ProblemCode::DataAfterDone,
                        "an event came after `data: [DONE]`",
                    ));
                }
                // Parsed as a `Value` first: a chunk is JSON by the same rules as a whole
                // answer (`http::send`), and a broken tool-call delta is quoted as sent.
                match serde_json::from_slice::<Value>(bytes) {
                    Ok(chunk) => self.chunk(&Answer::of(&chunk)),
                    Err(e) => self.problems.push(Problem::fail(
                        Owner::Server,
                        ProblemCode::ChunkNotJson,
                        format!(
                            "stream event {} is not JSON ({e}): {}",
                            self.chunks,
                            quote(&String::from_utf8_lossy(bytes), 120)
                        ),
                    )),
                }
            }
        }
    }

    fn chunk(&mut self, chunk: &Lax<Answer<'_>>) {
        // A JSON value other than an object has none of the fields.
        let none = Answer::default();
        let chunk = match chunk {
            Lax::Typed(chunk) => chunk,
            Lax::Other(_) => &none,
        };
        if let Some(err) = &chunk.error {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            let owner = if mentions_parser(&message) {
                Owner::Parser
            } else {
                Owner::Server
            };
            self.errored = true;
            self.problems.push(Problem::fail(
                owner,
                ProblemCode::ErrorInStream,
                format!("error event inside the stream: {}", quote(&message, 300)),
            ));
            return;
        }
        if let Some(usage) = &chunk.usage {
            self.reply.usage = Some(usage.clone());
        }
        let Some(choices) = chunk.choices.typed() else {
            self.problems.push(Problem::fail(
                Owner::Server,
                ProblemCode::ChunkNoChoices,
                format!("stream chunk {} has no `choices` array", self.chunks),
            ));
            return;
        };
        let Some(choice) = choices.first() else {
            return; // the usage-only chunk has `choices: []`
        };
        let no_choice = Choice::default();
        let choice = match choice {
            Lax::Typed(choice) => choice,
            Lax::Other(_) => &no_choice,
        };
        if let Some(reason) = choice.finish_reason.typed().map(Str::as_str) {
            if let Some(prev) = &self.reply.finish_reason {
                if prev != reason {
                    self.problems.push(Problem::warn(
                        Owner::Server,
                        ProblemCode::FinishReasonChanged,
                        format!("finish_reason {prev:?} was followed by {reason:?}"),
                    ));
                }
            }
            self.reply.finish_reason = Some(reason.to_string());
        }
        let Some(delta) = &choice.delta else {
            if choice.finish_reason.is_none() {
                self.problems.push(Problem::fail(
                    Owner::Server,
                    ProblemCode::ChunkNoDelta,
                    format!("stream chunk {} has no `delta`", self.chunks),
                ));
            }
            return;
        };
        // `"delta": null` or a delta of another type carries nothing.
        let Lax::Typed(delta) = delta else {
            return;
        };
        if let Some(text) = delta.content.typed() {
            self.reply
                .content
                .get_or_insert_with(String::new)
                .push_str(text);
        }
        for (field, text) in [
            ("reasoning", &delta.reasoning),
            ("reasoning_content", &delta.reasoning_content),
        ] {
            if let Some(text) = text.typed() {
                match self.reply.reasoning_field.as_deref() {
                    None => self.reply.reasoning_field = Some(field.to_string()),
                    Some(f) if f == field => {}
                    // Servers in transition send both names with the same text: keep one.
                    Some(_) => continue,
                }
                self.reply
                    .reasoning
                    .get_or_insert_with(String::new)
                    .push_str(text);
            }
        }
        match &delta.tool_calls {
            None => {}
            Some(calls) => match ToolCallPart::parts(calls) {
                Some(parts) => {
                    self.saw_tool_calls_field = true;
                    for (d, part) in parts {
                        self.tool_delta(d, &part);
                    }
                }
                None => self.problems.push(Problem::fail(
                    Owner::Server,
                    ProblemCode::DeltaToolCallsType,
                    format!("`delta.tool_calls` is {calls}, expected an array"),
                )),
            },
        }
    }

    /// One tool-call delta: `d` as sent (quoted in problems), `part` its fields.
    fn tool_delta(&mut self, d: &Value, part: &ToolCallPart<'_>) {
        let Some(&index) = part.index.typed() else {
            self.problems.push(Problem::fail(
                Owner::Server,
                ProblemCode::DeltaIndexMissing,
                format!(
                    "a tool-call delta has no integer `index`: {}",
                    quote(&d.to_string(), 160)
                ),
            ));
            return;
        };
        let id = part.id.typed().map(Str::as_str).filter(|s| !s.is_empty());
        let kind = part.kind.typed().map(Str::as_str);
        let function = part.function.typed();
        let name = function
            .and_then(|f| f.name.typed())
            .map(Str::as_str)
            .filter(|s| !s.is_empty());
        let fragment = function
            .and_then(|f| f.arguments.typed())
            .map_or("", Str::as_str);
        let is_new = !self.calls.contains_key(&index);
        let call = self.calls.entry(index).or_insert_with(|| ToolCall {
            index: Some(index),
            ..ToolCall::default()
        });
        if is_new && (id.is_none() || name.is_none()) {
            self.problems.push(Problem::fail(
                Owner::Server,
                ProblemCode::DeltaFirstWithoutIdName,
                format!(
                    "the first delta of tool call {index} lacks its id or function name: {}",
                    quote(&d.to_string(), 160)
                ),
            ));
        }
        if let Some(id) = id {
            match &call.id {
                None => call.id = Some(id.to_string()),
                Some(prev) if prev != id => self.problems.push(Problem::fail(
                    Owner::Server,
                    ProblemCode::DeltaIdChanged,
                    format!("tool call {index} changed its id from {prev:?} to {id:?}"),
                )),
                Some(_) => {}
            }
        }
        if let Some(kind) = kind {
            call.kind = Some(kind.to_string());
        }
        if let Some(name) = name {
            match &call.name {
                None => call.name = Some(name.to_string()),
                Some(prev) if prev != name => self.problems.push(Problem::fail(
                    Owner::Server,
                    ProblemCode::DeltaNameChanged,
                    format!("tool call {index} changed its name from {prev:?} to {name:?}"),
                )),
                Some(_) => {}
            }
        }
        call.arguments.push_str(fragment);
    }

    /// The assembled reply and the problems of the stream. `cut` says why the byte stream
    /// ended early (timeout, broken connection), `pending` how many bytes were left unparsed.
    pub fn finish(mut self, cut: Option<String>, pending: usize) -> (Reply, Vec<Problem>) {
        if !self.calls.is_empty() || self.saw_tool_calls_field {
            let calls: Vec<ToolCall> = std::mem::take(&mut self.calls).into_values().collect();
            for (pos, call) in calls.iter().enumerate() {
                if call.index != Some(pos as u64) {
                    self.problems.push(Problem::warn(
                        Owner::Server,
                        ProblemCode::DeltaIndexGap,
                        format!(
                            "tool-call indexes are not 0..n: position {pos} has index {:?}",
                            call.index
                        ),
                    ));
                    break;
                }
            }
            self.reply.tool_calls = Some(calls);
        }
        if let Some(why) = cut {
            self.problems.push(Problem::fail(
                Owner::Gateway,
                ProblemCode::StreamCut,
                format!("the stream stopped after {} events: {why}", self.chunks),
            ));
        } else if !self.done && !self.errored {
            let problem = if self.reply.finish_reason.is_some() && pending == 0 {
                Problem::warn(
                    Owner::Server,
                    ProblemCode::StreamNoDone,
                    "the stream ended without `data: [DONE]`",
                )
            } else {
                Problem::fail(
                    Owner::Gateway,
                    ProblemCode::StreamTruncated,
                    format!(
                        "the stream ended after {} events without finish_reason or [DONE] ({pending} bytes of a partial event)",
                        self.chunks
                    ),
                )
            };
            self.problems.push(problem);
        }
        (self.reply, self.problems)
    }
}

/// Assembles a whole recorded SSE body (fixtures, tests).
pub fn assemble_bytes(body: &[u8]) -> (Reply, Vec<Problem>) {
    let mut decoder = crate::sse::SseDecoder::new();
    let mut asm = Assembler::new();
    if let Err(e) = decoder.push(body) {
        return asm.finish(Some(e.to_string()), 0);
    }
    while let Some(event) = decoder.next_event() {
        asm.push(&event);
    }
    let pending = decoder.pending_bytes();
    asm.finish(None, pending)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sse(chunks: &[&str], done: bool) -> Vec<u8> {
        let mut out = String::new();
        for c in chunks {
            out.push_str("data: ");
            out.push_str(c);
            out.push_str("\n\n");
        }
        if done {
            out.push_str("data: [DONE]\n\n");
        }
        out.into_bytes()
    }

    #[test]
    fn deltas_join_by_index() {
        let body = sse(
            &[
                r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":""}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":"{\"y\""}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}},{"index":1,"function":{"arguments":":2}"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
                r#"{"choices":[],"usage":{"completion_tokens":9}}"#,
            ],
            true,
        );
        let (reply, problems) = assemble_bytes(&body);
        assert!(problems.is_empty(), "{problems:?}");
        let calls = reply.calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_deref(), calls[0].arguments.as_str()),
            (Some("a"), "{\"x\":1}")
        );
        assert_eq!(
            (calls[1].name.as_deref(), calls[1].arguments.as_str()),
            (Some("g"), "{\"y\":2}")
        );
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(reply.completion_tokens(), Some(9));
    }

    #[test]
    fn broken_wire_contract_is_reported() {
        let body = sse(
            &[
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{}"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
                "not json",
            ],
            false,
        );
        let (_, problems) = assemble_bytes(&body);
        let codes: Vec<&str> = problems.iter().map(|p| p.code.as_str()).collect();
        assert_eq!(
            codes,
            vec![
                "delta_index_missing",
                "delta_first_without_id_name",
                "chunk_not_json",
                "stream_truncated"
            ]
        );
        assert_eq!(problems[3].owner, Owner::Gateway);
    }
}
