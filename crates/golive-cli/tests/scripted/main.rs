//! golive-cli's integration tests that share one kind of server (issue 25 item 6): one test
//! binary per group, each file a module; they drive the real binary (`CARGO_BIN_EXE_golive`).

#[path = "../../../golive/tests/common/mod.rs"]
mod common;
#[path = "../fault_server/mod.rs"]
mod fault_server;

mod accept_engines;
mod accept_faults;
mod accept_golden;
mod agent_under_load;
mod agreement;
mod goodput;
mod keepalive;
mod load_arrivals;
mod load_faults;
mod probe_stall;
mod rate_boundary;
mod stream_silence;
mod watch_scripted;
