//! The server side's plumbing, shared by every system's `serve`: where a
//! `bench-peer` takes its connections from, the `ready` line the bench
//! waits for, and the two accept loops (a thread per connection for the
//! blocking servers, a tokio task per connection for the async ones).

use std::future::Future;
use std::io::{self, Write};
use std::net::TcpListener;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

use tokio::io::{AsyncRead, AsyncWrite};

/// Where a peer takes its connections from.
#[derive(Clone, Debug)]
pub enum Listen {
    /// Listen on this Unix socket path.
    Unix(PathBuf),
    /// Listen on this TCP address (port 0: any).
    Tcp(String),
    /// Serve descriptor 3 (a socketpair end set up by the parent).
    Fd3,
    /// Serve descriptors 0 and 1.
    Stdio,
}

/// Readiness: the line the bench waits for before it connects, printed
/// once the listener is bound.
pub fn ready(addr: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "ready {addr}");
    let _ = out.flush();
}

/// One connection's server on tokio. Generic over the stream, so that
/// each server runs on the concrete Unix or TCP stream, as it would on
/// its own (nothing boxed between it and the socket).
pub trait ServeConnection: Clone + Send + 'static {
    /// Serves `stream` until it ends.
    fn serve<S>(self, stream: S) -> impl Future<Output = ()> + Send + 'static
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static;
}

impl Listen {
    /// Binds, prints `ready <address>` if listening, and runs
    /// `serve(read, write)` on every connection, a thread each, until the
    /// listener fails (or, for fd 3 and stdio, the one connection ends).
    pub fn serve_blocking(self, serve: impl Fn(OwnedFd, OwnedFd) -> io::Result<()> + Send + Sync + Copy + 'static) -> io::Result<()> {
        let spawn = move |fd: OwnedFd| -> io::Result<()> {
            let w = fd.try_clone()?;
            std::thread::spawn(move || serve(fd, w));
            Ok(())
        };
        match self {
            Listen::Unix(p) => {
                let _ = std::fs::remove_file(&p);
                let l = UnixListener::bind(&p)?;
                ready(&p.display().to_string());
                loop {
                    spawn(l.accept()?.0.into())?;
                }
            }
            Listen::Tcp(a) => {
                let l = TcpListener::bind(a)?;
                ready(&l.local_addr()?.to_string());
                loop {
                    let (s, _) = l.accept()?;
                    s.set_nodelay(true)?;
                    spawn(s.into())?;
                }
            }
            // SAFETY: descriptors 3 (set up by our parent) and 0/1 are ours.
            Listen::Fd3 => {
                let fd = unsafe { OwnedFd::from_raw_fd(3) };
                let w = fd.try_clone()?;
                serve(fd, w)
            }
            Listen::Stdio => unsafe { serve(OwnedFd::from_raw_fd(0), OwnedFd::from_raw_fd(1)) },
        }
    }

    /// Binds a tokio listener (Unix or TCP), prints `ready <address>`,
    /// and serves every connection in a task of its own until accepting
    /// fails. Runs inside the caller's runtime.
    pub async fn serve_tokio(&self, conn: impl ServeConnection) -> io::Result<()> {
        match self {
            Listen::Unix(p) => {
                let _ = std::fs::remove_file(p);
                let l = tokio::net::UnixListener::bind(p)?;
                ready(&p.display().to_string());
                loop {
                    let (s, _) = l.accept().await?;
                    tokio::spawn(conn.clone().serve(s));
                }
            }
            Listen::Tcp(a) => {
                let l = tokio::net::TcpListener::bind(a).await?;
                ready(&l.local_addr()?.to_string());
                loop {
                    let (s, _) = l.accept().await?;
                    s.set_nodelay(true)?;
                    tokio::spawn(conn.clone().serve(s));
                }
            }
            Listen::Fd3 | Listen::Stdio => Err(io::Error::other("this server needs --unix or --tcp")),
        }
    }
}
