//! `golive collect` on this machine (whatever it lacks: GPU, docker daemon, vLLM):
//! it finishes, says which probes were unavailable, writes no secret, and its
//! bundle is valid input for `check` and `diff`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use golive::collect::Manifest;

/// The fake server of one test would be auto-found by the other's collect: run them one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn collect(out: &Path, extra: &[&str]) -> (PathBuf, String) {
    let o = Command::new(common::golive_bin())
        .args(["collect", "--out", out.to_str().unwrap(), "--timeout", "20"])
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "collect failed: {stderr}");
    let stdout = String::from_utf8(o.stdout).unwrap();
    let dir = PathBuf::from(stdout.lines().last().expect("bundle path on stdout").trim());
    assert!(dir.join("manifest.json").is_file(), "{}", dir.display());
    (dir, stderr)
}

fn manifest(dir: &Path) -> Manifest {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

/// A process that looks like a vLLM server to /proc, with secrets in its argv and env.
struct FakeServer(Child);
impl Drop for FakeServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn fake_server() -> FakeServer {
    let child = Command::new("sh")
        .args([
            "-c",
            "sleep 60; :",
            "vllm",
            "serve",
            "moonshotai/Kimi-K3",
            "--tensor-parallel-size",
            "8",
            "--api-key",
            "sk-SECRET-ARG-1",
            "--hf-token=hf_SECRET_ARG_2",
            "--enable-prefix-caching",
        ])
        .env("VLLM_API_KEY", "sk-SECRET-ENV-3")
        .env("NCCL_DEBUG", "INFO")
        .env("UCX_TLS", "rc,cuda_copy")
        .env("HF_TOKEN", "hf_SECRET_ENV_4")
        .env("NCCL_IB_PASSWORD_FILE", "SECRET-ENV-5")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    FakeServer(child)
}

#[test]
fn collect_here_is_valid_input_for_check_and_diff() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let (a, stderr) = collect(tmp.path(), &[]);
    let m = manifest(&a);
    assert_eq!(m.tool, "golive");
    assert_eq!(m.tool_version, golive::TOOL_VERSION);
    assert!(!m.host.is_empty() && m.time.ends_with('Z'));
    let names: Vec<&str> = m.probes.iter().map(|p| p.name.as_str()).collect();
    for probe in [
        "nvidia-smi",
        "nvidia-smi query",
        "nvidia-smi topo",
        "kernel",
        "kernel modules",
        "ibv_devinfo",
        "ip link",
        "driver version",
    ] {
        assert!(names.contains(&probe), "{probe} not in {names:?}");
    }
    for p in &m.probes {
        assert!(!p.command.is_empty(), "{p:?}");
        // What a probe did not give is said, with the reason.
        if !p.ok() {
            assert!(p.error.is_some(), "{p:?}");
            assert!(
                stderr.contains(&p.name),
                "{} not reported: {stderr}",
                p.name
            );
        }
        if let Some(out) = &p.output {
            assert!(a.join("raw").join(out).is_file(), "{out}");
        }
    }
    if which("nvidia-smi").is_none() {
        let smi = m.probes.iter().find(|p| p.name == "nvidia-smi").unwrap();
        assert!(!smi.available);
        assert!(stderr.contains("unavailable"), "{stderr}");
        assert!(!a.join("raw/nvidia-smi.txt").exists());
    }
    if which("uname").is_some() {
        assert!(m.probes.iter().find(|p| p.name == "kernel").unwrap().ok());
        assert!(std::fs::read_to_string(a.join("raw/uname.txt"))
            .unwrap()
            .contains("Linux"));
    }

    // check: a valid input (exit 0 or 1, never 2) with a JSON report.
    let out = Command::new(common::golive_bin())
        .args(["check", a.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["items"].as_array().unwrap().len() >= 9);
    assert!(!v["decision"].as_str().unwrap().is_empty());

    // diff: two runs on one host differ in time only, which does not matter. (A second
    // bundle of the same second is named `...Z-2`: no need to wait for the clock.)
    let (b, _) = collect(tmp.path(), &[]);
    assert_ne!(a, b);
    let out = Command::new(common::golive_bin())
        .args(["diff", a.to_str().unwrap(), b.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("no changes that matter"), "{text}");
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
}

#[test]
fn no_secret_lands_in_a_bundle() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = fake_server();
    let pid = server.0.id().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("startup.log");
    std::fs::write(
        &log,
        "(APIServer pid=1) INFO [utils.py:253] non-default args: {'model_tag': 'm', 'api_key': 'sk-SECRET-LOG-6', 'tensor_parallel_size': 8}\n\
         HUGGING_FACE_HUB_TOKEN=hf_SECRET_LOG_7 vllm serve m --api-key sk-SECRET-LOG-8\n\
         Authorization: Bearer SECRET-LOG-9\n\
         (APIServer pid=1) INFO: Application startup complete.\n",
    )
    .unwrap();
    // The process is in /proc with its argv before collect looks for it.
    let cmdline = format!("/proc/{pid}/cmdline");
    common::wait_until(
        "the fake server's argv in /proc",
        std::time::Duration::from_secs(10),
        || std::fs::read(&cmdline).is_ok_and(|a| a.windows(11).any(|w| w == b"vllm\0serve\0")),
    );
    let out = tmp.path().join("out");
    let (dir, stderr) = collect(&out, &["--pid", &pid, "--log", log.to_str().unwrap()]);
    let text = common::all_text(&dir) + &stderr;
    for secret in [
        "sk-SECRET-ARG-1",
        "hf_SECRET_ARG_2",
        "sk-SECRET-ENV-3",
        "hf_SECRET_ENV_4",
        "SECRET-ENV-5",
        "sk-SECRET-LOG-6",
        "hf_SECRET_LOG_7",
        "sk-SECRET-LOG-8",
        "SECRET-LOG-9",
    ] {
        assert!(!text.contains(secret), "{secret} landed in the bundle");
    }
    // The non-secret facts are kept verbatim.
    let cmdline = std::fs::read_to_string(dir.join("raw/cmdline.txt")).unwrap();
    assert!(
        cmdline.contains(
            "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 --api-key '<redacted>'"
        ),
        "{cmdline}"
    );
    let env = std::fs::read_to_string(dir.join("raw/env.txt")).unwrap();
    assert!(
        env.contains("NCCL_DEBUG=INFO") && env.contains("UCX_TLS=rc,cuda_copy"),
        "{env}"
    );
    assert!(env.contains("VLLM_API_KEY=<redacted>"), "{env}");
    assert!(
        !env.contains("HF_TOKEN"),
        "only the relevant prefixes are kept: {env}"
    );
    let log = std::fs::read_to_string(dir.join("raw/startup.log")).unwrap();
    assert!(
        log.contains("'tensor_parallel_size': 8") && log.contains("Application startup complete"),
        "{log}"
    );
    assert_eq!(manifest(&dir).serving_pid, Some(pid.parse().unwrap()));

    // check reads the process' command: TP 8 and the cache flag.
    let r = golive::check::check_bundles(std::slice::from_ref(&dir), Some("kimi-k3")).unwrap();
    assert!(r
        .item("prefix_caching_flag")
        .unwrap()
        .evidence
        .contains("--enable-prefix-caching present"));
    assert!(r
        .item("parallelism")
        .unwrap()
        .evidence
        .contains("TP 8 x PP 1 x DP 1"));

    // Without --pid the process is found in /proc.
    let (auto, _) = collect(&tmp.path().join("auto"), &[]);
    let cmd = std::fs::read_to_string(auto.join("raw/cmdline.txt")).unwrap_or_default();
    assert!(cmd.contains("vllm serve"), "auto-found command: {cmd}");
    assert!(!common::all_text(&auto).contains("sk-SECRET"));
    drop(server);
}

#[test]
fn container_probes_end_to_end() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    // The serving container answers from the fixtures; the probe run of the image is
    // refused by the NVIDIA container CLI (a driver too old for CUDA 13).
    let path = common::shim::DockerShim::new("docker-inspect_kimi-k3_container.json")
        .exec("python3", "echo 0.27.1")
        .command(
            "run",
            r#"echo "docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'" >&2
    echo "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, please update your driver to a newer version, or use an earlier cuda container: unknown." >&2
    exit 125"#,
        )
        .install(&tmp.path().join("bin"));
    let out = Command::new(common::golive_bin())
        .env("PATH", path)
        .args([
            "collect",
            "--out",
            tmp.path().join("out").to_str().unwrap(),
            "--container",
            "kimi-k3",
            "--probe-image",
            "vllm/vllm-openai:kimi-k3",
            "--timeout",
            "20",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let raw = |n: &str| {
        std::fs::read_to_string(dir.join("raw").join(n)).unwrap_or_else(|e| panic!("{n}: {e}"))
    };
    assert!(raw("docker-image-inspect.json").contains("vllm/vllm-openai@sha256:7f1c9e5a"));
    assert!(
        raw("startup.log").contains("Application startup complete"),
        "docker logs writes to stderr; kept"
    );
    assert!(raw("container-nvidia-smi.txt").contains("Driver Version: 580.95.05"));
    assert_eq!(raw("vllm-version.txt").trim(), "0.27.1");
    assert!(raw("cmdline.txt").starts_with("vllm serve moonshotai/Kimi-K3 --trust-remote-code --tensor-parallel-size 8 --enable-prefix-caching --api-key"));
    let env = raw("env.txt");
    assert!(
        env.contains("NCCL_DEBUG=WARN")
            && env.contains("VLLM_API_KEY=<redacted>")
            && !env.contains("HF_TOKEN"),
        "{env}"
    );
    assert!(raw("probe-image.txt").contains("unsatisfied condition: cuda>=13.0"));
    let m = manifest(&dir);
    let probe = m
        .probes
        .iter()
        .find(|p| p.name == "image GPU visibility")
        .unwrap();
    assert_eq!(probe.exit_status, Some(125));
    assert!(probe
        .command
        .starts_with("docker run --rm --gpus all vllm/vllm-openai:kimi-k3 nvidia-smi"));
    let all = common::all_text(&dir);
    for secret in ["sk-live-container-7a6b5c", "hf_container_4d3c2b1a"] {
        assert!(!all.contains(secret), "{secret} landed in the bundle");
    }

    // The bundle judged: image, version and flag from the container; the refused
    // probe run fails the CUDA layers even though the serving container runs.
    let r = golive::check::check_bundles(std::slice::from_ref(&dir), Some("kimi-k3")).unwrap();
    let st = |id: &str| r.item(id).unwrap().status;
    use golive::report::Status;
    assert_eq!(
        st("official_image"),
        Status::Pass,
        "{}",
        r.item("official_image").unwrap().evidence
    );
    assert_eq!(st("vllm_version"), Status::Pass);
    assert_eq!(st("prefix_caching_flag"), Status::Pass);
    assert_eq!(
        st("host_driver"),
        Status::Pass,
        "container view of the host driver"
    );
    assert_eq!(st("cuda_layers"), Status::Fail);
}

/// A probe that hangs (a `docker logs` that never returns) is killed at `--timeout`:
/// recorded as timed out, what it wrote kept apart from the contract file, and the
/// collection goes on.
#[test]
fn a_hanging_probe_is_killed_and_its_partial_output_kept() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    let pid_file = tmp.path().join("logs.pid");
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\n  logs)\n    echo \"INFO 01-02 03:04:05 api_server.py:1 vLLM API server version 0.27.1\" >&2\n    echo \"INFO 01-02 03:04:06 loading weights\"\n    echo $$ > '{pid}'\n    exec sleep 120 ;;\n  *) exit 1 ;;\nesac\n",
        pid = pid_file.display()
    );
    common::shim::write_exe(&bin, "docker", &script);
    let out = Command::new(common::golive_bin())
        .env("PATH", common::shim::path_with(&bin))
        .args(["collect", "--out", tmp.path().join("out").to_str().unwrap()])
        .args(["--container", "stuck", "--timeout", "2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let m = manifest(&dir);
    let logs = m.probes.iter().find(|p| p.name == "docker logs").unwrap();
    assert!(logs.timed_out && !logs.ok(), "{logs:?}");
    assert_eq!(logs.exit_status, None);
    assert_eq!(logs.output.as_deref(), Some("startup.log.partial.txt"));
    let error = logs.error.as_deref().unwrap_or_default();
    assert!(
        error.starts_with("timed out after 2s; killed; the ")
            && error.ends_with(" bytes it wrote until then are kept"),
        "{error}"
    );
    assert!(
        stderr.contains("timed out"),
        "the summary names it: {stderr}"
    );
    let partial = std::fs::read_to_string(dir.join("raw/startup.log.partial.txt")).unwrap();
    assert!(
        partial.contains("loading weights") && partial.contains("vLLM API server version 0.27.1")
    );
    assert!(
        !dir.join("raw/startup.log").exists(),
        "the contract file holds whole output only"
    );
    // The probes after it still ran.
    assert!(m.probes.iter().any(|p| p.name == "container nvidia-smi"));
    // The hanging program was killed, not left behind.
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let gone = (0..100).any(|_| {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
        if stat.is_empty() || stat.contains(") Z ") {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        false
    });
    assert!(gone, "docker logs (pid {}) still runs", pid.trim());
}

/// Secrets planted in every spelling and shape into a process's command line, env and
/// `--config` file (issue 24): none lands in the bundle or on the terminal, the facts
/// beside them do.
#[test]
fn no_secret_in_any_spelling_lands_in_a_bundle() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("serve.yaml");
    std::fs::write(
        &config,
        "model: moonshotai/Kimi-K3\n\
         api-key:\n  - sk-PLANT-CFG-1\n  - sk-PLANT-CFG-2\n\
         api_key: [k-PLANT-CFG-3]\n\
         otlp-traces-endpoint: https://otel:pw-PLANT-CFG-4@otel:4317\n\
         hfToken: k-PLANT-CFG-5\n\
         max-num-batched-tokens: 8192\n",
    )
    .unwrap();
    let child = Command::new("sh")
        .args(["-c", "sleep 60; :", "vllm", "serve", "moonshotai/Kimi-K3"])
        .args(["--api_key", "sk-PLANT-ARG-1", "sk-PLANT-ARG-2"])
        .args([
            "--otlp-traces-endpoint",
            "https://u:pw-PLANT-ARG-3@otel:4317",
        ])
        .args([
            "--API-KEY=k-PLANT-ARG-4",
            "--config",
            config.to_str().unwrap(),
        ])
        .args(["--tensor-parallel-size", "8"])
        .env("VLLM_api_key", "k-PLANT-ENV-1")
        .env("RAY_ADDRESS", "http://ray:pw-PLANT-ENV-2@head:8265")
        .env("NCCL_SOCKET_PASSWORD", "k-PLANT-ENV-3")
        .env("VLLM_S3_SECRET", "k-PLANT-ENV-4")
        .env("HTTPS_PROXY", "http://proxy:pw-PLANT-ENV-5@proxy:3128")
        .env("NCCL_DEBUG", "INFO")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = FakeServer(child);
    let pid = server.0.id().to_string();
    let cmdline = format!("/proc/{pid}/cmdline");
    common::wait_until(
        "the planted process's argv in /proc",
        std::time::Duration::from_secs(10),
        || std::fs::read(&cmdline).is_ok_and(|a| a.windows(11).any(|w| w == b"vllm\0serve\0")),
    );
    let (dir, stderr) = collect(&tmp.path().join("out"), &["--pid", &pid]);
    let text = common::all_text(&dir) + &stderr;
    for n in 1..=5 {
        for class in ["CFG", "ARG", "ENV"] {
            let planted = format!("PLANT-{class}-{n}");
            assert!(!text.contains(&planted), "{planted} landed in the bundle");
        }
    }
    let raw = |n: &str| std::fs::read_to_string(dir.join("raw").join(n)).unwrap();
    let cmd = raw("cmdline.txt");
    assert!(
        cmd.contains("https://u:***@otel:4317") && cmd.contains("--tensor-parallel-size 8"),
        "{cmd}"
    );
    let env = raw("env.txt");
    assert!(
        env.contains("RAY_ADDRESS=http://ray:***@head:8265") && env.contains("NCCL_DEBUG=INFO"),
        "{env}"
    );
    let cfg = raw("vllm-config.yaml");
    assert!(
        cfg.contains("max-num-batched-tokens: 8192") && cfg.contains("model: moonshotai/Kimi-K3"),
        "{cfg}"
    );
    drop(server);
}
