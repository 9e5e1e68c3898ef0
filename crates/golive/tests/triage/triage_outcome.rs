//! Outcome first (issue 26): an error a process went on after is survived and never the
//! primary while a failure it did not get past exists; a log whose server came up and served,
//! then stopped in order or still runs, is healthy whatever it survived.
//!
//! - Each engine's serving marker: a healthy log with an ERROR line before serving is quiet,
//!   and lists that error as survived; the same log with a real fatal error after the
//!   progress is found, at the fatal line.
//! - Every rule that can quiet a line (benign, serving, progress, shutdown, startup): each of
//!   its literals beside a real fatal error, which is still found.

use golive::triage::{analyze_text, Class, TriageReport};
use golive::triage::{Ended, Reached};
use golive::triage::{RuleKind, RuleSet};

fn triage(text: &str) -> TriageReport {
    analyze_text(RuleSet::builtin(), "log", text)
}

fn log<S: AsRef<str>>(lines: &[S]) -> String {
    let mut s = lines
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join("\n");
    s.push('\n');
    s
}

/// 1-based line of the first line holding `needle`.
fn line_of(text: &str, needle: &str) -> u64 {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle} not in the log")) as u64
        + 1
}

/// A fatal error no process gets past: the GPU faulted.
const FATAL: &str = "CUDA error: an illegal memory access was encountered";

/// One engine's healthy log: an error line, then loading progress, then serving (and maybe a
/// stop); `fatal`: the line a crash after the progress would print.
struct Engine {
    name: &'static str,
    survived_error: &'static str,
    progress: &'static str,
    serving: &'static [&'static str],
    fatal: &'static str,
}

const ENGINES: &[Engine] = &[
    Engine {
        name: "vLLM V1 (API server and engine core)",
        survived_error: "(EngineCore_DP0 pid=2) ERROR 12-01 10:00:02 [cuda.py:300] Cannot use FlashAttention backend because the head size 80 is not supported; falling back",
        progress: "(EngineCore_DP0 pid=2) INFO 12-01 10:00:10 [gpu_model_runner.py:2000] Model loading took 15.2 GiB and 4.5 seconds",
        serving: &[
            "(APIServer pid=1) INFO:     Application startup complete.",
            "(APIServer pid=1) INFO:     127.0.0.1:40000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
            "(APIServer pid=1) INFO:     Shutting down",
        ],
        fatal: "(EngineCore_DP0 pid=2) ERROR 12-01 10:00:12 [core.py:700] RuntimeError: CUDA error: an illegal memory access was encountered",
    },
    Engine {
        name: "vLLM V0 (one process, no labels)",
        survived_error: "ERROR 12-01 10:00:01 [registry.py:300] Error in loading optional module flash_attn: No module named 'flash_attn'",
        progress: "INFO 12-01 10:00:10 [model_runner.py:1000] Loading model weights took 14.99 GB",
        serving: &[
            "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
            "INFO:     10.0.0.9:51000 - \"POST /v1/completions HTTP/1.1\" 200 OK",
        ],
        fatal: "ERROR 12-01 10:00:12 [engine.py:150] RuntimeError: CUDA error: an illegal memory access was encountered",
    },
    Engine {
        name: "vLLM offline LLM (a script)",
        survived_error: "ERROR 10-20 10:00:14 [fa_utils.py:57] Cannot use FA version 2 is not supported due to FA2 is only supported on devices with compute capability >= 8",
        progress: "INFO 10-20 10:00:21 [gpu_model_runner.py:2653] Model loading took 1.0662 GiB and 3.1 seconds",
        serving: &[
            "Processed prompts: 100%|██████████| 4/4 [00:00<00:00, 20.1it/s, est. speed input: 201.3 toks/s, output: 0.00 toks/s]",
        ],
        fatal: "ERROR 10-20 10:00:22 [core.py:700] RuntimeError: CUDA error: an illegal memory access was encountered",
    },
    Engine {
        name: "SGLang",
        survived_error: "[2025-12-01 10:00:01 TP0] Failed to import flashinfer: ModuleNotFoundError: No module named 'flashinfer'",
        progress: "[2025-12-01 10:00:05 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB, mem usage=15.00 GB.",
        serving: &[
            "[2025-12-01 10:00:10] The server is fired up and ready to roll!",
            "[2025-12-01 10:00:20] INFO:     127.0.0.1:5000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
        ],
        fatal: "[2025-12-01 10:00:06 TP0] RuntimeError: CUDA error: an illegal memory access was encountered",
    },
    Engine {
        name: "llama.cpp",
        survived_error: "warning: failed to mlock 73728000-byte buffer (after previously locking 0 bytes): Cannot allocate memory\nTry increasing RLIMIT_MEMLOCK ('ulimit -l' as root).",
        progress: "load_tensors: offloaded 33/33 layers to GPU",
        serving: &[
            "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
            "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200",
        ],
        fatal: "/app/ggml/src/ggml-cuda/ggml-cuda.cu:75: CUDA error: an illegal memory access was encountered",
    },
    // The older server (2024, and forks such as ik_llama.cpp): its access line alone says it
    // served.
    Engine {
        name: "llama.cpp, older server",
        survived_error: "warning: failed to mlock 73728000-byte buffer (after previously locking 0 bytes): Cannot allocate memory\nTry increasing RLIMIT_MEMLOCK ('ulimit -l' as root).",
        progress: "llama_new_context_with_model: KV self size  = 1952.00 MiB",
        serving: &[
            "INFO [      log_server_request] request | tid=\"1374\" timestamp=1741937581 remote_addr=\"10.0.0.89\" remote_port=56664 status=200 method=\"POST\" path=\"/v1/chat/completions\" params={}",
        ],
        fatal: "/app/ggml/src/ggml-cuda/ggml-cuda.cu:75: CUDA error: an illegal memory access was encountered",
    },
    Engine {
        name: "TGI",
        survived_error: "2025-12-01T10:00:01.000000Z ERROR text_generation_launcher: Could not import Flash Attention enabled models: No module named 'flash_attn_2_cuda'",
        progress: "2025-12-01T10:00:05.000000Z  INFO shard-manager: text_generation_launcher: Shard ready in 10.5s rank=0",
        serving: &[
            "2025-12-01T10:00:06.000000Z  INFO text_generation_router::server: router/src/server.rs:2000: Connected",
        ],
        fatal: "2025-12-01T10:00:07.000000Z ERROR text_generation_launcher: RuntimeError: CUDA error: an illegal memory access was encountered",
    },
];

#[test]
fn each_engines_healthy_log_with_an_error_before_serving_is_quiet() {
    for e in ENGINES {
        let mut lines = vec![e.survived_error, e.progress];
        lines.extend_from_slice(e.serving);
        let text = log(&lines);
        let r = triage(&text);
        assert!(r.primary.is_none(), "{}: {:#?}", e.name, r.primary);
        // The error was noticed (a test of nothing otherwise), and survived.
        let progress_line = line_of(&text, e.progress);
        assert!(
            r.survived.iter().any(|s| s.line < progress_line),
            "{}: the error before serving is not among the survived: {:#?}",
            e.name,
            r.survived
        );
        assert!(
            r.outcome
                .iter()
                .all(|o| o.reached == Reached::Serving && o.ended != Ended::Crash),
            "{}: {:#?}",
            e.name,
            r.outcome
        );
    }
}

#[test]
fn each_engines_fatal_error_after_its_progress_is_the_cause_not_the_survived_one() {
    for e in ENGINES {
        let text = log(&[e.survived_error, e.progress, e.fatal]);
        let r = triage(&text);
        let p = r
            .primary
            .unwrap_or_else(|| panic!("{}: nothing found", e.name));
        assert_eq!(
            (p.class, p.line),
            (Class::GpuFault, line_of(&text, FATAL)),
            "{}: {p:#?}",
            e.name
        );
        assert!(
            r.outcome.iter().any(|o| o.ended == Ended::Crash),
            "{}: {:#?}",
            e.name,
            r.outcome
        );
    }
}

#[test]
fn an_engine_error_is_not_survived_by_its_api_server_answering_requests() {
    // vLLM V1: the engine core failed to wake; the API server still answers a request 2xx
    // (and control calls), but no tokens were generated after the failure.
    let text = log(&[
        "(APIServer pid=1) INFO:     Application startup complete.",
        "(APIServer pid=1) INFO 12-01 10:00:01 [loggers.py:271] Engine 000: Avg prompt throughput: 3.0 tokens/s, Avg generation throughput: 40.9 tokens/s, Running: 1 reqs",
        "(EngineCore_DP0 pid=2) ERROR 12-01 10:00:02 [core.py:1365] RuntimeError: CUDA error: an illegal memory access was encountered",
        "(APIServer pid=1) INFO:     127.0.0.1:40000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
        "(APIServer pid=1) INFO:     127.0.0.1:40000 - \"POST /sleep HTTP/1.1\" 200 OK",
        "(APIServer pid=1) INFO 12-01 10:00:11 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs",
    ]);
    let p = triage(&text)
        .primary
        .expect("the engine's failure is found");
    assert_eq!((p.class, p.line), (Class::GpuFault, 3));
    // The same error followed by tokens generated was survived.
    let later = format!(
        "{text}(APIServer pid=1) INFO 12-01 10:00:21 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.5 tokens/s, Running: 1 reqs\n"
    );
    let r = triage(&later);
    assert!(r.primary.is_none(), "{:#?}", r.primary);
    assert!(r.survived.iter().any(|s| s.line == 3));
}

#[test]
fn a_tool_parser_failure_is_never_survived_by_the_request_it_answered() {
    let text = log(&[
        "INFO:     Application startup complete.",
        "ERROR 11-30 11:00:02 [hermes_tool_parser.py:110] Error in extracting tool call from response.",
        "INFO:     127.0.0.1:51000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
    ]);
    let p = triage(&text).primary.expect("tool parser failure found");
    assert_eq!((p.class, p.line), (Class::ToolParser, 2));
}

#[test]
fn a_crash_loop_is_judged_by_its_last_occurrence() {
    // The same startup failure three times, loading progress between the attempts: the last
    // attempt was not got past.
    let attempt = [
        "INFO 12-01 10:00:00 [model_runner.py:1000] Loading model weights took 14.99 GB",
        "ERROR 12-01 10:00:01 [engine.py:150] RuntimeError: CUDA error: an illegal memory access was encountered",
    ];
    let lines: Vec<&str> = attempt.iter().copied().cycle().take(6).collect();
    let r = triage(&log(&lines));
    let p = r.primary.expect("found");
    assert_eq!((p.class, p.line, p.count), (Class::GpuFault, 2, 3));
}

/// A line holding `literal` that the rule of that kind reads as such (benign lines are errors
/// the server answers; the others are INFO lines), for the rules whose regex needs more than
/// the literal.
fn quieting_line(id: &str, kind: RuleKind, literal: &str) -> String {
    let body = match id {
        "shutdown-begins" if literal == "Shutting down" => "Shutting down".to_string(),
        "serving-llama-cpp-request" => {
            format!("srv  {literal} POST /v1/chat/completions 127.0.0.1 200")
        }
        "serving-tgi" => format!("router/src/server.rs:2000: {literal} Connected"),
        "benign-model-not-served" => "The model `x` does not exist.".to_string(),
        "benign-vllm-client-error" => format!("vllm.exceptions.{literal}bad request"),
        _ => literal.to_string(),
    };
    match kind {
        RuleKind::Benign => format!("ERROR 12-01 10:00:01 [serving.py:100] {body}"),
        _ if id == "shutdown-begins" && literal == "Shutting down" => format!("INFO:     {body}"),
        _ => format!("INFO 12-01 10:00:01 [x.py:1] {body}"),
    }
}

#[test]
fn a_fatal_error_beside_any_quieting_rule_is_still_found() {
    let rules = RuleSet::builtin();
    let fatal = format!("ERROR 12-01 10:00:05 [core.py:700] RuntimeError: {FATAL}");
    let mut checked = 0;
    for r in &rules.rules {
        let quiets = matches!(
            r.kind,
            RuleKind::Benign
                | RuleKind::Serving
                | RuleKind::Progress
                | RuleKind::Shutdown
                | RuleKind::Startup
        );
        if !quiets {
            continue;
        }
        for lit in rules.literals_of(r) {
            let quiet = quieting_line(&r.id, r.kind, &lit);
            // Before the fatal error, and (benign lines only: progress after an error is
            // what survival means) after it.
            let mut orders = vec![log(&[&quiet, &fatal])];
            if r.kind == RuleKind::Benign {
                orders.push(log(&[&fatal, &quiet]));
            }
            for text in orders {
                let report = analyze_text(rules, "log", &text);
                let p = report.primary.unwrap_or_else(|| {
                    panic!("{} {lit:?}: the fatal error is lost:\n{text}", r.id)
                });
                assert_eq!(
                    (p.class, p.line),
                    (Class::GpuFault, line_of(&text, FATAL)),
                    "{} {lit:?}:\n{text}",
                    r.id
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 60, "only {checked} quieting literals checked");
}

/// Messages that say who is to blame name the class of what they blame; native aborts and
/// llama.cpp's argument errors are causes at their own line.
#[test]
fn messages_that_name_the_blame_give_its_class() {
    let cases: &[(&str, Class, &str)] = &[
        (
            "ERROR 12-01 10:00:01 [core.py:700] AssertionError: Error in memory profiling. Initial free memory 70.1 GiB, current free memory 75.3 GiB. This happens when other processes sharing the same container release GPU memory while vLLM is profiling during initialization.",
            Class::OomStartup,
            "oom-other-process",
        ),
        (
            "ninja: build stopped: subcommand failed.",
            Class::Dependency,
            "dep-jit-build",
        ),
        (
            "(EngineCore pid=173) ERROR 06-11 18:49:33 [core.py:1199] torch._inductor.exc.InductorError: RuntimeError: Failed to run autotuning code block: CUDA driver error: operation not permitted",
            Class::Dependency,
            "dep-inductor",
        ),
        (
            "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
            Class::Dependency,
            "dep-inductor",
        ),
        // A cause the compiler's error wraps keeps its own class.
        (
            "(EngineCore pid=173) ERROR 06-11 18:49:33 [core.py:1199] torch._inductor.exc.InductorError: OSError: [Errno 28] No space left on device",
            Class::Config,
            "config-disk-full",
        ),
        (
            "(EngineCore pid=293) ERROR 08-14 08:00:06 [core.py:1330] RuntimeError: cutlass_gemm_caller, /workspace/csrc/libtorch_stable/quantization/w8a8/cutlass/c3x/cutlass_gemm_caller.cuh:62, Error Internal",
            Class::Dependency,
            "dep-kernel-unsupported",
        ),
        (
            "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 106496, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.",
            Class::Dependency,
            "dep-kernel-unsupported",
        ),
        (
            "(RayWorkerWrapper pid=2395) ERROR 04-25 06:14:36 [ray_utils.py:87] RuntimeError: Assertion error (/workspace/vllm-src/.deps/deepgemm-src/csrc/apis/../jit_kernels/impls/../heuristics/../../utils/layout.hpp:76): Unknown recipe",
            Class::Dependency,
            "dep-kernel-unsupported",
        ),
        (
            "(EngineCore pid=125) ERROR 06-10 07:31:04 [core.py:1199] ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=256, dtype=torch.bfloat16, kv_cache_dtype=nvfp4, block_size=None, use_mla=False). Reasons: {FLASH_ATTN: [kv_cache_dtype not supported]}",
            Class::Config,
            "config-no-valid-backend",
        ),
        (
            "INFO 12-01 10:00:01 [__init__.py:250] No platform detected, vLLM is running on UnspecifiedPlatform",
            Class::Container,
            "container-no-platform",
        ),
        (
            "/app/src/llama-graph.cpp:185: GGML_ASSERT(seq_id < n_tokens) failed",
            Class::Engine,
            "native-abort",
        ),
        // GGML_ABORT's own message, capitalised as the code wrote it.
        (
            "/home/u/ik_llama.cpp/src/llama.cpp:18430: Deepseek2 does not support K-shift",
            Class::Engine,
            "native-abort",
        ),
        (
            "error while handling argument \"--flash-attn\": error: unknown value for --flash-attn: '--parallel'",
            Class::Config,
            "config-llamacpp-argument",
        ),
        (
            "ERROR 12-01 10:00:01 [core.py:700] RuntimeError: CUDA error: invalid device ordinal",
            Class::Config,
            "config-device-ordinal",
        ),
        (
            "0.00.321.514 E srv         start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080",
            Class::Config,
            "config-port-in-use",
        ),
        (
            "ollama : Error: listen tcp 127.0.0.1:11434: bind: Only one usage of each socket address (protocol/network ",
            Class::Config,
            "config-port-in-use",
        ),
        (
            "        The error from device(chipId:2, dieId:0), serial number is 6, there is an exception of aicore error, core id is 4, error code = 0x800000",
            Class::GpuFault,
            "gpu-fault-kernel",
        ),
        (
            "E LLama-android: llama_model_load: error loading model: vk::Device::createComputePipeline: ErrorUnknown",
            Class::Driver,
            "driver-vulkan-call",
        ),
        (
            "OSError: [Errno 122] Disk quota exceeded: '/home/u/.cache/vllm/torch_compile_cache/x.json'",
            Class::Config,
            "config-disk-full",
        ),
    ];
    for (line, class, rule) in cases {
        let text = log(&[
            "INFO 12-01 10:00:00 [api_server.py:1] vLLM API server version 0.11.0",
            line,
        ]);
        let p = triage(&text)
            .primary
            .unwrap_or_else(|| panic!("{rule}: nothing found"));
        assert_eq!(
            (p.class, p.line, p.rule.as_str()),
            (*class, 2, *rule),
            "{line}"
        );
    }
}

/// uvicorn's traceback of one request that raised (`Exception in ASGI application`, frames
/// through `run_asgi`), ending with `exc`.
fn asgi_request(exc: &str) -> Vec<String> {
    let mut v = vec![
        "ERROR:    Exception in ASGI application".to_string(),
        "Traceback (most recent call last):".to_string(),
        "  File \"/usr/lib/python3/dist-packages/uvicorn/protocols/http/httptools_impl.py\", line 409, in run_asgi".to_string(),
        "    result = await app(self.scope, self.receive, self.send)".to_string(),
        "  File \"/usr/lib/python3/dist-packages/vllm/multimodal/video.py\", line 136, in load_bytes".to_string(),
        "    assert i == num_frames".to_string(),
    ];
    v.push(exc.to_string());
    v.push("INFO:     10.0.0.1:20037 - \"POST /v1/chat/completions HTTP/1.1\" 500 Internal Server Error".to_string());
    v
}

/// The engine core's fatal error appended to `lines` (a request's failure before it) is the
/// primary, at its own line.
fn a_fatal_error_after_them_is_found(mut lines: Vec<String>) {
    lines.push(format!(
        "ERROR 12-01 10:00:12 [core.py:700] RuntimeError: {FATAL}"
    ));
    let failed = log(&lines);
    let p = triage(&failed)
        .primary
        .expect("the fatal error after the request");
    assert_eq!(
        (p.class, p.line),
        (Class::GpuFault, line_of(&failed, FATAL))
    );
}

#[test]
fn a_request_that_raised_is_survived_and_a_fatal_error_after_it_is_still_found() {
    let exc = "AssertionError: Expected reading 32 frames, but only loaded 17 frames from video.";
    let mut lines = vec!["INFO:     Application startup complete.".to_string()];
    lines.extend(asgi_request(exc));
    let healthy = log(&lines);
    let r = triage(&healthy);
    assert!(r.primary.is_none(), "{:?}", r.primary);
    assert!(
        r.survived
            .iter()
            .any(|s| s.text.contains("Expected reading 32 frames")),
        "{:?}",
        r.survived
    );
    a_fatal_error_after_them_is_found(lines);
}

/// A request's exception whose message goes on over more lines (pydantic's `1 validation error
/// for ChatCompletionResponseChoice`, the field, `  Input should be ...`): those lines state the
/// same request's failure, not a configuration check that stopped the server. A fatal error
/// after them is still found.
#[test]
fn the_lines_that_go_on_stating_a_requests_exception_failed_that_request_only() {
    let mut lines = vec!["INFO:     Application startup complete.".to_string()];
    let mut request = asgi_request(
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ChatCompletionResponseChoice",
    );
    let answered = request.pop().unwrap();
    request.extend([
        "finish_reason".to_string(),
        "  Input should be 'stop', 'length', 'tool_calls', 'content_filter' or 'function_call' [type=literal_error, input_value='abort', input_type=str]".to_string(),
        "    For further information visit https://errors.pydantic.dev/2.9/v/literal_error".to_string(),
        answered,
    ]);
    lines.extend(request);
    // The log ends there, the server still running: nothing after the request says it went
    // on, so only the request's scope keeps the lines from being the server's end.
    let healthy = log(&lines);
    let r = triage(&healthy);
    assert!(r.primary.is_none(), "{:#?}", r.primary);
    // The same lines at startup state a check of the engine's arguments: the cause.
    let startup = log(&[
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
        "  Value error, invalid quantization method 'awq_marlinn' [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
    ]);
    let p = triage(&startup).primary.expect("the check that failed");
    assert_eq!((p.class, p.line), (Class::Config, 2), "{p:#?}");
    a_fatal_error_after_them_is_found(lines);
}

/// vLLM's OpenAI handler catches a request's exception, logs its summary and traceback at
/// ERROR (outermost frame: `serving_chat.py`) and answers 400: the request failed, the server
/// went on. The same handler's traceback followed by the engine core's fatal error is still
/// found at the fatal line.
#[test]
fn a_request_the_handler_caught_and_answered_is_survived_with_its_summary_line() {
    let api = "(APIServer pid=11) ERROR 10-01 22:33:23 [serving_chat.py:251]";
    let mut lines = vec![
        "(APIServer pid=11) INFO:     Application startup complete.".to_string(),
        format!("{api} Error in preprocessing prompt inputs"),
        format!("{api} Traceback (most recent call last):"),
        format!("{api}   File \"/venv/lib/python3.12/site-packages/vllm/entrypoints/openai/serving_chat.py\", line 227, in create_chat_completion"),
        format!("{api}     ) = await self._preprocess_chat("),
        format!("{api}   File \"/venv/lib/python3.12/site-packages/vllm/multimodal/registry.py\", line 295, in create_processor"),
        format!("{api}     raise ValueError(f\"{{model_config.model}} is not a multimodal model\")"),
        format!("{api} ValueError: /models/llava-v1.5-13B-AWQ is not a multimodal model"),
        "(APIServer pid=11) INFO:     127.0.0.1:47136 - \"POST /v1/chat/completions HTTP/1.1\" 400 Bad Request".to_string(),
    ];
    let mut healthy = lines.clone();
    healthy.push("(APIServer pid=11) INFO:     Application shutdown complete.".to_string());
    let healthy = log(&healthy.iter().map(String::as_str).collect::<Vec<_>>());
    let r = triage(&healthy);
    assert!(r.primary.is_none(), "{:?}", r.primary);
    assert!(
        r.survived
            .iter()
            .any(|s| s.text.contains("is not a multimodal model")),
        "{:?}",
        r.survived
    );
    lines.push(format!(
        "(EngineCore_DP0 pid=12) ERROR 10-01 22:34:00 [core.py:700] RuntimeError: {FATAL}"
    ));
    let failed = log(&lines);
    let p = triage(&failed)
        .primary
        .expect("the engine core's fatal error");
    assert_eq!(
        (p.class, p.line),
        (Class::GpuFault, line_of(&failed, FATAL))
    );
}

/// vLLM's throughput line averages its last interval: after the engine died within it, the
/// line still shows tokens but no request running, and is no sign the engine went on. A line
/// with requests running is.
#[test]
fn a_throughput_line_with_nothing_running_does_not_excuse_an_earlier_crash() {
    let stats = |running: u32| {
        format!("(APIServer pid=11) INFO 11-01 12:31:42 [loggers.py:208] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 100.2 tokens/s, Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%")
    };
    let crash = "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:402: masked_scatter_size_check: block: [0,0,0], thread: [0,0,0] Assertion `totalElements <= srcSize` failed.";
    for (running, found) in [(0, true), (3, false)] {
        let lines = [
            "(APIServer pid=11) INFO:     Application startup complete.".to_string(),
            "(APIServer pid=11) INFO:     1.2.3.4:5 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK".to_string(),
            crash.to_string(),
            stats(running),
            "(APIServer pid=11) INFO:     Shutting down".to_string(),
        ];
        let text = log(&lines);
        let p = triage(&text).primary;
        assert_eq!(
            p.as_ref().map(|p| (p.class, p.line)),
            found.then_some((Class::Engine, 3)),
            "running {running}: {p:?}"
        );
    }
}

/// A traceback of vLLM's engine core through `frames` (file below vllm/, function), ending
/// with `exc`.
fn engine_traceback(frames: &[(&str, &str)], exc: &str) -> String {
    let p = "(EngineCore_DP0 pid=2) ERROR 12-01 10:00:09 [core.py:1007]";
    let mut v = vec![format!("{p} Traceback (most recent call last):")];
    for (file, func) in frames {
        v.push(format!(
            "{p}   File \"/usr/lib/python3/dist-packages/vllm/{file}\", line 10, in {func}"
        ));
        v.push(format!("{p}     return f()"));
    }
    v.push(format!("{p} {exc}"));
    log(&v.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn a_value_error_while_running_requests_is_the_engines_and_at_startup_a_refusal() {
    let exc = "ValueError: max() arg is an empty sequence";
    let serving = engine_traceback(
        &[
            ("v1/engine/core.py", "step"),
            ("v1/worker/gpu_model_runner.py", "execute_model"),
        ],
        exc,
    );
    let p = triage(&serving).primary.expect("the engine's ValueError");
    assert_eq!(
        (p.class, p.rule.as_str()),
        (Class::Engine, "config-engine-value-error")
    );
    assert!(p.why.contains("ran requests"), "{}", p.why);
    let startup = engine_traceback(
        &[
            ("v1/engine/core.py", "__init__"),
            ("v1/worker/gpu_model_runner.py", "load_model"),
        ],
        exc,
    );
    let p = triage(&startup).primary.expect("the refusal at startup");
    assert_eq!(
        (p.class, p.rule.as_str()),
        (Class::Config, "config-engine-value-error")
    );
}

#[test]
fn an_error_loading_the_tokenizer_files_is_config_and_a_known_message_keeps_its_class() {
    let p = "(EngineCore_DP0 pid=2) ERROR 12-01 10:00:09 [core.py:1007]";
    let text = |exc: &str| {
        log(&[
            &format!("{p} Traceback (most recent call last):"),
            &format!("{p}   File \"/usr/lib/python3/dist-packages/vllm/v1/engine/core.py\", line 10, in __init__"),
            &format!("{p}     self.tokenizer = get_tokenizer()"),
            &format!("{p}   File \"/usr/lib/python3/dist-packages/vllm/tokenizers/hf.py\", line 79, in from_pretrained"),
            &format!("{p}     tokenizer = AutoTokenizer.from_pretrained("),
            &format!("{p}   File \"/usr/lib/python3/dist-packages/sentencepiece/__init__.py\", line 316, in LoadFromFile"),
            &format!("{p}     return _sentencepiece.SentencePieceProcessor_LoadFromFile(self, arg)"),
            &format!("{p} {exc}"),
        ])
    };
    let f = triage(&text("TypeError: not a string"))
        .primary
        .expect("tokenizer error");
    assert_eq!(
        (f.class, f.rule.as_str()),
        (Class::Config, "frames-tokenizer-files")
    );
    let f = triage(&text(
        "AttributeError: Qwen2Tokenizer has no attribute all_special_tokens_extended",
    ))
    .primary
    .expect("attribute error");
    assert_eq!(f.class, Class::Dependency);
}

#[test]
fn an_error_line_before_an_uncaught_exception_of_another_class_was_survived() {
    let probe = "Failed to get device capability: nvcc not found and PyTorch is not built with CUDA support. Could not determine CUDA version..";
    let exc = "ValueError: Quantization method specified in the model config (compressed-tensors) does not match the quantization method specified in the `quantization` argument (awq).";
    let text = log(&[
        probe,
        "Traceback (most recent call last):",
        "  File \"/sglang/python/sglang/srt/configs/model_config.py\", line 700, in _verify_quantization",
        "    raise ValueError(",
        exc,
    ]);
    let r = triage(&text);
    let p = r.primary.expect("the exception that ended the process");
    assert_eq!((p.class, p.line), (Class::Config, 5), "{}", p.text);
    assert!(
        r.survived.iter().any(|s| s.line == 1),
        "the probe is listed as survived: {:?}",
        r.survived
    );
    // An exception of the probe's own class does not overtake it: the earliest line of the
    // class that ended the process is the cause.
    let same = log(&[
        probe,
        "Traceback (most recent call last):",
        "  File \"/sglang/python/sglang/srt/layers/attention/flashinfer_backend.py\", line 10, in <module>",
        "    import flashinfer",
        "ModuleNotFoundError: No module named 'flashinfer'",
    ]);
    let p = triage(&same).primary.expect("the dependency");
    assert_eq!((p.class, p.line), (Class::Dependency, 1), "{}", p.text);
    // Alone, the probe line is still found: nothing else ended the process.
    let alone = log(&[probe, "Segmentation fault (core dumped)"]);
    let p = triage(&alone).primary.expect("the probe line");
    assert_eq!(p.line, 1, "{}", p.text);
}

/// Messages that say the engine handles a shortage itself (SGLang retracting requests when the
/// KV pool is full, ggml re-reserving its graph), a device-side assertion (a check in the
/// kernel's code), and Triton's refusal of FP8 on a GPU without it.
#[test]
fn handled_shortages_device_assertions_and_fp8_on_an_older_gpu() {
    let retract = log(&[
        "[2025-02-03 22:20:00] The server is fired up and ready to roll!",
        "[2025-02-03 22:28:08 TP12] Decode out of memory happened. #retracted_reqs: 3, #new_token_ratio: 0.0980 -> 1.0000",
        "[2025-02-03 22:28:09 TP0] Decode batch. #running-req: 12, #token: 5000, token usage: 0.90, gen throughput (token/s): 800.00, #queue-req: 3",
    ]);
    assert!(triage(&retract).primary.is_none());
    let reserve = log(&[
        "ggml_backend_sched_alloc_splits: failed to allocate graph, reserving (backend_ids_changed = 1)",
        "terminate called after throwing an instance of 'std::length_error'",
        "  what():  vector::_M_default_append",
        "Aborted (core dumped)",
    ]);
    let p = triage(&reserve).primary.expect("the C++ exception");
    assert_eq!(p.line, 2, "{p:?}");
    let assertion = log(&[
        "../aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [0,0,0], thread: [0,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && \"index out of bounds\"` failed.",
        "RuntimeError: CUDA error: device-side assert triggered",
    ]);
    let p = triage(&assertion).primary.expect("the assertion");
    assert_eq!((p.class, p.line), (Class::Engine, 1), "{p:?}");
    let fp8 = log(&[
        "triton.compiler.errors.CompilationError: at 1:0:",
        "def _fwd_grouped_kernel_stage1(",
        "^",
        "ValueError(\"type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\")",
    ]);
    let p = triage(&fp8).primary.expect("the FP8 refusal");
    assert_eq!((p.class, p.line), (Class::Config, 4), "{p:?}");
}

/// A parent that reads from a dead child's pipe gets EOF: that reports the child's end, it is
/// not a failure of its own (nor the distributed layer's, whose frames it runs through).
#[test]
fn eof_on_a_dead_childs_pipe_points_back_at_the_childs_crash() {
    let text = log(&[
        "[2025-07-08 06:55:01 DP0 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=100.5 GB, mem usage=40.1 GB.",
        "Capturing batches (bs=448 avail_mem=87.41 GB):   8%| 4/51 [00:20<03:35,  4.59s/it]Fatal Python error: Segmentation fault",
        "",
        "[2025-07-08 06:57:01] DataParallelController hit an exception: Traceback (most recent call last):",
        "  File \"/sgl-workspace/sglang/python/sglang/srt/managers/data_parallel_controller.py\", line 244, in launch_tensor_parallel_group",
        "    scheduler_info.append(scheduler_pipe_readers[i].recv())",
        "  File \"/usr/lib/python3.12/multiprocessing/connection.py\", line 399, in _recv",
        "    raise EOFError",
        "EOFError",
        "[2025-07-08 06:57:01] Received sigquit from a child process. It usually means the child failed.",
    ]);
    let p = triage(&text).primary.expect("the child's crash");
    assert_eq!((p.class, p.line), (Class::Engine, 2), "{p:?}");
}

/// SGLang's launcher kills its whole process tree when a child sends SIGQUIT: a request the
/// HTTP server answers in the same second is one already in flight, not the server getting
/// past the scheduler's error, which is the cause.
#[test]
fn sglang_sigquit_ends_the_server_whatever_answers_follow() {
    let text = log(&[
        "[2025-04-29 09:06:40] INFO:     172.23.0.1:55400 - \"POST /generate HTTP/1.1\" 200 OK",
        "[2025-04-29 09:06:52] Scheduler hit an exception: Traceback (most recent call last):",
        "  File \"/sgl-workspace/sglang/python/sglang/srt/layers/quantization/fp8_utils.py\", line 360, in apply_fp8_linear",
        "    output = torch._scaled_mm(",
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasLtMatmul( ... )`",
        "[2025-04-29 09:06:52] Received sigquit from a child process. It usually means the child failed.",
        "[2025-04-29 09:06:52] INFO:",
        "172.23.0.1:55538 - \"POST /generate HTTP/1.1\" 200 OK",
    ]);
    let p = triage(&text).primary.expect("the scheduler's error");
    assert_eq!((p.class, p.line), (Class::Engine, 5), "{p:?}");
}

/// The outcome counts the requests each process answered and names the signal that stopped
/// it: "APIServer: serving since line 3, 37 requests OK, stopped by SIGTERM at line N". Control
/// calls (`/metrics`) and requests received but not answered are not counted.
#[test]
fn the_outcome_counts_answered_requests_and_names_the_stopping_signal() {
    let mut lines = vec![
        "(EngineCore_DP0 pid=2) INFO 12-01 10:00:10 [gpu_model_runner.py:2000] Model loading took 15.2 GiB and 4.5 seconds".to_string(),
        "(APIServer pid=1) INFO:     Application startup complete.".to_string(),
        "(APIServer pid=1) INFO:     127.0.0.1:40000 - \"GET /metrics HTTP/1.1\" 200 OK".to_string(),
    ];
    for i in 0..37 {
        lines.push(format!(
            "(APIServer pid=1) INFO:     127.0.0.1:{} - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
            40000 + i
        ));
    }
    lines.push(
        "(APIServer pid=1) INFO 12-01 10:05:00 [launcher.py:100] Received SIGTERM, shutting down"
            .to_string(),
    );
    lines.push("(APIServer pid=1) INFO:     Shutting down".to_string());
    let text = lines.join("\n") + "\n";
    let rep = triage(&text);
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
    let api = rep
        .outcome
        .iter()
        .find(|o| o.process == "APIServer")
        .unwrap_or_else(|| panic!("{:?}", rep.outcome));
    assert_eq!(api.requests, 37, "{api:?}");
    assert_eq!(api.ended, Ended::Orderly, "{api:?}");
    assert_eq!(api.stopped_by.as_deref(), Some("SIGTERM"), "{api:?}");
    let mut out = Vec::new();
    golive::triage::write_text(&mut out, &rep).unwrap();
    let said = String::from_utf8(out).unwrap();
    assert!(
        said.contains("37 requests OK, stopped by SIGTERM at line 41"),
        "{said}"
    );
    // The same server crashing instead: no signal is named, the requests still counted.
    let served = lines[..lines.len() - 2].join("\n");
    let crashed = format!(
        "{served}\n(EngineCore_DP0 pid=2) ERROR 12-01 10:05:00 [core.py:700] RuntimeError: {FATAL}\n"
    );
    let rep = triage(&crashed);
    assert!(rep.primary.is_some());
    assert!(
        rep.outcome.iter().all(|o| o.stopped_by.is_none()),
        "{:?}",
        rep.outcome
    );
}

/// llama.cpp's access lines (`log_server_r: request: POST /completion 127.0.0.1 200`) and
/// ollama's (`[GIN] ... | 200 | ... | POST "/api/chat"`) count as
/// requests answered when 2xx and not a control call (its web page `/`, `/health`, `/slots`);
/// a client's own request (`https://huggingface.co:443 "HEAD /x HTTP/1.1" 200`) never does.
#[test]
fn answered_requests_are_counted_for_llama_cpp_and_ollama_and_not_for_control_calls_or_a_clients_requests(
) {
    let mut lines = vec![
        "[2026-02-09 14:38:13] https://huggingface.co:443 \"HEAD /org/model/resolve/main/config.json HTTP/1.1\" 200 0".to_string(),
        "llama_model_loader: loaded meta data with 30 key-value pairs and 291 tensors from model.gguf".to_string(),
        "main: server is listening on http://127.0.0.1:8080 - starting the main loop".to_string(),
        "srv  update_slots: all slots are idle".to_string(),
        "[2026-02-09 14:39:13] https://huggingface.co:443 \"HEAD /org/model/resolve/main/tokenizer.json HTTP/1.1\" 200 0".to_string(),
    ];
    for path in ["/", "/health", "/slots", "/v1/models"] {
        lines.push(format!(
            "srv  log_server_r: request: GET {path} 127.0.0.1 200"
        ));
    }
    for _ in 0..5 {
        lines.push("srv  log_server_r: request: POST /completion 127.0.0.1 200".to_string());
    }
    lines.push("srv  log_server_r: request: POST /completion 127.0.0.1 500".to_string());
    let text = lines.join("\n") + "\n";
    let rep = triage(&text);
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
    let total: u64 = rep.outcome.iter().map(|o| o.requests).sum();
    assert_eq!(total, 5, "{:?}", rep.outcome);

    // ollama's access lines: model calls answered 2xx count, polls of its lists do not.
    let mut lines = vec![
        "time=2026-05-01T00:15:00.000Z level=INFO source=routes.go:1200 msg=\"Listening on 127.0.0.1:11434 (version 0.6.0)\"".to_string(),
    ];
    for (status, request) in [
        (200, "GET      \"/api/tags\""),
        (200, "POST     \"/api/chat\""),
        (200, "GET      \"/api/version\""),
        (200, "POST     \"/api/generate\""),
        (500, "POST     \"/api/chat\""),
        (200, "POST     \"/api/chat\""),
    ] {
        lines.push(format!(
            "[GIN] 2026/05/01 - 00:15:05 | {status} |    1.794252ms |       127.0.0.1 | {request}"
        ));
    }
    let rep = triage(&(lines.join("\n") + "\n"));
    let total: u64 = rep.outcome.iter().map(|o| o.requests).sum();
    assert_eq!(total, 3, "{:?}", rep.outcome);
}

/// vLLM V0 serving, then stopped in order (`Gracefully stopping`, uvicorn's shutdown).
const SERVED_THEN_STOPPED: &[&str] = &[
    "INFO 10-03 02:50:00 api_server.py:440] vLLM API server version 0.5.4",
    "INFO:     Application startup complete.",
    "INFO:     127.0.0.1:60714 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
    "INFO 10-03 02:59:11 launcher.py:45] Gracefully stopping http server",
    "INFO:     Shutting down",
    "INFO:     Waiting for application shutdown.",
];

/// [`SERVED_THEN_STOPPED`], then a traceback ending in `exc` with its innermost frame in `file`.
fn stopped_then(file: &str, exc: &str) -> String {
    let mut lines: Vec<String> = SERVED_THEN_STOPPED.iter().map(|l| l.to_string()).collect();
    lines.extend(traceback(file, exc));
    log(&lines)
}

/// A traceback ending in `exc`, its innermost frame in `file`.
fn traceback(file: &str, exc: &str) -> Vec<String> {
    vec![
        "Traceback (most recent call last):".to_string(),
        format!("  File \"{file}\", line 57, in run"),
        "    do()".to_string(),
        exc.to_string(),
    ]
}

/// Two tracebacks joined by Python's chain words (`During handling of the above exception...`,
/// `The above exception was the direct cause...`): (file, exception) of each.
fn chain(first: (&str, &str), words: &str, then: (&str, &str)) -> Vec<String> {
    let mut lines = traceback(first.0, first.1);
    lines.extend([String::new(), words.to_string(), String::new()]);
    lines.extend(traceback(then.0, then.1));
    lines
}

#[test]
fn teardown_errors_after_an_orderly_stop_are_noise_but_a_gpu_fault_then_is_not() {
    let teardown = [
        "zmq.error.ZMQError: Operation not supported",
        "ImportError: sys.meta_path is None, Python is likely shutting down",
        "RuntimeError: NCCL error: unhandled system error",
    ];
    for exc in teardown {
        let text = stopped_then(
            "/usr/lib/python3/dist-packages/vllm/engine/multiprocessing/engine.py",
            exc,
        );
        let r = triage(&text);
        assert!(r.primary.is_none(), "{exc}: {:#?}", r.primary);
    }
    let text = stopped_then(
        "/usr/lib/python3/dist-packages/vllm/worker/model_runner.py",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    );
    let p = triage(&text)
        .primary
        .expect("a GPU fault during the stop is a cause");
    assert_eq!((p.class, p.line), (Class::GpuFault, line_of(&text, FATAL)));
}

/// vLLM V1 traces every teardown with `[shutdown]` lines: a worker that fails to load makes
/// the executor shut down (its lines come before the worker's own traceback, flushed later),
/// and that is no orderly stop; the trigger of one is (a signal), and then teardown errors are
/// noise again.
#[test]
fn vllms_shutdown_trace_is_an_orderly_stop_only_after_its_trigger() {
    let w = "(Worker_TP1 pid=32) ERROR 08-01 01:16:44 [multiproc_executor.py:901]";
    let e = "(EngineCore pid=26) ERROR 08-01 01:16:47 [core.py:1330]";
    let failed_start = vec![
        "(APIServer pid=12) INFO 08-01 01:16:02 [api_server.py:1951] vLLM API server version 0.23.1".to_string(),
        "(Worker_TP0 pid=30) INFO 08-01 01:16:29 [gpu_model_runner.py:5248] Starting to load model /models/glm".to_string(),
        "(EngineCore pid=26) INFO 08-01 01:16:39 [multiproc_executor.py:429] [shutdown] Executor: waiting for worker exit count=4".to_string(),
        "(EngineCore pid=26) WARNING 08-01 01:16:44 [multiproc_executor.py:441] [shutdown] Executor: workers still running after grace period; sending SIGTERM count=2".to_string(),
        format!("{w} WorkerProc failed to start."),
        format!("{w} Traceback (most recent call last):"),
        format!("{w}   File \"/vllm/model_executor/model_loader/weight_utils.py\", line 1013, in safetensors_weights_iterator"),
        format!("{w}     param = f.get_tensor(name)"),
        format!("{w} ValueError: could not determine the shape of object type 'torch.storage.UntypedStorage'"),
        format!("{e} EngineCore failed to start."),
    ];
    let text = log(&failed_start);
    let p = triage(&text)
        .primary
        .expect("a start that failed under the executor's shutdown trace is a failure");
    assert_eq!(p.line, line_of(&text, "could not determine the shape"));

    // The same trace after a signal (a stop, or ^C): the server was stopped, its teardown
    // errors are noise.
    for signal in ["SIGTERM", "SIGINT"] {
        let mut stopped = failed_start.clone();
        stopped.insert(
            2,
            format!("(EngineCore pid=26) INFO 08-01 01:16:38 [core.py:1093] [shutdown] EngineCore: trigger received signal={signal}"),
        );
        let r = triage(&log(&stopped));
        assert!(r.primary.is_none(), "{signal}: {:#?}", r.primary);
        assert!(
            r.outcome.iter().any(|o| o.ended == Ended::Orderly),
            "{signal}: {:#?}",
            r.outcome
        );
    }
}

/// A request the process made (huggingface_hub probing optional files) logs the answer it got:
/// a 404 there is no failure, and the fatal error after it is the cause.
#[test]
fn a_request_the_process_made_is_no_failure_whatever_its_answer() {
    let probe = "[2026-02-26 05:20:05 TP0] HTTP Request: GET https://huggingface.co/api/models/zai-org/GLM-5-FP8/tree/main/additional_chat_templates?recursive=false&expand=false \"HTTP/1.1 404 Not Found\"";
    let text = log(&[
        "[2026-02-26 05:19:58] server_args=ServerArgs(model_path='zai-org/GLM-5-FP8', tp_size=8)",
        probe,
        "[2026-02-26 05:21:00 TP0] Load weight begin. avail mem=250.11 GB",
        "[2026-02-26 05:35:12 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "  File \"/sgl-workspace/sglang/python/sglang/srt/models/deepseek_v2.py\", line 2010, in forward_absorb_fused_mla_rope_prepare",
        "    attn_logits, _, kv_indptr, kv_indices, _, _, _ = (",
        "TypeError: cannot unpack non-iterable ForwardMetadata object",
        "[2026-02-26 05:35:13] Received sigquit from a child process. It usually means the child failed.",
    ]);
    let r = triage(&text);
    let p = r
        .primary
        .as_ref()
        .expect("the scheduler's crash is a failure");
    assert_eq!(
        (p.class, p.line),
        (Class::Engine, line_of(&text, "TypeError: cannot unpack"))
    );
    let probe_line = line_of(&text, "additional_chat_templates");
    assert!(
        r.secondary.iter().all(|s| s.line != probe_line),
        "{:#?}",
        r.secondary
    );
}

#[test]
fn a_test_harness_assertion_and_its_retry_wrapper_are_not_the_servers_failure() {
    let mut lines: Vec<String> = vec![
        "[2026-01-14 12:00:00] INFO:     Application startup complete.".to_string(),
        "[2026-01-14 12:00:00] The server is fired up and ready to roll!".to_string(),
        "[2026-01-14 12:00:01] INFO:     127.0.0.1:4000 - \"POST /generate HTTP/1.1\" 200 OK"
            .to_string(),
    ];
    for harness in [
        "/usr/lib/python3.11/unittest/case.py",
        "/ws/sglang/test/test_utils.py",
        "/ws/tests/test_throughput.py",
    ] {
        lines.extend(chain(
            (
                harness,
                "AssertionError: 1975.97 not greater than or equal to 2078.33",
            ),
            "During handling of the above exception, another exception occurred:",
            (
                "/ws/sglang/srt/utils/common.py",
                "Exception: retry() exceed maximum number of retries.",
            ),
        ));
        let r = triage(&log(&lines));
        assert!(r.primary.is_none(), "{harness}: {:#?}", r.primary);
    }
    // The same assertion raised in the server's own code is its failure.
    lines.extend(traceback(
        "/ws/sglang/srt/managers/scheduler.py",
        "AssertionError: req_pool_indices must not be empty",
    ));
    let text = log(&lines);
    let p = triage(&text)
        .primary
        .expect("the server's own assertion is a cause");
    assert_eq!(p.line, line_of(&text, "req_pool_indices"));
}

/// A benchmark script sharing the server's log (a batch job's output) crashes after the server
/// served, and the job then stops the server in order: the script's traceback, none of whose
/// frames is in an installed package or an engine, was a client's. Without the orderly stop after
/// it, or with a frame in a package the server runs, it is a failure; and the server's own fatal
/// error beside it is still found.
#[test]
fn a_client_scripts_crash_after_serving_is_survived_when_the_server_then_stops_in_order() {
    let served = &SERVED_THEN_STOPPED[..3];
    let stop = &SERVED_THEN_STOPPED[3..];
    let script = traceback(
        "/gpfs/u/bench/utils/reproducibility.py",
        "AttributeError: 'torch._C._CudaDeviceProperties' object has no attribute 'total_mem'",
    );
    let with = |middle: &[String], tail: &[&str]| {
        let mut lines: Vec<String> = served.iter().map(|l| l.to_string()).collect();
        lines.extend(middle.iter().cloned());
        lines.extend(tail.iter().map(|l| l.to_string()));
        log(&lines)
    };
    let r = triage(&with(&script, stop));
    assert!(r.primary.is_none(), "{:#?}", r.primary);
    assert!(
        r.survived.iter().any(|s| s.text.contains("total_mem")),
        "{:#?}",
        r.survived
    );
    // No orderly stop after it: the log ends with the crash.
    let text = with(&script, &[]);
    let p = triage(&text).primary.expect("a crash the log ends with");
    assert_eq!(p.line, line_of(&text, "total_mem"));
    // A frame in an installed package: the server's code may have raised it.
    let package = traceback(
        "/usr/local/lib/python3.12/site-packages/vllm_plugin/metrics.py",
        "AttributeError: 'torch._C._CudaDeviceProperties' object has no attribute 'total_mem'",
    );
    let text = with(&package, stop);
    let p = triage(&text).primary.expect("a package's crash");
    assert_eq!(p.line, line_of(&text, "total_mem"));
    // The server's fatal error after the script's crash is still the cause.
    let mut both = script.clone();
    both.extend(traceback(
        "/usr/local/lib/python3.12/site-packages/vllm/worker/model_runner.py",
        &format!("RuntimeError: {FATAL}"),
    ));
    let text = with(&both, stop);
    let p = triage(&text).primary.expect("the server's GPU fault");
    assert_eq!((p.class, p.line), (Class::GpuFault, line_of(&text, FATAL)));
}

/// A loader line that states its own failure (`model cannot be NULL`) is no progress, and
/// Android's libc naming the signal ends the process: the load error before them is the cause
/// of a crash, not an error the loader went on after.
#[test]
fn a_loader_line_that_fails_is_no_progress_and_a_libc_signal_is_a_crash() {
    let text = log(&[
        "I LLama-android: llama_model_loader: loaded meta data with 26 key-value pairs",
        "I LLama-android: llm_load_print_meta: general.name     = model",
        "I AdrenoVK-0: Failed to link shaders.",
        "E LLama-android: llama_model_load: error loading model: vk::Device::createComputePipeline: ErrorUnknown",
        "E LLama-android: llama_load_model_from_file: failed to load model",
        "E LLama-android: llama_new_context_with_model: model cannot be NULL",
        "F libc    : exiting due to SIG_DFL handler for signal 11, ucontext 0x7317ea5e20",
    ]);
    let r = triage(&text);
    let p = r.primary.as_ref().expect("the load error is the cause");
    assert_eq!(
        (p.class, p.line),
        (Class::Driver, line_of(&text, "vk::Device"))
    );
    assert!(r.survived.is_empty(), "{:#?}", r.survived);
    assert!(
        r.outcome.iter().any(|o| o.ended == Ended::Crash),
        "{:#?}",
        r.outcome
    );
}

/// A log that appends several runs: a run that starts after an orderly stop (llama.cpp's
/// build line, SGLang's echoed arguments) and fails has its failure found; it is not teardown
/// noise of the run before.
#[test]
fn a_run_after_an_orderly_stop_fails_on_its_own() {
    let runs: [(&[&str], &str, &[&str]); 2] = [
        (
            &[
                "build: 8319 (1d6f2c1) with Clang 21.1.8 for Android aarch64",
                "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
                "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200",
                "srv    operator(): operator(): cleaning up before exit...",
            ],
            "build: 8470 (db9d8aa42) with Clang 21.1.8 for Android aarch64",
            &[
                "llama_model_load: error loading model: llama_model_loader: failed to load model from /models/m.gguf",
                "main: exiting due to model loading error",
            ],
        ),
        (
            &[
                "[2026-01-14 12:00:00] The server is fired up and ready to roll!",
                "[2026-01-14 12:00:01] INFO:     127.0.0.1:4000 - \"POST /generate HTTP/1.1\" 200 OK",
                "[2026-01-14 12:00:02] Received SIGTERM, shutting down.",
                "[2026-01-14 12:00:02] INFO:     Finished server process [1]",
            ],
            "[2026-01-14 12:05:00] server_args=ServerArgs(model_path='/models/m', tp_size=1)",
            &[
                "[2026-01-14 12:05:09] ValueError: Unsupported model type 'gemma4_unified'",
                "[2026-01-14 12:05:09] Received sigquit from a child process. It usually means the child failed.",
            ],
        ),
    ];
    for (first, start, failure) in runs {
        let mut lines: Vec<&str> = first.to_vec();
        lines.extend(failure);
        let text = log(&lines);
        assert!(
            triage(&text).primary.is_none(),
            "without a start marker the errors are teardown noise: {text}"
        );
        let mut lines: Vec<&str> = first.to_vec();
        lines.push(start);
        lines.extend(failure);
        let text = log(&lines);
        let p = triage(&text)
            .primary
            .unwrap_or_else(|| panic!("the second run's failure is found: {text}"));
        assert_eq!(p.line, line_of(&text, failure[0]), "{text}");
    }
}

/// A log of appended launches where one crashed and a later one served: the crashed run is a
/// process that ended badly, so the log failed, at that run's cause; a later run serving does
/// not excuse it. Its outcome names the restart, then the last run's outcome follows. A run
/// stopped by ^C (llama-server's `cleaning up before exit...` alone) before the restart
/// crashed nowhere: the log is healthy and the error it logged while serving stays survived.
#[test]
fn a_run_that_crashed_is_not_excused_by_a_later_run_that_served() {
    let start = "build: 8470 (db9d8aa42) with Clang 21.1.8 for Android aarch64";
    let load_error = "llama_model_load: error loading model: llama_model_loader: failed to load model from /models/m.gguf";
    let later = [
        start,
        "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
        "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200",
    ];
    let crashed = [
        start,
        "main: loading model",
        "gguf_init_from_file: failed to open GGUF file '/models/m.gguf' (No such file or directory)",
        load_error,
        "srv    operator(): operator(): cleaning up before exit...",
        "main: exiting due to model loading error",
    ];
    let text = log(&[&crashed[..], &later[..]].concat());
    let r = triage(&text);
    let p = r.primary.expect("the crashed run's cause");
    assert_eq!(p.class, Class::Config, "{p:?}");
    assert!(
        p.line >= line_of(&text, "gguf_init_from_file") && p.line <= line_of(&text, load_error),
        "{p:?}"
    );
    assert_eq!(r.outcome.len(), 2, "{:#?}", r.outcome);
    assert_eq!(r.outcome[0].ended, Ended::Crash, "{:#?}", r.outcome);
    assert_eq!(r.outcome[0].restarted_at, Some(7), "{:#?}", r.outcome);
    assert_eq!(
        (
            r.outcome[1].reached,
            r.outcome[1].ended,
            r.outcome[1].restarted_at
        ),
        (Reached::Serving, Ended::Running, None),
        "{:#?}",
        r.outcome
    );

    // The same launches, the first stopped by ^C after it served and logged an error.
    let stopped = [
        start,
        "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
        "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200",
        "srv    send_error: task id = 3, error: the request exceeds the available context size",
        "srv    operator(): operator(): cleaning up before exit...",
    ];
    let text = log(&[&stopped[..], &later[..]].concat());
    let r = triage(&text);
    assert!(r.primary.is_none(), "{:#?}", r.primary);
    assert!(
        r.outcome.iter().all(|o| o.restarted_at.is_none()),
        "{:#?}",
        r.outcome
    );
}

/// Ollama starts a runner per model load. A runner that dies fails the request that wanted
/// the model (500); the next runner loading does not show the server got past it, a request
/// answered afterwards does.
#[test]
fn an_ollama_runner_that_died_is_survived_only_by_a_request_answered_after_it() {
    let failed = [
        "time=2026-05-01T10:00:00.000Z level=INFO source=routes.go:1 msg=\"Listening on 127.0.0.1:11434 (version 0.21.2)\"",
        "time=2026-05-01T10:00:05.000Z level=INFO source=server.go:1 msg=\"starting llama server\" cmd=\"ollama runner --model /m\"",
        "llama_model_loader: loaded meta data with 30 key-value pairs and 292 tensors from /m (version GGUF V3 (latest))",
        "time=2026-05-01T10:00:20.000Z level=INFO source=sched.go:511 msg=\"Load failed\" model=/m error=\"llama runner process has terminated: signal: killed\"",
        "[GIN] 2026/05/01 - 10:00:20 | 500 | 15.1s |       127.0.0.1 | POST     \"/api/generate\"",
        "time=2026-05-01T10:00:25.000Z level=INFO source=server.go:1 msg=\"starting llama server\" cmd=\"ollama runner --model /m\"",
        "llama_model_loader: loaded meta data with 30 key-value pairs and 292 tensors from /m (version GGUF V3 (latest))",
        "[GIN] 2026/05/01 - 10:00:26 | 200 |    1.2ms |       127.0.0.1 | HEAD     \"/\"",
    ];
    let text = log(&failed);
    let p = triage(&text)
        .primary
        .unwrap_or_else(|| panic!("the runner's death is the failure: {text}"));
    assert_eq!(p.line, line_of(&text, "msg=\"Load failed\""), "{text}");

    let mut served = failed.to_vec();
    served.push(
        "[GIN] 2026/05/01 - 10:00:40 | 200 | 14.9s |       127.0.0.1 | POST     \"/api/generate\"",
    );
    let text = log(&served);
    assert!(
        triage(&text).primary.is_none(),
        "a request answered after it: the server got past it: {text}"
    );
}

/// An ollama runner that vanished while loading, with only a signal or no error as its reason,
/// was taken by the host (memory); one that printed its own error is explained by that error.
#[test]
fn an_ollama_runner_killed_without_a_word_is_memory_and_one_with_its_own_error_is_not() {
    let killed = [
        "time=2026-05-01T10:00:00.000Z level=INFO source=routes.go:1 msg=\"Listening on 127.0.0.1:11434 (version 0.21.2)\"",
        "time=2026-05-01T10:00:05.000Z level=INFO source=server.go:1 msg=\"starting llama server\" cmd=\"ollama runner --model /m\"",
        "load_tensors:          CPU model buffer size =  4685.30 MiB",
        "time=2026-05-01T10:00:20.000Z level=INFO source=sched.go:511 msg=\"Load failed\" model=/m error=\"llama runner process has terminated: %!w(<nil>)\"",
        "[GIN] 2026/05/01 - 10:00:20 | 500 | 15.1s |       127.0.0.1 | POST     \"/api/generate\"",
    ];
    for reason in ["%!w(<nil>)", "signal: killed", "signal: terminated"] {
        let text = log(&killed).replace("%!w(<nil>)", reason);
        let p = triage(&text).primary.unwrap_or_else(|| panic!("{text}"));
        assert_eq!((p.class, p.line), (Class::OomStartup, 4), "{reason}: {p:?}");
    }
    let own_error = log(&killed).replace(
        "%!w(<nil>)",
        "error loading model: unknown model architecture: 'qwen35'",
    );
    let p = triage(&own_error)
        .primary
        .unwrap_or_else(|| panic!("{own_error}"));
    assert_ne!(p.class, Class::OomStartup, "{p:?}");
}

/// A bare `Error: msg` is a command-line tool's line: before the server served it is why the
/// server did not come up; after the server served (a harness giving up on the job, a benchmark
/// client) it is not the server's failure.
#[test]
fn a_bare_error_line_is_a_cause_only_before_the_server_served() {
    let refused = [
        "Error: unknown flag: --ctx-size",
        "Usage: ollama serve [flags]",
    ];
    let text = log(&refused);
    let p = triage(&text)
        .primary
        .unwrap_or_else(|| panic!("the refusal is the cause: {text}"));
    assert_eq!(p.line, 1, "{text}");

    let served = [
        "[2026-01-14 12:00:00] The server is fired up and ready to roll!",
        "[2026-01-14 12:00:01] INFO:     127.0.0.1:4000 - \"POST /generate HTTP/1.1\" 200 OK",
        "Error: Pod logs ended but target pattern was not detected",
    ];
    let text = log(&served);
    assert_eq!(
        triage(&text).primary.map(|p| p.line),
        None,
        "the harness's lines after serving: {text}"
    );
}

/// vLLM's offline `LLM` progress bar is serving only at 100%: tqdm draws a bar's last state
/// while the exception that stopped the run unwinds, after the error, and that bar does not
/// make the error survived.
#[test]
fn an_offline_runs_unfinished_progress_bar_after_its_crash_does_not_excuse_it() {
    let offline = &ENGINES[2];
    assert!(offline.name.contains("offline"), "{}", offline.name);
    let finished = offline.serving[0];
    let unfinished = "Processed prompts:   3%|▎         | 3/100 [00:01<00:40,  2.40it/s, est. speed input: 24.1 toks/s, output: 38.2 toks/s]";
    let text = log(&[
        offline.survived_error,
        offline.progress,
        offline.fatal,
        unfinished,
    ]);
    let p = triage(&text).primary.expect("the crash before the bar");
    assert_eq!(
        (p.class, p.line),
        (Class::GpuFault, line_of(&text, FATAL)),
        "{p:#?}"
    );
    // The finished bar says every prompt was answered: what came before was survived.
    let done = log(&[offline.survived_error, offline.progress, finished]);
    assert!(triage(&done).primary.is_none());
}

/// Python's chain: its first exception is the cause line, unless that exception carries no
/// message (a bare `StopIteration`) or a one-word one (`KeyError: 'flashinfer_python'` says
/// which lookup failed, not why): then the exception that wraps it states the cause.
#[test]
fn a_bare_exception_at_the_root_of_a_chain_gives_the_line_to_its_wrapper() {
    let chained = |root: &str| {
        let mut lines =
            vec!["[2026-01-14 12:00:00] server_args=ServerArgs(model_path='m')".to_string()];
        lines.extend(chain(
            ("/usr/lib/python3.12/importlib/metadata/__init__.py", root),
            "The above exception was the direct cause of the following exception:",
            (
                "/ws/sglang/srt/utils/common.py",
                "importlib.metadata.PackageNotFoundError: No package metadata was found for flashinfer_python",
            ),
        ));
        log(&lines)
    };
    // The cause line for each root; a root with a message is the cause line, with its
    // wrapper's class.
    for (root, cause) in [
        ("StopIteration", "PackageNotFoundError"),
        ("KeyError: 'flashinfer_python'", "PackageNotFoundError"),
        (
            "AttributeError: 'NoneType' object has no attribute 'read_text'",
            "AttributeError",
        ),
    ] {
        let text = chained(root);
        let p = triage(&text)
            .primary
            .expect("the missing package is the cause");
        assert_eq!(
            (p.class, p.line),
            (Class::Dependency, line_of(&text, cause)),
            "{root}"
        );
    }
}

/// vLLM V0's engine step ran past its iteration timeout: the background loop stopped. The
/// traceback is re-raised in a request's path (under `Exception in ASGI application`) and the
/// metrics logger goes on, yet the engine is dead: the timeout is the cause, not one request's.
#[test]
fn a_v0_engine_loop_timeout_is_the_engines_end_even_in_a_requests_traceback() {
    let text = log(&[
        "INFO:     Application startup complete.",
        "INFO:     127.0.0.1:50000 - \"POST /v1/completions HTTP/1.1\" 200 OK",
        "ERROR:    Exception in ASGI application",
        "Traceback (most recent call last):",
        "  File \"/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py\", line 44, in _log_task_completion",
        "    return_value = task.result()",
        "  File \"/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py\", line 603, in run_engine_loop",
        "    async with asyncio_timeout(ENGINE_ITERATION_TIMEOUT_S):",
        "  File \"/usr/local/lib/python3.10/dist-packages/vllm/engine/async_timeout.py\", line 178, in _do_exit",
        "    raise asyncio.TimeoutError",
        "asyncio.exceptions.TimeoutError",
        "INFO 07-19 16:09:21 metrics.py:295] Avg prompt throughput: 84.8 tokens/s, Avg generation throughput: 0.1 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.3%, CPU KV cache usage: 0.0%.",
    ]);
    let p = triage(&text).primary.expect("the engine loop's timeout");
    assert_eq!((p.class, p.line), (Class::Engine, 11), "{p:?}");
    assert_eq!(p.rule, "engine-loop-timeout", "{p:?}");
}

/// A wrapper that relays a process's stderr through its own logger at INFO: the traceback the
/// log ends with is still the process's end (the level is the wrapper's). vLLM's own DEBUG
/// traceback (its header names the source file) is the engine calling it harmless.
#[test]
fn a_traceback_a_wrapper_relayed_at_info_ends_the_process_the_engines_debug_one_does_not() {
    let frames = [
        "Traceback (most recent call last):",
        "  File \"/usr/local/lib/python3.11/dist-packages/sglang/srt/managers/tp_worker.py\", line 147, in forward_batch_generation",
        "    forward_batch = ForwardBatch.init_new(model_worker_batch, self.model_runner)",
        "  File \"/usr/local/lib/python3.11/dist-packages/sglang/srt/layers/rotary_embedding.py\", line 48, in get_input_positions",
        "    image_grid_thw[image_index][0],",
        "IndexError: list index out of range",
    ];
    let relayed: Vec<String> = frames
        .iter()
        .map(|l| format!("2024-11-25 12:44:20,292 - sglang - INFO - {l}"))
        .collect();
    let p = triage(&log(&relayed))
        .primary
        .expect("the relayed traceback");
    assert_eq!((p.class, p.line), (Class::Engine, 6), "{p:?}");
    let own: Vec<String> = frames
        .iter()
        .map(|l| {
            format!("(APIServer pid=9) DEBUG 09-30 20:13:32 [entrypoints/chat_utils.py:474] {l}")
        })
        .collect();
    let rep = triage(&log(&own));
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
}
