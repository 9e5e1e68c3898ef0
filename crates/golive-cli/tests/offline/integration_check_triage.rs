//! `golive check` (the CLI, JSON out) meets the triage engine: a bundle whose
//! raw/startup.log holds the errno-524 NCCL failure of a multi-node Kimi K3 start.
//! `golive triage` classifies that log `nccl` (first cause the NCCL error, refined by
//! the errno-524 registration line, not the engine's last words); `golive check`
//! takes the same first cause as the failure phase, and its
//! next step depends on raw/lsmod.txt: the NCCL_DMABUF_ENABLE=0 fallback only when
//! nvidia_peermem is loaded. (env_check.rs covers check_bundles on the fixture
//! files; this drives the binaries on a log and module lists written here.)

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Node 0 of a two-node DeepEP start: DMA-BUF registration on mlx5 fails with
/// errno 524 (EOPNOTSUPP in the kernel), NCCL reports it as an unhandled system error.
const STARTUP_ERRNO_524: &str = "\
(APIServer pid=4120) INFO 11-30 12:10:01 [api_server.py:1896] vLLM API server version 0.27.1
(EngineCore_DP0 pid=4388) INFO 11-30 12:10:19 [core.py:93] Initializing a V1 LLM engine (v0.27.1) with config: model='moonshotai/Kimi-K3', enable_prefix_caching=True
gpu-node-b:4388:4702 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>
gpu-node-b:4388:4702 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.2<0>
gpu-node-b:4388:4702 [0] NCCL INFO DMA-BUF is available on GPU device 0
gpu-node-b:4388:4702 [0] NCCL WARN NET/IB : mlx5dv_reg_dmabuf_mr failed: Unknown error 524 (errno 524)
gpu-node-b:4388:4702 [0] NCCL INFO transport/net_ib.cc:1281 -> 2
gpu-node-b:4388:4702 [0] NCCL INFO transport/net.cc:829 -> 2
gpu-node-b:4388:4702 [0] NCCL INFO init.cc:1517 -> 2
(EngineCore_DP0 pid=4388) ERROR 11-30 12:11:02 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=4388) ERROR 11-30 12:11:02 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=4388) ERROR 11-30 12:11:02 [core.py:708]   File \"/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_communicators/pynccl.py\", line 109, in __init__
(EngineCore_DP0 pid=4388) ERROR 11-30 12:11:02 [core.py:708]     self.comm: ncclComm_t = self.nccl.ncclCommInitRank(
(EngineCore_DP0 pid=4388) ERROR 11-30 12:11:02 [core.py:708] RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)
(APIServer pid=4120) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
";

/// `lsmod` as printed on the node, with or without nvidia_peermem.
fn lsmod(peermem: bool) -> String {
    let mut s = String::from("Module                  Size  Used by\n");
    if peermem {
        s.push_str("nvidia_peermem         16384  0\n");
    }
    s.push_str(if peermem {
        "nvidia_uvm           2093056  4\nnvidia              104153088  98 nvidia_uvm,nvidia_peermem\n"
    } else {
        "nvidia_uvm           2093056  4\nnvidia              104153088  96 nvidia_uvm\n"
    });
    s.push_str(
        "mlx5_ib               561152  0\n\
         ib_uverbs             212992  2 rdma_ucm,mlx5_ib\n\
         ib_core               528384  8 rdma_cm,ib_ipoib,iw_cm,ib_umad,rdma_ucm,ib_uverbs,mlx5_ib,ib_cm\n\
         mlx5_core            3153920  1 mlx5_ib\n",
    );
    s
}

fn bundle(root: &Path, name: &str, peermem: bool) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("raw")).unwrap();
    std::fs::write(dir.join("raw/startup.log"), STARTUP_ERRNO_524).unwrap();
    std::fs::write(dir.join("raw/lsmod.txt"), lsmod(peermem)).unwrap();
    std::fs::write(
        dir.join("raw/cmdline.txt"),
        "vllm serve moonshotai/Kimi-K3 --trust-remote-code --data-parallel-size 16 \
         --data-parallel-size-local 8 --data-parallel-address 10.0.0.1 --enable-expert-parallel \
         --enable-prefix-caching --all2all-backend deepep_low_latency\n",
    )
    .unwrap();
    dir
}

fn item<'a>(r: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    r["items"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["id"] == id))
        .unwrap_or_else(|| panic!("no item {id} in {r:#}"))
}

#[test]
fn errno_524_is_nccl_and_the_fallback_depends_on_peermem() {
    let tmp = tempfile::tempdir().unwrap();
    let with = bundle(tmp.path(), "with-peermem", true);
    let without = bundle(tmp.path(), "without-peermem", false);
    let line_of = |needle: &str| {
        STARTUP_ERRNO_524
            .lines()
            .position(|l| l.contains(needle))
            .unwrap() as u64
            + 1
    };
    let errno_line = line_of("mlx5dv_reg_dmabuf_mr");
    let nccl_line = line_of("NCCL error: unhandled system error");

    // The triage engine alone: class nccl; the first cause is the NCCL error (not
    // "Engine core initialization failed" at the end), explained by the errno-524 hint.
    let t = Command::new(common::golive_bin())
        .args(["triage", "--format", "json"])
        .arg(with.join("raw/startup.log"))
        .output()
        .unwrap();
    let tr: serde_json::Value = serde_json::from_slice(&t.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&t.stderr));
    });
    assert_eq!(tr["primary"]["class"], "nccl", "{tr:#}");
    assert_eq!(tr["primary"]["line"], nccl_line, "{tr:#}");
    assert!(
        tr["primary"]["why"].as_str().unwrap().contains("errno 524"),
        "{tr:#}"
    );
    let hint = tr["secondary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["line"] == errno_line)
        .unwrap_or_else(|| panic!("the errno-524 line is no finding: {tr:#}"));
    assert_eq!(hint["class"], "nccl", "{hint:#}");

    let mut next_steps = Vec::new();
    for (b, peermem) in [(&with, true), (&without, false)] {
        let o = Command::new(common::golive_bin())
            .args(["check", "--profile", "kimi-k3", "--format", "json"])
            .arg(b)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        // check takes the triage engine's first cause as the failure phase.
        let phase = item(&r, "failure_phase");
        assert_eq!(phase["status"], "fail", "{phase:#}");
        let ev = phase["evidence"].as_str().unwrap();
        assert!(ev.contains("multi-node communication (NCCL init)"), "{ev}");
        assert!(
            ev.contains(&format!("startup.log line {nccl_line}")),
            "{ev}"
        );
        assert!(!ev.contains("Engine core initialization failed"), "{ev}");
        assert!(
            r["decision"]
                .as_str()
                .unwrap()
                .starts_with("isolate multi-node"),
            "{}",
            r["decision"]
        );
        let comm = item(&r, "communication_path");
        assert_eq!(comm["status"], "fail", "{comm:#}");
        let next = comm["next_step"].as_str().unwrap().to_string();
        if peermem {
            assert!(
                next.contains("set NCCL_DMABUF_ENABLE=0 to fall back to nvidia_peermem"),
                "{next}"
            );
        } else {
            // The fallback alone would not work: the module has to be loaded first.
            assert!(!next.contains("to fall back"), "{next}");
            assert!(next.contains("nvidia_peermem is NOT loaded"), "{next}");
            assert!(next.contains("modprobe nvidia_peermem"), "{next}");
        }
        next_steps.push(next);
    }
    assert_ne!(next_steps[0], next_steps[1]);
}
