//! A short fuzz pass of every parser in the normal test suite (the long pass is
//! `scripts/fuzz.sh`): the real seed files, then mutated inputs, without a panic.

use golive::fuzz::{self, Rng};

use crate::common;

/// Mutated inputs per target in CI (the seeds are run first, whole).
const SMOKE: usize = 300;

#[test]
fn every_parser_survives_a_short_fuzz_pass() {
    // Without ../shared (not under CI: that fails) only the mutated inputs run.
    let shared = common::shared_dir().unwrap_or_else(|| "/nonexistent/shared".into());
    for t in fuzz::TARGETS {
        let seeds = fuzz::seeds(t, &shared);
        if shared.is_dir() {
            assert!(!seeds.is_empty(), "target {} has no seed files", t.name);
        }
        for s in &seeds {
            (t.run)(s);
        }
        let mut rng = Rng::new(7);
        let mut input = Vec::new();
        for _ in 0..SMOKE {
            fuzz::mutate(&mut rng, &seeds, t.dict, &mut input);
            (t.run)(&input);
        }
    }
}
