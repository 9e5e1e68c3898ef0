//! Logs written as UTF-16 with a byte-order mark: what Windows PowerShell's `>` and
//! `Out-File` write (`docker logs vllm > vllm.log` on a Windows host). Read as they are, every
//! other byte is a NUL and the log reads as binary, so such an input is decoded to UTF-8 before
//! it is scanned, in bounded chunks (std's `char::decode_utf16`; a lone surrogate becomes
//! U+FFFD). Line numbers are unchanged.

use std::io::{self, BufRead, BufReader, Read};

use super::decoded::{Decoded, Refill};

/// Bytes of UTF-16 decoded at a time.
const CHUNK: usize = 64 << 10;

/// The input, decoded to UTF-8 when it starts with a UTF-16 byte-order mark.
pub fn decoded(inner: Box<dyn Read + Send>) -> io::Result<Box<dyn Read + Send>> {
    let mut r = BufReader::with_capacity(1 << 20, inner);
    let little = match r.fill_buf()? {
        [0xFF, 0xFE, ..] => true,
        [0xFE, 0xFF, ..] => false,
        _ => return Ok(Box::new(r)),
    };
    r.consume(2);
    Ok(Box::new(Decoded::new(Units {
        inner: r,
        little,
        units: Vec::new(),
    })))
}

/// Reads code units and decodes them.
struct Units<R> {
    inner: BufReader<R>,
    little: bool,
    /// Code units read and not yet decoded (a high surrogate waiting for its pair).
    units: Vec<u16>,
}

impl<R: Read> Refill for Units<R> {
    /// The next chunk decoded.
    fn refill(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        let mut bytes = Vec::with_capacity(CHUNK);
        (&mut self.inner)
            .take(CHUNK as u64)
            .read_to_end(&mut bytes)?;
        if bytes.len() % 2 == 1 {
            // An odd byte: read one more to complete the unit (or the input ends in half a unit).
            let mut one = [0u8; 1];
            if self.inner.read(&mut one)? == 1 {
                bytes.push(one[0]);
            } else {
                bytes.pop();
            }
        }
        let end = bytes.is_empty();
        self.units.extend(bytes.chunks_exact(2).map(|p| {
            if self.little {
                u16::from_le_bytes([p[0], p[1]])
            } else {
                u16::from_be_bytes([p[0], p[1]])
            }
        }));
        if end && self.units.is_empty() {
            return Ok(false);
        }
        // Keep a trailing high surrogate for the next chunk, unless the input ended.
        let keep = !end
            && self
                .units
                .last()
                .is_some_and(|u| (0xD800..0xDC00).contains(u));
        let upto = self.units.len() - usize::from(keep);
        let mut buf = [0u8; 4];
        for c in char::decode_utf16(self.units.drain(..upto)) {
            let c = c.unwrap_or(char::REPLACEMENT_CHARACTER);
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(input: Vec<u8>) -> Vec<u8> {
        let mut out = Vec::new();
        decoded(Box::new(io::Cursor::new(input)))
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    fn utf16(text: &str, little: bool) -> Vec<u8> {
        let mut v = if little {
            vec![0xFF, 0xFE]
        } else {
            vec![0xFE, 0xFF]
        };
        for u in text.encode_utf16() {
            v.extend(if little {
                u.to_le_bytes()
            } else {
                u.to_be_bytes()
            });
        }
        v
    }

    #[test]
    fn utf16_with_a_byte_order_mark_is_decoded_both_ways_across_chunks() {
        // Long enough to cross chunks; a character outside the BMP (a surrogate pair) at every
        // odd offset so that some pair is split by a chunk boundary.
        let line = "ERROR 06-17 11:25:22 torch.OutOfMemoryError: CUDA out of memory 🚀\r\n";
        let text = line.repeat(3 * CHUNK / line.len());
        for little in [true, false] {
            assert_eq!(read_all(utf16(&text, little)), text.as_bytes());
        }
    }

    #[test]
    fn other_input_passes_through_and_half_a_unit_at_the_end_is_dropped() {
        assert_eq!(read_all(b"INFO plain\n".to_vec()), b"INFO plain\n");
        let mut odd = utf16("ab", true);
        odd.push(0x63);
        assert_eq!(read_all(odd), b"ab");
    }
}
