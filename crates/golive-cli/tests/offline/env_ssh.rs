//! `golive collect --ssh` against a real OpenSSH server on 127.0.0.1, started by
//! scripts/sshd-test.sh (key-only login, generated host key, high port). Skips
//! with a message when sshd cannot be started here (under `CI=true` that fails).

use crate::common;

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

/// `golive collect ARGS` with the sshd's client options: exit code, the bundle paths
/// on stdout, stderr.
fn collect_with(sshd: &Sshd, out: &Path, args: &[&str]) -> (Option<i32>, Vec<PathBuf>, String) {
    let mut cmd = Command::new(common::golive_bin());
    cmd.args(["collect", "--out", out.to_str().unwrap()])
        .args(args);
    for o in &sshd.options {
        cmd.args(["--ssh-option", o]);
    }
    let out = cmd.output().unwrap();
    let paths = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(PathBuf::from)
        .collect();
    (
        out.status.code(),
        paths,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
    let (code, paths, stderr) =
        collect_with(&sshd, &out_dir, &["--timeout", "20", "--ssh", "127.0.0.1"]);
    assert_eq!(code, Some(0), "{stderr}");
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
    let (code, paths, stderr) = collect_with(
        &sshd,
        &out_dir,
        &[
            "--no-local",
            "--remote-golive",
            bin.to_str().unwrap(),
            "--ssh",
            "127.0.0.1,127.0.0.2",
        ],
    );
    // One host answered, 127.0.0.2 has no sshd: exit 1, the good bundle is still there.
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("127.0.0.2"), "{stderr}");
    assert_eq!(paths.len(), 1, "{paths:?}");
    assert!(paths[0].join("manifest.json").is_file());
}

/// (start, end) in nanoseconds of each remote collection, as the wrapper logged them.
fn spans(log: &Path) -> Vec<(u128, u128)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut starts = std::collections::HashMap::new();
    let mut spans = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (Some(kind), Some(id), Some(ns)) = (w.first(), w.get(1), w.get(2)) else {
            continue;
        };
        let ns: u128 = ns.parse().unwrap();
        match *kind {
            "start" => {
                starts.insert(id.to_string(), ns);
            }
            _ => spans.push((starts[*id], ns)),
        }
    }
    spans.sort();
    spans
}

#[test]
fn several_hosts_in_parallel_bounded_each_failure_apart() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let Some(sshd) = start_sshd(&tmp.path().join("sshd")) else {
        return;
    };
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let user = user.trim();
    // The remote golive, wrapped so that each collection logs when it ran; the 3 s sleep
    // makes two collections at once overlap for sure.
    let log = tmp.path().join("remote-runs.log");
    let wrapper = tmp.path().join("remote-golive.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho start $$ $(date +%s%N) >> '{log}'\nsleep 3\n'{bin}' \"$@\"\nrc=$?\necho end $$ $(date +%s%N) >> '{log}'\nexit $rc\n",
            log = log.display(),
            bin = common::golive_bin().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();

    for parallel in [2, 1] {
        let _ = std::fs::remove_file(&log);
        let out_dir = tmp.path().join(format!("bundles-{parallel}"));
        // Two names for the one sshd (the same remote host name, so the copied bundles'
        // names collide with each other and with this host's own) and a host without sshd.
        let hosts = format!("127.0.0.1,{user}@127.0.0.1,127.0.0.2");
        let parallel_arg = parallel.to_string();
        let (code, paths, stderr) = collect_with(
            &sshd,
            &out_dir,
            &[
                "--timeout",
                "20",
                "--remote-golive",
                wrapper.to_str().unwrap(),
                "--ssh",
                &hosts,
                "--ssh-parallel",
                &parallel_arg,
            ],
        );
        assert_eq!(code, Some(1), "{stderr}");
        assert!(
            stderr.contains("127.0.0.2: ssh to 127.0.0.2 failed"),
            "{stderr}"
        );
        assert_eq!(
            paths.len(),
            3,
            "local and two remote bundles: {paths:?}\n{stderr}"
        );
        let distinct: std::collections::HashSet<&PathBuf> = paths.iter().collect();
        assert_eq!(distinct.len(), 3, "{paths:?}");
        for p in &paths {
            assert!(p.starts_with(&out_dir), "{}", p.display());
            let m: golive::collect::Manifest =
                serde_json::from_str(&std::fs::read_to_string(p.join("manifest.json")).unwrap())
                    .unwrap();
            assert!(
                m.probes.iter().any(|p| p.name == "kernel" && p.ok()),
                "{}: {m:?}",
                p.display()
            );
        }
        // Nothing but the three bundles is left in the output folder.
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&out_dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        let mut expected = paths.clone();
        expected.sort();
        assert_eq!(entries, expected);

        let spans = spans(&log);
        assert_eq!(spans.len(), 2, "{spans:?}");
        let overlap = spans[1].0 < spans[0].1;
        assert_eq!(
            overlap,
            parallel == 2,
            "--ssh-parallel {parallel}: remote runs {spans:?}"
        );
    }
}
