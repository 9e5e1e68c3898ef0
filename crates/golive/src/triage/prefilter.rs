//! The literal prefilter: where in a buffer a rule literal or an anchor (a "needle") starts,
//! in one pass over the bytes, split over both cores.
//!
//! Hundreds of needles are too many for the vectorised (Teddy) searchers, which saturate past
//! a few dozen patterns, and a byte-at-a-time automaton over all of them runs at a few hundred
//! MB/s. So each needle of at least 7 bytes is represented by four adjacent 4-byte keys (its
//! 4-grams at offsets o..o+3): any occurrence of the needle puts one of them at a position that
//! is a multiple of 4 from the region start, so only every 4th position is looked up, in a
//! 2^17-bit table of key hashes, and a hit is verified against the needles that hold the key.
//! The offset o of each needle is chosen where its keys are rarest in a sample of the input
//! (a log that logs every request has other common words than a startup log). Needles shorter
//! than 7 bytes (few) go to a vectorised searcher of their own. (Hand-written: the well-kept
//! searchers do not scale to hundreds of literals; this pass is the hot loop of `triage`.)
//!
//! Occurrences are exact: every start of every needle inside the region, none else, so the
//! scanner can decide per line without reading lines that hold none. Every pattern (literal or
//! anchor) holds a needle of its group at a known offset, so the patterns on a line are found
//! from its needles ([`Needles::patterns_in`]) without another pass over the line.

use std::sync::{Arc, OnceLock};

use aho_corasick::{AhoCorasick, MatchKind};
use rustc_hash::FxHashMap;

/// Needles at least this long use the 4-gram keys.
const KEYED_MIN: usize = STRIDE + 3;
/// Positions looked up: one in `STRIDE`.
const STRIDE: usize = 4;
/// Blocks of a region searched apart start this many bytes apart (or a multiple of it).
pub const LATTICE: usize = STRIDE;
/// Bits of the key hash table (2^17 bits = 16 KiB, stays in the first-level cache).
const HASH_BITS: u32 = 17;
const HASH_MUL: u32 = 0x9E37_79B1;
/// 64-bit words of the table.
const WORDS: usize = 1 << (HASH_BITS - 6);
/// Bytes of the input sampled to choose the keys.
pub const SAMPLE: usize = 1 << 20;

/// A pattern given to [`Needles::new`] (a rule literal or an anchor; serving markers apart).
pub struct Pattern<'a> {
    pub bytes: &'a [u8],
    pub serving: bool,
}

/// The needles (the literals no other literal of their group contains) and their searchers
/// that do not depend on the input.
#[derive(Debug)]
pub struct Needles {
    bytes: Vec<Vec<u8>>,
    /// Only serving markers hold the needle (not looked for once the server serves).
    serving_only: Vec<bool>,
    /// Needle indices of the keyed needles.
    keyed: Vec<u32>,
    /// The short needles, non-serving first.
    short: Option<ShortSearcher>,
    /// The patterns, and per needle the patterns anchored on it, with the needle's offset in
    /// the pattern. A non-serving pattern is anchored on a non-serving needle.
    patterns: Vec<Vec<u8>>,
    pattern_serving: Vec<bool>,
    anchored: Vec<Vec<(u32, u32)>>,
    /// Per needle, whether it marks an access line (serving needles of [`ANSWERS`] only).
    answer: Vec<bool>,
}

/// The serving needles that mark an access line, whose answer
/// [`super::lifecycle::answered`] reads.
pub const ANSWERS: [&[u8]; 5] = [
    b"\" 200",
    b"log_server_r: request:",
    b"log_server_r: done request:",
    b"log_server_request] request",
    b"[GIN] ",
];

#[derive(Debug)]
enum ShortSearcher {
    Packed(aho_corasick::packed::Searcher, Vec<u32>),
    Automaton(AhoCorasick, Vec<u32>),
}

impl ShortSearcher {
    fn new(needles: &[(u32, &[u8])]) -> Option<Self> {
        if needles.is_empty() {
            return None;
        }
        let ids: Vec<u32> = needles.iter().map(|(i, _)| *i).collect();
        let packed = aho_corasick::packed::Config::new()
            .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
            .builder()
            .extend(needles.iter().map(|(_, b)| *b))
            .build();
        if let Some(p) = packed {
            return Some(ShortSearcher::Packed(p, ids));
        }
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(needles.iter().map(|(_, b)| *b))
            .ok()?;
        Some(ShortSearcher::Automaton(ac, ids))
    }

    /// Every start in [from, to) of a needle lying inside hay[..end] (at each start the first
    /// needle in order that matches there).
    fn find_all(&self, hay: &[u8], from: usize, to: usize, base: usize, out: &mut Vec<u64>) {
        let end = hay.len();
        let mut at = from;
        while at < to {
            let (start, pat) = match self {
                ShortSearcher::Packed(s, ids) => {
                    match s.find_in(hay, aho_corasick::Span::from(at..end)) {
                        Some(m) => (m.start(), ids[m.pattern().as_usize()]),
                        None => break,
                    }
                }
                ShortSearcher::Automaton(ac, ids) => {
                    match ac.find(aho_corasick::Input::new(hay).range(at..end)) {
                        Some(m) => (m.start(), ids[m.pattern().as_usize()]),
                        None => break,
                    }
                }
            };
            if start >= to {
                break;
            }
            out.push(occ(start - base, pat));
            at = start + 1;
        }
    }
}

/// An occurrence: position (relative to the region start) in the high half, needle below,
/// so that sorting orders by position.
pub fn occ(pos: usize, needle: u32) -> u64 {
    ((pos as u64) << 32) | u64::from(needle)
}

/// Position and needle of an occurrence.
pub fn occ_parts(o: u64) -> (usize, usize) {
    ((o >> 32) as usize, (o & 0xffff_ffff) as usize)
}

impl Needles {
    /// Needles of `patterns`: serving markers and the rest are minimised apart (a literal
    /// holding another literal of its group adds no candidate), a serving marker that holds
    /// another needle is dropped. A pattern with a newline never matches inside a line: it is
    /// no needle and anchored nowhere.
    pub fn new(patterns: &[Pattern]) -> Self {
        let minimal = |serving: bool| -> Vec<&[u8]> {
            let mut group: Vec<&[u8]> = patterns
                .iter()
                .filter(|p| p.serving == serving && !p.bytes.contains(&b'\n'))
                .map(|p| p.bytes)
                .collect();
            group.sort_unstable_by_key(|b| (b.len(), *b));
            group.dedup();
            let mut out: Vec<&[u8]> = Vec::new();
            for b in group {
                if !out.iter().any(|m| contains(b, m)) {
                    out.push(b);
                }
            }
            out
        };
        let others = minimal(false);
        let serving: Vec<&[u8]> = minimal(true)
            .into_iter()
            .filter(|s| !others.iter().any(|m| contains(s, m)))
            .collect();
        let bytes: Vec<Vec<u8>> = others.iter().chain(&serving).map(|b| b.to_vec()).collect();
        let serving_only: Vec<bool> = (0..bytes.len()).map(|i| i >= others.len()).collect();
        let keyed = (0..bytes.len() as u32)
            .filter(|&i| bytes[i as usize].len() >= KEYED_MIN)
            .collect();
        // Non-serving needles first: at a start where two short needles match, the searcher
        // reports the first, and a serving marker must not hide another needle.
        let short_list: Vec<(u32, &[u8])> = bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| b.len() < KEYED_MIN)
            .map(|(i, b)| (i as u32, b.as_slice()))
            .collect();
        let short = ShortSearcher::new(&short_list);
        let mut anchored = vec![Vec::new(); bytes.len()];
        for (pi, p) in patterns.iter().enumerate() {
            if p.bytes.contains(&b'\n') {
                continue;
            }
            let group = if p.serving {
                0..bytes.len()
            } else {
                0..others.len()
            };
            let (n, off) = group
                .filter_map(|n| find(p.bytes, &bytes[n]).map(|off| (n, off)))
                .next()
                .expect("every pattern holds a needle of its group");
            anchored[n].push((pi as u32, off as u32));
        }
        let answer = (0..bytes.len())
            .map(|n| serving_only[n] && ANSWERS.contains(&bytes[n].as_slice()))
            .collect();
        Needles {
            answer,
            patterns: patterns.iter().map(|p| p.bytes.to_vec()).collect(),
            pattern_serving: patterns.iter().map(|p| p.serving).collect(),
            bytes,
            serving_only,
            keyed,
            short,
            anchored,
        }
    }

    pub fn serving_only(&self, needle: usize) -> bool {
        self.serving_only[needle]
    }

    /// Whether the needle marks an access line (one of [`ANSWERS`]).
    pub fn marks_answer(&self, needle: usize) -> bool {
        self.answer[needle]
    }

    /// Whether pattern `pi` is a serving marker.
    pub fn pattern_serving(&self, pi: u32) -> bool {
        self.pattern_serving[pi as usize]
    }

    pub fn pattern_len(&self, pi: u32) -> usize {
        self.patterns[pi as usize].len()
    }

    /// Every occurrence (start, pattern) inside hay[start..end] of a pattern anchored on one
    /// of the needle occurrences `needles` (positions in `hay`), sorted by start and pattern.
    /// Given all needle occurrences of a line, these are all pattern occurrences in it.
    pub fn patterns_in(
        &self,
        hay: &[u8],
        start: usize,
        end: usize,
        needles: impl Iterator<Item = (usize, usize)>,
        out: &mut Vec<(usize, u32)>,
    ) {
        out.clear();
        for (q, n) in needles {
            for &(pi, off) in &self.anchored[n] {
                let p = &self.patterns[pi as usize];
                let Some(s) = q.checked_sub(off as usize) else {
                    continue;
                };
                if s >= start && s + p.len() <= end && hay[s..].starts_with(p) {
                    out.push((s, pi));
                }
            }
        }
        out.sort_unstable();
    }

    /// 4-grams of the keyed needles counted in `sample` (positions where such a gram starts).
    fn gram_counts(&self, sample: &[u8]) -> FxHashMap<u32, u32> {
        let mut counts: FxHashMap<u32, u32> = FxHashMap::default();
        let mut bits = vec![0u64; WORDS];
        for &n in &self.keyed {
            for g in self.bytes[n as usize].windows(4) {
                let w = gram(g);
                counts.insert(w, 0);
                let h = hash(w);
                bits[h >> 6] |= 1 << (h & 63);
            }
        }
        for g in sample.windows(4) {
            let w = gram(g);
            let h = hash(w);
            if bits[h >> 6] & (1 << (h & 63)) != 0 {
                if let Some(c) = counts.get_mut(&w) {
                    *c += 1;
                }
            }
        }
        counts
    }
}

fn gram(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[inline(always)]
fn hash(w: u32) -> usize {
    (w.wrapping_mul(HASH_MUL) >> (32 - HASH_BITS)) as usize
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, _) = needle.split_first()?;
    memchr::memchr_iter(first, hay).find(|&i| hay[i..].starts_with(needle))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}

/// The keyed part chosen for one input: key hash bits and, per key, the needles to verify.
#[derive(Debug)]
pub struct Prefilter {
    needles: Arc<Needles>,
    bits: Box<[u64; WORDS]>,
    /// Key -> range in `entries`.
    keys: FxHashMap<u32, (u32, u32)>,
    /// (needle, offset of the key in the needle).
    entries: Vec<(u32, u32)>,
}

impl Prefilter {
    /// Keys for `needles`, each needle's where its four keys occur least often in `sample`
    /// (the first offset when the sample says nothing).
    pub fn new(needles: Arc<Needles>, sample: &[u8]) -> Self {
        let counts = if sample.len() >= 4 {
            needles.gram_counts(sample)
        } else {
            FxHashMap::default()
        };
        let mut by_key: FxHashMap<u32, Vec<(u32, u32)>> = FxHashMap::default();
        for &n in &needles.keyed {
            let b = &needles.bytes[n as usize];
            let cost = |o: usize| -> u64 {
                (0..STRIDE)
                    .map(|j| u64::from(counts.get(&gram(&b[o + j..])).copied().unwrap_or(0)))
                    .sum()
            };
            let best = (0..=b.len() - KEYED_MIN)
                .min_by_key(|&o| (cost(o), o))
                .unwrap_or(0);
            for j in 0..STRIDE {
                let o = best + j;
                by_key.entry(gram(&b[o..])).or_default().push((n, o as u32));
            }
        }
        let mut bits = Box::new([0u64; WORDS]);
        let mut keys = FxHashMap::default();
        let mut entries = Vec::new();
        let mut sorted: Vec<(u32, Vec<(u32, u32)>)> = by_key.into_iter().collect();
        sorted.sort_unstable_by_key(|(k, _)| *k);
        for (k, list) in sorted {
            let h = hash(k);
            bits[h >> 6] |= 1 << (h & 63);
            keys.insert(k, (entries.len() as u32, list.len() as u32));
            entries.extend(list);
        }
        Prefilter {
            needles,
            bits,
            keys,
            entries,
        }
    }

    pub fn needles(&self) -> &Needles {
        &self.needles
    }

    /// Every occurrence of a needle inside buf[a..b), sorted, as [`occ_parts`] values relative
    /// to `a`, into `out` (one thread; the scanner searches large regions block by block
    /// beside its line work, `scan/occ.rs`).
    pub fn occurrences(&self, buf: &[u8], a: usize, b: usize, out: &mut Vec<u64>) {
        out.clear();
        self.occurrences_block(&buf[..b], a, a, b, out);
    }

    /// Occurrences found from positions [from, to) of hay[a..] (`from - a` a multiple of
    /// [`LATTICE`]), sorted, appended to `out`: one block of a region searched block by block.
    /// Every occurrence starts at or after `from - self.reach()`.
    pub fn occurrences_block(
        &self,
        hay: &[u8],
        a: usize,
        from: usize,
        to: usize,
        out: &mut Vec<u64>,
    ) {
        let n = out.len();
        self.occurrences_in(hay, a, from, to, out);
        // Two runs of sorted values (keyed, short): the stable sort merges them in about
        // linear time.
        out[n..].sort();
    }

    /// How far before the position it was found from an occurrence may start (the longest
    /// needle).
    pub fn reach(&self) -> usize {
        self.needles.bytes.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// Every pattern occurrence (start, pattern) in `text`, sorted (one line, searched on
    /// one thread).
    pub fn patterns_of(&self, text: &[u8], out: &mut Vec<(usize, u32)>) {
        let mut occ = Vec::new();
        self.occurrences_in(text, 0, 0, text.len(), &mut occ);
        let mut occ: Vec<(usize, usize)> = occ.into_iter().map(occ_parts).collect();
        occ.sort_unstable();
        self.needles
            .patterns_in(text, 0, text.len(), occ.into_iter(), out);
    }

    /// Occurrences found from lattice positions in [from, to) (keyed needles) and starts in
    /// [from, to) (short needles), inside hay[a..], appended to `out`.
    fn occurrences_in(&self, hay: &[u8], a: usize, from: usize, to: usize, out: &mut Vec<u64>) {
        let bits: &[u64; WORDS] = &self.bits;
        // Windows at from, from+4, ... lying inside hay[..to + 3] (and inside the region).
        let wend = (to + STRIDE - 1).min(hay.len());
        if wend > from {
            for (k, c) in hay[from..wend].chunks_exact(STRIDE).enumerate() {
                let w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                let h = hash(w);
                if bits[h >> 6] & (1 << (h & 63)) != 0 {
                    self.verify(hay, a, from + k * STRIDE, w, out);
                }
            }
        }
        if let Some(s) = &self.needles.short {
            s.find_all(hay, from, to, a, out);
        }
    }

    #[inline(never)]
    fn verify(&self, hay: &[u8], a: usize, p: usize, w: u32, out: &mut Vec<u64>) {
        let Some(&(start, len)) = self.keys.get(&w) else {
            return;
        };
        for &(n, off) in &self.entries[start as usize..(start + len) as usize] {
            let needle = &self.needles.bytes[n as usize];
            let Some(s) = p.checked_sub(off as usize) else {
                continue;
            };
            if s < a || s + needle.len() > hay.len() {
                continue;
            }
            if &hay[s..s + needle.len()] == needle.as_slice() {
                out.push(occ(s - a, n));
            }
        }
    }
}

/// Whether this machine has a second core to search with.
pub fn parallel() -> bool {
    static P: OnceLock<bool> = OnceLock::new();
    *P.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(pats: &[&[u8]], hay: &[u8]) -> Vec<(usize, Vec<u8>)> {
        let mut out = Vec::new();
        for s in 0..hay.len() {
            for p in pats {
                if hay[s..].starts_with(p) {
                    out.push((s, p.to_vec()));
                }
            }
        }
        out
    }

    fn occurrences(f: &Prefilter, hay: &[u8], a: usize, b: usize) -> Vec<u64> {
        let mut out = Vec::new();
        f.occurrences(hay, a, b, &mut out);
        out
    }

    fn patterns<'a>(list: &[(&'a [u8], bool)]) -> Vec<Pattern<'a>> {
        list.iter()
            .map(|&(bytes, serving)| Pattern { bytes, serving })
            .collect()
    }

    #[test]
    fn every_start_of_every_needle_is_found_whatever_the_sample() {
        let pats: Vec<&[u8]> = vec![
            b"out of memory",
            b"CUDA error",
            b"NCCL",
            b"ab",
            b"Traceback (most recent call last)",
            b"abcabcab",
            b"bcabcabc",
        ];
        let list: Vec<(&[u8], bool)> = pats.iter().map(|p| (*p, false)).collect();
        let needles = Arc::new(Needles::new(&patterns(&list)));
        let mut hay = Vec::new();
        for i in 0..60_000u32 {
            hay.extend_from_slice(match i % 7 {
                0 => &b"xx CUDA error: out of memory\n"[..],
                1 => b"abcabcabcabcab NCCL\n",
                2 => b"Traceback (most recent call last):\n",
                3 => b"a\n",
                _ => b"plain line of text with nothing\n",
            });
        }
        // "ab" is in "abcabcab" and "bcabcabc": those are no needles.
        let minimal: Vec<&[u8]> = needles.bytes.iter().map(|b| b.as_slice()).collect();
        assert_eq!(minimal.len(), 5);
        let want: Vec<(usize, Vec<u8>)> = naive(&minimal, &hay);
        for sample in [&b""[..], &hay[..1 << 12], &hay[..]] {
            let f = Prefilter::new(needles.clone(), sample);
            for (a, b) in [(0, hay.len()), (3, hay.len() - 5), (0, 1_500_001)] {
                let got: Vec<(usize, Vec<u8>)> = occurrences(&f, &hay, a, b)
                    .into_iter()
                    .map(|o| {
                        let (p, n) = occ_parts(o);
                        (p + a, needles.bytes[n].clone())
                    })
                    .collect();
                let want: Vec<(usize, Vec<u8>)> = want
                    .iter()
                    .filter(|(s, p)| *s >= a && s + p.len() <= b)
                    .cloned()
                    .collect();
                // (No two short needles start at one position here.)
                assert_eq!(got, want, "region {a}..{b}");
            }
        }
        // And every pattern occurrence on a line, from the line's needles.
        let line = b"abcabcabcab CUDA error NCCL";
        let f = Prefilter::new(needles.clone(), b"");
        let occ: Vec<(usize, usize)> = occurrences(&f, line, 0, line.len())
            .into_iter()
            .map(occ_parts)
            .collect();
        let mut got = Vec::new();
        needles.patterns_in(line, 0, line.len(), occ.into_iter(), &mut got);
        let mut want: Vec<(usize, u32)> = Vec::new();
        for s in 0..line.len() {
            for (pi, p) in pats.iter().enumerate() {
                if line[s..].starts_with(p) {
                    want.push((s, pi as u32));
                }
            }
        }
        assert_eq!(got, want);
    }

    #[test]
    fn serving_markers_are_needles_of_their_own() {
        let list: Vec<(&[u8], bool)> = vec![
            (b"Avg prompt throughput", true),
            (b"\" 200", true),
            (b"Received request failed", false),
            (b"request failed", false),
            (b"Received request", true),
            (b"[rank", false),
        ];
        let needles = Arc::new(Needles::new(&patterns(&list)));
        let f = Prefilter::new(needles.clone(), b"");
        let hay = b"[rank1]: Avg prompt throughput: 1\n\"GET /\" 200 OK\nReceived request failed\n";
        let found: Vec<(Vec<u8>, bool)> = occurrences(&f, hay, 0, hay.len())
            .into_iter()
            .map(|o| {
                let n = occ_parts(o).1;
                (needles.bytes[n].clone(), needles.serving_only(n))
            })
            .collect();
        let want: Vec<(Vec<u8>, bool)> = vec![
            (b"[rank".to_vec(), false),
            (b"Avg prompt throughput".to_vec(), true),
            (b"\" 200".to_vec(), true),
            (b"Received request".to_vec(), true),
            (b"request failed".to_vec(), false),
        ];
        assert_eq!(found, want);
    }
}
