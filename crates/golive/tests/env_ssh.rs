//! `golive collect --ssh` against a real OpenSSH server on 127.0.0.1, started by
//! scripts/sshd-test.sh (key-only login, generated host key, high port). Skips
//! with a message when sshd cannot be started here (under `CI=true` that fails).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The leftover check looks at /tmp: one SSH test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Sshd {
    dir: PathBuf,
    options: Vec<String>,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = Command::new(common::repo_root().join("scripts/sshd-test.sh"))
            .args(["stop", self.dir.to_str().unwrap()])
            .status();
    }
}

fn start_sshd(dir: &Path) -> Option<Sshd> {
    let out = Command::new(common::repo_root().join("scripts/sshd-test.sh"))
        .args([
            "start",
            dir.to_str().unwrap(),
            &common::free_port().to_string(),
        ])
        .output()
        .expect("cannot run scripts/sshd-test.sh");
    if !out.status.success() {
        common::skip(format!(
            "sshd could not be started (scripts/test.sh installs openssh-server): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
        return None;
    }
    let options = String::from_utf8(out.stdout)
        .ok()?
        .lines()
        .map(String::from)
        .collect();
    Some(Sshd {
        dir: dir.to_path_buf(),
        options,
    })
}

fn leftovers() -> Vec<String> {
    std::fs::read_dir("/tmp")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.starts_with("golive-bundles-")
                        || (n.starts_with("golive-")
                            && n.chars().nth(7).is_some_and(|c| c.is_ascii_digit()))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn collect_over_ssh_copies_itself_and_brings_bundles_back() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let Some(sshd) = start_sshd(&tmp.path().join("sshd")) else {
        return;
    };
    let before = leftovers();
    let out_dir = tmp.path().join("bundles");
    let mut cmd = Command::new(common::golive_bin());
    cmd.args([
        "collect",
        "--out",
        out_dir.to_str().unwrap(),
        "--timeout",
        "20",
        "--ssh",
        "127.0.0.1",
    ]);
    for o in &sshd.options {
        cmd.args(["--ssh-option", o]);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let paths: Vec<PathBuf> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(PathBuf::from)
        .collect();
    assert_eq!(
        paths.len(),
        2,
        "local and remote bundle: {paths:?}\n{stderr}"
    );
    for p in &paths {
        assert!(p.starts_with(&out_dir), "{}", p.display());
        assert!(
            p.join("manifest.json").is_file() && p.join("raw").is_dir(),
            "{}",
            p.display()
        );
    }
    let m: golive::collect::Manifest =
        serde_json::from_str(&std::fs::read_to_string(paths[1].join("manifest.json")).unwrap())
            .unwrap();
    assert!(
        m.probes.iter().any(|p| p.name == "kernel" && p.ok()),
        "remote probes ran: {m:?}"
    );
    // The remote run's options name its own temporary output dir.
    assert!(
        m.options
            .iter()
            .any(|o| o.starts_with("/tmp/golive-bundles-")),
        "{:?}",
        m.options
    );
    // Both bundles together are valid multi-node input.
    let r = golive::check::check_bundles(&paths, None).unwrap();
    assert!(r.item("node_consistency").is_some());
    // The copied binary and the remote output dir are removed.
    let after = leftovers();
    let new: Vec<&String> = after.iter().filter(|n| !before.contains(n)).collect();
    assert!(new.is_empty(), "left on the remote: {new:?}");
}

#[test]
fn collect_over_ssh_with_remote_golive_and_a_failing_host() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let Some(sshd) = start_sshd(&tmp.path().join("sshd")) else {
        return;
    };
    let out_dir = tmp.path().join("bundles");
    let bin = common::golive_bin();
    let mut cmd = Command::new(&bin);
    cmd.args([
        "collect",
        "--out",
        out_dir.to_str().unwrap(),
        "--no-local",
        "--remote-golive",
        bin.to_str().unwrap(),
        "--ssh",
        "127.0.0.1,127.0.0.2",
    ]);
    for o in &sshd.options {
        cmd.args(["--ssh-option", o]);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // One host answered, 127.0.0.2 has no sshd: exit 1, the good bundle is still there.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("127.0.0.2"), "{stderr}");
    let paths: Vec<PathBuf> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(PathBuf::from)
        .collect();
    assert_eq!(paths.len(), 1, "{paths:?}");
    assert!(paths[0].join("manifest.json").is_file());
}
