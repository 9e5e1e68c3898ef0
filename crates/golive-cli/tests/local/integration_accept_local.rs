//! Where the modules meet, against real parts: `golive accept` on the real local
//! llama-server joined with a hand-made environment bundle (collect/check), with a
//! server log (triage), and followed by `golive watch --once` and `golive rules`
//! on its baseline (watch/rules, promtool), and its report.html rendered in headless
//! Chromium. Port 18230 is this file's own (the watch needs a server nothing else
//! uses); it is stopped at the end, also when an assertion fails. The bundle test only
//! needs service and basic, from the shared local server.

use crate::common;

use common::{check, small_local_accept as accept, ServerGuard};

use std::path::Path;
use std::process::{Command, Output};

fn load_report(out: &Path) -> serde_json::Value {
    let bytes = std::fs::read(out.join("report.json"))
        .unwrap_or_else(|e| panic!("no report.json in {}: {e}", out.display()));
    serde_json::from_slice(&bytes).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

// ---- 2. --bundle joins the environment checklist -------------------------

/// `nvidia-smi` as the real tool prints it: driver 550.127.08 (CUDA 12.4) on 8 H200.
fn nvidia_smi_550() -> String {
    let mut s = String::from(
        "Mon Nov 30 12:01:07 2026       \n\
+-----------------------------------------------------------------------------------------+\n\
| NVIDIA-SMI 550.127.08             Driver Version: 550.127.08     CUDA Version: 12.4     |\n\
|-----------------------------------------+------------------------+----------------------+\n\
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n\
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n\
|                                         |                        |               MIG M. |\n\
|=========================================+========================+======================|\n",
    );
    for (i, bus) in ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
        .iter()
        .enumerate()
    {
        s.push_str(&format!(
            "|   {i}  NVIDIA H200                    On  |   00000000:{bus}:00.0 Off |                    0 |\n\
| N/A   3{i}C    P0             7{i}W /  700W |       1MiB / 143771MiB |      0%      Default |\n\
|                                         |                        |             Disabled |\n\
+-----------------------------------------+------------------------+----------------------+\n"
        ));
    }
    s.push_str(
        "                                                                                         \n\
+-----------------------------------------------------------------------------------------+\n\
| Processes:                                                                              |\n\
|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |\n\
|        ID   ID                                                               Usage      |\n\
|=========================================================================================|\n\
|  No running processes found                                                             |\n\
+-----------------------------------------------------------------------------------------+\n",
    );
    s
}

/// `docker image inspect vllm/vllm-openai:kimi-k3` (a CUDA 13 image).
const IMAGE_INSPECT_KIMI_K3: &str = r#"[
    {
        "Id": "sha256:0c5e2d8e41b7a9f3d6c4b2a1908f7e6d5c4b3a29180f7e6d5c4b3a291807f6e5",
        "RepoTags": [
            "vllm/vllm-openai:kimi-k3"
        ],
        "RepoDigests": [
            "vllm/vllm-openai@sha256:9d2e7c1b5a3f4e6d8c0b2a4f6e8d0c2b4a6f8e0d2c4b6a8f0e2d4c6b8a0f2e4d"
        ],
        "Created": "2026-08-10T09:14:02.118503912Z",
        "Config": {
            "Env": [
                "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "NVIDIA_REQUIRE_CUDA=cuda>=13.0",
                "CUDA_VERSION=13.0.1",
                "NVIDIA_VISIBLE_DEVICES=all",
                "NVIDIA_DRIVER_CAPABILITIES=compute,utility"
            ],
            "Entrypoint": [
                "vllm",
                "serve"
            ]
        },
        "Architecture": "amd64",
        "Os": "linux"
    }
]
"#;

#[test]
fn bundle_with_old_driver_and_no_cache_flag_makes_a_real_run_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("gpu-node-a");
    std::fs::create_dir_all(bundle.join("raw")).unwrap();
    std::fs::write(bundle.join("raw/nvidia-smi.txt"), nvidia_smi_550()).unwrap();
    std::fs::write(
        bundle.join("raw/docker-image-inspect.json"),
        IMAGE_INSPECT_KIMI_K3,
    )
    .unwrap();
    std::fs::write(
        bundle.join("raw/cmdline.txt"),
        "vllm serve moonshotai/Kimi-K3 --trust-remote-code --tensor-parallel-size 8 \
         --gpu-memory-utilization 0.95 --max-model-len 262144 --tool-call-parser kimi_k3 \
         --reasoning-parser kimi_k3\n",
    )
    .unwrap();

    let url = common::local_server_url();
    let out = tmp.path().join("out");
    // Only service and basic need the server: the verdict must come from the bundle.
    let o = accept(
        &url,
        &out,
        &[
            "--profile",
            "kimi-k3",
            "--bundle",
            bundle.to_str().unwrap(),
            "--skip",
            "prefix-cache",
            "--skip",
            "ramp",
            "--skip",
            "soak",
            "--skip",
            "agreement",
            "--skip",
            "contract",
        ],
    );
    let r = load_report(&out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(r["complete"], true);
    assert_eq!(r["profile"], "kimi-k3");
    // The server itself is fine: the rebuild is the environment's.
    for id in ["service_health", "basic_chat"] {
        assert_eq!(check(&r, id)["status"], "pass", "{id}: {:#}", check(&r, id));
    }
    let env: Vec<&serde_json::Value> = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["stage"] == "environment")
        .collect();
    assert!(!env.is_empty(), "no environment checks: {r:#}");
    for c in &env {
        assert_eq!(c["impact"], "environment", "{c:#}");
    }
    let driver = check(&r, "host_driver");
    assert_eq!(driver["stage"], "environment");
    assert_eq!(driver["status"], "fail", "{driver:#}");
    let ev = driver["evidence"].as_str().unwrap();
    assert!(ev.contains("Driver Version: 550.127.08"), "{ev}");
    assert!(ev.contains("550.127.08 < required"), "{ev}");
    let layers = check(&r, "cuda_layers");
    assert_eq!(layers["status"], "fail", "{layers:#}");
    assert!(
        layers["evidence"].as_str().unwrap().contains("CUDA 13.0"),
        "{layers:#}"
    );
    let flag = check(&r, "prefix_caching_flag");
    assert_eq!(flag["stage"], "environment");
    assert_eq!(flag["status"], "fail", "{flag:#}");
    assert!(
        flag["evidence"]
            .as_str()
            .unwrap()
            .contains("--enable-prefix-caching"),
        "{flag:#}"
    );
    assert!(!flag["next_step"].as_str().unwrap().is_empty(), "{flag:#}");
    assert_eq!(r["verdict"], "rebuild", "{}", r["verdict_reason"]);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("550.127.08"),
        "the driver evidence is in report.md"
    );
}

// ---- 3. --server-log: the triage engine's first cause in the evidence ----

/// A vLLM 0.x start that runs out of GPU memory in the profiling run; the last line
/// is only the consequence ("Engine core initialization failed").
const VLLM_OOM_LOG: &str = "\
(APIServer pid=1) INFO 11-30 11:58:02 [api_server.py:1896] vLLM API server version 0.27.1
(APIServer pid=1) INFO 11-30 11:58:02 [utils.py:328] non-default args: {'model': 'moonshotai/Kimi-K3', 'trust_remote_code': True, 'max_model_len': 1048576, 'gpu_memory_utilization': 0.97, 'tensor_parallel_size': 8}
(EngineCore_DP0 pid=210) INFO 11-30 11:58:31 [core.py:93] Initializing a V1 LLM engine (v0.27.1) with config: model='moonshotai/Kimi-K3', enable_prefix_caching=True
(EngineCore_DP0 pid=210) INFO 11-30 12:03:44 [gpu_model_runner.py:2653] Model loading took 121.4187 GiB and 301.223918 seconds
(EngineCore_DP0 pid=210) ERROR 11-30 12:04:10 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=210) ERROR 11-30 12:04:10 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=210) ERROR 11-30 12:04:10 [core.py:708]   File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py\", line 699, in run_engine_core
(EngineCore_DP0 pid=210) ERROR 11-30 12:04:10 [core.py:708]     engine_core = EngineCoreProc(*args, **kwargs)
(EngineCore_DP0 pid=210) ERROR 11-30 12:04:10 [core.py:708]   File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py\", line 3321, in profile_run
(EngineCore_DP0 pid=210) ERROR 11-30 12:04:10 [core.py:708]     hidden_states, last_hidden_states = self._dummy_run(self.max_num_tokens, is_profile=True)
(EngineCore_DP0 pid=210) ERROR 11-30 12:04:10 [core.py:708]   File \"/usr/local/lib/python3.12/dist-packages/torch/nn/modules/module.py\", line 1773, in _wrapped_call_impl
(EngineCore_DP0 pid=210) ERROR 11-30 12:04:10 [core.py:708]     return self._call_impl(*args, **kwargs)
(EngineCore_DP0 pid=210) ERROR 11-30 12:04:10 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of 139.81 GiB of which 1.21 GiB is free. Process 210 has 138.58 GiB memory in use. Of the allocated memory 134.02 GiB is allocated by PyTorch, and 2.13 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
(EngineCore_DP0 pid=210) Process EngineCore_DP0:
(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File \"/usr/local/bin/vllm\", line 10, in <module>
(APIServer pid=1)     sys.exit(main())
(APIServer pid=1)   File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py\", line 899, in wait_for_engine_startup
(APIServer pid=1)     raise RuntimeError(\"Engine core initialization failed. \"
(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
";

#[test]
fn server_log_of_a_dead_server_puts_the_first_cause_into_the_evidence() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("vllm.log");
    std::fs::write(&log, VLLM_OOM_LOG).unwrap();
    let oom_line = VLLM_OOM_LOG
        .lines()
        .position(|l| l.contains("torch.OutOfMemoryError"))
        .unwrap()
        + 1;
    // The server died at startup: nothing listens on its port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = tmp.path().join("out");
    let o = accept(
        &format!("http://127.0.0.1:{port}"),
        &out,
        &["--server-log", log.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let r = load_report(&out);
    assert_eq!(r["verdict"], "rebuild", "{}", r["verdict_reason"]);
    let health = check(&r, "service_health");
    assert_eq!(health["status"], "fail", "{health:#}");
    let ev = health["evidence"].as_str().unwrap();
    let first = ev.lines().next().unwrap_or("");
    // The first line of the evidence is the cause, at its line in the log ...
    assert!(first.starts_with("first cause ("), "{ev}");
    assert!(first.contains(", oom_startup): "), "{ev}");
    assert!(first.contains(&format!("line {oom_line}")), "{ev}");
    assert!(
        first.contains("CUDA out of memory. Tried to allocate 3.50 GiB"),
        "{ev}"
    );
    // ... not the consequence the log ends with.
    assert!(!first.contains("Engine core initialization failed"), "{ev}");
    // What the client saw is kept below it.
    assert!(ev.contains("\n---\n"), "{ev}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("CUDA out of memory"), "{md}");
}

// ---- 5. the accepted baseline feeds watch and rules ----------------------

/// One real acceptance run feeds three consumers: watch, rules and the HTML report in
/// Chromium (one run and one server start fewer than a run per consumer).
#[test]
fn real_accept_baseline_feeds_a_quiet_watch_valid_rules_and_a_rendered_report() {
    let tmp = tempfile::tempdir().unwrap();
    let port = 18230;
    let guard = ServerGuard(port);
    let url = common::start_local_server(port, &[]);
    let run = tmp.path().join("accepted");
    // No contract stage: the 270M base model's greedy answer is an echo loop that may or may
    // not read as runaway repetition on a given CPU (accept_e2e runs the contract).
    let o = accept(&url, &run, &["--skip", "contract"]);
    let r = load_report(&run);
    assert_eq!(r["complete"], true, "{}", stderr(&o));
    assert!(
        matches!(r["verdict"].as_str(), Some("release" | "observe")),
        "{}: {}",
        r["verdict"],
        r["verdict_reason"]
    );
    let baseline = &r["baseline"];
    assert!(baseline["ttft_p95_ms"].as_f64().is_some(), "{baseline:#}");
    assert!(
        baseline["accepted_concurrency"].as_u64().is_some(),
        "{baseline:#}"
    );

    // Right after the run, the same server is healthy and idle: nothing may fire.
    let w = Command::new(common::golive_bin())
        .args(["watch", "--url", &url, "--once", "--baseline"])
        .arg(&run)
        .args(["--interval", "500ms", "--window", "3s"])
        .output()
        .unwrap();
    let wtext = format!(
        "{}{}",
        String::from_utf8_lossy(&w.stdout),
        String::from_utf8_lossy(&w.stderr)
    );
    drop(guard);
    assert_eq!(w.status.code(), Some(0), "{wtext}");
    assert!(!wtext.contains("TRIGGER"), "{wtext}");
    assert!(wtext.contains("(llama.cpp): quiet over"), "{wtext}");

    // The same baseline gives alerting rules with its numbers in them.
    let (rules, yaml) = common::rules_from_baseline(&run, tmp.path());
    let parsed: serde_norway::Value = serde_norway::from_str(&yaml).unwrap();
    assert!(
        parsed["groups"][0]["rules"]
            .as_sequence()
            .is_some_and(|s| !s.is_empty()),
        "{yaml}"
    );
    common::promtool_check_rules(&rules, &yaml);

    // The report.html that run wrote renders in Chromium with its charts visible.
    if common::chromium::chromium().is_some() {
        common::chromium::check_real_run(&run, "real-run");
    }
}
