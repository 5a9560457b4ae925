//! The call table of a connection: calls this side started (`out`) and
//! calls it serves (`served`), keyed by call id, plus the bookkeeping the
//! reader needs to route every frame to the right one.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Notify, Semaphore};

use crate::codec::Payload;
use crate::stream::RecvWindow;
use crate::Error;

/// What the reader delivers to a stream.
#[derive(Debug)]
pub(crate) enum Event {
    /// One ITEM's payload.
    Item(Payload),
    /// The stream ended: `Ok` with the final payload (if any) or the error.
    End(Result<Option<Payload>, Error>),
}

/// Where the outcome of a call this side started goes.
pub(crate) enum OutSink {
    /// unary and client_stream: the RESPONSE payload.
    Once(oneshot::Sender<Result<Payload, Error>>),
    /// server_stream and bidi: ITEMs, then the end.
    Stream(mpsc::UnboundedSender<Event>),
}

/// A call this side started.
pub(crate) struct OutCall {
    pub(crate) sink: OutSink,
    /// Credit for our ITEMs (client_stream, bidi).
    pub(crate) send_credit: Option<Arc<Semaphore>>,
    /// Credit we granted for the callee's ITEMs (server_stream, bidi).
    pub(crate) recv: Option<Arc<RecvWindow>>,
}

impl OutCall {
    /// Delivers the call's outcome and releases anyone waiting to send.
    pub(crate) fn finish(self, result: Result<Payload, Error>) {
        if let Some(c) = &self.send_credit {
            c.close();
        }
        match self.sink {
            OutSink::Once(tx) => {
                let _ = tx.send(result);
            }
            OutSink::Stream(tx) => {
                let _ = tx.send(Event::End(result.map(|p| Some(p).filter(|p| !p.bytes.is_empty()))));
            }
        }
    }
}

/// A call this side serves.
pub(crate) struct Served {
    pub(crate) cancel: Arc<CancelSignal>,
    /// The caller's ITEMs (client_stream, bidi); dropped on END.
    pub(crate) items: Option<mpsc::UnboundedSender<Event>>,
    pub(crate) recv: Option<Arc<RecvWindow>>,
    /// Credit for our ITEMs (server_stream, bidi).
    pub(crate) send_credit: Option<Arc<Semaphore>>,
}

impl Served {
    /// Stops the handler; it will send nothing more.
    pub(crate) fn cancel(self) {
        self.cancel.cancel();
        if let Some(c) = &self.send_credit {
            c.close();
        }
    }
}

/// A one-way, many-waiter cancellation flag.
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

/// The mutable state of a connection, under one lock.
pub(crate) struct State {
    pub(crate) out: IdMap<OutCall>,
    pub(crate) served: IdMap<Served>,
    next_id: u32,
    first_id: u32,
    /// Set once, when the connection dies; new calls fail with it.
    pub(crate) closed: Option<Error>,
    /// The peer sent GOAWAY ok: start no new calls.
    pub(crate) peer_draining: bool,
    /// We sent GOAWAY ok: accept no new calls.
    pub(crate) draining: bool,
    /// The highest call id the peer started that we saw.
    pub(crate) last_peer_id: u32,
    pub(crate) pings: HashMap<u64, oneshot::Sender<()>>,
    pub(crate) ping_seq: u64,
}

impl State {
    pub(crate) fn new(dialer: bool) -> State {
        let first_id = if dialer { 1 } else { 2 };
        State {
            out: IdMap::default(),
            served: IdMap::default(),
            next_id: first_id,
            first_id,
            closed: None,
            peer_draining: false,
            draining: false,
            last_peer_id: 0,
            pings: HashMap::new(),
            ping_seq: 0,
        }
    }

    /// The next free id of our parity (`spec/PROTOCOL.md` §3).
    pub(crate) fn alloc_id(&mut self) -> u32 {
        loop {
            let id = self.next_id;
            self.next_id = match id.checked_add(2) {
                Some(n) => n,
                None => self.first_id,
            };
            if !self.out.contains_key(&id) {
                return id;
            }
        }
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
/// (hashbrown takes the bucket from the low bits).
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0.rotate_left(32)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only u32 keys are hashed; anything else still hashes soundly.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
