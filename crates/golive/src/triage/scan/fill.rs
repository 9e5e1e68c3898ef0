//! The scanner's input, in buffers filled in place. Each buffer has free room in front of the
//! bytes read ([`Filled::start`]): the scanner copies the text it keeps from the buffer before
//! (history for context lines, and a partial line) there.
//!
//! A reader (a file, stdin, a gzip decoder) fills buffers on its own thread ([`ReadAhead`]),
//! so the kernel's copy or the decompression runs beside the scanner. Its buffers come back to
//! be filled again: no fresh pages to fault in, no zeroing before a read, and no copy of the
//! bytes read. (A `Read` between the two threads cost the scanner a copy and a zeroing of every
//! byte: 13% of its time on the crash-loop benchmark.) A slice is copied into buffers of its
//! size ([`SliceFill`]).
//!
//! Once the scanner has chosen its prefilter ([`Fill::search_with`]), the reader's thread also
//! searches each buffer's whole lines for the needles as it fills them ([`Searched`]): the
//! search then runs one buffer ahead of the line work instead of beside it, where the
//! scanner caught up with its block helper in every buffer and searched itself (on the
//! crash-loop benchmark the scanner's thread spent a third of its time searching).

use std::io::{self, Read};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender};
use std::sync::{Arc, OnceLock};

use super::super::prefilter::Prefilter;

/// Buffers in use at most: one scanned, one being filled, the rest filled and waiting (with
/// fewer, the scanner waited for a whole buffer while only the reader could run).
const BUFFERS: usize = 6;

/// One filled buffer.
pub(super) struct Filled {
    pub(super) buf: Vec<u8>,
    /// The bytes read are buf[start..end]; buf[..start] is free.
    pub(super) start: usize,
    pub(super) end: usize,
    /// Nothing follows these bytes.
    pub(super) last: bool,
    /// The read error that ended the input, after the bytes read.
    pub(super) err: Option<io::Error>,
    /// The needle occurrences of the whole lines read, when the reader searched them.
    pub(super) searched: Option<Searched>,
}

/// Occurrences a searched buffer may hold: one per this many bytes (8 bytes each, so at most
/// an eighth of the buffer's size more memory per buffer waiting).
const MAX_DENSITY: usize = 64;

/// The needle occurrences of buf[start..cut) of a [`Filled`]: its whole lines (all the bytes
/// read, after the last read), searched by the thread that filled it.
pub(super) struct Searched {
    /// The end of the bytes searched: after the last newline read, or the end of the input.
    pub(super) cut: usize,
    /// Their occurrences, sorted, relative to `start` (as [`Prefilter::occurrences`] gives).
    pub(super) occ: Vec<u64>,
}

impl Searched {
    /// The occurrences of `f`'s whole lines under `filter`; `None` when it read no newline.
    fn of(filter: &Prefilter, f: &Filled) -> Option<Self> {
        let read = &f.buf[f.start..f.end];
        let cut = if f.last {
            f.end
        } else {
            f.start + memchr::memrchr(b'\n', read)? + 1
        };
        let mut occ = Vec::new();
        filter.occurrences(&f.buf, f.start, cut, &mut occ);
        // Memory: up to BUFFERS - 1 searched buffers wait for the scanner. A buffer dense in
        // needles (hostile input; real logs hold about one per hundred bytes) is left to the
        // scanner, which searches one region at a time.
        if occ.len() > (cut - f.start) / MAX_DENSITY {
            return None;
        }
        occ.shrink_to_fit();
        Some(Searched { cut, occ })
    }
}

/// A source of filled buffers.
pub(super) trait Fill {
    /// The next buffer (at least `room` free bytes in front of the bytes read); `None` after
    /// the last one.
    fn next(&mut self, room: usize) -> Option<Filled>;
    /// A buffer the scanner is done with, to fill again.
    fn recycle(&mut self, _buf: Vec<u8>) {}
    /// The prefilter the scanner chose: a source that fills on its own thread searches the
    /// buffers it fills from now on with it ([`Filled::searched`]).
    fn search_with(&mut self, _filter: Arc<Prefilter>) {}
}

/// Fills buf[start..] from `inner` until it is full, the input ends or a read fails.
fn fill_from<R: Read>(inner: &mut R, buf: Vec<u8>, start: usize) -> Filled {
    let mut f = Filled {
        buf,
        start,
        end: start,
        last: false,
        err: None,
        searched: None,
    };
    while f.end < f.buf.len() {
        match inner.read(&mut f.buf[f.end..]) {
            Ok(0) => {
                f.last = true;
                break;
            }
            Ok(n) => f.end += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                f.last = true;
                f.err = Some(e);
                break;
            }
        }
    }
    f
}

/// A reader filling buffers of `room` free bytes and `chunk` bytes read on its own thread.
pub(super) struct ReadAhead {
    rx: Receiver<Filled>,
    spent: Sender<Vec<u8>>,
    room: usize,
    ended: bool,
    /// The prefilter the reader searches the buffers it fills with, once the scanner set it.
    filter: Arc<OnceLock<Arc<Prefilter>>>,
}

impl ReadAhead {
    pub(super) fn new<R: Read + Send + 'static>(mut inner: R, room: usize, chunk: usize) -> Self {
        // Filled buffers wait while the next is filled (memory stays bounded).
        let (tx, rx) = sync_channel(BUFFERS - 2);
        let (spent, spent_rx) = channel::<Vec<u8>>();
        let filter = Arc::new(OnceLock::<Arc<Prefilter>>::new());
        let search = filter.clone();
        std::thread::spawn(move || {
            let mut made = 0;
            loop {
                let buf = match spent_rx.try_recv() {
                    Ok(b) => b,
                    Err(_) if made < BUFFERS => {
                        made += 1;
                        // Zeroed once, by the allocator (fresh pages are zero already).
                        vec![0u8; room + chunk]
                    }
                    Err(_) => match spent_rx.recv() {
                        Ok(b) => b,
                        Err(_) => break, // the scanner is gone
                    },
                };
                let mut f = fill_from(&mut inner, buf, room);
                if let Some(p) = search.get() {
                    f.searched = Searched::of(p, &f);
                }
                let last = f.last;
                if tx.send(f).is_err() || last {
                    break;
                }
            }
        });
        ReadAhead {
            rx,
            spent,
            room,
            ended: false,
            filter,
        }
    }
}

impl Fill for ReadAhead {
    fn next(&mut self, room: usize) -> Option<Filled> {
        assert!(
            room <= self.room,
            "the scanner keeps more than the room made"
        );
        if self.ended {
            return None;
        }
        // The thread ends only after the last buffer (or by a panic: then the input ends).
        let f = self.rx.recv().ok();
        self.ended = f.as_ref().is_none_or(|f| f.last);
        f
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        let _ = self.spent.send(buf);
    }

    fn search_with(&mut self, filter: Arc<Prefilter>) {
        let _ = self.filter.set(filter);
    }
}

/// A slice, in buffers of up to `chunk` bytes read (the scanner's own size for a slice that
/// fits: a small log costs a small buffer).
pub(super) struct SliceFill<'a> {
    pub(super) data: &'a [u8],
    pub(super) chunk: usize,
}

impl Fill for SliceFill<'_> {
    fn next(&mut self, room: usize) -> Option<Filled> {
        if self.data.is_empty() {
            return None;
        }
        let n = self.data.len().min(self.chunk);
        let f = fill_from(&mut self.data, vec![0u8; room + n], room);
        debug_assert_eq!(f.end, room + n);
        Some(Filled {
            last: self.data.is_empty(),
            ..f
        })
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

    /// All bytes read from `src` in order, and the error that ended them.
    fn drain(mut src: impl Fill) -> (Vec<u8>, Option<io::Error>, usize) {
        let (mut got, mut err, mut buffers) = (Vec::new(), None, 0);
        while let Some(f) = src.next(7) {
            assert!(f.start >= 7);
            got.extend_from_slice(&f.buf[f.start..f.end]);
            err = f.err;
            buffers += 1;
            src.recycle(f.buf);
        }
        (got, err, buffers)
    }

    #[test]
    fn bytes_then_the_error_in_order() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
        let (got, err, _) = drain(ReadAhead::new(FailAfter(data.clone(), 0), 16, 1 << 20));
        assert_eq!(err.unwrap().kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(got, data);
    }

    #[test]
    fn a_whole_stream_arrives_in_full_buffers() {
        let data = b"line\n".repeat(500_000);
        let (got, err, n) = drain(ReadAhead::new(io::Cursor::new(data.clone()), 16, 1 << 20));
        assert!(err.is_none());
        assert_eq!(got, data);
        assert_eq!(n, data.len().div_ceil(1 << 20));
        let (got, _, n) = drain(SliceFill {
            data: &data,
            chunk: 1000,
        });
        assert_eq!(got, data);
        assert_eq!(n, data.len().div_ceil(1000));
    }

    /// The reader keeps the occurrences of a usual buffer; one dense in needles (hostile
    /// input) it leaves to the scanner, so waiting buffers stay small.
    #[test]
    fn a_buffer_dense_in_needles_is_left_to_the_scanner() {
        let rules = crate::triage::rules::RuleSet::load(&[] as &[&str]).unwrap();
        let filled = |text: String| {
            let mut buf = vec![0u8; 16];
            buf.extend_from_slice(text.as_bytes());
            Filled {
                end: buf.len(),
                buf,
                start: 16,
                last: false,
                err: None,
                searched: None,
            }
        };
        let usual = "the quick brown fox jumps over the lazy dog, again and again\n".repeat(200)
            + "RuntimeError: CUDA error: out of memory\n";
        let s = Searched::of(&rules.prefilter, &filled(usual.clone())).expect("searched");
        assert!(!s.occ.is_empty());
        assert_eq!(s.cut, 16 + usual.len());
        let dense = "NCCL error CUDA error OOM ERROR Traceback\n".repeat(1000);
        assert!(Searched::of(&rules.prefilter, &filled(dense)).is_none());
    }

    #[test]
    fn an_empty_input_gives_no_buffer() {
        assert_eq!(
            drain(SliceFill {
                data: b"",
                chunk: 9
            })
            .2,
            0
        );
        let (got, err, _) = drain(ReadAhead::new(io::empty(), 16, 64));
        assert!(got.is_empty() && err.is_none());
    }
}
