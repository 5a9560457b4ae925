//! Through the hub: the client dials the hub's Unix socket and calls the
//! provider's methods by name; the hub runs the provider (`bench-peer
//! hubwire`) as its child. Three processes, two hops; the CPU time of all
//! three counts. With the direct path (`hub-direct`) the client asks the
//! hub for a connection straight to the provider (spec §14) and measures
//! once its calls take it: one hop, the hub idle.

use std::io;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::endpoint::Addr;
use super::hubwire::{job_wait_mode, Remote};
use crate::client::{runtime, Client};
use crate::cpu;
use crate::model::Job;
use crate::peer::{bench_peer, Peer, TempDir};
use crate::runner::Target;

/// Writes a hub config, starts `hubwire hub`, waits for its socket.
pub fn start(job: &Job, exe: Option<&Path>) -> io::Result<Box<dyn Target>> {
    let (mode, wait) = job_wait_mode(job)?;
    let exe = exe.ok_or_else(|| {
        io::Error::other("hub not available: no `hubwire` executable beside hubwire-bench (build hubwire-hub, or pass --hub)")
    })?;
    let dir = TempDir::new()?;
    let sock = dir.join("hub.sock");
    let config = dir.join("hub.toml");
    let peer = bench_peer()?;
    // Efficient ends: the hub as it comes (`wait = "adaptive"`, which
    // spins for a provider's answer only while it is the one call in
    // flight; docs/hub.md). Low-latency ends: the hub spins too.
    let hub_mode = if mode == "efficient" { "adaptive" } else { mode };
    let toml = format!(
        "[hub]\nunix = {sock:?}\nwait = {hub_mode:?}\n\n[[provider]]\nname = \"bench\"\nexec = [{peer:?}, \"hubwire\", \"--wait\", {mode:?}]\nreplicas = 1\n",
        sock = sock.display().to_string(),
        peer = peer.display().to_string(),
    );
    let t0 = Instant::now();
    let hub = launch(exe, &config, &toml, &sock)?;
    wait_for_provider(&sock, t0, false)?;
    let direct = job.transport == crate::model::Transport::HubDirect;
    let remote = Remote::external(Addr::Unix(sock), Vec::new(), wait, job, direct);
    Ok(Box::new(Hub { remote, hub, _dir: dir }))
}

/// Writes `toml` to `config`, starts `hubwire hub` on it and waits (up to
/// 10 s) for its Unix socket `sock`.
pub(super) fn launch(exe: &Path, config: &Path, toml: &str, sock: &Path) -> io::Result<Peer> {
    std::fs::write(config, toml)?;
    // The hub refuses a config others could write, whatever the umask left.
    std::fs::set_permissions(config, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    // Warnings and errors only: its info lines would break the progress bar.
    let child = Command::new(exe)
        .arg("hub")
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let hub = Peer::from_child(child);
    let t0 = Instant::now();
    while !sock.exists() {
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(io::Error::other(format!("hub not available: no socket at {} after 10 s", sock.display())));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(hub)
}

/// Dials the hub until its HELLO offers `echo` (with `call`: until a
/// call of `echo` through it is answered, for a method the hub routes to
/// NATS, which its HELLO does not list): the hub listens before its
/// providers have finished their own handshakes.
pub(super) fn wait_for_provider(sock: &Path, t0: Instant, call: bool) -> io::Result<()> {
    let rt = runtime()?;
    loop {
        let offered = rt.block_on(async {
            let t = hubwire::transport::unix::connect(sock).await?;
            let conn = hubwire::Connection::dial(t, &hubwire::ConnectionOptions::new("bench-probe"))
                .await
                .map_err(|e| io::Error::other(e.to_string()))?;
            match call {
                true => Ok::<_, io::Error>(conn.call_raw("echo", bytes::Bytes::from_static(b"probe")).await.is_ok()),
                false => Ok(conn.peer().methods.iter().any(|m| m.name == "echo")),
            }
        });
        match offered {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            // The socket file appears at bind(), a moment before listen().
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(io::Error::other("hub not available: it offered no `echo` method after 10 s"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

struct Hub {
    remote: Remote,
    hub: Peer,
    _dir: TempDir,
}

impl Target for Hub {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        self.remote.connect()
    }

    /// The hub and every provider it runs.
    fn peers(&self) -> Vec<u32> {
        let mut pids = vec![self.hub.pid()];
        pids.extend(cpu::children_of(self.hub.pid()));
        pids
    }
}
