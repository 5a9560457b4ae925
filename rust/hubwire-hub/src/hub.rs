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
//! Every accepted call therefore gets an answer, and no child outlives the
//! hub (they are also tied to it with `PR_SET_PDEATHSIG`, for the case
//! where the hub itself is killed).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hubwire::transport::{self, memory, tcp, unix, Listener};
use hubwire::{Connection, ConnectionOptions, Provider, WaitMode};
use tokio::task::JoinSet;

use crate::config::{ConfigError, HubConfig, Located};
use crate::own_schemas;
use crate::registry::Registry;
use crate::route::HubService;
use crate::status::{self, METHODS_METHOD, STATUS_METHOD};
use crate::websocket::{self, WebSocketListener};

/// The client connections the hub serves, so that shutdown can drain them.
#[derive(Default)]
struct Clients {
    next: AtomicU64,
    live: Mutex<HashMap<u64, Connection>>,
}

impl Clients {
    /// Serves one connection until it closes.
    async fn serve(self: Arc<Self>, t: transport::DynTransport, config: ConnectionOptions) {
        let label = t.describe();
        let conn = match Connection::start(t, &config, false).await {
            Ok(c) => c,
            Err(e) => return tracing::warn!(client = %label, "handshake failed: {e}"),
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.live.lock().unwrap().insert(id, conn.clone());
        let why = conn.closed().await;
        tracing::debug!(client = %label, "client left: {}", why.message());
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
    unix: Option<unix::UnixListener>,
    tcp: Option<tcp::TcpListener>,
    http: Option<tokio::net::TcpListener>,
    websocket: Option<WebSocketListener>,
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
        Some(at) => {
            let refused = |why: String| ConfigError {
                file: cfg.file.display().to_string(),
                line: Some(at.line),
                message: format!("[hub] unix = {:?}: {why}", at.value.display()),
            };
            if std::os::unix::net::UnixStream::connect(&at.value).is_ok() {
                return Err(refused("another process is already listening there".into()));
            }
            Some(unix::UnixListener::bind(&at.value).map_err(|e| refused(e.to_string()))?)
        }
    };
    let tcp = match &h.tcp {
        None => None,
        Some(at) => Some(tcp::TcpListener::bind(at.value.as_str()).await.map_err(|e| in_use(cfg, "tcp", at, e))?),
    };
    let http = match &h.http {
        None => None,
        Some(at) => Some(tokio::net::TcpListener::bind(at.value.as_str()).await.map_err(|e| in_use(cfg, "http", at, e))?),
    };
    let websocket = match &h.websocket {
        None => None,
        Some(at) => {
            let policy = websocket::Policy { allowed_origins: h.allowed_origins.clone(), allowed_hosts: h.allowed_hosts.clone() };
            Some(WebSocketListener::bind(at.value.as_str(), policy).await.map_err(|e| in_use(cfg, "websocket", at, e))?)
        }
    };
    Ok(Bound { unix, tcp, http, websocket })
}

/// The service the hub offers its clients: its own methods, and every
/// provider's, relayed.
fn hub_service(reg: &Arc<Registry>, name: &str) -> HubService {
    let (r1, r2, hub) = (reg.clone(), reg.clone(), name.to_string());
    let own = Provider::new(name)
        .unary(STATUS_METHOD, move |_ctx, (): ()| {
            let s = status::status(&r1, &hub);
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
    HubService { own, registry: reg.clone() }
}

/// Runs the hub until SIGTERM or SIGINT, then shuts it down in order.
pub async fn run(cfg: HubConfig, bound: Bound) -> std::io::Result<()> {
    // Before any child exists, so that a SIGTERM from here on is a clean stop.
    let mut signals = Signals::install()?;
    let reg = Arc::new(Registry::new(&cfg.providers));
    let wait = if cfg.hub.low_latency { WaitMode::low_latency() } else { WaitMode::Efficient };
    let upstream = ConnectionOptions::new(cfg.hub.name.clone()).wait(wait);
    let supervisors = crate::supervise::start(&reg, &upstream);
    let serving = ConnectionOptions::new(cfg.hub.name.clone()).wait(wait).service(hub_service(&reg, &cfg.hub.name));

    let clients = Arc::new(Clients::default());
    let mut accepting = JoinSet::new();
    let Bound { unix, tcp, http, websocket } = bound;
    let listeners: [Option<Box<dyn Listener>>; 3] =
        [unix.map(|l| Box::new(l) as _), tcp.map(|l| Box::new(l) as _), websocket.map(|l| Box::new(l) as _)];
    for l in listeners.into_iter().flatten() {
        accepting.spawn(accept_loop(l, clients.clone(), serving.clone()));
    }
    if let Some(l) = http {
        // The gateway is one more client, over an in-memory connection.
        let (ours, theirs) = memory::pair();
        tokio::spawn(clients.clone().serve(Arc::new(theirs), serving.clone()));
        let conn = Connection::dial(ours, &ConnectionOptions::new("http-gateway")).await.map_err(std::io::Error::other)?;
        tracing::info!(listen = %l.local_addr()?, "HTTP gateway");
        accepting.spawn(crate::gateway::serve(l, conn, reg.clone(), cfg.hub.name.clone()));
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
    tracing::info!("hub stopped");
    Ok(())
}

async fn accept_loop(listener: Box<dyn Listener>, clients: Arc<Clients>, config: ConnectionOptions) {
    tracing::info!(listen = %listener.describe(), "accepting clients");
    loop {
        match transport::accept(listener.as_ref()).await {
            Ok(t) => {
                tokio::spawn(clients.clone().serve(t, config.clone()));
            }
            Err(e) => {
                // Out of descriptors, usually: wait instead of spinning.
                tracing::warn!(listen = %listener.describe(), "accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
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
