//! How far each process of a log got and how it ended (outcome first): an error that the same
//! process got past (it went on loading, or the server served after it) was **survived**; a
//! log whose processes came up and served, and stopped in order or still run, is healthy.
//!
//! The markers are data: rules of kind `serving` (the server serves; a request answered 2xx, a
//! throughput line with work done), `progress` (loading goes on: weights loaded, KV cache
//! sized, graphs captured, per engine), `shutdown` (an orderly stop) and `startup` (a
//! (re)start) in `rules.toml`. The scanner notes them here ([`Lifecycle`]); [`outcomes`] reads
//! them with the findings.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use serde::{Deserialize, Serialize};

use super::rules::{RuleKind, RuleSet};
use super::scan::{is_worker_label, strip_pid, RawFinding};
use super::Class;

/// Distinct process labels whose loading progress is kept (a hostile log cannot grow it).
const MAX_LABELS: usize = 1024;
/// Crashed runs kept per input (a hostile crash loop cannot grow it).
const MAX_RUNS: usize = 256;
/// Outcomes reported per input (the processes with a finding first).
const MAX_OUTCOMES: usize = 16;

/// What the scanner noted of one input's processes.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Lifecycle {
    /// The last (re)start marker.
    pub started: Option<u64>,
    /// The first serving marker since the last start.
    pub first_served: Option<u64>,
    /// The last line that showed the whole server working: ready to serve, tokens generated.
    pub last_progress: u64,
    /// The last line per process label (pid stripped; `""`: no label) that showed that
    /// process going on: loading progress, a request it answered 2xx.
    pub went_on: BTreeMap<String, u64>,
    /// The last loading progress of any process: the processes that are not workers (an API
    /// server, a launcher, an engine core) start the others and wait for them, so the others
    /// loading on shows they got past their own earlier errors.
    pub last_loading: u64,
    /// The first orderly stop since the last start.
    pub stopped: Option<u64>,
    /// The signal an orderly stop since the last start names (`SIGTERM`, `SIGINT`).
    pub stop_signal: Option<&'static str>,
    /// Requests answered 2xx since the last start, per process label (as `went_on`).
    pub requests: BTreeMap<String, u64>,
    /// The label of the process that logged the last serving line read (pid stripped): the
    /// access lines passed over unread once the server serves are its.
    pub serving_label: String,
    /// Requests answered 2xx in the whole log, by any process, across restarts.
    pub answers: u64,
    /// The last line of progress (loading, serving) since the last start.
    pub run_progress: u64,
    /// A process of this run logged that it ended (an exit, an abort) after its last progress.
    pub run_crashed: bool,
    /// The runs that crashed and were started again: (first line, the restart's line, their
    /// last progress). An error of such a run is survived only where that run itself went on
    /// after it; the runs after it do not excuse it (a crash loop that came up in the end).
    pub crashed_runs: Vec<(u64, u64, u64)>,
    /// Where the server reported a process it starts per model load dead (`child` in
    /// `rules.toml`: ollama's runner), with the requests answered by then.
    pub child_ends: Vec<(u64, u64)>,
}

/// What a serving or progress line shows ([`progress_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Nothing about work done (a request received, an idle throughput line, a control call).
    None,
    /// The process that logged it answered a request.
    Request,
    /// The process that logged it went on loading.
    Loading,
    /// The whole server works (ready to serve, tokens generated).
    All,
}

impl Lifecycle {
    /// Whether the log shows a serving engine at work: a start, loading or serving marker.
    pub fn engine_ran(&self) -> bool {
        self.started.is_some()
            || self.first_served.is_some()
            || self.last_loading > 0
            || !self.went_on.is_empty()
    }

    /// A serving marker at `line`.
    pub fn served(&mut self, rank: Option<&str>, line: u64, progress: Progress) {
        self.first_served.get_or_insert(line);
        let label = strip_pid(rank.unwrap_or(""));
        if self.serving_label != label {
            self.serving_label = label.to_string();
        }
        self.went_on(rank, line, progress);
    }

    /// The process labelled `rank` (or the whole server) went on at `line`.
    pub fn went_on(&mut self, rank: Option<&str>, line: u64, progress: Progress) {
        if progress != Progress::None {
            self.run_progress = self.run_progress.max(line);
            self.run_crashed = false;
        }
        match progress {
            Progress::None => {}
            Progress::All => self.last_progress = self.last_progress.max(line),
            Progress::Request | Progress::Loading => {
                if progress == Progress::Loading {
                    self.last_loading = self.last_loading.max(line);
                }
                let label = strip_pid(rank.unwrap_or(""));
                if progress == Progress::Request {
                    self.count_request(label);
                }
                if let Some(l) = self.went_on.get_mut(label) {
                    *l = (*l).max(line);
                } else if self.went_on.len() < MAX_LABELS {
                    self.went_on.insert(label.to_string(), line);
                }
            }
        }
    }

    /// An access line of a request answered, passed over unread (its process is the one that
    /// logged the last serving line read).
    pub fn answered_unread(&mut self) {
        let label = std::mem::take(&mut self.serving_label);
        self.count_request(&label);
        self.serving_label = label;
    }

    /// A request answered by the process labelled `label`.
    fn count_request(&mut self, label: &str) {
        self.answers += 1;
        if let Some(n) = self.requests.get_mut(label) {
            *n += 1;
        } else if self.requests.len() < MAX_LABELS {
            self.requests.insert(label.to_string(), 1);
        }
    }

    /// A process logged that it ended (an exit line, an abort) at this point of the run.
    pub fn crashed(&mut self) {
        self.run_crashed = true;
    }

    /// The server reported at `line` that a process it starts per model load died.
    pub fn child_ended(&mut self, line: u64) {
        if self.child_ends.len() < MAX_RUNS {
            self.child_ends.push((line, self.answers));
        }
    }

    /// Whether the server reported a process it starts per model load dead at or after `line`
    /// with no request answered in between (`answers` were answered before `line`): the
    /// runner's own error, then the server's word that the runner died.
    fn child_died_after(&self, line: u64, answers: u64) -> bool {
        self.child_ends
            .iter()
            .any(|&(end, at)| end >= line && at == answers)
    }

    /// The stop marker since the last start was a failed process cleaning up: no orderly stop.
    pub fn stop_undone(&mut self) {
        self.stopped = None;
        self.stop_signal = None;
    }

    /// An orderly stop at `line`, its line saying `msg`; only the first since the last start
    /// counts, and the first signal a stop line names.
    pub fn stopped(&mut self, line: u64, msg: &str) {
        self.stopped.get_or_insert(line);
        if self.stop_signal.is_none() {
            self.stop_signal = signal_named(msg);
        }
    }

    /// A (re)start: serving and stopping describe the run before it. Progress stays: an error
    /// of the run before, followed by a run that serves, was got past, unless that run crashed
    /// (it logged its end and had no orderly stop): it is kept in `crashed_runs`.
    pub fn started(&mut self, line: u64) {
        if let Some(first) = self.started {
            if self.run_crashed && self.stopped.is_none() && self.crashed_runs.len() < MAX_RUNS {
                self.crashed_runs.push((first, line, self.run_progress));
            }
        }
        self.run_crashed = false;
        self.run_progress = 0;
        self.started = Some(line);
        self.first_served = None;
        self.stopped = None;
        self.stop_signal = None;
        self.requests.clear();
    }

    /// The run that holds `line`, where that run crashed and was started again: (its first
    /// line, the restart's line, its last progress).
    pub fn crashed_run_of(&self, line: u64) -> Option<(u64, u64, u64)> {
        self.crashed_runs
            .iter()
            .copied()
            .find(|(first, restart, _)| (*first..*restart).contains(&line))
    }

    /// Whether the process labelled `rank` went on after `line`: the whole server worked
    /// later, that process went on, (a process that is not a worker) any process went on
    /// loading, or (a line no process labelled) the server served after it. A line of a run
    /// that crashed: only that run's own progress after it counts.
    pub fn went_on_after(&self, rank: Option<&str>, line: u64) -> bool {
        if let Some((_, _, progress)) = self.crashed_run_of(line) {
            return progress > line;
        }
        let label = strip_pid(rank.unwrap_or(""));
        // A line no process labelled (the launching shell's, a wrapper's) before the server
        // first served, and a process that really went on (answered, loaded) after it: the
        // launch went on past it. Not after serving began: a worker's raw traceback then is
        // not excused by its API server's answers.
        let launch_went_on = rank.is_none()
            && self.first_served.is_some_and(|s| s > line)
            && self.went_on.values().any(|&l| l > line);
        launch_went_on
            || self.last_progress > line
            || self.went_on.get(label).is_some_and(|&l| l > line)
            || (!is_worker_label(label) && self.last_loading > line)
    }
}

/// The signal a stop line names: `signal=SIGTERM`, `Received SIGTERM`, `SIGINT`, Python's
/// `KeyboardInterrupt`, `signal 15`.
fn signal_named(msg: &str) -> Option<&'static str> {
    const SIGNALS: [(&str, &str); 5] = [
        ("SIGTERM", "SIGTERM"),
        ("signal 15", "SIGTERM"),
        ("SIGINT", "SIGINT"),
        ("KeyboardInterrupt", "SIGINT"),
        ("SIGQUIT", "SIGQUIT"),
    ];
    SIGNALS
        .iter()
        .find(|(word, _)| msg.contains(word))
        .map(|&(_, name)| name)
}

/// Control calls an API server answers without its engine doing work (waking a sleeping
/// engine, metrics, the model list, health checks and server facts, llama.cpp's web page and
/// slots).
const CONTROL_PATHS: [&str; 20] = [
    "/sleep",
    "/wake_up",
    "/is_sleeping",
    "/metrics",
    "/v1/models",
    "/ping",
    "/version",
    "/reset_prefix_cache",
    "/health",
    "/health_generate",
    "/server_info",
    "/get_server_info",
    "/get_model_info",
    "/model_info",
    "/flush_cache",
    "/load",
    "/",
    "/slots",
    "/props",
    "/models",
];

/// Whether ollama's access line (or its request field) is a poll of its lists or a `HEAD`.
fn is_ollama_poll(gin: &[u8]) -> bool {
    [
        &b"\"/api/tags\""[..],
        b"\"/api/version\"",
        b"\"/api/ps\"",
        b"HEAD ",
    ]
    .iter()
    .any(|p| memchr::memmem::find(gin, p).is_some())
}

/// Whether an access line's request (`GET /metrics HTTP/1.1`) is a control call.
pub fn is_control_call(request: &[u8]) -> bool {
    is_control_path(request.split(|&c| c == b' ').nth(1).unwrap_or(b""))
}

/// Whether a request's path (`/metrics?x=1`) is a control call's.
fn is_control_path(path: &[u8]) -> bool {
    let path = path.split(|&c| c == b'?').next().unwrap_or(b"");
    CONTROL_PATHS.iter().any(|p| p.as_bytes() == path)
}

/// What a serving line shows: a request answered 2xx is progress of the process that logged
/// it (an engine that died does not stop its API server answering); vLLM's periodic
/// throughput line with both rates at zero, SGLang's with no tokens, a request received (not
/// yet answered) and control calls show nothing; the rest (ready to serve, tokens generated)
/// shows the whole server working.
pub fn progress_of(msg: &str) -> Progress {
    if msg.contains("Received request") || msg.contains("Added request") {
        return Progress::None;
    }
    // vLLM's line averages the last interval: with no request running at its end it reports
    // work done before, not that the engine still works (an engine that died within the
    // interval still shows its tokens).
    let idle = (msg.contains("Avg prompt throughput: 0.0 tokens/s")
        && msg.contains("Avg generation throughput: 0.0 tokens/s"))
        || (msg.contains("Avg generation throughput: ") && msg.contains("Running: 0 reqs"))
        || msg.contains("gen throughput (token/s): 0.00,");
    if idle {
        return Progress::None;
    }
    match answered(msg.as_bytes()) {
        Some(true) => Progress::Request,
        Some(false) => Progress::None,
        None => Progress::All,
    }
}

/// What an access line says, read one way for the scanner's fast path and [`progress_of`]:
/// `Some(true)` a request the process answered 2xx that is no control call (nor a poll of
/// ollama's lists) and no request it made itself; `Some(false)` another access line; `None` no
/// access line. Four formats: uvicorn's and most servers' quoted request
/// (`127.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK`), llama.cpp's
/// `log_server_r: request: POST /completion 127.0.0.1 200`, its server's older one (2024 and
/// the forks that kept it: `log_server_request] request | ... status=200 method="POST"
/// path="/completion"`), ollama's
/// `[GIN] 2026/05/01 - 00:15:05 | 200 | 1.8ms | 127.0.0.1 | POST "/api/chat"`.
pub fn answered(line: &[u8]) -> Option<bool> {
    static GIN: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"[GIN] "));
    static LLAMACPP: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"log_server_r: "));
    static LLAMACPP_OLD: LazyLock<Finder<'static>> =
        LazyLock::new(|| Finder::new(b"log_server_request] request"));
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // The quoted form first, the most common: the others never put a status after a quote.
    if let Some(answer) = quoted_answered(line) {
        return Some(answer);
    }
    if let Some(g) = GIN.find(line) {
        return Some(gin_answered(&line[g..]));
    }
    if let Some(r) = LLAMACPP_OLD.find(line) {
        return Some(llamacpp_old_answered(&line[r..]));
    }
    LLAMACPP.find(line).map(|r| llamacpp_answered(&line[r..]))
}

/// llama.cpp's older server: `log_server_request] request | tid=".." timestamp=..
/// remote_addr=".." remote_port=.. status=200 method="POST" path="/completion" params={}`.
fn llamacpp_old_answered(rest: &[u8]) -> bool {
    let field = |key: &[u8]| {
        let at = memchr::memmem::find(rest, key)? + key.len();
        let val = &rest[at..];
        let end = val
            .iter()
            .position(|&c| c == b' ' || c == b'"')
            .unwrap_or(val.len());
        Some(&val[..end])
    };
    let (Some(status), Some(path)) = (field(b" status="), field(b" path=\"")) else {
        return false;
    };
    is_2xx(status) && !is_control_path(path)
}

/// ollama's `[GIN] ... | 200 | 1.8ms | 127.0.0.1 | POST "/api/chat"`: the status is the second
/// field, the request the last.
fn gin_answered(gin: &[u8]) -> bool {
    let mut fields = gin.split(|&c| c == b'|');
    let status = fields.nth(1).unwrap_or(b"").trim_ascii();
    let request = fields.next_back().unwrap_or(b"");
    is_2xx(status) && !is_ollama_poll(request)
}

/// llama.cpp's `log_server_r: request: POST /completion 127.0.0.1 200`: the request follows
/// `request: `, the status ends the line.
fn llamacpp_answered(rest: &[u8]) -> bool {
    let Some(r) = memchr::memmem::find(rest, b"request: ") else {
        return false;
    };
    let request = &rest[r + b"request: ".len()..];
    let status = request.rsplit(|&c| c == b' ').next().unwrap_or(b"");
    is_2xx(status) && !is_control_call(request)
}

/// A quoted request and the status after its closing quote (`"GET /x HTTP/1.1" 200`); `None`
/// when the line holds none.
fn quoted_answered(line: &[u8]) -> Option<bool> {
    let close = memchr::memchr_iter(b'"', line).find(|&q| is_status(&line[q + 1..]))?;
    let open = memchr::memrchr(b'"', &line[..close])?;
    let status = &line[close + 2..close + 5];
    let before = line[..open].trim_ascii_end();
    Some(is_2xx(status) && !is_control_call(&line[open + 1..close]) && !names_url_last(before))
}

/// Whether `rest` (after a closing quote) starts with a status: ` 200` then a space or the end.
fn is_status(rest: &[u8]) -> bool {
    rest.len() >= 4
        && rest[0] == b' '
        && rest[1..4].iter().all(u8::is_ascii_digit)
        && rest.get(4).is_none_or(|&c| c == b' ')
}

fn is_2xx(status: &[u8]) -> bool {
    status.len() == 3 && status[0] == b'2' && status.iter().all(u8::is_ascii_digit)
}

/// Whether a loading line states that the step failed (`llama_kv_cache_init: failed to
/// allocate buffer`, `load_tensors: error loading model`, `llama_new_context_with_model: model
/// cannot be NULL`): it is no progress.
pub fn states_failure(msg: &str) -> bool {
    [
        "cannot",
        "failed",
        "Failed",
        "FAILED",
        "error",
        "Error",
        "ERROR",
        "unable to",
    ]
    .iter()
    .any(|w| msg.contains(w))
}

/// Whether a line with an HTTP status logs a request the process made, not one it answered:
/// an HTTP client's log names the server's URL before the request line (urllib3's
/// `https://huggingface.co:443 "HEAD /config.json HTTP/1.1" 200 0`), where a server's access
/// log names the client's address (`127.0.0.1:40000 - "POST /generate HTTP/1.1" 200 OK`).
pub fn is_outgoing_request(msg: &str) -> bool {
    msg.find(" \"")
        .is_some_and(|q| names_url_last(&msg.as_bytes()[..q]))
}

/// Whether the last word of `before` (the words before a request's opening quote) is a URL.
pub fn names_url_last(before: &[u8]) -> bool {
    let url = before.rsplit(|&c| c == b' ').next().unwrap_or(before);
    url.starts_with(b"https://") || url.starts_with(b"http://")
}

/// How far a process got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reached {
    /// Its lines were seen; no loading progress, no serving.
    Started,
    /// It logged loading progress.
    Loading,
    /// The server served.
    Serving,
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// A signal or a shutdown it logged.
    Orderly,
    /// An error it did not get past (an abort, an unhandled exception, a dead engine).
    Crash,
    /// The OOM killer or a SIGKILL.
    Killed,
    /// Still running when the log ends.
    Running,
}

/// One process of one input: how far it got and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The input it came from (`-` for stdin).
    pub file: String,
    /// The process label (`EngineCore_DP0`, `Worker_TP1`, `[rank3]`), or `server` for the
    /// lines without one.
    pub process: String,
    /// How far it got.
    pub reached: Reached,
    /// Where it reached that (the first serving line, the last loading line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reached_line: Option<u64>,
    /// How it ended.
    pub ended: Ended,
    /// Where it ended (the first error it did not get past, the stop); none while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// Requests it answered 2xx (access lines seen) in its last run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests: u64,
    /// The signal that stopped it in order, where its stop line names one (`SIGTERM`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// Where the log starts it again, for a run that crashed and was restarted (the outcome
    /// after it is the last run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<u64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Whether a finding is a failure that ends a process: a cause or a consequence outside an
/// orderly stop.
pub fn ends_process(f: &RawFinding) -> bool {
    match f.kind {
        RuleKind::Cause => true,
        RuleKind::Consequence => !f.during_shutdown,
        _ => false,
    }
}

/// Whether the failure is a kill (the OOM killer, SIGKILL, exit 137) rather than a crash.
fn is_kill(rules: &RuleSet, f: &RawFinding) -> bool {
    let id = rules.rules.get(f.rule).map_or("", |r| r.id.as_str());
    id.contains("killer") || f.text.contains("SIGKILL") || f.text.contains("exit code 137")
}

/// Whether the finding's process went on after it (the last occurrence, in a crash loop).
/// A tool-call parser failure is never survived: the server goes on, but it answers the
/// request (2xx) without the tool call, so the agent interface is what failed.
/// A line that ends its process (an abort: `fatal` in `rules.toml`) is never survived either.
/// An exception raised while the HTTP server handled one request failed that request: the
/// server itself went on (a dead engine fails every request, and says so on its own lines).
/// The failure of a process the server starts per model load (`child` in `rules.toml`) is
/// survived only when the server answered a request after it; so is an error logged before the
/// server reported such a process dead with no request answered in between (the runner's own
/// error: the next runner loading does not show that one got past it). An exception raised in a script
/// of its own after the server served, with the server stopped in order after it, was a client's
/// or a harness's that shares the log (a benchmark script, then its job stopping the server).
pub fn survived(rules: &RuleSet, life: &Lifecycle, f: &RawFinding) -> bool {
    let rule = rules.rules.get(f.rule);
    if rule.is_some_and(|r| r.child) || life.child_died_after(f.last_line, f.answers_before) {
        return life.answers > f.answers_before;
    }
    let client = f.script && f.served && life.stopped.is_some_and(|s| s > f.last_line);
    !rule.is_some_and(|r| r.fatal)
        && f.class != Class::ToolParser
        && (f.request || client || life.went_on_after(f.rank.as_deref(), f.last_line))
}

/// The outcome of each process of one input, the processes with a failure first.
pub fn outcomes(
    rules: &RuleSet,
    file: &str,
    life: &Lifecycle,
    findings: &[RawFinding],
) -> Vec<Outcome> {
    let mut first_fail: BTreeMap<String, &RawFinding> = BTreeMap::new();
    for f in findings
        .iter()
        .filter(|f| ends_process(f) && !survived(rules, life, f))
    {
        let label = strip_pid(f.rank.as_deref().unwrap_or("")).to_string();
        first_fail.entry(label).or_insert(f);
    }
    let mut labels: Vec<String> = first_fail.keys().cloned().collect();
    // Then the processes that answered requests (the API servers), then the others.
    for label in life.requests.keys().chain(life.went_on.keys()) {
        if !first_fail.contains_key(label) && !labels.contains(label) {
            labels.push(label.clone());
        }
    }
    if labels.is_empty() {
        labels.push(String::new());
    }
    labels.truncate(MAX_OUTCOMES);
    labels
        .into_iter()
        .flat_map(|label| {
            let fail = first_fail.get(&label).copied();
            match fail.and_then(|f| life.crashed_run_of(f.line).map(|run| (f, run))) {
                // A run that crashed and was started again: its outcome, then the last run's.
                Some((f, run)) => vec![
                    crashed_run(rules, file, &label, f, run),
                    outcome(life, file, &label, None),
                ],
                None => vec![outcome(
                    life,
                    file,
                    &label,
                    fail.map(|f| (f, is_kill(rules, f))),
                )],
            }
        })
        .take(MAX_OUTCOMES)
        .collect()
}

/// The outcome of the process labelled `label` in the last run, ended by `fail` (and
/// whether that was a kill) where it failed.
fn outcome(
    life: &Lifecycle,
    file: &str,
    label: &str,
    fail: Option<(&RawFinding, bool)>,
) -> Outcome {
    let (reached, reached_line) = match (life.first_served, life.went_on.get(label)) {
        (Some(s), _) => (Reached::Serving, Some(s)),
        (None, Some(&l)) => (Reached::Loading, Some(l)),
        (None, None) => (Reached::Started, life.started),
    };
    let (ended, line) = match fail {
        Some((f, true)) => (Ended::Killed, Some(f.line)),
        Some((f, false)) => (Ended::Crash, Some(f.line)),
        None => match life.stopped {
            Some(s) => (Ended::Orderly, Some(s)),
            None => (Ended::Running, None),
        },
    };
    Outcome {
        file: file.to_string(),
        process: process_name(label),
        reached,
        reached_line,
        ended,
        line,
        requests: life.requests.get(label).copied().unwrap_or(0),
        stopped_by: match ended {
            Ended::Orderly => life.stop_signal.map(str::to_string),
            _ => None,
        },
        restarted_at: None,
    }
}

/// The outcome of a run that crashed at `f` and was started again (`run`: its first line, the
/// restart's line, its last progress).
fn crashed_run(
    rules: &RuleSet,
    file: &str,
    label: &str,
    f: &RawFinding,
    (first, restart, progress): (u64, u64, u64),
) -> Outcome {
    let (reached, reached_line) = if progress > 0 {
        (Reached::Loading, progress)
    } else {
        (Reached::Started, first)
    };
    Outcome {
        file: file.to_string(),
        process: process_name(label),
        reached,
        reached_line: Some(reached_line),
        ended: if is_kill(rules, f) {
            Ended::Killed
        } else {
            Ended::Crash
        },
        line: Some(f.line),
        requests: 0,
        stopped_by: None,
        restarted_at: Some(restart),
    }
}

/// A process label as the outcome names it: `server` for the lines without one.
fn process_name(label: &str) -> String {
    if label.is_empty() {
        "server".to_string()
    } else {
        label.to_string()
    }
}

/// The outcome in words: "EngineCore_DP0: loading (line 120), crashed at line 182".
pub fn describe(o: &Outcome) -> String {
    let reached = match (o.reached, o.reached_line) {
        (Reached::Serving, Some(l)) => format!("serving since line {l}"),
        (Reached::Loading, Some(l)) => format!("loading (last progress at line {l})"),
        (Reached::Started, Some(l)) => format!("started at line {l}, never loaded or served"),
        (r, _) => format!("{r:?}").to_lowercase(),
    };
    let requests = match o.requests {
        0 => String::new(),
        1 => ", 1 request OK".to_string(),
        n => format!(", {n} requests OK"),
    };
    let ended = match (o.ended, o.line) {
        (Ended::Crash, Some(l)) => format!("crashed at line {l}"),
        (Ended::Killed, Some(l)) => format!("killed at line {l}"),
        (Ended::Orderly, Some(l)) => match &o.stopped_by {
            Some(sig) => format!("stopped by {sig} at line {l}"),
            None => format!("stopped in order at line {l}"),
        },
        (Ended::Running, _) => "still running at the end of the log".to_string(),
        (e, _) => format!("{e:?}").to_lowercase(),
    };
    let restarted = match o.restarted_at {
        Some(l) => format!(", restarted at line {l}"),
        None => String::new(),
    };
    format!(
        "{}: {}{}, {}{}",
        o.process, reached, requests, ended, restarted
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_a_process_made_are_not_requests_it_served() {
        assert!(is_outgoing_request(
            "https://huggingface.co:443 \"HEAD /google/gemma-3-12b-it/resolve/main/config.json HTTP/1.1\" 200 0"
        ));
        assert!(is_outgoing_request(
            "http://10.0.0.2:8000 \"GET /health HTTP/1.1\" 200 None"
        ));
        assert!(!is_outgoing_request(
            "INFO:     127.0.0.1:40000 - \"POST /generate HTTP/1.1\" 200 OK"
        ));
        assert!(!is_outgoing_request(
            "10.1.2.3:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200"
        ));
    }

    #[test]
    fn a_process_going_on_counts_for_itself_and_the_server_working_for_all() {
        let mut life = Lifecycle::default();
        life.went_on(Some("Worker_TP0 pid=2"), 50, Progress::Loading);
        assert!(life.went_on_after(Some("Worker_TP0 pid=7"), 40));
        // Another worker's loading says nothing of this one; the parents wait for them.
        assert!(!life.went_on_after(Some("Worker_TP1 pid=3"), 40));
        assert!(life.went_on_after(None, 40));
        assert!(life.went_on_after(Some("EngineCore_DP0 pid=1"), 40));
        assert!(!life.went_on_after(Some("Worker_TP0 pid=2"), 50));
        // A request answered is progress of the process that answered it only.
        life.served(Some("APIServer pid=1"), 80, Progress::Request);
        assert!(life.went_on_after(Some("APIServer pid=1"), 60));
        assert!(!life.went_on_after(Some("EngineCore_DP0 pid=1"), 60));
        assert!(!life.went_on_after(Some("Worker_TP1 pid=3"), 60));
        life.served(Some("APIServer pid=1"), 90, Progress::All);
        assert!(life.went_on_after(Some("Worker_TP1 pid=3"), 60));
        assert!(!life.went_on_after(None, 95));
    }

    #[test]
    fn what_a_serving_line_shows() {
        assert_eq!(progress_of("Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 3 reqs"), Progress::None);
        assert_eq!(progress_of("Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 41.2 tokens/s, Running: 3 reqs"), Progress::All);
        assert_eq!(
            progress_of("Received request chatcmpl-1: prompt: 'x'"),
            Progress::None
        );
        assert_eq!(
            progress_of("INFO:     10.0.0.1:5 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK"),
            Progress::Request
        );
        assert_eq!(
            progress_of("INFO:     10.0.0.1:5 - \"POST /sleep HTTP/1.1\" 200 OK"),
            Progress::None
        );
        assert_eq!(
            progress_of("INFO:     10.0.0.1:5 - \"GET /metrics HTTP/1.1\" 200 OK"),
            Progress::None
        );
        assert_eq!(
            progress_of("srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200"),
            Progress::Request
        );
        assert_eq!(progress_of("Application startup complete."), Progress::All);
        let mut life = Lifecycle::default();
        life.served(None, 10, Progress::None);
        assert_eq!(life.first_served, Some(10));
        assert!(!life.went_on_after(None, 5));
    }

    #[test]
    fn one_reader_for_each_access_line_format() {
        let cases: &[(&str, Option<bool>)] = &[
            ("INFO:     10.0.0.1:5 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK", Some(true)),
            ("INFO:     10.0.0.1:5 - \"POST /v1/chat/completions HTTP/1.1\" 204", Some(true)),
            ("INFO:     10.0.0.1:5 - \"POST /v1/chat/completions HTTP/1.1\" 500 Internal Server Error", Some(false)),
            ("INFO:     10.0.0.1:5 - \"GET /health?full=1 HTTP/1.1\" 200 OK\r", Some(false)),
            ("DEBUG https://huggingface.co:443 \"HEAD /Qwen/resolve/main/config.json HTTP/1.1\" 200 0", Some(false)),
            ("srv  log_server_r: done request: POST /v1/chat/completions 127.0.0.1 200", Some(true)),
            ("srv  log_server_r: request: POST /completion 127.0.0.1 500", Some(false)),
            ("srv  log_server_r: request: GET /slots 127.0.0.1 200", Some(false)),
            ("INFO [      log_server_request] request | tid=\"1\" timestamp=1 remote_addr=\"10.0.0.8\" remote_port=5 status=200 method=\"POST\" path=\"/v1/chat/completions\" params={}", Some(true)),
            ("INFO [      log_server_request] request | tid=\"1\" timestamp=1 remote_addr=\"10.0.0.8\" remote_port=5 status=500 method=\"POST\" path=\"/completion\" params={}", Some(false)),
            ("INFO [      log_server_request] request | tid=\"1\" timestamp=1 remote_addr=\"10.0.0.8\" remote_port=5 status=200 method=\"GET\" path=\"/health\" params={}", Some(false)),
            ("[GIN] 2026/05/01 - 00:15:05 | 200 |  1.8ms | 127.0.0.1 | POST     \"/api/chat\"", Some(true)),
            ("[GIN] 2026/05/01 - 00:15:05 | 500 |  2.0s | 127.0.0.1 | POST     \"/api/generate\"", Some(false)),
            ("[GIN] 2026/05/01 - 00:15:05 | 200 |  38µs | 127.0.0.1 | GET      \"/api/tags\"", Some(false)),
            ("INFO 12-01 10:00:00 [loader.py:1] read \"config.json\" 2 times", None),
            ("INFO 12-01 10:00:00 [core.py:1] Avg prompt throughput: 12.0 tokens/s", None),
        ];
        for (line, want) in cases {
            assert_eq!(answered(line.as_bytes()), *want, "{line}");
        }
    }

    #[test]
    fn labels_are_bounded() {
        let mut life = Lifecycle::default();
        for i in 0..(MAX_LABELS as u64 + 50) {
            life.went_on(
                Some(&format!("Worker_TP{i} pid=1")),
                i + 1,
                Progress::Loading,
            );
        }
        assert_eq!(life.went_on.len(), MAX_LABELS);
    }

    /// A run that logged its end and was started again keeps its errors: only its own
    /// progress after an error excuses it, not the runs after it. A crash loop cannot grow the
    /// list past its bound.
    #[test]
    fn a_crashed_runs_errors_are_excused_only_by_its_own_progress() {
        let mut life = Lifecycle::default();
        life.started(1);
        life.went_on(None, 5, Progress::Loading);
        life.crashed();
        life.started(10);
        life.served(None, 20, Progress::All);
        assert!(
            life.went_on_after(None, 3),
            "its own loading went on after line 3"
        );
        assert!(
            !life.went_on_after(None, 6),
            "only a later run went on after line 6"
        );
        assert!(
            life.went_on_after(None, 12),
            "the last run served after line 12"
        );
        // A run stopped in order is no crash, whatever it logged.
        life.crashed();
        life.stopped(30, "Shutting down");
        life.started(40);
        assert_eq!(life.crashed_runs, vec![(1, 10, 5)]);
        for i in 0..(MAX_RUNS as u64 + 50) {
            life.crashed();
            life.started(100 + i);
        }
        assert_eq!(life.crashed_runs.len(), MAX_RUNS);
    }
}
