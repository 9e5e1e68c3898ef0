//! Helpers shared by the integration tests: paths, the `golive` binary, the peers a test
//! needs (a missing one fails under `CI=true`), the real local llama-server, readiness
//! polling, nginx and scripted command-line tools.
#![allow(dead_code, unused_imports)]

pub mod agent;
pub mod bundle;
pub mod chromium;
pub mod nginx;
pub mod shim;
mod wait;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub use wait::{http_get, tap, wait_listening, wait_until};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A file under `crates/golive/tests/fixtures`.
pub fn fixture_path(rel: &str) -> PathBuf {
    repo_root().join("crates/golive/tests/fixtures").join(rel)
}

/// Whether this is a CI run (`CI=true`), where a missing peer fails the test.
pub fn under_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Something the test needs is missing (`what` says what and how to get it): under
/// `CI=true` the test fails here; elsewhere it prints `skipping: ...` and the caller
/// returns.
pub fn skip(what: impl std::fmt::Display) {
    assert!(!under_ci(), "CI=true but {what}");
    eprintln!("skipping: {what}");
}

/// `../shared` beside the repository (or beside the worktree folder, for worktrees one
/// level deeper, e.g. /work/wt/<name> -> /work/shared), when present: tests that read it
/// skip otherwise; under `CI=true` a missing `../shared` fails instead of skipping.
pub fn shared_dir() -> Option<PathBuf> {
    let root = repo_root();
    let found = [root.join("../shared"), root.join("../../shared")]
        .into_iter()
        .find(|d| d.is_dir());
    if found.is_none() {
        skip("../shared is not present beside the repository: the tests that read it cannot run");
    }
    found
}

/// A file of `../shared` (`rel` below it) that a test reads in place: `None` (skip, or
/// fail under `CI=true`) when `../shared` or the file is missing.
pub fn shared_file(rel: &str) -> Option<PathBuf> {
    let path = shared_dir()?.join(rel);
    if path.exists() {
        Some(path)
    } else {
        skip(format!("../shared/{rel} is not present"));
        None
    }
}

/// The `golive` binary that cargo built for this test run: only golive-cli's integration
/// tests have it (`CARGO_BIN_EXE_golive`), so the tests that drive the binary live there and
/// never run a nested `cargo build` (issue 25 item 6).
pub fn golive_bin() -> PathBuf {
    match option_env!("CARGO_BIN_EXE_golive") {
        Some(path) => PathBuf::from(path),
        None => {
            panic!("golive_bin() is for golive-cli's integration tests, which cargo builds it for")
        }
    }
}

/// Runs `golive` with `args` and waits for it.
pub fn golive(args: &[&str]) -> std::process::Output {
    Command::new(golive_bin()).args(args).output().unwrap()
}

/// stdout followed by stderr, as text.
pub fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The summary that `golive load --format json` printed last: stdout is one event per line
/// (`load_started`, one `request` per finished request, `load_finished`), then `load_summary`,
/// whose `data` is the summary. Checks that shape and that a `request` line stands for each
/// request the summary counts; `Null` when stdout is not that stream (a run that failed).
pub fn load_summary(stdout: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(stdout);
    let Ok(lines) = text
        .lines()
        .map(serde_json::from_str::<serde_json::Value>)
        .collect::<Result<Vec<_>, _>>()
    else {
        return serde_json::Value::Null;
    };
    let Some((last, events)) = lines.split_last() else {
        return serde_json::Value::Null;
    };
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"load_started"), "{text}");
    assert_eq!(kinds.last(), Some(&"load_finished"), "{text}");
    assert_eq!(last["event"], "load_summary", "{text}");
    let requests = kinds.iter().filter(|k| **k == "request").count() as u64;
    assert_eq!(Some(requests), last["data"]["requests"].as_u64(), "{text}");
    let ts: Vec<f64> = lines.iter().filter_map(|e| e["t"].as_f64()).collect();
    assert_eq!(ts.len(), lines.len(), "every line has its time: {text}");
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{text}");
    last["data"].clone()
}

/// The report.json that `golive accept --out DIR` wrote.
pub fn report(out: &Path) -> serde_json::Value {
    let file = out.join("report.json");
    let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    serde_json::from_slice(&bytes).unwrap()
}

/// The check `id` in a report.json value; panics with the report when it is missing.
pub fn check<'a>(r: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    r["checks"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["id"] == id))
        .unwrap_or_else(|| panic!("no check {id} in {r:#}"))
}

// ------------------------------------------------------------- the local llama-server

/// The start script: `scripts/local-server.sh`, or the copy `GOLIVE_LOCAL_SERVER_SCRIPT`
/// names.
fn local_server_script() -> PathBuf {
    std::env::var_os("GOLIVE_LOCAL_SERVER_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("scripts/local-server.sh"))
}

/// URL of the real local llama-server: `GOLIVE_TEST_URL`, else started once through
/// `scripts/local-server.sh` (installs it on first use).
pub fn local_server_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("GOLIVE_TEST_URL") {
            return url;
        }
        let out = Command::new(local_server_script())
            .arg("start")
            .output()
            .expect("cannot run scripts/local-server.sh");
        assert!(
            out.status.success(),
            "scripts/local-server.sh start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
    .clone()
}

/// Starts an extra local llama-server on `port` with extra arguments (e.g. `--no-cache-prompt`);
/// returns its URL. Stop it with [`stop_local_server`] (or hold a [`ServerGuard`]).
pub fn start_local_server(port: u16, extra: &[&str]) -> String {
    let out = Command::new(local_server_script())
        .args(["start", "--port", &port.to_string(), "--"])
        .args(extra)
        .output()
        .expect("cannot run scripts/local-server.sh");
    assert!(
        out.status.success(),
        "local-server start failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Starts an extra local llama-server on `port` pinned to CPU `core` (`taskset`, which the
/// server inherits from the script) with one thread; returns its URL.
pub fn start_local_server_on_core(port: u16, core: u32) -> String {
    let out = Command::new("taskset")
        .args(["-c", &core.to_string()])
        .arg(local_server_script())
        .args(["start", "--port", &port.to_string(), "--", "-t", "1"])
        .output()
        .expect("cannot run taskset (util-linux) with scripts/local-server.sh");
    assert!(
        out.status.success(),
        "local-server start on core {core} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

pub fn stop_local_server(port: u16) {
    let _ = Command::new(local_server_script())
        .args(["stop", "--port", &port.to_string()])
        .status();
}

/// Stops the local server on its port when dropped, also when an assertion fails.
pub struct ServerGuard(pub u16);
impl Drop for ServerGuard {
    fn drop(&mut self) {
        stop_local_server(self.0);
    }
}

/// The folder of `scripts/local-server.sh`'s installs and run files.
fn local_dir() -> PathBuf {
    std::env::var_os("GOLIVE_LOCAL")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".golive-local"))
}

/// A pid file under `.golive-local/test-run/` for a server a test started itself (named
/// `<program>-<port>`), removed when dropped: `scripts/test.sh` ends the process it names
/// after an interrupted run, and only while that pid still runs that program.
pub struct PidFile(PathBuf);
impl PidFile {
    pub fn new(name: &str, pid: u32) -> Self {
        let dir = local_dir().join("test-run");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.pid"));
        std::fs::write(&path, pid.to_string()).unwrap();
        PidFile(path)
    }
}
impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Where `scripts/local-server.sh` writes the log of the server on `port`.
pub fn local_server_log(port: u16) -> PathBuf {
    local_dir().join(format!("run/{port}.log"))
}

/// The process id of the local llama-server that [`start_local_server`] started on `port`
/// (from the script's pid file).
pub fn local_server_pid(port: u16) -> Option<u32> {
    std::fs::read_to_string(local_dir().join(format!("run/{port}.pid")))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `golive accept --url URL --out OUT --skip agent`, for the caller's load settings: the
/// agent stage has tests of its own, elsewhere it only adds time.
pub fn accept_without_agent(url: &str, out: &Path) -> Command {
    let mut cmd = Command::new(golive_bin());
    cmd.args(["accept", "--url", url, "--out"])
        .arg(out)
        .args(["--skip", "agent"]);
    cmd
}

/// `accept` arguments that leave only the ramp after basic (and the closing checks): the
/// capacity tests' runs.
pub const RAMP_ONLY: [&str; 8] = [
    "--skip",
    "soak",
    "--skip",
    "prefix-cache",
    "--skip",
    "agreement",
    "--skip",
    "contract",
];

/// `golive accept` on the real local llama-server with small load settings (the CI
/// machine has 2 cores) and the agent stage skipped; `extra` is appended.
pub fn small_local_accept(url: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    accept_without_agent(url, out)
        .args(["--concurrency", "2", "--max-context", "256"])
        .args([
            "--output-tokens",
            "8",
            "--ramp-requests",
            "1",
            "--duration",
            "3s",
        ])
        .args(["--prefix-words", "150", "--short-prompt", "64"])
        .args(["--request-timeout", "120s", "--reviewer", "ci"])
        .args(extra)
        .output()
        .unwrap()
}

// ------------------------------------------------------------------------- peers

/// A peer binary at one of `paths`, or `None` (skip, or fail under `CI=true`).
pub fn peer(paths: &[&str], what: &str) -> Option<PathBuf> {
    let found = paths.iter().map(PathBuf::from).find(|p| p.exists());
    if found.is_none() {
        skip(format!(
            "{what} is not installed (scripts/test.sh installs it)"
        ));
    }
    found
}

/// Whether `program --version` runs; when not: skip, or fail under `CI=true`.
pub fn runs(program: &str, package: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip(format!(
            "{program} is not installed (Debian package {package}; scripts/test.sh installs it)"
        ));
    }
    ok
}

/// Whether `promtool` runs; when not: skip, or fail under `CI=true`.
pub fn promtool_installed() -> bool {
    runs("promtool", "prometheus")
}

/// A free loopback port (bound and released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `golive rules --baseline RUN -o DIR/rules.yml`; returns the rules file's text.
pub fn rules_from_baseline(run: &Path, dir: &Path) -> (PathBuf, String) {
    let rules = dir.join("rules.yml");
    let g = Command::new(golive_bin())
        .args(["rules", "--baseline"])
        .arg(run)
        .arg("-o")
        .arg(&rules)
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", text(&g));
    let yaml = std::fs::read_to_string(&rules).unwrap();
    (rules, yaml)
}

/// `promtool check rules FILE` passes (`yaml` is shown on failure). Without promtool the
/// check is skipped with a message, except under `CI=true`, where that fails.
pub fn promtool_check_rules(rules: &Path, yaml: &str) {
    if !promtool_installed() {
        return;
    }
    let p = Command::new("promtool")
        .args(["check", "rules"])
        .arg(rules)
        .output()
        .unwrap();
    assert!(
        p.status.success(),
        "promtool check rules: {}\n{yaml}",
        text(&p)
    );
}

/// Every file below `dir`, read as (lossy) text and joined: to look for what must never
/// be written (a secret).
pub fn all_text(dir: &Path) -> String {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()).into_owned() + "\n")
        .collect()
}

/// Issue 27 item 6, on real servers: what one replica's capacity answer predicts for two, and
/// what two measured.
pub struct TwoReplicas {
    /// One replica's capacity at the objectives (req/s), from the accept run.
    pub per_replica: f64,
    /// Twice that.
    pub predicted: f64,
    /// Goodput of `golive load` spread over both replicas (req/s).
    pub measured: f64,
    /// The step the answer rests on, as `4 x long`.
    pub step: String,
    /// The capacity check's measurement, for a failure's message.
    pub capacity: String,
}

impl TwoReplicas {
    /// |measured - predicted| / predicted.
    pub fn error(&self) -> f64 {
        (self.measured - self.predicted).abs() / self.predicted
    }

    /// Prints the figures of `server`'s replicas and asserts the two measured within 15% of
    /// the prediction (issue 27's bar).
    pub fn assert_within_15_percent(&self, server: &str) {
        let figures = format!(
            "{server}: one replica {:.2} req/s ({}); two predicted {:.2}, measured {:.2} req/s: error {:.0}%",
            self.per_replica,
            self.step,
            self.predicted,
            self.measured,
            self.error() * 100.0
        );
        eprintln!("{figures}");
        assert!(self.error() <= 0.15, "{figures}\n{}", self.capacity);
    }
}

/// A `golive load` kept busy on a replica until dropped.
struct Neighbour(std::process::Child);

impl Drop for Neighbour {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The two-replica checks' ramp: its most requests in flight, answer length and context.
const RAMP_MOST_IN_FLIGHT: u32 = 4;
const RAMP_OUTPUT_TOKENS: u32 = 16;
const RAMP_MAX_CONTEXT: u32 = 256;

/// Keeps `url` as busy as the replica beside it will be when both serve: the ramp's largest
/// step of its longest requests, until dropped.
fn busy_neighbour(url: &str) -> Neighbour {
    let prompt = RAMP_MAX_CONTEXT - RAMP_OUTPUT_TOKENS;
    let child = Command::new(golive_bin())
        .args(["load", "--url", url, "--ignore-eos", "--duration", "1h"])
        .args(["--concurrency", &RAMP_MOST_IN_FLIGHT.to_string()])
        .args(["--prompt-tokens", &prompt.to_string()])
        .args(["--max-tokens", &RAMP_OUTPUT_TOKENS.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("cannot start the neighbour's golive load");
    Neighbour(child)
}

/// The accept runs of the two-replica checks: a closed-loop ramp up to 4 in flight whose
/// steps all hold (the objective is far away), with a rate target, so the capacity is the best
/// step's goodput. Replica `url` is measured while its `neighbour` serves the same load: the
/// two share this machine's memory bandwidth and last-level cache (replicas on GPUs each have
/// their own memory), so one replica measured beside an idle neighbour holds more than it
/// does beside a busy one. Measured in CI beside an idle neighbour: vLLM one 1.13 req/s, two
/// predicted 2.26, measured 1.77 (22%); llama-server 16% here.
pub fn accept_one_replica(url: &str, neighbour: &str, out: &Path) -> std::process::Output {
    let _busy = busy_neighbour(neighbour);
    accept_without_agent(url, out)
        .args(["--concurrency", &RAMP_MOST_IN_FLIGHT.to_string()])
        .args(["--ramp-requests", "4"])
        .args(["--output-tokens", &RAMP_OUTPUT_TOKENS.to_string()])
        .args(["--max-context", &RAMP_MAX_CONTEXT.to_string()])
        .args(["--slo-e2e-p95-ms", "120000", "--target-rate", "1"])
        .args(RAMP_ONLY)
        .output()
        .unwrap()
}

/// Reads the capacity answer of [`accept_one_replica`]'s run in `dir` and measures two
/// replicas `a` and `b` with `golive load`: the same requests as the best closed-loop step of
/// the answer's kind, at twice its concurrency, spread over both.
pub fn two_replicas(dir: &Path, accepted: &std::process::Output, a: &str, b: &str) -> TwoReplicas {
    let r = report(dir);
    let cap = check(&r, "capacity");
    let per_replica = cap["data"]["per_replica"]
        .as_f64()
        .unwrap_or_else(|| panic!("{cap:#}\n{}", text(accepted)));
    let kind = cap["data"]["kind"].as_str().unwrap().to_string();
    let steps: Vec<golive::report::RampStep> =
        serde_json::from_value(r["measurements"]["ramp"].clone()).unwrap();
    let best = steps
        .iter()
        .filter(|s| s.rate.is_none() && s.label.contains(&format!(" x {kind}")))
        .max_by_key(|s| s.concurrency)
        .unwrap();
    let json = dir.join("two.json");
    let out = Command::new(golive_bin())
        .args([
            "load",
            "--url",
            a,
            "--url",
            b,
            "--ignore-eos",
            "--goodput",
            "e2el:120000",
        ])
        .args(["--concurrency", &(2 * best.concurrency).to_string()])
        .args(["--requests", &(6 * best.concurrency).to_string()])
        .args(["--prompt-tokens", &best.prompt_tokens.to_string()])
        .args(["--max-tokens", &best.max_tokens.to_string(), "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let two: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(two["errors"], 0, "{two:#}");
    assert!(two["url"].as_str().unwrap().contains(b), "{}", two["url"]);
    TwoReplicas {
        per_replica,
        predicted: 2.0 * per_replica,
        measured: two["goodput"]["requests_per_s"].as_f64().unwrap(),
        step: format!("{} x {kind}", best.concurrency),
        capacity: cap["measurement"].to_string(),
    }
}
