//! A crash loop: the same startup failure repeated (new pids and timestamps each restart) is
//! reported once, at its first occurrence, with the count and the last occurrence.

use golive::triage::{analyze_paths, TriageOptions};

fn restart(pid: u32, minute: u32) -> String {
    format!(
        "INFO 08-03 21:{minute:02}:01 [api_server.py:1]  vLLM API server version 0.10.1\n\
         (EngineCore pid={pid}) INFO 08-03 21:{minute:02}:02 [core.py:1] Initializing a V1 LLM engine\n\
         (EngineCore pid={pid}) ERROR 08-03 21:{minute:02}:23 [core.py:1231] EngineCore failed to start.\n\
         (EngineCore pid={pid}) ERROR 08-03 21:{minute:02}:23 [core.py:1231] Traceback (most recent call last):\n\
         (EngineCore pid={pid}) ERROR 08-03 21:{minute:02}:23 [core.py:1231]   File \"/x/vllm/v1/core/kv_cache_utils.py\", line 700, in check_enough_kv_cache_memory\n\
         (EngineCore pid={pid}) ERROR 08-03 21:{minute:02}:23 [core.py:1231]     raise ValueError(\n\
         (EngineCore pid={pid}) ERROR 08-03 21:{minute:02}:23 [core.py:1231] ValueError: To serve at least one request with the model's max seq len (262144), (18.35 GiB KV cache is needed, which is larger than the available KV cache memory (8.72 GiB).\n\
         RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}\n"
    )
}

#[test]
fn a_crash_loop_is_one_finding_with_count_and_last_occurrence() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("loop.log");
    let mut log = String::new();
    for i in 0..500u32 {
        log.push_str(&restart(1000 + i, i % 60));
    }
    std::fs::write(&path, &log).unwrap();
    let rep = analyze_paths(
        std::slice::from_ref(&path),
        &TriageOptions {
            context: 5,
            rules: Vec::new(),
        },
    )
    .unwrap();
    let p = rep.primary.expect("the failure is found");
    assert_eq!(p.line, 7, "the first occurrence: {p:?}");
    assert_eq!(p.count, 500, "{p:?}");
    assert_eq!(p.last_line, Some(499 * 8 + 7), "{p:?}");
    // The repeats are not listed again as other errors.
    assert!(
        rep.secondary.iter().all(|s| s.rule != p.rule),
        "{:?}",
        rep.secondary
    );
    for s in &rep.secondary {
        assert!(s.count >= 1);
    }
}
