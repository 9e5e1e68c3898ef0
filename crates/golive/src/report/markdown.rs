//! Markdown rendering of a report: verdict, checks, measurements, baseline, sign-offs.
use super::worksheet::{self, ItemState};
use super::{Measurements, Percentiles, Report, Status};

fn cell(s: &str) -> String {
    // One table row per check: no newlines or pipes inside a cell.
    let one_line = s.replace(['\n', '\r'], " ").replace('|', "\\|");
    crate::text::truncate(&one_line, 240)
}

fn status_word(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Warn => "**warn**",
        Status::Fail => "**FAIL**",
        Status::Skip => "skip",
        Status::Unknown => "unknown",
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".to_string(), |x| format!("{x:.digits$}"))
}

fn pct(p: &Percentiles) -> String {
    if p.count == 0 {
        "–".into()
    } else {
        format!("{:.0} / {:.0}", p.p50, p.p95)
    }
}

/// The report as Markdown (`report.md`).
pub fn render(report: &Report) -> String {
    let m = &report.measurements;
    [
        header_section(report),
        worksheet_section(report),
        checks_section(report),
        problems_section(report),
        prefix_cache_section(m),
        ramp_section(m),
        agent_section(m),
        soak_section(m),
        baseline_section(report),
        signoffs_section(report),
    ]
    .concat()
}

/// The title, the verdict and the run's facts (servers, model, times, operator, golive).
fn header_section(report: &Report) -> String {
    let mut md = String::new();
    md.push_str("# golive acceptance report\n\n");
    let verdict = report
        .verdict
        .map_or("none (run incomplete)", |v| v.as_str());
    md.push_str(&format!("**Verdict: {verdict}**"));
    if !report.verdict_reason.is_empty() {
        md.push_str(&format!(" — {}", report.verdict_reason));
    }
    md.push_str("\n\n");
    md.push_str("| | |\n|---|---|\n");
    md.push_str(&format!(
        "| Servers | {} |\n",
        cell(&report.urls.join(", "))
    ));
    md.push_str(&format!(
        "| Engine / model | {} / {} |\n",
        report.engine.as_deref().unwrap_or("–"),
        report.model.as_deref().unwrap_or("–")
    ));
    if let Some(p) = &report.profile {
        md.push_str(&format!("| Profile | {} |\n", cell(p)));
    }
    md.push_str(&format!(
        "| Started / finished | {} / {} |\n",
        report.started_at.to_rfc3339(),
        report
            .finished_at
            .map_or("not finished".to_string(), |t| t.to_rfc3339())
    ));
    md.push_str(&format!(
        "| Complete | {} |\n",
        if report.complete {
            "yes"
        } else {
            "**no** (interrupted or still running)"
        }
    ));
    md.push_str(&format!(
        "| Operator / reviewer | {} / {} |\n",
        report.operator.as_deref().unwrap_or("–"),
        report.reviewer.as_deref().unwrap_or("–")
    ));
    md.push_str(&format!(
        "| golive | {} commit {} (schema {}) |\n\n",
        report.tool_version,
        or_unknown(&report.tool_commit),
        report.schema_version
    ));
    md
}

/// Every check in a table, with the count per status.
fn checks_section(report: &Report) -> String {
    let mut md = String::new();
    let count = |s: Status| report.checks.iter().filter(|c| c.status == s).count();
    md.push_str(&format!(
        "## Checks\n\n{} pass, {} warn, {} fail, {} skip, {} unknown\n\n",
        count(Status::Pass),
        count(Status::Warn),
        count(Status::Fail),
        count(Status::Skip),
        count(Status::Unknown)
    ));
    md.push_str("| Check | Stage | Status | Impact | Measurement |\n|---|---|---|---|---|\n");
    for c in &report.checks {
        md.push_str(&format!(
            "| `{}` | {:?} | {} | {:?} | {} |\n",
            c.id,
            c.stage,
            status_word(c.status),
            c.impact,
            cell(&c.measurement)
        ));
    }
    md
}

/// Each failed or warned check with its test, measurement, owner, next step and evidence.
fn problems_section(report: &Report) -> String {
    let mut md = String::new();
    let problems: Vec<_> = report
        .checks
        .iter()
        .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
        .collect();
    if !problems.is_empty() {
        md.push_str("\n## Failures and warnings\n");
        for c in problems {
            md.push_str(&format!("\n### `{}` — {}\n\n", c.id, status_word(c.status)));
            md.push_str(&format!("- Test: {}\n", c.test_case));
            md.push_str(&format!("- Measured: {}\n", c.measurement));
            if let Some(o) = c.owner {
                md.push_str(&format!("- Owner: {o:?}\n"));
            }
            if !c.next_step.is_empty() {
                md.push_str(&format!("- Next step: {}\n", c.next_step));
            }
            if !c.evidence.is_empty() {
                md.push_str(&format!(
                    "\n```text\n{}\n```\n",
                    c.evidence.replace("```", "'''")
                ));
            }
            if let Some(r) = &c.request {
                md.push_str(&format!(
                    "\n<details><summary>request</summary>\n\n```json\n{}\n```\n</details>\n",
                    serde_json::to_string_pretty(r).unwrap_or_default()
                ));
            }
        }
    }
    md
}

/// The prefix-cache proof's requests.
fn prefix_cache_section(m: &Measurements) -> String {
    let mut md = String::new();
    if !m.prefix_cache.is_empty() {
        md.push_str("\n## Prefix cache\n\n| Request | Prompt tokens | Cached tokens | Hits (metrics) | Prefill ms | TTFT ms |\n|---|---|---|---|---|---|\n");
        for s in &m.prefix_cache {
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                s.role,
                s.prompt_tokens.map_or("–".into(), |v| v.to_string()),
                s.cached_tokens.map_or("–".into(), |v| v.to_string()),
                opt(s.hits_delta, 0),
                opt(s.prefill_ms, 0),
                opt(s.ttft_ms, 0)
            ));
        }
    }
    md
}

/// The ramp's steps.
fn ramp_section(m: &Measurements) -> String {
    let mut md = String::new();
    if !m.ramp.is_empty() {
        md.push_str("\n## Ramp\n\n| Step | Conc. | Prompt | Requests | Errors | TTFT p50/p95 ms | ITL p50/p95 ms | E2E p50/p95 ms | KV max | Waiting max | Preemptions | GPU MiB | Status |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for s in &m.ramp {
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                cell(&s.label),
                s.concurrency,
                s.prompt_tokens,
                s.requests,
                s.errors,
                pct(&s.ttft_ms),
                pct(&s.itl_ms),
                pct(&s.e2e_ms),
                s.kv_cache_usage
                    .map_or("–".into(), |v| format!("{:.0}%", v * 100.0)),
                opt(s.waiting_max, 0),
                opt(s.preemptions, 0),
                opt(s.gpu_memory_used_mib, 0),
                s.status.map_or("–", status_word)
            ));
        }
    }
    md
}

/// Agent conformance per ramp step, where the ramp sent agent requests.
fn agent_section(m: &Measurements) -> String {
    let mut md = String::new();
    if m.ramp.iter().any(|s| s.agent.is_some()) {
        md.push_str("\n## Agent conformance under load\n\n| Step | Conc. | Agent requests | Conformant | Model's failures | Failing problems (all owners) |\n|---|---|---|---|---|---|\n");
        for s in &m.ramp {
            let Some(a) = &s.agent else { continue };
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                cell(&s.label),
                s.concurrency,
                a.requests,
                a.rate_text(),
                a.model_failures,
                cell(&a.codes_text())
            ));
        }
    }
    md
}

/// The soak's samples.
fn soak_section(m: &Measurements) -> String {
    let mut md = String::new();
    if !m.soak.is_empty() {
        md.push_str("\n## Soak\n\n| t s | Done | Errors | Running | Waiting | KV | Cache hit ratio | TTFT p95 ms |\n|---|---|---|---|---|---|---|---|\n");
        for s in &m.soak {
            md.push_str(&format!(
                "| {:.0} | {} | {} | {} | {} | {} | {} | {} |\n",
                s.t_s,
                s.requests_done,
                s.errors,
                opt(s.running, 0),
                opt(s.waiting, 0),
                s.kv_cache_usage
                    .map_or("–".into(), |v| format!("{:.0}%", v * 100.0)),
                s.cache_hit_ratio
                    .map_or("–".into(), |v| format!("{:.0}%", v * 100.0)),
                opt(s.ttft_p95_ms, 0)
            ));
        }
    }
    md
}

/// The baseline `golive watch` judges against.
fn baseline_section(report: &Report) -> String {
    let mut md = String::new();
    md.push_str("\n## Baseline (for `golive watch`)\n\n| Metric | Value |\n|---|---|\n");
    for (label, value) in report.baseline.rows() {
        md.push_str(&format!(
            "| {label} | {} |\n",
            value.as_deref().unwrap_or("–")
        ));
    }
    md
}

/// The reviewers' sign-offs.
fn signoffs_section(report: &Report) -> String {
    let mut md = String::new();
    if !report.signoffs.is_empty() {
        md.push_str("\n## Sign-offs\n\n| Reviewer | Decision | At | Note |\n|---|---|---|---|\n");
        for s in &report.signoffs {
            md.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                cell(&s.reviewer),
                s.decision.as_str(),
                s.at.to_rfc3339(),
                cell(&s.note)
            ));
        }
    }
    md
}

/// The runbook's worksheet: each item proven (by which checks), failed, accepted open,
/// or needing a person (and what to attach).
fn worksheet_section(report: &Report) -> String {
    let entries = worksheet::current(report);
    if entries.is_empty() {
        return String::new();
    }
    let [proven, failed, person, accepted] = worksheet::tally(&entries);
    let mut md = format!(
        "## Worksheet\n\n{proven} proven, {failed} failed, {person} need a person, {accepted} accepted open\n\n\
         | # | Item | State | Evidence |\n|---|---|---|---|\n"
    );
    for (i, e) in entries.iter().enumerate() {
        let state = match e.state {
            ItemState::Proven => "proven".to_string(),
            other => format!("**{}**", other.as_str()),
        };
        let checks: Vec<String> = e.checks.iter().map(|c| format!("`{c}`")).collect();
        let evidence = if checks.is_empty() {
            cell(&e.detail)
        } else {
            format!("{} ({})", cell(&e.detail), checks.join(", "))
        };
        md.push_str(&format!(
            "| {} | {} `{}` | {state} | {evidence} |\n",
            i + 1,
            cell(&e.text),
            e.id
        ));
    }
    md.push('\n');
    md
}

/// A value absent from an older report.
fn or_unknown(s: &str) -> &str {
    if s.is_empty() {
        "unknown"
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Check, Impact, Stage};

    #[test]
    fn failures_are_listed_with_evidence_and_cells_stay_one_line() {
        let mut r = Report::new(vec!["http://127.0.0.1:1".into()]);
        let mut c = Check::new("prefix_cache", Stage::PrefixCache, Status::Fail, "t");
        c.measurement = "feature off | line1\nline2".into();
        c.evidence = "hits 0".into();
        c.impact = Impact::Environment;
        r.checks.push(c);
        r.decide();
        let md = render(&r);
        assert!(md.contains("**Verdict: rebuild**"));
        assert!(md.contains("feature off \\| line1 line2"));
        assert!(md.contains("```text\nhits 0\n```"));
    }
}
