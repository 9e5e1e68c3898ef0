//! `golive watch` against the real local llama-server (ports 18220-18229): a growing
//! queue fires, a restart is survived without a false alarm, an OOM line in the
//! followed log fires.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{text, ServerGuard};

/// Sends `n` streamed chat requests of `max_tokens` each, one every `gap`, and reads each
/// answer to its end. Streamed, because the llama-server source build (llama.cpp 11434)
/// counts a streamed request that waits for a slot in `llamacpp:requests_deferred` and a
/// waiting non-streamed one not (measured: 4 against 0, five requests on one slot).
fn send_requests(
    url: &str,
    n: usize,
    max_tokens: u32,
    gap: Duration,
) -> std::thread::JoinHandle<()> {
    let url = format!("{url}/v1/chat/completions");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let client = reqwest::Client::new();
            let mut tasks = Vec::new();
            for _ in 0..n {
                let (client, url) = (client.clone(), url.clone());
                tasks.push(tokio::spawn(async move {
                    let body = serde_json::json!({
                        "messages": [{"role": "user", "content": "Tell a long story about a lighthouse."}],
                        "max_tokens": max_tokens,
                        "ignore_eos": true,
                        "stream": true,
                    });
                    let sent = client
                        .post(&url)
                        .json(&body)
                        .timeout(Duration::from_secs(120))
                        .send()
                        .await;
                    // Read to the end: a dropped stream is a cancelled request.
                    if let Ok(answer) = sent {
                        let _ = answer.bytes().await;
                    }
                }));
                tokio::time::sleep(gap).await;
            }
            for t in tasks {
                let _ = t.await;
            }
        })
    })
}

#[test]
fn growing_queue_on_one_slot_fires_the_queue_trigger() {
    let port = 18221;
    let guard = ServerGuard(port);
    let url = common::start_local_server(port, &["-np", "1"]);
    // One slot, a request every 0.3 s that takes longer than that: requests_deferred grows.
    let load = send_requests(&url, 10, 48, Duration::from_millis(300));
    // The watch begins once the first request is being served.
    let addr = url.trim_start_matches("http://");
    common::wait_until("the first request served", Duration::from_secs(30), || {
        common::http_get(addr, "/metrics").is_some_and(|(_, page)| {
            page.lines()
                .filter_map(|l| l.strip_prefix("llamacpp:requests_processing "))
                .any(|v| v.trim().parse::<f64>().is_ok_and(|n| n >= 1.0))
        })
    });
    let out = Command::new(common::golive_bin())
        .args([
            "watch",
            "--url",
            &url,
            "--once",
            "--interval",
            "400ms",
            "--window",
            "3s",
        ])
        .output()
        .unwrap();
    let t = text(&out);
    // Stopping the server ends the queued requests at once.
    drop(guard);
    load.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("TRIGGER queue_growth"), "{t}");
    assert!(t.contains("llamacpp:requests_deferred over"), "{t}");
    assert!(t.contains("image digest"), "{t}");
}

/// A running `golive watch` whose stdout lines arrive as they are printed (stderr is
/// drained apart so neither pipe can fill while the test waits).
struct LiveWatch {
    child: Child,
    lines: mpsc::Receiver<String>,
    stdout: Vec<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl LiveWatch {
    fn spawn(args: &[&str]) -> LiveWatch {
        let mut child = Command::new(common::golive_bin())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        LiveWatch {
            child,
            lines,
            stdout: Vec::new(),
            stderr,
        }
    }

    /// Waits (at most `within`) for a stdout line containing `needle`.
    fn wait_for(&mut self, needle: &str, within: Duration) -> bool {
        self.wait_for_from(0, needle, within)
    }

    /// Waits (at most `within`) for a stdout line from the `from`-th on containing `needle`.
    fn wait_for_from(&mut self, from: usize, needle: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        if self.stdout.iter().skip(from).any(|l| l.contains(needle)) {
            return true;
        }
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    self.stdout.push(line);
                    if hit {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
        false
    }

    /// Sends SIGINT and waits (at most `within`) for the exit; returns the exit code,
    /// the stdout lines printed after the signal, and all output.
    fn interrupt(mut self, within: Duration) -> (Option<i32>, Vec<String>, String) {
        let before = self.stdout.len();
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The reader ends at the pipe's end once the process is gone.
        self.stdout.extend(self.lines.iter());
        let err = self.stderr.join().unwrap();
        let all = format!("{}\n{err}", self.stdout.join("\n"));
        let code = match status {
            Some(s) => s.code(),
            None => panic!("watch did not end within {within:?} of SIGINT:\n{all}"),
        };
        (code, self.stdout[before..].to_vec(), all)
    }
}

#[test]
fn a_restart_is_survived_without_false_alarm() {
    let port = 18222;
    let _guard = ServerGuard(port);
    let url = common::start_local_server(port, &["-np", "1"]);
    // Counters above zero before the restart, and above what the restarted server does
    // before the watch can scrape it (the start script's one-token check and one
    // request): so the restart shows as a counter that went down, however late the
    // first scrape of the new process lands on a slow machine.
    send_requests(&url, 2, 8, Duration::ZERO).join().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut report = golive::report::Report::new(vec![url.clone()]);
    report.baseline.cache_hit_ratio = Some(0.5);
    report.baseline.waiting_max = Some(2.0);
    report.save_json(dir.path()).unwrap();
    let mut watch = LiveWatch::spawn(&[
        "watch",
        "--url",
        &url,
        "--baseline",
        dir.path().to_str().unwrap(),
        "--interval",
        "300ms",
        "--window",
        "2s",
        "--down-grace",
        "120s",
        "--duration",
        "300s",
    ]);
    // The first printed window: the old server has been scraped.
    let slow = Duration::from_secs(90);
    assert!(watch.wait_for("quiet over", slow), "{:?}", watch.stdout);
    let t0 = Instant::now();
    common::stop_local_server(port);
    common::start_local_server(port, &["-np", "1"]);
    eprintln!("restart took {:.1} s", t0.elapsed().as_secs_f64());
    send_requests(&url, 1, 8, Duration::ZERO).join().unwrap();
    let seen = watch.wait_for("counter reset (server restart)", slow);
    // A window judged with the new process in it, then Ctrl-C ends the watch with the
    // judgement of what it saw.
    let reset_at = watch.stdout.len();
    watch.wait_for_from(reset_at, "quiet over", Duration::from_secs(30));
    let (code, after_sigint, t) = watch.interrupt(Duration::from_secs(15));
    assert!(seen, "{t}");
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("went down"), "{t}");
    assert!(!t.contains("TRIGGER"), "{t}");
    assert!(
        after_sigint.iter().any(|l| l.contains("quiet over")),
        "no final judgement after SIGINT: {t}"
    );
}

#[test]
fn an_oom_line_in_the_followed_log_fires_the_oom_trigger() {
    let url = common::local_server_url();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    std::fs::write(
        &log,
        "old line before the watch began: CUDA out of memory\n",
    )
    .unwrap();
    // Through a tap: the watch's first scrape says it has begun (and taken the log's
    // length as its start) before the test writes to the log.
    let tap = common::tap(url.trim_start_matches("http://"));
    let child = Command::new(common::golive_bin())
        .args([
            "watch",
            "--url",
            &tap.url,
            "--once",
            "--interval",
            "300ms",
            "--window",
            "1500ms",
            "--log",
            log.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tap.connected
        .recv_timeout(Duration::from_secs(60))
        .expect("the watch never scraped");
    let fixture = std::fs::read_to_string(
        common::repo_root().join("crates/golive/tests/fixtures/watch/oom-runtime.log"),
    )
    .unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(fixture.as_bytes()).unwrap();
    drop(f);
    let out = child.wait_with_output().unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("TRIGGER oom"), "{t}");
    // Numbered from where the watch began; the line written before it is not counted.
    let first_oom = fixture
        .lines()
        .position(|l| l.contains("OutOfMemoryError"))
        .unwrap()
        + 1;
    assert!(
        t.contains(&format!("first cause: line {first_oom}: ")),
        "{t}"
    );
    assert!(!t.contains("old line before"), "{t}");
}
