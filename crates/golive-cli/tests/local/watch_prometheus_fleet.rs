//! `golive watch --once --prometheus`: a real Prometheus (Debian's package) scrapes
//! three real llama-servers every second. The healthy fleet is quiet; then one server
//! (one slot) gets four long generations and queues, another is stopped: the queuing
//! one is reported as imbalance, the stopped one as absent, the third stays quiet.

use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const QUEUING: u16 = 18601;
const HEALTHY: u16 = 18602;
const STOPPED: u16 = 18603;
const PROMETHEUS: u16 = 18640;
const WINDOW: &str = "10s";

/// Kills the Prometheus this test started (by its own handle).
/// Ends Prometheus when dropped; its pid file lets `scripts/test.sh` end it after a run that
/// was killed before the drop.
struct PrometheusGuard {
    child: Child,
    _pid_file: common::PidFile,
}
impl Drop for PrometheusGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The body of a 200 answer from Prometheus to GET `path`.
fn prometheus_get(path: &str) -> Option<String> {
    common::http_get(&format!("127.0.0.1:{PROMETHEUS}"), path)
        .filter(|(status, _)| *status == 200)
        .map(|(_, body)| body)
}

/// The value of an instant query that returns one number (`None`: empty or no answer).
fn query_value(q: &str) -> Option<f64> {
    let enc: String = url::form_urlencoded::byte_serialize(q.as_bytes()).collect();
    let body = prometheus_get(&format!("/api/v1/query?query={enc}"))?;
    let v: Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

fn wait_for(what: &str, timeout: Duration, ready: impl FnMut() -> bool) {
    let took = common::wait_until(what, timeout, ready);
    eprintln!("{what}: after {:.1} s", took.as_secs_f64());
}

/// A streaming generation that stays open until dropped (llama.cpp cancels it then).
fn long_generation(port: u16) -> TcpStream {
    let body = r#"{"prompt":"Write a very long story about a lighthouse.","n_predict":4000,"ignore_eos":true,"stream":true,"cache_prompt":false}"#;
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

/// `golive watch --once --prometheus` over the test's fleet: (exit code, JSON, text).
fn watch_once() -> (i32, Value, String) {
    let url = format!("http://127.0.0.1:{PROMETHEUS}");
    let base = [
        "watch",
        "--once",
        "--prometheus",
        &url,
        "--selector",
        r#"{job="llama"}"#,
        "--window",
        WINDOW,
    ];
    let json = common::golive(&[&base[..], &["--format", "json"]].concat());
    let text = common::golive(&base);
    assert_eq!(
        json.status.code(),
        text.status.code(),
        "{}",
        common::text(&text)
    );
    let v: Value = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", common::text(&json)));
    (text.status.code().unwrap(), v, common::text(&text))
}

fn findings(v: &Value) -> Vec<(String, String)> {
    v["firing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["replica"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn write_config(dir: &Path) -> std::path::PathBuf {
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: llama\n    static_configs:\n      - targets: ['127.0.0.1:{QUEUING}', '127.0.0.1:{HEALTHY}', '127.0.0.1:{STOPPED}']\n"
        ),
    )
    .unwrap();
    cfg
}

#[test]
fn fleet_quiet_then_imbalance_and_absent() {
    if !common::runs("prometheus", "prometheus") {
        return;
    }
    let t0 = Instant::now();
    let _servers: Vec<common::ServerGuard> = [(QUEUING, "1"), (HEALTHY, "4"), (STOPPED, "4")]
        .into_iter()
        .map(|(port, slots)| {
            common::start_local_server(port, &["-np", slots]);
            common::ServerGuard(port)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path());
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{PROMETHEUS}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let pid_file = common::PidFile::new(&format!("prometheus-{PROMETHEUS}"), child.id());
    let _prometheus = PrometheusGuard {
        child,
        _pid_file: pid_file,
    };
    wait_for("Prometheus ready", Duration::from_secs(30), || {
        prometheus_get("/-/ready").is_some()
    });
    // A full window of healthy scrapes of all three.
    wait_for(
        "three targets up for a window",
        Duration::from_secs(40),
        || {
            query_value(&format!(
                r#"sum(min_over_time(up{{job="llama"}}[{WINDOW}]))"#
            )) == Some(3.0)
                && query_value(&format!(
                    r#"min(count_over_time(up{{job="llama"}}[{WINDOW}]))"#
                ))
                .is_some_and(|n| n >= 9.0)
        },
    );
    let (code, v, text) = watch_once();
    eprintln!("{text}");
    assert_eq!(code, 0, "the healthy fleet is quiet: {text}");
    assert!(findings(&v).is_empty(), "{text}");
    assert_eq!(v["replicas"].as_array().unwrap().len(), 3, "{text}");

    // One slot, four long generations: three wait.
    let _streams: Vec<TcpStream> = (0..4).map(|_| long_generation(QUEUING)).collect();
    let queuing = format!("127.0.0.1:{QUEUING}");
    wait_for(
        "a window of queue on the one-slot server",
        Duration::from_secs(40),
        || {
            query_value(&format!(
                r#"min_over_time(llamacpp:requests_deferred{{instance="{queuing}"}}[{WINDOW}])"#
            ))
            .is_some_and(|q| q >= 3.0)
        },
    );
    common::stop_local_server(STOPPED);
    let stopped = format!("127.0.0.1:{STOPPED}");
    wait_for(
        "the stopped server's up at 0",
        Duration::from_secs(20),
        || query_value(&format!(r#"up{{instance="{stopped}"}}"#)) == Some(0.0),
    );
    let (code, v, text) = watch_once();
    eprintln!("{text}");
    assert_eq!(code, 1, "{text}");
    let found = findings(&v);
    assert!(
        found.contains(&("imbalance".into(), queuing.clone())),
        "{text}"
    );
    assert!(
        found.contains(&("absent".into(), stopped.clone())),
        "{text}"
    );
    let healthy = format!("127.0.0.1:{HEALTHY}");
    assert!(found.iter().all(|(_, r)| *r != healthy), "{text}");
    // Absent is its own finding, never a quiet replica.
    let gone = v["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["replica"] == stopped.as_str())
        .unwrap();
    assert_eq!(gone["absent"], true, "{text}");
    eprintln!("fleet test took {:.1} s", t0.elapsed().as_secs_f64());
}
