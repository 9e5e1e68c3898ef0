//! The library's error: what went wrong by kind, so that the binary picks the documented exit
//! code from the kind and never from the text. Each public entry point (a capability's
//! `run`, `check`, `analyze_paths`, ...) returns [`Result`]; inside, the capabilities use
//! `anyhow` for context, and the kind is decided where the error leaves the library.

use std::fmt;

/// What kind of failure ended a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// An input could not be read or is invalid (a file, a profile, a flag's value): exit 2.
    Input,
    /// The server under test, or a host to collect from, did not answer: exit 3.
    Unreachable,
    /// An output could not be written (the disk, a planted link, permissions): exit 4.
    Write,
    /// golive itself failed (a task that panicked or was cancelled): exit 4.
    Internal,
}

/// An error of a public entry point: its kind and its chain of causes.
pub struct Error {
    kind: ErrorKind,
    inner: anyhow::Error,
}

/// The result of a public entry point.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of this kind.
    pub fn new(kind: ErrorKind, inner: impl Into<anyhow::Error>) -> Self {
        Error {
            kind,
            inner: inner.into(),
        }
    }

    /// Its kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The error and its causes, from the outermost (a caller's own error type that a
    /// reporter returned, e.g. the binary's failed output, is among them).
    pub fn causes(&self) -> anyhow::Chain<'_> {
        self.inner.chain()
    }

    /// The kind of an error from its chain of causes: an output that could not be written,
    /// a task that failed, a server that refused the connection or timed out; otherwise
    /// an input that was wrong (the capabilities state what they refused).
    pub fn kind_of(e: &anyhow::Error) -> ErrorKind {
        for cause in e.chain() {
            if let Some(inner) = cause.downcast_ref::<Error>() {
                return inner.kind;
            }
            if cause.is::<crate::outfile::WriteFailed>() {
                return ErrorKind::Write;
            }
            if cause.is::<tokio::task::JoinError>() {
                return ErrorKind::Internal;
            }
            if cause
                .downcast_ref::<reqwest::Error>()
                .is_some_and(|r| r.is_connect() || r.is_timeout())
            {
                return ErrorKind::Unreachable;
            }
        }
        ErrorKind::Input
    }
}

impl From<anyhow::Error> for Error {
    fn from(inner: anyhow::Error) -> Self {
        Error {
            kind: Error::kind_of(&inner),
            inner,
        }
    }
}

impl From<crate::outfile::WriteFailed> for Error {
    fn from(e: crate::outfile::WriteFailed) -> Self {
        Error::new(ErrorKind::Write, e)
    }
}

/// Shows the error's own message; its causes follow through [`std::error::Error::source`],
/// so `{:#}` of an `anyhow::Error` holding it reads as before.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} error: {:?}", self.kind, self.inner)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.source()
    }
}

/// A failure of golive itself (a value it made that it cannot serialise, a signal handler it
/// cannot install).
pub(crate) fn internal(e: impl Into<anyhow::Error>) -> Error {
    Error::new(ErrorKind::Internal, e)
}

/// `anyhow::ensure!` in an entry point: the condition is an input the caller gave.
macro_rules! ensure_input {
    ($cond:expr, $($arg:tt)+) => {
        let holds: bool = $cond;
        if !holds {
            return Err($crate::Error::new(
                $crate::ErrorKind::Input,
                anyhow::anyhow!($($arg)+),
            ));
        }
    };
}
pub(crate) use ensure_input;

/// `anyhow::bail!` in an entry point: an input the caller gave is refused.
macro_rules! bail_input {
    ($($arg:tt)+) => {
        return Err($crate::Error::new($crate::ErrorKind::Input, anyhow::anyhow!($($arg)+)))
    };
}
pub(crate) use bail_input;

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn the_kind_comes_from_the_chain_and_the_text_is_kept() {
        let write: anyhow::Error = anyhow::Error::new(crate::outfile::WriteFailed {
            path: "/x/report.json".into(),
            source: std::io::Error::other("disk full"),
        })
        .context("writing the report");
        let e = Error::from(write);
        assert_eq!(e.kind(), ErrorKind::Write);
        let shown = format!("{:#}", anyhow::Error::new(e));
        assert_eq!(
            shown,
            "writing the report: cannot write /x/report.json: disk full"
        );
        let bad: anyhow::Result<u32> = "x".parse::<u32>().context("--requests");
        assert_eq!(Error::from(bad.unwrap_err()).kind(), ErrorKind::Input);
        let nested = anyhow::Error::new(Error::new(ErrorKind::Internal, anyhow::anyhow!("bug")))
            .context("accept");
        assert_eq!(Error::kind_of(&nested), ErrorKind::Internal);
    }
}
