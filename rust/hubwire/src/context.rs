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

impl CancelSignal {
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
