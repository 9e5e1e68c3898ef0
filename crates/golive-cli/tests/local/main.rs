//! golive-cli's integration tests that share one kind of server (issue 25 item 6): one test
//! binary per group, each file a module; they drive the real binary (`CARGO_BIN_EXE_golive`).

#[path = "../../../golive/tests/common/mod.rs"]
mod common;

mod accept_e2e;
mod agent_user;
mod hostile_outputs;
mod integration_accept_local;
mod load_shards;
mod secrets_out;
mod signoff_cli;
mod watch_local_server;
mod watch_prometheus_fleet;
