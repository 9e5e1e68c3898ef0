//! The stable codes of the agent validator's findings ([`super::Problem`]). They are
//! written as their snake_case names (report.json `data.problems[].code`, the
//! conformance tables, `replay --format json`), so a code is a contract: rename one
//! only on purpose. A typo in a code is a compile error.

/// What one finding is, in one stable word.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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

impl ProblemCode {
    /// The code as written in reports (`tool_call_markup_in_content`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    #[test]
    fn serde_and_display_write_the_same_snake_case_code() {
        let mut n = 0;
        for c in ProblemCode::iter() {
            let json = serde_json::to_value(c).unwrap();
            assert_eq!(json.as_str(), Some(c.as_str()));
            assert_eq!(c.to_string(), c.as_str());
            assert_eq!(c.as_str().parse::<ProblemCode>().unwrap(), c);
            assert!(c
                .as_str()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
            n += 1;
        }
        assert!(n > 0);
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
