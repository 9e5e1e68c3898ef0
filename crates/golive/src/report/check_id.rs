//! The fixed ids of acceptance checks, one enum so that a misspelt id is a compile
//! error. [`super::Check::id`] stays a string: some ids are built at run time from
//! these (`service_health_node2`, `agreement_cache_node2`) or from the plan and the
//! cases (`ramp_c2_short`, `agent_tool_required_arg`).

crate::names::snake_case_names! {
    /// A check id as report.json, Markdown, JUnit and HTML write it (`prefix_cache`).
    pub enum CheckId {
        /// The environment bundles (`--bundle`) can be read and judged.
        EnvironmentBundles,
        /// `GET /health` answers 200.
        ServiceHealth,
        /// `GET /v1/models` lists the served model.
        ServiceModels,
        /// `GET /metrics` is Prometheus text with the engine's families.
        ServiceMetrics,
        /// The engine, its version and running configuration are exposed.
        ServiceVersion,
        /// A model to test is known (`--model`, or the first of `/v1/models`).
        ServiceModelResolved,
        /// Memory at rest before the first request (the worksheet's idle baseline).
        IdleBaseline,
        /// Requests without a key and with a wrong key are refused (`--expect-auth`).
        AccessControl,
        /// One non-streamed chat completion answers.
        BasicChat,
        /// One streamed chat completion answers, with usage.
        BasicStream,
        /// A shared system prompt and tool schema is served from the prefix cache.
        PrefixCache,
        /// The whole agreement stage, when it is skipped.
        Agreement,
        /// A greedy answer is the same cold and once its prompt is cached (per server).
        AgreementCache,
        /// Every `--url` gives the same greedy answers as the first, or as `--reference-url`.
        AgreementReplicas,
        /// The greedy answers to the prompts with a known answer are right.
        AgreementKnownAnswers,
        /// The whole ramp, when it is skipped.
        Ramp,
        /// Every ramp request reaches the server over a working connection.
        Transport,
        /// Where the boundary search left the bracket after a ramp failure on load.
        RampBoundary,
        /// No streamed answer of the ramp or soak goes silent longer than the limit between two output deltas.
        StreamSilence,
        /// `--duration` of steady load at the accepted concurrency: no errors, no growing queue.
        Soak,
        /// Agent cases mixed into the ramp and soak (`--agent-mix`) stay as conformant as at concurrency 1.
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
