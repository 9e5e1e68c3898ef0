//! The text report of `golive triage` for people (`write_text`).

use std::io::{self, Write};

use super::lifecycle::describe;
use super::{Finding, TriageReport};

fn location(f: &Finding) -> String {
    match &f.rank {
        Some(r) => format!("{}:{} ({})", f.file, f.line, r),
        None => format!("{}:{}", f.file, f.line),
    }
}

/// How each process ended, first (one line each, the file named when there are several).
fn write_outcome(out: &mut impl Write, report: &TriageReport) -> io::Result<()> {
    let many = report.inputs.len() > 1;
    for o in &report.outcome {
        if many {
            writeln!(out, "{}: {}", o.file, describe(o))?;
        } else {
            writeln!(out, "{}", describe(o))?;
        }
    }
    if !report.outcome.is_empty() {
        writeln!(out)?;
    }
    Ok(())
}

/// A titled list of findings, one line each (location, kind when asked, class, text).
fn write_list(
    out: &mut impl Write,
    title: &str,
    items: &[Finding],
    with_kind: bool,
) -> io::Result<()> {
    if items.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "{title}")?;
    for s in items {
        let text: String = s.text.chars().take(160).collect();
        let tag = if with_kind {
            format!("{} {}", s.kind, s.class.as_str())
        } else {
            s.class.as_str().to_string()
        };
        writeln!(out, "  {} [{tag}] {text}", location(s))?;
    }
    Ok(())
}

/// The errors the processes went on after.
fn write_survived(out: &mut impl Write, report: &TriageReport) -> io::Result<()> {
    let title = format!(
        "Errors survived ({}): the process went on after them (loading, serving):",
        report.survived.len()
    );
    write_list(out, &title, &report.survived, false)
}

/// The report for people.
pub fn write_text(out: &mut impl Write, report: &TriageReport) -> io::Result<()> {
    write_outcome(out, report)?;
    let Some(p) = &report.primary else {
        let lines: u64 = report.inputs.iter().map(|i| i.lines).sum();
        writeln!(
            out,
            "No failure found in {} line(s) of {} input(s).",
            lines,
            report.inputs.len()
        )?;
        return write_survived(out, report);
    };
    writeln!(out, "First cause: {}  [{}]", location(p), p.class.as_str())?;
    writeln!(out)?;
    let first = p.line.saturating_sub(p.context.len() as u64);
    for (i, c) in p.context.iter().enumerate() {
        writeln!(out, "  {:>7} | {}", first + i as u64, c)?;
    }
    writeln!(out, "> {:>7} | {}", p.line, p.text)?;
    if let Some(last) = p.last_line {
        writeln!(
            out,
            "  (the same failure {} times in this file; the last at line {last})",
            p.count
        )?;
    }
    writeln!(out)?;
    writeln!(out, "class:     {}", p.class.as_str())?;
    writeln!(out, "rule:      {}", p.rule)?;
    if let Some(r) = &p.rank {
        writeln!(out, "rank:      {r}")?;
    }
    writeln!(out, "why:       {}", p.why)?;
    writeln!(out, "next step: {}", p.next_step)?;
    let title = format!(
        "Other errors in the logs ({}), explained by or after the cause:",
        report.secondary.len()
    );
    write_list(out, &title, &report.secondary, true)?;
    write_survived(out, report)
}
