//! Offering methods: register handlers by name with typed or raw
//! signatures, then serve them on a listener, to a parent process, or on
//! any connection. A handler returns `Err(Error::failure(..))` for a typed
//! failure its method declares; any other error, or a panic, reaches the
//! caller as that call's error only (a panic becomes a `defect`).
//!
//! Each call's handler runs in its own task. In low-latency mode it is
//! first polled once on the connection's reader, so a handler that answers
//! without waiting costs no task at all; the flip side is that a handler
//! that computes for long before its first `.await` holds up the other
//! calls on that connection meanwhile. Put such work in
//! `tokio::task::spawn_blocking` (or use efficient mode).

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hubwire_frame::{FrameError, Kind, MethodInfo};
use serde_json::Value;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

use crate::calls::{CancelSignal, Served};
use crate::codec::{Message, Payload};
use crate::connection::{Config, Connection, Inner};
use crate::router::{Routed, Router};
use crate::stream::{ItemSink, Items, RecvWindow, StreamIn};
use crate::transport::{self, Listener};
use crate::{CallContext, Code, Error};

type BoxFuture = Pin<Box<dyn Future<Output = Result<Option<Payload>, Error>> + Send>>;
type HandlerFn = dyn Fn(Invocation) -> BoxFuture + Send + Sync;

/// What a handler is called with, before the typed wrapper decodes it.
struct Invocation {
    ctx: CallContext,
    input: Payload,
    inner: Arc<Inner>,
    in_parts: Option<StreamIn>,
    out_credit: Option<Arc<Semaphore>>,
}

impl Invocation {
    fn items<T: Message>(&mut self) -> Items<T> {
        let parts = self.in_parts.take().expect("streaming kind has input parts");
        Items::new(self.inner.clone(), self.ctx.id, parts, self.ctx.deadline, Code::InvalidArgument, None)
    }

    fn sink<T: Message>(&mut self) -> ItemSink<T> {
        let credit = self.out_credit.take().expect("streaming kind has output credit");
        ItemSink::new(self.inner.clone(), self.ctx.id, self.input.codec, credit, self.ctx.deadline, None)
    }
}

struct Method {
    info: MethodInfo,
    /// The name once more, shared by every call's context.
    name: Arc<str>,
    handler: Box<HandlerFn>,
}

/// A set of methods under a name.
pub struct Provider {
    name: String,
    methods: HashMap<String, Method>,
    order: Vec<String>,
    /// Serves the calls no method of ours matches (the hub).
    router: Option<Arc<dyn Router>>,
}

fn decode_input<I: Message>(method: &str, p: Payload) -> Result<I, Error> {
    I::decode(p).map_err(|m| Error::invalid_argument(format!("{method}: cannot decode input: {m}")))
}

/// A failure value travels in the request's codec (`spec/PROTOCOL.md`
/// §5.3): `Error::failure` encodes MessagePack, so a JSON call gets it
/// transcoded here.
fn failure_in(e: Error, wanted: crate::Codec) -> Error {
    match e.detail() {
        Some(p) if e.code() == Code::Failure && wanted == crate::Codec::Json && p.codec == crate::Codec::Msgpack => {
            match rmp_serde::from_slice::<Value>(&p.bytes) {
                Ok(v) => Error::failure_with(&v, wanted),
                Err(_) => e,
            }
        }
        _ => e,
    }
}

fn encode_output<O: Message>(out: &O, wanted: crate::Codec) -> Result<Option<Payload>, Error> {
    let codec = O::codec_for(wanted);
    out.encode(codec).map(|bytes| Some(Payload { codec, bytes })).map_err(|e| Error::defect(format!("output could not be encoded: {e}")))
}

impl Provider {
    /// An empty provider called `name`.
    pub fn new(name: impl Into<String>) -> Provider {
        Provider { name: name.into(), methods: HashMap::new(), order: Vec::new(), router: None }
    }

    /// The provider's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn add(mut self, name: &str, kind: Kind, input: Value, output: Value, handler: Box<HandlerFn>) -> Provider {
        assert!(!name.is_empty() && name.len() <= 255, "method name must be 1-255 bytes: {name:?}");
        let info = MethodInfo { name: name.into(), kind, input, output, errors: None, doc: None };
        if self.methods.insert(name.into(), Method { info, name: name.into(), handler }).is_none() {
            self.order.push(name.into());
        }
        self
    }

    /// Registers a unary method: `f(ctx, input) -> Result<output, Error>`.
    /// Use [`Raw`](crate::Raw) for input or output to skip serialization.
    pub fn unary<I, O, F, Fut>(self, name: &str, f: F) -> Provider
    where
        I: Message,
        O: Message,
        F: Fn(CallContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, Error>> + Send + 'static,
    {
        let method: Arc<str> = name.into();
        let handler = Box::new(move |inv: Invocation| -> BoxFuture {
            let wanted = inv.input.codec;
            let input = match decode_input::<I>(&method, inv.input) {
                Ok(i) => i,
                Err(e) => return Box::pin(std::future::ready(Err(e))),
            };
            let fut = f(inv.ctx, input);
            Box::pin(async move { encode_output(&fut.await.map_err(|e| failure_in(e, wanted))?, wanted) })
        });
        self.add(name, Kind::Unary, I::schema(), O::schema(), handler)
    }

    /// Registers a server-streaming method: `f(ctx, input, sink)`.
    pub fn server_stream<I, O, F, Fut>(self, name: &str, f: F) -> Provider
    where
        I: Message,
        O: Message,
        F: Fn(CallContext, I, ItemSink<O>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Error>> + Send + 'static,
    {
        let method: Arc<str> = name.into();
        let handler = Box::new(move |mut inv: Invocation| -> BoxFuture {
            let sink = inv.sink::<O>();
            let wanted = inv.input.codec;
            let input = match decode_input::<I>(&method, inv.input) {
                Ok(i) => i,
                Err(e) => return Box::pin(std::future::ready(Err(e))),
            };
            let fut = f(inv.ctx, input, sink);
            Box::pin(async move { fut.await.map(|()| None).map_err(|e| failure_in(e, wanted)) })
        });
        self.add(name, Kind::ServerStream, I::schema(), O::schema(), handler)
    }

    /// Registers a client-streaming method: `f(ctx, items) -> output`.
    pub fn client_stream<I, O, F, Fut>(self, name: &str, f: F) -> Provider
    where
        I: Message,
        O: Message,
        F: Fn(CallContext, Items<I>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, Error>> + Send + 'static,
    {
        let handler = Box::new(move |mut inv: Invocation| -> BoxFuture {
            let wanted = inv.input.codec;
            let fut = f(inv.ctx.clone(), inv.items::<I>());
            Box::pin(async move { encode_output(&fut.await.map_err(|e| failure_in(e, wanted))?, wanted) })
        });
        self.add(name, Kind::ClientStream, I::schema(), O::schema(), handler)
    }

    /// Registers a bidirectional method: `f(ctx, items, sink)`.
    pub fn bidi<I, O, F, Fut>(self, name: &str, f: F) -> Provider
    where
        I: Message,
        O: Message,
        F: Fn(CallContext, Items<I>, ItemSink<O>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Error>> + Send + 'static,
    {
        let handler = Box::new(move |mut inv: Invocation| -> BoxFuture {
            let (items, sink) = (inv.items::<I>(), inv.sink::<O>());
            let wanted = inv.input.codec;
            let fut = f(inv.ctx.clone(), items, sink);
            Box::pin(async move { fut.await.map(|()| None).map_err(|e| failure_in(e, wanted)) })
        });
        self.add(name, Kind::Bidi, I::schema(), O::schema(), handler)
    }

    /// Sets the JSON Schemas a method advertises in HELLO (input, output,
    /// and the type of its failures).
    pub fn describe(mut self, name: &str, input: Value, output: Value, errors: Option<Value>) -> Provider {
        let m = self.methods.get_mut(name).unwrap_or_else(|| panic!("describe: no method {name:?}"));
        m.info.input = input;
        m.info.output = output;
        m.info.errors = errors;
        self
    }

    /// Sets a method's one-line description, advertised in HELLO.
    pub fn doc(mut self, name: &str, text: impl Into<String>) -> Provider {
        let m = self.methods.get_mut(name).unwrap_or_else(|| panic!("doc: no method {name:?}"));
        m.info.doc = Some(text.into());
        self
    }

    /// Hands every call for a method this provider does not have to
    /// `router` (see `router.rs`); its methods are advertised after ours.
    pub fn router(mut self, router: Arc<dyn Router>) -> Provider {
        self.router = Some(router);
        self
    }

    pub(crate) fn method_infos(&self) -> Vec<MethodInfo> {
        let own = self.order.iter().map(|n| self.methods[n].info.clone());
        let routed = self.router.iter().flat_map(|r| r.methods()).filter(|m| !self.methods.contains_key(&m.name));
        own.chain(routed).collect()
    }

    /// Accepts connections on `listener` forever, serving these methods on
    /// each. A connection that fails its handshake is logged and dropped;
    /// the others go on.
    pub async fn serve(self, listener: impl Listener, config: Config) -> std::io::Result<()> {
        let config = config.provider(self);
        tracing::info!(listen = %listener.describe(), "serving");
        loop {
            let t = transport::accept(&listener).await?;
            let config = config.clone();
            tokio::spawn(async move {
                let label = t.describe();
                match Connection::start(t, &config, false).await {
                    Ok(conn) => {
                        let why = conn.closed().await;
                        tracing::debug!(peer = %label, "connection ended: {why}");
                    }
                    Err(e) => tracing::warn!(peer = %label, "handshake failed: {e}"),
                }
            });
        }
    }

    /// In a child process started by a hubwire parent: serves these methods
    /// to the parent until it goes away. Fails if `HUBWIRE_FD` is not set.
    pub async fn serve_parent(self, config: Config) -> Result<(), Error> {
        let t = transport::child::from_env()
            .map_err(|e| Error::unavailable(format!("cannot open the parent's socket: {e}")))?
            .ok_or_else(|| Error::unavailable("HUBWIRE_FD is not set: this program must be started by a hubwire parent"))?;
        let conn = Connection::accept(t, &config.provider(self)).await?;
        conn.closed().await;
        Ok(())
    }
}

/// A REQUEST arrived: check it, register it, start its handler. Returns
/// whether a handler task was started (see `reader::dispatch`).
pub(crate) fn on_request(
    inner: &Arc<Inner>,
    id: u32,
    kind: Kind,
    timeout_ms: u32,
    method: String,
    input: Payload,
) -> Result<bool, FrameError> {
    if inner.ours(id) {
        return Err(FrameError::protocol(format!("REQUEST with call id {id} of the receiver's parity")));
    }
    let refuse = |code: Code, msg: String| {
        inner.send_response(id, Err(Error::new(code, msg)), false);
        Ok(false)
    };
    let provider = inner.config.provider.clone();
    let own = provider.as_ref().and_then(|p| p.methods.get(&method));
    let router = provider.as_ref().and_then(|p| p.router.clone());
    if own.is_none() && router.is_none() {
        let offered: Vec<&str> = provider.as_ref().map(|p| p.order.iter().map(|s| s.as_str()).collect()).unwrap_or_default();
        return refuse(Code::UnknownMethod, format!("unknown method {method:?}; offered: {offered:?}"));
    }
    if let Some(m) = own.filter(|m| m.info.kind != kind) {
        return refuse(Code::InvalidArgument, format!("method {method:?} is {}, called as {}", m.info.kind.name(), kind.name()));
    }
    let deadline = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
    let cancel = Arc::new(CancelSignal::default());
    let (in_parts, items_tx, recv) = if kind.streams_in() {
        let (tx, rx) = mpsc::unbounded_channel();
        let window = RecvWindow::new(inner.local.window);
        (Some(StreamIn { rx, window: window.clone() }), Some(tx), Some(window))
    } else {
        (None, None, None)
    };
    let out_credit = kind.streams_out().then(|| Arc::new(Semaphore::new(inner.peer.window as usize)));
    {
        let mut st = inner.state.lock().unwrap();
        if st.served.contains_key(&id) {
            return Err(FrameError::protocol(format!("REQUEST for call id {id}, which is already live")));
        }
        st.last_peer_id = st.last_peer_id.max(id);
        if st.draining {
            drop(st);
            return refuse(Code::Unavailable, "provider is draining (GOAWAY); retry elsewhere".into());
        }
        if st.served.len() >= inner.local.max_calls as usize {
            drop(st);
            return refuse(
                Code::ResourceExhausted,
                format!("too many calls in flight: the limit (max_calls) is {}", inner.local.max_calls),
            );
        }
        st.served.insert(id, Served { cancel: cancel.clone(), items: items_tx, recv, send_credit: out_credit.clone() });
    }
    let name = own.map(|m| m.name.clone()).unwrap_or_else(|| method.as_str().into());
    let ctx = CallContext { method: name, id, deadline, cancel: cancel.clone(), peer: inner.peer.clone() };
    let mut inv = Invocation { ctx, input, inner: inner.clone(), in_parts, out_credit };
    let mut fut = CatchUnwind(match (own, router) {
        (Some(m), _) => (m.handler)(inv),
        (None, Some(router)) => {
            let items = kind.streams_in().then(|| inv.items::<Payload>());
            let sink = kind.streams_out().then(|| inv.sink::<Payload>());
            router.route(Routed { ctx: inv.ctx, kind, input: inv.input, items, sink })
        }
        (None, None) => unreachable!("refused above"),
    });
    if inner.low_latency {
        // Poll once right here: a handler that answers at once (most do)
        // costs no task, no wake-up and no trip through the scheduler. One
        // that has to wait moves to its own task, which polls it again
        // with a real waker.
        if let Poll::Ready(result) = fut.as_mut().poll(&mut Context::from_waker(std::task::Waker::noop())) {
            finish_served(inner, id, Some(result));
            return Ok(false);
        }
    }
    tokio::spawn(run_served(inner.clone(), id, fut, cancel, deadline));
    Ok(true)
}

/// Runs one handler to its end (or cancellation, or deadline) and answers.
async fn run_served(inner: Arc<Inner>, id: u32, fut: CatchUnwind, cancel: Arc<CancelSignal>, deadline: Option<Instant>) {
    let expiry = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        biased;
        _ = cancel.cancelled() => None,
        r = fut => Some(r),
        _ = expiry => Some(Err(Error::new(Code::DeadlineExceeded, "deadline exceeded in the handler"))),
    };
    if !finish_served(&inner, id, result) {
        // The caller may answer with its next request soon: spin for it.
        inner.kick();
    }
}

/// Forgets a served call and sends its RESPONSE, unless it was cancelled
/// (`result` is None) or the connection died meanwhile. Returns whether
/// other served calls are still in flight (then the RESPONSE may share a
/// write with theirs).
fn finish_served(inner: &Arc<Inner>, id: u32, result: Option<Result<Option<Payload>, Error>>) -> bool {
    let (live, more) = {
        let mut st = inner.state.lock().unwrap();
        let s = st.served.remove(&id);
        if st.draining && st.idle() {
            inner.idle.notify_waiters();
        }
        (s, !st.served.is_empty())
    };
    if let (Some(served), Some(result)) = (live, result) {
        served.cancel();
        inner.send_response(id, result, more);
    }
    more
}

/// Turns a panic while polling the handler into a `defect` for that call.
struct CatchUnwind(BoxFuture);

impl CatchUnwind {
    fn as_mut(&mut self) -> Pin<&mut Self> {
        Pin::new(self)
    }
}

impl Future for CatchUnwind {
    type Output = Result<Option<Payload>, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.0.as_mut().poll(cx))) {
            Ok(p) => p,
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string panic payload".into());
                Poll::Ready(Err(Error::defect(format!("handler panicked: {msg}"))))
            }
        }
    }
}
