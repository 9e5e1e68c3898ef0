//! Writing output files: every report, rule file, summary, bundle file and regression
//! case golive writes goes through [`write_atomic`], and every folder made for outputs
//! through [`create_dirs`]. A failure is a [`WriteFailed`] (the CLI exits 4 for it).
//!
//! What happens at the output's name:
//! - nothing, a regular file, or a symbolic link to a regular file (or to nothing): the
//!   bytes go to a fresh temporary file in the same folder, created with a random name
//!   and `O_CREAT|O_EXCL` (the `tempfile` crate: a link planted at any name is never
//!   followed), which is then renamed over the name. A link at the name is replaced
//!   itself, never followed: the file it pointed to is not touched.
//! - a character device, a FIFO or a socket (`-o /dev/null`, `-o /dev/full`, a named
//!   pipe): written in place, opened without creating or truncating it; a FIFO without
//!   a reader is refused rather than waited for. A symbolic link to one is followed
//!   only when it belongs to this user or root (e.g. `/dev/stdout`); a link someone
//!   else planted is refused.
//! - `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`: this process's own
//!   descriptors, written in place whatever they are.
//! - a directory or a block device: refused.
//!
//! Folders: the existing part of the path is taken as given; each missing folder is
//! made with a plain `mkdir`, and a symbolic link found where one is made is refused.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;

/// An output file could not be written (the CLI exits 4 for it, not 2).
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}", path.display())]
pub struct WriteFailed {
    /// The file or directory that could not be written.
    pub path: PathBuf,
    /// Why: the operating system's error, or golive's refusal in words (e.g. "it is a directory").
    #[source]
    pub source: std::io::Error,
}

fn failed(path: &Path) -> impl FnOnce(std::io::Error) -> WriteFailed {
    let path = path.to_path_buf();
    move |source| WriteFailed { path, source }
}

fn refused(path: &Path, why: String) -> WriteFailed {
    WriteFailed {
        path: path.to_path_buf(),
        source: std::io::Error::other(why),
    }
}

/// Writes `bytes` to `path` as the module documentation says (a whole new file, or in
/// place for a device or pipe); returns the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    let dir = folder_of(path);
    create_dirs(dir)?;
    match open_in_place(path)? {
        Some(mut file) => {
            file.write_all(bytes)
                .and_then(|()| file.flush())
                .map_err(failed(path))?;
        }
        None => replace(path, dir, bytes)?,
    }
    Ok(path.to_path_buf())
}

/// The folder `path` is in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// A fresh temporary file beside `path`, renamed over it.
fn replace(path: &Path, dir: &Path, bytes: &[u8]) -> Result<(), WriteFailed> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("golive");
    // Mode 0666 less the umask, as File::create gives (tempfile's default is 0600).
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(failed(dir))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(failed(tmp.path()))?;
    tmp.persist(path).map_err(|e| failed(path)(e.error))?;
    Ok(())
}

/// This process's own descriptors, named as shells and Linux name them.
fn own_descriptor(path: &Path) -> bool {
    let p = path.as_os_str().as_encoded_bytes();
    matches!(p, b"/dev/stdout" | b"/dev/stderr")
        || p.starts_with(b"/dev/fd/")
        || p.starts_with(b"/proc/self/fd/")
}

/// The open file when `path` is to be written in place; `None` when it is to be
/// replaced by a new file; an error when it is refused or cannot be opened.
fn open_in_place(path: &Path) -> Result<Option<File>, WriteFailed> {
    if own_descriptor(path) {
        let file = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path)
            .map_err(failed(path))?;
        return Ok(Some(file));
    }
    let Ok(link) = std::fs::symlink_metadata(path) else {
        return Ok(None);
    };
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(None); // a link to nothing: replaced
    };
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(None);
    }
    if kind.is_dir() {
        return Err(refused(path, "it is a directory".into()));
    }
    if kind.is_block_device() {
        return Err(refused(
            path,
            "it is a block device (golive writes files, character devices and pipes)".into(),
        ));
    }
    if link.file_type().is_symlink() && !trusted_owner(link.uid()) {
        return Err(refused(
            path,
            format!(
                "it is a symbolic link to a device or pipe owned by uid {}, not by this user",
                link.uid()
            ),
        ));
    }
    open_special(path)
}

/// A link this user (or root) made may be followed.
fn trusted_owner(uid: u32) -> bool {
    let me = rustix::process::geteuid().as_raw();
    uid == me || uid == 0
}

/// Opens a character device, FIFO or socket for writing, without creating,
/// truncating or waiting for a FIFO's reader; `None` if what was opened turned out
/// to be a regular file (swapped in meanwhile: it is replaced instead).
fn open_special(path: &Path) -> Result<Option<File>, WriteFailed> {
    let flags = OFlags::NONBLOCK | OFlags::NOCTTY;
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(flags.bits() as i32)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) {
                refused(path, "it is a pipe that nobody reads".into())
            } else {
                failed(path)(e)
            }
        })?;
    let meta = file.metadata().map_err(failed(path))?;
    if meta.file_type().is_file() {
        return Ok(None);
    }
    // Writes block again as they would on any pipe or device.
    let now = rustix::fs::fcntl_getfl(&file).map_err(|e| failed(path)(e.into()))?;
    rustix::fs::fcntl_setfl(&file, now - OFlags::NONBLOCK).map_err(|e| failed(path)(e.into()))?;
    Ok(Some(file))
}

/// Makes `dir` and its missing parents; the part that exists is taken as given, and
/// a symbolic link found where a folder is made is refused (never followed).
pub fn create_dirs(dir: &Path) -> Result<(), WriteFailed> {
    let mut missing = Vec::new();
    let mut cur = dir;
    loop {
        match std::fs::metadata(cur) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => return Err(refused(cur, "it is not a directory".into())),
            Err(e) if e.kind() == ErrorKind::NotFound => missing.push(cur),
            Err(e) => return Err(failed(cur)(e)),
        }
        match cur.parent() {
            Some(p) if !p.as_os_str().is_empty() => cur = p,
            _ => break,
        }
    }
    for d in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().create(d) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                // Made by someone else meanwhile: a real folder is fine, a link is not.
                let m = std::fs::symlink_metadata(d).map_err(failed(d))?;
                if !m.is_dir() {
                    return Err(refused(
                        d,
                        "a symbolic link or file is where this output folder is to be made \
                         (links are not followed)"
                            .into(),
                    ));
                }
            }
            Err(e) => return Err(failed(d)(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn writes_and_replaces_a_file_leaving_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/deeper/report.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert!(leftovers(p.parent().unwrap()).is_empty());
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_ne!(
            mode & 0o044,
            0,
            "readable as File::create makes it: {mode:o}"
        );
    }

    #[test]
    fn a_link_at_the_name_or_at_the_old_temporary_name_clobbers_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let out = dir.path().join("alerts.yml");
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join(".alerts.yml.tmp")).unwrap();
        write_atomic(&out, b"rules").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&out).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "rules");
    }

    #[test]
    fn devices_are_written_in_place_and_a_full_one_fails() {
        write_atomic(Path::new("/dev/null"), b"x").unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        if OpenOptions::new().write(true).open("/dev/full").is_err() {
            return; // not writable here: nothing to learn
        }
        let err = write_atomic(Path::new("/dev/full"), b"x").unwrap_err();
        assert!(err.is::<WriteFailed>(), "{err:#}");
        assert!(std::fs::metadata("/dev/full")
            .unwrap()
            .file_type()
            .is_char_device());
    }

    #[test]
    fn a_fifo_without_reader_is_refused_and_with_one_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let err = write_atomic(&fifo, b"x").unwrap_err();
        assert!(format!("{err:#}").contains("nobody reads"), "{err:#}");
        let reader = OpenOptions::new()
            .read(true)
            .custom_flags(OFlags::NONBLOCK.bits() as i32)
            .open(&fifo)
            .unwrap();
        write_atomic(&fifo, b"through the pipe").unwrap();
        let mut got = String::new();
        std::io::Read::read_to_string(&mut &reader, &mut got).unwrap();
        assert_eq!(got, "through the pipe");
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn a_directory_target_is_refused_and_a_dangling_link_is_no_folder() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_atomic(dir.path(), b"x").unwrap_err();
        assert!(format!("{err:#}").contains("directory"), "{err:#}");
        let elsewhere = dir.path().join("elsewhere");
        let planted = dir.path().join("out");
        std::os::unix::fs::symlink(&elsewhere, &planted).unwrap();
        let err = write_atomic(&planted.join("report.json"), b"x").unwrap_err();
        assert!(err.is::<WriteFailed>(), "{err:#}");
        assert!(!elsewhere.exists(), "the link was followed");
    }
}
