//! What the hub serves its clients, [`HubService`]: its own methods, and
//! every provider's, each call routed: find the method's provider, admit
//! the call within the provider's limit (or refuse it with
//! `resource_exhausted` when the queue is full), pick the ready replica
//! with the fewest calls in flight, and pass the call on untouched
//! ([`Routed::forward`]).
//!
//! The hub enforces the caller's deadline itself (the runtime stops the
//! routed call when it passes) and sends what is left of it onward, so a
//! provider never works on a call nobody waits for. A call that arrives
//! without a deadline gets the provider's `default_deadline` (or the
//! hub's), counted from its arrival, so that no call waits forever.
//!
//! A method no provider has registered fails at once with
//! `unknown_method`, even while some provider is still starting (the
//! message names them): a caller is never held for a provider that may
//! never come up. In a hub that joined a NATS cluster, such a call goes to
//! the cluster instead (`remote`), and fails `unknown_method` at once only
//! if nobody there offers the method either.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hubwire::{CallOptions, Code, Error, Incoming, MethodInfo, Payload, Provider, Routed, ServeFuture, Service};

use crate::config::HubLimits;
use crate::queue::{admit, ClientQueue, Pinned};
use crate::registry::{ProviderState, Registry, Replica};

/// How long a call waits in the hub before it fails (or less, if its
/// deadline is sooner): for a provider that may offer its method to say
/// HELLO, for a replica of a restarting provider (then `unavailable`), and
/// in a provider's queue for a slot (then `resource_exhausted`).
pub const READY_WAIT: Duration = Duration::from_secs(10);

/// The hub as one client connection sees it: its own methods (`own`),
/// then every method of every provider in the registry, relayed; each
/// connection has its own [`ClientQueue`] ([`HubService::for_client`]).
#[derive(Clone)]
pub struct HubService {
    /// The hub's own methods (status, the method list).
    pub own: Arc<Provider>,
    /// Providers and methods.
    pub registry: Arc<Registry>,
    /// `[hub]` limits: default deadline, client queue bounds.
    pub limits: HubLimits,
    /// What this connection has waiting in the hub.
    pub client: Arc<ClientQueue>,
    /// Its clients may take the direct path (they are trusted, §14.1).
    pub direct: bool,
    /// Send a call for a method no local provider offers to the cluster
    /// (`[nats] route`; never for a call that came from the cluster, so
    /// that no call goes round between hubs).
    pub to_cluster: bool,
}

impl HubService {
    /// The service for a new client connection: shared registry, a queue
    /// of its own.
    pub fn for_client(&self) -> HubService {
        let client = Arc::new(ClientQueue::new(self.limits.client_queue, self.limits.client_queue_bytes));
        HubService { client, ..self.clone() }
    }
}

impl Service for HubService {
    /// The hub's own methods, every local provider's, and (for a client
    /// that may be routed to the cluster) the remote methods the hub has
    /// links for already; others are found on their first call.
    fn methods(&self) -> Vec<MethodInfo> {
        let remote = self.registry.cluster.get().filter(|_| self.to_cluster).map(|c| c.routes()).unwrap_or_default();
        let routed = self.registry.routes().into_iter().chain(remote).map(|r| r.info.clone()).filter(|m| !self.own.has(&m.name));
        self.own.methods().into_iter().chain(routed).collect()
    }

    fn call(&self, call: Incoming) -> Result<ServeFuture, Error> {
        if self.own.has(call.method()) {
            return self.own.call(call);
        }
        if crate::direct::is_offer(call.method()) {
            return crate::direct::offer(&self.registry, self.direct, call);
        }
        let this = self.clone();
        Ok(Box::pin(async move { dispatch(&this, Routed::new(call)).await }))
    }
}

async fn dispatch(hub: &HubService, mut call: Routed) -> Result<Option<Payload>, Error> {
    let arrived = tokio::time::Instant::now();
    let reg = &*hub.registry;
    // Counted from here, waiting for a slot included: callers queued
    // behind one another are not one caller after another.
    let _routed = reg.routed.busy();
    let method = call.ctx.method();
    let route = match reg.route(method) {
        Some(r) => r,
        None if hub.to_cluster => crate::remote::route(&hub.registry, method).await.unwrap_or_else(|| Err(unknown(reg, method)))?,
        None => return Err(unknown(reg, method)),
    };
    if route.info.kind != call.kind {
        return Err(Error::invalid_argument(format!("method {method:?} is {}, called as {}", route.info.kind.name(), call.kind.name())));
    }
    let p = &route.provider;
    let waited = Instant::now();
    let slot = async {
        let pinned = Pinned { bytes: call.input.bytes.len(), items: call.items.as_mut(), held: &mut call.held };
        let permit = admit(p, &hub.client, pinned, give_up()).await?;
        let (replica, conn) = ready_replica(reg, p).await?;
        Ok::<_, Error>((permit, replica, conn))
    };
    // Refused before any replica saw it (full queue, no replica): counted
    // against the provider, so that a scrape shows what callers were told.
    let (_permit, replica, conn) = slot.await.inspect_err(|e| p.refusals.record(waited.elapsed(), e.code()))?;
    let mut load = Load::new(&replica);
    let opts = onward(&call, p.config.default_deadline.unwrap_or(hub.limits.default_deadline), arrived);
    let key = load.key;
    let result = call.forward_watched(&conn, &opts, &|| replica.call_moved(key)).await;
    load.finish(result.as_ref().err().map_or(Code::Ok, Error::code));
    result.map_err(|e| match e.code() {
        Code::Unavailable => {
            let hung = replica.hung.lock().unwrap().clone();
            let why = hung.map_or_else(|| e.message().to_string(), |h| format!("{h}; restarting it"));
            Error::unavailable(format!("provider {:?} (replica {}): {why}", p.config.name, replica.index))
        }
        _ => e,
    })
}

/// The onward call's options: what is left of the caller's deadline, or,
/// for a call that came without one, of `default` counted from `arrived`.
fn onward(call: &Routed, default: Option<Duration>, arrived: tokio::time::Instant) -> CallOptions {
    let mut opts = call.remaining();
    if opts.timeout.is_none() {
        let now = tokio::time::Instant::now();
        opts.timeout = default.map(|d| (arrived + d).saturating_duration_since(now).max(Duration::from_nanos(1)));
    }
    opts
}

/// When a call stops waiting in the hub (for a route, a replica, a
/// slot): [`READY_WAIT`] from now. A sooner deadline needs nothing here:
/// the runtime ends the call with `deadline_exceeded` when it passes.
fn give_up() -> tokio::time::Instant {
    tokio::time::Instant::now() + READY_WAIT
}

fn unknown(reg: &Registry, method: &str) -> Error {
    let names: Vec<String> = reg.routes().into_iter().map(|r| r.info.name.clone()).collect();
    let shown = if names.len() > 20 { format!("{:?} and {} more", &names[..20], names.len() - 20) } else { format!("{names:?}") };
    let pending = reg.pending();
    let starting = if pending.is_empty() { String::new() } else { format!(" (still starting, not yet known: {pending:?})") };
    Error::new(Code::UnknownMethod, format!("unknown method {method:?}: no provider offers it{starting}; methods: {shown}"))
}

/// The ready replica with the fewest calls in flight; waits (up to
/// [`READY_WAIT`]) while the provider is starting or restarting.
async fn ready_replica(reg: &Registry, p: &ProviderState) -> Result<(Arc<Replica>, hubwire::Connection), Error> {
    let give_up = give_up();
    loop {
        let changed = p.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if let Some(found) = p.pick() {
            return Ok(found);
        }
        if let Some(why) = p.failed() {
            return Err(Error::unavailable(format!("provider {:?} has failed: {why}", p.config.name)));
        }
        if reg.is_stopping() {
            return Err(Error::unavailable("the hub is shutting down"));
        }
        if tokio::time::timeout_at(give_up, changed).await.is_err() {
            let last = p.replicas.iter().find_map(|r| r.state.lock().unwrap().last_exit.clone());
            return Err(Error::unavailable(format!(
                "no replica of provider {:?} is ready (still starting{})",
                p.config.name,
                last.map(|l| format!("; last exit: {l}")).unwrap_or_default()
            )));
        }
    }
}

/// Counts a call against a replica while it is in flight, and records how
/// it ended, however it ends: a call whose caller went away (the routed
/// future dropped) counts as `cancelled`.
struct Load {
    replica: Arc<Replica>,
    start: Instant,
    code: Code,
    /// Its entry in the replica's `progress`.
    key: u64,
}

impl Load {
    fn new(r: &Arc<Replica>) -> Load {
        r.in_flight.fetch_add(1, Ordering::Relaxed);
        Load { replica: r.clone(), start: Instant::now(), code: Code::Cancelled, key: r.call_started() }
    }

    fn finish(&mut self, code: Code) {
        self.code = code;
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.replica.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.replica.call_ended(self.key);
        self.replica.metrics.record(self.start.elapsed(), self.code);
    }
}
