//! How baselines and hubwire reach their server process: a listening
//! `bench-peer` (Unix socket or TCP), or a child on a socketpair or on its
//! stdio. Shared by every system, so no transport is set up twice.

use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::model::Transport;
use crate::peer::{bench_peer, Peer, TempDir};

/// Where a listening peer is.
#[derive(Clone, Debug)]
pub enum Addr {
    /// A Unix socket path.
    Unix(PathBuf),
    /// A TCP `host:port`.
    Tcp(String),
}

impl Addr {
    /// Connects a blocking socket (TCP with `TCP_NODELAY`).
    pub fn connect(&self) -> io::Result<OwnedFd> {
        match self {
            Addr::Unix(p) => Ok(UnixStream::connect(p)?.into()),
            Addr::Tcp(a) => {
                let s = TcpStream::connect(a)?;
                s.set_nodelay(true)?;
                Ok(s.into())
            }
        }
    }
}

/// A `bench-peer` serving one system on a Unix socket or TCP port.
pub struct Listening {
    peer: Peer,
    /// Where it listens.
    pub addr: Addr,
    _dir: TempDir,
}

impl Listening {
    /// Starts `bench-peer <args…> --unix <path>` or `--tcp 127.0.0.1:0`.
    pub fn start(args: &[&str], transport: Transport) -> io::Result<Listening> {
        let mut cmd = Command::new(bench_peer()?);
        cmd.args(args);
        Listening::spawn(cmd, transport)
    }

    /// Starts `cmd --unix <path>` or `cmd --tcp 127.0.0.1:0` and waits for
    /// its `ready <address>` line: `bench-peer`, or another program that
    /// takes the same flags (grpc-go's: Go's flags take two dashes too).
    pub fn spawn(mut cmd: Command, transport: Transport) -> io::Result<Listening> {
        let dir = TempDir::new()?;
        match transport {
            Transport::Unix => cmd.arg("--unix").arg(dir.join("peer.sock")),
            Transport::Tcp => cmd.args(["--tcp", "127.0.0.1:0"]),
            t => return Err(io::Error::other(format!("{} is not a listening transport", t.name()))),
        };
        let peer = Peer::listening(cmd)?;
        let addr = match transport {
            Transport::Unix => Addr::Unix(PathBuf::from(&peer.address)),
            _ => Addr::Tcp(peer.address.clone()),
        };
        Ok(Listening { peer, addr, _dir: dir })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.peer.pid()
    }
}

/// Child processes started one per connection; their pids, for CPU time.
#[derive(Clone, Default)]
pub struct Children(Arc<Mutex<Vec<u32>>>);

impl Children {
    /// Remembers a child.
    pub fn add(&self, pid: u32) {
        self.0.lock().unwrap().push(pid);
    }

    /// Every child started so far (exited ones count as zero).
    pub fn pids(&self) -> Vec<u32> {
        self.0.lock().unwrap().clone()
    }
}

/// Starts `bench-peer <args…>` with one end of a socketpair as its
/// descriptor 3 and `HUBWIRE_FD=3` (hubwire's child transport, spec §10).
pub fn spawn_socketpair(args: &[&str]) -> io::Result<(Peer, UnixStream)> {
    let (ours, theirs) = UnixStream::pair()?;
    let fd = theirs.as_raw_fd();
    let mut cmd = Command::new(bench_peer()?);
    cmd.args(args).env("HUBWIRE_FD", "3").stdin(Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    drop(theirs);
    Ok((Peer::from_child(child), ours))
}

/// Starts `bench-peer <args…>` with piped stdin and stdout; returns the
/// peer and (its stdout to read, its stdin to write).
pub fn spawn_stdio(args: &[&str]) -> io::Result<(Peer, OwnedFd, OwnedFd)> {
    let mut child = Command::new(bench_peer()?).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
    let stdin: OwnedFd = child.stdin.take().expect("piped").into();
    let stdout: OwnedFd = child.stdout.take().expect("piped").into();
    Ok((Peer::from_child(child), stdout, stdin))
}
