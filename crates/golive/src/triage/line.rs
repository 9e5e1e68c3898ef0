//! One log line taken apart: terminal noise removed, then the prefixes that docker, kubectl,
//! docker-compose, Ray/vLLM worker processes, torchrun and the vLLM logger put in front of the
//! message, with the timestamp and the rank they carry.
//!
//! The prefixes are read by [`super::prefix`] (regexes, and hand readers for the common ones
//! that always agree with them: `parse_reference` runs the regexes alone, and the
//! `triage_line` fuzz target compares the two).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::OnceLock;

use memchr::memmem::Finder;
use regex::Regex;
use smallvec::SmallVec;

use super::clean::clean;
use super::prefix::{
    captured_ts, iso_ts_hand, iso_ts_regex, level_word, num_str, patterns, proc_label_hand,
    proc_label_regex, read, syslog, syslog_ident, torch_rank_hand, torch_rank_regex,
    vllm_header_hand, vllm_header_regex,
};

/// A line after cleaning and prefix parsing; it borrows the raw line when that is valid UTF-8
/// without terminal codes (no allocation per line).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedLine<'a> {
    /// The whole line without ANSI codes and `\r` (for display).
    pub text: Cow<'a, str>,
    /// Byte offset of the message in `text` (after every recognised prefix).
    pub msg_start: usize,
    /// Rank / worker label for people, e.g. `VllmWorker rank=1`, `Worker_TP3`, `rank3`.
    rank: Option<Label>,
    /// Key of the output stream the line belongs to (prefixes included), to keep
    /// interleaved tracebacks of several processes apart.
    pub stream: Stream,
    /// Sortable timestamp (milliseconds; only comparable with other lines' values).
    pub ts: Option<u64>,
    /// `ERROR`, `WARNING`, ... when the vLLM/python logger header says so.
    pub level: Option<&'static str>,
}

/// A rank label: a span of the text, or built (a Ray label with its pid spelled otherwise).
#[derive(Debug, Clone, PartialEq)]
enum Label {
    Span(Range<usize>),
    Built(String),
}

impl ParsedLine<'_> {
    pub fn msg(&self) -> &str {
        &self.text[self.msg_start..]
    }

    /// The same line read as if no logger had given it a level.
    pub fn without_level(self) -> Self {
        ParsedLine {
            level: None,
            ..self
        }
    }

    pub fn rank(&self) -> Option<&str> {
        match &self.rank {
            Some(Label::Span(r)) => Some(&self.text[r.clone()]),
            Some(Label::Built(s)) => Some(s),
            None => None,
        }
    }
}

/// A stream key, kept inline (no allocation for the usual short labels).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stream(SmallVec<[u8; 48]>);

impl Stream {
    fn push(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }

    pub fn as_str(&self) -> &str {
        // Built from `&str` pieces only.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Parses one raw line.
pub fn parse(raw: &[u8]) -> ParsedLine<'_> {
    parse_with(raw, true)
}

#[cfg(any(test, feature = "fuzz"))]
/// [`parse`] with the regexes alone (the reference the hand readers are compared with).
#[doc(hidden)]
pub fn parse_reference(raw: &[u8]) -> ParsedLine<'_> {
    parse_with(raw, false)
}

/// Where a line written after a progress bar starts: tqdm redraws its bar with `\r` and no
/// newline, so a line another writer printed meanwhile follows the bar's last state on the
/// same line (`Capturing batches (bs=30):   0%|  | 0/8 [00:00<?, ?it/s][rank15]:[E1224 ...]
/// ... failed!`). The byte after the last bar's closing `]` when text follows it, else 0.
fn after_progress_bar(text: &str) -> usize {
    let b = text.as_bytes();
    let Some(bar) = last_bar_start(b) else {
        return 0;
    };
    // `| n/total [elapsed<remaining, rate]`: the bracket after the bar's closing `|`.
    let Some(close) = memchr::memchr(b'|', &b[bar + 2..]).map(|i| bar + 2 + i) else {
        return 0;
    };
    let Some(open) = memchr::memchr(b'[', &b[close..]).map(|i| close + i) else {
        return 0;
    };
    let Some(end) = memchr::memchr(b']', &b[open..]).map(|i| open + i + 1) else {
        return 0;
    };
    let stats = &text[close + 1..open];
    let counts = stats.trim().split('/').count() == 2;
    if counts && text[end..].trim().len() > 1 {
        end
    } else {
        0
    }
}

/// Where the last progress bar of a line starts (`NN%|`), if it has one. Cheap rejection: most
/// lines have no `%` (one byte search: a `memmem` search for `%|` built its searcher on every
/// line, 30% of the whole scan).
pub(crate) fn last_bar_start(b: &[u8]) -> Option<usize> {
    memchr::memrchr_iter(b'%', b).find(|&i| b.get(i + 1) == Some(&b'|'))
}

/// Where the message starts after a wrapper logger's prefix (`c`, matched on `hay`). A last
/// `- Name` field that ends in `: ` where an exception line starts is the message's own first
/// word (`- sglang - INFO - IndexError: list index out of range`), not a field of the logger
/// (`- INFO - vLLM: `), so the message starts there.
fn wrapper_end(c: &regex::Captures<'_>, hay: &str) -> usize {
    let end = c.get(0).map_or(0, |m| m.end());
    let Some(fields) = c
        .get(3)
        .filter(|f| c[0].ends_with(": ") && f.end() + 2 == end)
    else {
        return end;
    };
    match fields.as_str().rfind("- ").map(|i| fields.start() + i + 2) {
        Some(name) if is_exception_line(&hay[name..]) => name,
        _ => end,
    }
}

/// The length of a CRI log record's stream and tag after its time (`stdout F `, `stderr P `),
/// else 0. A partial record (`P`) is read as a line of its own.
fn cri_tag(rest: &[u8]) -> usize {
    let stream = rest.starts_with(b"stdout ") || rest.starts_with(b"stderr ");
    let tag = matches!(rest.get(7..9), Some(b"F ") | Some(b"P "));
    if stream && tag {
        9
    } else {
        0
    }
}

fn parse_with(raw: &[u8], hand: bool) -> ParsedLine<'_> {
    let text = clean(raw);
    let p = patterns();
    let mut pos = after_progress_bar(&text);
    let mut ts = None;
    let mut stream = Stream::default();
    let mut rank = None;
    let mut level = None;
    // Prefixes nest in a few known orders; take them greedily, at most a few rounds.
    for _ in 0..4 {
        let rest = &text[pos..];
        let skipped = rest.bytes().take_while(|&c| c == b' ').count();
        let rest_trim = &rest[skipped..];
        // Each pattern is tried only when the first byte can start it (most lines in a
        // traceback have none of these prefixes; a failed regex search costs far more).
        let first = rest.as_bytes().first().copied().unwrap_or(0);
        let first_trim = rest_trim.as_bytes().first().copied().unwrap_or(0);
        if may_be_digit(first) {
            if let Some(m) = read(hand, || iso_ts_hand(rest.as_bytes()), || iso_ts_regex(rest)) {
                ts = Some(m.ts);
                pos += m.end;
                // Kubernetes' node log files (CRI: `/var/log/pods/..`, `/var/log/containers/..`):
                // the stream and a full/partial tag follow the time.
                pos += cri_tag(&text.as_bytes()[pos..]);
                // journald's ISO format: the host and the writer follow the time.
                if let Some((end, ident)) = syslog_ident(&text[pos..]) {
                    stream.push(ident);
                    stream.push("|");
                    pos += end;
                }
                continue;
            }
        }
        if first.is_ascii_uppercase() && stream.is_empty() {
            if let Some((end, t, ident)) = syslog(rest) {
                ts = t;
                stream.push(ident);
                stream.push("|");
                pos += end;
                continue;
            }
        }
        if first_trim == b'(' {
            let m = read(
                hand,
                || proc_label_hand(rest_trim.as_bytes()),
                || proc_label_regex(rest_trim),
            );
            if let Some(m) = m {
                let at = pos + skipped;
                let label = match &m.ip {
                    // Ray workers have no rank: the pid and node address tell them apart.
                    Some(ip) => {
                        let pid = num_str(&rest_trim[m.pid.clone()]);
                        let built = format!(
                            "{} pid={pid}, ip={}",
                            &rest_trim[m.name.clone()],
                            &rest_trim[ip.clone()]
                        );
                        if rest_trim[m.name.start..ip.end] == built {
                            Label::Span(at + m.name.start..at + ip.end)
                        } else {
                            Label::Built(built)
                        }
                    }
                    None => Label::Span(at + m.name.start..at + m.rank.end),
                };
                match &label {
                    Label::Span(r) => stream.push(&text[r.clone()]),
                    Label::Built(s) => stream.push(s),
                }
                stream.push("|");
                rank = Some(label);
                pos = at + m.end;
                continue;
            }
        }
        if first_trim == b'[' {
            let m = read(
                hand,
                || torch_rank_hand(rest_trim.as_bytes()),
                || torch_rank_regex(rest_trim),
            );
            if let Some((r, end)) = m {
                let at = pos + skipped;
                stream.push(&rest_trim[r.clone()]);
                stream.push("|");
                rank = Some(Label::Span(at + r.start..at + r.end));
                pos = at + end;
                continue;
            }
            if let Some(c) = p.sglang.captures(rest_trim) {
                ts = Some(captured_ts(&c, 2));
                if let Some(g) = c.get(8) {
                    let label = g.as_str().trim();
                    if !label.is_empty() {
                        stream.push(label);
                        stream.push("|");
                        let at = pos
                            + skipped
                            + g.start()
                            + (g.as_str().len() - g.as_str().trim_start().len());
                        rank = Some(Label::Span(at..at + label.len()));
                    }
                }
                pos += skipped + c.get(0).map_or(0, |m| m.end());
                continue;
            }
        }
        if stream.is_empty() && rank.is_none() {
            if let Some(c) = (first.is_ascii_alphanumeric() && has_pipe_field(rest))
                .then(|| p.compose.captures(rest))
                .flatten()
            {
                stream.push(c.get(1).map_or("", |m| m.as_str()));
                stream.push("|");
                pos += c.get(0).map_or(0, |m| m.end());
                continue;
            }
        }
        break;
    }
    let rest = &text[pos..];
    let first = rest.as_bytes().first().copied().unwrap_or(0);
    let header = matches!(first, b'D' | b'I' | b'W' | b'E' | b'C')
        .then(|| {
            read(
                hand,
                || vllm_header_hand(rest.as_bytes()),
                || vllm_header_regex(rest),
            )
        })
        .flatten();
    if let Some(h) = header {
        level = Some(h.level);
        ts = ts.or(Some(h.ts));
        pos += h.end;
        // vLLM logs a traceback once through its logger and once raw: keep them apart.
        stream.push("log|");
    } else if ts.is_none() {
        let py_or_ray = match first {
            b'[' => p.ray_ts.captures(rest),
            b if may_be_digit(b) => p.py_logging_ts.captures(rest),
            _ => None,
        };
        // torch's C10 logger brackets glog's header: `[rank15]:[E1224 01:14:28.93 x.ts:444] `.
        let glog = rest.strip_prefix('[').unwrap_or(rest);
        let (first, second) = match glog.as_bytes() {
            [a, b, ..] => (*a, *b),
            _ => (0, 0),
        };
        if let Some(c) = py_or_ray {
            ts = Some(captured_ts(&c, 2));
        } else if let Some(c) = (matches!(first, b'E' | b'W' | b'I' | b'F') && may_be_digit(second))
            .then(|| p.glog_ts.captures(glog))
            .flatten()
        {
            level = Some(match first {
                b'I' => "INFO",
                b'W' => "WARNING",
                _ => "ERROR",
            });
            ts = Some(captured_ts(&c, 1));
        }
    }
    // A wrapper logger's own prefix (after docker/compose prefixes): the level counts, and
    // the message starts after its last field, so tracebacks inside are seen as such.
    // Only behind a timestamp (its own or a docker one): a bare `ERROR: ...` is a message.
    let first = text.as_bytes().get(pos).copied().unwrap_or(0);
    if level.is_none() && (ts.is_some() || first == b'[' || may_be_digit(first)) {
        // The pattern needs one of the level words.
        if let Some(c) = has_level_word(&text[pos..])
            .then(|| p.wrapped_level.captures(&text[pos..]))
            .flatten()
        {
            if c.get(1).is_some() || ts.is_some() {
                level = c.get(2).map(|m| level_word(m.as_str()));
                pos += wrapper_end(&c, &text[pos..]);
                // A wrapper that logs a vLLM process's output (often all as `ERROR | stderr`):
                // the vLLM header inside says the real level.
                if let Some(v) = p.vllm_header.captures(&text[pos..]) {
                    level = v.get(1).map(|m| level_word(m.as_str()));
                    pos += v.get(0).map_or(0, |m| m.end());
                }
            }
        }
    }
    let first = text.as_bytes().get(pos).copied().unwrap_or(0);
    if level.is_none() && matches!(first, b'D' | b'I' | b'W' | b'E' | b'C') {
        if let Some(c) = p.py_default.captures(&text[pos..]) {
            level = c.get(1).map(|m| level_word(m.as_str()));
            pos += c.get(0).map_or(0, |m| m.end());
        }
    }
    // Python warnings (`x.py:12: UserWarning: ...`) are warnings whatever they mention.
    if level.is_none() && has_python_warning(&text[pos..]) && p.py_warning.is_match(&text[pos..]) {
        level = Some("WARNING");
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

/// Whether `needle` occurs in `s`: a vectorised search (lines can be long) whose searcher is
/// built once, in `slot`.
fn has(slot: &'static OnceLock<Finder<'static>>, needle: &'static str, s: &str) -> bool {
    slot.get_or_init(|| Finder::new(needle))
        .find(s.as_bytes())
        .is_some()
}

/// A compose service field `| ` somewhere on the line.
fn has_pipe_field(s: &str) -> bool {
    static F: OnceLock<Finder<'static>> = OnceLock::new();
    has(&F, "| ", s)
}

fn has_python_warning(s: &str) -> bool {
    static F: OnceLock<Finder<'static>> = OnceLock::new();
    has(&F, "Warning: ", s)
}

/// NCCL's own informational lines, whatever the logger's level says.
pub fn has_nccl_info(s: &str) -> bool {
    static F: OnceLock<Finder<'static>> = OnceLock::new();
    has(&F, " NCCL INFO ", s)
}

/// Whether a line starting with this byte can start with `\d` (Unicode digits included).
fn may_be_digit(b: u8) -> bool {
    b.is_ascii_digit() || b >= 0x80
}

/// Whether `s` holds a level word (`DEBUG` ... `CRITICAL`), the part every wrapper logger
/// prefix needs.
fn has_level_word(s: &str) -> bool {
    // Hand-written: an automaton over the five words walks every byte of the line (measured:
    // 5% of triage on a crash loop); the words' first letters are rare in a line, and vectorised
    // searches find them.
    let b = s.as_bytes();
    let word_at = |i: usize| -> bool {
        let w: &[u8] = match b[i] {
            b'D' => b"DEBUG",
            b'I' => b"INFO",
            b'W' => b"WARN",
            b'E' => b"ERROR",
            _ => b"CRITICAL",
        };
        b[i..].starts_with(w)
    };
    memchr::memchr3_iter(b'E', b'I', b'W', b).any(word_at)
        || memchr::memchr2_iter(b'D', b'C', b).any(word_at)
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
    if !first_after_blanks_may_be(msg, b'F') {
        return false;
    }
    let Some(rest) = msg.trim_start().strip_prefix("File \"") else {
        return false;
    };
    // By hand (`[^"]*", line \d`); a non-ASCII byte where `\d` reads goes to the regex.
    let Some(q) = memchr::memchr(b'"', rest.as_bytes()) else {
        return false;
    };
    match rest[q..]
        .strip_prefix("\", line ")
        .and_then(|t| t.bytes().next())
    {
        Some(b) if b.is_ascii_digit() => true,
        Some(b) if b >= 0x80 => frame_re().is_match(msg),
        _ => false,
    }
}

/// IPython's frame (a notebook's traceback: `File ~/env/vllm/x.py:112, in Cls.f(self, *args)`,
/// `File /env/sglang/y.py:52` at a module's top, `Cell In[3], line 11`) written as Python
/// writes one (`File "~/env/vllm/x.py", line 112, in Cls.f`), for the frame map.
pub fn ipython_frame(msg: &str) -> Option<String> {
    static R: OnceLock<Regex> = OnceLock::new();
    if !may_be_ipython_frame(msg) {
        return None;
    }
    let t = msg.trim();
    if !(t.starts_with("File ") || t.starts_with("Cell In[")) || t.starts_with("File \"") {
        return None;
    }
    let re = R.get_or_init(|| {
        Regex::new(concat!(
            r"^(?:File ([^\s\x22][^\s]*?):(\d+)|(Cell In\[\d+\]), line (\d+))",
            r"(?:, in ([^\s(]+)(?:\(.*)?)?$"
        ))
        .unwrap()
    });
    let c = re.captures(t)?;
    let path = c.get(1).or(c.get(3))?.as_str();
    let no = c.get(2).or(c.get(4))?.as_str();
    let func = c.get(5).map_or("<module>", |m| m.as_str());
    Some(format!("File \"{path}\", line {no}, in {func}"))
}

/// Whether `msg` may be IPython's frame ([`ipython_frame`]): false for almost every line at the
/// cost of a look at its first bytes.
pub fn may_be_ipython_frame(msg: &str) -> bool {
    first_after_blanks_may_be(msg, b'F') || first_after_blanks_may_be(msg, b'C')
}

/// A line of the source IPython shows around a frame's line: `    109     x = f(y)`, or the
/// line the frame ran, behind an arrow (`---> 112 y = g(x)`, `----> 2 import z`): `Some` with
/// the code and whether it is the frame's own line.
pub fn ipython_source(msg: &str) -> Option<(&str, bool)> {
    let t = msg.trim_start();
    let (arrow, rest) = match t.trim_start_matches('-').strip_prefix('>') {
        Some(rest) if t.starts_with('-') => (true, rest.trim_start()),
        _ => (false, t),
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || !rest[digits..].starts_with(' ') && digits != rest.len() {
        return None;
    }
    Some((rest[digits..].trim(), arrow))
}

/// A native backtrace's frame as gdb prints it (`#10 0x00007f6004a4f045 in
/// llama_context::decode(llama_batch const&) () from libllama.so`, `#0  __pthread_kill (...) at
/// pthread_kill.c:44`): `#`, the frame's number, blanks. It names functions, never what the
/// process did.
pub fn is_native_frame(msg: &str) -> bool {
    let Some(rest) = msg.trim_start().strip_prefix('#') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && rest
            .as_bytes()
            .get(digits)
            .is_some_and(|&b| b == b' ' || b == b'\t')
}

/// `ValueError: ...`, `torch.OutOfMemoryError: ...`, `KeyboardInterrupt`
pub fn is_exception_line(msg: &str) -> bool {
    !msg.starts_with(' ') && !msg.starts_with('\t') && exception_re().is_match(msg)
}

/// `Traceback (most recent call last):`
pub fn is_traceback_header(msg: &str) -> bool {
    const HEADER: &str = "Traceback (most recent call last)";
    // SGLang writes its own words first: `Scheduler hit an exception: Traceback (most ...):`.
    // Cheap rejection first: most lines neither start with `T` nor end with `)`.
    let last = msg.bytes().rev().find(|&b| !is_ascii_blank(b) && b != b':');
    if !first_after_blanks_may_be(msg, b'T') && !matches!(last, Some(b')' | 0x80..)) {
        return false;
    }
    msg.trim_start().starts_with(HEADER) || msg.trim_end().trim_end_matches(':').ends_with(HEADER)
}

/// The message a traceback's header line states before the header itself (vLLM V0's worker:
/// `Exception in worker X while processing method init_device: <message>, Traceback (most
/// recent call last):`), without the separator: none when the header stands alone or its
/// words name no message (SGLang's `Scheduler hit an exception: Traceback ...`).
pub fn header_message(msg: &str) -> Option<&str> {
    const HEADER: &str = "Traceback (most recent call last)";
    let at = msg.rfind(HEADER)?;
    let before = msg[..at]
        .trim_end()
        .trim_end_matches([',', ':', ';'])
        .trim();
    let (_, message) = before.split_once(": ")?;
    (message.trim().len() >= 12).then_some(before)
}

/// An ASCII byte that `char::is_whitespace` holds for (`\t`..`\r`, space).
fn is_ascii_blank(b: u8) -> bool {
    b == b' ' || (b'\t'..=b'\r').contains(&b)
}

/// Whether `msg.trim_start()` may start with the ASCII byte `first`: false only when its
/// first byte after ASCII blanks is another ASCII byte (a non-ASCII one may be a blank).
fn first_after_blanks_may_be(msg: &str, first: u8) -> bool {
    match msg.bytes().find(|&b| !is_ascii_blank(b)) {
        Some(b) => b == first || b >= 0x80,
        None => false,
    }
}

/// The source file a logger header names: vLLM's `ERROR 10-25 13:08:43 [core.py:708] `
/// (`[v1/core/block_pool.py:42]` with relative paths), its older `engine.py:389] `, and glog's
/// `E0909 07:11:16.569000 123 socket.cpp:42] `.
pub fn logger_file(line: &str) -> Option<&str> {
    static R: OnceLock<Regex> = OnceLock::new();
    let re = R.get_or_init(|| {
        Regex::new(concat!(
            r"(?:^|[\s)\]|])(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?",
            r"|[EWIF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ )",
            r"([\w.\-/]+\.(?:py|cc|cpp|cu|h|hpp|rs)):\d+\]"
        ))
        .unwrap()
    });
    re.captures(line).and_then(|c| c.get(1)).map(|m| m.as_str())
}

/// The line that ends a traceback when its exception type has none of the usual suffixes
/// (`Exception: ...`, `_RemoteUnavailable: ...`, `UpdateRejected: ...`): a class name (a
/// capitalised identifier, optionally behind a module path) and the message, right after a
/// frame's source line. Python prints nothing else there.
pub fn ends_traceback(msg: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"^([a-z_][\w]*\.)*_?[A-Z][A-Za-z0-9_]*(: |:$|$)").unwrap())
        .is_match(msg)
}

/// torch's own rank label (`[rank3]:` prefixes), as opposed to an engine's worker label.
pub fn is_torch_rank(label: &str) -> bool {
    label
        .strip_prefix("rank")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_headers_own_message() {
        let v0 = "Exception in worker VllmWorkerProcess while processing method init_device: Cannot re-initialize CUDA in forked subprocess, Traceback (most recent call last):";
        assert_eq!(
            header_message(v0),
            Some("Exception in worker VllmWorkerProcess while processing method init_device: Cannot re-initialize CUDA in forked subprocess")
        );
        assert_eq!(header_message("Traceback (most recent call last):"), None);
        assert_eq!(
            header_message("Scheduler hit an exception: Traceback (most recent call last):"),
            None
        );
        assert_eq!(header_message("ValueError: x"), None);
    }

    #[test]
    fn wrapper_logger_prefixes() {
        let a =
            parse(b"[2026-01-02 10:00:01,100] [ERROR] [MainThread] [asyncio] >>> AssertionError");
        assert_eq!(a.level, Some("ERROR"));
        assert_eq!(a.msg(), "AssertionError");
        let b = parse(b"2026-01-02 10:00:01 | ERROR | stderr |   File \"x.py\", line 3, in f");
        assert_eq!(b.level, Some("ERROR"));
        assert!(is_frame(b.msg()));
        let c = parse(b"2026-01-02 10:00:01,812 - app.server - WARNING - disk almost full");
        assert_eq!(c.level, Some("WARNING"));
        assert_eq!(c.msg(), "disk almost full");
        // The exception's name after the level is the message's, not a field of the logger.
        let t =
            parse(b"2024-11-25 12:44:20,292 - sglang - INFO - IndexError: list index out of range");
        assert_eq!(t.level, Some("INFO"));
        assert_eq!(t.msg(), "IndexError: list index out of range");
        // A wrapper's own name field before `: ` stays the wrapper's.
        let w = parse(b"2024-07-13 15:07:34,930 - INFO - vLLM: ERROR 07-13 15:07:34 async_llm_engine.py:53] Engine background task failed");
        assert_eq!(w.level, Some("ERROR"));
        assert_eq!(w.msg(), "Engine background task failed");
        // The wrapped process's own vLLM header gives the level.
        let e = parse(b"2026-01-02 10:00:01 | ERROR | stderr | INFO 01-02 10:00:01 llm_engine.py:73] Initializing");
        assert_eq!(e.level, Some("INFO"));
        assert_eq!(e.msg(), "Initializing");
        // A vLLM header after a docker timestamp keeps working as before.
        let d = parse(b"2026-01-02T10:00:01.000Z ERROR 01-02 10:00:01 [core.py:1] ValueError: x");
        assert_eq!(d.msg(), "ValueError: x");
    }

    #[test]
    fn vllm_worker_prefix_and_header() {
        let l = parse(b"(VllmWorker rank=1 pid=2445156) ERROR 05-10 16:00:15 [multiproc_executor.py:470] RuntimeError: boom");
        assert_eq!(l.rank(), Some("VllmWorker rank=1"));
        let l = parse(b"(VllmWorker TP1 pid=901) ERROR 05-02 10:02:11 [multiproc_executor.py:671] RuntimeError: boom");
        assert_eq!(l.rank(), Some("VllmWorker TP1"));
        assert_eq!(l.msg(), "RuntimeError: boom");
        assert_eq!(l.msg(), "RuntimeError: boom");
        assert_eq!(l.level, Some("ERROR"));
        assert!(l.ts.is_some());
    }

    #[test]
    fn compose_docker_ray_and_torch_prefixes() {
        let l = parse(b"backend-vllm-openai-1  | (RayWorkerWrapper pid=643, ip=10.0.0.2) ERROR 06-14 07:04:12 worker_base.py:148] Error executing method init_worker.");
        assert_eq!(l.rank(), Some("RayWorkerWrapper pid=643, ip=10.0.0.2"));
        assert_eq!(l.msg(), "Error executing method init_worker.");
        let l = parse(b"2024-06-14T07:04:12.123456789Z [rank3]: RuntimeError: NCCL error");
        assert_eq!(l.rank(), Some("rank3"));
        assert_eq!(l.msg(), "RuntimeError: NCCL error");
        assert!(l.ts.is_some());
    }

    #[test]
    fn journald_prefixes_of_a_systemd_unit() {
        // `journalctl -u sglang`: the host is optional, the writer's pid keeps streams apart.
        let l = parse(b"Mar 18 11:23:46 sgl-router[931930]: TypeError: 'NoneType' object is not subscriptable");
        assert_eq!(l.msg(), "TypeError: 'NoneType' object is not subscriptable");
        assert!(l.ts.is_some());
        let l = parse(b"Dec  4 09:01:02 gpu-node-7 vllm[4411]: INFO 12-04 09:01:02 [api_server.py:1] Starting vLLM API server");
        assert_eq!(l.level, Some("INFO"));
        assert_eq!(l.msg(), "Starting vLLM API server");
        let l = parse(b"Dec  4 09:01:02 gpu-node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
        assert_eq!(
            l.msg(),
            "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."
        );
        // `journalctl -o short-iso`: the ISO time, then host and writer.
        let l = parse(b"2026-12-04T09:01:02+0000 gpu-node-7 vllm[4411]: (EngineCore_DP0 pid=9) ERROR 12-04 09:01:02 [core.py:1] ValueError: x");
        assert_eq!(l.rank(), Some("EngineCore_DP0"));
        assert_eq!(l.msg(), "ValueError: x");
        // Not a journald line: a message that only starts with a month's name.
        let l = parse(b"May be an error: nothing[1]: here");
        assert_eq!(l.msg(), "May be an error: nothing[1]: here");
    }

    #[test]
    fn sglang_and_python_default_prefixes() {
        let l = parse(b"[2025-03-07 10:04:13 DP1 TP3] Scheduler hit an exception: Traceback");
        assert_eq!(l.rank(), Some("DP1 TP3"));
        assert_eq!(l.msg(), "Scheduler hit an exception: Traceback");
        assert!(l.ts.is_some());
        let l = parse(b"[2025-03-07 10:04:13] The server is fired up and ready to roll!");
        assert_eq!(l.rank(), None);
        assert_eq!(l.msg(), "The server is fired up and ready to roll!");
        let l = parse(b"WARNING:torchao:Skipping import of cpp extensions");
        assert_eq!(l.level, Some("WARNING"));
        assert_eq!(l.msg(), "Skipping import of cpp extensions");
    }

    /// The cleaning as first written (character by character), for comparison.
    #[test]
    fn a_level_word_is_found_wherever_it_stands() {
        for (s, want) in [
            ("2024-01-22 14:32:27 | ERROR | stderr | x", true),
            ("[2024-04-17 20:07:13,727] [WARNING] x", true),
            ("INFO", true),
            ("x DEBU", false),
            ("CRITICA CRITICAL", true),
            ("Error Info Warn", false),
            ("EEEERRORR", true),
            ("", false),
        ] {
            assert_eq!(has_level_word(s), want, "{s:?}");
        }
    }

    #[test]
    fn ansi_and_cr_are_removed() {
        let l = parse(
            b"\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO:     Application startup complete.\r",
        );
        assert_eq!(l.msg(), "INFO:     Application startup complete.");
    }

    #[test]
    fn hand_readers_agree_with_the_regexes() {
        let lines: &[&str] = &[
            "(VllmWorker rank=1 pid=2445156) ERROR 05-10 16:00:15 [multiproc_executor.py:470] x",
            "(VllmWorker TP1_PP0 pid=9) INFO 05-10 16:00:15.123 [a.py:1] x",
            "(VllmWorker TP1_XX0 pid=9) x",
            "(VllmWorker rank= pid=9) x",
            "(EngineCore_DP0 pid=007) x",
            "(RayWorkerWrapper pid=0643, ip=10.0.0.2) ERROR 06-14 07:04:12 worker_base.py:148] x",
            "(RayWorkerWrapper rank=1 pid=643, ip=10.0.0.2)x",
            "(RayWorkerWrapper pid=643, ip=zz) x",
            "(RayWorkerWrapper pid=99999999999999999999999, ip=1.2.3.4) x",
            "(Wörker pid=1) x",
            "(VllmWorker rank=\u{0661} pid=2) x",
            "(VllmWorker pid=1\u{0661}) x",
            "  (APIServer pid=1) INFO 01-02 10:00:01 [api_server.py:1] x",
            "ERROR 10-25 13:08:43 [core.py:708] x",
            "WARNING 10-25 13:08:43 core.py:708] x",
            "WARN 10-25 13:08:43 core.py:708]x",
            "WARNING 10-25 13:08:43 core.py:708 x",
            "INFO 02-19 07:03:11.5 engine.py:389] x",
            "INFO 02-19 07:03:11. engine.py:389] x",
            "INFO 02-19 07:03:11 [never closed",
            "INFO 02-19 07:03:11 mödule.py:1] x",
            "INFO 02-1\u{0662} 07:03:11 [a] x",
            "2024-06-14T07:04:12.123456789Z [rank3]: RuntimeError: NCCL error",
            "2024-06-14 07:04:12,5 UTC: x",
            "2024-06-14 07:04:12 UTCX",
            "2024-06-14 07:04:12 UTC x",
            "2024-06-14 07:04:12+05:30 x",
            "2024-06-14 07:04:12+0530: x",
            "2024-06-14 07:04:12+05:3 x",
            "2024-06-14 07:04:12-05:30x",
            "2024-06-14 07:04:12.\u{0663} x",
            "2024-06-14T07:04:12Z: x",
            "[rank12]:x",
            "[rank\u{0661}]: x",
            "[rank1] x",
            "[2025-03-07 10:04:13 DP1 TP3] x",
            "2024-01-22 14:32:27 | ERROR | stderr | (VllmWorker rank=0 pid=1) ERROR 01-22 14:32:27 [a.py:1] x",
            "E0909 07:11:16.569000 1 x",
            "Exx",
            "svc-1  | (VllmWorker rank=1 pid=2) x",
            "WARNING:torchao:x",
        ];
        for l in lines {
            assert_eq!(parse(l.as_bytes()), parse_reference(l.as_bytes()), "{l}");
        }
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

    #[test]
    fn a_line_written_after_a_progress_bar_is_read_from_its_own_start() {
        let l = parse(
            b"Capturing batches (bs=30 avail_mem=8.62 GB):   0%|          | 0/8 [00:00<?, ?it/s][rank15]:[E1224 01:14:28.932556327 compiler_depend.ts:444] setup failed!",
        );
        assert_eq!(l.rank(), Some("rank15"));
        assert_eq!(l.level, Some("ERROR"));
        assert!(l.msg().ends_with("setup failed!"), "{}", l.msg());
        // The bar's last state before the line (`\r` removed) is passed over too.
        let l = parse(b"Loading: 50%|##  | 1/2 [00:01<00:01]Loading: 100%|####| 2/2 [00:02<00:00]Traceback (most recent call last):");
        assert_eq!(l.msg(), "Traceback (most recent call last):");
        // A bar alone, or a bar that ends the line, is the line's message.
        for bar in [
            "Loading safetensors checkpoint shards: 100% Completed | 5/5 [00:03<00:00,  1.50it/s]",
            "INFO 12-01 10:00:00 [loader.py:1] Loading: 100%|####| 5/5 [00:03<00:00, 1.5it/s]",
            "[2025-01-01 10:00:00 TP0] Capturing batches (bs=1):  50%|##  | 4/8 [00:01<00:01,  3.2it/s] ",
        ] {
            assert!(parse(bar.as_bytes()).msg().trim_end().ends_with(']'), "{bar}");
            assert_eq!(super::after_progress_bar(bar), 0, "{bar}");
        }
    }

    #[test]
    fn torch_brackets_glogs_header_and_its_level_counts() {
        let l = parse(b"[rank3]:[W104 05:55:02.122991448 compiler_depend.ts:207] Warning: x");
        assert_eq!((l.rank(), l.level), (Some("rank3"), Some("WARNING")));
        let l = parse(b"[E1224 01:14:28.932556327 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout");
        assert_eq!(l.level, Some("ERROR"));
        // A bracket that only starts with a capital letter and a digit is no glog header.
        assert_eq!(parse(b"[E1 sensor] reading 3").level, None);
    }

    #[test]
    fn logger_files_of_vllm_and_glog_headers() {
        assert_eq!(
            logger_file("(EngineCore_DP0 pid=1) ERROR 10-25 13:08:43 [core.py:708] x"),
            Some("core.py")
        );
        assert_eq!(
            logger_file("ERROR 02-19 07:03:11 engine.py:389] x"),
            Some("engine.py")
        );
        assert_eq!(
            logger_file("INFO 01-02 10:00:00 [v1/core/block_pool.py:42] x"),
            Some("v1/core/block_pool.py")
        );
        assert_eq!(
            logger_file("E0909 07:11:16.569000 123 torch/csrc/socket.cpp:42] [c10d] x"),
            Some("torch/csrc/socket.cpp")
        );
        // A wrapper logger's level says nothing about the source.
        assert_eq!(
            logger_file("2024-01-22 14:32:27 | ERROR | stderr | x"),
            None
        );
        assert_eq!(logger_file("[2025-03-07 10:04:13 TP0] Failed to x"), None);
    }

    #[test]
    fn exception_types_without_the_usual_suffix_end_a_traceback() {
        assert!(ends_traceback("Exception: Failed to upload file"));
        assert!(ends_traceback("_RemoteUnavailable: the remote read failed"));
        assert!(ends_traceback("vllm.distributed.x._UnsupportedFakeOp: op"));
        assert!(ends_traceback("StopIteration"));
        // Source lines of frames printed without indentation are not exceptions.
        assert!(!ends_traceback(
            "self.comm: ncclComm_t = self.nccl.ncclCommInitRank("
        ));
        assert!(!ends_traceback("return func(*args, **kwargs)"));
    }
}
