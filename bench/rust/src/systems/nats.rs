//! hubwire over NATS (`spec/PROTOCOL.md` §13) against NATS itself, over
//! the one local `nats-server` the run starts (`Context::nats`):
//!
//! * `nats-request-reply`, the floor of unary calls: a hand-written
//!   async-nats responder (`bench-peer nats-echo`) answering each request
//!   with its payload, called with NATS request-reply;
//! * `hubwire-efficient` / `hubwire-low-latency` on the `nats` transport:
//!   the bench provider attached to NATS as a replica (`bench-peer hubwire
//!   --nats URL`), called over one link dialed to that replica;
//! * `nats-publish-loop`, the floor of a server stream: one request asks
//!   the responder to publish N messages of the payload to the caller's
//!   inbox (no flow control; the caller's subscription holds up to 2^20
//!   messages so that a turn is not dropped), against
//! * `hubwire-server-stream`: one `repeat` call whose N items are the
//!   payload, under hubwire's credit (at most a window of items buffered).
//!
//! Each started server uses subjects of its own, so the rows of one
//! comparison run side by side on the one NATS server.
//!
//! The bench's clients run on current-thread runtimes that only run during
//! their own turns, while the other rows of a comparison take theirs. A
//! NATS client's I/O task must run all the time, or its heartbeats stop
//! and the peer breaks its links after 600 ms of silence (§13.5): so each
//! target's NATS clients are connected on a runtime of their own, with one
//! worker thread, for hubwire's rows and the floors' alike.

use std::io;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::StreamExt;
use hubwire::nats::{self, Target as NatsTarget};
use hubwire::transport::nats::async_nats;
use hubwire::{CallOptions, Connection, ConnectionOptions, Raw, WaitMode};

use super::hubwire::{client as hubwire_client, job_wait_mode, provider};
use crate::client::{check_len, in_tasks, runtime, AsyncClient, Client, OnRuntime};
use crate::model::{Job, System};
use crate::payload::Payload;
use crate::peer::{bench_peer, Peer};
use crate::runner::Target;
use crate::serve::ready;

/// Messages the floors' client subscriptions hold unread (async-nats
/// drops beyond): large, so that the publish loop's turn arrives whole.
const FLOOR_PENDING: usize = 1 << 20;

/// The credit the server stream's caller grants (items): what may be in
/// flight towards it, at most this × the item (512 KiB of 1 KiB items).
/// The default 64 leaves the producer waiting a round trip for credit
/// every 32 items, which over NATS (a hop through the server each way)
/// halves the rate.
const STREAM_WINDOW: u32 = 512;

/// How long a publish loop's caller waits for its next message before it
/// gives up (a dropped message would otherwise hang the row).
const STALL: Duration = Duration::from_secs(10);

fn err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// `bench-peer hubwire --nats URL`: the bench provider as a replica on
/// NATS; prints `ready <replica id>`.
pub fn serve_hubwire(url: &str, wait: &str) -> io::Result<()> {
    let wait = match wait {
        "low-latency" => WaitMode::low_latency(),
        _ => WaitMode::Efficient,
    };
    runtime()?.block_on(async {
        let client = nats::connect(url).await.map_err(err)?;
        let replica =
            nats::serve(provider(), client, &Default::default(), ConnectionOptions::new("bench").wait(wait)).await.map_err(err)?;
        ready(replica.id());
        std::future::pending::<io::Result<()>>().await
    })
}

/// `bench-peer nats-echo --nats URL`: the hand-written responder. On
/// `<base>.echo` it answers a request with its payload; on
/// `<base>.publish` (payload: count, u64 LE, then the item) it publishes
/// the item count times to the reply subject. Prints `ready <base>`.
pub fn serve_floor(url: &str) -> io::Result<()> {
    runtime()?.block_on(async {
        let client = floor_client(url).await?;
        let base = format!("bench.{}", std::process::id());
        let mut echo = client.subscribe(format!("{base}.echo")).await.map_err(err)?;
        let mut publish = client.subscribe(format!("{base}.publish")).await.map_err(err)?;
        client.flush().await.map_err(err)?;
        // The subscriptions are on the server once a message to ourselves
        // is back (flush only writes out the client's buffer).
        let inbox = client.new_inbox();
        let mut me = client.subscribe(inbox.clone()).await.map_err(err)?;
        client.publish(inbox, Bytes::new()).await.map_err(err)?;
        me.next().await;
        ready(&base);
        loop {
            tokio::select! {
                Some(m) = echo.next() => {
                    if let Some(reply) = m.reply {
                        client.publish(reply, m.payload).await.map_err(err)?;
                    }
                }
                Some(m) = publish.next() => {
                    let (Some(reply), true) = (m.reply, m.payload.len() >= 8) else { continue };
                    let n = u64::from_le_bytes(m.payload[..8].try_into().expect("8 bytes"));
                    let item = m.payload.slice(8..);
                    for _ in 0..n {
                        client.publish(reply.clone(), item.clone()).await.map_err(err)?;
                    }
                }
                else => return Ok(()),
            }
        }
    })
}

async fn floor_client(url: &str) -> io::Result<async_nats::Client> {
    async_nats::ConnectOptions::new().subscription_capacity(FLOOR_PENDING).connect(url).await.map_err(err)
}

/// Starts the server side of a job on the `nats` transport.
pub fn start(job: &Job, url: Option<&str>) -> io::Result<Box<dyn Target>> {
    let url = url.ok_or_else(|| io::Error::other("no nats-server in this run (run `make deps` to install it)"))?.to_string();
    let (args, wait): (Vec<&str>, WaitMode) = match job.system {
        System::NatsRequestReply | System::NatsPublishLoop => (vec!["nats-echo"], WaitMode::Efficient),
        _ => {
            let (mode, wait) = job_wait_mode(job)?;
            (vec!["hubwire", "--wait", mode], wait)
        }
    };
    let mut cmd = Command::new(bench_peer()?);
    cmd.args(&args).args(["--nats", &url]);
    let peer = Peer::listening(cmd)?;
    let io = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    Ok(Box::new(OnNats { url, name: peer.address.clone(), system: job.system, wait, payload: job.payload.clone(), peer, io }))
}

/// A server attached to the run's NATS server: a replica (its id in
/// `name`) or the responder (its subject base).
struct OnNats {
    url: String,
    name: String,
    system: System,
    wait: WaitMode,
    payload: Arc<Payload>,
    peer: Peer,
    /// Where the NATS clients' I/O runs (see the module's doc).
    io: tokio::runtime::Runtime,
}

impl Target for OnNats {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        let rt = runtime()?;
        let payload = self.payload.clone();
        match self.system {
            System::NatsRequestReply | System::NatsPublishLoop => {
                let client = self.io.block_on(floor_client(&self.url))?;
                let floor = Floor { client, base: self.name.clone(), payload, publish: self.system == System::NatsPublishLoop };
                Ok(OnRuntime::boxed(rt, floor))
            }
            system => {
                let mut config = ConnectionOptions::new("bench-client").wait(self.wait);
                if system == System::HubwireServerStream {
                    config = config.window(STREAM_WINDOW);
                }
                let client = self.io.block_on(nats::connect(&self.url)).map_err(err)?;
                let conn = rt.block_on(async {
                    let target = NatsTarget::Replica(self.name.clone());
                    nats::dial(&client, &target, &config, &Default::default()).await.map(|(c, _)| c).map_err(err)
                })?;
                if system == System::HubwireServerStream {
                    return Ok(OnRuntime::boxed(rt, ServerStream { conn, payload }));
                }
                hubwire_client(rt, conn, &payload, crate::model::Encoding::Raw, false, None)
            }
        }
    }

    fn peers(&self) -> Vec<u32> {
        vec![self.peer.pid()]
    }
}

/// The NATS floors' client: request-reply, or one request and N messages.
struct Floor {
    client: async_nats::Client,
    base: String,
    payload: Arc<Payload>,
    publish: bool,
}

async fn request(client: &async_nats::Client, subject: String, payload: &Payload) -> io::Result<()> {
    let m = client.request(subject, payload.raw.clone()).await.map_err(err)?;
    check_len(m.payload.len(), payload.len())
}

impl AsyncClient for Floor {
    async fn call(&mut self) -> io::Result<()> {
        match self.publish {
            true => self.pipeline(1, 1).await,
            false => request(&self.client, format!("{}.echo", self.base), &self.payload).await,
        }
    }

    /// Request-reply: `window` tasks sharing the client. Publish loop: one
    /// request for `calls` messages, each checked.
    async fn pipeline(&mut self, window: usize, calls: u64) -> io::Result<()> {
        if !self.publish {
            let subject = format!("{}.echo", self.base);
            return in_tasks(window, calls, |share| {
                let (client, subject, payload) = (self.client.clone(), subject.clone(), self.payload.clone());
                async move {
                    while share.claim() {
                        request(&client, subject.clone(), &payload).await?;
                    }
                    Ok(())
                }
            })
            .await;
        }
        let inbox = self.client.new_inbox();
        let mut sub = self.client.subscribe(inbox.clone()).await.map_err(err)?;
        let mut ask = BytesMut::with_capacity(8 + self.payload.len());
        ask.put_u64_le(calls);
        ask.put_slice(&self.payload.raw);
        self.client.publish_with_reply(format!("{}.publish", self.base), inbox, ask.freeze()).await.map_err(err)?;
        for i in 0..calls {
            let m = tokio::time::timeout(STALL, sub.next())
                .await
                .map_err(|_| io::Error::other(format!("publish loop: message {i} of {calls} never came (dropped)")))?
                .ok_or(io::ErrorKind::UnexpectedEof)?;
            check_len(m.payload.len(), self.payload.len())?;
        }
        Ok(())
    }
}

/// hubwire's server stream: one `repeat` call per turn, `calls` items.
struct ServerStream {
    conn: Connection,
    payload: Arc<Payload>,
}

impl AsyncClient for ServerStream {
    async fn call(&mut self) -> io::Result<()> {
        self.pipeline(1, 1).await
    }

    async fn pipeline(&mut self, _window: usize, calls: u64) -> io::Result<()> {
        let input = (calls, serde_bytes::ByteBuf::from(self.payload.raw.to_vec()));
        let mut items = self.conn.server_stream::<_, Raw>("repeat", &input, &CallOptions::new()).await.map_err(err)?;
        for _ in 0..calls {
            let item = items.next().await.map_err(err)?.ok_or(io::ErrorKind::UnexpectedEof)?;
            check_len(item.0.len(), self.payload.len())?;
        }
        Ok(())
    }
}
