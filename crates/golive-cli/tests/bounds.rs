//! Hostile numbers, files and peers (issue 24, bounds and early validation), driving the
//! real binary: each ends with a clear error, quickly and with bounded memory.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn golive() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_golive"));
    for v in [
        "GOLIVE_URL",
        "GOLIVE_MODEL",
        "GOLIVE_PROFILE",
        "GOLIVE_API_KEY",
    ] {
        c.env_remove(v);
    }
    c
}

fn run(args: &[&str]) -> Output {
    golive().args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs golive and samples its peak resident memory (VmHWM, kB) until it exits.
fn run_measured(args: &[&str], limit: Duration) -> (Output, u64, Duration) {
    let start = Instant::now();
    let mut child = golive()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0;
    while child.try_wait().unwrap().is_none() {
        let status = std::fs::read_to_string(&status_file).unwrap_or_default();
        if let Some(kb) = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("golive {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let out = child.wait_with_output().unwrap();
    (out, peak_kb, start.elapsed())
}

fn temp_file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// A port with a listener that counts nothing but connections: after the run, a
/// connection attempt shows as a pending accept.
fn silent_listener() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    (l, url)
}

fn saw_no_connection(l: &TcpListener) -> bool {
    matches!(l.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

#[test]
fn every_float_flag_refuses_huge_negative_and_nan_with_the_range() {
    let cases: &[(&[&str], &str)] = &[
        (&["probe", "--url", "http://127.0.0.1:1"], "--deadline-s"),
        (&["load", "--url", "http://127.0.0.1:1"], "--rate"),
        (&["watch", "--url", "http://127.0.0.1:1"], "--stall-after-s"),
        (&["watch", "--url", "http://127.0.0.1:1"], "--probe-every-s"),
        (
            &["watch", "--url", "http://127.0.0.1:1"],
            "--probe-deadline-s",
        ),
        (&["watch", "--url", "http://127.0.0.1:1"], "--tolerance"),
        (
            &["watch", "--url", "http://127.0.0.1:1"],
            "--queue-min-growth",
        ),
        (
            &["accept", "--url", "http://127.0.0.1:1"],
            "--max-stream-gap-s",
        ),
        (
            &["accept", "--url", "http://127.0.0.1:1"],
            "--slo-ttft-p95-ms",
        ),
        (&["accept", "--url", "http://127.0.0.1:1"], "--agent-mix"),
    ];
    for (args, flag) in cases {
        for bad in ["1e308", "-1", "NaN", "inf"] {
            let arg = format!("{flag}={bad}");
            let mut all = args.to_vec();
            all.push(&arg);
            let o = run(&all);
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{all:?}: {e}");
            assert!(
                e.contains(flag) && e.contains("is not a number between"),
                "{all:?}: {e}"
            );
        }
    }
}

#[test]
fn sizes_are_capped_before_anything_is_built() {
    for (args, flag) in [
        (
            &["load", "--url", "http://127.0.0.1:1"][..],
            "--prompt-tokens",
        ),
        (
            &["accept", "--url", "http://127.0.0.1:1"][..],
            "--prefix-words",
        ),
        (
            &["accept", "--url", "http://127.0.0.1:1"][..],
            "--short-prompt",
        ),
    ] {
        let mut all = args.to_vec();
        all.extend([flag, "4000000000"]);
        let o = run(&all);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {e}");
        assert!(e.contains("is not in 1..=2097152"), "{all:?}: {e}");
    }
    let o = run(&["load", "--url", "http://x", "--duration", "400days"]);
    assert!(stderr(&o).contains("366 days"), "{}", stderr(&o));
    // The capacity step is measured 1 to 10 times.
    for n in ["0", "11"] {
        let o = run(&["accept", "--url", "http://x", "--capacity-repeat", n]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("is not in 1..=10"), "{}", stderr(&o));
    }
    // The boundary search bisects the concurrency or the offered rate, nothing else.
    let o = run(&["accept", "--url", "http://x", "--boundary-by", "tokens"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("[possible values: concurrency, rate]"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn dev_zero_as_a_file_argument_is_a_clear_error_with_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out").display().to_string();
    let (_l, url) = silent_listener();
    let runs: Vec<Vec<&str>> = vec![
        vec![
            "accept",
            "--url",
            &url,
            "--out",
            &out,
            "--tools",
            "/dev/zero",
        ],
        vec![
            "accept",
            "--url",
            &url,
            "--out",
            &out,
            "--cases",
            "/dev/zero",
        ],
        vec!["signoff", "/dev/zero", "--verify"],
        vec!["rules", "--lint", "/dev/zero"],
        vec!["load", "merge", "/dev/zero"],
        vec!["check", "--recipe", "/dev/zero", "/tmp"],
        vec!["replay", "--url", &url, "/dev/zero"],
    ];
    for args in runs {
        let (o, peak_kb, took) = run_measured(&args, Duration::from_secs(30));
        let e = stderr(&o);
        assert!(!o.status.success(), "{args:?}: {e}");
        assert!(peak_kb < 200 * 1024, "{args:?}: peak RSS {peak_kb} kB");
        assert!(took < Duration::from_secs(15), "{args:?} took {took:?}");
        assert!(!e.contains("panicked"), "{args:?}: {e}");
    }
}

#[test]
fn a_typo_in_tools_or_cases_fails_before_the_first_request() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out").display().to_string();
    let bad_json = temp_file(&dir, "tools.json", "[{\"type\": \"function\",");
    let bad_profile = temp_file(
        &dir,
        "p.toml",
        "name = \"p\"\n[packages]\nvllm = \">=0.1.0.x\"\n",
    );
    for extra in [
        vec!["--tools", "typo.json"],
        vec!["--tools", bad_json.as_str()],
        vec!["--cases", "typo.toml"],
        vec!["--profile", bad_profile.as_str()],
    ] {
        let (l, url) = silent_listener();
        let mut args = vec!["accept", "--url", &url, "--out", &out];
        args.extend(&extra);
        let start = Instant::now();
        let o = run(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {e}");
        assert!(start.elapsed() < Duration::from_secs(5), "{extra:?}");
        assert!(saw_no_connection(&l), "{extra:?}: a request went out first");
    }
}

#[test]
fn accept_refuses_a_fifo_server_log_at_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("log.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let (l, url) = silent_listener();
    let out = dir.path().join("out").display().to_string();
    let o = run(&[
        "accept",
        "--url",
        &url,
        "--out",
        &out,
        "--server-log",
        fifo.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
    assert!(saw_no_connection(&l));
}

/// A scripted server whose every answer is an endless body (a real server cannot be
/// made to send one): headers, then zeros until the client hangs up.
fn endless_body_server() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            std::thread::spawn(move || endless_answer(conn));
        }
    });
    format!("http://{addr}")
}

fn endless_answer(mut conn: TcpStream) {
    let mut head = String::new();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    while reader.read_line(&mut head).unwrap_or(0) > 2 {
        head.clear();
    }
    let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n[");
    let chunk = vec![b' '; 64 << 10];
    while conn.write_all(&chunk).is_ok() {}
}

#[test]
fn an_endless_body_ends_with_an_error_under_the_cap() {
    let url = endless_body_server();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out").display().to_string();
    for args in [
        vec!["probe", "--url", url.as_str(), "--deadline-s", "60"],
        vec![
            "accept",
            "--url",
            url.as_str(),
            "--out",
            out.as_str(),
            "--skip",
            "soak",
        ],
    ] {
        let (o, peak_kb, took) = run_measured(&args, Duration::from_secs(120));
        // probe prints its failure; accept records it in the report (and exits 1).
        let report = std::fs::read_to_string(dir.path().join("out/report.json"));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            report.unwrap_or_default()
        );
        assert!(!o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(peak_kb < 200 * 1024, "{args:?}: peak RSS {peak_kb} kB");
        assert!(took < Duration::from_secs(60), "{args:?}: {took:?}");
        assert!(text.contains("larger than 16 MiB"), "{args:?}: {text}");
    }
}

#[test]
fn deeply_nested_promql_and_yaml_end_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("{}up{}", "(".repeat(50_000), ")".repeat(50_000));
    let rules = format!("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: '{deep}'\n");
    let promql = temp_file(&dir, "deep-promql.yml", &rules);
    let yaml = temp_file(&dir, "deep.yml", &"[".repeat(80_000));
    let metrics = temp_file(&dir, "m.prom", "# TYPE up gauge\nup 1\n");
    for (file, want) in [(&promql, "nests"), (&yaml, "levels deep")] {
        let (o, _, took) = run_measured(
            &["rules", "--lint", file, "--metrics-file", &metrics],
            Duration::from_secs(20),
        );
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert_ne!(o.status.code(), None, "{file}: killed by a signal: {text}");
        assert!(!text.contains("panicked"), "{file}: {text}");
        assert!(text.contains(want), "{file}: {text}");
        assert!(took < Duration::from_secs(5), "{file}: {took:?}");
    }
}

#[test]
fn replay_with_a_non_object_request_and_a_huge_shard_count_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let reg = temp_file(
        &dir,
        "reg.json",
        r#"{"golive_regression": 1, "check": "c", "saved_at": "2026-01-01T00:00:00Z",
            "url": "http://x", "expect": {"answer": "text"}, "content_withheld": false,
            "request": [1, 2], "observed": {"kind": "reply", "problems": [], "duration_ms": 1}}"#,
    );
    let o = run(&["replay", "--url", "http://127.0.0.1:1", &reg]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("must be a JSON object"),
        "{}",
        stderr(&o)
    );
    let o = run(&["load", "--url", "http://x", "--shard", "0/4294967295"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("COUNT <= 10000"), "{}", stderr(&o));
}

#[test]
fn a_slow_client_does_not_block_healthz() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    // A target that answers every scrape with an empty exposition: watch keeps running (an
    // unreachable target would end it at once, and --listen with it).
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", target.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut c in target.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = std::io::Read::read(&mut c, &mut buf);
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let mut child = golive()
        .args(["watch", "--url", &url, "--interval", "1s"])
        .args(["--window", "2s", "--duration", "60s", "--listen", &listen])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut slow = loop {
        if let Ok(c) = TcpStream::connect(&listen) {
            break c;
        }
        assert!(Instant::now() < deadline, "--listen never bound");
        std::thread::sleep(Duration::from_millis(50));
    };
    // The slow client sends half a request line and then nothing.
    slow.write_all(b"GET /hea").unwrap();
    let start = Instant::now();
    let mut fast = TcpStream::connect(&listen).unwrap();
    fast.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    write!(fast, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = String::new();
    let read = fast.read_to_string(&mut answer);
    let _ = child.kill();
    let _ = child.wait();
    assert!(read.is_ok(), "healthz blocked: {read:?}");
    assert!(answer.ends_with("ok\n"), "{answer}");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    drop(slow);
}

#[test]
fn a_shard_file_claiming_four_billion_shards_is_refused() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../golive/tests/fixtures/load/load-shard-0-of-2.json");
    let doc = std::fs::read_to_string(fixture).unwrap();
    assert!(doc.contains("\"count\": 2"));
    let dir = tempfile::tempdir().unwrap();
    let claim = temp_file(
        &dir,
        "s.json",
        &doc.replace("\"count\": 2", "\"count\": 4294967295"),
    );
    let (o, peak_kb, took) = run_measured(&["load", "merge", &claim], Duration::from_secs(30));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("golive merges 1 to 10000 shards"), "{e}");
    assert!(
        peak_kb < 200 * 1024 && took < Duration::from_secs(5),
        "{peak_kb} kB {took:?}"
    );
}

#[test]
fn max_input_sets_the_cap_of_every_input_file_within_its_range() {
    let dir = tempfile::tempdir().unwrap();
    // 64 KiB of a shard file: under the default cap, over a cap of 8 KiB.
    let big = temp_file(
        &dir,
        "shard.json",
        &format!("{{\"pad\": \"{}\"}}", "x".repeat(64 << 10)),
    );
    let capped = run(&["--max-input", "8KiB", "load", "merge", &big]);
    let e = stderr(&capped);
    assert!(!capped.status.success(), "{e}");
    assert!(e.contains("8192 bytes") && e.contains("--max-input"), "{e}");
    // The default cap reads it (it then fails as a shard file, for its content).
    let default = run(&["load", "merge", &big]);
    let e = stderr(&default);
    assert!(!e.contains("--max-input"), "{e}");
    // The environment sets it too.
    let by_env = golive()
        .env("GOLIVE_MAX_INPUT", "8KiB")
        .args(["load", "merge", &big])
        .output()
        .unwrap();
    assert!(
        stderr(&by_env).contains("--max-input"),
        "{}",
        stderr(&by_env)
    );
    // Out of range or not a size: a usage error that names the range.
    for bad in ["5GiB", "1KiB", "lots"] {
        let o = run(&["--max-input", bad, "load", "merge", &big]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
    }
    let o = run(&["--max-input", "5GiB", "load", "merge", &big]);
    assert!(stderr(&o).contains("4.0 KiB to 4.0 GiB"), "{}", stderr(&o));
}
