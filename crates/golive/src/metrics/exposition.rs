//! A reader of the Prometheus text exposition format (0.0.4) and of OpenMetrics 1.0 text,
//! one line at a time in a single forward pass (no regex, no backtracking).
//!
//! Our own instead of a crate. Tried against the real vLLM 0.32 page and the cases in the
//! tests below (issue 10):
//! - `prometheus-parse` 0.2.5: its name pattern is `\w+`, so every `vllm:` line was
//!   rejected (golive renamed `:` on the way in and out), and it drops the `_sum`/`_count`
//!   samples of labelled histograms;
//! - `openmetrics-parser` 0.5.1: LGPL-3.0; fails the whole page at its first bad line with
//!   a grammar dump; wants each family's lines together (an untyped name between two
//!   others fails), the final newline, and no `# EOF` in Prometheus mode;
//! - `prom_text_format_parser` 0.1.0 (one release): accepts duplicate label names
//!   silently and fails on `# EOF`.
//!
//! Here a bad line is an error with its line number and the reason, and the reader goes
//! on with the next line: a diagnosis tool keeps what the rest of the page says.
//! Accepted: `:` in names, quoted (UTF-8) metric and label names inside the braces,
//! label escapes (`\\`, `\"`, `\n`), blanks around labels and a trailing comma, `# HELP`
//! (escapes `\\`, `\n`), `# TYPE` (Prometheus and OpenMetrics types), `# UNIT`, other
//! comments, `NaN`/`+Inf`/`-Inf`, timestamps (integer milliseconds or OpenMetrics'
//! float seconds, kept as written), OpenMetrics exemplars (checked, not kept), `# EOF`
//! (the end: text after it is an error), CRLF line ends. Each sample carries the type of
//! the family it belongs to (`x_total`/`x_created` of counter `x`, `_bucket`/`_sum`/
//! `_count` of a histogram); a sample of no typed family is untyped.
//! Not checked: that a series appears once, and that a family's lines are together.

use std::collections::HashSet;

/// Lines longer than this are reported and skipped (vLLM's longest is under 300 bytes).
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The type a `# TYPE` line gives a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetricType {
    /// `counter`.
    Counter,
    /// `gauge`.
    Gauge,
    /// `histogram`.
    Histogram,
    /// `gaugehistogram` (OpenMetrics).
    GaugeHistogram,
    /// `summary`.
    Summary,
    /// `info` (OpenMetrics).
    Info,
    /// `stateset` (OpenMetrics).
    StateSet,
    /// No `# TYPE` (or `untyped` / OpenMetrics' `unknown`).
    #[default]
    Untyped,
}

impl MetricType {
    fn from_word(word: &str) -> Option<MetricType> {
        Some(match word {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "gaugehistogram" => MetricType::GaugeHistogram,
            "summary" => MetricType::Summary,
            "info" => MetricType::Info,
            "stateset" => MetricType::StateSet,
            "untyped" | "unknown" => MetricType::Untyped,
            _ => return None,
        })
    }

    /// The sample-name suffixes a family of this type has.
    fn suffixes(self) -> &'static [&'static str] {
        match self {
            MetricType::Counter => &["", "_total", "_created"],
            MetricType::Histogram => &["_bucket", "_sum", "_count", "_created"],
            MetricType::GaugeHistogram => &["_bucket", "_gsum", "_gcount"],
            MetricType::Summary => &["", "_sum", "_count", "_created"],
            MetricType::Info => &["_info", ""],
            MetricType::Gauge | MetricType::StateSet | MetricType::Untyped => &[""],
        }
    }
}

/// A sample's labels in the order written; names are unique.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Labels(Vec<(String, String)>);

impl Labels {
    /// The value of label `name`; `None`: the sample has no such label.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    /// Every label as (name, value), in the order written.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }
    /// How many labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// No labels at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<N: Into<String>, V: Into<String>> FromIterator<(N, V)> for Labels {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(iter: I) -> Self {
        Labels(
            iter.into_iter()
                .map(|(n, v)| (n.into(), v.into()))
                .collect(),
        )
    }
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's own name (`vllm:e2e_request_latency_seconds_bucket`).
    pub metric: String,
    /// The sample's labels.
    pub labels: Labels,
    /// The sample's value (`NaN`, `+Inf` included).
    pub value: f64,
    /// As written: milliseconds in the Prometheus format, seconds in OpenMetrics.
    pub timestamp: Option<f64>,
    /// The type of the family the sample belongs to.
    pub kind: MetricType,
}

/// What a line says.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// `# HELP name text`.
    Help {
        /// The family.
        name: String,
        /// The help text, unescaped.
        text: String,
    },
    /// `# TYPE name kind`.
    Type {
        /// The family.
        name: String,
        /// Its type.
        kind: MetricType,
    },
    /// `# UNIT name unit` (OpenMetrics).
    Unit {
        /// The family.
        name: String,
        /// The unit, e.g. `seconds`.
        unit: String,
    },
    /// A sample line.
    Sample(Sample),
}

/// A line that could not be read, with its 1-based number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// The line number, 1-based.
    pub line: usize,
    /// What is wrong with the line.
    pub message: String,
}

/// Reads records from a page; each item is one line's record or its error, and the
/// reader always goes on with the next line.
pub struct Reader<'a> {
    rest: &'a [u8],
    line: usize,
    /// The family of the last `# TYPE` line.
    family: Option<(String, MetricType)>,
    typed: HashSet<String>,
    eof: bool,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `page`.
    pub fn new(page: &'a [u8]) -> Reader<'a> {
        Reader {
            rest: page,
            line: 0,
            family: None,
            typed: HashSet::new(),
            eof: false,
        }
    }

    /// True once the OpenMetrics end marker `# EOF` was read.
    pub fn saw_eof(&self) -> bool {
        self.eof
    }

    fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            line: self.line,
            message: message.into(),
        }
    }

    /// The record of one line; `Ok(None)` for comments and `# EOF`.
    fn line(&mut self, line: &str) -> Result<Option<Record>, String> {
        if line.starts_with('#') {
            self.comment(line)
        } else {
            self.sample(line).map(|s| Some(Record::Sample(s)))
        }
    }

    fn comment(&mut self, line: &str) -> Result<Option<Record>, String> {
        let mut c = Cursor::new(line);
        c.eat(b'#');
        c.skip_blanks();
        let keyword = c.word();
        if !matches!(keyword, "HELP" | "TYPE" | "UNIT" | "EOF") {
            return Ok(None);
        }
        if keyword == "EOF" {
            if c.rest().trim_end().is_empty() {
                self.eof = true;
            }
            return Ok(None);
        }
        if !c.skip_blanks() {
            return Err(format!("`# {keyword}` without a metric name"));
        }
        let name = c.metric_name()?;
        let had_blank = c.skip_blanks();
        match keyword {
            "HELP" => {
                if !had_blank && !c.at_end() {
                    return Err(c.unexpected("after the metric name of `# HELP`"));
                }
                Ok(Some(Record::Help {
                    name,
                    text: unescape_help(c.rest().trim_end()),
                }))
            }
            "TYPE" => {
                let word = c.word();
                let kind = MetricType::from_word(word).ok_or_else(|| {
                    format!(
                        "unknown metric type {:?} for `{name}` (counter, gauge, histogram, summary, untyped, or an OpenMetrics type)",
                        shorten(word)
                    )
                })?;
                c.skip_blanks();
                if !c.at_end() {
                    return Err(c.unexpected("after the metric type"));
                }
                if !self.typed.insert(name.clone()) {
                    return Err(format!("a second `# TYPE` line for `{name}`"));
                }
                self.family = Some((name.clone(), kind));
                Ok(Some(Record::Type { name, kind }))
            }
            _ => Ok(Some(Record::Unit {
                name,
                unit: c.rest().trim_end().to_string(),
            })),
        }
    }

    fn sample(&self, line: &str) -> Result<Sample, String> {
        let mut c = Cursor::new(line);
        let mut metric = None;
        if c.peek() != Some(b'{') {
            metric = Some(c.metric_name()?);
        }
        let mut had_blank = c.skip_blanks();
        let mut labels = Vec::new();
        if c.eat(b'{') {
            read_labels(&mut c, &mut labels, metric.is_none().then_some(&mut metric))?;
            had_blank = c.skip_blanks();
        }
        let metric = metric.ok_or("a label set without a metric name")?;
        if c.at_end() {
            return Err(format!("no value after `{metric}`"));
        }
        if !had_blank {
            return Err(c.unexpected("after the metric name"));
        }
        let value = parse_number(c.word()).ok_or_else(|| {
            format!(
                "the value of `{metric}` is not a number: {:?}",
                shorten(c.last_word())
            )
        })?;
        c.skip_blanks();
        let mut timestamp = None;
        if !c.at_end() && c.peek() != Some(b'#') {
            let ts = c.word();
            timestamp = Some(
                parse_number(ts)
                    .filter(|t| t.is_finite())
                    .ok_or_else(|| format!("the timestamp is not a number: {:?}", shorten(ts)))?,
            );
            c.skip_blanks();
        }
        if c.eat(b'#') {
            read_exemplar(&mut c)?;
        }
        if !c.at_end() {
            return Err(c.unexpected("after the value"));
        }
        let (kind, suffix) = self.kind_of(&metric);
        let labels = Labels(labels);
        check_family_labels(&metric, kind, suffix, &labels)?;
        Ok(Sample {
            metric,
            labels,
            value,
            timestamp,
            kind,
        })
    }

    /// The type of the last `# TYPE`d family if `metric` is one of its samples, and the
    /// sample's suffix in that family.
    fn kind_of(&self, metric: &str) -> (MetricType, &'static str) {
        if let Some((family, kind)) = &self.family {
            if let Some(suffix) = metric.strip_prefix(family.as_str()) {
                if let Some(s) = kind.suffixes().iter().find(|s| **s == suffix) {
                    return (*kind, s);
                }
            }
        }
        (MetricType::Untyped, "")
    }
}

impl Iterator for Reader<'_> {
    type Item = Result<Record, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.rest.is_empty() {
            let (raw, rest) = match memchr::memchr(b'\n', self.rest) {
                Some(i) => (&self.rest[..i], &self.rest[i + 1..]),
                None => (self.rest, &[][..]),
            };
            self.rest = rest;
            self.line += 1;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if raw.iter().all(|b| matches!(b, b' ' | b'\t')) {
                continue;
            }
            if self.eof {
                self.rest = &[];
                return Some(Err(self.error("text after `# EOF`")));
            }
            if raw.len() > MAX_LINE_BYTES {
                return Some(Err(self.error(format!(
                    "the line is {} bytes long (at most {} read)",
                    raw.len(),
                    MAX_LINE_BYTES
                ))));
            }
            let line = match std::str::from_utf8(raw) {
                Ok(l) => l.trim_start_matches([' ', '\t']),
                Err(e) => {
                    return Some(Err(self.error(format!(
                        "not UTF-8: byte 0x{:02x} at column {}",
                        raw[e.valid_up_to()],
                        e.valid_up_to() + 1
                    ))))
                }
            };
            match self.line(line) {
                Ok(None) => continue,
                Ok(Some(record)) => return Some(Ok(record)),
                Err(message) => return Some(Err(self.error(message))),
            }
        }
        None
    }
}

/// The labels after `{` up to and with `}`. `name`, when given, takes a quoted metric
/// name written as the first item (`{"my.metric", a="b"}`).
fn read_labels(
    c: &mut Cursor,
    labels: &mut Vec<(String, String)>,
    mut name: Option<&mut Option<String>>,
) -> Result<(), String> {
    loop {
        c.skip_blanks();
        if c.eat(b'}') {
            return Ok(());
        }
        if c.at_end() {
            return Err("the line ends inside the label set (cut short?)".into());
        }
        let label = if c.peek() == Some(b'"') {
            c.quoted("label name")?
        } else {
            c.label_name()?
        };
        c.skip_blanks();
        if labels.is_empty() && c.peek() != Some(b'=') {
            if let Some(slot) = name.take().filter(|n| n.is_none()) {
                *slot = Some(label);
                if !c.eat(b',') && c.peek() != Some(b'}') {
                    return Err(c.unexpected("after the quoted metric name"));
                }
                continue;
            }
        }
        name = None;
        if !c.eat(b'=') {
            return Err(c.unexpected(&format!("after label name `{label}` (expected `=`)")));
        }
        c.skip_blanks();
        if c.peek() != Some(b'"') {
            return Err(c.unexpected(&format!(
                "as the value of label `{label}` (expected a quoted value)"
            )));
        }
        let value = c.quoted("label value")?;
        if labels.iter().any(|(n, _)| *n == label) {
            return Err(format!("label `{label}` appears twice"));
        }
        labels.push((label, value));
        c.skip_blanks();
        if !c.eat(b',') && c.peek() != Some(b'}') {
            return Err(if c.at_end() {
                "the line ends inside the label set (cut short?)".into()
            } else {
                c.unexpected("between labels (expected `,` or `}`)")
            });
        }
    }
}

/// An OpenMetrics exemplar after the value: ` # {labels} value [timestamp]`.
fn read_exemplar(c: &mut Cursor) -> Result<(), String> {
    c.skip_blanks();
    if !c.eat(b'{') {
        return Err(c.unexpected("after `#` on a sample line (expected an exemplar's `{`)"));
    }
    read_labels(c, &mut Vec::new(), None)?;
    c.skip_blanks();
    parse_number(c.word()).ok_or("the exemplar has no number value")?;
    c.skip_blanks();
    if !c.at_end() {
        parse_number(c.word()).ok_or("the exemplar's timestamp is not a number")?;
        c.skip_blanks();
    }
    Ok(())
}

/// Histogram buckets need a numeric `le`, summary quantiles a `quantile`.
fn check_family_labels(
    metric: &str,
    kind: MetricType,
    suffix: &str,
    labels: &Labels,
) -> Result<(), String> {
    let needed = match (kind, suffix) {
        (MetricType::Histogram | MetricType::GaugeHistogram, "_bucket") => "le",
        (MetricType::Summary, "") => "quantile",
        _ => return Ok(()),
    };
    match labels.get(needed) {
        Some(v) if parse_number(v).is_some() => Ok(()),
        Some(v) => Err(format!(
            "`{metric}` has {needed}={:?}, not a number",
            shorten(v)
        )),
        None => Err(format!("`{metric}` has no `{needed}` label")),
    }
}

/// A float as Prometheus writes it: decimal, exponent, `NaN`, `+Inf`, `-Inf`.
fn parse_number(s: &str) -> Option<f64> {
    // Rust's parser also takes `inf`/`infinity`/`nan` in any case, as Go's does.
    (!s.is_empty()).then(|| s.parse().ok()).flatten()
}

fn unescape_help(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(ch) = chars.next() {
        match (ch, chars.clone().next()) {
            ('\\', Some('\\')) => {
                out.push('\\');
                chars.next();
            }
            ('\\', Some('n')) => {
                out.push('\n');
                chars.next();
            }
            _ => out.push(ch),
        }
    }
    out
}

/// At most 40 characters of `s`, for messages.
fn shorten(s: &str) -> String {
    crate::text::truncate(s, 40)
}

/// A position in one line.
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
    word_start: usize,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Cursor<'a> {
        Cursor {
            s,
            pos: 0,
            word_start: 0,
        }
    }
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }
    fn at_end(&self) -> bool {
        self.pos >= self.s.len()
    }
    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }
    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.pos += usize::from(hit);
        hit
    }
    /// Skips spaces and tabs; true when there were any.
    fn skip_blanks(&mut self) -> bool {
        let start = self.pos;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
        self.pos > start
    }
    /// Up to the next blank or the end.
    fn word(&mut self) -> &'a str {
        self.word_start = self.pos;
        while !matches!(self.peek(), None | Some(b' ' | b'\t')) {
            self.pos += 1;
        }
        &self.s[self.word_start..self.pos]
    }
    fn last_word(&self) -> &'a str {
        &self.s[self.word_start..self.pos]
    }
    fn unexpected(&self, place: &str) -> String {
        match self.rest().chars().next() {
            None => format!("the line ends {place}"),
            Some(ch) => format!(
                "unexpected {:?} {place} (column {})",
                ch,
                self.s[..self.pos].chars().count() + 1
            ),
        }
    }
    fn ident(&mut self, first: fn(u8) -> bool, what: &str) -> Result<String, String> {
        let start = self.pos;
        if !self.peek().is_some_and(first) {
            return Err(self.unexpected(&format!("where a {what} starts")));
        }
        self.pos += 1;
        while self.peek().is_some_and(|b| first(b) || b.is_ascii_digit()) {
            self.pos += 1;
        }
        Ok(self.s[start..self.pos].to_string())
    }
    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`, or a quoted name.
    fn metric_name(&mut self) -> Result<String, String> {
        if self.peek() == Some(b'"') {
            return self.quoted("metric name");
        }
        self.ident(
            |b| b.is_ascii_alphabetic() || b == b'_' || b == b':',
            "metric name",
        )
    }
    /// `[a-zA-Z_][a-zA-Z0-9_]*`.
    fn label_name(&mut self) -> Result<String, String> {
        self.ident(|b| b.is_ascii_alphabetic() || b == b'_', "label name")
    }
    /// A `"..."` string with the escapes `\\`, `\"` and `\n`.
    fn quoted(&mut self, what: &str) -> Result<String, String> {
        let open = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = self.rest();
            let Some(i) = rest.find(['"', '\\']) else {
                return Err(format!(
                    "the {what} opened at column {} is not closed (line cut short?)",
                    self.s[..open].chars().count() + 1
                ));
            };
            out.push_str(&rest[..i]);
            self.pos += i + 1;
            if rest.as_bytes()[i] == b'"' {
                return Ok(out);
            }
            match self.peek() {
                Some(b'\\') => out.push('\\'),
                Some(b'"') => out.push('"'),
                Some(b'n') => out.push('\n'),
                _ => {
                    let seq: String = rest[i..].chars().take(2).collect();
                    return Err(format!("invalid escape {seq:?} in a {what}"));
                }
            }
            self.pos += 1;
        }
    }
}
