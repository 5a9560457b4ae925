//! Passing descriptors with the bytes of a Unix stream socket
//! (`SCM_RIGHTS`), for the frames that hand the peer a resource: the
//! shared-memory upgrade's segment and eventfds (`spec/PROTOCOL.md` §11.4)
//! and the hub's direct path.
//!
//! On a stream socket the kernel attaches the descriptors to the first
//! byte of the `sendmsg` that carries them, and a `recvmsg` never reads
//! past the end of a send that carried descriptors into the next one, so
//! a frame that starts a `sendmsg` is read with its descriptors, at the
//! latest in the read that brings its first byte. The sender therefore
//! writes such a frame alone, at the start of its own `sendmsg`
//! (`Writer::push_alone`); the receiver keeps what arrives in an
//! [`FdInbox`] until the frame is decoded and takes them in order.
//!
//! Bounds: at most [`MAX_FDS`] descriptors are accepted per `recvmsg`
//! (the control buffer holds no more: the kernel closes the rest, they
//! never enter this process), an inbox holds at most its cap (the rest are
//! closed on arrival), and a transport that expects none reads with plain
//! `recv`, where the kernel closes every descriptor sent. Every received
//! descriptor is close-on-exec (`MSG_CMSG_CLOEXEC`) so a child spawned
//! meanwhile cannot inherit it.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use bytes::{BufMut, BytesMut};

/// The most descriptors one `sendmsg` may carry, and one `recvmsg` accepts.
pub const MAX_FDS: usize = 8;

/// Room for one `SCM_RIGHTS` message of [`MAX_FDS`] descriptors, aligned
/// for `cmsghdr` (`CMSG_SPACE(8 * 4)` is 48 bytes on 64-bit Linux).
#[repr(C, align(8))]
struct ControlBuf([u8; 64]);

fn cmsg_space(n: usize) -> usize {
    // SAFETY: CMSG_SPACE is arithmetic on its argument.
    unsafe { libc::CMSG_SPACE((n * std::mem::size_of::<RawFd>()) as u32) as usize }
}

/// Writes some prefix of `bufs` on the Unix socket `sock` with one
/// `sendmsg` whose first byte carries `fds` (duplicated into the peer; ours
/// stay open). With no descriptors it is a plain vectored send. At most
/// [`MAX_FDS`]; an empty `bufs` is refused (the descriptors need a byte to
/// ride on). `WouldBlock` means nothing was sent, descriptors included.
pub fn send_with_fds(sock: RawFd, bufs: &[IoSlice<'_>], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} descriptors in one message (at most {MAX_FDS})", fds.len())));
    }
    if !fds.is_empty() && bufs.iter().all(|b| b.is_empty()) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "descriptors need at least one byte to travel with"));
    }
    let mut control = ControlBuf([0; 64]);
    // SAFETY: IoSlice is ABI-compatible with iovec; msghdr is zeroed and
    // points at `bufs` and `control` only for the duration of the call;
    // the cmsg macros stay inside `control`, which has room for MAX_FDS.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len().min(libc::UIO_MAXIOV as usize) as _;
        if !fds.is_empty() {
            msg.msg_control = control.0.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = cmsg_space(fds.len()) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN((fds.len() * std::mem::size_of::<RawFd>()) as u32) as _;
            let data = libc::CMSG_DATA(cmsg) as *mut RawFd;
            for (i, fd) in fds.iter().enumerate() {
                data.add(i).write_unaligned(fd.as_raw_fd());
            }
        }
        // MSG_NOSIGNAL: a peer that went away is an EPIPE error, never SIGPIPE.
        let n = libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

/// Reads into the spare capacity of `buf` (appending) from the Unix socket
/// `sock` with one `recvmsg`, and appends the descriptors that came with
/// those bytes to `fds` (at most [`MAX_FDS`]; the kernel closes any more).
/// Returns the bytes read, `Ok(0)` at end of stream.
pub fn recv_with_fds(sock: RawFd, buf: &mut BytesMut, fds: &mut Vec<OwnedFd>) -> io::Result<usize> {
    let spare = buf.chunk_mut();
    let mut iov = libc::iovec { iov_base: spare.as_mut_ptr() as *mut libc::c_void, iov_len: spare.len() };
    let mut control = ControlBuf([0; 64]);
    // SAFETY: the kernel writes at most `iov_len` bytes into the spare
    // capacity and at most `msg_controllen` into `control`; we then mark
    // exactly the bytes read as initialised and walk only the control
    // messages the kernel reports.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = cmsg_space(MAX_FDS) as _;
        let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.advance_mut(n as usize);
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                let bytes = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    // Each is a fresh descriptor the kernel installed for
                    // us: we own it from here on.
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        Ok(n as usize)
    }
}

/// Whether `sock` is a Unix-domain socket (descriptors can pass on it).
pub fn is_unix_socket(sock: RawFd) -> bool {
    // SAFETY: getsockname writes at most `len` bytes into `addr`.
    unsafe {
        let mut addr: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        libc::getsockname(sock, &mut addr as *mut _ as *mut libc::sockaddr, &mut len) == 0 && addr.ss_family as i32 == libc::AF_UNIX
    }
}

/// The uid of the process at the other end of a Unix socket
/// (`SO_PEERCRED`); `None` for any other descriptor.
pub fn peer_uid(sock: RawFd) -> Option<u32> {
    // SAFETY: getsockopt writes at most `len` bytes into `cred`.
    unsafe {
        let mut cred: libc::ucred = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        let ok = libc::getsockopt(sock, libc::SOL_SOCKET, libc::SO_PEERCRED, &mut cred as *mut _ as *mut libc::c_void, &mut len) == 0;
        (ok && len as usize == std::mem::size_of::<libc::ucred>()).then_some(cred.uid)
    }
}

/// Received descriptors waiting for the frame that explains them, oldest
/// first, at most `cap` of them. With a cap of 0 (the default) the owner
/// reads without a control buffer and nothing is ever held.
///
/// Each descriptor is kept with the stream position just past the read
/// that brought it: the frame it belongs to starts before that position
/// (a read never goes past the send that carried descriptors). Once every
/// frame starting there has been dispatched ([`FdInbox::settle`]), a
/// descriptor no frame took is stray and closed at once (`spec/PROTOCOL.md`
/// §11.4.2), not kept for a later frame that takes descriptors.
#[derive(Default)]
pub struct FdInbox {
    fds: VecDeque<(u64, OwnedFd)>,
    cap: usize,
}

impl FdInbox {
    /// How many descriptors are held at most; lowering the cap closes the
    /// newest beyond it.
    pub fn set_cap(&mut self, cap: usize) {
        self.cap = cap;
        self.fds.truncate(cap);
    }

    /// Whether descriptors are wanted at all (reads then use `recvmsg`).
    pub fn wanted(&self) -> bool {
        self.cap > 0
    }

    /// Keeps `fds`, which came with the bytes read up to stream position
    /// `until`, in order of arrival; those beyond the cap are closed.
    pub fn put(&mut self, fds: Vec<OwnedFd>, until: u64) {
        for fd in fds {
            if self.fds.len() < self.cap {
                self.fds.push_back((until, fd));
            } else {
                drop(fd);
            }
        }
    }

    /// The reader has dispatched every frame that starts before stream
    /// position `parsed`: closes the descriptors that came with bytes
    /// before it, which no frame took.
    pub fn settle(&mut self, parsed: u64) {
        while self.fds.front().is_some_and(|(until, _)| *until <= parsed) {
            self.fds.pop_front();
        }
    }

    /// The oldest descriptor held.
    pub fn take(&mut self) -> Option<OwnedFd> {
        self.fds.pop_front().map(|(_, fd)| fd)
    }

    /// How many are held.
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    /// A pipe: (read end, write end).
    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills `fds` with two new descriptors we then own.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    /// Whether the pipe whose read end is `r` still has a writer open
    /// somewhere (a read would wait) rather than none (end of stream).
    fn has_writer(r: &OwnedFd) -> bool {
        let mut one = [0u8; 1];
        // SAFETY: a non-blocking read into a local buffer.
        unsafe {
            libc::fcntl(r.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
            libc::read(r.as_raw_fd(), one.as_mut_ptr() as *mut libc::c_void, 1) < 0
        }
    }

    #[test]
    fn a_descriptor_crosses_with_the_first_byte_and_works_on_the_other_side() {
        let (a, b) = UnixStream::pair().unwrap();
        assert!(is_unix_socket(a.as_raw_fd()));
        let (r, w) = pipe();
        let n = send_with_fds(a.as_raw_fd(), &[IoSlice::new(b"frame")], &[w.as_fd()]).unwrap();
        assert_eq!(n, 5);
        drop(w);
        let mut buf = BytesMut::with_capacity(64);
        let mut got = Vec::new();
        assert_eq!(recv_with_fds(b.as_raw_fd(), &mut buf, &mut got).unwrap(), 5);
        assert_eq!(&buf[..], b"frame");
        assert_eq!(got.len(), 1);
        // SAFETY: fcntl on a descriptor we own.
        let flags = unsafe { libc::fcntl(got[0].as_raw_fd(), libc::F_GETFD) };
        assert_ne!(flags & libc::FD_CLOEXEC, 0, "received descriptors are close-on-exec");
        // The received write end is the pipe's: a byte written there
        // arrives at our read end.
        let mut f = std::fs::File::from(got.pop().unwrap());
        std::io::Write::write_all(&mut f, b"x").unwrap();
        let mut one = [0u8; 1];
        std::io::Read::read_exact(&mut std::fs::File::from(r), &mut one).unwrap();
        assert_eq!(&one, b"x");
    }

    #[test]
    fn a_read_stops_where_a_message_with_descriptors_begins() {
        let (a, b) = UnixStream::pair().unwrap();
        let (_r, w) = pipe();
        send_with_fds(a.as_raw_fd(), &[IoSlice::new(b"before")], &[]).unwrap();
        send_with_fds(a.as_raw_fd(), &[IoSlice::new(b"offer")], &[w.as_fd()]).unwrap();
        let mut buf = BytesMut::with_capacity(64);
        let mut got = Vec::new();
        let mut reads = 0;
        while buf.len() < 11 {
            recv_with_fds(b.as_raw_fd(), &mut buf, &mut got).unwrap();
            reads += 1;
            if buf.len() <= 6 {
                assert!(got.is_empty(), "no descriptor before its byte");
            }
        }
        assert_eq!(&buf[..], b"beforeoffer");
        assert_eq!(got.len(), 1, "after {reads} reads");
    }

    #[test]
    fn descriptors_beyond_the_cap_are_closed_not_leaked() {
        let (a, b) = UnixStream::pair().unwrap();
        let pipes: Vec<_> = (0..MAX_FDS + 1).map(|_| pipe()).collect();
        let ends: Vec<BorrowedFd<'_>> = pipes.iter().map(|(_, w)| w.as_fd()).collect();
        assert!(send_with_fds(a.as_raw_fd(), &[IoSlice::new(b"x")], &ends).is_err(), "more than MAX_FDS are refused by the sender");
        send_with_fds(a.as_raw_fd(), &[IoSlice::new(b"x")], &ends[..MAX_FDS]).unwrap();
        drop(ends);
        // Only the copies in flight keep the pipes' write ends open now.
        let reads: Vec<OwnedFd> = pipes.into_iter().map(|(r, _)| r).collect();
        let mut buf = BytesMut::with_capacity(64);
        let mut got = Vec::new();
        recv_with_fds(b.as_raw_fd(), &mut buf, &mut got).unwrap();
        assert_eq!(got.len(), MAX_FDS);
        let mut inbox = FdInbox::default();
        inbox.set_cap(2);
        inbox.put(got, 1);
        assert_eq!(inbox.len(), 2);
        let open: Vec<bool> = reads.iter().map(has_writer).collect();
        let mut want = vec![false; MAX_FDS + 1];
        want[..2].fill(true);
        assert_eq!(open, want, "the two kept are open, the rest closed");
        inbox.set_cap(0);
        assert!(inbox.is_empty() && !inbox.wanted());
        assert!(!has_writer(&reads[0]) && !has_writer(&reads[1]), "lowering the cap closes what it held");
    }

    #[test]
    fn settling_closes_what_came_with_dispatched_frames_and_keeps_the_rest() {
        let (r1, w1) = pipe();
        let (r2, w2) = pipe();
        let mut inbox = FdInbox::default();
        inbox.set_cap(5);
        // One descriptor came with the bytes up to position 10, one with
        // those up to 30.
        inbox.put(vec![w1], 10);
        inbox.put(vec![w2], 30);
        inbox.settle(9);
        assert_eq!(inbox.len(), 2, "a frame starting before 10 may still take the first");
        inbox.settle(10);
        assert_eq!(inbox.len(), 1);
        assert!(!has_writer(&r1), "the first is closed: no frame took it");
        assert!(has_writer(&r2), "the second waits for its frame");
        let taken = inbox.take().unwrap();
        assert!(inbox.is_empty());
        drop(taken);
    }

    #[test]
    fn a_plain_read_closes_descriptors_nobody_expected() {
        let (a, b) = UnixStream::pair().unwrap();
        let (r, w) = pipe();
        send_with_fds(a.as_raw_fd(), &[IoSlice::new(b"x")], &[w.as_fd()]).unwrap();
        drop(w);
        let mut one = [0u8; 1];
        // SAFETY: recv into a local buffer.
        assert_eq!(unsafe { libc::recv(b.as_raw_fd(), one.as_mut_ptr() as *mut libc::c_void, 1, 0) }, 1);
        // The only write end left was in flight; reading without a control
        // buffer discarded it, so the pipe reads end of stream.
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut std::fs::File::from(r), &mut rest).unwrap();
        assert!(rest.is_empty());
    }
}
