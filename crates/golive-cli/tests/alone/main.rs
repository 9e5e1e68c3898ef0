//! golive-cli's integration tests that share one kind of server (issue 25 item 6): one test
//! binary per group, each file a module; they drive the real binary (`CARGO_BIN_EXE_golive`).

#[path = "../../../golive/tests/common/mod.rs"]
mod common;

mod vllm_real;
