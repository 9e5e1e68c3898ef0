//! `--ssh`: collecting on a remote host through the system OpenSSH client and copying
//! the bundle back.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use super::runner::{first_line, run_command, CmdOutput};
use super::CollectOptions;
use crate::bundle_format::MANIFEST;

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

/// Collects on `host` over ssh and copies the bundle into `out`.
pub fn collect_remote(host: &str, args: &CollectOptions) -> anyhow::Result<PathBuf> {
    let opts = ssh_base(&args.ssh_options);
    let long = Duration::from_secs(args.timeout.max(1) * 20 + 60);
    let stamp = format!(
        "{}-{}",
        std::process::id(),
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
    );
    let run = |prog: &str, extra: Vec<String>, timeout: Duration| -> anyhow::Result<CmdOutput> {
        let mut argv = vec![prog.to_string()];
        argv.extend(opts.iter().cloned());
        argv.extend(extra);
        let out = run_command(&argv, timeout);
        if !out.available {
            anyhow::bail!(
                "{prog} is not installed (the system OpenSSH client is needed for --ssh)"
            );
        }
        if out.timed_out {
            anyhow::bail!("{prog} to {host} timed out");
        }
        if out.status != Some(0) {
            anyhow::bail!(
                "{prog} to {host} failed (exit {:?}): {}",
                out.status,
                first_line(&out.stderr).unwrap_or_default()
            );
        }
        Ok(out)
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
                    exe.display().to_string(),
                    format!("{host}:{remote}"),
                ],
                long,
            )?;
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
    let cleanup = |bundle_only: bool| {
        let mut rm = format!(
            "rm -rf {}",
            shlex::try_quote(&remote_out).unwrap_or_default()
        );
        if copied && !bundle_only {
            rm.push_str(&format!(
                " {}",
                shlex::try_quote(&remote_bin).unwrap_or_default()
            ));
        }
        let _ = run("ssh", vec![host.to_string(), rm], Duration::from_secs(30));
    };
    let result = (|| -> anyhow::Result<PathBuf> {
        let out = run("ssh", vec![host.to_string(), quoted], long)?;
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
        std::fs::create_dir_all(&args.out)?;
        let local = args.out.join(&name);
        anyhow::ensure!(!local.exists(), "{} exists already", local.display());
        run(
            "scp",
            vec![
                "-q".into(),
                "-r".into(),
                format!("{host}:{remote_bundle}"),
                args.out.display().to_string(),
            ],
            long,
        )?;
        anyhow::ensure!(
            local.join(MANIFEST).is_file(),
            "copied bundle {} has no manifest.json",
            local.display()
        );
        Ok(local)
    })();
    cleanup(false);
    result
}
