//! The client's half of the direct path through a hub (`spec/PROTOCOL.md`
//! §14), and the hooks a hub uses to offer it.
//!
//! A connection dialled with [`ConnectionOptions::direct`] to a hub that
//! sent `direct` too keeps `DirectRoutes`: for each method, the direct
//! connection to a provider replica that serves it. The first call of a
//! method that has none goes through the hub as always and, in the
//! background, asks the hub for one (`hubwire.direct`, one at a time per
//! connection, backing off after `unavailable`); the hub's DIRECT frame
//! arrives on the reader (the `DirectHook` that `DirectRoutes::new` makes), which dials the
//! replica over the descriptor (or the address) in a task of its own and,
//! once the handshake is done, routes the provider's methods there.
//!
//! A direct connection takes no new calls once it drains (GOAWAY) or ends,
//! nor once the hub connection does; a call that fails because the
//! replica never saw it (`never_sent`) is started again through the
//! hub, so no call is lost to a replica's restart.

use std::any::Any;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use hubwire_frame::{AcceptBody, DirectOffer, Via};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::connection::{Connection, Handle};
use crate::engine::{ConnectionOptions, Core, DirectHook, Handoff, Incoming, RouterFactory};
use crate::errors::{Code, Error};
use crate::transport::{fd::FdTransport, tcp, unix};

/// The hub's own method a client asks for a direct connection with.
pub const DIRECT_METHOD: &str = "hubwire.direct";
/// The hub's own method a replica reports its direct calls to.
pub const REPORT_METHOD: &str = "hubwire.report";
/// Method names of the protocol and of hubs: never routed directly.
const RESERVED_PREFIX: &str = "hubwire.";

/// How long the calls in flight on a direct connection may take to finish
/// once its hub connection drains or ends.
const DRAIN_GRACE: Duration = Duration::from_secs(10);
/// How long an ask may wait for the hub's answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(10);
/// The first wait before asking again after `unavailable` (§14.3).
const ASK_BACKOFF: Duration = Duration::from_secs(1);
/// The longest.
const ASK_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The input of `hubwire.direct`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct DirectAsk {
    /// A routed method the client calls.
    pub method: String,
    /// The kinds of DIRECT the client takes (`"fd"`, `"address"`); absent:
    /// both (§14.3). A client that cannot receive descriptors (Node) says
    /// `["address"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Vec<String>>,
}

impl DirectAsk {
    /// Whether the client takes a DIRECT with `via` (`"fd"`, `"address"`).
    pub fn takes(&self, via: &str) -> bool {
        self.via.as_ref().is_none_or(|v| v.iter().any(|x| x == via))
    }
}

/// The input of `hubwire.report` (§14.5): what happened since the last.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct DirectReport {
    /// Calls answered over direct connections.
    pub calls: u64,
    /// Of those, answered with a code other than `ok`.
    pub errors: u64,
    /// Direct connections open now.
    pub open: u64,
}

/// Whether a call failed before the callee saw it, so starting it again
/// elsewhere is safe: started after the peer's GOAWAY, or above its
/// `last_id` (§5.10). The engine says so in the message of its
/// `unavailable`, and nowhere else.
pub(crate) fn never_sent(e: &Error) -> bool {
    e.code() == Code::Unavailable && (e.message().contains("start the call elsewhere") || e.message().contains("never saw this call"))
}

/// Evaluates `$call`, an expression of `$c: &Connection`, on the direct
/// connection for `$method` if `$conn` has one; if the call never reached
/// the replica ([`never_sent`]), or there is none, on `$conn` itself (the
/// hub). Returns from the enclosing function with the result.
macro_rules! routed {
    ($conn:expr, $method:expr, |$c:ident| $call:expr) => {{
        if let Some(direct) = $conn.route($method) {
            let $c = &direct;
            match $call.await {
                Err(e) if crate::direct::never_sent(&e) => {}
                r => return r,
            }
        }
        let $c = $conn;
        $call.await
    }};
}
pub(crate) use routed;

/// When a method may be asked for again.
enum Ask {
    /// A `hubwire.direct` for it is in flight, or waits for its turn.
    Pending,
    /// Not before `at`; then wait `backoff` after the next `unavailable`.
    After { at: Instant, backoff: Duration },
    /// The hub said no for good (§14.3).
    Never,
}

/// A client connection's direct connections, by method.
pub(crate) struct DirectRoutes {
    routes: Mutex<HashMap<String, Connection>>,
    asks: Mutex<HashMap<String, Ask>>,
    /// At most one `hubwire.direct` in flight (§14.3).
    asking: tokio::sync::Mutex<()>,
    /// Options for dialling a direct connection: the client's own, minus
    /// the direct path and any service.
    dial: ConnectionOptions,
}

impl DirectRoutes {
    /// Routes for a connection dialled with `options`, and the hook its
    /// DIRECT frames go to (a [`RouterFactory`]).
    fn make(options: &ConnectionOptions) -> (Arc<dyn Any + Send + Sync>, DirectHook) {
        let (routes, hook) = DirectRoutes::new(options);
        (routes, hook)
    }

    fn new(options: &ConnectionOptions) -> (Arc<DirectRoutes>, DirectHook) {
        let mut dial = options.clone();
        (dial.direct, dial.router, dial.handoff, dial.service, dial.token) = (false, None, None, None, None);
        let routes = Arc::new(DirectRoutes { routes: Mutex::default(), asks: Mutex::default(), asking: tokio::sync::Mutex::new(()), dial });
        let weak = Arc::downgrade(&routes);
        let hook: DirectHook = Arc::new(move |h| {
            if let (Handoff::Direct { offer, fd }, Some(routes)) = (h, weak.upgrade()) {
                tokio::spawn(routes.open(offer, fd));
            }
        });
        (routes, hook)
    }

    /// The live direct connection for `method`, if any.
    fn live(&self, method: &str) -> Option<Connection> {
        let routes = self.routes.lock().unwrap();
        routes.get(method).filter(|c| !c.is_closed() && !c.is_draining()).cloned()
    }

    /// Dials the replica a DIRECT names and routes its methods there.
    async fn open(self: Arc<Self>, offer: DirectOffer, fd: Option<OwnedFd>) {
        let at = format!("provider {:?} replica {}", offer.provider, offer.replica);
        let conn = match self.dial(&offer, fd).await {
            Ok(c) => c,
            Err(e) => return tracing::info!("direct connection to {at} failed, staying routed through the hub: {e}"),
        };
        tracing::debug!("direct connection to {at}: {:?}", offer.methods);
        let mut routes = self.routes.lock().unwrap();
        for m in offer.methods.into_iter().filter(|m| !m.starts_with(RESERVED_PREFIX)) {
            routes.insert(m, conn.clone());
        }
    }

    async fn dial(&self, offer: &DirectOffer, fd: Option<OwnedFd>) -> Result<Connection, Error> {
        let io = |e: std::io::Error| Error::unavailable(e.to_string());
        match (offer.via, fd, offer.address.as_deref()) {
            (Via::Fd, Some(fd), _) => {
                let s = std::os::unix::net::UnixStream::from(fd);
                s.set_nonblocking(true).map_err(io)?;
                let label = format!("direct:{}[{}]", offer.provider, offer.replica);
                Connection::dial(FdTransport::new(s, label).map_err(io)?, &self.dial).await
            }
            (Via::Address, _, Some(address)) => {
                let mut opts = self.dial.clone();
                opts.token = offer.token.clone();
                if let Some(path) = address.strip_prefix("unix:") {
                    Connection::dial(unix::connect(path).await.map_err(io)?, &opts).await
                } else if let Some(addr) = address.strip_prefix("tcp:") {
                    Connection::dial(tcp::connect(addr).await.map_err(io)?, &opts).await
                } else {
                    Err(Error::invalid_argument(format!("DIRECT address {address:?} is neither unix: nor tcp:")))
                }
            }
            _ => Err(Error::unavailable("DIRECT without its descriptor or address")),
        }
    }

    /// Drains every direct connection (GOAWAY; calls in flight finish, for
    /// up to [`DRAIN_GRACE`]) and forgets it: the hub connection is going.
    fn drain_all(&self) {
        let conns: Vec<Connection> = self.routes.lock().unwrap().drain().map(|(_, c)| c).collect();
        let mut seen = std::collections::HashSet::new();
        for c in conns.into_iter().filter(|c| seen.insert(c.describe())) {
            tokio::spawn(async move { c.drain(DRAIN_GRACE).await });
        }
    }

    /// Whether `method` may be asked for now; marks it pending if so.
    fn should_ask(&self, method: &str) -> bool {
        let mut asks = self.asks.lock().unwrap();
        match asks.get(method) {
            Some(Ask::Pending | Ask::Never) => false,
            Some(Ask::After { at, .. }) if *at > Instant::now() => false,
            _ => {
                asks.insert(method.to_string(), Ask::Pending);
                true
            }
        }
    }

    /// Records the hub's answer to an ask for `method` (§14.3's table).
    fn answered(&self, method: &str, r: Result<(), Error>) {
        let mut asks = self.asks.lock().unwrap();
        let backoff = match asks.get(method) {
            Some(Ask::After { backoff, .. }) => *backoff,
            _ => ASK_BACKOFF,
        };
        let next = match r {
            Ok(()) => Ask::After { at: Instant::now() + ASK_BACKOFF, backoff: ASK_BACKOFF },
            Err(e) if e.code() == Code::Unavailable => {
                Ask::After { at: Instant::now() + backoff, backoff: (backoff * 2).min(ASK_BACKOFF_MAX) }
            }
            Err(e) => {
                tracing::debug!("no direct path for {method:?}: {e}");
                Ask::Never
            }
        };
        asks.insert(method.to_string(), next);
    }
}

/// Asks the hub behind `hub` for a direct connection for `method`.
async fn ask(hub: Weak<Handle>, routes: Arc<DirectRoutes>, method: String) {
    let _turn = routes.asking.lock().await;
    let Some(handle) = hub.upgrade() else { return };
    let conn = Connection::from_handle(handle);
    let r = match tokio::time::timeout(ASK_TIMEOUT, conn.call::<_, ()>(DIRECT_METHOD, &DirectAsk { method: method.clone(), via: None }))
        .await
    {
        Ok(r) => r,
        Err(_) => Err(Error::unavailable(format!("no answer to {DIRECT_METHOD} within {ASK_TIMEOUT:?}"))),
    };
    drop(conn);
    routes.answered(&method, r);
}

impl ConnectionOptions {
    /// Asks for the direct path through a hub (`spec/PROTOCOL.md` §14):
    /// sends `direct` in our HELLO and, dialling a hub that offers it,
    /// routes each provider's methods over a connection straight to one of
    /// its replicas once the hub has handed one over, transparently (calls
    /// fall back to the hub when it drains or ends). Off by default.
    pub fn direct(mut self, on: bool) -> ConnectionOptions {
        self.direct = on;
        self.router = on.then_some(DirectRoutes::make as RouterFactory);
        self
    }

    /// A hub's side of the direct path: sends `direct` in our HELLO
    /// (spec §14.1: to a client, "I may hand you direct connections"; to a
    /// provider, "I take your reports") without routing our own calls
    /// anywhere else.
    pub fn advertise_direct(mut self, on: bool) -> ConnectionOptions {
        (self.direct, self.router) = (on, None);
        self
    }
}

impl Connection {
    /// This connection's direct routes, if it asked for the direct path.
    fn direct_routes(&self) -> Option<Arc<DirectRoutes>> {
        self.direct_state()?.clone().downcast::<DirectRoutes>().ok()
    }

    /// The direct connection to call `method` on, if there is one; else
    /// (through the hub) perhaps asks for one in the background.
    pub(crate) fn route(&self, method: &str) -> Option<Connection> {
        let routes = self.direct_routes()?;
        if self.is_closed() || self.is_draining() {
            // The direct connections belong to the hub connection (§14.6).
            routes.drain_all();
            return None;
        }
        if self.peer().direct.is_none() || method.starts_with(RESERVED_PREFIX) {
            return None;
        }
        if let Some(c) = routes.live(method) {
            return Some(c);
        }
        if routes.should_ask(method) {
            tokio::spawn(ask(self.downgrade(), routes, method.to_string()));
        }
        None
    }

    /// How many methods are routed over direct connections now (for tests
    /// and diagnostics).
    pub fn direct_routes_live(&self) -> usize {
        self.direct_routes().map_or(0, |r| r.routes.lock().unwrap().values().filter(|c| !c.is_closed() && !c.is_draining()).count())
    }

    /// Whether this connection's transport can carry descriptors (a Unix
    /// socket), so a hub can hand it a `via: fd` direct connection.
    pub fn passes_fds(&self) -> bool {
        self.core().transport.passes_fds()
    }

    /// Sends ACCEPT (`spec/PROTOCOL.md` §14.4) with `fd`, the end of a
    /// socketpair the peer (a replica that sent `direct`) is to serve.
    pub async fn send_accept(&self, body: AcceptBody, fd: OwnedFd) -> Result<(), Error> {
        self.core().hand_over(&hubwire_frame::Frame::Accept(body), Some(&fd)).await
    }
}

/// A served call's connection, for a hub to answer `hubwire.direct` on it
/// with a DIRECT (§14.3).
pub struct DirectLink {
    core: Arc<Core>,
}

impl Incoming {
    /// The connection this call came on, for sending it a DIRECT.
    pub fn direct_link(&self) -> DirectLink {
        DirectLink { core: self.core.clone() }
    }
}

impl DirectLink {
    /// Whether both HELLOs of the connection said `direct` (§14.1).
    pub fn negotiated(&self) -> bool {
        self.core.local.direct.is_some() && self.core.peer.direct.is_some()
    }

    /// Whether its transport can carry descriptors (a Unix socket).
    pub fn passes_fds(&self) -> bool {
        self.core.transport.passes_fds()
    }

    /// The uid of the process at the other end, when its socket says
    /// ([`Transport::peer_uid`](crate::transport::Transport::peer_uid)).
    pub fn peer_uid(&self) -> Option<u32> {
        self.core.transport.peer_uid()
    }

    /// Where it goes, for logs.
    pub fn describe(&self) -> String {
        self.core.transport.describe()
    }

    /// Sends DIRECT with `offer`, and with `fd` when it is `via: fd`.
    pub async fn send(&self, offer: DirectOffer, fd: Option<OwnedFd>) -> Result<(), Error> {
        self.core.hand_over(&hubwire_frame::Frame::Direct(Box::new(offer)), fd.as_ref()).await
    }
}
