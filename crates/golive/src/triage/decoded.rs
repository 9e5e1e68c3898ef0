//! A `Read` over an input that a decoder turns into text one piece at a time (UTF-16, Docker
//! `json-file` records): the decoder fills the next piece, [`Decoded`] hands it out.

use std::io::{self, Read};

/// Decodes the next piece of its input.
pub trait Refill {
    /// Appends the next decoded piece to `out` (empty on entry); false at the end of the input.
    fn refill(&mut self, out: &mut Vec<u8>) -> io::Result<bool>;
}

/// The text a [`Refill`] decodes, as a reader.
pub struct Decoded<D> {
    decoder: D,
    out: Vec<u8>,
    pos: usize,
}

impl<D> Decoded<D> {
    pub fn new(decoder: D) -> Self {
        Decoded {
            decoder,
            out: Vec::new(),
            pos: 0,
        }
    }
}

impl<D: Refill> Read for Decoded<D> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.out.len() {
            self.out.clear();
            self.pos = 0;
            if !self.decoder.refill(&mut self.out)? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.out.len() - self.pos);
        buf[..n].copy_from_slice(&self.out[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
