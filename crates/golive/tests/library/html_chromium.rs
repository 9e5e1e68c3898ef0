//! report.html in headless Chromium (common::chromium): a constructed report with every
//! chart and hostile text renders, with its charts visible. The report of a real run is
//! rendered by integration_accept_local.rs, on the run it accepts; an earlier run's can
//! be checked here with `GOLIVE_HTML_REPORT=DIR cargo test -p golive --test library html_chromium -- --ignored`.

use crate::common;

use std::path::PathBuf;

use common::chromium::check_page;
use golive::report::{
    Check, Percentiles, PrefixCacheSample, RampStep, Report, SoakSample, Stage, Status,
};

/// The report.html of an earlier run: `GOLIVE_HTML_REPORT` names its report.json or its
/// directory.
#[test]
#[ignore = "renders the run GOLIVE_HTML_REPORT names"]
fn an_earlier_run_renders_in_headless_chromium_with_visible_charts() {
    let p =
        PathBuf::from(std::env::var("GOLIVE_HTML_REPORT").expect("GOLIVE_HTML_REPORT names a run"));
    let dir = if p.is_dir() {
        p
    } else {
        p.parent().unwrap().to_path_buf()
    };
    common::chromium::check_real_run(&dir, "earlier-run");
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
    let gap_rows: Vec<golive::accept::GapRow> = r
        .measurements
        .ramp
        .iter()
        .map(golive::accept::GapRow::from_step)
        .collect();
    let silence = golive::accept::silence_check(&gap_rows, std::time::Duration::from_secs(10), "u")
        .expect("rows give a check");
    assert_eq!(silence.status, Status::Fail, "{}", silence.measurement);
    r.checks.push(silence);
    r.decide();
    r.complete = true;
    let items = golive::profile::Profile::generic().worksheet_items();
    r.worksheet = golive::report::evaluate_worksheet(&items, &r);
    let html = golive::report::render_html(&r);
    // The worksheet: every item a row, the failed tool item linked to its check.
    let ws = html
        .split("<section id=\"worksheet\">")
        .nth(1)
        .expect("a worksheet section");
    let ws = &ws[..ws.find("</section>").unwrap()];
    assert_eq!(ws.matches("<tr id=\"item-").count(), 20, "{ws}");
    assert!(ws.contains("href=\"#check-agent_tool_schema\""), "{ws}");
    assert!(html.contains("id=\"check-agent_tool_schema\""));
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
