//! Unix domain sockets: the fastest way between two processes that were
//! not started by one another.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use super::fd::FdTransport;
use super::{DynTransport, Listener};

/// A transport over a Unix stream socket.
pub type UnixTransport = FdTransport<std::os::unix::net::UnixStream>;

/// Connects to the socket at `path`.
pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixTransport> {
    let path = path.as_ref();
    let stream = tokio::net::UnixStream::connect(path)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("connect to unix:{}: {e}", path.display())))?;
    wrap(stream, format!("unix:{}", path.display()))
}

fn wrap(stream: tokio::net::UnixStream, label: String) -> io::Result<UnixTransport> {
    let std = stream.into_std()?;
    std.set_nonblocking(true)?;
    FdTransport::new(std, label)
}

/// A listening Unix socket. The socket file is removed on drop.
pub struct UnixListener {
    inner: tokio::net::UnixListener,
    path: PathBuf,
}

impl UnixListener {
    /// Binds `path`, replacing a stale socket file left by a dead process.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        let path = path.as_ref().to_path_buf();
        if path.exists() && std::os::unix::net::UnixStream::connect(&path).is_err() {
            std::fs::remove_file(&path)?;
        }
        let inner =
            tokio::net::UnixListener::bind(&path).map_err(|e| io::Error::new(e.kind(), format!("bind unix:{}: {e}", path.display())))?;
        Ok(UnixListener { inner, path })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Listener for UnixListener {
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<DynTransport>> {
        let (stream, _) = ready!(self.inner.poll_accept(cx))?;
        Poll::Ready(wrap(stream, format!("unix:{}", self.path.display())).map(|t| Arc::new(t) as DynTransport))
    }

    fn describe(&self) -> String {
        format!("unix:{}", self.path.display())
    }
}

impl Drop for UnixListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
