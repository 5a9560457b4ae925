//! A real `hubwire hub` process on a config written for one run: started,
//! waited for, dialled, stopped. A hub that refuses its config (exit
//! status 2 and an `error:` line) is reported as such, not as a crash, so
//! that a case needing a config key the hub does not know yet fails with
//! `hub refused config: ...`.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hubwire::transport::unix;
use hubwire::{Connection, ConnectionOptions};
use serde_json::Value;

/// How to start a hub besides its config.
#[derive(Default, Clone)]
pub struct Launch {
    /// Extra environment variables for the hub.
    pub env: Vec<(String, String)>,
    /// Start it with umask 000, so that any file mode it gets is the one
    /// the hub chose, not the one the umask happened to leave.
    pub umask_zero: bool,
    /// Mode of the config file (0o644 unless set).
    pub config_mode: Option<u32>,
    /// Write the config to `real.toml` and give the hub `hubwire.toml`, a
    /// symlink to it owned by this uid (changing it needs root).
    pub config_symlink: Option<u32>,
}

/// A running hub, killed (SIGKILL) when dropped if still running.
pub struct HubProc {
    /// Its scratch directory: config, socket, log.
    pub dir: PathBuf,
    /// The process.
    pub child: Child,
    /// Its Unix socket, when the config has `unix = "hub.sock"`.
    pub socket: PathBuf,
}

impl HubProc {
    /// Writes `config` to `dir/hubwire.toml`, starts `hub` on it and waits
    /// (up to 20 s) for its "hub started" log line. `Err` says why not: the
    /// hub's `error:` line when it refused the config.
    pub fn start(hub: &Path, dir: &Path, config: &str, launch: &Launch) -> Result<HubProc, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let file = dir.join("hubwire.toml");
        let real = if launch.config_symlink.is_some() { dir.join("real.toml") } else { file.clone() };
        std::fs::write(&real, config).map_err(|e| format!("{}: {e}", real.display()))?;
        let mode = launch.config_mode.unwrap_or(0o644);
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(mode)).map_err(|e| e.to_string())?;
        if let Some(uid) = launch.config_symlink {
            std::os::unix::fs::symlink(&real, &file).map_err(|e| e.to_string())?;
            std::os::unix::fs::lchown(&file, Some(uid), Some(uid)).map_err(|e| format!("lchown: {e}"))?;
        }
        let log = std::fs::File::create(dir.join("hub.log")).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(hub);
        cmd.arg("hub").arg("--config").arg(&file).stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
        // Our caller's token or hub address must not change what is tested.
        cmd.env("RUST_LOG", "info").env("NO_COLOR", "1").env_remove("HUBWIRE_TOKEN").env_remove("HUBWIRE_HUB");
        for (k, v) in &launch.env {
            cmd.env(k, v);
        }
        let umask_zero = launch.umask_zero;
        // SAFETY: umask and setrlimit are async-signal-safe and touch
        // nothing but the child. The soft descriptor limit is set to the
        // common login default, 1024 (the hard one is left alone): a hub
        // must raise its own, not count on its parent's.
        unsafe {
            cmd.pre_exec(move || {
                if umask_zero {
                    libc::umask(0);
                }
                let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_max >= 1024 {
                    r.rlim_cur = 1024;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &r);
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", hub.display()))?;
        let mut proc = HubProc { dir: dir.to_path_buf(), child, socket: dir.join("hub.sock") };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = proc.child.try_wait() {
                return Err(proc.refusal(status));
            }
            if proc.log().contains("hub started") {
                return Ok(proc);
            }
            if Instant::now() > deadline {
                return Err(format!("the hub did not start within 20 s; log: {}", last_line(&proc.log())));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Why the hub exited during start, from its log.
    fn refusal(&self, status: std::process::ExitStatus) -> String {
        let log = self.log();
        let why = log.lines().find(|l| l.contains("error")).map(str::to_string).unwrap_or_else(|| last_line(&log));
        // The scratch path says nothing; the file name and line do.
        let mut why = why.replace(&format!("{}/", self.dir.display()), "");
        // "unknown field `x`, expected one of ...": the field is the news.
        if let Some(at) = why.find(", expected one of") {
            why.truncate(at);
        }
        if status.code() == Some(2) {
            format!("hub refused config: {}", clip(&why, 160))
        } else {
            format!("hub exited ({status}) during start: {}", clip(&why, 160))
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Its stderr so far.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.dir.join("hub.log")).unwrap_or_default()).into_owned()
    }

    /// The address a listener on port 0 got, from the log line
    /// `<message> listen=[tcp:]HOST:PORT`.
    pub fn listening(&self, message: &str) -> Option<String> {
        let log = self.log();
        let line = log.lines().find(|l| l.contains(message) && l.contains("listen="))?;
        let at = line.split("listen=").nth(1)?.split_whitespace().next()?;
        Some(at.trim_start_matches("tcp:").trim_matches('"').to_string())
    }

    /// A new client connection on the Unix socket, with a 5 s deadline.
    pub async fn connect(&self) -> Result<Connection, String> {
        let dial = async {
            let t = unix::connect(&self.socket).await.map_err(|e| format!("connect: {e}"))?;
            Connection::dial(t, &ConnectionOptions::new("hardening")).await.map_err(|e| format!("handshake: {e}"))
        };
        tokio::time::timeout(Duration::from_secs(5), dial).await.map_err(|_| "no handshake within 5 s".to_string())?
    }

    /// `hubwire.status`, as JSON (its fields may grow; this reads few).
    pub async fn status(&self) -> Result<Value, String> {
        let conn = self.connect().await?;
        let s = tokio::time::timeout(Duration::from_secs(5), conn.call::<(), Value>("hubwire.status", &()));
        s.await.map_err(|_| "status: no answer within 5 s".to_string())?.map_err(|e| format!("status: {e}"))
    }

    /// Waits (up to `within`) until every replica of `provider` is ready;
    /// returns their pids.
    pub async fn wait_ready(&self, provider: &str, within: Duration) -> Result<Vec<u64>, String> {
        let deadline = Instant::now() + within;
        loop {
            let s = self.status().await?;
            let replicas = replicas(&s, provider);
            if !replicas.is_empty() && replicas.iter().all(|r| r["state"] == "ready") {
                return Ok(replicas.iter().filter_map(|r| r["pid"].as_u64()).collect());
            }
            if Instant::now() > deadline {
                return Err(format!("{provider}: not every replica ready within {within:?}"));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within `within`.
    pub fn stop(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        // SAFETY: a signal to our own child, which has not been reaped yet.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for HubProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The replicas of `provider` in a status value.
pub fn replicas(status: &Value, provider: &str) -> Vec<Value> {
    let providers = status["providers"].as_array().cloned().unwrap_or_default();
    let p = providers.into_iter().find(|p| p["name"] == provider);
    p.and_then(|p| p["replicas"].as_array().cloned()).unwrap_or_default()
}

/// The last non-empty line of a log.
fn last_line(log: &str) -> String {
    log.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("(empty log)").to_string()
}

/// `s` cut to `n` characters, with its control characters shown escaped
/// (a hub log may carry anything).
pub fn clip(s: &str, n: usize) -> String {
    let escaped: String = s.chars().flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] }).collect();
    if escaped.chars().count() <= n {
        escaped
    } else {
        format!("{}...", escaped.chars().take(n).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_escapes_control_characters_and_cuts() {
        assert_eq!(clip("a\u{1b}[2Jb", 100), "a\\u{1b}[2Jb");
        assert_eq!(clip("abcdef", 3), "abc...");
    }
}
