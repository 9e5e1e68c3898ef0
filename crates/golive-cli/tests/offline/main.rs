//! golive-cli's integration tests that share one kind of server (issue 25 item 6): one test
//! binary per group, each file a module; they drive the real binary (`CARGO_BIN_EXE_golive`).

#[path = "../../../golive/tests/common/mod.rs"]
mod common;

mod env_check;
mod env_collect;
mod env_config_kube;
mod env_ssh;
mod integration_check_triage;
mod rules_grafana;
mod rules_lint;
mod triage_inputs;
mod watch_rules_promtool;
