//! The daemon: bind the listeners, start the supervisors, serve clients,
//! and on SIGTERM (or SIGINT) shut down in order:
//!
//! 1. stop accepting (listeners closed, the socket file removed);
//! 2. drain: every client connection gets GOAWAY, new calls on it are
//!    refused `unavailable`, calls in flight run to their end, up to
//!    `drain_timeout`; what is still running then fails `unavailable`;
//! 3. stop the providers: close each connection, SIGTERM each child,
//!    SIGKILL after its `stop_timeout`, and reap it.
//!
//! 4. end what the providers left behind: the hub is a child subreaper
//!    (`process`), so their orphaned descendants — even in a session of
//!    their own — are its children: SIGTERM, SIGKILL after the longest
//!    `stop_timeout`, reaped.
//!
//! Every accepted call therefore gets an answer, and no child outlives the
//! hub (they are also tied to it with `PR_SET_PDEATHSIG`, for the case
//! where the hub itself is killed).
//!
//! Client connections come in through `Door`: admitted under the
//! connection limits (`admit`) and, on the Unix socket, `allow_uids`
//! (`unix_socket`), else refused with GOAWAY at once; a connection must
//! finish its HELLO within `handshake_timeout` and is closed after
//! `idle_timeout` with nothing to do (`idle`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hubwire::frame::Code;
use hubwire::transport::{self, fd::FdTransport, memory, tls};
use hubwire::{Connection, ConnectionOptions, Provider, Token, WaitMode};
use tokio::task::JoinSet;

use crate::admit::{self, Admission, Peer, Ticket};
use crate::config::{Access, ConfigError, HubConfig, HubLimits, HubWait, Located};
use crate::idle::{self, Activity};
use crate::join::Joined;
use crate::own_schemas;
use crate::queue::ClientQueue;
use crate::registry::Registry;
use crate::route::HubService;
use crate::status::{self, METHODS_METHOD, STATUS_METHOD};
use crate::unix_socket::{self, UnixSocket};
use crate::websocket::{self, WebSocketListener};

/// The client connections the hub serves, so that shutdown can drain them.
struct Clients {
    /// What each trusted connection is served (with a queue of its own):
    /// private status included (`crate::auth`).
    trusted: HubService,
    /// What every other connection is served: status redacted.
    untrusted: HubService,
    /// What links from the NATS cluster are served: as `trusted` or
    /// `untrusted` (as TCP clients: trusted with a token), but never
    /// routed on to the cluster.
    from_cluster: HubService,
    /// Links from the cluster now, and calls over them.
    pub served: Arc<crate::nats_link::Served>,
    next: AtomicU64,
    live: Mutex<HashMap<u64, Connection>>,
}

impl Clients {
    fn new(trusted: HubService, untrusted: HubService, with_token: bool, served: Arc<crate::nats_link::Served>) -> Clients {
        let base = if with_token { &trusted } else { &untrusted };
        let from_cluster = HubService { to_cluster: false, ..base.clone() };
        Clients { trusted, untrusted, from_cluster, served, next: AtomicU64::new(0), live: Mutex::new(HashMap::new()) }
    }

    /// Serves one link from the cluster, like a client connection (see
    /// [`Clients::serve`]), its calls counted in `calls` (`$SRV.STATS`).
    async fn serve_link(
        self: Arc<Self>,
        t: transport::DynTransport,
        config: ConnectionOptions,
        ticket: Ticket,
        idle: Duration,
        calls: Arc<hubwire::nats::CallCounts>,
    ) {
        let counted = crate::nats_link::Counted { inner: self.from_cluster.for_client(), calls, served: self.served.clone() };
        self.served.links.fetch_add(1, Ordering::Relaxed);
        let served = self.served.clone();
        self.serve_as(t, config.service(counted), Some(ticket), Some(idle)).await;
        served.links.fetch_sub(1, Ordering::Relaxed);
    }

    /// Serves one connection until it closes. `ticket` is its place under
    /// the connection limits (none for the gateway's own connection);
    /// `idle` closes it after that long with nothing in flight and nothing
    /// received (none: never); `trusted`: the peer is vetted by its
    /// listener (the Unix socket's mode and uids, a token, a client
    /// certificate), and sees private status.
    async fn serve(
        self: Arc<Self>,
        t: transport::DynTransport,
        config: ConnectionOptions,
        ticket: Option<Ticket>,
        idle: Option<Duration>,
        trusted: bool,
    ) {
        let hub = if trusted { &self.trusted } else { &self.untrusted };
        let config = config.service(hub.for_client()).advertise_direct(hub.direct);
        tracing::debug!(client = %t.describe(), trusted, "client connected");
        self.serve_as(t, config, ticket, idle).await;
    }

    /// Serves one connection with `config` (its service set) until it
    /// closes.
    async fn serve_as(
        self: Arc<Self>,
        t: transport::DynTransport,
        config: ConnectionOptions,
        ticket: Option<Ticket>,
        idle: Option<Duration>,
    ) {
        let _ticket = ticket;
        let label = t.describe();
        let (activity, t, config) = Activity::watch(t, config);
        let conn = match Connection::start(t, &config, false).await {
            Ok(c) => c,
            Err(e) => return tracing::warn!(client = %label, "handshake failed: {e}"),
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.live.lock().unwrap().insert(id, conn.clone());
        let why = match idle {
            None => conn.closed().await.message().to_string(),
            Some(idle) => tokio::select! {
                e = conn.closed() => e.message().to_string(),
                _ = idle::quiet_for(&activity, idle) => {
                    conn.drain(Duration::ZERO).await;
                    format!("idle for {idle:?}: GOAWAY and closed")
                }
            },
        };
        tracing::debug!(client = %label, "client left: {why}");
        self.live.lock().unwrap().remove(&id);
    }

    /// Drains every client connection at once, each for up to `grace`.
    async fn drain(&self, grace: Duration) {
        let conns: Vec<Connection> = self.live.lock().unwrap().values().cloned().collect();
        let mut set = JoinSet::new();
        for c in conns {
            set.spawn(async move { c.drain(grace).await });
        }
        while set.join_next().await.is_some() {}
    }
}

/// The listeners, bound before anything starts so that a port in use is
/// reported like a config error.
pub struct Bound {
    unix: Option<UnixSocket>,
    tcp: Option<tokio::net::TcpListener>,
    http: Option<tokio::net::TcpListener>,
    websocket: Option<WebSocketListener>,
    /// `[hub.tls]`, shared by the tcp, http and websocket listeners.
    tls: Option<tls::Acceptor>,
}

fn in_use(file: &HubConfig, what: &str, at: &Located<String>, e: std::io::Error) -> ConfigError {
    ConfigError {
        file: file.file.display().to_string(),
        line: Some(at.line),
        message: format!("[hub] {what} = {:?}: cannot listen: {}", at.value, e.kind().to_string().to_lowercase()),
    }
}

/// Binds the configured listeners.
pub async fn bind(cfg: &HubConfig) -> Result<Bound, ConfigError> {
    let h = &cfg.hub;
    let unix = match &h.unix {
        None => None,
        Some(at) => Some(UnixSocket::bind(&at.value, h.access.unix_mode, h.access.unix_group).map_err(|why| ConfigError {
            file: cfg.file.display().to_string(),
            line: Some(at.line),
            message: format!("[hub] unix = {:?}: {why}", at.value.display()),
        })?),
    };
    let tls = h.tls.as_ref().map(|t| crate::tls_config::acceptor(&cfg.file, t)).transpose()?;
    let tcp = match &h.tcp {
        None => None,
        Some(at) => Some(tokio::net::TcpListener::bind(at.value.as_str()).await.map_err(|e| in_use(cfg, "tcp", at, e))?),
    };
    let http = match &h.http {
        None => None,
        Some(at) => Some(tokio::net::TcpListener::bind(at.value.as_str()).await.map_err(|e| in_use(cfg, "http", at, e))?),
    };
    let websocket = match &h.websocket {
        None => None,
        Some(at) => {
            let policy = websocket::Policy { allowed_origins: h.allowed_origins.clone(), allowed_hosts: h.allowed_hosts.clone() };
            Some(WebSocketListener::bind(at.value.as_str(), policy, tls.clone()).await.map_err(|e| in_use(cfg, "websocket", at, e))?)
        }
    };
    Ok(Bound { unix, tcp, http, websocket, tls })
}

/// The service the hub offers its clients: its own methods, and every
/// provider's, relayed. Untrusted callers get the redacted status.
fn hub_service(
    reg: &Arc<Registry>,
    name: &str,
    limits: &HubLimits,
    trusted: bool,
    joined: Option<&Joined>,
    served: &Arc<crate::nats_link::Served>,
) -> HubService {
    let (r1, r2, hub, served) = (reg.clone(), reg.clone(), name.to_string(), served.clone());
    let in_cluster = joined.is_some();
    let own = Provider::new(name)
        .unary(STATUS_METHOD, move |_ctx, (): ()| {
            let mut s = status::status(&r1, &hub);
            if in_cluster {
                s.links_in = Some(served.links.load(Ordering::Relaxed));
                s.calls_in = Some(served.calls.load(Ordering::Relaxed));
            }
            let s = if trusted { s } else { s.redacted() };
            async move { Ok(s) }
        })
        .describe(STATUS_METHOD, own_schemas::no_input(), own_schemas::status_output(), None)
        .doc(STATUS_METHOD, "The hub's providers and replicas: state, pid, restarts, calls, errors, latency")
        .unary(METHODS_METHOD, move |_ctx, (): ()| {
            let m = status::methods(&r2);
            async move { Ok(m) }
        })
        .describe(METHODS_METHOD, own_schemas::no_input(), own_schemas::methods_output(), None)
        .doc(METHODS_METHOD, "Every routed method with its kind, provider and description");
    let own = match joined {
        Some(j) => crate::join::own_method(own, j),
        None => own,
    };
    let to_cluster = joined.is_some_and(|j| j.cfg.route);
    // Trusted clients may take the direct path (spec §14.1).
    let direct = trusted;
    HubService {
        own: Arc::new(own),
        registry: reg.clone(),
        limits: limits.clone(),
        client: Arc::new(ClientQueue::new(0, 0)),
        direct,
        to_cluster,
    }
}

/// Runs the hub until SIGTERM or SIGINT, then shuts it down in order.
pub async fn run(cfg: HubConfig, bound: Bound) -> std::io::Result<()> {
    // Before any child exists, so that a SIGTERM from here on is a clean stop.
    let mut signals = Signals::install()?;
    tracing::info!("{}", crate::process::raise_nofile());
    // Orphaned descendants of providers come to us, to be ended with the
    // hub (the children themselves also get PR_SET_PDEATHSIG, for when
    // the hub is killed).
    if let Err(e) = crate::process::become_subreaper() {
        tracing::warn!("cannot become a child subreaper ({e}): a provider's orphaned descendants may outlive the hub");
    }
    let reg = Arc::new(Registry::new(&cfg.providers, cfg.hub.limits.log_line_max));
    // Providers' connections (`upstream`: spawned, dialled, NATS links)
    // and clients' (`serving`, below).
    let (wait, clients_wait) = match cfg.hub.wait {
        HubWait::Adaptive => (WaitMode::low_latency(), WaitMode::Efficient),
        HubWait::Efficient => (WaitMode::Efficient, WaitMode::Efficient),
        HubWait::LowLatency => (WaitMode::low_latency(), WaitMode::low_latency()),
    };
    let limits = &cfg.hub.limits;
    let mut base = ConnectionOptions::new(cfg.hub.name.clone())
        .window(limits.window)
        .write_queue(limits.write_queue, limits.write_stall_timeout)
        .shm(cfg.hub.shm.on)
        .shm_ring(cfg.hub.shm.ring);
    base.shm_max_connections = cfg.hub.shm.max_connections;
    let mut upstream = base.clone().wait(wait);
    if cfg.hub.wait == HubWait::Adaptive {
        upstream = upstream.spin_gate(reg.routed.clone());
    }
    let reaper = tokio::spawn(crate::process::reaper());
    // The cluster first, so that `dial = "nats:…"` providers find it.
    let joined = match &cfg.nats {
        None => None,
        Some(n) => Some(crate::join::join(n, &cfg.hub.name, &reg, &upstream, cfg.hub.token.as_ref()).await.map_err(std::io::Error::other)?),
    };
    let supervisors = crate::supervise::start(&reg, &upstream);
    let served = Arc::new(crate::nats_link::Served::default());
    let clients = Arc::new(Clients::new(
        hub_service(&reg, &cfg.hub.name, limits, true, joined.as_ref(), &served),
        hub_service(&reg, &cfg.hub.name, limits, false, joined.as_ref(), &served),
        cfg.hub.token.is_some(),
        served,
    ));
    let access = &cfg.hub.access;
    let admission = Admission::new(access.max_connections, access.max_connections_per_peer);
    let mut serving = base.wait(clients_wait);
    serving.handshake_timeout = access.handshake_timeout;
    let Bound { unix, tcp, http, websocket, tls } = bound;
    // Who is trusted (sees private status): the Unix socket's peers, vetted
    // by its mode and their uids; with a token, every TCP, WebSocket and
    // HTTP client, since each proved it holds it; and every client of a
    // TLS listener with `client_ca`, since each showed a certificate
    // signed by it.
    let token = cfg.hub.token.clone();
    let certified = tls.as_ref().is_some_and(|a| a.requires_client_cert());
    let door = Door {
        clients: clients.clone(),
        serving: serving.clone(),
        admission: admission.clone(),
        idle: access.idle_timeout,
        token: token.clone(),
    };
    // Each listener is logged here, before "hub started", and not in its
    // task: a task may first run after that line, and whoever waits for
    // "hub started" then reads the log for the listeners' addresses.
    let mut accepting = JoinSet::new();
    if let Some(l) = unix {
        tracing::info!(listen = %l.describe(), mode = %format!("{:04o}", access.unix_mode), "accepting clients");
        accepting.spawn(door.clone().unix(l, access.clone()));
    }
    if let Some(l) = tcp {
        tracing::info!(listen = %tcp_listen(&l, tls.is_some()), "accepting clients");
        accepting.spawn(door.clone().tcp(l, tls.clone()));
    }
    if let Some(l) = websocket {
        tracing::info!(listen = %hubwire::transport::Listener::describe(&l), "accepting clients");
        accepting.spawn(door.clone().websocket(l, token.is_some() || certified));
    }
    if let Some(j) = joined.as_ref().filter(|j| j.cfg.offer) {
        let door = door.clone();
        let links = Admission::new(j.cfg.max_links, j.cfg.max_links);
        let enter = move |t, calls| door.link(t, &links, calls);
        accepting.spawn(crate::nats_link::offer(j.client.clone(), reg.clone(), j.cfg.prefix.clone(), cfg.hub.name.clone(), enter));
    }
    if let Some(l) = http {
        // The gateway is one more client, over an in-memory connection
        // (exempt from the limits: each HTTP connection counts instead).
        let (ours, theirs) = memory::pair();
        // The gateway checks the bearer token itself, on every request; its
        // callers are as trusted as a TCP client's (`hubwire.status` called
        // through it is redacted alike).
        tokio::spawn(clients.clone().serve(Arc::new(theirs), serving.clone(), None, None, token.is_some() || certified));
        let conn = Connection::dial(ours, &ConnectionOptions::new("http-gateway")).await.map_err(std::io::Error::other)?;
        tracing::info!(listen = %l.local_addr()?, "HTTP gateway");
        let gw = crate::gateway::Settings {
            reg: reg.clone(),
            hub: cfg.hub.name.clone(),
            admission: admission.clone(),
            header_timeout: access.http_header_timeout,
            body_timeout: access.http_body_timeout,
            allowed_origins: cfg.hub.allowed_origins.clone(),
            allowed_hosts: cfg.hub.allowed_hosts.clone(),
            token: token.clone(),
            certified,
        };
        accepting.spawn(crate::gateway::serve(l, tls, conn, gw));
    }
    tracing::info!(config = %cfg.file.display(), providers = cfg.providers.len(), "hub started");

    let why = signals.next().await;
    tracing::info!("{why}: draining calls in flight (up to {:?})", cfg.hub.drain_timeout);
    accepting.abort_all();
    while accepting.join_next().await.is_some() {}
    clients.drain(cfg.hub.drain_timeout).await;
    tracing::info!("stopping providers");
    reg.begin_stop();
    for s in supervisors {
        let _ = s.await;
    }
    // Whatever escaped its provider's process group (a `setsid` daemon)
    // was reparented to us: it ends now too.
    let grace = cfg.providers.iter().map(|p| p.stop_timeout).max().unwrap_or(Duration::from_secs(3));
    let orphans = crate::process::end_orphans(grace).await;
    if orphans > 0 {
        tracing::info!("ended {orphans} orphaned descendant process(es) of the providers");
    }
    reaper.abort();
    tracing::info!("hub stopped");
    Ok(())
}

/// Where client connections come in: each listener's accept loop admits
/// a connection under the limits (and, on the Unix socket, `allow_uids`)
/// or refuses it at once, then serves it.
#[derive(Clone)]
struct Door {
    clients: Arc<Clients>,
    serving: ConnectionOptions,
    admission: Arc<Admission>,
    idle: Duration,
    /// Required in the HELLO of TCP, TLS and WebSocket clients, when set.
    token: Option<Token>,
}

impl Door {
    /// The options of a network client: the token required, if set.
    fn remote(&self) -> ConnectionOptions {
        match &self.token {
            Some(t) => self.serving.clone().require_token(t.0.clone()),
            None => self.serving.clone(),
        }
    }

    /// Serves a link from the cluster under `[nats] max_links` (`links`),
    /// or refuses it; the token is required as of a TCP client.
    fn link(&self, t: transport::DynTransport, links: &Arc<Admission>, calls: Arc<hubwire::nats::CallCounts>) {
        match links.admit(Peer::Cluster) {
            Ok(ticket) => {
                tokio::spawn(self.clients.clone().serve_link(t, self.remote(), ticket, self.idle, calls));
            }
            Err(why) => {
                tracing::debug!(link = %t.describe(), "refused: {why} (max_links)");
                admit::refuse(&t, Code::ResourceExhausted, &format!("{why} (links from the cluster: [nats] max_links)"));
            }
        }
    }

    /// Serves `t` from `peer` with `options`, or refuses it over the limits.
    fn enter(&self, t: transport::DynTransport, peer: Peer, options: ConnectionOptions, trusted: bool) {
        match self.admission.admit(peer) {
            Ok(ticket) => {
                tokio::spawn(self.clients.clone().serve(t, options, Some(ticket), Some(self.idle), trusted));
            }
            Err(why) => {
                tracing::debug!(client = %t.describe(), "refused: {why}");
                admit::refuse(&t, Code::ResourceExhausted, &why);
            }
        }
    }

    async fn unix(self, l: UnixSocket, access: Access) {
        // SAFETY: getuid has no preconditions.
        let own = unsafe { libc::getuid() };
        loop {
            match l.accept().await {
                Ok((t, uid)) if !unix_socket::uid_allowed(uid, access.allow_uids.as_deref(), access.unix_mode, own) => {
                    tracing::warn!(client = %t.describe(), "refused: uid {uid} is not allowed (allow_uids)");
                    let why = format!("uid {uid} may not use this hub's socket (see allow_uids)");
                    admit::refuse(&t, Code::Unauthenticated, &why);
                }
                Ok((t, uid)) => self.enter(t, Peer::Uid(uid), self.serving.clone(), true),
                Err(e) => accept_failed(&l.describe(), e).await,
            }
        }
    }

    /// The `tcp` listener: plain, or TLS when `tls` is given. A TLS client
    /// is admitted before its handshake (so a flood of handshakes counts
    /// against the limits), and refused by closing: a GOAWAY in plain text
    /// would mean nothing to it.
    async fn tcp(self, l: tokio::net::TcpListener, tls: Option<tls::Acceptor>) {
        let listen = tcp_listen(&l, tls.is_some());
        // Every connection on a TLS listener with `client_ca` has shown a
        // client certificate signed by it: trusted.
        let certified = tls.as_ref().is_some_and(|a| a.requires_client_cert());
        let trusted = self.token.is_some() || certified;
        loop {
            let (s, peer) = match l.accept().await {
                Ok(x) => x,
                Err(e) => {
                    accept_failed(&listen, e).await;
                    continue;
                }
            };
            let Some(acceptor) = &tls else {
                let plain = s.set_nodelay(true).and_then(|()| s.into_std()).and_then(|std| {
                    std.set_nonblocking(true)?;
                    FdTransport::new(std, format!("tcp:{peer}"))
                });
                match plain {
                    Ok(t) => self.enter(Arc::new(t), Peer::Ip(peer.ip()), self.remote(), self.token.is_some()),
                    Err(e) => accept_failed(&listen, e).await,
                }
                continue;
            };
            let ticket = match self.admission.admit(Peer::Ip(peer.ip())) {
                Ok(t) => t,
                Err(why) => {
                    tracing::debug!(client = %format!("tls:{peer}"), "refused: {why}");
                    continue;
                }
            };
            let (door, acceptor) = (self.clone(), acceptor.clone());
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                match tls::TlsTransport::accept(&acceptor, s, format!("tls:{peer}")).await {
                    Ok(t) => door.clients.clone().serve(Arc::new(t), door.remote(), Some(ticket), Some(door.idle), trusted).await,
                    Err(e) => tracing::info!(client = %format!("tls:{peer}"), "TLS handshake failed: {e}"),
                }
            });
        }
    }

    /// The WebSocket listener; `trusted` with a token, or when it is WSS
    /// with `client_ca`.
    async fn websocket(self, l: WebSocketListener, trusted: bool) {
        let listen = hubwire::transport::Listener::describe(&l);
        loop {
            match l.accept().await {
                Ok((t, peer)) => self.enter(t, Peer::Ip(peer.ip()), self.remote(), trusted),
                Err(e) => accept_failed(&listen, e).await,
            }
        }
    }
}

/// How the `tcp` listener is named in the log: `tcp:ADDR`, or `tls:ADDR`.
fn tcp_listen(l: &tokio::net::TcpListener, tls: bool) -> String {
    let scheme = if tls { "tls" } else { "tcp" };
    l.local_addr().map_or(format!("{scheme}:?"), |a| format!("{scheme}:{a}"))
}

/// After a failed accept (out of descriptors, usually): wait instead of
/// spinning.
async fn accept_failed(listen: &str, e: std::io::Error) {
    tracing::warn!(listen = %listen, "accept failed: {e}");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// SIGTERM and SIGINT, caught from the moment they are installed.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals { term: signal(SignalKind::terminate())?, int: signal(SignalKind::interrupt())? })
    }

    /// The next one to arrive, by name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
