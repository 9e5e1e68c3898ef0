//! Following a server log: new lines since the last poll, and the lines among them
//! that bear on a rollback trigger (OOM, driver/NCCL, tool-call/schema failures).
//!
//! The triage engine ([`crate::triage::analyze_paths`]) judges the new lines first; the
//! same rules, line by line, catch what it does not report (e.g. a line it counts as a
//! consequence of an earlier cause).

use crate::triage::rules::RuleSet;
use crate::triage::{self, Class};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Which rollback trigger a log line feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LogKind {
    Oom,
    DriverNccl,
    ToolSchema,
}

/// One log line that feeds a trigger.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LogHit {
    pub kind: LogKind,
    /// 1-based line number in the followed file (counted from where watching began
    /// when the file was not read from its start).
    pub line: u64,
    pub text: String,
    /// `triage:<rule>` (the triage report) or `watch:<rule>` (the same rules, line by line).
    pub source: String,
    /// Seconds into the watch when the line was read.
    pub t: f64,
}

/// The trigger a triage class feeds, if any.
pub fn kind_of_class(class: Class) -> Option<LogKind> {
    match class {
        Class::OomRuntime | Class::OomStartup | Class::OomTopology => Some(LogKind::Oom),
        Class::Driver | Class::Nccl | Class::Container | Class::GpuFault => {
            Some(LogKind::DriverNccl)
        }
        Class::ToolParser => Some(LogKind::ToolSchema),
        _ => None,
    }
}

/// Trigger hits among `lines` (`(line number, text)`), line by line with triage's own rules
/// (one home for log patterns: `triage/rules.toml`).
pub fn scan_lines(lines: &[(u64, String)], t: f64) -> Vec<LogHit> {
    let rules = RuleSet::builtin();
    let mut hits = Vec::new();
    for (no, text) in lines {
        let Some(ri) = rules.classify_text(text) else {
            continue;
        };
        let r = &rules.rules[ri];
        if let Some(kind) = kind_of_class(r.class) {
            hits.push(LogHit {
                kind,
                line: *no,
                text: text.clone(),
                source: format!("watch:{}", r.id),
                t,
            });
        }
    }
    hits
}

/// Runs the triage engine over `lines` (through a temporary file, since it reads
/// paths) and returns the findings that feed a trigger, numbered like `lines`.
pub fn triage_lines(lines: &[(u64, String)], t: f64) -> Vec<LogHit> {
    let Some(first) = lines.first().map(|l| l.0) else {
        return Vec::new();
    };
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("golive-watch-{}-{seq}.log", std::process::id()));
    let text: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    if std::fs::write(&path, text).is_err() {
        return Vec::new();
    }
    let result = triage::analyze_paths(
        std::slice::from_ref(&path),
        &triage::TriageOptions::default(),
    );
    let _ = std::fs::remove_file(&path);
    let Ok(report) = result else {
        return Vec::new();
    };
    report
        .primary
        .into_iter()
        .chain(report.secondary)
        .filter_map(|f| {
            kind_of_class(f.class).map(|kind| LogHit {
                kind,
                line: first + f.line.saturating_sub(1),
                text: f.text,
                source: format!("triage:{}", f.rule),
                t,
            })
        })
        .collect()
}

/// A log file followed like `tail -F`: new complete lines on each poll; a file that
/// shrank (rotated or truncated) is read again from its start.
pub struct LogFollower {
    pub path: PathBuf,
    offset: u64,
    next_line: u64,
    partial: Vec<u8>,
}

impl LogFollower {
    /// Starts at the end of the file (only lines written from now on count), or at its
    /// start with `from_start`. A missing file is waited for.
    pub fn open(path: &Path, from_start: bool) -> LogFollower {
        let offset = if from_start {
            0
        } else {
            std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
        };
        LogFollower {
            path: path.to_path_buf(),
            offset,
            next_line: 1,
            partial: Vec::new(),
        }
    }

    /// The complete lines written since the last poll, numbered.
    pub fn poll(&mut self) -> anyhow::Result<Vec<(u64, String)>> {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Ok(Vec::new());
        };
        let len = f.metadata()?.len();
        if len < self.offset {
            self.offset = 0;
            self.partial.clear();
        }
        f.seek(SeekFrom::Start(self.offset))?;
        let mut buf = Vec::new();
        f.take(len - self.offset).read_to_end(&mut buf)?;
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let mut lines = Vec::new();
        while let Some(pos) = memchr::memchr(b'\n', &self.partial) {
            let raw: Vec<u8> = self.partial.drain(..=pos).collect();
            let text = String::from_utf8_lossy(&raw[..raw.len() - 1])
                .trim_end_matches('\r')
                .to_string();
            lines.push((self.next_line, text));
            self.next_line += 1;
        }
        Ok(lines)
    }
}

/// The output of a command that follows a log (`docker logs -f NAME`, `kubectl logs -f
/// POD`), stdout and stderr both, line by line.
pub struct CommandFollower {
    child: std::process::Child,
    rx: std::sync::mpsc::Receiver<String>,
    next_line: u64,
}

impl CommandFollower {
    /// Starts `command` (split like a shell would, no shell involved).
    pub fn spawn(command: &str) -> anyhow::Result<CommandFollower> {
        let words = shlex::split(command)
            .filter(|w| !w.is_empty())
            .ok_or_else(|| anyhow::anyhow!("--log-cmd {command:?} is not a valid command line"))?;
        let mut child = std::process::Command::new(&words[0])
            .args(&words[1..])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start --log-cmd {:?}: {e}", words[0]))?;
        let (tx, rx) = std::sync::mpsc::channel();
        fn pump(r: impl Read + Send + 'static, tx: std::sync::mpsc::Sender<String>) {
            std::thread::spawn(move || {
                use std::io::BufRead;
                let mut reader = std::io::BufReader::new(r);
                let mut buf = Vec::new();
                while let Ok(n) = reader.read_until(b'\n', &mut buf) {
                    if n == 0 {
                        break;
                    }
                    let line = String::from_utf8_lossy(&buf)
                        .trim_end_matches(['\n', '\r'])
                        .to_string();
                    if tx.send(line).is_err() {
                        break;
                    }
                    buf.clear();
                }
            });
        }
        if let Some(out) = child.stdout.take() {
            pump(out, tx.clone());
        }
        if let Some(err) = child.stderr.take() {
            pump(err, tx);
        }
        Ok(CommandFollower {
            child,
            rx,
            next_line: 1,
        })
    }

    /// The lines received since the last poll, numbered in arrival order.
    pub fn poll(&mut self) -> Vec<(u64, String)> {
        let mut lines = Vec::new();
        while let Ok(l) = self.rx.try_recv() {
            lines.push((self.next_line, l));
            self.next_line += 1;
        }
        lines
    }
}

impl Drop for CommandFollower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Trigger hits in new lines: the triage engine's, plus our own patterns for lines it
/// left unclassified.
pub fn hits_in(lines: &[(u64, String)], t: f64) -> Vec<LogHit> {
    let mut hits = triage_lines(lines, t);
    for h in scan_lines(lines, t) {
        if !hits.iter().any(|x| x.line == h.line) {
            hits.push(h);
        }
    }
    hits.sort_by_key(|h| h.line);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_texts_are_classified() {
        let lines: Vec<(u64, String)> = [
            "INFO 01-01 00:00:00 Avg prompt throughput: 10 tokens/s",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
            "ERROR Error in extracting tool call from response.",
        ]
        .iter()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l.to_string()))
        .collect();
        let hits = scan_lines(&lines, 0.0);
        let kinds: Vec<(u64, LogKind)> = hits.iter().map(|h| (h.line, h.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                (2, LogKind::Oom),
                (3, LogKind::DriverNccl),
                (4, LogKind::ToolSchema)
            ]
        );
    }

    #[test]
    fn texts_watch_used_to_keep_apart_are_triage_rules_now() {
        let lines: Vec<(u64, String)> = [
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8192.00 MiB on device 0: cudaMalloc failed: out of memory",
            "[Tue Dec  1 10:00:00 2026] Out of memory: Killed process 4188 (python3) total-vm:81234567kB",
            "[Tue Dec  1 10:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=4188, GPU has fallen off the bus.",
            "ERROR 12-01 10:00:00 [serving_chat.py:300] ValueError: Grammar error: Invalid type: notatype",
            "INFO 12-01 10:00:00 [logger.py:40] Received request chatcmpl-1: prompt: 'out of memory'",
        ]
        .iter()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l.to_string()))
        .collect();
        let kinds: Vec<(u64, LogKind)> = scan_lines(&lines, 0.0)
            .iter()
            .map(|h| (h.line, h.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (1, LogKind::Oom),
                (2, LogKind::Oom),
                (3, LogKind::DriverNccl),
                (4, LogKind::ToolSchema)
            ]
        );
    }

    #[test]
    fn follower_reads_only_new_complete_lines_and_survives_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.log");
        std::fs::write(&p, "old line\n").unwrap();
        let mut f = LogFollower::open(&p, false);
        assert!(f.poll().unwrap().is_empty());
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        write!(w, "new one\npart").unwrap();
        assert_eq!(f.poll().unwrap(), vec![(1, "new one".to_string())]);
        writeln!(w, "ial").unwrap();
        assert_eq!(f.poll().unwrap(), vec![(2, "partial".to_string())]);
        std::fs::write(&p, "x\n").unwrap();
        assert_eq!(f.poll().unwrap(), vec![(3, "x".to_string())]);
    }
}
