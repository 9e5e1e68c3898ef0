//! `golive watch` against a scripted `/metrics` page (vLLM names, old and new) and
//! against replayed real logs: exit codes, reset handling, cache and log triggers.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{golive, text};

/// Serves `page(n)` for the n-th request to any path; returns the base URL.
fn scripted_server(page: impl Fn(usize) -> String + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            answer(stream, &page(count.fetch_add(1, Ordering::SeqCst)));
        }
    });
    url
}

/// Reads one request head and answers it with `body` as a metrics page.
fn answer(mut stream: TcpStream, body: &str) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
    }
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// `golive watch --once` on `url`, scraping every 100 ms over `window`, with `extra` arguments.
fn watch_once(url: &str, window: &str, extra: &[&str]) -> Output {
    let mut args = vec!["watch", "--url", url, "--once", "--interval", "100ms"];
    args.extend(["--window", window]);
    args.extend(extra);
    golive(&args)
}

/// A vLLM page; `old` uses the names from before 0.11.
fn vllm_page(
    old: bool,
    waiting: f64,
    hits: f64,
    queries: f64,
    ttft_sum: f64,
    ttft_n: f64,
) -> String {
    let (kv, pc) = if old {
        ("vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache")
    } else {
        ("vllm:kv_cache_usage_perc", "vllm:prefix_cache")
    };
    format!(
        "# TYPE vllm:num_requests_waiting gauge\n\
         vllm:num_requests_waiting{{engine=\"0\",model_name=\"m\"}} {waiting}\n\
         vllm:num_requests_running{{engine=\"0\",model_name=\"m\"}} 2\n\
         {kv}{{engine=\"0\",model_name=\"m\"}} 0.4\n\
         # TYPE {pc}_hits_total counter\n{pc}_hits_total{{engine=\"0\",model_name=\"m\"}} {hits}\n\
         # TYPE {pc}_queries_total counter\n{pc}_queries_total{{engine=\"0\",model_name=\"m\"}} {queries}\n\
         # TYPE vllm:time_to_first_token_seconds histogram\n\
         vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\",engine=\"0\",model_name=\"m\"}} {ttft_n}\n\
         vllm:time_to_first_token_seconds_sum{{engine=\"0\",model_name=\"m\"}} {ttft_sum}\n\
         vllm:time_to_first_token_seconds_count{{engine=\"0\",model_name=\"m\"}} {ttft_n}\n"
    )
}

/// A report.json with only a baseline, written into a temp dir.
fn baseline_report(dir: &std::path::Path, baseline: serde_json::Value) -> String {
    let mut report = golive::report::Report::new(vec!["http://127.0.0.1:1".into()]);
    report.baseline = serde_json::from_value(baseline).unwrap();
    report.save_json(dir).unwrap();
    dir.join("report.json").display().to_string()
}

/// `golive watch --once` over 500 ms against a baseline of 80% cache hits and a 60 ms
/// TTFT p50, on a vLLM page (`old` names or current) whose counters grow per scrape by
/// `hits` of 100 queried tokens and by `ttft_s` over one first token: (exit code, output).
fn watch_against_the_baseline(old: bool, hits: f64, ttft_s: f64) -> (Option<i32>, String) {
    let url = scripted_server(move |n| {
        let n = n as f64;
        vllm_page(old, 0.0, hits * n, 100.0 * n, ttft_s * n, n)
    });
    let dir = tempfile::tempdir().unwrap();
    let base = baseline_report(
        dir.path(),
        serde_json::json!({"cache_hit_ratio": 0.8, "ttft_p50_ms": 60.0}),
    );
    let out = watch_once(&url, "500ms", &["--baseline", &base]);
    (out.status.code(), text(&out))
}

/// A `--format json` watch across one restart: asserts it exited 0 and that its last
/// window fired nothing and counted one reset, with the pages' 90% hit ratio kept across
/// it (counters of the new process count from zero: never negative, never above 1).
/// Returns the `counter_reset` events.
fn one_reset_and_no_alarm(out: &Output) -> Vec<serde_json::Value> {
    let t = text(out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ev = lines.last().unwrap();
    assert_eq!(ev["firing"].as_array().unwrap().len(), 0, "{t}");
    assert_eq!(ev["resets"].as_array().unwrap().len(), 1, "{t}");
    let ratio = ev["summary"]["cache_hit_ratio"].as_f64().unwrap();
    assert!((ratio - 0.9).abs() < 1e-9, "{t}");
    lines
        .into_iter()
        .filter(|l| l["event"] == "counter_reset")
        .collect()
}

#[test]
fn unreachable_target_exits_3() {
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = watch_once(&format!("http://127.0.0.1:{port}"), "200ms", &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("unreachable"), "{}", text(&out));
}

#[test]
fn quiet_server_exits_0_and_old_names_are_read() {
    let (code, t) = watch_against_the_baseline(true, 80.0, 0.05);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("quiet"), "{t}");
    // 80 of 100 tokens hit, from the pre-0.11 gpu_prefix_cache_* counters; KV usage from gpu_cache_usage_perc.
    assert!(t.contains("cache hits 0.800"), "{t}");
    assert!(t.contains("KV cache 40.0%"), "{t}");
}

#[test]
fn cache_regression_fires_with_evidence_and_reminder() {
    // 10% hits (accepted 80%), 400 ms mean TTFT (accepted p50 60 ms).
    let (code, t) = watch_against_the_baseline(false, 10.0, 0.4);
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("TRIGGER cache_regression"), "{t}");
    assert!(t.contains("cache hit ratio 0.100"), "{t}");
    assert!(t.contains("vllm:prefix_cache_hits"), "{t}");
    assert!(t.contains("mean TTFT 400.0 ms"), "{t}");
    for word in [
        "image digest",
        "driver",
        "start parameters",
        "topology",
        "cache flag",
    ] {
        assert!(t.contains(word), "reminder lacks {word}: {t}");
    }
}

#[test]
fn counter_reset_is_reported_and_raises_no_alarm() {
    // Counters are high, fall at the 2nd scrape (restart) and climb again; the queue is
    // high before the restart and empty after it.
    let url = scripted_server(|n| {
        // The first scrape is before the restart, every later one after it: two scrapes
        // (all a loaded machine may manage in the window) already show the reset.
        let (k, waiting) = if n < 1 { (10, 6.0) } else { (n, 0.0) };
        let k = k as f64;
        vllm_page(false, waiting, 90.0 * k, 100.0 * k, 0.05 * k, k)
    });
    let dir = tempfile::tempdir().unwrap();
    let base = baseline_report(
        dir.path(),
        serde_json::json!({"cache_hit_ratio": 0.8, "ttft_p50_ms": 60.0, "waiting_max": 8}),
    );
    let out = watch_once(&url, "800ms", &["--baseline", &base, "--format", "json"]);
    let resets = one_reset_and_no_alarm(&out);
    assert!(!resets.is_empty(), "no reset event: {}", text(&out));
}

#[test]
fn a_restart_with_unchanged_counters_is_seen_through_the_refused_port() {
    // llama.cpp exports no process start time. A new process that has already redone
    // the old one's work shows the same counters; only the refused port between the
    // scrapes tells that the process changed.
    let page = |k: usize| {
        let k = k as f64;
        vllm_page(false, 0.0, 90.0 * k, 100.0 * k, 0.05 * k, k)
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(3) {
            answer(stream.unwrap(), &page(1));
        }
        // Down: nothing listens on the port for a while. This pause is the fault under
        // test (a restart with the port closed), not a wait for a state.
        drop(listener);
        std::thread::sleep(std::time::Duration::from_millis(800));
        let listener = TcpListener::bind(addr).unwrap();
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { continue };
            answer(stream, &page(1 + n));
        }
    });
    let out = golive(&[
        "watch",
        "--url",
        &format!("http://{addr}"),
        "--interval",
        "100ms",
        "--window",
        "20s",
        "--down-grace",
        "30s",
        "--duration",
        "2500ms",
        "--format",
        "json",
    ]);
    let t = text(&out);
    let resets = one_reset_and_no_alarm(&out);
    assert_eq!(resets.len(), 1, "{t}");
    assert!(
        resets[0]["what"]
            .as_str()
            .unwrap()
            .contains("refused connections"),
        "{t}"
    );
}

#[test]
fn ctrl_c_ends_the_watch_while_a_scrape_hangs() {
    // Three answers, then a server that accepts and never answers (a process going
    // down): the scrape in flight must not hold back Ctrl-C.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (hanging, scrape_hangs) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { continue };
            if n < 3 {
                answer(stream, &vllm_page(false, 0.0, 90.0, 100.0, 0.05, 1.0));
            } else {
                held.push(stream);
                let _ = hanging.send(());
            }
        }
    });
    let mut child = Command::new(common::golive_bin())
        .args([
            "watch",
            "--url",
            &format!("http://{addr}"),
            "--interval",
            "300ms",
            "--window",
            "600ms",
            "--down-grace",
            "60s",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // The first printed window: the answered scrapes are in.
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.contains("quiet over"), "{first}");
    // Scrapes hang from here on, each until the 3 s scrape timeout: Ctrl-C once one does.
    scrape_hangs
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("no scrape reached the hanging server");
    let sent = std::time::Instant::now();
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    let took = sent.elapsed();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let t = format!("{first}{rest}{err}");
    // Sent as the scrape began: waiting for that scrape would take its 3 s timeout. The
    // bound leaves room for a busy machine and still tells the two apart.
    assert!(
        took < std::time::Duration::from_millis(2500),
        "took {took:?} after SIGINT: {t}"
    );
    assert_eq!(status.code(), Some(0), "{t}");
    // The judgement of what it saw is still printed.
    assert!(rest.contains("quiet over"), "{t}");
}

#[test]
fn tool_error_counter_increase_fires() {
    let url = scripted_server(|n| {
        format!(
            "vllm:num_requests_waiting 0\ngateway_tool_call_failures_total{{flow=\"billing\"}} {}\n",
            if n >= 1 { 2 } else { 0 }
        )
    });
    let out = watch_once(
        &url,
        "500ms",
        &["--tool-error-counter", "gateway_tool_call_failures_total"],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("TRIGGER tool_schema"), "{t}");
    assert!(
        t.contains("gateway_tool_call_failures_total rose by 2"),
        "{t}"
    );
}

/// The real failure logs of ../shared/corpus, replayed through `--log --log-from-start`:
/// runtime OOM, NCCL, driver and tool-parser logs fire their trigger, and the OOM
/// evidence is the labelled first-cause line.
#[test]
fn shared_corpus_logs_fire_their_triggers() {
    let Some(shared) = common::shared_dir() else {
        return;
    };
    let labels = std::fs::read_to_string(shared.join("corpus/labels.tsv")).unwrap();
    let url = scripted_server(|_| "vllm:num_requests_waiting 0\n".to_string());
    let mut checked = 0;
    for row in labels.lines().skip(1) {
        let f: Vec<&str> = row.split('\t').collect();
        let (id, class, line) = (f[0], f[1], f[2]);
        let expect = match class {
            "oom_runtime" => "oom",
            "nccl" | "driver" => "driver_nccl",
            "tool_parser" => "tool_schema",
            _ => continue,
        };
        // 053 is a Ray placement-group error filed as NCCL: not a driver/NCCL error line.
        if id == "053" {
            continue;
        }
        let log = shared.join(format!("corpus/{id}.log"));
        let out = golive(&[
            "watch",
            "--url",
            &url,
            "--once",
            "--interval",
            "100ms",
            "--window",
            "100ms",
            "--log",
            log.to_str().unwrap(),
            "--log-from-start",
            "--format",
            "json",
        ]);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{id} ({class}): {t}");
        let ev: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap())
                .unwrap();
        let firing: Vec<&str> = ev["firing"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["trigger"].as_str().unwrap())
            .collect();
        assert!(firing.contains(&expect), "{id} ({class}): fired {firing:?}");
        if expect == "oom" {
            let evidence = ev["firing"][0]["evidence"][0].as_str().unwrap();
            assert!(
                evidence.contains(&format!("first cause: line {line}:")),
                "{id}: {evidence}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} corpus logs checked");
}

#[test]
fn a_log_command_is_followed_like_a_container_log() {
    let url = scripted_server(|_| "vllm:num_requests_waiting 0\n".to_string());
    let start = std::time::Instant::now();
    // Like `docker logs -f NAME`: the log arrives on the command's stderr and it never ends.
    let out = golive(&[
        "watch", "--url", &url, "--once", "--interval", "100ms", "--window", "1500ms",
        "--log-cmd",
        "sh -c 'echo engine started; sleep 0.1; echo \"RuntimeError: NCCL error: unhandled system error\" >&2; exec sleep 30'",
    ]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("TRIGGER driver_nccl"), "{t}");
    assert!(
        t.contains("first cause: line 2: RuntimeError: NCCL error"),
        "{t}"
    );
    // The follower is killed with the watch, not waited for: well before its `sleep 30`
    // ends (the first line builds the triage rules, several seconds of a debug build on
    // a busy machine, hence not 10 s).
    let took = start.elapsed();
    assert!(took < std::time::Duration::from_secs(25), "{took:?}");
    let out = golive(&[
        "watch",
        "--url",
        &url,
        "--once",
        "--log-cmd",
        "'unterminated",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("not a valid command line"),
        "{}",
        text(&out)
    );
}

/// `watch --once > /dev/full` (cron into a full disk): the window cannot be shown, which
/// is said on stderr and exits 4, not 0 in silence.
#[test]
fn once_into_a_full_stdout_is_an_error() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipping: /dev/full is not writable here");
        return;
    };
    let url = scripted_server(move |n| {
        let n = n as f64;
        vllm_page(false, 0.0, 80.0 * n, 100.0 * n, 0.05 * n, n)
    });
    let out = Command::new(common::golive_bin())
        .args(["watch", "--url", &url, "--once", "--interval", "100ms"])
        .args(["--window", "300ms"])
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("cannot write to stdout"), "{stderr}");
}

/// A continuous watch whose reader went away (`golive watch | head -1`) ends at its next
/// window with 0, instead of watching on for no one (or ending with an error).
#[test]
fn a_continuous_watch_with_a_closed_stdout_ends_quiet() {
    let url = scripted_server(move |n| {
        let n = n as f64;
        vllm_page(false, 0.0, 80.0 * n, 100.0 * n, 0.05 * n, n)
    });
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let started = std::time::Instant::now();
    let out = Command::new(common::golive_bin())
        .args(["watch", "--url", &url, "--interval", "100ms"])
        .args(["--window", "300ms", "--duration", "60s"])
        .stdout(writer)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("error"), "{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "watched on for {:?} with nobody reading",
        started.elapsed()
    );
}

/// `golive watch | head -1`: once stdout is closed the watch ends with exit 0, by
/// returning through main (the reporter no longer exits the process itself).
#[test]
fn a_closed_stdout_ends_the_watch_with_exit_0() {
    let url = scripted_server(|n| {
        let n = n as f64;
        vllm_page(false, 0.0, 80.0 * n, 100.0 * n, 0.05 * n, n)
    });
    let mut child = Command::new(common::golive_bin())
        .args([
            "watch",
            "--url",
            &url,
            "--interval",
            "100ms",
            "--window",
            "200ms",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.contains("quiet over"), "{first}");
    drop(stdout);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("watch went on after its stdout was closed");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
}
