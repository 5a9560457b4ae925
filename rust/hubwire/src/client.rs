//! Calling a peer's methods: unary (typed or raw), server streams, client
//! streams and bidirectional streams. Dropping a call's future or handles
//! before it finishes cancels it (the peer receives CANCEL).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hubwire_frame::Kind;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::codec::{Codec, Message, Payload};
use crate::connection::Connection;
use crate::direct::routed;
use crate::engine::{self, Answer, Core, StreamIn};
use crate::errors::{Code, Error};
use crate::stream::{CallGuard, ItemSink, ItemStream};

/// Per-call options.
#[derive(Clone, Debug, Default)]
pub struct CallOptions {
    /// Fail with `deadline_exceeded` after this long; sent to the callee.
    /// Zero is no deadline, as `timeout_ms = 0` is on the wire.
    pub timeout: Option<Duration>,
    /// The codec for structured payloads (MessagePack unless set).
    pub codec: Option<Codec>,
}

impl CallOptions {
    /// No deadline, MessagePack.
    pub fn new() -> CallOptions {
        CallOptions::default()
    }

    /// Sets the deadline, relative to now (zero: none, as on the wire).
    pub fn timeout(mut self, t: Duration) -> CallOptions {
        self.timeout = Some(t);
        self
    }

    /// Sets the codec for structured payloads.
    pub fn codec(mut self, c: Codec) -> CallOptions {
        self.codec = Some(c);
        self
    }
}

/// A call of any kind started by [`Connection::call_any`].
pub struct AnyCall {
    /// Where the caller's items go (client_stream, bidi); `end` sends END.
    pub sink: Option<ItemSink<Payload>>,
    /// The callee's items (server_stream, bidi); the stream's end is the
    /// call's end.
    pub items: Option<ItemStream<Payload>>,
    once: Option<Answer<Arc<Core>>>,
    started: Started,
}

impl AnyCall {
    /// The single response of a unary or client_stream call. For the
    /// streaming-out kinds the end of [`AnyCall::items`] is the answer, and
    /// this fails with `internal`.
    pub async fn response(self) -> Result<Payload, Error> {
        let AnyCall { sink, once, started, .. } = self;
        let Some(mut rx) = once else {
            return Err(Error::new(Code::Internal, "this call kind answers through its item stream"));
        };
        let r = wait(&mut rx, &started).await;
        drop(sink);
        r
    }
}

/// A call in flight, between registration and its end: dropping the last
/// handle to it before the end sends CANCEL.
struct Started {
    guard: Arc<CallGuard>,
    call: engine::Started,
}

/// A client stream: send inputs, then `finish` for the single output.
pub struct ClientStream<I, O> {
    sink: ItemSink<I>,
    /// The answer (locked only for a failed `send`'s look at it).
    rx: std::sync::Mutex<Answer<Arc<Core>>>,
    /// The answer, once a failed `send` has taken it off `rx` early.
    early: std::sync::Mutex<Option<Result<Payload, Error>>>,
    started: Started,
    _o: std::marker::PhantomData<fn() -> O>,
}

impl<I: Message, O: Message> ClientStream<I, O> {
    /// Sends one input. Fails once the call has ended, which includes the
    /// callee answering early: with the callee's error if it answered with
    /// one (e.g. `resource_exhausted`), else `cancelled`; `finish` or
    /// `response` then says how it ended.
    pub async fn send(&self, item: &I) -> Result<(), Error> {
        let e = match self.sink.send(item).await {
            Ok(()) => return Ok(()),
            Err(e) if e.code() == Code::Cancelled => e,
            Err(e) => return Err(e),
        };
        let mut early = self.early.lock().unwrap();
        if early.is_none() {
            // The engine delivers the answer before it closes the credit
            // the failed send waited on: if there is one, it is there now.
            *early = self.rx.lock().unwrap().try_take();
        }
        match &*early {
            Some(Err(answer)) => Err(answer.clone()),
            _ => Err(e),
        }
    }

    /// Ends the inputs (END) and waits for the output.
    pub async fn finish(self) -> Result<O, Error> {
        let _ = self.sink.end();
        self.response().await
    }

    /// Waits for the output without ending the inputs: for methods that
    /// answer before the caller's END (`spec/PROTOCOL.md` §5.3).
    pub async fn response(self) -> Result<O, Error> {
        let ClientStream { sink, rx, early, started, .. } = self;
        let p = match early.into_inner().unwrap() {
            Some(answer) => answer,
            None => wait(&mut rx.into_inner().unwrap(), &started).await,
        };
        drop(sink);
        decode_output(p?)
    }
}

impl Connection {
    /// A unary call with typed input and output, MessagePack on the wire.
    pub async fn call<I: Message, O: Message>(&self, method: &str, input: &I) -> Result<O, Error> {
        self.call_with(method, input, &CallOptions::default()).await
    }

    /// A unary call with options.
    pub async fn call_with<I: Message, O: Message>(&self, method: &str, input: &I, opts: &CallOptions) -> Result<O, Error> {
        let codec = I::codec_for(opts.codec.unwrap_or(Codec::Msgpack));
        let bytes = input.encode(codec).map_err(|e| Error::invalid_argument(format!("cannot encode input: {e}")))?;
        let p = self.call_payload(method, Payload { codec, bytes }, opts).await?;
        decode_output(p)
    }

    /// A unary call with raw bytes in and out: no serialization at all.
    pub async fn call_raw(&self, method: &str, input: Bytes) -> Result<Bytes, Error> {
        let p = self.call_payload(method, Payload { codec: Codec::Raw, bytes: input }, &CallOptions::default()).await?;
        Ok(p.bytes)
    }

    /// A unary call with a payload as it goes on the wire (for routers that
    /// do not decode, like the hub).
    pub async fn call_payload(&self, method: &str, input: Payload, opts: &CallOptions) -> Result<Payload, Error> {
        routed!(self, method, |c| c.call_payload_on(method, input.clone(), opts))
    }

    async fn call_payload_on(&self, method: &str, input: Payload, opts: &CallOptions) -> Result<Payload, Error> {
        let core = self.core();
        let call = core.begin(method, Kind::Unary, &input, opts.timeout, None, None, None).await?;
        let slot = call.slot.expect("a unary call answers once");
        // `begin` registered this task's waker in the slot, in this poll.
        let mut answer = Answer::new(core, slot, true);
        // A unary call has one handle, this future: it needs no shared
        // guard (an allocation and a Connection clone per call), and once
        // the answer is in, the reader has already taken the call out of
        // the table, so there is nothing to cancel (no second lock).
        let mut pending = Pending { core, id: call.id, answered: false };
        if call.alone {
            if call.sequential && core.low_latency {
                // One call after the other, low-latency: read the answer on
                // this task if the reader is free (`engine/own_read.rs`).
                answer.read_own_first();
            } else {
                core.kick();
            }
        }
        let r = wait_for(&mut answer, call.deadline).await;
        // Only a local deadline leaves the call in the table (a peer's
        // `deadline_exceeded` took it out too: cancelling it is a no-op).
        pending.answered = !matches!(&r, Err(e) if e.code() == Code::DeadlineExceeded);
        r
    }

    /// Calls a server-streaming method: one input, a stream of outputs.
    pub async fn server_stream<I: Message, O: Message>(&self, method: &str, input: &I, opts: &CallOptions) -> Result<ItemStream<O>, Error> {
        routed!(self, method, |c| c.server_stream_on(method, input, opts))
    }

    async fn server_stream_on<I: Message, O: Message>(&self, method: &str, input: &I, opts: &CallOptions) -> Result<ItemStream<O>, Error> {
        let codec = I::codec_for(opts.codec.unwrap_or(Codec::Msgpack));
        let bytes = input.encode(codec).map_err(|e| Error::invalid_argument(format!("cannot encode input: {e}")))?;
        let (tx, stream) = StreamIn::new(self.core().local.window, self.core().backlog.clone());
        let window = Some(stream.window.clone());
        let started = self.begin(method, Kind::ServerStream, &Payload { codec, bytes }, opts, Some(tx), None, window).await?;
        Ok(self.items(stream, &started))
    }

    /// Calls a client-streaming method.
    pub async fn client_stream<I: Message, O: Message>(&self, method: &str, opts: &CallOptions) -> Result<ClientStream<I, O>, Error> {
        routed!(self, method, |c| c.client_stream_on(method, opts))
    }

    async fn client_stream_on<I: Message, O: Message>(&self, method: &str, opts: &CallOptions) -> Result<ClientStream<I, O>, Error> {
        let credit = Arc::new(Semaphore::new(self.peer().window as usize));
        let started = self.begin(method, Kind::ClientStream, &empty(opts), opts, None, Some(credit.clone()), None).await?;
        let rx = self.answer(&started);
        let sink = self.sink(opts, credit, &started);
        Ok(ClientStream { sink, rx: std::sync::Mutex::new(rx), early: std::sync::Mutex::new(None), started, _o: std::marker::PhantomData })
    }

    /// Calls a bidirectional method: a sink for inputs (call `end` when
    /// done) and a stream of outputs.
    pub async fn bidi<I: Message, O: Message>(&self, method: &str, opts: &CallOptions) -> Result<(ItemSink<I>, ItemStream<O>), Error> {
        routed!(self, method, |c| c.bidi_on(method, opts))
    }

    async fn bidi_on<I: Message, O: Message>(&self, method: &str, opts: &CallOptions) -> Result<(ItemSink<I>, ItemStream<O>), Error> {
        let (tx, stream) = StreamIn::new(self.core().local.window, self.core().backlog.clone());
        let credit = Arc::new(Semaphore::new(self.peer().window as usize));
        let window = Some(stream.window.clone());
        let started = self.begin(method, Kind::Bidi, &empty(opts), opts, Some(tx), Some(credit.clone()), window).await?;
        Ok((self.sink(opts, credit, &started), self.items(stream, &started)))
    }

    /// A call of any kind with payloads as they travel, for routers: the
    /// input stream (client_stream, bidi), the output stream
    /// (server_stream, bidi), and for unary and client_stream the single
    /// response. Dropping every part before the end cancels the call.
    pub async fn call_any(&self, method: &str, kind: Kind, input: Payload, opts: &CallOptions) -> Result<AnyCall, Error> {
        routed!(self, method, |c| c.call_any_on(method, kind, input.clone(), opts))
    }

    async fn call_any_on(&self, method: &str, kind: Kind, input: Payload, opts: &CallOptions) -> Result<AnyCall, Error> {
        let credit = kind.streams_in().then(|| Arc::new(Semaphore::new(self.peer().window as usize)));
        let (out, stream) = match kind.streams_out() {
            true => {
                let (tx, stream) = StreamIn::new(self.core().local.window, self.core().backlog.clone());
                (Some(tx), Some(stream))
            }
            false => (None, None),
        };
        let window = stream.as_ref().map(|s| s.window.clone());
        let started = self.begin(method, kind, &input, opts, out, credit.clone(), window).await?;
        let once = started.call.slot.is_some().then(|| self.answer(&started));
        let codec = Some(input.codec);
        let sink = credit.map(|c| self.sink(&CallOptions { codec, ..opts.clone() }, c, &started));
        let items = stream.map(|s| self.items(s, &started));
        Ok(AnyCall { sink, items, once, started })
    }

    /// The answer of a call that answers once, waited for later (and
    /// perhaps by another task than the one that began it).
    fn answer(&self, s: &Started) -> Answer<Arc<Core>> {
        Answer::new(self.core().clone(), s.call.slot.expect("a call that answers once"), false)
    }

    fn items<O: Message>(&self, stream: StreamIn, s: &Started) -> ItemStream<O> {
        ItemStream::new(self.core().clone(), s.call.id, stream, s.call.deadline, Code::Internal, Some(s.guard.clone()))
    }

    fn sink<I: Message>(&self, opts: &CallOptions, credit: Arc<Semaphore>, s: &Started) -> ItemSink<I> {
        let codec = opts.codec.unwrap_or(Codec::Msgpack);
        ItemSink::new(self.core().clone(), s.call.id, codec, credit, s.call.deadline, Some(s.guard.clone()))
    }

    /// Starts a call in the engine; the guard cancels it if every handle
    /// is dropped before its end.
    #[allow(clippy::too_many_arguments)]
    async fn begin(
        &self,
        method: &str,
        kind: Kind,
        input: &Payload,
        opts: &CallOptions,
        stream: Option<engine::InboxTx<engine::Event>>,
        send_credit: Option<Arc<Semaphore>>,
        recv: Option<Arc<engine::RecvWindow>>,
    ) -> Result<Started, Error> {
        let call = self.core().begin(method, kind, input, opts.timeout, stream, send_credit, recv).await?;
        if call.alone {
            self.core().kick();
        }
        let guard = Arc::new(CallGuard { conn: self.clone(), id: call.id });
        Ok(Started { guard, call })
    }
}

fn empty(opts: &CallOptions) -> Payload {
    Payload { codec: opts.codec.unwrap_or(Codec::Msgpack), bytes: Bytes::new() }
}

/// Waits for a RESPONSE, honouring the deadline. On the deadline, the
/// guard's drop sends CANCEL.
async fn wait(rx: &mut Answer<Arc<Core>>, s: &Started) -> Result<Payload, Error> {
    wait_for(rx, s.call.deadline).await
}

/// Waits for the outcome in `rx` until `deadline`. Every path that takes
/// a call out of the table delivers an outcome to it (`CallTable::settle`).
async fn wait_for<P: std::borrow::Borrow<Arc<Core>>>(rx: &mut Answer<P>, deadline: Option<Instant>) -> Result<Payload, Error> {
    match deadline {
        None => rx.recv().await,
        Some(d) => match tokio::time::timeout_at(d, rx.recv()).await {
            Ok(r) => r,
            Err(_) => Err(Error::new(Code::DeadlineExceeded, "deadline exceeded waiting for the response")),
        },
    }
}

/// A unary call between its REQUEST and its outcome: dropped before the
/// outcome (the caller's future was dropped, or its deadline passed), it
/// sends CANCEL.
struct Pending<'a> {
    core: &'a Core,
    id: u32,
    /// The outcome came from the reader, which took the call out of the
    /// table: nothing to cancel.
    answered: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.core.cancel_out(self.id, Error::cancelled("the call was cancelled"));
        }
    }
}

fn decode_output<O: Message>(p: Payload) -> Result<O, Error> {
    O::decode(p).map_err(|m| Error::new(Code::Internal, format!("cannot decode the response: {m}")))
}

#[cfg(test)]
mod tests {
    use crate::{CallOptions, Code, Error, ItemStream, Provider};

    #[tokio::test(flavor = "current_thread")]
    async fn a_send_after_the_callee_refused_the_call_reports_its_error() {
        let refuse = Provider::new("s").client_stream("sum", |_ctx, _items: ItemStream<u32>| async move {
            Err::<u32, _>(Error::new(Code::ResourceExhausted, "queue full"))
        });
        let p = crate::testing::pair(refuse).await;
        let s = p.client.client_stream::<u32, u32>("sum", &CallOptions::new()).await.unwrap();
        let mut sent = 0;
        let e = loop {
            match s.send(&sent).await {
                Ok(()) => sent += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
        assert_eq!(s.finish().await.unwrap_err().code(), Code::ResourceExhausted, "finish says the same");
    }
}
