//! Fuzz targets for every parser that reads what other programs wrote, on the stable
//! toolchain (`cargo fuzz` needs nightly). Each target takes arbitrary bytes and must return
//! without a panic, a hang or an unbounded allocation; `examples/fuzz.rs` runs them for a fixed
//! number of mutated inputs seeded from real files (`scripts/fuzz.sh`), and
//! `tests/fuzz_smoke.rs` runs a short pass in the normal test suite.
//!
//! The mutator is a small hand-written one (byte edits, dictionary tokens, splices between
//! seeds): the crates that do coverage-guided mutation (libfuzzer-sys, afl) need nightly or an
//! instrumented toolchain, and `arbitrary` builds typed values, not mutated real text.

use std::path::{Path, PathBuf};

mod inputs;
mod mutate;
pub use mutate::{minimize, mutate, Rng, MAX_INPUT};

/// One fuzz target: a name, the seed files (globs under `../shared` and the test fixtures)
/// and tokens the mutator inserts.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
    /// File-name prefixes (relative to the seed root) whose files seed this target.
    pub seeds: &'static [&'static str],
    pub dict: &'static [&'static str],
    /// Seeds written here (for streams no file in the repository holds).
    pub inline: &'static [&'static str],
}

fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

fn sse(data: &[u8]) {
    // The first byte picks the chunk size, so events are cut at every kind of place.
    let (step, body) = match data.split_first() {
        Some((s, rest)) => (usize::from(*s % 64) + 1, rest),
        None => return,
    };
    let mut d = crate::sse::SseDecoder::new();
    for chunk in body.chunks(step) {
        if d.push(chunk).is_err() {
            return;
        }
        while let Some(ev) = d.next_event() {
            if let crate::sse::SseEvent::Data(data) = ev {
                crate::client::fuzz_scan_event(&data);
            }
        }
    }
    let _ = d.pending_bytes();
}

fn client_event(data: &[u8]) {
    crate::client::fuzz_scan_event(data);
    // The agent's readers of the same answer model: the stream assembler on the event, the
    // validator on it as a whole body.
    let mut asm = crate::agent::stream::Assembler::new();
    asm.push(&crate::sse::SseEvent::Data(data.to_vec()));
    let _ = asm.finish(None, 0);
    if let Ok(body) = serde_json::from_slice(data) {
        let _ = crate::agent::validate::parse_completion(&body);
    }
}

fn metrics(data: &[u8]) {
    // The reader on the raw bytes (invalid UTF-8 included), then the snapshot's lookups.
    let Ok(m) = crate::metrics::MetricsSnapshot::parse_bytes(data) else {
        return;
    };
    for fam in [
        "vllm:num_requests_running",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds",
        "vllm:prompt_tokens",
    ] {
        let _ = m.sum(fam);
        let _ = m.max(fam);
        let _ = m.histogram_sum_count(fam);
        let _ = m.histogram_buckets(fam);
        let _ = m.label(fam, "model_name");
        let _ = m.sum_where(fam, "engine", "0");
    }
    let _ = m.engine();
}

fn nvidia_smi(data: &[u8]) {
    use crate::envparse as e;
    let t = text(data);
    let smi = e::parse_nvidia_smi(&t);
    let cuda = &crate::profile::Profile::generic().cuda;
    let _ = cuda.header_exceeds_native(&smi);
    let _ = e::parse_query_csv(&t);
    let _ = e::parse_container_cuda_errors(&t);
    let _ = e::parse_proc_driver_version(&t);
    let _ = e::parse_nvcc(&t);
    let _ = e::parse_vllm_version(&t);
    if let Some(d) = &smi.driver {
        let _ = cuda.native_for_driver(d);
    }
}

fn topology(data: &[u8]) {
    let t = crate::envparse::parse_topology(&text(data));
    let _ = t.gpu_count();
    let _ = t.gpus_without_nvlink();
    let _ = t.has_nvlink();
    let _ = t.nvlink_label();
    let _ = t.gpus_with_close_nic();
    let _ = t.summary();
}

fn docker_inspect(data: &[u8]) {
    let t = text(data);
    let d = crate::envparse::parse_docker_inspect(&t);
    let _ = d.digest();
    let _ = d.image_cuda();
    let _ = crate::envparse::parse_env(&t);
}

fn lsmod(data: &[u8]) {
    let m = crate::envparse::parse_modules(&text(data));
    let _ = m.is_loaded("nvidia_peermem");
    let _ = m.all();
}

fn ibv_devinfo(data: &[u8]) {
    let t = text(data);
    for h in crate::envparse::parse_ibv_devinfo(&t) {
        let _ = h.has_active_port();
    }
    let _ = crate::envparse::parse_ip_link(&t);
}

fn launch(data: &[u8]) {
    let t = text(data);
    if let Some(l) = crate::envparse::launch::parse_launch(&t) {
        exercise_launch(&l);
    }
    let argv: Vec<String> = t.split_whitespace().map(String::from).collect();
    if let Some(l) = crate::envparse::launch::launch_from_argv(&argv) {
        exercise_launch(&l);
    }
}

fn exercise_launch(l: &crate::envparse::launch::Launch) {
    let _ = l.tensor_parallel();
    let _ = l.pipeline_parallel();
    let _ = l.data_parallel();
    let _ = l.data_parallel_local();
    let _ = l.prefix_caching();
    let _ = l.all2all_backend();
    let _ = l.multi_node_hint();
    let _ = l.command_line();
    let _ = l.value("--model");
}

fn bundle(data: &[u8]) {
    crate::envparse::bundle::fuzz_texts(&text(data));
}

fn triage_line(data: &[u8]) {
    crate::triage::fuzz_lines(data);
}

fn triage_scan(data: &[u8]) {
    crate::triage::fuzz_scan(data);
}

fn profile(data: &[u8]) {
    let t = text(data);
    let _ = crate::profile::Profile::from_recipe(&t);
    if let Ok(mut p) = toml::from_str::<crate::profile::Profile>(&t) {
        let _ = p.required_flags_for(&["NVIDIA H100 80GB HBM3".to_string()]);
        p.inherit(crate::profile::Profile::generic());
        let _ = p.check_versions();
        let _ = p.fabrics.of_backend(&t);
        let _ = p.cuda.native_for_driver(&t);
    }
}

const LOG_DICT: &[&str] = &[
    "\n",
    "\r\n",
    "\r",
    "\x1b[0;31m",
    "\x1b[",
    "Traceback (most recent call last):\n",
    "  File \"/x.py\", line 1, in f\n",
    "    raise ValueError(\"x\")\n",
    "RuntimeError: NCCL error: unhandled system error\n",
    "torch.OutOfMemoryError: CUDA out of memory.\n",
    "(VllmWorker rank=1 pid=2) ",
    "(Worker_TP1 pid=462) ",
    "(RayWorkerWrapper pid=221, ip=10.0.0.1) ",
    "[rank3]: ",
    "ERROR 10-25 13:08:43 [core.py:708] ",
    "INFO 02-19 07:03:11 engine.py:389] ",
    "2025-09-09T07:11:16.569000Z ",
    "E0909 07:11:16.569000 ",
    "[2024-11-11 09:36:27,146 E 221 275] ",
    "svc-1  | ",
    "Exception ignored in: <x>\n",
    "Application startup complete.",
    "Shutting down",
    "99999999999999999999",
    "\u{FFFD}",
    "\0",
    // Where the hand-written prefix readers must agree with the regexes.
    "\u{0661}",
    " UTC",
    "+05:30 ",
    "(VllmWorker TP1_PP0 pid=",
    ", ip=",
    "2024-06-14 07:04:12,5",
];

/// OpenAI-style streams (chat, completion, reasoning, tool calls, errors, llama.cpp timings).
const SSE_SEEDS: &[&str] = &[
            "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\ndata: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"logprobs\":null,\"finish_reason\":null}]}\n\ndata: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":12,\"total_tokens\":14,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n",
            "data: {\"id\":\"cmpl-2\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\" world\",\"finish_reason\":null}]}\r\n\r\n: keep-alive\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get\",\"arguments\":\"{\\\"a\\\": 1}\"}}]}}]}\n\n",
            "data: {\"error\":{\"message\":\"The model does not exist.\",\"type\":\"NotFoundError\",\"code\":404}}\n\n",
            "data: {\"choices\":[],\"timings\":{\"prompt_n\":5,\"prompt_ms\":1.5,\"predicted_n\":3,\"predicted_ms\":9.1}}\n\n",
        ];

/// Every fuzz target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "sse",
        run: sse,
        seeds: &[],
        dict: &[
            "data: ",
            "data:",
            "\n\n",
            "\r\n",
            ": ping\n",
            "data: [DONE]\n\n",
            "{\"choices\":[{\"delta\":{\"content\":\"x\"}}]}",
            "\"usage\":",
            "\"error\":",
            "\"finish_reason\":\"stop\"",
            "event: x\n",
        ],
        inline: SSE_SEEDS,
    },
    Target {
        name: "client_event",
        run: client_event,
        seeds: &["fixtures:agent/"],
        dict: &[
            "{",
            "}",
            "\"",
            "\\\"",
            "\"content\":",
            "\"reasoning_content\":",
            "\"reasoning\":",
            "\"text\":",
            "\"delta\":",
            "\"tool_calls\":[",
            "{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}",
            "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}",
            "\"timings\":",
            "\"error\":{\"message\":\"x\"}",
            "\"finish_reason\":null",
            "\\u00e9",
            "\\ud83d",
            "1e999",
            "-0",
        ],
        inline: SSE_SEEDS,
    },
    Target {
        name: "metrics",
        run: metrics,
        seeds: &["shared:reference/vllm-"],
        dict: &[
            "# TYPE vllm:x histogram\n",
            "# HELP x y\n",
            "# TYPE x counter\n",
            "# TYPE vllm:x summary\n",
            "# UNIT x seconds\n",
            "# EOF\n",
            "{quantile=\"0.5\"} ",
            " # {trace_id=\"a\"} 1 2\n",
            "{\"quoted.name\", ",
            "\\\"",
            "\\n",
            "\\",
            "\r\n",
            "_created ",
            "vllm:num_requests_running{model_name=\"m\"} 1\n",
            "_bucket{le=\"+Inf\"} 3\n",
            "_sum 1.5\n",
            "_count 3\n",
            "{",
            "}",
            "=\"",
            "\",",
            "NaN",
            "+Inf",
            "-Inf",
            "1e308",
            " 1700000000000\n",
        ],
        inline: &["# TYPE foo_seconds histogram\n# UNIT foo_seconds seconds\nfoo_seconds_bucket{le=\"0.1\"} 8 # {trace_id=\"K\"} 0.067 1.6e9\nfoo_seconds_bucket{le=\"+Inf\"} 17\nfoo_seconds_count 17\nfoo_seconds_sum 324789.3\nfoo_seconds_created 1520430000.123\n# TYPE rpc summary\nrpc{quantile=\"0.5\"} NaN\nrpc_sum 1\nrpc_count 2\n{\"a.b\", \"c.d\"=\"e\\\\\\n\\\"\"} 4 -3982045\n# EOF\n"],
    },
    Target {
        name: "nvidia_smi",
        run: nvidia_smi,
        seeds: &[
            "shared:env/nvidia-smi_",
            "shared:env/nvidia-smi-query",
            "shared:env/nvidia-container-error",
            "fixtures:env",
        ],
        dict: &[
            "| NVIDIA-SMI 570.133.07             Driver Version: 570.133.07     CUDA Version: 12.8     |\n",
            "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |\n",
            "| N/A   34C    P0             71W /  700W |       1MiB /  81559MiB |      0%      Default |\n",
            "MiB",
            "|",
            "+-----------------------------------------+\n",
            "index, name, memory.total [MiB]\n",
            ", ",
            "[N/A]",
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8",
            "Driver Version: ",
            "CUDA Version: ",
            "99999999999.99999",
        ],
        inline: &[],
    },
    Target {
        name: "topology",
        run: topology,
        seeds: &["shared:env/nvidia-smi-topo", "fixtures:env"],
        dict: &[
            "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n",
            "GPU0\t X \tNV18\tPIX\t0-55\t0\n",
            "NV18",
            "NV4",
            "PIX",
            "PXB",
            "SYS",
            "NODE",
            " X ",
            "\t",
            "NIC Legend:\n",
            "  NIC0: mlx5_0\n",
            "Legend:\n",
            "GPU99999999999999999999",
            "NIC4294967296",
        ],
        inline: &[],
    },
    Target {
        name: "docker_inspect",
        run: docker_inspect,
        seeds: &["shared:env/docker-inspect", "fixtures:env"],
        dict: &[
            "[",
            "]",
            "{",
            "}",
            "\"Env\": [",
            "\"NVIDIA_VISIBLE_DEVICES=all\",",
            "\"CUDA_VERSION=12.8.1\"",
            "\"Image\": \"sha256:",
            "\"RepoDigests\": [",
            "\"Cmd\": null",
            "\"Entrypoint\": [\"vllm\", \"serve\"]",
            "\"Args\": [",
            "map[",
            "\\u0000",
            "null",
        ],
        inline: &[],
    },
    Target {
        name: "lsmod",
        run: lsmod,
        seeds: &["shared:env/lsmod", "fixtures:env"],
        dict: &[
            "Module                  Size  Used by\n",
            "nvidia_peermem         16384  0\n",
            "ib_core               438272  8 rdma_cm,ib_ipoib,nvidia_peermem\n",
            ",",
            " ",
            "\t",
            "[permanent]",
            "18446744073709551616",
        ],
        inline: &[],
    },
    Target {
        name: "ibv_devinfo",
        run: ibv_devinfo,
        seeds: &["shared:env/ibv_devinfo", "fixtures:env"],
        dict: &[
            "hca_id:\tmlx5_0\n",
            "\t\tport:\t1\n",
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
            "\t\t\tlink_layer:\t\tInfiniBand\n",
            "\t\t\tlink_layer:\t\tEthernet\n",
            "2: ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 2044 state UP\n",
            "    link/infiniband ",
            ":",
            "\t",
        ],
        inline: &[],
    },
    Target {
        name: "launch",
        run: launch,
        seeds: &["shared:env/vllm-cmdline", "fixtures:env"],
        dict: &[
            "vllm serve ",
            "python -m vllm.entrypoints.openai.api_server ",
            " --tensor-parallel-size 8",
            " -tp=2",
            " --data-parallel-size ",
            " --enable-prefix-caching",
            " --no-enable-prefix-caching",
            " \\\n",
            "'",
            "\"",
            "$(",
            "`",
            "=",
            " --",
            "99999999999999999999999",
            "docker run --gpus all ",
            "NCCL_IB_HCA=mlx5 ",
        ],
        inline: &[],
    },
    Target {
        name: "bundle",
        run: bundle,
        seeds: &[
            "fixtures:env/pod-spec",
            "shared:env/vllm-cmdline_compose",
            "shared:env/docker-inspect",
        ],
        dict: &[
            "spec:\n",
            "  containers:\n",
            "  - name: vllm\n",
            "    command: [\"vllm\", \"serve\"]\n",
            "    args:\n",
            "    - --tensor-parallel-size=8\n",
            "&a ",
            "*a",
            "!!binary ",
            "- ",
            ": ",
            "{",
            "[",
        ],
        inline: &[],
    },
    Target {
        name: "triage_line",
        run: triage_line,
        seeds: &["shared:corpus/", "shared:long/0"],
        dict: LOG_DICT,
        inline: &[],
    },
    Target {
        name: "triage_scan",
        run: triage_scan,
        seeds: &["shared:corpus/", "shared:long/0", "fixtures:triage"],
        dict: LOG_DICT,
        inline: &[],
    },
    Target {
        name: "profile",
        run: profile,
        seeds: &["fixtures:env/recipe", "profiles:"],
        dict: &[
            "model:\n",
            "  model: org/name\n",
            "meta:\n",
            "features:\n",
            "strategy_min_gpus:\n",
            "hardware_overrides:\n",
            "strategy_overrides:\n",
            "guide: ",
            "  - ",
            "name = \"x\"\n",
            "[image]\n",
            "cuda_major = 4294967296\n",
            "&a ",
            "*a",
            "<<: *a\n",
            "[[",
            "]]",
        ],
        inline: &[],
    },
    Target {
        name: "report",
        run: inputs::report,
        seeds: &["fixtures:../golden/accept/report.json"],
        dict: &["\"checks\"", "\"status\"", "\"signoffs\"", "null", "[]", "{}", "1e999"],
        inline: &[],
    },
    Target {
        name: "regression",
        run: inputs::regression,
        seeds: &[],
        dict: &["\"request\"", "\"answer\"", "[1]", "\"x\"", "null", "{}"],
        inline: &[r#"{"golive_regression": 1, "check": "c", "saved_at": "2026-01-01T00:00:00Z", "url": "http://x", "expect": {"answer": "tool", "name": "get"}, "content_withheld": false, "request": {"messages": []}, "observed": {"kind": "reply", "problems": [], "duration_ms": 1}}"#],
    },
    Target {
        name: "shard",
        run: inputs::shard,
        seeds: &["fixtures:load/"],
        dict: &["4294967295", "\"count\"", "\"index\"", "\"histograms\"", "\"format\"", "null"],
        inline: &[],
    },
    Target {
        name: "promql",
        run: inputs::promql,
        seeds: &[],
        dict: inputs::PROMQL_DICT,
        inline: inputs::PROMQL_SEEDS,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// Seed files of a target: `shared:` prefixes are read under `shared` (the real files),
/// `fixtures:` under the crate's test fixtures, `profiles:` under the built-in profiles.
pub fn seed_files(t: &Target, shared: &Path) -> Vec<PathBuf> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for s in t.seeds {
        let (root, prefix) = if let Some(p) = s.strip_prefix("shared:") {
            (shared.to_path_buf(), p)
        } else if let Some(p) = s.strip_prefix("fixtures:") {
            (crate_dir.join("tests/fixtures"), p)
        } else if let Some(p) = s.strip_prefix("profiles:") {
            (crate_dir.join("profiles"), p)
        } else {
            continue;
        };
        let full = root.join(prefix);
        // `dir/prefix`: files in `dir` whose name starts with `prefix`, or a whole tree.
        let (dir, name_prefix) = if full.is_dir() {
            (full, String::new())
        } else {
            (
                full.parent().map(Path::to_path_buf).unwrap_or_default(),
                full.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            )
        };
        for e in walkdir::WalkDir::new(&dir)
            .max_depth(if name_prefix.is_empty() { 4 } else { 1 })
            .into_iter()
            .filter_map(Result::ok)
        {
            let name = e.file_name().to_string_lossy();
            if e.file_type().is_file() && name.starts_with(&name_prefix) {
                out.push(e.into_path());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The seed inputs of a target: its files (each cut to [`MAX_INPUT`]) and its inline seeds.
pub fn seeds(t: &Target, shared: &Path) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = seed_files(t, shared)
        .iter()
        .filter_map(|f| std::fs::read(f).ok())
        .map(|mut s| {
            s.truncate(MAX_INPUT);
            s
        })
        .collect();
    out.extend(t.inline.iter().map(|s| s.as_bytes().to_vec()));
    out
}
