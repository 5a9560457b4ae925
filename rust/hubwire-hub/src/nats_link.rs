//! The hub's links over NATS (`spec/PROTOCOL.md` §13): those it opens to
//! reach remote methods ([`NatsDialer`], the cluster behind `remote`), and
//! those it accepts to offer its local methods ([`offer`]).
//!
//! Offering: the hub is one replica of the provider named after it. Its
//! [`NatsListener`] subscribes a connect subject per local method, which
//! it learns as providers register, so the listener is bound again (a new
//! replica id) whenever the set of local methods changes; links already
//! open live on, served as before. The hub's own methods (`hubwire.*`)
//! are not offered by subject: every hub has them, and any link reaches
//! them.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::Client;
use hubwire::nats::{CallCounts, DialOptions, NatsListener, Offer, Target};
use hubwire::transport::{self, DynTransport};
use hubwire::{Error, Incoming, MethodInfo, ServeFuture, Service, Work};

use crate::registry::{Registry, RESERVED_PREFIX};
use crate::remote::{BoxFuture, LinkDialer};

/// Opens links through the cluster (`remote::LinkDialer`).
pub struct NatsDialer {
    client: Client,
    opts: DialOptions,
}

impl NatsDialer {
    /// Dials through `client` under `prefix`, naming itself `peer` in its
    /// connect requests.
    pub fn new(client: Client, prefix: &str, peer: &str) -> NatsDialer {
        NatsDialer { client, opts: DialOptions { prefix: prefix.into(), peer: Some(peer.into()), ..DialOptions::default() } }
    }
}

impl LinkDialer for NatsDialer {
    fn open(&self, target: &Target) -> BoxFuture<'_, io::Result<(DynTransport, String)>> {
        let target = target.clone();
        Box::pin(async move {
            match hubwire::transport::nats::dial(&self.client, &target, &self.opts).await {
                Ok((link, info)) => Ok((Arc::new(link) as DynTransport, format!("{}/{}", info.provider, info.replica))),
                Err(e) if e.is_no_responders() => Err(io::Error::new(io::ErrorKind::NotFound, e.message)),
                Err(e) => Err(io::Error::other(e.to_string())),
            }
        })
    }
}

/// What the hub has served the cluster, for `hubwire status`.
#[derive(Default)]
pub struct Served {
    /// Links open now.
    pub links: AtomicUsize,
    /// Calls taken over links so far.
    pub calls: AtomicU64,
}

/// A link's service: the hub's, with each call counted for `$SRV.STATS`
/// (per method, in the listener that accepted the link) and for status.
pub struct Counted<S> {
    /// The hub's service for links (never routing on to the cluster).
    pub inner: S,
    /// The accepting listener's counts.
    pub calls: Arc<CallCounts>,
    /// The hub's totals.
    pub served: Arc<Served>,
}

impl<S: Service> Service for Counted<S> {
    fn methods(&self) -> Vec<MethodInfo> {
        self.inner.methods()
    }

    fn call(&self, call: Incoming) -> Result<ServeFuture, Error> {
        self.start(call).map(Work::into_future)
    }

    fn start(&self, call: Incoming) -> Result<Work, Error> {
        self.calls.count(call.method());
        self.served.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.start(call)
    }
}

/// The local methods offered: every routed method of a provider of the
/// config (not remote pools, not the hub's own), sorted by name.
fn local_methods(reg: &Registry) -> Vec<MethodInfo> {
    let mut m: Vec<MethodInfo> =
        reg.routes().into_iter().map(|r| r.info.clone()).filter(|m| !m.name.starts_with(RESERVED_PREFIX)).collect();
    m.sort_by(|a, b| a.name.cmp(&b.name));
    m
}

/// How long the set of local methods must stay the same before the
/// listener is bound again (providers starting together register within
/// moments of each other).
const SETTLE: Duration = Duration::from_millis(50);
/// The wait before trying again when binding failed (the cluster down).
const RETRY: Duration = Duration::from_millis(500);

/// Offers the hub's local methods on the cluster until the hub stops:
/// each accepted link goes to `enter` with the counts of the listener
/// that accepted it.
pub async fn offer(
    client: Client,
    reg: Arc<Registry>,
    prefix: String,
    hub: String,
    enter: impl Fn(DynTransport, Arc<CallCounts>) + Send + Sync + 'static,
) {
    let enter = Arc::new(enter);
    let mut offered: Option<Vec<String>> = None;
    // Aborted when this future is dropped (the hub stops accepting), which
    // drops the listener: its subjects are unsubscribed.
    let mut _accepting: Option<AbortOnDrop> = None;
    loop {
        let changed = reg.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let methods = local_methods(&reg);
        let names: Vec<String> = methods.iter().map(|m| m.name.clone()).collect();
        if offered.as_ref() != Some(&names) {
            let offer = Offer { prefix: prefix.clone(), provider: hub.clone(), version: env!("CARGO_PKG_VERSION").into(), methods };
            match NatsListener::bind(client.clone(), offer).await {
                Ok(listener) => {
                    tracing::info!(replica = listener.replica(), methods = ?names, "offering on NATS");
                    let enter = enter.clone();
                    _accepting = Some(AbortOnDrop(tokio::spawn(async move {
                        let calls = listener.calls();
                        loop {
                            match transport::accept(&listener).await {
                                Ok(t) => enter(t, calls.clone()),
                                Err(e) => return tracing::warn!("NATS listener stopped: {e}"),
                            }
                        }
                    })));
                    offered = Some(names);
                }
                Err(e) => {
                    tracing::warn!("cannot offer on NATS ({e}); trying again in {RETRY:?}");
                    tokio::select! {
                        _ = tokio::time::sleep(RETRY) => continue,
                        _ = reg.stopped() => break,
                    }
                }
            }
        }
        tokio::select! {
            _ = changed => tokio::time::sleep(SETTLE).await,
            _ = reg.stopped() => break,
        }
    }
}

/// A task aborted when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
