//! report.html in headless Chromium: the page renders (DOM with the SVG charts, no
//! console errors), and a screenshot shows the charts (PNG decoded, chart colours
//! counted). The report comes from `GOLIVE_HTML_REPORT` (any report.json, e.g. a real
//! `golive accept` run), else from a tiny real run made here against the local
//! llama-server: ramp, prefix-cache cold/warm/control and a short soak.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use golive::metrics::MetricsSnapshot;
use golive::report::{
    Check, Impact, Percentiles, PrefixCacheSample, RampStep, Report, SoakSample, Stage, Status,
};
use golive::sse::{SseDecoder, SseEvent};

fn chromium() -> Option<&'static str> {
    for name in ["chromium", "chromium-browser"] {
        if Command::new(name)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
        {
            return Some(name);
        }
    }
    eprintln!("skipping: chromium is not installed (Debian package chromium; scripts/test.sh installs it)");
    None
}

/// Runs headless Chromium with `extra` on `page`; returns (stdout, stderr).
fn run_chromium(bin: &str, page: &Path, extra: &[String]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Chromium has been seen to hang on exit in containers: bound it.
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn hex_rgb(c: &str) -> [u8; 3] {
    let v = u32::from_str_radix(c.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

/// Renders the report, loads it in Chromium, screenshots it, and checks the charts.
/// Returns the screenshot path (kept for people to look at under target/).
fn render_and_check(report: &Report, name: &str, expect_colors: &[&str]) -> PathBuf {
    let Some(bin) = chromium() else {
        return PathBuf::new();
    };
    let out_dir = common::repo_root().join("target/html-test").join(name);
    std::fs::create_dir_all(&out_dir).unwrap();
    let html = golive::report::html::render(report);
    // Self-contained: nothing to fetch.
    for needle in [" src=\"", " href=\"", "@import", "url(", "<script", "<link"] {
        assert!(!html.contains(needle), "report.html contains {needle}");
    }
    let page = out_dir.join("report.html");
    std::fs::write(&page, &html).unwrap();

    let (dom, _) = run_chromium(bin, &page, &["--dump-dom".to_string()]);
    assert!(
        dom.contains("id=\"verdict\""),
        "no verdict in the DOM: {dom:.500}"
    );
    assert!(
        dom.matches("<svg").count() >= 8,
        "charts missing from the DOM"
    );
    assert!(dom.contains("<polyline"), "no line drawn");

    let png_path = out_dir.join("screenshot.png");
    let _ = std::fs::remove_file(&png_path);
    let (_, stderr) = run_chromium(
        bin,
        &page,
        &[
            "--enable-logging=stderr".to_string(),
            "--v=0".to_string(),
            format!("--screenshot={}", png_path.display()),
            "--window-size=1280,2000".to_string(),
        ],
    );
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    assert!(png_path.exists(), "no screenshot; chromium said: {stderr}");

    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1280, 2000));
    let channels = info.color_type.samples();
    let pixel = |x: u32, y: u32| -> [u8; 3] {
        let i = (y as usize * info.width as usize + x as usize) * channels;
        [buf[i], buf[i + 1], buf[i + 2]]
    };
    // The chart area: the page below the header; count pixels of each series colour.
    let near = |p: [u8; 3], c: [u8; 3]| (0..3).all(|k| (p[k] as i32 - c[k] as i32).abs() <= 12);
    let mut counts = vec![0usize; expect_colors.len()];
    let mut non_white = 0usize;
    for y in (200..info.height).step_by(2) {
        for x in (0..info.width).step_by(2) {
            let p = pixel(x, y);
            if p.iter().any(|v| *v < 240) {
                non_white += 1;
            }
            for (i, c) in expect_colors.iter().enumerate() {
                if near(p, hex_rgb(c)) {
                    counts[i] += 1;
                }
            }
        }
    }
    eprintln!("{name}: non-white sampled pixels {non_white}, chart colours {expect_colors:?} -> {counts:?}");
    assert!(
        non_white > 20_000,
        "page looks blank: {non_white} non-white pixels"
    );
    for (c, n) in expect_colors.iter().zip(&counts) {
        assert!(
            *n > 50,
            "chart colour {c} barely visible ({n} sampled pixels)"
        );
    }
    png_path
}

// ---- a tiny real run against the local server ----------------------------

fn percentiles(mut v: Vec<f64>) -> Percentiles {
    if v.is_empty() {
        return Percentiles::default();
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Percentiles {
        count: v.len() as u64,
        mean: v.iter().sum::<f64>() / v.len() as f64,
        p50: at(0.5),
        p90: at(0.9),
        p95: at(0.95),
        p99: at(0.99),
        max: v[v.len() - 1],
    }
}

struct Timed {
    ttft_ms: f64,
    itl_ms: Vec<f64>,
    e2e_ms: f64,
    ok: bool,
}

async fn stream_chat(
    client: &reqwest::Client,
    base: &str,
    prompt: String,
    max_tokens: u32,
) -> Timed {
    let start = Instant::now();
    let body = serde_json::json!({
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens, "stream": true, "ignore_eos": true,
    });
    let mut t = Timed {
        ttft_ms: 0.0,
        itl_ms: Vec::new(),
        e2e_ms: 0.0,
        ok: false,
    };
    let Ok(mut resp) = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
    else {
        return t;
    };
    let mut dec = SseDecoder::new();
    let mut last: Option<Instant> = None;
    while let Ok(Some(chunk)) = resp.chunk().await {
        dec.push(&chunk).unwrap();
        while let Some(ev) = dec.next_event() {
            match ev {
                SseEvent::Done => t.ok = true,
                SseEvent::Data(d) => {
                    let v: serde_json::Value = serde_json::from_slice(&d).unwrap_or_default();
                    let has_text = v["choices"][0]["delta"]["content"]
                        .as_str()
                        .is_some_and(|s| !s.is_empty());
                    if has_text {
                        let now = Instant::now();
                        match last {
                            None => t.ttft_ms = (now - start).as_secs_f64() * 1000.0,
                            Some(prev) => t.itl_ms.push((now - prev).as_secs_f64() * 1000.0),
                        }
                        last = Some(now);
                    }
                }
            }
        }
    }
    t.e2e_ms = start.elapsed().as_secs_f64() * 1000.0;
    t
}

async fn scrape(client: &reqwest::Client, base: &str) -> Option<MetricsSnapshot> {
    MetricsSnapshot::scrape(client, &format!("{base}/metrics"))
        .await
        .ok()
}

fn words(n: usize, nonce: &str) -> String {
    let text = "the lighthouse keeper logs wind speed tide height and passing ships every hour of the night";
    let w: Vec<&str> = text.split(' ').collect();
    let mut out = format!("[{nonce}] ");
    for i in 0..n {
        out.push_str(w[i % w.len()]);
        out.push(' ');
    }
    out
}

async fn tiny_run(base: &str) -> Report {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let mut report = Report::new(vec![base.to_string()]);
    report.engine = Some("llama.cpp".into());
    report.model = Some("gemma-3-270m (local llama-server)".into());
    report.operator = Some("html-test <tiny run>".into());

    // Ramp: concurrency and prompt size grow; waiting/running sampled from /metrics.
    for (i, (conc, prompt_words)) in [(1u32, 16usize), (2, 16), (2, 64), (4, 64)]
        .into_iter()
        .enumerate()
    {
        let sampler_stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = {
            let (client, base, stop) = (client.clone(), base.to_string(), sampler_stop.clone());
            tokio::spawn(async move {
                let (mut waiting, mut running) = (0f64, 0f64);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Some(m) = scrape(&client, &base).await {
                        waiting = waiting.max(m.sum("llamacpp:requests_deferred").unwrap_or(0.0));
                        running = running.max(m.sum("llamacpp:requests_processing").unwrap_or(0.0));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                (waiting, running)
            })
        };
        let mut tasks = Vec::new();
        for r in 0..conc * 2 {
            let (client, base) = (client.clone(), base.to_string());
            let prompt = words(prompt_words, &format!("ramp {i} request {r}"));
            tasks.push(tokio::spawn(async move {
                stream_chat(&client, &base, prompt, 8).await
            }));
        }
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap());
        }
        sampler_stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (waiting, running) = sampler.await.unwrap();
        let errors = results.iter().filter(|r| !r.ok).count() as u64;
        report.measurements.ramp.push(RampStep {
            label: format!("{conc} x {prompt_words} words"),
            concurrency: conc,
            prompt_tokens: prompt_words as u32 + 8,
            max_tokens: 8,
            requests: results.len() as u64,
            errors,
            ttft_ms: percentiles(results.iter().map(|r| r.ttft_ms).collect()),
            itl_ms: percentiles(results.iter().flat_map(|r| r.itl_ms.clone()).collect()),
            e2e_ms: percentiles(results.iter().map(|r| r.e2e_ms).collect()),
            waiting_max: Some(waiting),
            running_max: Some(running),
            status: Some(if errors == 0 {
                Status::Pass
            } else {
                Status::Fail
            }),
            ..Default::default()
        });
    }

    // Prefix cache: cold, warm (same prefix, other question), control (prefix changed).
    let prefix = words(120, &format!("prefix {}", std::process::id()));
    let control_prefix = words(120, &format!("changed prefix {}", std::process::id()));
    for (role, prompt) in [
        ("cold", format!("{prefix} Question: what is logged?")),
        ("warm", format!("{prefix} Question: how often?")),
        ("control", format!("{control_prefix} Question: how often?")),
    ] {
        let before = scrape(&client, base).await;
        let start = Instant::now();
        let body =
            serde_json::json!({"messages": [{"role": "user", "content": prompt}], "max_tokens": 4});
        let v: serde_json::Value = client
            .post(format!("{base}/v1/chat/completions"))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let ttft = start.elapsed().as_secs_f64() * 1000.0;
        let after = scrape(&client, base).await;
        let delta = |f: &str| match (&before, &after) {
            (Some(a), Some(b)) => golive::metrics::counter_delta(a, b, f),
            _ => None,
        };
        report.measurements.prefix_cache.push(PrefixCacheSample {
            role: role.into(),
            prompt_tokens: v["usage"]["prompt_tokens"].as_u64(),
            cached_tokens: v["usage"]["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .or_else(|| v["timings"]["cache_n"].as_u64()),
            prefill_ms: v["timings"]["prompt_ms"].as_f64(),
            ttft_ms: Some(ttft),
            hits_delta: delta("llamacpp:prompt_tokens_cached"),
            queries_delta: delta("llamacpp:prompt_tokens"),
        });
    }

    // Soak: 3 s at concurrency 2 on a shared prefix, sampled every 0.5 s.
    let soak_start = Instant::now();
    let first = scrape(&client, base).await;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut workers = Vec::new();
    for w in 0..2 {
        let (client, base, done, prefix) = (
            client.clone(),
            base.to_string(),
            done.clone(),
            prefix.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut ttfts = Vec::new();
            let mut n = 0;
            while soak_start.elapsed() < Duration::from_secs(3) {
                let t =
                    stream_chat(&client, &base, format!("{prefix} worker {w} turn {n}"), 6).await;
                ttfts.push(t.ttft_ms);
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                n += 1;
            }
            ttfts
        }));
    }
    while soak_start.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let (Some(a), Some(b)) = (&first, scrape(&client, base).await) {
            let hits = golive::metrics::counter_delta(a, &b, "llamacpp:prompt_tokens_cached");
            let computed = golive::metrics::counter_delta(a, &b, "llamacpp:prompt_tokens");
            report.measurements.soak.push(SoakSample {
                t_s: soak_start.elapsed().as_secs_f64(),
                requests_done: done.load(std::sync::atomic::Ordering::Relaxed),
                errors: 0,
                running: b.sum("llamacpp:requests_processing"),
                waiting: b.sum("llamacpp:requests_deferred"),
                kv_cache_usage: None,
                cache_hit_ratio: match (hits, computed) {
                    (Some(h), Some(c)) if h + c > 0.0 => Some(h / (h + c)),
                    _ => None,
                },
                ttft_p95_ms: None,
            });
        }
    }
    let mut soak_ttft = Vec::new();
    for w in workers {
        soak_ttft.extend(w.await.unwrap());
    }

    let warm = report
        .measurements
        .prefix_cache
        .iter()
        .find(|s| s.role == "warm")
        .cloned()
        .unwrap();
    let control = report
        .measurements
        .prefix_cache
        .iter()
        .find(|s| s.role == "control")
        .cloned()
        .unwrap();
    let mut c = Check::new(
        "prefix_cache",
        Stage::PrefixCache,
        Status::Pass,
        "warm request reuses the cached prefix; control does not",
    );
    c.measurement = format!(
        "warm cached {:?} of {:?} prompt tokens, control cached {:?}",
        warm.cached_tokens, warm.prompt_tokens, control.cached_tokens
    );
    if warm.cached_tokens.unwrap_or(0) <= control.cached_tokens.unwrap_or(0) {
        c.status = Status::Fail;
    }
    c.impact = Impact::Capacity;
    report.checks.push(c);
    for s in &report.measurements.ramp {
        let mut c = Check::new(
            format!("ramp_c{}_{}", s.concurrency, s.prompt_tokens),
            Stage::Ramp,
            s.status.unwrap_or(Status::Pass),
            format!("{} requests at concurrency {}", s.requests, s.concurrency),
        );
        c.measurement = format!(
            "TTFT p95 {:.0} ms, ITL p95 {:.0} ms, {} errors",
            s.ttft_ms.p95, s.itl_ms.p95, s.errors
        );
        c.impact = Impact::Capacity;
        report.checks.push(c);
    }
    let mut soak = Check::new(
        "soak",
        Stage::Soak,
        Status::Pass,
        "3 s at concurrency 2 on a shared prefix",
    );
    soak.measurement = format!(
        "{} requests, TTFT p95 {:.0} ms",
        soak_ttft.len(),
        percentiles(soak_ttft.clone()).p95
    );
    report.checks.push(soak);
    let last = report.measurements.ramp.last().cloned().unwrap_or_default();
    report.baseline.ttft_p50_ms = Some(last.ttft_ms.p50);
    report.baseline.ttft_p95_ms = Some(last.ttft_ms.p95);
    report.baseline.itl_p95_ms = Some(last.itl_ms.p95);
    report.baseline.accepted_concurrency = Some(last.concurrency);
    report.baseline.prefill_warm_ms = warm.prefill_ms;
    report.baseline.cache_hit_ratio = report
        .measurements
        .soak
        .last()
        .and_then(|s| s.cache_hit_ratio);
    report.complete = true;
    report.finished_at = Some(chrono::Utc::now());
    report.decide();
    report
}

#[test]
fn real_run_report_renders_in_headless_chromium_with_visible_charts() {
    if chromium().is_none() {
        return;
    }
    let report = match std::env::var("GOLIVE_HTML_REPORT") {
        Ok(p) => Report::load(Path::new(&p)).unwrap(),
        Err(_) => {
            let url = common::local_server_url();
            let rt = tokio::runtime::Runtime::new().unwrap();
            let r = rt.block_on(tiny_run(&url));
            let dir = common::repo_root().join("target/html-test/real");
            std::fs::create_dir_all(&dir).unwrap();
            r.save_json(&dir).unwrap();
            r
        }
    };
    assert!(
        !report.measurements.ramp.is_empty(),
        "the report has no ramp to chart"
    );
    // TTFT/ITL lines (p50, p95, p99) and the prefix-cache bars must be visible.
    let png = render_and_check(
        &report,
        "real",
        &["#1f77b4", "#ff7f0e", "#d62728", "#9467bd", "#2ca02c"],
    );
    eprintln!("screenshot: {}", png.display());
}

#[test]
fn constructed_report_with_every_chart_and_hostile_text_renders() {
    let mut r = Report::new(vec!["http://10.0.0.1:8000/<b>".into()]);
    r.model = Some("kimi-k3 <img src=x>".into());
    r.operator = Some("alice".into());
    r.reviewer = Some("bob & carol".into());
    for (i, c) in [1u32, 2, 4, 8, 16, 32].into_iter().enumerate() {
        let f = (i + 1) as f64;
        let p = |base: f64| Percentiles {
            count: 10,
            mean: base,
            p50: base,
            p90: base * 1.5,
            p95: base * 1.8,
            p99: base * 2.5,
            max: base * 3.0,
        };
        r.measurements.ramp.push(RampStep {
            label: format!("step {i}"),
            concurrency: c,
            prompt_tokens: 1000 * c,
            ttft_ms: p(100.0 * f),
            itl_ms: p(20.0 + 3.0 * f),
            kv_cache_usage: Some(0.1 * f),
            waiting_max: Some(f - 1.0),
            running_max: Some(c as f64),
            ..Default::default()
        });
    }
    for t in 0..20 {
        let t = t as f64;
        r.measurements.soak.push(SoakSample {
            t_s: t * 30.0,
            kv_cache_usage: Some(0.5 + t / 100.0),
            cache_hit_ratio: Some(0.8),
            waiting: Some((t / 4.0).floor()),
            running: Some(16.0),
            ..Default::default()
        });
    }
    for (role, cached, prefill) in [
        ("cold", 0u64, 1530.0),
        ("warm", 335, 157.0),
        ("control", 0, 1490.0),
    ] {
        r.measurements.prefix_cache.push(PrefixCacheSample {
            role: role.into(),
            prompt_tokens: Some(365),
            cached_tokens: Some(cached),
            prefill_ms: Some(prefill),
            ttft_ms: Some(prefill + 20.0),
            ..Default::default()
        });
    }
    let mut c = Check::new(
        "agent_tool_schema",
        Stage::Agent,
        Status::Fail,
        "tool call </td></tr><script>x</script>",
    );
    c.evidence = "line 1\n<script>alert('x')</script>".into();
    r.checks.push(c);
    r.decide();
    let html = golive::report::html::render(&r);
    assert!(!html.contains("<script"), "unescaped text");
    assert!(html.contains("Verdict: OBSERVE"), "verdict at the top");
    assert!(html.find("Verdict:").unwrap() < html.find("id=\"checklist\"").unwrap());
    let png = render_and_check(
        &r,
        "constructed",
        &[
            "#1f77b4", "#ff7f0e", "#d62728", "#2ca02c", "#9467bd", "#17becf",
        ],
    );
    eprintln!("screenshot: {}", png.display());
}
