//! Headless Chromium on a report.html: the page renders (DOM with the SVG charts, no
//! console errors), and a screenshot shows the charts (PNG decoded, chart colours counted).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The TTFT/ITL lines (p50, p95, p99) and the prefix-cache bars of a real run's report.
pub const REAL_RUN_COLOURS: &[&str] = &["#1f77b4", "#ff7f0e", "#d62728", "#9467bd", "#2ca02c"];

/// Checks the report.html that `golive accept` wrote in `dir`, as it is (not rendered
/// again), in Chromium; `name` names the screenshot's folder. Skips (fails under
/// `CI=true`) without Chromium.
pub fn check_real_run(dir: &Path, name: &str) {
    let report = golive::report::Report::load(&dir.join("report.json")).unwrap();
    assert!(report.complete, "the run did not finish");
    assert!(
        !report.measurements.ramp.is_empty(),
        "the report has no ramp to chart"
    );
    assert!(
        !report.measurements.prefix_cache.is_empty(),
        "the report has no prefix-cache samples to chart"
    );
    let page = dir.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap_or_else(|e| {
        panic!("{}: {e}", page.display());
    });
    let png = check_page(&html, name, REAL_RUN_COLOURS);
    eprintln!("screenshot: {}", png.display());
}

pub fn chromium() -> Option<&'static str> {
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
    super::skip("chromium is not installed (Debian package chromium; scripts/test.sh installs it)");
    None
}

/// Runs headless Chromium with `extra` on `page`; returns (stdout, stderr).
pub fn run_chromium(bin: &str, page: &Path, extra: &[String]) -> (String, String) {
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
pub fn html_test_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-test")
}

fn hex_rgb(c: &str) -> [u8; 3] {
    let v = u32::from_str_radix(c.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

/// Loads a report page in Chromium, screenshots it, and checks the charts.
/// Returns the screenshot path (kept for people to look at under target/tmp/html-test).
pub fn check_page(html: &str, name: &str, expect_colors: &[&str]) -> PathBuf {
    let Some(bin) = chromium() else {
        return PathBuf::new();
    };
    let out_dir = html_test_dir().join(name);
    std::fs::create_dir_all(&out_dir).unwrap();
    // Self-contained: nothing to fetch.
    for needle in [" src=\"", "@import", "url(", "<script", "<link"] {
        assert!(!html.contains(needle), "report.html contains {needle}");
    }
    // Links only within the page (the worksheet's links to its checks).
    for (i, _) in html.match_indices(" href=\"") {
        assert!(
            html[i + 7..].starts_with('#'),
            "report.html links out: {}",
            &html[i..(i + 60).min(html.len())]
        );
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
    if html.contains("id=\"worksheet\"") {
        assert!(
            dom.contains("id=\"worksheet\""),
            "the worksheet is not in the DOM"
        );
    }

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
