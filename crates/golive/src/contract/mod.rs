//! The model's API contract (issue 28): what a serving stack must honour beyond
//! well-formed output. The contract itself is profile data ([`spec::ContractReq`],
//! the `[contract]` table); this module scores it. So far: the profile table, the
//! vendor verifier's case file ([`cases`]), the items' verdicts ([`judge`]: params,
//! prompt_tokens, reasoning, degenerate output, the odd rank out) and the tool-call trigger confusion
//! matrix, F1 with an interval and schema accuracy ([`score`]).

pub mod cases;
pub mod judge;
pub mod run;
pub mod score;
pub mod spec;
pub mod trigger;

pub use score::{Confusion, Interval, ToolCallScore, VerifierSummary};
pub use spec::{ContractReq, ImmutableParam};
