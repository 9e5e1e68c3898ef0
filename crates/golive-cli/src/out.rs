//! Writing results to stdout and notes to stderr, each through
//! [`golive::redact::redact_value`] (URL passwords, Authorization headers, token
//! shapes). Every write returns its error (no `println!`, which panics when the reader
//! of a pipe went away), except a closed stdout (`golive check ... | head -1`): then
//! writing stops quietly and the command goes on to its own exit code, so a failed
//! check still exits 1 through a pipe.
//!
//! Colour: words for people (pass, warn, FAIL, the verdict) are styled with anstyle and
//! every write goes through anstream, which keeps the styles on a terminal and strips
//! them elsewhere, honouring `NO_COLOR` (no colour, even on a terminal),
//! `CLICOLOR_FORCE` (colour, even into a pipe), `CLICOLOR=0` and `TERM=dumb`.

use std::fmt::Display;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use std::time::Instant;

use anstyle::{AnsiColor, Style};
use golive::events::{Event, ReportError, Reporter};
use golive::redact::redact_value;
use golive::report::{Status, Verdict};

use crate::exit::OutputFailed;

/// The reader of stdout went away: nothing more is written there.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether the reader of stdout went away (long-running commands may stop early).
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Runs one write to stdout unless it is closed; a broken pipe closes it, any other
/// error (a full disk, `> /dev/full`) is an output that could not be written.
fn to_stdout(
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), OutputFailed> {
    if stdout_closed() {
        return Ok(());
    }
    let mut out = anstream::stdout().lock();
    match write(&mut out).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(source) => Err(OutputFailed {
            what: "to stdout".into(),
            source: source.into(),
        }),
    }
}

/// `value` and a newline on stdout.
pub fn line(value: impl Display) -> Result<(), OutputFailed> {
    let value = redact_value(&value.to_string());
    to_stdout(|out| writeln!(out, "{value}"))
}

/// `text` as it is on stdout.
pub fn text(text: &str) -> Result<(), OutputFailed> {
    let text = redact_value(text);
    to_stdout(|out| out.write_all(text.as_bytes()))
}

/// `value` as pretty JSON and a newline on stdout.
pub fn json_pretty(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(value)?;
    Ok(line(json)?)
}

/// The `--format json` reporter: every event as one JSON line on stdout, with the
/// seconds since the command started (`{"t": 1.25, "event": "stage_started", "data":
/// "basic"}`). A stdout that cannot be written stops the run (exit 4).
pub struct JsonEvents {
    started: Instant,
    /// Held while a line's time is taken and the line written: lines from the load's
    /// workers keep their times in order.
    writing: std::sync::Mutex<()>,
}

impl JsonEvents {
    /// A reporter whose clock starts now.
    pub fn new() -> Self {
        JsonEvents {
            started: Instant::now(),
            writing: std::sync::Mutex::new(()),
        }
    }
}

#[derive(serde::Serialize)]
struct EventLine<'a> {
    t: f64,
    #[serde(flatten)]
    event: &'a Event,
}

impl JsonEvents {
    /// Seconds since the reporter started, to the millisecond.
    fn t(&self) -> f64 {
        (self.started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0
    }

    /// The command's own last line, in the events' shape: `{"t", "event", "data"}` (the
    /// binary's result, such as `load`'s summary, that no library event carries).
    pub fn last<T: serde::Serialize>(&self, event: &str, data: &T) -> anyhow::Result<()> {
        #[derive(serde::Serialize)]
        struct Last<'a, T> {
            t: f64,
            event: &'a str,
            data: &'a T,
        }
        let _in_order = self.writing.lock();
        let t = self.t();
        line(serde_json::to_string(&Last { t, event, data })?)?;
        Ok(())
    }
}

impl Reporter for JsonEvents {
    fn report(&self, event: &Event) -> Result<(), ReportError> {
        let _in_order = self.writing.lock();
        let json = serde_json::to_string(&EventLine { t: self.t(), event })
            .map_err(anyhow::Error::from)?;
        line(json).map_err(anyhow::Error::from)?;
        Ok(())
    }
}

/// A note for people on stderr, with the one prefix every golive message has.
pub fn note(command: &str, message: impl Display) {
    // stderr gone too: nothing left to tell.
    let message = redact_value(&message.to_string());
    let _ = writeln!(anstream::stderr(), "golive {command}: {message}");
}

/// The one error message of a failed command: `golive: error: ...` with its causes.
pub fn error(err: &anyhow::Error) {
    let style = FAIL;
    let err = redact_value(&format!("{err:#}"));
    let _ = writeln!(anstream::stderr(), "golive: {style}error{style:#}: {err}");
}

/// clap's message about bad arguments with the same prefix: `golive: error: ...` (the
/// help clap shows for a missing subcommand stays as it is).
pub fn usage_error(err: &clap::Error) {
    let missing_subcommand =
        err.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand;
    let prefix = if missing_subcommand { "" } else { "golive: " };
    let message = redact_value(&err.render().ansi().to_string());
    let _ = write!(anstream::stderr(), "{prefix}{message}");
}

const PASS: Style = AnsiColor::Green.on_default();
const WARN: Style = AnsiColor::Yellow.on_default();
const FAIL: Style = AnsiColor::Red.on_default().bold();

/// `text` in `style` (plain again where the stream takes no colour).
pub fn styled(style: Style, text: impl Display) -> String {
    format!("{style}{text}{style:#}")
}

/// The style of a check's status: pass green, warn and unknown yellow, fail red.
pub fn status_style(status: Status) -> Style {
    match status {
        Status::Pass => PASS,
        Status::Warn | Status::Unknown => WARN,
        Status::Fail => FAIL,
        Status::Skip => Style::new(),
    }
}

/// The style of a verdict: release green, observe yellow, rebuild and expand red.
pub fn verdict_style(verdict: Option<Verdict>) -> Style {
    match verdict {
        Some(Verdict::Release) => PASS.bold(),
        Some(Verdict::Observe) => WARN.bold(),
        Some(Verdict::Rebuild | Verdict::Expand) => FAIL,
        None => Style::new().bold(),
    }
}
