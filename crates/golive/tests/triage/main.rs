//! The library's integration tests of triage (rules, accuracy on the real corpora, outcome first): one test
//! binary, each file a module (issue 25 item 6).

#[path = "../common/mod.rs"]
mod common;

mod triage_accuracy;
mod triage_crashloop;
mod triage_engine_coverage;
mod triage_generalise;
mod triage_never_silent;
mod triage_outcome;
mod triage_own_corpus;
mod triage_rules_lint;
mod triage_vllm_cpu;
