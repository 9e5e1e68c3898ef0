//! Memos for what a crash loop repeats: the same traceback frames and the same messages
//! (prefixes with pids and timestamps aside) are judged once by the frame map, the frames
//! patterns of rules and the phase patterns. Bounded: emptied when its keys pass `LIMIT` bytes.

use regex::Regex;
use rustc_hash::FxHashMap;

use super::super::phase::Evidence;
use super::super::rules::RuleSet;

const LIMIT: usize = 8 << 20;

/// Phase evidence of a message or of a traceback's frames.
#[derive(Debug, Default)]
pub(super) struct PhaseMemo {
    map: FxHashMap<Box<str>, Evidence>,
    bytes: usize,
}

impl PhaseMemo {
    pub(super) fn of(&mut self, text: &str) -> Evidence {
        if let Some(e) = self.map.get(text) {
            return *e;
        }
        let e = Evidence::of(text);
        if self.bytes + text.len() > LIMIT {
            self.map.clear();
            self.bytes = 0;
        }
        self.bytes += text.len();
        self.map.insert(text.into(), e);
        e
    }
}

/// What a traceback's frames say: the frame-map entry, rule by rule whether the rule's
/// `frames` pattern matches, and their phase evidence; each judged when first asked.
#[derive(Debug, Default)]
struct Verdict {
    frame_rule: Option<Option<usize>>,
    rules: Vec<(usize, bool)>,
    phase: Option<Evidence>,
}

/// The verdicts on the frames seen (one hash of the frames per traceback: [`Self::lookup`]).
#[derive(Debug, Default)]
pub(super) struct FramesMemo {
    index: FxHashMap<Box<str>, usize>,
    verdicts: Vec<Verdict>,
    bytes: usize,
}

impl FramesMemo {
    /// The verdict slot of these frames (valid until the next lookup).
    pub(super) fn lookup(&mut self, frames: &str) -> usize {
        if let Some(&i) = self.index.get(frames) {
            return i;
        }
        if self.bytes + frames.len() > LIMIT {
            self.index.clear();
            self.verdicts.clear();
            self.bytes = 0;
        }
        self.bytes += frames.len();
        self.verdicts.push(Verdict::default());
        let i = self.verdicts.len() - 1;
        self.index.insert(frames.into(), i);
        i
    }

    /// [`RuleSet::frame_rule`] of the frames in slot `i`.
    pub(super) fn frame_rule(&mut self, i: usize, rules: &RuleSet, frames: &str) -> Option<usize> {
        *self.verdicts[i]
            .frame_rule
            .get_or_insert_with(|| rules.frame_rule(frames))
    }

    /// Whether rule `ri`'s frames pattern `re` matches the frames in slot `i`.
    pub(super) fn matches(&mut self, i: usize, ri: usize, re: &Regex, frames: &str) -> bool {
        let v = &mut self.verdicts[i];
        if let Some(&(_, m)) = v.rules.iter().find(|(r, _)| *r == ri) {
            return m;
        }
        let m = re.is_match(frames);
        v.rules.push((ri, m));
        m
    }

    /// The phase evidence in the frames in slot `i`.
    pub(super) fn phase(&mut self, i: usize, frames: &str) -> Evidence {
        *self.verdicts[i]
            .phase
            .get_or_insert_with(|| Evidence::of(frames))
    }
}
