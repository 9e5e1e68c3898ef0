//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// `../shared` beside the repository (or beside the worktree folder, for worktrees one
/// level deeper, e.g. /work/wt/<name> -> /work/shared), when present: tests that read it
/// skip otherwise; under `CI=true` a missing `../shared` fails instead of skipping.
pub fn shared_dir() -> Option<PathBuf> {
    let root = repo_root();
    let found = [root.join("../shared"), root.join("../../shared")]
        .into_iter()
        .find(|d| d.is_dir());
    if let Some(dir) = found {
        Some(dir)
    } else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but ../shared is not present beside the repository: the tests that read it cannot run"
        );
        eprintln!("skipping: ../shared is not present beside the repository");
        None
    }
}

/// The built `golive` binary.
pub fn golive_bin() -> PathBuf {
    let exe = repo_root().join("target/debug/golive");
    if !exe.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "golive-cli"])
            .current_dir(repo_root())
            .status()
            .unwrap();
        assert!(status.success(), "cargo build -p golive-cli failed");
    }
    exe
}

/// URL of the real local llama-server: `GOLIVE_TEST_URL`, else started once through
/// `scripts/local-server.sh` (installs it on first use).
pub fn local_server_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("GOLIVE_TEST_URL") {
            return url;
        }
        let out = Command::new(repo_root().join("scripts/local-server.sh"))
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
/// returns its URL. Stop it with [`stop_local_server`].
pub fn start_local_server(port: u16, extra: &[&str]) -> String {
    let mut cmd = Command::new(repo_root().join("scripts/local-server.sh"));
    cmd.args(["start", "--port", &port.to_string(), "--"])
        .args(extra);
    let out = cmd.output().expect("cannot run scripts/local-server.sh");
    assert!(
        out.status.success(),
        "local-server start failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

pub fn stop_local_server(port: u16) {
    let _ = Command::new(repo_root().join("scripts/local-server.sh"))
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

/// The check `id` in a report.json value; panics with the report when it is missing.
pub fn check<'a>(r: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    r["checks"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["id"] == id))
        .unwrap_or_else(|| panic!("no check {id} in {r:#}"))
}

/// `golive accept` on the real local llama-server with small load settings (the CI
/// machine has 2 cores) and the agent stage skipped; `extra` is appended.
pub fn small_local_accept(url: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(golive_bin())
        .args(["accept", "--url", url, "--out"])
        .arg(out)
        .args([
            "--skip",
            "agent",
            "--concurrency",
            "2",
            "--max-context",
            "256",
        ])
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

/// Whether `promtool` runs; when not, prints `skipping` with the reason.
pub fn promtool_installed(skipping: &str) -> bool {
    let ok = Command::new("promtool")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("{skipping}: promtool is not installed (Debian package prometheus; scripts/test.sh installs it)");
    }
    ok
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
    if !promtool_installed("skipping the promtool check") {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "promtool is missing (scripts/test.sh installs it)"
        );
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

/// A peer binary, or (outside CI) `None` with a skip message; under `CI=true` a missing
/// peer fails the test.
pub fn peer(paths: &[&str], what: &str) -> Option<PathBuf> {
    let found = paths.iter().map(PathBuf::from).find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{what} is missing (scripts/test.sh installs it)"
        );
        eprintln!("skipping: {what} is not installed (scripts/test.sh installs it)");
    }
    found
}

/// The process id of the local llama-server that [`start_local_server`] started on `port`
/// (from the script's pid file).
pub fn local_server_pid(port: u16) -> Option<u32> {
    let local = std::env::var_os("GOLIVE_LOCAL")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".golive-local"));
    std::fs::read_to_string(local.join(format!("run/{port}.pid")))
        .ok()?
        .trim()
        .parse()
        .ok()
}
