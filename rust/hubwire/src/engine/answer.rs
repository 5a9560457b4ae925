//! [`Answer`]: how the caller of a call that answers once waits for the
//! outcome in its slot of the call table (`slots.rs`), and frees the slot.

use std::future::poll_fn;
use std::ops::Deref;
use std::task::Poll;

use super::slots::{Outcome, SlotRef};
use super::state::Core;
use crate::errors::Error;

/// Waits for the outcome in a call's slot, and frees the slot when
/// dropped. `P` is how it reaches the connection (`&Core` for a unary
/// call's own future, an owning handle otherwise).
pub(crate) struct Answer<P: Deref<Target = Core>> {
    core: P,
    slot: SlotRef,
    /// The slot already holds the waker of the task polling this answer
    /// (registered by `Core::begin` in the same poll): the first poll can
    /// return `Pending` without a look, since any outcome wakes that task.
    registered: bool,
    released: bool,
}

impl<P: Deref<Target = Core>> Answer<P> {
    /// The answer of the call whose slot is `slot`; `registered` only when
    /// the slot's waker is this poll's (see the field).
    pub(crate) fn new(core: P, slot: SlotRef, registered: bool) -> Answer<P> {
        Answer { core, slot, registered, released: false }
    }

    /// The outcome, if it has come.
    pub(crate) fn try_take(&mut self) -> Option<Outcome> {
        let mut t = self.core.calls.lock().unwrap();
        let o = t.slots.take(self.slot)?;
        t.slots.release(self.slot);
        self.released = true;
        Some(o)
    }

    /// Waits for the outcome (once: a second wait fails with `unavailable`).
    pub(crate) async fn recv(&mut self) -> Outcome {
        poll_fn(|cx| {
            if std::mem::take(&mut self.registered) {
                return Poll::Pending;
            }
            if self.released {
                return Poll::Ready(Err(Error::unavailable("call slot lost")));
            }
            let mut t = self.core.calls.lock().unwrap();
            let p = t.slots.poll_take(self.slot, cx);
            if p.is_ready() {
                t.slots.release(self.slot);
                self.released = true;
            }
            p
        })
        .await
    }
}

impl<P: Deref<Target = Core>> Drop for Answer<P> {
    fn drop(&mut self) {
        if !self.released {
            self.core.calls.lock().unwrap().slots.release(self.slot);
        }
    }
}
