//! `golive accept` against scripted servers: verdicts, exit codes, the four outputs,
//! an unreachable server, and an interrupted run that keeps what it measured.

use crate::common;
use crate::fault_server;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{check, report};
use fault_server::{start, Fault};
use golive::accept::TargetLoad;

fn accept(url: &str, out: &Path, extra: &[&str]) -> Output {
    accept_command(url, out, extra).output().unwrap()
}

fn accept_command(url: &str, out: &Path, extra: &[&str]) -> Command {
    let mut c = common::accept_without_agent(url, out);
    c.args([
        "--concurrency",
        "2",
        "--duration",
        "2s",
        "--output-tokens",
        "4",
        "--max-context",
        "512",
    ])
    .args(if extra.contains(&"--request-timeout") {
        &[][..]
    } else {
        &["--request-timeout", "3s"][..]
    })
    .args(extra);
    c
}

/// `golive accept ... | true`: the reader is gone before the verdict line; the run goes
/// on, writes its reports and keeps its exit code (observe: 1).
#[test]
fn a_closed_stdout_keeps_the_verdicts_exit_code() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Ok {
        tokens: 4,
        delay_ms: 2,
    }));
    let dir = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = accept_command(&server.url, dir.path(), &[])
        .stdout(writer)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r = report(dir.path());
    assert_eq!(r["verdict"], "observe", "{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
}

#[test]
fn healthy_server_without_cache_evidence_is_observe_with_all_outputs() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Ok {
        tokens: 4,
        delay_ms: 2,
    }));
    let dir = tempfile::tempdir().unwrap();
    let out = accept(
        &server.url,
        dir.path(),
        &["--reviewer", "Dana Reviewer", "--operator", "ops"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r = report(dir.path());
    assert_eq!(r["complete"], true, "{stderr}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "observe is not release: {stderr}"
    );
    assert_eq!(r["verdict"], "observe", "{}", r["verdict_reason"]);
    // The scripted server exposes no cache evidence: a warning, not a pass.
    assert_eq!(check(&r, "prefix_cache")["status"], "warn");
    assert_eq!(check(&r, "basic_stream")["status"], "pass");
    assert_eq!(check(&r, "ramp_c2_long")["status"], "pass");
    assert_eq!(check(&r, "soak")["status"], "pass");
    assert_eq!(r["reviewer"], "Dana Reviewer");
    assert_eq!(check(&r, "soak")["reviewer"], "Dana Reviewer");
    assert_eq!(r["operator"], "ops");
    assert_eq!(r["measurements"]["ramp"].as_array().unwrap().len(), 4);
    assert_eq!(r["baseline"]["accepted_concurrency"], 2);
    assert!(r["baseline"]["ttft_p95_ms"].as_f64().unwrap() > 0.0);
    // Every check is a JUnit testcase; the Markdown names the verdict.
    let junit = std::fs::read_to_string(dir.path().join("junit.xml")).unwrap();
    // ... and every worksheet item one more, in its own suite.
    assert_eq!(
        junit.matches("<testcase ").count(),
        r["checks"].as_array().unwrap().len() + r["worksheet"].as_array().unwrap().len()
    );
    assert_eq!(junit.matches("classname=\"golive.worksheet\"").count(), 20);
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("**Verdict: observe**"), "{md}");
    assert!(dir.path().join("report.html").exists());
}

#[test]
fn http_500_fails_basic_and_means_rebuild() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Http500));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    std::fs::write(
        &log,
        "INFO start\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
    )
    .unwrap();
    let out = accept(
        &server.url,
        &dir.path().join("out"),
        &["--server-log", log.to_str().unwrap()],
    );
    let r = report(&dir.path().join("out"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(r["verdict"], "rebuild", "{}", r["verdict_reason"]);
    let basic = check(&r, "basic_chat");
    assert_eq!(basic["status"], "fail");
    assert!(basic["measurement"]
        .as_str()
        .unwrap()
        .contains("http_status"));
    assert!(basic["evidence"]
        .as_str()
        .unwrap()
        .contains("CUDA out of memory"));
    assert!(
        basic["request"]["messages"].is_array(),
        "the request that failed is kept"
    );
    // Later load stages are skipped, not run against a broken server.
    assert_eq!(check(&r, "prefix_cache")["status"], "skip");
    assert_eq!(check(&r, "soak")["status"], "skip");
}

/// `--format json`: stdout is the run's events, one JSON object per line, in time order;
/// every check of report.json was an event, the ramp's requests were events, and the last
/// line is the finished report's state with the verdict report.json has.
#[test]
fn format_json_gives_one_event_per_line_ending_with_the_verdict() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Ok {
        tokens: 4,
        delay_ms: 2,
    }));
    let dir = tempfile::tempdir().unwrap();
    let mut extra = common::RAMP_ONLY.to_vec();
    extra.extend(["--format", "json"]);
    let out = accept(&server.url, dir.path(), &extra);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r = report(dir.path());
    assert_eq!(out.status.code(), Some(1), "observe: {stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let times: Vec<f64> = events.iter().map(|e| e["t"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let named = |name: &'static str| events.iter().filter(move |e| e["event"] == name);
    assert_eq!(
        named("check_result").count(),
        r["checks"].as_array().unwrap().len(),
        "{stdout}"
    );
    assert!(
        named("stage_started").any(|e| e["data"] == "ramp"),
        "{stdout}"
    );
    let requests: Vec<_> = named("request").collect();
    assert!(!requests.is_empty(), "{stdout}");
    assert!(
        requests.iter().all(|e| e["data"]["http_status"] == 200),
        "{stdout}"
    );
    let last = events.last().unwrap();
    assert_eq!(last["event"], "report_finished", "{stdout}");
    assert_eq!(last["data"]["complete"], true);
    assert_eq!(last["data"]["verdict"], r["verdict"]);
    assert!(
        !stdout.contains("golive accept: verdict"),
        "no text line: {stdout}"
    );
}

#[test]
fn unreachable_server_exits_3_with_a_report() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let out = accept(&format!("http://127.0.0.1:{port}"), dir.path(), &[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Refused at once; the bound only guards against a retry loop (room for a busy machine).
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "took {:?}",
        t0.elapsed()
    );
    let r = report(dir.path());
    assert_eq!(check(&r, "service_health")["status"], "fail");
    assert_eq!(r["verdict"], "rebuild");
}

#[test]
fn bad_usage_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = accept("ftp://nowhere", dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(common::golive_bin())
        .args(["accept", "--out", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--url is required");
}

#[test]
fn hanging_server_is_bounded_by_the_request_timeout() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::HangBeforeFirstByte));
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let out = accept(&server.url, dir.path(), &["--request-timeout", "1s"]);
    // The server never answers: bounded at all is every request's timeout kept (room for
    // a busy machine).
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(out.status.code(), Some(1));
    let r = report(dir.path());
    assert!(check(&r, "basic_chat")["measurement"]
        .as_str()
        .unwrap()
        .contains("timeout"));
}

#[cfg(unix)]
#[test]
fn interrupted_run_keeps_a_partial_report() {
    interrupt_mid_soak("-INT");
}

/// `kill`, `docker stop` and systemd send SIGTERM: the same partial report as Ctrl-C.
#[cfg(unix)]
#[test]
fn terminated_run_keeps_a_partial_report() {
    interrupt_mid_soak("-TERM");
}

/// Sends `signal` once the soak is under way; the run ends with exit 1 and all four
/// report files, holding what was measured.
fn interrupt_mid_soak(signal: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Ok {
        tokens: 4,
        delay_ms: 5,
    }));
    let dir = tempfile::tempdir().unwrap();
    let mut child = common::accept_without_agent(&server.url, dir.path())
        .args([
            "--concurrency",
            "1",
            "--duration",
            "60s",
            "--output-tokens",
            "4",
            "--max-context",
            "512",
        ])
        .spawn()
        .unwrap();
    // Wait until the soak is under way, then Ctrl-C: the ramp has been saved, and the
    // server has had a request since (the soak follows the ramp at once).
    let saved_ramp = || {
        std::fs::read(dir.path().join("report.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|r| {
                r["checks"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["id"] == "ramp_c1_long"))
            })
    };
    common::wait_until("the ramp saved", Duration::from_secs(30), saved_ramp);
    let served = || server.requests.load(std::sync::atomic::Ordering::Relaxed);
    let after_ramp = served();
    common::wait_until("a soak request", Duration::from_secs(30), || {
        served() > after_ramp
    });
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = child.wait().unwrap().code();
    assert_eq!(code, Some(1));
    let r = report(dir.path());
    assert_eq!(r["complete"], false);
    assert!(r["verdict"].is_null());
    assert_eq!(
        check(&r, "ramp_c1_short")["status"],
        "pass",
        "what was measured is kept"
    );
    for file in ["report.json", "report.md", "junit.xml", "report.html"] {
        assert!(dir.path().join(file).exists(), "{signal}: no {file}");
    }
}

#[test]
fn latency_objective_missed_at_the_expected_load_means_expand_with_a_boundary_record() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Ok {
        tokens: 4,
        delay_ms: 30,
    }));
    let dir = tempfile::tempdir().unwrap();
    let out = accept(&server.url, dir.path(), &["--slo-ttft-p95-ms", "5"]);
    let r = report(dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(r["verdict"], "expand", "{}", r["verdict_reason"]);
    let first = check(&r, "ramp_c1_short");
    assert_eq!(first["status"], "fail");
    assert_eq!(first["impact"], "capacity");
    assert!(first["measurement"]
        .as_str()
        .unwrap()
        .contains("above the SLO"));
    let boundary = &first["data"]["boundary"];
    assert_eq!(boundary["concurrency"], 1);
    assert_eq!(boundary["output_limit"], 4);
    assert!(boundary["last_success_at"].is_string(), "{boundary:#}");
    assert!(boundary["over_steps"].is_array());
    // Steps after the boundary are listed as not run; the soak needs an accepted load.
    assert_eq!(check(&r, "ramp_c2_long")["status"], "skip");
    assert_eq!(check(&r, "soak")["status"], "skip");
}

#[test]
fn failures_beyond_the_expected_context_are_limits_and_observe() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Ok {
        tokens: 4,
        delay_ms: 30,
    }));
    let dir = tempfile::tempdir().unwrap();
    // Expected context 10 tokens: every step is beyond it, so the first failure is a limit.
    let out = accept(
        &server.url,
        dir.path(),
        &[
            "--slo-ttft-p95-ms",
            "5",
            "--expected-context",
            "10",
            "--skip",
            "soak",
        ],
    );
    let r = report(dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(check(&r, "ramp_c1_short")["impact"], "limit");
    assert_eq!(r["verdict"], "observe", "{}", r["verdict_reason"]);
}

#[test]
fn every_node_gets_service_and_basic_checks() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let good = rt.block_on(start(Fault::Ok {
        tokens: 4,
        delay_ms: 2,
    }));
    let bad = rt.block_on(start(Fault::Http500));
    let dir = tempfile::tempdir().unwrap();
    let out = accept(
        &good.url,
        dir.path(),
        &["--url", &bad.url, "--skip", "ramp", "--skip", "soak"],
    );
    let r = report(dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(r["urls"].as_array().unwrap().len(), 2);
    assert_eq!(check(&r, "basic_chat")["status"], "pass");
    assert_eq!(check(&r, "service_health_node2")["status"], "pass");
    let node2 = check(&r, "basic_chat_node2");
    assert_eq!(node2["status"], "fail");
    assert_eq!(node2["url"], bad.url.as_str());
    assert_eq!(r["verdict"], "rebuild", "{}", r["verdict_reason"]);
}

#[test]
fn no_content_keeps_prompts_and_answers_out_of_the_report() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Ok {
        tokens: 4,
        delay_ms: 2,
    }));
    let dir = tempfile::tempdir().unwrap();
    accept(
        &server.url,
        dir.path(),
        &["--no-content", "--skip", "ramp", "--skip", "soak"],
    );
    let text = std::fs::read_to_string(dir.path().join("report.json")).unwrap();
    assert!(!text.contains("Say hello"), "the basic prompt leaked");
    assert!(
        !text.contains("mail-order shop"),
        "the prefix-cache system prompt leaked"
    );
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    let content = check(&r, "basic_chat")["request"]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(content.starts_with("sha256:"), "{content}");
}

/// A replica of known capacity (4 slots of 200 ms: 20 req/s) answers how many replicas
/// three targets need: one run for the verdict, the same steps for the other targets.
/// `golive accept --target-rate 40` against a replica of known capacity (4 slots x 200 ms =
/// 20 req/s) with an E2E p95 objective of 300 ms, writing to `out`; `extra` is appended.
fn accept_known_replica(out: &Path, extra: &[&str]) -> Output {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Slots {
        slots: 4,
        service_ms: 200,
    }));
    let mut args = vec![
        "--concurrency",
        "8",
        "--ramp-requests",
        "4",
        "--slo-e2e-p95-ms",
        "300",
        "--target-rate",
        "40",
    ];
    args.extend_from_slice(&common::RAMP_ONLY);
    args.extend_from_slice(extra);
    accept(&server.url, out, &args)
}

#[test]
fn a_replica_of_known_capacity_gives_the_replica_count_for_three_targets() {
    use golive::accept::capacity_answer;
    use golive::report::Objectives;
    let dir = tempfile::tempdir().unwrap();
    let out = accept_known_replica(dir.path(), &[]);
    let r = report(dir.path());
    let cap = check(&r, "capacity");
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(cap["status"], "fail", "{cap:#}\n{text}");
    assert_eq!(cap["impact"], "capacity");
    assert_eq!(r["verdict"], "expand", "{}", r["verdict_reason"]);
    let per = cap["data"]["per_replica"].as_f64().unwrap();
    assert!(
        (16.8..=20.5).contains(&per),
        "one replica holds ~20 req/s: {cap:#}"
    );
    assert_eq!(cap["data"]["replicas"], 3, "{cap:#}");
    // The capacity line of the baseline, for watch and rules: the holding step's goodput.
    assert_eq!(
        r["baseline"]["capacity_rps"],
        cap["data"]["per_replica_rps"]
    );
    assert!(
        r["baseline"]["capacity_rps"].as_f64().unwrap() > 0.0,
        "{:#}",
        r["baseline"]
    );
    assert!(
        cap["measurement"].as_str().unwrap().contains("E2E p95"),
        "{cap:#}"
    );

    let steps: Vec<golive::report::RampStep> =
        serde_json::from_value(r["measurements"]["ramp"].clone()).unwrap();
    let slo = Objectives {
        e2e_p95_ms: Some(300.0),
        ..Default::default()
    };
    for (target, replicas) in [(15.0, 1), (40.0, 3), (70.0, 5)] {
        let a = capacity_answer(&steps, TargetLoad::Rate(target), &slo, 0.2, 1).unwrap();
        assert_eq!(a.replicas, replicas, "target {target}: {}", a.line());
    }
    assert!(r["verdict_reason"]
        .as_str()
        .unwrap()
        .contains("capacity: target 40.00 req/s"));
    eprintln!("{}", cap["measurement"]);
}

/// `--capacity-repeat 3`: the step the answer rests on is measured twice more (steps in
/// report.json, requests at the server's pace), and the answer carries their interval.
#[test]
fn capacity_repeat_measures_the_capacity_step_again_and_gives_an_interval() {
    let dir = tempfile::tempdir().unwrap();
    let out = accept_known_replica(dir.path(), &["--capacity-repeat", "3"]);
    let r = report(dir.path());
    let cap = check(&r, "capacity");
    let text = String::from_utf8_lossy(&out.stderr);
    let steps = r["measurements"]["ramp"].as_array().unwrap();
    let repeats: Vec<&serde_json::Value> = steps
        .iter()
        .filter(|s| s["label"].as_str().unwrap().contains(", repeat "))
        .collect();
    assert_eq!(repeats.len(), 2, "{cap:#}\n{text}");
    let interval = &cap["data"]["interval"];
    assert_eq!(interval["samples"].as_array().unwrap().len(), 3, "{cap:#}");
    // The repeats are of one step, run in full (4 requests per stream), with checks of their own.
    let first = repeats[0]["label"].as_str().unwrap();
    let of = first.rsplit_once(", repeat ").unwrap().0;
    let original = steps.iter().find(|s| s["label"] == of).unwrap();
    for s in &repeats {
        assert_eq!(s["concurrency"], original["concurrency"], "{s:#}");
        assert_eq!(s["requests"], original["requests"], "{s:#}");
    }
    let c = original["concurrency"].as_u64().unwrap();
    let kind = if of.contains(" x short") {
        "short"
    } else {
        "long"
    };
    check(&r, &format!("ramp_c{c}_{kind}_repeat3"));
    let (low, high) = (
        interval["low"].as_f64().unwrap(),
        interval["high"].as_f64().unwrap(),
    );
    let per = cap["data"]["per_replica"].as_f64().unwrap();
    assert!(low <= per && per <= high, "{cap:#}");
    assert!(
        cap["measurement"]
            .as_str()
            .unwrap()
            .contains("over 3 measurements"),
        "{cap:#}"
    );
}

#[test]
fn the_capacity_answer_counts_gpus_from_the_bundles_launch_layout() {
    let dir = tempfile::tempdir().unwrap();
    // One server of this layout: TP 4 x PP 1 x DP 2 = 8 GPUs.
    let node = common::bundle::bundle(
        dir.path(),
        "node0",
        &[(
            "cmdline.txt",
            "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 4 --data-parallel-size 2",
        )],
    );
    let out = dir.path().join("run");
    let o = accept_known_replica(&out, &["--bundle", node.to_str().unwrap()]);
    let r = report(&out);
    let cap = check(&r, "capacity");
    assert_eq!(
        cap["data"]["gpus_per_replica"],
        8,
        "{cap:#}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let replicas = cap["data"]["replicas"].as_u64().unwrap();
    let line = cap["measurement"].as_str().unwrap();
    assert!(
        line.contains(&format!("= {} GPUs (8 per replica", replicas * 8)),
        "{line}"
    );
}

/// A replica of 10 slots (200 ms each) and an E2E objective of 300 ms: concurrency 10 holds,
/// 11 queues one request behind a full batch. The doubling ramp brackets it between 8 and 16;
/// the search bisects to 12 (fails), 10 (holds), 11 (fails): within 10% of the holding end.
#[test]
fn the_boundary_search_narrows_the_doubling_ramps_bracket_to_within_ten_percent() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Slots {
        slots: 10,
        service_ms: 200,
    }));
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--concurrency",
        "16",
        "--slo-e2e-p95-ms",
        "300",
        "--target-concurrency",
        "25",
    ];
    let args = [&args[..], &common::RAMP_ONLY[..]].concat();
    let out = accept(&server.url, dir.path(), &args);
    let r = report(dir.path());
    let b = check(&r, "ramp_boundary");
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(b["status"], "pass", "{b:#}\n{text}");
    assert_eq!(
        (b["data"]["holds"].as_u64(), b["data"]["fails"].as_u64()),
        (Some(10), Some(11)),
        "{b:#}"
    );
    assert_eq!(b["data"]["search_steps"], 3, "{b:#}");
    assert!(b["data"]["width"].as_f64().unwrap() <= 0.10, "{b:#}");
    // Each search step is a ramp step of its own, kept in the report.
    assert_eq!(check(&r, "ramp_c12_short")["status"], "fail");
    assert_eq!(check(&r, "ramp_c10_short")["status"], "pass");
    assert_eq!(check(&r, "ramp_c11_short")["status"], "fail");
    assert!(check(&r, "ramp_c11_short")["test_case"]
        .as_str()
        .unwrap()
        .contains("boundary search"));
    // The capacity answer of the short requests rests on the narrowed bracket: 10 in flight
    // hold, 11 fail. (The run's own answer is the long requests': they held at 8 and were not
    // run above it, so 8 is all that is known of them.)
    let a = short_requests_answer(&r, 300.0, TargetLoad::Concurrency(25));
    assert_eq!(
        (a.per_replica, a.failing_concurrency),
        (10.0, Some(11)),
        "{}",
        a.line()
    );
    assert_eq!(a.replicas, 3, "25 x 1.2 / 10: {}", a.line());
    assert_eq!(check(&r, "capacity")["data"]["per_replica"], 8.0);

    // Without a budget the bracket stays as the doubling ramp left it, and the check says so.
    let dir = tempfile::tempdir().unwrap();
    let mut no_time = args.to_vec();
    no_time.extend(["--boundary-budget", "0s"]);
    accept(&server.url, dir.path(), &no_time);
    let r = report(dir.path());
    let b = check(&r, "ramp_boundary");
    assert_eq!(b["status"], "warn", "{b:#}");
    assert_eq!(
        (b["data"]["holds"].as_u64(), b["data"]["fails"].as_u64()),
        (Some(8), Some(16)),
        "{b:#}"
    );
    assert_eq!(b["data"]["search_steps"], 0);
}

/// The capacity answer of a run's short requests alone, at an E2E p95 objective of `e2e_ms`
/// and 20% headroom (a run's own answer is of the kind that binds).
pub(crate) fn short_requests_answer(
    r: &serde_json::Value,
    e2e_ms: f64,
    target: TargetLoad,
) -> golive::accept::CapacityAnswer {
    let steps: Vec<golive::report::RampStep> =
        serde_json::from_value(r["measurements"]["ramp"].clone()).unwrap();
    let short: Vec<_> = steps
        .into_iter()
        .filter(|s| s.label.contains(" x short"))
        .collect();
    let slo = golive::report::Objectives {
        e2e_p95_ms: Some(e2e_ms),
        ..Default::default()
    };
    golive::accept::capacity_answer(&short, target, &slo, 0.2, 1).unwrap()
}
