//! A reader that runs its source (a file, stdin, a gzip decoder) on its own thread, so the
//! kernel's copy or the decompression and the scanning use two cores. Blocks travel over a
//! bounded channel (memory stays bounded: at most `DEPTH` blocks in flight) and come back to be
//! filled again (no fresh pages to fault in per block); read errors arrive in order, after the
//! bytes before them.

use std::io::{self, Read};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender};

/// Bytes per block.
const BLOCK: usize = 1 << 20;
/// Blocks in flight.
const DEPTH: usize = 4;

pub struct ReadAhead {
    rx: Receiver<io::Result<Vec<u8>>>,
    /// Read blocks go back to the reading thread.
    spent: Sender<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
    done: bool,
}

impl ReadAhead {
    pub fn new<R: Read + Send + 'static>(mut inner: R) -> Self {
        let (tx, rx) = sync_channel(DEPTH);
        let (spent, spent_rx) = channel::<Vec<u8>>();
        std::thread::spawn(move || loop {
            let mut block = spent_rx
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(BLOCK));
            block.clear();
            match inner.by_ref().take(BLOCK as u64).read_to_end(&mut block) {
                Ok(0) => break,
                Ok(_) => {
                    if tx.send(Ok(block)).is_err() {
                        break; // the reader is gone
                    }
                }
                Err(e) => {
                    if !block.is_empty() && tx.send(Ok(block)).is_err() {
                        break;
                    }
                    let _ = tx.send(Err(e));
                    break;
                }
            }
        });
        ReadAhead {
            rx,
            spent,
            cur: Vec::new(),
            pos: 0,
            done: false,
        }
    }
}

impl Read for ReadAhead {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.cur.len() {
            if self.done {
                return Ok(0);
            }
            match self.rx.recv() {
                Ok(Ok(b)) => {
                    let spent = std::mem::replace(&mut self.cur, b);
                    if spent.capacity() > 0 {
                        let _ = self.spent.send(spent);
                    }
                    self.pos = 0;
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(_) => {
                    self.done = true;
                    return Ok(0);
                }
            }
        }
        let n = out.len().min(self.cur.len() - self.pos);
        out[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct FailAfter(Vec<u8>, usize);
    impl Read for FailAfter {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.1 >= self.0.len() {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "cut"));
            }
            let n = out.len().min(self.0.len() - self.1).min(1000);
            out[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
            self.1 += n;
            Ok(n)
        }
    }

    #[test]
    fn bytes_then_the_error_in_order() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
        let mut r = ReadAhead::new(FailAfter(data.clone(), 0));
        let mut got = Vec::new();
        let err = r.read_to_end(&mut got).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(got, data);
    }

    #[test]
    fn a_whole_stream_arrives() {
        let data = b"line\n".repeat(500_000);
        let mut got = Vec::new();
        ReadAhead::new(io::Cursor::new(data.clone()))
            .read_to_end(&mut got)
            .unwrap();
        assert_eq!(got, data);
    }
}
