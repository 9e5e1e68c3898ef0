//! Self-contained HTML rendering of a report: one file, no network, no script; inline
//! CSS and inline SVG charts drawn here. Every piece of text from the report is
//! escaped.

mod charts;
mod svg;

use charts::charts;

use std::fmt::Write;

use super::worksheet::{self, ItemState};
use super::{Check, Report, Status, Verdict};

/// What a sign-off's hashes say about the files now (the sign-off command checks them).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Integrity {
    /// Index into `report.signoffs`.
    pub signoff: usize,
    /// Covered files whose content changed since the sign-off.
    pub changed: Vec<String>,
    /// Covered files that are gone since the sign-off.
    pub removed: Vec<String>,
    /// Evidence files that appeared after the sign-off.
    pub added: Vec<String>,
    /// The previous sign-off is not the one this sign-off chained to.
    #[serde(default)]
    pub chain_broken: bool,
}

impl Integrity {
    /// Nothing covered changed, was removed or added, and the chain holds.
    pub fn intact(&self) -> bool {
        !self.chain_broken
            && self.changed.is_empty()
            && self.removed.is_empty()
            && self.added.is_empty()
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
    worksheet(&mut h, report);
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
    let entries = worksheet::current(report);
    if !entries.is_empty() {
        let [proven, failed, person, accepted] = worksheet::tally(&entries);
        row(
            "Worksheet",
            &format!("{proven} proven, {failed} failed, {person} need a person, {accepted} accepted open (below)"),
        );
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
    h.push_str("<table><tr><th>Reviewer</th><th>Decision</th><th>At</th><th>Note</th><th>Rollback owner</th><th>Files covered</th><th>Integrity</th></tr>");
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
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{state}</td></tr>",
            esc(&s.reviewer),
            esc(s.decision.as_str()),
            esc(&s.at.format("%Y-%m-%d %H:%M:%S UTC").to_string()),
            esc(&s.note),
            esc(s.rollback_owner.as_deref().unwrap_or("–")),
            s.covered.len()
        );
    }
    h.push_str("</table></section>\n");
}

/// The runbook's worksheet: one row per item, its state, and links to the checks that
/// prove or fail it.
fn worksheet(h: &mut String, report: &Report) {
    let entries = worksheet::current(report);
    if entries.is_empty() {
        return;
    }
    let [proven, failed, person, accepted] = worksheet::tally(&entries);
    let _ = write!(
        h,
        "<section id=\"worksheet\"><h2>Worksheet ({proven} proven, {failed} failed, {person} need a person, {accepted} accepted open)</h2>\
         <table><tr><th>#</th><th>Item</th><th>State</th><th>Evidence</th></tr>"
    );
    for (i, e) in entries.iter().enumerate() {
        let class = match e.state {
            ItemState::Proven => "pass",
            ItemState::Failed => "fail",
            ItemState::NeedsPerson => "unknown",
            ItemState::Accepted => "warn",
        };
        let links: Vec<String> = e
            .checks
            .iter()
            .map(|c| format!("<a href=\"#check-{0}\"><code>{0}</code></a>", esc(c)))
            .collect();
        let _ = write!(
            h,
            "<tr id=\"item-{}\" class=\"ws-{class}\"><td>{}</td><td>{}<br><small><code>{}</code></small></td>\
             <td><span class=\"st st-{class}\">{}</span></td><td>{}<br>{}</td></tr>",
            esc(&e.id),
            i + 1,
            esc(&e.text),
            esc(&e.id),
            esc(e.state.as_str()),
            esc(&e.detail),
            links.join(" ")
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
            "<tr id=\"check-{}\"><td><span class=\"st st-{status}\">{}</span></td><td><code>{}</code><br><small>{}</small></td><td>{}</td><td>{}{evidence}</td><td>{}{}{}</td><td>{}</td></tr>",
            esc(&c.id),
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
}
