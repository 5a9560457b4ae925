//! A link (`spec/PROTOCOL.md` §13.4–§13.6): one hubwire byte stream over
//! NATS, as a [`Transport`]. We publish to the peer's subject and read our
//! own subscription; every message carries the 5-byte header of
//! [`wire`](super::wire). Liveness (heartbeats, the silence limit) is the
//! [`ticker`](super::ticker)'s job, shared by every link of the process.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use async_nats::{Client, Subject, Subscriber};
use bytes::{BufMut, Bytes, BytesMut};
use futures_util::Stream;

use super::ticker;
use super::wire::{self, MsgKind, SeqCheck, HEADER_LEN};
use crate::transport::Transport;

type Publish = Pin<Box<dyn Future<Output = Result<(), async_nats::PublishError>> + Send>>;

/// Data bytes per DATA message at most, below the server's `max_payload`
/// (§13.4 lets a sender use smaller messages). A stream's burst of ITEMs
/// (`Transport::batches_items`) leaves as messages of this size: each
/// saves the per-message work of 16 one-KiB items (client, server and
/// receiver), and the receiver starts on the first while the next travel,
/// where one message of the whole burst would arrive all at once; what a
/// side buffers per message (the sender's copy, the receiver's read
/// buffer) stays this small. Measured on `nats_stream`: 4–16 KiB moved
/// the most items/s, 64 KiB and more up to a third fewer.
const MAX_DATA: usize = 16 * 1024;

/// What we receive: our subscription and what is left of the last DATA.
struct Rx {
    /// None once the link is released (dropping it unsubscribes).
    sub: Option<Subscriber>,
    seq: SeqCheck,
    leftover: Bytes,
    /// A message the ticker took off the subscription to see that the peer
    /// is not silent while we were not reading; read before the next.
    peeked: Option<async_nats::Message>,
    /// END or CLOSE seen: end of stream after `leftover`.
    eof: bool,
    /// Why the link broke (a gap, silence, a bad message): every later
    /// read fails with it.
    broken: Option<String>,
}

/// What we send: the next sequence number, and a publish the client could
/// not take at once with how many bytes it carries.
struct Tx {
    seq: u32,
    pending: Option<(Publish, usize)>,
    /// END sent: no more DATA.
    ended: bool,
    /// CLOSE sent or received: nothing more goes out.
    closed: bool,
}

/// The state of one link, shared with the ticker.
pub(super) struct LinkShared {
    client: Client,
    /// Where we publish: the peer's link subject.
    to: Subject,
    label: String,
    /// Data bytes per message: the server's `max_payload` less the header,
    /// at most [`MAX_DATA`].
    max_data: usize,
    rx: Mutex<Rx>,
    tx: Mutex<Tx>,
    /// Milliseconds on the ticker's clock of the last message received and
    /// sent.
    last_recv: AtomicU64,
    last_sent: AtomicU64,
    /// Set by the ticker when the peer has been silent too long.
    silent: AtomicBool,
    /// The reader waiting for a message, woken by the ticker.
    reader: Mutex<Option<Waker>>,
}

/// One side of a link: a [`Transport`] over NATS.
pub struct NatsLink {
    shared: Arc<LinkShared>,
}

impl NatsLink {
    /// A link that reads `sub` (our link subject, already subscribed) and
    /// publishes to `to` (the peer's).
    pub(super) fn new(client: Client, sub: Subscriber, to: String, label: String) -> NatsLink {
        let max_data = (client.server_info().max_payload.max(HEADER_LEN + 1) - HEADER_LEN).min(MAX_DATA);
        let now = ticker::now_ms();
        let shared = Arc::new(LinkShared {
            client,
            to: Subject::from(to),
            label,
            max_data,
            rx: Mutex::new(Rx { sub: Some(sub), seq: SeqCheck::default(), leftover: Bytes::new(), peeked: None, eof: false, broken: None }),
            tx: Mutex::new(Tx { seq: 0, pending: None, ended: false, closed: false }),
            last_recv: AtomicU64::new(now),
            last_sent: AtomicU64::new(now),
            silent: AtomicBool::new(false),
            reader: Mutex::new(None),
        });
        let watched: Arc<dyn ticker::Watched> = shared.clone();
        ticker::register(Arc::downgrade(&watched));
        NatsLink { shared }
    }
}

fn noop_cx() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

impl LinkShared {
    /// Publishes one message if the client takes it now (`Ok`, with the
    /// outcome); else returns the publish, boxed and polled once with `cx`
    /// (so the caller is woken when the client has room), to finish later.
    /// The common case allocates nothing: the publish is polled on the
    /// stack, and only a full client's gets a box. Dropping a publish that
    /// waits for room sends nothing (async-nats hands the message to its
    /// bounded channel only once there is room), so the boxed one is the
    /// only copy that can go out.
    ///
    /// The publish is `unconstrained`: it waits only for room in the
    /// client, never for the calling task's cooperative budget. A task that
    /// had just taken many items off a channel would otherwise see its
    /// write refused with room to spare, left pending with a no-op waker
    /// (`try_write`) until the connection's flusher runs, which on a
    /// current-thread runtime idle outside `block_on` is never; and a
    /// pending DATA holds back this link's HEARTBEATs, so the peer would
    /// break the link after 600 ms of silence.
    fn start(&self, cx: &mut Context<'_>, payload: Bytes) -> Result<Result<(), async_nats::PublishError>, Publish> {
        {
            let f = std::pin::pin!(tokio::task::unconstrained(self.client.publish(self.to.clone(), payload.clone())));
            if let Poll::Ready(r) = f.poll(cx) {
                return Ok(r);
            }
        }
        let (client, to) = (self.client.clone(), self.to.clone());
        let mut f: Publish = Box::pin(tokio::task::unconstrained(async move { client.publish(to, payload).await }));
        match f.as_mut().poll(cx) {
            Poll::Ready(r) => Ok(r),
            Poll::Pending => Err(f),
        }
    }

    fn write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let mut tx = self.tx.lock().unwrap();
        if tx.closed || tx.ended {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, format!("{}: link closed", self.label))));
        }
        // A message the client could not take: the caller retries with the
        // same bytes first, which that message already carries.
        if let Some((f, n)) = tx.pending.as_mut() {
            let n = *n;
            return match f.as_mut().poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(r) => {
                    tx.pending = None;
                    Poll::Ready(r.map(|_| n).map_err(|e| self.publish_error(e)))
                }
            };
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let n = total.min(self.max_data);
        if n == 0 {
            return Poll::Ready(Ok(0));
        }
        let mut msg = BytesMut::with_capacity(HEADER_LEN + n);
        msg.put_u8(MsgKind::Data as u8);
        msg.put_u32_le(tx.seq);
        for b in bufs {
            let take = b.len().min(HEADER_LEN + n - msg.len());
            msg.put_slice(&b[..take]);
            if msg.len() == HEADER_LEN + n {
                break;
            }
        }
        tx.seq = tx.seq.wrapping_add(1);
        self.last_sent.store(ticker::now_ms(), Ordering::Relaxed);
        match self.start(cx, msg.freeze()) {
            Ok(r) => Poll::Ready(r.map(|_| n).map_err(|e| self.publish_error(e))),
            Err(f) => {
                tx.pending = Some((f, n));
                Poll::Pending
            }
        }
    }

    fn publish_error(&self, e: async_nats::PublishError) -> io::Error {
        io::Error::new(io::ErrorKind::BrokenPipe, format!("{}: publish failed: {e}", self.label))
    }

    /// Sends a message without data (HEARTBEAT, END, CLOSE) if the client
    /// takes it now. A pending DATA goes first: a HEARTBEAT is then not
    /// needed, and END or CLOSE wait for it in a task.
    pub(super) fn control(&self, kind: MsgKind) {
        let mut tx = self.tx.lock().unwrap();
        if tx.closed || (kind == MsgKind::Heartbeat && tx.pending.is_some()) {
            return;
        }
        match kind {
            MsgKind::End if tx.ended => return,
            MsgKind::End => tx.ended = true,
            MsgKind::Close => tx.closed = true,
            _ => {}
        }
        let payload = wire::encode(kind, tx.seq, &[]);
        if let Some((pending, _)) = tx.pending.take() {
            // Finish the DATA, then send this, in order.
            tx.seq = tx.seq.wrapping_add(1);
            let (client, to) = (self.client.clone(), self.to.clone());
            spawn(async move {
                let _ = pending.await;
                let _ = client.publish(to, payload).await;
            });
            return;
        }
        match self.start(&mut noop_cx(), payload) {
            Ok(_) => {
                tx.seq = tx.seq.wrapping_add(1);
                self.last_sent.store(ticker::now_ms(), Ordering::Relaxed);
            }
            // The client is full. A HEARTBEAT is dropped unsent (its number
            // is not used); END and CLOSE finish in a task.
            Err(_) if kind == MsgKind::Heartbeat => {}
            Err(f) => {
                tx.seq = tx.seq.wrapping_add(1);
                spawn(async move {
                    let _ = f.await;
                });
            }
        }
    }

    /// Reads what is there; `waits` says whether `cx` is a real task's
    /// (poll) or a no-op one (try: WouldBlock instead of Pending).
    fn read(self: &Arc<Self>, cx: &mut Context<'_>, waits: bool, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
        let mut rx = self.rx.lock().unwrap();
        // Bytes put in `buf` by this read. While room remains it goes on
        // with the messages that have already arrived, so a burst of small
        // messages (a stream's items) costs one read, not one per message;
        // whatever would end the read (nothing more yet, END, a break) then
        // returns these bytes first and is met again by the next read.
        let mut got = 0;
        loop {
            if !rx.leftover.is_empty() {
                let n = rx.leftover.len().min(buf.capacity() - buf.len());
                buf.put_slice(&rx.leftover.split_to(n));
                got += n;
                if buf.len() == buf.capacity() {
                    return Poll::Ready(Ok(got));
                }
                continue;
            }
            if got > 0 && (rx.broken.is_some() || rx.eof) {
                return Poll::Ready(Ok(got));
            }
            if let Some(why) = &rx.broken {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionAborted, why.clone())));
            }
            if rx.eof {
                return Poll::Ready(Ok(0));
            }
            let why = if self.silent.load(Ordering::Relaxed) {
                format!("nats link: peer silent for {} ms", ticker::DEAD_AFTER_MS)
            } else {
                let next = match rx.peeked.take() {
                    Some(msg) => Poll::Ready(Some(msg)),
                    None => match rx.sub.as_mut() {
                        Some(sub) => Pin::new(sub).poll_next(cx),
                        None => {
                            rx.eof = true;
                            continue;
                        }
                    },
                };
                match next {
                    Poll::Ready(Some(msg)) => {
                        self.last_recv.store(ticker::now_ms(), Ordering::Relaxed);
                        match self.take(&mut rx, &msg.payload) {
                            Ok(()) => continue,
                            Err(why) => why,
                        }
                    }
                    Poll::Ready(None) => format!("{}: the NATS connection is closed", self.label),
                    Poll::Pending if got > 0 => return Poll::Ready(Ok(got)),
                    Poll::Pending if waits => {
                        *self.reader.lock().unwrap() = Some(cx.waker().clone());
                        // The ticker may have marked the link silent before
                        // the waker was stored.
                        if self.silent.load(Ordering::Relaxed) {
                            continue;
                        }
                        return Poll::Pending;
                    }
                    Poll::Pending => return Poll::Ready(Err(io::ErrorKind::WouldBlock.into())),
                }
            };
            // Broken: never read past it; tell the peer and let go (§13.4).
            rx.broken = Some(why);
            rx.sub = None;
            drop(rx);
            self.control(MsgKind::Close);
            rx = self.rx.lock().unwrap();
        }
    }

    /// Applies one received message to the read state, or says why it
    /// breaks the link.
    fn take(&self, rx: &mut Rx, payload: &Bytes) -> Result<(), String> {
        let (kind, seq, data) = wire::decode(payload)?;
        rx.seq.accept(seq)?;
        match kind {
            MsgKind::Data if rx.eof => return Err("nats link: DATA after END".into()),
            MsgKind::Data => rx.leftover = data,
            MsgKind::Heartbeat => {}
            MsgKind::End => rx.eof = true,
            MsgKind::Close => {
                // The peer is gone: end of stream, and our writes fail.
                rx.eof = true;
                rx.sub = None;
                self.tx.lock().unwrap().closed = true;
            }
        }
        Ok(())
    }
}

impl ticker::Watched for LinkShared {
    fn last_recv(&self) -> u64 {
        self.last_recv.load(Ordering::Relaxed)
    }

    fn last_sent(&self) -> u64 {
        self.last_sent.load(Ordering::Relaxed)
    }

    fn heartbeat(&self) {
        self.control(MsgKind::Heartbeat);
    }

    /// Marks the link silent and wakes its reader, which breaks it —
    /// unless messages wait unread (we are the slow one, not the peer):
    /// then one is taken off the subscription to show it.
    fn mark_silent(&self) {
        {
            let mut rx = self.rx.lock().unwrap();
            if rx.peeked.is_some() {
                self.last_recv.store(ticker::now_ms(), Ordering::Relaxed);
                return;
            }
            if let Some(sub) = rx.sub.as_mut() {
                if let Poll::Ready(Some(msg)) = Pin::new(sub).poll_next(&mut noop_cx()) {
                    rx.peeked = Some(msg);
                    self.last_recv.store(ticker::now_ms(), Ordering::Relaxed);
                    return;
                }
            }
        }
        self.silent.store(true, Ordering::Relaxed);
        if let Some(w) = self.reader.lock().unwrap().take() {
            w.wake();
        }
    }

    fn forgive(&self, ms: u64, now: u64) {
        let _ = self.last_recv.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| Some(ticker::forgiven(t, ms, now)));
    }

    fn is_live(&self) -> bool {
        !self.tx.lock().unwrap().closed
    }
}

/// Runs `f` on the current tokio runtime, if there is one (a link dropped
/// outside a runtime leaves its peer to notice the silence).
fn spawn(f: impl Future<Output = ()> + Send + 'static) {
    if let Ok(h) = tokio::runtime::Handle::try_current() {
        h.spawn(f);
    }
}

impl Transport for NatsLink {
    fn try_read(&self, buf: &mut BytesMut) -> io::Result<usize> {
        match self.shared.read(&mut noop_cx(), false, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
        self.shared.read(cx, true, buf)
    }

    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self.shared.write(&mut noop_cx(), bufs) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn poll_write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        self.shared.write(cx, bufs)
    }

    fn shutdown(&self) {
        self.shared.control(MsgKind::Close);
        let mut rx = self.shared.rx.lock().unwrap();
        rx.sub = None;
        rx.eof = true;
    }

    fn shutdown_write(&self) {
        self.shared.control(MsgKind::End);
    }

    fn describe(&self) -> String {
        self.shared.label.clone()
    }

    /// A write is a NATS message: 1 KiB ITEMs sent one publish each cost
    /// the publisher's client, the server and the receiver's client a
    /// message each, which a burst sent as one DATA saves (§13.4).
    fn batches_items(&self) -> bool {
        true
    }
}

impl Drop for NatsLink {
    fn drop(&mut self) {
        self.shutdown();
    }
}
