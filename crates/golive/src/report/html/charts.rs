//! The report's charts: which series each chart shows (latency, throughput, stream
//! silence) and their colours.

use super::svg::{bar_chart, line_chart, Series};
use crate::report::{CheckId, Report};

/// Series colours; the Chromium test looks for them in the screenshot.
pub const COLORS: [&str; 6] = [
    "#1f77b4", "#ff7f0e", "#d62728", "#2ca02c", "#9467bd", "#17becf",
];

fn series(name: &str, color: &'static str, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.to_string(),
        color,
        points: points.into_iter().filter(|p| p.1.is_finite()).collect(),
    }
}

pub(super) fn charts(h: &mut String, report: &Report) {
    let m = &report.measurements;
    h.push_str("<section id=\"charts\"><h2>Charts</h2><div class=\"grid\">");
    // Ramp: one x position per step, labelled with its concurrency (a rate step with its
    // offered rate) and prompt size.
    let ramp_ticks: Vec<(f64, String)> = m
        .ramp
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let load = match s.rate {
                Some(r) => format!("{}/s", crate::accept::rate_text(r)),
                None => format!("c{}", s.concurrency),
            };
            (
                i as f64,
                format!("{load}·{}", short_tokens(s.prompt_tokens)),
            )
        })
        .collect();
    let idx = |f: &dyn Fn(&crate::report::RampStep) -> Option<f64>| -> Vec<(f64, f64)> {
        m.ramp
            .iter()
            .enumerate()
            .filter_map(|(i, s)| f(s).map(|v| (i as f64, v)))
            .collect()
    };
    let pct = |p: &crate::report::Percentiles, which: u8| -> Option<f64> {
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
    let soak = |f: &dyn Fn(&crate::report::SoakSample) -> Option<f64>| -> Vec<(f64, f64)> {
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
    let by_role =
        |f: &dyn Fn(&crate::report::PrefixCacheSample) -> Option<f64>| -> Vec<(f64, f64)> {
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
        .find(|c| c.id == CheckId::StreamSilence)
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
