//! The mutator of the fuzz loop: a seedable generator, the edits that build each input from
//! the seeds and dictionary tokens, and the minimiser of a failing input.

/// A fast, seedable pseudo-random generator (xorshift64*): the loop needs millions of
/// numbers per second and reproducible runs, nothing cryptographic.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Inputs are kept below this size (parsers see real files of a few KiB to a few MiB;
/// larger inputs only slow the loop down).
pub const MAX_INPUT: usize = 64 << 10;

/// Builds the next input into `out`: a window of a seed, then a few random edits.
pub fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], dict: &[&str], out: &mut Vec<u8>) {
    out.clear();
    if !seeds.is_empty() {
        let s = &seeds[rng.below(seeds.len())];
        if !s.is_empty() {
            // Mostly a window of a few lines (fast), sometimes the whole seed.
            let (a, b) = if rng.below(8) == 0 || s.len() <= 256 {
                (0, s.len())
            } else {
                let a = rng.below(s.len());
                let len = 1 + rng.below(4096.min(s.len() - a));
                (a, a + len)
            };
            out.extend_from_slice(&s[a..b]);
        }
    }
    let edits = 1 + rng.below(8);
    for _ in 0..edits {
        let len = out.len();
        match rng.below(10) {
            0 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                out[i] = rng.next_u64() as u8;
            }
            2 | 3 if !dict.is_empty() => {
                let tok = dict[rng.below(dict.len())].as_bytes();
                let at = rng.below(len + 1);
                out.splice(at..at, tok.iter().copied());
            }
            4 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64)).min(len);
                out.drain(a..b);
            }
            5 if len > 0 => {
                // Repeat a range (long lines, many frames, deep nesting).
                let a = rng.below(len);
                let b = (a + 1 + rng.below(256)).min(len);
                let times = 1 + rng.below(64);
                let piece = out[a..b].to_vec();
                for _ in 0..times {
                    if out.len() + piece.len() > MAX_INPUT {
                        break;
                    }
                    out.splice(b..b, piece.iter().copied());
                }
            }
            6 if !seeds.is_empty() => {
                // Splice in part of another seed.
                let s = &seeds[rng.below(seeds.len())];
                if !s.is_empty() {
                    let a = rng.below(s.len());
                    let b = (a + 1 + rng.below(512)).min(s.len());
                    let at = rng.below(len + 1);
                    out.splice(at..at, s[a..b].iter().copied());
                }
            }
            7 if len > 0 => out.truncate(rng.below(len)),
            8 => {
                let at = rng.below(len + 1);
                let b = [b'\n', b'\r', b'\t', b' ', 0, 0xff, 0xc3, b'"', b'\\'][rng.below(9)];
                out.insert(at, b);
            }
            _ if len > 0 => {
                // Swap two bytes.
                let i = rng.below(len);
                let j = rng.below(len);
                out.swap(i, j);
            }
            _ => {}
        }
    }
    out.truncate(MAX_INPUT);
}

/// Shrinks an input that makes `fails` true, by removing ever smaller chunks (for regression
/// tests with the minimal input).
pub fn minimize(input: &[u8], mut fails: impl FnMut(&[u8]) -> bool) -> Vec<u8> {
    let mut cur = input.to_vec();
    let mut chunk = cur.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        let mut changed = false;
        while i < cur.len() {
            let end = (i + chunk).min(cur.len());
            let mut cand = cur[..i].to_vec();
            cand.extend_from_slice(&cur[end..]);
            if fails(&cand) {
                cur = cand;
                changed = true;
            } else {
                i += chunk;
            }
        }
        if chunk == 1 && !changed {
            break;
        }
        if !changed {
            chunk = (chunk / 2).max(1);
        }
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimize_finds_the_byte_that_fails() {
        let input = b"aaaaaaaaaXbbbbbbbbbb";
        let m = minimize(input, |i| i.contains(&b'X'));
        assert_eq!(m, b"X");
    }

    #[test]
    fn mutate_stays_within_bounds() {
        let seeds = vec![b"hello\nworld\n".to_vec(), vec![b'x'; 100_000]];
        let mut rng = Rng::new(1);
        let mut out = Vec::new();
        let mut distinct = std::collections::HashSet::new();
        for _ in 0..2000 {
            mutate(&mut rng, &seeds, &["tok"], &mut out);
            assert!(out.len() <= MAX_INPUT);
            distinct.insert(out.clone());
        }
        assert!(distinct.len() > 1000, "the mutator repeats itself");
    }
}
