//! Throughput of `golive triage` on a generated log of at least 1 GiB (real-looking vLLM
//! serving lines, the failure near the end), compared with `rg` searching the same file for
//! the rules' literal anchors. Not a timed test: it prints figures.
//!
//! Run: `cargo bench -p golive --bench triage_throughput` (GOLIVE_BENCH_MIB sets the size).

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use golive::triage::{analyze_paths, RuleSet, TriageOptions};

const LINES: &[&str] = &[
    "(APIServer pid=23283) INFO:     127.0.0.1:51530 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
    "(APIServer pid=23283) INFO 08-01 21:30:12 [loggers.py:273] Engine 000: Avg prompt throughput: 3120.4 tokens/s, Avg generation throughput: 812.9 tokens/s, Running: 37 reqs, Waiting: 0 reqs, GPU KV cache usage: 41.3%, Prefix cache hit rate: 62.0%",
    "(APIServer pid=23283) INFO 08-01 21:30:12 [logger.py:43] Received request chatcmpl-a9a11cbcf14f4a7199ad5a97ffa445e7: prompt: '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>', params: SamplingParams(n=1, temperature=0.7, top_p=0.8, max_tokens=1024), prompt_token_ids: None, lora_request: None.",
    "(APIServer pid=23283) INFO 08-01 21:30:12 [async_llm.py:270] Added request chatcmpl-a9a11cbcf14f4a7199ad5a97ffa445e7.",
    "(EngineCore_DP0 pid=23397) DEBUG 08-01 21:30:12 [core.py:418] EngineCore waiting for work.",
];

fn main() {
    let mib: u64 = std::env::var("GOLIVE_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1100);
    let path = PathBuf::from("/tmp/golive-triage-bench.log");
    let target = mib << 20;
    if std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) < target {
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
        let mut written = 0u64;
        let mut i = 0usize;
        while written < target {
            let l = LINES[i % LINES.len()];
            w.write_all(l.as_bytes()).unwrap();
            w.write_all(b"\n").unwrap();
            written += l.len() as u64 + 1;
            i += 1;
        }
        // The failure near the end.
        writeln!(w, "(EngineCore_DP0 pid=23397) ERROR 08-01 21:34:51 [core.py:1131] EngineCore encountered a fatal error.").unwrap();
        writeln!(w, "(EngineCore_DP0 pid=23397) ERROR 08-01 21:34:51 [core.py:1131] Traceback (most recent call last):").unwrap();
        writeln!(w, "(EngineCore_DP0 pid=23397) ERROR 08-01 21:34:51 [core.py:1131]   File \"/x/vllm/v1/worker/gpu_model_runner.py\", line 1520, in execute_model").unwrap();
        writeln!(w, "(EngineCore_DP0 pid=23397) ERROR 08-01 21:34:51 [core.py:1131] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 72.00 MiB.").unwrap();
        for _ in 0..1000 {
            writeln!(w, "{}", LINES[0]).unwrap();
        }
        w.flush().unwrap();
    }
    let size = std::fs::metadata(&path).unwrap().len();
    // Warm the page cache so both tools read from memory.
    let _ = std::fs::read(&path).map(|d| d.len());

    let t = Instant::now();
    let rep = analyze_paths(
        std::slice::from_ref(&path),
        &TriageOptions {
            context: 30,
            rules: Vec::new(),
        },
    )
    .unwrap();
    let secs = t.elapsed().as_secs_f64();
    let p = rep.primary.expect("the failure near the end must be found");
    println!(
        "golive triage: {:.0} MiB in {:.2} s = {:.0} MB/s; found {:?} at line {}",
        size as f64 / 1048576.0,
        secs,
        size as f64 / 1e6 / secs,
        p.class,
        p.line
    );

    let rules = RuleSet::load(&[] as &[&str]).unwrap();
    let mut all = rules.literals.clone();
    all.extend(
        golive::triage::STRUCTURAL_ANCHORS
            .iter()
            .map(|s| s.to_string()),
    );
    // The serving markers match every request line; golive stops looking for them once the
    // server serves, so rg is also timed without them.
    let serving: Vec<String> = rules
        .rules
        .iter()
        .filter(|r| r.kind == golive::triage::RuleKind::Serving)
        .flat_map(|r| rules.literals_of(r))
        .collect();
    let without: Vec<String> = all
        .iter()
        .filter(|l| !serving.contains(l))
        .cloned()
        .collect();
    for (label, pats) in [
        ("all anchors", &all),
        ("anchors without serving markers", &without),
    ] {
        let pat_file = PathBuf::from("/tmp/golive-triage-bench.anchors");
        std::fs::write(&pat_file, pats.join("\n") + "\n").unwrap();
        let t = Instant::now();
        match Command::new("rg")
            .args(["-F", "-c", "--no-mmap", "-f"])
            .arg(&pat_file)
            .arg(&path)
            .output()
        {
            Ok(out) => {
                let rg = t.elapsed().as_secs_f64();
                println!(
                    "rg -F -c --no-mmap -f <{} {label}>: {:.2} s = {:.0} MB/s ({} matching lines); golive/rg time ratio {:.2}",
                    pats.len(),
                    rg,
                    size as f64 / 1e6 / rg,
                    String::from_utf8_lossy(&out.stdout).trim(),
                    secs / rg
                );
            }
            Err(e) => println!("rg not available ({e}); install ripgrep to compare"),
        }
    }
}
