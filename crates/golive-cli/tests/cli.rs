//! The command line as a person meets it: exit codes, a closed pipe, completions,
//! colour, the live line and `watch --listen`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn golive() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_golive"));
    // The tests decide about the environment variables themselves.
    for v in [
        "GOLIVE_URL",
        "GOLIVE_MODEL",
        "GOLIVE_PROFILE",
        "GOLIVE_LIVE",
        "NO_COLOR",
        "CLICOLOR",
        "CLICOLOR_FORCE",
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

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../golive/tests/fixtures")
        .join(rel)
}

/// A local port nothing listens on (just freed).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs golive with stdout a pipe whose reader is already gone: every write fails
/// with EPIPE, as `golive ... | head` does once head has exited.
fn with_closed_stdout(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    golive()
        .args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// A closed pipe stops the writing, not the command: each command exits with the code
/// it has with a reader (`golive triage LOG | head` still says 1 for a found cause).
#[test]
fn a_closed_pipe_ends_quietly_with_the_commands_own_code() {
    let log = fixture("triage/oom_startup_kv.log");
    // An empty folder is a bundle with nothing recorded: `check` lists every item.
    let bundle = tempfile::tempdir().unwrap();
    let bundle = bundle.path().to_str().unwrap();
    for args in [
        vec!["completions", "bash"],
        vec!["triage", log.to_str().unwrap()],
        vec!["triage", "--format", "json", log.to_str().unwrap()],
        vec!["check", bundle],
        vec!["check", "--format", "json", bundle],
        vec!["diff", bundle, bundle],
        vec!["--help"],
    ] {
        let own = run(&args).status.code();
        let o = with_closed_stdout(&args);
        assert_eq!(o.status.code(), own, "{args:?}: {}", stderr(&o));
        assert!(
            !stderr(&o).contains("error") && !stderr(&o).contains("panicked"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    // The triage log holds an OOM: a found cause, exit 1, kept through the closed pipe.
    let o = with_closed_stdout(&["triage", log.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn exit_codes_are_usage_2_unreachable_3_internal_4() {
    // Usage: a missing argument, a bad URL, an unreadable input; one prefix for all.
    let o = run(&["check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("golive: error: the following required arguments"),
        "{}",
        stderr(&o)
    );
    let o = run(&["load", "--url", "ftp://nowhere"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("golive: error: "), "{}", stderr(&o));
    let o = run(&["diff", "/nonexistent/a", "/nonexistent/b"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("golive: error: "), "{}", stderr(&o));

    // Unreachable: nothing listens on the port.
    let url = format!("http://127.0.0.1:{}", free_port());
    let o = run(&[
        "load",
        "--url",
        &url,
        "--requests",
        "1",
        "--connect-timeout",
        "1s",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));

    // Internal/I/O: stdout cannot be written (a full disk).
    if Path::new("/dev/full").exists() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = golive()
            .args(["completions", "bash"])
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
        assert!(
            stderr(&o).starts_with("golive: error: cannot write"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn help_documents_exit_codes_and_version_names_the_commit() {
    let help = String::from_utf8(run(&["--help"]).stdout).unwrap();
    for code in ["0  pass", "2  usage", "3  unreachable", "4  internal"] {
        assert!(help.contains(code), "{help}");
    }
    let version = String::from_utf8(run(&["--version"]).stdout).unwrap();
    assert!(version.contains("(commit "), "{version}");
    let accept = String::from_utf8(run(&["accept", "--help"]).stdout).unwrap();
    for heading in [
        "Server:",
        "Load:",
        "Agent stage:",
        "Connection:",
        "Examples:",
    ] {
        assert!(accept.contains(heading), "{heading} missing:\n{accept}");
    }
    assert!(
        !accept.contains("--skip-agent"),
        "the old spelling is hidden"
    );
}

#[test]
fn completions_cover_every_subcommand() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let o = run(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", stderr(&o));
        let script = String::from_utf8(o.stdout).unwrap();
        for sub in [
            "triage",
            "accept",
            "probe",
            "watch",
            "signoff",
            "completions",
        ] {
            assert!(script.contains(sub), "{shell} lacks {sub}");
        }
    }
    assert_eq!(run(&["completions", "tcsh"]).status.code(), Some(2));
}

/// A stand-in vLLM that answers every request with the same `/metrics` text.
fn fake_metrics_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let body = "# TYPE vllm:num_requests_running gauge\n\
                    vllm:num_requests_running{model_name=\"m\"} 1\n\
                    # TYPE vllm:num_requests_waiting gauge\n\
                    vllm:num_requests_waiting{model_name=\"m\"} 0\n";
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut c = TcpStream::connect(addr).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(c, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    c.read_to_string(&mut text).ok()?;
    Some(text)
}

#[test]
fn watch_listen_serves_healthz_and_its_own_metrics() {
    let url = fake_metrics_server();
    let listen = format!("127.0.0.1:{}", free_port());
    let mut child = golive()
        .args([
            "watch",
            "--url",
            &url,
            "--interval",
            "1s",
            "--window",
            "2s",
            "--duration",
            "60s",
            "--listen",
            &listen,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Poll until the endpoint has seen a judged window (no fixed sleep).
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut metrics = String::new();
    while Instant::now() < deadline {
        if let Some(m) = http_get(&listen, "/metrics") {
            if m.contains("golive_watch_windows_total ")
                && !m.contains("golive_watch_windows_total 0")
            {
                metrics = m;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let health = http_get(&listen, "/healthz");
    let missing = http_get(&listen, "/nope");
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        metrics.starts_with("HTTP/1.1 200"),
        "no judged window in time: {metrics}"
    );
    assert!(
        metrics.contains("golive_watch_trigger_firing{trigger=\"oom\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("golive_watch_trigger_firing{trigger=\"queue_growth\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("golive_watch_trigger_firing{trigger=\"stalled\"} 0"),
        "{metrics}"
    );
    assert!(metrics.contains("golive_watch_target_up 1"), "{metrics}");
    assert!(health.unwrap_or_default().ends_with("\r\n\r\nok\n"));
    assert!(missing.unwrap_or_default().starts_with("HTTP/1.1 404"));
}

/// The real local server of the test suite, when there is one (`GOLIVE_TEST_URL`).
fn test_server() -> Option<String> {
    match std::env::var("GOLIVE_TEST_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "GOLIVE_TEST_URL is required under CI=true"
            );
            eprintln!("skipping: GOLIVE_TEST_URL is not set");
            None
        }
    }
}

#[test]
fn a_load_shows_the_live_line() {
    let Some(url) = test_server() else { return };
    let o = golive()
        .args([
            "load",
            "--url",
            &url,
            "--requests",
            "3",
            "--max-tokens",
            "4",
            "--no-calibrate",
        ])
        .env("GOLIVE_LIVE", "plain")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    // The last live line is the one printed at the end.
    let line = err
        .lines()
        .rev()
        .find(|l| l.starts_with("golive load: "))
        .unwrap_or_else(|| panic!("no live line in: {err}"));
    assert!(line.contains("3 requests"), "{line}");
    assert!(line.contains("req/s"), "{line}");
    assert!(line.contains("0 errors"), "{line}");
    assert!(line.contains("TTFT p50 "), "{line}");
    // Not on a pipe unless asked for.
    let quiet = run(&[
        "load",
        "--url",
        &url,
        "--requests",
        "1",
        "--max-tokens",
        "2",
        "--no-calibrate",
    ]);
    assert!(!stderr(&quiet).contains("req/s"), "{}", stderr(&quiet));
}

const ESC: u8 = 0x1b;

/// `golive accept` and `golive probe` against a port nothing listens on: exit 3, the
/// verdict on stdout and stderr, `FAILED connect` on stdout.
fn unreachable_runs(envs: &[(&str, &str)]) -> (Output, Output) {
    let url = format!("http://127.0.0.1:{}", free_port());
    let dir = tempfile::tempdir().unwrap();
    let with_env = |mut c: Command| {
        for (k, v) in envs {
            c.env(k, v);
        }
        c
    };
    let mut accept = with_env(golive());
    accept
        .args(["accept", "--url", &url, "--connect-timeout", "1s", "--out"])
        .arg(dir.path());
    let mut probe = with_env(golive());
    probe.args(["probe", "--url", &url, "--deadline-s", "2"]);
    let (accept, probe) = (accept.output().unwrap(), probe.output().unwrap());
    assert_eq!(accept.status.code(), Some(3), "{}", stderr(&accept));
    assert_eq!(probe.status.code(), Some(3), "{}", stderr(&probe));
    (accept, probe)
}

#[test]
fn colour_is_forced_by_clicolor_force_and_off_in_a_pipe_and_with_no_color() {
    // Into a pipe: plain text.
    let (accept, probe) = unreachable_runs(&[]);
    for bytes in [&accept.stdout, &accept.stderr, &probe.stdout] {
        assert!(!bytes.contains(&ESC), "{}", String::from_utf8_lossy(bytes));
    }
    let verdict_line = String::from_utf8(accept.stdout.clone()).unwrap();
    assert!(
        verdict_line.starts_with("golive accept: verdict rebuild ("),
        "{verdict_line}"
    );

    // CLICOLOR_FORCE: the verdict (red: rebuild), FAIL and FAILED in colour, also into a pipe.
    let (accept, probe) = unreachable_runs(&[("CLICOLOR_FORCE", "1")]);
    let out = String::from_utf8_lossy(&accept.stdout).into_owned();
    assert!(
        out.contains("verdict \x1b[1m\x1b[31mrebuild\x1b[0m ("),
        "{out:?}"
    );
    let err = stderr(&accept);
    assert!(
        err.contains("\x1b[1m\x1b[31mFAIL\x1b[0m service_health"),
        "{err:?}"
    );
    let out = String::from_utf8(probe.stdout).unwrap();
    assert!(
        out.contains("\x1b[1m\x1b[31mFAILED\x1b[0m connect"),
        "{out:?}"
    );

    // NO_COLOR wins over CLICOLOR_FORCE.
    let (accept, probe) = unreachable_runs(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]);
    for bytes in [&accept.stdout, &accept.stderr, &probe.stdout] {
        assert!(!bytes.contains(&ESC), "{}", String::from_utf8_lossy(bytes));
    }
}

/// Runs `golive ARGS` on a pseudo-terminal (util-linux `script`), with `envs`; returns
/// what the terminal showed.
fn on_a_terminal(args: &[&str], envs: &[(&str, &str)]) -> Option<String> {
    let found = Command::new("script").arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but `script` (util-linux) is missing"
        );
        eprintln!("skipping: `script` (util-linux) is not installed");
        return None;
    }
    let line = std::iter::once(env!("CARGO_BIN_EXE_golive"))
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut script = Command::new("script");
    script.args(["--quiet", "--return", "--command", &line, "/dev/null"]);
    for v in ["NO_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "GOLIVE_LIVE"] {
        script.env_remove(v);
    }
    let o = script
        .env("TERM", "xterm")
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn colour_is_on_by_itself_on_a_terminal_unless_no_color() {
    let url = format!("http://127.0.0.1:{}", free_port());
    let args = ["probe", "--url", &url, "--deadline-s", "2"];
    let Some(shown) = on_a_terminal(&args, &[]) else {
        return;
    };
    assert!(
        shown.contains("\x1b[1m\x1b[31mFAILED\x1b[0m connect"),
        "{shown:?}"
    );
    let shown = on_a_terminal(&args, &[("NO_COLOR", "1")]).unwrap();
    assert!(shown.contains("FAILED connect"), "{shown:?}");
    assert!(!shown.contains('\x1b'), "{shown:?}");
}

#[test]
fn check_colours_its_status_column_only_when_asked_or_on_a_terminal() {
    let bundle = tempfile::tempdir().unwrap();
    let bundle = bundle.path().to_str().unwrap();
    let plain = run(&["check", bundle]);
    assert_eq!(plain.status.code(), Some(1), "{}", stderr(&plain));
    assert!(!plain.stdout.contains(&ESC));
    let forced = golive()
        .args(["check", bundle])
        .env("CLICOLOR_FORCE", "1")
        .output()
        .unwrap();
    let text = String::from_utf8(forced.stdout).unwrap();
    assert!(
        text.contains("\n\x1b[1m\x1b[31mFAIL\x1b[0m     reproducible "),
        "{text:?}"
    );
    assert!(
        text.contains("\n\x1b[33munknown\x1b[0m  official_image "),
        "{text:?}"
    );
    // Apart from the styles, the same text.
    let stripped = text
        .replace("\x1b[1m\x1b[31m", "")
        .replace("\x1b[33m", "")
        .replace("\x1b[0m", "");
    assert_eq!(stripped.as_bytes(), plain.stdout);
}

#[test]
fn golive_url_model_and_profile_come_from_the_environment_and_a_flag_wins() {
    // GOLIVE_URL and GOLIVE_PROFILE: accept needs no --url, and the report names both.
    let url = format!("http://127.0.0.1:{}", free_port());
    let dir = tempfile::tempdir().unwrap();
    let accept = |extra: &[&str]| {
        let o = golive()
            .args(["accept", "--connect-timeout", "1s", "--out"])
            .arg(dir.path())
            .args(extra)
            .env("GOLIVE_URL", &url)
            .env("GOLIVE_PROFILE", "vllm")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap())
                .unwrap();
        report
    };
    let report = accept(&[]);
    assert_eq!(report["urls"], serde_json::json!([url]));
    assert_eq!(report["profile"], "vllm");
    assert_eq!(accept(&["--profile", "kimi-k3"])["profile"], "kimi-k3");

    // GOLIVE_MODEL: the probe names the model it was given and asks no model list.
    let server = fake_metrics_server();
    let probe = |extra: &[&str]| {
        let o = golive()
            .args(["probe", "--url", &server, "--deadline-s", "5"])
            .args(extra)
            .env("GOLIVE_MODEL", "env-model")
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(probe(&[]).contains(" (env-model): "), "{}", probe(&[]));
    let flag = probe(&["--model", "flag-model"]);
    assert!(flag.contains(" (flag-model): "), "{flag}");
}
