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
        // Another item in hand: this one may wait for it, so that a run
        // leaves in a few writes (the onward connection cannot tell: the
        // run waits on the caller's connection).
        let more = !held.as_slice().is_empty() || items.has_more();
        if let Err(e) = up.send_then(&p, more).await {
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
        sink.send_then(&p, outputs.has_more()).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::{self, IoSlice};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use bytes::{Bytes, BytesMut};
    use hubwire_frame::MethodInfo;

    use super::*;
    use crate::engine::{ConnectionOptions, ServeFuture, Service};
    use crate::transport::{memory, Transport};
    use crate::{Provider, Raw};

    /// A memory transport that counts its writes.
    struct Counted(memory::MemoryTransport, Arc<AtomicUsize>);

    impl Transport for Counted {
        fn try_read(&self, buf: &mut BytesMut) -> io::Result<usize> {
            self.0.try_read(buf)
        }
        fn poll_read(&self, cx: &mut Context<'_>, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
            self.0.poll_read(cx, buf)
        }
        fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let r = self.0.try_write(bufs);
            if r.is_ok() {
                self.1.fetch_add(1, Ordering::Relaxed);
            }
            r
        }
        fn poll_write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
            let r = self.0.poll_write(cx, bufs);
            if let Poll::Ready(Ok(_)) = r {
                self.1.fetch_add(1, Ordering::Relaxed);
            }
            r
        }
        fn shutdown(&self) {
            self.0.shutdown()
        }
        fn shutdown_write(&self) {
            self.0.shutdown_write()
        }
        fn describe(&self) -> String {
            self.0.describe()
        }
    }

    /// Passes every call on to `onward`, as a hub does.
    struct Relay {
        onward: Connection,
        methods: Vec<MethodInfo>,
    }

    impl Service for Relay {
        fn methods(&self) -> Vec<MethodInfo> {
            self.methods.clone()
        }
        fn call(&self, call: Incoming) -> Result<ServeFuture, Error> {
            let onward = self.onward.clone();
            Ok(Box::pin(async move {
                let routed = Routed::new(call);
                let opts = routed.remaining();
                routed.forward(&onward, &opts).await
            }))
        }
    }

    /// A connection to `service` over memory whose two ends count their
    /// writes: (client, server, the client's writes, the server's).
    async fn counted(service: impl Service) -> (Connection, Connection, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        counted_with(service, 64).await
    }

    /// [`counted`], each end granting `window` items of credit.
    async fn counted_with(service: impl Service, window: u32) -> (Connection, Connection, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let (a, b) = memory::pair();
        let (wa, wb) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let dialer = ConnectionOptions::new("client").window(window);
        let acceptor = ConnectionOptions::new("server").window(window).service(service);
        let (c, s) = tokio::join!(Connection::dial(Counted(a, wa.clone()), &dialer), Connection::accept(Counted(b, wb.clone()), &acceptor));
        (c.unwrap(), s.unwrap(), wa, wb)
    }

    /// The provider behind the relay: a server stream of `n` items, and a
    /// client stream that counts its items.
    fn provider() -> Provider {
        Provider::new("p")
            .server_stream("burst", |_ctx, n: u32, sink: ItemSink<Raw>| async move {
                for i in 0..n {
                    sink.send(&Raw(Bytes::from(vec![i as u8; 16]))).await?;
                }
                Ok(())
            })
            .client_stream("count", |_ctx, mut items: ItemStream<Raw>| async move {
                let mut n = 0u32;
                while let Some(Raw(b)) = items.next().await? {
                    assert_eq!(&b[..], &[n as u8; 16][..], "item {n} in order");
                    n += 1;
                }
                Ok(n)
            })
    }

    /// A run of items that reaches the relay together leaves it together,
    /// both ways: the relay sends each with "more to come" while the next
    /// is in hand, where it used to write each item on its own (one
    /// `sendmsg` per item through the hub).
    #[tokio::test(flavor = "current_thread")]
    async fn a_run_of_items_is_relayed_in_few_writes() {
        const N: usize = 48;
        let (onward, _provider, to_provider, _) = counted(provider()).await;
        let relay = Relay { methods: onward.peer().methods.clone(), onward };
        let (client, _relay, _, to_client) = counted(relay).await;

        let before = to_client.load(Ordering::Relaxed);
        let items: Vec<Raw> = client.server_stream("burst", &(N as u32), &CallOptions::default()).await.unwrap().collect().await.unwrap();
        assert_eq!(items.len(), N);
        for (i, Raw(b)) in items.iter().enumerate() {
            assert_eq!(&b[..], &[i as u8; 16][..], "item {i} in order");
        }
        let relayed = to_client.load(Ordering::Relaxed) - before;
        assert!(relayed <= N / 4, "{N} items and the answer left the relay in {relayed} writes");

        let before = to_provider.load(Ordering::Relaxed);
        let up = client.client_stream::<Raw, u32>("count", &CallOptions::default()).await.unwrap();
        for i in 0..N {
            up.send(&Raw(Bytes::from(vec![i as u8; 16]))).await.unwrap();
        }
        assert_eq!(up.finish().await.unwrap(), N as u32);
        let relayed = to_provider.load(Ordering::Relaxed) - before;
        assert!(relayed <= N / 4, "the REQUEST, {N} items and END left the relay in {relayed} writes");
    }

    /// Items left to the flusher while the relay then waits for credit
    /// still go out: with two items of credit on every hop, each run is
    /// two items, the second waiting for credit that comes back only once
    /// the far end has them, both ways. (On one thread, so that each
    /// sender's two items arrive in one read and make a run.)
    #[tokio::test(flavor = "current_thread")]
    async fn relayed_items_left_to_the_flusher_go_out_while_the_relay_waits_for_credit() {
        const N: usize = 200;
        let run = async {
            let (onward, _provider, _, _) = counted_with(provider(), 2).await;
            let relay = Relay { methods: onward.peer().methods.clone(), onward };
            let (client, _relay, _, _) = counted_with(relay, 2).await;
            let mut items = client.server_stream::<_, Raw>("burst", &(N as u32), &CallOptions::default()).await.unwrap();
            for i in 0..N {
                let Raw(b) = items.next().await.unwrap().expect("an item");
                assert_eq!(&b[..], &[i as u8; 16][..], "item {i} in order");
                if i % 7 == 0 {
                    // A consumer that lags now and then: the relay finds
                    // its credit spent with items in hand.
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
            assert!(items.next().await.unwrap().is_none());
            let up = client.client_stream::<Raw, u32>("count", &CallOptions::default()).await.unwrap();
            for i in 0..N {
                up.send(&Raw(Bytes::from(vec![i as u8; 16]))).await.unwrap();
            }
            assert_eq!(up.finish().await.unwrap(), N as u32);
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), run).await.expect("no relayed item was left behind");
    }
}
