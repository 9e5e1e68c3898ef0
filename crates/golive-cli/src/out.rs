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
use std::sync::mpsc::SyncSender;
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

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
///
/// The lines are written by a thread of their own, through a queue of at most
/// [`JsonEvents::QUEUE`] lines: a load's workers, which report every request, only wait
/// for a slow reader of stdout (a pipe into a busy `jq`, a terminal being scrolled) once
/// it is that far behind, so the reader does not slow the load it is watching, and
/// memory stays bounded. [`JsonEvents::finish`] writes what is queued.
pub struct JsonEvents {
    started: Instant,
    /// Held while a line's time is taken and the line queued: lines from the load's
    /// workers keep their times in order. `None` once finished.
    queue: Mutex<Option<SyncSender<String>>>,
    /// The writing thread; it returns the first write that failed.
    writer: Mutex<Option<JoinHandle<Result<(), OutputFailed>>>>,
}

impl JsonEvents {
    /// Lines that may wait for stdout before a reporting worker waits too.
    pub const QUEUE: usize = 16_384;

    /// A reporter whose clock starts now.
    pub fn new() -> Self {
        let (queue, lines) = std::sync::mpsc::sync_channel::<String>(Self::QUEUE);
        let writer = std::thread::spawn(move || lines.iter().try_for_each(line));
        JsonEvents {
            started: Instant::now(),
            queue: Mutex::new(Some(queue)),
            writer: Mutex::new(Some(writer)),
        }
    }

    /// Seconds since the reporter started, to the millisecond.
    fn t(&self) -> f64 {
        (self.started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0
    }

    /// Queues one line, its time taken as it is queued: `{"t": .., <body>}`.
    fn send(&self, body: impl FnOnce(f64) -> serde_json::Result<String>) -> anyhow::Result<()> {
        let guard = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(queue) = guard.as_ref() else {
            anyhow::bail!("the JSON event lines were already finished");
        };
        let json = body(self.t())?;
        if queue.send(json).is_err() {
            // The writer stopped at a failed write: that failure is the error.
            drop(guard);
            self.finish()?;
        }
        Ok(())
    }

    /// Writes every queued line and stops the writer; the first write that failed is the
    /// error. Later events are refused.
    pub fn finish(&self) -> Result<(), OutputFailed> {
        drop(
            self.queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match writer.map(JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_)) => Err(OutputFailed {
                what: "to stdout (the writer stopped)".into(),
                source: anyhow::anyhow!("the JSON event writer panicked"),
            }),
        }
    }

    /// The command's own last line, in the events' shape: `{"t", "event", "data"}` (the
    /// binary's result, such as `load`'s summary, that no library event carries); then
    /// every line is written ([`JsonEvents::finish`]).
    pub fn last<T: serde::Serialize>(&self, event: &str, data: &T) -> anyhow::Result<()> {
        #[derive(serde::Serialize)]
        struct Last<'a, T> {
            t: f64,
            event: &'a str,
            data: &'a T,
        }
        self.send(|t| serde_json::to_string(&Last { t, event, data }))?;
        Ok(self.finish()?)
    }
}

impl Drop for JsonEvents {
    /// A command that ends early (an error) still writes the lines it queued.
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

#[derive(serde::Serialize)]
struct EventLine<'a> {
    t: f64,
    #[serde(flatten)]
    event: &'a Event,
}

impl Reporter for JsonEvents {
    fn report(&self, event: &Event) -> Result<(), ReportError> {
        self.send(|t| serde_json::to_string(&EventLine { t, event }))?;
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
