//! hubwire itself: a provider with echo methods (raw bytes, a document, a
//! message) and a client calling it, on every transport, in either wait
//! mode. Both sides run on a tokio current-thread runtime; the client's
//! loops run inside one `block_on`, as an application's would.

use std::io;
use std::sync::Arc;

use hubwire::{CallOptions, Codec, Connection, ConnectionOptions, Provider, Raw, WaitMode};
use serde_json::Value;

use super::endpoint::{Addr, Children, Listening};
use crate::client::{check_len, in_tasks, runtime, AsyncClient, Client, OnRuntime};
use crate::model::{Encoding, Job, Transport};
use crate::payload::{shape, Msg, Payload, Structured};
use crate::runner::Target;
use crate::serve::{ready, Listen};

/// The methods every hubwire server in the bench offers.
pub fn provider() -> Provider {
    Provider::new("bench")
        .unary("echo", |_ctx, x: Raw| async move { Ok(x) })
        .unary("echo_doc", |_ctx, x: Value| async move { Ok(x) })
        .unary("echo_msg", |_ctx, x: Msg| async move { Ok(x) })
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
pub fn serve(listen: Option<Listen>, wait: &str) -> io::Result<()> {
    let config = ConnectionOptions::new("bench").wait(wait_mode(wait)?);
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
        Transport::Unix | Transport::Tcp => {
            let server = Listening::start(&["hubwire", "--wait", mode], job.transport)?;
            Box::new(Remote { addr: server.addr.clone(), pids: vec![server.pid()], _server: Some(server), wait, payload, encoding })
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
}

impl Remote {
    /// A server started by someone else (the hub).
    pub fn external(addr: Addr, pids: Vec<u32>, wait: WaitMode, job: &Job) -> Remote {
        Remote { addr, pids, _server: None, wait, payload: job.payload.clone(), encoding: job.encoding }
    }
}

impl Target for Remote {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        let rt = runtime()?;
        let config = ConnectionOptions::new("bench-client").wait(self.wait);
        let conn = rt.block_on(async {
            match &self.addr {
                Addr::Unix(p) => Connection::dial(hubwire::transport::unix::connect(p).await?, &config).await.map_err(err),
                Addr::Tcp(a) => Connection::dial(hubwire::transport::tcp::connect(a.as_str()).await?, &config).await.map_err(err),
            }
        })?;
        Ok(client(rt, conn, &self.payload, self.encoding, None))
    }

    fn peers(&self) -> Vec<u32> {
        self.pids.clone()
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
            let conn = Connection::dial(t, &ConnectionOptions::new("bench-client").wait(self.wait)).await.map_err(err)?;
            Ok::<_, io::Error>((conn, child))
        })?;
        if let Some(pid) = child.id() {
            self.children.add(pid);
        }
        Ok(client(rt, conn, &self.payload, self.encoding, Some(Box::new(child))))
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
        Ok(client(rt, conn, &self.payload, self.encoding, None))
    }

    fn peers(&self) -> Vec<u32> {
        Vec::new()
    }
}

/// One connection's client side, on the runtime it was dialled on.
fn client(
    rt: tokio::runtime::Runtime,
    conn: Connection,
    payload: &Arc<Payload>,
    encoding: Encoding,
    keep: Option<Box<dyn Send>>,
) -> Box<dyn Client> {
    let payload = payload.clone();
    OnRuntime::boxed(rt, HubwireClient { conn, payload, encoding, _keep: keep })
}

struct HubwireClient {
    conn: Connection,
    payload: Arc<Payload>,
    encoding: Encoding,
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

impl AsyncClient for HubwireClient {
    async fn call(&mut self) -> io::Result<()> {
        call(&self.conn, &self.payload, self.encoding).await
    }

    /// `window` tasks sharing the connection.
    async fn pipeline(&mut self, window: usize, calls: u64) -> io::Result<()> {
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
