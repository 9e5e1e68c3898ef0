#![warn(missing_docs)]
//! golive: the logic behind the `golive` command line tool.
//!
//! One module per capability; shared data types live in [`report`] and [`target`].
//! Each capability takes typed options and returns a result or reports events
//! ([`events`]); nothing here parses arguments, prints or picks an exit code: that is
//! the binary (`crates/golive-cli`).

pub mod accept;
pub mod agent;
pub mod bundle_format;
pub mod check;
pub mod client;
pub mod collect;
pub mod command;
pub mod contract;
pub mod diff;
pub mod envparse;
mod error;
pub mod events;
/// Fuzz targets over every parser (feature `fuzz`: `scripts/fuzz.sh`, the test suite).
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz;
pub mod input;
pub mod load;
pub mod metrics;
mod names;
pub mod outfile;
pub mod probe;
pub mod profile;
pub mod redact;
pub mod report;
pub mod signoff;
pub mod sse;
pub mod target;
pub mod text;
pub mod triage;
pub mod watch;
pub mod wire;

pub use error::{Error, ErrorKind, Result};

/// Version of this tool, recorded in every bundle and report.
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit this was built from (`unknown` when built outside a checkout).
pub const GIT_COMMIT: &str = env!("GOLIVE_GIT_COMMIT");

/// `0.1.0 (commit abc123def456)`, as `--version` shows it.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("GOLIVE_GIT_COMMIT"),
    ")"
);
