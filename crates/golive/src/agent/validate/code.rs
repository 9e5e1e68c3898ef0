//! The stable codes of the agent validator's findings ([`super::Problem`]). They are
//! written as their snake_case names (report.json `data.problems[].code`, the
//! conformance tables, `replay --format json`), so a code is a contract: rename one
//! only on purpose. A typo in a code is a compile error.

crate::names::snake_case_names! {
    /// What one finding is, in one stable word.
    pub enum ProblemCode {
        ArgumentsNotJson,
        ArgumentsNotObject,
        ArgumentsNotString,
        ArgumentsSchema,
        Auth,
        BodyNotJson,
        CallsUntilMaxTokens,
        ChunkNoChoices,
        ChunkNoDelta,
        ChunkNotJson,
        ClientErrorWithoutMessage,
        Connect,
        ConnectionBroken,
        DataAfterDone,
        DeltaFirstWithoutIdName,
        DeltaIdChanged,
        DeltaIndexGap,
        DeltaIndexMissing,
        DeltaNameChanged,
        DeltaToolCallsType,
        EmptyAnswer,
        EmptyToolCallsArray,
        EnvelopeContentType,
        EnvelopeNoChoices,
        EnvelopeNoMessage,
        EnvelopeObject,
        EnvelopeToolCallsType,
        ErrorInStream,
        FinishReasonChanged,
        FinishReasonForToolCall,
        FinishReasonMissing,
        FinishReasonUnknown,
        GatewayError,
        #[serde(rename = "invalid_request_5xx")]
        #[strum(serialize = "invalid_request_5xx")]
        InvalidRequest5xx,
        InvalidRequestAccepted,
        InvalidRequestHang,
        NoToolCall,
        NoToolCallWithinMaxTokens,
        NotFound,
        ParallelToolCallsIgnored,
        ParserError,
        ParserExceptionInLog,
        ReasoningFieldsDiffer,
        ReasoningInContent,
        RegressionNotSaved,
        SchemaUnusable,
        ServerError,
        StopAtMaxTokens,
        StreamCut,
        StreamNoDone,
        StreamShapeDiffers,
        StreamTruncated,
        StructuredNotJson,
        StructuredSchema,
        Throttled,
        Timeout,
        ToolCallCutOff,
        ToolCallIdDuplicate,
        ToolCallIdMissing,
        ToolCallMarkupInContent,
        ToolCallNameMissing,
        ToolCallType,
        ToolCallTypeMissing,
        ToolCallsFinishWithoutCalls,
        ToolCallsWithoutTools,
        ToolChoiceNotEnforced,
        ToolNotOffered,
        ToolSchemaUnusable,
        TruncatedCallNotLength,
        TruncationNotExercised,
        TruncationNotLength,
        UsageMissing,
        ValidRequestRejected,
        WrongArgument,
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
