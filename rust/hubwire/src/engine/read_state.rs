//! The read side of a connection — its buffer, decoder, spinner and
//! service, and what a read left for the reader task — kept in one place
//! that the reader task and, in low-latency mode, a caller waiting alone
//! for its answer both use: such a caller reads its answer itself.
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
//! without having waited.
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
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use hubwire_frame::{Decoder, Frame, FrameError};

use super::reader::{dispatch_all, reserve, ItemRun, READ_CHUNK};
use super::serve::Service;
use super::slots::Outcome;
use super::state::Core;
use super::wait::Spinner;

/// The most reads a caller makes for its answer before it leaves the rest
/// to the reader task.
const OWN_READS: usize = 16;

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
    pub(super) service: Option<Arc<dyn Service>>,
    /// A REQUEST or PING read while our write queue was over its cap:
    /// dispatched by the reader task once the queue drains. While it is
    /// here nobody reads on (frames take effect in the order they came).
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
}

impl ReadState {
    pub(super) fn new(buf: BytesMut, decoder: Decoder, spinner: Spinner, service: Option<Arc<dyn Service>>) -> ReadState {
        ReadState { buf, decoder, run: ItemRun::new(), spinner, service, held: None, stop: None, ended: false, reader: None }
    }

    /// Whether the buffer holds the start of a frame larger than a read
    /// chunk: its rest comes in socket-sized pieces, each worth more than a
    /// wake-up, so nobody spins for them.
    pub(super) fn inside_large_frame(&self) -> bool {
        matches!(self.decoder.check(&self.buf), Ok(Some(n)) if n > self.buf.len() && n > READ_CHUNK)
    }
}

/// The shared slot of a connection's [`ReadState`].
#[derive(Default)]
pub(crate) struct ReadSide {
    /// `None` before the reader task starts and after it ends (so that the
    /// service, which may hold the connection, is dropped with it).
    state: Mutex<Option<ReadState>>,
    /// The reader task, when it found the state taken by a caller
    /// (another thread), and whether it is there: the caller wakes it when
    /// it lets go.
    waiter: Mutex<Option<Waker>>,
    contended: AtomicBool,
}

impl ReadSide {
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
    fn let_go(&self) {
        fence(Ordering::SeqCst);
        if self.contended.load(Ordering::Relaxed) && self.contended.swap(false, Ordering::SeqCst) {
            if let Some(w) = self.waiter.lock().unwrap().take() {
                w.wake();
            }
        }
    }
}

impl ReadState {
    /// Keeps the reader task's waker as it waits for bytes.
    pub(super) fn park_reader(&mut self, cx: &Context<'_>) {
        if !self.reader.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.reader = Some(cx.waker().clone());
        }
    }
}

impl Core {
    /// Low-latency mode, one call in flight (its REQUEST just sent): reads
    /// on this task until `take` (which takes the call's outcome from its
    /// slot) finds the answer, if the read side is free and nothing stands
    /// in the way. `None` means wait for it as usual (the reader was kicked
    /// if it should spin).
    pub(crate) fn read_own(self: &Arc<Self>, take: impl FnMut() -> Option<Outcome>) -> Option<Outcome> {
        let (got, spun) = match self.read.state.try_lock() {
            Ok(mut g) => {
                let (got, spun, reader) = match g.as_mut() {
                    Some(st) if self.may_read_own(st) => {
                        let (got, spun, stop) = self.read_until_answer(st, take);
                        // Re-armed under the lock: the reader task's own
                        // wait touches the same flags under it.
                        let rearmed = !stop && self.transport.rearm_read();
                        (got, spun, if rearmed { None } else { st.reader.take() })
                    }
                    _ => (None, false, None),
                };
                drop(g);
                self.read.let_go();
                if let Some(w) = reader {
                    w.wake();
                }
                (got, spun)
            }
            Err(_) => (None, false),
        };
        if got.is_none() && !spun {
            // The reader spins for the answer instead.
            self.kick();
        }
        got
    }

    fn may_read_own(&self, st: &ReadState) -> bool {
        st.spinner.enabled()
            && !st.ended
            && st.held.is_none()
            && st.stop.is_none()
            && !st.inside_large_frame()
            && !self.ring_write_waits()
            // What a read dispatches may start a task (a handler that
            // waits): only a caller polled inside a runtime reads.
            && tokio::runtime::Handle::try_current().is_ok()
            // While an upgrade may still move the reading onto shared
            // memory, the reader task alone reads (`upgrade.rs`).
            && self.upgrade.get().is_none_or(|u| u.ladder.reads_ring() || *u.settled.borrow() == Some(false))
    }

    /// Spins, reads and dispatches until the answer is in `slot`, the spin
    /// is spent, or something else came (another call's frame, which woke
    /// its task: this one then waits and leaves the worker to it). Returns
    /// (answer in, spun in vain, stopped: `st` holds a stop or a held
    /// frame for the reader task).
    fn read_until_answer(self: &Arc<Self>, st: &mut ReadState, mut take: impl FnMut() -> Option<Outcome>) -> (Option<Outcome>, bool, bool) {
        let t = &*self.transport;
        // Bounded: a peer that keeps sending frames this side answers at
        // once (PINGs, REQUESTs) must not keep the caller here.
        for _ in 0..OWN_READS {
            let ReadState { buf, spinner, .. } = &mut *st;
            let got = spinner.spin(|| match t.try_read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
                r => Some(r),
            });
            match got {
                None => return (None, true, false),
                Some(Ok(0)) | Some(Err(_)) => {
                    st.stop = Some(Stop::Read(got.expect("matched")));
                    return (None, false, true);
                }
                Some(Ok(_)) => {}
            }
            let mut woke = false;
            match dispatch_all(self, st, &mut woke) {
                Err(e) => {
                    st.stop = Some(Stop::Bad(e));
                    return (None, false, true);
                }
                Ok(Some(frame)) => {
                    st.held = Some(frame);
                    return (take(), false, true);
                }
                Ok(None) => {}
            }
            self.transport.settle_fds(st.buf.len());
            reserve(&st.decoder, &mut st.buf);
            if let Some(o) = take() {
                return (Some(o), false, false);
            }
            if woke || self.is_closed() || st.inside_large_frame() {
                return (None, false, false);
            }
        }
        (None, false, false)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Which calls may read their own answer: only one that follows a
    /// call that was alone too. The first call to start after a burst is
    /// alone, but the burst's other callers are about to start theirs.
    #[tokio::test(flavor = "current_thread")]
    async fn only_a_call_after_an_alone_call_is_sequential() {
        use hubwire_frame::Kind;

        use crate::codec::{Codec, Payload};
        use crate::{ConnectionOptions, Provider, Raw, WaitMode};

        let provider = Provider::new("s").unary("hang", |_ctx, _x: Raw| std::future::pending::<Result<Raw, crate::Error>>());
        let low = ConnectionOptions::new("c").wait(WaitMode::low_latency());
        let pair = crate::testing::pair_with(provider, low.clone(), low).await;
        let core = pair.client.core();
        let input = Payload { codec: Codec::Raw, bytes: bytes::Bytes::new() };
        let begin = || core.begin("hang", Kind::Unary, &input, None, None, None, None);
        let end = |id| core.cancel_out(id, crate::Error::unavailable("done"));
        let first = begin().await.unwrap();
        assert!(first.alone && !first.sequential, "nothing came before the first call");
        end(first.id);
        let one = begin().await.unwrap();
        assert!(one.alone && one.sequential);
        let two = begin().await.unwrap();
        assert!(!two.alone && !two.sequential, "a burst");
        end(one.id);
        end(two.id);
        let after = begin().await.unwrap();
        assert!(after.alone && !after.sequential, "the first call after a burst");
        end(after.id);
        let next = begin().await.unwrap();
        assert!(next.alone && next.sequential);
    }

    #[test]
    fn a_reader_that_finds_the_state_taken_is_woken_when_the_caller_lets_go() {
        let side = ReadSide::default();
        side.install(Some(ReadState::new(BytesMut::new(), Decoder::default(), Spinner::new(super::super::WaitMode::Efficient), None)));
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
