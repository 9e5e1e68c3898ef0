//! golive: the logic behind the `golive` command line tool.
//!
//! One module per capability; shared data types live in [`report`] and [`target`].
//! The binary (`crates/golive-cli`) only parses arguments and dispatches here.

pub mod accept;
pub mod agent;
pub mod check;
pub mod client;
pub mod collect;
pub mod diff;
pub mod envparse;
pub mod exit;
#[doc(hidden)]
pub mod fuzz;
pub mod load;
pub mod metrics;
pub mod profile;
pub mod redact;
pub mod report;
pub mod signoff;
pub mod sse;
pub mod target;
pub mod triage;
pub mod watch;

/// Version of this tool, recorded in every bundle and report.
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");
