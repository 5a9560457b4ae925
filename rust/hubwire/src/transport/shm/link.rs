//! One side of an upgraded connection's shared memory (`spec/PROTOCOL.md`
//! §11.4.1): the ring it writes, the ring it reads, and the four eventfds
//! that wake a parked reader or writer.
//!
//! Each ring is single-producer single-consumer. The writer owns `written`
//! and its block's flags, the reader `read` and its own; the only shared
//! rule is the publish/park handshake: a side stores its counter, issues a
//! full fence and then reads the other's `*_waiting` flag; a side about to
//! park stores its flag, issues a full fence and then reads the counter
//! again. One of the two always sees the other, so no wake-up is lost, and
//! while both sides are busy the flags stay 0 and no system call is made.

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::task::{ready, Context, Poll};

use bytes::{BufMut, BytesMut};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::copy::{copy_in, publish_fence};
use super::release::{give_back, Deep, KEEP};
use super::segment::{reader_block, writer_block, Segment};
use super::Budget;

/// The control words of one ring, borrowed from the mapping.
struct Ctl<'a> {
    written: &'a AtomicU64,
    origin: &'a AtomicU64,
    closed: &'a AtomicU32,
    writer_waiting: &'a AtomicU32,
    read: &'a AtomicU64,
    reader_waiting: &'a AtomicU32,
}

fn ctl(seg: &Segment, r: usize) -> Ctl<'_> {
    // SAFETY: the blocks lie inside the control page, aligned to their
    // words (mmap is page-aligned, the offsets are multiples of 128 plus
    // 0, 8, 12 or 16), and live as long as the mapping borrowed here.
    unsafe {
        let at = |off: usize| seg.base().add(off);
        let (w, rd) = (writer_block(r), reader_block(r));
        Ctl {
            written: &*(at(w) as *const AtomicU64),
            origin: &*(at(w + 16) as *const AtomicU64),
            closed: &*(at(w + 8) as *const AtomicU32),
            writer_waiting: &*(at(w + 12) as *const AtomicU32),
            read: &*(at(rd) as *const AtomicU64),
            reader_waiting: &*(at(rd + 8) as *const AtomicU32),
        }
    }
}

fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: a new descriptor we own from here on.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// Checks a descriptor the peer handed over as one of a segment's
/// eventfds (§11.4.1): an eventfd (where `/proc` says), non-blocking, so
/// that `signal` (a write of 1) never blocks the thread that writes it.
pub fn check_eventfd(fd: BorrowedFd<'_>) -> Result<(), String> {
    // SAFETY: F_GETFL reads the descriptor's flags; no memory is passed.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(format!("not a descriptor: {}", io::Error::last_os_error()));
    }
    if let Ok(target) = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
        if target.as_os_str() != "anon_inode:[eventfd]" {
            return Err(format!("not an eventfd ({})", target.display()));
        }
    }
    if flags & libc::O_NONBLOCK == 0 {
        return Err("a blocking eventfd (O_NONBLOCK not set): a signal could block".into());
    }
    Ok(())
}

/// [`check_eventfd`] for the four eventfds of an offer, in the order they
/// travel (`data_0`, `room_0`, `data_1`, `room_1`); the error names the one
/// refused.
pub fn check_eventfds(fds: [&OwnedFd; 4]) -> Result<(), String> {
    for (fd, name) in fds.into_iter().zip(["data_0", "room_0", "data_1", "room_1"]) {
        check_eventfd(fd.as_fd()).map_err(|m| format!("{name}: {m}"))?;
    }
    Ok(())
}

/// Adds 1 to an eventfd: wakes the side parked on it.
fn signal(fd: &OwnedFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: an 8-byte write from a local; a full counter (EAGAIN) still
    // leaves the fd readable, which is all a wake-up needs.
    unsafe { libc::write(fd.as_raw_fd(), one.as_ptr() as *const libc::c_void, 8) };
}

/// Reads (clears) an eventfd; `WouldBlock` when it was 0.
fn drain(fd: &OwnedFd) -> io::Result<()> {
    let mut v = [0u8; 8];
    // SAFETY: an 8-byte read into a local.
    if unsafe { libc::read(fd.as_raw_fd(), v.as_mut_ptr() as *mut libc::c_void, 8) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The four eventfds of a segment, in the order they travel in an offer:
/// `data_0`, `room_0`, `data_1`, `room_1`.
pub fn eventfds() -> io::Result<[OwnedFd; 4]> {
    Ok([eventfd()?, eventfd()?, eventfd()?, eventfd()?])
}

/// Our side of a mapped segment.
pub struct Link {
    seg: Segment,
    /// The ring we write and the one we read.
    tx: usize,
    rx: usize,
    /// Signalled when we publish into `tx` and its reader waits.
    data_out: OwnedFd,
    /// Signalled when we free room in `rx` and its writer waits.
    room_in: OwnedFd,
    /// We park on it for bytes in `rx`.
    data_in: AsyncFd<OwnedFd>,
    /// We park on it for room in `tx`.
    room_out: AsyncFd<OwnedFd>,
    /// Whether our `reader_waiting` / `writer_waiting` may be 1.
    read_parked: AtomicBool,
    write_parked: AtomicBool,
    /// Our `tx` is closed: no more writes.
    write_closed: AtomicBool,
    /// We start our ring again at its first byte whenever the reader has
    /// caught up (layout 2; a layout-1 peer reads without `origin`).
    rewind: bool,
    /// Who owns the part of our ring past [`KEEP`] (`release.rs`).
    deep: Deep,
    _budget: Budget,
}

impl Link {
    /// Our side of `seg`: the dialer writes ring 0 and reads ring 1, the
    /// acceptor the other way round. `fds` as [`eventfds`] orders them.
    /// Must be called inside a tokio runtime.
    pub fn new(seg: Segment, dialer: bool, fds: [OwnedFd; 4], budget: Budget) -> io::Result<Link> {
        let [data0, room0, data1, room1] = fds;
        let rewind = seg.layout() >= 2;
        let (tx, rx, data_out, room_out, data_in, room_in) =
            if dialer { (0, 1, data0, room0, data1, room1) } else { (1, 0, data1, room1, data0, room0) };
        Ok(Link {
            seg,
            tx,
            rx,
            data_out,
            room_in,
            // Readable only: an eventfd is always writable, and with write
            // interest every read that clears it is an edge (EPOLLOUT) that
            // wakes the reactor for nothing, once per park.
            // SAFETY: we own both eventfds; each is registered once, here,
            // and stays open as long as its AsyncFd.
            data_in: unsafe { AsyncFd::register_with_interest(data_in, Interest::READABLE) }.map_err(io::Error::from)?,
            room_out: unsafe { AsyncFd::register_with_interest(room_out, Interest::READABLE) }.map_err(io::Error::from)?,
            read_parked: AtomicBool::new(false),
            write_parked: AtomicBool::new(false),
            write_closed: AtomicBool::new(false),
            rewind,
            deep: Deep::default(),
            _budget: budget,
        })
    }

    /// Copies published bytes into the spare capacity of `buf`.
    /// `Some(n)` with n > 0: bytes; `Some(0)`: the writer closed and all
    /// is read; `None`: nothing now. A peer that corrupts the counters is
    /// an `InvalidData` error.
    pub fn try_read(&self, buf: &mut BytesMut) -> io::Result<Option<usize>> {
        let spare = buf.chunk_mut();
        // SAFETY: `copy_out` writes at most `spare.len()` bytes there.
        let r = unsafe { self.copy_out(spare.as_mut_ptr(), spare.len())? };
        if let Some(n) = r {
            // SAFETY: exactly n bytes were written above.
            unsafe { buf.advance_mut(n) };
        }
        Ok(r)
    }

    /// Like [`Link::try_read`], into a slice.
    pub fn read_into(&self, dst: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: `dst` has room for `dst.len()` bytes.
        unsafe { self.copy_out(dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies up to `room` published bytes to `dst`.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `room` bytes.
    unsafe fn copy_out(&self, dst: *mut u8, room: usize) -> io::Result<Option<usize>> {
        let c = ctl(&self.seg, self.rx);
        let cap = self.seg.cap(self.rx);
        let written = c.written.load(Ordering::Acquire);
        let read = c.read.load(Ordering::Relaxed);
        let avail = written.wrapping_sub(read);
        if avail > cap as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("shared ring: {avail} bytes published in a ring of {cap}")));
        }
        // Looking is being awake: a reader that spins (or was woken by
        // anything else than the eventfd) clears its flag, so the writer
        // stops signalling it. Parking sets it again (`poll_readable`).
        if self.read_parked.load(Ordering::Relaxed) {
            self.read_parked.store(false, Ordering::Relaxed);
            c.reader_waiting.store(0, Ordering::Relaxed);
        }
        if avail == 0 || room == 0 {
            if room == 0 && avail > 0 {
                return Ok(None);
            }
            return Ok(if c.closed.load(Ordering::Acquire) != 0 && c.written.load(Ordering::Acquire) == read { Some(0) } else { None });
        }
        let n = (avail as usize).min(room);
        // As new as the bytes: stored before the `written` loaded above.
        // No newer: the writer moves it only once we have read everything.
        let origin = c.origin.load(Ordering::Relaxed);
        let start = (read.wrapping_sub(origin) as usize) & (cap - 1);
        let first = n.min(cap - start);
        // SAFETY: bytes [read, read + n) are published (acquire above) and
        // ours until we store `read`; the caller gives room for n.
        unsafe {
            std::ptr::copy_nonoverlapping(self.seg.data(self.rx).add(start), dst, first);
            std::ptr::copy_nonoverlapping(self.seg.data(self.rx), dst.add(first), n - first);
        }
        c.read.store(read + n as u64, Ordering::Release);
        fence(Ordering::SeqCst);
        if c.writer_waiting.load(Ordering::Relaxed) != 0 {
            signal(&self.room_in);
        }
        Ok(Some(n))
    }

    /// Copies a prefix of `bufs` into the ring we write; 0 when it is full.
    pub fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let (n, wake) = self.try_write_unwoken(bufs)?;
        if wake {
            self.wake_reader();
        }
        Ok(n)
    }

    /// [`Link::try_write`] without the wake-up: true with the count if the
    /// reader is parked, and [`Link::wake_reader`] must follow.
    pub fn try_write_unwoken(&self, bufs: &[IoSlice<'_>]) -> io::Result<(usize, bool)> {
        if self.write_closed.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "shared ring closed"));
        }
        let c = ctl(&self.seg, self.tx);
        let cap = self.seg.cap(self.tx);
        let written = c.written.load(Ordering::Relaxed);
        let used = written.wrapping_sub(c.read.load(Ordering::Acquire));
        if used > cap as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("shared ring: {used} bytes unread in a ring of {cap}")));
        }
        let mut free = cap - used as usize;
        if free == 0 {
            return Ok((0, false));
        }
        if self.write_parked.swap(false, Ordering::Relaxed) {
            c.writer_waiting.store(0, Ordering::Relaxed);
        }
        let mut origin = c.origin.load(Ordering::Relaxed);
        if used == 0 && self.rewind && written != origin {
            // The reader has everything: start again at the ring's first
            // byte, where the lines (and pages) are warm. Published with
            // the bytes, by the release store of `written` below.
            origin = written;
            c.origin.store(origin, Ordering::Relaxed);
        }
        // Past KEEP only while we hold that part (`release.rs`); stop
        // there while the release gives its pages back.
        let lead = written.wrapping_sub(origin);
        let mut held = false;
        if self.rewind && cap > KEEP && lead.saturating_add(free as u64) > KEEP as u64 {
            let want = bufs.iter().map(|b| b.len()).sum::<usize>().min(free);
            if lead.saturating_add(want as u64) > KEEP as u64 {
                held = self.deep.hold();
                if !held {
                    // `min`: a peer that scribbles on our `origin` must
                    // not make us write over bytes it has not read.
                    free = free.min((KEEP as u64).saturating_sub(lead) as usize);
                    if free == 0 {
                        return Ok((0, false));
                    }
                }
            }
        }
        let data = self.seg.data(self.tx);
        let mut pos = written;
        let mut streamed = false;
        for b in bufs {
            let n = b.len().min(free);
            let start = (pos.wrapping_sub(origin) as usize) & (cap - 1);
            let first = n.min(cap - start);
            // SAFETY: [pos, pos + n) is free (the reader is past it) and
            // ours until we publish; `b` has at least n bytes.
            unsafe {
                streamed |= copy_in(data.add(start), b.as_ptr(), first, cap);
                streamed |= copy_in(data, b.as_ptr().add(first), n - first, cap);
            }
            pos += n as u64;
            free -= n;
            if free == 0 {
                break;
            }
        }
        if streamed {
            publish_fence();
        }
        c.written.store(pos, Ordering::Release);
        if held {
            self.deep.let_go();
        }
        fence(Ordering::SeqCst);
        Ok(((pos - written) as usize, c.reader_waiting.load(Ordering::Relaxed) != 0))
    }

    /// Wakes the reader of the ring we write, parked on its eventfd.
    pub fn wake_reader(&self) {
        signal(&self.data_out);
    }

    /// Parks for bytes: `Ready` when something may have changed (call
    /// [`Link::try_read`] again), `Pending` with the waker registered on
    /// our data eventfd and `reader_waiting` set.
    pub fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<()> {
        let c = ctl(&self.seg, self.rx);
        if !self.read_parked.swap(true, Ordering::Relaxed) {
            c.reader_waiting.store(1, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            if c.written.load(Ordering::Acquire) != c.read.load(Ordering::Relaxed) || c.closed.load(Ordering::Acquire) != 0 {
                return Poll::Ready(());
            }
        }
        park(&self.data_in, cx)
    }

    /// After a read by another task than the one parked in
    /// [`Link::poll_readable`] (whose look cleared our flag, so the writer
    /// stopped signalling): sets the flag again, as a park does, keeping
    /// the parked task's waker. False if bytes (or the close) are already
    /// there: the parked task must then be woken by hand. (A task that
    /// has not parked yet finds the flag set when it does, and waits for a
    /// signal, which every write since this call sends.)
    pub fn rearm_read(&self) -> bool {
        let c = ctl(&self.seg, self.rx);
        if self.read_parked.swap(true, Ordering::Relaxed) {
            return true;
        }
        c.reader_waiting.store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        c.written.load(Ordering::Acquire) == c.read.load(Ordering::Relaxed) && c.closed.load(Ordering::Acquire) == 0
    }

    /// Parks for room, as [`Link::poll_readable`] does for bytes.
    pub fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<()> {
        let c = ctl(&self.seg, self.tx);
        if !self.write_parked.swap(true, Ordering::Relaxed) {
            c.writer_waiting.store(1, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            // While the release works, the room past KEEP is not ours: it
            // signals `room_out` when done.
            let room = c.written.load(Ordering::Relaxed).wrapping_sub(c.read.load(Ordering::Acquire)) < self.seg.cap(self.tx) as u64;
            if room && !self.deep.releasing() {
                return Poll::Ready(());
            }
        }
        park(&self.room_out, cx)
    }

    /// The blocking twin of [`Link::poll_readable`] and
    /// [`Link::poll_writable`], for code without a runtime (the bench's
    /// floor): waits until bytes may be there (`readable`) or room
    /// (`writable`), or both, parked in `poll(2)` on the eventfds and on
    /// `watch` (the socket); fails with `UnexpectedEof` once `watch` is
    /// readable or hung up (the peer closed it or died).
    pub fn wait_blocking(&self, readable: bool, writable: bool, watch: std::os::fd::RawFd) -> io::Result<()> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut p = Vec::with_capacity(3);
        let ends = [(readable, &self.data_in), (writable, &self.room_out)];
        for (wanted, fd) in ends {
            if !wanted {
                continue;
            }
            let ready = if std::ptr::eq(fd, &self.data_in) { self.poll_readable(&mut cx) } else { self.poll_writable(&mut cx) };
            if ready.is_ready() {
                return Ok(());
            }
            p.push(libc::pollfd { fd: fd.get_ref().as_raw_fd(), events: libc::POLLIN, revents: 0 });
        }
        p.push(libc::pollfd { fd: watch, events: libc::POLLIN, revents: 0 });
        // SAFETY: a valid array of pollfds for the call's duration.
        if unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, -1) } < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        if p.last().is_some_and(|w| w.revents != 0) {
            // The peer has gone: what it published (and its close) is
            // still read first.
            let c = ctl(&self.seg, self.rx);
            let input = c.written.load(Ordering::Acquire) != c.read.load(Ordering::Relaxed) || c.closed.load(Ordering::Acquire) != 0;
            return if readable && input { Ok(()) } else { Err(io::ErrorKind::UnexpectedEof.into()) };
        }
        for (wanted, fd) in ends {
            if wanted {
                let _ = drain(fd.get_ref());
            }
        }
        Ok(())
    }

    /// Closes the ring we write: the reader reads end of stream after the
    /// bytes published (`closed` = 1, §11.4.1).
    pub fn close_write(&self) {
        if self.write_closed.swap(true, Ordering::Relaxed) {
            return;
        }
        let c = ctl(&self.seg, self.tx);
        c.closed.store(1, Ordering::Release);
        fence(Ordering::SeqCst);
        if c.reader_waiting.load(Ordering::Relaxed) != 0 {
            signal(&self.data_out);
        }
    }

    /// Whether we have closed the ring we write.
    pub fn write_closed(&self) -> bool {
        self.write_closed.load(Ordering::Relaxed)
    }

    /// Whether our writer is parked for room in the ring we write: the
    /// peer's reader will free it and signal `room_out`.
    pub fn write_waits(&self) -> bool {
        self.write_parked.load(Ordering::Relaxed)
    }

    /// One tick of the release (`release.rs`): gives back the pages of
    /// our ring past [`KEEP`] if a write used them, none has since the
    /// last tick, and the reader has read everything. True if it did.
    /// Called every [`RELEASE_TICK`](super::release::RELEASE_TICK) by the
    /// engine while the connection lives.
    pub fn release_idle(&self) -> bool {
        if !self.rewind || self.seg.cap(self.tx) <= KEEP || !self.deep.begin() {
            return false;
        }
        self.finish_release()
    }

    /// The rest of a release once [`Deep::begin`] has taken the part past
    /// KEEP: gives its pages back if the ring is empty, and in every case
    /// hands that part back and wakes our writer, which may have parked
    /// meanwhile (`poll_writable` parks while the release works).
    fn finish_release(&self) -> bool {
        let cap = self.seg.cap(self.tx);
        let c = ctl(&self.seg, self.tx);
        // After `begin`: no write can go past KEEP now, so if the reader
        // has caught up, nothing there is unread or about to be written.
        let empty = c.read.load(Ordering::Acquire) == c.written.load(Ordering::Relaxed);
        let r = if empty {
            // SAFETY: [KEEP, cap) of our ring lies in the mapping,
            // page-aligned (both powers of two of at least a page), and is
            // free: read, and no write may enter it until `end`.
            Some(unsafe { give_back(self.seg.data(self.tx).add(KEEP), cap - KEEP) })
        } else {
            None
        };
        if empty {
            self.deep.end();
        } else {
            self.deep.abort();
        }
        // Our own writer's wake-up, at most one a tick; a writer that is
        // not parked finds the eventfd's edge stale and looks again.
        signal(self.room_out.get_ref());
        match r {
            Some(Ok(())) => true,
            Some(Err(e)) => {
                tracing::debug!("shared ring: cannot give back its idle pages: {e}");
                false
            }
            None => false,
        }
    }

    /// The sizes of the ring we write and the one we read.
    pub fn caps(&self) -> (usize, usize) {
        (self.seg.cap(self.tx), self.seg.cap(self.rx))
    }
}

/// Waits for `fd` to be signalled; `Ready` once it was. The counter is
/// left as it is: the reactor's epoll is edge-triggered, and every write
/// to an eventfd is a new edge whatever its counter holds, so clearing the
/// cached readiness is enough for the next signal to wake us again, and
/// the `read` that would zero the counter is one system call per wake-up
/// saved (`spec/PROTOCOL.md` §11.4.1 lets a side that waits so skip it).
/// The counter grows by one per signal, and a signal is sent only to a
/// parked side (at most one per write made while it is parked), or by our
/// own release (at most one a second): its limit, 2^64 − 2, is out of
/// reach.
fn park(fd: &AsyncFd<OwnedFd>, cx: &mut Context<'_>) -> Poll<()> {
    let mut guard = ready!(fd.poll_read_ready(cx)).expect("eventfd readiness");
    // Cleared only if no newer edge came since this guard's: tokio
    // compares the event's tick, so a signal sent meanwhile is kept.
    guard.clear_ready();
    Poll::Ready(())
}

#[cfg(test)]
#[path = "rewind_tests.rs"]
mod rewind_tests;

/// Both sides of one segment of `layout` in this process (two mappings
/// of the same memfd, as two processes would have), and the memfd.
#[cfg(test)]
fn pair_of(cap: usize, layout: u32) -> (Link, Link, OwnedFd) {
    let (seg, fd) = Segment::create_layout(cap, cap, layout).unwrap();
    let other = Segment::open(&fd).unwrap();
    let fds = eventfds().unwrap();
    let dup = |f: &OwnedFd| f.try_clone().unwrap();
    let theirs = [dup(&fds[0]), dup(&fds[1]), dup(&fds[2]), dup(&fds[3])];
    let budget = || crate::transport::shm::Budget::unlimited();
    (Link::new(seg, true, fds, budget()).unwrap(), Link::new(other, false, theirs, budget()).unwrap(), fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;

    fn pair(cap: usize) -> (Link, Link) {
        let (d, a, _fd) = pair_of(cap, super::super::segment::LAYOUT);
        (d, a)
    }

    /// What an acceptor takes as a segment's eventfd: ours pass; a
    /// blocking eventfd (a signal to it could block our thread) and a
    /// descriptor of another kind are refused, saying why.
    #[test]
    fn only_non_blocking_eventfds_pass_the_check() {
        for fd in eventfds().unwrap() {
            check_eventfd(fd.as_fd()).unwrap();
        }
        // SAFETY: new descriptors we own from here on.
        let blocking = unsafe { OwnedFd::from_raw_fd(libc::eventfd(0, libc::EFD_CLOEXEC)) };
        let e = check_eventfd(blocking.as_fd()).unwrap_err();
        assert!(e.contains("blocking eventfd"), "{e}");
        let mut p = [0; 2];
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) }, 0);
        let (r, _w) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
        let e = check_eventfd(r.as_fd()).unwrap_err();
        assert!(e.contains("not an eventfd (pipe:"), "{e}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn bytes_cross_both_ways_and_wrap_around_the_ring() {
        let (d, a) = pair(4096);
        let mut buf = BytesMut::with_capacity(8192);
        // 3000 bytes a round, of which the reader takes 2500 before the next
        // write: the ring is never empty then, so writes go on past its
        // end and wrap to its start (rounds 1 and 2).
        let mut rest = BytesMut::new();
        for round in 0..3u8 {
            let chunk = vec![round; 3000];
            assert_eq!(d.try_write(&[IoSlice::new(&chunk)]).unwrap(), 3000);
            let mut got = vec![0; 2500];
            assert_eq!(a.read_into(&mut got).unwrap(), Some(2500));
            rest.extend_from_slice(&got);
        }
        buf.clear();
        assert_eq!(a.try_read(&mut buf).unwrap(), Some(1500));
        rest.extend_from_slice(&buf);
        let want: Vec<u8> = (0..3u8).flat_map(|r| vec![r; 3000]).collect();
        assert_eq!(&rest[..], &want[..], "in order, across the wraps");
        assert_eq!(a.try_write(&[IoSlice::new(b"ab"), IoSlice::new(b"cd")]).unwrap(), 4);
        buf.clear();
        assert_eq!(d.try_read(&mut buf).unwrap(), Some(4));
        assert_eq!(&buf[..], b"abcd");
        assert_eq!(d.try_read(&mut buf).unwrap(), None, "nothing more");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_full_ring_takes_what_fits_and_a_closed_one_reads_end_of_stream() {
        let (d, a) = pair(4096);
        let big = vec![7u8; 10_000];
        assert_eq!(d.try_write(&[IoSlice::new(&big)]).unwrap(), 4096);
        assert_eq!(d.try_write(&[IoSlice::new(&big)]).unwrap(), 0, "full");
        d.close_write();
        let mut buf = BytesMut::with_capacity(1000);
        assert_eq!(a.try_read(&mut buf).unwrap(), Some(1000), "no more than the buffer's room");
        buf.clear();
        buf.reserve(8192);
        assert_eq!(a.try_read(&mut buf).unwrap(), Some(3096));
        assert_eq!(a.try_read(&mut buf).unwrap(), Some(0), "closed and empty: end of stream");
        assert!(d.try_write(&[IoSlice::new(b"x")]).is_err());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_parked_reader_is_woken_by_a_write_and_a_busy_one_costs_no_signal() {
        let (d, a) = pair(4096);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        // Not parked: a write signals nothing.
        d.try_write(&[IoSlice::new(b"x")]).unwrap();
        assert!(drain(a.data_in.get_ref()).is_err(), "no signal while the reader is not parked");
        let mut buf = BytesMut::with_capacity(64);
        a.try_read(&mut buf).unwrap();
        // Parked: the flag is set, and the next write signals.
        assert!(a.poll_readable(&mut cx).is_pending());
        assert_eq!(ctl(&a.seg, 0).reader_waiting.load(Ordering::SeqCst), 1);
        d.try_write(&[IoSlice::new(b"y")]).unwrap();
        std::future::poll_fn(|cx| a.poll_readable(cx)).await;
        assert_eq!(a.try_read(&mut buf).unwrap(), Some(1));
        assert_eq!(ctl(&a.seg, 0).reader_waiting.load(Ordering::SeqCst), 0, "cleared once bytes are found");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_reader_parks_and_is_woken_again_and_again_with_the_counter_left_as_it_is() {
        let (d, a) = pair(4096);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut buf = BytesMut::with_capacity(64);
        for round in 0..3u8 {
            assert!(a.poll_readable(&mut cx).is_pending(), "round {round}: nothing yet, and no stale wake-up");
            d.try_write(&[IoSlice::new(&[round])]).unwrap();
            let woke = tokio::time::timeout(std::time::Duration::from_secs(5), std::future::poll_fn(|cx| a.poll_readable(cx)));
            woke.await.unwrap_or_else(|_| panic!("round {round}: the signal was lost"));
            buf.clear();
            assert_eq!(a.try_read(&mut buf).unwrap(), Some(1));
            assert_eq!(buf[0], round);
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_reader_that_looks_again_is_awake_and_costs_no_signal() {
        let (d, a) = pair(4096);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(a.poll_readable(&mut cx).is_pending());
        // Kicked out of its park (a spinning reader): an empty look clears the flag.
        let mut buf = BytesMut::with_capacity(64);
        assert_eq!(a.try_read(&mut buf).unwrap(), None);
        assert_eq!(ctl(&a.seg, 0).reader_waiting.load(Ordering::SeqCst), 0);
        d.try_write(&[IoSlice::new(b"z")]).unwrap();
        assert!(drain(a.data_in.get_ref()).is_err(), "no signal to a reader that is looking");
        assert_eq!(a.try_read(&mut buf).unwrap(), Some(1));
    }
}
