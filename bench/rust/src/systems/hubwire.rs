//! hubwire itself: a provider with echo methods (raw bytes, a document, a
//! message, and a bidirectional stream of raw items) and a client calling
//! it, on every transport, in either wait mode. Both sides run on a tokio
//! current-thread runtime; the client's loops run inside one `block_on`,
//! as an application's would.
//!
//! The stream systems (`hubwire-stream-*`) open one `echo_stream` call per
//! connection and send each "call" as an ITEM on it; the provider answers
//! each ITEM with an ITEM of the same bytes. Both peers keep the default
//! credit window (64 items per stream, granted back in batches of 32), so
//! with more than 64 items ahead the client waits for credit as well as
//! for answers (`bench/scenarios/streams.toml` stops at 64).

use std::io;
use std::sync::Arc;

use hubwire::{CallOptions, Codec, Connection, ConnectionOptions, ItemSink, ItemStream, Provider, Raw, WaitMode};
use serde_json::Value;

use super::endpoint::{Addr, Children, Listening};
use crate::client::{check_len, in_tasks, runtime, send_ahead, AsyncClient, Client, OnRuntime};
use crate::model::{Encoding, Job, Mode, Transport};
use crate::payload::{shape, Msg, Payload, Structured};
use crate::runner::Target;
use crate::serve::{ready, Listen};

/// The methods every hubwire server in the bench offers. The echoes never
/// wait, so they are registered as an application would register them:
/// with `unary_sync`, answered on the reader with no future per call.
pub fn provider() -> Provider {
    Provider::new("bench")
        .unary_sync("echo", |_ctx, x: Raw| Ok(x))
        .unary_sync("echo_doc", |_ctx, x: Value| Ok(x))
        .unary_sync("echo_msg", |_ctx, x: Msg| Ok(x))
        // `hubwire-server-stream` (over NATS): the item, n times.
        .server_stream("repeat", |_ctx, (n, item): (u64, serde_bytes::ByteBuf), sink: ItemSink<Raw>| async move {
            let item = Raw(bytes::Bytes::from(item.into_vec()));
            for _ in 0..n {
                sink.send(&item).await?;
            }
            Ok(())
        })
        .bidi("echo_stream", |_ctx, mut items: ItemStream<Raw>, sink: ItemSink<Raw>| async move {
            while let Some(x) = items.next().await? {
                sink.send(&x).await?;
            }
            Ok(())
        })
}

/// The wait mode `name`s (`--wait`).
fn wait_mode(name: &str) -> io::Result<WaitMode> {
    match name {
        "efficient" => Ok(WaitMode::Efficient),
        "low-latency" => Ok(WaitMode::low_latency()),
        other => Err(io::Error::other(format!("--wait {other:?}: efficient or low-latency"))),
    }
}

/// A hubwire job's wait mode, by name
/// ([`System::wait_mode`](crate::model::System::wait_mode)) and as hubwire's.
pub fn job_wait_mode(job: &Job) -> io::Result<(&'static str, WaitMode)> {
    let name = job.system.wait_mode().ok_or_else(|| io::Error::other(format!("{} is not a hubwire system", job.system.name())))?;
    Ok((name, wait_mode(name)?))
}

fn err(e: hubwire::Error) -> io::Error {
    io::Error::other(e.to_string())
}

/// `bench-peer hubwire`: serves `provider()` on a Unix socket, TCP, or to
/// the parent (hubwire's child transport) when `listen` is neither, in
/// wait mode `wait`. hubwire has its own listeners, so this does not use
/// the accept loops of `serve.rs`.
pub fn serve(listen: Option<Listen>, wait: &str, shm: bool) -> io::Result<()> {
    let config = ConnectionOptions::new("bench").wait(wait_mode(wait)?).shm(shm);
    runtime()?.block_on(async move {
        match listen {
            Some(Listen::Unix(p)) => {
                let l = hubwire::transport::unix::UnixListener::bind(&p)?;
                ready(&p.display().to_string());
                provider().serve(l, config).await
            }
            Some(Listen::Tcp(a)) => {
                let l = hubwire::transport::tcp::TcpListener::bind(a.as_str()).await?;
                ready(&l.local_addr()?.to_string());
                provider().serve(l, config).await
            }
            _ => provider().serve_child(config).await.map_err(err),
        }
    })
}

/// Starts the hubwire server side for `job` (the hub's is in `hub.rs`).
pub fn start(job: &Job) -> io::Result<Box<dyn Target>> {
    let (mode, wait) = job_wait_mode(job)?;
    let payload = job.payload.clone();
    let encoding = job.encoding;
    Ok(match job.transport {
        Transport::Unix | Transport::Tcp | Transport::Shm => {
            // Only the shm rows upgrade: both sides must ask for it.
            let shm = job.transport == Transport::Shm;
            let args = if shm { vec!["hubwire", "--wait", mode, "--shm"] } else { vec!["hubwire", "--wait", mode] };
            let server = Listening::start(&args, if shm { Transport::Unix } else { job.transport })?;
            let stream = job.system.on_stream();
            let pids = vec![server.pid()];
            let redial = job.mode == Mode::Connect;
            Box::new(Remote {
                addr: server.addr.clone(),
                pids,
                _server: Some(server),
                wait,
                payload,
                encoding,
                stream,
                direct: false,
                shm,
                redial,
            })
        }
        Transport::Child => Box::new(PerChild { mode, wait, payload, encoding, children: Children::default() }),
        Transport::Inproc => Box::new(InProc { wait, payload, encoding }),
        t => return Err(io::Error::other(format!("hubwire::start does not do {}", t.name()))),
    })
}

/// A hubwire server at an address: a `bench-peer`, or the hub.
pub struct Remote {
    /// Where to dial.
    pub addr: Addr,
    /// The processes serving it.
    pub pids: Vec<u32>,
    _server: Option<Listening>,
    wait: WaitMode,
    payload: Arc<Payload>,
    encoding: Encoding,
    /// Whether each connection's calls are items on one `echo_stream`.
    stream: bool,
    /// Whether to take the hub's direct path (spec §14) before measuring.
    direct: bool,
    /// Whether the connection must move to shared memory.
    shm: bool,
    /// Whether every call opens a connection of its own (`Mode::Connect`).
    redial: bool,
}

impl Remote {
    /// A server started by someone else (the hub); `direct`: take its
    /// direct path.
    pub fn external(addr: Addr, pids: Vec<u32>, wait: WaitMode, job: &Job, direct: bool) -> Remote {
        let stream = job.system.on_stream();
        Remote {
            addr,
            pids,
            _server: None,
            wait,
            payload: job.payload.clone(),
            encoding: job.encoding,
            stream,
            direct,
            shm: false,
            redial: false,
        }
    }
}

/// Calls `echo` until the hub's direct path carries it (the first calls go
/// through the hub while the client asks for it), for up to 10 s.
async fn until_direct(conn: &Connection) -> io::Result<()> {
    let t0 = std::time::Instant::now();
    while conn.direct_routes_live() == 0 {
        if t0.elapsed() > std::time::Duration::from_secs(10) {
            return Err(io::Error::other("the hub gave no direct path within 10 s"));
        }
        conn.call_raw("echo", bytes::Bytes::from_static(b"warm")).await.map_err(err)?;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    Ok(())
}

/// Dials `addr`; with `shm`, waits until the connection is on shared
/// memory both ways.
async fn dial(addr: &Addr, config: &ConnectionOptions, shm: bool) -> io::Result<Connection> {
    let conn = match addr {
        Addr::Unix(p) => Connection::dial(hubwire::transport::unix::connect(p).await?, config).await.map_err(err),
        Addr::Tcp(a) => Connection::dial(hubwire::transport::tcp::connect(a.as_str()).await?, config).await.map_err(err),
    }?;
    if shm && !conn.upgraded().await {
        return Err(io::Error::other("the connection did not move to shared memory"));
    }
    Ok(conn)
}

impl Target for Remote {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        let rt = runtime()?;
        let config = ConnectionOptions::new("bench-client").wait(self.wait).direct(self.direct).shm(self.shm);
        if self.redial {
            let (addr, payload, encoding, shm) = (self.addr.clone(), self.payload.clone(), self.encoding, self.shm);
            return Ok(OnRuntime::boxed(rt, Redial { addr, config, payload, encoding, shm }));
        }
        let conn = rt.block_on(async {
            let conn = dial(&self.addr, &config, self.shm).await?;
            if self.direct {
                until_direct(&conn).await?;
            }
            Ok::<_, io::Error>(conn)
        })?;
        client(rt, conn, &self.payload, self.encoding, self.stream, None)
    }

    fn peers(&self) -> Vec<u32> {
        self.pids.clone()
    }
}

/// The client of `Mode::Connect`: each call is a connection of its own,
/// timed from the connect to the close: connect + HELLO, the upgrade
/// when `shm` (until both directions are on the rings), one call, close.
struct Redial {
    addr: Addr,
    config: ConnectionOptions,
    payload: Arc<Payload>,
    encoding: Encoding,
    shm: bool,
}

impl AsyncClient for Redial {
    async fn call(&mut self) -> io::Result<()> {
        let conn = dial(&self.addr, &self.config, self.shm).await?;
        let r = call(&conn, &self.payload, self.encoding).await;
        conn.close();
        r
    }
}

/// A `bench-peer hubwire` child per connection, on hubwire's child transport.
struct PerChild {
    mode: &'static str,
    wait: WaitMode,
    payload: Arc<Payload>,
    encoding: Encoding,
    children: Children,
}

impl Target for PerChild {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        let rt = runtime()?;
        let (conn, child) = rt.block_on(async {
            let mut cmd = tokio::process::Command::new(crate::peer::bench_peer()?);
            cmd.args(["hubwire", "--wait", self.mode]).kill_on_drop(true);
            let (t, child) = hubwire::transport::child::spawn(cmd, hubwire::transport::child::SpawnOptions::new("bench"))?;
            // The child rows stay on the socketpair (the shm rows are `shm`).
            let conn = Connection::dial(t, &ConnectionOptions::new("bench-client").wait(self.wait).shm(false)).await.map_err(err)?;
            Ok::<_, io::Error>((conn, child))
        })?;
        if let Some(pid) = child.id() {
            self.children.add(pid);
        }
        client(rt, conn, &self.payload, self.encoding, false, Some(Box::new(child)))
    }

    fn peers(&self) -> Vec<u32> {
        self.children.pids()
    }
}

/// The provider on its own thread and runtime, over the in-memory transport.
struct InProc {
    wait: WaitMode,
    payload: Arc<Payload>,
    encoding: Encoding,
}

impl Target for InProc {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        let (a, b) = hubwire::transport::memory::pair();
        let config = ConnectionOptions::new("bench").wait(self.wait).service(provider());
        std::thread::spawn(move || {
            let rt = runtime().expect("a runtime for the in-process provider");
            rt.block_on(async move {
                if let Ok(conn) = Connection::accept(b, &config).await {
                    conn.closed().await;
                }
            });
        });
        let rt = runtime()?;
        let conn = rt.block_on(Connection::dial(a, &ConnectionOptions::new("bench-client").wait(self.wait))).map_err(err)?;
        client(rt, conn, &self.payload, self.encoding, false, None)
    }

    fn peers(&self) -> Vec<u32> {
        Vec::new()
    }
}

/// One connection's client side (also over NATS), on the runtime it was dialled on; with
/// `stream`, its calls are items on one `echo_stream` call opened here
/// (raw items only: the stream systems run only raw).
pub fn client(
    rt: tokio::runtime::Runtime,
    conn: Connection,
    payload: &Arc<Payload>,
    encoding: Encoding,
    stream: bool,
    keep: Option<Box<dyn Send>>,
) -> io::Result<Box<dyn Client>> {
    let payload = payload.clone();
    let stream = match stream {
        true => Some(rt.block_on(conn.bidi("echo_stream", &CallOptions::new().codec(Codec::Raw))).map_err(err)?),
        false => None,
    };
    Ok(OnRuntime::boxed(rt, HubwireClient { conn, payload, encoding, stream, _keep: keep }))
}

struct HubwireClient {
    conn: Connection,
    payload: Arc<Payload>,
    encoding: Encoding,
    /// The `echo_stream` call of a stream system: where items go, and the
    /// answers.
    stream: Option<(ItemSink<Raw>, ItemStream<Raw>)>,
    // The child process of a child-transport connection, killed on drop.
    _keep: Option<Box<dyn Send>>,
}

/// One call of `payload` as `encoding`; checks the answer's size.
async fn call(conn: &Connection, payload: &Payload, encoding: Encoding) -> io::Result<()> {
    let codec = match encoding {
        Encoding::Raw => {
            let out = conn.call_raw("echo", payload.raw.clone()).await.map_err(err)?;
            return check_len(out.len(), payload.len());
        }
        Encoding::Msgpack => Codec::Msgpack,
        Encoding::Json => Codec::Json,
    };
    let opts = CallOptions::new().codec(codec);
    match &payload.value {
        Structured::Doc(v) => {
            let out: Value = conn.call_with("echo_doc", v, &opts).await.map_err(err)?;
            check_len(shape(&out), shape(v))
        }
        Structured::Msg(m) => {
            let out: Msg = conn.call_with("echo_msg", m, &opts).await.map_err(err)?;
            check_len(out.data.len(), m.data.len())
        }
    }
}

/// Sends the payload as one ITEM on the stream.
async fn send(sink: &ItemSink<Raw>, payload: &Payload) -> io::Result<()> {
    sink.send(&Raw(payload.raw.clone())).await.map_err(err)
}

/// Takes the next answer from the stream; checks its size.
async fn answer(answers: &mut ItemStream<Raw>, payload: &Payload) -> io::Result<()> {
    let out = answers.next().await.map_err(err)?.ok_or(io::ErrorKind::UnexpectedEof)?;
    check_len(out.0.len(), payload.len())
}

impl AsyncClient for HubwireClient {
    async fn call(&mut self) -> io::Result<()> {
        match &mut self.stream {
            Some((sink, answers)) => {
                send(sink, &self.payload).await?;
                answer(answers, &self.payload).await
            }
            None => call(&self.conn, &self.payload, self.encoding).await,
        }
    }

    /// Calls: `window` tasks sharing the connection. Stream: `window`
    /// items ahead of the answers, as the gRPC streams are driven.
    async fn pipeline(&mut self, window: usize, calls: u64) -> io::Result<()> {
        if let Some((sink, answers)) = &mut self.stream {
            let payload = &self.payload;
            return send_ahead(window, calls, async || send(sink, payload).await, async || answer(answers, payload).await).await;
        }
        in_tasks(window, calls, |share| {
            let (conn, payload, encoding) = (self.conn.clone(), self.payload.clone(), self.encoding);
            async move {
                while share.claim() {
                    call(&conn, &payload, encoding).await?;
                }
                Ok(())
            }
        })
        .await
    }
}
