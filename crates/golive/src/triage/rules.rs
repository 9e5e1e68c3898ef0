//! Triage rules as data: the embedded default TOML plus user files, compiled into one
//! literal prefilter (`prefilter`) and per-rule regexes that run only on candidate
//! lines.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::{bail, Context};
use regex::Regex;
use serde::Deserialize;

use super::prefilter::{Needles, Pattern, Prefilter};
use super::Class;

/// The built-in rule file.
pub const DEFAULT_RULES: &str = include_str!("rules.toml");

/// What a matching line means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// The line states a root cause.
    Cause,
    /// The line only follows from a cause: never primary when a cause exists.
    Consequence,
    /// Refines the next step of a primary of the same class; never primary itself.
    Hint,
    /// The server has served (separates `oom_startup` from `oom_runtime`).
    Serving,
    /// Loading goes on (weights loaded, KV cache sized, graphs captured): progress of the
    /// process that logged it, so an error before it was survived.
    Progress,
    /// An orderly shutdown began: later teardown tracebacks are not failures.
    Shutdown,
    /// The server (re)starts: the phase goes back to startup.
    Startup,
    /// Records a fact about the deployment (a CUDA 13 image, a ROCm host) that other rules ask for.
    Fact,
    /// A known harmless error (e.g. a client's invalid request): never reported.
    Benign,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleDef {
    id: String,
    kind: RuleKind,
    #[serde(default)]
    class: Option<Class>,
    #[serde(default)]
    patterns: Vec<String>,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    frames: Option<String>,
    #[serde(default)]
    phase: bool,
    #[serde(default)]
    alone: bool,
    #[serde(default)]
    on_warning: bool,
    #[serde(default)]
    on_info: bool,
    #[serde(default)]
    fatal: bool,
    #[serde(default)]
    child: bool,
    #[serde(default)]
    announces: bool,
    #[serde(default)]
    backtrace_frame: bool,
    #[serde(default)]
    failed_exit: bool,
    #[serde(default)]
    before_serving: bool,
    #[serde(default)]
    chain: bool,
    #[serde(default)]
    quiets_chain: bool,
    #[serde(default)]
    fact: Option<String>,
    #[serde(default)]
    when: Option<String>,
    #[serde(default)]
    unless: Option<String>,
    #[serde(default)]
    next_step_when: Option<String>,
    #[serde(default)]
    why_when: Option<String>,
    #[serde(default)]
    class_when: Option<Class>,
    #[serde(default)]
    generic: bool,
    #[serde(default)]
    weak: bool,
    #[serde(default)]
    catch_all: bool,
    #[serde(default)]
    code_bug: bool,
    #[serde(default)]
    code_only: bool,
    #[serde(default)]
    not_transport: bool,
    #[serde(default)]
    startup_refusal: bool,
    #[serde(default)]
    request: bool,
    #[serde(default)]
    next_step: String,
    #[serde(default)]
    why: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[serde(default)]
    rule: Vec<RuleDef>,
    #[serde(default)]
    frame: Vec<FrameDef>,
    #[serde(default)]
    tail: Vec<TailDef>,
}

/// One last-resort entry for a log that ends before its server served, with no orderly stop
/// and no cause found: the first line after the last progress that this regex matches is
/// what the log last says went wrong (see [`RuleSet::tail_rules`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TailDef {
    id: String,
    class: Class,
    /// Regex over the line's message (without its logger prefix).
    regex: String,
    why: String,
    next_step: String,
    /// For a quote of a log (no server starting, loading or serving in it, all of it in the
    /// lines looked at) instead: its first line this regex matches.
    #[serde(default)]
    quote: bool,
    /// Only lines logged at ERROR or above count (a line with no level may be an engine's
    /// routine line: SGLang prints its info and warning lines without one).
    #[serde(default)]
    error_level: bool,
}

/// One entry of the frame-path -> class map: a traceback whose innermost matching frame is
/// in such a file names the class when the exception's message alone does not.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrameDef {
    id: String,
    class: Class,
    /// Regex over one frame line (`File "path", line N, in func`).
    path: String,
    /// Optional regex over a bare ERROR line whose logger's file says nothing: the component
    /// the message names (`NIXL transfer failure`).
    #[serde(default)]
    words: Option<String>,
    /// The engine's own code: names the class only when no other entry matches a frame and
    /// no rule but a catch-all explains the exception.
    #[serde(default)]
    fallback: bool,
    why: String,
    next_step: String,
}

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Unique name, shown as `primary.rule`.
    pub id: String,
    /// What a matching line means.
    pub kind: RuleKind,
    /// The failure class of a cause, consequence or hint.
    pub class: Class,
    /// Must also match the line (see [`Rule::regex_matches`]); `None`: the literal patterns alone
    /// decide.
    pub regex: Option<Regex>,
    /// Over the traceback's frames: the rule then applies only to the exception line that ends that
    /// traceback.
    pub frames: Option<Regex>,
    /// An out-of-memory whose class (startup or runtime) the serving phase decides.
    pub phase: bool,
    /// Consequences: reported (class `unknown`) when no cause is found at all.
    pub alone: bool,
    /// Also a cause on WARNING-level logger lines.
    pub on_warning: bool,
    /// Also a cause on INFO/DEBUG lines: the message states a state the server cannot run in,
    /// whatever level it is logged at (vLLM logs "No platform detected" at INFO).
    pub on_info: bool,
    /// The line ends its process (an abort, a segfault): never survived, whatever follows
    /// (the server's own last lines, a flushed request log).
    pub fatal: bool,
    /// The failed process is one the server starts for one model load (ollama's runner): only
    /// a request answered after it shows the server got past it, not the next runner loading.
    pub child: bool,
    /// The line announces the traceback logged right after it ("Error in inspecting model
    /// architecture"): the exception that ends it, when a cause of the same class, is the
    /// line that names the cause.
    pub announces: bool,
    /// The line is a frame of a native crash's backtrace: it names the layer, and the crash
    /// line the backtrace follows (`Caught signal 11 ...`) is the line that states the cause.
    pub backtrace_frame: bool,
    /// The process says it exits because of an error it met before serving (llama-server's
    /// `exiting due to model loading error`): a stop marker of that run before it (`cleaning up
    /// before exit...`) was the failed process cleaning up, not an orderly stop.
    pub failed_exit: bool,
    /// A cause only on a line logged before the server first served (since its last start).
    pub before_serving: bool,
    /// Python's words between chained exceptions: the next exception wraps the one before.
    pub chain: bool,
    /// Benign exceptions only: an exception raised while handling this one (chained to it)
    /// is as harmless (a test harness's retry wrapping its failed assertion).
    pub quiets_chain: bool,
    /// Fact rules: the fact's name.
    pub fact: Option<String>,
    /// Cause rules: a fact that, once seen in any input, puts `why_when`, `next_step_when` and
    /// `class_when` in place.
    pub when: Option<String>,
    /// A fact that, once seen in any input, makes this rule's findings harmless (e.g. a
    /// missing `vllm._C` on a platform plugin that never ships it).
    pub unless: Option<String>,
    /// The next step once the `when` fact was seen.
    pub next_step_when: Option<String>,
    /// The reason once the `when` fact was seen.
    pub why_when: Option<String>,
    /// The class when the `when` fact was seen (e.g. a CUDA library missing on a ROCm host is
    /// a wrong build, not a container problem).
    pub class_when: Option<Class>,
    /// The message names only a kind of failure (an exception type, "not supported"): a
    /// specific rule on the same line, a source line or the traceback's frames say more.
    pub generic: bool,
    /// A last resort (a bare ERROR logger line): a cause only when no other cause is found in
    /// any input; its class comes from the logger's source file through the frame map.
    pub weak: bool,
    /// Matches any exception (no message of its own): a fallback frame entry says more.
    pub catch_all: bool,
    /// The message is the interpreter's about a value the code did not expect: a bug in the
    /// code the frames name, never a failed transport (the distributed layer's frames do not
    /// make it `nccl`).
    pub code_bug: bool,
    /// A code bug that no data can cause (an undefined name): no deployment layer's frames
    /// (configuration, driver, transport, KV cache) name its class, only a third-party
    /// package's (a dependency) or the engine's own code. Implies `code_bug`.
    pub code_only: bool,
    /// A code bug that is never a failed transport, although the distributed layer's frames
    /// name it (a failed `assert`); the KV-cache code's frames keep their class.
    pub not_transport: bool,
    /// The class is a refusal the engine states while it checks its configuration at startup:
    /// raised in the request path instead (the traceback's frames are the engine's step or
    /// model runner while it ran requests), the same exception is a bug of the engine.
    pub startup_refusal: bool,
    /// The line reports one HTTP request that failed (uvicorn's `Exception in ASGI
    /// application`): the server went on.
    pub request: bool,
    /// Frame-map entries: a fallback (see [`RuleSet::frame_rule`]).
    pub fallback: bool,
    /// Frame-map entries: regex over one frame line.
    pub frame_path: Option<Regex>,
    /// Frame-map entries: regex over the message of a bare ERROR line.
    pub frame_words: Option<Regex>,
    /// The single next check, in plain words.
    pub next_step: String,
    /// Why a matching line is a cause, in words.
    pub why: String,
    /// Tried on every exception line that ends a traceback (no literal patterns).
    pub on_exceptions: bool,
    /// An anchored regex without its `^`, when that finds every match anywhere in a line
    /// (see [`Rule::may_match_text`]); built when first needed.
    text_check: OnceLock<Option<TextCheck>>,
}

/// A regex without look-around assertions searched anywhere in a text, after a cheap test for
/// literals one of which each of its matches holds.
#[derive(Debug, Clone)]
struct TextCheck {
    re: Regex,
    /// Searched first (vectorised); the lazy DFA over a whole line costs more.
    required: Vec<memchr::memmem::Finder<'static>>,
}

impl TextCheck {
    fn new(pattern: &str) -> Option<Self> {
        let hir = regex_syntax::parse(pattern).ok()?;
        if !hir.properties().look_set().is_empty() {
            return None;
        }
        let required = required_literals(&hir)
            .iter()
            .map(|l| memchr::memmem::Finder::new(l).into_owned())
            .collect();
        Some(TextCheck {
            re: Regex::new(pattern).ok()?,
            required,
        })
    }

    fn may_match(&self, text: &str) -> bool {
        (self.required.is_empty()
            || self
                .required
                .iter()
                .any(|f| f.find(text.as_bytes()).is_some()))
            && self.re.is_match(text)
    }
}

/// Literals one of which every match of `hir` holds: the prefixes of one part of its
/// concatenation (the part whose shortest prefix is longest), when that part has a finite,
/// non-empty set of them. Empty when no part has.
fn required_literals(hir: &regex_syntax::hir::Hir) -> Vec<Vec<u8>> {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    use regex_syntax::hir::HirKind;
    let parts: Vec<&regex_syntax::hir::Hir> = match hir.kind() {
        HirKind::Concat(parts) => parts.iter().collect(),
        _ => vec![hir],
    };
    let mut best: Vec<Vec<u8>> = Vec::new();
    let mut best_len = 0;
    for part in parts {
        let seq = Extractor::new().kind(ExtractKind::Prefix).extract(part);
        let Some(lits) = seq.literals() else {
            continue;
        };
        let shortest = lits.iter().map(|l| l.len()).min().unwrap_or(0);
        if shortest > best_len {
            best_len = shortest;
            best = lits.iter().map(|l| l.as_bytes().to_vec()).collect();
        }
    }
    best
}

impl Rule {
    /// A rule with every option off and no regex: the one place the defaults are written.
    fn base(id: String, kind: RuleKind, class: Class, why: String, next_step: String) -> Rule {
        Rule {
            id,
            kind,
            class,
            regex: None,
            frames: None,
            phase: false,
            alone: false,
            on_warning: false,
            on_info: false,
            fatal: false,
            child: false,
            announces: false,
            backtrace_frame: false,
            failed_exit: false,
            before_serving: false,
            chain: false,
            quiets_chain: false,
            fact: None,
            when: None,
            unless: None,
            next_step_when: None,
            why_when: None,
            class_when: None,
            generic: false,
            weak: false,
            catch_all: false,
            code_bug: false,
            not_transport: false,
            code_only: false,
            startup_refusal: false,
            request: false,
            fallback: false,
            frame_path: None,
            frame_words: None,
            next_step,
            why,
            on_exceptions: false,
            text_check: OnceLock::new(),
        }
    }

    /// Whether this rule's frames give way to the code bug that rule `bug` names: a bug in
    /// the KV-cache or distributed code is no prefix-cache setting or failed transport, and
    /// an undefined name (`code_only`) is no configuration or driver matter either; only a
    /// third-party package's frames keep their class (its version is wrong).
    pub fn frames_yield_to(&self, bug: &Rule) -> bool {
        let layer = if bug.not_transport {
            self.class == Class::Nccl
        } else {
            self.class.yields_to_code_bug()
        };
        bug.code_bug && (layer || (bug.code_only && self.class != Class::Dependency))
    }

    /// An end-of-log entry: a weak, generic cause matched by its regex alone.
    fn last_resort(id: String, class: Class, regex: Regex, why: String, next_step: String) -> Rule {
        Rule {
            regex: Some(regex),
            generic: true,
            weak: true,
            ..Rule::base(id, RuleKind::Cause, class, why, next_step)
        }
    }

    /// The rule's regex, if it has one, matches the line: an anchored regex (`^...`) the
    /// message after the prefixes, any other the whole line.
    pub fn regex_matches(&self, pl: &super::line::ParsedLine) -> bool {
        self.regex_matches_text(&pl.text, pl.msg())
    }

    /// Whether the rule's regex may match a line with this text (terminal codes removed),
    /// its prefixes not read: false only when it surely does not. An anchored regex (`^X`)
    /// matches the message only where `X` matches the text at the message's start, so a
    /// search for `X` anywhere in the text decides it, when `X` has no look-around assertions
    /// (those could read the bytes before the message).
    pub fn may_match_text(&self, text: &str) -> bool {
        let Some(re) = &self.regex else {
            return true;
        };
        let Some(rest) = re.as_str().strip_prefix('^') else {
            return re.is_match(text);
        };
        self.text_check
            .get_or_init(|| TextCheck::new(rest))
            .as_ref()
            .is_none_or(|c| c.may_match(text))
    }

    /// [`Self::regex_matches`] for a line's text and its message (a suffix of the text).
    pub fn regex_matches_text(&self, text: &str, msg: &str) -> bool {
        self.regex.as_ref().is_none_or(|re| {
            re.is_match(if re.as_str().starts_with('^') {
                msg
            } else {
                text
            })
        })
    }
}

/// An optional regex of a rule file, compiled (`what` names it in the error).
fn optional_regex(re: Option<&str>, what: impl Fn() -> String) -> anyhow::Result<Option<Regex>> {
    re.map(Regex::new).transpose().with_context(what)
}

/// All rules with their literal prefilters.
#[derive(Debug)]
pub struct RuleSet {
    /// Every rule, frame-map entry and end-of-log entry, in file order; the indices below point
    /// here.
    pub rules: Vec<Rule>,
    /// The needles of the literal prefilter (every literal and anchor, minimised) ...
    pub needles: Arc<Needles>,
    /// ... and its keys chosen without a sample (for small inputs; larger ones choose their
    /// own from their first bytes).
    pub prefilter: Prefilter,
    /// Rules without literals, tried on every exception line.
    pub exception_rules: Vec<usize>,
    /// The frame-path -> class map (rule indices, in file order).
    pub frame_rules: Vec<usize>,
    /// The end-of-log entries (rule indices, in file order, each with whether only lines
    /// logged at ERROR or above count: `error_level`): tried only on the last lines of a log
    /// that stopped before serving with nothing else found, never by the prefilter.
    pub tail_rules: Vec<(usize, bool)>,
    /// The same for a quote of a log that shows no server at all (`quote = true`).
    pub quote_rules: Vec<(usize, bool)>,
    /// Prefilter pattern index -> rule index (`None` for structural anchors, `WORKER_ANCHOR`
    /// for worker prefixes); the literals come first, in the order of `literals`.
    pub pattern_rule: Vec<Option<usize>>,
    /// Literal index -> rule index.
    literal_rule: Vec<usize>,
    /// The literals of the rules for a process the server starts per model load (`child`):
    /// the server's words that such a process died, whichever rule names the line.
    child_literals: Vec<String>,
    /// The literals, for benchmarks comparing with other tools.
    pub literals: Vec<String>,
}

/// Anchors that start traceback tracking.
pub const STRUCTURAL_ANCHORS: &[&str] = &[
    "Traceback (most recent call last)",
    "File \"",
    "Exception ignored in",
    // IPython's frames (a notebook's traceback): `File ~/x.py:12, in f()`, `Cell In[3], line 5`.
    "File ~/",
    "File /",
    "Cell In[",
];

/// Anchors of worker prefixes (for the one-rank out-of-memory test).
pub const WORKER_ANCHORS: &[&str] = &[
    "VllmWorker rank=",
    "(Worker_TP",
    "(Worker_PP",
    "[rank",
    "(RayWorkerWrapper pid=",
];

/// Marker in `pattern_rule` for worker anchors.
pub const WORKER_ANCHOR: usize = usize::MAX;

impl RuleSet {
    /// The built-in rules plus each user file (user rules are tried first).
    pub fn load(user_files: &[impl AsRef<Path>]) -> anyhow::Result<Self> {
        let mut defs = Vec::new();
        let mut frames = Vec::new();
        let mut tails = Vec::new();
        for f in user_files {
            let f = f.as_ref();
            let text = crate::input::read_text(f)
                .with_context(|| format!("cannot read rule file {}", f.display()))?;
            let parsed: RuleFile = toml::from_str(&text)
                .with_context(|| format!("invalid rule file {}", f.display()))?;
            defs.extend(parsed.rule);
            frames.extend(parsed.frame);
            tails.extend(parsed.tail);
        }
        let builtin: RuleFile =
            toml::from_str(DEFAULT_RULES).context("the built-in rule file is invalid")?;
        defs.extend(builtin.rule);
        frames.extend(builtin.frame);
        tails.extend(builtin.tail);
        Self::compile(defs, frames, tails)
    }

    fn compile(
        defs: Vec<RuleDef>,
        frame_defs: Vec<FrameDef>,
        tail_defs: Vec<TailDef>,
    ) -> anyhow::Result<Self> {
        let mut rules = Vec::with_capacity(defs.len());
        let mut literals = Vec::new();
        let mut literal_rule = Vec::new();
        for d in defs {
            let class = match (d.kind, d.class) {
                (RuleKind::Cause | RuleKind::Consequence | RuleKind::Hint, None) => {
                    bail!(
                        "rule {}: `class` is required for kind cause/consequence/hint",
                        d.id
                    )
                }
                (_, c) => c.unwrap_or(Class::Unknown),
            };
            if d.patterns.iter().any(|p| p.is_empty()) {
                bail!("rule {}: empty pattern", d.id);
            }
            if d.patterns.is_empty() && d.frames.is_none() && d.regex.is_none() {
                bail!("rule {}: needs `patterns`, `regex` or `frames`", d.id);
            }
            if d.kind == RuleKind::Fact && d.fact.is_none() {
                bail!("rule {}: fact rules need `fact`", d.id);
            }
            let regex = optional_regex(d.regex.as_deref(), || {
                format!("rule {}: invalid regex", d.id)
            })?;
            let frames = optional_regex(d.frames.as_deref(), || {
                format!("rule {}: invalid frames regex", d.id)
            })?;
            let idx = rules.len();
            for p in &d.patterns {
                literals.push(p.clone());
                literal_rule.push(idx);
            }
            rules.push(Rule {
                on_exceptions: d.patterns.is_empty(),
                regex,
                frames,
                phase: d.phase,
                alone: d.alone,
                on_warning: d.on_warning,
                on_info: d.on_info,
                fatal: d.fatal,
                child: d.child,
                announces: d.announces,
                backtrace_frame: d.backtrace_frame,
                failed_exit: d.failed_exit,
                before_serving: d.before_serving,
                chain: d.chain,
                quiets_chain: d.quiets_chain,
                fact: d.fact,
                when: d.when,
                unless: d.unless,
                next_step_when: d.next_step_when,
                why_when: d.why_when,
                class_when: d.class_when,
                generic: d.generic,
                weak: d.weak,
                catch_all: d.catch_all,
                code_bug: d.code_bug || d.code_only,
                code_only: d.code_only,
                not_transport: d.not_transport,
                startup_refusal: d.startup_refusal,
                request: d.request,
                ..Rule::base(d.id, d.kind, class, d.why, d.next_step)
            });
        }
        let mut frame_rules = Vec::new();
        for f in frame_defs {
            let re = Regex::new(&f.path)
                .with_context(|| format!("frame {}: invalid path regex", f.id))?;
            let words = optional_regex(f.words.as_deref(), || {
                format!("frame {}: invalid words regex", f.id)
            })?;
            frame_rules.push(rules.len());
            rules.push(Rule {
                // Frames say less than a specific message on a nearby line.
                generic: true,
                fallback: f.fallback,
                frame_path: Some(re),
                frame_words: words,
                ..Rule::base(f.id, RuleKind::Cause, f.class, f.why, f.next_step)
            });
        }
        let (mut tail_rules, mut quote_rules) = (Vec::new(), Vec::new());
        for t in tail_defs {
            let re =
                Regex::new(&t.regex).with_context(|| format!("tail {}: invalid regex", t.id))?;
            let entries = if t.quote {
                &mut quote_rules
            } else {
                &mut tail_rules
            };
            entries.push((rules.len(), t.error_level));
            rules.push(Rule::last_resort(t.id, t.class, re, t.why, t.next_step));
        }
        // The patterns of the prefilter, in the order that decides between two that start at
        // one place (leftmost-first): rule literals, structural anchors, worker anchors.
        let mut patterns: Vec<Pattern> = literals
            .iter()
            .zip(&literal_rule)
            .map(|(lit, &ri)| Pattern {
                bytes: lit.as_bytes(),
                serving: rules[ri].kind == RuleKind::Serving,
            })
            .collect();
        let mut pattern_rule: Vec<Option<usize>> =
            literal_rule.iter().map(|&ri| Some(ri)).collect();
        for a in STRUCTURAL_ANCHORS {
            patterns.push(Pattern {
                bytes: a.as_bytes(),
                serving: false,
            });
            pattern_rule.push(None);
        }
        for a in WORKER_ANCHORS {
            patterns.push(Pattern {
                bytes: a.as_bytes(),
                serving: false,
            });
            pattern_rule.push(Some(WORKER_ANCHOR));
        }
        let needles = Arc::new(Needles::new(&patterns));
        let prefilter = Prefilter::new(needles.clone(), b"");
        let exception_rules = rules
            .iter()
            .enumerate()
            .filter(|(_, r)| r.on_exceptions)
            .map(|(i, _)| i)
            .collect();
        let child_literals = literals
            .iter()
            .zip(&literal_rule)
            .filter(|(_, &ri)| rules[ri].child)
            .map(|(l, _)| l.clone())
            .collect();
        Ok(Self {
            child_literals,
            frame_rules,
            tail_rules,
            quote_rules,
            needles,
            prefilter,
            exception_rules,
            literal_rule,
            rules,
            pattern_rule,
            literals,
        })
    }

    /// Whether `text` is the server's word that a process it starts per model load died
    /// (ollama's `error loading llama server`), whichever rule matched the line (its runner's
    /// own error quoted in it may name the cause).
    pub fn names_child_death(&self, text: &str) -> bool {
        self.child_literals
            .iter()
            .any(|l| text.contains(l.as_str()))
    }

    /// The literals of one rule (for tools and benchmarks).
    pub fn literals_of(&self, rule: &Rule) -> Vec<String> {
        let idx = self.rules.iter().position(|r| std::ptr::eq(r, rule));
        self.literals
            .iter()
            .zip(&self.literal_rule)
            .filter(|(_, &ri)| Some(ri) == idx)
            .map(|(l, _)| l.clone())
            .collect()
    }

    /// The frame-map entry of a traceback: the innermost frame (last in `frames`) that some
    /// entry matches decides; entries are tried in file order on that frame. Fallback entries
    /// (the engine's own code) count only when no other entry matches any frame.
    pub fn frame_rule(&self, frames: &str) -> Option<usize> {
        self.innermost_entry(frames, false)
            .or_else(|| self.innermost_entry(frames, true))
    }

    /// The fallback entry (the engine's own code) of a traceback's innermost frame it matches,
    /// skipping the layers' entries: where the frames put a code bug.
    pub fn fallback_frame_rule(&self, frames: &str) -> Option<usize> {
        self.innermost_entry(frames, true)
    }

    /// The entry (fallback or not) that matches the innermost frame any such entry matches.
    fn innermost_entry(&self, frames: &str, fallback: bool) -> Option<usize> {
        frames
            .lines()
            .rev()
            .filter(|l| l.starts_with("File \""))
            .find_map(|l| {
                self.frame_rules.iter().copied().find(|&ri| {
                    let r = &self.rules[ri];
                    r.fallback == fallback && r.frame_path.as_ref().is_some_and(|re| re.is_match(l))
                })
            })
    }

    /// The frame-map entry of the source file a logger line names (`[core.py:708]` in vLLM's
    /// header, `file.cc:42]` in glog's): the module that logged an error says which layer
    /// failed, as the innermost frame of a traceback does.
    /// When the file says nothing, the component the message names decides (`words`), and
    /// only then a fallback entry (the engine's own code) that the file matches.
    pub fn logger_rule(&self, line: &str) -> Option<usize> {
        let file = super::line::logger_file(line)
            .map(|file| format!("File \"{file}\", line 0, in <logger>"));
        let by_file = |fallback: bool| {
            let file = file.as_deref()?;
            self.frame_rules.iter().copied().find(|&ri| {
                let r = &self.rules[ri];
                r.fallback == fallback && r.frame_path.as_ref().is_some_and(|re| re.is_match(file))
            })
        };
        by_file(false)
            .or_else(|| {
                let msg = super::line::parse(line.as_bytes());
                self.frame_rules.iter().copied().find(|&ri| {
                    self.rules[ri]
                        .frame_words
                        .as_ref()
                        .is_some_and(|re| re.is_match(msg.msg()))
                })
            })
            .or_else(|| by_file(true))
    }

    /// The built-in rules, compiled once per process (for `watch` and `check`, which read
    /// log lines with the same rules as `triage`).
    pub fn builtin() -> &'static RuleSet {
        static R: OnceLock<RuleSet> = OnceLock::new();
        R.get_or_init(|| RuleSet::load(&[] as &[&str]).expect("the built-in rules compile"))
    }

    /// The first cause rule whose literals and regex match `text` (one line, no traceback);
    /// specific rules before generic ones. For lines that quote an error ("Worker failed with
    /// error '...'") and for other tools that read logs line by line (watch, check).
    pub fn classify_text(&self, text: &str) -> Option<usize> {
        let mut cand = Vec::new();
        self.candidates(text.as_bytes(), &mut cand);
        let pl = super::line::parse(text.as_bytes());
        let level = pl.level.unwrap_or("");
        let info = matches!(level, "INFO" | "DEBUG") || super::line::has_nccl_info(text);
        let warning = matches!(level, "WARNING" | "WARN");
        let mut generic = None;
        for ri in cand {
            let r = &self.rules[ri];
            if r.kind != RuleKind::Cause
                || r.frames.is_some()
                || r.weak
                || (info && !r.on_info)
                || (warning && !r.on_warning && !r.on_info)
            {
                continue;
            }
            if !r.regex_matches(&pl) {
                continue;
            }
            if r.generic {
                generic = generic.or(Some(ri));
                continue;
            }
            return Some(ri);
        }
        generic
    }

    /// The first rule of `kind` whose literals (and regex) occur in `text`.
    pub fn first_of_kind(&self, text: &str, kind: RuleKind) -> Option<usize> {
        let mut cand = Vec::new();
        self.candidates(text.as_bytes(), &mut cand);
        cand.into_iter().find(|&ri| {
            let r = &self.rules[ri];
            r.kind == kind && r.regex.as_ref().is_none_or(|re| re.is_match(text))
        })
    }

    /// Rules whose literals occur in `line` (sorted by rule order, deduplicated).
    pub fn candidates(&self, line: &[u8], out: &mut Vec<usize>) {
        let mut pats = Vec::new();
        self.prefilter.patterns_of(line, &mut pats);
        self.rules_of(&pats, line.len(), out);
    }

    /// Whether a rule among `cand` (the rules whose literals occur on a line) may match the
    /// line with this text, its prefixes not read (see [`Rule::may_match_text`]).
    pub fn may_match_text(&self, cand: &[usize], text: &str) -> bool {
        cand.iter().any(|&ri| self.rules[ri].may_match_text(text))
    }

    /// Rules whose literals are among the pattern occurrences `pats` ending by `end`, sorted
    /// by rule order, deduplicated.
    pub fn rules_of(&self, pats: &[(usize, u32)], end: usize, out: &mut Vec<usize>) {
        out.clear();
        for &(s, pi) in pats {
            if let Some(ri) = self.pattern_rule[pi as usize] {
                if ri != WORKER_ANCHOR && s + self.needles.pattern_len(pi) <= end {
                    out.push(ri);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every match of an anchored rule's rest holds one of its required literals; a pattern
    /// that can match without any has none, and a look-around keeps the regex out entirely.
    #[test]
    fn a_text_check_tests_required_literals_before_its_regex() {
        let lits = |p: &str| required_literals(&regex_syntax::parse(p).unwrap());
        assert_eq!(
            lits(r"([A-Za-z_]\w*\.)*\w*(Error|Exception): .*(?i:must be)"),
            vec![b"Error".to_vec(), b"Exception".to_vec()]
        );
        assert!(lits(r"\w*(?:abc)?").is_empty());
        let c = TextCheck::new(r"\w*(Error|Exception): .*must be").unwrap();
        assert!(c.may_match("(APIServer pid=1) ValueError: x must be 1"));
        assert!(!c.may_match("(APIServer pid=1) INFO x must be 1"));
        assert!(!c.may_match("(APIServer pid=1) ValueError: nothing"));
        assert!(TextCheck::new(r"\bx").is_none());
    }

    #[test]
    fn builtin_rules_compile_and_have_texts() {
        let set = RuleSet::load(&[] as &[&str]).unwrap();
        assert!(set.rules.len() > 30);
        for r in &set.rules {
            if r.kind == RuleKind::Cause {
                assert!(!r.next_step.is_empty(), "rule {} has no next_step", r.id);
                assert!(!r.why.is_empty(), "rule {} has no why", r.id);
            }
        }
    }

    #[test]
    fn candidates_find_every_rule_on_a_line() {
        let set = RuleSet::load(&[] as &[&str]).unwrap();
        let mut out = Vec::new();
        set.candidates(
            b"RuntimeError: NCCL error: unhandled system error",
            &mut out,
        );
        let ids: Vec<&str> = out.iter().map(|&i| set.rules[i].id.as_str()).collect();
        assert!(ids.contains(&"nccl-error"), "{ids:?}");
    }
}
