//! `golive check` on hand-assembled bundles (raw files written in the real formats under
//! tests/fixtures/env), the host and image items: driver, CUDA layers, GPUs visible,
//! the official image, and a bundle of only the files a runbook said to save.

use crate::common;

use golive::check::check_bundles;
use golive::report::Status;

use common::bundle::{evidence, fixture, healthy, put, status};

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
    put(
        &b,
        "nvidia-smi.txt",
        "fixture:nvidia-smi_570.133.20_b300_8gpu.txt",
    );
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
    put(&b, "probe-image.txt", "docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, please update your driver to a newer version, or use an earlier cuda container: unknown\n");
    put(
        &b,
        "nvidia-smi.txt",
        "fixture:nvidia-smi_570.133.20_b300_8gpu.txt",
    );
    let r = check_bundles(&[b], Some("kimi-k3")).unwrap();
    assert_eq!(status(&r, "cuda_layers"), Status::Fail);
    assert!(evidence(&r, "cuda_layers").contains("unsatisfied condition: cuda>=13.0"));
    assert_eq!(status(&r, "gpus_visible"), Status::Fail);
}

#[test]
fn r610_kmd_version_is_the_driver() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    put(
        &b,
        "nvidia-smi.txt",
        "fixture:nvidia-smi_610.57.04_kmd_b300_8gpu.txt",
    );
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
fn digest_pinned_official_image_and_foreign_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    let pinned =
        "vllm/vllm-openai@sha256:7f1c9e5a2b3d4c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6";
    put(
        &b,
        "docker-inspect.json",
        &format!(
            r#"[{{"Path": "vllm", "Args": ["serve", "moonshotai/Kimi-K3", "--tensor-parallel-size", "8", "--enable-prefix-caching"], "State": {{"Status": "running"}}, "Config": {{"Image": "{pinned}"}}}}]"#
        ),
    );
    std::fs::write(b.join("manifest.json"), "{ not golive's }").unwrap();
    let r = check_bundles(std::slice::from_ref(&b), Some("kimi-k3")).unwrap();
    assert_eq!(
        status(&r, "official_image"),
        Status::Pass,
        "{}",
        evidence(&r, "official_image")
    );
    // Another image pinned by digest is not official.
    put(
        &b,
        "docker-image-inspect.json",
        "fixture:docker-image-inspect_vllm-openai_v0.30.0_cu129.json",
    );
    let r = check_bundles(&[b], Some("kimi-k3")).unwrap();
    assert_eq!(
        status(&r, "official_image"),
        Status::Fail,
        "{}",
        evidence(&r, "official_image")
    );
}
