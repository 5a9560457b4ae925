//! A provider's half of the direct path (`spec/PROTOCOL.md` §14.4,
//! §14.5). A child's parent hub hands it connections (ACCEPT, a descriptor
//! each), which it serves as the acceptor with the same service and
//! limits as the parent connection, at most [`MAX_DIRECT`] at once; it
//! counts the calls answered over them and reports the counts to the hub
//! (`hubwire.report`) at most once per [`REPORT_EVERY`] while they change,
//! and once more when a direct connection closes. When the parent
//! connection ends it drains the direct connections (GOAWAY `ok`: their
//! clients send new calls through the hub) for up to [`DRAIN_GRACE`],
//! less than the 200 ms a hub waits before it signals a stopping child.
//! A provider serving a listener (a hub dials it, and hands its address
//! to clients) counts the calls of every connection that is not a hub's
//! and reports them on a hub's ([`DirectServe::serve_accepted`]).

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hubwire_frame::MethodInfo;
use tokio::sync::Notify;

use crate::codec::Payload;
use crate::connection::Connection;
use crate::direct::{DirectReport, REPORT_METHOD};
use crate::engine::{ConnectionOptions, DirectHook, Handoff, Incoming, ServeFuture, Service, Work};
use crate::errors::{Code, Error};
use crate::transport::fd::FdTransport;
use crate::transport::DynTransport;

/// Direct connections a replica serves at once; an ACCEPT beyond is
/// closed at once (§14.7).
pub const MAX_DIRECT: usize = 64;
/// The shortest time between two reports.
pub const REPORT_EVERY: Duration = Duration::from_secs(1);
/// How long direct connections may finish their calls once the parent
/// connection has ended.
pub const DRAIN_GRACE: Duration = Duration::from_millis(150);

/// What the direct connections have served, and the connections.
#[derive(Default)]
pub(crate) struct DirectServe {
    calls: AtomicU64,
    errors: AtomicU64,
    conns: Mutex<HashMap<u64, Connection>>,
    next: AtomicU64,
    /// A direct connection closed: report now.
    closed: Notify,
    /// A hub connection is reporting (a listener's provider).
    reporting: AtomicBool,
}

/// The service of a direct connection: the parent's, each call counted
/// while `on` (a listener's connection turns it off once it turns out to
/// be a hub's: routed calls are the hub's to count).
struct Counted {
    inner: Arc<dyn Service>,
    served: Arc<DirectServe>,
    on: Arc<AtomicBool>,
}

impl Service for Counted {
    fn methods(&self) -> Vec<MethodInfo> {
        self.inner.methods()
    }

    fn call(&self, call: Incoming) -> Result<ServeFuture, Error> {
        self.start(call).map(Work::into_future)
    }

    fn start(&self, call: Incoming) -> Result<Work, Error> {
        if !self.on.load(Relaxed) {
            return self.inner.start(call);
        }
        let served = self.served.clone();
        let code = |r: &Result<Option<Payload>, Error>| r.as_ref().err().map_or(Code::Ok, Error::code);
        match self.inner.start(call) {
            Ok(Work::Done(r)) => {
                served.count(code(&r));
                Ok(Work::Done(r))
            }
            Ok(Work::Future(fut)) => Ok(Work::Future(Box::pin(async move {
                let mut tally = Tally { served, code: None };
                let r = fut.await;
                tally.code = Some(code(&r));
                r
            }))),
            Err(e) => {
                served.count(e.code());
                Err(e)
            }
        }
    }
}

/// Counts a served call when its future is dropped: with its code once it
/// ended, as a `defect` when its handler panicked (the engine answers the
/// panic with one, and a `unary_sync` handler's panic is counted so), and
/// not at all when it was dropped unfinished (cancelled by the caller).
struct Tally {
    served: Arc<DirectServe>,
    code: Option<Code>,
}

impl Drop for Tally {
    fn drop(&mut self) {
        match self.code {
            Some(code) => self.served.count(code),
            None if std::thread::panicking() => self.served.count(Code::Defect),
            None => {}
        }
    }
}

impl DirectServe {
    fn count(&self, code: Code) {
        self.calls.fetch_add(1, Relaxed);
        if code != Code::Ok {
            self.errors.fetch_add(1, Relaxed);
        }
    }

    /// The parent connection's options with the direct path on: `direct`
    /// in the HELLO, ACCEPT served with `service`.
    pub(crate) fn options(self: &Arc<Self>, options: ConnectionOptions, service: Arc<dyn Service>) -> ConnectionOptions {
        let mut direct = options.clone();
        (direct.direct, direct.router, direct.handoff, direct.token, direct.require_token) = (false, None, None, None, None);
        direct.service = Some(Arc::new(Counted { inner: service.clone(), served: self.clone(), on: Arc::new(AtomicBool::new(true)) }));
        let this = self.clone();
        let hook: DirectHook = Arc::new(move |h| {
            if let Handoff::Accept { body, fd } = h {
                this.clone().accept(&body.client, fd, &direct);
            }
        });
        let mut parent = options;
        (parent.direct, parent.handoff, parent.service) = (true, Some(hook), Some(service));
        parent
    }

    /// Serves `fd` as a direct connection, unless [`MAX_DIRECT`] are open.
    fn accept(self: Arc<Self>, client: &str, fd: OwnedFd, options: &ConnectionOptions) {
        if self.conns.lock().unwrap().len() >= MAX_DIRECT {
            return tracing::warn!(client, "ACCEPT refused: {MAX_DIRECT} direct connections open already");
        }
        let (label, options) = (format!("direct:{client}"), options.clone());
        tokio::spawn(async move {
            let s = std::os::unix::net::UnixStream::from(fd);
            let t = match s.set_nonblocking(true).and_then(|()| FdTransport::new(s, label.clone())) {
                Ok(t) => t,
                Err(e) => return tracing::warn!(client = %label, "cannot serve a handed-over connection: {e}"),
            };
            let conn = match Connection::accept(t, &options).await {
                Ok(c) => c,
                Err(e) => return tracing::info!(client = %label, "direct handshake failed: {e}"),
            };
            self.serve_direct(conn, &label).await;
        });
    }

    /// Keeps `conn`, a direct connection, until it ends.
    async fn serve_direct(&self, conn: Connection, label: &str) {
        let key = self.next.fetch_add(1, Relaxed);
        self.conns.lock().unwrap().insert(key, conn.clone());
        let why = conn.closed().await;
        tracing::debug!(client = %label, "direct connection ended: {why}");
        self.conns.lock().unwrap().remove(&key);
        self.closed.notify_one();
    }

    /// Serves a connection accepted on a listener (`Provider::serve`, a
    /// provider a hub dials): one whose HELLO says `direct` and offers
    /// `hubwire.report` is a hub's (the first such one still open gets the
    /// reports: a hub dials one connection per replica of the same
    /// process); any other is a direct connection, and its calls are
    /// counted (§14.3, `via: address`).
    pub(crate) async fn serve_accepted(self: Arc<Self>, t: DynTransport, mut options: ConnectionOptions, service: Arc<dyn Service>) {
        let label = t.describe();
        let on = Arc::new(AtomicBool::new(true));
        options.service = Some(Arc::new(Counted { inner: service, served: self.clone(), on: on.clone() }));
        let conn = match Connection::start(t, &options, false).await {
            Ok(c) => c,
            Err(e) => return tracing::warn!(peer = %label, "handshake failed: {e}"),
        };
        let hub = conn.peer().direct.is_some() && conn.peer().method(REPORT_METHOD).is_some();
        if !hub {
            return self.serve_direct(conn, &label).await;
        }
        on.store(false, Relaxed);
        if self.reporting.swap(true, Relaxed) {
            conn.closed().await;
            return;
        }
        self.clone().report(conn).await;
        self.reporting.store(false, Relaxed);
    }

    /// Reports the counts to the hub on `parent` until it ends (when the
    /// hub sent `direct`: it serves `hubwire.report`).
    pub(crate) async fn report(self: Arc<Self>, parent: Connection) {
        if parent.peer().direct.is_none() {
            return;
        }
        let mut sent = DirectReport::default();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(REPORT_EVERY) => {}
                _ = self.closed.notified() => {}
                _ = parent.closed() => return,
            }
            let now = DirectReport {
                calls: self.calls.load(Relaxed),
                errors: self.errors.load(Relaxed),
                open: self.conns.lock().unwrap().len() as u64,
            };
            if now == sent {
                continue;
            }
            let delta = DirectReport { calls: now.calls - sent.calls, errors: now.errors - sent.errors, open: now.open };
            match parent.call::<_, ()>(REPORT_METHOD, &delta).await {
                Ok(()) => sent = now,
                Err(e) if parent.is_closed() => return tracing::debug!("direct calls report not sent: {e}"),
                Err(e) => tracing::warn!("direct calls report refused: {e}"),
            }
        }
    }

    /// Drains every direct connection (GOAWAY `ok`) for up to
    /// [`DRAIN_GRACE`]: the parent has gone.
    pub(crate) async fn drain(&self) {
        let conns: Vec<Connection> = self.conns.lock().unwrap().values().cloned().collect();
        let drains = conns.iter().map(|c| c.drain(DRAIN_GRACE));
        futures_join_all(drains).await;
    }
}

/// Runs every future of `futs` to its end, concurrently.
async fn futures_join_all<F: std::future::Future<Output = ()>>(futs: impl Iterator<Item = F>) {
    let mut set: Vec<_> = futs.map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        set.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if set.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{testing, Provider};

    /// A handler's panic is counted as a call and an error whether the
    /// handler is async (the panic unwinds through the counting future) or
    /// `unary_sync` (caught before the count): the hub's status shows the
    /// same numbers for the same failure.
    #[tokio::test(flavor = "current_thread")]
    async fn a_panicking_handler_is_counted_as_an_error_async_or_sync() {
        let p = Provider::new("p")
            .unary("boom", |_ctx, (): ()| async move {
                if true {
                    panic!("async boom");
                }
                Ok(())
            })
            .unary_sync("boom_sync", |_ctx, (): ()| -> Result<(), Error> { panic!("sync boom") })
            .unary("fine", |_ctx, (): ()| async move { Ok(()) });
        let served = Arc::new(DirectServe::default());
        let counted = Counted { inner: Arc::new(p), served: served.clone(), on: Arc::new(AtomicBool::new(true)) };
        let pair = testing::pair(counted).await;
        for method in ["boom", "boom_sync"] {
            let e = pair.client.call::<(), ()>(method, &()).await.unwrap_err();
            assert_eq!(e.code(), Code::Defect, "{method}: {e}");
        }
        pair.client.call::<(), ()>("fine", &()).await.unwrap();
        assert_eq!((served.calls.load(Relaxed), served.errors.load(Relaxed)), (3, 2));
    }
}
