//! `golive collect`: one evidence bundle per host and run.
//!
//! A bundle is `DIR/<host>-<UTC timestamp>/` with `manifest.json` (tool version,
//! host, time, every probe's command, exit status, duration, availability) and the
//! raw outputs under `raw/` with the contract names `check` and `diff` read
//! (see [`crate::envparse::bundle::names`]). Every probe is optional, has a
//! timeout and never stops the collection. Secret values never reach a file.
//!
//! `--ssh HOST,...` copies this very binary to the remote host with `scp` (to a
//! temporary path, removed afterwards), runs the same collection there through the
//! system OpenSSH client and copies the bundle back; `--remote-golive CMD` uses a
//! `golive` already installed there instead.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::bundle_format::{names, MANIFEST, RAW_DIR};
pub use crate::bundle_format::{Manifest, ProbeRecord};
use crate::envparse::is_relevant_env;
use crate::redact::{redact_args, redact_env_line, redact_text};

mod inside;
mod kube;

#[derive(Debug, Clone)]
pub struct CollectOptions {
    /// Directory that receives `<host>-<UTC timestamp>/` bundles.
    pub out: PathBuf,
    /// Docker container running vLLM: docker inspect, image inspect, logs, exec nvidia-smi.
    pub container: Option<String>,
    /// Kubernetes pod running vLLM: the rendered pod spec, logs, exec nvidia-smi.
    pub pod: Option<String>,
    /// Namespace of --pod.
    pub namespace: Option<String>,
    /// PID of the serving process (default: the first `vllm serve` /
    /// `python -m vllm.entrypoints...` process found in /proc).
    pub pid: Option<u32>,
    /// Image to test GPU visibility with: `docker run --rm --gpus all IMAGE nvidia-smi`.
    pub probe_image: Option<String>,
    /// A startup log to keep as raw/startup.log (when no container logs are reachable).
    pub log: Option<PathBuf>,
    /// Seconds each probe may run.
    pub timeout: u64,
    /// Also collect on these hosts over SSH (comma-separated, `user@host` allowed).
    pub ssh: Vec<String>,
    /// Extra OpenSSH option for ssh and scp, as `-o` takes it (`Port=2222`); repeatable.
    pub ssh_options: Vec<String>,
    /// Run this golive command on the remote hosts instead of copying this binary over.
    pub remote_golive: Option<String>,
    /// With --ssh: do not collect on this host.
    pub no_local: bool,
    /// The command line that asked for this collection, recorded (redacted) in the manifest.
    pub command_line: Vec<String>,
}

struct CmdOutput {
    available: bool,
    status: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    duration: Duration,
    timed_out: bool,
    error: Option<String>,
}

/// Runs a command with a timeout, capturing both streams; never fails.
fn run_command(argv: &[String], timeout: Duration) -> CmdOutput {
    let start = Instant::now();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return CmdOutput {
                available: e.kind() != std::io::ErrorKind::NotFound
                    && e.kind() != std::io::ErrorKind::PermissionDenied,
                status: None,
                stdout: Vec::new(),
                stderr: Vec::new(),
                duration: start.elapsed(),
                timed_out: false,
                error: Some(if e.kind() == std::io::ErrorKind::NotFound {
                    format!("{} not installed", argv[0])
                } else {
                    e.to_string()
                }),
            };
        }
    };
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let out_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(p) = out_pipe.as_mut() {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    });
    let err_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    });
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s.code(),
            Ok(None) if start.elapsed() >= timeout => {
                timed_out = true;
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => break None,
        }
    };
    // A killed child's grandchildren may hold the pipes; do not wait for them forever.
    let join = |h: std::thread::JoinHandle<Vec<u8>>| {
        let deadline = Instant::now() + Duration::from_secs(2);
        while !h.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if h.is_finished() {
            h.join().unwrap_or_default()
        } else {
            Vec::new()
        }
    };
    CmdOutput {
        available: true,
        status,
        stdout: join(out_thread),
        stderr: join(err_thread),
        duration: start.elapsed(),
        timed_out,
        error: timed_out.then(|| format!("timed out after {}s", timeout.as_secs())),
    }
}

// ---------------------------------------------------------------- collection

/// What a command probe keeps under its contract name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// stdout, on success.
    Stdout,
    /// stdout and stderr, on success (`docker logs` replays the container's stderr on stderr).
    Both,
    /// stdout and stderr, also on failure: the error is the evidence (`docker run` refused by
    /// nvidia-container-cli).
    Evidence,
}

struct Collector {
    raw: PathBuf,
    timeout: Duration,
    probes: Vec<ProbeRecord>,
}

/// The last non-empty line (a traceback's last line names the error).
fn first_line(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(|l| redact_text(l).chars().take(200).collect())
}

impl Collector {
    fn write(&self, file: &str, bytes: &[u8]) -> anyhow::Result<()> {
        let text = redact_text(&String::from_utf8_lossy(bytes));
        std::fs::write(self.raw.join(file), text)
            .with_context(|| format!("cannot write raw/{file}"))
    }

    /// Runs a command probe and writes its output as `keep` says; a failure's
    /// combined output goes to `<file>.failed.txt` so the contract file only ever
    /// holds real output (unless the error itself is the evidence).
    fn cmd<S: AsRef<str>>(
        &mut self,
        name: &str,
        argv: &[S],
        file: &str,
        keep: Keep,
    ) -> Option<Vec<u8>> {
        let keep_failure = keep == Keep::Evidence;
        let argv: Vec<String> = argv.iter().map(|s| s.as_ref().to_string()).collect();
        let out = run_command(&argv, self.timeout);
        let mut rec = ProbeRecord {
            name: name.to_string(),
            command: redact_args(&argv).join(" "),
            available: out.available,
            exit_status: out.status,
            duration_ms: out.duration.as_millis() as u64,
            timed_out: out.timed_out,
            output: None,
            error: out.error.clone(),
        };
        let mut result = None;
        if out.available && !out.timed_out {
            let mut combined = out.stdout.clone();
            combined.extend_from_slice(&out.stderr);
            if out.status == Some(0) || keep_failure {
                let bytes = if keep == Keep::Stdout {
                    out.stdout.clone()
                } else {
                    combined
                };
                if self.write(file, &bytes).is_ok() {
                    rec.output = Some(file.to_string());
                }
                result = Some(bytes);
            } else {
                let failed = format!("{file}.failed.txt");
                if self.write(&failed, &combined).is_ok() {
                    rec.output = Some(failed);
                }
            }
            if out.status != Some(0) {
                rec.error = first_line(&out.stderr).or_else(|| first_line(&out.stdout));
            }
        }
        self.probes.push(rec);
        result.filter(|_| out.status == Some(0) || keep_failure)
    }

    /// Reads a file probe (`/proc/modules`).
    fn file(&mut self, name: &str, path: &Path, file: &str) -> Option<String> {
        let start = Instant::now();
        let read = std::fs::read(path);
        let mut rec = ProbeRecord {
            name: name.to_string(),
            command: format!("read {}", path.display()),
            available: read.is_ok(),
            exit_status: read.is_ok().then_some(0),
            duration_ms: start.elapsed().as_millis() as u64,
            ..Default::default()
        };
        let result = match read {
            Ok(bytes) => {
                if self.write(file, &bytes).is_ok() {
                    rec.output = Some(file.into());
                }
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            Err(e) => {
                rec.error = Some(e.to_string());
                None
            }
        };
        self.probes.push(rec);
        result
    }

    /// Records a probe whose output golive derived itself (process cmdline/env).
    fn derived(
        &mut self,
        name: &str,
        command: String,
        file: &str,
        text: Option<String>,
        error: Option<String>,
    ) {
        let mut rec = ProbeRecord {
            name: name.into(),
            command,
            available: text.is_some(),
            ..Default::default()
        };
        match text {
            Some(t) => {
                rec.exit_status = Some(0);
                if self.write(file, t.as_bytes()).is_ok() {
                    rec.output = Some(file.into());
                }
            }
            None => rec.error = error,
        }
        self.probes.push(rec);
    }
}

/// Finds the serving process: the first (lowest PID) `vllm serve` or
/// `python -m vllm.entrypoints...` process in /proc.
pub fn find_vllm_process() -> Option<u32> {
    let own = std::process::id();
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|p| *p != own)
        .collect();
    pids.sort_unstable();
    pids.into_iter()
        .find(|pid| read_cmdline(*pid).is_some_and(|argv| is_vllm_server_argv(&argv)))
}

/// True for the argument vector of a vLLM server process.
pub fn is_vllm_server_argv(argv: &[String]) -> bool {
    argv.windows(2).any(|w| {
        let base = w[0].rsplit('/').next().unwrap_or(&w[0]);
        (base == "vllm" && w[1] == "serve")
            || (w[0] == "-m" && w[1].starts_with("vllm.entrypoints"))
    })
}

fn read_cmdline(pid: u32) -> Option<Vec<String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let argv: Vec<String> = bytes
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    (!argv.is_empty()).then_some(argv)
}

fn read_environ(pid: u32) -> Option<BTreeMap<String, String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        bytes
            .split(|b| *b == 0)
            .filter_map(|s| {
                let s = String::from_utf8_lossy(s);
                s.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .collect(),
    )
}

fn env_text(env: &BTreeMap<String, String>) -> String {
    env.iter()
        .filter(|(k, _)| is_relevant_env(k))
        .map(|(k, v)| redact_env_line(&format!("{k}={v}")) + "\n")
        .collect()
}

fn hostname() -> String {
    let h = gethostname::gethostname().to_string_lossy().into_owned();
    let clean: String = h
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "host".into()
    } else {
        clean
    }
}

/// Collects this host's bundle under `out`; returns the bundle directory.
pub fn collect_local(args: &CollectOptions) -> anyhow::Result<(PathBuf, Manifest)> {
    let host = hostname();
    let now = chrono::Utc::now();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let base = format!("{host}-{}", now.format("%Y%m%dT%H%M%SZ"));
    let mut dir = args.out.join(&base);
    let mut n = 2;
    while dir.exists() {
        dir = args.out.join(format!("{base}-{n}"));
        n += 1;
    }
    let raw = dir.join(RAW_DIR);
    std::fs::create_dir_all(&raw).with_context(|| format!("cannot create {}", raw.display()))?;
    let mut c = Collector {
        raw,
        timeout: Duration::from_secs(args.timeout.max(1)),
        probes: Vec::new(),
    };

    // GPUs and driver (host view).
    c.cmd(
        "nvidia-smi",
        &["nvidia-smi"],
        names::NVIDIA_SMI,
        Keep::Stdout,
    );
    c.cmd(
        "nvidia-smi query",
        &[
            "nvidia-smi",
            "--query-gpu=index,name,uuid,driver_version,memory.total,memory.used,memory.free,pci.bus_id",
            "--format=csv",
        ],
        names::NVIDIA_SMI_QUERY,
        Keep::Stdout,
    );
    c.cmd(
        "nvidia-smi topo",
        &["nvidia-smi", "topo", "-m"],
        names::NVIDIA_SMI_TOPO,
        Keep::Stdout,
    );
    c.cmd(
        "nvidia-smi compute apps",
        &[
            "nvidia-smi",
            "--query-compute-apps=pid,process_name,used_memory",
            "--format=csv",
        ],
        names::NVIDIA_SMI_APPS,
        Keep::Stdout,
    );
    c.file(
        "driver version",
        Path::new("/proc/driver/nvidia/version"),
        names::DRIVER_VERSION,
    );
    c.cmd("kernel", &["uname", "-a"], names::UNAME, Keep::Stdout);
    c.file("kernel modules", Path::new("/proc/modules"), names::LSMOD);
    c.cmd(
        "ibv_devinfo",
        &["ibv_devinfo"],
        names::IBV_DEVINFO,
        Keep::Stdout,
    );
    c.cmd(
        "ip link",
        &["ip", "-br", "link"],
        names::IP_LINK,
        Keep::Stdout,
    );
    c.cmd(
        "local CUDA toolkit",
        &["nvcc", "--version"],
        names::NVCC,
        Keep::Stdout,
    );

    // The serving container or pod.
    let mut have_cmdline = false;
    let mut have_env = false;
    let mut have_version = false;
    if let Some(name) = &args.container {
        if let Some(bytes) = c.cmd(
            "docker inspect",
            &["docker", "inspect", name],
            names::DOCKER_INSPECT,
            Keep::Stdout,
        ) {
            let info = crate::envparse::parse_docker_inspect(&String::from_utf8_lossy(&bytes));
            let image = info.image_id.clone().or(info.image_ref.clone());
            if let Some(image) = image {
                c.cmd(
                    "docker image inspect",
                    &["docker", "image", "inspect", &image],
                    names::DOCKER_IMAGE_INSPECT,
                    Keep::Stdout,
                );
            }
            let mut argv: Vec<String> = info.path.iter().cloned().collect();
            argv.extend(info.args.iter().cloned());
            if !argv.is_empty() && args.pid.is_none() {
                let line = shlex::try_join(redact_args(&argv).iter().map(String::as_str))
                    .unwrap_or_default();
                c.derived(
                    "container command",
                    format!("docker inspect {name}: Path + Args"),
                    names::CMDLINE,
                    Some(line + "\n"),
                    None,
                );
                have_cmdline = true;
            }
            if !info.env.is_empty() && args.pid.is_none() {
                c.derived(
                    "container env",
                    format!("docker inspect {name}: Config.Env (filtered)"),
                    names::ENV,
                    Some(env_text(&info.env)),
                    None,
                );
                have_env = true;
            }
        }
        c.cmd(
            "docker logs",
            &["docker", "logs", "--timestamps", name],
            names::STARTUP_LOG,
            Keep::Both,
        );
        c.cmd(
            "container nvidia-smi",
            &["docker", "exec", name, "nvidia-smi"],
            names::CONTAINER_NVIDIA_SMI,
            Keep::Stdout,
        );
        c.cmd(
            "container CUDA runtime",
            &["docker", "exec", name, "sh", "-c", "echo CUDA_VERSION=$CUDA_VERSION; cat /usr/local/cuda/version.json 2>/dev/null | head -c 4000"],
            names::CONTAINER_CUDA,
            Keep::Stdout,
        );
        have_version = c
            .cmd(
                "container vLLM version",
                &[
                    "docker",
                    "exec",
                    name,
                    "python3",
                    "-c",
                    "import vllm; print(vllm.__version__)",
                ],
                names::VLLM_VERSION,
                Keep::Stdout,
            )
            .is_some();
        inside::packages(
            &mut c,
            &["docker".into(), "exec".into(), name.clone()],
            "container",
        );
    }
    if let Some(pod) = &args.pod {
        let mut target: Vec<String> = vec![pod.clone()];
        if let Some(n) = &args.namespace {
            target.extend(["-n".to_string(), n.clone()]);
        }
        let mk = |pre: &[&str], post: &[&str]| -> Vec<String> {
            pre.iter()
                .map(|s| s.to_string())
                .chain(target.iter().cloned())
                .chain(post.iter().map(|s| s.to_string()))
                .collect()
        };
        c.cmd(
            "pod spec",
            &mk(&["kubectl", "get", "pod"], &["-o", "yaml"]),
            names::POD_SPEC,
            Keep::Stdout,
        );
        c.cmd(
            "pod logs",
            &mk(&["kubectl", "logs"], &["--timestamps"]),
            names::STARTUP_LOG,
            Keep::Both,
        );
        c.cmd(
            "pod nvidia-smi",
            &mk(&["kubectl", "exec"], &["--", "nvidia-smi"]),
            names::CONTAINER_NVIDIA_SMI,
            Keep::Stdout,
        );
        have_version = c
            .cmd(
                "pod vLLM version",
                &mk(
                    &["kubectl", "exec"],
                    &[
                        "--",
                        "python3",
                        "-c",
                        "import vllm; print(vllm.__version__)",
                    ],
                ),
                names::VLLM_VERSION,
                Keep::Stdout,
            )
            .is_some();
        inside::packages(&mut c, &mk(&["kubectl", "exec"], &["--"]), "pod");
        kube::crash_record(&mut c, pod, args.namespace.as_deref());
    }
    if let Some(image) = &args.probe_image {
        c.cmd(
            "image GPU visibility",
            &[
                "docker",
                "run",
                "--rm",
                "--gpus",
                "all",
                image,
                "nvidia-smi",
            ],
            names::PROBE_IMAGE,
            Keep::Evidence,
        );
    }

    // The serving process.
    let pid = args.pid.or_else(|| {
        if have_cmdline {
            None
        } else {
            find_vllm_process()
        }
    });
    match pid {
        Some(pid) => {
            let argv = read_cmdline(pid);
            let line = argv.as_ref().map(|a| {
                shlex::try_join(redact_args(a).iter().map(String::as_str))
                    .unwrap_or_else(|_| redact_args(a).join(" "))
                    + "\n"
            });
            let err = argv
                .is_none()
                .then(|| format!("cannot read /proc/{pid}/cmdline"));
            c.derived(
                "process command line",
                format!("read /proc/{pid}/cmdline"),
                names::CMDLINE,
                line,
                err,
            );
            let env = read_environ(pid);
            let err = env
                .is_none()
                .then(|| format!("cannot read /proc/{pid}/environ"));
            c.derived(
                "process environment",
                format!("read /proc/{pid}/environ (filtered)"),
                names::ENV,
                env.map(|e| env_text(&e)),
                err,
            );
        }
        None if !have_cmdline || !have_env => c.derived(
            "process command line",
            "find `vllm serve` / `python -m vllm.entrypoints` in /proc".into(),
            names::CMDLINE,
            None,
            Some("no vLLM server process found (use --pid)".into()),
        ),
        None => {}
    }
    if !have_version
        && c.cmd(
            "vLLM version",
            &["vllm", "--version"],
            names::VLLM_VERSION,
            Keep::Stdout,
        )
        .is_none()
    {
        c.cmd(
            "vLLM version (python)",
            &["python3", "-c", "import vllm; print(vllm.__version__)"],
            names::VLLM_VERSION,
            Keep::Stdout,
        );
    }
    if let Some(log) = &args.log {
        c.file("startup log", log, names::STARTUP_LOG);
    }
    // The flags in `--config FILE`, read where the server reads them.
    let exec: Option<Vec<String>> = match (&args.container, &args.pod) {
        _ if args.pid.is_some() => None,
        (Some(name), _) => Some(vec!["docker".into(), "exec".into(), name.clone()]),
        (None, Some(pod)) => Some(kube::kubectl(
            pod,
            args.namespace.as_deref(),
            &["kubectl", "exec"],
            &["--"],
        )),
        (None, None) => None,
    };
    inside::config_file(&mut c, exec.as_deref(), pid);

    let options = redact_args(&args.command_line);
    let manifest = Manifest {
        schema_version: crate::report::SCHEMA_VERSION,
        tool: "golive".into(),
        tool_version: crate::TOOL_VERSION.into(),
        tool_commit: crate::GIT_COMMIT.into(),
        host,
        time: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        options,
        serving_pid: pid,
        probes: c.probes,
    };
    let json = serde_json::to_string_pretty(&manifest)? + "\n";
    crate::report::write_atomic(&dir.join(MANIFEST), json.as_bytes())?;
    Ok((dir, manifest))
}

/// One bundle that `collect` made, or why it could not.
pub struct Collected {
    /// `local`, or the SSH host.
    pub host: String,
    /// The bundle directory and its manifest (`None` when a copied bundle's manifest
    /// could not be read back).
    pub result: anyhow::Result<(PathBuf, Option<Manifest>)>,
}

/// Collects on this host (unless `no_local` with `ssh` hosts), then on every SSH host
/// in parallel; results in that order. An error on this host ends the collection.
pub fn collect(args: &CollectOptions) -> anyhow::Result<Vec<Collected>> {
    let mut done = Vec::new();
    if !args.no_local || args.ssh.is_empty() {
        let (dir, manifest) = collect_local(args)?;
        done.push(Collected {
            host: "local".into(),
            result: Ok((dir, Some(manifest))),
        });
    }
    let hosts: Vec<&str> = args
        .ssh
        .iter()
        .map(|h| h.trim())
        .filter(|h| !h.is_empty())
        .collect();
    let remote = std::thread::scope(|scope| {
        let workers: Vec<_> = hosts
            .iter()
            .map(|host| scope.spawn(move || collect_remote(host, args)))
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the collection thread panicked")))
            })
            .collect::<Vec<_>>()
    });
    for (host, result) in hosts.into_iter().zip(remote) {
        let result = result.map(|dir| {
            let manifest = std::fs::read_to_string(dir.join(MANIFEST))
                .ok()
                .and_then(|t| serde_json::from_str::<Manifest>(&t).ok());
            (dir, manifest)
        });
        done.push(Collected {
            host: host.to_string(),
            result,
        });
    }
    Ok(done)
}

fn ssh_base(opts: &[String]) -> Vec<String> {
    let mut v = vec![
        "-o".to_string(),
        "BatchMode=yes".into(),
        "-o".into(),
        "ConnectTimeout=10".into(),
    ];
    for o in opts {
        v.push("-o".into());
        v.push(o.clone());
    }
    v
}

/// Collects on `host` over ssh and copies the bundle into `out`.
pub fn collect_remote(host: &str, args: &CollectOptions) -> anyhow::Result<PathBuf> {
    let opts = ssh_base(&args.ssh_options);
    let long = Duration::from_secs(args.timeout.max(1) * 20 + 60);
    let stamp = format!(
        "{}-{}",
        std::process::id(),
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
    );
    let run = |prog: &str, extra: Vec<String>, timeout: Duration| -> anyhow::Result<CmdOutput> {
        let mut argv = vec![prog.to_string()];
        argv.extend(opts.iter().cloned());
        argv.extend(extra);
        let out = run_command(&argv, timeout);
        if !out.available {
            anyhow::bail!(
                "{prog} is not installed (the system OpenSSH client is needed for --ssh)"
            );
        }
        if out.timed_out {
            anyhow::bail!("{prog} to {host} timed out");
        }
        if out.status != Some(0) {
            anyhow::bail!(
                "{prog} to {host} failed (exit {:?}): {}",
                out.status,
                first_line(&out.stderr).unwrap_or_default()
            );
        }
        Ok(out)
    };
    let (remote_bin, copied) = match &args.remote_golive {
        Some(cmd) => (cmd.clone(), false),
        None => {
            let exe = std::env::current_exe().context("cannot find this golive binary to copy")?;
            let remote = format!("/tmp/golive-{stamp}");
            run(
                "scp",
                vec![
                    "-q".into(),
                    "-p".into(),
                    exe.display().to_string(),
                    format!("{host}:{remote}"),
                ],
                long,
            )?;
            (remote, true)
        }
    };
    let remote_out = format!("/tmp/golive-bundles-{stamp}");
    let mut remote_cmd = vec![
        remote_bin.clone(),
        "collect".into(),
        "--out".into(),
        remote_out.clone(),
    ];
    remote_cmd.extend(["--timeout".into(), args.timeout.to_string()]);
    if let Some(c) = &args.container {
        remote_cmd.extend(["--container".into(), c.clone()]);
    }
    if let Some(p) = &args.pod {
        remote_cmd.extend(["--pod".into(), p.clone()]);
        if let Some(n) = &args.namespace {
            remote_cmd.extend(["-n".into(), n.clone()]);
        }
    }
    if let Some(i) = &args.probe_image {
        remote_cmd.extend(["--probe-image".into(), i.clone()]);
    }
    // ssh joins its arguments into one remote shell line: quote each word.
    let quoted = remote_cmd
        .iter()
        .map(|w| {
            shlex::try_quote(w)
                .map(|q| q.into_owned())
                .unwrap_or_else(|_| w.clone())
        })
        .collect::<Vec<_>>()
        .join(" ");
    let cleanup = |bundle_only: bool| {
        let mut rm = format!(
            "rm -rf {}",
            shlex::try_quote(&remote_out).unwrap_or_default()
        );
        if copied && !bundle_only {
            rm.push_str(&format!(
                " {}",
                shlex::try_quote(&remote_bin).unwrap_or_default()
            ));
        }
        let _ = run("ssh", vec![host.to_string(), rm], Duration::from_secs(30));
    };
    let result = (|| -> anyhow::Result<PathBuf> {
        let out = run("ssh", vec![host.to_string(), quoted], long)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let remote_bundle = stdout
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with(&remote_out))
            .context("the remote golive did not report a bundle path")?
            .to_string();
        let name = remote_bundle
            .rsplit('/')
            .next()
            .unwrap_or("remote")
            .to_string();
        std::fs::create_dir_all(&args.out)?;
        let local = args.out.join(&name);
        anyhow::ensure!(!local.exists(), "{} exists already", local.display());
        run(
            "scp",
            vec![
                "-q".into(),
                "-r".into(),
                format!("{host}:{remote_bundle}"),
                args.out.display().to_string(),
            ],
            long,
        )?;
        anyhow::ensure!(
            local.join(MANIFEST).is_file(),
            "copied bundle {} has no manifest.json",
            local.display()
        );
        Ok(local)
    })();
    cleanup(false);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_vllm_argv() {
        let v = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert!(is_vllm_server_argv(&v(
            "/usr/bin/python3 /usr/local/bin/vllm serve m"
        )));
        assert!(is_vllm_server_argv(&v(
            "python3 -m vllm.entrypoints.openai.api_server --model m"
        )));
        assert!(!is_vllm_server_argv(&v("grep vllm")));
    }
}
