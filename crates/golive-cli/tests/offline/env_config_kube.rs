//! Flags where they really are and what only the container and Kubernetes know:
//! `collect` saves the `vllm serve --config FILE` contents, the Python package versions
//! inside the container and, with `--pod`, Kubernetes' crash record; `check` merges the
//! config with the command line, bounds the versions and reads OOMKilled / exit 137.
//! `docker` and `kubectl` are scripted on PATH and print the real CLIs' JSON shapes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use golive::report::{Owner, Status};

use common::shim::{env_fixture as fixture, write_exe, DockerShim};

/// `docker` answering for a container started with `--config /etc/vllm/kimi-k3.yaml`,
/// with the Python package versions inside it.
fn docker_shim(bin: &Path) -> String {
    DockerShim::new("docker-inspect_kimi-k3_config-file.json")
        .exec(
            "cat",
            &format!(
                r#"if [ "$2" = /etc/vllm/kimi-k3.yaml ]; then cat '{}'
        else echo "cat: $2: No such file or directory" >&2; exit 1; fi"#,
                fixture("vllm-config_kimi-k3.yaml")
            ),
        )
        .exec("python3", &python3_answers())
        .install(bin)
}

/// `python3 -c ...` inside the container: the package list for the importlib query,
/// else vLLM's version.
fn python3_answers() -> String {
    format!(
        r#"case "$3" in
          *importlib.metadata*) cat '{}' ;;
          *) echo 0.26.2 ;;
        esac"#,
        fixture("pip-list_kimi-k3.json")
    )
}

/// `kubectl` answering for pod kimi-k3-0 in namespace serving; `POD_JSON` picks the
/// pod object (its containerStatuses), pip is absent so `pip list` is never needed.
fn kubectl_shim(bin: &Path) {
    let script = format!(
        r#"#!/bin/sh
case "$1" in
  get)
    case "$2" in
      pod)
        case "$*" in
          *"-o yaml"*) cat '{spec}' ;;
          *"-o json"*) cat "${{POD_JSON:-{pod}}}" ;;
        esac ;;
      events) cat '{events}' ;;
    esac ;;
  logs)
    case "$*" in
      *--previous*) cat '{previous}' ;;
      *) cat '{log}' ;;
    esac ;;
  exec)
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
    shift
    case "$1" in
      nvidia-smi) cat '{smi}' ;;
      python3) {python3} ;;
      *) echo "error: Internal error occurred: error executing command in container: failed to exec in container: exec: \"$1\": executable file not found in \$PATH" >&2; exit 1 ;;
    esac ;;
esac
"#,
        spec = fixture("pod-spec_kimi-k3_dep.yaml"),
        pod = fixture("kubectl-get-pod_kimi-k3_oomkilled.json"),
        events = fixture("kubectl-get-events_kimi-k3_oomkilled.json"),
        previous = fixture("kubectl-logs-previous_kimi-k3.log"),
        log = fixture("startup_ok.log"),
        smi = fixture("nvidia-smi_580.95.05_b300_8gpu.txt"),
        python3 = python3_answers(),
    );
    write_exe(bin, "kubectl", &script);
}

/// `golive collect` with `path` as PATH (the scripted tools first).
fn collect(path: &str, out: &Path, target: &[&str], env: &[(&str, &str)]) -> PathBuf {
    let o = Command::new(common::golive_bin())
        .env("PATH", path)
        .envs(env.iter().copied())
        .args(["collect", "--out", out.to_str().unwrap(), "--timeout", "20"])
        .args(target)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    PathBuf::from(String::from_utf8(o.stdout).unwrap().trim())
}

fn copy_bundle(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("raw")).unwrap();
    for e in std::fs::read_dir(from.join("raw")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join("raw").join(e.file_name())).unwrap();
    }
}

#[test]
fn config_file_flags_and_package_versions_from_the_container() {
    let tmp = tempfile::tempdir().unwrap();
    let path = docker_shim(&tmp.path().join("bin"));
    let dir = collect(
        &path,
        &tmp.path().join("out"),
        &["--container", "kimi-k3"],
        &[],
    );
    let raw = |n: &str| std::fs::read_to_string(dir.join("raw").join(n)).unwrap();
    let config = raw("vllm-config.yaml");
    assert!(config.contains("enable-prefix-caching: true"), "{config}");
    let all = common::all_text(&dir);
    for secret in [
        "sk-live-config-9f8e7d",
        "sk-live-container-7a6b5c",
        "hf_container_4d3c2b1a",
    ] {
        assert!(!all.contains(secret), "{secret} landed in the bundle");
    }
    assert!(raw("python-packages.json").contains("nvidia-nccl-cu13"));

    // The flag set only in the config file counts: prefix caching passes.
    let r = golive::check::check_bundles(std::slice::from_ref(&dir), Some("kimi-k3")).unwrap();
    let pc = r.item("prefix_caching_flag").unwrap();
    assert_eq!(pc.status, Status::Pass, "{}", pc.evidence);
    assert!(
        pc.evidence
            .contains("prefix caching is set by the --config file"),
        "{}",
        pc.evidence
    );
    assert!(pc.evidence.contains("prefix-match-unit"), "{}", pc.evidence);
    let par = r.item("parallelism").unwrap();
    assert!(
        par.evidence.contains("TP 8"),
        "TP from the config: {}",
        par.evidence
    );
    // The versions inside the container, bounded by the profile (vLLM >= 0.27.0).
    let pv = r.item("package_versions").unwrap();
    assert_eq!(pv.status, Status::Fail, "{}", pv.evidence);
    for want in [
        "vllm 0.26.2",
        "torch 2.10.0+cu130",
        "nvidia-nccl-cu13 2.28.7",
        "nvidia-nvshmem-cu13 3.4.5",
        "deep-ep 1.2.1+cu130",
        "flashinfer-python 0.5.3",
        "xgrammar 0.1.27",
        "vllm 0.26.2 outside >=0.27.0",
    ] {
        assert!(pv.evidence.contains(want), "{want}: {}", pv.evidence);
    }

    // Two nodes with different NCCL wheels: named, and a failure.
    let node2 = tmp.path().join("node2");
    copy_bundle(&dir, &node2);
    let pip = raw("python-packages.json").replace("2.28.7", "2.27.3");
    std::fs::write(node2.join("raw/python-packages.json"), pip).unwrap();
    std::fs::write(
        node2.join("manifest.json"),
        std::fs::read_to_string(dir.join("manifest.json"))
            .unwrap()
            .replacen("\"host\": \"", "\"host\": \"node2-", 1),
    )
    .unwrap();
    let r = golive::check::check_bundles(&[dir.clone(), node2], Some("vllm")).unwrap();
    let pv = r.item("package_versions").unwrap();
    assert_eq!(pv.status, Status::Fail, "{}", pv.evidence);
    assert!(
        pv.evidence.contains("nccl differs between nodes:") && pv.evidence.contains("2.27.3"),
        "{}",
        pv.evidence
    );
    assert!(!pv.evidence.contains("torch differs"), "{}", pv.evidence);

    // The command line overrides the file, as in vLLM.
    let over = tmp.path().join("override");
    copy_bundle(&dir, &over);
    let cmd = raw("cmdline.txt");
    std::fs::write(
        over.join("raw/cmdline.txt"),
        format!("{} --no-enable-prefix-caching\n", cmd.trim()),
    )
    .unwrap();
    let r = golive::check::check_bundles(std::slice::from_ref(&over), Some("kimi-k3")).unwrap();
    let pc = r.item("prefix_caching_flag").unwrap();
    assert_eq!(pc.status, Status::Fail, "{}", pc.evidence);
    assert!(
        pc.evidence.contains("set by the command line"),
        "{}",
        pc.evidence
    );

    // A --config whose contents were not collected: the flag is not known.
    let uncollected = tmp.path().join("uncollected");
    copy_bundle(&dir, &uncollected);
    std::fs::remove_file(uncollected.join("raw/vllm-config.yaml")).unwrap();
    let r =
        golive::check::check_bundles(std::slice::from_ref(&uncollected), Some("kimi-k3")).unwrap();
    let pc = r.item("prefix_caching_flag").unwrap();
    assert_ne!(pc.status, Status::Pass, "{}", pc.evidence);
    assert!(
        pc.evidence.contains("contents were not collected"),
        "{}",
        pc.evidence
    );

    // A profile can require the recipe-era flags and their values.
    for (unit, want) in [("64", Status::Pass), ("128", Status::Fail)] {
        let profile = tmp.path().join(format!("k3-unit-{unit}.toml"));
        std::fs::write(
            &profile,
            format!(
                "name = \"k3-unit\"\n[flags]\nrequired = [\"--enable-prefix-caching\", \"--prefix-match-unit\"]\n\
                 values = {{ \"--prefix-match-unit\" = \"{unit}\" }}\n"
            ),
        )
        .unwrap();
        let r = golive::check::check_bundles(
            std::slice::from_ref(&dir),
            Some(profile.to_str().unwrap()),
        )
        .unwrap();
        let pc = r.item("prefix_caching_flag").unwrap();
        assert_eq!(pc.status, want, "unit {unit}: {}", pc.evidence);
        if want == Status::Fail {
            assert!(
                pc.evidence
                    .contains("--prefix-match-unit 64 but k3-unit requires 128"),
                "{}",
                pc.evidence
            );
        }
    }
}

#[test]
fn pod_crash_record_reads_oomkilled_as_host_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    kubectl_shim(&bin);
    let path = common::shim::path_with(&bin);
    let target = ["--pod", "kimi-k3-0", "-n", "serving"];
    let dir = collect(&path, &tmp.path().join("oom"), &target, &[]);
    let raw = |n: &str| std::fs::read_to_string(dir.join("raw").join(n)).unwrap();
    assert!(raw("pod.json").contains("\"OOMKilled\""));
    assert!(raw("pod-events.json").contains("Back-off restarting failed container"));
    assert!(raw("pod-previous.log").contains("Model loading took 142.8812 GiB"));
    assert!(raw("python-packages.json").contains("xgrammar"));
    assert!(
        !common::all_text(&dir).contains("hf_pod_SECRET_5e6f7a"),
        "pod env secret in the bundle"
    );

    let r = golive::check::check_bundles(std::slice::from_ref(&dir), Some("kimi-k3")).unwrap();
    let crash = r.item("pod_crash_record").unwrap();
    assert_eq!(crash.status, Status::Fail, "{}", crash.evidence);
    assert_eq!(crash.owner, Some(Owner::Environment));
    assert!(
        crash.evidence.contains("container vllm: lastState terminated reason OOMKilled exit code 137 at 2026-11-30T10:22:41Z, 3 restarts"),
        "{}",
        crash.evidence
    );
    assert!(
        crash.evidence.contains("event BackOff x6"),
        "{}",
        crash.evidence
    );
    assert!(
        crash.next_step.contains("resources.limits.memory"),
        "{}",
        crash.next_step
    );
    assert!(
        r.decision.starts_with("the pod's crash record"),
        "{}",
        r.decision
    );
    let text = golive::check::render_text(&r);
    assert!(text.contains("owner: environment"), "{text}");

    // Exit 137 without the OOMKilled reason is a SIGKILL at the limit too; exit 1 is a
    // crash of the server, not of the host.
    let pod: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("kubectl-get-pod_kimi-k3_oomkilled.json")).unwrap(),
    )
    .unwrap();
    for (reason, code, oom) in [
        ("Error", 137, true),
        ("Error", 1, false),
        ("Completed", 0, false),
    ] {
        let mut p = pod.clone();
        let t = &mut p["status"]["containerStatuses"][0]["lastState"]["terminated"];
        t["reason"] = reason.into();
        t["exitCode"] = code.into();
        let file = tmp.path().join(format!("pod-{code}.json"));
        std::fs::write(&file, serde_json::to_vec_pretty(&p).unwrap()).unwrap();
        let dir = collect(
            &path,
            &tmp.path().join(format!("exit-{code}")),
            &target,
            &[("POD_JSON", file.to_str().unwrap())],
        );
        let r = golive::check::check_bundles(std::slice::from_ref(&dir), Some("kimi-k3")).unwrap();
        let crash = r.item("pod_crash_record").unwrap();
        let line = format!("reason {reason} exit code {code}");
        assert!(crash.evidence.contains(&line), "{line}: {}", crash.evidence);
        match (code, oom) {
            (0, _) => assert_eq!(crash.status, Status::Pass, "{}", crash.evidence),
            (_, true) => {
                assert_eq!(crash.status, Status::Fail);
                assert_eq!(crash.owner, Some(Owner::Environment));
                assert!(crash.next_step.contains("memory"), "{}", crash.next_step);
            }
            (_, false) => {
                assert_eq!(crash.status, Status::Fail);
                assert_eq!(crash.owner, Some(Owner::Server));
                assert!(
                    crash.next_step.contains("golive triage"),
                    "{}",
                    crash.next_step
                );
            }
        }
    }
}
