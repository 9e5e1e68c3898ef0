//! `golive watch --listen ADDR`: `/healthz` and golive's own `/metrics`, built only
//! from the watch's events (the proof that the library does not need the terminal).
//!
//! A plain HTTP/1.1 responder on a thread: two fixed GET routes, one connection at a
//! time, so a scraper never waits on the watch loop.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use golive::events::{Event, ReportError, Reporter};
use golive::watch::Trigger;

/// What the events said so far.
#[derive(Default)]
struct Seen {
    scrapes: u64,
    scrape_failures: u64,
    counter_resets: u64,
    windows: u64,
    unreachable: bool,
    /// Seconds since the start of the last good scrape.
    last_scrape_t: Option<f64>,
    firing: Vec<Trigger>,
}

/// The reporter side: records events for the endpoint.
pub struct Endpoint {
    seen: Mutex<Seen>,
}

impl Reporter for Endpoint {
    fn report(&self, event: &Event) -> Result<(), ReportError> {
        let Ok(mut s) = self.seen.lock() else {
            return Ok(());
        };
        match event {
            Event::Scraped { t } => {
                s.scrapes += 1;
                s.last_scrape_t = Some(*t);
                s.unreachable = false;
            }
            Event::ScrapeFailed { .. } => s.scrape_failures += 1,
            Event::CounterReset { .. } => s.counter_resets += 1,
            Event::Evaluated(ev) => {
                s.windows += 1;
                s.firing = ev.firing.iter().map(|f| f.trigger).collect();
            }
            Event::Unreachable(_) => s.unreachable = true,
            _ => {}
        }
        Ok(())
    }
}

impl Endpoint {
    /// The Prometheus text exposition of what was seen.
    fn metrics(&self) -> String {
        let s = match self.seen.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP golive_watch_trigger_firing 1 when the rollback trigger fired in the last judged window.\n# TYPE golive_watch_trigger_firing gauge"
        );
        for t in Trigger::ALL {
            let on = u8::from(s.firing.contains(&t));
            let _ = writeln!(
                out,
                "golive_watch_trigger_firing{{trigger=\"{}\"}} {on}",
                t.id()
            );
        }
        let counters = [
            (
                "golive_watch_scrapes_total",
                "Scrapes of the target that answered.",
                s.scrapes,
            ),
            (
                "golive_watch_scrape_failures_total",
                "Scrapes of the target that failed.",
                s.scrape_failures,
            ),
            (
                "golive_watch_counter_resets_total",
                "Restarts of the target seen as counter resets.",
                s.counter_resets,
            ),
            ("golive_watch_windows_total", "Windows judged.", s.windows),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP golive_watch_target_up 1 while the target answers its scrapes.\n# TYPE golive_watch_target_up gauge\ngolive_watch_target_up {}",
            u8::from(s.last_scrape_t.is_some() && !s.unreachable)
        );
        out
    }
}

/// Binds `addr` now (a taken port fails before the watch starts) and serves on a thread.
pub fn serve(addr: SocketAddr) -> anyhow::Result<Arc<Endpoint>> {
    let listener =
        TcpListener::bind(addr).with_context(|| format!("--listen {addr}: cannot bind"))?;
    let endpoint = Arc::new(Endpoint {
        seen: Mutex::new(Seen::default()),
    });
    let serving = endpoint.clone();
    std::thread::spawn(move || {
        let active = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for conn in listener.incoming().flatten() {
            // Each client on its own thread: a slow one never holds up /healthz.
            if active.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
                active.fetch_sub(1, Ordering::SeqCst);
                continue; // dropped: too many clients at once
            }
            let (serving, active) = (serving.clone(), active.clone());
            std::thread::spawn(move || {
                let _ = answer(&serving, conn);
                active.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    Ok(endpoint)
}

/// A connection read until a point in time: a client that trickles its request ends there.
struct Deadline(TcpStream, std::time::Instant);

impl Read for Deadline {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.1.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.0.set_read_timeout(Some(left))?;
        self.0.read(buf)
    }
}

/// Clients served at once; more are closed at once.
const MAX_CLIENTS: usize = 32;
/// Most bytes of a request head read; a client may take at most `HEAD_DEADLINE` to send it.
const HEAD_LIMIT: u64 = 16 << 10;
const HEAD_DEADLINE: Duration = Duration::from_secs(5);

fn answer(endpoint: &Endpoint, mut conn: TcpStream) -> std::io::Result<()> {
    conn.set_write_timeout(Some(Duration::from_secs(5)))?;
    let until = std::time::Instant::now() + HEAD_DEADLINE;
    let head = Deadline(conn.try_clone()?, until).take(HEAD_LIMIT);
    let mut reader = BufReader::new(head);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // The headers end at the first empty line.
    let mut header = String::new();
    while reader.read_line(&mut header)? > 2 {
        header.clear();
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    let (status, kind, body) = match path {
        "/healthz" => ("200 OK", "text/plain", "ok\n".to_string()),
        "/metrics" => ("200 OK", "text/plain; version=0.0.4", endpoint.metrics()),
        _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
}
