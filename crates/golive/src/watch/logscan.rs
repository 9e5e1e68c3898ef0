//! Following a server log: the lines that bear on a rollback trigger (OOM, driver/NCCL,
//! tool-call/schema failures), judged as the log grows.
//!
//! A file is read on its own thread in bounded chunks ([`LogFollower`]); each chunk gets
//! one automaton pass for the trigger rules' literals, and only where one (or a
//! traceback) occurs does the triage engine ([`crate::triage::analyze_text`]) judge the
//! chunk; the same rules, line by line, catch what it does not report (e.g. a line it
//! counts as a consequence of an earlier cause).

use crate::triage::rules::{RuleKind, RuleSet};
use crate::triage::{self, Class};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Which rollback trigger a log line feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LogKind {
    /// Out-of-memory lines (the OOM trigger).
    Oom,
    /// GPU driver, NCCL, container or GPU fault lines.
    DriverNccl,
    /// Tool-call parser or schema failures.
    ToolSchema,
}

/// One log line that feeds a trigger.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LogHit {
    /// The trigger the line feeds.
    pub kind: LogKind,
    /// 1-based line number in the followed file (counted from where watching began
    /// when the file was not read from its start).
    pub line: u64,
    /// The line, secrets redacted, truncated to a bounded length.
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

/// A run of complete log lines, as read: the bytes (each line ends in `\n`) and the
/// number of the first one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogChunk {
    /// 1-based number of the first line in `bytes`.
    pub first_line: u64,
    /// The complete lines, each ending in `\n`.
    pub bytes: Vec<u8>,
}

/// The longest line kept whole; the rest of a longer one is dropped up to its newline (a
/// log with no newline at all must not grow the buffer without bound).
const MAX_LINE: usize = 1 << 20;

/// What one follower read holds at most, so memory stays bounded however fast the log grows.
const READ_CHUNK: usize = 4 << 20;

/// Characters of a line kept as a hit's text.
const HIT_TEXT_MAX: usize = 600;

/// Literals of the cause rules that feed a trigger, plus the traceback anchor: a chunk
/// without any of them holds no hit, and only the lines that hold one are split out.
/// One automaton pass over the whole chunk instead of a rule match per line (the log of a
/// healthy server is almost all request and throughput lines).
fn trigger_prefilter() -> &'static aho_corasick::AhoCorasick {
    static AC: std::sync::OnceLock<aho_corasick::AhoCorasick> = std::sync::OnceLock::new();
    AC.get_or_init(|| {
        let rules = RuleSet::builtin();
        let mut lits: Vec<String> = rules
            .rules
            .iter()
            .filter(|r| r.kind == RuleKind::Cause && kind_of_class(r.class).is_some())
            .flat_map(|r| rules.literals_of(r))
            .collect();
        lits.push(TRACEBACK_ANCHOR.to_string());
        lits.sort();
        lits.dedup();
        aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(&lits)
            .expect("the trigger prefilter builds from the built-in rule literals")
    })
}

const TRACEBACK_ANCHOR: &str = "Traceback (most recent call last)";

/// Trigger hits in a chunk of complete lines: the triage engine's findings (tracebacks,
/// classes from frames) and, line by line, triage's own rules for what it left out (e.g. a
/// line it counts as a consequence of an earlier cause). `t` stamps the hits.
pub fn hits_in_chunk(chunk: &LogChunk, t: f64) -> Vec<LogHit> {
    let bytes = &chunk.bytes;
    let rules = RuleSet::builtin();
    let mut hits = Vec::new();
    let mut traceback = false;
    let mut lines = crate::text::LineCount::starting_at(chunk.first_line);
    let mut at = 0;
    while let Some(m) = trigger_prefilter().find(aho_corasick::Input::new(bytes).range(at..)) {
        let ls = memchr::memrchr(b'\n', &bytes[..m.start()]).map_or(0, |p| p + 1);
        let le = memchr::memchr(b'\n', &bytes[m.start()..]).map_or(bytes.len(), |p| m.start() + p);
        // The rest of this line needs no more automaton matches.
        at = le;
        lines.count_to(bytes, ls);
        let raw = &bytes[ls..le];
        if memchr::memmem::find(raw, TRACEBACK_ANCHOR.as_bytes()).is_some() {
            traceback = true;
        }
        let text = String::from_utf8_lossy(raw);
        let text = text.trim_end_matches('\r');
        let Some(ri) = rules.classify_text(text) else {
            continue;
        };
        let r = &rules.rules[ri];
        if let Some(kind) = kind_of_class(r.class) {
            hits.push(LogHit {
                kind,
                line: lines.next_line(),
                text: crate::text::truncate(&crate::redact::redact_line(text), HIT_TEXT_MAX),
                source: format!("watch:{}", r.id),
                t,
            });
        }
    }
    if hits.is_empty() && !traceback {
        return hits;
    }
    // The engine only where there is something to explain: it groups tracebacks and
    // classes an exception by its frames, which no single line shows.
    let text = String::from_utf8_lossy(bytes);
    let report = triage::analyze_text(rules, "log", &text);
    let engine: Vec<LogHit> = report
        .primary
        .into_iter()
        .chain(report.secondary)
        .filter_map(|f| {
            kind_of_class(f.class).map(|kind| LogHit {
                kind,
                line: chunk.first_line + f.line.saturating_sub(1),
                text: crate::text::truncate(&f.text, HIT_TEXT_MAX),
                source: format!("triage:{}", f.rule),
                t,
            })
        })
        .collect();
    // Outcome first, as triage: an error the process went on after within the chunk (it
    // loaded on, the server generated) feeds no trigger.
    let survived: Vec<u64> = report
        .survived
        .iter()
        .map(|f| chunk.first_line + f.line.saturating_sub(1))
        .collect();
    let mut all = engine;
    for h in hits {
        if !all.iter().any(|x| x.line == h.line) && !survived.contains(&h.line) {
            all.push(h);
        }
    }
    all.sort_by_key(|h| h.line);
    all
}

/// A log file read like `tail -F`: new complete lines in bounded reads; a file that
/// shrank (rotated or truncated) is read again from its start. A path that is not a
/// regular file (a FIFO a server's stderr is piped into, a character device) has no length
/// and cannot seek: it is read as a stream, kept open, and opened again when its writer
/// closes it.
pub struct LogReader {
    /// The file or FIFO being read.
    pub path: PathBuf,
    offset: u64,
    next_line: u64,
    partial: Vec<u8>,
    /// Inside a line longer than [`MAX_LINE`]: bytes are dropped up to its newline.
    skipping: bool,
    /// The open stream of a path that is not a regular file.
    stream: Option<std::fs::File>,
}

impl LogReader {
    /// Starts at the end of the file (only lines written from now on count), or at its
    /// start with `from_start`. A missing file is waited for.
    pub fn open(path: &Path, from_start: bool) -> LogReader {
        let offset = if from_start {
            0
        } else {
            std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
        };
        LogReader {
            path: path.to_path_buf(),
            offset,
            next_line: 1,
            partial: Vec::new(),
            skipping: false,
            stream: None,
        }
    }

    /// Appends the file's new bytes (at most [`READ_CHUNK`]) to `buf`; false when there
    /// are none yet.
    fn read_new(&mut self, buf: &mut Vec<u8>) -> anyhow::Result<bool> {
        if self.stream.is_none() {
            let Ok(meta) = std::fs::metadata(&self.path) else {
                return Ok(false);
            };
            if !meta.is_file() {
                // Blocks until a writer opens a FIFO: this runs on the follower's thread.
                self.stream = Some(std::fs::File::open(&self.path)?);
            }
        }
        if let Some(f) = self.stream.as_mut() {
            let old = buf.len();
            buf.resize(old + READ_CHUNK, 0);
            let n = f.read(&mut buf[old..])?;
            buf.truncate(old + n);
            if n == 0 {
                // The writer closed it: the next read waits for the next writer.
                self.stream = None;
            }
            self.offset += n as u64;
            return Ok(n > 0);
        }
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Ok(false);
        };
        let len = f.metadata()?.len();
        if len < self.offset {
            self.offset = 0;
            self.partial.clear();
            buf.clear();
            self.skipping = false;
        }
        if len == self.offset {
            return Ok(false);
        }
        f.seek(SeekFrom::Start(self.offset))?;
        let want = (len - self.offset).min(READ_CHUNK as u64);
        let old = buf.len();
        f.take(want).read_to_end(buf)?;
        self.offset += (buf.len() - old) as u64;
        Ok(true)
    }

    /// The next complete lines (at most about [`READ_CHUNK`] bytes); `None` when nothing
    /// new is complete yet.
    pub fn read_chunk(&mut self) -> anyhow::Result<Option<LogChunk>> {
        let mut buf = std::mem::take(&mut self.partial);
        if !self.read_new(&mut buf)? {
            self.partial = buf;
            return Ok(None);
        }
        if self.skipping {
            match memchr::memchr(b'\n', &buf) {
                Some(p) => {
                    buf.drain(..=p);
                    self.skipping = false;
                    self.next_line += 1;
                }
                None => return Ok(None),
            }
        }
        let Some(last_nl) = memchr::memrchr(b'\n', &buf) else {
            if buf.len() > MAX_LINE {
                self.skipping = true;
            } else {
                self.partial = buf;
            }
            return Ok(None);
        };
        self.partial = buf.split_off(last_nl + 1);
        if self.partial.len() > MAX_LINE {
            self.partial.clear();
            self.skipping = true;
        }
        let first_line = self.next_line;
        self.next_line += memchr::memchr_iter(b'\n', &buf).count() as u64;
        Ok(Some(LogChunk {
            first_line,
            bytes: buf,
        }))
    }
}

/// A log file followed on its own thread, so a fast-growing log is read and judged as
/// it grows (bounded reads, one core at most) while the watch loop only collects hits.
pub struct LogFollower {
    /// The file being followed.
    pub path: PathBuf,
    rx: std::sync::mpsc::Receiver<anyhow::Result<Vec<LogHit>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Bytes of the file judged so far (their hits sent): `catch_up` waits for it.
    progress: std::sync::Arc<Progress>,
}

#[derive(Default)]
struct Progress {
    judged_to: std::sync::atomic::AtomicU64,
}

/// How long the follower waits at the end of the file before looking again.
const FOLLOW_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

impl LogFollower {
    /// Starts following (see [`LogReader::open`]).
    pub fn open(path: &Path, from_start: bool) -> LogFollower {
        let mut reader = LogReader::open(path, from_start);
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let progress = std::sync::Arc::new(Progress::default());
        let shared = progress.clone();
        std::thread::spawn(move || {
            use std::sync::atomic::Ordering::Relaxed;
            while !stopped.load(Relaxed) {
                match reader.read_chunk() {
                    Ok(Some(chunk)) => {
                        // Stamped when collected (`poll_hits`), like a line read then.
                        if tx.send(Ok(hits_in_chunk(&chunk, 0.0))).is_err() {
                            return;
                        }
                        shared.judged_to.store(reader.offset, Relaxed);
                    }
                    Ok(None) => {
                        shared.judged_to.store(reader.offset, Relaxed);
                        std::thread::sleep(FOLLOW_PAUSE);
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        shared.judged_to.store(u64::MAX, Relaxed);
                        return;
                    }
                }
            }
        });
        LogFollower {
            path: path.to_path_buf(),
            rx,
            stop,
            progress,
        }
    }

    /// Waits (at most `patience`) until the thread has judged the file up to its length
    /// now, so a window is judged on the lines written before it ends (and `--once` on a
    /// log read from its start sees all of it).
    pub fn catch_up(&self, patience: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let Ok(len) = std::fs::metadata(&self.path).map(|m| m.len()) else {
            return;
        };
        let until = std::time::Instant::now() + patience;
        loop {
            // (A file shorter than judged was rotated: the thread starts it again.)
            if self.progress.judged_to.load(Relaxed) >= len || std::time::Instant::now() >= until {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The hits found since the last call, stamped `t`.
    pub fn poll_hits(&mut self, t: f64) -> anyhow::Result<Vec<LogHit>> {
        let mut hits = Vec::new();
        while let Ok(found) = self.rx.try_recv() {
            let found =
                found.map_err(|e| e.context(format!("cannot read {}", self.path.display())))?;
            hits.extend(found.into_iter().map(|h| LogHit { t, ..h }));
        }
        Ok(hits)
    }
}

impl Drop for LogFollower {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The output of a command that follows a log (`docker logs -f NAME`, `kubectl logs -f
/// POD`), stdout and stderr both, line by line. Run through `tokio::process` (inside
/// the watch loop's runtime) with `kill_on_drop`: the command ends with the follower,
/// also when the watch ends on an error.
pub struct CommandFollower {
    _child: tokio::process::Child,
    rx: tokio::sync::mpsc::UnboundedReceiver<String>,
    next_line: u64,
}

impl CommandFollower {
    /// Starts `command` (split like a shell would, no shell involved); call it inside a
    /// tokio runtime.
    pub fn spawn(command: &str) -> anyhow::Result<CommandFollower> {
        let words = shlex::split(command)
            .filter(|w| !w.is_empty())
            .ok_or_else(|| anyhow::anyhow!("--log-cmd {command:?} is not a valid command line"))?;
        let mut child = tokio::process::Command::new(&words[0])
            .args(&words[1..])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start --log-cmd {:?}: {e}", words[0]))?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        fn pump(
            r: impl tokio::io::AsyncRead + Unpin + Send + 'static,
            tx: tokio::sync::mpsc::UnboundedSender<String>,
        ) {
            tokio::spawn(async move {
                use tokio::io::AsyncBufReadExt;
                let mut lines = tokio::io::BufReader::new(r).split(b'\n');
                while let Ok(Some(line)) = lines.next_segment().await {
                    let line = String::from_utf8_lossy(&line)
                        .trim_end_matches('\r')
                        .to_string();
                    if tx.send(line).is_err() {
                        break;
                    }
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
            _child: child,
            rx,
            next_line: 1,
        })
    }

    /// The lines received since the last poll, as one chunk.
    pub fn poll(&mut self) -> LogChunk {
        let mut chunk = LogChunk {
            first_line: self.next_line,
            bytes: Vec::new(),
        };
        while let Ok(l) = self.rx.try_recv() {
            chunk.bytes.extend_from_slice(l.as_bytes());
            chunk.bytes.push(b'\n');
            self.next_line += 1;
        }
        chunk
    }

    /// The hits in the lines received since the last call, stamped `t`.
    pub fn poll_hits(&mut self, t: f64) -> Vec<LogHit> {
        let chunk = self.poll();
        if chunk.bytes.is_empty() {
            return Vec::new();
        }
        hits_in_chunk(&chunk, t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(lines: &[&str]) -> LogChunk {
        LogChunk {
            first_line: 1,
            bytes: lines
                .iter()
                .flat_map(|l| format!("{l}\n").into_bytes())
                .collect(),
        }
    }

    fn kinds(hits: &[LogHit]) -> Vec<(u64, LogKind)> {
        hits.iter().map(|h| (h.line, h.kind)).collect()
    }

    #[test]
    fn trigger_texts_are_classified() {
        let hits = hits_in_chunk(
            &chunk(&[
                "INFO 01-01 00:00:00 Avg prompt throughput: 10 tokens/s",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
                "ERROR Error in extracting tool call from response.",
            ]),
            0.0,
        );
        assert_eq!(
            kinds(&hits),
            vec![
                (2, LogKind::Oom),
                (3, LogKind::DriverNccl),
                (4, LogKind::ToolSchema)
            ]
        );
    }

    /// Outcome first: an NCCL warning the engine went on after (tokens generated later in the
    /// chunk) feeds no trigger; the same warning at the end of the chunk does.
    #[test]
    fn an_error_the_server_went_on_after_feeds_no_trigger() {
        let nccl = "(EngineCore_DP0 pid=2) ERROR 12-01 10:00:02 [pynccl.py:100] RuntimeError: NCCL error: unhandled system error";
        let later = "(APIServer pid=1) INFO 12-01 10:00:12 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.5 tokens/s, Running: 1 reqs";
        let hits = hits_in_chunk(&chunk(&[nccl, later]), 0.0);
        assert_eq!(kinds(&hits), vec![]);
        let hits = hits_in_chunk(&chunk(&[later, nccl]), 0.0);
        assert_eq!(kinds(&hits), vec![(2, LogKind::DriverNccl)]);
    }

    #[test]
    fn texts_watch_used_to_keep_apart_are_triage_rules_now() {
        let hits = hits_in_chunk(
            &chunk(&[
                "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8192.00 MiB on device 0: cudaMalloc failed: out of memory",
                "[Tue Dec  1 10:00:00 2026] Out of memory: Killed process 4188 (python3) total-vm:81234567kB",
                "[Tue Dec  1 10:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=4188, GPU has fallen off the bus.",
                "ERROR 12-01 10:00:00 [serving_chat.py:300] ValueError: Grammar error: Invalid type: notatype",
                "INFO 12-01 10:00:00 [logger.py:40] Received request chatcmpl-1: prompt: 'out of memory'",
            ]),
            0.0,
        );
        assert_eq!(
            kinds(&hits),
            vec![
                (1, LogKind::Oom),
                (2, LogKind::Oom),
                (3, LogKind::DriverNccl),
                (4, LogKind::ToolSchema)
            ]
        );
    }

    #[test]
    fn a_traceback_is_judged_by_the_engine_and_numbered_from_the_chunk() {
        let mut c = chunk(&[
            "INFO 12-01 10:00:00 [engine.py:10] Added request chatcmpl-1.",
            "ERROR 12-01 10:00:01 [core.py:600] EngineCore encountered a fatal error.",
            "ERROR 12-01 10:00:01 [core.py:600] Traceback (most recent call last):",
            "ERROR 12-01 10:00:01 [core.py:600]   File \"/usr/lib/python3/site-packages/vllm/v1/engine/core.py\", line 700, in run_busy_loop",
            "ERROR 12-01 10:00:01 [core.py:600] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.10 GiB",
        ]);
        c.first_line = 101;
        let hits = hits_in_chunk(&c, 7.0);
        assert!(
            hits.iter()
                .any(|h| h.kind == LogKind::Oom && h.line == 105 && h.t == 7.0),
            "{hits:?}"
        );
        // A healthy chunk costs one automaton pass and gives nothing.
        assert!(hits_in_chunk(&chunk(&["INFO 12-01 10:00:00 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s"]), 0.0).is_empty());
    }

    #[test]
    fn reader_reads_only_new_complete_lines_and_survives_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.log");
        std::fs::write(&p, "old line\n").unwrap();
        let mut f = LogReader::open(&p, false);
        assert_eq!(f.read_chunk().unwrap(), None);
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        write!(w, "new one\npart").unwrap();
        let c = f.read_chunk().unwrap().unwrap();
        assert_eq!((c.first_line, c.bytes.as_slice()), (1, &b"new one\n"[..]));
        writeln!(w, "ial").unwrap();
        let c = f.read_chunk().unwrap().unwrap();
        assert_eq!((c.first_line, c.bytes.as_slice()), (2, &b"partial\n"[..]));
        std::fs::write(&p, "x\n").unwrap();
        let c = f.read_chunk().unwrap().unwrap();
        assert_eq!((c.first_line, c.bytes.as_slice()), (3, &b"x\n"[..]));
    }

    #[test]
    fn an_endless_line_is_dropped_and_counted_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.log");
        std::fs::write(&p, "").unwrap();
        let mut f = LogReader::open(&p, true);
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        let junk = vec![b'x'; MAX_LINE + 10];
        w.write_all(&junk).unwrap();
        while f.read_chunk().unwrap().is_some() {}
        assert!(f.partial.len() <= MAX_LINE, "the buffer stays bounded");
        w.write_all(b"yyy\nafter\n").unwrap();
        let mut got = Vec::new();
        while let Some(c) = f.read_chunk().unwrap() {
            got.push(c);
        }
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].first_line, got[0].bytes.as_slice()),
            (2, &b"after\n"[..])
        );
    }

    #[test]
    fn follower_finds_hits_in_a_growing_file_on_its_own_thread() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.log");
        std::fs::write(
            &p,
            "torch.OutOfMemoryError: CUDA out of memory. (old, before the watch)\n",
        )
        .unwrap();
        let mut f = LogFollower::open(&p, false);
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        for i in 0..2000 {
            writeln!(w, "INFO 12-01 10:00:00 [loggers.py:1] Engine 000: Avg prompt throughput: {i}.0 tokens/s").unwrap();
        }
        writeln!(w, "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut hits = Vec::new();
        while hits.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            hits.extend(f.poll_hits(3.0).unwrap());
        }
        assert_eq!(kinds(&hits), vec![(2001, LogKind::DriverNccl)]);
        assert_eq!(hits[0].t, 3.0);
    }

    /// A FIFO that a server's stderr is piped into: read as a stream, its lines numbered
    /// across writers, and opened again after a writer closes it.
    #[test]
    fn follower_reads_a_fifo_as_a_stream_across_writers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("server.fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(made.success());
        let mut f = LogFollower::open(&p, false);
        let write = |text: &str| {
            use std::io::Write;
            // Opening for writing blocks until the follower has it open for reading.
            let mut w = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
            w.write_all(text.as_bytes()).unwrap();
        };
        write(
            "INFO 12-01 10:00:00 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s\n",
        );
        write("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut hits = Vec::new();
        while hits.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            hits.extend(f.poll_hits(1.0).unwrap());
        }
        assert_eq!(kinds(&hits), vec![(2, LogKind::DriverNccl)]);
    }
}
