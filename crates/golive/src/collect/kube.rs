//! The serving pod, with `--pod`: its spec, logs, what a command inside it sees (GPUs, vLLM
//! and package versions), and Kubernetes' own record of a crash: the previous container's
//! log, the pod object (each container's `lastState`: OOMKilled, exit code) and its events.

use super::{inside, Collector, Keep};
use crate::bundle_format::names;

/// `kubectl ARGS... POD [-n NS] TAIL...` for this pod.
pub(super) fn kubectl(
    pod: &str,
    namespace: Option<&str>,
    pre: &[&str],
    post: &[&str],
) -> Vec<String> {
    let mut argv: Vec<String> = pre.iter().map(|s| s.to_string()).collect();
    argv.push(pod.to_string());
    if let Some(n) = namespace {
        argv.extend(["-n".to_string(), n.to_string()]);
    }
    argv.extend(post.iter().map(|s| s.to_string()));
    argv
}

/// Collects the pod's evidence; returns whether vLLM's version answered inside it.
pub(super) async fn pod(c: &mut Collector, pod: &str, namespace: Option<&str>) -> bool {
    let k = |pre: &[&str], post: &[&str]| kubectl(pod, namespace, pre, post);
    let probes: [(&str, Vec<String>, &str, Keep); 3] = [
        (
            "pod spec",
            k(&["kubectl", "get", "pod"], &["-o", "yaml"]),
            names::POD_SPEC,
            Keep::Stdout,
        ),
        (
            "pod logs",
            k(&["kubectl", "logs"], &["--timestamps"]),
            names::STARTUP_LOG,
            Keep::Both,
        ),
        (
            "pod nvidia-smi",
            k(&["kubectl", "exec"], &["--", "nvidia-smi"]),
            names::CONTAINER_NVIDIA_SMI,
            Keep::Stdout,
        ),
    ];
    for (label, argv, file, keep) in probes {
        c.cmd(label, &argv, file, keep).await;
    }
    let exec = k(&["kubectl", "exec"], &["--"]);
    let version = inside::vllm_version(c, &exec, "pod").await;
    inside::packages(c, &exec, "pod").await;
    crash_record(c, pod, namespace).await;
    version
}

/// Saves the crash record of `pod`; every probe is optional.
async fn crash_record(c: &mut Collector, pod: &str, namespace: Option<&str>) {
    c.cmd(
        "pod object",
        &kubectl(pod, namespace, &["kubectl", "get", "pod"], &["-o", "json"]),
        names::POD_JSON,
        Keep::Stdout,
    )
    .await;
    // No earlier container (never restarted) is an error of kubectl, and an answer:
    // the message is kept in pod-previous.log.failed.txt.
    c.cmd(
        "pod previous logs",
        &kubectl(
            pod,
            namespace,
            &["kubectl", "logs"],
            &["--previous", "--timestamps", "--all-containers=true"],
        ),
        names::POD_PREVIOUS_LOG,
        Keep::Both,
    )
    .await;
    let mut events = vec!["kubectl".to_string(), "get".into(), "events".into()];
    if let Some(n) = namespace {
        events.extend(["-n".to_string(), n.to_string()]);
    }
    events.extend([
        "--field-selector".to_string(),
        format!("involvedObject.name={pod}"),
        "-o".into(),
        "json".into(),
    ]);
    c.cmd("pod events", &events, names::POD_EVENTS, Keep::Stdout)
        .await;
}
