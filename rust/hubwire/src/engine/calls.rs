//! The call table of a connection: calls this side started (`out`, by
//! the ids this side chose: `id_table.rs`) and calls it serves (`served`,
//! by the peer's ids), plus the bookkeeping the
//! reader needs to route every frame to the right one (`spec/PROTOCOL.md`
//! §3: the dialer's ids are odd, the acceptor's even).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::task::Waker;

use tokio::sync::{oneshot, Semaphore};

use super::backlog::Backlog;
use super::credit::RecvWindow;
use super::id_table::IdTable;
use super::inbox::{inbox, Inbox, InboxTx};
use super::slots::{Outcome, SlotRef, Slots};
use crate::codec::Payload;
use crate::context::CancelSignal;
use crate::errors::Error;

/// What the reader delivers to a stream.
#[derive(Debug)]
pub(crate) enum Event {
    /// One ITEM's payload.
    Item(Payload),
    /// The stream ended: `Ok` with the final payload (if any) or the error.
    End(Result<Option<Payload>, Error>),
}

/// The receiving half of a stream as the engine builds it: what the reader
/// delivers, the window it spends, and the connection's [`Backlog`] its
/// waiting items count in (`recv` and `Drop` are in `backlog.rs`).
pub(crate) struct StreamIn {
    pub(crate) rx: Inbox<Event>,
    pub(crate) window: Arc<RecvWindow>,
    pub(crate) backlog: Arc<Backlog>,
}

impl StreamIn {
    /// A new stream: the half the reader sends to, and this half.
    pub(crate) fn new(window: u32, backlog: Arc<Backlog>) -> (InboxTx<Event>, StreamIn) {
        let (tx, rx) = inbox();
        (tx, StreamIn { rx, window: RecvWindow::new(window), backlog })
    }

    /// Whether the next event is in hand already ([`Inbox::has_more`]).
    pub(crate) fn has_more(&self) -> bool {
        self.rx.has_more()
    }

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
        let unread = self.rx.close().filter(|e| matches!(e, Event::Item(_))).count();
        if unread > 0 {
            self.backlog.taken(unread);
        }
    }
}

/// Hands a run of ITEMs to a stream (the half the reader sends to) at
/// once, counting them in the connection's backlog while they wait there.
pub(crate) fn deliver(backlog: &Backlog, tx: &InboxTx<Event>, items: impl ExactSizeIterator<Item = Payload>) {
    // Counted before the send: the consumer may take them (and uncount
    // them) before `send_all` returns.
    backlog.added(items.len());
    if let Err(refused) = tx.send_all(items.map(Event::Item)) {
        backlog.taken(refused);
    }
}

/// Where the outcome of a call this side started goes.
pub(crate) enum OutSink {
    /// unary and client_stream: the RESPONSE, into the call's slot.
    Once(SlotRef),
    /// server_stream and bidi: ITEMs, then the end.
    Stream(InboxTx<Event>),
}

/// A call this side started.
pub(crate) struct OutCall {
    pub(crate) sink: OutSink,
    /// Credit for our ITEMs (client_stream, bidi).
    pub(crate) send_credit: Option<Arc<Semaphore>>,
    /// Credit we granted for the callee's ITEMs (server_stream, bidi).
    pub(crate) recv: Option<Arc<RecvWindow>>,
}

/// What is left to do for a call taken out of the table, once the table's
/// lock is released: wake its waiter, end its stream, release anyone
/// waiting to send. The outcome is delivered first (a send that fails on
/// the closed credit can then find it: `ClientStream::send` reports the
/// callee's error).
#[must_use]
pub(crate) struct Settled {
    waker: Option<Waker>,
    stream: Option<(InboxTx<Event>, Outcome)>,
    credit: Option<Arc<Semaphore>>,
}

impl Settled {
    /// Does it; call without the table's lock.
    pub(crate) fn run(self) {
        if let Some(w) = self.waker {
            w.wake();
        }
        if let Some((tx, result)) = self.stream {
            let _ = tx.send(Event::End(result.map(|p| Some(p).filter(|p| !p.bytes.is_empty()))));
        }
        if let Some(c) = &self.credit {
            c.close();
        }
    }
}

/// A call this side serves.
pub(crate) struct Served {
    /// Cancels the handler; also the identity of this call, since the peer
    /// may reuse its id once the call has ended (see `serve::finish`).
    pub(crate) cancel: Arc<CancelSignal>,
    /// The caller's ITEMs (client_stream, bidi); dropped on END.
    pub(crate) items: Option<InboxTx<Event>>,
    pub(crate) recv: Option<Arc<RecvWindow>>,
    /// Credit for our ITEMs (server_stream, bidi).
    pub(crate) send_credit: Option<Arc<Semaphore>>,
}

impl Served {
    /// Stops the handler; it will send nothing more.
    pub(crate) fn cancel(self) {
        self.cancel.cancel();
        self.end();
    }

    /// Ends the call without cancelling its signal, which the caller
    /// cancels or reuses (`CancelSignal::end`).
    pub(crate) fn end(self) {
        if let Some(c) = &self.send_credit {
            c.close();
        }
    }
}

/// The mutable state of a connection's calls, under one lock.
pub(crate) struct CallTable {
    pub(crate) out: IdTable<OutCall>,
    pub(crate) served: IdMap<Served>,
    next_id: u32,
    first_id: u32,
    /// Set once, when the connection dies; new calls fail with it.
    pub(crate) closed: Option<Error>,
    /// The peer sent GOAWAY ok: start no new calls.
    pub(crate) peer_draining: bool,
    /// We sent GOAWAY ok: accept no new calls.
    pub(crate) draining: bool,
    /// The call id of the last REQUEST the peer sent us: the highest in the
    /// order of §3, which survives the wrap (GOAWAY's `call_id`).
    pub(crate) last_peer_id: u32,
    pub(crate) pings: HashMap<u64, oneshot::Sender<()>>,
    pub(crate) ping_seq: u64,
    /// The outcome slots of the calls in `out` that answer once.
    pub(crate) slots: Slots,
}

impl CallTable {
    /// An empty table; the dialer's ids are odd, the acceptor's even.
    pub(crate) fn new(dialer: bool) -> CallTable {
        let first_id = if dialer { 1 } else { 2 };
        CallTable {
            out: IdTable::default(),
            served: IdMap::default(),
            next_id: first_id,
            first_id,
            closed: None,
            peer_draining: false,
            draining: false,
            last_peer_id: 0,
            pings: HashMap::new(),
            ping_seq: 0,
            slots: Slots::default(),
        }
    }

    /// The next free id of our parity (`spec/PROTOCOL.md` §3) whose slot
    /// in `out` is free ([`IdTable`]); insert it in `out` before the lock
    /// is let go. Ids wrap around to the first one past 2³²−1, skipping
    /// ids still in flight.
    pub(crate) fn alloc_id(&mut self) -> u32 {
        self.out.reserve_one();
        loop {
            let id = self.next_id;
            self.next_id = match id.checked_add(2) {
                Some(n) => n,
                None => self.first_id,
            };
            if self.out.is_free(id) {
                return id;
            }
        }
    }

    /// Delivers the outcome of a call taken out of `out`: into its slot
    /// now, the rest once the lock is released ([`Settled::run`]).
    pub(crate) fn settle(&mut self, call: OutCall, result: Outcome) -> Settled {
        let (waker, stream) = match call.sink {
            OutSink::Once(slot) => (self.slots.fill(slot, result), None),
            OutSink::Stream(tx) => (None, Some((tx, result))),
        };
        Settled { waker, stream, credit: call.send_credit }
    }

    /// Whether the connection has no calls left either way.
    pub(crate) fn idle(&self) -> bool {
        self.out.is_empty() && self.served.is_empty()
    }
}

/// Calls by id, hashed by one multiplication instead of SipHash (which
/// showed as ~3 % of each side's time when pipelining). The peer chooses
/// the ids of the calls it makes, but the table holds at most `max_calls`
/// of them, so ids chosen to collide can only make it as slow as a list
/// of that length; and the product's high half, which picks the bucket,
/// depends on every bit of the id.
pub(crate) type IdMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

/// The hasher of [`IdMap`]: Fibonacci hashing of a `u32`, halves swapped
/// (hashbrown takes the bucket from the low bits). A provider's method
/// table hashes names with it too, a byte at a time.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0.rotate_left(32)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Method names (the provider's table): each byte mixed in.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn pending_call() -> OutCall {
        let slot = Slots::default().alloc(None);
        OutCall { sink: OutSink::Once(slot), send_credit: None, recv: None }
    }

    #[test]
    fn ids_keep_the_side_s_parity() {
        let mut dialer = CallTable::new(true);
        let mut acceptor = CallTable::new(false);
        assert_eq!([dialer.alloc_id(), dialer.alloc_id(), dialer.alloc_id()], [1, 3, 5]);
        assert_eq!([acceptor.alloc_id(), acceptor.alloc_id()], [2, 4]);
    }

    #[test]
    fn ids_wrap_around_to_the_first_one_and_skip_ids_in_flight() {
        let mut t = CallTable::new(true);
        t.next_id = u32::MAX - 2; // odd: the last two odd ids
        t.out.insert(1, pending_call()); // still in flight from the first lap
        assert_eq!(t.alloc_id(), u32::MAX - 2);
        assert_eq!(t.alloc_id(), u32::MAX);
        assert_eq!(t.alloc_id(), 3, "wrapped past 2^32-1, skipping id 1 in flight");

        let mut t = CallTable::new(false);
        t.next_id = u32::MAX - 1; // the last even id
        assert_eq!(t.alloc_id(), u32::MAX - 1);
        assert_eq!(t.alloc_id(), 2);
    }

    #[test]
    fn the_id_hasher_spreads_consecutive_ids_over_buckets() {
        // hashbrown picks the bucket from the low bits and a tag from the
        // top 7: both must vary for ids 1, 3, 5, ... (one parity).
        let build = BuildHasherDefault::<IdHasher>::default();
        let hashes: Vec<u64> = (0..1024u32).map(|i| build.hash_one(2 * i + 1)).collect();
        let low: std::collections::HashSet<u64> = hashes.iter().map(|h| h & 1023).collect();
        let top: std::collections::HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(low.len() > 600, "1024 ids fell into only {} of 1024 buckets", low.len());
        assert_eq!(top.len(), 128, "the top 7 bits take every value");
        assert_ne!(build.hash_one(1u32), build.hash_one(3u32));
    }

    fn item() -> Payload {
        Payload { codec: hubwire_frame::Codec::Raw, bytes: bytes::Bytes::from_static(b"x") }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn stream_items_count_in_the_backlog_until_taken() {
        let b = Backlog::new();
        let (tx, mut s) = StreamIn::new(8, b.clone());
        deliver(&b, &tx, [item(), item()].into_iter());
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
    async fn a_dropped_stream_takes_its_unread_items_out_of_the_backlog_and_refuses_more() {
        let b = Backlog::new();
        let (tx, s) = StreamIn::new(8, b.clone());
        deliver(&b, &tx, [item(), item()].into_iter());
        drop(s);
        assert!(!b.pending());
        deliver(&b, &tx, [item()].into_iter());
        assert!(!b.pending(), "an item for a stream that is gone is not counted");
    }

    #[test]
    fn a_table_with_no_calls_is_idle() {
        let mut t = CallTable::new(true);
        assert!(t.idle());
        t.out.insert(1, pending_call());
        assert!(!t.idle());
    }
}
