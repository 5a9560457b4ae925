//! `idle_timeout`: a client connection with no call in flight that has
//! sent nothing for that long gets GOAWAY and is closed, so that idle
//! sockets do not hold the hub's descriptors and connection places
//! forever. What counts as activity: any byte received (a frame, a PING),
//! and any call of the connection's still running.

use std::io::{self, IoSlice};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use hubwire::transport::{DynTransport, Transport};
use hubwire::{ConnectionOptions, Error, Incoming, MethodInfo, ServeFuture, Service, Work};
use tokio::time::Instant;

/// What one connection has been doing.
pub struct Activity {
    started: Instant,
    /// Milliseconds from `started` to the last byte received.
    last_read_ms: AtomicU64,
    /// Calls of the connection being served now.
    in_flight: AtomicUsize,
}

impl Activity {
    /// Watches `t` and the calls served under `config`: returns the
    /// activity, the transport to use instead of `t`, and the options
    /// whose service counts the calls.
    pub fn watch(t: DynTransport, mut config: ConnectionOptions) -> (Arc<Activity>, DynTransport, ConnectionOptions) {
        let a = Arc::new(Activity { started: Instant::now(), last_read_ms: AtomicU64::new(0), in_flight: AtomicUsize::new(0) });
        if let Some(inner) = config.service.take() {
            config.service = Some(Arc::new(Counted { inner, activity: a.clone() }));
        }
        (a.clone(), Arc::new(Watched { inner: t, activity: a }), config)
    }

    fn read(&self, n: usize) {
        if n > 0 {
            self.last_read_ms.store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
    }

    /// How long since the last byte received (or since the start).
    fn quiet(&self) -> Duration {
        self.started.elapsed().saturating_sub(Duration::from_millis(self.last_read_ms.load(Ordering::Relaxed)))
    }
}

/// Completes once the connection has had no call in flight and received
/// nothing for `idle`.
pub async fn quiet_for(a: &Activity, idle: Duration) {
    loop {
        let quiet = a.quiet();
        let busy = a.in_flight.load(Ordering::Relaxed) > 0;
        if !busy && quiet >= idle {
            return;
        }
        // A busy connection is looked at again after a whole period: its
        // call may end at any time, and idleness is counted from the last
        // byte, not from the call's end.
        tokio::time::sleep(if busy { idle } else { idle - quiet }).await;
    }
}

/// The transport, noting when bytes arrive.
struct Watched {
    inner: DynTransport,
    activity: Arc<Activity>,
}

impl Transport for Watched {
    fn try_read(&self, buf: &mut BytesMut) -> io::Result<usize> {
        let r = self.inner.try_read(buf);
        if let Ok(n) = r {
            self.activity.read(n);
        }
        r
    }

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
        let r = self.inner.poll_read(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.activity.read(n);
        }
        r
    }

    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.inner.try_write(bufs)
    }

    fn poll_write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        self.inner.poll_write(cx, bufs)
    }

    fn shutdown(&self) {
        self.inner.shutdown()
    }

    fn shutdown_write(&self) {
        self.inner.shutdown_write()
    }

    fn release(&self) {
        self.inner.release()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    // Bytes that came through shared memory (§11.4) count as activity too,
    // and the descriptors of the upgrade pass through.
    fn note_read(&self, n: usize) {
        self.activity.read(n);
        self.inner.note_read(n);
    }

    fn batches_items(&self) -> bool {
        self.inner.batches_items()
    }

    fn rearm_read(&self) -> bool {
        self.inner.rearm_read()
    }

    fn passes_fds(&self) -> bool {
        self.inner.passes_fds()
    }

    fn peer_uid(&self) -> Option<u32> {
        self.inner.peer_uid()
    }

    fn accept_fds(&self, max: usize) {
        self.inner.accept_fds(max)
    }

    fn take_fd(&self) -> Option<std::os::fd::OwnedFd> {
        self.inner.take_fd()
    }

    fn settle_fds(&self, unparsed: usize) {
        self.inner.settle_fds(unparsed)
    }

    fn try_write_fds(&self, bufs: &[IoSlice<'_>], fds: &[std::os::fd::BorrowedFd<'_>]) -> io::Result<usize> {
        self.inner.try_write_fds(bufs, fds)
    }

    fn poll_write_fds(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>], fds: &[std::os::fd::BorrowedFd<'_>]) -> Poll<io::Result<usize>> {
        self.inner.poll_write_fds(cx, bufs, fds)
    }
}

/// The hub's service, counting the connection's calls in flight.
struct Counted {
    inner: Arc<dyn Service>,
    activity: Arc<Activity>,
}

/// One call in flight; dropping it (the call's end) counts it out.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Service for Counted {
    fn methods(&self) -> Vec<MethodInfo> {
        self.inner.methods()
    }

    fn call(&self, call: Incoming) -> Result<ServeFuture, Error> {
        self.start(call).map(Work::into_future)
    }

    fn start(&self, call: Incoming) -> Result<Work, Error> {
        self.activity.in_flight.fetch_add(1, Ordering::Relaxed);
        let guard = InFlight(self.activity.clone());
        match self.inner.start(call)? {
            // Answered already: in flight only while it was computed.
            Work::Done(r) => Ok(Work::Done(r)),
            Work::Future(work) => Ok(Work::Future(Box::pin(async move {
                let _guard = guard;
                work.await
            }))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_with_nothing_in_flight() {
        let (t, _other) = hubwire::transport::memory::pair();
        let (a, _, _) = Activity::watch(Arc::new(t), ConnectionOptions::new("x"));
        a.in_flight.fetch_add(1, Ordering::Relaxed);
        let idle = quiet_for(&a, Duration::from_secs(5));
        tokio::pin!(idle);
        assert!(tokio::time::timeout(Duration::from_secs(60), &mut idle).await.is_err(), "a call in flight keeps it");
        a.in_flight.fetch_sub(1, Ordering::Relaxed);
        assert!(tokio::time::timeout(Duration::from_secs(6), &mut idle).await.is_ok(), "then it is idle");
    }
}
