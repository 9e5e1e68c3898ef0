//! Never silent, narrow quieting, classes from frames/platform/severity, phase from more than
//! vLLM V1's banner, and engines beyond vLLM V1. Each log below is written in the real line
//! formats of the engine named (vLLM V1/V0, SGLang, Ray, NCCL, DeepEP, mistral.rs, TGI) with
//! the engines' real message texts.

use golive::triage::{analyze_paths, Class, TriageOptions, TriageReport};
use golive::triage::{RuleKind, RuleSet};

fn triage_text(text: &str) -> TriageReport {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("server.log");
    std::fs::write(&p, text).unwrap();
    analyze_paths(
        &[p],
        &TriageOptions {
            context: 3,
            rules: Vec::new(),
        },
    )
    .unwrap()
}

/// (class, line, rule) of the primary cause.
pub(super) fn primary(text: &str) -> (Class, u64, String) {
    let rep = triage_text(text);
    let p = rep
        .primary
        .unwrap_or_else(|| panic!("No failure found in:\n{text}"));
    (p.class, p.line, p.rule)
}

const V1_START: &str = "(APIServer pid=700) INFO 05-02 10:00:00 [api_server.py:1896] vLLM API server version 0.11.0
(EngineCore_DP0 pid=812) INFO 05-02 10:00:09 [core.py:93] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-8B'
";

#[test]
fn illegal_memory_access_and_worker_failed_with_error_are_a_gpu_fault() {
    let log = format!("{V1_START}(APIServer pid=700) INFO 05-02 10:01:00 [launcher.py:37] Route: /v1/chat/completions, Methods: POST
(APIServer pid=700) INFO:     10.0.0.5:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK
(VllmWorker TP0 pid=901) ERROR 05-02 10:02:11 [multiproc_executor.py:671] CUDA error: an illegal memory access was encountered
(VllmWorker TP0 pid=901) ERROR 05-02 10:02:11 [multiproc_executor.py:671] CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
(EngineCore_DP0 pid=812) ERROR 05-02 10:02:11 [multiproc_executor.py:445] Worker failed with error 'CUDA error: an illegal memory access was encountered', please check the stack trace above for the root cause
");
    assert_eq!(
        primary(&log),
        (Class::GpuFault, 5, "gpu-fault-kernel".into())
    );
    // Only the executor's line survived: the error it quotes still names the class.
    let only = format!("{V1_START}(EngineCore_DP0 pid=812) ERROR 05-02 10:02:11 [multiproc_executor.py:445] Worker failed with error 'CUDA error: an illegal memory access was encountered\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.', please check the stack trace above for the root cause
");
    let rep = triage_text(&only);
    let p = rep
        .primary
        .expect("a lone 'Worker failed with error' is a failure");
    assert_eq!((p.class, p.line), (Class::GpuFault, 3));
    assert!(
        p.next_step.contains("CUDA_LAUNCH_BLOCKING=1"),
        "{}",
        p.next_step
    );
    assert!(
        p.next_step.contains("dmesg | grep -i xid"),
        "{}",
        p.next_step
    );
}

#[test]
fn nccl_error_after_shutting_down_ray_workers_is_found() {
    let log = "INFO 11-11 09:36:20 ray_gpu_executor.py:132] Shutting down Ray workers ...
(RayWorkerWrapper pid=221, ip=172.19.0.143) ERROR 11-11 09:36:27 worker_base.py:464] Error executing method init_device. This might cause deadlock in distributed execution.
(RayWorkerWrapper pid=221, ip=172.19.0.143) ERROR 11-11 09:36:27 worker_base.py:464] Traceback (most recent call last):
(RayWorkerWrapper pid=221, ip=172.19.0.143) ERROR 11-11 09:36:27 worker_base.py:464]   File \"/usr/local/lib/python3.10/dist-packages/vllm/distributed/device_communicators/pynccl.py\", line 99, in __init__
(RayWorkerWrapper pid=221, ip=172.19.0.143) ERROR 11-11 09:36:27 worker_base.py:464]     self.comm: ncclComm_t = self.nccl.ncclCommInitRank(
(RayWorkerWrapper pid=221, ip=172.19.0.143) ERROR 11-11 09:36:27 worker_base.py:464] RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)
";
    let (c, l, _) = primary(log);
    assert_eq!((c, l), (Class::Nccl, 6));
}

#[test]
fn errno_524_hint_needs_the_errno_not_a_pid_or_timestamp() {
    let base = "gpu-node-b:5240:5241 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB
(EngineCore_DP0 pid=5240) ERROR 11-30 12:05:24 [core.py:708] RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)
";
    let with_pid = format!("gpu-node-b:5240:5241 [0] NCCL WARN NET/IB : mlx5dv_reg_dmabuf_mr failed: Operation not supported (errno 95) at 12:05:24.524\n{base}");
    let rep = triage_text(&with_pid);
    let p = rep.primary.unwrap();
    assert!(
        !p.next_step.contains("NCCL_DMABUF_ENABLE=0"),
        "{}",
        p.next_step
    );
    let with_524 = format!("gpu-node-b:5240:5241 [0] NCCL WARN NET/IB : mlx5dv_reg_dmabuf_mr failed: Unknown error 524 (errno 524)\n{base}");
    let p = triage_text(&with_524).primary.unwrap();
    assert!(
        p.next_step.contains("NCCL_DMABUF_ENABLE=0"),
        "{}",
        p.next_step
    );
}

#[test]
fn error_lines_panics_and_cuda_errors_no_rule_knows_are_still_found() {
    // An ERROR logger line that states an exception, without a traceback.
    let log = format!("{V1_START}(EngineCore_DP0 pid=812) ERROR 05-02 10:00:30 [core.py:712] ZeroDivisionError: integer division or modulo by zero
");
    // No rule names its layer, and the engine started: the engine's own failure.
    assert_eq!(primary(&log).0, Class::Engine);
    assert_eq!(primary(&log).1, 3);
    // A Rust router's panic (TGI, mistral.rs).
    let log = "2024-07-17T09:01:02.123456Z  INFO text_generation_router: router/src/main.rs:317: Warming up model
thread 'main' panicked at router/src/main.rs:389:10:
called `Result::unwrap()` on an `Err` value: Warmup(Generation(\"unexpected end of stream\"))
";
    assert_eq!(primary(log).1, 2);
    // A CUDA error string without an exception around it.
    let log = "[rank0]: CUDA error: operation not permitted when stream is capturing\n";
    assert_eq!(primary(log).1, 1);
}

#[test]
fn tool_parser_frames_beat_the_exception_type() {
    let log = "(APIServer pid=941) ERROR 09-30 18:30:55 [serving_chat.py:1072] Error in chat completion stream generator.
(APIServer pid=941) ERROR 09-30 18:30:55 [serving_chat.py:1072] Traceback (most recent call last):
(APIServer pid=941) ERROR 09-30 18:30:55 [serving_chat.py:1072]   File \"/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_chat.py\", line 802, in chat_completion_stream_generator
(APIServer pid=941) ERROR 09-30 18:30:55 [serving_chat.py:1072]     delta_message = tool_parser.extract_tool_calls_streaming(
(APIServer pid=941) ERROR 09-30 18:30:55 [serving_chat.py:1072]   File \"/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/tool_parsers/qwen3coder_tool_parser.py\", line 444, in extract_tool_calls_streaming
(APIServer pid=941) ERROR 09-30 18:30:55 [serving_chat.py:1072]     if self.current_tool_name_sent.startswith(\"<\"):
(APIServer pid=941) ERROR 09-30 18:30:55 [serving_chat.py:1072] AttributeError: 'bool' object has no attribute 'startswith'
";
    assert_eq!(
        primary(log),
        (Class::ToolParser, 7, "frames-tool-parser".into())
    );
    // The same exception raised while importing a package stays a dependency problem.
    let import = "Traceback (most recent call last):
  File \"/usr/local/bin/vllm\", line 5, in <module>
    from vllm.entrypoints.cli.main import main
  File \"/usr/local/lib/python3.12/dist-packages/transformers/__init__.py\", line 26, in <module>
    from . import dependency_versions_check
AttributeError: module 'torch' has no attribute 'compiler'
";
    assert_eq!(primary(import).0, Class::Dependency);
}

#[test]
fn xformers_missing_operator_is_a_dependency() {
    let log = "Traceback (most recent call last):
  File \"/usr/local/lib/python3.10/dist-packages/vllm/attention/backends/xformers.py\", line 714, in _run_memory_efficient_xformers_forward
    out = xops.memory_efficient_attention_forward(
  File \"/usr/local/lib/python3.10/dist-packages/xformers/ops/fmha/dispatch.py\", line 63, in _run_priority_list
    raise NotImplementedError(msg)
NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:
     query       : shape=(1, 2048, 32, 128) (torch.float16)
";
    assert_eq!(
        primary(log),
        (Class::Dependency, 6, "dep-xformers-no-operator".into())
    );
}

#[test]
fn dev_shm_through_nccl_is_a_container_limit() {
    let log = "3d3e22c3066f:168:168 [0] NCCL INFO Channel 00/02 :    0   1
3d3e22c3066f:168:168 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-UbzKZ9 to 9637892 bytes
3d3e22c3066f:168:168 [0] misc/shmutils.cc:113 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-UbzKZ9 (size 9637888)
3d3e22c3066f:168:168 [0] NCCL INFO transport/shm.cc:114 -> 2
(VllmWorker rank=0 pid=168) ERROR 03-01 10:00:00 [multiproc_executor.py:470] RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)
";
    let rep = triage_text(log);
    let p = rep.primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Container, 2), "{p:?}");
    assert!(p.next_step.contains("--shm-size") && p.next_step.contains("--ipc=host"));
}

#[test]
fn a_cuda_library_missing_on_rocm_is_a_wrong_build() {
    let rocm = "INFO 03-01 17:30:00 [__init__.py:239] Automatically detected platform rocm.
ImportError: libcuda.so.1: cannot open shared object file: No such file or directory
";
    let (c, l, _) = primary(rocm);
    assert_eq!((c, l), (Class::Dependency, 2));
    let cuda = "INFO 03-01 17:30:00 [__init__.py:239] Automatically detected platform cuda.
ImportError: libcuda.so.1: cannot open shared object file: No such file or directory
";
    assert_eq!(primary(cuda).0, Class::Container);
}

#[test]
fn a_warning_beats_a_later_fatal_error_only_when_nothing_fatal_follows() {
    let mut log = String::from("WARNING:torchao:Skipping import of cpp extensions due to incompatible torch version 2.7.0+cu126 for torchao version 0.12.0: /usr/local/lib/python3.12/dist-packages/torchao/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEab\n");
    for i in 0..85 {
        log.push_str(&format!("(EngineCore_DP0 pid=9) INFO 08-01 10:00:{:02} [gpu_model_runner.py:1] Loading weights took {i} s\n", i % 60));
    }
    log.push_str("(EngineCore_DP0 pid=9) ERROR 08-01 10:01:30 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n");
    assert_eq!(primary(&log).0, Class::OomStartup);
    assert_eq!(primary(&log).1, 87);
    // vLLM's own extension warning, followed by what it causes: the warning stays first.
    let ext = "WARNING 01-02 10:00:00 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('undefined symbol: _ZN3c10')
(EngineCore pid=1) ERROR 01-02 10:00:40 [core.py:700] AttributeError: '_OpNamespace' '_C' object has no attribute 'rms_norm'
";
    assert_eq!(
        primary(ext),
        (Class::Dependency, 1, "dep-vllm-ext-import".into())
    );
}

#[test]
fn decode_and_serving_ooms_of_other_engines_are_runtime() {
    // SGLang: a decode batch ran out of KV cache (no serving marker before it).
    let sglang = "[2025-03-07 10:04:13 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=20.1 GB
[2025-03-07 10:04:40 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File \"/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py\", line 1999, in run_scheduler_process
    scheduler.event_loop_overlap()
  File \"/sgl-workspace/sglang/python/sglang/srt/mem_cache/allocation.py\", line 613, in alloc_for_decode
    raise RuntimeError(error_msg)
RuntimeError: Decode out of memory. Try to lower your batch size.
";
    let (c, l, _) = primary(sglang);
    assert_eq!((c, l), (Class::OomRuntime, 7));
    // mistral.rs: OOM after it serves.
    let mistral = "2025-01-10T08:00:01.000000Z  INFO mistralrs_server: Serving on http://0.0.0.0:1234.
2025-01-10T08:03:12.000000Z ERROR mistralrs_core::engine: prompt step - Model failed with error: Cuda(Cuda(DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")))
";
    assert_eq!(primary(mistral).0, Class::OomRuntime);
    // vLLM V0: an OOM raised in the async engine loop.
    let v0 = "INFO 06-01 10:00:00 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: model='meta-llama/Llama-3.1-8B'
ERROR 06-01 10:20:00 async_llm_engine.py:64] Engine background task failed
Traceback (most recent call last):
  File \"/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py\", line 872, in run_engine_loop
    result = task.result()
  File \"/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py\", line 795, in engine_step
    request_outputs = await self.engine.step_async(virtual_engine)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.10 GiB.
";
    assert_eq!(primary(v0).0, Class::OomRuntime);
}

#[test]
fn vllm_v0_block_manager_and_its_one_line_summary() {
    let blocks = "ERROR 06-01 10:20:00 async_llm_engine.py:64] Engine background task failed
Traceback (most recent call last):
  File \"/usr/local/lib/python3.10/dist-packages/vllm/core/block/naive_block.py\", line 138, in _allocate_block_id
    raise BlockAllocator.NoFreeBlocksError()
vllm.core.block.interfaces.BlockAllocator.NoFreeBlocksError
";
    assert_eq!(primary(blocks).0, Class::PrefixCache);
    // MQLLMEngine logs the message, then the traceback that ends with the same message.
    let summary = "INFO 02-19 07:03:01 api_server.py:528] vLLM API server version 0.6.4
ERROR 02-19 07:03:11 engine.py:389] Some tensor shape mismatch happened while compiling the graph of the model
Traceback (most recent call last):
  File \"/usr/local/lib/python3.12/dist-packages/vllm/engine/multiprocessing/engine.py\", line 380, in run_mp_engine
    engine = MQLLMEngine.from_engine_args(engine_args=engine_args,
RuntimeError: Some tensor shape mismatch happened while compiling the graph of the model
";
    assert_eq!(primary(summary).1, 2);
}

#[test]
fn sglang_radix_cache_ray_compiled_graphs_and_deepep() {
    let radix = "[2025-05-01 12:00:00 TP1] Scheduler hit an exception: Traceback (most recent call last):
  File \"/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py\", line 1500, in event_loop_normal
    self.process_batch_result(batch, result)
  File \"/sgl-workspace/sglang/python/sglang/srt/mem_cache/radix_cache.py\", line 301, in cache_finished_req
    assert len(kv_indices) == token_ids_len
AssertionError
";
    let rep = triage_text(radix);
    let p = rep.primary.unwrap();
    assert_eq!((p.class, p.line), (Class::PrefixCache, 6));
    // The interpreter's words for a code bug in the same frames are the code's, not the cache
    // setting's: the engine's own code (its frames say so, even with no start in the excerpt).
    let bug = radix.replace(
        "AssertionError",
        "TypeError: 'NoneType' object is not subscriptable",
    );
    assert_eq!(primary(&bug).0, Class::Engine);
    // The raw traceback carries the rank of its `[.. TP1]` header, as vLLM's worker prefixes do.
    assert_eq!(p.rank.as_deref(), Some("TP1"));
    let dp = radix.replace(" TP1]", " DP1 TP3]");
    assert_eq!(
        triage_text(&dp).primary.unwrap().rank.as_deref(),
        Some("DP1 TP3")
    );
    let cgraph = "(RayWorkerWrapper pid=3110, ip=10.0.0.3) INFO 07-01 10:00:00 [ray_utils.py:90] Ray compiled DAG enabled
ERROR 07-01 10:10:00 [core.py:400] ray.exceptions.RayChannelTimeoutError: System error: If the execution is expected to take a long time, increase RAY_CGRAPH_get_timeout which is currently 300 seconds. Otherwise, this may indicate that the execution is hanging.
";
    assert_eq!(
        primary(cgraph),
        (Class::Nccl, 2, "nccl-ray-compiled-graph".into())
    );
    let deepep = "(EngineCore_DP3 pid=611) DeepEP timeout check failed: rank = 3, thread = 5, value = 0)
(EngineCore_DP3 pid=611) ERROR 11-30 12:30:00 [core.py:708] RuntimeError: CUDA error: unspecified launch failure
";
    // The timeout on this rank is what trapped the kernel.
    assert_eq!(primary(deepep).0, Class::Nccl);
    let nvshmem = "/dvs/p4/build/sw/rel/gpgpu/toolkit/r12.0/main_nvshmem/src/host/init/init.cu:840: non-zero status: 7 nvshmem detect topo failed
";
    assert_eq!(primary(nvshmem).0, Class::Nccl);
}

/// Each benign/shutdown rule, with a real failure next to the line it quiets: the failure is
/// found. Every such rule in rules.toml must have a case here.
#[test]
fn every_benign_and_shutdown_rule_quiets_only_what_it_explains() {
    let oom = "(EngineCore_DP0 pid=9) ERROR 08-01 10:01:30 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n";
    let cases: &[(&str, &str, &str)] = &[
        ("nccl-benign-warn", "node:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n", "node:1:1 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer, Resource temporarily unavailable\n"),
        ("benign-client-request", "(APIServer pid=1) ERROR 08-01 10:01:00 [serving_chat.py:200] ValueError: This model's maximum context length is 4096 tokens. However, you requested 5000 tokens. Please reduce the length of the messages or completion.\n", oom),
        ("benign-vllm-client-error", "(APIServer pid=1) ERROR 08-01 10:01:00 [serving_chat.py:200] vllm.exceptions.VLLMValidationError: Stream options can only be defined when `stream=True`.\n", oom),
        ("benign-model-not-served", "(APIServer pid=1) ERROR 08-01 10:01:00 [serving_chat.py:200] Error with model error=ErrorInfo(message='The model `gpt-4` does not exist.', type='NotFoundError', param=None, code=404)\n", "(APIServer pid=1) ERROR 08-01 10:02:00 [core.py:700] ValueError: The model `Qwen/Qwen3-8B` has no generation config and --generation-config is required\n"),
        ("benign-optional-import", "WARNING:torchao:Skipping import of cpp extensions due to incompatible torch version\n", oom),
        ("benign-optional-import", "[2025-04-20 14:03:12 TP0] Skipping import of cpp extensions: /usr/local/lib/python3.10/dist-packages/torchao/_C.abi3.so: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationE\n", oom),
        ("benign-vllm-commit-id", "No module named 'vllm.commit_id'\n", "ModuleNotFoundError: No module named 'vllm._C'\n"),
        ("benign-handled-shortage", "[2025-02-03 22:28:08 TP12] Decode out of memory happened. #retracted_reqs: 3, #new_token_ratio: 0.0980 -> 1.0000\n", "[2025-02-03 22:28:09 TP12] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"),
        ("benign-handled-shortage", "ggml_backend_sched_alloc_splits: failed to allocate graph, reserving (backend_ids_changed = 1)\n", "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: out of memory\n"),
        ("benign-llama-munlock", "warning: failed to munlock buffer: Cannot allocate memory\n", "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: out of memory\n"),
        ("benign-failed-execution-dump", "WARNING 01-06 15:47:24 [model_runner_base.py:80] Failed to pickle inputs of failed execution: CUDA error: an illegal memory access was encountered\n", "ERROR 01-06 15:47:24 [engine.py:366] RuntimeError: Error in model execution: CUDA error: an illegal memory access was encountered\n"),
        ("benign-pip-retry", "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPConnection object at 0x7f>: Failed to establish a new connection')': /simple/flashinfer-python/\n", "ERROR: No matching distribution found for flashinfer-python==0.2.5\n"),
        ("benign-vllm-request-log", "(APIServer pid=1) ERROR 08-01 10:01:00 [validation.py:152] RequestValidationError caught. Request id: chatcmpl-1\n", oom),
        ("benign-traceback-chain", "(APIServer pid=1) ERROR 08-01 10:01:00 [api_server.py:1] The above exception was the direct cause of the following exception:\n", oom),
        ("benign-test-assertion", "Traceback (most recent call last):\n  File \"/usr/lib/python3.11/unittest/case.py\", line 703, in fail\n    raise self.failureException(msg)\nAssertionError: 79.59 not less than or equal to 45.9\n", oom),
        ("shutdown-begins", "(APIServer pid=1) INFO 08-01 10:01:00 [launcher.py:80] Shutting down FastAPI HTTP server.\n", "(VllmWorker TP0 pid=901) ERROR 08-01 10:01:01 [multiproc_executor.py:671] RuntimeError: CUDA error: an illegal memory access was encountered\n"),
    ];
    let set = RuleSet::load(&[] as &[&str]).unwrap();
    for r in &set.rules {
        if matches!(r.kind, RuleKind::Benign | RuleKind::Shutdown) {
            assert!(
                cases.iter().any(|(id, _, _)| *id == r.id),
                "rule {} quiets lines but has no case here with a real failure next to it",
                r.id
            );
        }
    }
    // What an orderly stop explains: the teardown tracebacks after it.
    let teardown = "(APIServer pid=1) INFO 08-01 10:01:00 [launcher.py:80] Shutting down FastAPI HTTP server.
(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File \"/usr/lib/python3.12/asyncio/base_events.py\", line 691, in run_until_complete
(APIServer pid=1)     self._check_closed()
(APIServer pid=1) RuntimeError: Event loop is closed
(APIServer pid=1) KeyboardInterrupt
";
    let rep = triage_text(teardown);
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
    for (id, quiet, failure) in cases {
        // The quiet line alone is quiet ...
        let rep = triage_text(quiet);
        assert!(rep.primary.is_none(), "{id}: {:?}", rep.primary);
        // ... and the failure after it is still found, on its line.
        let rep = triage_text(&format!("{quiet}{failure}"));
        let p = rep
            .primary
            .unwrap_or_else(|| panic!("{id}: the failure next to it was not found"));
        assert_eq!(p.line, quiet.lines().count() as u64 + 1, "{id}: {p:?}");
    }
}

/// A ValueError/NotImplementedError the engine's own code raises is a refused configuration;
/// the same exception types raised by a library underneath, or inside a tool parser, are not.
#[test]
fn value_errors_the_engine_raises_are_config_not_those_of_libraries() {
    let tb = |file: &str, exc: &str| {
        let h = "(EngineCore_DP0 pid=4188) ERROR 12-01 10:00:09 [core.py:1007] ";
        format!("{h}Traceback (most recent call last):\n{h}  File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py\", line 90, in __init__\n{h}    self.model_executor = executor_class(vllm_config)\n{h}  File \"/usr/local/lib/python3.12/dist-packages/{file}\", line 135, in __init__\n{h}    raise {exc}(\n{h}{exc}: MRV2 PCP currently handles MLA models and nothing else.\n")
    };
    let engine = tb("vllm/v1/worker/gpu/pcp_manager.py", "NotImplementedError");
    assert_eq!(
        primary(&engine),
        (Class::Config, 6, "config-engine-value-error".into())
    );
    let sglang = tb("sglang/srt/model_executor/model_runner.py", "ValueError");
    assert_eq!(primary(&sglang).0, Class::Config);
    // Raised by torch under the engine's frames: the innermost frame is not the engine's, so
    // not a refused configuration; the engine's frame above names the class (engine).
    let torch = tb("torch/nn/modules/module.py", "ValueError");
    assert_eq!(primary(&torch).0, Class::Engine);
    // A tool parser's ValueError stays the parser's (the frame map wins over the type).
    let parser = tb("vllm/tool_parsers/hermes_tool_parser.py", "ValueError");
    assert_eq!(primary(&parser).0, Class::ToolParser);
}

/// A bare ERROR logger line (no exception, no known message) is reported when nothing else is
/// a cause, with the class of the module that logged it; it never beats a real cause, and
/// lines without a logger that names its source (wrappers, SGLang) never count.
#[test]
fn bare_error_lines_are_a_last_resort_with_the_class_of_their_logger() {
    let xgrammar = format!("{V1_START}(EngineCore_DP0 pid=812) INFO 05-02 10:01:00 [core.py:1] Engine ready
(EngineCore_DP0 pid=812) ERROR 05-02 10:02:00 [backend_xgrammar.py:165] Failed to advance FSM for request chatcmpl-1 for tokens 4913. Please file an issue.
");
    assert_eq!(
        primary(&xgrammar),
        (Class::ToolParser, 4, "error-log-line".into())
    );
    let nixl = format!("{V1_START}(EngineCore_DP0 pid=812) ERROR 05-02 10:02:00 [nixl_connector.py:1210] Handshake with engine 3 failed: timed out\n");
    let rep = triage_text(&nixl);
    let p = rep.primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Nccl, 3));
    assert!(
        p.next_step.contains("--kv-transfer-config"),
        "{}",
        p.next_step
    );
    // A logger file that says nothing, but a message that names the component.
    let named = format!("{V1_START}(EngineCore_DP0 pid=812) ERROR 05-02 10:02:00 [base_worker.py:880] NIXL transfer failure: timeout | Context: remote engine 2\n");
    assert_eq!(primary(&named).0, Class::Nccl);
    // The API server's own module: the engine's code (class engine).
    let api = format!("{V1_START}(APIServer pid=700) ERROR 05-02 10:02:00 [api_router.py:88] Failed to abort requests\n");
    assert_eq!(primary(&api), (Class::Engine, 3, "error-log-line".into()));
    // A module with no class of its own (a name shared across layers): still reported; the
    // engine started, so it is the engine's own failure, and said so.
    let plain = format!("{V1_START}(APIServer pid=700) ERROR 05-02 10:02:00 [utils.py:88] Failed to abort requests\n");
    assert_eq!(primary(&plain), (Class::Engine, 3, "error-log-line".into()));
    let p = triage_text(&plain).primary.unwrap();
    assert!(
        p.why.contains("No rule names a deployment cause"),
        "{}",
        p.why
    );
    // The engine's own logger wrote it: the engine ran, even in a fragment with no start.
    let alone = "(APIServer pid=700) ERROR 05-02 10:02:00 [utils.py:88] Failed to abort requests\n";
    assert_eq!(primary(alone), (Class::Engine, 1, "error-log-line".into()));
    // A Rust router's tracing line at ERROR.
    let tgi =
        "2023-08-17T10:23:27.032737Z ERROR text_generation_launcher: Shard 0 failed to start\n";
    assert_eq!(primary(tgi).1, 1);
    // A real cause anywhere wins, before or after it.
    let later = format!("{plain}(EngineCore_DP0 pid=812) ERROR 05-02 10:03:00 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n");
    assert_eq!(primary(&later).1, 4);
    // After an orderly stop, teardown errors are not failures.
    let stop = format!("{V1_START}(APIServer pid=700) INFO 05-02 10:05:00 [launcher.py:80] Shutting down FastAPI HTTP server.
(EngineCore_DP0 pid=812) ERROR 05-02 10:05:01 [multi_connector.py:310] Exception during connector NixlConnector shutdown.
");
    assert!(triage_text(&stop).primary.is_none());
    // A wrapper that logs all of stderr as ERROR, and SGLang's level-less lines, never count.
    for quiet in [
        "2023-12-12 19:38:39 | ERROR | stderr | Loading checkpoint shards: 100%\n",
        "[2025-03-07 10:04:13 TP0] Failed to get the free GPU memory of device 3, fall back\n",
        "(EngineCore_DP0 pid=812) ERROR 05-02 10:02:00 [core.py:1] \n",
    ] {
        assert!(triage_text(quiet).primary.is_none(), "{quiet}");
    }
}

/// The last line of a traceback is its exception whatever the class is called
/// (`Exception`, `_RemoteUnavailable`), and the frames still name the layer.
#[test]
fn exception_types_without_the_usual_suffix_end_a_traceback() {
    let ec = "(EngineCore_DP0 pid=4188) ERROR 12-01 10:00:09 [core.py:1007] Traceback (most recent call last):
(EngineCore_DP0 pid=4188) ERROR 12-01 10:00:09 [core.py:1007]   File \"/usr/local/lib/python3.12/dist-packages/vllm/distributed/ec_transfer/ec_connector/cpu/scheduler/__init__.py\", line 310, in _read_remote
(EngineCore_DP0 pid=4188) ERROR 12-01 10:00:09 [core.py:1007]     raise _RemoteUnavailable(
(EngineCore_DP0 pid=4188) ERROR 12-01 10:00:09 [core.py:1007] _RemoteUnavailable: the remote read failed
";
    assert_eq!(primary(ec), (Class::Nccl, 4, "frames-kv-transfer".into()));
    let plain = "Traceback (most recent call last):
  File \"/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/launchers/run_batch.py\", line 220, in upload_data
    raise Exception(
Exception: Failed to upload data. Status: 403 Response: Forbidden
";
    assert_eq!(primary(plain).1, 4);
}

#[test]
fn a_quantization_method_above_the_gpus_capability_is_config() {
    let log = "(EngineCore_DP0 pid=5) ERROR 04-24 16:06:40 [core.py:708] ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 89. Current capability: 80.\n";
    assert_eq!(
        primary(log),
        (Class::Config, 1, "config-quantization-gpu".into())
    );
    // A kernel missing for the GPU stays a build problem.
    let kernel = "RuntimeError: FlashAttention is not supported for the current GPU architecture\n";
    assert_eq!(primary(kernel).0, Class::Dependency);
}

/// Message families of other runtimes and libraries, in their real formats: llama.cpp's load
/// errors, transformers' remote-code refusal, Gloo's transport, PyTorch's device-side
/// assertion printout, Triton's launcher build, huggingface_hub's cache.
#[test]
fn families_of_other_runtimes_and_libraries() {
    let cases: &[(&str, Class, u64)] = &[
        ("main: loading model\nllama_model_load: error loading model: error loading model architecture: unknown model architecture: 'qwen3next'\nllama_model_load_from_file_impl: failed to load model\n", Class::Dependency, 2),
        ("llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' data is not within the file bounds, model is corrupted or incomplete\n", Class::Config, 1),
        // A load error no rule names the reason of: llama.cpp's own failure.
        ("llama_model_load: error loading model: error loading model vocabulary: _Map_base::at\n", Class::Engine, 1),
        ("safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer\n", Class::Config, 1),
        ("ValueError: Loading Qwen/Qwen-7B-Chat requires you to execute the configuration file in that repo on your local machine. Make sure you have read the code there to avoid malicious use, then set the option `trust_remote_code=True` to remove this error.\n", Class::Config, 1),
        ("[2025-05-01 12:00:00 TP1] Exception: Capture cuda graph failed: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting 1800000ms for send operation to complete\n", Class::Nccl, 1),
        // GGML_ABORT's own words after the source location, whatever they are, then gdb's
        // backtrace quoting the GGML_ABORT source line.
        ("slot update_slots: id  0 | task 0 | prompt done, n_past = 4076, n_tokens = 2028\n/home/u/llama.cpp/ggml/src/ggml-backend.cpp:750: pre-allocated tensor (cache_k_l32 (view)) in a buffer (Vulkan0) that cannot run the operation (CPY)\n[New LWP 1580837]\n750             GGML_ABORT(\"pre-allocated tensor (%s) in a buffer (%s) that cannot run the operation (%s)\", tensor->name);\n", Class::Engine, 2),
        ("/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [5,0,0], thread: [64,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.\n", Class::Engine, 1),
        ("torch._inductor.exc.InductorError: CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmpa1b2c3/main.c', '-O3', '-shared', '-fPIC', '-o', '/tmp/tmpa1b2c3/cuda_utils.so', '-lcuda']' returned non-zero exit status 1.\n", Class::Dependency, 1),
        ("/tmp/tmpa1b2c3/main.c:5:10: fatal error: Python.h: No such file or directory\n", Class::Dependency, 1),
        // The compiler's own headers missing (a gcc without its include directory): the same
        // broken toolchain, named on the first line, before the build's traceback.
        ("In file included from /opt/venv/lib/python3.12/site-packages/triton/backends/nvidia/include/cuda.h:56,\n                 from /tmp/tmp23j1qrsv/main.c:1:\n/usr/include/stdlib.h:31:10: fatal error: stddef.h: No such file or directory\ntorch._inductor.exc.InductorError: CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmp23j1qrsv/main.c', '-O3', '-shared']' returned non-zero exit status 1.\n", Class::Dependency, 3),
        ("ERROR 06-24 15:31:46 engine.py:389] Cache directory not found: /models/hub. Please use `cache_dir` argument or set `HF_HUB_CACHE` environment variable.\n", Class::Config, 1),
    ];
    for (log, class, line) in cases {
        let (c, l, rule) = primary(log);
        assert_eq!((c, l), (*class, *line), "{rule}: {log}");
    }
}

/// One process with two labels (vLLM's `(Worker_TP0 pid=..)` and torch's `[rank0]:`) is one
/// rank: its OOM is not a one-rank-among-many OOM.
#[test]
fn one_process_with_two_labels_is_one_rank() {
    let log = "(Worker_TP0 pid=60) ERROR 05-03 00:18:16 [multiproc_executor.py:870] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.19 GiB.
[rank0]:[W503 00:18:16.797904992 ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources.
(EngineCore pid=51) ERROR 05-03 00:18:17 [core.py:1136] EngineCore failed to start.
";
    assert_eq!(primary(log).0, Class::OomStartup);
}

#[test]
fn a_placement_group_warning_before_a_silent_wait_is_the_cause() {
    // vLLM's Ray executor warns once, then logs only INFO lines while it waits (a hang).
    let log = "INFO 03-11 08:00:01 [api_server.py:585] vLLM API server version 0.7.3
INFO 03-11 08:00:09 [ray_utils.py:240] Connecting to existing Ray cluster at address: 10.0.0.2:6379
WARNING 03-11 08:00:10 [ray_utils.py:250] The number of required GPUs exceeds the total number of available GPUs in the placement group.
INFO 03-11 08:00:20 [ray_utils.py:171] Waiting for creating a placement group of specs for 10 seconds. specs=[{'GPU': 1.0, 'node:10.0.0.2': 0.001}, {'GPU': 1.0}]. Check `ray status` to see if you have enough resources.
INFO 03-11 08:00:40 [ray_utils.py:171] Waiting for creating a placement group of specs for 30 seconds. specs=[{'GPU': 1.0, 'node:10.0.0.2': 0.001}, {'GPU': 1.0}]. Check `ray status` to see if you have enough resources.
";
    assert_eq!(
        primary(log),
        (Class::Nccl, 3, "nccl-ray-placement-short".into())
    );
    // The INFO waiting lines alone are no failure (a placement group may take a while).
    let waiting: String = log
        .lines()
        .filter(|l| !l.starts_with("WARNING"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(triage_text(&waiting).primary.is_none());
}

/// llama.cpp's loader lines as b3xxx prints them (a SYCL build on an Intel Arc).
const LLAMA_LOAD: &str = "llama_model_loader: loaded meta data with 19 key-value pairs and 291 tensors from llama-2-7b.Q4_0.gguf (version GGUF V2)
llm_load_tensors: ggml ctx size =    0.27 MiB
llm_load_tensors:      SYCL0 buffer size =  3577.56 MiB
llama_new_context_with_model: n_ctx      = 4096
llama_kv_cache_init:      SYCL0 KV buffer size =  2048.00 MiB
llama_new_context_with_model:      SYCL0 compute buffer size =   296.00 MiB
llama_new_context_with_model: graph splits = 2
";

#[test]
fn a_log_that_stops_before_serving_names_its_last_error_as_the_cause() {
    // A message no rule knows, after the last loading line, and then nothing: the process
    // died there (a backend without a kernel for the model's op; b2447's Metal words).
    let unsupported = format!(
        "{LLAMA_LOAD}ggml_metal_graph_compute_block_invoke: error: unsupported op 'SSM_CONV'\n"
    );
    let rep = triage_text(&unsupported);
    let p = rep.primary.as_ref().expect("the last error is the cause");
    assert_eq!((p.line, p.rule.as_str()), (8, "end-error"), "{p:?}");
    assert_eq!(
        p.class,
        Class::Engine,
        "unknown, where the engine ran: the engine's"
    );
    assert_eq!(rep.outcome[0].line, Some(8), "{:?}", rep.outcome);
    // An out-of-memory status in words no rule has is a startup OOM.
    let oom = format!("{LLAMA_LOAD}Native API failed. Native API returns: -5 (PI_ERROR_OUT_OF_MEMORY_X) -5\nException caught at file:/app/ggml/src/ggml-sycl.cpp, line:4313\n");
    let (class, line, rule) = primary(&oom);
    assert_eq!(
        (class, line, rule.as_str()),
        (Class::OomStartup, 8, "end-out-of-memory")
    );
    // The same error followed by the server listening: it was survived; the log is healthy.
    let served = format!(
        "{unsupported}main: server is listening on 127.0.0.1:8080 - starting the main loop\n"
    );
    assert!(triage_text(&served).primary.is_none());
    // An error before the last loading line was got past.
    let before = format!(
        "ggml_metal_graph_compute_block_invoke: error: unsupported op 'SSM_CONV'\n{LLAMA_LOAD}"
    );
    assert!(triage_text(&before).primary.is_none());
    // A fragment with no start or loading line is a quote: what it quotes going wrong is its
    // program's own error message (llama.cpp's behind its function's name).
    let fragment = "ggml_metal_graph_compute_block_invoke: error: unsupported op 'SSM_CONV'\n";
    let (_, line, rule) = primary(fragment);
    assert_eq!((line, rule.as_str()), (1, "quote-cli-error"));
    // Lines a benign rule quiets, traceback frames and access lines are not read as the end.
    let benign = format!(
        "{LLAMA_LOAD}node:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
    );
    assert!(triage_text(&benign).primary.is_none());
    let access = format!("{LLAMA_LOAD}INFO:     10.0.0.5:51234 - \"POST /v1/chat/completions HTTP/1.1\" 500 Internal Server Error\n");
    assert!(triage_text(&access).primary.is_none());
    // A cause any rule finds, anywhere, wins over the end of the log.
    let known = format!("{LLAMA_LOAD}ggml_backend_sycl_buffer_type_alloc_buffer: can't allocate 4096 Bytes of memory on device\nllama_new_context_with_model: failed to allocate compute buffers\nggml_metal_graph_compute_block_invoke: error: unsupported op 'SSM_CONV'\n");
    assert_ne!(primary(&known).2, "end-error");
}

/// A quote of a log (what an issue pastes: no server starting, loading or serving in it) whose
/// error no rule knows: its first line logged at ERROR level, or its first line that says the
/// process crashed, is what it quotes as going wrong. A line with no level says nothing of its
/// weight (SGLang prints its info lines without one); a long log with no server is no quote.
#[test]
fn a_quote_names_its_first_error_line_or_crash() {
    // torch's C10 logger writes glog's header in brackets, here after a progress bar's last
    // state on the same line (tqdm redraws with `\r`, no newline).
    let quote = "load: ok
Capturing batches (bs=30 avail_mem=8.62 GB):   0%|          | 0/8 [00:00<?, ?it/s][rank15]:[E1224 01:14:28.932556327 compiler_depend.ts:444] ReshapeAndCacheOperation setup failed!
Exception raised from OperationSetup at build/third_party/op-plugin/compiler_depend.ts:203 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0xb0 (0xfffe251a48c0 in /usr/lib/libc10.so)
";
    let p = triage_text(quote).primary.expect("the quoted error");
    assert_eq!((p.line, p.rule.as_str()), (2, "quote-error"), "{p:?}");
    let logged = "2025-03-07 10:04:13,120 - dispatch - INFO - rank 3 of 8 ready\n2025-03-07 10:04:14,120 - dispatch - ERROR - rank 3 dispatch failed, giving up\n";
    let p = triage_text(logged).primary.expect("the ERROR line");
    assert_eq!((p.line, p.rule.as_str()), (2, "quote-error"), "{p:?}");
    let oom = "2025-03-07 10:04:13,120 - sycl - ERROR - Native API returns: -5 (PI_ERROR_OUT_OF_MEMORY_X)\n";
    assert_eq!(
        primary(oom),
        (Class::OomStartup, 1, "quote-out-of-memory".to_string())
    );
    let crash = "dispatch: rank 3 of 8 ready\nworker 3: fatal error: tile map exhausted\n";
    let p = triage_text(crash).primary.expect("the fatal error");
    assert_eq!((p.line, p.rule.as_str()), (2, "quote-crash"), "{p:?}");
    // A program's own error message opens its line (llama.cpp's tools), level or not.
    for cli in [
        "error: could not frobnicate the widget table",
        "fatal: the shard map names 3 files, 2 were found",
    ] {
        let text = format!("main: build = 4585\n{cli}\n");
        let p = triage_text(&text).primary.expect("the program's error");
        assert_eq!((p.line, p.rule.as_str()), (2, "quote-cli-error"), "{p:?}");
    }
    // Lines with no level that name an error or an abort may be routine (SGLang's info and
    // warning lines); a WARNING is got past.
    for quiet in [
        "[2025-03-07 10:04:13 TP0] Abort request for rid=8f2c not found\n",
        "[2025-03-07 10:04:13 TP0] Failed to get the free GPU memory of device 3, fall back\n",
        "dispatch: rank 3 caught TilingFaultError while dispatching, retrying\n",
        "no error: the cache was warm\n",
        "2025-03-07 10:04:13,120 - dispatch - WARNING - rank 3 stalled, retrying\n",
    ] {
        assert!(triage_text(quiet).primary.is_none(), "{quiet}");
    }
    // More than a quote's 200 lines with no server in them: nothing says how it ended.
    let long = format!("{}{logged}", "step 1 of the batch job\n".repeat(250));
    assert!(triage_text(&long).primary.is_none());
}

/// A quote whose line states what a program failed to start and why (`Failed to start ...:
/// <reason>`), at no level (a serving host's model backend quoted without its log header), is
/// what it quotes as going wrong; a routine `Failed to get ..., fall back`, or a start that
/// failed with no reason after a colon (a retry), is not.
#[test]
fn a_quote_names_what_a_program_failed_to_do_and_why() {
    let quote = "model.py:244] \"[vllm] Failed to start engine: signal only works in main thread of the main interpreter\"
pb_stub.cc:366] \"Failed to initialize Python stub: ValueError: signal only works in main thread of the main interpreter
At:
  /usr/lib/python3.12/signal.py(58): signal
";
    let p = triage_text(quote).primary.expect("the failure it states");
    assert_eq!((p.line, p.rule.as_str()), (1, "quote-failed-to"), "{p:?}");
    for quiet in [
        "[2025-03-07 10:04:13 TP0] Failed to get the free GPU memory of device 3, fall back\n",
        "worker 3: failed to start within 5 s, retrying\n",
    ] {
        let rep = triage_text(quiet);
        assert!(rep.primary.is_none(), "{quiet}: {:?}", rep.primary);
    }
}

#[test]
fn a_loading_line_that_states_a_failure_is_no_progress() {
    // Vulkan's out-of-memory status, then llama.cpp's KV-cache lines saying the step failed:
    // the first line is the cause, not a survived error before more loading.
    let log = format!("{LLAMA_LOAD}ggml_vulkan: Device memory allocation of size 1610612736 failed.\nggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory\nllama_kv_cache_init: failed to allocate buffer for kv cache\nllama_new_context_with_model: llama_kv_cache_init() failed for self-attention cache\nmain: error: unable to load model\n");
    let (class, line, rule) = primary(&log);
    assert_eq!(
        (class, line, rule.as_str()),
        (Class::OomStartup, 8, "oom-gpu-api")
    );
}

#[test]
fn ollama_listening_and_its_model_calls_are_serving() {
    // Ollama's server came up and answered; a runner's ERROR after it is survived.
    let log = "time=2026-01-11T22:52:09.253Z level=INFO source=routes.go:1607 msg=\"Listening on 127.0.0.1:11434 (version 0.13.5)\"
[GIN] 2026/01/11 - 22:52:13 | 200 |      70.654µs |       127.0.0.1 | GET      \"/api/version\"
time=2026-01-12T03:21:35.519Z level=ERROR source=server.go:1583 msg=\"post predict\" error=\"Post \\\"http://127.0.0.1:46431/completion\\\": EOF\"
[GIN] 2026/01/12 - 03:21:36 | 200 |  2.797037s |       127.0.0.1 | POST     \"/api/chat\"
";
    let rep = triage_text(log);
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
    assert_eq!(rep.outcome[0].reached_line, Some(1), "{:?}", rep.outcome);
}

/// vLLM V0's client task failing on its output socket (0.6.x's real lines).
const ZMQ_POLL: &str = "Task exception was never retrieved
future: <Task finished name='Task-2' coro=<MQLLMEngineClient.run_output_handler_loop() done, defined at /usr/local/lib/python3.12/dist-packages/vllm/engine/multiprocessing/client.py:178> exception=ZMQError('Operation not supported')>
Traceback (most recent call last):
  File \"/usr/local/lib/python3.12/dist-packages/vllm/engine/multiprocessing/client.py\", line 184, in run_output_handler_loop
    while await self.output_socket.poll(timeout=VLLM_RPC_TIMEOUT
  File \"/usr/local/lib/python3.12/dist-packages/zmq/_future.py\", line 400, in poll
    raise _zmq.ZMQError(_zmq.ENOTSUP)
zmq.error.ZMQError: Operation not supported
";

#[test]
fn a_closed_engine_socket_is_a_consequence_of_the_engine_error_before_it() {
    let start = "INFO 01-06 15:46:01 api_server.py:585] vLLM API server version 0.6.4\n";
    // The engine died of its own error first: that error is the cause, not the socket.
    let died = format!("{start}ERROR 01-06 15:47:24 engine.py:366] Error in model execution: CUDA error: an illegal memory access was encountered\n{ZMQ_POLL}");
    let (class, line, _) = primary(&died);
    assert_eq!((class, line), (Class::GpuFault, 2));
    // With nothing before it, the socket itself failed where it was created: the container.
    let (class, line, rule) = primary(&format!("{start}{ZMQ_POLL}"));
    assert_eq!(
        (class, line, rule.as_str()),
        (Class::Container, 9, "conseq-zmq-socket-closed")
    );
}

/// pip retrying a download in a container that installs packages at start is no failure,
/// whatever package its URL names (xgrammar, a structured-output backend): the server that
/// then serves is healthy. pip's own ERROR when it gives up, and an engine error after the
/// retries, are still found.
#[test]
fn pip_retrying_a_download_is_quiet_but_its_failure_is_found() {
    let retry = "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPConnection object at 0xffffadb84b10>: Failed to establish a new connection: [Errno -2] Name or service not known')': /pypi/simple/xgrammar/\n";
    let served = format!(
        "{retry}{V1_START}(APIServer pid=700) INFO 05-02 10:01:00 [launcher.py:37] Route: /v1/chat/completions, Methods: POST
(APIServer pid=700) INFO:     10.0.0.5:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK
"
    );
    let rep = triage_text(&served);
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
    let gave_up = format!(
        "{retry}ERROR: Could not find a version that satisfies the requirement xgrammar==0.1.21 (from versions: none)
ERROR: No matching distribution found for xgrammar==0.1.21
{V1_START}(EngineCore_DP0 pid=812) ERROR 05-02 10:00:10 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=812) ERROR 05-02 10:00:10 [core.py:708] ModuleNotFoundError: No module named 'xgrammar'
"
    );
    let (class, line, _) = primary(&gave_up);
    assert_eq!(class, Class::Dependency);
    assert!(line == 2 || line == 7, "line {line}");
}

/// The shell could not run the server's program (a slurm script's wrong path, a venv without
/// `vllm`): a configuration cause at that line. A probe of a missing tool that the server
/// lives past (`nvidia-smi: command not found` in a CPU image, then serving) stays quiet.
#[test]
fn a_program_the_shell_cannot_find_is_the_launch_command_unless_the_server_serves() {
    for (log, line) in [
        ("/var/spool/slurm/job10075108/slurm_script: line 31: /home/u/ollama/bin/ollama: No such file or directory\n", 1),
        ("+ source /opt/venv/bin/activate\n/entrypoint.sh: line 4: vllm: command not found\n", 2),
    ] {
        let (class, at, rule) = primary(log);
        assert_eq!((class, at, rule.as_str()), (Class::Config, line, "config-command-not-found"), "{log}");
    }
    let served = format!(
        "/entrypoint.sh: line 3: nvidia-smi: command not found\n{V1_START}(APIServer pid=700) INFO 05-02 10:01:00 [launcher.py:37] Route: /v1/chat/completions, Methods: POST
(APIServer pid=700) INFO:     10.0.0.5:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK
"
    );
    let rep = triage_text(&served);
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
    // Python's own words are not the shell's: the model file's rule keeps them.
    let rep = triage_text(
        "FileNotFoundError: [Errno 2] No such file or directory: '/models/m/config.json'\n",
    );
    assert_ne!(
        rep.primary.map(|p| p.rule),
        Some("config-command-not-found".to_string())
    );
}

/// A quoted piece of a log that shows an engine only by its loader's lines (llama.cpp's
/// `llm_load_print_meta:`), or by a notebook's frame in its source tree: a crash that no rule
/// ties to a layer is the engine's own. The same crash after a script's own output only is not.
#[test]
fn a_quote_that_shows_an_engine_by_its_loader_lines_makes_an_unexplained_crash_the_engines() {
    let loaded = "llm_load_print_meta: EOS token        = 11 '<|endoftext|>'
llm_load_print_meta: max token length = 130
Segmentation fault (core dumped)
";
    assert_eq!(primary(loaded).0, Class::Engine);
    let script = "epoch 3: loss 0.12
Segmentation fault (core dumped)
";
    assert_eq!(primary(script).0, Class::Unknown);
}
