//! The transport over a connected stream socket: Unix, TCP, or the
//! socketpair of a child process. Registered with tokio's reactor through
//! `AsyncFd`, but read and written with plain `recv`/`sendmsg` calls on the
//! non-blocking descriptor, so that `try_read` really asks the kernel each
//! time (the spinning wait mode depends on that) and large payloads leave in
//! one vectored call without being copied together first.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::{ready, Context, Poll};

use bytes::{BufMut, BytesMut};
use tokio::io::unix::AsyncFd;

use super::fd_pass::{self, FdInbox};
use super::Transport;

/// A transport over any connected, non-blocking stream socket.
pub struct FdTransport<S: AsRawFd + Send + Sync + 'static> {
    io: AsyncFd<S>,
    label: String,
    /// A Unix socket: descriptors can pass.
    unix: bool,
    /// `inbox.wanted()`, read without the lock on every read.
    want_fds: AtomicBool,
    inbox: Mutex<FdInbox>,
    /// Bytes read so far: the stream position that received descriptors
    /// are tagged with (`FdInbox::put`). Written by the one reader only.
    read_total: AtomicU64,
}

impl<S: AsRawFd + Send + Sync + 'static> FdTransport<S> {
    /// Wraps a connected socket, which must already be non-blocking.
    /// Must be called inside a tokio runtime.
    pub fn new(socket: S, label: String) -> io::Result<Self> {
        // SAFETY: we own `socket`, so its descriptor stays open and is not
        // registered elsewhere for as long as the AsyncFd lives.
        let unix = fd_pass::is_unix_socket(socket.as_raw_fd());
        let io = unsafe { AsyncFd::register(socket) }.map_err(io::Error::from)?;
        Ok(FdTransport {
            io,
            label,
            unix,
            want_fds: AtomicBool::new(false),
            inbox: Mutex::new(FdInbox::default()),
            read_total: AtomicU64::new(0),
        })
    }

    /// One read: plain `recv`, or `recvmsg` into the inbox while
    /// descriptors are accepted.
    fn read(&self, buf: &mut BytesMut) -> io::Result<usize> {
        if !self.want_fds.load(Ordering::Acquire) {
            let n = recv(self.io.as_raw_fd(), buf)?;
            self.read_total.fetch_add(n as u64, Ordering::Relaxed);
            return Ok(n);
        }
        let mut fds = Vec::new();
        let r = fd_pass::recv_with_fds(self.io.as_raw_fd(), buf, &mut fds);
        let n = *r.as_ref().unwrap_or(&0) as u64;
        let until = self.read_total.fetch_add(n, Ordering::Relaxed) + n;
        if !fds.is_empty() {
            self.inbox.lock().unwrap().put(fds, until);
        }
        r
    }

    fn write_fds(&self, bufs: &[IoSlice<'_>], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
        if !self.unix && !fds.is_empty() {
            return Err(io::Error::new(io::ErrorKind::Unsupported, format!("{}: cannot pass descriptors", self.label)));
        }
        fd_pass::send_with_fds(self.io.as_raw_fd(), bufs, fds)
    }

    /// The wrapped socket.
    pub fn get_ref(&self) -> &S {
        self.io.get_ref()
    }
}

fn recv(fd: RawFd, buf: &mut BytesMut) -> io::Result<usize> {
    let spare = buf.chunk_mut();
    let len = spare.len();
    // SAFETY: the kernel writes at most `len` bytes into the spare
    // capacity; we then mark exactly that many as initialised.
    let n = unsafe { libc::recv(fd, spare.as_mut_ptr() as *mut libc::c_void, len, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    unsafe { buf.advance_mut(n as usize) };
    Ok(n as usize)
}

pub(super) fn send(fd: RawFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: IoSlice is ABI-compatible with iovec; msghdr is zeroed and
    // only points at `bufs` for the duration of the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len().min(libc::UIO_MAXIOV as usize) as _;
    // MSG_NOSIGNAL: a peer that went away is an EPIPE error, never SIGPIPE.
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Releases the socket behind `fd` while keeping the number taken: a
/// fresh unconnected socket is put in its place (`dup3`), so the socket is
/// closed now (a peer still writing gets a reset, not a full buffer), and
/// the number cannot be reused by another file before the owner closes it
/// on drop. Reads and writes on it then fail with `ENOTCONN`. The old
/// socket leaves the reactor's epoll set as it closes.
pub(super) fn release(fd: RawFd) {
    // SAFETY: plain system calls on a descriptor we own and one we create
    // and close here.
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
        let blank = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if blank >= 0 {
            libc::dup3(blank, fd, libc::O_CLOEXEC);
            libc::close(blank);
        }
    }
}

impl<S: AsRawFd + Send + Sync + 'static> Transport for FdTransport<S> {
    fn try_read(&self, buf: &mut BytesMut) -> io::Result<usize> {
        self.read(buf)
    }

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.io.poll_read_ready(cx))?;
            // try_io clears the cached readiness on WouldBlock, so the next
            // poll registers with the reactor instead of spinning.
            if let Ok(r) = guard.try_io(|_| self.read(buf)) {
                return Poll::Ready(r);
            }
        }
    }

    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        send(self.io.as_raw_fd(), bufs)
    }

    fn poll_write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.io.poll_write_ready(cx))?;
            if let Ok(r) = guard.try_io(|io| send(io.as_raw_fd(), bufs)) {
                return Poll::Ready(r);
            }
        }
    }

    fn shutdown(&self) {
        // SAFETY: shutdown on a descriptor we own; errors (already closed,
        // not connected) are of no interest here.
        unsafe { libc::shutdown(self.io.as_raw_fd(), libc::SHUT_RDWR) };
    }

    fn shutdown_write(&self) {
        // SAFETY: as in shutdown.
        unsafe { libc::shutdown(self.io.as_raw_fd(), libc::SHUT_WR) };
    }

    fn release(&self) {
        release(self.io.as_raw_fd());
        self.accept_fds(0);
    }

    fn describe(&self) -> String {
        self.label.clone()
    }

    fn passes_fds(&self) -> bool {
        self.unix
    }

    fn accept_fds(&self, max: usize) {
        let max = if self.unix { max } else { 0 };
        let mut inbox = self.inbox.lock().unwrap();
        inbox.set_cap(max);
        self.want_fds.store(inbox.wanted(), Ordering::Release);
    }

    fn take_fd(&self) -> Option<OwnedFd> {
        self.inbox.lock().unwrap().take()
    }

    fn settle_fds(&self, unparsed: usize) {
        if self.want_fds.load(Ordering::Acquire) {
            let parsed = self.read_total.load(Ordering::Relaxed).saturating_sub(unparsed as u64);
            self.inbox.lock().unwrap().settle(parsed);
        }
    }

    fn try_write_fds(&self, bufs: &[IoSlice<'_>], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
        self.write_fds(bufs, fds)
    }

    fn poll_write_fds(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>], fds: &[BorrowedFd<'_>]) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.io.poll_write_ready(cx))?;
            if let Ok(r) = guard.try_io(|_| self.write_fds(bufs, fds)) {
                return Poll::Ready(r);
            }
        }
    }
}
