//! Calls waiting in the hub for a provider's slot, bounded four ways: per
//! provider, calls (`queue`) and payload bytes (`queue_bytes`); per client
//! connection, calls (`client_queue`) and payload bytes
//! (`client_queue_bytes`). A call over any of them is refused at once with
//! `resource_exhausted` and a message naming the limit and its key, so
//! that a slow provider pins a bounded amount of the hub's memory however
//! many large calls are sent its way (`docs/hub.md#limits`). The bytes
//! of a waiting call are its payload and, for a call that streams in, the
//! items that arrive while it waits: they are taken off the stream (which
//! grants the caller credit for more) and counted, so a queued stream is
//! refused once its items pass the bound instead of pinning a window each.

use std::sync::atomic::{AtomicUsize, Ordering};

use hubwire::{Code, Error, ItemStream, Payload};
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

impl Waiting<'_> {
    /// Counts `n` more bytes (an item that arrived), or refuses them.
    fn grow(&mut self, n: usize) -> Result<(), Error> {
        let (p, c) = (&self.provider.config, self.client);
        let pb = |was| {
            format!("provider {:?} has {was} bytes of calls waiting; an item of {n} would pass queue_bytes = {}", p.name, p.queue_bytes)
        };
        let cb = |was| {
            format!(
                "this connection has {was} bytes of calls waiting in the hub; an item of {n} would pass client_queue_bytes = {}",
                c.max_bytes
            )
        };
        add_all(&[
            (Bound { count: &self.provider.queued_bytes, max: p.queue_bytes, says: &pb }, n),
            (Bound { count: &c.bytes, max: c.max_bytes, says: &cb }, n),
        ])?;
        self.bytes += n;
        Ok(())
    }
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

/// A call as it waits: its payload's size, and its input stream, if any,
/// with the items taken off it meanwhile.
pub struct Pinned<'a> {
    /// The REQUEST payload's size.
    pub bytes: usize,
    /// The caller's items (client_stream, bidi).
    pub items: Option<&'a mut ItemStream<Payload>>,
    /// Where items taken while waiting go, in order.
    pub held: &'a mut Vec<Payload>,
}

/// Takes a slot within the provider's `max_in_flight`, waiting in its
/// queue (and the client's) if need be, with what the call pins counted.
pub async fn admit(
    p: &ProviderState,
    client: &ClientQueue,
    call: Pinned<'_>,
    give_up: tokio::time::Instant,
) -> Result<OwnedSemaphorePermit, Error> {
    let Pinned { bytes, mut items, held } = call;
    if let Ok(permit) = p.gate.clone().try_acquire_owned() {
        return Ok(permit);
    }
    let cfg = &p.config;
    let name = &cfg.name;
    let busy = format!("provider {name:?} has {} calls in flight (max_in_flight)", cfg.max_in_flight);
    let (pc, pb) = (
        |n| format!("{busy} and {n} waiting (queue = {})", cfg.queue),
        |n| format!("{busy} and {n} bytes of calls waiting; this call's {bytes} would pass queue_bytes = {}", cfg.queue_bytes),
    );
    let (cc, cb) = (
        |n| format!("this connection has {n} calls waiting in the hub (client_queue = {})", client.max_calls),
        |n| {
            format!(
                "this connection has {n} bytes of calls waiting in the hub; this call's {bytes} would pass client_queue_bytes = {}",
                client.max_bytes
            )
        },
    );
    add_all(&[
        (Bound { count: &p.queued, max: cfg.queue, says: &pc }, 1),
        (Bound { count: &p.queued_bytes, max: cfg.queue_bytes, says: &pb }, bytes),
        (Bound { count: &client.calls, max: client.max_calls, says: &cc }, 1),
        (Bound { count: &client.bytes, max: client.max_bytes, says: &cb }, bytes),
    ])?;
    let mut waiting = Waiting { provider: p, client, bytes };
    let slot = tokio::time::timeout_at(give_up, p.gate.clone().acquire_owned());
    tokio::pin!(slot);
    loop {
        let item = async {
            match items.as_deref_mut() {
                Some(s) => s.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = &mut slot => return match r {
                Ok(Ok(permit)) => Ok(permit),
                Ok(Err(_)) => Err(Error::unavailable("the hub is shutting down")),
                Err(_) => Err(Error::new(
                    Code::ResourceExhausted,
                    format!("provider {name:?} is at its limit: waited {READY_WAIT:?} in its queue for a slot; try again later"),
                )),
            },
            item = item => match item? {
                Some(it) => {
                    waiting.grow(it.bytes.len())?;
                    held.push(it);
                }
                // The caller's END: nothing more arrives while we wait.
                None => items = None,
            },
        }
    }
}
