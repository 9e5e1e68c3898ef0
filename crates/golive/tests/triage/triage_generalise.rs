//! Rules added after measuring `golive triage` on real failure logs it had never seen: each
//! fixture is written for this repository in the real message formats of vLLM, Ray and
//! wrapper loggers, and pins the class, the first-cause line and the rule.

use std::path::{Path, PathBuf};

use golive::triage::{analyze_paths, Class, Finding, TriageOptions, TriageReport};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/triage")
        .join(name)
}

fn triage(name: &str) -> TriageReport {
    analyze_paths(
        &[fixture(name)],
        &TriageOptions {
            context: 5,
            rules: Vec::new(),
        },
    )
    .unwrap_or_else(|e| panic!("triage of {name} failed: {e:#}"))
}

/// Triage of a log given as text, with the built-in rules.
fn triage_text(log: &str) -> TriageReport {
    let rules = golive::triage::RuleSet::load(&[] as &[&str]).unwrap();
    golive::triage::analyze_text(&rules, "t.log", log)
}

fn primary(name: &str) -> Finding {
    triage(name)
        .primary
        .unwrap_or_else(|| panic!("{name}: nothing found"))
}

#[test]
fn new_rules_find_class_line_and_rule() {
    let cases: &[(&str, Class, u64, &str)] = &[
        // The import WARNING of vLLM's CUDA extension comes before the AttributeError it causes.
        (
            "dep_vllm_ext_warning.log",
            Class::Dependency,
            2,
            "dep-vllm-ext-import",
        ),
        // A Ray actor died and nothing says why: still a distributed failure, at the first line.
        (
            "ray_actor_died.log",
            Class::Nccl,
            3,
            "conseq-ray-actor-died",
        ),
        // When a worker's own exception is there, it wins over the actor's death.
        (
            "ray_actor_died_after_oom.log",
            Class::OomStartup,
            6,
            "oom-cuda",
        ),
        (
            "tool_cannot_determine.log",
            Class::ToolParser,
            3,
            "tool-extract",
        ),
        // A bare RuntimeError raised inside the structured-output backend took the engine
        // down: the structured-output layer explains the end, as a refused schema's 400 does.
        (
            "structured_output_crash.log",
            Class::ToolParser,
            9,
            "tool-structured-output-frames",
        ),
        (
            "prefix_coordinator.log",
            Class::PrefixCache,
            6,
            "prefix-cache-frames",
        ),
        // Tracebacks behind wrapper-logger prefixes are read as tracebacks.
        (
            "wrapper_logger_prefix.log",
            Class::PrefixCache,
            5,
            "prefix-cache-frames",
        ),
        (
            "wrapper_logger_config.log",
            Class::Config,
            7,
            "config-tp-divisible",
        ),
    ];
    for (name, class, line, rule) in cases {
        let p = primary(name);
        assert_eq!(
            (p.class, p.line, p.rule.as_str()),
            (*class, *line, *rule),
            "{name}: {p:?}"
        );
        assert!(!p.why.is_empty() && !p.next_step.is_empty(), "{name}");
    }
}

#[test]
fn missing_vllm_c_is_harmless_on_a_platform_plugin() {
    let rep = triage("healthy_plugin_platform.log");
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
    assert!(rep.secondary.is_empty(), "{:?}", rep.secondary);
}

#[test]
fn ray_actor_death_is_secondary_to_a_real_cause() {
    let rep = triage("ray_actor_died_after_oom.log");
    assert!(
        rep.secondary
            .iter()
            .any(|f| f.rule == "conseq-ray-actor-died" && f.line == 7),
        "{:?}",
        rep.secondary
    );
}

/// Families of the engines' own messages (vLLM 0.32 / SGLang 0.5.23 wording), read as one
/// line or one traceback: the class and rule, or quiet.
#[test]
fn engine_message_families() {
    let tb = |path: &str, exc: &str| {
        let h = "(EngineCore_DP0 pid=4188) ERROR 12-01 10:00:09 [core.py:1007] ";
        format!(
            "{h}Traceback (most recent call last):\n{h}  File \"/usr/lib/python3.12/dist-packages/{path}\", line 10, in f\n{h}    raise RuntimeError(\n{h}{exc}\n"
        )
    };
    let cases: Vec<(String, Option<(Class, &str)>)> = vec![
        (
            "[2025-12-01 10:00:09 TP0] Error in detect_and_parse: Expecting value: line 1 column 2\n".into(),
            Some((Class::ToolParser, "tool-parser-sglang-log")),
        ),
        (
            "[2025-12-01 10:00:09 TP0] HiCache prefetch transfer failed for request 7f3a\n".into(),
            Some((Class::PrefixCache, "prefix-cache-hicache")),
        ),
        // SGLang's warnings about the same cache stay quiet (its lines carry no level).
        (
            "[2025-12-01 10:00:09 TP0] Failed to fetch k1 from HiCacheFile storage.\n".into(),
            None,
        ),
        // A memory message that also names a flag stays an out-of-memory.
        (
            tb(
                "sglang/srt/model_executor/pool.py",
                "RuntimeError: insufficient memory for the KV pool; reduce --max-running-requests",
            ),
            Some((Class::OomStartup, "oom-keywords")),
        ),
        (
            tb(
                "vllm/v1/worker/gpu/cudagraph_utils.py",
                "RuntimeError: piecewise CUDA graphs unavailable. Set VLLM_USE_BREAKABLE_CUDAGRAPH=1",
            ),
            Some((Class::Config, "config-prescribed-setting")),
        ),
        // The structured-decisions endpoint's request errors are answered 400: quiet.
        (
            tb(
                "vllm/entrypoints/generate/structured_decisions/strategies.py",
                "StructuredDecisionError: question 2: this model does not answer ranking questions",
            ),
            None,
        ),
    ];
    for (text, want) in cases {
        let rep = triage_text(&text);
        let got = rep.primary.as_ref().map(|p| (p.class, p.rule.as_str()));
        assert_eq!(got, want, "{text}");
    }
}

/// The engines' own code (class `engine`): an exception raised there that no rule and no more
/// specific layer explains, and a bare ERROR line its modules log; tool parsers, the
/// distributed layer and messages a rule knows keep their class; a basename shared with other
/// layers (`utils.py`) says nothing.
#[test]
fn engine_class_for_the_engines_own_code() {
    let h = "(EngineCore_DP0 pid=4188) ERROR 12-01 10:00:09 [core.py:1007] ";
    let tb = |frames: &[(&str, &str)], exc: &str| {
        let mut s = format!("{h}Traceback (most recent call last):\n");
        for (path, func) in frames {
            s.push_str(&format!(
                "{h}  File \"/usr/local/lib/python3.12/dist-packages/{path}\", line 10, in {func}\n{h}    return f()\n"
            ));
        }
        s.push_str(&format!("{h}{exc}\n"));
        s
    };
    let engine_frames = [
        ("vllm/v1/engine/core.py", "run_engine_core"),
        ("vllm/v1/engine/core.py", "run_busy_loop"),
        ("vllm/v1/executor/multiproc_executor.py", "execute_model"),
        ("vllm/v1/worker/gpu_worker.py", "execute_model"),
    ];
    let with = |last: (&'static str, &'static str)| {
        let mut f = engine_frames.to_vec();
        f.push(last);
        f
    };
    let cases: Vec<(String, Option<(Class, &str)>)> = vec![
        (
            tb(
                &with(("vllm/v1/worker/utils.py", "check_nans")),
                "RuntimeError: NaNs detected in logits: ['chatcmpl-1']",
            ),
            Some((Class::Engine, "frames-engine-vllm")),
        ),
        // A tool parser called from the API server's request path stays a tool parser.
        (
            tb(
                &[
                    ("vllm/entrypoints/openai/chat_completion/serving.py", "chat_completion_stream_generator"),
                    ("vllm/tool_parsers/hermes_tool_parser.py", "extract_tool_calls_streaming"),
                ],
                "IndexError: list index out of range",
            ),
            Some((Class::ToolParser, "frames-tool-parser")),
        ),
        // A kernel library the engine vendors (vLLM's `third_party/flashmla`) is that library,
        // under torch's dispatcher frames too.
        (
            tb(
                &[
                    ("vllm/v1/attention/backends/mla/flashmla_sparse.py", "forward_mqa"),
                    ("vllm/third_party/flashmla/flash_mla_interface.py", "flash_mla_with_kvcache"),
                    ("torch/_ops.py", "__call__"),
                ],
                "RuntimeError: torch_call_dispatcher( \"aten::new_empty\", \"\", stack.data(), TORCH_ABI_VERSION) API call failed",
            ),
            Some((Class::Dependency, "frames-dependency-kernels")),
        ),
        // The distributed layer under the worker stays nccl.
        (
            tb(
                &with(("vllm/distributed/parallel_state.py", "all_reduce")),
                "RuntimeError: all_reduce got tensors on two devices",
            ),
            Some((Class::Nccl, "frames-nccl")),
        ),
        // Python's own words for an unexpected value ("expected", "must match") are not a
        // configuration refusal: the engine's frames name the layer.
        (
            tb(
                &with(("vllm/v1/worker/gpu_model_runner.py", "_prepare_inputs")),
                "ValueError: too many values to unpack (expected 12)",
            ),
            Some((Class::Engine, "frames-engine-vllm")),
        ),
        (
            tb(
                &with(("vllm/v1/worker/gpu_model_runner.py", "execute_model")),
                "RuntimeError: The size of tensor a (1280) must match the size of tensor b (2560) at non-singleton dimension 1",
            ),
            Some((Class::Engine, "frames-engine-vllm")),
        ),
        (
            tb(
                &with(("vllm/v1/worker/gpu_model_runner.py", "execute_model")),
                "AttributeError: 'NoneType' object has no attribute 'shape'",
            ),
            Some((Class::Engine, "frames-engine-vllm")),
        ),
        // A class of another package missing an attribute is still a version mismatch.
        (
            tb(
                &with(("vllm/tokenizers/hf.py", "get_tokenizer")),
                "AttributeError: Qwen2Tokenizer has no attribute all_special_tokens_extended",
            ),
            Some((Class::Dependency, "dep-attribute-error")),
        ),
        // A call whose arguments do not fit its callee: two packages of versions that differ.
        (
            tb(
                &with(("vllm/v1/attention/backends/flashinfer.py", "build")),
                "TypeError: BatchDecodeWithPagedKVCacheWrapper.plan() got an unexpected keyword argument 'kv_data_type'",
            ),
            Some((Class::Dependency, "dep-signature-mismatch")),
        ),
        (
            tb(
                &with(("vllm/v1/attention/backends/flash_attn.py", "forward")),
                "TypeError: varlen_fwd() takes 14 positional arguments but 15 were given",
            ),
            Some((Class::Dependency, "dep-signature-mismatch")),
        ),
        // ZeroMQ's IPC socket on a filesystem without Unix sockets.
        (
            tb(
                &[("vllm/engine/multiprocessing/engine.py", "run_mp_engine")],
                "zmq.error.ZMQError: Operation not supported",
            ),
            Some((Class::Container, "container-ipc-socket")),
        ),
        // A ValueError of the engine's own code is the configuration it refuses.
        (
            tb(
                &with(("vllm/v1/worker/gpu_model_runner.py", "load_model")),
                "ValueError: LoRA is not supported with speculative decoding",
            ),
            Some((Class::Config, "config-keywords")),
        ),
        // A ggml backend without a conversion kernel for the tensor's type is the kernel
        // library's gap (label rule 8); another assertion of the same backend stays native code.
        (
            "GGML_ASSERT: /src/llama.cpp/ggml/src/ggml-cuda.cu:1254: to_fp16_cuda != nullptr\n".into(),
            Some((Class::Dependency, "dep-ggml-missing-conversion")),
        ),
        (
            "/src/llama.cpp/ggml/src/ggml-cuda.cu:731: GGML_ASSERT(tensor->view_src == nullptr) failed\n".into(),
            Some((Class::Engine, "native-abort")),
        ),
        // The model hub refused the download (HTTP 401/403 from huggingface.co or a mirror):
        // a gated repository or a missing token, even without the library's wrapper.
        (
            "(APIServer pid=1) httpx.HTTPStatusError: Client error '401 Unauthorized' for url 'https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json'\n".into(),
            Some((Class::Config, "config-model-hub-denied")),
        ),
        (
            "requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: https://hf-mirror.com/facebook/opt-125m/resolve/main/config.json\n".into(),
            Some((Class::Config, "config-model-hub-denied")),
        ),
        (
            "requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: https://hooks.example.com/notify\n".into(),
            Some((Class::Unknown, "exception-line")),
        ),
        // "expected", "not found" and "requires" name a shape, a file or a package, not a setting
        // the engine refuses: on the cause lines of the corpus's tune half they were never
        // `config` (dependency 10, engine 5, nccl 1). The frames decide.
        (
            tb(
                &with(("vllm/model_executor/layers/linear.py", "forward")),
                "RuntimeError: expected scalar type BFloat16 but found Half",
            ),
            Some((Class::Engine, "frames-engine-vllm")),
        ),
        // An assertion of the engine's code is code that broke, whatever words it holds.
        (
            "AssertionError: expected 786432 slots, the block table is not supported\n".into(),
            Some((Class::Unknown, "code-python-assert")),
        ),
        (
            "KeyError: 'model.layers.0.mlp.experts.w2_qweight' not found\n".into(),
            Some((Class::Unknown, "exception-line")),
        ),
        (
            "(EngineCore_DP0 pid=4188) ERROR 12-01 10:00:09 [multiproc_executor.py:959] WorkerProc failed.\n".into(),
            Some((Class::Engine, "error-log-line")),
        ),
        (
            "(APIServer pid=4100) ERROR 12-01 10:00:09 [api_router.py:88] Error in /cohere/v2/chat: boom\n".into(),
            Some((Class::Engine, "error-log-line")),
        ),
        // `utils.py` names no layer; the engine's logger wrote the line, so it falls to the
        // engine by default (see `triage_never_silent` for the text that says so).
        (
            "(EngineCore_DP0 pid=4188) ERROR 12-01 10:00:09 [utils.py:56] Failed to join microbatch threads\n".into(),
            Some((Class::Engine, "error-log-line")),
        ),
        // SGLang prints no level word: its API server's internal-error line is still found.
        (
            "[2025-12-01 10:00:09] Error in request: 'NoneType' object has no attribute 'shape'\n".into(),
            Some((Class::Engine, "sglang-request-server-error")),
        ),
        (
            tb(
                &[("sglang/srt/managers/scheduler.py", "event_loop_overlap")],
                "RuntimeError: batch is empty after filtering",
            )
            .replace(h, ""),
            Some((Class::Engine, "frames-engine-sglang")),
        ),
        (
            "[2025-12-01 10:00:09] Initialization failed. warmup error: AssertionError: res=<Response [500]>\n".into(),
            Some((Class::Engine, "sglang-warmup-failed")),
        ),
        // A quoted traceback whose frames run through the engine's package is the engine's
        // code bug, though the quote shows nothing else of the engine; a user's own script's
        // is not.
        (
            tb(
                &[("vllm/model_executor/layers/linear.py", "weight_loader")],
                "AssertionError",
            )
            .replace(h, ""),
            Some((Class::Engine, "code-python-assert")),
        ),
        (
            tb(&[("bench/run.py", "main")], "AssertionError").replace(h, ""),
            Some((Class::Unknown, "code-python-assert")),
        ),
        // A child's death only points back at its error: a consequence.
        (
            "[2025-12-01 10:00:09] Scheduler or DataParallelController 4321 terminated with -9\n".into(),
            Some((Class::Unknown, "conseq-sglang-child-died")),
        ),
        // So is the scheduler watchdog's kill of a hung forward batch: a hang, not its cause.
        (
            "[2025-04-03 20:06:34 DP1 TP0] Watchdog timeout (self.watchdog_timeout=300)\n".into(),
            Some((Class::Engine, "conseq-sglang-watchdog")),
        ),
    ];
    for (text, want) in cases {
        let rep = triage_text(&text);
        let got = rep.primary.as_ref().map(|p| (p.class, p.rule.as_str()));
        assert_eq!(got, want, "{text}");
    }
    // Teardown in the engine's code after an orderly stop is not a failure.
    let stop = "(APIServer pid=1) INFO 08-01 10:01:00 [launcher.py:80] Shutting down FastAPI HTTP server.\n";
    let text = format!(
        "{stop}{}",
        tb(
            &engine_frames,
            "RuntimeError: cancelled while waiting for the workers"
        )
    );
    let rep = triage_text(&text);
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
}

/// OpenVINO and TPU builds ship no `vllm._C`, and source installs no `vllm.commit_id`: both
/// import messages are quiet there, and the fatal error after them is still found.
#[test]
fn platform_builds_without_vllm_c_and_source_installs_are_quiet_but_the_fatal_error_is_found() {
    let log = "WARNING 07-16 19:48:08 _custom_ops.py:14] Failed to import from vllm._C with ModuleNotFoundError(\"No module named 'vllm._C'\")
/opt/venv/lib/python3.10/site-packages/vllm/usage/usage_lib.py:19: RuntimeWarning: Failed to read commit hash:
No module named 'vllm.commit_id'
INFO 07-16 19:48:11 api_server.py:212] vLLM API server version 0.5.2
INFO 07-16 19:48:14 selector.py:69] Using OpenVINO Attention backend.
[rank0]: ValueError: `use_cache` was set to `True` but the loaded model only supports `use_cache=False`.
";
    let names = |r: &golive::triage::TriageReport| -> Vec<String> {
        r.secondary
            .iter()
            .chain(&r.survived)
            .map(|f| f.rule.clone())
            .collect()
    };
    let rep = triage_text(log);
    let p = rep.primary.as_ref().unwrap();
    assert_eq!((p.class, p.line), (Class::Config, 6), "{p:?}");
    assert!(names(&rep).is_empty(), "{:?}", names(&rep));
    // On a CUDA build the missing extension is an error too, which the server went past.
    let cuda = log.replace(
        "Using OpenVINO Attention backend.",
        "Using Flash Attention backend.",
    );
    let rep = triage_text(&cuda);
    let p = rep.primary.as_ref().unwrap();
    assert_eq!((p.class, p.line), (Class::Config, 6), "{p:?}");
    assert_eq!(names(&rep), vec!["dep-vllm-ext-import".to_string()]);
    // A package missing for real is still a dependency.
    let missing = "INFO 07-16 19:48:11 api_server.py:212] vLLM API server version 0.5.2\nModuleNotFoundError: No module named 'vllm.commit'\n";
    let p = triage_text(missing).primary.unwrap();
    assert_eq!(p.class, Class::Dependency);
}

/// Ray's wrapper line names the exception it carries; the wrapped exception's own line, at
/// the end of the remote traceback that follows, states the cause.
#[test]
fn the_exception_ray_wraps_is_stated_on_its_own_line() {
    let h = "ERROR 05-09 03:01:59 [core.py:402] ";
    let log = format!(
        "INFO 05-09 03:00:00 [api_server.py:1] vLLM API server version 0.8.5
{h}EngineCore encountered a fatal error.
{h}Traceback (most recent call last):
{h}  File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/ray_distributed_executor.py\", line 300, in _init_workers_ray
{h}    ray.get(refs)
{h}ray.exceptions.RayTaskError(ModuleNotFoundError): ray::RayWorkerWrapper.__ray_call__() (pid=324, ip=10.0.0.2)
{h}  File \"/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_communicators/pynccl_wrapper.py\", line 683, in _do_get_unique_nccl_id
{h}    from cupy.cuda import nccl
{h}ModuleNotFoundError: No module named 'cupy'
"
    );
    let p = triage_text(&log).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 9), "{p:?}");
    assert!(p.text.contains("No module named 'cupy'"), "{}", p.text);
    // Without the wrapped line, the wrapper states it.
    let cut: String = log.lines().take(6).map(|l| format!("{l}\n")).collect();
    let p = triage_text(&cut).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 6), "{p:?}");
}

/// vLLM's "Error in inspecting model architecture" announces the traceback it logs next; the
/// import error that ends that traceback is the line that names the cause. A cause of another
/// class inside it keeps the announcing line unless the subprocess's wrapper says it is that
/// subprocess's error, and without a traceback the line states it.
#[test]
fn an_announced_traceback_names_its_cause_on_its_own_line() {
    let h = "ERROR 04-28 07:56:28 [registry.py:354] ";
    let log = format!(
        "INFO 04-28 07:56:20 [api_server.py:1] vLLM API server version 0.8.5
{h}Error in inspecting model architecture 'GraniteForCausalLM'
{h}Traceback (most recent call last):
{h}  File \"/opt/vllm/lib64/python3.12/site-packages/vllm/model_executor/models/registry.py\", line 586, in _run_in_subprocess
{h}    returned.check_returncode()
{h}subprocess.CalledProcessError: Command '['python', '-m', 'vllm.model_executor.models.registry']' returned non-zero exit status 1.
{h}Traceback (most recent call last):
{h}  File \"/opt/vllm/lib64/python3.12/site-packages/torch/_inductor/runtime/hints.py\", line 67, in <module>
{h}    from triton.compiler.compiler import AttrsDescriptor
{h}ModuleNotFoundError: No module named 'triton.compiler'; 'triton' is not a package
ValueError: Model architectures ['GraniteForCausalLM'] failed to be inspected. Please check the logs for more details.
"
    );
    let p = triage_text(&log).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 10), "{p:?}");
    assert!(
        p.text.contains("No module named 'triton.compiler'"),
        "{}",
        p.text
    );
    // An out-of-memory after the subprocess's wrapper is that subprocess's own failure; one
    // of another class with no wrapper before it may be another error: the announcing line
    // stays.
    let oom = log.replace(
        "ModuleNotFoundError: No module named 'triton.compiler'; 'triton' is not a package",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 15.58 GiB of which 5.38 MiB is free.",
    );
    let p = triage_text(&oom).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::OomStartup, 10), "{p:?}");
    let unwrapped: String = oom
        .lines()
        .filter(|l| !l.contains("CalledProcessError"))
        .map(|l| format!("{l}\n"))
        .collect();
    let p = triage_text(&unwrapped).primary.unwrap();
    assert_eq!(p.line, 2, "{p:?}");
    // Without the traceback, the announcing line states the cause.
    let cut: String = log.lines().take(2).map(|l| format!("{l}\n")).collect();
    let p = triage_text(&cut).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 2), "{p:?}");
}

/// The requests a server makes (urllib3's log of its Hugging Face lookups) are not requests it
/// served: an out-of-memory while it loads is still a startup one.
#[test]
fn requests_the_server_made_do_not_make_it_serving() {
    let log = "[2025-04-20 14:03:03] https://huggingface.co:443 \"HEAD /org/model/resolve/main/config.json HTTP/1.1\" 200 0
[2025-04-20 14:03:06 TP0] https://huggingface.co:443 \"HEAD /org/model/resolve/main/tokenizer_config.json HTTP/1.1\" 200 0
[2025-04-20 14:03:12 TP0] Load weight begin. avail mem=15.27 GB
[2025-04-20 14:03:13 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File \"/sgl-workspace/sglang/python/sglang/srt/layers/quantization/fp8.py\", line 259, in create_weights
    data=torch.empty(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 114.00 MiB. GPU 0 has a total capacity of 15.58 GiB of which 54.38 MiB is free.
";
    let rep = triage_text(log);
    let p = rep.primary.unwrap();
    assert_eq!((p.class, p.line), (Class::OomStartup, 7), "{p:?}");
    // The same lines as a server's access log: it served, so the OOM is a runtime one.
    let served = log.replace(
        "https://huggingface.co:443 \"HEAD",
        "INFO:     127.0.0.1:40000 - \"POST",
    );
    let p = triage_text(&served).primary.unwrap();
    assert_eq!(p.class, Class::OomRuntime, "{p:?}");
}

/// Python's own words for an unexpected value in the distributed layer's code are a code
/// bug, the engine's: the communicator's frames make a failed transport `nccl`, never a
/// `'dict' object has no attribute`. The same frames under an error of no known words stay
/// `nccl`.
#[test]
fn a_code_bug_in_the_distributed_layer_is_no_failed_transport() {
    let log = |exc: &str| {
        format!(
            "INFO 06-06 00:28:20 [core.py:60] Initializing a V1 LLM engine (v0.9.0) with config: model='m'
ERROR 06-06 00:28:27 [core.py:500] EngineCore failed to start.
ERROR 06-06 00:28:27 [core.py:500] Traceback (most recent call last):
ERROR 06-06 00:28:27 [core.py:500]   File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py\", line 491, in run_engine_core
ERROR 06-06 00:28:27 [core.py:500]     engine_core = EngineCoreProc(*args, **kwargs)
ERROR 06-06 00:28:27 [core.py:500]   File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py\", line 353, in init_worker_distributed_environment
ERROR 06-06 00:28:27 [core.py:500]     ensure_model_parallel_initialized(tp, pp)
ERROR 06-06 00:28:27 [core.py:500]   File \"/usr/local/lib/python3.12/dist-packages/vllm/distributed/parallel_state.py\", line 61, in ensure_model_parallel_initialized
ERROR 06-06 00:28:27 [core.py:500]     if group.world_size != tp:
ERROR 06-06 00:28:27 [core.py:500] {exc}
"
        )
    };
    let bug = log("AttributeError: 'NoneType' object has no attribute 'world_size'");
    let p = triage_text(&bug).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Engine, 10), "{p:?}");
    let transport = log("RuntimeError: the group broke in a way nobody names");
    let p = triage_text(&transport).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Nccl, 10), "{p:?}");
}

/// The same in the KV-cache code: Python's words for an unexpected value in the block pool are
/// the engine's bug, not a prefix-cache setting; an error of no known words there stays
/// `prefix_cache` (turn prefix caching off to confirm).
#[test]
fn a_code_bug_in_the_kv_cache_code_is_the_engines_not_a_prefix_cache_setting() {
    let log = |exc: &str| {
        format!(
            "INFO 06-06 00:28:20 [core.py:60] Initializing a V1 LLM engine (v0.9.0) with config: model='m'
INFO 06-06 00:29:00 [api_server.py:1000] Starting vLLM API server on http://0.0.0.0:8000
ERROR 06-06 00:30:27 [core.py:500] EngineCore encountered a fatal error.
ERROR 06-06 00:30:27 [core.py:500] Traceback (most recent call last):
ERROR 06-06 00:30:27 [core.py:500]   File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_manager.py\", line 250, in allocate_slots
ERROR 06-06 00:30:27 [core.py:500]     new_blocks = self.block_pool.get_new_blocks(n)
ERROR 06-06 00:30:27 [core.py:500]   File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/core/block_pool.py\", line 61, in get_new_blocks
ERROR 06-06 00:30:27 [core.py:500]     block.ref_cnt += 1
ERROR 06-06 00:30:27 [core.py:500] {exc}
"
        )
    };
    let bug = log("AttributeError: 'NoneType' object has no attribute 'ref_cnt'");
    let p = triage_text(&bug).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Engine, 9), "{p:?}");
    let cache = log("RuntimeError: the block pool went wrong in a way nobody names");
    let p = triage_text(&cache).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::PrefixCache, 9), "{p:?}");
}

/// An accelerator runtime's own words for running out of device memory are an out-of-memory
/// like CUDA's, at startup while the engine loads.
#[test]
fn another_runtimes_device_allocation_failure_is_an_out_of_memory() {
    for line in [
        "2025-Jan-26 10:27:42.285788  2998:2998  ERROR  TDRV:dmem_alloc_internal   Failed to alloc DEVICE memory: 536870912",
        "2025-Jan-26 10:27:42.299439  2998:2998  ERROR  TDRV:tensor_allocate   Failed to allocate 536870912 bytes on DEVICE for tensor UNKNOWN.",
        "ERROR 01-26 10:27:42 [worker.py:80] RuntimeError: Failed to allocate 1073741824 bytes of HBM memory",
    ] {
        let log = format!(
            "INFO 01-26 10:27:20 [llm_engine.py:234] Initializing an LLM engine (v0.6.6) with config: model='m'\n{line}\n"
        );
        let p = triage_text(&log).primary.unwrap();
        assert_eq!((p.class, p.line), (Class::OomStartup, 2), "{line}: {p:?}");
    }
}

/// Ray's workers are actors of one name, told apart by pid: one rank loading on does not
/// excuse another rank's error; the rank that errs and then loads on got past it.
#[test]
fn one_ray_workers_loading_does_not_excuse_anothers_error() {
    let log = |loader: &str| {
        format!(
            "INFO 03-11 15:23:00 [llm_engine.py:234] Initializing a V0 LLM engine (v0.8.1) with config: model='m'
(RayWorkerWrapper pid=101, ip=10.0.0.2) ERROR 03-11 15:24:45 [worker_base.py:620] Error executing method 'load_model'. This might cause deadlock in distributed execution.
(RayWorkerWrapper pid=101, ip=10.0.0.2) ERROR 03-11 15:24:45 [worker_base.py:620] Traceback (most recent call last):
(RayWorkerWrapper pid=101, ip=10.0.0.2) ERROR 03-11 15:24:45 [worker_base.py:620]   File \"/usr/lib/python3/site-packages/vllm/worker/worker.py\", line 183, in load_model
(RayWorkerWrapper pid=101, ip=10.0.0.2) ERROR 03-11 15:24:45 [worker_base.py:620]     self.model_runner.load_model()
(RayWorkerWrapper pid=101, ip=10.0.0.2) ERROR 03-11 15:24:45 [worker_base.py:620] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
({loader}) INFO 03-11 15:24:46 [loader.py:429] Loading weights took 52.44 seconds
"
        )
    };
    let other = triage_text(&log("RayWorkerWrapper pid=102, ip=10.0.0.2"));
    let p = other
        .primary
        .expect("another rank's loading excuses nothing");
    // One rank out of memory while another loaded on.
    assert_eq!((p.class, p.line), (Class::OomTopology, 6), "{p:?}");
    // The same line folded by Ray from several actors is an out-of-memory on them all.
    let folded = log("RayWorkerWrapper pid=102, ip=10.0.0.2")
        .replace("2.00 GiB.", "2.00 GiB. [repeated 3x across cluster]");
    let p = triage_text(&folded).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::OomStartup, 6), "{p:?}");
    let same = triage_text(&log("RayWorkerWrapper pid=101, ip=10.0.0.2"));
    assert!(same.primary.is_none(), "{:?}", same.primary);
    assert!(!same.survived.is_empty());
}

/// A model file that is not JSON, read by the model, config or tokenizer readers, is the
/// model's files (config); the same exception in other code is not this rule's.
#[test]
fn a_model_file_that_is_not_json_is_a_damaged_model() {
    let log = |frame: &str| {
        format!(
            "INFO 05-01 10:00:00 [api_server.py:1000] vLLM API server version 0.9.0
Traceback (most recent call last):
  File \"/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py\", line 1100, in run_server
    await init_app_state(engine_client, vllm_config, app.state, args)
  File \"{frame}\", line 700, in read
    return json.load(f)
  File \"/usr/lib/python3.12/json/decoder.py\", line 355, in raw_decode
    raise JSONDecodeError(\"Expecting value\", s, err.value) from None
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
"
        )
    };
    for frame in [
        "/usr/local/lib/python3.12/dist-packages/transformers/configuration_utils.py",
        "/usr/local/lib/python3.12/dist-packages/transformers/tokenization_utils_base.py",
        "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/model_loader/weight_utils.py",
    ] {
        let p = triage_text(&log(frame)).primary.unwrap();
        assert_eq!(
            (p.class, p.line, p.rule.as_str()),
            (Class::Config, 9, "config-model-json-corrupt"),
            "{frame}: {p:?}"
        );
    }
    let other = "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py";
    let p = triage_text(&log(other)).primary.unwrap();
    assert_ne!(p.rule, "config-model-json-corrupt", "{p:?}");
}

/// An exception raised inside a third-party kernel or hardware package the engine calls
/// (flashinfer, bitsandbytes, a hardware plugin) is a dependency mismatch, whatever the
/// engine frames above it; one raised inside Triton stays the engine's (its kernel).
#[test]
fn an_error_inside_a_kernel_package_is_a_dependency() {
    let log = |pkg_frame: &str, exc: &str| {
        format!(
            "INFO 06-06 00:28:20 [core.py:60] Initializing a V1 LLM engine (v0.9.0) with config: model='m'
ERROR 06-06 00:28:27 [core.py:500] EngineCore failed to start.
ERROR 06-06 00:28:27 [core.py:500] Traceback (most recent call last):
ERROR 06-06 00:28:27 [core.py:500]   File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py\", line 2101, in profile_run
ERROR 06-06 00:28:27 [core.py:500]     hidden_states = self._dummy_run(self.max_num_tokens)
ERROR 06-06 00:28:27 [core.py:500]   File \"/usr/local/lib/python3.12/dist-packages/{pkg_frame}\", line 88, in run
ERROR 06-06 00:28:27 [core.py:500]     out = op(*args)
ERROR 06-06 00:28:27 [core.py:500] {exc}
"
        )
    };
    for (frame, exc) in [
        (
            "flashinfer/decode.py",
            "RuntimeError: BatchDecodeWithPagedKVCache failed with error code no kernel image",
        ),
        (
            "bitsandbytes/functional.py",
            "RuntimeError: quantize_4bit not implemented for this device",
        ),
        (
            "vllm_ascend/worker/model_runner_v1.py",
            "RuntimeError: call aclnnInplaceZero failed, error code is 561103",
        ),
        // ROCm's kernel library (aiter), and the engine's wrapper of its compiled custom ops
        // (`vllm/_custom_ops.py`, which SGLang calls too): no kernel for this head count or dtype.
        ("aiter/mla.py", "AssertionError: nhead=8 not supported"),
        (
            "vllm/_custom_ops.py",
            "RuntimeError: expected scalar type Half but found BFloat16",
        ),
    ] {
        let p = triage_text(&log(frame, exc)).primary.unwrap();
        assert_eq!((p.class, p.line), (Class::Dependency, 8), "{frame}: {p:?}");
        assert_eq!(p.rule, "frames-dependency-kernels", "{frame}");
    }
    let triton = log(
        "triton/runtime/jit.py",
        "RuntimeError: the kernel's launch failed in a way nobody names",
    );
    let p = triage_text(&triton).primary.unwrap();
    assert_ne!(p.class, Class::Dependency, "{p:?}");
}

/// Traceback frames: (path under site-packages, function).
type Frames<'a> = &'a [(&'a str, &'a str)];

/// A vLLM V1 engine-core traceback whose innermost frames are `frames` and which ends in `exc`.
fn engine_core_failure(frames: Frames<'_>, exc: &str) -> String {
    let mut log = String::from(
        "INFO 06-06 00:28:20 [core.py:60] Initializing a V1 LLM engine (v0.9.0) with config: model='m'
ERROR 06-06 00:28:27 [core.py:500] EngineCore failed to start.
ERROR 06-06 00:28:27 [core.py:500] Traceback (most recent call last):
ERROR 06-06 00:28:27 [core.py:500]   File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py\", line 491, in run_engine_core
ERROR 06-06 00:28:27 [core.py:500]     engine_core = EngineCoreProc(*args, **kwargs)
",
    );
    for (path, func) in frames {
        log.push_str(&format!(
            "ERROR 06-06 00:28:27 [core.py:500]   File \"/usr/local/lib/python3.12/dist-packages/{path}\", line 10, in {func}\nERROR 06-06 00:28:27 [core.py:500]     x = y()\n"
        ));
    }
    log.push_str(&format!("ERROR 06-06 00:28:27 [core.py:500] {exc}\n"));
    log
}

/// The line of the exception in [`engine_core_failure`]'s log.
fn exception_line(log: &str) -> u64 {
    log.lines().count() as u64
}

/// What triage names in [`engine_core_failure`]'s log: the class, whether the line is the
/// exception's, and the rule.
#[derive(Debug)]
struct EngineCorePrimary {
    class: Class,
    at_exception: bool,
    rule: String,
}

fn engine_core_primary(frames: Frames<'_>, exc: &str) -> EngineCorePrimary {
    let log = engine_core_failure(frames, exc);
    let p = triage_text(&log)
        .primary
        .unwrap_or_else(|| panic!("nothing found for {exc}"));
    EngineCorePrimary {
        class: p.class,
        at_exception: p.line == exception_line(&log),
        rule: p.rule,
    }
}

/// Each engine-core exception through its frames is the primary, at the exception's line,
/// with its class.
fn each_at_the_exception_with_its_class(cases: &[(Frames<'_>, &str, Class)]) {
    for (frames, exc, class) in cases {
        let p = engine_core_primary(frames, exc);
        assert_eq!((p.class, p.at_exception), (*class, true), "{exc}: {p:?}");
    }
}

/// A name the code never defined is its bug whatever layer its frames are in (configuration,
/// distributed): the engine's; inside a third-party kernel package it is that package's
/// version (a dependency). The same frames under a message of no known words keep their class.
#[test]
fn an_undefined_name_is_a_code_bug_whatever_layer_its_frames_are_in() {
    let cases: &[(Frames<'_>, &str, Class)] = &[
        (
            &[("vllm/config/model.py", "__post_init__")],
            "NameError: name 'check_marlin_supported' is not defined",
            Class::Engine,
        ),
        (
            &[("vllm/distributed/parallel_state.py", "init_model_parallel")],
            "UnboundLocalError: cannot access local variable 'group' where it is not associated with a value",
            Class::Engine,
        ),
        (
            &[("flashinfer/jit/core.py", "build")],
            "NameError: name 'cuda_arch' is not defined",
            Class::Dependency,
        ),
        (
            &[("vllm/distributed/parallel_state.py", "init_model_parallel")],
            "RuntimeError: the group broke in a way nobody names",
            Class::Nccl,
        ),
    ];
    each_at_the_exception_with_its_class(cases);
}

/// An attribute missing on an object of the engine's own classes is the engine's bug, even in
/// the KV-cache code; on a library's classes (a transformers config, a torch module) it is the
/// library's version.
#[test]
fn a_missing_attribute_is_the_engines_bug_on_its_own_objects_and_a_version_on_a_librarys() {
    let kv = [("vllm/v1/core/block_pool.py", "get_new_blocks")];
    let cases: &[(Frames<'_>, &str, Class)] = &[
        (
            &kv,
            "AttributeError: 'NPUMLATokenToKVPool' object has no attribute 'kv_buffer'",
            Class::Engine,
        ),
        (
            &[("vllm/model_executor/models/qwen2.py", "__init__")],
            "AttributeError: 'Qwen2Config' object has no attribute 'rope_scaling'",
            Class::Dependency,
        ),
        (
            &[("vllm/model_executor/layers/linear.py", "forward")],
            "AttributeError: module 'torch' has no attribute 'float8_e8m0fnu'",
            Class::Dependency,
        ),
        (
            &kv,
            "RuntimeError: the block pool went wrong in a way nobody names",
            Class::PrefixCache,
        ),
    ];
    each_at_the_exception_with_its_class(cases);
}

/// A call with arguments that a method of the engine's own worker or runner does not take is
/// the engine disagreeing with itself (a development build, a plugin for another release); the
/// same call to a library's class is two packages whose versions do not fit. An exception that
/// names a command-line flag as invalid is the flag's, whatever layer its frames are in.
#[test]
fn a_call_the_engines_own_class_refuses_is_the_engine_and_an_invalid_flag_is_config() {
    let worker = [("vllm/worker/worker_base.py", "init_worker")];
    let dist = [(
        "vllm/distributed/parallel_state.py",
        "init_model_parallel_group",
    )];
    let cases: &[(Frames<'_>, &str, Class)] = &[
        (
            &worker,
            "TypeError: Worker.__init__() got an unexpected keyword argument 'kv_cache_dtype'",
            Class::Engine,
        ),
        (
            &worker,
            "TypeError: GPUModelRunner.execute_model() missing 1 required positional argument: 'intermediate_tensors'",
            Class::Engine,
        ),
        (
            &[("vllm/attention/backends/flashinfer.py", "begin_forward")],
            "TypeError: BatchPrefillWithPagedKVCacheWrapper.begin_forward() missing 1 required positional argument: 'page_size'",
            Class::Dependency,
        ),
        (
            &dist,
            "RuntimeError: Bad StatusOr access: UNKNOWN: TPU initialization failed: Invalid --slice_builder_worker_addresses specified. Expected 16 worker addresses, got 8.",
            Class::Config,
        ),
        (
            &dist,
            "ValueError: unknown value for --distributed-executor-backend: 'mpi'",
            Class::Config,
        ),
        (
            &dist,
            "RuntimeError: the group broke in a way nobody names",
            Class::Nccl,
        ),
    ];
    each_at_the_exception_with_its_class(cases);
}

/// A fragment of a log with no start or serving marker, but lines of the engine's own
/// processes (SGLang's `[time TP12]`): the engine ran, so an exception or crash no rule ties
/// to a deployment layer is the engine's. Torch's bare `[rank0]:` labels do not say that (a
/// training script has them too).
#[test]
fn an_engines_process_labels_say_it_ran_and_torch_ranks_do_not() {
    let fragment = |label: &str| {
        format!(
            "{label} Decode out of memory happened. #retracted_reqs: 3, #new_token_ratio: 0.0980 -> 1.0000\nFatal Python error: Segmentation fault\n"
        )
    };
    let engine = triage_text(&fragment("[2025-02-03 22:28:08 TP12]"))
        .primary
        .expect("the segfault");
    assert_eq!(
        (engine.class, engine.line),
        (Class::Engine, 2),
        "{engine:?}"
    );
    let torch = triage_text(&fragment("[rank0]:"))
        .primary
        .expect("the segfault");
    assert_eq!((torch.class, torch.line), (Class::Unknown, 2), "{torch:?}");
}

/// A native assertion or an accelerator kernel's own failure raised through a communication
/// library's frames (DeepEP's MoE dispatch) is a code fault, not a failed transport; a message
/// without such words through the same frames keeps the frames' class.
#[test]
fn a_native_assertion_through_a_communication_library_is_no_failed_transport() {
    let dispatch = [
        (
            "vllm/model_executor/layers/fused_moe/modular_kernel.py",
            "forward",
        ),
        ("deep_ep/buffer.py", "dispatch"),
    ];
    let plain = engine_core_primary(
        &dispatch,
        "RuntimeError: the group broke in a way nobody names",
    );
    let cases: &[(Frames<'_>, &str, Class)] = &[
        (
            &dispatch,
            "RuntimeError: call aclnnCamMoeDispatchNormal failed, detail:EZ9999: Inner Error!",
            Class::Engine,
        ),
        (
            &dispatch,
            "RuntimeError: Failed: Assertion error /w/csrc/deepep/deep_ep.cpp:101 error message or error code is 'topk_idx.size(0) <= round * per_round_tokens'",
            Class::Engine,
        ),
        (
            &dispatch,
            "RuntimeError: the group broke in a way nobody names",
            plain.class,
        ),
    ];
    assert_ne!(plain.class, Class::Engine, "{plain:?}");
    each_at_the_exception_with_its_class(cases);
}

/// Messages that say what they blame: NVML's frames are the driver's library; CUDA that a
/// forked worker cannot re-initialise is the engine's start method (not the driver, although
/// torch's CUDA init raises it); another accelerator's out-of-bounds memory access is a
/// device fault like CUDA's illegal address.
#[test]
fn nvml_a_forked_cuda_and_an_out_of_bounds_access_name_their_layer() {
    let cases: &[(Frames<'_>, &str, Class, &str)] = &[
        (
            &[("vllm/platforms/cuda.py", "get_device_name"), ("pynvml.py", "nvmlDeviceGetName")],
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xf8 in position 0: invalid start byte",
            Class::Driver,
            "frames-nvml",
        ),
        (
            &[("torch/cuda/__init__.py", "_lazy_init")],
            "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method",
            Class::Engine,
            "engine-cuda-forked",
        ),
        (
            &[("vllm_neuron/worker/neuronx_distributed_model_runner.py", "execute_model")],
            "RuntimeError: Failed to execute the model status=1006 message=Execution Out-Of-Bounds Memory Access",
            Class::GpuFault,
            "gpu-fault-kernel",
        ),
    ];
    for (frames, exc, class, rule) in cases {
        let p = engine_core_primary(frames, exc);
        assert_eq!(
            (p.class, p.at_exception, p.rule.as_str()),
            (*class, true, *rule),
            "{exc}: {p:?}"
        );
    }
}

/// A systemd unit's log read with `journalctl -u`: the journald prefix (time, host, the
/// writer and its pid) is taken apart like docker's, so the engine's start, its traceback and
/// its serving markers are seen. A healthy unit that logged an ERROR before it served stays
/// quiet; a failed one is found at its exception.
#[test]
fn a_systemd_units_journal_is_read_like_the_engines_own_log() {
    let j = |body: &str| {
        body.lines()
            .map(|l| format!("Mar 18 11:23:46 gpu-7 vllm-serve[9310]: {l}\n"))
            .collect::<String>()
    };
    let healthy = format!(
        "Mar 18 11:23:41 gpu-7 systemd[1]: Started vLLM.\n{}",
        j("INFO 03-18 11:23:44 [api_server.py:1000] vLLM API server version 0.9.0
ERROR 03-18 11:23:45 [repo_utils.py:47] Error retrieving file list: Repo id must be in the form 'repo_name', use `repo_type` argument if needed
INFO 03-18 11:24:40 [launcher.py:28] Available routes are:
INFO:     Started server process [9310]
INFO:     Application startup complete.
INFO:     127.0.0.1:50122 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK")
    );
    let r = triage_text(&healthy);
    assert!(r.primary.is_none(), "{:?}", r.primary);
    // SGLang's unit: its start (`server_args=`) is seen through the prefix, so an unexpected
    // None in its model-config code is the model's configuration, not an unknown error.
    let failed = format!(
        "Mar 18 11:23:41 gpu-7 systemd[1]: Started SGLang.\n{}Mar 18 11:23:50 gpu-7 systemd[1]: sglang.service: Main process exited, code=exited, status=1/FAILURE\n",
        j("[2025-03-18 11:23:46] server_args=ServerArgs(model_path='/models/m', tp_size=1)
Traceback (most recent call last):
  File \"/opt/venv/lib/python3.11/site-packages/sglang/srt/managers/tokenizer_manager.py\", line 155, in __init__
    self.model_config = ModelConfig(
  File \"/opt/venv/lib/python3.11/site-packages/sglang/srt/configs/model_config.py\", line 326, in get_hf_text_config
    class_name = config.architectures[0]
TypeError: 'NoneType' object is not subscriptable")
    );
    let r = triage_text(&failed);
    let p = r.primary.clone().unwrap();
    assert_eq!((p.class, p.line), (Class::Config, 8), "{p:?}");
    let text = serde_json::to_string(&r.outcome).unwrap();
    assert!(text.contains("started"), "{text}");
}

/// A class that only the traceback's frames name (the distributed layer's store, no message
/// that names a transport) does not outrank an earlier error a message names: the workers
/// died of their own error first, and the driver's rendezvous timed out waiting for them.
#[test]
fn a_class_only_frames_name_does_not_outrank_an_earlier_stated_error() {
    let log = "INFO 01-19 03:55:21 llm_engine.py:226] Initializing an LLM engine (v0.6.1) with config: model='m'
(VllmWorkerProcess pid=305) INFO 01-19 03:55:24 multiproc_worker_utils.py:218] Worker ready; awaiting tasks
(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233] Exception in worker VllmWorkerProcess while processing method init_device: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method, Traceback (most recent call last):
(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233]   File \"/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py\", line 300, in _lazy_init
(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233]     raise RuntimeError(
(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233] RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method
Traceback (most recent call last):
  File \"/opt/venv/lib/python3.11/site-packages/vllm/distributed/parallel_state.py\", line 1000, in init_distributed_environment
    torch.distributed.init_process_group(
  File \"/opt/venv/lib/python3.11/site-packages/torch/distributed/rendezvous.py\", line 240, in _tcp_rendezvous_handler
    store = _create_c10d_store(result.hostname, result.port, rank, world_size, timeout)
torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/8 clients joined.
";
    let p = triage_text(log).primary.unwrap();
    assert_eq!(
        (p.class, p.rule.as_str()),
        (Class::Engine, "engine-cuda-forked"),
        "{p:?}"
    );
    assert!(p.line == 3 || p.line == 6, "{p:?}");
}

/// Torch's `[rank2]:` and SGLang's `[.. TP2]` label one process: an out-of-memory torch logs
/// for rank 2, while the other ranks serve on, is one rank's. An import probe every rank
/// logged while loading and went on after is no failure of those ranks.
#[test]
fn torchs_rank_label_and_the_engines_name_one_process_for_a_one_rank_oom() {
    let log = |oom_ranks: &[u8]| {
        let mut s = String::new();
        for tp in 0..4 {
            s += &format!("[2025-12-27 01:00:5{tp} TP{tp}] Ignore import error when loading sglang.srt.models.midashenglm: No module named 'torchaudio'\n");
            s += &format!("[2025-12-27 01:01:0{tp} TP{tp}] Load weight end. type=Qwen3ForCausalLM, avail mem=20.00 GB\n");
        }
        s += "[2025-12-27 01:02:00] The server is fired up and ready to roll!\n";
        s += "[2025-12-27 01:06:12] INFO:     127.0.0.1:50816 - \"POST /generate HTTP/1.1\" 200 OK\n";
        for r in oom_ranks {
            s += &format!("[rank{r}]:[E1227 01:06:16.020753201 compiler_depend.ts:444] NPU out of memory. NPUWorkspaceAllocator tried to allocate 216.00 MiB(NPU {r}; 61.27 GiB total capacity; 159.89 MiB free).\n");
            s += &format!("[2025-12-27 01:06:16 TP{r}] Scheduler hit an exception: Traceback (most recent call last):\n");
            s += &format!(
                "[2025-12-27 01:06:16 TP{r}] RuntimeError: The Inner error is reported as above.\n"
            );
        }
        s
    };
    let one = triage_text(&log(&[2]));
    let p = one.primary.expect("a rank died");
    assert_eq!((p.class, p.line), (Class::OomTopology, 11), "{p:?}");
    // Two ranks out of memory is no one-rank problem.
    let two = triage_text(&log(&[1, 2]));
    let p = two.primary.expect("two ranks died");
    assert_eq!((p.class, p.line), (Class::OomRuntime, 11), "{p:?}");
}

/// Python's own failed `assert` is a code bug of the code the frames name: through the
/// distributed layer's frames (a caller that never set up the group) it is no failed
/// transport, through the engine's own frames the engine's, through a third-party kernel
/// package's frames that package's version.
#[test]
fn a_failed_python_assert_is_the_code_the_frames_name_never_a_transport() {
    let log = |frame: &str| {
        format!(
            "[2025-05-10 10:00:00] server_args=ServerArgs(model_path='m', tp_size=1)
[2025-05-10 10:00:05] Scheduler hit an exception: Traceback (most recent call last):
  File \"/x/sglang/python/sglang/srt/managers/scheduler.py\", line 268, in __init__
    self.tp_worker = TpWorkerClass(
  File \"{frame}\", line 749, in get_tp_group
    assert _TP is not None, (\"tensor model parallel group is not initialized\")
AssertionError: tensor model parallel group is not initialized
"
        )
    };
    for (frame, class) in [
        (
            "/env/site-packages/vllm/distributed/parallel_state.py",
            Class::Engine,
        ),
        (
            "/x/sglang/python/sglang/srt/managers/tp_worker.py",
            Class::Engine,
        ),
        (
            "/env/site-packages/flashinfer/prefill.py",
            Class::Dependency,
        ),
    ] {
        let p = triage_text(&log(frame)).primary.expect(frame);
        assert_eq!((p.class, p.line), (class, 7), "{frame}: {p:?}");
    }
    // A bare assert without a message is the same.
    let bare = log("/env/site-packages/vllm/distributed/parallel_state.py").replace(
        "AssertionError: tensor model parallel group is not initialized",
        "AssertionError",
    );
    let p = triage_text(&bare).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Engine, 7), "{p:?}");
}

/// A compiled kernel the engine's Python calls that the installed build lacks is a dependency
/// at its first line (vLLM's custom-op message), not at the AttributeError that ends the worker
/// later; a JIT compiler that cannot build a kernel (Triton in MLIR's words) is the toolchain's.
#[test]
fn a_missing_custom_op_and_a_failed_triton_compile_are_the_build_at_their_first_line() {
    let custom_op = "(VllmWorkerProcess pid=1492) ERROR 12-17 03:22:04 _custom_ops.py:61] Error in calling custom op awq_dequantize: '_OpNamespace' '_C' object has no attribute 'awq_dequantize'
(VllmWorkerProcess pid=1492) ERROR 12-17 03:22:04 _custom_ops.py:61] Possibly you have built or installed an obsolete version of vllm.
(VllmWorkerProcess pid=1492) ERROR 12-17 03:22:05 multiproc_worker_utils.py:229] Exception in worker VllmWorkerProcess while processing method determine_num_available_blocks.
(VllmWorkerProcess pid=1492) ERROR 12-17 03:22:05 multiproc_worker_utils.py:229] Traceback (most recent call last):
(VllmWorkerProcess pid=1492) ERROR 12-17 03:22:05 multiproc_worker_utils.py:229]   File \"/vllm/worker/worker.py\", line 195, in determine_num_available_blocks
(VllmWorkerProcess pid=1492) ERROR 12-17 03:22:05 multiproc_worker_utils.py:229] AttributeError: '_OpNamespace' '_C' object has no attribute 'awq_dequantize'
";
    let p = triage_text(custom_op).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 1), "{p:?}");
    let triton = "INFO 07-31 15:57:40 [api_server.py:1233] vLLM API server version 0.10.0
/env/site-packages/vllm/attention/ops/prefix_prefill.py:36:0: error: Failures have been detected while processing an MLIR pass pipeline
Traceback (most recent call last):
  File \"/env/site-packages/vllm/v1/engine/core.py\", line 640, in run_engine_core
  File \"/env/site-packages/triton/compiler/compiler.py\", line 424, in make_llir
RuntimeError: PassManager::run failed
";
    let p = triage_text(triton).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 2), "{p:?}");
}

/// llama.cpp's older assertion format names a Windows path (a drive letter, spaces) before the
/// line number (an OpenCL build without a conversion kernel for the type is the backend's gap,
/// label rule 8); ggml's assertion that a backend buffer came back without memory is the device's
/// memory refused.
#[test]
fn older_ggml_asserts_on_windows_paths_and_a_null_backend_buffer_are_found() {
    let log = |assert: &str| {
        format!(
            "llama server listening at http://127.0.0.1:8080
slot 0 is processing [task id: 0]
{assert}
"
        )
    };
    let p = triage_text(&log(
        "GGML_ASSERT: C:\\Users\\me\\Random projects\\llama.cpp\\ggml-cuda.cu:727: tensor->view_src == nullptr",
    ))
    .primary
    .expect("an abort after serving");
    assert_eq!((p.class, p.line), (Class::Engine, 3), "{p:?}");
    let p = triage_text(&log(
        "GGML_ASSERT: C:\\Users\\me\\Random projects\\llama.cpp\\ggml-opencl.cpp:1726: to_fp32_cl != nullptr",
    ))
    .primary
    .unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 3), "{p:?}");
    let p = triage_text(&log(
        "GGML_ASSERT: D:\\a\\llama.cpp\\ggml-backend.c:96: base != NULL && \"backend buffer base cannot be NULL\"",
    ))
    .primary
    .unwrap();
    assert_eq!((p.class, p.line), (Class::OomStartup, 3), "{p:?}");
}

/// Apple's Metal spells a refused GPU allocation `Insufficient Memory
/// (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)`; ggml's Metal sources end in `.m`, and
/// their fatal error is an abort with its file and line like the C++ ones. A runner that served
/// and then failed its first compute ran out of memory at run time.
#[test]
fn a_metal_out_of_memory_and_an_objective_c_fatal_error_are_found() {
    let log = "time=2026-02-20T16:27:39.848-06:00 level=INFO source=server.go:1310 msg=\"llama runner started in 14.74 seconds\"
[GIN] 2026/02/20 - 16:27:40 | 200 |    2.802459ms |       127.0.0.1 | POST     \"/api/generate\"
ggml_metal_synchronize: error: command buffer 0 failed with status 5
error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)
ggml-metal-context.m:246: fatal error
SIGABRT: abort
";
    let p = triage_text(log)
        .primary
        .expect("a Metal out-of-memory abort");
    assert_eq!(p.class, Class::OomRuntime, "{p:?}");
    assert!((3..=4).contains(&p.line), "{p:?}");
    let abort = "llama server listening at http://127.0.0.1:8080
slot 0 is processing [task id: 0]
ggml-metal.m:1876: fatal error
";
    let p = triage_text(abort)
        .primary
        .expect("an abort in a Metal source");
    assert_eq!((p.class, p.line), (Class::Engine, 3), "{p:?}");
}

/// A native abort names its source file, and ggml's sources end in every C, C++, CUDA and
/// Objective-C suffix (none in `.cc`): a CUDA header's `mmq.cuh:107: fatal error` (ik_llama.cpp
/// on Windows) is as much the cause as a `.cpp` one.
#[test]
fn a_native_abort_is_found_in_every_source_suffix() {
    for file in [
        "mmq.cuh",
        "ggml-impl.h",
        "common.hpp",
        "ggml-cuda.cu",
        "ops.cpp",
        "ggml.c",
        "ggml-metal.mm",
    ] {
        let log = format!(
            "llama server listening at http://127.0.0.1:8080
slot 0 is processing [task id: 0]
D:\\a\\ik_llama.cpp\\ggml\\src\\{file}:107: fatal error
"
        );
        let p = triage_text(&log)
            .primary
            .unwrap_or_else(|| panic!("{file}: the abort is not found"));
        assert_eq!((p.class, p.line), (Class::Engine, 3), "{file}: {p:?}");
    }
}

/// PyTorch's caching allocator raises its NVML assert instead of the out-of-memory error where
/// NVML cannot say who holds the memory: while the weights are allocated that is a startup
/// out-of-memory. NVML failing to start at all is not one.
#[test]
fn the_caching_allocators_nvml_assert_is_the_out_of_memory_it_stands_for() {
    let log = |error: &str| {
        format!(
            "INFO 07-14 12:14:10 llm_engine.py:249] Initializing an LLM engine (v0.6.4.post1) with config: model='Qwen/Qwen2.5-14B-Instruct'
Traceback (most recent call last):
  File \"/env/site-packages/vllm/model_executor/models/qwen2.py\", line 76, in __init__
  File \"/env/site-packages/vllm/model_executor/layers/linear.py\", line 122, in create_weights
  File \"/env/site-packages/torch/utils/_device.py\", line 106, in __torch_function__
{error}
"
        )
    };
    let p = triage_text(&log("RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at \"../c10/cuda/CUDACachingAllocator.cpp\":995, please report a bug to PyTorch. "))
        .primary
        .unwrap();
    assert_eq!((p.class, p.line), (Class::OomStartup, 6), "{p:?}");
    let p = triage_text(&log("RuntimeError: NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL ASSERT FAILED at \"../c10/cuda/CUDACachingAllocator.cpp\":813, please report a bug to PyTorch."))
        .primary
        .unwrap();
    assert_ne!(p.class, Class::OomStartup, "{p:?}");
}

/// Kubernetes' node log files (`/var/log/pods/..`, CRI format) put the time, the stream and a
/// full/partial tag in front of every line: the same log read there gives the same outcome,
/// cause and line as read from `kubectl logs`.
#[test]
fn a_kubernetes_node_log_file_reads_as_the_plain_log() {
    let plain = "(APIServer pid=1) INFO 08-03 21:48:40 [api_server.py:1820] vLLM API server version 0.11.0
(EngineCore pid=7) INFO 08-03 21:49:23 [gpu_worker.py:538] Available KV cache memory: 8.72 GiB
(EngineCore pid=7) ERROR 08-03 21:49:23 [core.py:1231] EngineCore failed to start.
(EngineCore pid=7) ERROR 08-03 21:49:23 [core.py:1231] Traceback (most recent call last):
(EngineCore pid=7) ERROR 08-03 21:49:23 [core.py:1231]   File \"/v/vllm/v1/core/kv_cache_utils.py\", line 760, in _check_enough_kv_cache_memory
(EngineCore pid=7) ERROR 08-03 21:49:23 [core.py:1231]     raise ValueError(
(EngineCore pid=7) ERROR 08-03 21:49:23 [core.py:1231] ValueError: To serve at least one request with the model's max seq len (262144), (18.35 GiB KV cache is needed, which is larger than the available KV cache memory (8.72 GiB).
(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
";
    let cri: String = plain
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let stream = if i % 2 == 0 { "stdout" } else { "stderr" };
            format!("2025-08-03T21:49:{:02}.123456789Z {stream} F {l}\n", 10 + i)
        })
        .collect();
    let (a, b) = (triage_text(plain), triage_text(&cri));
    let (pa, pb) = (a.primary.unwrap(), b.primary.unwrap());
    assert_eq!((pa.class, pa.line), (Class::OomStartup, 7), "{pa:?}");
    assert_eq!((pb.class, pb.line), (pa.class, pa.line), "{pb:?}");
    assert_eq!(pb.rank, pa.rank);
}

/// A caller's assertion that an NVSHMEM call succeeded names the transport that failed; a
/// check of the free device memory against a reserve, in words no engine rule knew, is a
/// startup out-of-memory.
#[test]
fn a_failed_nvshmem_call_and_free_memory_below_a_reserve_name_their_layers() {
    let deepep = "[2025-04-02 15:25:19 TP2] Load weight end. type=DeepseekV3ForCausalLM, avail mem=30.10 GB
[2025-04-02 15:25:20 TP2] Scheduler hit an exception: Traceback (most recent call last):
  File \"/usr/local/lib64/python3.11/site-packages/deep_ep/buffer.py\", line 89, in __init__
    self.runtime.sync(device_ids, ipc_handles, root_unique_id)
RuntimeError: Failed: Assertion error /src/DeepEP/csrc/kernels/runtime.cu:56 'nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, rank % NUM_MAX_NVL_PEERS, NUM_MAX_NVL_PEERS, num_ranks / NUM_MAX_NVL_PEERS, &cfg, 0, &team) == 0'
";
    let p = triage_text(deepep).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Nccl, 5), "{p:?}");
    let reserve = "(Worker_TP2 pid=35) INFO 07-25 13:47:20 [gpu_model_runner.py:4100] Graph capturing finished in 12 secs
(Worker_TP2 pid=35) ERROR 07-25 13:47:27 [multiproc_executor.py:1007] WorkerProc hit an exception.
(Worker_TP2 pid=35) ERROR 07-25 13:47:27 [multiproc_executor.py:1007] Traceback (most recent call last):
(Worker_TP2 pid=35) ERROR 07-25 13:47:27 [multiproc_executor.py:1007]   File \"/v/vllm/v1/worker/gpu_worker.py\", line 500, in compile_or_warm_up_model
(Worker_TP2 pid=35) ERROR 07-25 13:47:27 [multiproc_executor.py:1007] RuntimeError: Tiered MoE observed free HBM is below the runtime reserve: 13330546688 bytes available, 15000000000 required. Replan more experts into Grace memory.
";
    let p = triage_text(reserve).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::OomStartup, 5), "{p:?}");
}

/// llama.cpp renders chat templates with its own engine: a template it cannot run aborts the
/// server at load (`this custom template is not supported`), and a template that raises while
/// rendering fails each request with its `While executing ... in source` error, which the
/// server survives but the chat interface does not.
#[test]
fn llama_cpps_own_template_engine_failures_are_the_chat_templates() {
    let abort = "main: model loaded
main: The chat template that comes with this model is not yet supported, falling back to chatml. This may cause the model to output suboptimal responses
terminate called after throwing an instance of 'std::runtime_error'
  what():  this custom template is not supported
Aborted (core dumped)
";
    let p = triage_text(abort).primary.unwrap();
    assert_eq!(p.class, Class::ToolParser, "{p:?}");
    assert!((3..=4).contains(&p.line), "{p:?}");
    let request = "main: server is listening on http://127.0.0.1:8080 - starting the main loop
srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200
srv    operator(): got exception: {\"error\":{\"code\":500,\"message\":\"\\n------------\\nWhile executing CallExpression at line 328, column 32 in source:\\n... raise_exception(\\\"Message has tool role\\\")\",\"type\":\"server_error\"}}
srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 500
srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200
";
    let p = triage_text(request)
        .primary
        .expect("a chat template that fails requests");
    assert_eq!((p.class, p.line), (Class::ToolParser, 3), "{p:?}");
}

/// cuDNN finding no kernel for a call (`GET was unable to find an engine to execute this
/// computation`) is the installed cuDNN and torch not matching, whatever code called it.
#[test]
fn cudnn_finding_no_engine_is_the_build() {
    let log = "INFO 06-01 10:00:00 llm_engine.py:100] Initializing an LLM engine (v0.5.3) with config: model='llava-hf/llava-1.5-7b-hf'
[rank0]: Traceback (most recent call last):
[rank0]:   File \"/env/vllm/worker/model_runner.py\", line 1300, in profile_run
[rank0]:   File \"/env/vllm/model_executor/models/clip.py\", line 130, in forward
[rank0]:   File \"/env/torch/nn/modules/conv.py\", line 456, in _conv_forward
[rank0]: RuntimeError: GET was unable to find an engine to execute this computation
";
    let p = triage_text(log).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 6), "{p:?}");
}

/// vLLM refuses a backend with "Selected backend ... is not valid for this configuration" only
/// when the deployment chose it (`--attention-backend`): the choice is the configuration's, not
/// a build without the kernel. When vLLM finds no backend by itself, the reasons say whose it is:
/// a KV-cache dtype no backend takes is the deployment's setting; a head size none takes is a
/// build without the kernel.
#[test]
fn a_chosen_backend_that_is_not_valid_is_configuration() {
    let h = "(EngineCore pid=3608) ERROR 06-13 11:14:51 [core.py:1199] ";
    let log = format!(
        "(APIServer pid=3500) INFO 06-13 11:14:40 [api_server.py:1] vLLM API server version 0.19.0
{h}EngineCore failed to start.
{h}Traceback (most recent call last):
{h}  File \"/venv/lib/python3.12/site-packages/vllm/platforms/cuda.py\", line 336, in get_attn_backend_cls
{h}    raise ValueError(
{h}ValueError: Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this configuration. Reason: ['partial multimodal token full attention not supported']
(APIServer pid=3500) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}
"
    );
    let p = triage_text(&log).primary.unwrap();
    assert_eq!(
        (p.class, p.line, p.rule.as_str()),
        (Class::Config, 6, "config-selected-backend"),
        "{p:?}"
    );
    let own = log.replace(
        "Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this configuration. Reason: ['partial multimodal token full attention not supported']",
        "No valid attention backend found for cuda with head_size 80: FLASH_ATTN not supported",
    );
    let p = triage_text(&own).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 6), "{p:?}");
    let setting = log.replace(
        "Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this configuration. Reason: ['partial multimodal token full attention not supported']",
        "No valid attention backend found for cuda with AttentionSelectorConfig(head_size=256, kv_cache_dtype=nvfp4). Reasons: {FLASH_ATTN: [kv_cache_dtype not supported]}",
    );
    let p = triage_text(&setting).primary.unwrap();
    assert_eq!(
        (p.class, p.line, p.rule.as_str()),
        (Class::Config, 6, "config-no-valid-backend"),
        "{p:?}"
    );
}

/// Python's "unsupported operand type(s) for -: 'Tensor' and 'NoneType'" is a value the code did
/// not expect (a code bug of the frames it names), not a feature the engine refuses; the same
/// words for `|` between types are an old Python.
#[test]
fn an_unsupported_operand_is_a_code_bug_not_a_refused_setting() {
    let log = "[2026-06-12 03:45:40] INFO:     Application startup complete.
[2026-06-12 03:45:58] INFO:     127.0.0.1:50000 - \"GET /get_model_info HTTP/1.1\" 200 OK
[2026-06-12 03:45:59 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File \"/sgl/python/sglang/srt/managers/scheduler.py\", line 2900, in run_batch
    self.attn_backend.init_forward_metadata(forward_batch)
  File \"/sgl/python/sglang/srt/model_executor/model_runner.py\", line 3674, in update_sliding_window
    torch.tensor(self.sliding_window_size) + seq_lens - prefix_lens,
TypeError: unsupported operand type(s) for -: 'Tensor' and 'NoneType'

[2026-06-12 03:45:59] SIGQUIT received. signum=None, frame=None. It usually means one child failed.
";
    let p = triage_text(log).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Engine, 8), "{p:?}");
    let old_python = log.replace(
        "for -: 'Tensor' and 'NoneType'",
        "for |: 'type' and 'NoneType'",
    );
    let p = triage_text(&old_python).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 8), "{p:?}");
}

/// A package probe that failed while the server started, before it served, does not explain a
/// crash of the same class after it served: the crash's own line is the cause. Before serving,
/// the earlier failure of the class still is the earliest error that explains the end.
#[test]
fn an_error_the_server_served_after_is_not_the_earliest_of_its_class() {
    let log = "[2026-06-12 03:40:00] binary_missing sgl_kernel.common_ops No module named 'sgl_kernel.common_ops'
[2026-06-12 03:45:40] INFO:     Application startup complete.
[2026-06-12 03:45:58] INFO:     127.0.0.1:50000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK
[2026-06-12 03:45:59 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File \"/usr/local/lib/python3.12/dist-packages/flashinfer/prefill.py\", line 2381, in run
    _check_cached_qkv_data_type(
RuntimeError: flashinfer kernel launch failed
[2026-06-12 03:45:59] SIGQUIT received. signum=None, frame=None. It usually means one child failed.
";
    let p = triage_text(log).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 7), "{p:?}");
    // Not served yet: the probe explains the crash of its class.
    let starting = log
        .lines()
        .filter(|l| !l.contains("Application startup") && !l.contains("200 OK"))
        .map(|l| format!("{l}\n"))
        .collect::<String>();
    let p = triage_text(&starting).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 1), "{p:?}");
}

/// A process that cannot bind its port exits: the lines after it are another process's (the
/// one that holds the port, still serving into the same file), not its recovery.
#[test]
fn a_port_in_use_ends_its_process_whatever_the_holder_serves_after_it() {
    let log = "Error: listen tcp 127.0.0.1:11434: bind: address already in use
[GIN] 2026/02/08 - 10:38:09 | 200 |    1.435875ms |       127.0.0.1 | GET      \"/api/tags\"
[GIN] 2026/02/08 - 10:38:12 | 200 |  2.512345678s |       127.0.0.1 | POST     \"/api/chat\"
[GIN] 2026/02/08 - 10:38:15 | 200 |  2.012345678s |       127.0.0.1 | POST     \"/api/chat\"
";
    let p = triage_text(log).primary.unwrap();
    assert_eq!(
        (p.class, p.line, p.rule.as_str()),
        (Class::Config, 1, "config-port-in-use"),
        "{p:?}"
    );
    // The same serving lines without the failed start: healthy.
    let holder: String = log.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert!(triage_text(&holder).primary.is_none());
}

/// llama.cpp's server failing to turn a request's messages into its chat format (500 `Failed to
/// parse messages`) is the chat interface failing; a client's malformed message refused with
/// 400 before it is the client's, and alone leaves a serving server healthy.
#[test]
fn llama_cpps_failed_message_parsing_is_the_chat_interface_and_a_400_is_the_clients() {
    let serving = "main: server is listening on http://127.0.0.1:8080 - starting the main loop
srv  update_slots: all slots are idle
srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200
";
    let refused = format!(
        "{serving}srv    operator(): got exception: {{\"error\":{{\"code\":400,\"message\":\"Assistant message must contain either 'content' or 'tool_calls'!\",\"type\":\"invalid_request_error\"}}}}
srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 400
srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200
"
    );
    assert!(triage_text(&refused).primary.is_none(), "a client's 400");
    let failed = format!(
        "{refused}srv    operator(): got exception: {{\"error\":{{\"code\":500,\"message\":\"Failed to parse messages: [json.exception.type_error.302] type must be string, but is null\",\"type\":\"server_error\"}}}}
srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 500
srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200
"
    );
    let p = triage_text(&failed).primary.unwrap();
    assert_eq!(
        (p.class, p.line, p.rule.as_str()),
        (Class::ToolParser, 7, "tool-llamacpp-parse-messages"),
        "{p:?}"
    );
}

/// ROCm's BLAS failing a matrix multiply with a status other than memory (ggml prints hipBLAS's
/// status under cuBLAS's name) is the ROCm build lacking kernels for this GPU: a dependency. The
/// same call failing on CUDA says nothing of the kind (generic), and the handle that could not be
/// created is still memory.
#[test]
fn rocm_blas_refusing_a_gpu_is_the_rocm_build_not_the_engine() {
    let log = "ggml_cuda_init: found 1 ROCm devices:
  Device 0: AMD Radeon Instinct MI60, gfx906:sramecc+:xnack- (0x906), VMM: no, Wave Size: 64
load_tensors: offloaded 33/33 layers to GPU
main: server is listening on http://127.0.0.1:8080 - starting the main loop
/build/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:70: ROCm error
ROCm error: CUBLAS_STATUS_NOT_SUPPORTED
  current device: 0, in function ggml_cuda_mul_mat_batched_cublas at /build/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:1889
  hipblasGemmBatchedEx(ctx.cublas_handle(), HIPBLAS_OP_T, HIPBLAS_OP_N, ne01, ne11, ne10, alpha)
Aborted (core dumped)
";
    let p = triage_text(log).primary.unwrap();
    assert_eq!(
        (p.class, p.line, p.rule.as_str()),
        (Class::Dependency, 6, "dep-rocm-blas"),
        "{p:?}"
    );
    let internal = log.replace("NOT_SUPPORTED", "INTERNAL_ERROR");
    let p = triage_text(&internal).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Dependency, 6), "{p:?}");
    let cuda = log.replace("ROCm error", "CUDA error");
    let p = triage_text(&cuda).primary.unwrap();
    assert_ne!(p.class, Class::Dependency, "{p:?}");
    // After the server listened: memory while serving.
    let no_handle = log.replace("NOT_SUPPORTED", "NOT_INITIALIZED");
    let p = triage_text(&no_handle).primary.unwrap();
    assert_eq!(
        (p.class, p.rule.as_str()),
        (Class::OomRuntime, "oom-blas-init"),
        "{p:?}"
    );
}

/// A native crash whose backtrace is NCCL's own code died in the collective layer: `nccl`, on
/// the crash line the frames follow. The same crash in another library's frames says nothing of
/// NCCL.
#[test]
fn a_crash_inside_nccls_own_frames_is_the_collective_layer() {
    let log = "[2026-04-02 15:25:40 DP0 TP0] Load weight end. type=DeepseekV3ForCausalLM, avail mem=20.1 GB
[2026-04-02 15:26:05 DP0 TP6] Capture cuda graph begin. This can take up to several minutes.
[gpu-node-7:345 :0:4945] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x18)
==== backtrace (tid:   4945) ====
 0 0x0000000000042520 __sigaction()  ???:0
 1 0x00000000000494f4 uploadProxyOps()  /dvs/p4/build/sw/gpgpu/nccl/gitfusion/stable/src/enqueue.cc:1131
 2 0x0000000000051a7f hostStreamPlanTask()  /dvs/p4/build/sw/gpgpu/nccl/gitfusion/stable/src/enqueue.cc:1163
=================================
Fatal Python error: Segmentation fault
";
    let report = triage_text(log);
    let p = report.primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Nccl, 3), "{p:?}");
    // The crash line is the primary's, not another error beside it.
    assert_not_among_the_other_errors(&report.secondary, 3);
    let elsewhere = log.replace(
        "/dvs/p4/build/sw/gpgpu/nccl/gitfusion/stable/src/enqueue.cc",
        "/opt/sgl/kernel/csrc/moe/moe_align.cu",
    );
    let p = triage_text(&elsewhere).primary.unwrap();
    assert_ne!(p.class, Class::Nccl, "{p:?}");
}

/// gpt-oss's Harmony vocabulary that cannot be loaded at startup (offline, an empty cached file)
/// is the package's data missing: dependency. Harmony failing on a response stays the parser.
#[test]
fn harmonys_vocabulary_missing_at_startup_is_the_package_not_the_parser() {
    let log = "(APIServer pid=21) INFO 02-10 09:12:01 [api_server.py:1351] vLLM API server version 0.15.1
(APIServer pid=21) Traceback (most recent call last):
(APIServer pid=21)   File \"/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/harmony_utils.py\", line 63, in get_encoding
(APIServer pid=21)     _harmony_encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
(APIServer pid=21)   File \"/usr/local/lib/python3.12/dist-packages/openai_harmony/__init__.py\", line 699, in load_harmony_encoding
(APIServer pid=21)     inner: _PyHarmonyEncoding = _load_harmony_encoding(name)
(APIServer pid=21) openai_harmony.HarmonyError: error downloading or loading vocab file: failed to download or load vocab file
";
    let p = triage_text(log).primary.unwrap();
    assert_eq!(
        (p.class, p.line, p.rule.as_str()),
        (Class::Dependency, 7, "dep-harmony-vocab"),
        "{p:?}"
    );
    let parser = log.replace(
        "error downloading or loading vocab file: failed to download or load vocab file",
        "Unexpected token 200012 while expecting start token 200006",
    );
    let p = triage_text(&parser).primary.unwrap();
    assert_eq!(p.class, Class::ToolParser, "{p:?}");
}

/// The shell reports a crash in the user's locale (glibc's translations of "Segmentation
/// fault" and "core dumped"): each is the crash that ended the process, on its own line, as
/// the English one is; a log that only loaded is not quiet.
#[test]
fn a_crash_reported_in_the_users_locale_is_a_crash() {
    let log = |crash: &str| {
        format!(
            "llm_load_tensors: offloaded 41/41 layers to GPU
llm_load_tensors:      ROCm0 buffer size =  3577.56 MiB
llama_new_context_with_model: KV self size  = 1024.00 MiB
{crash}
"
        )
    };
    let english = triage_text(&log("Segmentation fault (core dumped)"))
        .primary
        .unwrap();
    for crash in [
        "段错误 (核心已转储)",
        "セグメンテーション違反 (コアダンプ)",
        "Speicherzugriffsfehler (Speicherabzug geschrieben)",
        "Violación de segmento (`core' generado)",
        "Ошибка сегментирования (стек памяти сброшен на диск)",
        "Falha de segmentação (imagem do núcleo gravada)",
        "세그멘테이션 오류 (코어 덤프됨)",
    ] {
        let p = triage_text(&log(crash))
            .primary
            .unwrap_or_else(|| panic!("{crash}"));
        assert_eq!((p.class, p.line), (english.class, 4), "{crash}: {p:?}");
    }
}

/// A GPU fault is sticky: its first report is the cause, also on a WARNING line where the code
/// that caught it went on to another call that failed on it. vLLM V0 dumping the inputs of a
/// failed execution warns with the fault its pickling ran into: that is the failure being
/// handled, and the exception raised next is the cause.
#[test]
fn a_sticky_gpu_fault_reported_as_a_warning_is_the_cause_and_a_failed_dump_is_not() {
    let warned = "(EngineCore pid=130) INFO 05-09 20:07:40 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3.5-27B...
(EngineCore pid=130) WARNING 05-09 20:08:02 [gdn_linear_attn.py:733] FlashQLA kernel failed, falling back to the Triton kernel: Traceback (most recent call last):
(EngineCore pid=130) WARNING 05-09 20:08:02 [gdn_linear_attn.py:733]   File \"/usr/local/lib/python3.12/dist-packages/tilelang/jit/kernel.py\", line 207, in __call__
(EngineCore pid=130) WARNING 05-09 20:08:02 [gdn_linear_attn.py:733]     return self.torch_function(*args, **kwds)
(EngineCore pid=130) WARNING 05-09 20:08:02 [gdn_linear_attn.py:733] RuntimeError: cuModuleLoadData(&(module_[device_id]), data_.c_str()) failed with error: CUDA_ERROR_ILLEGAL_ADDRESS
(EngineCore pid=130) ERROR 05-09 20:08:02 [core.py:1136] EngineCore failed to start.
(EngineCore pid=130) ERROR 05-09 20:08:02 [core.py:1136] Traceback (most recent call last):
(EngineCore pid=130) ERROR 05-09 20:08:02 [core.py:1136]   File \"/usr/local/lib/python3.12/dist-packages/torch/accelerator/memory.py\", line 31, in empty_cache
(EngineCore pid=130) ERROR 05-09 20:08:02 [core.py:1136]     torch._C._accelerator_emptyCache()
(EngineCore pid=130) ERROR 05-09 20:08:02 [core.py:1136] torch.AcceleratorError: CUDA error: an illegal memory access was encountered
";
    let p = triage_text(warned).primary.unwrap();
    assert_eq!((p.class, p.line), (Class::GpuFault, 5), "{p:?}");

    let dump = "INFO 01-06 15:40:11 [model_runner.py:1115] Loading model weights took 45.6 GB
WARNING 01-06 15:47:24 [model_runner_base.py:80] Failed to pickle inputs of failed execution: CUDA error: an illegal memory access was encountered
ERROR 01-06 15:47:24 [engine.py:366] Error in model execution: Error Internal
ERROR 01-06 15:47:24 [engine.py:366] Traceback (most recent call last):
ERROR 01-06 15:47:24 [engine.py:366]   File \"/usr/local/lib/python3.12/dist-packages/vllm/worker/model_runner_base.py\", line 116, in _wrapper
ERROR 01-06 15:47:24 [engine.py:366]     return func(*args, **kwargs)
ERROR 01-06 15:47:24 [engine.py:366] RuntimeError: Error in model execution: Error Internal
";
    let p = triage_text(dump).primary.unwrap();
    assert_ne!(p.line, 2, "{p:?}");
    assert_ne!(p.class, Class::GpuFault, "{p:?}");
    // CUTLASS's `Error Internal`: the kernel library has no kernel for this GPU or shape.
    assert_eq!((p.class, p.line), (Class::Dependency, 3), "{p:?}");
}

/// Two Ray workers die of the same error: the first one's traceback is cut off where the log
/// starts (no frames name its class), the second one's is whole. The first report is the
/// earliest error that explains the end; the class is the one the whole traceback names.
#[test]
fn the_first_report_of_an_error_two_workers_died_of_is_the_cause() {
    let w1 = "(RayWorkerWrapper pid=91931, ip=10.0.0.5) ERROR 03-11 15:24:45 [worker_base.py:620]";
    let w2 = "(RayWorkerWrapper pid=91936, ip=10.0.0.5) ERROR 03-11 15:24:48 [worker_base.py:620]";
    let log = format!(
        "{w1}     torch.ops._C.cutlass_scaled_mm(out, a, b, scale_a, scale_b, bias)
{w1} RuntimeError: the op returned status 7
(RayWorkerWrapper pid=91936, ip=10.0.0.5) INFO 03-11 15:24:46 [loader.py:429] Loading weights took 52.44 seconds
{w2} Error executing method 'load_model'. This might cause deadlock in distributed execution.
{w2} Traceback (most recent call last):
{w2}   File \"/opt/venv/lib/python3.10/site-packages/vllm/worker/worker_base.py\", line 612, in execute_method
{w2}     return run_method(self, method, args, kwargs)
{w2}   File \"/opt/venv/lib/python3.10/site-packages/vllm/worker/model_runner.py\", line 1113, in load_model
{w2}     self.model = get_model(vllm_config=self.vllm_config)
{w2} RuntimeError: the op returned status 7
"
    );
    let report = triage_text(&log);
    let p = report.primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Engine, 2), "{p:?}");
    assert_eq!(
        p.rank.as_deref(),
        Some("RayWorkerWrapper pid=91931, ip=10.0.0.5")
    );
    // Shown once: not again among the other errors.
    assert_not_among_the_other_errors(&report.secondary, 2);
    // A different error earlier is not the same report.
    let other = log.replacen(
        "RuntimeError: the op returned status 7",
        "RuntimeError: the op returned status 9",
        1,
    );
    assert_eq!(triage_text(&other).primary.unwrap().line, 10);
}

/// The primary's line is shown once: not again among the other errors.
fn assert_not_among_the_other_errors(secondary: &[Finding], line: u64) {
    assert!(
        secondary.iter().all(|s| s.line != line),
        "line {line} again among the other errors: {secondary:?}"
    );
}

/// SGLang's watchdog kill reports a hang: an earlier error that explains the hang (a rank's
/// transport failure) stays the cause, and the watchdog line is only its consequence.
#[test]
fn an_error_before_sglangs_watchdog_kill_stays_the_cause() {
    let log = "[2025-04-03 19:59:10 DP0 TP1] The server is fired up and ready to roll!
node1:2201:2290 [1] NCCL WARN Call to connect returned Connection refused, retrying
[2025-04-03 20:06:34 DP0 TP0] Watchdog timeout (self.watchdog_timeout=300)
[2025-04-03 20:06:34 DP0 TP0] Pyspy dump for PID 112694:
";
    let rep = triage_text(log);
    let p = rep.primary.as_ref().expect("a cause");
    assert_eq!((p.class, p.line), (Class::Nccl, 2), "{p:?}");
}

/// A primary's (class, line, rule), or a panic naming the log.
use super::triage_never_silent::primary as found;

/// gdb's backtrace of an aborted llama.cpp names its functions (`llama_context::decode`), which
/// hold a loading marker's words: no progress, so the ROCm error before it ended the run.
#[test]
fn a_native_backtraces_frames_are_no_progress() {
    let log = "llama-run --ngl 10 model.gguf
> hello
ROCm error: CUBLAS_STATUS_NOT_SUPPORTED
  current device: 0, in function ggml_cuda_mul_mat_batched_cublas_impl at ggml/src/ggml-cuda/ggml-cuda.cu:1928
ggml/src/ggml-cuda/ggml-cuda.cu:78: ROCm error
[New LWP 14104]
#0  0x00007f60018ead93 in wait4 () from /lib64/libc.so.6
#1  0x00007f600484702b in ggml_print_backtrace () from build/bin/libggml-base.so
#8  0x00007f6004a49e61 in llama_context::graph_compute(ggml_cgraph*, bool) () from build/bin/libllama.so
#10 0x00007f6004a4f045 in llama_context::decode(llama_batch const&) () from build/bin/libllama.so
#12 0x000000000041b926 in main ()
";
    assert_eq!(found(log).1, 3);
    // The same words on a line of its own still show loading going on.
    let loading = log.replace(
        "[New LWP 14104]",
        "llama_context: n_ctx = 4096\nllama_context: loaded",
    );
    let rep = triage_text(&loading.replace("ggml/src/ggml-cuda/ggml-cuda.cu:78: ROCm error\n", ""));
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
}

/// ollama's runner fails with its own error, the scheduler reports the runner dead and the
/// request answered 500; the next runner loading is another process, so it does not show that
/// the runner got past its error. A request answered 2xx afterwards does.
#[test]
fn an_ollama_runners_error_before_the_scheduler_reports_it_dead_is_not_survived_by_the_next_runner()
{
    let log = "Feb 06 20:29:46 host ollama[2704]: llama_new_context_with_model: graph splits = 192
Feb 06 20:29:46 host ollama[2704]: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED
Feb 06 20:29:46 host ollama[2704]:   current device: 0, in function cublas_handle at ggml/src/ggml-cuda/common.cuh:644
Feb 06 20:29:48 host ollama[2704]: time=2025-02-06T20:29:48.277+05:30 level=ERROR source=sched.go:451 msg=\"error loading llama server\" error=\"llama runner process has terminated: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED\"
Feb 06 20:29:48 host ollama[2704]: [GIN] 2025/02/06 - 20:29:48 | 500 | 10.203887847s |       127.0.0.1 | POST     \"/api/chat\"
Feb 06 20:30:12 host ollama[2704]: time=2025-02-06T20:30:12.853+05:30 level=INFO source=server.go:393 msg=\"starting llama server\" cmd=\"/tmp/ollama/runners/cuda_v11/ollama_llama_server --model /m\"
Feb 06 20:30:12 host ollama[2704]: llama_model_loader: loaded meta data with 38 key-value pairs and 377 tensors from /m (version GGUF V3 (latest))
Feb 06 20:30:13 host ollama[2704]: load_tensors: offloading 14 repeating layers to GPU
";
    assert_eq!(found(log).1, 2);
    let answered = format!(
        "{log}Feb 06 20:30:20 host ollama[2704]: [GIN] 2025/02/06 - 20:30:20 | 200 |  7.1s |       127.0.0.1 | POST     \"/api/chat\"\n"
    );
    let rep = triage_text(&answered);
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
    assert!(
        rep.survived.iter().any(|s| s.line == 2),
        "{:?}",
        rep.survived
    );
}

/// vLLM's Ray worker wrapper runs a worker's method by name: an exception of the code it ran
/// (a weight that the model does not know) is no failed transport. Ray failing in the
/// wrapper's own code (placing the workers) still is.
#[test]
fn an_exception_of_the_code_rays_worker_wrapper_ran_is_not_the_transports() {
    let log = "ray.exceptions.RayTaskError(KeyError): ray::RayWorker.execute_method() (pid=9510, ip=192.168.16.3)
  File \"/usr/lib/python3.10/site-packages/vllm/engine/ray_utils.py\", line 32, in execute_method
    return executor(*args, **kwargs)
  File \"/usr/lib/python3.10/site-packages/vllm/worker/worker.py\", line 70, in init_model
    self.model = get_model(self.model_config)
  File \"/usr/lib/python3.10/site-packages/vllm/model_executor/models/gpt_bigcode.py\", line 280, in load_weights
    param = params_dict[name]
KeyError: 'transformer.h.0.mlp.act.scales'
";
    let (class, line, _) = found(log);
    assert_eq!((class, line), (Class::Engine, 8));
    let placing = "Traceback (most recent call last):
  File \"/opt/vllm/vllm/engine/llm_engine.py\", line 453, in _get_executor_cls
    initialize_ray_cluster(engine_config.parallel_config)
  File \"/opt/vllm/vllm/executor/ray_utils.py\", line 300, in initialize_ray_cluster
    raise ValueError(
ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group.
";
    assert_eq!(found(placing).0, Class::Nccl);
}

/// A model file whose first bytes name another format than the build reads: configuration.
#[test]
fn a_model_file_in_another_format_is_configuration() {
    for log in [
        "main: seed = 1680105266\n./models/7B/model.bin: invalid model file (bad magic [got 0x67676d66 want 0x67676a74])\n\tyou most likely need to regenerate your ggml files\n",
        "gguf_init_from_file_impl: invalid magic characters: 'ggjt', expected 'GGUF'\nllama_model_load: error loading model: llama_model_loader: failed to load model from m.bin\n",
    ] {
        let (class, line, rule) = found(log);
        assert_eq!((class, line, rule.as_str()), (Class::Config, if log.starts_with("main") { 2 } else { 1 }, "config-model-file-format"), "{log}");
    }
}

/// AddressSanitizer's report ends the process: the engine's native code broke, whatever
/// the process printed after it.
#[test]
fn an_address_sanitizer_report_is_the_engines_crash() {
    let log = "main: build = 1 (abc1234)
llama_model_loader: loaded meta data with 19 key-value pairs and 291 tensors from m.gguf
==167666==ERROR: AddressSanitizer: SEGV on unknown address 0x558c0562c438 (pc 0x558a27cc9807 bp 0x000000000000 sp 0x7ffeb2f57310 T0)
==167666==The signal is caused by a READ memory access.
    #0 0x558a27cc9807 in ggml_compute_forward_get_rows ggml.c:10233
SUMMARY: AddressSanitizer: SEGV ggml.c:10233 in ggml_compute_forward_get_rows
llama_model_loader: - kv   0: general.architecture str = llama
";
    assert_eq!(
        found(log),
        (Class::Engine, 3, "engine-address-sanitizer".to_string())
    );
}

/// llama.cpp's tools print their errors behind the function's name (`main: error: unable to
/// load model`, `ggml_metal_init: load pipeline error: ...`): a quote of them names the first.
#[test]
fn a_quoted_llama_cpp_error_behind_its_functions_name_is_found() {
    let log = "ggml_metal_init: loaded kernel_mul_mat_q6_K_f32            0x7fcb47814dd0 | th_max = 1024 | th_width =   64
ggml_metal_init: load pipeline error: Error Domain=CompilerError Code=2 \"SC compilation failure
There is a call to an undefined label\"
llama_init_from_gpt_params: error: failed to create context with model './models/m.gguf'
main: error: unable to load model
";
    assert_eq!(found(log).1, 2);
    // A routine line that holds the word later in its sentence is none.
    let routine = "ggml_metal_init: loaded kernel_mul_mat_q6_K_f32\nllama_print_timings: load time = 10 ms (no error: all fine)\n";
    assert!(triage_text(routine).primary.is_none());
}

/// The 2023 llama.cpp `main` (`llama_model_load: loading model from ...`) ran the model: its
/// segmentation fault with nothing else named is the engine's crash.
#[test]
fn old_llama_cpp_loading_shows_the_engine_ran() {
    let log = "main: seed = 1679423191
llama_model_load: loading model from './models/13B/ggml-model-q4_0.bin' - please wait ...
llama_model_load: n_vocab = 32000
llama_model_load: model size =  7759.39 MB / num tensors = 363
main: prompt: ' Hello'
./run.sh: line 53: 33476 Segmentation fault: 11  ./main --model m.bin
";
    let (class, line, _) = found(log);
    assert_eq!((class, line), (Class::Engine, 6));
}

/// IPython prints a notebook's traceback with its own frames (`File ~/x.py:43, in f(..)`) and
/// the source around each frame's line: the frames name the layer, and a line shown around
/// a frame's own (`except ImportError:`) is no source of the exception.
#[test]
fn an_ipython_traceback_is_read_by_its_frames() {
    let log = "---------------------------------------------------------------------------
IndexError                                Traceback (most recent call last)
Cell In[4], line 11
---> 11 out = llm.classify(texts)

File ~/env/lib/python3.12/site-packages/vllm/compilation/cuda_piecewise_backend.py:112, in CUDAPiecewiseBackend.__call__(self, *args)
    109     self.check_for_ending_compilation()
    110 try:
    111     import missing_module
    112 except ImportError:
--> 113 runtime_shape = args[self.sym_shape_indices[0]]
    114 if runtime_shape not in self.concrete_size_entries:

IndexError: list index out of range
";
    let (class, line, rule) = found(log);
    assert_eq!((class, line), (Class::Engine, 14), "{rule}");
}

/// One streaming request's task: the client went away (starlette's disconnect listener was
/// cancelled) and the response's task group raised again while handling it. The whole chain
/// failed that request; the server went on. The same chain raised through vLLM V0's engine
/// loop is the engine's death, in every request.
#[test]
fn a_chain_raised_in_one_requests_task_failed_that_request_only() {
    let root = "ERROR:    Exception in ASGI application
Traceback (most recent call last):
  File \"/venv/lib/python3.10/site-packages/starlette/responses.py\", line 238, in listen_for_disconnect
    message = await receive()
  File \"/usr/lib/python3.10/asyncio/locks.py\", line 214, in wait
    await fut
asyncio.exceptions.CancelledError: Cancelled by cancel scope 7f6028dc8ee0

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File \"/venv/lib/python3.10/site-packages/uvicorn/protocols/http/httptools_impl.py\", line 399, in run_asgi
    result = await app(  # type: ignore[func-returns-value]
";
    let tail = "  File \"/venv/lib/python3.10/site-packages/anyio/_backends/_asyncio.py\", line 680, in __aexit__
    raise BaseExceptionGroup(
exceptiongroup.ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)
";
    let request = format!("{root}{tail}");
    let rep = triage_text(&request);
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
    assert!(
        rep.survived.iter().any(|s| s.line == 16),
        "{:?}",
        rep.survived
    );
    let engine = format!(
        "{root}  File \"/venv/lib/python3.10/site-packages/vllm/engine/async_llm_engine.py\", line 603, in run_engine_loop\n    async with asyncio_timeout(ENGINE_ITERATION_TIMEOUT_S):\n{tail}"
    );
    assert!(triage_text(&engine).primary.is_some());
}

/// vLLM inspects a model's architecture in a subprocess; when that fails, its registry logs
/// "Error in inspecting model architecture", the `CalledProcessError`, the wrapper
/// `RuntimeError: Error raised in subprocess:` and then the subprocess's own traceback. The
/// subprocess's exception is the cause, whatever its class: a syntax error in the engine's
/// own (patched) source, or a user id with no passwd entry (the container); not the
/// announcing line's class (an architecture this build does not support).
#[test]
fn the_model_inspection_subprocess_s_own_exception_is_the_cause() {
    let inspection = |frames: &[&str]| {
        let p = "(APIServer pid=1) ERROR 05-09 21:12:05 [registry.py:921] ";
        let mut lines = vec![
            "Error in inspecting model architecture 'Qwen3MoeForCausalLM'",
            "Traceback (most recent call last):",
            "  File \"/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/registry.py\", line 1345, in _run_in_subprocess",
            "    returned.check_returncode()",
            "  File \"/usr/lib/python3.12/subprocess.py\", line 502, in check_returncode",
            "    raise CalledProcessError(self.returncode, self.args, self.stdout,",
            "subprocess.CalledProcessError: Command '['/usr/bin/python3', '-m', 'vllm.model_executor.models.registry']' returned non-zero exit status 1.",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "Traceback (most recent call last):",
            "  File \"/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/registry.py\", line 1348, in _run_in_subprocess",
            "    raise RuntimeError(",
            "RuntimeError: Error raised in subprocess:",
            "Traceback (most recent call last):",
        ];
        lines.extend_from_slice(frames);
        lines.push("");
        let mut log = String::from("(APIServer pid=1) INFO 05-09 21:12:00 [utils.py:233] non-default args: {'model': '/models/Qwen3-30B-A3B'}\n");
        for l in lines {
            log.push_str(&format!("{p}{l}\n"));
        }
        log.push_str("(APIServer pid=1) pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n(APIServer pid=1)   Value error, Model architectures ['Qwen3MoeForCausalLM'] failed to be inspected. Please check the logs for more details. [type=value_error]\n");
        found(&log)
    };
    let syntax = inspection(&[
        "  File \"/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/qwen3_moe.py\", line 43, in <module>",
        "    from vllm.model_executor.layers.fused_moe import FusedMoE",
        "  File \"/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/fused_moe/layer.py\", line 1110",
        "    def fused_moe_gating_kernel(",
        "                               ^",
        "SyntaxError: '(' was never closed",
    ]);
    assert_eq!((syntax.0, syntax.1), (Class::Engine, 22), "{}", syntax.2);
    let uid = inspection(&[
        "  File \"/usr/local/lib/python3.12/dist-packages/torch/_inductor/runtime/cache_dir_utils.py\", line 19, in default_cache_dir",
        "    sanitized_username = re.sub(r'[\\\\/:*?\"<>|]', \"_\", getpass.getuser())",
        "  File \"/usr/lib/python3.12/getpass.py\", line 169, in getuser",
        "    return pwd.getpwuid(os.getuid())[0]",
        "KeyError: 'getpwuid(): uid not found: 1001'",
    ]);
    assert_eq!((uid.0, uid.1), (Class::Container, 21), "{}", uid.2);
}

/// llama.cpp's command-line program in interactive mode is ready and answering: what the model
/// writes (prose about "error handling") is no log line. The run that ends with `main : failed
/// to eval` stopped there; a crash right after the older server's `build info` line is the
/// engine's, as after the newer `build:` line.
#[test]
fn llama_cli_interactive_sessions_and_old_build_lines() {
    let session = "main: build = 3212 (8cb508d0)
main: built with cc (Ubuntu 13.2.0-23ubuntu4) 13.2.0 for x86_64-linux-gnu
llama_model_loader: loaded meta data with 29 key-value pairs and 291 tensors from models/llama-3-8b-instruct.Q4_K_M.gguf (version GGUF V3 (latest))
llm_load_tensors: ggml ctx size =    0.15 MiB
llama_new_context_with_model: n_ctx      = 8192
main: interactive mode on.
sampling:
	repeat_last_n = 64, repeat_penalty = 1.000, frequency_penalty = 0.000, presence_penalty = 0.000
generate: n_ctx = 8192, n_batch = 2048, n_predict = -1, n_keep = 1

== Running in interactive mode. ==
 - Press Ctrl+C to interject at any time.
 - Press Return to return control to the AI.

> Write a program that calls curl
Here is a small program. We can also do error handling: if curl is not found, print an error.

fn main() {
    eprintln!(\"curl exited with error\");
";
    let rep = triage_text(session);
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
    let failed = format!("{session}}}\n\n**main : failed to eval**\n");
    let (class, line, rule) = found(&failed);
    assert_eq!((class, line), (Class::Engine, 22), "{rule}");
    let old_server = "INFO [                    main] build info | tid=\"140543167610880\" timestamp=1751427934 build=3776 commit=\"c6c23fa4\"
INFO [                    main] system info | tid=\"140543167610880\" timestamp=1751427934 n_threads=24 n_threads_batch=-1 total_threads=16 system_info=\"AVX = 1 | AVX2 = 1 | \"
Floating point exception (core dumped)
";
    let (class, line, rule) = found(old_server);
    assert_eq!((class, line), (Class::Engine, 3), "{rule}");
}

/// nest_asyncio (imported by SGLang's early frontend and by outlines) cannot patch uvloop's
/// loop: two packages of the environment that do not work together, not the structured-output
/// feature's failure, even when outlines' frames are on the traceback.
#[test]
fn nest_asyncio_against_uvloop_is_the_environment() {
    let log = "Traceback (most recent call last):
  File \"/venv/lib/python3.11/site-packages/sglang/srt/constrained/__init__.py\", line 8, in <module>
    from outlines.fsm.guide import RegexGuide
  File \"/venv/lib/python3.11/site-packages/outlines/__init__.py\", line 3, in <module>
    import outlines.generate
  File \"/venv/lib/python3.11/site-packages/nest_asyncio.py\", line 193, in _patch_loop
    raise ValueError('Can\\'t patch loop of type %s' % type(loop))
ValueError: Can't patch loop of type <class 'uvloop.Loop'>
";
    let (class, line, rule) = found(log);
    assert_eq!((class, line), (Class::Dependency, 8), "{rule}");
}

/// A quote cut inside a traceback, before its exception line: the `assert` (or `raise`) that
/// the innermost frame shows is what failed, and the frames name its layer.
#[test]
fn a_traceback_cut_before_its_exception_names_its_failing_statement() {
    let log = "ERROR 11-12 08:01:02 engine.py:366] Traceback (most recent call last):
  File \"/opt/vllm/lib64/python3.12/site-packages/vllm/worker/enc_dec_model_runner.py\", line 341, in profile_run
    self.execute_model(model_input, kv_caches, intermediate_tensors)
  File \"/opt/vllm/lib64/python3.12/site-packages/vllm/worker/enc_dec_model_runner.py\", line 182, in execute_model
    hidden_or_intermediate_states = model_executable(
                                    ^^^^^^^^^^^^^^^^^
  File \"/opt/vllm/lib64/python3.12/site-packages/vllm/model_executor/models/mllama.py\", line 1392, in forward
    assert actual_len >= last_group_len
";
    let (class, line, rule) = found(log);
    assert_eq!((class, line), (Class::Engine, 8), "{rule}");
    // The same frames with a call as the innermost source line name nothing that failed.
    let call = log.replace("assert actual_len >= last_group_len", "x = self.vision(x)");
    assert_ne!(
        triage_text(&call).primary.map(|p| p.line),
        Some(8),
        "a call is no failing statement"
    );
}

/// SGLang's warm-up thread asks its own port. An answer that is not JSON, or a gateway status
/// with an empty body, came from a proxy (http_proxy) that took the local request: the
/// deployment's environment. The server's own error (a 500 with its JSON) is not that.
#[test]
fn a_warmup_answered_by_a_proxy_is_the_environment() {
    let head = "[2024-12-13 01:45:02] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2024-12-13 01:47:34] Initialization failed. warmup error: Traceback (most recent call last):
  File \"/sgl/python/sglang/srt/server.py\", line 621, in _wait_and_warmup
";
    let gateway = format!(
        "{head}    assert res.status_code == 200, f\"{{res=}}, {{res.text=}}\"
AssertionError: res=<Response [502]>, res.text=''
Killed
"
    );
    assert_eq!(
        found(&gateway),
        (Class::Config, 5, "config-warmup-proxy".into())
    );
    let not_json = format!(
        "{head}    model_info = res.json()
  File \"/venv/lib/python3.10/site-packages/requests/models.py\", line 978, in json
    raise RequestsJSONDecodeError(e.msg, e.doc, e.pos)
requests.exceptions.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
"
    );
    assert_eq!(
        found(&not_json),
        (Class::Config, 7, "config-warmup-proxy".into())
    );
    // The server's own 500 is its engine's failure, not a proxy's.
    let own = gateway.replace(
        "[502]>, res.text=''",
        "[500]>, res.text='{\"error\": \"x\"}'",
    );
    assert_ne!(found(&own).2, "config-warmup-proxy");
}

/// Loading a LoRA adapter that is not where the server looks (a hub id given as a path): the
/// adapter is the deployment's input, even when the engine loop reports it as its own death.
#[test]
fn a_lora_adapter_that_does_not_load_is_the_deployments_input() {
    let log = "ERROR 05-01 08:45:12 async_llm_engine.py:43] Engine background task failed
ERROR 05-01 08:45:12 async_llm_engine.py:43] Traceback (most recent call last):
ERROR 05-01 08:45:12 async_llm_engine.py:43]   File \"/usr/local/lib/python3.10/dist-packages/vllm/worker/model_runner.py\", line 940, in set_active_loras
ERROR 05-01 08:45:12 async_llm_engine.py:43]     self.lora_manager.set_active_loras(lora_requests, lora_mapping)
ERROR 05-01 08:45:12 async_llm_engine.py:43]   File \"/usr/local/lib/python3.10/dist-packages/vllm/lora/worker_manager.py\", line 161, in _load_lora
ERROR 05-01 08:45:12 async_llm_engine.py:43]     raise RuntimeError(
ERROR 05-01 08:45:12 async_llm_engine.py:43] RuntimeError: Loading lora my-org/my-adapter failed
";
    assert_eq!(found(log), (Class::Config, 7, "frames-lora-load".into()));
    // The LoRA kernels are the engine's own side.
    let kernel = log.replace(
        "vllm/lora/worker_manager.py\", line 161, in _load_lora",
        "vllm/lora/punica.py\", line 161, in add_lora",
    );
    assert_eq!(found(&kernel).0, Class::Engine);
}

/// vLLM V0's worker states the exception's message on the traceback's header line
/// (`Exception in worker X while processing method M: <message>, Traceback (most recent call
/// last):`): that line is the first statement of the cause, and the cause of a quote cut off
/// before the exception line. SGLang's `Scheduler hit an exception: Traceback ...` states none.
#[test]
fn a_traceback_header_that_states_the_message_is_the_first_cause_line() {
    let whole = "(VllmWorkerProcess pid=305) INFO 01-19 03:55:20 multiproc_worker_utils.py:215] Worker ready; awaiting tasks
(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233] Exception in worker VllmWorkerProcess while processing method init_device: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method, Traceback (most recent call last):
(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233]   File \"/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py\", line 166, in init_device
(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233]     torch.cuda.set_device(self.device)
(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233]   File \"/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py\", line 305, in _lazy_init
(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233]     raise RuntimeError(
(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233] RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method
";
    assert_eq!(found(whole).1, 2, "the header states it first");
    let cut: String = whole.lines().take(4).map(|l| format!("{l}\n")).collect();
    assert_eq!(found(&cut).1, 2, "a quote cut before the exception line");
    let sglang = "[2025-03-03 06:49:20 TP5] TypeError: '>' not supported between instances of 'NoneType' and 'int'
[2025-03-03 06:49:28 TP5] Scheduler hit an exception: Traceback (most recent call last):
  File \"/sgl/python/sglang/srt/managers/scheduler.py\", line 1796, in run_scheduler_process
    scheduler.event_loop_overlap()
";
    assert_eq!(found(sglang).1, 1, "SGLang's header states no message");
}

/// A quote whose paste doubled every line (a blank line between the frames) or that ends in a
/// blank line is still one traceback; the blank lines between the blocks of faulthandler's dump
/// do not make what follows it (`Extension modules: ...`) part of a traceback.
#[test]
fn blank_lines_in_a_quoted_traceback_and_after_a_faulthandler_dump() {
    let doubled = "  File \"/opt/vllm/lib64/python3.12/site-packages/vllm/model_executor/models/mllama.py\", line 1392, in forward

    assert actual_len >= last_group_len

";
    assert_eq!(
        found(doubled),
        (Class::Engine, 3, "python-exception".into())
    );
    let gloo = "[2026-01-07 02:33:41] INFO:     10.0.0.1:60548 - \"POST /generate HTTP/1.1\" 200 OK
terminate called after throwing an instance of 'gloo::EnforceNotMet'
  what():  [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] op.preamble.length <= op.nbytes. 4 vs 3
Fatal Python error: Aborted

Thread 0x0000fff747fff120 (most recent call first):
  File \"/usr/local/lib/python3.11/site-packages/sglang/srt/disaggregation/mooncake/conn.py\", line 923 in heartbeat_checker
  File \"/usr/local/lib/python3.11/threading.py\", line 982 in run

Extension modules: numpy._core._multiarray_umath, zmq.backend.cython._zmq (total: 2)
";
    assert_eq!(found(gloo), (Class::Nccl, 3, "nccl-gloo".into()));
}
