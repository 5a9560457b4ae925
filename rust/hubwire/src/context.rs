//! What a handler knows about the call it is serving, and the signal that
//! tells it the call is over.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hubwire_frame::{Hello, PeerInfo};
use tokio::sync::Notify;
use tokio::time::Instant;

/// The context of one call, handed to its handler.
#[derive(Clone)]
pub struct CallContext {
    pub(crate) method: Arc<str>,
    pub(crate) id: u32,
    pub(crate) deadline: Option<Instant>,
    pub(crate) cancel: Arc<CancelSignal>,
    pub(crate) peer: Arc<Hello>,
}

impl CallContext {
    /// The method being called.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The call id on this connection.
    pub fn call_id(&self) -> u32 {
        self.id
    }

    /// When the caller stops waiting, if it set a deadline.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Who is calling.
    pub fn peer(&self) -> &PeerInfo {
        &self.peer.peer
    }

    /// Whether the caller cancelled (or the deadline passed, or the
    /// connection died).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the call is cancelled. The handler's future is also
    /// dropped at that point; this is for work the handler runs elsewhere.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }
}

/// A one-way, many-waiter cancellation flag: set when the caller cancels,
/// the deadline passes or the connection dies.
#[derive(Default)]
pub(crate) struct CancelSignal {
    flag: AtomicBool,
    notify: Notify,
}

/// Spare signals per thread, at most this many: a served call takes one
/// and gives it back when it ends, so that a call answered at once costs no
/// allocation for it (the reader serves many in a row on one thread).
const SPARE_SIGNALS: usize = 64;

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Arc<CancelSignal>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl CancelSignal {
    /// A fresh (not cancelled) signal: a spare one of this thread's, or a
    /// new one.
    pub(crate) fn take() -> Arc<CancelSignal> {
        SPARE.with(|s| s.borrow_mut().pop()).unwrap_or_default()
    }

    /// Gives a signal back for reuse once its call is over. Only a signal
    /// nobody else holds is kept (a handler may have kept its context, and
    /// with it the signal, which must then stay cancelled); it is reset.
    pub(crate) fn give_back(mut signal: Arc<CancelSignal>) {
        let Some(s) = Arc::get_mut(&mut signal) else { return };
        *s.flag.get_mut() = false;
        SPARE.with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.len() < SPARE_SIGNALS {
                spare.push(signal);
            }
        });
    }

    /// Ends a call that answered when first polled (its work is dropped):
    /// keeps the signal for reuse if nobody else holds it, and otherwise
    /// cancels it, for a task the handler left with its context. A signal
    /// nobody else holds has nobody waiting on it either, so the
    /// cancellation's wake-up (a lock) is skipped.
    pub(crate) fn end(mut signal: Arc<CancelSignal>) {
        if Arc::get_mut(&mut signal).is_some() {
            CancelSignal::give_back(signal);
        } else {
            signal.cancel();
        }
    }

    pub(crate) fn cancel(&self) {
        self.flag.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    pub(crate) async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_given_back_is_reused_reset_unless_someone_still_holds_it() {
        let s = CancelSignal::take();
        s.cancel();
        let addr = Arc::as_ptr(&s);
        CancelSignal::give_back(s);
        let again = CancelSignal::take();
        assert_eq!(Arc::as_ptr(&again), addr, "reused");
        assert!(!again.is_cancelled(), "and reset");

        let kept = again.clone(); // a handler kept its context
        again.cancel();
        CancelSignal::give_back(again);
        let other = CancelSignal::take();
        assert_ne!(Arc::as_ptr(&other), addr, "a signal still held is not reused");
        assert!(kept.is_cancelled(), "and stays cancelled");
    }
}
