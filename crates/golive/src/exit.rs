//! Exit codes shared by every subcommand, so scripts can rely on them.

/// Nothing found / all checks pass / verdict release.
pub const OK: u8 = 0;
/// A failure was found, a check failed, or the verdict is not release.
pub const FOUND: u8 = 1;
/// Bad usage or unreadable input.
pub const USAGE: u8 = 2;
/// The server under test could not be reached.
pub const UNREACHABLE: u8 = 3;
