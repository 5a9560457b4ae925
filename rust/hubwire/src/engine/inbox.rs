//! A stream's inbox: the queue the reader hands a stream's events to, and
//! the one task reading that stream takes them from.
//!
//! One sender (the reader, through the call table) and one receiver, so a
//! plain queue under a lock does: the sender pushes and wakes the receiver
//! only if it is parked; the receiver takes the whole queue at once (an
//! exchange of two `VecDeque`s, which keeps both allocations) and yields
//! from its own half without the lock until that is empty. A burst of ITEMs
//! from one read thus costs one lock per item on the reader's side and one
//! per burst on the receiver's, where a general channel paid several atomic
//! operations per item on each side (they were 14 % of the CPU of a 16 B
//! item stream).
//!
//! The queue needs no cap of its own: every ITEM in it was admitted by the
//! stream's flow-control window (`RecvWindow::on_item`), and a stream's END
//! or error comes once.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

struct State<T> {
    queue: VecDeque<T>,
    /// The receiver, parked on an empty queue.
    waker: Option<Waker>,
    /// The sender was dropped: once the queue is empty, the stream ends.
    sender_gone: bool,
    /// The receiver was closed or dropped: sends fail.
    receiver_gone: bool,
}

/// The reader's half: hands events to the stream.
pub(crate) struct InboxTx<T>(Arc<Mutex<State<T>>>);

/// The stream's half: takes its events in order.
pub(crate) struct Inbox<T> {
    shared: Arc<Mutex<State<T>>>,
    /// Events taken from the shared queue and not yet yielded.
    mine: VecDeque<T>,
}

/// A new inbox: the sender and the receiver.
pub(crate) fn inbox<T>() -> (InboxTx<T>, Inbox<T>) {
    let state = State { queue: VecDeque::new(), waker: None, sender_gone: false, receiver_gone: false };
    let shared = Arc::new(Mutex::new(state));
    (InboxTx(shared.clone()), Inbox { shared, mine: VecDeque::new() })
}

impl<T> InboxTx<T> {
    /// Queues `event`; `Err` if the receiver is gone.
    pub(crate) fn send(&self, event: T) -> Result<(), usize> {
        self.send_all(std::iter::once(event))
    }

    /// Queues every event of `events` under one lock, with at most one
    /// wake-up; if the receiver is gone, sends nothing and returns how many
    /// there were.
    pub(crate) fn send_all(&self, events: impl ExactSizeIterator<Item = T>) -> Result<(), usize> {
        let waker = {
            let mut s = self.0.lock().unwrap();
            if s.receiver_gone {
                return Err(events.len());
            }
            s.queue.extend(events);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }
}

impl<T> Drop for InboxTx<T> {
    fn drop(&mut self) {
        let waker = {
            let mut s = self.0.lock().unwrap();
            s.sender_gone = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Inbox<T> {
    /// The next event, or `None` once the sender is gone and every event
    /// it sent has been taken.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if let Some(e) = self.mine.pop_front() {
            return Poll::Ready(Some(e));
        }
        let mut s = self.shared.lock().unwrap();
        if !s.queue.is_empty() {
            std::mem::swap(&mut s.queue, &mut self.mine);
            drop(s);
            return Poll::Ready(self.mine.pop_front());
        }
        if s.sender_gone {
            return Poll::Ready(None);
        }
        match &mut s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Whether an event is in hand already: the next `recv` will not
    /// wait. It looks at the run taken from the queue only, without the
    /// lock, so `false` may still find one there.
    pub(crate) fn has_more(&self) -> bool {
        !self.mine.is_empty()
    }

    /// Refuses further sends and returns every event not yet taken.
    pub(crate) fn close(&mut self) -> impl Iterator<Item = T> {
        let rest = {
            let mut s = self.shared.lock().unwrap();
            s.receiver_gone = true;
            s.waker = None;
            std::mem::take(&mut s.queue)
        };
        std::mem::take(&mut self.mine).into_iter().chain(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(b: &'static [u8]) -> Vec<u8> {
        b.to_vec()
    }

    fn bytes(e: Option<Vec<u8>>) -> Vec<u8> {
        e.expect("an item")
    }

    #[tokio::test(flavor = "current_thread")]
    async fn events_come_in_order_across_batches_and_end_when_the_sender_goes() {
        let (tx, mut rx) = inbox();
        tx.send(item(b"a")).unwrap();
        tx.send(item(b"b")).unwrap();
        assert_eq!(bytes(rx.recv().await), b"a");
        tx.send(item(b"c")).unwrap();
        assert_eq!(bytes(rx.recv().await), b"b");
        assert_eq!(bytes(rx.recv().await), b"c");
        drop(tx);
        assert!(rx.recv().await.is_none());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_parked_receiver_is_woken_by_a_send_and_by_the_senders_end() {
        let (tx, mut rx) = inbox();
        let got = tokio::spawn(async move {
            let first = bytes(rx.recv().await);
            (first, rx.recv().await.is_none())
        });
        tokio::task::yield_now().await;
        tx.send(item(b"x")).unwrap();
        tokio::task::yield_now().await;
        drop(tx);
        assert_eq!(got.await.unwrap(), (b"x".to_vec(), true));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_run_sent_at_once_comes_in_order_after_what_was_queued_before() {
        let (tx, mut rx) = inbox();
        tx.send(item(b"a")).unwrap();
        tx.send_all([item(b"b"), item(b"c")].into_iter()).unwrap();
        for want in [b"a", b"b", b"c"] {
            assert_eq!(bytes(rx.recv().await), want);
        }
        assert_eq!(rx.close().count(), 0);
        assert_eq!(tx.send_all([item(b"d"), item(b"e")].into_iter()), Err(2), "a closed inbox counts what it refused");
    }

    #[test]
    fn a_closed_inbox_refuses_sends_and_gives_back_what_it_held() {
        let (tx, mut rx) = inbox();
        tx.send(item(b"a")).unwrap();
        tx.send(item(b"b")).unwrap();
        assert_eq!(rx.close().count(), 2);
        assert!(tx.send(item(b"c")).is_err());
    }
}
