//! Calls waiting in the hub for a provider's slot, bounded four ways: per
//! provider, calls (`queue`) and payload bytes (`queue_bytes`); per client
//! connection, calls (`client_queue`) and payload bytes
//! (`client_queue_bytes`). A call over any of them is refused at once with
//! `resource_exhausted` and a message naming the limit and its key, so
//! that a slow provider pins a bounded amount of the hub's memory however
//! many large calls are sent its way (`docs/hub.md#limits`).

use std::sync::atomic::{AtomicUsize, Ordering};

use hubwire::{Code, Error};
use tokio::sync::OwnedSemaphorePermit;

use crate::registry::ProviderState;
use crate::route::READY_WAIT;

/// What one client connection has waiting in the hub, and its bounds.
pub struct ClientQueue {
    calls: AtomicUsize,
    bytes: AtomicUsize,
    max_calls: usize,
    max_bytes: usize,
}

impl ClientQueue {
    /// An empty queue with these bounds (`client_queue`, `client_queue_bytes`).
    pub fn new(max_calls: usize, max_bytes: usize) -> ClientQueue {
        ClientQueue { calls: AtomicUsize::new(0), bytes: AtomicUsize::new(0), max_calls, max_bytes }
    }
}

/// One counter and its bound, for the check-and-add below.
struct Bound<'a> {
    count: &'a AtomicUsize,
    max: usize,
    /// What the message says, e.g. `provider "m" has 16 calls waiting (queue = 16)`.
    says: &'a dyn Fn(usize) -> String,
}

/// A call's place in both queues; leaving drops it.
struct Waiting<'a> {
    provider: &'a ProviderState,
    client: &'a ClientQueue,
    bytes: usize,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.provider.queued.fetch_sub(1, Ordering::AcqRel);
        self.provider.queued_bytes.fetch_sub(self.bytes, Ordering::AcqRel);
        self.client.calls.fetch_sub(1, Ordering::AcqRel);
        self.client.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Adds `n` to every counter, or to none if one would pass its bound.
fn add_all(bounds: &[(Bound<'_>, usize)]) -> Result<(), Error> {
    for (i, (b, n)) in bounds.iter().enumerate() {
        let was = b.count.fetch_add(*n, Ordering::AcqRel);
        if was + n > b.max {
            for (undo, un) in &bounds[..=i] {
                undo.count.fetch_sub(*un, Ordering::AcqRel);
            }
            return Err(Error::new(Code::ResourceExhausted, format!("{}; try again later", (b.says)(was))));
        }
    }
    Ok(())
}

/// Takes a slot within the provider's `max_in_flight`, waiting in its
/// queue (and the client's) if need be; `bytes` is what the call pins
/// while it waits (its payload).
pub async fn admit(p: &ProviderState, client: &ClientQueue, bytes: usize, give_up: tokio::time::Instant) -> Result<OwnedSemaphorePermit, Error> {
    if let Ok(permit) = p.gate.clone().try_acquire_owned() {
        return Ok(permit);
    }
    let cfg = &p.config;
    let name = &cfg.name;
    let busy = format!("provider {name:?} has {} calls in flight (max_in_flight)", cfg.max_in_flight);
    let (pc, pb) = (|n| format!("{busy} and {n} waiting (queue = {})", cfg.queue), |n| {
        format!("{busy} and {n} bytes of calls waiting; this call's {bytes} would pass queue_bytes = {}", cfg.queue_bytes)
    });
    let (cc, cb) = (|n| format!("this connection has {n} calls waiting in the hub (client_queue = {})", client.max_calls), |n| {
        format!("this connection has {n} bytes of calls waiting in the hub; this call's {bytes} would pass client_queue_bytes = {}", client.max_bytes)
    });
    add_all(&[
        (Bound { count: &p.queued, max: cfg.queue, says: &pc }, 1),
        (Bound { count: &p.queued_bytes, max: cfg.queue_bytes, says: &pb }, bytes),
        (Bound { count: &client.calls, max: client.max_calls, says: &cc }, 1),
        (Bound { count: &client.bytes, max: client.max_bytes, says: &cb }, bytes),
    ])?;
    let _waiting = Waiting { provider: p, client, bytes };
    match tokio::time::timeout_at(give_up, p.gate.clone().acquire_owned()).await {
        Ok(Ok(permit)) => Ok(permit),
        Ok(Err(_)) => Err(Error::unavailable("the hub is shutting down")),
        Err(_) => Err(Error::new(
            Code::ResourceExhausted,
            format!("provider {name:?} is at its limit: waited {READY_WAIT:?} in its queue for a slot; try again later"),
        )),
    }
}
