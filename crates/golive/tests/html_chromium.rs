//! report.html in headless Chromium: the page renders (DOM with the SVG charts, no
//! console errors), and a screenshot shows the charts (PNG decoded, chart colours
//! counted). The page is the report.html that the real `golive accept` binary wrote
//! after a short run against the local llama-server (port 18239), or that of the run
//! named by `GOLIVE_HTML_REPORT` (its report.json or directory); a second test renders
//! a constructed report with every chart and hostile text.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use golive::report::{
    Check, Percentiles, PrefixCacheSample, RampStep, Report, SoakSample, Stage, Status,
};

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
    common::skip(
        "chromium is not installed (Debian package chromium; scripts/test.sh installs it)",
    );
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

/// Where the pages and screenshots stay after the run (cargo's temporary folder for
/// integration tests, inside the target folder in use).
fn html_test_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-test")
}

fn hex_rgb(c: &str) -> [u8; 3] {
    let v = u32::from_str_radix(c.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

/// Loads a report page in Chromium, screenshots it, and checks the charts.
/// Returns the screenshot path (kept for people to look at under target/tmp/html-test).
fn check_page(html: &str, name: &str, expect_colors: &[&str]) -> PathBuf {
    let Some(bin) = chromium() else {
        return PathBuf::new();
    };
    let out_dir = html_test_dir().join(name);
    std::fs::create_dir_all(&out_dir).unwrap();
    // Self-contained: nothing to fetch.
    for needle in [" src=\"", " href=\"", "@import", "url(", "<script", "<link"] {
        assert!(!html.contains(needle), "report.html contains {needle}");
    }
    let page = out_dir.join("report.html");
    std::fs::write(&page, html).unwrap();

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

// ---- a real acceptance run against the local server -----------------------

/// Runs the real `golive accept` binary with small load settings against a local
/// llama-server on port 18239 (stopped afterwards); returns its output directory.
fn real_accept_run(out: &Path) -> PathBuf {
    let port = 18239;
    let _guard = common::ServerGuard(port);
    let url = common::start_local_server(port, &[]);
    let o = common::small_local_accept(&url, out, &[]);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "golive accept: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    out.to_path_buf()
}

#[test]
fn real_run_report_renders_in_headless_chromium_with_visible_charts() {
    if chromium().is_none() {
        return;
    }
    // GOLIVE_HTML_REPORT: a report.json (or its directory) of an earlier run.
    let dir = match std::env::var("GOLIVE_HTML_REPORT") {
        Ok(p) => {
            let p = PathBuf::from(p);
            if p.is_dir() {
                p
            } else {
                p.parent().unwrap().to_path_buf()
            }
        }
        Err(_) => {
            let out = html_test_dir().join("real-run");
            let _ = std::fs::remove_dir_all(&out);
            real_accept_run(&out)
        }
    };
    let report = Report::load(&dir.join("report.json")).unwrap();
    assert!(report.complete, "the run did not finish");
    assert!(
        !report.measurements.ramp.is_empty(),
        "the report has no ramp to chart"
    );
    assert!(
        !report.measurements.prefix_cache.is_empty(),
        "the report has no prefix-cache samples to chart"
    );
    // The page golive accept wrote, as it is, not rendered again here.
    let page = dir.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap_or_else(|e| {
        panic!("{}: {e}", page.display());
    });
    // TTFT/ITL lines (p50, p95, p99) and the prefix-cache bars must be visible.
    let png = check_page(
        &html,
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
            // The longest silence grows with the step (server-owned: above 10 s from step 4);
            // step 5 has a short one inside a tool call.
            stream_gap_ms: p(800.0 * f),
            tool_call_gap_max_ms: (c == 32).then_some(3_000.0),
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
    let gap_rows: Vec<golive::accept::silence::GapRow> = r
        .measurements
        .ramp
        .iter()
        .map(golive::accept::silence::GapRow::from_step)
        .collect();
    let silence =
        golive::accept::silence::check(&gap_rows, std::time::Duration::from_secs(10), "u")
            .expect("rows give a check");
    assert_eq!(silence.status, Status::Fail, "{}", silence.measurement);
    r.checks.push(silence);
    r.decide();
    let html = golive::report::html::render(&r);
    // The stream-silence bars: one group per step, drawn from the check's data.
    let fig = html
        .split("<figure>")
        .find(|f| f.contains("Stream silence"))
        .expect("a stream-silence chart");
    assert!(!fig.contains("no data"), "{fig}");
    assert_eq!(fig.matches("<rect class=\"series\"").count(), 13, "{fig}");
    assert!(!html.contains("<script"), "unescaped text");
    assert!(html.contains("Verdict: OBSERVE"), "verdict at the top");
    assert!(html.find("Verdict:").unwrap() < html.find("id=\"checklist\"").unwrap());
    let png = check_page(
        &html,
        "constructed",
        &[
            "#1f77b4", "#ff7f0e", "#d62728", "#2ca02c", "#9467bd", "#17becf",
        ],
    );
    eprintln!("screenshot: {}", png.display());
}
