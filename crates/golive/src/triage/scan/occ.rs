//! The needle occurrences of a region as the scanner consumes them. A stream's buffers after
//! the first few come searched by the thread that read them ([`OccView::searched`]: only the
//! seam in front is searched here). Otherwise (a slice, the first buffers) a large region is searched
//! block by block: a helper thread takes the blocks in order while the scanner handles the
//! lines of the blocks before, so the search of the region and the line work overlap on the
//! two cores (before, both cores searched the whole region and then one handled its lines).
//! The scanner asks for the occurrences up to a position ([`OccView::ensure`]) before it reads
//! them; a block nobody has taken yet it searches itself rather than wait.
//!
//! The first blocks of a region are small and double in size: the scanner needs the first
//! block at once and searches it itself (the helper is only starting), so a full-size first
//! block was a search on the scanner's thread in every region (about 8% of its time on a
//! crash loop) while the helper, ahead of it, later sat idle.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::super::prefilter::{self, occ_parts, parallel, Prefilter, LATTICE};

/// Bytes per block after the first few (a multiple of the prefilter's lattice).
const BLOCK: usize = 512 << 10;
/// Bytes of a region's first block; each next one is twice as large, up to BLOCK.
const FIRST_BLOCK: usize = 32 << 10;
/// Regions at least this large are searched beside the scanner.
const STREAM_MIN: usize = 2 * BLOCK;

/// The blocks of one region and who has taken which.
pub(super) struct Blocks<'a> {
    filter: &'a Prefilter,
    hay: &'a [u8],
    a: usize,
    /// Block i is [a + starts[i], a + starts[i + 1]) (the last entry is b - a).
    starts: Vec<usize>,
    slots: Vec<OnceLock<Vec<u64>>>,
    /// Blocks before this one are taken (being searched or searched).
    taken: AtomicUsize,
    /// The helper stopped (done, or it panicked): a block it took and did not finish is
    /// searched by the scanner.
    helper_gone: AtomicBool,
}

const _: () = assert!(BLOCK.is_multiple_of(LATTICE) && FIRST_BLOCK.is_multiple_of(LATTICE));

impl<'a> Blocks<'a> {
    /// The blocks of buf[a..b), or `None` when the region is small or there is one core.
    pub(super) fn new(filter: &'a Prefilter, buf: &'a [u8], a: usize, b: usize) -> Option<Self> {
        if b - a < STREAM_MIN || !parallel() {
            return None;
        }
        Some(Self::build(filter, buf, a, b))
    }

    fn build(filter: &'a Prefilter, buf: &'a [u8], a: usize, b: usize) -> Self {
        let mut starts = vec![0];
        let (mut at, mut size) = (0, FIRST_BLOCK);
        while at < b - a {
            at = (at + size).min(b - a);
            starts.push(at);
            size = (size * 2).min(BLOCK);
        }
        let n = starts.len() - 1;
        Blocks {
            filter,
            hay: &buf[..b],
            a,
            starts,
            slots: (0..n).map(|_| OnceLock::new()).collect(),
            taken: AtomicUsize::new(0),
            helper_gone: AtomicBool::new(false),
        }
    }

    fn search(&self, i: usize) {
        let (from, to) = (self.a + self.starts[i], self.a + self.starts[i + 1]);
        let mut out = Vec::new();
        self.filter
            .occurrences_block(self.hay, self.a, from, to, &mut out);
        let _ = self.slots[i].set(out);
    }

    /// Takes and searches the next block; false when none is left.
    fn search_next(&self) -> bool {
        let i = self.taken.fetch_add(1, Ordering::AcqRel);
        if i >= self.slots.len() {
            return false;
        }
        self.search(i);
        true
    }

    /// The helper thread's work: every block not taken yet, in order.
    pub(super) fn help(&self) {
        struct Gone<'b>(&'b AtomicBool);
        impl Drop for Gone<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Release);
            }
        }
        let _gone = Gone(&self.helper_gone);
        while self.search_next() {}
    }

    /// Block i's occurrences, sorted, relative to `a`.
    fn get(&self, i: usize) -> &[u64] {
        // Take blocks up to i (searched here) unless the helper has.
        while self.taken.load(Ordering::Acquire) <= i && self.search_next() {}
        loop {
            if let Some(v) = self.slots[i].get() {
                return v;
            }
            if self.helper_gone.load(Ordering::Acquire) {
                self.search(i);
            } else {
                // The helper is searching it (a block takes a fraction of a millisecond).
                std::thread::yield_now();
            }
        }
    }
}

/// The needle occurrences the reader found in a buffer's new bytes (see
/// [`super::fill::Searched`]), in the positions of the text scanned.
pub(super) struct Pre {
    /// Where the bytes searched start: after the text kept from the buffer before.
    pub(super) from: usize,
    /// Where they end.
    pub(super) cut: usize,
    /// Their occurrences, sorted, relative to `from`.
    pub(super) occ: Vec<u64>,
}

/// The occurrences known so far of buf[a..b) (sorted; positions relative to `a`).
pub(super) struct OccView<'b, 'a> {
    /// The prefilter whose needles these are.
    pub(super) filter: &'b Prefilter,
    pub(super) occ: Vec<u64>,
    a: usize,
    /// Every occurrence starting before this absolute position is in `occ`.
    known_to: usize,
    blocks: Option<&'b Blocks<'a>>,
    next_block: usize,
    reach: usize,
}

impl<'b, 'a> OccView<'b, 'a> {
    /// All occurrences of buf[a..b), searched now (`blocks` is `None`), or none yet.
    pub(super) fn new(
        filter: &'b Prefilter,
        buf: &[u8],
        a: usize,
        b: usize,
        mut occ: Vec<u64>,
        blocks: Option<&'b Blocks<'a>>,
    ) -> Self {
        occ.clear();
        let known_to = if blocks.is_some() {
            a
        } else {
            filter.occurrences(buf, a, b, &mut occ);
            usize::MAX
        };
        OccView {
            filter,
            occ,
            a,
            known_to,
            blocks,
            next_block: 0,
            reach: filter.reach(),
        }
    }

    /// All occurrences of buf[a..b) from `pre`, those of buf[pre.from..b) that the reader
    /// searched (`pre.cut` is `b`), and the seam before it (the partial line kept from the
    /// buffer before) searched here: the needles starting before `pre.from` lie inside the
    /// next `reach` bytes.
    pub(super) fn searched(
        filter: &'b Prefilter,
        buf: &[u8],
        a: usize,
        b: usize,
        mut occ: Vec<u64>,
        pre: &Pre,
    ) -> Self {
        debug_assert_eq!(pre.cut, b);
        occ.clear();
        if a < pre.from {
            filter.occurrences(buf, a, (pre.from + filter.reach()).min(b), &mut occ);
            let seam = pre.from - a;
            occ.retain(|&o| occ_parts(o).0 < seam);
        }
        // The reader's positions are relative to pre.from; those before `a` (inside the rest
        // of an over-long line skipped) are not the region's.
        occ.extend(pre.occ.iter().filter_map(|&o| {
            let (p, needle) = occ_parts(o);
            let at = pre.from + p;
            (at >= a).then(|| prefilter::occ(at - a, needle as u32))
        }));
        OccView {
            filter,
            occ,
            a,
            known_to: usize::MAX,
            blocks: None,
            next_block: 0,
            reach: filter.reach(),
        }
    }

    /// Absolute start of occurrence i.
    pub(super) fn at(&self, i: usize) -> usize {
        self.a + occ_parts(self.occ[i]).0
    }

    /// Whether occurrence i is known to be the next one at or after the position scanned.
    pub(super) fn settled(&self, i: usize) -> bool {
        i < self.occ.len() && self.at(i) < self.known_to
    }

    /// Whether every occurrence of the region is in `occ`.
    pub(super) fn complete(&self) -> bool {
        self.known_to == usize::MAX
    }

    /// Adds the next block's occurrences; false when all are in.
    pub(super) fn pull(&mut self) -> bool {
        let Some(blocks) = self.blocks else {
            return false;
        };
        if self.next_block >= blocks.slots.len() {
            self.known_to = usize::MAX;
            return false;
        }
        let new = blocks.get(self.next_block);
        self.next_block += 1;
        // A block's occurrences start at most `reach` before it: they sort among the last
        // ones only (all at or after `known_to`, which nothing has read past).
        let from = self
            .occ
            .partition_point(|&o| new.first().is_none_or(|&f| o < f));
        self.occ.extend_from_slice(new);
        self.occ[from..].sort_unstable();
        self.known_to = if self.next_block == blocks.slots.len() {
            usize::MAX
        } else {
            (self.a + blocks.starts[self.next_block]).saturating_sub(self.reach)
        };
        true
    }

    /// Makes every occurrence starting before `x` (absolute) known.
    pub(super) fn ensure(&mut self, x: usize) {
        while self.known_to < x && self.pull() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::triage::rules::RuleSet;

    /// At least `len` bytes of a real failure line, each copy cut by one more byte in front (up
    /// to `shifts`), so needles fall at every offset.
    fn shifted_failures(len: usize, shifts: usize) -> Vec<u8> {
        let line = "(EngineCore pid=1) ERROR 08-03 21:49:23 [core.py:1231] RuntimeError: CUDA error: out of memory; NCCL error: unhandled system error\n";
        let mut buf = Vec::new();
        let mut i = 0;
        while buf.len() < len {
            buf.extend_from_slice(&line.as_bytes()[i % shifts..]);
            i += 1;
        }
        buf
    }

    /// The region's occurrences from the reader's search of its new bytes and the seam
    /// searched here are those of the whole region, wherever the region starts: in the text
    /// kept from the buffer before (a partial line), at the new bytes, or inside them (the
    /// rest of an over-long line skipped).
    #[test]
    fn the_reader_s_search_and_the_seam_give_the_whole_region_s_occurrences() {
        let rules = RuleSet::load(&[] as &[&str]).unwrap();
        let f = &rules.prefilter;
        let buf = shifted_failures(20_000, 11);
        let b = buf.len();
        let mut checked = 0;
        // The new bytes start anywhere, needles straddling them included.
        for from in (1000..1400).step_by(7) {
            let mut occ = Vec::new();
            f.occurrences(&buf, from, b, &mut occ);
            let pre = Pre { from, cut: b, occ };
            for a in [0, 500, from - 3, from, from + 5, from + 300] {
                let mut whole = Vec::new();
                f.occurrences(&buf, a, b, &mut whole);
                let v = OccView::searched(f, &buf, a, b, Vec::new(), &pre);
                assert!(v.complete());
                assert_eq!(v.occ, whole, "from {from}, a {a}");
                checked += whole.len();
            }
        }
        assert!(checked > 1000);
    }

    #[test]
    fn the_occurrences_pulled_block_by_block_are_those_of_the_whole_region() {
        let rules = RuleSet::load(&[] as &[&str]).unwrap();
        let f = &rules.prefilter;
        // Needles across every block boundary.
        let buf = shifted_failures(5 * BLOCK + 777, 7);
        let (a, b) = (13, buf.len());
        let mut whole = Vec::new();
        f.occurrences(&buf, a, b, &mut whole);
        assert!(!whole.is_empty());
        let blocks = Blocks::build(f, &buf, a, b);
        let mut v = OccView::new(f, &buf, a, b, Vec::new(), Some(&blocks));
        std::thread::scope(|s| {
            s.spawn(|| blocks.help());
            v.ensure(a + 3 * BLOCK);
            // What is known is a sorted prefix of the whole list.
            let n = v
                .occ
                .iter()
                .take_while(|&&o| a + occ_parts(o).0 < v.known_to)
                .count();
            assert_eq!(&v.occ[..n], &whole[..n]);
            v.ensure(usize::MAX);
        });
        assert!(v.complete());
        assert_eq!(v.occ, whole);
    }
}
