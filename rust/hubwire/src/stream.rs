//! Streams of items, both directions, both roles: [`Items`] receives and
//! grants credit as the application consumes; [`ItemSink`] sends and waits
//! for credit (`spec/PROTOCOL.md` §8). The same two types serve a caller's
//! streams and a handler's, so flow control is written once.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use hubwire_frame::{Codec, Frame};
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

use crate::calls::Event;
use crate::codec::Message;
use crate::connection::{Connection, Inner};
use crate::{Code, Error};

/// Credit this side granted for a stream it receives.
pub(crate) struct RecvWindow {
    remaining: AtomicU32,
    consumed: AtomicU32,
    batch: u32,
}

impl RecvWindow {
    pub(crate) fn new(window: u32) -> Arc<RecvWindow> {
        Arc::new(RecvWindow { remaining: AtomicU32::new(window), consumed: AtomicU32::new(0), batch: (window / 2).max(1) })
    }

    /// An ITEM arrived: uses one credit; false if none was left.
    pub(crate) fn on_item(&self) -> bool {
        self.remaining.fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| r.checked_sub(1)).is_ok()
    }

    /// The application took one item: grants credit back in batches.
    fn consumed(&self, inner: &Inner, id: u32) {
        let c = self.consumed.fetch_add(1, Ordering::AcqRel) + 1;
        if c >= self.batch {
            self.consumed.fetch_sub(c, Ordering::AcqRel);
            // Credit first, then tell the peer, so the reader never sees
            // the peer use credit it has not been counted for.
            self.remaining.fetch_add(c, Ordering::AcqRel);
            let _ = inner.send(&Frame::Credit { call_id: id, credit: c });
        }
    }
}

/// Cancels a call this side started when the last handle to it is dropped
/// before it finished.
pub(crate) struct CallGuard {
    pub(crate) conn: Connection,
    pub(crate) id: u32,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.conn.inner().cancel_out(self.id);
    }
}

/// The parts of a stream the connection builds before the typed wrapper.
pub(crate) struct StreamIn {
    pub(crate) rx: mpsc::UnboundedReceiver<Event>,
    pub(crate) window: Arc<RecvWindow>,
}

/// A stream of incoming items of type `T`.
pub struct Items<T> {
    inner: Arc<Inner>,
    id: u32,
    rx: mpsc::UnboundedReceiver<Event>,
    window: Arc<RecvWindow>,
    deadline: Option<Instant>,
    /// `invalid_argument` in a handler, `internal` in a caller.
    decode_code: Code,
    done: bool,
    guard: Option<Arc<CallGuard>>,
    _t: PhantomData<fn() -> T>,
}

impl<T: Message> Items<T> {
    pub(crate) fn new(
        inner: Arc<Inner>,
        id: u32,
        parts: StreamIn,
        deadline: Option<Instant>,
        decode_code: Code,
        guard: Option<Arc<CallGuard>>,
    ) -> Items<T> {
        Items { inner, id, rx: parts.rx, window: parts.window, deadline, decode_code, done: false, guard, _t: PhantomData }
    }

    /// The next item; `Ok(None)` when the stream ended normally, `Err` with
    /// the call's status when it did not.
    pub async fn next(&mut self) -> Result<Option<T>, Error> {
        if self.done {
            return Ok(None);
        }
        let event = match self.deadline {
            None => self.rx.recv().await,
            Some(d) => match tokio::time::timeout_at(d, self.rx.recv()).await {
                Ok(e) => e,
                Err(_) => {
                    self.done = true;
                    if self.guard.is_some() {
                        self.inner.cancel_out(self.id);
                    }
                    return Err(Error::new(Code::DeadlineExceeded, "deadline exceeded while waiting for the next item"));
                }
            },
        };
        match event {
            Some(Event::Item(p)) => {
                self.window.consumed(&self.inner, self.id);
                T::decode(p).map(Some).map_err(|m| Error::new(self.decode_code, format!("cannot decode item: {m}")))
            }
            Some(Event::End(Ok(_))) => {
                self.done = true;
                Ok(None)
            }
            Some(Event::End(Err(e))) => {
                self.done = true;
                Err(e)
            }
            None => {
                self.done = true;
                Err(Error::cancelled("the stream was closed before it ended"))
            }
        }
    }

    /// Reads the rest of the stream into a vector.
    pub async fn collect(mut self) -> Result<Vec<T>, Error> {
        let mut v = Vec::new();
        while let Some(x) = self.next().await? {
            v.push(x);
        }
        Ok(v)
    }
}

/// Sends items of type `T` on a stream, within the peer's credit.
pub struct ItemSink<T> {
    inner: Arc<Inner>,
    id: u32,
    codec: Codec,
    credit: Arc<Semaphore>,
    deadline: Option<Instant>,
    /// Set for a caller's sink: it sends END on `finish`.
    guard: Option<Arc<CallGuard>>,
    _t: PhantomData<fn(T)>,
}

impl<T: Message> ItemSink<T> {
    pub(crate) fn new(
        inner: Arc<Inner>,
        id: u32,
        codec: Codec,
        credit: Arc<Semaphore>,
        deadline: Option<Instant>,
        guard: Option<Arc<CallGuard>>,
    ) -> ItemSink<T> {
        ItemSink { inner, id, codec: T::codec_for(codec), credit, deadline, guard, _t: PhantomData }
    }

    /// Sends one item, waiting for credit if the receiver is behind.
    pub async fn send(&self, item: &T) -> Result<(), Error> {
        let codec = item.codec_of().unwrap_or(self.codec);
        let bytes = item.encode(codec).map_err(|e| Error::new(self.encode_code(), format!("cannot encode item: {e}")))?;
        self.send_bytes(codec, bytes).await
    }

    async fn send_bytes(&self, codec: Codec, bytes: Bytes) -> Result<(), Error> {
        if let Err(e) = self.inner.check_size(bytes.len(), "item") {
            if self.guard.is_some() {
                self.inner.cancel_out(self.id);
            }
            return Err(e);
        }
        let acquire = self.credit.acquire();
        let permit = match self.deadline {
            None => acquire.await,
            Some(d) => match tokio::time::timeout_at(d, acquire).await {
                Ok(p) => p,
                Err(_) => {
                    // The call is over for the caller: tell the callee.
                    if self.guard.is_some() {
                        self.inner.cancel_out(self.id);
                    }
                    return Err(Error::new(Code::DeadlineExceeded, "deadline exceeded while waiting for credit"));
                }
            },
        };
        match permit {
            Ok(p) => p.forget(),
            Err(_) => return Err(Error::cancelled("the call has ended; no more items can be sent")),
        }
        self.inner.writer.ready().await;
        self.inner.send_item(self.id, codec, &bytes)
    }

    /// A caller's sink: no more items (sends END). The call goes on until
    /// the callee answers.
    pub fn finish(&self) -> Result<(), Error> {
        if self.credit.is_closed() {
            return Ok(());
        }
        self.credit.close();
        self.inner.send(&Frame::End { call_id: self.id })
    }

    fn encode_code(&self) -> Code {
        if self.guard.is_some() {
            Code::InvalidArgument
        } else {
            Code::Defect
        }
    }
}
