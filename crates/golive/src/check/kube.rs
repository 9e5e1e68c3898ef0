//! Kubernetes' record of a crash: a container whose `lastState` is OOMKilled or exit
//! code 137 (SIGKILL, what the kernel's OOM killer sends at the cgroup limit) was
//! killed on the host side for host memory, which no GPU setting fixes.

use serde_json::Value;

use super::{combine, item, CheckItem, Ctx, ItemId};
use crate::report::{Owner, Status};

/// One container's last termination, as Kubernetes recorded it.
struct Termination {
    container: String,
    reason: String,
    exit_code: Option<i64>,
    finished_at: String,
    restarts: u64,
}

/// The memory limit of a container in the pod spec (`resources.limits.memory`).
fn memory_limit(pod: &Value, container: &str) -> Option<String> {
    pod["spec"]["containers"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == container)?["resources"]["limits"]["memory"]
        .as_str()
        .map(String::from)
}

fn terminations(pod: &Value) -> Vec<Termination> {
    let status = &pod["status"];
    ["initContainerStatuses", "containerStatuses"]
        .iter()
        .filter_map(|k| status[k].as_array())
        .flatten()
        .filter_map(|cs| {
            // The current state when it is the terminated one (restartPolicy Never).
            let t = cs["lastState"]["terminated"]
                .as_object()
                .or_else(|| cs["state"]["terminated"].as_object())?;
            Some(Termination {
                container: cs["name"].as_str().unwrap_or("?").to_string(),
                reason: t
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                exit_code: t.get("exitCode").and_then(Value::as_i64),
                finished_at: t
                    .get("finishedAt")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                restarts: cs["restartCount"].as_u64().unwrap_or(0),
            })
        })
        .collect()
}

impl Termination {
    fn is_oom(&self) -> bool {
        self.reason == "OOMKilled" || self.exit_code == Some(137)
    }
    fn is_clean(&self) -> bool {
        self.exit_code == Some(0) && !self.is_oom()
    }
}

/// Memory evictions and restart back-offs among the pod's events.
fn event_lines(events: &Value) -> Vec<(bool, String)> {
    events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let reason = e["reason"].as_str().unwrap_or("");
            let message = e["message"].as_str().unwrap_or("");
            let memory = reason == "OOMKilling"
                || (reason == "Evicted" && message.to_ascii_lowercase().contains("memory"));
            let keep = memory || matches!(reason, "BackOff" | "Evicted" | "Killing" | "Failed");
            keep.then(|| {
                let count = e["count"].as_u64().unwrap_or(1);
                (
                    memory,
                    format!(
                        "event {reason} x{count}: {}",
                        crate::text::truncate(message, 160)
                    ),
                )
            })
        })
        .collect()
}

/// `pod_crash_record`: only when a bundle has the pod object or its events.
pub(super) fn check_pod_crash(c: &Ctx) -> Option<CheckItem> {
    if !c
        .bundles
        .iter()
        .any(|b| b.pod.is_some() || b.pod_events.is_some())
    {
        return None;
    }
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        let Some(pod) = &b.pod else {
            st.push(Status::Unknown);
            ev.push(c.tag(
                b,
                "no pod object (raw/pod.json from kubectl get pod -o json)",
            ));
            continue;
        };
        let mut status = Status::Pass;
        let terms = terminations(pod);
        if terms.is_empty() {
            ev.push(c.tag(b, "no container has terminated (no lastState.terminated)"));
        }
        for t in &terms {
            let code = t.exit_code.map_or("?".into(), |c| c.to_string());
            let verdict = if t.is_oom() {
                status = Status::Fail;
                let limit = memory_limit(pod, &t.container)
                    .map(|m| format!(" {m}"))
                    .unwrap_or_default();
                format!(": killed for host memory (OOM at the container's memory limit{limit})")
            } else if t.is_clean() {
                String::new()
            } else {
                status = Status::Fail;
                ": crashed (see raw/pod-previous.log, golive triage)".into()
            };
            ev.push(c.tag(
                b,
                format!(
                    "container {}: lastState terminated reason {} exit code {code} at {}, {} restarts{verdict}",
                    t.container,
                    if t.reason.is_empty() { "-" } else { &t.reason },
                    t.finished_at,
                    t.restarts
                ),
            ));
        }
        if let Some(events) = &b.pod_events {
            for (memory, line) in event_lines(events) {
                if memory {
                    status = Status::Fail;
                }
                ev.push(c.tag(b, line));
            }
        }
        st.push(status);
    }
    let oom = ev
        .iter()
        .any(|l| l.contains("host memory") || l.contains("OOMKilling"))
        || ev
            .iter()
            .any(|l| l.contains("event Evicted") && l.to_ascii_lowercase().contains("memory"));
    let next = if oom {
        "Host-side OOM, not GPU memory: the kernel killed the container at its memory limit. Raise the pod's resources.limits.memory (and requests) to what vLLM needs in host RAM (weight loading, CPU KV offload/swap, tokenizer and API workers), give /dev/shm a memory-backed emptyDir, or lower those uses; check the node's allocatable memory before restarting."
    } else {
        "Read the crashed container's log (raw/pod-previous.log) with golive triage for the first cause before restarting."
    };
    let mut it = item(
        ItemId::PodCrashRecord,
        "Kubernetes' crash record (lastState, previous log, events)",
        combine(&st),
        ev,
        next,
    );
    if it.status == Status::Fail {
        it.owner = Some(if oom {
            Owner::Environment
        } else {
            Owner::Server
        });
    }
    Some(it)
}
