//! Bounded reads of input files: every file argument (profiles, cases, tools, rules,
//! reports, shard files, bundles, configs) is read with a size cap, and a file that is
//! not a regular file (FIFO, device, a pipe that stays open) also with a deadline, so
//! `/dev/zero` or a silent FIFO gives a clear error instead of growing memory or hanging.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;

/// Default cap of one input file: far above any profile, case or report golive writes.
pub const MAX_INPUT: u64 = 32 << 20;

/// The range [`set_max_input`] accepts: a few KiB (a profile) to 4 GiB.
pub const MAX_INPUT_RANGE: std::ops::RangeInclusive<u64> = (4 << 10)..=(4 << 30);

static CAP: AtomicU64 = AtomicU64::new(MAX_INPUT);

/// Sets the cap of every input file read from now on (the binary's `--max-input`, for a
/// user whose cases, bundles or reports are larger than the default), kept within
/// [`MAX_INPUT_RANGE`]. Process-wide, like the allocator: set once at start.
pub fn set_max_input(bytes: u64) {
    CAP.store(
        bytes.clamp(*MAX_INPUT_RANGE.start(), *MAX_INPUT_RANGE.end()),
        Ordering::Relaxed,
    );
}

/// The cap of one input file: [`MAX_INPUT`] unless [`set_max_input`] changed it.
pub fn max_input() -> u64 {
    CAP.load(Ordering::Relaxed)
}

/// How long a non-regular file (FIFO, device, pipe) may take to be read to its end.
pub const READ_DEADLINE: Duration = Duration::from_secs(10);

/// The bytes of `path`, or an error when it holds more than `max` bytes or (not being a
/// regular file) does not end within [`READ_DEADLINE`].
pub fn read_capped(path: &Path, max: u64) -> anyhow::Result<Vec<u8>> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if meta.is_file() {
        anyhow::ensure!(
            meta.len() <= max,
            "{} is {} bytes, more than the {max} bytes this input may have (--max-input raises the cap)",
            path.display(),
            meta.len()
        );
        return Head { max, cut_ok: false }.read(path);
    }
    anyhow::ensure!(
        !meta.is_dir(),
        "{} is a directory, not a file",
        path.display()
    );
    read_with_deadline(path, Head { max, cut_ok: false }, READ_DEADLINE)
}

/// At most the first `max` bytes of `path` (a log whose start is what counts), with the
/// deadline of [`read_capped`] for a file that is not a regular one.
pub fn read_head(path: &Path, max: u64) -> anyhow::Result<Vec<u8>> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    anyhow::ensure!(
        !meta.is_dir(),
        "{} is a directory, not a file",
        path.display()
    );
    let head = Head { max, cut_ok: true };
    if meta.is_file() {
        return head.read(path);
    }
    read_with_deadline(path, head, READ_DEADLINE)
}

/// [`read_capped`] as UTF-8 text.
pub fn read_text_capped(path: &Path, max: u64) -> anyhow::Result<String> {
    let bytes = read_capped(path, max)?;
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", path.display()))
}

/// [`read_text_capped`] with the cap of [`max_input`].
pub fn read_text(path: impl AsRef<Path>) -> anyhow::Result<String> {
    read_text_capped(path.as_ref(), max_input())
}

/// How much of a file to read: at most `max` bytes; more is an error unless `cut_ok`.
#[derive(Clone, Copy)]
struct Head {
    max: u64,
    cut_ok: bool,
}

impl Head {
    fn read(self, path: &Path) -> anyhow::Result<Vec<u8>> {
        let f =
            std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut buf = Vec::new();
        f.take(self.max.saturating_add(1))
            .read_to_end(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if buf.len() as u64 > self.max {
            anyhow::ensure!(
                self.cut_ok,
                "{} has more than the {} bytes this input may have (--max-input raises the cap)",
                path.display(),
                self.max
            );
            buf.truncate(self.max as usize);
        }
        Ok(buf)
    }
}

/// Opening and reading a FIFO can block for ever: both run on a thread that is left
/// behind (blocked) when the deadline passes.
fn read_with_deadline(path: &Path, head: Head, deadline: Duration) -> anyhow::Result<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(head.read(&owned));
    });
    match rx.recv_timeout(deadline) {
        Ok(result) => result,
        Err(_) => anyhow::bail!(
            "{} is not a regular file and did not end within {} s",
            path.display(),
            deadline.as_secs()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_over_the_cap_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "0123456789").unwrap();
        assert_eq!(read_capped(&p, 10).unwrap().len(), 10);
        let e = read_capped(&p, 9).unwrap_err().to_string();
        assert!(e.contains("more than the 9 bytes"), "{e}");
        assert!(read_text_capped(dir.path(), 9).is_err());
    }

    #[test]
    fn an_endless_device_ends_at_the_cap() {
        let e = read_capped(Path::new("/dev/zero"), 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than the 1048576 bytes"), "{e}");
        assert_eq!(
            read_head(Path::new("/dev/zero"), 1000).unwrap(),
            vec![0; 1000]
        );
    }

    #[test]
    fn a_silent_fifo_ends_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fifo");
        let ok = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(ok.success());
        let start = std::time::Instant::now();
        let head = Head {
            max: 100,
            cut_ok: false,
        };
        let e = read_with_deadline(&p, head, Duration::from_millis(200)).unwrap_err();
        assert!(e.to_string().contains("did not end within"), "{e}");
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
