//! The `[contract]` table of a profile: the model's API contract as data.

use serde::{Deserialize, Serialize};

/// One sampling parameter the model fixes: the value it requires and values a
/// conforming server must reject with HTTP 400.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ImmutableParam {
    /// Request field, e.g. `temperature`.
    pub name: String,
    /// Thinking mode this applies to: `on`, `off` or empty for both.
    pub thinking: String,
    /// The required value (sent and expected to be accepted); none: any default.
    pub required: Option<serde_json::Value>,
    /// Values that must be rejected with a 400.
    pub wrong: Vec<serde_json::Value>,
}

/// The `[contract]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContractReq {
    /// `[[contract.params]]`.
    pub params: Vec<ImmutableParam>,
    /// Streamed `usage.prompt_tokens` must lie in `[expected, expected + tolerance]`.
    pub prompt_token_tolerance: Option<u64>,
    /// The model emits a reasoning channel (a reasoning parser is expected).
    pub reasoning: bool,
    /// Strings that must never appear in `content` (think markers, special tokens).
    pub reasoning_markers: Vec<String>,
    /// How the request switches thinking on/off, as a JSON object merged into the body.
    pub thinking_on: Option<serde_json::Value>,
    /// The same for thinking off.
    pub thinking_off: Option<serde_json::Value>,
    /// The model accepts tools declared inside `messages[].tools`.
    pub dynamic_tools: bool,
    /// Tool-call trigger F1 gates (fractions), by thinking mode.
    pub f1_min_thinking: Option<f64>,
    /// The F1 gate with thinking off.
    pub f1_min_non_thinking: Option<f64>,
    /// Schema accuracy gate (fraction of triggered calls whose arguments pass).
    pub schema_accuracy_min: Option<f64>,
    /// Degenerate output: largest share of U+FFFD characters in a generation.
    pub replacement_char_max_share: Option<f64>,
    /// Default F1 sample size (`--contract-requests`).
    pub requests: Option<usize>,
}

impl ContractReq {
    /// True when the profile says nothing about the contract.
    pub fn is_empty(&self) -> bool {
        self == &ContractReq::default()
    }

    /// The F1 gate for a thinking mode.
    pub fn f1_min(&self, thinking: bool) -> Option<f64> {
        if thinking {
            self.f1_min_thinking
        } else {
            self.f1_min_non_thinking
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::profile::Profile;

    #[test]
    fn kimi_profile_carries_its_contract_as_data() {
        let p = Profile::load("kimi-k3").unwrap();
        let c = &p.contract;
        assert_eq!(c.prompt_token_tolerance, Some(3));
        assert_eq!(c.f1_min(true), Some(0.73));
        assert_eq!(c.f1_min(false), Some(0.80));
        assert!(c.reasoning && c.dynamic_tools);
        let temps: Vec<_> = c
            .params
            .iter()
            .filter(|p| p.name == "temperature")
            .collect();
        assert_eq!(temps.len(), 2, "one temperature per thinking mode");
        assert!(c.params.iter().all(|p| !p.wrong.is_empty()));
    }

    #[test]
    fn generic_profile_has_a_contract_default() {
        let c = &Profile::generic().contract;
        assert!(!c.is_empty());
        assert!(c.params.is_empty() && !c.reasoning);
        assert_eq!(c.prompt_token_tolerance, Some(0));
    }
}
