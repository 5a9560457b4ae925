//! Relaying: serving a call by passing it on to another connection,
//! payloads untouched. This is what the hub is made of: its registry is a
//! [`Service`](crate::Service) whose `call` picks a provider's connection
//! and hands the call, as a [`Routed`], to [`Routed::forward`].
//!
//! Nothing is decoded on the way: payloads keep their codec, items flow
//! under each hop's own credit (so a slow consumer slows the producer end
//! to end, with at most a window buffered per hop), and dropping the
//! routed call's future (the caller cancelled, or its deadline passed)
//! drops the onward call, which sends CANCEL to the provider.

use std::future::Future;
use std::time::Duration;

use hubwire_frame::Kind;

use crate::client::CallOptions;
use crate::codec::Payload;
use crate::connection::Connection;
use crate::context::CallContext;
use crate::engine::Incoming;
use crate::errors::{Code, Error};
use crate::stream::{ItemSink, ItemStream};

/// One call on its way elsewhere, its streams as payloads.
pub struct Routed {
    /// The call's context: method, deadline, cancellation, caller.
    pub ctx: CallContext,
    /// The kind the caller asked for.
    pub kind: Kind,
    /// The REQUEST payload, as it arrived.
    pub input: Payload,
    /// The caller's items (client_stream, bidi).
    pub items: Option<ItemStream<Payload>>,
    /// Items already taken off `items` (the hub takes those that arrive
    /// while a call waits in its queue, to count them): sent on first.
    pub held: Vec<Payload>,
    /// Where our items to the caller go (server_stream, bidi).
    pub sink: Option<ItemSink<Payload>>,
}

impl Routed {
    /// A call handed to a service, ready to be passed on.
    pub fn new(mut call: Incoming) -> Routed {
        let (items, sink) = (call.take_items(), call.take_sink());
        Routed { ctx: call.context(), kind: call.kind(), input: call.input, items, held: Vec::new(), sink }
    }

    /// Passes the call on to `conn` and relays everything back: items both
    /// ways, the end of the inputs, and the answer. `opts` should carry
    /// what is left of the caller's deadline (see [`Routed::remaining`]).
    pub async fn forward(self, conn: &Connection, opts: &CallOptions) -> Result<Option<Payload>, Error> {
        self.forward_watched(conn, opts, &|| {}).await
    }

    /// [`Routed::forward`], calling `progress` whenever the onward call
    /// moves: an item from the callee relayed back, or one of ours taken
    /// by it (sending waits for its credit). The hub uses it to tell a
    /// busy replica from a hung one.
    pub async fn forward_watched(
        self,
        conn: &Connection,
        opts: &CallOptions,
        progress: &(dyn Fn() + Sync),
    ) -> Result<Option<Payload>, Error> {
        let Routed { ctx, kind, input, items, held, sink } = self;
        if kind == Kind::Unary {
            return conn.call_payload(ctx.method(), input, opts).await.map(Some);
        }
        let mut call = conn.call_any(ctx.method(), kind, input, opts).await?;
        let inputs = relay_inputs(held, items, call.sink.take(), progress);
        match (call.items.take(), sink) {
            // client_stream: inputs go up until the answer comes (a callee
            // may answer before the caller's END).
            (None, _) => alongside(inputs, call.response()).await.map(Some),
            // server_stream and bidi: the end of the outputs is the answer.
            (Some(outputs), Some(sink)) => alongside(inputs, relay_outputs(outputs, sink, progress)).await.map(|()| None),
            (Some(_), None) => Err(Error::new(Code::Internal, "routed stream call without a sink for its outputs")),
        }
    }

    /// What is left of the caller's deadline, as options for the onward
    /// call (`None` when the caller set none). A deadline already past is
    /// 1 ns, not zero, which would mean none.
    pub fn remaining(&self) -> CallOptions {
        let now = tokio::time::Instant::now();
        let timeout = self.ctx.deadline().map(|d| d.saturating_duration_since(now).max(Duration::from_nanos(1)));
        CallOptions { timeout, codec: None }
    }
}

/// Runs `inputs` beside `answer` until `answer` completes; an error
/// relaying the inputs ends the call early.
async fn alongside<T>(inputs: impl Future<Output = Result<(), Error>>, answer: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
    tokio::pin!(inputs, answer);
    let mut inputs_done = false;
    loop {
        tokio::select! {
            r = &mut answer => return r,
            r = &mut inputs, if !inputs_done => {
                r?;
                inputs_done = true;
            }
        }
    }
}

/// Caller's items (`held` first) → the onward call, then END. Once the onward call has
/// ended (it answered early: sending says `cancelled`), its answer says
/// how the call ended, so this just stops; any other failure to send (an
/// item over the callee's limit, the deadline) ends the call with it.
async fn relay_inputs(
    held: Vec<Payload>,
    items: Option<ItemStream<Payload>>,
    up: Option<ItemSink<Payload>>,
    progress: &(dyn Fn() + Sync),
) -> Result<(), Error> {
    let (Some(mut items), Some(up)) = (items, up) else { return Ok(()) };
    let mut held = held.into_iter();
    loop {
        let p = match held.next() {
            Some(p) => p,
            None => match items.next().await? {
                Some(p) => p,
                None => break,
            },
        };
        if let Err(e) = up.send(&p).await {
            return if e.code() == Code::Cancelled { Ok(()) } else { Err(e) };
        }
        progress();
    }
    let _ = up.end();
    Ok(())
}

/// The onward call's items → the caller, until the onward call ends.
async fn relay_outputs(mut outputs: ItemStream<Payload>, sink: ItemSink<Payload>, progress: &(dyn Fn() + Sync)) -> Result<(), Error> {
    while let Some(p) = outputs.next().await? {
        progress();
        sink.send(&p).await?;
    }
    Ok(())
}
