//! Writing results to stdout. Every write returns its error (no `println!`, which
//! panics when the reader of a pipe went away): `main` turns a broken pipe into a
//! quiet exit 0, as `rg ... | head` does.

use std::fmt::Display;
use std::io::Write;

use crate::exit::OutputFailed;

fn stdout_failed(source: std::io::Error) -> OutputFailed {
    OutputFailed {
        what: "to stdout".into(),
        source: source.into(),
    }
}

/// `value` and a newline on stdout.
pub fn line(value: impl Display) -> Result<(), OutputFailed> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{value}")
        .and_then(|()| out.flush())
        .map_err(stdout_failed)
}

/// `text` as it is on stdout.
pub fn text(text: &str) -> Result<(), OutputFailed> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(stdout_failed)
}

/// `value` as pretty JSON and a newline on stdout.
pub fn json_pretty(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(value)?;
    Ok(line(json)?)
}

/// A note for people on stderr, with the one prefix every golive message has.
pub fn note(command: &str, message: impl Display) {
    // stderr gone too: nothing left to tell.
    let _ = writeln!(std::io::stderr(), "golive {command}: {message}");
}

/// The one error message of a failed command: `golive: error: ...` with its causes.
pub fn error(err: &anyhow::Error) {
    let _ = writeln!(std::io::stderr(), "golive: error: {err:#}");
}
