//! One log line taken apart: terminal noise removed, then the prefixes that docker, kubectl,
//! docker-compose, Ray/vLLM worker processes, torchrun and the vLLM logger put in front of the
//! message, with the timestamp and the rank they carry.

use std::sync::OnceLock;

use regex::Regex;

/// A line after cleaning and prefix parsing.
#[derive(Debug, Clone, Default)]
pub struct ParsedLine {
    /// The whole line without ANSI codes and `\r` (for display).
    pub text: String,
    /// Byte offset of the message in `text` (after every recognised prefix).
    pub msg_start: usize,
    /// Rank / worker label for people, e.g. `VllmWorker rank=1`, `Worker_TP3`, `rank3`.
    pub rank: Option<String>,
    /// Key of the output stream the line belongs to (prefixes included), to keep
    /// interleaved tracebacks of several processes apart.
    pub stream: String,
    /// Sortable timestamp (milliseconds; only comparable with other lines' values).
    pub ts: Option<u64>,
    /// `ERROR`, `WARNING`, ... when the vLLM/python logger header says so.
    pub level: Option<String>,
}

impl ParsedLine {
    pub fn msg(&self) -> &str {
        &self.text[self.msg_start..]
    }
}

/// Removes ANSI escape sequences and carriage returns; invalid UTF-8 becomes U+FFFD.
pub fn clean(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    if !s.contains('\x1b') && !s.contains('\r') {
        return s.into_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                // CSI: ESC [ params final-byte; other escapes: drop ESC and the next char.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for d in chars.by_ref() {
                        if ('@'..='~').contains(&d) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\r' => {}
            _ => out.push(c),
        }
    }
    out
}

struct Patterns {
    iso_ts: Regex,
    compose: Regex,
    proc_label: Regex,
    torch_rank: Regex,
    vllm_header: Regex,
    py_logging_ts: Regex,
    glog_ts: Regex,
    ray_ts: Regex,
    py_warning: Regex,
    wrapped_level: Regex,
    sglang: Regex,
    py_default: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        // docker logs --timestamps / kubectl logs --timestamps
        iso_ts: Regex::new(
            r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?(?:Z|[+-]\d\d:?\d\d)?(?: UTC)?:? ",
        )
        .unwrap(),
        // docker compose: `svc-1  | `
        compose: Regex::new(r"^([A-Za-z0-9][\w.\-]*)\s*\| ").unwrap(),
        // `(VllmWorker rank=1 pid=..)`, `(VllmWorker TP1 pid=..)`, `(EngineCore_DP0 pid=..)`,
        // `(RayWorkerWrapper pid=.., ip=..)`
        proc_label: Regex::new(
            r"^\(([A-Za-z_][\w\-]*)((?: rank=\d+| (?:DP|PP|TP|EP|DCP|PCP)\d+(?:_(?:DP|PP|TP|EP|DCP|PCP)\d+)*)?) pid=(\d+)(?:, ip=([0-9A-Fa-f.:]+))?\) ?",
        )
        .unwrap(),
        // torchrun: `[rank3]: `
        torch_rank: Regex::new(r"^\[(rank\d+)\]: ?").unwrap(),
        // `ERROR 10-25 13:08:43 [core.py:708] ` and the older `ERROR 02-19 07:03:11 engine.py:389] `
        vllm_header: Regex::new(
            r"^(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? (?:\[[^\]]*\]|[\w.\-]+:\d+\]) ?",
        )
        .unwrap(),
        // python logging: `2025-06-20 20:02:32,812 - name - ERROR - `
        py_logging_ts: Regex::new(r"^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)[,.](\d+)").unwrap(),
        // glog (torch c10d): `E0909 07:11:16.569000 `
        glog_ts: Regex::new(r"^[EWIF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+)").unwrap(),
        // Ray: `[2024-11-11 09:36:27,146 E 221 275] `
        ray_ts: Regex::new(r"^\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d+) ").unwrap(),
        py_warning: Regex::new(r"^\S+:\d+: [A-Za-z]*Warning: ").unwrap(),
        // SGLang: `[2025-03-07 10:04:13 TP0] `, `[2025-03-07 10:04:13 DP1 TP3] `, `[2025-03-07 10:04:13] `
        sglang: Regex::new(
            r"^\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[.,](\d+))?((?: (?:DP|PP|TP|EP|CP|ATTN_DP|ATTN_CP|MOE_DP)\d+)*)\] ",
        )
        .unwrap(),
        // Python's default logging format: `WARNING:torchao:msg`, `ERROR:root:msg`
        py_default: Regex::new(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.\-]*:").unwrap(),
        // Wrapper loggers that put a timestamp, a level and a few fields in front of each
        // line: `2024-01-22 14:32:27 | ERROR | stderr | `, `[2024-04-17 20:07:13,727] [ERROR]
        // [MainThread] [asyncio] >>> `, `2025-06-20 20:02:32,812 - name - ERROR - `.
        wrapped_level: Regex::new(
            r"^(\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?\]?)?(?:\s*(?:\||-|\[[^\]\n]+\]|[A-Za-z0-9_.]+)){0,3}?\s*(?:\||-)?\s*\[?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]?((?:\s*(?:\| [A-Za-z0-9_.\-]+|- [A-Za-z0-9_.\-]+|\[[^\]\n]+\]))*)\s*(?:\| |- |>>> ?|: )",
        )
        .unwrap(),
    })
}

fn num(c: &regex::Captures, i: usize) -> u64 {
    c.get(i).and_then(|m| m.as_str().parse().ok()).unwrap_or(0)
}

/// Milliseconds from month/day/h/m/s/fraction (the year is often absent in vLLM lines; logs
/// compared with each other come from the same run).
fn ts_key(mon: u64, day: u64, h: u64, m: u64, s: u64, frac: Option<&str>) -> u64 {
    let ms = frac
        .map(|f| {
            let f3: String = f.chars().chain("000".chars()).take(3).collect();
            f3.parse::<u64>().unwrap_or(0)
        })
        .unwrap_or(0);
    ((((mon * 32 + day) * 24 + h) * 60 + m) * 60 + s) * 1000 + ms
}

/// [`ts_key`] from six capture groups from `first` on: month, day, h, m, s, fraction.
fn captured_ts(c: &regex::Captures, first: usize) -> u64 {
    ts_key(
        num(c, first),
        num(c, first + 1),
        num(c, first + 2),
        num(c, first + 3),
        num(c, first + 4),
        c.get(first + 5).map(|m| m.as_str()),
    )
}

/// Parses one raw line.
pub fn parse(raw: &[u8]) -> ParsedLine {
    let text = clean(raw);
    let p = patterns();
    let mut pos = 0usize;
    let mut ts = None;
    let mut stream = String::new();
    let mut rank = None;
    let mut level = None;
    // Prefixes nest in a few known orders; take them greedily, at most a few rounds.
    for _ in 0..4 {
        let rest = &text[pos..];
        let rest_trim = rest.trim_start_matches(' ');
        let skipped = rest.len() - rest_trim.len();
        // Each pattern is tried only when the first byte can start it (most lines in a
        // traceback have none of these prefixes; a failed regex search costs far more).
        let first = rest.as_bytes().first().copied().unwrap_or(0);
        let first_trim = rest_trim.as_bytes().first().copied().unwrap_or(0);
        if let Some(c) = may_be_digit(first)
            .then(|| p.iso_ts.captures(rest))
            .flatten()
        {
            ts = Some(captured_ts(&c, 2));
            pos += c.get(0).unwrap().end();
            continue;
        }
        if let Some(c) = (first_trim == b'(')
            .then(|| p.proc_label.captures(rest_trim))
            .flatten()
        {
            let name = c.get(1).unwrap().as_str();
            let r = c.get(2).map(|m| m.as_str()).unwrap_or("");
            let ip = c.get(4).map(|m| m.as_str());
            let label = match ip {
                // Ray workers have no rank: the pid and node address tell them apart.
                Some(ip) => format!("{name} pid={}, ip={ip}", num(&c, 3)),
                None => format!("{name}{r}"),
            };
            stream.push_str(&label);
            stream.push('|');
            rank = Some(label);
            pos += skipped + c.get(0).unwrap().end();
            continue;
        }
        if let Some(c) = (first_trim == b'[')
            .then(|| p.torch_rank.captures(rest_trim))
            .flatten()
        {
            let label = c.get(1).unwrap().as_str().to_string();
            stream.push_str(&label);
            stream.push('|');
            rank = Some(label);
            pos += skipped + c.get(0).unwrap().end();
            continue;
        }
        if let Some(c) = p.sglang.captures(rest_trim) {
            ts = Some(captured_ts(&c, 2));
            let label = c.get(8).map_or("", |m| m.as_str()).trim();
            if !label.is_empty() {
                stream.push_str(label);
                stream.push('|');
                rank = Some(label.to_string());
            }
            pos += skipped + c.get(0).unwrap().end();
            continue;
        }
        if stream.is_empty() && rank.is_none() {
            if let Some(c) = (first.is_ascii_alphanumeric() && rest.contains("| "))
                .then(|| p.compose.captures(rest))
                .flatten()
            {
                stream.push_str(c.get(1).unwrap().as_str());
                stream.push('|');
                pos += c.get(0).unwrap().end();
                continue;
            }
        }
        break;
    }
    let rest = &text[pos..];
    let first = rest.as_bytes().first().copied().unwrap_or(0);
    if let Some(c) = matches!(first, b'D' | b'I' | b'W' | b'E' | b'C')
        .then(|| p.vllm_header.captures(rest))
        .flatten()
    {
        level = Some(c.get(1).unwrap().as_str().to_string());
        ts = ts.or(Some(captured_ts(&c, 2)));
        pos += c.get(0).unwrap().end();
        // vLLM logs a traceback once through its logger and once raw: keep them apart.
        stream.push_str("log|");
    } else if ts.is_none() {
        let py_or_ray = match first {
            b'[' => p.ray_ts.captures(rest),
            b if may_be_digit(b) => p.py_logging_ts.captures(rest),
            _ => None,
        };
        if let Some(c) = py_or_ray {
            ts = Some(captured_ts(&c, 2));
        } else if let Some(c) = matches!(first, b'E' | b'W' | b'I' | b'F')
            .then(|| p.glog_ts.captures(rest))
            .flatten()
        {
            level = Some(
                match rest.as_bytes()[0] {
                    b'I' => "INFO",
                    b'W' => "WARNING",
                    _ => "ERROR",
                }
                .to_string(),
            );
            ts = Some(captured_ts(&c, 1));
        }
    }
    // A wrapper logger's own prefix (after docker/compose prefixes): the level counts, and
    // the message starts after its last field, so tracebacks inside are seen as such.
    if level.is_none() {
        // The pattern needs one of the level words.
        if let Some(c) = has_level_word(&text[pos..])
            .then(|| p.wrapped_level.captures(&text[pos..]))
            .flatten()
        {
            // Only behind a timestamp (its own or a docker one): a bare `ERROR: ...` is a message.
            if c.get(1).is_some() || ts.is_some() {
                level = Some(c.get(2).unwrap().as_str().to_string());
                pos += c.get(0).unwrap().end();
                // A wrapper that logs a vLLM process's output (often all as `ERROR | stderr`):
                // the vLLM header inside says the real level.
                if let Some(v) = p.vllm_header.captures(&text[pos..]) {
                    level = Some(v.get(1).unwrap().as_str().to_string());
                    pos += v.get(0).unwrap().end();
                }
            }
        }
    }
    if level.is_none() {
        if let Some(c) = p.py_default.captures(&text[pos..]) {
            level = Some(c.get(1).unwrap().as_str().to_string());
            pos += c.get(0).unwrap().end();
        }
    }
    // Python warnings (`x.py:12: UserWarning: ...`) are warnings whatever they mention.
    if level.is_none() && text[pos..].contains("Warning: ") && p.py_warning.is_match(&text[pos..]) {
        level = Some("WARNING".to_string());
    }
    ParsedLine {
        text,
        msg_start: pos,
        rank,
        stream,
        ts,
        level,
    }
}

/// Whether a line starting with this byte can start with `\d` (Unicode digits included).
fn may_be_digit(b: u8) -> bool {
    b.is_ascii_digit() || b >= 0x80
}

/// Whether `s` holds a level word (`DEBUG` ... `CRITICAL`), the part every wrapper logger
/// prefix needs.
fn has_level_word(s: &str) -> bool {
    static F: OnceLock<aho_corasick::AhoCorasick> = OnceLock::new();
    F.get_or_init(|| {
        aho_corasick::AhoCorasick::new(["DEBUG", "INFO", "WARN", "ERROR", "CRITICAL"]).unwrap()
    })
    .is_match(s)
}

fn exception_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            // `ValueError: ...`, `torch.OutOfMemoryError: ...`, and dotted module paths ending in a
            // CamelCase class (`triton.runtime.errors.OutOfResources: ...`).
            r"^(([A-Za-z_][\w]*\.)*[A-Za-z_]\w*(Error|Exception|Interrupt|Exit|Warning|Failure|Fault|Timeout|Abort|Died|Dead)(\[[^\]]*\])?(: |:$|$)|([a-z_][\w]*\.)+[A-Z][A-Za-z0-9]+: )",
        )
        .unwrap()
    })
}

fn frame_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r#"^\s*File "[^"]*", line \d+"#).unwrap())
}

/// `  File "x.py", line 3, in f`
pub fn is_frame(msg: &str) -> bool {
    msg.trim_start().starts_with("File \"") && frame_re().is_match(msg)
}

/// `ValueError: ...`, `torch.OutOfMemoryError: ...`, `KeyboardInterrupt`
pub fn is_exception_line(msg: &str) -> bool {
    !msg.starts_with(' ') && !msg.starts_with('\t') && exception_re().is_match(msg)
}

/// `Traceback (most recent call last):`
pub fn is_traceback_header(msg: &str) -> bool {
    const HEADER: &str = "Traceback (most recent call last)";
    // SGLang writes its own words first: `Scheduler hit an exception: Traceback (most ...):`.
    msg.trim_start().starts_with(HEADER) || msg.trim_end().trim_end_matches(':').ends_with(HEADER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapper_logger_prefixes() {
        let a =
            parse(b"[2026-01-02 10:00:01,100] [ERROR] [MainThread] [asyncio] >>> AssertionError");
        assert_eq!(a.level.as_deref(), Some("ERROR"));
        assert_eq!(a.msg(), "AssertionError");
        let b = parse(b"2026-01-02 10:00:01 | ERROR | stderr |   File \"x.py\", line 3, in f");
        assert_eq!(b.level.as_deref(), Some("ERROR"));
        assert!(is_frame(b.msg()));
        let c = parse(b"2026-01-02 10:00:01,812 - app.server - WARNING - disk almost full");
        assert_eq!(c.level.as_deref(), Some("WARNING"));
        assert_eq!(c.msg(), "disk almost full");
        // The wrapped process's own vLLM header gives the level.
        let e = parse(b"2026-01-02 10:00:01 | ERROR | stderr | INFO 01-02 10:00:01 llm_engine.py:73] Initializing");
        assert_eq!(e.level.as_deref(), Some("INFO"));
        assert_eq!(e.msg(), "Initializing");
        // A vLLM header after a docker timestamp keeps working as before.
        let d = parse(b"2026-01-02T10:00:01.000Z ERROR 01-02 10:00:01 [core.py:1] ValueError: x");
        assert_eq!(d.msg(), "ValueError: x");
    }

    #[test]
    fn vllm_worker_prefix_and_header() {
        let l = parse(b"(VllmWorker rank=1 pid=2445156) ERROR 05-10 16:00:15 [multiproc_executor.py:470] RuntimeError: boom");
        assert_eq!(l.rank.as_deref(), Some("VllmWorker rank=1"));
        let l = parse(b"(VllmWorker TP1 pid=901) ERROR 05-02 10:02:11 [multiproc_executor.py:671] RuntimeError: boom");
        assert_eq!(l.rank.as_deref(), Some("VllmWorker TP1"));
        assert_eq!(l.msg(), "RuntimeError: boom");
        assert_eq!(l.msg(), "RuntimeError: boom");
        assert_eq!(l.level.as_deref(), Some("ERROR"));
        assert!(l.ts.is_some());
    }

    #[test]
    fn compose_docker_ray_and_torch_prefixes() {
        let l = parse(b"backend-vllm-openai-1  | (RayWorkerWrapper pid=643, ip=10.0.0.2) ERROR 06-14 07:04:12 worker_base.py:148] Error executing method init_worker.");
        assert_eq!(
            l.rank.as_deref(),
            Some("RayWorkerWrapper pid=643, ip=10.0.0.2")
        );
        assert_eq!(l.msg(), "Error executing method init_worker.");
        let l = parse(b"2024-06-14T07:04:12.123456789Z [rank3]: RuntimeError: NCCL error");
        assert_eq!(l.rank.as_deref(), Some("rank3"));
        assert_eq!(l.msg(), "RuntimeError: NCCL error");
        assert!(l.ts.is_some());
    }

    #[test]
    fn sglang_and_python_default_prefixes() {
        let l = parse(b"[2025-03-07 10:04:13 DP1 TP3] Scheduler hit an exception: Traceback");
        assert_eq!(l.rank.as_deref(), Some("DP1 TP3"));
        assert_eq!(l.msg(), "Scheduler hit an exception: Traceback");
        assert!(l.ts.is_some());
        let l = parse(b"[2025-03-07 10:04:13] The server is fired up and ready to roll!");
        assert_eq!(l.rank, None);
        assert_eq!(l.msg(), "The server is fired up and ready to roll!");
        let l = parse(b"WARNING:torchao:Skipping import of cpp extensions");
        assert_eq!(l.level.as_deref(), Some("WARNING"));
        assert_eq!(l.msg(), "Skipping import of cpp extensions");
    }

    #[test]
    fn ansi_and_cr_are_removed() {
        let l = parse(
            b"\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO:     Application startup complete.\r",
        );
        assert_eq!(l.msg(), "INFO:     Application startup complete.");
    }

    #[test]
    fn exception_lines() {
        assert!(is_exception_line(
            "torch.OutOfMemoryError: CUDA out of memory."
        ));
        assert!(is_exception_line(
            "KeyboardInterrupt: MQLLMEngine terminated"
        ));
        assert!(!is_exception_line("    raise ValueError("));
        assert!(!is_exception_line("return forward_call(*args, **kwargs)"));
        assert!(is_frame("  File \"/x.py\", line 3, in f"));
    }
}
