//! `--ssh`: collecting on a remote host through the system OpenSSH client and copying
//! the bundle back. Every ssh/scp runs with a deadline ([`crate::command::run`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use super::runner::first_line;
use super::CollectOptions;
use crate::bundle_format::MANIFEST;
use crate::command::CommandOutput;

fn ssh_base(opts: &[String]) -> Vec<String> {
    let mut v = vec![
        "-o".to_string(),
        "BatchMode=yes".into(),
        "-o".into(),
        "ConnectTimeout=10".into(),
    ];
    for o in opts {
        v.push("-o".into());
        v.push(o.clone());
    }
    v
}

/// An `--ssh` host as ssh and scp take it (`[user@]host`): never an option (a host
/// like `-oProxyCommand=...` would run a command), never blank or with spaces or
/// control characters, never with the `:` or `/` scp would read as a path.
pub fn check_host(host: &str) -> anyhow::Result<()> {
    let shown = host.escape_debug();
    anyhow::ensure!(!host.is_empty(), "an --ssh host is empty");
    anyhow::ensure!(
        !host.starts_with('-'),
        "--ssh host \"{shown}\" starts with '-': ssh would read it as an option; give [user@]host"
    );
    anyhow::ensure!(
        !host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/' || c == ':'),
        "--ssh host \"{shown}\" has a space, control character, '/' or ':'; give [user@]host \
         (a port goes in --ssh-option Port=N)"
    );
    Ok(())
}

/// Collects on `host` over ssh and copies the bundle into `out` (under a name of its
/// own: two hosts may call themselves the same).
pub async fn collect_remote(host: &str, args: &CollectOptions) -> anyhow::Result<PathBuf> {
    check_host(host)?;
    let opts = ssh_base(&args.ssh_options);
    let long = Duration::from_secs(args.timeout.max(1) * 20 + 60);
    let stamp = format!(
        "{}-{}",
        std::process::id(),
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
    );
    let run = |prog: &'static str, extra: Vec<String>, timeout: Duration| {
        let mut argv = vec![prog.to_string()];
        argv.extend(opts.iter().cloned());
        argv.extend(extra);
        async move { checked(prog, host, crate::command::run(&argv, timeout).await) }
    };

    let (remote_bin, copied) = match &args.remote_golive {
        Some(cmd) => (cmd.clone(), false),
        None => {
            let exe = std::env::current_exe().context("cannot find this golive binary to copy")?;
            let remote = format!("/tmp/golive-{stamp}");
            run(
                "scp",
                vec![
                    "-q".into(),
                    "-p".into(),
                    "--".into(),
                    exe.display().to_string(),
                    format!("{host}:{remote}"),
                ],
                long,
            )
            .await?;
            (remote, true)
        }
    };
    let remote_out = format!("/tmp/golive-bundles-{stamp}");
    let mut remote_cmd = vec![
        remote_bin.clone(),
        "collect".into(),
        "--out".into(),
        remote_out.clone(),
    ];
    remote_cmd.extend(["--timeout".into(), args.timeout.to_string()]);
    if let Some(c) = &args.container {
        remote_cmd.extend(["--container".into(), c.clone()]);
    }
    if let Some(p) = &args.pod {
        remote_cmd.extend(["--pod".into(), p.clone()]);
        if let Some(n) = &args.namespace {
            remote_cmd.extend(["-n".into(), n.clone()]);
        }
    }
    if let Some(i) = &args.probe_image {
        remote_cmd.extend(["--probe-image".into(), i.clone()]);
    }
    // ssh joins its arguments into one remote shell line: quote each word.
    let quoted = remote_cmd
        .iter()
        .map(|w| {
            shlex::try_quote(w)
                .map(|q| q.into_owned())
                .unwrap_or_else(|_| w.clone())
        })
        .collect::<Vec<_>>()
        .join(" ");
    let result = async {
        let out = run("ssh", vec!["--".into(), host.to_string(), quoted], long).await?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let remote_bundle = stdout
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with(&remote_out))
            .context("the remote golive did not report a bundle path")?
            .to_string();
        let name = remote_bundle
            .rsplit('/')
            .next()
            .unwrap_or("remote")
            .to_string();
        // Copied into a folder of its own first, then moved to a free bundle name.
        let incoming = args.out.join(format!(".golive-incoming-{stamp}"));
        crate::outfile::create_dirs(&incoming)?;
        let copied_bundle = async {
            run(
                "scp",
                vec![
                    "-q".into(),
                    "-r".into(),
                    "--".into(),
                    format!("{host}:{remote_bundle}"),
                    incoming.display().to_string(),
                ],
                long,
            )
            .await?;
            let got = incoming.join(&name);
            anyhow::ensure!(
                got.join(MANIFEST).is_file(),
                "copied bundle {} has no manifest.json",
                got.display()
            );
            move_to_free_name(&got, &args.out, &name)
        }
        .await;
        let _ = std::fs::remove_dir_all(&incoming);
        copied_bundle
    }
    .await;
    let mut rm = format!(
        "rm -rf {}",
        shlex::try_quote(&remote_out).unwrap_or_default()
    );
    if copied {
        rm.push_str(&format!(
            " {}",
            shlex::try_quote(&remote_bin).unwrap_or_default()
        ));
    }
    let _ = run(
        "ssh",
        vec!["--".into(), host.to_string(), rm],
        Duration::from_secs(30),
    )
    .await;
    result
}

/// `out` of ssh/scp to `host` when it exited 0, else why not.
fn checked(prog: &str, host: &str, out: CommandOutput) -> anyhow::Result<CommandOutput> {
    if !out.available {
        anyhow::bail!("{prog} is not installed (the system OpenSSH client is needed for --ssh)");
    }
    let said = first_line(&out.stderr)
        .map(|l| format!(": {l}"))
        .unwrap_or_default();
    if out.timed_out {
        anyhow::bail!(
            "{prog} to {host} {}{said}",
            out.error.as_deref().unwrap_or("timed out")
        );
    }
    if out.status != Some(0) {
        anyhow::bail!(
            "{prog} to {host} failed (exit {}){said}",
            out.status.map_or("?".into(), |s| s.to_string())
        );
    }
    Ok(out)
}

/// Moves `from` to `dir/name`, or `dir/name-2`, `-3` ... when taken (another host of
/// the same name, this host's own bundle of the same second). The name is reserved by
/// creating its folder first (as `collect_local` does), and the rename replaces only
/// that empty folder.
fn move_to_free_name(from: &Path, dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    for n in 1..1000 {
        let to = match n {
            1 => dir.join(name),
            n => dir.join(format!("{name}-{n}")),
        };
        match std::fs::create_dir(&to) {
            Ok(()) => {
                std::fs::rename(from, &to).with_context(|| {
                    format!("cannot move {} to {}", from.display(), to.display())
                })?;
                return Ok(to);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", to.display())),
        }
    }
    anyhow::bail!("no free bundle name for {name} in {}", dir.display())
}

#[cfg(test)]
mod tests {
    use super::check_host;

    #[test]
    fn hosts_are_names_never_options_or_paths() {
        for ok in ["node2", "ops@node2.example.com", "10.0.0.7"] {
            assert!(check_host(ok).is_ok(), "{ok}");
        }
        for bad in [
            "-oProxyCommand=touch /tmp/x",
            "-p2222",
            "",
            "node2 rm",
            "node2\n",
            "node2:/etc",
            "a/b",
        ] {
            let err = check_host(bad).unwrap_err().to_string();
            assert!(
                err.contains("--ssh host") || err.contains("empty"),
                "{bad}: {err}"
            );
        }
    }
}
