//! [`Backlog`]: how many ITEMs the reader has handed to this side's streams
//! that the application has not taken yet, over the whole connection.
//!
//! It tells a stream's sender whether more of its own sends are coming at
//! once: an application that still has items waiting will answer them
//! next (an echo, the bench's pipelined stream), so an ITEM sent while the
//! backlog is not empty may wait for the background flusher and leave in
//! the same `sendmsg` as the ones after it (`Writer::push_soon`). The item
//! that empties the backlog is not held back: alone, it is written at once,
//! so one item in flight is never delayed; behind a run already handed to
//! the background flusher, it joins that run's write (the flusher runs
//! after the tasks already woken).
//!
//! The count is exact, not a hint: the reader counts an item before it
//! hands it over (and uncounts it if the stream is gone), the stream
//! (`calls::StreamIn`) uncounts each item it yields and, when dropped,
//! those it never yielded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Items delivered to streams and not yet taken, for one connection.
#[derive(Debug, Default)]
pub(crate) struct Backlog(AtomicUsize);

impl Backlog {
    /// A shared, empty backlog.
    pub(crate) fn new() -> Arc<Backlog> {
        Arc::new(Backlog::default())
    }

    /// Whether the application has items waiting on any stream of the
    /// connection.
    pub(crate) fn pending(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }

    /// `n` items are about to be handed to a stream.
    pub(crate) fn added(&self, n: usize) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` items left the backlog (taken, dropped unread, or never handed
    /// over).
    pub(crate) fn taken(&self, n: usize) {
        self.0.fetch_sub(n, Ordering::Relaxed);
    }
}
