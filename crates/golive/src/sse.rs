//! Incremental Server-Sent Events decoder for OpenAI-style streams.
//!
//! Bytes arrive in arbitrary chunks; events end at a blank line. Only `data:`
//! fields matter for the OpenAI wire format; comments (`:`) and other fields are
//! skipped. Works on bytes (no UTF-8 decoding of the whole stream) so a broken
//! multi-byte character is reported per event, not for the stream.

/// Upper bound on one buffered event, so a server that never ends an event cannot
/// make the client grow without bound.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One decoded `data:` payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseEvent {
    /// The `data:` lines of one event, joined with `\n`.
    Data(Vec<u8>),
    /// `data: [DONE]`: the OpenAI end-of-stream marker.
    Done,
}

/// Why a stream cannot be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    /// One event grew past [`MAX_EVENT_BYTES`] without ending.
    #[error("SSE event larger than {MAX_EVENT_BYTES} bytes")]
    EventTooLarge,
}

/// Feed bytes with [`SseDecoder::push`], then drain events with [`SseDecoder::next_event`].
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Start of the unparsed part of `buf`.
    pos: usize,
    data: Vec<u8>,
    has_data: bool,
}

impl SseDecoder {
    /// A decoder with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        if self.buf.len() - self.pos + bytes.len() + self.data.len() > MAX_EVENT_BYTES {
            return Err(SseError::EventTooLarge);
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// The next complete event, if one is buffered.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            let rest = &self.buf[self.pos..];
            let nl = memchr::memchr(b'\n', rest)?;
            let mut line = &rest[..nl];
            if let Some(stripped) = line.strip_suffix(b"\r") {
                line = stripped;
            }
            let line_len = nl + 1;
            if line.is_empty() {
                self.pos += line_len;
                if self.has_data {
                    self.has_data = false;
                    let data = std::mem::take(&mut self.data);
                    if data == b"[DONE]" {
                        return Some(SseEvent::Done);
                    }
                    return Some(SseEvent::Data(data));
                }
                continue;
            }
            if let Some(value) = line.strip_prefix(b"data:") {
                let value = value.strip_prefix(b" ").unwrap_or(value);
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            self.pos += line_len;
            self.compact();
        }
    }

    /// Bytes received but not yet part of a complete event (a cut-off stream leaves some).
    pub fn pending_bytes(&self) -> usize {
        self.buf.len() - self.pos + self.data.len()
    }

    fn compact(&mut self) {
        if self.pos > 64 * 1024 && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(d: &mut SseDecoder) -> Vec<SseEvent> {
        std::iter::from_fn(|| d.next_event()).collect()
    }

    #[test]
    fn events_split_across_chunks() {
        let stream = b"data: {\"a\":1}\n\n: keep-alive\n\ndata: {\"b\":2}\r\n\r\ndata: [DONE]\n\n";
        for split in 0..stream.len() {
            let mut d = SseDecoder::new();
            d.push(&stream[..split]).unwrap();
            let mut got = drain(&mut d);
            d.push(&stream[split..]).unwrap();
            got.extend(drain(&mut d));
            assert_eq!(
                got,
                vec![
                    SseEvent::Data(b"{\"a\":1}".to_vec()),
                    SseEvent::Data(b"{\"b\":2}".to_vec()),
                    SseEvent::Done
                ],
                "split at {split}"
            );
        }
    }

    #[test]
    fn multi_line_data_is_joined_and_cut_stream_is_pending() {
        let mut d = SseDecoder::new();
        d.push(b"data: a\ndata: b\n\ndata: {\"cut").unwrap();
        assert_eq!(d.next_event(), Some(SseEvent::Data(b"a\nb".to_vec())));
        assert_eq!(d.next_event(), None);
        assert!(d.pending_bytes() > 0);
    }
}
