//! The library's integration tests that need no golive binary (scripted and local servers through the library, layering, fuzzing): one test
//! binary, each file a module (issue 25 item 6).

#[path = "../common/mod.rs"]
mod common;

mod agent_fixtures;
mod agent_local;
mod contract_scripted;
mod env_check_cluster;
mod env_check_host;
mod env_shared;
mod fuzz_smoke;
mod html_chromium;
mod layering;
mod local_server_script;
mod metrics_exposition;
mod profile_seeds;
mod wire_readers;
