//! The outcome slots of the calls this side started that answer once
//! (unary, client_stream): a slab in the call table instead of a oneshot
//! channel per call, so that a call allocates nothing once the slab has
//! grown to the number of calls in flight.
//!
//! The table owns every slot; a call holds a [`SlotRef`] (index and
//! generation), and its `Answer` (`answer.rs`) reads the slot under the table's lock.
//! Whoever takes a call out of the table (its RESPONSE, GOAWAY, the
//! connection's death, a local cancel) fills its slot in the same locked
//! section and wakes the waiter after unlocking, so an outcome can never be
//! lost between leaving the table and reaching the slot. The slab holds at
//! most one slot per `Answer` alive: the calls in flight (at most the
//! peer's `max_calls`, the gate of `Core::begin`) plus answers taken but
//! not yet dropped; it never shrinks, so it costs its high-water mark.

use std::task::{Context, Poll, Waker};

use crate::codec::Payload;
use crate::errors::Error;

/// The outcome of a call that answers once.
pub(crate) type Outcome = Result<Payload, Error>;

/// A call's slot: its index in the slab and the generation it was handed
/// out in (a stale reference, from before the slot's reuse, finds a
/// different generation and touches nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotRef {
    idx: u32,
    gen: u32,
}

#[derive(Default)]
struct Slot {
    gen: u32,
    /// In use (between `alloc` and `release`).
    used: bool,
    outcome: Option<Outcome>,
    waker: Option<Waker>,
}

/// The slab: slots, and the indices of the free ones.
#[derive(Default)]
pub(crate) struct Slots {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl Slots {
    /// A slot for a new call, with the waker of the task that will wait
    /// for it (if known now).
    pub(crate) fn alloc(&mut self, waker: Option<Waker>) -> SlotRef {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[idx as usize];
        s.used = true;
        s.waker = waker;
        SlotRef { idx, gen: s.gen }
    }

    fn get(&mut self, r: SlotRef) -> Option<&mut Slot> {
        self.slots.get_mut(r.idx as usize).filter(|s| s.used && s.gen == r.gen)
    }

    /// Delivers a call's outcome; the caller wakes the returned waker once
    /// it has released the table's lock. The first outcome stays.
    #[must_use]
    pub(crate) fn fill(&mut self, r: SlotRef, outcome: Outcome) -> Option<Waker> {
        let s = self.get(r)?;
        if s.outcome.is_some() {
            return None;
        }
        s.outcome = Some(outcome);
        s.waker.take()
    }

    /// Takes the outcome if it is there.
    pub(crate) fn take(&mut self, r: SlotRef) -> Option<Outcome> {
        self.get(r)?.outcome.take()
    }

    /// Takes the outcome, or registers `cx`'s waker for it.
    pub(crate) fn poll_take(&mut self, r: SlotRef, cx: &Context<'_>) -> Poll<Outcome> {
        let Some(s) = self.get(r) else {
            return Poll::Ready(Err(Error::unavailable("call slot lost")));
        };
        if let Some(o) = s.outcome.take() {
            return Poll::Ready(o);
        }
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Frees a slot for reuse under the next generation.
    pub(crate) fn release(&mut self, r: SlotRef) {
        if let Some(s) = self.get(r) {
            s.used = false;
            s.outcome = None;
            s.waker = None;
            s.gen = s.gen.wrapping_add(1);
            self.free.push(r.idx);
        }
    }

    /// How many slots the slab has grown to.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// How many slots are in use.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    /// A waker that counts its wake-ups (shared with `read_state`'s tests).
    pub(in crate::engine) struct Count(pub(in crate::engine) AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn ok() -> Outcome {
        Ok(Payload { codec: hubwire_frame::Codec::Raw, bytes: bytes::Bytes::from_static(b"x") })
    }

    #[test]
    fn a_released_slot_is_reused_under_a_new_generation() {
        let mut s = Slots::default();
        let a = s.alloc(None);
        let b = s.alloc(None);
        assert_ne!(a.idx, b.idx);
        s.release(a);
        let c = s.alloc(None);
        assert_eq!(c.idx, a.idx, "the freed slot is reused");
        assert_ne!(c.gen, a.gen);
        assert!(s.fill(a, ok()).is_none() && s.take(c).is_none(), "a stale reference touches nothing");
        assert_eq!(s.capacity(), 2, "no growth while slots are free");
    }

    #[test]
    fn a_fill_wakes_the_registered_waker_once_and_keeps_the_first_outcome() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let mut s = Slots::default();
        let r = s.alloc(Some(Waker::from(count.clone())));
        s.fill(r, ok()).expect("a waker").wake();
        assert!(s.fill(r, Err(Error::unavailable("late"))).is_none());
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(s.take(r).unwrap().is_ok(), "the first outcome");
        assert!(s.take(r).is_none(), "taken once");
    }

    #[test]
    fn poll_registers_the_waker_until_the_outcome_comes() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let cx = Context::from_waker(&waker);
        let mut s = Slots::default();
        let r = s.alloc(None);
        assert!(s.poll_take(r, &cx).is_pending());
        s.fill(r, ok()).expect("the polling task's waker").wake();
        assert!(matches!(s.poll_take(r, &cx), Poll::Ready(Ok(_))));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn generations_wrap_around() {
        let mut s = Slots::default();
        let r = s.alloc(None);
        s.slots[r.idx as usize].gen = u32::MAX;
        let r = SlotRef { idx: r.idx, gen: u32::MAX };
        s.release(r);
        let r2 = s.alloc(None);
        assert_eq!(r2.gen, 0);
        assert!(s.fill(r2, ok()).is_none(), "no waker registered");
        assert!(s.take(r2).is_some());
    }
}
