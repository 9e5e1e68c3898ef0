//! Running an external program (`nvidia-smi`, `docker`, `kubectl`, `ssh`, `scp`) with a
//! deadline, through `tokio::process`: both streams are read while it runs, a program
//! still running at the deadline is killed (and so is one whose future is dropped:
//! `kill_on_drop`), and what it wrote until then is kept.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::time::Instant;

/// How long the streams are still read after the program exited: a grandchild that
/// inherited them (a daemon started by the program) must not hold the caller.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// What a program did.
#[derive(Debug, Clone, Default)]
pub struct CommandOutput {
    /// False when the program does not exist or may not be run.
    pub available: bool,
    /// Exit code; `None` when killed (the deadline) or ended by a signal.
    pub status: Option<i32>,
    /// Everything written until it ended or was killed.
    pub stdout: Vec<u8>,
    /// Everything written to stderr, likewise.
    pub stderr: Vec<u8>,
    /// Wall time from the start until it ended or was killed.
    pub duration: Duration,
    /// Still running at the deadline, and killed.
    pub timed_out: bool,
    /// Why there is no exit code, in words.
    pub error: Option<String>,
}

impl CommandOutput {
    /// Exited with code 0 before the deadline.
    pub fn success(&self) -> bool {
        self.status == Some(0) && !self.timed_out
    }
}

/// Runs `argv` (no shell) with stdin closed and the deadline `timeout`; never fails:
/// a program that cannot start is `available: false` with the reason in `error`.
pub async fn run(argv: &[String], timeout: Duration) -> CommandOutput {
    let start = Instant::now();
    let Some((program, args)) = argv.split_first() else {
        return CommandOutput {
            error: Some("empty command".into()),
            ..Default::default()
        };
    };
    let spawned = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let missing = matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            );
            return CommandOutput {
                available: !missing,
                duration: start.elapsed(),
                error: Some(if e.kind() == std::io::ErrorKind::NotFound {
                    format!("{program} not installed")
                } else {
                    format!("cannot run {program}: {e}")
                }),
                ..Default::default()
            };
        }
    };
    let mut out = CommandOutput {
        available: true,
        ..Default::default()
    };
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let (mut out_buf, mut err_buf) = ([0u8; 8192], [0u8; 8192]);
    let mut exited = false;
    let deadline = tokio::time::sleep_until(start + timeout);
    tokio::pin!(deadline);
    // One loop over both streams, the exit and the deadline, so that what was read
    // stays ours whichever comes first.
    loop {
        if exited && stdout.is_none() && stderr.is_none() {
            break;
        }
        tokio::select! {
            r = read_some(&mut stdout, &mut out_buf) => {
                if let Some(n) = r {
                    out.stdout.extend_from_slice(&out_buf[..n]);
                }
            }
            r = read_some(&mut stderr, &mut err_buf) => {
                if let Some(n) = r {
                    out.stderr.extend_from_slice(&err_buf[..n]);
                }
            }
            status = child.wait(), if !exited => {
                exited = true;
                out.status = status.ok().and_then(|s| s.code());
                let drain = Instant::now() + DRAIN_AFTER_EXIT;
                if drain < deadline.deadline() {
                    deadline.as_mut().reset(drain);
                }
            }
            () = &mut deadline => {
                if !exited {
                    out.timed_out = true;
                    let _ = child.start_kill();
                    // Reap it; a kill is not refused, so this returns at once.
                    let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
                    out.error = Some(format!(
                        "timed out after {}; killed",
                        humantime::format_duration(Duration::from_secs(timeout.as_secs().max(1)))
                    ));
                }
                break;
            }
        }
    }
    if !out.timed_out && out.status.is_none() {
        out.error = Some("ended by a signal".into());
    }
    out.duration = start.elapsed();
    out
}

/// Reads what is there; `None` (and the stream closed) at its end or on an error. A
/// closed stream never resolves, so `select!` waits on the others.
async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    stream: &mut Option<R>,
    buf: &mut [u8],
) -> Option<usize> {
    let Some(s) = stream.as_mut() else {
        return std::future::pending().await;
    };
    match s.read(buf).await {
        Ok(n) if n > 0 => Some(n),
        _ => {
            *stream = None;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn both_streams_and_the_exit_code() {
        let out = rt().block_on(run(
            &argv(&["sh", "-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(20),
        ));
        assert!(out.available && !out.timed_out);
        assert_eq!(out.status, Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert!(!out.success());
    }

    #[test]
    fn a_hanging_program_is_killed_at_its_deadline_and_its_output_kept() {
        // `exec` makes the shell itself the sleeper, so the PID printed is the child's.
        let out = rt().block_on(run(
            &argv(&["sh", "-c", "echo $$; echo partial >&2; exec sleep 30"]),
            Duration::from_millis(800),
        ));
        assert!(out.timed_out, "{out:?}");
        assert_eq!(out.status, None);
        assert_eq!(out.stderr, b"partial\n");
        assert_eq!(out.error.as_deref(), Some("timed out after 1s; killed"));
        let pid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        // Killed and reaped: no process (not even a zombie) is left.
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} still there"
        );
        assert!(out.duration < Duration::from_secs(25), "{:?}", out.duration);
    }

    #[test]
    fn a_dropped_run_kills_its_program() {
        let rt = rt();
        let pid_file = tempfile::NamedTempFile::new().unwrap();
        let script = format!("echo $$ > {}; exec sleep 30", pid_file.path().display());
        rt.block_on(async {
            let a = argv(&["sh", "-c", &script]);
            let run = run(&a, Duration::from_secs(60));
            // Dropped after 500 ms, as `select!` or a timeout around it would.
            let _ = tokio::time::timeout(Duration::from_millis(500), run).await;
        });
        let pid = std::fs::read_to_string(pid_file.path()).unwrap();
        let pid = pid.trim();
        // kill_on_drop sent SIGKILL; the runtime reaps it in the background.
        let gone = (0..100).any(|_| {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if state.is_empty() || state.contains(") Z ") {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
            false
        });
        assert!(gone, "process {pid} still running");
    }

    #[test]
    fn a_missing_program_is_unavailable() {
        let out = rt().block_on(run(
            &argv(&["golive-no-such-program"]),
            Duration::from_secs(5),
        ));
        assert!(!out.available);
        assert_eq!(
            out.error.as_deref(),
            Some("golive-no-such-program not installed")
        );
    }

    #[test]
    fn a_grandchild_holding_the_pipes_does_not_hold_the_caller() {
        let out = rt().block_on(run(
            &argv(&["sh", "-c", "sleep 20 & echo started"]),
            Duration::from_secs(60),
        ));
        assert_eq!(out.status, Some(0));
        assert!(!out.timed_out);
        assert_eq!(out.stdout, b"started\n");
        // Back after the 2 s drain, not when the sleeper ends (generous for a busy machine).
        assert!(out.duration < Duration::from_secs(15), "{:?}", out.duration);
    }
}
