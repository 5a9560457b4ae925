//! A system's client side: the [`Client`] interface the runner drives, and
//! the loops that drive it, written once for every system.
//!
//! The sequential loop, [`timed_calls`], is the one place a call is timed.
//! It is async so that async clients run it inside their runtime (one
//! `block_on` for the whole loop, as an application would, so entering
//! the runtime costs nothing per call); a synchronous client's calls never
//! wait, so its loop completes in a single poll ([`run_sync`]). Either way
//! each iteration is the call, one clock read and one push: nothing is
//! boxed, allocated or called through a `dyn` per call.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;

/// One connection's client side.
pub trait Client: Send {
    /// One round trip of the job's payload; checks the answer's size.
    fn call(&mut self) -> io::Result<()>;

    /// Round trips one at a time until `until` or `max` calls, pushing each
    /// one's duration (ns) to `lat`.
    fn sequential(&mut self, until: Instant, max: u64, lat: &mut Vec<u32>) -> io::Result<()> {
        run_sync(timed_calls(until, max, lat, async || self.call()))
    }

    /// `calls` round trips with `window` of them in flight at once.
    fn pipeline(&mut self, _window: usize, _calls: u64) -> io::Result<()> {
        Err(no_pipeline())
    }
}

/// The sequential loop: calls one at a time until `until` (checked after
/// each call) or `max` calls, pushing each one's duration (ns) to `lat`.
/// A call's end is the next one's start, so each iteration reads the
/// clock once.
pub async fn timed_calls(until: Instant, max: u64, lat: &mut Vec<u32>, mut call: impl AsyncFnMut() -> io::Result<()>) -> io::Result<()> {
    let mut t0 = Instant::now();
    for _ in 0..max {
        call().await?;
        let t1 = Instant::now();
        lat.push(ns(t1 - t0));
        if t1 >= until {
            break;
        }
        t0 = t1;
    }
    Ok(())
}

/// Runs a future that never waits (a synchronous client's loop) to its
/// end, on this thread, in one poll: no runtime is involved. Panics if the
/// future waits, which only an async client's would.
pub fn run_sync<T>(f: impl Future<Output = T>) -> T {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("a synchronous client's calls never wait"),
    }
}

/// A duration in ns, saturating at `u32::MAX` (4.3 s).
fn ns(d: Duration) -> u32 {
    d.as_nanos().min(u32::MAX as u128) as u32
}

/// Fails unless an answer has the size sent.
pub fn check_len(got: usize, sent: usize) -> io::Result<()> {
    if got == sent {
        Ok(())
    } else {
        Err(io::Error::new(io::ErrorKind::InvalidData, format!("answer of {got} bytes to a call of {sent}")))
    }
}

fn no_pipeline() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, "this client does not pipeline")
}

/// The runtime every async side of the bench runs on, client and server:
/// tokio's current-thread runtime, as hubwire's own (on two CPUs it is
/// also tonic's and hyper's fastest setup). One definition, so that no
/// system gets a different one by accident.
pub fn runtime() -> io::Result<Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// A client whose calls are async (hubwire, tonic, hyper). [`OnRuntime`]
/// makes it a [`Client`].
pub trait AsyncClient: Send {
    /// One round trip of the job's payload; checks the answer's size.
    fn call(&mut self) -> impl Future<Output = io::Result<()>>;

    /// `calls` round trips with `window` of them in flight at once.
    fn pipeline(&mut self, _window: usize, _calls: u64) -> impl Future<Output = io::Result<()>> {
        async { Err(no_pipeline()) }
    }
}

/// An [`AsyncClient`] on the current-thread runtime it connected on; each
/// of its loops runs inside one `block_on`.
pub struct OnRuntime<C> {
    // Field order is drop order: the runtime goes before the client, as it
    // did in each async client before they shared this type, so that their
    // teardown is unchanged.
    rt: Runtime,
    client: C,
}

impl<C: AsyncClient + 'static> OnRuntime<C> {
    /// `client`, connected on `rt`, as a [`Client`].
    pub fn boxed(rt: Runtime, client: C) -> Box<dyn Client> {
        Box::new(OnRuntime { rt, client })
    }
}

impl<C: AsyncClient> Client for OnRuntime<C> {
    fn call(&mut self) -> io::Result<()> {
        self.rt.block_on(self.client.call())
    }

    fn sequential(&mut self, until: Instant, max: u64, lat: &mut Vec<u32>) -> io::Result<()> {
        let client = &mut self.client;
        self.rt.block_on(timed_calls(until, max, lat, async || client.call().await))
    }

    fn pipeline(&mut self, window: usize, calls: u64) -> io::Result<()> {
        self.rt.block_on(self.client.pipeline(window, calls))
    }
}

/// Pipelining by sending ahead: `window` requests first, then an answer
/// and a request in turn, until `calls` answers are in. For clients with
/// one ordered stream each way (in-process channels, a gRPC stream).
pub async fn send_ahead(
    window: usize,
    calls: u64,
    mut send: impl AsyncFnMut() -> io::Result<()>,
    mut answer: impl AsyncFnMut() -> io::Result<()>,
) -> io::Result<()> {
    let first = (window as u64).min(calls);
    for _ in 0..first {
        send().await?;
    }
    for i in 0..calls {
        answer().await?;
        if i + first < calls {
            send().await?;
        }
    }
    Ok(())
}

/// Pipelining by concurrency: `window` tasks on the current runtime, each
/// calling until `calls` calls have been started. For clients whose
/// connection multiplexes calls (hubwire, HTTP/2). `task` makes one task
/// from its share of the calls.
pub async fn in_tasks<F>(window: usize, calls: u64, mut task: impl FnMut(Share) -> F) -> io::Result<()>
where
    F: Future<Output = io::Result<()>> + Send + 'static,
{
    let started = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..window {
        tasks.spawn(task(Share { started: started.clone(), calls }));
    }
    while let Some(r) = tasks.join_next().await {
        r.map_err(io::Error::other)??;
    }
    Ok(())
}

/// One task's share of [`in_tasks`]' calls: the count all of them draw from.
pub struct Share {
    started: Arc<AtomicU64>,
    calls: u64,
}

impl Share {
    /// Claims the next call; false once every call has been started.
    pub fn claim(&self) -> bool {
        self.started.fetch_add(1, Ordering::Relaxed) < self.calls
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn the_timed_loop_stops_at_max_calls_or_after_the_deadline() {
        let (mut lat, mut calls) = (Vec::new(), 0);
        let later = Instant::now() + Duration::from_secs(60);
        run_sync(timed_calls(later, 5, &mut lat, async || {
            calls += 1;
            Ok(())
        }))
        .unwrap();
        assert_eq!((calls, lat.len()), (5, 5));
        lat.clear();
        run_sync(timed_calls(Instant::now(), 5, &mut lat, async || Ok(()))).unwrap();
        assert_eq!(lat.len(), 1, "the deadline has passed after the first call");
    }

    #[test]
    fn sending_ahead_keeps_at_most_the_window_in_flight() {
        for (window, calls) in [(4, 100), (16, 3), (1, 1)] {
            let (sent, answered, most) = (Cell::new(0u64), Cell::new(0u64), Cell::new(0u64));
            let send = async || {
                sent.set(sent.get() + 1);
                most.set(most.get().max(sent.get() - answered.get()));
                Ok(())
            };
            let answer = async || {
                assert!(answered.get() < sent.get(), "an answer before its call");
                answered.set(answered.get() + 1);
                Ok(())
            };
            run_sync(send_ahead(window, calls, send, answer)).unwrap();
            assert_eq!((sent.get(), answered.get()), (calls, calls));
            assert_eq!(most.get(), (window as u64).min(calls));
        }
    }
}
