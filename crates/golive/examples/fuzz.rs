//! Stable-toolchain fuzz runner: feeds mutated real inputs to one parser (see
//! `golive::fuzz`) for a fixed number of iterations, and stops at the first panic, hang or
//! runaway allocation with the minimised input written to the findings directory.
//!
//! `cargo run --release -p golive --example fuzz -- TARGET ITERATIONS [SEED] [SHARED_DIR] [FINDINGS_DIR]`
//! (`scripts/fuzz.sh` runs every target). TARGET `list` prints the target names.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use golive::fuzz::{self, Rng};

/// Live heap bytes above this for one input count as unbounded allocation (inputs are at most
/// 64 KiB; the scanner's own buffers are a few tens of MiB).
const ALLOC_LIMIT: usize = 512 << 20;
/// One input running longer than this is a hang.
const HANG: Duration = Duration::from_secs(5);

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static INPUT_PTR: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static INPUT_LEN: AtomicUsize = AtomicUsize::new(0);
static ITER: AtomicU64 = AtomicU64::new(0);
static IN_RUN: AtomicBool = AtomicBool::new(false);
static mut DUMP: Option<std::fs::File> = None;

/// Writes the current input to the pre-opened dump file and aborts (no allocation here).
fn dump_and_abort(why: &str) -> ! {
    let p = INPUT_PTR.load(Ordering::SeqCst);
    let n = INPUT_LEN.load(Ordering::SeqCst);
    // SAFETY: DUMP is set once before the loop starts; the input buffer outlives the run.
    #[allow(static_mut_refs)]
    unsafe {
        if let Some(f) = DUMP.as_mut() {
            if !p.is_null() {
                let _ = f.write_all(std::slice::from_raw_parts(p, n));
            }
        }
    }
    let _ = std::io::stderr().write_all(why.as_bytes());
    std::process::abort();
}

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        if now > ALLOC_LIMIT && IN_RUN.load(Ordering::Relaxed) {
            dump_and_abort("fuzz: allocation over the limit; input written to the dump file\n");
        }
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() {
            let now = LIVE.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
            if now > ALLOC_LIMIT && IN_RUN.load(Ordering::Relaxed) {
                dump_and_abort("fuzz: allocation over the limit; input written to the dump file\n");
            }
        } else {
            LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
        }
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: Counting = Counting;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().map(String::as_str).unwrap_or("list");
    if name == "list" {
        for t in fuzz::TARGETS {
            println!("{}", t.name);
        }
        return;
    }
    let Some(target) = fuzz::target(name) else {
        eprintln!("fuzz: unknown target {name}; `list` prints them");
        std::process::exit(2);
    };
    let iters: u64 = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let seed: u64 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(1);
    let shared = PathBuf::from(args.get(3).map(String::as_str).unwrap_or("../shared"));
    let findings = PathBuf::from(
        args.get(4)
            .map(String::as_str)
            .unwrap_or("target/fuzz-findings"),
    );
    std::fs::create_dir_all(&findings).expect("cannot create the findings directory");

    let seeds = fuzz::seeds(target, &shared);
    if seeds.is_empty() {
        eprintln!(
            "fuzz {name}: no seed files (is {} there?); mutating from empty inputs",
            shared.display()
        );
    }
    let dump = findings.join(format!("{name}-crash.bin"));
    // SAFETY: set once, before any other thread runs.
    unsafe {
        DUMP = Some(std::fs::File::create(&dump).expect("cannot create the dump file"));
    }
    // Hang watchdog.
    std::thread::spawn(|| {
        let mut last = u64::MAX;
        let mut since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let i = ITER.load(Ordering::Relaxed);
            if i != last || !IN_RUN.load(Ordering::Relaxed) {
                last = i;
                since = Instant::now();
            } else if since.elapsed() > HANG {
                dump_and_abort(
                    "fuzz: one input ran longer than 5 s (hang); input written to the dump file\n",
                );
            }
        }
    });
    std::panic::set_hook(Box::new(|_| {}));

    let mut rng = Rng::new(seed);
    let mut input = Vec::with_capacity(fuzz::MAX_INPUT * 2);
    let t0 = Instant::now();
    // The seeds themselves first.
    let total = iters;
    let mut done = 0u64;
    let mut max_peak = 0usize;
    while done < total {
        if (done as usize) < seeds.len() {
            input.clear();
            input.extend_from_slice(&seeds[done as usize]);
        } else {
            fuzz::mutate(&mut rng, &seeds, target.dict, &mut input);
        }
        INPUT_PTR.store(input.as_mut_ptr(), Ordering::SeqCst);
        INPUT_LEN.store(input.len(), Ordering::SeqCst);
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        IN_RUN.store(true, Ordering::SeqCst);
        let r = std::panic::catch_unwind(|| (target.run)(&input));
        IN_RUN.store(false, Ordering::SeqCst);
        ITER.fetch_add(1, Ordering::Relaxed);
        max_peak = max_peak.max(PEAK.load(Ordering::Relaxed).saturating_sub(base));
        done += 1;
        if r.is_err() {
            let run = target.run;
            let min = fuzz::minimize(&input, |i| std::panic::catch_unwind(|| run(i)).is_err());
            let out = findings.join(format!("{name}-panic-{seed}-{done}.bin"));
            std::fs::write(&out, &min).expect("cannot write the finding");
            let _ = std::panic::take_hook();
            let msg = std::panic::catch_unwind(|| run(&min))
                .err()
                .and_then(|e| {
                    e.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                })
                .unwrap_or_default();
            eprintln!(
                "fuzz {name}: panic after {done} inputs: {msg}\n  minimal input ({} bytes) in {}: {:?}",
                min.len(),
                out.display(),
                String::from_utf8_lossy(&min)
            );
            std::process::exit(1);
        }
        if done.is_multiple_of(1_000_000) {
            eprintln!(
                "fuzz {name}: {done} inputs, {:.0}/s",
                done as f64 / t0.elapsed().as_secs_f64()
            );
        }
    }
    let _ = std::fs::remove_file(&dump);
    println!(
        "fuzz {name}: {done} inputs from {} seed files in {:.1} s ({:.0}/s), seed {seed}: no panic, hang or runaway allocation (largest per-input heap {} KiB)",
        seeds.len(),
        t0.elapsed().as_secs_f64(),
        done as f64 / t0.elapsed().as_secs_f64(),
        max_peak >> 10
    );
}
