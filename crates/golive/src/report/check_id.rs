//! The fixed ids of acceptance checks, one enum so that a misspelt id is a compile
//! error. [`super::Check::id`] stays a string: some ids are built at run time from
//! these (`service_health_node2`, `agreement_cache_node2`) or from the plan and the
//! cases (`ramp_c2_short`, `agent_tool_required_arg`).

crate::names::snake_case_names! {
    /// A check id as report.json, Markdown, JUnit and HTML write it (`prefix_cache`).
    pub enum CheckId {
        EnvironmentBundles,
        ServiceHealth,
        ServiceModels,
        ServiceMetrics,
        ServiceVersion,
        ServiceModelResolved,
        /// Memory at rest before the first request (the worksheet's idle baseline).
        IdleBaseline,
        /// Requests without a key and with a wrong key are refused (`--expect-auth`).
        AccessControl,
        BasicChat,
        BasicStream,
        PrefixCache,
        /// The whole agreement stage, when it is skipped.
        Agreement,
        AgreementCache,
        AgreementReplicas,
        AgreementKnownAnswers,
        /// The whole ramp, when it is skipped.
        Ramp,
        Transport,
        /// Where the boundary search left the bracket after a ramp failure on load.
        RampBoundary,
        StreamSilence,
        Soak,
        AgentUnderLoad,
        /// Replicas needed for the target at the objectives (`--target-rate`).
        Capacity,
        /// The contract stage's summary, or that it was skipped.
        Contract,
    }
}

impl From<CheckId> for String {
    fn from(id: CheckId) -> String {
        id.as_str().to_string()
    }
}

impl PartialEq<CheckId> for String {
    fn eq(&self, id: &CheckId) -> bool {
        self == id.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_snake_case_names() {
        crate::names::assert_round_trip::<CheckId>();
        assert_eq!(String::from(CheckId::Soak), "soak");
        assert_eq!(CheckId::PrefixCache.as_str(), "prefix_cache");
        assert_eq!(
            CheckId::AgreementKnownAnswers.as_str(),
            "agreement_known_answers"
        );
        assert!(String::from("stream_silence") == CheckId::StreamSilence);
    }
}
