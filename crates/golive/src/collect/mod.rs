//! `golive collect`: one evidence bundle per host and run.
//!
//! A bundle is `DIR/<host>-<UTC timestamp>/` with `manifest.json` (tool version,
//! host, time, every probe's command, exit status, duration, availability) and the
//! raw outputs under `raw/` with the contract names `check` and `diff` read
//! (see [`crate::bundle_format::names`]). Every probe is optional, has a
//! timeout and never stops the collection. Secret values never reach a file.
//!
//! `--ssh HOST,...` copies this very binary to the remote host with `scp` (to a
//! temporary path, removed afterwards), runs the same collection there through the
//! system OpenSSH client and copies the bundle back; `--remote-golive CMD` uses a
//! `golive` already installed there instead. The hosts are collected in parallel
//! (`ssh_parallel` at a time) while this host collects its own; every probe and every
//! ssh/scp has a deadline.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use crate::bundle_format::{names, MANIFEST, RAW_DIR};
pub use crate::bundle_format::{Manifest, ProbeRecord};
use crate::redact::redact_args;

mod docker;
mod inside;
mod kube;
mod process;
mod remote;
mod runner;

use process::find_vllm_process;
use remote::collect_remote;

use process::{env_text, hostname, read_cmdline, read_environ};
use runner::{Collector, Keep};

/// What `golive collect` gathers, where it writes the bundles and on which hosts (its CLI flags).
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
    /// SSH hosts collected at the same time (at least 1).
    pub ssh_parallel: usize,
    /// The command line that asked for this collection, recorded (redacted) in the manifest.
    pub command_line: Vec<String>,
}

/// Collects this host's bundle under `out`; returns the bundle directory.
pub async fn collect_local(args: &CollectOptions) -> anyhow::Result<(PathBuf, Manifest)> {
    let host = hostname();
    let now = chrono::Utc::now();
    let dir = reserve_dir(
        &args.out,
        &format!("{host}-{}", now.format("%Y%m%dT%H%M%SZ")),
    )?;
    let raw = dir.join(RAW_DIR);
    crate::outfile::create_dirs(&raw)?;
    let mut c = Collector {
        raw,
        timeout: Duration::from_secs(args.timeout.max(1)),
        probes: Vec::new(),
    };
    host_probes(&mut c).await;
    let mut seen = Seen::default();
    if let Some(name) = &args.container {
        seen = docker::container(&mut c, name, args.pid.is_none()).await;
    }
    if let Some(pod) = &args.pod {
        seen.version = kube::pod(&mut c, pod, args.namespace.as_deref()).await;
    }
    if let Some(image) = &args.probe_image {
        docker::image_gpu_visibility(&mut c, image).await;
    }
    let pid = args
        .pid
        .or_else(|| (!seen.cmdline).then(find_vllm_process).flatten());
    serving_process(&mut c, pid, &seen);
    if !seen.version {
        host_vllm_version(&mut c).await;
    }
    if let Some(log) = &args.log {
        c.file("startup log", log, names::STARTUP_LOG);
    }
    // The flags in `--config FILE`, read where the server reads them.
    inside::config_file(&mut c, exec_prefix(args).as_deref(), pid).await;
    let manifest = Manifest {
        schema_version: crate::report::SCHEMA_VERSION,
        tool: "golive".into(),
        tool_version: crate::TOOL_VERSION.into(),
        tool_commit: crate::GIT_COMMIT.into(),
        host,
        time: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        options: redact_args(&args.command_line),
        serving_pid: pid,
        probes: c.probes,
    };
    let json = serde_json::to_string_pretty(&manifest)? + "\n";
    crate::report::write_atomic(&dir.join(MANIFEST), json.as_bytes())?;
    Ok((dir, manifest))
}

/// Creates `out/base` (or `out/base-2`, ...): creating the folder reserves the name, so a
/// bundle copied back from an SSH host of the same name, at the same second, takes the next.
fn reserve_dir(out: &Path, base: &str) -> anyhow::Result<PathBuf> {
    crate::outfile::create_dirs(out)?;
    let mut n = 1;
    loop {
        let dir = match n {
            1 => out.join(base),
            n => out.join(format!("{base}-{n}")),
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
}

/// What the container's or pod's own records already gave: the server's command line, its
/// environment, the vLLM version.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    cmdline: bool,
    env: bool,
    version: bool,
}

/// One probe of the host: a command's output or a file's contents, under its contract name.
enum HostProbe {
    Cmd(&'static str, &'static [&'static str], &'static str),
    File(&'static str, &'static str, &'static str),
}

/// The host's GPUs, driver, kernel and network, in the order they are collected.
const HOST_PROBES: &[HostProbe] = &[
    HostProbe::Cmd("nvidia-smi", &["nvidia-smi"], names::NVIDIA_SMI),
    HostProbe::Cmd(
        "nvidia-smi query",
        &[
            "nvidia-smi",
            "--query-gpu=index,name,uuid,driver_version,memory.total,memory.used,memory.free,pci.bus_id",
            "--format=csv",
        ],
        names::NVIDIA_SMI_QUERY,
    ),
    HostProbe::Cmd("nvidia-smi topo", &["nvidia-smi", "topo", "-m"], names::NVIDIA_SMI_TOPO),
    HostProbe::Cmd(
        "nvidia-smi compute apps",
        &["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"],
        names::NVIDIA_SMI_APPS,
    ),
    HostProbe::File("driver version", "/proc/driver/nvidia/version", names::DRIVER_VERSION),
    HostProbe::Cmd("kernel", &["uname", "-a"], names::UNAME),
    HostProbe::File("kernel modules", "/proc/modules", names::LSMOD),
    HostProbe::Cmd("ibv_devinfo", &["ibv_devinfo"], names::IBV_DEVINFO),
    HostProbe::Cmd("ip link", &["ip", "-br", "link"], names::IP_LINK),
    HostProbe::Cmd("local CUDA toolkit", &["nvcc", "--version"], names::NVCC),
];

/// GPUs and driver (the host's view), kernel, network and CUDA toolkit.
async fn host_probes(c: &mut Collector) {
    for p in HOST_PROBES {
        match p {
            HostProbe::Cmd(label, argv, file) => {
                c.cmd(label, argv, file, Keep::Stdout).await;
            }
            HostProbe::File(label, path, file) => {
                c.file(label, Path::new(path), file);
            }
        }
    }
}

/// The serving process's command line and environment from /proc; without a process, says
/// so unless the container's records gave both.
fn serving_process(c: &mut Collector, pid: Option<u32>, seen: &Seen) {
    match pid {
        Some(pid) => {
            let line = read_cmdline(pid).map(|a| {
                shlex::try_join(redact_args(&a).iter().map(String::as_str))
                    .unwrap_or_else(|_| redact_args(&a).join(" "))
                    + "\n"
            });
            let err = line
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
        None if !seen.cmdline || !seen.env => c.derived(
            "process command line",
            "find `vllm serve` / `python -m vllm.entrypoints` in /proc".into(),
            names::CMDLINE,
            None,
            Some("no vLLM server process found (use --pid)".into()),
        ),
        None => {}
    }
}

/// The vLLM version installed on the host: `vllm --version`, else Python's import.
async fn host_vllm_version(c: &mut Collector) {
    let cli = c
        .cmd(
            "vLLM version",
            &["vllm", "--version"],
            names::VLLM_VERSION,
            Keep::Stdout,
        )
        .await;
    if cli.is_none() {
        c.cmd(
            "vLLM version (python)",
            &["python3", "-c", "import vllm; print(vllm.__version__)"],
            names::VLLM_VERSION,
            Keep::Stdout,
        )
        .await;
    }
}

/// How to run a command where the server runs (`docker exec NAME`, `kubectl exec POD --`);
/// none for a server on this host or one named by `--pid`.
fn exec_prefix(args: &CollectOptions) -> Option<Vec<String>> {
    match (&args.container, &args.pod) {
        _ if args.pid.is_some() => None,
        (Some(name), _) => Some(vec!["docker".into(), "exec".into(), name.clone()]),
        (None, Some(pod)) => Some(kube::kubectl(
            pod,
            args.namespace.as_deref(),
            &["kubectl", "exec"],
            &["--"],
        )),
        (None, None) => None,
    }
}

/// One bundle that `collect` made, or why it could not.
pub struct Collected {
    /// `local`, or the SSH host.
    pub host: String,
    /// The bundle directory and its manifest (`None` when a copied bundle's manifest
    /// could not be read back).
    pub result: anyhow::Result<(PathBuf, Option<Manifest>)>,
}

/// Collects on this host (unless `no_local` with `ssh` hosts) and on the SSH hosts, all
/// at once but at most `ssh_parallel` hosts at a time; results in that order (this
/// host first). A host that fails is reported in its [`Collected`] and the others'
/// bundles are kept; only an `out` that cannot be created ends the collection.
pub async fn collect(args: &CollectOptions) -> crate::Result<Vec<Collected>> {
    for host in args.ssh.iter().map(|h| h.trim()).filter(|h| !h.is_empty()) {
        remote::check_host(host)?;
    }
    crate::outfile::create_dirs(&args.out)?;
    Ok(collect_all(args).await)
}

async fn collect_all(args: &CollectOptions) -> Vec<Collected> {
    use futures_util::stream::{self, StreamExt};
    let local = async {
        if args.no_local && !args.ssh.is_empty() {
            return None;
        }
        Some(Collected {
            host: "local".into(),
            result: collect_local(args)
                .await
                .map(|(dir, manifest)| (dir, Some(manifest))),
        })
    };
    let hosts = args.ssh.iter().map(|h| h.trim()).filter(|h| !h.is_empty());
    let remote = stream::iter(hosts)
        .map(|host| async move {
            Collected {
                host: host.to_string(),
                result: collect_remote(host, args).await.map(|dir| {
                    let manifest = crate::input::read_text(dir.join(MANIFEST))
                        .ok()
                        .and_then(|t| serde_json::from_str::<Manifest>(&t).ok());
                    (dir, manifest)
                }),
            }
        })
        // `buffered` keeps the order and runs at most this many hosts at once.
        .buffered(args.ssh_parallel.max(1))
        .collect::<Vec<_>>();
    let (local, remote) = tokio::join!(local, remote);
    local.into_iter().chain(remote).collect()
}
