//! Issue 24's output defects, driven through the real `golive` binary: planted links at
//! an output's name or at the old predictable temporary name clobber nothing, an output
//! that cannot be written (`-o /dev/full`) exits 4 and leaves the device alone, a failed
//! check keeps exit 1 when the reader of stdout is gone, and an `--ssh` host that is an
//! option is refused before ssh runs.

use crate::common;

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Command;

use common::bundle::{healthy, put};

/// An empty baseline for `golive rules` in `dir`.
fn baseline(dir: &Path) {
    golive::report::Report::new(vec!["http://127.0.0.1:1".into()])
        .save_json(dir)
        .unwrap();
}

fn rules_to(dir: &Path, output: &Path) -> std::process::Output {
    Command::new(common::golive_bin())
        .args(["rules", "--baseline", dir.to_str().unwrap(), "-o"])
        .arg(output)
        .output()
        .unwrap()
}

#[test]
fn a_planted_link_at_the_output_or_the_old_temporary_name_clobbers_nothing() {
    let dir = tempfile::tempdir().unwrap();
    baseline(dir.path());
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "not golive's").unwrap();
    let output = dir.path().join("alerts.yml");
    std::os::unix::fs::symlink(&victim, &output).unwrap();
    // The name golive used before: `.NAME.tmp`, created with File::create (following links).
    let old_tmp = dir.path().join(".alerts.yml.tmp");
    std::os::unix::fs::symlink(&victim, &old_tmp).unwrap();

    let out = rules_to(dir.path(), &output);
    assert_eq!(out.status.code(), Some(0), "{}", common::text(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "not golive's");
    let meta = std::fs::symlink_metadata(&output).unwrap();
    assert!(
        meta.is_file(),
        "the link at the name is replaced by the rules file"
    );
    assert!(std::fs::read_to_string(&output)
        .unwrap()
        .contains("groups:"));
    assert!(std::fs::symlink_metadata(&old_tmp).unwrap().is_symlink());
    let tmp_left = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".alerts.yml.") && n != ".alerts.yml.tmp")
        .collect::<Vec<_>>();
    assert!(tmp_left.is_empty(), "temporary files left: {tmp_left:?}");
}

#[test]
fn an_output_on_a_full_device_exits_4_and_the_device_stays() {
    if std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .is_err()
    {
        eprintln!("skipping: /dev/full is not writable here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    baseline(dir.path());
    let out = rules_to(dir.path(), Path::new("/dev/full"));
    let t = common::text(&out);
    assert_eq!(out.status.code(), Some(4), "{t}");
    assert!(t.contains("cannot write /dev/full"), "{t}");
    let meta = std::fs::symlink_metadata("/dev/full").unwrap();
    assert!(meta.file_type().is_char_device(), "/dev/full was replaced");
    // /dev/null takes it: written in place, exit 0.
    let out = rules_to(dir.path(), Path::new("/dev/null"));
    assert_eq!(out.status.code(), Some(0), "{}", common::text(&out));
    assert!(std::fs::symlink_metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn a_failed_check_exits_1_when_stdout_is_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    // A driver below the profile's: the check fails (exit 1 with a reader).
    put(
        &b,
        "nvidia-smi.txt",
        "fixture:nvidia-smi_570.133.20_b300_8gpu.txt",
    );
    let check = || {
        let mut c = Command::new(common::golive_bin());
        c.args(["check", b.to_str().unwrap(), "--profile", "kimi-k3"]);
        c
    };
    assert_eq!(check().output().unwrap().status.code(), Some(1));
    // `golive check ... | head -0`: the reader is gone before golive writes a byte, so
    // every write to stdout meets a broken pipe.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = check().stdout(writer).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        !stderr.contains("error"),
        "a closed pipe is no error: {stderr}"
    );
}

#[test]
fn an_ssh_host_that_is_an_option_is_refused_before_ssh_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("bundles");
    let out = common::golive(&[
        "collect",
        "--no-local",
        "--ssh=-oProxyCommand=touch /tmp/x",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let t = common::text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(t.contains("starts with '-'"), "{t}");
    assert!(!out_dir.exists(), "nothing is collected: {t}");
}
