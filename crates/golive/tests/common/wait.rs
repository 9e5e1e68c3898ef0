//! Readiness polling: a test waits for the state it needs (a port that listens, an answer,
//! a file, a process state) with a deadline, never for a fixed time.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Polls `ready` every 100 ms until it holds; panics naming `what` after `timeout`.
/// Returns how long it took.
pub fn wait_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

/// Waits (at most 30 s) until something accepts connections on 127.0.0.1:`port`.
pub fn wait_listening(port: u16, what: &str) {
    wait_until(
        &format!("{what} to listen on {port}"),
        Duration::from_secs(30),
        || TcpStream::connect(("127.0.0.1", port)).is_ok(),
    );
}

/// A plain HTTP/1.0 GET of `path` on `addr` (`host:port`): the status code and the body,
/// or `None` when nothing answers within 5 s.
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// A TCP forwarder in front of a real server that reports each connection it accepts:
/// the test learns when a client has begun talking to the server (e.g. a watch's first
/// scrape) without a fixed wait.
pub struct Tap {
    /// Where to point the client instead of the server.
    pub url: String,
    /// One message per accepted connection.
    pub connected: std::sync::mpsc::Receiver<()>,
}

/// Forwards 127.0.0.1:(a free port) to `upstream` (`host:port`).
pub fn tap(upstream: &str) -> Tap {
    use std::net::{Shutdown, TcpListener};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, connected) = std::sync::mpsc::channel();
    let upstream = upstream.to_string();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let _ = tx.send(());
            let Ok(server) = TcpStream::connect(&upstream) else {
                continue;
            };
            for (mut from, mut to) in [
                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                (server, client),
            ] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(Shutdown::Write);
                });
            }
        }
    });
    Tap { url, connected }
}
