//! `golive signoff`: the second reviewer's decision, bound to the report by SHA-256.
//!
//! What a sign-off covers, precisely (its *payload*, the canonical JSON of the record
//! without `signature`: keys sorted, compact, UTF-8):
//! - `report.json`: the SHA-256 of its content without the `signoffs` member (parsed,
//!   keys sorted at every level, serialized compactly), so adding a sign-off never
//!   breaks an earlier one; the sign-offs themselves are covered by the chain below;
//! - every other regular file under the report directory, recursively, dot-files
//!   included (SHA-256 of its bytes, keyed by its `/`-separated relative path), except
//!   `report.html` and symlinks;
//! - `report.html` is checked instead as the exact rendering of the signed report: any
//!   byte that differs from what `write_html` produces is reported as a change;
//! - the sign-off's own fields: reviewer, decision, note, time;
//! - `previous`: the SHA-256 of the previous sign-off's whole record (payload and
//!   signature), so each sign-off covers the earlier ones (a chain).
//!
//! With a key the payload is signed by `ssh-keygen -Y sign -n golive` (the mechanism
//! of git's SSH-signed commits); `verify_signature` runs `ssh-keygen -Y verify` with
//! an allowed-signers file and the reviewer as identity. Without a key the sign-off is
//! recorded as unsigned. Not detected: removing the *last* sign-off(s) entirely.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::Utc;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::report::html::{self, Integrity};
use crate::report::{report_path, worksheet, write_atomic, Report, Signoff, Verdict};

/// The namespace of golive's SSH signatures (`ssh-keygen -n`).
pub const NAMESPACE: &str = "golive";

/// Files not hashed as bytes: report.json (hashed without its sign-offs) and
/// report.html (checked as the rendering of the signed report).
fn excluded(rel: &str) -> bool {
    rel == "report.json" || rel == "report.html"
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

/// The bytes a sign-off's signature covers: its record without `signature`, canonical.
pub fn payload(s: &Signoff) -> anyhow::Result<Vec<u8>> {
    let mut v = serde_json::to_value(s)?;
    if let Value::Object(m) = &mut v {
        m.remove("signature");
    }
    Ok(serde_json::to_vec(&canonical(&v))?)
}

/// SHA-256 of a sign-off's whole record (payload and signature): what the next chains to.
pub fn record_digest(s: &Signoff) -> anyhow::Result<String> {
    Ok(sha256_hex(&serde_json::to_vec(&canonical(
        &serde_json::to_value(s)?,
    ))?))
}

/// Every sign-off checked against the files now and the chain (report.html not included).
fn check_files(dir: &Path) -> anyhow::Result<(Report, Vec<Integrity>)> {
    let report = Report::load(&report_dir(dir))?;
    let now = covered_digests(dir)?;
    let mut results = Vec::new();
    for (i, s) in report.signoffs.iter().enumerate() {
        let mut x = compare(i, s, &now);
        let expected = match i {
            0 => None,
            _ => Some(record_digest(&report.signoffs[i - 1])?),
        };
        x.chain_broken = s.previous != expected;
        results.push(x);
    }
    Ok((report, results))
}

/// Every recorded sign-off of the report in `dir`, checked against the files now, the
/// chain, and report.html as the rendering of the signed report. Signatures are
/// checked separately ([`verify_signature`]).
pub fn verify(dir: &Path) -> crate::Result<(Report, Vec<Integrity>)> {
    let (report, mut results) = check_files(dir)?;
    let expected = html::render_with_integrity(&report, Some(&results));
    let path = report_dir(dir).join("report.html");
    let problem = match std::fs::read(&path) {
        Ok(bytes) if bytes == expected.as_bytes() => None,
        Ok(_) => Some(false),
        Err(_) => Some(true),
    };
    if let Some(removed) = problem {
        for x in &mut results {
            let list = if removed {
                &mut x.removed
            } else {
                &mut x.changed
            };
            list.push("report.html".to_string());
        }
    }
    Ok((report, results))
}

/// What a sign-off's signature says.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "detail")]
pub enum SignatureState {
    /// Recorded without `--key`.
    Unsigned,
    /// Signed; not checked (no allowed-signers file given).
    NotChecked,
    /// `ssh-keygen -Y verify` accepted it for the reviewer.
    Good,
    /// `ssh-keygen -Y verify` refused it (its message).
    Bad(String),
}

fn ssh_keygen(args: &[&std::ffi::OsStr], stdin: &[u8]) -> anyhow::Result<std::process::Output> {
    use std::io::Write;
    let mut child = std::process::Command::new("ssh-keygen")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("cannot run ssh-keygen (is OpenSSH installed?)")?;
    let mut input = child.stdin.take().context("ssh-keygen: no stdin")?;
    input
        .write_all(stdin)
        .context("ssh-keygen: cannot write the payload")?;
    drop(input);
    // A deadline: a key with a passphrase asks on the terminal (the reviewer types it);
    // nothing else may hold the sign-off forever. Its output is a few hundred bytes, so
    // the pipes cannot fill while it runs.
    let deadline = std::time::Instant::now() + SSH_KEYGEN_DEADLINE;
    while child.try_wait()?.is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!(
                "ssh-keygen did not finish within {} s",
                SSH_KEYGEN_DEADLINE.as_secs()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
        .wait_with_output()
        .context("ssh-keygen did not finish")
}

/// How long `ssh-keygen` may take, a passphrase typed at the terminal included.
const SSH_KEYGEN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// Signs `payload` with the SSH private key at `key` (namespace `golive`).
pub fn ssh_sign(key: &Path, payload: &[u8]) -> anyhow::Result<String> {
    let out = ssh_keygen(
        &[
            "-Y".as_ref(),
            "sign".as_ref(),
            "-f".as_ref(),
            key.as_os_str(),
            "-n".as_ref(),
            NAMESPACE.as_ref(),
        ],
        payload,
    )?;
    anyhow::ensure!(
        out.status.success(),
        "ssh-keygen -Y sign with {} failed: {}",
        key.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let sig = String::from_utf8(out.stdout).context("ssh-keygen: signature is not text")?;
    anyhow::ensure!(
        sig.contains("BEGIN SSH SIGNATURE"),
        "ssh-keygen -Y sign printed no signature"
    );
    Ok(sig)
}

/// Checks a sign-off's signature against `allowed_signers` for its reviewer.
pub fn verify_signature(
    s: &Signoff,
    allowed_signers: Option<&Path>,
) -> anyhow::Result<SignatureState> {
    let Some(sig) = &s.signature else {
        return Ok(SignatureState::Unsigned);
    };
    let Some(allowed) = allowed_signers else {
        return Ok(SignatureState::NotChecked);
    };
    let mut file = tempfile::NamedTempFile::new().context("cannot create a temporary file")?;
    std::io::Write::write_all(&mut file, sig.as_bytes())?;
    let out = ssh_keygen(
        &[
            "-Y".as_ref(),
            "verify".as_ref(),
            "-f".as_ref(),
            allowed.as_os_str(),
            "-I".as_ref(),
            s.reviewer.as_ref(),
            "-n".as_ref(),
            NAMESPACE.as_ref(),
            "-s".as_ref(),
            file.path().as_os_str(),
        ],
        &payload(s)?,
    )?;
    Ok(if out.status.success() {
        SignatureState::Good
    } else {
        let msg = format!(
            "{} {}",
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        SignatureState::Bad(msg.trim().to_string())
    })
}

/// What a reviewer signs with (`golive signoff`'s options).
#[derive(Debug, Clone, Default)]
pub struct SignOptions {
    /// Who signs (`--reviewer`), as the report shows it.
    pub reviewer: String,
    /// None: the run's verdict.
    pub decision: Option<Verdict>,
    /// The reviewer's note (`--note`); empty: none.
    pub note: String,
    /// Sign a run that did not complete.
    pub allow_incomplete: bool,
    /// The reviewer's SSH private key; none: unsigned.
    pub key: Option<PathBuf>,
    /// Who rolls the deployment back.
    pub rollback_owner: Option<String>,
    /// Worksheet items left open that the reviewer accepts, with the reason.
    pub accept_open: BTreeMap<String, String>,
}

/// Records a sign-off into `dir/report.json` (only its `signoffs` member changes).
/// Refused while a worksheet item is failed or unattended and not accepted by name.
pub fn sign(dir: &Path, opts: &SignOptions) -> crate::Result<Signoff> {
    let dir = report_dir(dir);
    let reviewer = opts.reviewer.trim();
    crate::error::ensure_input!(!reviewer.is_empty(), "--reviewer must name the reviewer");
    let report = Report::load(&dir)?;
    crate::error::ensure_input!(
        report.complete || opts.allow_incomplete,
        "the run in {} did not complete; sign it only with --allow-incomplete",
        dir.display()
    );
    if let Some(op) = &report.operator {
        crate::error::ensure_input!(
            !op.trim().eq_ignore_ascii_case(reviewer),
            "the reviewer must be a second person, not the operator who ran it ({op})"
        );
    }
    let decision = match opts.decision.or(report.verdict) {
        Some(d) => d,
        None => crate::error::bail_input!("the report has no verdict: pass --decision"),
    };
    let mut signoff = Signoff {
        reviewer: reviewer.to_string(),
        decision,
        note: opts.note.clone(),
        at: Utc::now(),
        covered: covered_digests(&dir)?,
        previous: report.signoffs.last().map(record_digest).transpose()?,
        signature: None,
        rollback_owner: opts.rollback_owner.clone().filter(|o| !o.trim().is_empty()),
        accepted_open: opts.accept_open.clone(),
    };
    check_worksheet(&report, &signoff)?;
    if let Some(key) = &opts.key {
        signoff.signature = Some(ssh_sign(key, &payload(&signoff)?)?);
    }
    // Append through the JSON value, so members this version does not know survive.
    let (path, mut v) = read_report_value(&dir)?;
    let list = v
        .as_object_mut()
        .context("report.json is not a JSON object")?
        .entry("signoffs")
        .or_insert_with(|| Value::Array(Vec::new()));
    list.as_array_mut()
        .context("report.json: signoffs is not a list")?
        .push(serde_json::to_value(&signoff).map_err(crate::error::internal)?);
    write_atomic(
        &path,
        &serde_json::to_vec_pretty(&v).map_err(crate::error::internal)?,
    )?;
    Ok(signoff)
}

/// Every `--accept-open` names a worksheet item, carries a reason, and no item is left
/// open (failed or unattended) without one.
fn check_worksheet(report: &Report, s: &Signoff) -> anyhow::Result<()> {
    for (id, reason) in &s.accepted_open {
        anyhow::ensure!(
            report.worksheet.iter().any(|e| &e.id == id),
            "--accept-open {id}: the report's worksheet has no such item"
        );
        anyhow::ensure!(
            !reason.trim().is_empty(),
            "--accept-open {id} needs a reason (--reason TEXT or {id}=TEXT)"
        );
    }
    let open = worksheet::open_after(report, s);
    if open.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = open
        .iter()
        .map(|e| format!("  {} ({}): {}", e.id, e.state.as_str(), e.detail))
        .collect();
    anyhow::bail!(
        "{} worksheet item(s) are open; attach their evidence and run again, or accept each \
         by name with --accept-open ITEM --reason TEXT:\n{}",
        open.len(),
        list.join("\n")
    )
}

/// Renders `dir/report.html`, with each sign-off's integrity checked.
pub fn write_html(dir: &Path) -> crate::Result<PathBuf> {
    let dir = report_dir(dir);
    let (report, integrity) = check_files(&dir)?;
    let html = html::render_with_integrity(&report, Some(&integrity));
    Ok(write_atomic(&dir.join("report.html"), html.as_bytes())?)
}

/// The integrity of one sign-off in words, as `golive signoff --verify` prints it: intact, or what changed since.
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
    if x.chain_broken {
        out.push_str("\n  chain broken: the previous sign-off was changed or removed");
    }
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
    fn only_report_json_and_html_are_not_hashed_as_bytes() {
        assert!(excluded("report.html"));
        assert!(excluded("report.json"));
        assert!(!excluded(".report.json.tmp"));
        assert!(!excluded("regressions/.x.tmp"));
        assert!(!excluded("report.md"));
        assert!(!excluded("regressions/case-1.json"));
    }
}
