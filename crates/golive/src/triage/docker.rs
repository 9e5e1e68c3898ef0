//! Docker's `json-file` log driver (`/var/lib/docker/containers/<id>/<id>-json.log`): each
//! line is `{"log":"text\n","stream":"stderr","time":"..."}` with the text JSON-escaped
//! (`\"`, `\u001b`, `\t`). Read as it is, no rule would match its quotes or its escape codes,
//! so an input whose first line is such a record is decoded back to the text the container
//! wrote before it is scanned.
//!
//! Line numbers stay those of the file: every record holds one line, except a line longer
//! than Docker's 16 KiB buffer, which it splits over records without the final `\n` (they
//! join back into one line here, as the container wrote it). A line that is no record
//! (a truncated write, an editor's addition) passes through as it is.

use std::borrow::Cow;
use std::io::{self, BufRead, BufReader, Read};

use serde::Deserialize;

use super::decoded::{Decoded, Refill};
use super::MAX_LINE;

/// One record is read up to this many bytes; a longer one passes through in pieces, as the
/// scanner cuts any over-long line. JSON escaping at most sextuples a byte (`\u0000`).
const MAX_RECORD: u64 = 6 * MAX_LINE as u64;

/// The start every Docker `json-file` record has.
const RECORD_START: &[u8] = b"{\"log\":\"";

#[derive(Deserialize)]
struct Record<'a> {
    #[serde(borrow)]
    log: Cow<'a, str>,
}

/// The input, decoded when its first line is a Docker `json-file` record.
pub fn decoded(inner: Box<dyn Read + Send>) -> io::Result<Box<dyn Read + Send>> {
    let mut r = BufReader::with_capacity(1 << 20, inner);
    let head = r.fill_buf()?;
    let start = head
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(head.len());
    if head[start..].starts_with(RECORD_START) {
        Ok(Box::new(Decoded::new(Records {
            inner: r,
            record: Vec::new(),
        })))
    } else {
        Ok(Box::new(r))
    }
}

/// Reads records and decodes the text they hold.
struct Records<R> {
    inner: BufReader<R>,
    record: Vec<u8>,
}

impl<R: Read> Refill for Records<R> {
    /// The next record's text.
    fn refill(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        self.record.clear();
        let n = (&mut self.inner)
            .take(MAX_RECORD)
            .read_until(b'\n', &mut self.record)?;
        if n == 0 {
            return Ok(false);
        }
        let body = self.record.strip_suffix(b"\n").unwrap_or(&self.record);
        match serde_json::from_slice::<Record>(body) {
            Ok(rec) => out.extend_from_slice(rec.log.as_bytes()),
            Err(_) => out.extend_from_slice(&self.record),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(input: &str) -> String {
        let mut out = String::new();
        decoded(Box::new(io::Cursor::new(input.as_bytes().to_vec())))
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn records_are_decoded_to_the_text_the_container_wrote() {
        let input = concat!(
            "{\"log\":\"INFO:     10.0.0.1:5000 - \\\"POST /v1/completions HTTP/1.1\\\" 200 OK\\n\",\"stream\":\"stdout\",\"time\":\"2025-01-01T00:00:00Z\"}\n",
            "{\"log\":\"\\u001b[31mERROR\\u001b[0m\\tboom\\n\",\"stream\":\"stderr\",\"time\":\"2025-01-01T00:00:01Z\"}\n",
            "not a record\n",
            "{\"log\":\"a line split \",\"stream\":\"stderr\",\"time\":\"t\"}\n",
            "{\"log\":\"in two\\n\",\"stream\":\"stderr\",\"time\":\"t\"}\n",
        );
        assert_eq!(
            read_all(input),
            "INFO:     10.0.0.1:5000 - \"POST /v1/completions HTTP/1.1\" 200 OK\n\u{1b}[31mERROR\u{1b}[0m\tboom\nnot a record\na line split in two\n"
        );
    }

    #[test]
    fn other_input_passes_through_unchanged() {
        let input = "INFO start\n{\"log\":\"x\\n\"}\n";
        assert_eq!(read_all(input), input);
    }

    #[test]
    fn a_record_longer_than_the_bound_passes_through_in_pieces() {
        let long = "x".repeat(MAX_RECORD as usize + 10);
        let input = format!("{{\"log\":\"{long}\\n\"}}\n{{\"log\":\"after\\n\"}}\n");
        let out = read_all(&input);
        assert!(out.ends_with("after\n"), "{}", &out[out.len() - 20..]);
        assert_eq!(
            out.len(),
            input.len() - "{\"log\":\"after\\n\"}\n".len() + 6
        );
    }
}
