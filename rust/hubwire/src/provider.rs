//! Offering methods: register handlers by name with typed or raw
//! signatures, then serve them on a listener, to a parent process, or on
//! one transport. A [`Provider`] is a [`Service`]: the engine hands it each
//! call, and it finds the handler, decodes the input and encodes the
//! output. A handler returns `Err(Error::failure(..))` for a typed failure
//! its method declares; any other error, or a panic, reaches the caller as
//! that call's error only (a panic becomes a `defect`).
//!
//! A handler is first polled once on the connection's reader (in either
//! wait mode), so one that answers without waiting costs no task at all;
//! one that waits then runs in a task of its own. A unary handler that
//! never waits can be registered as a plain function
//! ([`Provider::unary_sync`]): it is called on the reader and answers with
//! no future at all (no allocation per call). The flip side is that a
//! handler that computes for long before its first `.await` holds up the
//! other calls on that connection meanwhile: register its method with
//! [`Provider::in_task`] (it then starts in its own task), or put the work
//! in `tokio::task::spawn_blocking`.

use std::collections::HashMap;
use std::future::Future;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use hubwire_frame::{Kind, MethodInfo};
use serde_json::Value;

use crate::codec::{Codec, Message, Payload};
use crate::connection::Connection;
use crate::context::CallContext;
use crate::direct_serve::DirectServe;
use crate::engine::{panic_message, ConnectionOptions, IdHasher, Incoming, ServeFuture, Service, Work};
use crate::errors::{Code, Error};
use crate::stream::{ItemSink, ItemStream};
use crate::transport::{self, DynTransport, Listener};

type HandlerFn = dyn Fn(CallContext, Incoming) -> Result<Work, Error> + Send + Sync;

struct Method {
    info: MethodInfo,
    /// The name once more, shared by every call's context.
    name: Arc<str>,
    handler: Box<HandlerFn>,
    /// Never polled on the reader ([`Provider::in_task`]).
    in_task: bool,
    /// Registered with [`Provider::unary_sync`]: it answers on the reader.
    sync: bool,
}

/// A set of methods under a name.
pub struct Provider {
    name: String,
    /// Hashed cheaply rather than with SipHash (~2 % of a served call):
    /// the peer chooses the names it looks up, but the table holds only
    /// this provider's methods, so names chosen to collide can only make a
    /// lookup as slow as a scan of them.
    methods: HashMap<String, Method, BuildHasherDefault<IdHasher>>,
    order: Vec<String>,
}

fn decode_input<I: Message>(method: &str, p: Payload) -> Result<I, Error> {
    I::decode(p).map_err(|m| Error::invalid_argument(format!("{method}: cannot decode input: {m}")))
}

/// A failure value travels in the request's codec (`spec/PROTOCOL.md`
/// §5.3): `Error::failure` encodes MessagePack, so a JSON call gets it
/// transcoded here.
fn failure_in(e: Error, wanted: Codec) -> Error {
    match e.detail() {
        Some(p) if e.code() == Code::Failure && wanted == Codec::Json && p.codec == Codec::Msgpack => {
            match rmp_serde::from_slice::<Value>(&p.bytes) {
                Ok(v) => Error::failure_with(&v, wanted),
                Err(_) => e,
            }
        }
        _ => e,
    }
}

fn encode_output<O: Message>(out: &O, wanted: Codec) -> Result<Option<Payload>, Error> {
    let codec = O::codec_for(wanted);
    out.encode(codec).map(|bytes| Some(Payload { codec, bytes })).map_err(|e| Error::defect(format!("output could not be encoded: {e}")))
}

impl Provider {
    /// An empty provider called `name`.
    pub fn new(name: impl Into<String>) -> Provider {
        Provider { name: name.into(), methods: HashMap::default(), order: Vec::new() }
    }

    /// The provider's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn add(mut self, name: &str, kind: Kind, input: Value, output: Value, handler: Box<HandlerFn>) -> Provider {
        assert!(!name.is_empty() && name.len() <= 255, "method name must be 1-255 bytes: {name:?}");
        let info = MethodInfo { name: name.into(), kind, input, output, errors: None, doc: None };
        if self.methods.insert(name.into(), Method { info, name: name.into(), handler, in_task: false, sync: false }).is_none() {
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
        let handler = Box::new(move |ctx, call: Incoming| -> Result<Work, Error> {
            let wanted = call.input.codec;
            let fut = f(ctx, decode_input::<I>(&method, call.input)?);
            Ok(Work::Future(Box::pin(async move { encode_output(&fut.await.map_err(|e| failure_in(e, wanted))?, wanted) })))
        });
        self.add(name, Kind::Unary, I::schema(), O::schema(), handler)
    }

    /// Registers a unary method whose handler never waits: a plain
    /// function `f(ctx, input) -> Result<output, Error>`, called on the
    /// connection's reader as the REQUEST is read. The call then costs no
    /// future, no allocation and no task: for handlers that answer from
    /// what they are given or hold (an echo, a lookup, a computation of a
    /// few microseconds). The other calls on the connection wait while it
    /// runs, so a handler that may take long, or has to wait for anything,
    /// belongs in [`Provider::unary`]. A panic is a `defect` for that call,
    /// as in any handler.
    pub fn unary_sync<I, O, F>(self, name: &str, f: F) -> Provider
    where
        I: Message,
        O: Message,
        F: Fn(CallContext, I) -> Result<O, Error> + Send + Sync + 'static,
    {
        let method: Arc<str> = name.into();
        let handler = Box::new(move |ctx, call: Incoming| -> Result<Work, Error> {
            let wanted = call.input.codec;
            let input = decode_input::<I>(&method, call.input)?;
            let out = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(ctx, input))) {
                Ok(out) => out.map_err(|e| failure_in(e, wanted)).and_then(|o| encode_output(&o, wanted)),
                Err(panic) => Err(Error::defect(format!("handler panicked: {}", panic_message(&*panic)))),
            };
            Ok(Work::Done(out))
        });
        let mut p = self.add(name, Kind::Unary, I::schema(), O::schema(), handler);
        p.methods.get_mut(name).expect("just added").sync = true;
        p
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
        let handler = Box::new(move |ctx, mut call: Incoming| -> Result<Work, Error> {
            let sink = call.take_sink::<O>().expect("a server_stream call has a sink");
            let wanted = call.input.codec;
            let fut = f(ctx, decode_input::<I>(&method, call.input)?, sink);
            Ok(Work::Future(Box::pin(async move { fut.await.map(|()| None).map_err(|e| failure_in(e, wanted)) })))
        });
        self.add(name, Kind::ServerStream, I::schema(), O::schema(), handler)
    }

    /// Registers a client-streaming method: `f(ctx, items) -> output`.
    pub fn client_stream<I, O, F, Fut>(self, name: &str, f: F) -> Provider
    where
        I: Message,
        O: Message,
        F: Fn(CallContext, ItemStream<I>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, Error>> + Send + 'static,
    {
        let handler = Box::new(move |ctx, mut call: Incoming| -> Result<Work, Error> {
            let wanted = call.input.codec;
            let fut = f(ctx, call.take_items::<I>().expect("a client_stream call has items"));
            Ok(Work::Future(Box::pin(async move { encode_output(&fut.await.map_err(|e| failure_in(e, wanted))?, wanted) })))
        });
        self.add(name, Kind::ClientStream, I::schema(), O::schema(), handler)
    }

    /// Registers a bidirectional method: `f(ctx, items, sink)`.
    pub fn bidi<I, O, F, Fut>(self, name: &str, f: F) -> Provider
    where
        I: Message,
        O: Message,
        F: Fn(CallContext, ItemStream<I>, ItemSink<O>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Error>> + Send + 'static,
    {
        let handler = Box::new(move |ctx, mut call: Incoming| -> Result<Work, Error> {
            let items = call.take_items::<I>().expect("a bidi call has items");
            let sink = call.take_sink::<O>().expect("a bidi call has a sink");
            let wanted = call.input.codec;
            let fut = f(ctx, items, sink);
            Ok(Work::Future(Box::pin(async move { fut.await.map(|()| None).map_err(|e| failure_in(e, wanted)) })))
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

    /// Runs the handler of method `name` in a task of its own from the
    /// start, never on the connection's reader: for a handler that computes
    /// before its first `.await`, which would otherwise hold up the other
    /// calls on the connection while it does. Costs a task per call.
    /// Panics for a method registered with [`Provider::unary_sync`], which
    /// runs on the reader by definition.
    pub fn in_task(mut self, name: &str) -> Provider {
        let m = self.methods.get_mut(name).unwrap_or_else(|| panic!("in_task: no method {name:?}"));
        assert!(!m.sync, "in_task: {name:?} is registered with unary_sync, which runs on the reader; register it with unary");
        m.in_task = true;
        self
    }

    /// Whether this provider has a method called `name`.
    pub fn has(&self, name: &str) -> bool {
        self.methods.contains_key(name)
    }

    /// Accepts connections on `listener` forever, serving these methods on
    /// each. A connection that fails its handshake is logged and dropped;
    /// the others go on.
    ///
    /// With [`ConnectionOptions::direct`] it takes the direct path for a
    /// hub that dials it (`spec/PROTOCOL.md` §14): it says `direct` in its
    /// HELLO, so the hub hands its address to trusted clients, and reports
    /// the calls of every connection that is not a hub's to the hub
    /// (`direct_serve.rs`).
    pub async fn serve(self, listener: impl Listener, options: ConnectionOptions) -> std::io::Result<()> {
        if options.direct {
            tracing::info!(listen = %listener.describe(), "serving");
            let (direct, service) = (Arc::new(DirectServe::default()), Arc::new(self) as Arc<dyn Service>);
            let options = direct.options(options, service.clone());
            loop {
                let t = transport::accept(&listener).await?;
                tokio::spawn(direct.clone().serve_accepted(t, options.clone(), service.clone()));
            }
        }
        accept_loop(listener, options.service(self)).await
    }

    /// Serves these methods on one transport, as the acceptor; returns the
    /// connection once its handshake is done.
    pub async fn serve_transport(
        self,
        transport: impl crate::transport::Transport,
        options: ConnectionOptions,
    ) -> Result<Connection, Error> {
        let t: DynTransport = Arc::new(transport);
        Connection::start(t, &options.service(self), false).await
    }

    /// In a child process started by a hubwire parent (`spec/PROTOCOL.md`
    /// §10): serves these methods to the parent until it goes away. Fails
    /// if `HUBWIRE_FD` is not set.
    ///
    /// It also takes the direct path (§14): it sends `direct` in its HELLO,
    /// serves the connections a hub hands it (ACCEPT) with these methods,
    /// reports their calls to the hub, and when the parent goes, drains
    /// them briefly before returning (`direct_serve.rs`).
    pub async fn serve_child(self, options: ConnectionOptions) -> Result<(), Error> {
        let t = transport::child::from_env()
            .map_err(|e| Error::unavailable(format!("cannot open the parent's socket: {e}")))?
            .ok_or_else(|| Error::unavailable("HUBWIRE_FD is not set: this program must be started by a hubwire parent"))?;
        let direct = Arc::new(DirectServe::default());
        let conn = Connection::accept(t, &direct.options(options, Arc::new(self))).await?;
        let reports = tokio::spawn(direct.clone().report(conn.clone()));
        conn.closed().await;
        reports.abort();
        direct.drain().await;
        Ok(())
    }
}

impl Service for Provider {
    fn methods(&self) -> Vec<MethodInfo> {
        self.order.iter().map(|n| self.methods[n].info.clone()).collect()
    }

    fn call(&self, call: Incoming) -> Result<ServeFuture, Error> {
        self.start(call).map(Work::into_future)
    }

    fn start(&self, call: Incoming) -> Result<Work, Error> {
        let Some(m) = self.methods.get(call.method()) else {
            return Err(Error::new(Code::UnknownMethod, format!("unknown method {:?}; offered: {:?}", call.method(), self.order)));
        };
        if m.info.kind != call.kind() {
            let (is, asked) = (m.info.kind.name(), call.kind().name());
            return Err(Error::invalid_argument(format!("method {:?} is {is}, called as {asked}", call.method())));
        }
        match (m.handler)(call.context_named(m.name.clone()), call)? {
            Work::Future(work) if m.in_task => {
                // The engine's first poll, on the reader, only meets the
                // yield; the handler's own code starts when its task polls
                // again.
                Ok(Work::Future(Box::pin(async move {
                    tokio::task::yield_now().await;
                    work.await
                })))
            }
            work => Ok(work),
        }
    }
}

/// Accepts connections on `listener` forever, serving `options.service` on
/// each (`Provider::serve`, and `nats::serve` with its counting service).
pub(crate) async fn accept_loop(listener: impl Listener, options: ConnectionOptions) -> std::io::Result<()> {
    tracing::info!(listen = %listener.describe(), "serving");
    loop {
        let t = transport::accept(&listener).await?;
        let options = options.clone();
        tokio::spawn(async move {
            let label = t.describe();
            match Connection::start(t, &options, false).await {
                Ok(conn) => {
                    let why = conn.closed().await;
                    tracing::debug!(peer = %label, "connection ended: {why}");
                }
                Err(e) => tracing::warn!(peer = %label, "handshake failed: {e}"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::{testing, Provider};

    /// The task a handler's body runs in, as text.
    fn task() -> String {
        tokio::task::id().to_string()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_handler_runs_on_the_reader_unless_its_method_is_in_task() {
        let p = Provider::new("p")
            .unary("here", |_ctx, (): ()| async move { Ok(task()) })
            .unary("there", |_ctx, (): ()| async move { Ok(task()) })
            .unary("there_again", |_ctx, (): ()| async move { Ok(task()) })
            .in_task("there")
            .in_task("there_again");
        let pair = testing::pair(p).await;
        let mut here = Vec::new();
        for _ in 0..2 {
            here.push(pair.client.call::<(), String>("here", &()).await.unwrap());
        }
        let there: String = pair.client.call("there", &()).await.unwrap();
        let there_again: String = pair.client.call("there_again", &()).await.unwrap();
        // Both inline calls ran in the one reader task; each in_task call
        // in a task of its own.
        assert_eq!(here[0], here[1], "inline handlers run in the connection's reader");
        assert_ne!(there, here[0], "an in_task handler does not run in the reader");
        assert_ne!(there, there_again, "each in_task call has its own task");
    }

    /// A `unary_sync` method answers on the reader with no future: its
    /// output, its typed failure (in the call's codec), a refusal of input
    /// that does not decode, and a panic as a `defect` of that call only.
    #[tokio::test(flavor = "current_thread")]
    async fn a_sync_handler_answers_on_the_reader_with_its_output_failure_or_panic() {
        use crate::{CallOptions, Code, Codec, Error};
        let p = Provider::new("p")
            .unary("async_task", |_ctx, (): ()| async move { Ok(task()) })
            .unary_sync("task", |_ctx, (): ()| Ok(task()))
            .unary_sync("double", |_ctx, x: u32| match x {
                0 => Err(Error::failure(&"zero".to_string())),
                13 => panic!("thirteen"),
                x => Ok(x * 2),
            });
        let pair = testing::pair(p).await;
        let c = &pair.client;
        let reader: String = c.call("async_task", &()).await.unwrap();
        assert_eq!(c.call::<(), String>("task", &()).await.unwrap(), reader, "called on the reader");
        assert_eq!(c.call::<u32, u32>("double", &21).await.unwrap(), 42);
        let json = CallOptions { codec: Some(Codec::Json), ..Default::default() };
        assert_eq!(c.call_with::<u32, u32>("double", &21, &json).await.unwrap(), 42);
        let e = c.call_with::<u32, u32>("double", &0, &json).await.unwrap_err();
        assert_eq!(e.code(), Code::Failure);
        assert_eq!(e.failure_value::<String>().unwrap().unwrap(), "zero");
        let e = c.call::<String, u32>("double", &"x".to_string()).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        let e = c.call::<u32, u32>("double", &13).await.unwrap_err();
        assert_eq!(e.code(), Code::Defect);
        assert!(e.message().contains("handler panicked: thirteen"), "{e}");
        assert_eq!(c.call::<u32, u32>("double", &1).await.unwrap(), 2, "the connection lives on");
    }

    /// A call answering on the reader is in no table: a drain that came
    /// meanwhile used to find the connection idle, flush an empty queue
    /// and close, and the handler's answer was dropped. The drain now
    /// waits for it (and would refuse any call after its GOAWAY).
    #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
    async fn a_drain_waits_for_a_call_answering_on_the_reader() {
        use std::sync::{mpsc, Mutex};
        use std::time::Duration;
        let (entered, entered_rx) = mpsc::channel::<()>();
        let (go, go_rx) = mpsc::channel::<()>();
        let (entered, go_rx) = (Mutex::new(entered), Mutex::new(go_rx));
        let p = Provider::new("p").unary_sync("held", move |_ctx, (): ()| {
            entered.lock().unwrap().send(()).unwrap();
            go_rx.lock().unwrap().recv_timeout(Duration::from_secs(10)).expect("released");
            Ok("answered".to_string())
        });
        let pair = testing::pair(p).await;
        let client = pair.client.clone();
        let call = tokio::spawn(async move { client.call::<(), String>("held", &()).await });
        tokio::task::spawn_blocking(move || entered_rx.recv_timeout(Duration::from_secs(10))).await.unwrap().expect("called");
        let server = pair.server.clone();
        let drain = tokio::spawn(async move { server.drain(Duration::from_secs(10)).await });
        // Without the fix the drain is over well within this.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!drain.is_finished(), "the drain closed while a call was answering on the reader");
        go.send(()).unwrap();
        assert_eq!(call.await.unwrap().expect("the call's answer"), "answered");
        tokio::time::timeout(Duration::from_secs(10), drain).await.expect("the drain ends once the call has").unwrap();
    }

    #[test]
    #[should_panic(expected = "registered with unary_sync")]
    fn in_task_refuses_a_sync_method() {
        let _ = Provider::new("p").unary_sync("m", |_ctx, (): ()| Ok(())).in_task("m");
    }
}
