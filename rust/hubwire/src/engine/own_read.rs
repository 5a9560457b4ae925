//! A caller that reads its own answer: in low-latency mode, a unary call
//! alone in flight, right after another one, spins on the connection and
//! dispatches what comes on the caller's task, with the reader's state
//! (`read_state.rs`), instead of waiting for the reader task to hand the
//! answer over (a task switch; see `read_state.rs` for why it matters).

use std::sync::Arc;

use super::read_state::{ReadState, Stop};
use super::reader::{dispatch_all, ready_for_more, Dispatcher};
use super::slots::Outcome;
use super::state::Core;

/// The most reads a caller makes for its answer before it leaves the rest
/// to the reader task.
const OWN_READS: usize = 16;

impl Core {
    /// Low-latency mode, one call in flight (its REQUEST just sent): reads
    /// on this task until `take` (which takes the call's outcome from its
    /// slot) finds the answer, if the read side is free and nothing stands
    /// in the way. `None` means wait for it as usual (the reader was kicked
    /// if it should spin).
    pub(crate) fn read_own(self: &Arc<Self>, take: impl FnMut() -> Option<Outcome>) -> Option<Outcome> {
        let (got, spun) = match self.read.try_lock() {
            Some(mut g) => {
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
            None => (None, false),
        };
        if got.is_none() && !spun {
            // The reader spins for the answer instead.
            self.kick();
        }
        got
    }

    fn may_read_own(&self, st: &ReadState) -> bool {
        st.spinner.may_spin()
            && !st.ended
            && !st.left_for_reader()
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
            match st.spin_read(t) {
                None => return (None, true, false),
                Some(r @ (Ok(0) | Err(_))) => {
                    st.stop = Some(Stop::Read(r));
                    return (None, false, true);
                }
                Some(Ok(_)) => {}
            }
            let mut woke = false;
            match dispatch_all(self, st, Dispatcher::Caller, &mut woke) {
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
            ready_for_more(self, st);
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
}
