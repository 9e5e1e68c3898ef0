//! `golive check` on hand-assembled bundles (raw files written in the real formats under
//! tests/fixtures/env), the multi-GPU and multi-node items: the communication path
//! (RDMA or NVLink backend, errno 524 and nvidia_peermem), parallelism against the
//! visible GPUs and the fabric, node consistency, and a rendered pod spec as the launch.

use crate::common;

use golive::check::check_bundles;
use golive::report::Status;

use common::bundle::{bundle, evidence, healthy, put, status};

#[test]
fn rdma_backend_on_nvlink_only_host() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    put(
        &b,
        "cmdline.txt",
        "fixture:cmdline_kimi-k3_dep16_deepep_v2_node0.sh",
    );
    put(&b, "ibv_devinfo.txt", "fixture:ibv_devinfo_none.txt");
    put(
        &b,
        "lsmod.txt",
        "Module                  Size  Used by\nnvidia              104153088  98 nvidia_uvm\n",
    );
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
    put(&b, "cmdline.txt", "UCX_TLS=rc,cuda_copy NCCL_IB_HCA=mlx5 vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 --enable-expert-parallel --all2all-backend flashinfer_nvlink_one_sided --enable-prefix-caching\n");
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
    put(
        &b,
        "cmdline.txt",
        "fixture:cmdline_kimi-k3_tp8-pp2_single-node.txt",
    );
    let r = check_bundles(std::slice::from_ref(&b), Some("kimi-k3")).unwrap();
    assert_eq!(status(&r, "parallelism"), Status::Fail);
    assert!(evidence(&r, "parallelism").contains("TP 8 x PP 2 x DP 1 = 16 GPUs > 8 visible GPUs"));
    assert!(r.decision.starts_with("memory"), "{}", r.decision);
    // CUDA_VISIBLE_DEVICES shrinks what the process sees.
    put(
        &b,
        "cmdline.txt",
        "fixture:cmdline_kimi-k3_tp8_prefix-caching.txt",
    );
    put(&b, "env.txt", "CUDA_VISIBLE_DEVICES=0,1,2,3\n");
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
    put(
        &b,
        "nvidia-smi.txt",
        "fixture:nvidia-smi_590.48.01_b300_8gpu_idle.txt",
    );
    put(
        &b,
        "env.txt",
        "VLLM_USE_V2_MODEL_RUNNER=0\nVLLM_HOST_IP=10.0.0.2\n",
    );
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
    let Some(topo) = common::shared_file(
        "env/nvidia-smi-topo_b200_8gpu_gpu2-no-nvlink_12nic_PARTIAL-noheader.txt",
    ) else {
        return;
    };
    let text = std::fs::read_to_string(&topo).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    put(&b, "nvidia-smi-topo.txt", &text);
    let r = check_bundles(&[b], Some("vllm")).unwrap();
    assert_eq!(status(&r, "parallelism"), Status::Fail);
    assert!(
        evidence(&r, "parallelism").contains("without NVLink: GPU2"),
        "{}",
        evidence(&r, "parallelism")
    );
}
