//! Flow control on the receiving side (`spec/PROTOCOL.md` §8): the credit
//! this side has granted for one stream it receives.
//!
//! Pure accounting, no I/O: the reader asks [`RecvWindow::on_items`] how
//! many of a run of ITEMs were within credit, and whoever consumes items asks
//! [`RecvWindow::consumed`] how much credit to grant back, then sends the
//! CREDIT frame itself. Credit goes back in batches of half the window, so
//! a stream costs one CREDIT frame per half window rather than per item.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Credit this side granted for a stream it receives. Shared by the reader
/// (which spends it) and the consumer (which earns it back).
#[derive(Debug)]
pub(crate) struct RecvWindow {
    /// Items the peer may still send.
    remaining: AtomicU32,
    /// Items consumed since the last grant.
    consumed: AtomicU32,
    /// Consumed items that make a grant.
    batch: u32,
}

impl RecvWindow {
    /// A window that starts with `window` credits granted (in HELLO).
    pub(crate) fn new(window: u32) -> Arc<RecvWindow> {
        Arc::new(RecvWindow { remaining: AtomicU32::new(window), consumed: AtomicU32::new(0), batch: (window / 2).max(1) })
    }

    /// `n` ITEMs arrived: spends a credit for each while any is left and
    /// returns how many were within credit. Fewer than `n` means the peer
    /// overran the window with the rest.
    pub(crate) fn on_items(&self, n: u32) -> u32 {
        match self.remaining.fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| Some(r - r.min(n))) {
            Ok(before) | Err(before) => before.min(n),
        }
    }

    /// The application took one item. Returns the credit to grant now, if
    /// a batch is complete; the caller sends it as CREDIT. The credit is
    /// counted as remaining before this returns, so the reader never sees
    /// the peer spend credit the peer was granted but this side has not yet
    /// counted.
    pub(crate) fn consumed(&self) -> Option<u32> {
        let c = self.consumed.fetch_add(1, Ordering::AcqRel) + 1;
        if c < self.batch {
            return None;
        }
        self.consumed.fetch_sub(c, Ordering::AcqRel);
        self.remaining.fetch_add(c, Ordering::AcqRel);
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_beyond_the_window_is_an_overrun() {
        let w = RecvWindow::new(3);
        assert_eq!(w.on_items(2), 2);
        assert_eq!(w.on_items(2), 1, "the fourth item overran a window of 3");
        assert_eq!(w.on_items(1), 0);
    }

    #[test]
    fn credit_goes_back_in_batches_of_half_the_window() {
        let w = RecvWindow::new(8);
        assert_eq!(w.on_items(8), 8);
        assert_eq!((0..3).map(|_| w.consumed()).collect::<Vec<_>>(), [None, None, None]);
        assert_eq!(w.consumed(), Some(4), "the fourth consumed item completes a batch of 8 / 2");
        // The 4 credits are counted before they are granted: the peer may
        // send 4 more at once, and a fifth is an overrun.
        assert_eq!(w.on_items(5), 4);
    }

    #[test]
    fn a_window_of_one_grants_after_every_item() {
        let w = RecvWindow::new(1);
        assert_eq!(w.on_items(1), 1);
        assert_eq!(w.on_items(1), 0);
        assert_eq!(w.consumed(), Some(1));
        assert_eq!(w.on_items(1), 1);
    }
}
