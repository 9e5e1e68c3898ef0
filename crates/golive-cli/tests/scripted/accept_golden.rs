//! The golden acceptance run: one `golive accept` against a scripted server whose
//! report.json and report.md are compared with the files committed under
//! `crates/golive/tests/golden/accept/`, after masking what varies from run to run (timestamps,
//! durations and latencies, rates, ports, the output folder, the build's commit, the
//! prefix-cache proof's session nonce and the token estimate that depends on it). Restructuring the stages, the agent judge or the
//! report writers must leave both files as they are; a change on purpose is blessed
//! with `GOLIVE_BLESS=1 cargo test -p golive-cli --test scripted accept_golden` and reviewed in the
//! diff of the commit.
//!
//! The run: a healthy scripted server (4 tokens per answer, 2 ms apart) that ignores
//! what it is asked, so the agent stage finds the same problems every time; every
//! stage but the soak, whose request count depends on the machine's speed. Checked
//! stable over 25 runs on the busy 2-core machine.

use crate::common;
use crate::fault_server;

use std::path::PathBuf;
use std::process::Command;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use fault_server::{start, Fault};

fn golden_dir() -> PathBuf {
    common::repo_root().join("crates/golive/tests/golden/accept")
}

/// Masks in free text, in this order: `(pattern, replacement)`.
static TEXT_MASKS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // Ports of the scripted server.
        (r"127\.0\.0\.1:\d+", "127.0.0.1:PORT"),
        // RFC 3339 timestamps (report.md writes them with +00:00).
        (
            r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
            "TIME",
        ),
        (r"commit [0-9a-f]{7,40}", "commit COMMIT"),
        // Latencies and rates in sentences: "12 ms", "3.4 ms", "35.78 req/s".
        (r"\b\d+(\.\d+)? (ms|req/s)\b", "N $2"),
        (r"prefill_ms=\d+(\.\d+)?", "prefill_ms=N"),
        // Whether the warm prefill was faster than the cold one is a latency comparison.
        (
            r"\[(ok|FAILED)\] warm prefill drops",
            "[ok|FAILED] warm prefill drops",
        ),
        // The ramp step (or soak) where the longest silence fell depends on timing.
        (r"\((ramp|soak) '[^']*'\)", "(STEP)"),
        // The prefix-cache proof starts its prompts with a random session nonce (hex,
        // without leading zeros).
        (r"Session [0-9a-f]+\.", "Session NONCE."),
    ]
    .into_iter()
    .map(|(p, r)| (Regex::new(p).unwrap(), r))
    .collect()
});

fn mask_text(text: &str, out_dir: &str) -> String {
    let mut s = text.replace(out_dir, "OUT");
    for (re, with) in TEXT_MASKS.iter() {
        s = re.replace_all(&s, *with).into_owned();
    }
    s
}

/// Whether a JSON field holds a latency, a duration or a rate (`*_ms`, `*_rps`).
fn timed_key(key: &str) -> bool {
    key.ends_with("_ms") || key.ends_with("_rps")
}

/// report.json with what varies masked: timestamps, the commit, every number under a
/// `*_ms` / `*_rps` field (percentile objects keep their `count`), and the text masks
/// in every string.
fn mask_json(v: &mut Value, key: &str, out_dir: &str) {
    match v {
        Value::String(s) if matches!(key, "started_at" | "finished_at" | "last_success_at") => {
            *s = "TIME".into()
        }
        Value::String(s) if key == "tool_commit" => *s = "COMMIT".into(),
        Value::String(s) => *s = mask_text(s, out_dir),
        Value::Number(_) if timed_key(key) => *v = Value::String("N".into()),
        // The estimate is proportional to the prompt's length, and the nonce above
        // varies in length.
        Value::Number(_) if key == "shared_prefix_tokens" => *v = Value::String("N".into()),
        Value::Array(items) => {
            for x in items {
                mask_json(x, key, out_dir);
            }
        }
        Value::Object(fields) => {
            let percentiles = timed_key(key);
            for (k, x) in fields.iter_mut() {
                if percentiles && k != "count" && x.is_number() {
                    *x = Value::String("N".into());
                } else {
                    mask_json(x, k, out_dir);
                }
            }
        }
        _ => {}
    }
}

static DIGITS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+(\.\d+)?").unwrap());

/// report.md with the text masks, and the numbers in table columns measured in ms.
fn mask_markdown(md: &str, out_dir: &str) -> String {
    let mut timed_columns: Vec<bool> = Vec::new();
    let mut lines = Vec::new();
    for line in md.lines() {
        let masked = mask_text(line, out_dir);
        if !line.starts_with('|') {
            timed_columns.clear();
            lines.push(masked);
            continue;
        }
        let cells: Vec<&str> = masked.split('|').collect();
        if timed_columns.is_empty() {
            // The header row of a table.
            timed_columns = cells.iter().map(|c| c.contains(" ms")).collect();
            lines.push(masked);
            continue;
        }
        let row: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| match timed_columns.get(i) {
                Some(true) => DIGITS.replace_all(c, "N").into_owned(),
                _ => c.to_string(),
            })
            .collect();
        lines.push(row.join("|"));
    }
    lines.join("\n") + "\n"
}

/// Compares `actual` with the golden file `name`; with `GOLIVE_BLESS=1` writes it instead.
fn compare_with_golden(name: &str, actual: &str) -> Option<String> {
    let path = golden_dir().join(name);
    if std::env::var_os("GOLIVE_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return None;
    }
    let golden = std::fs::read_to_string(&path).unwrap_or_default();
    (golden != actual).then(|| {
        similar::TextDiff::from_lines(&golden, actual)
            .unified_diff()
            .context_radius(3)
            .header(&format!("golden {name}"), &format!("this run's {name}"))
            .to_string()
    })
}

#[test]
fn a_scripted_run_writes_the_golden_report_json_and_markdown() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::Ok {
        tokens: 4,
        delay_ms: 2,
    }));
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(common::golive_bin())
        .args(["accept", "--url", &server.url, "--out"])
        .arg(dir.path())
        .args(["--concurrency", "2", "--output-tokens", "4"])
        .args(["--max-context", "512", "--request-timeout", "30s"])
        .args(["--repeat", "1", "--skip", "soak"])
        // Generous deadlines: a busy machine must not turn a 2 ms answer into a timeout.
        .args(["--agent-first-timeout", "30s"])
        .args(["--reviewer", "Dana Reviewer", "--operator", "ops"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "verdict observe: {stderr}");
    let out_dir = dir.path().to_str().unwrap();
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();

    let mut json: Value = serde_json::from_str(&read("report.json")).unwrap();
    mask_json(&mut json, "", out_dir);
    let json = serde_json::to_string_pretty(&json).unwrap() + "\n";
    let md = mask_markdown(&read("report.md"), out_dir);

    let diffs: Vec<String> = [("report.json", json), ("report.md", md)]
        .iter()
        .filter_map(|(name, text)| compare_with_golden(name, text))
        .collect();
    assert!(
        diffs.is_empty(),
        "the run's reports differ from {} (after masking); if the change is meant, \
         bless it with GOLIVE_BLESS=1 and commit the new files:\n{}",
        golden_dir().display(),
        diffs.join("\n")
    );
}
