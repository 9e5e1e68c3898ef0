//! The timed client against scripted faults: each is classified by kind, and no fault
//! makes the client hang past its deadline. Also `golive load` end to end (JSON, CSV).

use crate::common;
use crate::fault_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fault_server::{start, Fault};
use golive::client::{Api, ErrorKind, OpenAiClient, RequestSpec};
use golive::target::{Target, TargetOptions};

fn client(url: &str, timeout_ms: u64) -> OpenAiClient {
    let args = TargetOptions {
        api_key: None,
        model: Some("fault-model".into()),
        request_timeout: Duration::from_millis(timeout_ms),
        connect_timeout: Duration::from_millis(500),
        pool_idle_timeout: Duration::from_secs(3),
    };
    OpenAiClient::new(&Target::new(url, &args).unwrap()).unwrap()
}

fn stream_spec() -> RequestSpec {
    let body = serde_json::json!({
        "model": "fault-model", "stream": true, "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}],
    });
    RequestSpec::from_json(Api::Chat, &body, false)
}

async fn outcome(fault: Fault, timeout_ms: u64) -> (golive::client::RequestRecord, Duration) {
    let server = start(fault).await;
    let c = client(&server.url, timeout_ms);
    let t0 = Instant::now();
    let rec = c.send_now(&stream_spec()).await;
    assert_eq!(
        server.requests.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    (rec, t0.elapsed())
}

#[tokio::test]
async fn good_stream_is_timed_token_by_token() {
    let (rec, _) = outcome(
        Fault::Ok {
            tokens: 5,
            delay_ms: 20,
        },
        5000,
    )
    .await;
    assert!(rec.ok(), "{:?}: {}", rec.error, rec.error_detail);
    assert_eq!(rec.token_us.len(), 5);
    assert!(rec.done_marker);
    assert_eq!(rec.usage.completion_tokens, Some(5));
    assert_eq!(rec.finish_reason.as_deref(), Some("stop"));
    let ttft = rec.ttft_ms().unwrap();
    assert!(
        ttft >= 15.0,
        "TTFT {ttft} ms must include the first token's delay"
    );
    let tpot = rec.tpot_ms().unwrap();
    assert!((15.0..200.0).contains(&tpot), "TPOT {tpot} ms");
    assert!(rec.first_byte_us.unwrap() <= rec.first_token_us.unwrap());
}

#[tokio::test]
async fn hang_before_first_byte_is_a_timeout_at_the_deadline() {
    let (rec, took) = outcome(Fault::HangBeforeFirstByte, 800).await;
    assert_eq!(rec.error, Some(ErrorKind::Timeout), "{}", rec.error_detail);
    assert!(rec.first_byte_us.is_none());
    // The server never answers: bounded at all is the deadline kept (room for a busy machine).
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[tokio::test]
async fn close_mid_stream_is_an_early_close() {
    let (rec, took) = outcome(Fault::CloseMidStream, 5000).await;
    assert_eq!(
        rec.error,
        Some(ErrorKind::EarlyClose),
        "{}",
        rec.error_detail
    );
    assert_eq!(
        rec.token_us.len(),
        2,
        "the two chunks before the close count"
    );
    // Below the 5 s deadline: the close ended the request, not the deadline.
    assert!(took < Duration::from_secs(4), "took {took:?}");
}

#[tokio::test]
async fn malformed_sse_is_classified() {
    let (rec, _) = outcome(Fault::MalformedSse, 5000).await;
    assert_eq!(
        rec.error,
        Some(ErrorKind::MalformedStream),
        "{}",
        rec.error_detail
    );
    assert!(rec.error_detail.contains("<html>"), "{}", rec.error_detail);
}

#[tokio::test]
async fn http_500_keeps_status_and_body() {
    let (rec, _) = outcome(Fault::Http500, 5000).await;
    assert_eq!(rec.error, Some(ErrorKind::HttpStatus));
    assert_eq!(rec.http_status, Some(500));
    assert!(
        rec.error_detail.contains("CUDA out of memory"),
        "{}",
        rec.error_detail
    );
}

#[tokio::test]
async fn slow_drip_cannot_outlive_the_deadline() {
    let (rec, took) = outcome(Fault::SlowDrip, 1500).await;
    assert_eq!(rec.error, Some(ErrorKind::Timeout), "{}", rec.error_detail);
    assert!(rec.first_byte_us.is_some(), "bytes did arrive");
    // The drip never ends: bounded at all is the deadline kept (room for a busy machine).
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[tokio::test]
async fn refused_connection_is_a_connect_error() {
    // Bind and drop to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = client(&format!("http://127.0.0.1:{port}"), 2000);
    let rec = c.send_now(&stream_spec()).await;
    assert_eq!(rec.error, Some(ErrorKind::Connect), "{}", rec.error_detail);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_counts_every_request_and_error_kind() {
    let server = start(Fault::Ok {
        tokens: 4,
        delay_ms: 5,
    })
    .await;
    let c = Arc::new(client(&server.url, 5000));
    let mut plan = golive::load::LoadPlan::new("fault-model");
    plan.concurrency = 4;
    plan.requests = Some(20);
    plan.max_tokens = 4;
    plan.keep_records = true;
    let r = golive::load::run_load(
        c,
        Arc::new(plan),
        Arc::new(golive::load::LoadCounters::default()),
        None,
    )
    .await;
    assert_eq!(r.stats.requests, 20);
    assert_eq!(r.stats.errors, 0);
    assert_eq!(r.records.len(), 20);
    assert_eq!(r.stats.itl_ms().count, 20 * 3);
    assert!(r.stats.itl_ms().p50 >= 4.0, "{:?}", r.stats.itl_ms());

    let bad = start(Fault::Http500).await;
    let c = Arc::new(client(&bad.url, 5000));
    let mut plan = golive::load::LoadPlan::new("fault-model");
    plan.rate = Some(50.0);
    plan.concurrency = 8;
    plan.requests = Some(10);
    let r = golive::load::run_load(
        c,
        Arc::new(plan),
        Arc::new(golive::load::LoadCounters::default()),
        None,
    )
    .await;
    assert_eq!(r.stats.errors_by_kind.get("http_status"), Some(&10));
    assert!(
        r.elapsed >= Duration::from_millis(170),
        "rate 50/s spaces 10 starts over >= 180 ms"
    );
}

#[test]
fn golive_load_writes_json_and_csv() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Ok {
        tokens: 3,
        delay_ms: 2,
    }));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("load.json");
    let csv = dir.path().join("load.csv");
    let out = std::process::Command::new(common::golive_bin())
        .args([
            "load",
            "--url",
            &server.url,
            "--requests",
            "12",
            "--concurrency",
            "3",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("completed=12 "), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(summary["requests"], 12);
    assert_eq!(summary["output_tokens"], 36);
    assert_eq!(summary["model"], "fault-model");
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(rows.lines().count(), 13, "header + one row per request");
    assert!(rows
        .lines()
        .next()
        .unwrap()
        .starts_with("index,scheduled_ms"));
}

/// `golive load --format json | slow-reader`: the event lines wait in golive's own queue,
/// not in the load's workers, so a reader that has not read for seconds does not slow the
/// load down. The reader here starts only after `PAUSE`, when the pipe (64 KiB) has long
/// been full: the load still ended before that, by its own clock, and every line arrives.
#[test]
fn a_reader_that_stops_reading_json_events_does_not_hold_up_the_load() {
    const REQUESTS: usize = 400;
    const PAUSE: Duration = Duration::from_secs(6);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Ok {
        tokens: 3,
        delay_ms: 0,
    }));
    let mut child = std::process::Command::new(common::golive_bin())
        .args(["load", "--url", &server.url, "--concurrency", "8"])
        .args(["--requests", &REQUESTS.to_string(), "--max-tokens", "3"])
        .args(["--no-calibrate", "--format", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(PAUSE);
    let mut stdout = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(
        stdout.len() > 64 * 1024,
        "more than a pipe holds: {}",
        stdout.len()
    );
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let named = |name: &'static str| lines.iter().filter(move |l| l["event"] == name);
    assert_eq!(named("request").count(), REQUESTS, "every line arrives");
    let finished = named("load_finished").next().expect("load_finished");
    let t = finished["t"].as_f64().unwrap();
    assert!(
        t < PAUSE.as_secs_f64(),
        "the load ended at {t} s, while stdout was not read for {PAUSE:?}"
    );
    let times: Vec<f64> = lines.iter().map(|l| l["t"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "times in order");
    assert_eq!(lines.last().unwrap()["event"], "load_summary");
}
