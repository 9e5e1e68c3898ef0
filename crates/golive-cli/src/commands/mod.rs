//! One module per subcommand: its arguments, the conversion into the library's
//! options, and what it shows on the terminal. `main` dispatches to their `run`.

pub mod accept;
pub mod check;
pub mod collect;
pub mod completions;
pub mod contract;
pub mod diff;
pub mod load;
pub mod probe;
pub mod replay;
pub mod rules;
pub mod signoff;
pub mod triage;
pub mod watch;
