//! [`Ladder`]: the transport of a connection that may move to shared
//! memory. It starts as the Unix socket it wraps; once the engine has
//! agreed the upgrade (`engine/upgrade.rs`) it [attaches](Ladder::attach)
//! the [`Link`], and each direction moves to its ring at that direction's
//! marker frame: writes after [`Ladder::switch_write`], reads after
//! [`Ladder::switch_read`] (§11.4.2).
//!
//! The socket stays open for liveness: a reader parked on its ring also
//! watches the socket, whose end of stream (the peer closed or was killed)
//! ends the stream once the ring is drained. Bytes on the socket after the
//! switch break the protocol and are an `InvalidData` read error.

use std::io::{self, IoSlice};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use bytes::BytesMut;

use super::link::Link;
use crate::transport::{DynTransport, Transport};

/// A socket transport that can move to shared memory.
pub struct Ladder {
    socket: DynTransport,
    link: OnceLock<Arc<Link>>,
    read_ring: AtomicBool,
    write_ring: AtomicBool,
    /// A carrier (§11.4.3) has left for the frame being written to the
    /// ring, which has not gone yet: it must not leave twice.
    carrier_sent: AtomicBool,
    /// Where the socket's bytes go once the ring carries the frames: only
    /// carriers' bytes or the end of stream come there. Kept, so a reader
    /// parking on the ring does not allocate each time.
    scratch: Mutex<BytesMut>,
}

impl Ladder {
    /// Wraps a socket transport (one that [passes descriptors](Transport::passes_fds)).
    pub fn new(socket: DynTransport) -> Ladder {
        Ladder {
            socket,
            link: OnceLock::new(),
            read_ring: AtomicBool::new(false),
            write_ring: AtomicBool::new(false),
            carrier_sent: AtomicBool::new(false),
            scratch: Mutex::new(BytesMut::with_capacity(16)),
        }
    }

    /// Attaches the agreed shared memory; neither direction moves yet.
    /// A second link is dropped (the upgrade happens once).
    pub fn attach(&self, link: Link) {
        let _ = self.link.set(Arc::new(link));
    }

    /// The attached link, if any.
    pub fn link(&self) -> Option<&Arc<Link>> {
        self.link.get()
    }

    /// From now on, reads come from the ring (the peer's marker was read).
    pub fn switch_read(&self) {
        debug_assert!(self.link.get().is_some());
        self.read_ring.store(true, Ordering::Release);
    }

    /// From now on, writes go to the ring (our marker has left).
    pub fn switch_write(&self) {
        debug_assert!(self.link.get().is_some());
        self.write_ring.store(true, Ordering::Release);
    }

    /// Whether reads come from the ring.
    pub fn reads_ring(&self) -> bool {
        self.read_ring.load(Ordering::Acquire)
    }

    /// Whether both directions are on shared memory.
    pub fn on_shm(&self) -> bool {
        self.read_ring.load(Ordering::Acquire) && self.write_ring.load(Ordering::Acquire)
    }

    /// Whether our writes are on the ring and wait there for room (a
    /// large frame streaming through it): the task that writes will need
    /// this thread as soon as the peer frees room.
    pub fn write_waits(&self) -> bool {
        self.ring(&self.write_ring).is_some_and(Link::write_waits)
    }

    /// The link, once a direction uses it.
    fn ring(&self, flag: &AtomicBool) -> Option<&Link> {
        if flag.load(Ordering::Acquire) {
            self.link.get().map(|l| &**l)
        } else {
            None
        }
    }

    /// Ends our sending direction on the ring as well as on the socket.
    fn close_ring(&self) {
        if let Some(l) = self.ring(&self.write_ring) {
            l.close_write();
        }
    }

    /// Reads what the socket holds while we read the ring: carriers
    /// (§11.4.3), whose descriptors the socket queues as it reads them.
    /// `Ok(true)`: the peer's end (or an error) was seen; any byte other
    /// than a carrier's is `InvalidData`.
    fn read_carriers(&self) -> io::Result<bool> {
        let mut scratch = BytesMut::with_capacity(64);
        loop {
            scratch.clear();
            match self.socket.try_read(&mut scratch) {
                Ok(0) => return Ok(true),
                Ok(_) => check_carriers(&scratch)?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Ok(true),
            }
        }
    }
}

/// Bytes read from the socket after the peer moved to its ring: only
/// carriers (`0x00`, §11.4.3) may come.
fn check_carriers(bytes: &[u8]) -> io::Result<()> {
    match bytes.iter().all(|&b| b == 0) {
        true => Ok(()),
        false => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} bytes on the socket after the peer moved to shared memory", bytes.len()),
        )),
    }
}

fn would_block() -> io::Error {
    io::ErrorKind::WouldBlock.into()
}

impl Transport for Ladder {
    fn try_read(&self, buf: &mut BytesMut) -> io::Result<usize> {
        match self.ring(&self.read_ring) {
            None => self.socket.try_read(buf),
            Some(l) => match l.try_read(buf)? {
                Some(n) => {
                    self.socket.note_read(n);
                    Ok(n)
                }
                None => Err(would_block()),
            },
        }
    }

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
        let Some(l) = self.ring(&self.read_ring) else { return self.socket.poll_read(cx, buf) };
        loop {
            if let Some(n) = l.try_read(buf)? {
                self.socket.note_read(n);
                return Poll::Ready(Ok(n));
            }
            // Liveness: the peer's end of the socket.
            let mut scratch = self.scratch.lock().unwrap();
            scratch.clear();
            match self.socket.poll_read(cx, &mut scratch) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    // Closed or killed: what it published still counts.
                    return Poll::Ready(Ok(l.try_read(buf)?.unwrap_or(0)));
                }
                // Carriers (§11.4.3): their descriptors are queued; read on.
                Poll::Ready(Ok(_)) => {
                    check_carriers(&scratch)?;
                    continue;
                }
                Poll::Pending => {}
            }
            if l.poll_readable(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }

    fn rearm_read(&self) -> bool {
        match self.ring(&self.read_ring) {
            None => self.socket.rearm_read(),
            // The socket is untouched by a read of the ring: only the
            // ring's flag needs setting again.
            Some(l) => l.rearm_read(),
        }
    }

    fn try_write_in_memory(&self, bufs: &[IoSlice<'_>]) -> Option<io::Result<(usize, bool)>> {
        self.ring(&self.write_ring).map(|l| l.try_write_unwoken(bufs))
    }

    fn wake_reader(&self) {
        if let Some(l) = self.ring(&self.write_ring) {
            l.wake_reader();
        }
    }

    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self.ring(&self.write_ring) {
            None => self.socket.try_write(bufs),
            Some(l) => match l.try_write(bufs)? {
                0 if bufs.iter().any(|b| !b.is_empty()) => Err(would_block()),
                n => Ok(n),
            },
        }
    }

    fn poll_write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let Some(l) = self.ring(&self.write_ring) else { return self.socket.poll_write(cx, bufs) };
        loop {
            match self.try_write(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return Poll::Ready(r),
            }
            // A peer that dies meanwhile ends the connection through the
            // reader, which closes the writer and so ends this wait.
            if l.poll_writable(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }

    fn shutdown(&self) {
        self.close_ring();
        self.socket.shutdown();
    }

    fn shutdown_write(&self) {
        self.close_ring();
        self.socket.shutdown_write();
    }

    fn release(&self) {
        self.close_ring();
        self.socket.release();
    }

    fn describe(&self) -> String {
        if self.on_shm() {
            format!("{}+shm", self.socket.describe())
        } else {
            self.socket.describe()
        }
    }

    fn passes_fds(&self) -> bool {
        self.socket.passes_fds()
    }

    fn peer_uid(&self) -> Option<u32> {
        self.socket.peer_uid()
    }

    fn accept_fds(&self, max: usize) {
        self.socket.accept_fds(max)
    }

    fn take_fd(&self) -> Option<OwnedFd> {
        // On the ring, a carrying frame's carrier is already in the socket's
        // buffer (§11.4.3); a bad byte there shows again on the next read.
        if self.reads_ring() {
            let _ = self.read_carriers();
        }
        self.socket.take_fd()
    }

    fn settle_fds(&self, unparsed: usize) {
        // On the ring, descriptors come with carriers only (§11.4.3), each
        // ahead of its frame, and the reader's bytes are the ring's, not
        // the socket's: the queue's cap bounds them there.
        if !self.reads_ring() {
            self.socket.settle_fds(unparsed)
        }
    }

    fn try_write_fds(&self, bufs: &[IoSlice<'_>], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
        if self.ring(&self.write_ring).is_none() {
            return self.socket.try_write_fds(bufs, fds);
        }
        // The carrier first, once per frame, then the frame into the ring.
        if !self.carrier_sent.load(Ordering::Acquire) {
            self.socket.try_write_fds(&[IoSlice::new(&[0])], fds)?;
            self.carrier_sent.store(true, Ordering::Release);
        }
        let n = self.try_write(bufs)?;
        self.carrier_sent.store(false, Ordering::Release);
        Ok(n)
    }

    fn poll_write_fds(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>], fds: &[BorrowedFd<'_>]) -> Poll<io::Result<usize>> {
        if self.ring(&self.write_ring).is_none() {
            return self.socket.poll_write_fds(cx, bufs, fds);
        }
        if !self.carrier_sent.load(Ordering::Acquire) {
            match self.socket.poll_write_fds(cx, &[IoSlice::new(&[0])], fds) {
                Poll::Ready(Ok(_)) => self.carrier_sent.store(true, Ordering::Release),
                other => return other,
            }
        }
        let r = self.poll_write(cx, bufs);
        if let Poll::Ready(Ok(_)) = r {
            self.carrier_sent.store(false, Ordering::Release);
        }
        r
    }
}
