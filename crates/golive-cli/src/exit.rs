//! Exit codes, the same for every subcommand, so scripts can rely on them.

/// Nothing found / all checks pass / verdict release.
pub const OK: u8 = 0;
/// A failure was found, a check failed, or the verdict is not release.
pub const FOUND: u8 = 1;
/// Bad usage, or input that cannot be read or is invalid.
pub const USAGE: u8 = 2;
/// The server under test could not be reached.
pub const UNREACHABLE: u8 = 3;
/// An internal error, or an output that could not be written.
pub const INTERNAL: u8 = 4;

/// The table shown in `--help` and in the README.
pub const TABLE: &str = "\
Exit codes:
  0  pass: nothing found, all checks pass, verdict release
  1  found: a failure, a failed check, a fired trigger, a verdict other than release
  2  usage: bad arguments, or input that cannot be read or is invalid
  3  unreachable: the server under test did not answer
  4  internal: an output could not be written, or golive itself failed";

/// Marks an error as "an output could not be written" (exit 4).
#[derive(Debug, thiserror::Error)]
#[error("cannot write {what}")]
pub struct OutputFailed {
    pub what: String,
    #[source]
    pub source: anyhow::Error,
}

/// What an error that ended a command means for the exit code: a file this binary could not
/// write, else the library's kind ([`golive::Error::kind_of`]; a reporter's failure returned
/// through the library is of kind Write). A closed stdout is no error: [`crate::out`] stops
/// writing and the command keeps its own code.
pub fn code_for(err: &anyhow::Error) -> u8 {
    if err.chain().any(|c| c.is::<OutputFailed>()) {
        return INTERNAL;
    }
    match golive::Error::kind_of(err) {
        golive::ErrorKind::Input => USAGE,
        golive::ErrorKind::Unreachable => UNREACHABLE,
        golive::ErrorKind::Write | golive::ErrorKind::Internal => INTERNAL,
    }
}
