//! `golive signoff`: the second reviewer's decision, bound to the report by SHA-256.
//!
//! What a sign-off covers, precisely:
//! - `report.json`: the SHA-256 of its *content without the sign-offs*: the file is
//!   parsed as JSON, the top-level `signoffs` member is removed, object keys are
//!   sorted at every level, and the result is serialized compactly (serde_json,
//!   UTF-8, no whitespace). Adding a sign-off therefore never breaks an earlier one;
//!   any other change to the report does, including reformatting-proof changes of
//!   values.
//! - every other regular file under the report directory (recursively; `report.md`,
//!   `junit.xml`, `regressions/*`, logs, ...): the SHA-256 of its bytes, keyed by its
//!   path relative to the directory with `/` separators;
//! - except `report.html` (rendered from `report.json`, rewritten at each sign-off),
//!   names starting with `.` (temporary files of atomic writes), and symlinks.
//!
//! `golive signoff --verify DIR` recomputes the hashes: a covered file that changed or
//! went away, or an evidence file that appeared after the sign-off, is shown and the
//! exit code is 1. The HTML report shows the same per sign-off when it is rendered.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::Utc;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::report::html::{self, Integrity};
use crate::report::{report_path, write_atomic, Report, Signoff, Verdict};

/// Files never covered: derived from report.json, or temporary.
fn excluded(rel: &str) -> bool {
    rel == "report.json" || rel == "report.html" || rel.split('/').any(|part| part.starts_with('.'))
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `v` with object keys sorted at every level.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                out.insert(k.clone(), canonical(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// SHA-256 of a report's content without its sign-offs (see the module docs).
pub fn report_content_digest(report_json: &Value) -> anyhow::Result<String> {
    let mut v = report_json.clone();
    if let Value::Object(m) = &mut v {
        m.remove("signoffs");
    } else {
        anyhow::bail!("report.json is not a JSON object");
    }
    Ok(sha256_hex(&serde_json::to_vec(&canonical(&v))?))
}

fn read_report_value(dir: &Path) -> anyhow::Result<(PathBuf, Value)> {
    let path = report_path(dir);
    let text = crate::input::read_text(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let v: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    Ok((path, v))
}

/// The report directory: `dir` itself, or the parent of a report.json path.
pub fn report_dir(dir: &Path) -> PathBuf {
    if dir.is_dir() {
        dir.to_path_buf()
    } else {
        dir.parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    }
}

/// The SHA-256 of everything a sign-off of `dir` covers now.
pub fn covered_digests(dir: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let dir = report_dir(dir);
    let (_, v) = read_report_value(&dir)?;
    let mut covered = BTreeMap::new();
    covered.insert("report.json".to_string(), report_content_digest(&v)?);
    for entry in walkdir::WalkDir::new(&dir)
        .follow_links(false)
        .sort_by_file_name()
    {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        if !entry.file_type().is_file() {
            continue;
        }
        let rel = entry
            .path()
            .strip_prefix(&dir)
            .unwrap_or(entry.path())
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        if excluded(&rel) {
            continue;
        }
        let bytes = std::fs::read(entry.path())
            .with_context(|| format!("cannot read {}", entry.path().display()))?;
        covered.insert(rel, sha256_hex(&bytes));
    }
    Ok(covered)
}

/// Compares one sign-off's hashes with `now`.
pub fn compare(signoff_index: usize, s: &Signoff, now: &BTreeMap<String, String>) -> Integrity {
    let mut x = Integrity {
        signoff: signoff_index,
        ..Default::default()
    };
    for (file, digest) in &s.covered {
        match now.get(file) {
            None => x.removed.push(file.clone()),
            Some(d) if d != digest => x.changed.push(file.clone()),
            Some(_) => {}
        }
    }
    for file in now.keys() {
        if !s.covered.contains_key(file) {
            x.added.push(file.clone());
        }
    }
    x
}

/// Every recorded sign-off of the report in `dir`, checked against the files now.
pub fn verify(dir: &Path) -> anyhow::Result<(Report, Vec<Integrity>)> {
    let report = Report::load(&report_dir(dir))?;
    let now = covered_digests(dir)?;
    let results = report
        .signoffs
        .iter()
        .enumerate()
        .map(|(i, s)| compare(i, s, &now))
        .collect();
    Ok((report, results))
}

/// Records a sign-off into `dir/report.json` (only its `signoffs` member changes).
pub fn sign(
    dir: &Path,
    reviewer: &str,
    decision: Option<Verdict>,
    note: &str,
    allow_incomplete: bool,
) -> anyhow::Result<Signoff> {
    let dir = report_dir(dir);
    let reviewer = reviewer.trim();
    anyhow::ensure!(!reviewer.is_empty(), "--reviewer must name the reviewer");
    let report = Report::load(&dir)?;
    anyhow::ensure!(
        report.complete || allow_incomplete,
        "the run in {} did not complete; sign it only with --allow-incomplete",
        dir.display()
    );
    if let Some(op) = &report.operator {
        anyhow::ensure!(
            !op.trim().eq_ignore_ascii_case(reviewer),
            "the reviewer must be a second person, not the operator who ran it ({op})"
        );
    }
    let decision = match decision.or(report.verdict) {
        Some(d) => d,
        None => anyhow::bail!("the report has no verdict: pass --decision"),
    };
    let signoff = Signoff {
        reviewer: reviewer.to_string(),
        decision,
        note: note.to_string(),
        at: Utc::now(),
        covered: covered_digests(&dir)?,
    };
    // Append through the JSON value, so members this version does not know survive.
    let (path, mut v) = read_report_value(&dir)?;
    let list = v
        .as_object_mut()
        .context("report.json is not a JSON object")?
        .entry("signoffs")
        .or_insert_with(|| Value::Array(Vec::new()));
    list.as_array_mut()
        .context("report.json: signoffs is not a list")?
        .push(serde_json::to_value(&signoff)?);
    write_atomic(&path, &serde_json::to_vec_pretty(&v)?)?;
    Ok(signoff)
}

/// Renders `dir/report.html`, with each sign-off's integrity checked.
pub fn write_html(dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = report_dir(dir);
    let (report, integrity) = verify(&dir)?;
    let html = html::render_with_integrity(&report, Some(&integrity));
    write_atomic(&dir.join("report.html"), html.as_bytes())
}

pub fn describe(report: &Report, x: &Integrity) -> String {
    let s = &report.signoffs[x.signoff];
    let head = format!(
        "sign-off {} by {} ({}, {}):",
        x.signoff + 1,
        s.reviewer,
        s.decision.as_str(),
        s.at.format("%Y-%m-%d %H:%M:%S UTC")
    );
    if x.intact() {
        return format!("{head} intact ({} files unchanged)", s.covered.len());
    }
    let mut out = format!("{head} CHANGED since the sign-off");
    for f in &x.changed {
        out.push_str(&format!("\n  changed: {f}"));
    }
    for f in &x.removed {
        out.push_str(&format!("\n  removed: {f}"));
    }
    for f in &x.added {
        out.push_str(&format!("\n  added:   {f}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_digest_ignores_signoffs_and_key_order_but_not_values() {
        let a: Value =
            serde_json::from_str(r#"{"b":1,"a":{"y":2,"x":[1,2]},"signoffs":[]}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a":{"x":[1,2],"y":2},"b":1,"signoffs":[{"reviewer":"r"}]}"#)
                .unwrap();
        let c: Value = serde_json::from_str(r#"{"a":{"x":[1,2],"y":3},"b":1}"#).unwrap();
        assert_eq!(
            report_content_digest(&a).unwrap(),
            report_content_digest(&b).unwrap()
        );
        assert_ne!(
            report_content_digest(&a).unwrap(),
            report_content_digest(&c).unwrap()
        );
    }

    #[test]
    fn derived_and_temporary_files_are_not_covered() {
        assert!(excluded("report.html"));
        assert!(excluded(".report.json.tmp"));
        assert!(excluded("regressions/.x.tmp"));
        assert!(!excluded("report.md"));
        assert!(!excluded("regressions/case-1.json"));
    }
}
