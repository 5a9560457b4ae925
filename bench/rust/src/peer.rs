//! Server processes: `bench-peer` (next to the running executable) or any
//! other program, killed and reaped when dropped.

use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The `bench-peer` executable beside this one.
pub fn bench_peer() -> io::Result<PathBuf> {
    sibling("bench-peer")
}

/// A file named `name` in the running executable's directory.
pub fn sibling(name: &str) -> io::Result<PathBuf> {
    let path = std::env::current_exe()?.with_file_name(name);
    if path.exists() {
        Ok(path)
    } else {
        Err(io::Error::new(io::ErrorKind::NotFound, format!("{} not found (build it first)", path.display())))
    }
}

/// A running server process.
pub struct Peer {
    child: Child,
    /// What it printed after `ready ` (its address), if it was asked to.
    pub address: String,
}

impl Peer {
    /// Starts `command` with stdout piped and waits for a line
    /// `ready <address>`.
    pub fn listening(mut command: Command) -> io::Result<Peer> {
        let mut child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
        let mut peer = Peer { child, address: String::new() };
        match line.trim().strip_prefix("ready") {
            Some(addr) => peer.address = addr.trim().to_string(),
            None => return Err(io::Error::other(format!("{command:?} said {line:?} instead of `ready <address>`"))),
        }
        Ok(peer)
    }

    /// Wraps a child started by the caller (stdio peers).
    pub fn from_child(child: Child) -> Peer {
        Peer { child, address: String::new() }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh private directory for sockets, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates `$TMPDIR/hubwire-bench-<pid>-<n>`.
    pub fn new() -> io::Result<TempDir> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!("hubwire-bench-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&dir)?;
        Ok(TempDir(dir))
    }

    /// A path inside it.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
