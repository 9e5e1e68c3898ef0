//! `golive rules --grafana`: a Grafana dashboard of the accepted baseline.
//!
//! The panels operators already keep for vLLM (request rate, TTFT/ITL/E2E p95, queue,
//! running requests, KV-cache usage, prefix-cache hits), each with the accepted run's
//! numbers drawn as threshold lines: the capacity line on the request rate, the
//! `--slo-*` objectives on the latencies (red), the accepted figures (orange). The
//! queries are the ones `golive rules` alerts on, with vLLM's renamed metrics joined by
//! `or`, per scrape target (`job`, `instance`); `rules --lint` checks them against the
//! names a server exports.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::metrics::{names, Engine};
use crate::report::{Baseline, Report, Verdict};

use super::rules::{num, RulesOptions};

const BY: &str = "by (job, instance)";
/// The instance picked on the dashboard (all by default).
const PICKED: &str = "{instance=~\"$instance\"}";
const RANGE: &str = "[$__rate_interval]";

/// A threshold line on a panel: where, in which colour, and what it is (for the panel's
/// description).
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Where the line is drawn, in the panel's unit.
    pub value: f64,
    /// Grafana colour name: `red` for an objective or the capacity line, `orange` for an accepted
    /// figure.
    pub color: &'static str,
    /// What the line stands for, as the panel's description lists it (`accepted peak`).
    pub what: String,
}

/// One time-series panel: its query (a renamed metric's names joined by `or`, so one
/// panel works before and after the rename) and the baseline's lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Panel title as Grafana shows it.
    pub title: &'static str,
    /// Grafana unit id of the values (`s`, `reqps`, `percentunit`).
    pub unit: &'static str,
    /// PromQL query of the panel, per scrape target.
    pub expr: String,
    /// Threshold lines from the baseline; empty when it has none for this panel.
    pub lines: Vec<Line>,
    /// A ratio that is bad when low (prefix-cache hits): colours run the other way.
    pub low_is_bad: bool,
    /// What the panel shows and what to do when it crosses a line; the lines are appended.
    pub description: &'static str,
}

/// The engine a report names (`vllm`, `sglang`, `llama.cpp`); vLLM when it names none.
pub fn engine_of(report: &Report) -> Engine {
    match report.engine.as_deref() {
        Some("sglang") => Engine::Sglang,
        Some("llama.cpp") => Engine::LlamaCpp,
        _ => Engine::Vllm,
    }
}

/// The names of `families` that `engine` exports (its prefix).
fn of_engine<'a>(families: &[&'a str], engine: Engine) -> Vec<&'a str> {
    let prefix = names::engine_prefix(engine).unwrap_or("vllm:");
    families
        .iter()
        .copied()
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// The panels for `baseline` on `engine`'s metric names (tolerance as `rules --tolerance`),
/// and what was left out: lines the baseline has no figure for, panels the engine exports
/// no metric for (llama.cpp has no latency histograms).
pub fn panels(baseline: &Baseline, engine: Engine, tolerance: f64) -> (Vec<Panel>, Vec<String>) {
    let mut left_out = Vec::new();
    let m = names::engine_metrics(engine);
    let panels = vec![
        request_rate(baseline, engine, &mut left_out),
        latency(
            "Time to first token p95",
            of_engine(names::TTFT, engine),
            accepted(baseline.ttft_p95_ms.map(ms), tolerance, "accepted TTFT p95"),
            objective(baseline, |o| o.ttft_p95_ms, "TTFT", &mut left_out),
        ),
        latency(
            "Inter-token latency p95",
            of_engine(names::ITL, engine),
            accepted(baseline.itl_p95_ms.map(ms), tolerance, "accepted ITL p95"),
            objective(baseline, |o| o.itl_p95_ms, "ITL", &mut left_out),
        ),
        latency(
            "End-to-end latency p95",
            of_engine(names::FINISHED_HIST, engine),
            None,
            objective(baseline, |o| o.e2e_p95_ms, "E2E", &mut left_out),
        ),
        gauge_panel(
            "Requests waiting",
            "none",
            m.waiting,
            "sum",
            baseline.waiting_max.map(|w| Line {
                value: w,
                color: "orange",
                what: "accepted peak".into(),
            }),
            "Requests queued for a slot. Above the accepted peak at an unchanged rate: the server got slower (GoliveQueueGrowth).",
        ),
        gauge_panel(
            "Requests running",
            "none",
            m.running,
            "sum",
            baseline.accepted_concurrency.map(|c| Line {
                value: f64::from(c),
                color: "orange",
                what: "accepted concurrency".into(),
            }),
            "Requests in the batch. Above the accepted concurrency the server runs a load the acceptance did not measure.",
        ),
        gauge_panel(
            "KV-cache usage",
            "percentunit",
            m.kv_usage,
            "max",
            baseline.kv_cache_usage_max.map(|kv| Line {
                value: kv,
                color: "orange",
                what: "accepted peak".into(),
            }),
            "Share of the KV cache in use (0-1). Near 1, requests are preempted next.",
        ),
        prefix_cache(baseline, engine, tolerance, &mut left_out),
    ];
    // A panel with no query: the engine exports nothing for it.
    let (panels, none): (Vec<Panel>, Vec<Panel>) =
        panels.into_iter().partition(|p| !p.expr.is_empty());
    left_out.extend(none.iter().map(|p| {
        format!(
            "panel {:?}: {} exports no metric for it",
            p.title,
            engine.as_str()
        )
    }));
    (panels, left_out)
}

/// `f(name)` for each name of one role, joined by `or`.
fn either(names: &[&str], f: impl Fn(&str) -> String) -> String {
    names.iter().map(|n| f(n)).collect::<Vec<_>>().join(" or ")
}

fn ms(v: f64) -> f64 {
    v / 1000.0
}

/// The accepted figure with the tolerance on top, as an orange line (seconds).
fn accepted(value_s: Option<f64>, tolerance: f64, what: &str) -> Option<Line> {
    value_s.map(|v| Line {
        value: v * (1.0 + tolerance),
        color: "orange",
        what: format!("{what} + {:.0}%", tolerance * 100.0),
    })
}

/// An objective of the run as a red line (seconds).
fn objective(
    baseline: &Baseline,
    pick: impl Fn(&crate::report::Objectives) -> Option<f64>,
    name: &str,
    left_out: &mut Vec<String>,
) -> Option<Line> {
    let line = baseline.objectives.as_ref().and_then(pick).map(|v| Line {
        value: ms(v),
        color: "red",
        what: format!("objective {name} p95 (--slo-*)"),
    });
    if line.is_none() {
        left_out.push(format!("{name} objective: the run had no --slo-* for it"));
    }
    line
}

fn request_rate(baseline: &Baseline, engine: Engine, left_out: &mut Vec<String>) -> Panel {
    let lines: Vec<Line> = baseline
        .capacity_rps
        .map(|c| Line {
            value: c,
            color: "red",
            what: "capacity line (one server at the objectives)".into(),
        })
        .into_iter()
        .collect();
    if lines.is_empty() {
        left_out.push(
            "capacity line: the baseline has no capacity_rps (accept with --target-rate or --target-concurrency and --slo-*)".into(),
        );
    }
    Panel {
        title: "Finished requests per second",
        unit: "reqps",
        expr: either(&of_engine(names::FINISHED_HIST, engine), |n| {
            format!("sum {BY} (rate({n}_count{PICKED}{RANGE}))")
        }),
        lines,
        low_is_bad: false,
        description: "Requests finished per second per server. Above the capacity line the objectives break next: add replicas (GoliveAboveCapacity).",
    }
}

fn latency(
    title: &'static str,
    families: Vec<&str>,
    accepted: Option<Line>,
    objective: Option<Line>,
) -> Panel {
    Panel {
        title,
        unit: "s",
        expr: either(&families, |n| {
            format!("histogram_quantile(0.95, sum by (le, job, instance) (rate({n}_bucket{PICKED}{RANGE})))")
        }),
        lines: accepted.into_iter().chain(objective).collect(),
        low_is_bad: false,
        description: "p95 per server from vLLM's histogram. Orange: the accepted figure with the tolerance; red: the objective the run was judged against.",
    }
}

fn gauge_panel(
    title: &'static str,
    unit: &'static str,
    families: &[&str],
    agg: &str,
    line: Option<Line>,
    description: &'static str,
) -> Panel {
    Panel {
        title,
        unit,
        expr: either(families, |n| format!("{agg} {BY} ({n}{PICKED})")),
        lines: line.into_iter().collect(),
        low_is_bad: false,
        description,
    }
}

fn prefix_cache(
    baseline: &Baseline,
    engine: Engine,
    tolerance: f64,
    left_out: &mut Vec<String>,
) -> Panel {
    // vLLM's hits over its lookups (other engines count no lookups). Old and new names pair
    // up: hits of one generation over queries of the same.
    let m = names::engine_metrics(engine);
    let expr = m
        .cache_hits
        .iter()
        .zip(m.cache_queries)
        .map(|(h, q)| {
            format!(
                "(sum {BY} (rate({h}_total{PICKED}{RANGE})) / sum {BY} (rate({q}_total{PICKED}{RANGE})))"
            )
        })
        .collect::<Vec<_>>()
        .join(" or ");
    let lines: Vec<Line> = baseline
        .cache_hit_ratio
        .map(|r| Line {
            value: r * (1.0 - tolerance),
            color: "red",
            what: format!("accepted hit ratio - {:.0}%", tolerance * 100.0),
        })
        .into_iter()
        .collect();
    if lines.is_empty() {
        left_out.push("prefix-cache line: the baseline has no cache_hit_ratio".into());
    }
    Panel {
        title: "Prefix-cache hit ratio",
        unit: "percentunit",
        expr,
        lines,
        low_is_bad: true,
        description: "Prompt tokens served from the prefix cache (0-1). Below the red line while prefill latency rises: check --enable-prefix-caching and the prompt prefix (GolivePrefixCacheBelowBaseline).",
    }
}

/// Grafana's threshold steps: ascending, the base step first (`value: null`).
fn thresholds(p: &Panel) -> Value {
    let mut lines = p.lines.clone();
    lines.sort_by(|a, b| a.value.total_cmp(&b.value));
    let mut steps = Vec::new();
    if p.low_is_bad {
        // Below the lowest line is bad; at or above it, good.
        steps.push(json!({"color": lines.first().map_or("green", |l| l.color), "value": null}));
        steps.extend(
            lines
                .iter()
                .map(|l| json!({"color": "green", "value": l.value})),
        );
    } else {
        steps.push(json!({"color": "green", "value": null}));
        steps.extend(
            lines
                .iter()
                .map(|l| json!({"color": l.color, "value": l.value})),
        );
    }
    json!({"mode": "absolute", "steps": steps})
}

fn panel_json(p: &Panel, id: usize) -> Value {
    let targets = json!([{"refId": "A", "expr": p.expr, "legendFormat": "{{instance}}", "datasource": datasource()}]);
    let lines_text: Vec<String> = p
        .lines
        .iter()
        .map(|l| format!("{} at {} ({})", l.color, num(l.value), l.what))
        .collect();
    let description = if lines_text.is_empty() {
        p.description.to_string()
    } else {
        format!("{} Lines: {}.", p.description, lines_text.join("; "))
    };
    json!({
        "id": id,
        "type": "timeseries",
        "title": p.title,
        "description": description,
        "datasource": datasource(),
        "gridPos": {"h": 8, "w": 12, "x": (id - 1) % 2 * 12, "y": (id - 1) / 2 * 8},
        "targets": targets,
        "fieldConfig": {
            "defaults": {
                "unit": p.unit,
                "min": 0,
                "thresholds": thresholds(p),
                "custom": {"thresholdsStyle": {"mode": if p.lines.is_empty() { "off" } else { "line" }}}
            },
            "overrides": []
        },
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}}
    })
}

fn datasource() -> Value {
    json!({"type": "prometheus", "uid": "${datasource}"})
}

/// The dashboard for `report`: its panels, a data-source and an instance variable, a uid
/// that stays the same for the same report (re-importing updates it).
pub fn dashboard(report: &Report, tolerance: f64) -> (Value, Vec<String>) {
    let engine = engine_of(report);
    let (panels, left_out) = panels(&report.baseline, engine, tolerance);
    let uid = {
        let mut h = Sha256::new();
        h.update(report.started_at.to_rfc3339().as_bytes());
        h.update(report.urls.join(",").as_bytes());
        let hex: String = h.finalize()[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("golive-{hex}")
    };
    let model = report.model.as_deref().unwrap_or("vLLM");
    let running = names::engine_metrics(engine).running[0];
    let dashboard = json!({
        "uid": uid,
        "title": format!("golive: {model} against its accepted baseline"),
        "description": format!(
            "Generated by golive {} from the accepted run of {} (verdict {}).",
            crate::TOOL_VERSION,
            report.started_at.format("%Y-%m-%d %H:%M UTC"),
            report.verdict.map_or("none", Verdict::as_str)
        ),
        "tags": ["golive", engine.as_str()],
        "schemaVersion": 39,
        "editable": true,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"},
            {"name": "instance", "label": "Server", "type": "query", "datasource": datasource(),
             "query": {"query": format!("label_values({running}, instance)"), "refId": "instance"},
             "definition": format!("label_values({running}, instance)"),
             "includeAll": true, "multi": true, "allValue": ".*", "refresh": 2,
             "current": {"text": "All", "value": "$__all"}}
        ]},
        "panels": panels.iter().enumerate().map(|(i, p)| panel_json(p, i + 1)).collect::<Vec<_>>(),
    });
    (dashboard, left_out)
}

/// The dashboard for the baseline of `args`, as pretty JSON, and the lines left out (why).
pub fn dashboard_json(args: &RulesOptions) -> crate::Result<(String, Vec<String>)> {
    crate::error::ensure_input!(
        (0.0..1.0).contains(&args.tolerance),
        "--tolerance must be between 0 and 1"
    );
    let report = Report::load(&args.baseline)?;
    let (v, left_out) = dashboard(&report, args.tolerance);
    let text = serde_json::to_string_pretty(&v).map_err(anyhow::Error::from)?;
    Ok((text + "\n", left_out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Objectives;

    fn full() -> Baseline {
        Baseline {
            cache_hit_ratio: Some(0.8),
            ttft_p95_ms: Some(400.0),
            itl_p95_ms: Some(20.0),
            accepted_concurrency: Some(16),
            kv_cache_usage_max: Some(0.7),
            waiting_max: Some(3.0),
            capacity_rps: Some(3.25),
            objectives: Some(Objectives {
                ttft_p95_ms: Some(2000.0),
                itl_p95_ms: None,
                e2e_p95_ms: Some(8000.0),
            }),
            ..Baseline::default()
        }
    }

    fn panel<'a>(ps: &'a [Panel], title: &str) -> &'a Panel {
        ps.iter().find(|p| p.title == title).unwrap()
    }

    #[test]
    fn the_baseline_numbers_become_lines_on_their_panels() {
        let (ps, left_out) = panels(&full(), Engine::Vllm, 0.2);
        let rate = panel(&ps, "Finished requests per second");
        assert_eq!(rate.lines[0].value, 3.25);
        let ttft = panel(&ps, "Time to first token p95");
        let values: Vec<(f64, &str)> = ttft.lines.iter().map(|l| (l.value, l.color)).collect();
        assert_eq!(values, vec![(0.48, "orange"), (2.0, "red")]);
        // ITL has the accepted figure but no objective; the left-out list says so.
        let itl = panel(&ps, "Inter-token latency p95");
        assert_eq!(itl.lines.len(), 1);
        assert!((itl.lines[0].value - 0.024).abs() < 1e-9);
        assert_eq!(
            left_out,
            vec!["ITL objective: the run had no --slo-* for it"]
        );
        // The renamed ITL histogram is queried under both names.
        let (new, old) = itl.expr.split_once(" or ").unwrap();
        assert!(
            new.contains("vllm:inter_token_latency_seconds_bucket"),
            "{new}"
        );
        assert!(
            old.contains("vllm:time_per_output_token_seconds_bucket"),
            "{old}"
        );
        let cache = panel(&ps, "Prefix-cache hit ratio");
        assert!((cache.lines[0].value - 0.64).abs() < 1e-9);
    }

    #[test]
    fn threshold_steps_ascend_and_a_low_ratio_is_red() {
        let (ps, _) = panels(&full(), Engine::Vllm, 0.2);
        let t = thresholds(panel(&ps, "Time to first token p95"));
        let steps = t["steps"].as_array().unwrap();
        assert_eq!(steps[0]["value"], Value::Null);
        assert_eq!(steps[1]["color"], "orange");
        assert_eq!(steps[2]["color"], "red");
        let t = thresholds(panel(&ps, "Prefix-cache hit ratio"));
        assert_eq!(t["steps"][0]["color"], "red");
        assert_eq!(t["steps"][1]["color"], "green");
    }

    #[test]
    fn other_engines_get_their_own_names_and_panels_they_cannot_fill_are_left_out() {
        let (ps, left_out) = panels(&full(), Engine::LlamaCpp, 0.2);
        let titles: Vec<&str> = ps.iter().map(|p| p.title).collect();
        assert_eq!(
            titles,
            ["Requests waiting", "Requests running", "KV-cache usage"]
        );
        assert!(
            ps[1].expr.contains("llamacpp:requests_processing"),
            "{}",
            ps[1].expr
        );
        assert!(
            left_out
                .iter()
                .any(|l| l.contains("Time to first token p95")
                    && l.contains("llama.cpp exports no metric")),
            "{left_out:?}"
        );
        let (ps, _) = panels(&full(), Engine::Sglang, 0.2);
        let ttft = panel(&ps, "Time to first token p95");
        assert!(ttft
            .expr
            .contains("sglang:time_to_first_token_seconds_bucket"));
        assert!(!ttft.expr.contains("vllm:"), "{}", ttft.expr);
    }

    #[test]
    fn an_empty_baseline_draws_no_lines_and_names_each_missing_one() {
        let (ps, left_out) = panels(&Baseline::default(), Engine::Vllm, 0.2);
        assert!(ps.iter().all(|p| p.lines.is_empty()));
        assert_eq!(left_out.len(), 5, "{left_out:?}");
        assert!(left_out[0].starts_with("capacity line"));
    }
}
