//! The serving container, with `--container`: docker's record of it (command, environment,
//! image), its logs, and what only a command inside it can see (GPUs, CUDA runtime, vLLM and
//! package versions); and `--probe-image`'s test of GPU visibility in a fresh container.

use super::{inside, Collector, Keep, Seen};
use crate::bundle_format::names;
use crate::redact::redact_args;

/// Collects the container `name`'s evidence. Its command line and environment come from
/// docker's record when `record_process` (no `--pid` names the process instead).
pub(super) async fn container(c: &mut Collector, name: &str, record_process: bool) -> Seen {
    let mut seen = Seen::default();
    if let Some(bytes) = c
        .cmd(
            "docker inspect",
            &["docker", "inspect", name],
            names::DOCKER_INSPECT,
            Keep::Stdout,
        )
        .await
    {
        let info = crate::envparse::parse_docker_inspect(&String::from_utf8_lossy(&bytes));
        image(c, &info).await;
        if record_process {
            seen.cmdline = command(c, name, &info);
            seen.env = environment(c, name, &info);
        }
    }
    inside_probes(c, name).await;
    let exec = ["docker".into(), "exec".into(), name.to_string()];
    seen.version = inside::vllm_version(c, &exec, "container").await;
    inside::packages(c, &exec, "container").await;
    seen
}

/// The container's image, as docker describes it.
async fn image(c: &mut Collector, info: &crate::envparse::DockerInfo) {
    if let Some(image) = info.image_id.clone().or(info.image_ref.clone()) {
        c.cmd(
            "docker image inspect",
            &["docker", "image", "inspect", &image],
            names::DOCKER_IMAGE_INSPECT,
            Keep::Stdout,
        )
        .await;
    }
}

/// The container's command (Path + Args, redacted); whether there was one.
fn command(c: &mut Collector, name: &str, info: &crate::envparse::DockerInfo) -> bool {
    let mut argv: Vec<String> = info.path.iter().cloned().collect();
    argv.extend(info.args.iter().cloned());
    if argv.is_empty() {
        return false;
    }
    let line = shlex::try_join(redact_args(&argv).iter().map(String::as_str)).unwrap_or_default();
    c.derived(
        "container command",
        format!("docker inspect {name}: Path + Args"),
        names::CMDLINE,
        Some(line + "\n"),
        None,
    );
    true
}

/// The container's environment (filtered, redacted); whether there was one.
fn environment(c: &mut Collector, name: &str, info: &crate::envparse::DockerInfo) -> bool {
    if info.env.is_empty() {
        return false;
    }
    c.derived(
        "container env",
        format!("docker inspect {name}: Config.Env (filtered)"),
        names::ENV,
        Some(super::env_text(&info.env)),
        None,
    );
    true
}

/// The container's log and what it sees: its GPUs and CUDA runtime.
async fn inside_probes(c: &mut Collector, name: &str) {
    c.cmd(
        "docker logs",
        &["docker", "logs", "--timestamps", name],
        names::STARTUP_LOG,
        Keep::Both,
    )
    .await;
    c.cmd(
        "container nvidia-smi",
        &["docker", "exec", name, "nvidia-smi"],
        names::CONTAINER_NVIDIA_SMI,
        Keep::Stdout,
    )
    .await;
    c.cmd(
        "container CUDA runtime",
        &["docker", "exec", name, "sh", "-c", "echo CUDA_VERSION=$CUDA_VERSION; cat /usr/local/cuda/version.json 2>/dev/null | head -c 4000"],
        names::CONTAINER_CUDA,
        Keep::Stdout,
    )
    .await;
}

/// `docker run --rm --gpus all IMAGE nvidia-smi`: the error is the evidence when it fails.
pub(super) async fn image_gpu_visibility(c: &mut Collector, image: &str) {
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
    )
    .await;
}
