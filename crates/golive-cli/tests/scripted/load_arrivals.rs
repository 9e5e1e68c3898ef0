//! Open-loop arrivals and the client's self-check (issue 27, item 3): `golive load --rate R
//! --arrival poisson|gamma` keeps the rate, and says how late it started requests against the
//! schedule; a client that cannot keep the schedule (here: one request in flight at a time
//! against a server that takes 30 ms per answer) is marked `client_limited`.

use crate::common;
use crate::fault_server;

use std::process::Command;

use fault_server::{start, Fault, FaultServer};

/// A scripted server and the runtime that serves it (kept alive together).
fn serve(fault: Fault) -> (tokio::runtime::Runtime, FaultServer) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(fault));
    (rt, server)
}

/// `golive load --url URL` with two-token answers and no calibration, then `extra`.
fn command(url: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(common::golive_bin());
    c.args(["load", "--url", url, "--max-tokens", "2", "--no-calibrate"])
        .args(extra);
    c
}

/// The exit code, the JSON summary (`--json FILE`: these tests time the client, which
/// printing every request's event line would load) and stderr of [`command`].
fn load(url: &str, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("summary.json");
    let out = command(url, extra)
        .arg("--json")
        .arg(&file)
        .output()
        .unwrap();
    let json = std::fs::read(&file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    (
        out.status.code(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_poisson_schedule_keeps_its_rate_and_reports_its_lateness() {
    let (_rt, server) = serve(Fault::Ok {
        tokens: 2,
        delay_ms: 1,
    });
    let (code, s, err) = load(
        &server.url,
        &[
            "--rate",
            "200",
            "--requests",
            "300",
            "--arrival",
            "poisson",
            "--seed",
            "3",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(s["arrival"]["kind"], "poisson", "{s:#}");
    assert_eq!(s["requests"], 300);
    assert_eq!(s["schedule_lateness_ms"]["count"], 300, "{s:#}");
    // Whether the client kept up is the lateness it measured (p95 above 10 ms at this rate),
    // not a promise of this test: on 2 shared cores a busy neighbour can delay the client.
    let late_p95 = s["schedule_lateness_ms"]["p95"].as_f64().unwrap();
    assert_eq!(s["client_limited"], late_p95 > 10.0, "{s:#}");
    // 300 exponential intervals of mean 5 ms: 1.5 s within a few standard deviations
    // (sd of the sum: 5 ms * sqrt(300) = 87 ms), plus the last answer.
    let secs = s["duration_s"].as_f64().unwrap();
    assert!((1.1..2.2).contains(&secs), "{secs} s");
    assert!(s["client_cpu_share"].as_f64().unwrap() > 0.0, "{s:#}");
}

#[test]
fn a_client_that_cannot_keep_the_schedule_is_client_limited() {
    let (_rt, server) = serve(Fault::Ok {
        tokens: 2,
        delay_ms: 30,
    });
    // 100 req/s planned, one in flight at a time, 60 ms an answer: the schedule slips.
    let (code, s, err) = load(
        &server.url,
        &["--rate", "100", "--requests", "20", "--concurrency", "1"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(s["client_limited"], true, "{s:#}");
    let capped = s["schedule_lateness_ms"]["p95"].as_f64().unwrap();
    assert!(capped > 100.0, "{s:#}");
    // The same load with room in flight: the cap was what held the starts back. Whether the
    // client kept the 10 ms interval is then the lateness it measured, not a promise of this
    // test (a fresh clone at 90ebca0, beside three other tests on 2 cores: p95 11.3 ms).
    let (_, s, _) = load(
        &server.url,
        &["--rate", "100", "--requests", "20", "--concurrency", "64"],
    );
    let room = s["schedule_lateness_ms"]["p95"].as_f64().unwrap();
    assert!(room * 4.0 < capped, "{room} ms against {capped} ms: {s:#}");
    assert_eq!(s["client_limited"], room > 10.0, "{s:#}");
}

#[test]
fn arrival_flags_that_do_not_fit_are_usage_errors() {
    let (_rt, server) = serve(Fault::Ok {
        tokens: 2,
        delay_ms: 1,
    });
    for bad in [
        &["--arrival", "poisson"][..],
        &["--rate", "10", "--arrival", "gamma"],
        &["--rate", "10", "--arrival", "poisson", "--burstiness", "2"],
        &["--rate", "10", "--arrival", "gamma", "--burstiness", "0"],
        &["--rate", "10", "--arrival", "uniform"],
        &["--rate", "10", "--rate-ramp", "1:20:10"],
        &["--rate-ramp", "1:0:10"],
        &["--rate-ramp", "1:20"],
        &["--rate-ramp", "1:20:10", "--think-time", "1s"],
    ] {
        let (code, _, err) = load(&server.url, bad);
        assert_eq!(code, Some(2), "{bad:?}: {err}");
    }
}

/// Every request of a load carries an `X-Request-Id` (`golive-<run>-<index>`), the CSV keeps
/// it, and a failure's evidence names it, so its server log line can be found.
#[test]
fn every_request_carries_an_x_request_id_and_a_failure_names_it() {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::{Arc, Mutex};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let ids = seen.clone();
    std::thread::spawn(move || {
        for sock in listener.incoming().flatten() {
            let mut reader = BufReader::new(sock.try_clone().unwrap());
            let mut line = String::new();
            let mut length = 0usize;
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("x-request-id:") {
                    ids.lock().unwrap().push(v.trim().to_string());
                }
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0u8; length];
            let _ = std::io::Read::read_exact(&mut reader, &mut body);
            let answer = "{\"error\":{\"message\":\"scripted\"}}";
            let _ = write!(
                &sock,
                "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("r.csv");
    let (code, s, err) = load(
        &url,
        &[
            "--model",
            "m",
            "--requests",
            "3",
            "--csv",
            csv.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(1), "every request failed: {err}");
    let ids = seen.lock().unwrap().clone();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.iter().all(|i| i.starts_with("golive-")), "{ids:?}");
    let example = s["error_examples"]["http_status"].as_str().unwrap();
    assert!(
        ids.iter()
            .any(|i| example.contains(&format!("X-Request-Id {i}"))),
        "{example}"
    );
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert!(
        rows.lines().next().unwrap().ends_with(",request_id"),
        "{rows}"
    );
    for id in &ids {
        assert!(rows.contains(id.as_str()), "{id} not in {rows}");
    }
}

/// Over-saturation (issue 27 item 2): a server of 2 slots x 200 ms holds 10 req/s. At 25 req/s
/// the requests in flight and the first token's wait both climb: the run stops early, with
/// its statistics and the slopes, instead of waiting for timeouts. At 5 req/s it runs to the
/// end.
#[test]
fn an_open_loop_above_capacity_stops_early_on_over_saturation_and_below_it_runs_out() {
    let (_rt, server) = serve(Fault::Slots {
        slots: 2,
        service_ms: 200,
    });
    let (code, s, err) = load(
        &server.url,
        &[
            "--rate",
            "25",
            "--duration",
            "60s",
            "--saturation-window",
            "4s",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let sat = &s["saturation"];
    assert!(sat.is_object(), "no early stop: {s:#}");
    let at = sat["at_s"].as_f64().unwrap();
    assert!((4.0..20.0).contains(&at), "{sat:#}");
    // 25 arrive, 10 finish per second: about 15 more in flight every second.
    let slope = sat["in_flight_slope"].as_f64().unwrap();
    assert!((5.0..25.0).contains(&slope), "{sat:#}");
    assert!(sat["ttft_slope_ms"].as_f64().unwrap() > 0.0, "{sat:#}");
    assert!(s["duration_s"].as_f64().unwrap() < 45.0, "{s:#}");
    assert!(s["requests"].as_u64().unwrap() > 20, "{s:#}");
    let (code, s, err) = load(
        &server.url,
        &[
            "--rate",
            "5",
            "--duration",
            "8s",
            "--saturation-window",
            "4s",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(s.get("saturation").is_none(), "{s:#}");
    assert!(s["requests"].as_u64().unwrap() >= 35, "{s:#}");
}

/// `--rate-ramp START:END:SECS`: the schedule walks the rate up; the run lasts the ramp, and
/// the requests started in each second rise from START to END (measured from the CSV's
/// scheduled times, which the client kept).
#[test]
fn a_rate_ramp_walks_the_rate_up_over_its_length() {
    let (_rt, server) = serve(Fault::Ok {
        tokens: 2,
        delay_ms: 1,
    });
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("r.csv");
    let (code, s, err) = load(
        &server.url,
        &[
            "--rate-ramp",
            "4:36:3",
            "--saturation-window",
            "0s",
            "--csv",
            csv.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    // (4 + 36) / 2 * 3 = 60 requests over the 3 s ramp.
    let n = s["requests"].as_u64().unwrap();
    assert!((59..=61).contains(&n), "{n}: {s:#}");
    assert_eq!(s["rate"], 20.0, "the mean rate: {s:#}");
    assert_eq!(s["rate_ramp"]["end"], 36.0, "{s:#}");
    assert_eq!(s["client_limited"], false, "{s:#}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut per_second = [0u32; 3];
    for row in text.lines().skip(1) {
        let scheduled_ms: f64 = row.split(',').nth(1).unwrap().parse().unwrap();
        if let Some(c) = per_second.get_mut((scheduled_ms / 1000.0) as usize) {
            *c += 1;
        }
    }
    // Expected 9.3, 20 and 30.7 starts in the three seconds.
    assert!((8..=11).contains(&per_second[0]), "{per_second:?}");
    assert!((18..=22).contains(&per_second[1]), "{per_second:?}");
    assert!((28..=33).contains(&per_second[2]), "{per_second:?}");
}

/// A ramp past a server's capacity (10 req/s: 2 slots of 200 ms) stops where it stops keeping
/// up: after the ramp's rate crossed 10/s (at 4.2 s), long before the ramp's end.
#[test]
fn a_rate_ramp_past_capacity_stops_where_the_server_stops_keeping_up() {
    let (_rt, server) = serve(Fault::Slots {
        slots: 2,
        service_ms: 200,
    });
    let (code, s, err) = load(
        &server.url,
        &["--rate-ramp", "2:40:20", "--saturation-window", "4s"],
    );
    assert_eq!(code, Some(0), "{err}");
    let at = s["saturation"]["at_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("no early stop: {s:#}"));
    let rate_there = 2.0 + 38.0 * at / 20.0;
    assert!((10.0..32.0).contains(&rate_there), "{at} s: {rate_there}/s");
    assert!(s["duration_s"].as_f64().unwrap() < 19.0, "{s:#}");
    // The text names the ramp's rate where it stopped.
    let out = command(
        &server.url,
        &["--rate-ramp", "2:40:20", "--saturation-window", "4s"],
    )
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("STOPPED EARLY") && text.contains("the ramp's rate there"),
        "{text}"
    );
}
