//! `golive collect`: arguments and the summary of each bundle.

use std::path::{Path, PathBuf};

use golive::collect::{self, CollectOptions, Manifest};

use crate::{exit, out};

#[derive(Debug, Clone, clap::Args)]
pub struct CollectArgs {
    /// Directory that receives `<host>-<UTC timestamp>/` bundles.
    #[arg(long, default_value = "golive-bundles")]
    pub out: PathBuf,
    /// Docker container running vLLM: docker inspect, image inspect, logs, exec nvidia-smi.
    #[arg(long, conflicts_with = "pod")]
    pub container: Option<String>,
    /// Kubernetes pod running vLLM: the rendered pod spec, logs, exec nvidia-smi.
    #[arg(long)]
    pub pod: Option<String>,
    /// Namespace of --pod.
    #[arg(short = 'n', long, requires = "pod")]
    pub namespace: Option<String>,
    /// PID of the serving process (default: the first `vllm serve` /
    /// `python -m vllm.entrypoints...` process found in /proc).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Image to test GPU visibility with: `docker run --rm --gpus all IMAGE nvidia-smi`.
    #[arg(long)]
    pub probe_image: Option<String>,
    /// A startup log to keep as raw/startup.log (when no container logs are reachable).
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Seconds each probe may run.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
    /// Also collect on these hosts over SSH (comma-separated, `user@host` allowed).
    #[arg(long, value_delimiter = ',')]
    pub ssh: Vec<String>,
    /// Extra OpenSSH option for ssh and scp, as `-o` takes it (`Port=2222`); repeatable.
    #[arg(long = "ssh-option")]
    pub ssh_options: Vec<String>,
    /// Run this golive command on the remote hosts instead of copying this binary over.
    #[arg(long)]
    pub remote_golive: Option<String>,
    /// With --ssh: do not collect on this host.
    #[arg(long)]
    pub no_local: bool,
    /// With --ssh: how many hosts are collected at the same time.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub ssh_parallel: u16,
}

impl From<CollectArgs> for golive::collect::CollectOptions {
    fn from(a: CollectArgs) -> Self {
        golive::collect::CollectOptions {
            out: a.out,
            container: a.container,
            pod: a.pod,
            namespace: a.namespace,
            pid: a.pid,
            probe_image: a.probe_image,
            log: a.log,
            timeout: a.timeout,
            ssh: a.ssh,
            ssh_options: a.ssh_options,
            remote_golive: a.remote_golive,
            no_local: a.no_local,
            ssh_parallel: usize::from(a.ssh_parallel),
            command_line: std::env::args().skip(1).collect(),
        }
    }
}

/// Says which probes were unavailable or failed, on stderr.
fn print_summary(dir: &Path, m: &Manifest) {
    let ok = m.probes.iter().filter(|p| p.ok()).count();
    let mut text = format!("{} ({} of {} probes ok)", dir.display(), ok, m.probes.len());
    for p in m.probes.iter().filter(|p| !p.ok()) {
        text.push_str(&format!(
            "\n  {:<12} {:<26} {}",
            p.outcome(),
            p.name,
            p.error.clone().unwrap_or_default()
        ));
    }
    out::note("collect", text);
}

/// Prints each bundle's directory on stdout; exit 1 when a host could not be collected.
pub fn run(args: CollectArgs) -> anyhow::Result<u8> {
    let mut failed = 0;
    for c in crate::runtime::block_on(collect::collect(&CollectOptions::from(args)))?? {
        match c.result {
            Ok((dir, manifest)) => {
                if let Some(m) = &manifest {
                    print_summary(&dir, m);
                }
                out::line(dir.display())?;
            }
            Err(e) => {
                out::note("collect", format!("{}: {e:#}", c.host));
                failed += 1;
            }
        }
    }
    Ok(if failed > 0 { exit::FOUND } else { exit::OK })
}
