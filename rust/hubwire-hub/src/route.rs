//! What the hub serves its clients, [`HubService`]: its own methods, and
//! every provider's, each call routed: find the method's provider, admit
//! the call within the provider's limit (or refuse it with
//! `resource_exhausted` when the queue is full), pick the ready replica
//! with the fewest calls in flight, and pass the call on untouched
//! ([`Routed::forward`]).
//!
//! The hub enforces the caller's deadline itself (the runtime stops the
//! routed call when it passes) and sends what is left of it onward, so a
//! provider never works on a call nobody waits for.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hubwire::{Code, Error, Incoming, MethodInfo, Payload, Provider, Routed, ServeFuture, Service};
use tokio::sync::OwnedSemaphorePermit;

use crate::registry::{ProviderState, Registry, Replica, Route};

/// How long a call waits in the hub before it fails (or less, if its
/// deadline is sooner): for a provider that may offer its method to say
/// HELLO, for a replica of a restarting provider (then `unavailable`), and
/// in a provider's queue for a slot (then `resource_exhausted`).
pub const READY_WAIT: Duration = Duration::from_secs(10);

/// The hub as its clients see it: its own methods (`own`), then every
/// method of every provider in the registry, relayed.
pub struct HubService {
    /// The hub's own methods (status, the method list).
    pub own: Provider,
    /// Providers and methods.
    pub registry: Arc<Registry>,
}

impl Service for HubService {
    fn methods(&self) -> Vec<MethodInfo> {
        let routed = self.registry.routes().into_iter().map(|r| r.info.clone()).filter(|m| !self.own.has(&m.name));
        self.own.methods().into_iter().chain(routed).collect()
    }

    fn call(&self, call: Incoming) -> Result<ServeFuture, Error> {
        if self.own.has(call.method()) {
            return self.own.call(call);
        }
        let reg = self.registry.clone();
        Ok(Box::pin(async move { dispatch(&reg, Routed::new(call)).await }))
    }
}

async fn dispatch(reg: &Registry, call: Routed) -> Result<Option<Payload>, Error> {
    let method = call.ctx.method();
    let route = find(reg, method).await?;
    if route.info.kind != call.kind {
        return Err(Error::invalid_argument(format!("method {method:?} is {}, called as {}", route.info.kind.name(), call.kind.name())));
    }
    let p = &route.provider;
    let waited = Instant::now();
    let slot = async {
        let permit = admit(p, give_up()).await?;
        let (replica, conn) = ready_replica(reg, p).await?;
        Ok::<_, Error>((permit, replica, conn))
    };
    // Refused before any replica saw it (full queue, no replica): counted
    // against the provider, so that a scrape shows what callers were told.
    let (_permit, replica, conn) = slot.await.inspect_err(|e| p.refusals.record(waited.elapsed(), e.code()))?;
    let mut load = Load::new(&replica);
    let opts = call.remaining();
    let result = call.forward(&conn, &opts).await;
    load.finish(result.as_ref().err().map_or(Code::Ok, Error::code));
    result.map_err(|e| match e.code() {
        Code::Unavailable => Error::unavailable(format!("provider {:?} (replica {}): {}", p.config.name, replica.index, e.message())),
        _ => e,
    })
}

/// The method's route. While some provider has not yet said HELLO it may
/// be the one offering the method, so the call waits for it (up to
/// [`READY_WAIT`] or its deadline) before it is refused.
async fn find(reg: &Registry, method: &str) -> Result<Arc<Route>, Error> {
    let give_up = give_up();
    loop {
        let changed = reg.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if let Some(route) = reg.route(method) {
            return Ok(route);
        }
        let pending = reg.pending();
        if pending.is_empty() || reg.is_stopping() {
            return Err(unknown(reg, method));
        }
        if tokio::time::timeout_at(give_up, changed).await.is_err() {
            return Err(Error::unavailable(format!("no provider offers {method:?} yet; still starting (they may): {pending:?}")));
        }
    }
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
    Error::new(Code::UnknownMethod, format!("unknown method {method:?}: no provider offers it; methods: {shown}"))
}

/// Takes a slot within the provider's `max_in_flight`, waiting in its
/// bounded queue if need be.
async fn admit(p: &ProviderState, give_up: tokio::time::Instant) -> Result<OwnedSemaphorePermit, Error> {
    if let Ok(permit) = p.gate.clone().try_acquire_owned() {
        return Ok(permit);
    }
    let cfg = &p.config;
    if p.queued.fetch_add(1, Ordering::AcqRel) >= cfg.queue {
        p.queued.fetch_sub(1, Ordering::AcqRel);
        return Err(Error::new(
            Code::ResourceExhausted,
            format!(
                "provider {:?} is at its limit: {} calls in flight and {} waiting (max_in_flight, queue); try again later",
                cfg.name, cfg.max_in_flight, cfg.queue
            ),
        ));
    }
    struct Queued<'a>(&'a ProviderState);
    impl Drop for Queued<'_> {
        fn drop(&mut self) {
            self.0.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
    let _queued = Queued(p);
    match tokio::time::timeout_at(give_up, p.gate.clone().acquire_owned()).await {
        Ok(Ok(permit)) => Ok(permit),
        Ok(Err(_)) => Err(Error::unavailable("the hub is shutting down")),
        Err(_) => Err(Error::new(
            Code::ResourceExhausted,
            format!("provider {:?} is at its limit: waited {READY_WAIT:?} in its queue for a slot; try again later", cfg.name),
        )),
    }
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
}

impl Load {
    fn new(r: &Arc<Replica>) -> Load {
        r.in_flight.fetch_add(1, Ordering::Relaxed);
        Load { replica: r.clone(), start: Instant::now(), code: Code::Cancelled }
    }

    fn finish(&mut self, code: Code) {
        self.code = code;
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.replica.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.replica.metrics.record(self.start.elapsed(), self.code);
    }
}
