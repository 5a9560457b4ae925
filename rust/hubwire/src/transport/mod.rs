//! Transports move bytes and nothing else, behind one small trait.
//!
//! A [`Transport`] is one side of a reliable, ordered, bidirectional byte
//! stream. The connection layer does all framing, multiplexing and waiting
//! policy on top; a transport offers two ways to read and to write: a
//! `try_` call that never blocks and never registers interest (so the
//! low-latency waiting mode can spin on it), and a `poll_` call that
//! registers the task's waker when nothing can be done now.
//!
//! | module | reaches | in-memory twin |
//! |---|---|---|
//! | [`memory`] | the same process | itself |
//! | [`child`] | a child process, over a socketpair on fd 3 | [`memory`] |
//! | [`unix`] | a Unix socket path | [`memory`] |
//! | [`tcp`] | `host:port` | [`memory`] |
//! | [`tls`] | `host:port`, encrypted (rustls) | [`memory`] |
//! | [`nats`] | a method, provider or replica through a NATS server (§13) | [`memory`] |
//! | [`shm`] | the same machine, by upgrading a `unix` or `child` connection (§11.4) | [`memory`] |
//!
//! [`fd`] is the one implementation behind `child`, `unix` and `tcp`;
//! [`tls`] reads and writes the same kind of socket through rustls.
//! [`fd_pass`] lets descriptors travel with the bytes of a Unix socket
//! (`SCM_RIGHTS`), behind the trait's `*_fds` hooks.

pub mod child;
pub mod fd;
pub mod fd_pass;
pub mod memory;
pub mod nats;
pub mod shm;
pub mod tcp;
pub mod tls;
pub mod unix;

use std::io::{self, IoSlice};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::BytesMut;

/// One side of a byte stream. Methods take `&self`: one task reads while
/// others write.
pub trait Transport: Send + Sync + 'static {
    /// Reads into the spare capacity of `buf` (appending) without waiting.
    /// `Ok(0)` is end of stream; `WouldBlock` means nothing is there now.
    /// The caller guarantees spare capacity.
    fn try_read(&self, buf: &mut BytesMut) -> io::Result<usize>;

    /// Like `try_read`, but on `WouldBlock` registers the waker and returns
    /// `Pending`.
    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut BytesMut) -> Poll<io::Result<usize>>;

    /// Writes some prefix of `bufs` without waiting.
    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;

    /// Like `try_write`, but on `WouldBlock` registers the waker and
    /// returns `Pending`.
    fn poll_write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>>;

    /// Closes both directions: the peer reads end of stream.
    fn shutdown(&self);

    /// Closes only our sending direction (half-close): the peer reads end
    /// of stream, and we can still read what it sends back.
    fn shutdown_write(&self);

    /// Closes both directions and releases what the transport holds in the
    /// kernel (the socket's descriptor) now, though this object lives on:
    /// a peer still writing then gets an error instead of filling a buffer
    /// no one reads. Reads and writes fail afterwards. Called once a
    /// connection has ended (`spec/PROTOCOL.md` §7.3). The default only
    /// shuts down; the descriptor then goes when the object is dropped.
    fn release(&self) {
        self.shutdown();
    }

    /// A short description for logs and error messages (`unix:/tmp/x.sock`).
    fn describe(&self) -> String;

    /// Told of `n` bytes that reached this connection by another path (a
    /// [`shm::Ladder`] reading its ring instead of this socket), so that a
    /// wrapper watching reads (the hub's idle timer) still sees them. The
    /// default ignores it; a wrapper passes it on.
    fn note_read(&self, n: usize) {
        let _ = n;
    }

    /// Called after a read made by another task than the one last parked
    /// in `poll_read` (a caller that read its own answer,
    /// `engine/own_read.rs`), before that task reads again. True if the
    /// parked task will still be woken by the next bytes (and by any the
    /// read left), with no help; false makes the engine wake it, to park
    /// again itself. The default, false, is always safe; a wrapper passes
    /// it on.
    fn rearm_read(&self) -> bool {
        false
    }

    /// Whether every write costs a message of its own (NATS, §13.4: one
    /// publish per write), so that the ITEMs a handler sends in a burst
    /// should leave in one write, even at the cost of handing the write to
    /// the connection's background flusher (one task hop) instead of
    /// writing inline. The default (a socket, whose writes are cheap and
    /// whose reader sees one byte stream anyway) is false; a wrapper passes
    /// it on.
    fn batches_items(&self) -> bool {
        false
    }

    /// For a transport whose write is a copy into memory the peer reads
    /// (a shared ring), which never waits: copies a prefix of `bufs` as
    /// [`Transport::try_write`] does (0 when the ring is full), and says
    /// whether the peer's reader is parked and must be woken with
    /// [`Transport::wake_reader`], which this does not do. The writer then
    /// writes small frames while it holds its queue's lock
    /// (`engine/writer.rs`) and wakes the reader after letting go of it.
    /// `None` (the default): writes are system calls, which other senders
    /// must not wait behind. A wrapper passes it on.
    fn try_write_in_memory(&self, bufs: &[IoSlice<'_>]) -> Option<io::Result<(usize, bool)>> {
        let _ = bufs;
        None
    }

    /// Wakes the peer's reader parked on the ring, after
    /// [`Transport::try_write_in_memory`] said it must be.
    fn wake_reader(&self) {}

    // ---- Descriptors with the bytes (fd_pass.rs) ---------------------------

    /// Whether descriptors can travel with this transport's bytes (a Unix
    /// socket: `unix`, `child`). The `*_fds` hooks below work only then.
    fn passes_fds(&self) -> bool {
        false
    }

    /// The uid of the process at the other end, when the kernel says (a
    /// Unix socket's `SO_PEERCRED`: the peer's at `connect`, or the
    /// creator's for a socketpair). A wrapper passes it on.
    fn peer_uid(&self) -> Option<u32> {
        None
    }

    /// Keeps up to `max` descriptors that arrive with the bytes read, until
    /// taken with [`Transport::take_fd`]; any beyond are closed on arrival.
    /// 0 (the default) closes every descriptor that arrives: set it only
    /// while a frame that carries some may come.
    fn accept_fds(&self, max: usize) {
        let _ = max;
    }

    /// The oldest received descriptor not yet taken. A frame's descriptors
    /// have arrived by the time its first byte has been read.
    fn take_fd(&self) -> Option<OwnedFd> {
        None
    }

    /// Told by the reader that it has dispatched every complete frame read
    /// so far, and holds `unparsed` bytes after them (the start of a frame
    /// still coming): descriptors that came with earlier bytes were taken
    /// by no frame, and are closed now (`spec/PROTOCOL.md` §11.4.2), so an
    /// acceptor waiting for an offer never keeps a peer's stray ones. The
    /// default has none to close; a wrapper passes it on.
    fn settle_fds(&self, unparsed: usize) {
        let _ = unparsed;
    }

    /// Like [`Transport::try_write`], with `fds` attached to the first byte
    /// written (at most `fd_pass::MAX_FDS`). `WouldBlock` means nothing left,
    /// descriptors included; any other success means they left.
    fn try_write_fds(&self, bufs: &[IoSlice<'_>], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
        let _ = (bufs, fds);
        Err(io::Error::new(io::ErrorKind::Unsupported, format!("{}: cannot pass descriptors", self.describe())))
    }

    /// Like [`Transport::poll_write`], with `fds` as in
    /// [`Transport::try_write_fds`].
    fn poll_write_fds(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>], fds: &[BorrowedFd<'_>]) -> Poll<io::Result<usize>> {
        let _ = cx;
        Poll::Ready(self.try_write_fds(bufs, fds))
    }
}

/// A shared, type-erased transport.
pub type DynTransport = Arc<dyn Transport>;

/// Something that hands out connected transports: a listening socket.
pub trait Listener: Send + Sync + 'static {
    /// Waits for the next incoming connection.
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<DynTransport>>;

    /// Where it listens, for logs.
    fn describe(&self) -> String;
}

/// Waits for the next incoming connection on `listener`.
pub async fn accept(listener: &dyn Listener) -> io::Result<DynTransport> {
    std::future::poll_fn(|cx| listener.poll_accept(cx)).await
}
