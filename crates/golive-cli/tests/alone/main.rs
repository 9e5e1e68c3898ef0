//! golive-cli's integration tests that share one kind of server (issue 25 item 6): one test
//! binary per group, each file a module; they drive the real binary (`CARGO_BIN_EXE_golive`).
//!
//! This group needs the machine's cores to itself: real vLLM (minutes, 8 GB), and the
//! replica arithmetic, whose servers are pinned one to a core and measured against each other.
//! Its tests run one at a time under [`CORES`]; other test binaries run before or after it,
//! never beside it.

#[path = "../../../golive/tests/common/mod.rs"]
mod common;

mod two_replicas;
mod vllm_real;

/// Held by each test of this binary for its whole run: a measurement that pins servers to
/// cores is void while another test's server takes them.
static CORES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The machine's cores, for one test at a time.
fn cores() -> std::sync::MutexGuard<'static, ()> {
    CORES.lock().unwrap_or_else(|e| e.into_inner())
}
