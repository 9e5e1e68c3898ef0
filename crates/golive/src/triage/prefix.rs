//! The prefixes of log lines, read two ways: by the regexes that define them, and for the
//! common ones (vLLM's process label and logger header, docker timestamps, torchrun ranks)
//! by hand, byte by byte, because traceback-heavy logs parse millions of lines. A hand reader
//! answers only where its bytes are ASCII and hands anything else to the regex (the Unicode
//! classes `\d`, `\w`, `\s` could match there), so both always agree.

use std::ops::Range;
use std::sync::OnceLock;

use regex::Regex;

pub(super) struct Patterns {
    pub(super) iso_ts: Regex,
    pub(super) compose: Regex,
    pub(super) syslog: Regex,
    pub(super) proc_label: Regex,
    pub(super) torch_rank: Regex,
    pub(super) vllm_header: Regex,
    pub(super) py_logging_ts: Regex,
    pub(super) glog_ts: Regex,
    pub(super) ray_ts: Regex,
    pub(super) py_warning: Regex,
    pub(super) wrapped_level: Regex,
    pub(super) sglang: Regex,
    pub(super) py_default: Regex,
}

/// A built-in regex (compiled once, by `patterns`).
fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("built-in prefix regex")
}

pub(super) fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        // docker logs --timestamps / kubectl logs --timestamps
        iso_ts: re(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?(?:Z|[+-]\d\d:?\d\d)?(?: UTC)?:? "),
        // docker compose: `svc-1  | `
        compose: re(r"^([A-Za-z0-9][\w.\-]*)\s*\| "),
        // journald / syslog (`journalctl -u vllm`): the time of `Mar 18 11:23:46 host ident[pid]: `;
        // the host and writer after it are `syslog_ident`'s.
        syslog: re(r"^(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) ([ \d]\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? "),
        // `(VllmWorker rank=1 pid=..)`, `(VllmWorker TP1 pid=..)`, `(EngineCore_DP0 pid=..)`,
        // `(RayWorkerWrapper pid=.., ip=..)`
        proc_label: re(r"^\(([A-Za-z_][\w\-]*)((?: rank=\d+| (?:DP|PP|TP|EP|DCP|PCP)\d+(?:_(?:DP|PP|TP|EP|DCP|PCP)\d+)*)?) pid=(\d+)(?:, ip=([0-9A-Fa-f.:]+))?\) ?"),
        // torchrun: `[rank3]: `
        torch_rank: re(r"^\[(rank\d+)\]: ?"),
        // `ERROR 10-25 13:08:43 [core.py:708] ` and the older `ERROR 02-19 07:03:11 engine.py:389] `
        vllm_header: re(r"^(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? (?:\[[^\]]*\]|[\w.\-]+:\d+\]) ?"),
        // python logging: `2025-06-20 20:02:32,812 - name - ERROR - `
        py_logging_ts: re(r"^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)[,.](\d+)"),
        // glog (torch c10d): `E0909 07:11:16.569000 `
        glog_ts: re(r"^[EWIF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+)"),
        // Ray: `[2024-11-11 09:36:27,146 E 221 275] `
        ray_ts: re(r"^\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d+) "),
        py_warning: re(r"^\S+:\d+: [A-Za-z]*Warning: "),
        // SGLang: `[2025-03-07 10:04:13 TP0] `, `[2025-03-07 10:04:13 DP1 TP3] `, `[2025-03-07 10:04:13] `
        sglang: re(r"^\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[.,](\d+))?((?: (?:DP|PP|TP|EP|CP|ATTN_DP|ATTN_CP|MOE_DP)\d+)*)\] "),
        // Python's default logging format: `WARNING:torchao:msg`, `ERROR:root:msg`
        py_default: re(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.\-]*:"),
        // Wrapper loggers that put a timestamp, a level and a few fields in front of each
        // line: `2024-01-22 14:32:27 | ERROR | stderr | `, `[2024-04-17 20:07:13,727] [ERROR]
        // [MainThread] [asyncio] >>> `, `2025-06-20 20:02:32,812 - name - ERROR - `.
        wrapped_level: re(r"^(\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?\]?)?(?:\s*(?:\||-|\[[^\]\n]+\]|[A-Za-z0-9_.]+)){0,3}?\s*(?:\||-)?\s*\[?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]?((?:\s*(?:\| [A-Za-z0-9_.\-]+|- [A-Za-z0-9_.\-]+|\[[^\]\n]+\]))*)\s*(?:\| |- |>>> ?|: )"),
    })
}

/// A journald/syslog prefix: where the message starts, its time (month by name), and the
/// ident that wrote it (the unit's program, `kernel`).
pub(super) fn syslog(s: &str) -> Option<(usize, Option<u64>, &str)> {
    let b = s.as_bytes();
    // `Mon DD HH:MM:SS `: cheap byte checks before the regex.
    if b.len() < 17 || !b[0].is_ascii_uppercase() || b[3] != b' ' || b[9] != b':' {
        return None;
    }
    let c = patterns().syslog.captures(s)?;
    let month = MONTHS
        .iter()
        .position(|m| *m == &c[1])
        .map_or(0, |i| i as u64 + 1);
    let n = |i: usize| c.get(i).map_or(0, |m| num_str(m.as_str().trim()));
    let ts = ts_key(month, n(2), n(3), n(4), n(5), c.get(6).map(|m| m.as_str()));
    let time_end = c.get(0)?.end();
    let (end, ident) = syslog_ident(&s[time_end..])?;
    Some((time_end + end, Some(ts), ident))
}

/// The host and ident after a journald time (BSD, or ISO with `journalctl -o short-iso`):
/// `host ident[pid]: ` or `host kernel: `, the host optional. Read by hand, not by a regex: it is tried on every
/// line behind a docker/kubectl timestamp (the hot path of `--timestamps` logs), and almost
/// all of them fail at their first byte or token.
pub(super) fn syslog_ident(s: &str) -> Option<(usize, &str)> {
    let (first, after) = token(s, 0)?;
    if let Some(ident) = ident_of(first) {
        return Some((after, ident));
    }
    if !is_host(first) {
        return None;
    }
    let (second, after) = token(s, after)?;
    Some((after, ident_of(second)?))
}

/// The space-free token at `s[from..]` (at most 128 bytes) and where the text after it and
/// its one following space starts.
fn token(s: &str, from: usize) -> Option<(&str, usize)> {
    let rest = s.get(from..)?;
    let len = rest.bytes().take(129).position(|c| c == b' ')?;
    Some((&rest[..len], from + len + 1))
}

/// `ident[pid]:` or `kernel:`: the ident.
fn ident_of(tok: &str) -> Option<&str> {
    let inner = tok.strip_suffix(':')?;
    if inner == "kernel" {
        return Some(inner);
    }
    let (name, pid) = inner.strip_suffix(']')?.split_once('[')?;
    let first_ok = name
        .bytes()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_');
    let name_ok = name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'@' | b'-'));
    let pid_ok = !pid.is_empty() && pid.bytes().all(|c| c.is_ascii_digit());
    (first_ok && name_ok && pid_ok).then_some(name)
}

fn is_host(tok: &str) -> bool {
    tok.bytes()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && tok
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

pub(super) fn num_str(s: &str) -> u64 {
    s.parse().unwrap_or(0)
}

/// Milliseconds from month/day/h/m/s/fraction (the year is often absent in vLLM lines; logs
/// compared with each other come from the same run).
pub(super) fn ts_key(mon: u64, day: u64, h: u64, m: u64, s: u64, frac: Option<&str>) -> u64 {
    let ms = frac
        .map(|f| {
            let f3: String = f.chars().chain("000".chars()).take(3).collect();
            f3.parse::<u64>().unwrap_or(0)
        })
        .unwrap_or(0);
    ((((mon * 32 + day) * 24 + h) * 60 + m) * 60 + s) * 1000 + ms
}

/// [`ts_key`] from six capture groups from `first` on: month, day, h, m, s, fraction.
pub(super) fn captured_ts(c: &regex::Captures, first: usize) -> u64 {
    let n = |i: usize| c.get(i).map_or(0, |m| num_str(m.as_str()));
    ts_key(
        n(first),
        n(first + 1),
        n(first + 2),
        n(first + 3),
        n(first + 4),
        c.get(first + 5).map(|m| m.as_str()),
    )
}

/// What a hand reader says about a prefix: the same as its regex, or that it cannot tell
/// (a non-ASCII byte where the regex's Unicode classes `\d`, `\w`, `\s` could match).
pub(super) enum Hand<T> {
    Match(T),
    NoMatch,
    Unsure,
}

/// ASCII digits at s[i..]; `None` when a non-ASCII byte follows them (a Unicode `\d` could).
fn digits(s: &[u8], i: usize) -> Option<usize> {
    let n = s
        .get(i..)
        .map_or(0, |t| t.iter().take_while(|b| b.is_ascii_digit()).count());
    match s.get(i + n) {
        Some(&b) if b >= 0x80 => None,
        _ => Some(n),
    }
}

/// Exactly `n` digits at s[i..] (as `\d{n}`): `Some(false)` when not, `None` when unsure.
fn fixed_digits(s: &[u8], i: usize, n: usize) -> Option<bool> {
    for k in i..i + n {
        match s.get(k) {
            Some(b) if b.is_ascii_digit() => {}
            Some(&b) if b >= 0x80 => return None,
            _ => return Some(false),
        }
    }
    Some(true)
}

fn dnum(s: &[u8], r: Range<usize>) -> u64 {
    s[r].iter().fold(0u64, |n, d| {
        n.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))
    })
}

/// `(VllmWorker rank=1 pid=..)`: name, rank part, pid and Ray address; `end` after the label.
#[derive(Debug, PartialEq)]
pub(super) struct ProcLabel {
    pub(super) end: usize,
    pub(super) name: Range<usize>,
    pub(super) rank: Range<usize>,
    pub(super) pid: Range<usize>,
    pub(super) ip: Option<Range<usize>>,
}

pub(super) fn proc_label_regex(s: &str) -> Option<ProcLabel> {
    let c = patterns().proc_label.captures(s)?;
    let r = |i: usize| c.get(i).map(|m| m.range());
    Some(ProcLabel {
        end: c.get(0)?.end(),
        name: r(1)?,
        rank: r(2)?,
        pid: r(3)?,
        ip: r(4),
    })
}

/// `(?:DP|PP|TP|EP|DCP|PCP)\d+` at s[i..]: its end; `Err` when unsure.
fn parallel_code(s: &[u8], i: usize) -> Result<Option<usize>, ()> {
    for code in [&b"DP"[..], b"PP", b"TP", b"EP", b"DCP", b"PCP"] {
        if s.get(i..).is_some_and(|t| t.starts_with(code)) {
            let d = digits(s, i + code.len()).ok_or(())?;
            return Ok((d > 0).then_some(i + code.len() + d));
        }
    }
    Ok(None)
}

pub(super) fn proc_label_hand(s: &[u8]) -> Hand<ProcLabel> {
    use Hand::*;
    if s.first() != Some(&b'(') {
        return NoMatch;
    }
    match s.get(1) {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        _ => return NoMatch,
    }
    let mut i = 2;
    while let Some(&c) = s.get(i) {
        if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' {
            i += 1;
        } else if c >= 0x80 {
            return Unsure;
        } else {
            break;
        }
    }
    let name = 1..i;
    // The optional rank part: ` rank=N` or ` TP1_PP0` ...; kept only when ` pid=` follows.
    let mut j = i;
    if s[i..].starts_with(b" rank=") {
        match digits(s, i + 6) {
            None => return Unsure,
            Some(d) if d > 0 => j = i + 6 + d,
            Some(_) => {}
        }
    } else if s.get(i) == Some(&b' ') {
        match parallel_code(s, i + 1) {
            Err(()) => return Unsure,
            Ok(Some(mut e)) => {
                while s.get(e) == Some(&b'_') {
                    match parallel_code(s, e + 1) {
                        Err(()) => return Unsure,
                        Ok(Some(e2)) => e = e2,
                        Ok(None) => break,
                    }
                }
                j = e;
            }
            Ok(None) => {}
        }
    }
    let rank_end = if s[j..].starts_with(b" pid=") {
        j
    } else if s[i..].starts_with(b" pid=") {
        i
    } else {
        return NoMatch;
    };
    let p0 = rank_end + 5;
    let d = match digits(s, p0) {
        None => return Unsure,
        Some(0) => return NoMatch,
        Some(d) => d,
    };
    let pid = p0..p0 + d;
    let mut q = p0 + d;
    let mut ip = None;
    if s[q..].starts_with(b", ip=") {
        let r0 = q + 5;
        let n = s[r0..]
            .iter()
            .take_while(|b| b.is_ascii_hexdigit() || **b == b'.' || **b == b':')
            .count();
        if n > 0 && s.get(r0 + n) == Some(&b')') {
            ip = Some(r0..r0 + n);
            q = r0 + n;
        }
    }
    if s.get(q) != Some(&b')') {
        return NoMatch;
    }
    q += 1;
    if s.get(q) == Some(&b' ') {
        q += 1;
    }
    Match(ProcLabel {
        end: q,
        name,
        rank: i..rank_end,
        pid,
        ip,
    })
}

/// The vLLM logger header `ERROR 10-25 13:08:43 [core.py:708] `: level, timestamp, `end`.
#[derive(Debug, PartialEq)]
pub(super) struct Header {
    pub(super) end: usize,
    pub(super) level: &'static str,
    pub(super) ts: u64,
}

const LEVELS: [&str; 6] = ["DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL"];

pub(super) fn level_word(s: &str) -> &'static str {
    LEVELS.iter().find(|l| **l == s).copied().unwrap_or("ERROR")
}

pub(super) fn vllm_header_regex(s: &str) -> Option<Header> {
    let c = patterns().vllm_header.captures(s)?;
    Some(Header {
        end: c.get(0)?.end(),
        level: level_word(c.get(1)?.as_str()),
        ts: captured_ts(&c, 2),
    })
}

pub(super) fn vllm_header_hand(s: &[u8]) -> Hand<Header> {
    use Hand::*;
    let Some(level) = LEVELS
        .iter()
        .find(|l| s.starts_with(l.as_bytes()) && s.get(l.len()) == Some(&b' '))
    else {
        return NoMatch;
    };
    let mut i = level.len() + 1;
    // `\d\d-\d\d \d\d:\d\d:\d\d`
    for (k, lit) in [(2, b'-'), (2, b' '), (2, b':'), (2, b':'), (2, 0)] {
        match fixed_digits(s, i, k) {
            None => return Unsure,
            Some(false) => return NoMatch,
            Some(true) => {}
        }
        i += k;
        if lit != 0 {
            if s.get(i) != Some(&lit) {
                return NoMatch;
            }
            i += 1;
        }
    }
    let t = level.len() + 1;
    let mut frac = None;
    if s.get(i) == Some(&b'.') {
        match digits(s, i + 1) {
            None => return Unsure,
            Some(0) => return NoMatch,
            Some(d) => {
                frac = Some(i + 1..i + 1 + d);
                i += 1 + d;
            }
        }
    }
    if s.get(i) != Some(&b' ') {
        return NoMatch;
    }
    i += 1;
    if s.get(i) == Some(&b'[') {
        match memchr::memchr(b']', &s[i + 1..]) {
            Some(j) => i += 1 + j + 1,
            None => return NoMatch,
        }
    } else {
        let n0 = i;
        while let Some(&c) = s.get(i) {
            if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'-' {
                i += 1;
            } else if c >= 0x80 {
                return Unsure;
            } else {
                break;
            }
        }
        if i == n0 || s.get(i) != Some(&b':') {
            return NoMatch;
        }
        match digits(s, i + 1) {
            None => return Unsure,
            Some(0) => return NoMatch,
            Some(d) => i += 1 + d,
        }
        if s.get(i) != Some(&b']') {
            return NoMatch;
        }
        i += 1;
    }
    if s.get(i) == Some(&b' ') {
        i += 1;
    }
    let ts = ts_key(
        dnum(s, t..t + 2),
        dnum(s, t + 3..t + 5),
        dnum(s, t + 6..t + 8),
        dnum(s, t + 9..t + 11),
        dnum(s, t + 12..t + 14),
        frac.map(|r| std::str::from_utf8(&s[r]).unwrap_or("")),
    );
    Match(Header { end: i, level, ts })
}

/// A docker/kubectl timestamp `2024-06-14T07:04:12.123456789Z `: `end` and timestamp.
#[derive(Debug, PartialEq)]
pub(super) struct Stamp {
    pub(super) end: usize,
    pub(super) ts: u64,
}

pub(super) fn iso_ts_regex(s: &str) -> Option<Stamp> {
    let c = patterns().iso_ts.captures(s)?;
    Some(Stamp {
        end: c.get(0)?.end(),
        ts: captured_ts(&c, 2),
    })
}

pub(super) fn iso_ts_hand(s: &[u8]) -> Hand<Stamp> {
    use Hand::*;
    // `\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d`
    let mut i = 0;
    for (k, lit) in [
        (4, b'-'),
        (2, b'-'),
        (2, b'T'),
        (2, b':'),
        (2, b':'),
        (2, 0),
    ] {
        match fixed_digits(s, i, k) {
            None => return Unsure,
            Some(false) => return NoMatch,
            Some(true) => {}
        }
        i += k;
        if lit == b'T' {
            if !matches!(s.get(i), Some(b'T' | b' ')) {
                return NoMatch;
            }
            i += 1;
        } else if lit != 0 {
            if s.get(i) != Some(&lit) {
                return NoMatch;
            }
            i += 1;
        }
    }
    // A fraction, a zone, ` UTC`, `:`: each is taken when present (giving one back never
    // lets the mandatory space match), except ` UTC` not followed by `:? `.
    let mut frac = None;
    if matches!(s.get(i), Some(b'.' | b',')) {
        match digits(s, i + 1) {
            None => return Unsure,
            Some(0) => return NoMatch,
            Some(d) => {
                frac = Some(i + 1..i + 1 + d);
                i += 1 + d;
            }
        }
    }
    match s.get(i) {
        Some(b'Z') => i += 1,
        Some(b'+' | b'-') => {
            match fixed_digits(s, i + 1, 2) {
                None => return Unsure,
                Some(false) => return NoMatch,
                Some(true) => {}
            }
            let mut j = i + 3;
            if s.get(j) == Some(&b':') {
                j += 1;
            }
            match fixed_digits(s, j, 2) {
                None => return Unsure,
                Some(false) => return NoMatch,
                Some(true) => i = j + 2,
            }
        }
        _ => {}
    }
    let end = if s[i..].starts_with(b" UTC") {
        let q = i + 4;
        if s[q..].starts_with(b": ") {
            q + 2
        } else if s.get(q) == Some(&b' ') {
            q + 1
        } else {
            i + 1
        }
    } else if s[i..].starts_with(b": ") {
        i + 2
    } else if s.get(i) == Some(&b' ') {
        i + 1
    } else {
        return NoMatch;
    };
    let ts = ts_key(
        dnum(s, 5..7),
        dnum(s, 8..10),
        dnum(s, 11..13),
        dnum(s, 14..16),
        dnum(s, 17..19),
        frac.map(|r| std::str::from_utf8(&s[r]).unwrap_or("")),
    );
    Match(Stamp { end, ts })
}

/// torchrun's `[rank3]: `: the label's span and `end`.
pub(super) fn torch_rank_regex(s: &str) -> Option<(Range<usize>, usize)> {
    let c = patterns().torch_rank.captures(s)?;
    Some((c.get(1)?.range(), c.get(0)?.end()))
}

pub(super) fn torch_rank_hand(s: &[u8]) -> Hand<(Range<usize>, usize)> {
    if !s.starts_with(b"[rank") {
        return Hand::NoMatch;
    }
    let d = match digits(s, 5) {
        None => return Hand::Unsure,
        Some(0) => return Hand::NoMatch,
        Some(d) => d,
    };
    let mut e = 5 + d;
    if !s[e..].starts_with(b"]:") {
        return Hand::NoMatch;
    }
    e += 2;
    if s.get(e) == Some(&b' ') {
        e += 1;
    }
    Hand::Match((1..5 + d, e))
}

/// The hand reader's answer when `hand`, else (or when it is unsure) the regex's.
pub(super) fn read<T>(
    hand: bool,
    h: impl FnOnce() -> Hand<T>,
    re: impl FnOnce() -> Option<T>,
) -> Option<T> {
    if hand {
        match h() {
            Hand::Match(m) => return Some(m),
            Hand::NoMatch => return None,
            Hand::Unsure => {}
        }
    }
    re()
}
