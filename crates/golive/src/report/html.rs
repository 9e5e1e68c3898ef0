//! Self-contained HTML rendering of a report: one file, no network, no script; inline
//! CSS and inline SVG charts drawn here. Every piece of text from the report is
//! escaped.

use std::fmt::Write;

use super::{Check, Report, Status, Verdict};

/// What a sign-off's hashes say about the files now (from `signoff::verify`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Integrity {
    /// Index into `report.signoffs`.
    pub signoff: usize,
    /// Covered files whose content changed since the sign-off.
    pub changed: Vec<String>,
    pub removed: Vec<String>,
    /// Evidence files that appeared after the sign-off.
    pub added: Vec<String>,
}

impl Integrity {
    pub fn intact(&self) -> bool {
        self.changed.is_empty() && self.removed.is_empty() && self.added.is_empty()
    }
}

/// Renders the report as one HTML file that needs no network.
pub fn render(report: &Report) -> String {
    render_with_integrity(report, None)
}

/// Like [`render`], and shows for each sign-off whether the files it covers changed.
pub fn render_with_integrity(report: &Report, integrity: Option<&[Integrity]>) -> String {
    let mut h = String::with_capacity(64 * 1024);
    let verdict = report.verdict;
    let verdict_text = verdict.map(|v| v.as_str()).unwrap_or("no verdict");
    let title = format!(
        "golive acceptance: {} — {}",
        verdict_text,
        report.model.as_deref().unwrap_or("model unknown")
    );
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{CSS}</style></head><body>\n",
        esc(&title)
    );
    header(&mut h, report, verdict);
    signoffs(&mut h, report, integrity);
    charts(&mut h, report);
    baseline(&mut h, report);
    checklist(&mut h, &report.checks);
    let _ = write!(
        h,
        "<footer>golive {} (commit {}) · report schema {} · started {}{}</footer>\n</body></html>\n",
        esc(&report.tool_version),
        esc(if report.tool_commit.is_empty() {
            "unknown"
        } else {
            &report.tool_commit
        }),
        report.schema_version,
        esc(&report.started_at.to_rfc3339()),
        report
            .finished_at
            .map(|f| format!(" · finished {}", esc(&f.to_rfc3339())))
            .unwrap_or_default()
    );
    h
}

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const CSS: &str = "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2329;background:#fff}\
header.verdict{padding:18px 28px;color:#fff}\
.v-release{background:#1a7f37}.v-observe{background:#9a6700}.v-rebuild{background:#cf222e}.v-expand{background:#8250df}.v-none{background:#57606a}\
header h1{margin:0 0 4px;font-size:28px;letter-spacing:.5px}header p{margin:0 0 10px}\
header dl{display:grid;grid-template-columns:max-content auto;gap:2px 14px;margin:0}header dt{opacity:.85}header dd{margin:0;font-weight:600}\
section{padding:8px 28px}h2{font-size:18px;border-bottom:1px solid #d0d7de;padding-bottom:4px}\
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:14px}\
figure{margin:0;border:1px solid #d0d7de;border-radius:6px;padding:6px}figure svg{width:100%;height:auto;display:block}\
figcaption{font-weight:600;margin:2px 4px 4px}\
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #d0d7de;padding:4px 6px;text-align:left;vertical-align:top}\
th{background:#f6f8fa}.st{font-weight:700;border-radius:4px;padding:1px 6px;color:#fff;white-space:nowrap}\
.st-pass{background:#1a7f37}.st-warn{background:#9a6700}.st-fail{background:#cf222e}.st-skip{background:#8c959f}.st-unknown{background:#57606a}\
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:6px;margin:4px 0;max-height:240px;overflow:auto}\
.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:700}footer{color:#57606a;padding:16px 28px}";

fn header(h: &mut String, report: &Report, verdict: Option<Verdict>) {
    let class = verdict.map(|v| v.as_str()).unwrap_or("none");
    let _ = write!(
        h,
        "<header class=\"verdict v-{class}\" id=\"verdict\"><h1>Verdict: {}</h1><p>{}</p><dl>",
        esc(&verdict
            .map(|v| v.as_str().to_uppercase())
            .unwrap_or_else(|| "NONE".into())),
        esc(if report.verdict_reason.is_empty() {
            if report.complete {
                "no reason recorded"
            } else {
                "the run did not complete"
            }
        } else {
            &report.verdict_reason
        })
    );
    let mut row = |k: &str, v: &str| {
        let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    };
    row(
        "Ran it",
        report.operator.as_deref().unwrap_or("not recorded"),
    );
    let mut reviewers: Vec<String> = report.reviewer.iter().cloned().collect();
    for s in &report.signoffs {
        if !reviewers.contains(&s.reviewer) {
            reviewers.push(s.reviewer.clone());
        }
    }
    row(
        "Reviewed by",
        &if reviewers.is_empty() {
            "nobody yet (golive signoff)".to_string()
        } else {
            reviewers.join(", ")
        },
    );
    row("Model", report.model.as_deref().unwrap_or("unknown"));
    row("Engine", report.engine.as_deref().unwrap_or("unknown"));
    row("Server", &report.urls.join(", "));
    if let Some(p) = &report.profile {
        row("Profile", p);
    }
    row(
        "Run",
        &format!(
            "{}{}",
            report.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
            if report.complete { "" } else { " (incomplete)" }
        ),
    );
    h.push_str("</dl></header>\n");
}

fn signoffs(h: &mut String, report: &Report, integrity: Option<&[Integrity]>) {
    h.push_str("<section id=\"signoffs\"><h2>Sign-off</h2>");
    if report.signoffs.is_empty() {
        h.push_str("<p>Not signed off yet: a second person reviews the measurements and logs with <code>golive signoff DIR --reviewer NAME</code>.</p></section>\n");
        return;
    }
    h.push_str("<table><tr><th>Reviewer</th><th>Decision</th><th>At</th><th>Note</th><th>Files covered</th><th>Integrity</th></tr>");
    for (i, s) in report.signoffs.iter().enumerate() {
        let state = match integrity.and_then(|all| all.iter().find(|x| x.signoff == i)) {
            None => "<span>not verified in this rendering</span>".to_string(),
            Some(x) if x.intact() => {
                "<span class=\"ok\">intact: every covered file unchanged</span>".to_string()
            }
            Some(x) => {
                let mut parts = Vec::new();
                if !x.changed.is_empty() {
                    parts.push(format!("changed: {}", x.changed.join(", ")));
                }
                if !x.removed.is_empty() {
                    parts.push(format!("removed: {}", x.removed.join(", ")));
                }
                if !x.added.is_empty() {
                    parts.push(format!("added: {}", x.added.join(", ")));
                }
                format!(
                    "<span class=\"bad\">CHANGED since sign-off — {}</span>",
                    esc(&parts.join("; "))
                )
            }
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{state}</td></tr>",
            esc(&s.reviewer),
            esc(s.decision.as_str()),
            esc(&s.at.format("%Y-%m-%d %H:%M:%S UTC").to_string()),
            esc(&s.note),
            s.covered.len()
        );
    }
    h.push_str("</table></section>\n");
}

/// The numbers `golive watch` and `golive rules` judge production against.
fn baseline(h: &mut String, report: &Report) {
    h.push_str("<section id=\"baseline\"><h2>Accepted baseline (for golive watch and golive rules)</h2><table>");
    for (k, v) in report.baseline.rows() {
        let _ = write!(
            h,
            "<tr><th>{}</th><td>{}</td></tr>",
            esc(k),
            esc(v.as_deref().unwrap_or("not measured"))
        );
    }
    h.push_str("</table></section>\n");
}

fn checklist(h: &mut String, checks: &[Check]) {
    let _ = write!(
        h,
        "<section id=\"checklist\"><h2>Checklist ({} checks)</h2><table><tr><th>Status</th><th>Check</th><th>Test case</th><th>Measurement</th><th>Owner / next step</th><th>Reviewer</th></tr>",
        checks.len()
    );
    for c in checks {
        let status = status_str(c.status);
        let evidence = if c.evidence.is_empty() {
            String::new()
        } else {
            format!(
                "<details><summary>evidence</summary><pre>{}</pre></details>",
                esc(&c.evidence)
            )
        };
        let owner = c
            .owner
            .and_then(|o| serde_json::to_value(o).ok())
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = write!(
            h,
            "<tr><td><span class=\"st st-{status}\">{}</span></td><td><code>{}</code><br><small>{}</small></td><td>{}</td><td>{}{evidence}</td><td>{}{}{}</td><td>{}</td></tr>",
            status.to_uppercase(),
            esc(&c.id),
            esc(&serde_json::to_value(c.stage).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()),
            esc(&c.test_case),
            esc(&c.measurement),
            esc(&owner),
            if owner.is_empty() || c.next_step.is_empty() { "" } else { ": " },
            esc(&c.next_step),
            esc(c.reviewer.as_deref().unwrap_or("")),
        );
    }
    h.push_str("</table></section>\n");
}

fn status_str(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Warn => "warn",
        Status::Fail => "fail",
        Status::Skip => "skip",
        Status::Unknown => "unknown",
    }
}

// ---- charts ---------------------------------------------------------------

/// Series colours; the Chromium test looks for them in the screenshot.
pub const COLORS: [&str; 6] = [
    "#1f77b4", "#ff7f0e", "#d62728", "#2ca02c", "#9467bd", "#17becf",
];

struct Series {
    name: String,
    color: &'static str,
    points: Vec<(f64, f64)>,
}

fn series(name: &str, color: &'static str, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.to_string(),
        color,
        points: points.into_iter().filter(|p| p.1.is_finite()).collect(),
    }
}

fn charts(h: &mut String, report: &Report) {
    let m = &report.measurements;
    h.push_str("<section id=\"charts\"><h2>Charts</h2><div class=\"grid\">");
    // Ramp: one x position per step, labelled with its concurrency and prompt size.
    let ramp_ticks: Vec<(f64, String)> = m
        .ramp
        .iter()
        .enumerate()
        .map(|(i, s)| {
            (
                i as f64,
                format!("c{}·{}", s.concurrency, short_tokens(s.prompt_tokens)),
            )
        })
        .collect();
    let idx = |f: &dyn Fn(&super::RampStep) -> Option<f64>| -> Vec<(f64, f64)> {
        m.ramp
            .iter()
            .enumerate()
            .filter_map(|(i, s)| f(s).map(|v| (i as f64, v)))
            .collect()
    };
    let pct = |p: &super::Percentiles, which: u8| -> Option<f64> {
        (p.count > 0).then_some(match which {
            50 => p.p50,
            95 => p.p95,
            _ => p.p99,
        })
    };
    let x_ramp = "ramp step (concurrency · prompt tokens)";
    h.push_str(&line_chart(
        "TTFT percentiles over the ramp",
        x_ramp,
        "ms",
        Some(&ramp_ticks),
        &[
            series("p50", COLORS[0], idx(&|s| pct(&s.ttft_ms, 50))),
            series("p95", COLORS[1], idx(&|s| pct(&s.ttft_ms, 95))),
            series("p99", COLORS[2], idx(&|s| pct(&s.ttft_ms, 99))),
        ],
    ));
    h.push_str(&line_chart(
        "Inter-token latency percentiles over the ramp",
        x_ramp,
        "ms",
        Some(&ramp_ticks),
        &[
            series("p50", COLORS[0], idx(&|s| pct(&s.itl_ms, 50))),
            series("p95", COLORS[1], idx(&|s| pct(&s.itl_ms, 95))),
            series("p99", COLORS[2], idx(&|s| pct(&s.itl_ms, 99))),
        ],
    ));
    h.push_str(&line_chart(
        "KV-cache usage over the ramp",
        x_ramp,
        "% used",
        Some(&ramp_ticks),
        &[series(
            "KV cache",
            COLORS[3],
            idx(&|s| s.kv_cache_usage.map(|v| v * 100.0)),
        )],
    ));
    h.push_str(&line_chart(
        "Waiting and running requests over the ramp",
        x_ramp,
        "requests",
        Some(&ramp_ticks),
        &[
            series("waiting (max)", COLORS[4], idx(&|s| s.waiting_max)),
            series("running (max)", COLORS[0], idx(&|s| s.running_max)),
        ],
    ));
    if m.ramp.iter().any(|s| s.agent.is_some()) {
        h.push_str(&line_chart(
            "Agent conformance over the ramp (--agent-mix)",
            x_ramp,
            "% conformant",
            Some(&ramp_ticks),
            &[series(
                "conformant answers",
                COLORS[1],
                idx(&|s| s.agent.as_ref().and_then(|a| a.rate()).map(|r| r * 100.0)),
            )],
        ));
    }
    let soak = |f: &dyn Fn(&super::SoakSample) -> Option<f64>| -> Vec<(f64, f64)> {
        m.soak
            .iter()
            .filter_map(|s| f(s).map(|v| (s.t_s, v)))
            .collect()
    };
    h.push_str(&line_chart(
        "KV-cache usage and cache hits during the soak",
        "seconds into the soak",
        "%",
        None,
        &[
            series(
                "KV cache used",
                COLORS[3],
                soak(&|s| s.kv_cache_usage.map(|v| v * 100.0)),
            ),
            series(
                "prefix-cache hits",
                COLORS[5],
                soak(&|s| s.cache_hit_ratio.map(|v| v * 100.0)),
            ),
        ],
    ));
    h.push_str(&line_chart(
        "Waiting and running requests during the soak",
        "seconds into the soak",
        "requests",
        None,
        &[
            series("waiting", COLORS[4], soak(&|s| s.waiting)),
            series("running", COLORS[0], soak(&|s| s.running)),
        ],
    ));
    let roles: Vec<String> = m.prefix_cache.iter().map(|s| s.role.clone()).collect();
    let by_role = |f: &dyn Fn(&super::PrefixCacheSample) -> Option<f64>| -> Vec<(f64, f64)> {
        m.prefix_cache
            .iter()
            .enumerate()
            .filter_map(|(i, s)| f(s).map(|v| (i as f64, v)))
            .collect()
    };
    h.push_str(&bar_chart(
        "Prefix cache: prefill time (cold, warm, control)",
        "ms",
        &roles,
        &[
            series("prefill", COLORS[1], by_role(&|s| s.prefill_ms)),
            series("TTFT", COLORS[0], by_role(&|s| s.ttft_ms)),
        ],
    ));
    h.push_str(&bar_chart(
        "Prefix cache: cached of prompt tokens",
        "tokens",
        &roles,
        &[
            series(
                "prompt",
                COLORS[4],
                by_role(&|s| s.prompt_tokens.map(|v| v as f64)),
            ),
            series(
                "cached",
                COLORS[3],
                by_role(&|s| s.cached_tokens.map(|v| v as f64)),
            ),
        ],
    ));
    stream_silence_chart(h, report);
    h.push_str("</div></section>\n");
}

/// The longest gap between output deltas per ramp step and soak (p99, max), and the
/// part of it inside tool calls, from the `stream_silence` check.
fn stream_silence_chart(h: &mut String, report: &Report) {
    let rows = report
        .checks
        .iter()
        .find(|c| c.id == "stream_silence")
        .and_then(|c| c.data["rows"].as_array().cloned())
        .unwrap_or_default();
    let labels: Vec<String> = rows
        .iter()
        .map(|r| r["label"].as_str().unwrap_or("").to_string())
        .collect();
    let field = |key: &str| -> Vec<(f64, f64)> {
        rows.iter()
            .enumerate()
            .filter_map(|(i, r)| r[key].as_f64().map(|v| (i as f64, v)))
            .collect()
    };
    h.push_str(&bar_chart(
        "Stream silence: longest gap between deltas per step",
        "ms",
        &labels,
        &[
            series("p99", COLORS[0], field("p99_ms")),
            series("max", COLORS[2], field("max_ms")),
            series(
                "inside a tool call (max)",
                COLORS[4],
                field("tool_call_max_ms"),
            ),
        ],
    ));
}

fn short_tokens(n: u32) -> String {
    if n >= 1000 {
        format!("{}k", (n as f64 / 1000.0 * 10.0).round() / 10.0)
    } else {
        n.to_string()
    }
}

const W: f64 = 560.0;
const H: f64 = 300.0;
const ML: f64 = 62.0;
const MR: f64 = 16.0;
const MT: f64 = 30.0;
const MB: f64 = 58.0;

/// A "nice" upper bound and tick step for `0..max`.
fn nice_axis(max: f64) -> (f64, f64) {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

fn fmt_tick(v: f64) -> String {
    if v.abs() >= 10000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Value printed above a bar: whole numbers from 100 up, so neighbours do not collide.
fn bar_label(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        fmt_tick(v)
    }
}

fn svg_open(out: &mut String, title: &str, y_label: &str) {
    let _ = write!(
        out,
        "<figure><figcaption>{}</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{}\" font-family=\"system-ui,sans-serif\" font-size=\"11\">\
         <rect x=\"0\" y=\"0\" width=\"{W}\" height=\"{H}\" fill=\"#fff\"/>\
         <text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\" fill=\"#57606a\">{}</text>",
        esc(title),
        esc(title),
        MT + (H - MT - MB) / 2.0,
        MT + (H - MT - MB) / 2.0,
        esc(y_label)
    );
}

fn no_data(out: &mut String) {
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#8c959f\" font-size=\"14\">no data in this report</text>",
        W / 2.0,
        H / 2.0
    );
}

/// Horizontal grid lines and y tick labels; returns the y mapping's upper bound.
fn y_axis(out: &mut String, max: f64) -> f64 {
    let (top, step) = nice_axis(max);
    let plot_h = H - MT - MB;
    let mut v = 0.0;
    while v <= top + step * 1e-6 {
        let y = MT + plot_h - v / top * plot_h;
        let _ = write!(
            out,
            "<line x1=\"{ML}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eaeef2\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#57606a\">{}</text>",
            W - MR,
            ML - 6.0,
            y + 4.0,
            fmt_tick(v)
        );
        v += step;
    }
    let _ = write!(
        out,
        "<line x1=\"{ML}\" x2=\"{ML}\" y1=\"{MT}\" y2=\"{}\" stroke=\"#57606a\"/><line x1=\"{ML}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#57606a\"/>",
        H - MB,
        W - MR,
        H - MB,
        H - MB
    );
    top
}

fn legend(out: &mut String, series: &[Series]) {
    let mut x = ML + 4.0;
    for s in series.iter().filter(|s| !s.points.is_empty()) {
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"8\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{:.1}\" y=\"18\" fill=\"#1d2329\">{}</text>",
            s.color,
            x + 16.0,
            esc(&s.name)
        );
        x += 24.0 + 7.0 * s.name.chars().count() as f64;
    }
}

fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    ticks: Option<&[(f64, String)]>,
    series: &[Series],
) -> String {
    let mut out = String::new();
    svg_open(&mut out, title, y_label);
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    if all.is_empty() {
        no_data(&mut out);
        out.push_str("</svg></figure>");
        return out;
    }
    let y_top = y_axis(&mut out, all.iter().map(|p| p.1).fold(0.0, f64::max));
    let (mut x_min, mut x_max) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
    if let Some(t) = ticks {
        for (x, _) in t {
            x_min = x_min.min(*x);
            x_max = x_max.max(*x);
        }
    }
    if x_max <= x_min {
        x_min -= 0.5;
        x_max += 0.5;
    }
    let plot_w = W - ML - MR - 20.0;
    let plot_h = H - MT - MB;
    let px = |x: f64| ML + 10.0 + (x - x_min) / (x_max - x_min) * plot_w;
    let py = |y: f64| MT + plot_h - y / y_top * plot_h;
    // x ticks: the given labels, else five evenly spaced values.
    let x_ticks: Vec<(f64, String)> = match ticks {
        Some(t) => t.to_vec(),
        None => {
            // Round ticks: multiples of a nice step inside the range.
            let (_, step) = nice_axis(x_max - x_min);
            let mut x = (x_min / step).ceil() * step;
            let mut t = Vec::new();
            while x <= x_max + step * 1e-6 {
                t.push((x, fmt_tick(x)));
                x += step;
            }
            t
        }
    };
    let every = x_ticks.len().div_ceil(10).max(1);
    for (i, (x, label)) in x_ticks.iter().enumerate() {
        if i % every != 0 {
            continue;
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" fill=\"#57606a\">{}</text>",
            px(*x),
            H - MB + 16.0,
            esc(label)
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" fill=\"#57606a\">{}</text>",
        ML + plot_w / 2.0,
        H - 12.0,
        esc(x_label)
    );
    for s in series {
        if s.points.is_empty() {
            continue;
        }
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1)))
            .collect();
        let _ = write!(
            out,
            "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"3\" points=\"{}\"><title>{}</title></polyline>",
            s.color,
            pts.join(" "),
            esc(&s.name)
        );
        for p in &s.points {
            let _ = write!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{}\"><title>{}: {}</title></circle>",
                px(p.0),
                py(p.1),
                s.color,
                esc(&s.name),
                fmt_tick(p.1)
            );
        }
    }
    legend(&mut out, series);
    out.push_str("</svg></figure>");
    out
}

fn bar_chart(title: &str, y_label: &str, categories: &[String], series: &[Series]) -> String {
    let mut out = String::new();
    svg_open(&mut out, title, y_label);
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    if categories.is_empty() || all.is_empty() {
        no_data(&mut out);
        out.push_str("</svg></figure>");
        return out;
    }
    let y_top = y_axis(&mut out, all.iter().map(|p| p.1).fold(0.0, f64::max));
    let plot_w = W - ML - MR;
    let plot_h = H - MT - MB;
    let group_w = plot_w / categories.len() as f64;
    let bar_w = (group_w * 0.7) / series.len().max(1) as f64;
    for (ci, cat) in categories.iter().enumerate() {
        let gx = ML + group_w * ci as f64;
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" fill=\"#1d2329\">{}</text>",
            gx + group_w / 2.0,
            H - MB + 16.0,
            esc(cat)
        );
        for (si, s) in series.iter().enumerate() {
            let Some((_, v)) = s.points.iter().find(|p| p.0 as usize == ci) else {
                continue;
            };
            let bh = v / y_top * plot_h;
            let x = gx + group_w * 0.15 + bar_w * si as f64;
            let _ = write!(
                out,
                "<rect class=\"series\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{} {}: {}</title></rect>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#1d2329\" font-size=\"10\">{}</text>",
                MT + plot_h - bh,
                bar_w - 2.0,
                s.color,
                esc(cat),
                esc(&s.name),
                fmt_tick(*v),
                x + bar_w / 2.0 - 1.0,
                MT + plot_h - bh - 3.0,
                bar_label(*v)
            );
        }
    }
    legend(&mut out, series);
    out.push_str("</svg></figure>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Check, Stage};

    #[test]
    fn text_from_the_report_is_escaped() {
        let mut r = Report::new(vec!["http://x/<y>".into()]);
        r.model = Some("<script>alert(1)</script>".into());
        let mut c = Check::new("a&b", Stage::Basic, Status::Fail, "quote \" and ' here");
        c.evidence = "</pre><img src=x onerror=alert(1)>".into();
        r.checks.push(c);
        let html = render(&r);
        assert!(!html.contains("<script>"));
        assert!(!html.contains("<img"));
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("a&amp;b"));
        assert!(html.contains("quote &quot; and &#39; here"));
    }

    #[test]
    fn nice_axis_covers_the_maximum() {
        assert_eq!(nice_axis(87.0), (100.0, 20.0));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        let (top, step) = nice_axis(1234.0);
        assert!(top >= 1234.0 && step > 0.0);
    }
}
