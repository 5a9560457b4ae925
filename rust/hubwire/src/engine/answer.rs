//! [`Answer`]: how the caller of a call that answers once waits for the
//! outcome in its slot of the call table (`slots.rs`), and frees the slot.

use std::borrow::Borrow;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

use super::slots::{Outcome, SlotRef};
use super::state::Core;
use crate::errors::Error;

/// Waits for the outcome in a call's slot, and frees the slot when
/// dropped. `P` is how it reaches the connection (`&Arc<Core>` for a
/// unary call's own future, an owning handle otherwise).
pub(crate) struct Answer<P: Borrow<Arc<Core>>> {
    core: P,
    slot: SlotRef,
    /// The slot already holds the waker of the task polling this answer
    /// (registered by `Core::begin` in the same poll): the first poll can
    /// return `Pending` without a look, since any outcome wakes that task.
    registered: bool,
    released: bool,
    /// The first poll reads the answer itself if it can
    /// ([`Answer::read_own_first`]).
    own: bool,
}

impl<P: Borrow<Arc<Core>>> Answer<P> {
    /// The answer of the call whose slot is `slot`; `registered` only when
    /// the slot's waker is this poll's (see the field).
    pub(crate) fn new(core: P, slot: SlotRef, registered: bool) -> Answer<P> {
        Answer { core, slot, registered, released: false, own: false }
    }

    /// The first wait reads the connection on the waiting task instead of
    /// leaving it to the reader (`own_read.rs`): for a call alone in
    /// flight in low-latency mode. Its state lives here, not in the
    /// caller's future, which every call moves in memory a few times.
    pub(crate) fn read_own_first(&mut self) {
        self.own = true;
    }

    /// The outcome, if it has come.
    pub(crate) fn try_take(&mut self) -> Option<Outcome> {
        take(self.core.borrow(), self.slot, &mut self.released)
    }

    /// Waits for the outcome (once: a second wait fails with `unavailable`).
    pub(crate) async fn recv(&mut self) -> Outcome {
        poll_fn(|cx| {
            if self.own {
                // Within the task's budget of the runtime, like any
                // resource ready at once: a loop of calls that never wait
                // still lets the runtime's other tasks run.
                let Poll::Ready(coop) = tokio::task::coop::poll_proceed(cx) else {
                    // Out of budget: this task yields, and the reader,
                    // kicked to spin, may answer meanwhile (taking the
                    // slot's waker: look at the slot next time).
                    self.registered = false;
                    self.core.borrow().kick();
                    return Poll::Pending;
                };
                self.own = false;
                let Answer { core, slot, released, registered, .. } = self;
                let core: &Arc<Core> = (*core).borrow();
                let answered = if *registered { None } else { take(core, *slot, released) };
                if let Some(o) = answered.or_else(|| core.read_own(|| take(core, *slot, released))) {
                    coop.made_progress();
                    return Poll::Ready(o);
                }
            }
            if std::mem::take(&mut self.registered) {
                return Poll::Pending;
            }
            if self.released {
                return Poll::Ready(Err(Error::unavailable("call slot lost")));
            }
            let mut t = self.core.borrow().calls.lock().unwrap();
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

/// Takes the outcome from `slot` if it is there, and frees the slot.
fn take(core: &Core, slot: SlotRef, released: &mut bool) -> Option<Outcome> {
    let mut t = core.calls.lock().unwrap();
    let o = t.slots.take(slot)?;
    t.slots.release(slot);
    *released = true;
    Some(o)
}

impl<P: Borrow<Arc<Core>>> Drop for Answer<P> {
    fn drop(&mut self) {
        if !self.released {
            self.core.borrow().calls.lock().unwrap().slots.release(self.slot);
        }
    }
}
