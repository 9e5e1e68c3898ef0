//! The live line of long stages on stderr: a progress bar with requests/s, errors and
//! TTFT p50, drawn from the running figures the library sends ([`LoadProgress`]); the
//! display counts nothing itself.
//!
//! Shown only when stderr is a terminal. `GOLIVE_LIVE=plain` prints the same line as
//! plain text instead (about once a second and at the end), for logs and tests, with
//! the prefix of every note (`golive load: ...`, `golive accept: 2 x short ...: ...`);
//! `GOLIVE_LIVE=off` turns it off.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use golive::events::{Event, LoadProgress, ReportError, Reporter};

enum Display {
    Bar(indicatif::ProgressBar),
    /// When the last line was printed, and that line.
    Plain {
        last: Mutex<(Instant, String)>,
    },
}

/// One live line, for one load (a ramp step, the soak, `golive load`).
pub struct Live {
    command: &'static str,
    label: Option<String>,
    display: Display,
}

/// How the live line is shown here: a bar on a terminal, plain lines when asked.
fn mode() -> Option<bool> {
    match std::env::var("GOLIVE_LIVE").as_deref() {
        Ok("off") => None,
        Ok("plain") => Some(false),
        _ if std::io::stderr().is_terminal() => Some(true),
        _ => None,
    }
}

impl Live {
    /// A live line of `command`'s load `label` (none: the command's only one) for `len`
    /// requests (`None`: unknown), or none when not shown.
    pub fn start(
        command: &'static str,
        label: Option<&str>,
        len: Option<u64>,
    ) -> Option<Arc<Live>> {
        let display = match mode()? {
            true => {
                let bar = match len {
                    Some(n) => indicatif::ProgressBar::new(n),
                    None => indicatif::ProgressBar::new_spinner(),
                };
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                if let Ok(style) = indicatif::ProgressStyle::with_template(
                    "{prefix} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
                ) {
                    bar.set_style(style);
                }
                bar.set_prefix(label.unwrap_or(command).to_string());
                bar.enable_steady_tick(Duration::from_millis(250));
                Display::Bar(bar)
            }
            false => Display::Plain {
                last: Mutex::new((Instant::now(), String::new())),
            },
        };
        Some(Arc::new(Live {
            command,
            label: label.map(str::to_string),
            display,
        }))
    }

    /// Draws the load's figures so far.
    pub fn draw(&self, p: &LoadProgress) {
        let line = line_of(p);
        match &self.display {
            Display::Bar(bar) => {
                bar.set_position(p.requests);
                bar.set_message(line);
            }
            Display::Plain { last } => {
                let Ok(mut last) = last.lock() else { return };
                if last.0.elapsed() >= Duration::from_secs(1) {
                    self.print(&line);
                    *last = (Instant::now(), line);
                }
            }
        }
    }

    /// Clears the bar; the plain form prints the load's final figures, unless its last
    /// line already said them.
    pub fn finish(&self, p: &LoadProgress) {
        match &self.display {
            Display::Bar(bar) => bar.finish_and_clear(),
            Display::Plain { last } => {
                let line = line_of(p);
                if last.lock().map_or(true, |last| last.1 != line) {
                    self.print(&line);
                }
            }
        }
    }

    /// The plain form: one note, `golive COMMAND: [LABEL: ]LINE`.
    fn print(&self, line: &str) {
        match &self.label {
            Some(label) => crate::out::note(self.command, format!("{label}: {line}")),
            None => crate::out::note(self.command, line),
        }
    }
}

/// `42 requests, 3.1 req/s, 0 errors, TTFT p50 118 ms`
fn line_of(p: &LoadProgress) -> String {
    let ttft = p
        .ttft_p50_ms
        .map_or_else(|| "n/a".to_string(), |ms| format!("{ms:.0} ms"));
    format!(
        "{} requests, {:.1} req/s, {} errors, TTFT p50 {ttft}",
        p.requests, p.requests_per_s, p.errors
    )
}

/// The live line of each load of a run, drawn from its events: a load's start opens
/// one, its running figures move it, its end closes it.
pub struct LiveLoads {
    command: &'static str,
    /// Name each load on its line (accept's ramp steps); `golive load` has only one.
    labelled: bool,
    live: Mutex<Option<Arc<Live>>>,
}

impl LiveLoads {
    /// The live lines of `command`.
    pub fn new(command: &'static str, labelled: bool) -> Self {
        LiveLoads {
            command,
            labelled,
            live: Mutex::new(None),
        }
    }

    /// Draws `event` if it is one of a load; other events are left to the caller.
    pub fn show(&self, event: &Event) {
        let Ok(mut live) = self.live.lock() else {
            return;
        };
        match event {
            Event::LoadStarted { label, planned } => {
                let label = Some(label.as_str()).filter(|_| self.labelled);
                *live = Live::start(self.command, label, *planned);
            }
            Event::LoadProgress(p) => {
                if let Some(l) = live.as_ref() {
                    l.draw(p);
                }
            }
            Event::LoadFinished(p) => {
                if let Some(l) = live.take() {
                    l.finish(p);
                }
            }
            _ => {}
        }
    }
}

impl Reporter for LiveLoads {
    fn report(&self, event: &Event) -> Result<(), ReportError> {
        self.show(event);
        Ok(())
    }
}
