//! The transport over a connected stream socket: Unix, TCP, or the
//! socketpair of a child process. Registered with tokio's reactor through
//! `AsyncFd`, but read and written with plain `recvmsg`/`sendmsg` calls on the
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

    /// One read: plain ([`recv`]), or into the inbox while descriptors
    /// are accepted. Also says whether a short read proves the socket
    /// drained: a stream socket's read copies until the buffer is full or
    /// the queue is empty, except that the kernel stops after a message
    /// carrying descriptors, with more bytes perhaps queued behind it. So:
    /// after a plain read that met none, yes; otherwise no.
    fn read(&self, buf: &mut BytesMut) -> (io::Result<usize>, bool) {
        if !self.want_fds.load(Ordering::Acquire) {
            return match recv(self.io.as_raw_fd(), buf) {
                Ok((n, cut)) => {
                    self.read_total.fetch_add(n as u64, Ordering::Relaxed);
                    (Ok(n), !cut)
                }
                Err(e) => (Err(e), false),
            };
        }
        let mut fds = Vec::new();
        let r = fd_pass::recv_with_fds(self.io.as_raw_fd(), buf, &mut fds);
        let n = *r.as_ref().unwrap_or(&0) as u64;
        let until = self.read_total.fetch_add(n, Ordering::Relaxed) + n;
        if !fds.is_empty() {
            self.inbox.lock().unwrap().put(fds, until);
        }
        (r, false)
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

/// One read into `buf`'s spare capacity: `recvmsg` without a control
/// buffer, so descriptors a peer sent unasked are closed by the kernel.
/// Also returns whether the read met such a message (`MSG_CTRUNC`).
fn recv(fd: RawFd, buf: &mut BytesMut) -> io::Result<(usize, bool)> {
    let spare = buf.chunk_mut();
    let mut iov = libc::iovec { iov_base: spare.as_mut_ptr() as *mut libc::c_void, iov_len: spare.len() };
    // SAFETY: the kernel writes at most `iov_len` bytes into the spare
    // capacity; we then mark exactly that many as initialised. The msghdr
    // has no name and no control buffer, and points at `iov` only for the
    // duration of the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    unsafe { buf.advance_mut(n as usize) };
    Ok((n as usize, msg.msg_flags & libc::MSG_CTRUNC != 0))
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
        self.read(buf).0
    }

    /// Clears the reactor's cached readiness when the read shows there is
    /// nothing more: on `WouldBlock`, and on a short plain read (as tokio's
    /// own `UnixStream` and `TcpStream` do), so the next poll waits in the
    /// reactor at once instead of first making a `recv` that finds nothing:
    /// one system call fewer per wake-up. Bytes that arrive after the read
    /// raise a new edge, which the reactor records after the clear.
    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.io.poll_read_ready(cx))?;
            let room = buf.chunk_mut().len();
            match self.read(buf) {
                (Err(e), _) if e.kind() == io::ErrorKind::WouldBlock => guard.clear_ready(),
                (Ok(n), true) if n > 0 && n < room => {
                    guard.clear_ready();
                    return Poll::Ready(Ok(n));
                }
                (r, _) => return Poll::Ready(r),
            }
        }
    }

    /// Always true: a task parked in `poll_read` waits in the reactor
    /// for the socket's next edge, and every byte that arrived since it
    /// parked raised one (read by another task or not), so whatever another
    /// read left, the parked task is woken for it.
    fn rearm_read(&self) -> bool {
        true
    }

    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        send(self.io.as_raw_fd(), bufs)
    }

    /// Clears the cached readiness on `WouldBlock` and on a short write
    /// (the socket is full: a non-blocking stream `sendmsg` stops only
    /// there), so the next poll waits for the peer to drain it without a
    /// `sendmsg` that fails first.
    fn poll_write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let len: usize = bufs.iter().take(libc::UIO_MAXIOV as usize).map(|b| b.len()).sum();
        loop {
            let mut guard = ready!(self.io.poll_write_ready(cx))?;
            match send(self.io.as_raw_fd(), bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => guard.clear_ready(),
                Ok(n) if n > 0 && n < len => {
                    guard.clear_ready();
                    return Poll::Ready(Ok(n));
                }
                r => return Poll::Ready(r),
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

    fn peer_uid(&self) -> Option<u32> {
        if self.unix {
            fd_pass::peer_uid(self.io.as_raw_fd())
        } else {
            None
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    /// A guard on waits that must end; a lost wake-up fails instead of hanging.
    const WAKE: Duration = Duration::from_secs(10);

    fn pair() -> (FdTransport<UnixStream>, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        (FdTransport::new(a, "test".into()).unwrap(), b)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn bytes_sent_after_a_short_read_wake_the_reader() {
        let (t, mut peer) = pair();
        peer.write_all(b"abc").unwrap();
        let mut buf = BytesMut::with_capacity(1024);
        assert_eq!(poll_fn(|cx| t.poll_read(cx, &mut buf)).await.unwrap(), 3, "a short read");
        // Readiness is cleared: the next poll waits without reading...
        let mut read = Box::pin(poll_fn(|cx| t.poll_read(cx, &mut buf)));
        assert!(futures_poll_once(read.as_mut()).await.is_pending());
        // ...and bytes that come later still wake it.
        peer.write_all(b"de").unwrap();
        assert_eq!(tokio::time::timeout(WAKE, read).await.expect("woken").unwrap(), 2);
        assert_eq!(&buf[..], b"abcde");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_short_write_leaves_the_writer_waiting_until_the_peer_drains() {
        let (t, mut peer) = pair();
        let chunk = vec![7u8; 1 << 20];
        let bufs = [IoSlice::new(&chunk)];
        let n = poll_fn(|cx| t.poll_write(cx, &bufs)).await.unwrap();
        assert!(n > 0 && n < chunk.len(), "the socket takes a part: {n}");
        let mut write = Box::pin(poll_fn(|cx| t.poll_write(cx, &bufs)));
        assert!(futures_poll_once(write.as_mut()).await.is_pending(), "full: waits");
        let mut sink = vec![0u8; n];
        peer.read_exact(&mut sink).unwrap();
        assert!(tokio::time::timeout(WAKE, write).await.expect("woken").unwrap() > 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn bytes_behind_unasked_descriptors_are_read_without_a_new_write() {
        use std::os::fd::{AsFd, FromRawFd};
        let (t, peer) = pair();
        let mut p = [0; 2];
        // SAFETY: pipe2 fills `p` with two new descriptors we then own.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        let (_r, w) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
        fd_pass::send_with_fds(peer.as_raw_fd(), &[IoSlice::new(b"x")], &[w.as_fd()]).unwrap();
        (&peer).write_all(b"yz").unwrap();
        let mut buf = BytesMut::with_capacity(1024);
        // The read stops after the message with the descriptor: short, but
        // the socket is not drained, so readiness must stay set.
        assert_eq!(poll_fn(|cx| t.poll_read(cx, &mut buf)).await.unwrap(), 1);
        let mut read = Box::pin(poll_fn(|cx| t.poll_read(cx, &mut buf)));
        assert_eq!(futures_poll_once(read.as_mut()).await.map(Result::unwrap), Poll::Ready(2));
        assert_eq!(&buf[..], b"xyz");
    }

    /// Polls `f` once.
    async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Poll<F::Output> {
        poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut f).poll(cx))).await
    }
}
