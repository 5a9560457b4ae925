//! TCP, for peers on other machines (or when a Unix socket is not an
//! option). `TCP_NODELAY` is always set: the connection batches writes
//! itself, so Nagle's delay would only add latency.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::net::ToSocketAddrs;

use super::fd::FdTransport;
use super::{DynTransport, Listener};

/// A transport over a TCP connection.
pub type TcpTransport = FdTransport<std::net::TcpStream>;

/// Connects to `addr` (`host:port`).
pub async fn connect(addr: impl ToSocketAddrs + std::fmt::Display) -> io::Result<TcpTransport> {
    let label = format!("tcp:{addr}");
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| io::Error::new(e.kind(), format!("connect to {label}: {e}")))?;
    wrap(stream, label)
}

fn wrap(stream: tokio::net::TcpStream, label: String) -> io::Result<TcpTransport> {
    stream.set_nodelay(true)?;
    let std = stream.into_std()?;
    std.set_nonblocking(true)?;
    FdTransport::new(std, label)
}

/// A listening TCP socket.
pub struct TcpListener {
    inner: tokio::net::TcpListener,
}

impl TcpListener {
    /// Binds `addr`; port 0 picks a free port (see [`TcpListener::local_addr`]).
    pub async fn bind(addr: impl ToSocketAddrs + std::fmt::Display) -> io::Result<TcpListener> {
        let label = format!("{addr}");
        let inner = tokio::net::TcpListener::bind(addr).await.map_err(|e| io::Error::new(e.kind(), format!("bind tcp:{label}: {e}")))?;
        Ok(TcpListener { inner })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

impl Listener for TcpListener {
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<DynTransport>> {
        let (stream, peer) = ready!(self.inner.poll_accept(cx))?;
        Poll::Ready(wrap(stream, format!("tcp:{peer}")).map(|t| Arc::new(t) as DynTransport))
    }

    fn describe(&self) -> String {
        match self.inner.local_addr() {
            Ok(a) => format!("tcp:{a}"),
            Err(_) => "tcp:?".into(),
        }
    }
}
