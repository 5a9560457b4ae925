//! The read side of a connection — its buffer, decoder and spinner, and
//! what a read left for the reader task — kept in one place that the
//! reader task and, in low-latency mode, a caller waiting alone for its
//! answer both use: such a caller reads its answer itself (`own_read.rs`).
//!
//! Why: with one call in flight, the answer otherwise reaches the caller
//! through a task switch. The reader task finds it, wakes the caller's task
//! and yields, and the runtime runs the caller; on tokio's current-thread
//! runtime the switch also costs an `epoll_wait` with a zero timeout (the
//! runtime looks at its reactor whenever the future of `block_on` is woken
//! by another task). On a shared-memory connection that was a third of a
//! 1.5 µs round trip (bench/README, issue 16). A caller that finds the
//! read side free reads and dispatches in its own poll, exactly as the
//! reader task would; its answer lands in its slot and the call returns
//! without having waited. Only the reader task serves the peer's calls: a
//! REQUEST a caller reads is held for it.
//!
//! The state sits behind a mutex. The reader task holds it for each step
//! (dispatching, spinning) and lets go before it waits; a caller only
//! *tries* it, and when the reader is busy (on another worker thread) it
//! waits for its answer as before. After a caller's read, the reader task
//! must still be woken by the next bytes: the transport re-arms the reader
//! task's wait where it can ([`Transport::rearm_read`]), and otherwise the
//! reader task is woken to wait again itself.
//!
//! [`Transport::rearm_read`]: crate::transport::Transport::rearm_read

use std::io;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use hubwire_frame::{Decoder, Frame, FrameError};

use super::reuse::Reuse;
use super::wait::Spinner;
use crate::codec::Payload;
use crate::transport::Transport;

/// Bytes asked of the transport per read.
pub(crate) const READ_CHUNK: usize = 64 * 1024;

/// Makes room in `buf` for the next read, without keeping buffers for
/// reuse (the handshake's reads): [`reserve_reusing`].
pub(crate) fn reserve(decoder: &Decoder, buf: &mut BytesMut) {
    reserve_reusing(decoder, buf, &mut Reuse::default());
}

/// Makes room in `buf` for the next read. A frame larger than a read
/// chunk whose header is buffered gets its final buffer at once, sized
/// from the header (which `decoder.check` has already held to
/// `max_frame`): what has arrived is copied once, the rest is read straight
/// into place (its last bytes too: the buffer is not grown for them), and
/// the payload split off it pins exactly that buffer. Growing the buffer
/// as the bytes arrived instead (before issue 15) copied a 1 MiB frame's
/// first 320 KiB again and allocated twice per frame. The allocation is
/// address space: only the pages the kernel writes into become resident,
/// so a peer that sends a header and stops costs what it sent in memory
/// (the `header_then_silence` hardening case). Otherwise (outside a large
/// frame's buffer, whose room is what the frame still needs) at least 4 KiB
/// is free, a chunk when more is needed.
///
/// The buffer of a large frame is taken from [`Reuse`] when one there is
/// free (the application has dropped everything it held of that frame)
/// and large enough: its pages are resident and likely cached, where a
/// new allocation of a megabyte is, with glibc, often fresh pages, each
/// faulted in and zeroed (`bench/README.md`, round 13).
pub(crate) fn reserve_reusing(decoder: &Decoder, buf: &mut BytesMut, reuse: &mut Reuse) {
    let (len, spare) = (buf.len(), buf.capacity() - buf.len());
    let want = match decoder.check(buf) {
        Ok(Some(n)) if n > len => n - len,
        _ => 0,
    };
    let large = want > spare && len + want > READ_CHUNK;
    // Inside a large frame's buffer, whatever is missing fits: no growth.
    let in_large = want > 0 && want <= spare && len + want > READ_CHUNK;
    let grow = !large && (want > spare || (spare < 4096 && !in_large));
    if (large || grow) && reuse.buf_is_large {
        // Leaving the last large frame's buffer: keep a handle on it.
        reuse.keep(buf.split_to(0));
    }
    if large {
        let need = len + want;
        let mut whole = reuse.take(need).unwrap_or_else(|| BytesMut::with_capacity(need));
        // A kept buffer is reclaimed whole, from its start: its capacity
        // is its allocation's size, which is what keeping it costs.
        reuse.large(whole.capacity());
        whole.extend_from_slice(buf);
        *buf = whole;
        return;
    }
    if grow {
        buf.reserve(READ_CHUNK);
    }
}

/// What a read found that ends reading: the reader task acts on it.
pub(crate) enum Stop {
    /// End of stream (`Ok(0)`) or a failed read.
    Read(io::Result<usize>),
    /// A frame the peer should not have sent: the connection fails.
    Bad(FrameError),
}

/// The reader's state between two reads.
pub(crate) struct ReadState {
    pub(super) buf: BytesMut,
    pub(super) decoder: Decoder,
    pub(super) run: ItemRun,
    pub(super) spinner: Spinner,
    /// A REQUEST or PING read while our write queue was over its cap, or a
    /// REQUEST a caller read (only the reader task serves): dispatched by
    /// the reader task (once the queue is under its cap). While it is here
    /// nobody reads on (frames take effect in the order they came).
    pub(super) held: Option<Frame>,
    /// Left by a caller's read for the reader task.
    pub(super) stop: Option<Stop>,
    /// Reading has ended (set by the reader task as it stops, under the
    /// lock): no caller reads on, whatever comes.
    pub(super) ended: bool,
    /// The reader task's waker, kept as it waits for bytes with the state
    /// let go: a caller whose read could not re-arm the transport, or that
    /// left a stop or a held frame, wakes it.
    pub(super) reader: Option<Waker>,
    /// Large frames' buffers kept for the next large frame.
    pub(super) reuse: Reuse,
}

impl ReadState {
    pub(super) fn new(buf: BytesMut, decoder: Decoder, spinner: Spinner) -> ReadState {
        ReadState {
            buf,
            decoder,
            run: ItemRun::new(),
            spinner,
            held: None,
            stop: None,
            ended: false,
            reader: None,
            reuse: Default::default(),
        }
    }

    /// Whether the buffer holds the start of a frame larger than a read
    /// chunk: its rest comes in socket-sized pieces, each worth more than a
    /// wake-up, so nobody spins for them.
    pub(super) fn inside_large_frame(&self) -> bool {
        matches!(self.decoder.check(&self.buf), Ok(Some(n)) if n > self.buf.len() && n > READ_CHUNK)
    }

    /// Whether a caller's read left a stop or a held frame: the reader task
    /// acts on it before it reads on.
    pub(super) fn left_for_reader(&self) -> bool {
        self.stop.is_some() || self.held.is_some()
    }

    /// Spins on `t` as the spinner allows: `Some` with what a read
    /// brought (bytes, end of stream or an error), `None` if nothing came.
    pub(super) fn spin_read(&mut self, t: &dyn Transport) -> Option<io::Result<usize>> {
        if self.buf.capacity() == self.buf.len() {
            // A caller may read between the reader task's read and its
            // `ready_for_more`, when that read filled the buffer: a
            // transport must get room (a full buffer reads as `Ok(0)` from
            // some, end of stream).
            reserve_reusing(&self.decoder, &mut self.buf, &mut self.reuse);
        }
        let ReadState { buf, spinner, .. } = self;
        spinner.spin(|| match t.try_read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            r => Some(r),
        })
    }

    /// Keeps the reader task's waker as it waits for bytes.
    pub(super) fn park_reader(&mut self, cx: &Context<'_>) {
        if !self.reader.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.reader = Some(cx.waker().clone());
        }
    }
}

/// The shared slot of a connection's [`ReadState`].
#[derive(Default)]
pub(crate) struct ReadSide {
    /// `None` before the reader task starts and after it stops reading.
    state: Mutex<Option<ReadState>>,
    /// The reader task, when it found the state taken by a caller
    /// (another thread), and whether it is there: the caller wakes it when
    /// it lets go.
    waiter: Mutex<Option<Waker>>,
    contended: AtomicBool,
}

impl ReadSide {
    /// The state, for a caller: only if nobody holds it. The caller calls
    /// [`ReadSide::let_go`] after it drops the guard.
    pub(super) fn try_lock(&self) -> Option<MutexGuard<'_, Option<ReadState>>> {
        self.state.try_lock().ok()
    }

    pub(super) fn install(&self, st: Option<ReadState>) {
        *self.state.lock().unwrap() = st;
    }

    /// The state, for the reader task; it never waits for long (a caller
    /// holds it for one spin and a few reads at most, and only on another
    /// thread).
    pub(super) fn lock(&self) -> MutexGuard<'_, Option<ReadState>> {
        self.state.lock().unwrap()
    }

    /// The state, for the reader task's wait: `Pending` (and woken when
    /// the caller is done) while a caller holds it.
    pub(super) fn poll_lock(&self, cx: &mut Context<'_>) -> Poll<MutexGuard<'_, Option<ReadState>>> {
        if let Ok(g) = self.state.try_lock() {
            return Poll::Ready(g);
        }
        *self.waiter.lock().unwrap() = Some(cx.waker().clone());
        self.contended.store(true, Ordering::SeqCst);
        // Orders the flag before the second try (a store then a load on
        // two locations, as in `let_go`: the fences make one side see the
        // other).
        fence(Ordering::SeqCst);
        // The caller may have let go before the flag was set.
        match self.state.try_lock() {
            Ok(g) => Poll::Ready(g),
            Err(_) => Poll::Pending,
        }
    }

    /// After a caller let go of the state: wakes the reader task if it
    /// found the state taken meanwhile.
    pub(super) fn let_go(&self) {
        fence(Ordering::SeqCst);
        if self.contended.load(Ordering::Relaxed) && self.contended.swap(false, Ordering::SeqCst) {
            if let Some(w) = self.waiter.lock().unwrap().take() {
                w.wake();
            }
        }
    }
}

/// Consecutive ITEMs of one call from one read (a stream's burst), handed
/// over together (`reader.rs`). Its size is bounded by one read buffer's
/// frames; the vector is kept between reads.
pub(crate) struct ItemRun {
    pub(super) id: u32,
    pub(super) items: Vec<Payload>,
}

impl ItemRun {
    pub(super) fn new() -> ItemRun {
        ItemRun { id: 0, items: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    use super::super::slots::tests::Count;
    use super::*;

    /// A read into a buffer the last read filled (a caller reading before
    /// the reader task made room) gets room first, and bytes, not `Ok(0)`.
    #[test]
    fn a_spin_read_into_a_full_buffer_makes_room_first() {
        let (a, b) = crate::transport::memory::pair();
        b.try_write(&[std::io::IoSlice::new(b"more")]).unwrap();
        let mut buf = BytesMut::with_capacity(8);
        buf.extend_from_slice(&[0u8; 8]);
        buf.truncate(buf.capacity());
        assert_eq!(buf.len(), buf.capacity());
        let mut st = ReadState::new(buf, Decoder::default(), Spinner::new(super::super::WaitMode::low_latency(), None));
        assert_eq!(st.spin_read(&a).expect("bytes are there").unwrap(), 4);
        assert_eq!(&st.buf[8..], b"more");
    }

    #[test]
    fn a_reader_that_finds_the_state_taken_is_woken_when_the_caller_lets_go() {
        let side = ReadSide::default();
        side.install(Some(ReadState::new(BytesMut::new(), Decoder::default(), Spinner::new(super::super::WaitMode::Efficient, None))));
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        // A caller holds the state (on another thread, in real life).
        let caller = side.state.try_lock().unwrap();
        assert!(side.poll_lock(&mut cx).is_pending(), "taken: the reader waits");
        drop(caller);
        side.let_go();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "letting go wakes the waiting reader");
        assert!(side.poll_lock(&mut cx).is_ready());
        // Nobody waited this time: letting go wakes nobody.
        let caller = side.state.try_lock().unwrap();
        drop(caller);
        side.let_go();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }
}
