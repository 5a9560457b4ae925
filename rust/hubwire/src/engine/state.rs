//! [`Core`]: the state of one connection, shared by its reader task, the
//! handlers of the calls it serves, and every handle to it.
//!
//! It sends frames (through the [`Writer`]), starts and abandons the calls
//! this side makes, drains, and dies. [`Core::die`] is the one place a
//! connection ends: every pending call fails at once with `unavailable`
//! and a message saying why; every handler is cancelled.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hubwire_frame::frame::{encode_item_head, encode_request_head, encode_response_head, request_body_len, response_body_len};
use hubwire_frame::{Codec, Frame, Hello, Kind};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::backlog::Backlog;
use super::calls::{CallTable, Event, OutCall, OutSink};
use super::credit::RecvWindow;
use super::inbox::InboxTx;
use super::read_state::ReadSide;
use super::slots::SlotRef;
use super::wait::{Kick, SpinGate};
use super::writer::Writer;
use crate::codec::Payload;
use crate::errors::{Code, Error};
use crate::transport::DynTransport;

/// The shared state of one connection.
pub(crate) struct Core {
    pub(crate) transport: DynTransport,
    pub(crate) writer: Arc<Writer>,
    pub(crate) calls: Mutex<CallTable>,
    pub(crate) peer: Arc<Hello>,
    pub(crate) local: Hello,
    /// We opened the connection: our call ids are odd.
    pub(crate) dialer: bool,
    /// Our outgoing calls in flight, bounded by the peer's `max_calls`.
    pub(crate) gate: Arc<Semaphore>,
    pub(crate) kick: Kick,
    pub(crate) low_latency: bool,
    /// In low-latency mode, kicks only while this gate is open.
    spin_gate: Option<SpinGate>,
    /// The reader's state, shared with a caller that reads its own answer
    /// (`read_state.rs`).
    pub(crate) read: ReadSide,
    /// Whether the last call this side started was alone in flight
    /// ([`Started::sequential`]).
    pub(crate) last_alone: std::sync::atomic::AtomicBool,
    pub(crate) closed: watch::Sender<Option<Error>>,
    /// Signalled when a draining connection runs out of calls.
    pub(crate) idle: Notify,
    /// Served calls outside the table whose RESPONSE is not queued yet:
    /// one being answered on the reader (it enters the table only if its
    /// first poll is pending), and one taken out of the table to answer
    /// (its task's end, or the reader refusing an ITEM beyond the window).
    /// Each still holds its `max_calls` slot until the RESPONSE is queued
    /// ([`Core::answer_served`], which frees it under the write queue's
    /// lock), and a drain waits for it: counted by the table alone, a
    /// drain could close between the table and the queue and drop the
    /// answer, and a peer that does not read could have more than
    /// `max_calls` answers queued.
    pub(crate) answering: AtomicUsize,
    /// Set once [`Core::drain`] has begun: a drop of `answering` then
    /// wakes the drain.
    pub(crate) drain_started: AtomicBool,
    /// Where DIRECT and ACCEPT frames go (`direct.rs`), set once at open.
    pub(crate) direct: std::sync::OnceLock<super::handoff::DirectHook>,
    /// ITEMs delivered to our streams and not yet taken: while there are
    /// some, the ITEMs and CREDITs we send can share a write.
    pub(crate) backlog: Arc<Backlog>,
    /// The upgrade to shared memory, when both sides can (§11.4).
    pub(crate) upgrade: std::sync::OnceLock<super::upgrade_state::Upgrade>,
    /// Every ITEM goes through the background flusher, so that a burst
    /// shares a write ([`Transport::batches_items`]: NATS).
    ///
    /// [`Transport::batches_items`]: crate::transport::Transport::batches_items
    pub(crate) batch_items: bool,
}

/// A call this side started, between its REQUEST and its end.
pub(crate) struct Started {
    pub(crate) id: u32,
    pub(crate) deadline: Option<Instant>,
    /// A slot of the peer's `max_calls`, released when the call is dropped.
    pub(crate) _permit: OwnedSemaphorePermit,
    /// Where the outcome goes, for a call that answers once (its
    /// [`super::Answer`] frees it).
    pub(crate) slot: Option<SlotRef>,
    /// No other call of ours was in flight when its REQUEST left (it left
    /// at once, not with the background flusher): in low-latency mode its
    /// answer is worth spinning for, by the reader ([`Core::kick`]) or by
    /// the caller itself ([`Core::read_own`]). `begin` leaves that choice
    /// to its caller.
    pub(crate) alone: bool,
    /// Alone, and so was the call started before it: calls come one after
    /// the other, and a caller that reads its own answer keeps no other
    /// task from starting its call. (After a burst of calls whose answers
    /// came together, the first caller to start again is alone too, but
    /// the others are about to start theirs: it must not read, or the
    /// burst would go one call at a time.)
    pub(crate) sequential: bool,
}

impl Core {
    /// The core of a connection whose handshake is done.
    pub(crate) fn new(
        transport: DynTransport,
        writer: Arc<Writer>,
        local: Hello,
        peer: Hello,
        dialer: bool,
        low_latency: bool,
        spin_gate: Option<SpinGate>,
    ) -> Core {
        let batch_items = transport.batches_items();
        Core {
            transport,
            writer,
            calls: Mutex::new(CallTable::new(dialer)),
            gate: Arc::new(Semaphore::new(peer.max_calls as usize)),
            peer: Arc::new(peer),
            local,
            dialer,
            kick: Kick::default(),
            low_latency,
            spin_gate,
            read: ReadSide::default(),
            last_alone: Default::default(),
            closed: watch::channel(None).0,
            idle: Notify::new(),
            answering: AtomicUsize::new(0),
            drain_started: AtomicBool::new(false),
            direct: std::sync::OnceLock::new(),
            backlog: Backlog::new(),
            upgrade: Default::default(),
            batch_items,
        }
    }

    /// Whether `id` is of our parity: a call we started.
    pub(crate) fn ours(&self, id: u32) -> bool {
        (id % 2 == 1) == self.dialer
    }

    /// Whether the connection has died. The call table, not the `closed`
    /// watch: `die` marks the table first and tells watchers last, and a
    /// call refused in between must not see an open connection.
    pub(crate) fn is_closed(&self) -> bool {
        self.calls.lock().unwrap().closed.is_some()
    }

    /// Why the connection died (or a generic reason, if it has not).
    pub(crate) fn closed_error(&self) -> Error {
        self.calls.lock().unwrap().closed.clone().unwrap_or_else(|| Error::unavailable("connection closed"))
    }

    /// Waits until the connection dies; returns why.
    pub(crate) async fn wait_closed(&self) -> Error {
        let mut rx = self.closed.subscribe();
        loop {
            if let Some(e) = rx.borrow_and_update().clone() {
                return e;
            }
            if rx.changed().await.is_err() {
                return Error::unavailable("connection closed");
            }
        }
    }

    // ---- Sending frames ----------------------------------------------------

    fn push(&self, head: impl FnOnce(&mut BytesMut), payload: &Bytes) -> Result<(), Error> {
        self.writer.push(head, payload).map_err(|r| Error::unavailable(format!("connection closed: {r}")))
    }

    /// Sends a frame without a large payload.
    pub(crate) fn send(&self, frame: &Frame) -> Result<(), Error> {
        self.push(|b| frame.encode(b), &Bytes::new())
    }

    /// Sends CREDIT for a stream we receive (what [`RecvWindow::consumed`]
    /// returned); batched with what follows as ITEMs are (`send_item`).
    pub(crate) fn grant(&self, id: u32, credit: u32) {
        let frame = Frame::Credit { call_id: id, credit };
        let head = |b: &mut BytesMut| frame.encode(b);
        let _ = if self.backlog.pending() { self.writer.push_soon(head, &Bytes::new()) } else { self.writer.push(head, &Bytes::new()) };
    }

    /// Sends END: no more items from us on call `id`.
    pub(crate) fn send_end(&self, id: u32) -> Result<(), Error> {
        self.send(&Frame::End { call_id: id })
    }

    /// Sends an ITEM. While items that arrived are still waiting for the
    /// application (it will send again at once: an echo, a pipelined
    /// stream), the write is left to the background flusher so that a
    /// burst leaves in few `sendmsg`s; the item that empties the backlog
    /// is not held back (alone, it is written at once; behind a run it
    /// joins the run's write: see `backlog.rs`). An ITEM whose sender says
    /// another follows at once (`more`: a relay whose next item waits on
    /// another connection's stream) is left to the flusher too.
    /// On a transport whose writes are messages (NATS) every ITEM waits
    /// for the flusher: a handler's loop of sends then leaves as one DATA
    /// message per burst rather than one per item.
    pub(crate) fn send_item(&self, id: u32, codec: Codec, payload: &Bytes, more: bool) -> Result<(), Error> {
        let head = |b: &mut BytesMut| encode_item_head(b, id, codec, payload.len());
        let soon = more || self.batch_items || self.backlog.pending();
        let sent = if soon { self.writer.push_soon(head, payload) } else { self.writer.push(head, payload) };
        sent.map_err(|r| Error::unavailable(format!("connection closed: {r}")))
    }

    /// Sends a RESPONSE to a call that was never served (refused, or no
    /// service); `soon` when other served calls are in flight (see
    /// [`Writer::push_soon`]).
    pub(crate) fn send_response(&self, id: u32, result: Result<Option<Payload>, Error>, soon: bool) {
        self.respond(id, result, soon, None);
    }

    /// Sends the RESPONSE of a served call counted in `answering`, whose
    /// slot is freed as the RESPONSE is queued, then tells a waiting drain.
    pub(crate) fn answer_served(&self, id: u32, result: Result<Option<Payload>, Error>, soon: bool) {
        self.respond(id, result, soon, Some(&self.answering));
        self.after_answer();
    }

    /// A RESPONSE over the caller's `max_frame` is replaced by `too_large`.
    fn respond(&self, id: u32, result: Result<Option<Payload>, Error>, soon: bool, slot: Option<&AtomicUsize>) {
        let (codec, code, message, payload) = match result {
            Ok(Some(p)) => (p.codec, Code::Ok, String::new(), p.bytes),
            Ok(None) => (Codec::Raw, Code::Ok, String::new(), Bytes::new()),
            Err(e) => {
                let (codec, bytes) = e.detail_bytes();
                (codec, e.code(), e.message().to_string(), bytes)
            }
        };
        let body = response_body_len(&message, payload.len());
        if body > self.peer.max_frame as usize {
            let msg = format!("response of {body} bytes exceeds the caller's max_frame of {} bytes", self.peer.max_frame);
            let head = |b: &mut BytesMut| encode_response_head(b, id, Codec::Raw, Code::TooLarge, &msg, 0);
            let _ = self.writer.push_freeing(head, &Bytes::new(), false, slot);
            return;
        }
        let head = |b: &mut BytesMut| encode_response_head(b, id, codec, code, &message, payload.len());
        let _ = self.writer.push_freeing(head, &payload, soon, slot);
    }

    /// Sizes the writer's batches for `in_flight` calls
    /// ([`Writer::set_batch`]); on shared memory, where a write costs no
    /// system call, they stay small.
    pub(crate) fn size_batches(&self, in_flight: usize) {
        self.writer.set_batch(if self.on_shm() { 0 } else { in_flight });
    }

    /// A served call counted in `answering` ended without a RESPONSE
    /// (the connection died, or it was cancelled): its slot is free.
    pub(crate) fn answered(&self) {
        self.answering.fetch_sub(1, SeqCst);
        self.after_answer();
    }

    /// After `answering` dropped: a drain waiting for the last call may
    /// now flush and close. The drain checks the table and the count again
    /// itself; `drain_started` is read after the count dropped and set
    /// before the drain reads the count (both SeqCst), so one of the two
    /// sees the other.
    fn after_answer(&self) {
        if self.drain_started.load(SeqCst) {
            self.idle.notify_waiters();
        }
    }

    /// Checks a frame body against the peer's limit.
    pub(crate) fn check_size(&self, body_len: usize, what: &str) -> Result<(), Error> {
        if body_len > self.peer.max_frame as usize {
            return Err(Error::new(
                Code::TooLarge,
                format!("{what} of {body_len} bytes exceeds the peer's max_frame of {} bytes", self.peer.max_frame),
            ));
        }
        Ok(())
    }

    /// In low-latency mode, makes the reader spin: an answer is expected.
    pub(crate) fn kick(&self) {
        if self.low_latency && self.spin_gate.as_ref().is_none_or(SpinGate::open) {
            self.kick.kick();
        }
    }

    // ---- Calls we start ----------------------------------------------------

    /// Starts a call: waits for a slot of the peer's `max_calls` (calls
    /// beyond it queue here rather than be refused there), registers the
    /// call with where its outcome goes, and sends its REQUEST. A zero
    /// `timeout` is no deadline, as `timeout_ms = 0` is on the wire.
    /// Without `stream` the call answers once, into a slot of the table
    /// ([`Started::slot`]) holding the waker of the task that began it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn begin(
        &self,
        method: &str,
        kind: Kind,
        input: &Payload,
        timeout: Option<Duration>,
        stream: Option<InboxTx<Event>>,
        send_credit: Option<Arc<Semaphore>>,
        recv: Option<Arc<RecvWindow>>,
    ) -> Result<Started, Error> {
        if method.is_empty() || method.len() > 255 {
            return Err(Error::invalid_argument(format!("method name must be 1-255 bytes, got {}", method.len())));
        }
        self.check_size(request_body_len(method, input.bytes.len()), "request")?;
        let timeout = timeout.filter(|t| !t.is_zero());
        let deadline = timeout.map(|t| Instant::now() + t);
        let permit = match self.gate.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => self.gate.clone().acquire_owned().await.map_err(|_| self.closed_error())?,
        };
        // The task that waits for a single answer is most often this one:
        // registering its waker now saves its first poll a look at the slot.
        let waker = match stream {
            None => Some(std::future::poll_fn(|cx| std::task::Poll::Ready(cx.waker().clone())).await),
            Some(_) => None,
        };
        // Other calls in flight: this REQUEST can share a write with theirs.
        let (id, in_flight, slot) = {
            let mut t = self.calls.lock().unwrap();
            if let Some(e) = &t.closed {
                return Err(e.clone());
            }
            if t.peer_draining {
                return Err(Error::unavailable("peer is draining (GOAWAY); start the call elsewhere"));
            }
            let id = t.alloc_id();
            let (sink, slot) = match stream {
                Some(tx) => (OutSink::Stream(tx), None),
                None => {
                    let slot = t.slots.alloc(waker);
                    (OutSink::Once(slot), Some(slot))
                }
            };
            t.out.insert(id, OutCall { sink, send_credit, recv });
            (id, t.out.len(), slot)
        };
        let pipelined = in_flight > 1;
        if pipelined {
            self.size_batches(in_flight);
        }
        let timeout_ms = timeout.map_or(0, |t| t.as_millis().clamp(1, u32::MAX as u128) as u32);
        let head = |b: &mut BytesMut| encode_request_head(b, id, kind, input.codec, timeout_ms, method, input.bytes.len());
        let sent = if pipelined { self.writer.push_soon(head, &input.bytes) } else { self.writer.push(head, &input.bytes) };
        if let Err(r) = sent {
            // The writer closes on a failed write before the reader sees the
            // peer go: end the connection now, so that `is_closed` and the
            // other calls agree with the error this call gets.
            // The call is out of the table now (`die` failed it): its slot
            // is this caller's to free.
            let e = Error::unavailable(format!("connection closed: {r}"));
            self.die(e.clone());
            if let Some(slot) = slot {
                self.calls.lock().unwrap().slots.release(slot);
            }
            return Err(e);
        }
        // (When pipelined, the REQUEST leaves with the background flusher:
        // spinning for its answer first would delay it.)
        let before = self.last_alone.swap(!pipelined, std::sync::atomic::Ordering::Relaxed);
        Ok(Started { id, deadline, _permit: permit, slot, alone: !pipelined, sequential: !pipelined && before })
    }

    /// Abandons a call we started: forgets it and sends CANCEL, if it was
    /// still pending.
    /// `why` is the outcome its answer (if still waited for) receives.
    pub(crate) fn cancel_out(&self, id: u32, why: Error) {
        if self.answer(id, Err(why)) {
            let _ = self.send(&Frame::Cancel { call_id: id });
        }
    }

    /// Takes a call we started out of the table (its answer arrived, or we
    /// abandon it) and delivers `outcome` to it, telling a drain when that
    /// was the last call. False if the call was no longer there.
    pub(crate) fn answer(&self, id: u32, outcome: Result<Payload, Error>) -> bool {
        let settled = {
            let mut t = self.calls.lock().unwrap();
            let Some(c) = t.out.remove(id) else { return false };
            if t.draining && t.idle() {
                self.idle.notify_waiters();
            }
            t.settle(c, outcome)
        };
        settled.run();
        true
    }

    // ---- The connection's life -------------------------------------------

    /// Round-trip time of a PING.
    pub(crate) async fn ping(&self) -> Result<Duration, Error> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let seq = {
            let mut t = self.calls.lock().unwrap();
            if let Some(e) = &t.closed {
                return Err(e.clone());
            }
            t.ping_seq += 1;
            let seq = t.ping_seq;
            t.pings.insert(seq, tx);
            seq
        };
        let start = std::time::Instant::now();
        self.send(&Frame::Ping { data: seq.to_le_bytes() })?;
        self.kick();
        rx.await.map_err(|_| self.closed_error())?;
        Ok(start.elapsed())
    }

    /// Drains, then closes: sends GOAWAY `ok` (the peer starts no new
    /// calls), refuses new calls, waits up to `grace` for the calls in
    /// flight either way, then closes.
    pub(crate) async fn drain(&self, grace: Duration) {
        let last = {
            let mut t = self.calls.lock().unwrap();
            t.draining = true;
            t.last_peer_id
        };
        // Before `answering` is read below; `answered` decrements it before
        // reading this (both SeqCst): one of the two sees the other.
        self.drain_started.store(true, SeqCst);
        let _ = self.send(&Frame::Goaway { last_id: last, code: Code::Ok, message: "draining".into() });
        let _ = tokio::time::timeout(grace, async {
            loop {
                let notified = self.idle.notified();
                {
                    // Both read under the lock: a call moves from
                    // `answering` into the table under it.
                    let t = self.calls.lock().unwrap();
                    if t.closed.is_some() || (t.idle() && self.answering.load(SeqCst) == 0) {
                        return;
                    }
                }
                notified.await;
            }
        })
        .await;
        let _ = tokio::time::timeout(Duration::from_millis(100), self.writer.flushed()).await;
        self.die(Error::unavailable("connection closed locally"));
    }

    /// Ends the connection: fails every pending call with `err`, stops
    /// every handler, shuts the transport down (the reader task then sees
    /// end of stream and releases the descriptor). Idempotent.
    pub(crate) fn die(&self, err: Error) {
        if self.end(err) {
            self.transport.shutdown();
        }
    }

    /// Ends the connection as [`Core::die`] does but leaves the transport
    /// alone: after a fatal GOAWAY the reader half-closes and lingers on it
    /// first (`spec/PROTOCOL.md` §7.3). False if it had already ended.
    pub(crate) fn end(&self, err: Error) -> bool {
        let (out, served, pings) = {
            let mut t = self.calls.lock().unwrap();
            if t.closed.is_some() {
                return false;
            }
            t.closed = Some(err.clone());
            let out: Vec<OutCall> = t.out.take_all();
            let out: Vec<_> = out.into_iter().map(|c| t.settle(c, Err(err.clone()))).collect();
            (out, std::mem::take(&mut t.served), std::mem::take(&mut t.pings))
        };
        for settled in out {
            settled.run();
        }
        for (_, s) in served {
            s.cancel();
        }
        drop(pings);
        self.gate.close();
        self.writer.close(err.message());
        self.idle.notify_waiters();
        self.closed.send_replace(Some(err));
        true
    }
}
