//! A real nginx of the test's own: its prefix in a temporary folder, started with the
//! test's `http {}` directives, polled until it listens, stopped when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};

pub struct Nginx {
    child: Child,
    dir: tempfile::TempDir,
    pub url: String,
}

impl Nginx {
    /// Writes `files` (paths relative to the prefix, e.g. `html/models.json`), then starts
    /// nginx with `http` inside its `http {}` block (the `server` that listens on
    /// 127.0.0.1:`port` included) and waits until it listens. `None` when nginx is not
    /// installed (under `CI=true` that fails the test).
    pub fn start(port: u16, http: &str, files: &[(&str, &str)]) -> Option<Nginx> {
        let bin = super::peer(&["/usr/sbin/nginx", "/usr/bin/nginx"], "nginx")?;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        for d in ["logs", "tmp"] {
            std::fs::create_dir_all(p.join(d)).unwrap();
        }
        for (rel, text) in files {
            let file = p.join(rel);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        }
        let conf = format!(
            r#"worker_processes 1; daemon off; pid nginx.pid; error_log logs/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log logs/access.log;
  client_body_temp_path tmp/body; proxy_temp_path tmp/proxy; fastcgi_temp_path tmp/fcgi;
  uwsgi_temp_path tmp/uwsgi; scgi_temp_path tmp/scgi; types {{ }}
{http}
}}"#
        );
        std::fs::write(p.join("nginx.conf"), conf).unwrap();
        let child = Command::new(bin)
            .arg("-p")
            .arg(p)
            .arg("-c")
            .arg(p.join("nginx.conf"))
            .arg("-e")
            .arg(p.join("logs/error.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let nginx = Nginx {
            child,
            dir,
            url: format!("http://127.0.0.1:{port}"),
        };
        super::wait_listening(port, "nginx");
        Some(nginx)
    }

    /// The prefix folder (`logs/`, the test's files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// What nginx has logged of the requests it answered.
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir().join("logs/access.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    /// SIGTERM, so that the master stops its worker (a SIGKILLed master leaves the worker
    /// running, orphaned); SIGKILL only when it has not ended within 5 s.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
