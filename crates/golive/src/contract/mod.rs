//! The model's API contract (issue 28): what a serving stack must honour beyond
//! well-formed output. The contract itself is profile data ([`ContractReq`],
//! the `[contract]` table); this module scores it. So far: the profile table, the
//! vendor verifier's case file ([`parse_cases`]), the items' verdicts ([`ContractVerdict`]: params,
//! prompt_tokens, reasoning, degenerate output, the odd rank out) and the tool-call trigger confusion
//! matrix, F1 with an interval and schema accuracy ([`ToolCallScore`]).

mod cases;
mod judge;
pub(crate) mod run;
mod score;
mod spec;
mod trigger;

pub use cases::{parse as parse_cases, Case};
pub use judge::Verdict as ContractVerdict;
pub use run::{run, ContractCheck, ContractOptions, ContractRun, Reference};
pub use score::{Confusion, Interval, ToolCallScore, VerifierSummary};
pub use spec::{ContractReq, ImmutableParam};
pub use trigger::{builtin_cases, Comparison as TriggerComparison};
