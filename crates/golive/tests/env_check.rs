//! `golive check` and `golive diff` on hand-assembled bundles (raw files written
//! in the real formats under tests/fixtures/env), one per runbook scenario.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use golive::check::{check_bundles, CheckReport};
use golive::report::Status;

fn fixture(name: &str) -> String {
    let p = common::repo_root()
        .join("crates/golive/tests/fixtures/env")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A bundle directory `<root>/<name>/raw/...`; values starting with `fixture:` are
/// fixture files, the rest literal text.
fn bundle(root: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("raw")).unwrap();
    for (raw, src) in files {
        let text = match src.strip_prefix("fixture:") {
            Some(f) => fixture(f),
            None => src.to_string(),
        };
        std::fs::write(dir.join("raw").join(raw), text).unwrap();
    }
    dir
}

/// A complete, healthy Kimi K3 node (8x B300, R580, official image, cache flag).
fn healthy(root: &Path, name: &str) -> PathBuf {
    bundle(
        root,
        name,
        &[
            (
                "nvidia-smi.txt",
                "fixture:nvidia-smi_580.95.05_b300_8gpu.txt",
            ),
            (
                "nvidia-smi-topo.txt",
                "fixture:nvidia-smi-topo_b300_8gpu_nv18_no-nic.txt",
            ),
            (
                "docker-image-inspect.json",
                "fixture:docker-image-inspect_kimi-k3_cu130.json",
            ),
            (
                "cmdline.txt",
                "fixture:cmdline_kimi-k3_tp8_prefix-caching.txt",
            ),
            ("startup.log", "fixture:startup_ok.log"),
            ("lsmod.txt", "fixture:lsmod_mlx5_with_peermem.txt"),
            (
                "env.txt",
                "VLLM_USE_V2_MODEL_RUNNER=1\nVLLM_PREFIX_CACHE_RETENTION_INTERVAL=0\n",
            ),
        ],
    )
}

fn status(r: &CheckReport, id: &str) -> Status {
    r.item(id)
        .unwrap_or_else(|| panic!("no item {id}: {r:#?}"))
        .status
}

fn evidence(r: &CheckReport, id: &str) -> String {
    r.item(id).unwrap().evidence.clone()
}

#[test]
fn healthy_node_passes_every_item() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    let r = check_bundles(&[b], Some("kimi-k3")).unwrap();
    for i in &r.items {
        assert_eq!(i.status, Status::Pass, "{}: {}", i.id, i.evidence);
    }
    assert!(r.decision.contains("acceptance run"), "{}", r.decision);
    assert!(evidence(&r, "host_driver").contains("Driver Version: 580.95.05"));
    assert!(evidence(&r, "prefix_caching_flag").contains("only prompt-end states kept"));
    // The --api-key of the hand-made cmdline never reaches the report.
    let json = serde_json::to_string(&r).unwrap();
    assert!(!json.contains("sk-live-9f8e7d6c5b4a"), "secret in report");
}

#[test]
fn driver_below_580_with_cuda13_image_is_host_first() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    std::fs::write(
        b.join("raw/nvidia-smi.txt"),
        fixture("nvidia-smi_570.133.20_b300_8gpu.txt"),
    )
    .unwrap();
    let r = check_bundles(&[b], Some("kimi-k3")).unwrap();
    assert_eq!(status(&r, "host_driver"), Status::Fail);
    assert!(
        evidence(&r, "host_driver").contains("570.133.20 < required 580.65.06"),
        "{}",
        evidence(&r, "host_driver")
    );
    assert_eq!(status(&r, "cuda_layers"), Status::Fail);
    assert!(evidence(&r, "cuda_layers")
        .contains("image needs CUDA 13.0, driver supports 12.8 natively"));
    assert!(
        r.decision.starts_with("host or image first"),
        "{}",
        r.decision
    );
}

#[test]
fn container_cli_refusal_fails_cuda_layers_and_phase() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    std::fs::write(
        b.join("raw/probe-image.txt"),
        "docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, please update your driver to a newer version, or use an earlier cuda container: unknown\n",
    )
    .unwrap();
    std::fs::write(
        b.join("raw/nvidia-smi.txt"),
        fixture("nvidia-smi_570.133.20_b300_8gpu.txt"),
    )
    .unwrap();
    let r = check_bundles(&[b], Some("kimi-k3")).unwrap();
    assert_eq!(status(&r, "cuda_layers"), Status::Fail);
    assert!(evidence(&r, "cuda_layers").contains("unsatisfied condition: cuda>=13.0"));
    assert_eq!(status(&r, "gpus_visible"), Status::Fail);
}

#[test]
fn missing_cache_flag_is_the_cache_direction() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    std::fs::write(
        b.join("raw/cmdline.txt"),
        fixture("cmdline_kimi-k3_tp8_no-cache-flag.txt"),
    )
    .unwrap();
    let r = check_bundles(std::slice::from_ref(&b), Some("kimi-k3")).unwrap();
    assert_eq!(status(&r, "prefix_caching_flag"), Status::Fail);
    assert!(evidence(&r, "prefix_caching_flag").contains(
        "--enable-prefix-caching required by kimi-k3 but not in the running command line"
    ));
    assert!(
        r.decision
            .starts_with("cache flag, prefix identity and retention"),
        "{}",
        r.decision
    );
    // The generic profile does not require the flag.
    let g = check_bundles(&[b], None).unwrap();
    assert_eq!(status(&g, "prefix_caching_flag"), Status::Pass);
}

#[test]
fn rdma_backend_on_nvlink_only_host() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    std::fs::write(
        b.join("raw/cmdline.txt"),
        fixture("cmdline_kimi-k3_dep16_deepep_v2_node0.sh"),
    )
    .unwrap();
    std::fs::write(
        b.join("raw/ibv_devinfo.txt"),
        fixture("ibv_devinfo_none.txt"),
    )
    .unwrap();
    std::fs::write(
        b.join("raw/lsmod.txt"),
        "Module                  Size  Used by\nnvidia              104153088  98 nvidia_uvm\n",
    )
    .unwrap();
    let r = check_bundles(&[b], Some("kimi-k3")).unwrap();
    assert_eq!(status(&r, "communication_path"), Status::Fail);
    let ev = evidence(&r, "communication_path");
    assert!(
        ev.contains("RDMA backend deepep_v2 on a host without RDMA"),
        "{ev}"
    );
    assert!(
        !ev.contains("RDMA variables"),
        "UCX_TLS alone on an RDMA backend is fine: {ev}"
    );
    assert!(r
        .item("communication_path")
        .unwrap()
        .next_step
        .contains("flashinfer_nvlink_one_sided"));
}

#[test]
fn rdma_variables_on_nvlink_backend() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    std::fs::write(
        b.join("raw/cmdline.txt"),
        "UCX_TLS=rc,cuda_copy NCCL_IB_HCA=mlx5 vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 --enable-expert-parallel --all2all-backend flashinfer_nvlink_one_sided --enable-prefix-caching\n",
    )
    .unwrap();
    let r = check_bundles(&[b], Some("kimi-k3")).unwrap();
    assert_eq!(status(&r, "communication_path"), Status::Fail);
    assert!(evidence(&r, "communication_path")
        .contains("RDMA variables on an NVLink backend: NCCL_IB_HCA, UCX_TLS"));
}

#[test]
fn errno_524_with_and_without_peermem() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, lsmod, expect) in [
        (
            "with",
            "lsmod_mlx5_with_peermem.txt",
            "set NCCL_DMABUF_ENABLE=0 to fall back to nvidia_peermem",
        ),
        (
            "without",
            "lsmod_mlx5_without_peermem.txt",
            "nvidia_peermem is NOT loaded",
        ),
    ] {
        let b = bundle(
            tmp.path(),
            name,
            &[
                (
                    "nvidia-smi.txt",
                    "fixture:nvidia-smi_580.95.05_b300_8gpu.txt",
                ),
                (
                    "cmdline.txt",
                    "fixture:cmdline_kimi-k3_dep16_deepep_v2_node0.sh",
                ),
                ("startup.log", "fixture:startup_errno524.log"),
                ("lsmod.txt", &format!("fixture:{lsmod}")),
                (
                    "ibv_devinfo.txt",
                    "fixture:ibv_devinfo_2x-mlx5_ib_active.txt",
                ),
            ],
        );
        let r = check_bundles(&[b], Some("kimi-k3")).unwrap();
        let item = r.item("communication_path").unwrap();
        assert_eq!(item.status, Status::Fail, "{name}");
        assert!(
            item.evidence
                .contains("mlx5dv_reg_dmabuf_mr failed: Unknown error 524"),
            "{name}: {}",
            item.evidence
        );
        assert!(
            item.next_step.contains(expect),
            "{name}: {}",
            item.next_step
        );
        assert_eq!(status(&r, "failure_phase"), Status::Fail, "{name}");
        assert!(
            r.decision.starts_with("isolate multi-node"),
            "{name}: {}",
            r.decision
        );
    }
}

#[test]
fn tp_times_pp_larger_than_visible_gpus() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    std::fs::write(
        b.join("raw/cmdline.txt"),
        fixture("cmdline_kimi-k3_tp8-pp2_single-node.txt"),
    )
    .unwrap();
    let r = check_bundles(std::slice::from_ref(&b), Some("kimi-k3")).unwrap();
    assert_eq!(status(&r, "parallelism"), Status::Fail);
    assert!(evidence(&r, "parallelism").contains("TP 8 x PP 2 x DP 1 = 16 GPUs > 8 visible GPUs"));
    assert!(r.decision.starts_with("memory"), "{}", r.decision);
    // CUDA_VISIBLE_DEVICES shrinks what the process sees.
    std::fs::write(
        b.join("raw/cmdline.txt"),
        fixture("cmdline_kimi-k3_tp8_prefix-caching.txt"),
    )
    .unwrap();
    std::fs::write(b.join("raw/env.txt"), "CUDA_VISIBLE_DEVICES=0,1,2,3\n").unwrap();
    let r = check_bundles(&[b], Some("vllm")).unwrap();
    assert_eq!(
        status(&r, "parallelism"),
        Status::Fail,
        "{}",
        evidence(&r, "parallelism")
    );
}

#[test]
fn two_nodes_with_different_drivers() {
    let tmp = tempfile::tempdir().unwrap();
    let a = healthy(tmp.path(), "gpu-a");
    let b = healthy(tmp.path(), "gpu-b");
    std::fs::write(
        b.join("raw/nvidia-smi.txt"),
        fixture("nvidia-smi_590.48.01_b300_8gpu_idle.txt"),
    )
    .unwrap();
    std::fs::write(
        b.join("raw/env.txt"),
        "VLLM_USE_V2_MODEL_RUNNER=0\nVLLM_HOST_IP=10.0.0.2\n",
    )
    .unwrap();
    let r = check_bundles(&[a, b], Some("kimi-k3")).unwrap();
    assert_eq!(r.hosts, vec!["gpu-a".to_string(), "gpu-b".to_string()]);
    assert_eq!(status(&r, "host_driver"), Status::Pass, "both >= 580.65.06");
    assert_eq!(status(&r, "node_consistency"), Status::Fail);
    let ev = evidence(&r, "node_consistency");
    assert!(
        ev.contains("driver differs: gpu-a=580.95.05, gpu-b=590.48.01"),
        "{ev}"
    );
    assert!(
        ev.contains("VLLM_USE_V2_MODEL_RUNNER: gpu-a=1, gpu-b=0"),
        "{ev}"
    );
    assert!(
        !ev.contains("VLLM_HOST_IP"),
        "per-node address is not an inconsistency: {ev}"
    );
    assert!(ev.contains("image digest identical"));
    assert!(
        r.decision.starts_with("isolate multi-node"),
        "{}",
        r.decision
    );
}

#[test]
fn r610_kmd_version_is_the_driver() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    std::fs::write(
        b.join("raw/nvidia-smi.txt"),
        fixture("nvidia-smi_610.57.04_kmd_b300_8gpu.txt"),
    )
    .unwrap();
    let r = check_bundles(&[b], Some("kimi-k3")).unwrap();
    assert_eq!(status(&r, "host_driver"), Status::Pass);
    assert!(evidence(&r, "host_driver").contains("KMD Version: 610.57.04"));
    assert_eq!(
        status(&r, "cuda_layers"),
        Status::Pass,
        "{}",
        evidence(&r, "cuda_layers")
    );
}

#[test]
fn recipe_file_is_a_profile() {
    let path = common::repo_root().join("crates/golive/tests/fixtures/env/recipe_example-moe.yaml");
    let p = golive::profile::Profile::load_recipe(&path).unwrap();
    assert_eq!(p.name, "example-moe");
    assert_eq!(
        p.image.official,
        vec!["vllm/vllm-openai:example-moe".to_string()]
    );
    assert_eq!(p.image.cuda_major, Some(13));
    assert_eq!(p.driver.min.as_deref(), Some("590"));
    assert_eq!(p.vllm.min_version.as_deref(), Some("0.28.0"));
    assert_eq!(p.gpus.min_count, Some(4));
    assert_eq!(
        p.gpus.classes,
        vec!["B300".to_string()],
        "verified hardware"
    );
    assert_eq!(p.gpus.min_by_strategy["multi_node_dep"], 16);
    assert_eq!(p.flags.required, vec!["--trust-remote-code".to_string()]);
    assert_eq!(
        p.flags.required_on["blackwell"],
        vec!["--enable-prefix-caching".to_string()]
    );
    assert_eq!(p.flags.tool_call_parser.as_deref(), Some("example_v1"));
    assert_eq!(p.transport.rdma_all2all, "deepep_v2");
    assert_eq!(p.transport.nvlink_all2all, "flashinfer_nvlink_one_sided");
    assert_eq!(p.transport.rdma_env["UCX_TLS"], "rc,cuda_copy");
    assert_eq!(p.cache.max_context, Some(262144));

    // Judged against the recipe, the Kimi node is the wrong image, driver, vLLM and parser.
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    let out = Command::new(common::golive_bin())
        .args([
            "check",
            b.to_str().unwrap(),
            "--recipe",
            path.to_str().unwrap(),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let r: CheckReport = serde_json::from_slice(&out.stdout).unwrap();
    for id in [
        "official_image",
        "host_driver",
        "vllm_version",
        "parsers",
        "prefix_caching_flag",
    ] {
        assert_eq!(status(&r, id), Status::Fail, "{id}: {}", evidence(&r, id));
    }
    assert!(evidence(&r, "prefix_caching_flag")
        .contains("--max-model-len 1048576 exceeds the model's context 262144"));
}

#[test]
fn cli_exit_codes_and_json() {
    let tmp = tempfile::tempdir().unwrap();
    let good = healthy(tmp.path(), "gpu-a");
    let run = |args: &[&str]| {
        Command::new(common::golive_bin())
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&[
        "check",
        good.to_str().unwrap(),
        "--profile",
        "kimi-k3",
        "--format",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["decision"].as_str().unwrap().contains("acceptance run"));
    let ids: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    for id in [
        "official_image",
        "host_driver",
        "cuda_layers",
        "gpus_visible",
        "parallelism",
        "failure_phase",
        "prefix_caching_flag",
        "communication_path",
        "reproducible",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    assert!(v["items"][0]["evidence"].is_string() && v["items"][0]["status"] == "pass");

    // Text: the repair direction comes first.
    std::fs::write(
        good.join("raw/nvidia-smi.txt"),
        fixture("nvidia-smi_570.133.20_b300_8gpu.txt"),
    )
    .unwrap();
    let out = run(&["check", good.to_str().unwrap(), "--profile", "kimi-k3"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("decision: host or image first"), "{text}");
    assert!(!text.contains("sk-live-9f8e7d6c5b4a"));

    assert_eq!(
        run(&["check", "/nonexistent/bundle"]).status.code(),
        Some(2)
    );
    assert_eq!(
        run(&["check", good.to_str().unwrap(), "--profile", "no-such"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(run(&["check"]).status.code(), Some(2));
}

#[test]
fn diff_shows_what_matters_only() {
    let tmp = tempfile::tempdir().unwrap();
    let a = healthy(tmp.path(), "gpu-a-20261130T100000Z");
    let b = healthy(tmp.path(), "gpu-a-20261130T120000Z");
    // B: other driver, another max-model-len, no peermem, one env change; also
    // different memory in use, PIDs and start time, which do not matter.
    std::fs::write(
        b.join("raw/nvidia-smi.txt"),
        fixture("nvidia-smi_590.48.01_b300_8gpu_idle.txt"),
    )
    .unwrap();
    let cmd = fixture("cmdline_kimi-k3_tp8_prefix-caching.txt")
        .replace("--max-model-len 1048576", "--max-model-len 524288");
    std::fs::write(b.join("raw/cmdline.txt"), cmd).unwrap();
    std::fs::write(
        b.join("raw/lsmod.txt"),
        fixture("lsmod_mlx5_without_peermem.txt"),
    )
    .unwrap();
    std::fs::write(
        b.join("raw/env.txt"),
        "VLLM_USE_V2_MODEL_RUNNER=1\nVLLM_PREFIX_CACHE_RETENTION_INTERVAL=512\n",
    )
    .unwrap();
    std::fs::write(
        b.join("raw/startup.log"),
        fixture("startup_ok.log")
            .replace("pid=4021", "pid=9977")
            .replace("11-30 10:", "11-30 12:"),
    )
    .unwrap();

    let ra = golive::envparse::Bundle::load(&a).unwrap();
    let rb = golive::envparse::Bundle::load(&b).unwrap();
    let d = golive::diff::diff_bundles(&ra, &rb);
    let kinds: Vec<String> = d
        .changes
        .iter()
        .map(|c| format!("{} {}", c.kind, c.name).trim().to_string())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "driver",
            "arg --max-model-len",
            "env VLLM_PREFIX_CACHE_RETENTION_INTERVAL",
            "module nvidia_peermem",
        ],
        "{d:#?}"
    );
    assert_eq!(d.changes[0].a.as_deref(), Some("580.95.05"));
    assert_eq!(d.changes[0].b.as_deref(), Some("590.48.01"));

    let out = Command::new(common::golive_bin())
        .args(["diff", a.to_str().unwrap(), b.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("driver: 580.95.05 -> 590.48.01"), "{text}");
    assert!(!text.contains("sk-live"), "{text}");
    let same = Command::new(common::golive_bin())
        .args([
            "diff",
            a.to_str().unwrap(),
            a.to_str().unwrap(),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&same.stdout).unwrap();
    assert_eq!(v["changes"].as_array().unwrap().len(), 0);
}

#[test]
fn hand_assembled_bundle_of_two_files() {
    // The README case: a folder with only what the runbook said to save.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("node1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("nvidia-smi.txt"),
        fixture("nvidia-smi_570.133.20_b300_8gpu.txt"),
    )
    .unwrap();
    std::fs::write(
        dir.join("cmdline.txt"),
        fixture("cmdline_kimi-k3_tp8_no-cache-flag.txt"),
    )
    .unwrap();
    let r = check_bundles(&[dir], Some("kimi-k3")).unwrap();
    assert_eq!(status(&r, "host_driver"), Status::Fail);
    assert_eq!(status(&r, "prefix_caching_flag"), Status::Fail);
    assert_eq!(status(&r, "official_image"), Status::Unknown);
    assert!(
        r.decision.starts_with("host or image first"),
        "{}",
        r.decision
    );
    assert!(r.decision.contains("after that"), "{}", r.decision);
}

#[test]
fn rendered_pod_spec_is_the_launch() {
    let tmp = tempfile::tempdir().unwrap();
    let b = bundle(
        tmp.path(),
        "pod",
        &[
            ("pod-spec.yaml", "fixture:pod-spec_kimi-k3_dep.yaml"),
            (
                "nvidia-smi.txt",
                "fixture:nvidia-smi_580.95.05_b300_8gpu.txt",
            ),
            (
                "ibv_devinfo.txt",
                "fixture:ibv_devinfo_2x-mlx5_ib_active.txt",
            ),
        ],
    );
    let loaded = golive::envparse::Bundle::load(&b).unwrap();
    let l = loaded.launch.as_ref().expect("launch from the pod spec");
    assert_eq!((l.data_parallel(), l.data_parallel_local()), (16, 8));
    assert_eq!(l.all2all_backend().as_deref(), Some("deepep_v2"));
    assert_eq!(l.env["UCX_TLS"], "rc,cuda_copy");
    let r = check_bundles(&[b], Some("kimi-k3")).unwrap();
    assert_eq!(status(&r, "prefix_caching_flag"), Status::Pass);
    // One node of a 16-GPU DEP: the other node's bundle is needed to judge the total.
    assert_eq!(
        status(&r, "parallelism"),
        Status::Unknown,
        "{}",
        evidence(&r, "parallelism")
    );
    assert_eq!(
        status(&r, "communication_path"),
        Status::Pass,
        "{}",
        evidence(&r, "communication_path")
    );
}

#[test]
fn tensor_parallel_over_a_gpu_without_nvlink() {
    // The real degraded B200 fabric (GPU2 lost NVLink) from ../shared/env, read in place.
    let Some(shared) = common::shared_dir() else {
        return;
    };
    let topo =
        shared.join("env/nvidia-smi-topo_b200_8gpu_gpu2-no-nvlink_12nic_PARTIAL-noheader.txt");
    let Ok(text) = std::fs::read_to_string(&topo) else {
        eprintln!("skipping: {} is not present", topo.display());
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    std::fs::write(b.join("raw/nvidia-smi-topo.txt"), text).unwrap();
    let r = check_bundles(&[b], Some("vllm")).unwrap();
    assert_eq!(status(&r, "parallelism"), Status::Fail);
    assert!(
        evidence(&r, "parallelism").contains("without NVLink: GPU2"),
        "{}",
        evidence(&r, "parallelism")
    );
}

#[test]
fn digest_pinned_official_image_and_foreign_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    let pinned =
        "vllm/vllm-openai@sha256:7f1c9e5a2b3d4c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6";
    std::fs::write(
        b.join("raw/docker-inspect.json"),
        format!(r#"[{{"Path": "vllm", "Args": ["serve", "moonshotai/Kimi-K3", "--tensor-parallel-size", "8", "--enable-prefix-caching"], "State": {{"Status": "running"}}, "Config": {{"Image": "{pinned}"}}}}]"#),
    )
    .unwrap();
    std::fs::write(b.join("manifest.json"), "{ not golive's }").unwrap();
    let r = check_bundles(std::slice::from_ref(&b), Some("kimi-k3")).unwrap();
    assert_eq!(
        status(&r, "official_image"),
        Status::Pass,
        "{}",
        evidence(&r, "official_image")
    );
    // Another image pinned by digest is not official.
    std::fs::write(
        b.join("raw/docker-image-inspect.json"),
        fixture("docker-image-inspect_vllm-openai_v0.30.0_cu129.json"),
    )
    .unwrap();
    let r = check_bundles(&[b], Some("kimi-k3")).unwrap();
    assert_eq!(
        status(&r, "official_image"),
        Status::Fail,
        "{}",
        evidence(&r, "official_image")
    );
}

#[test]
fn profile_file_in_toml() {
    let tmp = tempfile::tempdir().unwrap();
    let prof = tmp.path().join("site.toml");
    std::fs::write(
        &prof,
        "name = \"site\"\n[driver]\nmin = \"590.48.01\"\n[flags]\nrequired = [\"--enable-chunked-prefill\"]\n",
    )
    .unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    let r = check_bundles(&[b], Some(prof.to_str().unwrap())).unwrap();
    assert_eq!(r.profile, "site");
    assert_eq!(status(&r, "host_driver"), Status::Fail);
    assert!(
        evidence(&r, "prefix_caching_flag").contains("--enable-chunked-prefill required by site")
    );
    std::fs::write(&prof, "name = [broken").unwrap();
    assert!(golive::profile::Profile::load(prof.to_str().unwrap()).is_err());
}
