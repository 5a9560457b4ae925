//! Runs a real `hubwire hub` process on a config written for the test, with
//! `hubwire-test-provider` children, and dials it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hubwire::transport::unix;
use hubwire::{Connection, ConnectionOptions};
use hubwire_hub::status::{Status, STATUS_METHOD};
pub use hubwire_tests::harness::TempDir;

/// The hub binary under test.
pub const HUB: &str = env!("CARGO_BIN_EXE_hubwire");
/// The provider the configs spawn.
pub const PROVIDER: &str = env!("CARGO_BIN_EXE_hubwire-test-provider");

/// A fresh, short directory (Unix socket paths are limited to 108 bytes),
/// removed when dropped: when the test ends, passed or failed (a failing
/// assertion unwinds), so runs leave nothing in the temp dir.
pub fn temp_dir() -> TempDir {
    TempDir::new("hwh")
}

/// A running hub. Killed (SIGKILL) when dropped, if still running; then
/// its directory is removed.
pub struct Hub {
    pub dir: TempDir,
    pub child: Child,
    pub socket: PathBuf,
}

impl Hub {
    /// Writes `hubwire.toml` (with `{provider}` replaced by the test
    /// provider's path) under a `[hub]` that listens on `hub.sock`, starts
    /// the hub, and waits until every replica not expected to fail is ready.
    pub fn start(providers: &str) -> Hub {
        Hub::start_with("", providers, &[])
    }

    /// Like [`Hub::start`], with extra `[hub]` lines and extra arguments.
    pub fn start_with(hub_extra: &str, providers: &str, args: &[&str]) -> Hub {
        Hub::start_env(hub_extra, providers, args, &[])
    }

    /// Like [`Hub::start_with`], with extra environment variables.
    pub fn start_env(hub_extra: &str, providers: &str, args: &[&str], env: &[(&str, &str)]) -> Hub {
        let dir = temp_dir();
        let config = format!("[hub]\nunix = \"hub.sock\"\n{hub_extra}\n{}", providers.replace("{provider}", PROVIDER));
        std::fs::write(dir.join("hubwire.toml"), config).unwrap();
        // Whatever the umask: a config others could write is refused.
        std::fs::set_permissions(dir.join("hubwire.toml"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let child = Command::new(HUB)
            .arg("hub")
            .arg("--config")
            .arg(dir.join("hubwire.toml"))
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("hub.log")).unwrap())
            .spawn()
            .unwrap();
        let socket = dir.join("hub.sock");
        let hub = Hub { dir, child, socket };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !hub.socket.exists() {
            assert!(Instant::now() < deadline, "the hub did not listen within 20 s; log:\n{}", hub.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        hub
    }

    /// The hub's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("hub.log")).unwrap_or_default()
    }

    /// The address a listener configured on port 0 was given, from the
    /// hub's log line `<message> listen=[tcp:|tls:]HOST:PORT`. Port 0 rather than
    /// a port chosen and released by the test: between the two, any
    /// outgoing connection on the machine may take it.
    /// Each listener logs its line from its own task, which may run after
    /// the hub said it started: the log is read again for up to 10 s.
    pub fn listening(&self, message: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        let (log, at) = loop {
            let log = self.log();
            let line = log.lines().find(|l| l.contains(message) && l.contains("listen="));
            let at = line.and_then(|l| l.split("listen=").nth(1)).and_then(|a| a.split_whitespace().next()).map(str::to_string);
            if at.is_some() || Instant::now() >= deadline {
                break (log, at);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let at = at.unwrap_or_else(|| panic!("no {message:?} line with listen= in the hub's log:\n{log}"));
        at.trim_start_matches("tcp:").trim_start_matches("tls:").to_string()
    }

    /// A new client connection. Refused connections are retried for a
    /// while: the socket file appears at bind(), a moment before listen().
    pub async fn connect(&self) -> Connection {
        self.connect_with(&ConnectionOptions::new("test-client")).await
    }

    /// A new client connection with `opts`, retried as in [`Hub::connect`].
    pub async fn connect_with(&self, opts: &ConnectionOptions) -> Connection {
        let deadline = Instant::now() + Duration::from_secs(5);
        let t = loop {
            match unix::connect(&self.socket).await {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await
                }
                t => break t.unwrap(),
            }
        };
        Connection::dial(t, opts).await.unwrap()
    }

    /// The hub's status, through its own method.
    pub async fn status(&self) -> Status {
        self.connect().await.call(STATUS_METHOD, &()).await.unwrap()
    }

    /// Waits until `ready` replicas of `provider` are ready.
    pub async fn wait_ready(&self, provider: &str, ready: usize) -> Status {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = self.status().await;
            let p = s.providers.iter().find(|p| p.name == provider).unwrap_or_else(|| panic!("no provider {provider}"));
            if p.replicas.iter().filter(|r| r.state == "ready").count() >= ready {
                return s;
            }
            assert!(Instant::now() < deadline, "{provider}: {ready} replicas not ready within 20 s: {s:?}\nlog:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Runs the `hubwire` CLI against this hub: (exit code, stdout, stderr).
    pub fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(HUB).args(args).arg("--hub").arg(format!("unix:{}", self.socket.display())).output().unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
    }

    /// Sends SIGTERM and waits (up to `within`) for the hub to exit.
    pub fn terminate(&mut self, within: Duration) -> std::process::ExitStatus {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        wait_exit(&mut self.child, within)
            .unwrap_or_else(|| panic!("the hub did not exit within {within:?} of SIGTERM; log:\n{}", self.log()))
    }

    /// The hub's peak resident memory so far (VmHWM), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = s.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Then the fields drop: `dir` is removed once the hub is gone.
    }
}

/// Waits for a child to exit, polling.
pub fn wait_exit(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a process exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(s) => s.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"),
    }
}

/// A minimal HTTP/1.1 exchange: (status, body).
pub fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    http_with(addr, method, path, "", body)
}

/// [`http`] with extra header lines (`"name: value\r\n"` each).
pub fn http_with(addr: &str, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(rest) } else { rest.to_string() };
    (status, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

/// The config directory of a hub, for files a test writes.
pub fn path_in(hub: &Hub, name: &str) -> PathBuf {
    hub.dir.join(name)
}
