//! [`Backlog`]: how many ITEMs the reader has handed to this side's streams
//! that the application has not taken yet, over the whole connection.
//!
//! It tells a stream's sender whether more of its own sends are coming at
//! once: an application that still has items waiting will answer them
//! next (an echo, the bench's pipelined stream), so an ITEM sent while the
//! backlog is not empty may wait for the background flusher and leave in
//! the same `sendmsg` as the ones after it (`Writer::push_soon`). The item
//! that empties the backlog is sent at once and takes the queued ones with
//! it, so one item in flight is never delayed.
//!
//! The count is exact, not a hint: the reader counts an item before it
//! hands it over (and uncounts it if the stream is gone), [`StreamIn`]
//! uncounts each item it yields and, when dropped, those it never yielded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::calls::{Event, StreamIn};
use crate::codec::Payload;

/// Items delivered to streams and not yet taken, for one connection.
#[derive(Debug, Default)]
pub(crate) struct Backlog(AtomicUsize);

impl Backlog {
    /// Whether the application has items waiting on any stream of the
    /// connection.
    pub(crate) fn pending(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }

    /// Hands one ITEM to a stream, counting it while it waits there.
    pub(crate) fn deliver(&self, tx: &mpsc::UnboundedSender<Event>, payload: Payload) {
        // Counted before the send: the consumer may take it (and uncount
        // it) before `send` returns.
        self.0.fetch_add(1, Ordering::Relaxed);
        if tx.send(Event::Item(payload)).is_err() {
            self.taken(1);
        }
    }

    /// `n` items left the backlog (taken, or dropped unread).
    pub(crate) fn taken(&self, n: usize) {
        self.0.fetch_sub(n, Ordering::Relaxed);
    }
}

impl StreamIn {
    /// The next event of the stream, uncounting an item from the backlog.
    pub(crate) async fn recv(&mut self) -> Option<Event> {
        let e = self.rx.recv().await;
        if let Some(Event::Item(_)) = &e {
            self.backlog.taken(1);
        }
        e
    }
}

impl Drop for StreamIn {
    fn drop(&mut self) {
        // No more sends succeed after `close`; the items already queued
        // leave the backlog with the stream.
        self.rx.close();
        let mut unread = 0;
        while let Ok(e) = self.rx.try_recv() {
            if matches!(e, Event::Item(_)) {
                unread += 1;
            }
        }
        if unread > 0 {
            self.backlog.taken(unread);
        }
    }
}

/// A shared, empty backlog.
pub(crate) fn new() -> Arc<Backlog> {
    Arc::new(Backlog::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use hubwire_frame::Codec;

    fn item() -> Payload {
        Payload { codec: Codec::Raw, bytes: Bytes::from_static(b"x") }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn items_count_until_taken() {
        let b = new();
        let (tx, mut s) = StreamIn::new(8, b.clone());
        b.deliver(&tx, item());
        b.deliver(&tx, item());
        assert!(b.pending());
        assert!(matches!(s.recv().await, Some(Event::Item(_))));
        assert!(b.pending(), "one still waits");
        tx.send(Event::End(Ok(None))).unwrap();
        assert!(matches!(s.recv().await, Some(Event::Item(_))));
        assert!(!b.pending());
        assert!(matches!(s.recv().await, Some(Event::End(_))), "an END is not counted");
        assert!(!b.pending());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_stream_takes_its_unread_items_along_and_refuses_more() {
        let b = new();
        let (tx, s) = StreamIn::new(8, b.clone());
        b.deliver(&tx, item());
        b.deliver(&tx, item());
        drop(s);
        assert!(!b.pending());
        b.deliver(&tx, item());
        assert!(!b.pending(), "an item for a stream that is gone is not counted");
    }
}
