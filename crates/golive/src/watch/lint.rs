//! `golive rules --lint`: checks Prometheus rule files and Grafana dashboards against
//! the metric names a server really exports, with the rename hint from
//! [`crate::metrics::names`].
//!
//! Each PromQL expression is parsed with `promql-parser` (GreptimeDB's parser, the
//! one Rust port of Prometheus' grammar) to get its selectors. Grafana variables
//! (`$__rate_interval`, `${model}`) are replaced by values the parser accepts first;
//! an expression that still does not parse falls back to a scan for `name{` and
//! `name[` tokens, and says so.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use anyhow::Context;
use promql_parser::label::MatchOp;
use promql_parser::parser::{self, Expr};
use serde_json::Value;

use crate::metrics::{names, MetricsSnapshot};

/// Where the exported names come from (several: the engine and, say, dcgm-exporter).
#[derive(Debug, Clone)]
pub enum Exported {
    /// Scrape this `/metrics` URL.
    Url(String),
    /// A saved `/metrics` page.
    MetricsFile(PathBuf),
    /// An accepted run's report: it records no scrape, so only names the rename
    /// table knows as stale are findings.
    Baseline(PathBuf),
}

/// What `golive rules --lint` checks and against which exported names.
#[derive(Debug, Clone)]
pub struct LintOptions {
    /// Prometheus rule files (YAML) and Grafana dashboards (JSON) to check.
    pub files: Vec<PathBuf>,
    /// Sources of the names the server exports; all of them together count.
    pub exported: Vec<Exported>,
}

/// One name a rule or panel uses that the server does not export.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Finding {
    /// The rule file or dashboard the name is used in, as given.
    pub file: String,
    /// `group/rule` or the panel's title.
    pub location: String,
    /// The metric name the server does not export.
    pub metric: String,
    /// What to use instead, when known.
    pub hint: Option<String>,
}

/// What one lint run saw.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LintReport {
    /// Where the names were checked against.
    pub against: String,
    /// PromQL expressions found in the files.
    pub expressions: usize,
    /// Distinct metric names the files use.
    pub names_used: usize,
    /// Names used but not exported, in file order.
    pub findings: Vec<Finding>,
    /// Expressions that did not parse (checked by the fallback scan).
    pub notes: Vec<String>,
}

/// An expression and where it stands.
struct Located {
    file: String,
    location: String,
    expr: String,
}

/// Series Prometheus itself writes, never exported by the target.
const PROMETHEUS_OWN: &[&str] = &[
    "up",
    "ALERTS",
    "ALERTS_FOR_STATE",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
];

/// Exporters other than the engine whose families rules often use: without a page
/// of theirs among the sources, their names are noted, not findings.
const OTHER_EXPORTERS: &[(&str, &str)] = &[("DCGM_", "NVIDIA dcgm-exporter")];

/// The union of the names the sources export (`None` for the rename-table-only check),
/// what they are, and notes on lines of their pages that could not be read.
async fn all_exported(sources: &[Exported]) -> anyhow::Result<Exports> {
    let mut all = Exports::default();
    for s in sources {
        let (set, what, problems) = exported_names(s).await?;
        if let Some(set) = set {
            all.names.get_or_insert_with(HashSet::new).extend(set);
        }
        all.notes.extend(problems.map(|p| format!("{what}: {p}")));
        all.against.push(what);
    }
    Ok(all)
}

#[derive(Default)]
struct Exports {
    names: Option<HashSet<String>>,
    against: Vec<String>,
    notes: Vec<String>,
}

/// Lines of a page that could not be read, in words (the names on the others count).
fn page_problems(m: &MetricsSnapshot) -> Option<String> {
    let first = m.problems.first()?;
    Some(format!(
        "{} line(s) of the page could not be read and were skipped, the first: {first}",
        m.problem_count
    ))
}

/// The set of names one source exports (`None` for the rename-table-only check), what
/// it is, and its unreadable lines.
async fn exported_names(
    e: &Exported,
) -> anyhow::Result<(Option<HashSet<String>>, String, Option<String>)> {
    let from_snapshot = |m: MetricsSnapshot| m.samples.into_iter().map(|s| s.metric).collect();
    match e {
        Exported::Url(url) => {
            // Userinfo in the URL becomes Basic auth and is never shown (`base_url`).
            let target = crate::target::Target::new(
                url,
                &crate::target::TargetOptions {
                    api_key: None,
                    model: None,
                    request_timeout: std::time::Duration::from_secs(15),
                    connect_timeout: std::time::Duration::from_secs(15),
                    pool_idle_timeout: std::time::Duration::from_secs(3),
                },
            )?;
            let client = target.http_client()?;
            let m = MetricsSnapshot::scrape(&client, &target.base_url).await?;
            let problems = page_problems(&m);
            Ok((Some(from_snapshot(m)), target.base_url, problems))
        }
        Exported::MetricsFile(p) => {
            let text = crate::input::read_text(p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            let m = MetricsSnapshot::parse(&text)
                .with_context(|| format!("{} is not a Prometheus text page", p.display()))?;
            anyhow::ensure!(!m.samples.is_empty(), "{} holds no samples", p.display());
            let problems = page_problems(&m);
            Ok((Some(from_snapshot(m)), p.display().to_string(), problems))
        }
        Exported::Baseline(p) => {
            crate::report::Report::load(p)?;
            Ok((
                None,
                format!(
                    "the rename table (the baseline {} records no scrape)",
                    p.display()
                ),
                None,
            ))
        }
    }
}

/// Lints the files; errors are bad input (unreadable, not YAML/JSON, no rules).
pub async fn lint(opts: &LintOptions) -> crate::Result<LintReport> {
    crate::error::ensure_input!(!opts.files.is_empty(), "no files to lint");
    crate::error::ensure_input!(
        !opts.exported.is_empty(),
        "nothing to check the names against"
    );
    let mut exprs = Vec::new();
    let mut recorded = HashSet::new();
    for f in &opts.files {
        read_file(f, &mut exprs, &mut recorded)?;
    }
    crate::error::ensure_input!(
        !exprs.is_empty(),
        "no PromQL expressions found in {}",
        opts.files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let Exports {
        names: exported,
        against,
        notes: page_notes,
    } = all_exported(&opts.exported).await?;
    let other_exporter = |name: &str| {
        OTHER_EXPORTERS.iter().find(|(prefix, _)| {
            name.starts_with(prefix)
                && exported
                    .as_ref()
                    .is_some_and(|set| !set.iter().any(|n| n.starts_with(prefix)))
        })
    };
    let mut report = LintReport {
        against: against.join(" + "),
        expressions: exprs.len(),
        notes: page_notes,
        ..Default::default()
    };
    let is_known = |name: &str| {
        recorded.contains(name)
            || PROMETHEUS_OWN.contains(&name)
            || match &exported {
                Some(set) => set.contains(name),
                None => names::rename_of(family_of(name).0).is_none(),
            }
    };
    let mut used = BTreeSet::new();
    let mut seen = HashSet::new();
    for e in &exprs {
        let prepared = grafana_placeholders(&e.expr);
        let parsed = crate::text::check_promql_depth(&prepared)
            .map_err(|e| e.to_string())
            .and_then(|()| parser::parse(&prepared));
        let missing = match parsed {
            Ok(ast) => {
                collect_names(&ast, &mut used);
                missing_names(&ast, &is_known)
            }
            Err(err) => {
                report.notes.push(format!(
                    "{} {}: PromQL does not parse ({}); names taken from a token scan",
                    e.file,
                    e.location,
                    err.lines().next().unwrap_or_default()
                ));
                let found = scan_names(&prepared);
                used.extend(found.iter().cloned());
                found.into_iter().filter(|n| !is_known(n)).collect()
            }
        };
        for metric in missing {
            if let Some((_, exporter)) = other_exporter(&metric) {
                report.notes.push(format!(
                    "{} {}: {metric} is {exporter}'s, not checked (add its page as another source)",
                    e.file, e.location
                ));
                continue;
            }
            if seen.insert((e.file.clone(), e.location.clone(), metric.clone())) {
                let hint = hint_for(&metric, exported.as_ref());
                report.findings.push(Finding {
                    file: e.file.clone(),
                    location: e.location.clone(),
                    metric,
                    hint,
                });
            }
        }
    }
    report.names_used = used.len();
    Ok(report)
}

fn read_file(
    path: &Path,
    out: &mut Vec<Located>,
    recorded: &mut HashSet<String>,
) -> anyhow::Result<()> {
    let text =
        crate::input::read_text(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file = path.display().to_string();
    let is_json =
        path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
    if is_json {
        let v: Value =
            serde_json::from_str(&text).with_context(|| format!("{file} is not valid JSON"))?;
        grafana_exprs(&v, &file, "", out);
        return Ok(());
    }
    crate::text::check_yaml_depth(&text).with_context(|| format!("{file} is not read"))?;
    let v: Value =
        serde_norway::from_str(&text).with_context(|| format!("{file} is not valid YAML"))?;
    // A Prometheus rule file, or a Kubernetes PrometheusRule (spec.groups).
    let groups = v
        .get("groups")
        .or_else(|| v.get("spec").and_then(|s| s.get("groups")))
        .and_then(Value::as_array)
        .with_context(|| format!("{file} has no `groups:` of Prometheus rules"))?;
    for g in groups {
        let group = g["name"].as_str().unwrap_or("?");
        for r in g["rules"].as_array().into_iter().flatten() {
            if let Some(name) = r["record"].as_str() {
                recorded.insert(name.to_string());
            }
            let rule = r["alert"].as_str().or(r["record"].as_str()).unwrap_or("?");
            if let Some(expr) = r["expr"].as_str() {
                out.push(Located {
                    file: file.clone(),
                    location: format!("{group}/{rule}"),
                    expr: expr.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// Every `targets[].expr` of a dashboard, in panels, rows and nested panels, and the
/// metric of `label_values(metric, label)` template variables.
fn grafana_exprs(v: &Value, file: &str, title: &str, out: &mut Vec<Located>) {
    match v {
        Value::Object(m) => {
            let title = m
                .get("title")
                .and_then(Value::as_str)
                .filter(|_| m.contains_key("targets") || m.contains_key("panels"))
                .unwrap_or(title);
            if let Some(targets) = m.get("targets").and_then(Value::as_array) {
                for t in targets {
                    if let Some(expr) = t.get("expr").and_then(Value::as_str) {
                        out.push(Located {
                            file: file.into(),
                            location: format!("panel \"{title}\""),
                            expr: expr.into(),
                        });
                    }
                }
            }
            if let Some(q) = m
                .get("query")
                .and_then(|q| q.as_str().or(q["query"].as_str()))
            {
                if let Some(inner) = q.trim().strip_prefix("label_values(") {
                    if let Some((metric, _)) = inner.rsplit_once(',') {
                        let var = m.get("name").and_then(Value::as_str).unwrap_or("?");
                        out.push(Located {
                            file: file.into(),
                            location: format!("variable \"{var}\""),
                            expr: metric.trim().into(),
                        });
                    }
                }
            }
            for (k, x) in m {
                // `targets` and a variable's `query` are read above.
                if k != "targets" && k != "query" {
                    grafana_exprs(x, file, title, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| grafana_exprs(x, file, title, out)),
        _ => {}
    }
}

/// Grafana's variables, replaced by what the PromQL grammar accepts in their place:
/// durations in `[...]`, a plain label elsewhere.
fn grafana_placeholders(expr: &str) -> String {
    let re_range = regex::Regex::new(r"\[\s*\$\{?[A-Za-z0-9_]+(?::[a-z]+)?\}?\s*\]").unwrap();
    let re_var = regex::Regex::new(r"\$\{[^}]+\}|\$[A-Za-z_][A-Za-z0-9_]*").unwrap();
    let s = re_range.replace_all(expr, "[5m]");
    re_var.replace_all(&s, "var").into_owned()
}

/// `(family, suffix)`: histogram and counter suffixes split off.
fn family_of(name: &str) -> (&str, &str) {
    for suffix in ["_bucket", "_sum", "_count", "_total"] {
        if let Some(f) = name.strip_suffix(suffix) {
            return (f, suffix);
        }
    }
    (name, "")
}

/// The metric name of a selector: its name, or an `__name__="..."` matcher.
fn selector_name(vs: &promql_parser::parser::VectorSelector) -> Option<String> {
    vs.name.clone().or_else(|| {
        vs.matchers
            .matchers
            .iter()
            .find(|m| m.name == "__name__" && matches!(m.op, MatchOp::Equal))
            .map(|m| m.value.clone())
    })
}

fn collect_names(e: &Expr, out: &mut BTreeSet<String>) {
    walk(e, &mut |name| {
        out.insert(name.to_string());
    });
}

fn walk(e: &Expr, f: &mut dyn FnMut(&str)) {
    match e {
        Expr::VectorSelector(vs) => {
            if let Some(n) = selector_name(vs) {
                f(&n)
            }
        }
        Expr::MatrixSelector(ms) => {
            if let Some(n) = selector_name(&ms.vs) {
                f(&n)
            }
        }
        Expr::Aggregate(a) => {
            walk(&a.expr, f);
            if let Some(p) = &a.param {
                walk(p, f);
            }
        }
        Expr::Unary(u) => walk(&u.expr, f),
        Expr::Binary(b) => {
            walk(&b.lhs, f);
            walk(&b.rhs, f);
        }
        Expr::Paren(p) => walk(&p.expr, f),
        Expr::Subquery(s) => walk(&s.expr, f),
        Expr::Call(c) => c.args.args.iter().for_each(|a| walk(a, f)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// Names the server does not export. Either side of an `or` is an alternative (old
/// and new names, one engine or another): its names are findings only when no side
/// is fully exported.
fn missing_names(e: &Expr, known: &dyn Fn(&str) -> bool) -> Vec<String> {
    match e {
        Expr::Binary(b) if b.op.to_string() == "or" => {
            let (l, r) = (missing_names(&b.lhs, known), missing_names(&b.rhs, known));
            if l.is_empty() || r.is_empty() {
                Vec::new()
            } else {
                l.into_iter().chain(r).collect()
            }
        }
        Expr::Binary(b) => {
            let mut v = missing_names(&b.lhs, known);
            v.extend(missing_names(&b.rhs, known));
            v
        }
        Expr::Paren(p) => missing_names(&p.expr, known),
        Expr::Aggregate(a) => {
            let mut v = missing_names(&a.expr, known);
            if let Some(p) = &a.param {
                v.extend(missing_names(p, known));
            }
            v
        }
        Expr::Call(c) => c
            .args
            .args
            .iter()
            .flat_map(|a| missing_names(a, known))
            .collect(),
        other => {
            let mut v = Vec::new();
            walk(other, &mut |n| {
                if !known(n) {
                    v.push(n.to_string())
                }
            });
            v
        }
    }
}

/// Fallback for expressions the parser rejects: identifiers directly before `{` or
/// `[`, and those with a `:` (engine families), outside quoted strings.
fn scan_names(expr: &str) -> BTreeSet<String> {
    let unquoted = regex::Regex::new(r#""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'"#)
        .unwrap()
        .replace_all(expr, "\"\"");
    let re = regex::Regex::new(r"[A-Za-z_:][A-Za-z0-9_:]*").unwrap();
    let mut out = BTreeSet::new();
    for m in re.find_iter(&unquoted) {
        let next = unquoted[m.end()..].trim_start().chars().next();
        let name = m.as_str();
        if name.contains(':') || matches!(next, Some('{') | Some('[')) {
            out.insert(name.to_string());
        }
    }
    out
}

/// The rename (with the suffix kept), or the same role on this server.
fn hint_for(metric: &str, exported: Option<&HashSet<String>>) -> Option<String> {
    let (family, suffix) = family_of(metric);
    let here = |n: &str| exported.is_none_or(|set| set.contains(n));
    if let Some(r) = names::rename_of(family) {
        return Some(match r.new {
            Some(new) => {
                let new = format!("{new}{suffix}");
                let status = match exported {
                    None => "",
                    Some(_) if here(&new) => " (exported here)",
                    Some(_) => " (not exported here either)",
                };
                format!("renamed to {new}{status}: {}", r.note)
            }
            None => r.note.to_string(),
        });
    }
    let (role, others) = names::role_of(family)?;
    let alternative = others
        .iter()
        .map(|n| format!("{n}{suffix}"))
        .find(|n| n != metric && here(n))?;
    Some(format!(
        "the same role ({role}) on this server: {alternative}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grafana_variables_parse_and_suffixes_keep_in_hints() {
        let e = grafana_placeholders(
            r#"sum(rate(vllm:gpu_prefix_cache_hits_total{model_name="$model"}[$__rate_interval])) by (${label})"#,
        );
        let ast = parser::parse(&e).unwrap();
        let mut used = BTreeSet::new();
        collect_names(&ast, &mut used);
        assert_eq!(
            used.into_iter().collect::<Vec<_>>(),
            vec!["vllm:gpu_prefix_cache_hits_total"]
        );
        let hint = hint_for("vllm:gpu_prefix_cache_hits_total", None).unwrap();
        assert!(
            hint.starts_with("renamed to vllm:prefix_cache_hits_total"),
            "{hint}"
        );
    }

    #[test]
    fn an_or_alternative_that_resolves_is_no_finding() {
        let known = |n: &str| n == "vllm:kv_cache_usage_perc";
        let ast = parser::parse("max(vllm:kv_cache_usage_perc) or max(vllm:gpu_cache_usage_perc)")
            .unwrap();
        assert!(missing_names(&ast, &known).is_empty());
        let ast = parser::parse("max(vllm:gpu_cache_usage_perc) / on() group(x_total)").unwrap();
        assert_eq!(
            missing_names(&ast, &known),
            vec!["vllm:gpu_cache_usage_perc", "x_total"]
        );
        assert_eq!(
            scan_names(r#"foo{a="b:c"} + vllm:x + rate(bar[5m])"#)
                .into_iter()
                .collect::<Vec<_>>(),
            vec!["bar", "foo", "vllm:x"]
        );
    }
}
