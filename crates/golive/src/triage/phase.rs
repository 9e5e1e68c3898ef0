//! The phase of an out-of-memory: while starting (weights, profiling, CUDA graphs, KV cache)
//! or while serving. Evidence is the traceback's frames, the line itself and the lines after
//! it; the serving markers themselves (request lines, "server is fired up", ...) are rules of
//! kind `serving` in `rules.toml`.

use std::sync::OnceLock;

use regex::Regex;

use super::Class;

/// Runtime by meaning, whatever else the evidence says: a decode step, a request that failed
/// during generation, the engines' request loops.
fn runtime_by_meaning() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(concat!(
            // SGLang: `Decode out of memory. Try to lower your batch size.`, its scheduler
            // loops and decode forward; TGI: `Request failed during generation`.
            r"(?i:decode out of memory)|Request failed during generation|during generation|",
            r"forward_decode|event_loop_normal|event_loop_overlap|run_batch\b|",
            // SGLang's worker running a scheduled batch (the overlap thread, the TP worker):
            // only requests run there; graph capture calls the model directly.
            r"forward_thread_func|forward_batch_generation|",
            // vLLM V0's async engine loop and its step.
            r"run_engine_loop|engine_step|step_async|",
            // vLLM V1's busy loop running requests.
            r"step_with_batch_queue|EngineDeadError",
        ))
        .unwrap()
    })
}

fn startup_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"profile_run|_dummy_run|_dummy_sampler_run|capture_model|_capture_cudagraphs|determine_available_memory|determine_num_available_blocks|initialize_kv_cache|_initialize_kv_caches|init_device|compile_or_warm_up_model|load_model|load_weights|process_weights_after_loading|[Ww]arming up|warmup|repack|EngineCore failed to start|Engine core initialization failed|WorkerProc failed to start|init_worker|from_engine_args|initialize_from_config|Loading model|Failed to load model|init_memory_pool|Not enough memory\. Please try to increase --mem-fraction-static")
            .unwrap()
    })
}

fn runtime_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"execute_model|output_handler|Request failed|prefill|decode_step|wake_up|run_busy_loop|encountered a fatal error|Prefill encountered|Decode encountered|Prefill out of memory|generate_stream|chat_completion")
            .unwrap()
    })
}

/// What the phase patterns found in evidence. None of them matches across a newline, so the
/// evidence can be judged line by line (or block by block) and the findings or-ed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evidence {
    runtime_by_meaning: bool,
    startup: bool,
    runtime: bool,
}

impl Evidence {
    pub fn of(text: &str) -> Self {
        Evidence {
            runtime_by_meaning: runtime_by_meaning().is_match(text),
            startup: startup_re().is_match(text),
            runtime: runtime_re().is_match(text),
        }
    }

    /// Both pieces of evidence together.
    pub fn or(self, o: Self) -> Self {
        Evidence {
            runtime_by_meaning: self.runtime_by_meaning || o.runtime_by_meaning,
            startup: self.startup || o.startup,
            runtime: self.runtime || o.runtime,
        }
    }

    /// The frames are the request path (the engine's step, decode, the request loop) and none
    /// of startup's (profiling, loading, warm-up, KV-cache sizing).
    pub fn in_request_path(self) -> bool {
        self.runtime_by_meaning || (self.runtime && !self.startup)
    }

    /// `oom_startup` or `oom_runtime` for an out-of-memory with this evidence; `served`: the
    /// server had served since its last start when the line was logged.
    pub fn class(self, served: bool) -> Class {
        if self.runtime_by_meaning {
            Class::OomRuntime
        } else if self.startup && !served {
            Class::OomStartup
        } else if served || self.runtime {
            Class::OomRuntime
        } else {
            Class::OomStartup
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oom_class(evidence: &str, served: bool) -> Class {
        Evidence::of(evidence).class(served)
    }

    #[test]
    fn sglangs_batch_worker_is_the_request_path() {
        let overlap = "File \"/sgl/srt/managers/tp_worker_overlap_thread.py\", line 148, in forward_thread_func_\nFile \"/sgl/srt/managers/tp_worker.py\", line 206, in forward_batch_generation\nFile \"/sgl/srt/model_executor/model_runner.py\", line 1056, in forward_extend\ntorch.OutOfMemoryError: CUDA out of memory.";
        assert_eq!(oom_class(overlap, false), Class::OomRuntime);
        let capture = "File \"/sgl/srt/model_executor/cuda_graph_runner.py\", line 300, in capture_one_batch_size\ntorch.OutOfMemoryError: CUDA out of memory.";
        assert_eq!(oom_class(capture, false), Class::OomStartup);
    }

    #[test]
    fn decode_oom_is_runtime_even_before_a_serving_marker() {
        let sglang = "RuntimeError: Decode out of memory. Try to lower your batch size.\nTry to allocate 512 tokens.";
        assert_eq!(oom_class(sglang, false), Class::OomRuntime);
        let v0 = "File \"/vllm/engine/async_llm_engine.py\", line 872, in run_engine_loop\nFile \"/vllm/worker/model_runner.py\", line 1654, in execute_model\ntorch.OutOfMemoryError: CUDA out of memory.";
        assert_eq!(oom_class(v0, false), Class::OomRuntime);
    }

    #[test]
    fn profiling_oom_is_startup_and_served_is_runtime() {
        let e = "File \"/vllm/v1/worker/gpu_worker.py\", line 1, in determine_available_memory\nFile \"x.py\", line 2, in profile_run\ntorch.OutOfMemoryError: CUDA out of memory.";
        assert_eq!(oom_class(e, false), Class::OomStartup);
        assert_eq!(
            oom_class("torch.OutOfMemoryError: CUDA out of memory.", true),
            Class::OomRuntime
        );
        assert_eq!(
            oom_class("torch.OutOfMemoryError: CUDA out of memory.", false),
            Class::OomStartup
        );
    }

    #[test]
    fn evidence_judged_line_by_line_is_the_same() {
        let e = "File \"x.py\", line 1, in run_batch\ntorch.OutOfMemoryError: CUDA out of memory.\nWarming up";
        let by_line = e
            .lines()
            .map(Evidence::of)
            .fold(Evidence::default(), Evidence::or);
        assert_eq!(by_line, Evidence::of(e));
        assert_eq!(by_line.class(false), oom_class(e, false));
    }
}
