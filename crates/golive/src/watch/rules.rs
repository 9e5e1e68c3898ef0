//! Prometheus alerting rules for the rollback triggers, with the baseline's numbers.
//!
//! The same triggers as `golive watch`, in PromQL over vLLM's metrics. Where vLLM
//! renamed a metric (0.9 deprecation, hidden from 0.11) both names are queried with
//! `or`, so the rules work before and after an upgrade. Everything is summed per
//! scrape target (`job`, `instance`): data-parallel engines of one server count once.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::metrics::{names, Engine};
use crate::report::{Baseline, Report};

use super::triggers::{Trigger, ROLLBACK_REMINDER};

/// What `golive rules` builds its alerts from (its CLI flags).
#[derive(Debug, Clone)]
pub struct RulesOptions {
    /// The accepted run's report.json (or its directory).
    pub baseline: PathBuf,
    /// Range of the rates and queue growth.
    pub window: Duration,
    /// How long a condition must hold before the alert fires.
    pub for_: Duration,
    /// Relative tolerance for "unchanged" request rate, "below" cache ratio, "above" latency.
    pub tolerance: f64,
    /// A counter of tool-call or schema failures (e.g. from the gateway); any increase alerts.
    pub tool_error_counters: Vec<String>,
    /// Work in flight without a generated token for this long alerts `GoliveStalled`.
    pub stall_after: Duration,
}

/// A Prometheus rule file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuleFile {
    /// Rule groups; golive writes one, `golive-rollback-triggers`.
    pub groups: Vec<RuleGroup>,
}

/// A named group of alerting rules.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuleGroup {
    /// Group name, unique within the file.
    pub name: String,
    /// The group's alerts.
    pub rules: Vec<AlertRule>,
}

/// One Prometheus alerting rule.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlertRule {
    /// Alert name (`GoliveAboveCapacity`).
    pub alert: String,
    /// PromQL condition; the alert is pending while it returns series.
    pub expr: String,
    /// How long the condition must hold before the alert fires, in Prometheus' duration syntax
    /// (`5m`).
    #[serde(rename = "for")]
    pub for_: String,
    /// `severity`, and `trigger` (the rollback trigger's id) where the alert is one.
    pub labels: BTreeMap<String, String>,
    /// `summary`, `description`, and `rollback` (the runbook's reminder) on a rollback trigger.
    pub annotations: BTreeMap<String, String>,
}

/// Settings of the generated rules.
#[derive(Debug, Clone)]
pub struct RuleOptions {
    /// Range of the rates and queue growth (default 10 minutes).
    pub window: Duration,
    /// How long a condition must hold before the alert fires (default 5 minutes).
    pub for_: Duration,
    /// Relative tolerance for "unchanged" request rate, "below" cache ratio, "above" latency (0.2 =
    /// 20%).
    pub tolerance: f64,
    /// Counters of tool-call or schema failures; any increase alerts.
    pub tool_error_counters: Vec<String>,
    /// Work in flight without a generated token for this long alerts `GoliveStalled`.
    pub stall_after: Duration,
}

impl Default for RuleOptions {
    fn default() -> Self {
        RuleOptions {
            window: Duration::from_secs(600),
            for_: Duration::from_secs(300),
            tolerance: 0.2,
            tool_error_counters: Vec::new(),
            stall_after: Duration::from_secs(300),
        }
    }
}

/// Prometheus duration syntax (`90s`, `10m`, `1h`).
fn prom_duration(d: Duration) -> String {
    let s = d.as_secs().max(1);
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// A number as PromQL and the dashboard's text write it: plain decimal, no exponent, six
/// decimals at most, no trailing zeros.
pub(super) fn num(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".into()
    } else {
        s.to_string()
    }
}

const BY: &str = "by (job, instance)";

/// vLLM's current names of the families the rules read, from the one table.
const WAITING_NOW: &str = names::WAITING[0];
const RUNNING_NOW: &str = names::RUNNING[0];
const FINISHED_NOW: &str = names::FINISHED_HIST[0];
const TTFT_NOW: &str = names::TTFT[0];
const PROMPT_NOW: &str = names::PROMPT_TOKENS[0];
const PREEMPTIONS_NOW: &str = names::PREEMPTIONS[0];
const GENERATED_NOW: &str = names::GENERATED_TOKENS[0];

/// `sum by (job, instance) (f(name))` over the current name, `or` the old one.
fn either(names: &[&str], f: impl Fn(&str) -> String) -> String {
    names
        .iter()
        .map(|n| format!("sum {BY} ({})", f(n)))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Requests finished per second over `w` (the range), per scrape target.
fn finished_rate(w: &str) -> String {
    format!("sum {BY} (rate({FINISHED_NOW}_count[{w}]))")
}

fn rule(
    trigger: Option<Trigger>,
    alert: &str,
    severity: &str,
    expr: String,
    for_: &str,
    summary: String,
    description: String,
) -> AlertRule {
    let mut labels = BTreeMap::new();
    labels.insert("severity".to_string(), severity.to_string());
    if let Some(t) = trigger {
        labels.insert("trigger".to_string(), t.id().to_string());
    }
    let mut annotations = BTreeMap::new();
    annotations.insert("summary".to_string(), summary);
    annotations.insert("description".to_string(), description);
    if trigger.is_some() {
        annotations.insert("rollback".to_string(), ROLLBACK_REMINDER.to_string());
    }
    AlertRule {
        alert: alert.to_string(),
        expr,
        for_: for_.to_string(),
        labels,
        annotations,
    }
}

/// The alerting rules for `baseline`. Triggers whose threshold the baseline lacks
/// are left out (the header of [`render_yaml`] says which).
pub fn build_rules(baseline: &Baseline, opts: &RuleOptions) -> (RuleFile, Vec<String>) {
    let ctx = Ctx {
        baseline,
        opts,
        w: prom_duration(opts.window),
        for_: prom_duration(opts.for_),
        tol: opts.tolerance,
    };
    let mut rules = Vec::new();
    let mut left_out = Vec::new();
    for build in BUILDERS {
        match build(&ctx) {
            Ok(Some(r)) => rules.push(r),
            Ok(None) => {}
            Err(why) => left_out.push(why),
        }
    }
    (
        RuleFile {
            groups: vec![RuleGroup {
                name: "golive-rollback-triggers".into(),
                rules,
            }],
        },
        left_out,
    )
}

/// What every rule is built from: the baseline, the options, the window and `for` as
/// Prometheus durations, and the tolerance.
struct Ctx<'a> {
    baseline: &'a Baseline,
    opts: &'a RuleOptions,
    w: String,
    for_: String,
    tol: f64,
}

/// One rule from the baseline: `Ok(None)` when it does not apply, `Err` with why it was
/// left out when the baseline lacks its threshold.
type Built = Result<Option<AlertRule>, String>;

/// The rules, in the order of the rule file.
const BUILDERS: &[fn(&Ctx<'_>) -> Built] = &[
    queue_growth,
    cache_regression,
    repeated_restart,
    preemptions_at_accepted_load,
    kv_cache_above_accepted,
    capacity_line,
    gpu_xid,
    tool_call_failures,
    stalled,
];

/// Queue growth at an unchanged request rate.
fn queue_growth(ctx: &Ctx<'_>) -> Built {
    let (baseline, w, for_, tol) = (ctx.baseline, &ctx.w, &ctx.for_, ctx.tol);
    let waiting = format!("sum {BY} ({WAITING_NOW})");
    let accepted_waiting = baseline.waiting_max.unwrap_or(0.0);
    let mut expr = format!(
        "({waiting} > {peak})\nand\n(sum {BY} (delta({WAITING_NOW}[{w}])) >= 1)",
        peak = num(accepted_waiting)
    );
    let rate_text = match baseline.request_rate_rps {
        Some(rps) => {
            expr.push_str(&format!(
                "\nand\n({} <= {})",
                finished_rate(w),
                num(rps * (1.0 + tol))
            ));
            format!(
                "while requests finish at no more than {} rps (accepted {} rps)",
                num(rps * (1.0 + tol)),
                num(rps)
            )
        }
        None => {
            // Unchanged compared with the same span one window earlier.
            expr.push_str(&format!(
                "\nand\n(sum {BY} (rate({FINISHED_NOW}_count[{w}])) <= {f} * sum {BY} (rate({FINISHED_NOW}_count[{w}] offset {w})))",
                f = num(1.0 + tol)
            ));
            format!(
                "while the finished-request rate is within {}% of the previous {w}",
                num(tol * 100.0)
            )
        }
    };
    Ok(Some(rule(
        Some(Trigger::QueueGrowth),
        "GoliveQueueGrowth",
        "critical",
        expr,
        for_,
        "vLLM queue grows at an unchanged request rate".into(),
        format!(
            "Waiting requests rose over {w} above the accepted peak of {} {rate_text}. The server got slower under the same load: compare image, driver, start parameters and topology with the accepted run.",
            num(accepted_waiting)
        ),
    )))
}

/// Cache hits below the accepted baseline while prefill latency rises.
fn cache_regression(ctx: &Ctx<'_>) -> Built {
    let (baseline, w, for_, tol) = (ctx.baseline, &ctx.w, &ctx.for_, ctx.tol);
    match baseline.cache_hit_ratio {
        Some(ratio) => {
            let vllm = names::engine_metrics(Engine::Vllm);
            let hits = either(vllm.cache_hits, |n| format!("rate({n}_total[{w}])"));
            let queries = either(vllm.cache_queries, |n| format!("rate({n}_total[{w}])"));
            let ttft = format!(
                "sum {BY} (rate({TTFT_NOW}_sum[{w}])) / sum {BY} (rate({TTFT_NOW}_count[{w}]))"
            );
            let (latency_expr, latency_text) = match baseline.ttft_p50_ms {
                Some(p50) => (
                    format!("({ttft}) > {}", num(p50 / 1000.0 * (1.0 + tol))),
                    format!(
                        "mean time to first token above {} s (accepted p50 {} ms)",
                        num(p50 / 1000.0 * (1.0 + tol)),
                        num(p50)
                    ),
                ),
                None => (
                    format!(
                        "({ttft}) > {f} * (sum {BY} (rate({TTFT_NOW}_sum[{w}] offset {w})) / sum {BY} (rate({TTFT_NOW}_count[{w}] offset {w})))",
                        f = num(1.0 + tol)
                    ),
                    format!("mean time to first token {}% above the previous {w}", num(tol * 100.0)),
                ),
            };
            Ok(Some(rule(
                Some(Trigger::CacheRegression),
                "GolivePrefixCacheBelowBaseline",
                "critical",
                format!(
                    "(({hits}) / ({queries})) < {}\nand\n{latency_expr}",
                    num(ratio * (1.0 - tol))
                ),
                for_,
                "Prefix-cache hits below the accepted baseline while prefill latency rises".into(),
                format!(
                    "Prefix-cache hit ratio (tokens) over {w} below {} (accepted {}) and {latency_text}. Check that --enable-prefix-caching is in the running start command and that the prompt prefix did not change.",
                    num(ratio * (1.0 - tol)),
                    num(ratio)
                ),
            )))
        }
        None => Err(format!(
            "{}: the baseline has no cache_hit_ratio",
            Trigger::CacheRegression.id()
        )),
    }
}

/// Repeated OOM: a runtime OOM kills the engine; Prometheus sees the restarts.
fn repeated_restart(ctx: &Ctx<'_>) -> Built {
    let (baseline, opts) = (ctx.baseline, ctx.opts);
    let restart_window = prom_duration(opts.window * 3);
    Ok(Some(rule(
        Some(Trigger::Oom),
        "GoliveRepeatedRestart",
        "critical",
        format!(
            "(max {BY} (changes(process_start_time_seconds[{restart_window}])) >= 2) and on (job, instance) (group {BY} ({RUNNING_NOW}))\nor\nmax {BY} (resets({PROMPT_NOW}_total[{restart_window}])) >= 2"
        ),
        "0m",
        "vLLM restarted repeatedly".into(),
        format!(
            "The server restarted at least twice in {restart_window}: an OOM under load kills the engine this way. Find the first cause with `golive triage` on the server log (or `golive watch --log`); an OOM at or below the accepted concurrency{} is a rollback trigger.",
            baseline
                .accepted_concurrency
                .map(|c| format!(" of {c}"))
                .unwrap_or_default()
        ),
    )))
}

/// KV-cache pressure at the accepted load: the step before an OOM.
fn preemptions_at_accepted_load(ctx: &Ctx<'_>) -> Built {
    let (baseline, w, for_) = (ctx.baseline, &ctx.w, &ctx.for_);
    if let Some(conc) = baseline.accepted_concurrency {
        Ok(Some(rule(
            None,
            "GoliveKvPreemptionsAtAcceptedLoad",
            "warning",
            format!(
                "(sum {BY} (increase({PREEMPTIONS_NOW}_total[{w}])) > 0)\nand\n(sum {BY} (max_over_time({RUNNING_NOW}[{w}])) <= {conc})"
            ),
            for_,
            "vLLM preempts requests at or below the accepted concurrency".into(),
            format!(
                "Requests were preempted in the last {w} while at most {conc} requests ran (the accepted concurrency): the KV cache is short at the accepted load."
            ),
        )))
    } else {
        Err("kv preemptions: the baseline has no accepted_concurrency".into())
    }
}

/// KV-cache usage above the accepted peak: the load differs from the accepted one.
fn kv_cache_above_accepted(ctx: &Ctx<'_>) -> Built {
    let (for_, tol) = (&ctx.for_, ctx.tol);
    let Some(kv) = ctx.baseline.kv_cache_usage_max else {
        return Ok(None);
    };
    let usage = names::engine_metrics(Engine::Vllm)
        .kv_usage
        .iter()
        .map(|n| format!("max {BY} ({n})"))
        .collect::<Vec<_>>()
        .join(" or ");
    let limit = (kv * (1.0 + tol)).min(0.99_f64.max(kv));
    Ok(Some(rule(
        None,
        "GoliveKvCacheAboveAccepted",
        "warning",
        format!("({usage}) > {}", num(limit)),
        for_,
        "KV-cache usage above the accepted peak".into(),
        format!(
            "KV-cache usage above {} (accepted peak {}): the load differs from the accepted one.",
            num(limit),
            num(kv)
        ),
    )))
}

/// The capacity line: the live rate above what one server held within the objectives.
fn capacity_line(ctx: &Ctx<'_>) -> Built {
    let (baseline, w, for_) = (ctx.baseline, &ctx.w, &ctx.for_);
    match baseline.capacity_rps {
        Some(line) => Ok(Some(rule(
            None,
            "GoliveAboveCapacity",
            "warning",
            format!(
                "{} > {}",
                finished_rate(w),
                num(line)
            ),
            for_,
            "vLLM finishes more requests than one server held within the objectives".into(),
            format!(
                "Requests finish at more than {} req/s over {w}: above the capacity line of the accepted run (one server's goodput at its --slo-* objectives). The objectives break next: add replicas (the accept report's capacity check says how many).",
                num(line)
            ),
        ))),
        None => Err(
            "capacity line: the baseline has no capacity_rps (accept with --target-rate or --target-concurrency and --slo-*)".into(),
        ),
    }
}

/// Driver errors: the GPU reports XIDs through the DCGM exporter.
fn gpu_xid(ctx: &Ctx<'_>) -> Built {
    let w = &ctx.w;
    Ok(Some(rule(
        Some(Trigger::DriverNccl),
        "GoliveGpuXidError",
        "critical",
        format!("max by (Hostname, gpu) (max_over_time(DCGM_FI_DEV_XID_ERRORS[{w}])) > 0"),
        "0m",
        "GPU driver error (XID) reported by the DCGM exporter".into(),
        "A GPU reported an XID error. After a node or image update this is a rollback trigger; NCCL errors show only in the server log (`golive watch --log`).".into(),
    )))
}

/// Tool-call failures or schema breaks, from the counters the gateway exports.
fn tool_call_failures(ctx: &Ctx<'_>) -> Built {
    let (opts, w) = (ctx.opts, &ctx.w);
    if opts.tool_error_counters.is_empty() {
        Err(format!(
            "{}: no --tool-error-counter given (tool-call failures are counted by the gateway, not by vLLM)",
            Trigger::ToolSchema.id()
        ))
    } else {
        let expr = opts
            .tool_error_counters
            .iter()
            .map(|n| format!("sum {BY} (increase({n}[{w}])) > 0"))
            .collect::<Vec<_>>()
            .join("\nor\n");
        Ok(Some(rule(
            Some(Trigger::ToolSchema),
            "GoliveToolCallFailures",
            "critical",
            expr,
            "0m",
            "Tool-call failures or schema breaks reach agent flows".into(),
            format!(
                "{} rose in the last {w}. Replay the saved agent regression cases (`golive replay`) to tell parser, model and gateway apart.",
                opts.tool_error_counters.join(", ")
            ),
        )))
    }
}

/// Alive but stuck: work in flight all along while no token is generated. /health and the
/// gauges alone cannot show it (vLLM #46811).
fn stalled(ctx: &Ctx<'_>) -> Built {
    let opts = ctx.opts;
    let stall = prom_duration(opts.stall_after);
    Ok(Some(rule(
        Some(Trigger::Stalled),
        "GoliveStalled",
        "critical",
        format!(
            "(sum {BY} (min_over_time({RUNNING_NOW}[{stall}])) + sum {BY} (min_over_time({WAITING_NOW}[{stall}]))) > 0\nand\nsum {BY} (increase({GENERATED_NOW}_total[{stall}])) == 0"
        ),
        "1m",
        "vLLM has requests in flight but generates no tokens".into(),
        format!(
            "Requests were running or waiting for {stall} while {GENERATED_NOW}_total did not advance: the engine is alive but stuck (health checks may still pass). Confirm with `golive probe --url URL --deadline-s 10`, save the server log for `golive triage`, then restart the engine."
        ),
    )))
}

/// The rule file as YAML, with a header naming the source and what was left out.
pub fn render_yaml(file: &RuleFile, source: &str, left_out: &[String]) -> anyhow::Result<String> {
    let mut out = format!(
        "# Prometheus alerting rules for the rollback triggers, generated by golive {} from\n# {source}.\n# Check: promtool check rules <this file>\n",
        crate::TOOL_VERSION
    );
    for l in left_out {
        out.push_str(&format!("# Left out: {l}\n"));
    }
    out.push_str(&serde_norway::to_string(file)?);
    Ok(out)
}

/// Every rollback rule names who rolls back (`signoff --rollback-owner`).
pub fn name_the_owner(file: &mut RuleFile, owner: &str) {
    for g in &mut file.groups {
        for r in &mut g.rules {
            if r.annotations.contains_key("rollback") {
                r.annotations
                    .insert("rollback_owner".to_string(), owner.to_string());
            }
        }
    }
}

/// The rule file for the baseline of `args`, as YAML, and the rules left out (why).
pub fn rules_yaml(args: &RulesOptions) -> crate::Result<(String, Vec<String>)> {
    crate::error::ensure_input!(
        (0.0..1.0).contains(&args.tolerance),
        "--tolerance must be between 0 and 1"
    );
    crate::error::ensure_input!(!args.window.is_zero(), "--window must be above zero");
    crate::error::ensure_input!(
        !args.stall_after.is_zero(),
        "--stall-after must be above zero"
    );
    let metric_name =
        regex::Regex::new(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$").expect("name pattern compiles");
    for n in &args.tool_error_counters {
        crate::error::ensure_input!(
            metric_name.is_match(n),
            "--tool-error-counter {n:?} is not a Prometheus metric name"
        );
    }
    let report = Report::load(&args.baseline)?;
    let opts = RuleOptions {
        window: args.window,
        for_: args.for_,
        tolerance: args.tolerance,
        tool_error_counters: args.tool_error_counters.clone(),
        stall_after: args.stall_after,
    };
    let (mut file, left_out) = build_rules(&report.baseline, &opts);
    if let Some(owner) = report.rollback_owner() {
        name_the_owner(&mut file, owner);
    }
    let source = crate::report::report_path(&args.baseline)
        .display()
        .to_string();
    let yaml = render_yaml(&file, &source, &left_out)?;
    Ok((yaml, left_out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rollback_owner_is_named_on_every_rollback_rule() {
        let b = Baseline {
            ttft_p50_ms: Some(250.0),
            waiting_max: Some(4.0),
            request_rate_rps: Some(2.0),
            ..Default::default()
        };
        let (mut file, _) = build_rules(&b, &RuleOptions::default());
        name_the_owner(&mut file, "oncall-llm");
        let rules: Vec<&AlertRule> = file.groups.iter().flat_map(|g| &g.rules).collect();
        assert!(rules.iter().any(|r| r.annotations.contains_key("rollback")));
        for r in rules {
            assert_eq!(
                r.annotations.get("rollback_owner").map(String::as_str),
                r.annotations.get("rollback").map(|_| "oncall-llm"),
                "{}",
                r.alert
            );
        }
    }

    #[test]
    fn the_capacity_line_of_the_baseline_is_a_warning_on_the_finished_rate() {
        let with = Baseline {
            capacity_rps: Some(3.25),
            ..Default::default()
        };
        let (file, left_out) = build_rules(&with, &RuleOptions::default());
        let rule = file.groups[0]
            .rules
            .iter()
            .find(|r| r.alert == "GoliveAboveCapacity")
            .expect("the capacity rule");
        assert!(rule.expr.ends_with(") > 3.25"), "{}", rule.expr);
        assert!(rule
            .expr
            .contains("rate(vllm:e2e_request_latency_seconds_count[10m])"));
        assert_eq!(rule.labels["severity"], "warning");
        assert!(
            !rule.annotations.contains_key("rollback"),
            "not a rollback trigger"
        );
        assert!(!left_out.iter().any(|l| l.contains("capacity")));
        let (file, left_out) = build_rules(&Baseline::default(), &RuleOptions::default());
        assert!(!file.groups[0]
            .rules
            .iter()
            .any(|r| r.alert == "GoliveAboveCapacity"));
        assert!(
            left_out.iter().any(|l| l.starts_with("capacity line")),
            "{left_out:?}"
        );
    }

    #[test]
    fn numbers_and_durations_are_promql() {
        assert_eq!(num(0.72), "0.72");
        assert_eq!(num(8.0), "8");
        assert_eq!(num(1e-7), "0");
        assert_eq!(prom_duration(Duration::from_secs(600)), "10m");
        assert_eq!(prom_duration(Duration::from_secs(90)), "90s");
        assert_eq!(prom_duration(Duration::from_secs(7200)), "2h");
    }

    #[test]
    fn baseline_numbers_become_thresholds_and_both_names_are_queried() {
        let b = Baseline {
            cache_hit_ratio: Some(0.9),
            ttft_p50_ms: Some(250.0),
            waiting_max: Some(4.0),
            request_rate_rps: Some(2.0),
            ..Default::default()
        };
        let (file, left_out) = build_rules(&b, &RuleOptions::default());
        let by_name: BTreeMap<&str, &AlertRule> = file.groups[0]
            .rules
            .iter()
            .map(|r| (r.alert.as_str(), r))
            .collect();
        let cache = by_name["GolivePrefixCacheBelowBaseline"];
        assert!(cache.expr.contains("< 0.72"), "{}", cache.expr);
        assert!(cache.expr.contains("> 0.3"), "{}", cache.expr);
        assert!(cache.expr.contains("vllm:gpu_prefix_cache_hits_total"));
        let queue = by_name["GoliveQueueGrowth"];
        assert!(queue.expr.contains("> 4)"), "{}", queue.expr);
        assert!(queue.expr.contains("<= 2.4)"), "{}", queue.expr);
        assert!(left_out.iter().any(|l| l.starts_with("tool_schema")));
    }
}
