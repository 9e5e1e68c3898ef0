//! The stable codes of the agent validator's findings ([`super::Problem`]). They are
//! written as their snake_case names (report.json `data.problems[].code`, the
//! conformance tables, `replay --format json`), so a code is a contract: rename one
//! only on purpose. A typo in a code is a compile error.

crate::names::snake_case_names! {
    /// What one finding is, in one stable word.
    pub enum ProblemCode {
        /// A tool call's `arguments` are not JSON.
        ArgumentsNotJson,
        /// A tool call's `arguments` are JSON but not an object.
        ArgumentsNotObject,
        /// A tool call's `arguments` are a JSON value, not a JSON string.
        ArgumentsNotString,
        /// A tool call's arguments break the tool's schema.
        ArgumentsSchema,
        /// HTTP 401 or 403: the API key.
        Auth,
        /// The HTTP body is not JSON.
        BodyNotJson,
        /// Complete calls, then the model kept going until `max_tokens`.
        CallsUntilMaxTokens,
        /// A stream chunk has no `choices` array.
        ChunkNoChoices,
        /// A stream chunk has no `delta`.
        ChunkNoDelta,
        /// A stream event is not JSON.
        ChunkNotJson,
        /// A 4xx answer without an error message.
        ClientErrorWithoutMessage,
        /// No connection to the server.
        Connect,
        /// The connection broke during the request.
        ConnectionBroken,
        /// An event came after `data: [DONE]`.
        DataAfterDone,
        /// The first delta of a tool call lacks its id or function name.
        DeltaFirstWithoutIdName,
        /// A streamed tool call changed its id.
        DeltaIdChanged,
        /// Streamed tool-call indexes are not 0..n.
        DeltaIndexGap,
        /// A tool-call delta has no integer `index`.
        DeltaIndexMissing,
        /// A streamed tool call changed its function name.
        DeltaNameChanged,
        /// `delta.tool_calls` is not an array.
        DeltaToolCallsType,
        /// The answer is empty: no text and no tool call.
        EmptyAnswer,
        /// `tool_calls: []` on a text answer (expected null or absent).
        EmptyToolCallsArray,
        /// `message.content` is neither a string nor null.
        EnvelopeContentType,
        /// The answer has no `choices[0]`.
        EnvelopeNoChoices,
        /// `choices[0].message` is missing.
        EnvelopeNoMessage,
        /// `object` is not `chat.completion`.
        EnvelopeObject,
        /// `message.tool_calls` is not an array.
        EnvelopeToolCallsType,
        /// An error event inside the stream.
        ErrorInStream,
        /// One `finish_reason` was followed by another.
        FinishReasonChanged,
        /// A tool call ended with a `finish_reason` other than `tool_calls` (or `length`).
        FinishReasonForToolCall,
        /// `finish_reason` is missing.
        FinishReasonMissing,
        /// `finish_reason` is not one of stop, length, tool_calls, content_filter.
        FinishReasonUnknown,
        /// HTTP 502-504 from a gateway (not a JSON API error).
        GatewayError,
        /// An invalid request got a 5xx instead of a 4xx.
        #[serde(rename = "invalid_request_5xx")]
        #[strum(serialize = "invalid_request_5xx")]
        InvalidRequest5xx,
        /// An invalid request was answered with success instead of a 4xx.
        InvalidRequestAccepted,
        /// No answer to an invalid request in time: it should be rejected at once.
        InvalidRequestHang,
        /// Answered without a tool call where one was expected.
        NoToolCall,
        /// No tool call before `max_tokens` ran out.
        NoToolCallWithinMaxTokens,
        /// HTTP 404: the URL or the model name.
        NotFound,
        /// `parallel_tool_calls: false`, yet several calls came back.
        ParallelToolCallsIgnored,
        /// An error answer that names the tool or reasoning parser.
        ParserError,
        /// The server log shows a parser exception for the request.
        ParserExceptionInLog,
        /// `reasoning` and `reasoning_content` carry different text.
        ReasoningFieldsDiffer,
        /// Reasoning markup (`<think>`) left in `content`: no reasoning parser.
        ReasoningInContent,
        /// The failing case could not be saved as a regression file.
        RegressionNotSaved,
        /// The case's `response_format` schema cannot be used to validate.
        SchemaUnusable,
        /// A 5xx answer to a valid request.
        ServerError,
        /// All of `max_tokens` went to an empty answer, yet `finish_reason` is `stop`.
        StopAtMaxTokens,
        /// The stream broke off before its end (a read error or the deadline).
        StreamCut,
        /// The stream ended without `data: [DONE]` after a complete answer.
        StreamNoDone,
        /// The streamed answer has another shape than the non-streamed one.
        StreamShapeDiffers,
        /// The stream ended without `finish_reason` or `[DONE]`.
        StreamTruncated,
        /// `response_format` asked for JSON, but `content` is not JSON.
        StructuredNotJson,
        /// `content` breaks the requested `response_format` schema.
        StructuredSchema,
        /// HTTP 408 or 429: throttled on the way.
        Throttled,
        /// No complete answer within the deadline.
        Timeout,
        /// The tool call was cut off by `max_tokens`.
        ToolCallCutOff,
        /// Two tool calls share an id.
        ToolCallIdDuplicate,
        /// A tool call has no id.
        ToolCallIdMissing,
        /// The model wrote a tool call the server's parser did not recognise: it is in `content`.
        ToolCallMarkupInContent,
        /// A tool call has no function name.
        ToolCallNameMissing,
        /// A tool call's `type` is not `function`.
        ToolCallType,
        /// A tool call has no `type: "function"`.
        ToolCallTypeMissing,
        /// `finish_reason` is `tool_calls`, but no tool call came.
        ToolCallsFinishWithoutCalls,
        /// Tool calls came back although no tools were offered.
        ToolCallsWithoutTools,
        /// `tool_choice` was not enforced.
        ToolChoiceNotEnforced,
        /// A tool call names a tool that was not offered.
        ToolNotOffered,
        /// A tool's schema cannot be used to validate its arguments.
        ToolSchemaUnusable,
        /// A tool call cut off by `max_tokens`, yet `finish_reason` is not `length`.
        TruncatedCallNotLength,
        /// No tool call was started, so a cut-off call was not tested.
        TruncationNotExercised,
        /// An answer cut off by `max_tokens`, yet `finish_reason` is not `length`.
        TruncationNotLength,
        /// No `usage` in the answer (or no usage chunk although `include_usage` was set).
        UsageMissing,
        /// A valid request was rejected (an error status not named by another code).
        ValidRequestRejected,
        /// A tool call's argument has another value than the case expects.
        WrongArgument,
        /// The model called another tool than the case expects.
        WrongTool,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_and_display_write_the_same_snake_case_code() {
        crate::names::assert_round_trip::<ProblemCode>();
        assert_eq!(
            ProblemCode::ToolCallMarkupInContent.as_str(),
            "tool_call_markup_in_content"
        );
        assert_eq!(
            ProblemCode::InvalidRequest5xx.as_str(),
            "invalid_request_5xx"
        );
    }
}
