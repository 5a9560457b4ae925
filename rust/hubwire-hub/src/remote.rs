//! Routing to the cluster: a call for a method no local provider offers
//! goes to a replica elsewhere (`docs/hub.md`, "Joining a NATS cluster").
//!
//! A remote method is a provider of its own in the registry, a *pool*
//! named `nats:METHOD`, whose replicas are *links*: virtual connections
//! opened through the cluster to a replica the cluster picks (a queue
//! group per method, so each link may land on another replica). Being a
//! provider, a pool gets what every provider gets: the least-loaded ready
//! link is picked for each call, a link that dies fails its calls in
//! flight `unavailable` at once while new calls go to the other links,
//! and its supervisor opens a replacement (`supervise`), with status and
//! metrics per link.
//!
//! The first call for a method opens its first link itself: if nobody in
//! the cluster offers the method, the call fails `unknown_method` at once
//! (no link is kept, no timeout is waited out); otherwise that link
//! becomes the pool's first replica and the others are opened beside it.
//! When no link is left and nobody offers the method any more, the calls
//! waiting for one fail `unavailable` at once and the pool is dropped, so
//! the next call asks the cluster again.
//!
//! The cluster itself is behind [`LinkDialer`], so that this logic is the
//! same over NATS (`nats_link`) and over memory in tests.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hubwire::transport::DynTransport;
use hubwire::{Code, Connection, ConnectionOptions, Error};
use tokio::task::JoinHandle;

use crate::config::{Launch, ProviderConfig, DEFAULT_QUEUE_BYTES};
use crate::registry::{Registry, Route};

/// What a link is opened to: a method, a provider (`dial = "nats:NAME"`)
/// or one replica (spec §13.1).
pub use hubwire::nats::Target;

/// A boxed future, for the object-safe [`LinkDialer`].
pub type BoxFuture<'a, T> = Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// The cluster, as the hub uses it: opens links.
pub trait LinkDialer: Send + Sync + 'static {
    /// Opens a byte stream to one replica offering `target`, chosen by
    /// the cluster, and says which it reached (`provider/replica-id`).
    /// `ErrorKind::NotFound` means nobody offers it now.
    fn open(&self, target: &Target) -> BoxFuture<'_, io::Result<(DynTransport, String)>>;
}

/// Why a link could not be opened.
pub enum LinkError {
    /// Nobody in the cluster offers it.
    Nobody,
    /// It could not be reached or did not finish its HELLO: why.
    Failed(String),
}

/// Calls in flight at once on one remote method, over all its links (its
/// replicas' own limits apply beyond).
pub const POOL_MAX_IN_FLIGHT: usize = 4096;
/// Dials of a new link while it reaches a replica another link has.
const SPREAD_TRIES: usize = 3;
/// First wait before a dead link is replaced; doubles while dials fail.
const LINK_BACKOFF: Duration = Duration::from_millis(20);
/// Longest wait between attempts to replace a link.
const LINK_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The hub's side of the cluster: how links are opened, and the pools.
pub struct Cluster {
    dialer: Arc<dyn LinkDialer>,
    /// How links are dialled (the hub's name, limits, wait mode).
    pub options: ConnectionOptions,
    /// Links per remote method (`[nats] links`).
    pub links: usize,
    /// Remote methods with a pool at once (`[nats] remote_methods`).
    pub max_methods: usize,
    pools: Mutex<HashMap<String, Pool>>,
}

/// A remote method's pool: its route (the provider is the pool), its
/// links' supervisors, and when it last took a call.
struct Pool {
    route: Arc<Route>,
    tasks: Vec<JoinHandle<()>>,
    used: Instant,
}

impl Cluster {
    /// A cluster reached through `dialer`, links opened with `options`.
    pub fn new(dialer: Arc<dyn LinkDialer>, options: ConnectionOptions, links: usize, max_methods: usize) -> Cluster {
        Cluster { dialer, options, links, max_methods, pools: Mutex::new(HashMap::new()) }
    }

    /// Opens one link to `target` and does the handshake, within the
    /// handshake timeout: the connection, and which replica it reached.
    pub async fn open_link(&self, target: &Target) -> Result<(Connection, String), LinkError> {
        let within = self.options.handshake_timeout;
        let what = target.describe();
        let attempt = async {
            let (t, at) = self.dialer.open(target).await.map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => LinkError::Nobody,
                _ => LinkError::Failed(format!("cannot reach {what}: {e}")),
            })?;
            let c = Connection::start(t, &self.options, true)
                .await
                .map_err(|e| LinkError::Failed(format!("handshake with {at} failed: {e}")))?;
            Ok((c, at))
        };
        match tokio::time::timeout(within, attempt).await {
            Ok(r) => r,
            Err(_) => Err(LinkError::Failed(format!("no answer from {what} within {within:?}"))),
        }
    }

    /// Like [`Cluster::open_link`], but tries a few times more (the
    /// cluster picks at random) while the link reaches a replica in
    /// `taken`; keeps the last one if every try does, and the one it has
    /// if a try fails (a link to a taken replica beats none).
    pub async fn open_spread(&self, target: &Target, taken: &[String]) -> Result<(Connection, String), LinkError> {
        let mut last = self.open_link(target).await?;
        for _ in 1..SPREAD_TRIES {
            if !taken.contains(&last.1) {
                break;
            }
            let Ok(next) = self.open_link(target).await else { break };
            last.0.close();
            last = next;
        }
        Ok(last)
    }

    /// The pools, for status: each as its provider.
    pub fn pools(&self) -> Vec<Arc<crate::registry::ProviderState>> {
        let pools = self.pools.lock().unwrap();
        let mut v: Vec<_> = pools.values().map(|p| p.route.provider.clone()).collect();
        v.sort_by(|a, b| a.config.name.cmp(&b.config.name));
        v
    }

    /// The remote methods' routes, by name.
    pub fn routes(&self) -> Vec<Arc<Route>> {
        let pools = self.pools.lock().unwrap();
        let mut v: Vec<_> = pools.values().map(|p| p.route.clone()).collect();
        v.sort_by(|a, b| a.info.name.cmp(&b.info.name));
        v
    }

    /// Drops a method's pool (its links close as their supervisors end).
    pub fn forget(&self, method: &str) {
        if let Some(p) = self.pools.lock().unwrap().remove(method) {
            end(p);
        }
    }
}

fn end(p: Pool) {
    for t in p.tasks {
        t.abort();
    }
    for r in &p.route.provider.replicas {
        if let Some(c) = r.state.lock().unwrap().conn.take() {
            c.close();
        }
    }
}

/// The route of `method` in the cluster: its pool, made on the first call
/// by opening its first link. `unknown_method` at once when nobody offers
/// it; `None` when the hub has joined no cluster.
pub async fn route(reg: &Arc<Registry>, method: &str) -> Option<Result<Arc<Route>, Error>> {
    let cluster = reg.cluster.get()?;
    if let Some(p) = cluster.pools.lock().unwrap().get_mut(method) {
        p.used = Instant::now();
        return Some(Ok(p.route.clone()));
    }
    Some(open_pool(reg, cluster, method).await)
}

async fn open_pool(reg: &Arc<Registry>, cluster: &Cluster, method: &str) -> Result<Arc<Route>, Error> {
    let target = Target::Method(method.to_string());
    let (first, at) = match cluster.open_link(&target).await {
        Ok(c) => c,
        Err(LinkError::Nobody) => {
            return Err(Error::new(
                Code::UnknownMethod,
                format!("unknown method {method:?}: no provider offers it, here or in the cluster"),
            ))
        }
        Err(LinkError::Failed(why)) => return Err(Error::unavailable(format!("method {method:?}: {why}"))),
    };
    let Some(info) = first.peer().method(method).cloned() else {
        let who = first.peer().peer.name.clone();
        first.close();
        return Err(Error::new(Code::UnknownMethod, format!("unknown method {method:?}: {who:?} answered for it but does not list it")));
    };
    let mut pools = cluster.pools.lock().unwrap();
    // Another call may have made the pool while we dialled: ours goes.
    if let Some(p) = pools.get(method) {
        first.close();
        return Ok(p.route.clone());
    }
    if pools.len() >= cluster.max_methods {
        let idle = pools.iter().filter(|(_, p)| p.route.provider.replicas.iter().all(|r| r.in_flight.load(Ordering::Relaxed) == 0));
        let Some(oldest) = idle.min_by_key(|(_, p)| p.used).map(|(m, _)| m.clone()) else {
            first.close();
            return Err(Error::new(
                Code::ResourceExhausted,
                format!("the hub has calls in flight on remote_methods = {} remote methods; try again later", cluster.max_methods),
            ));
        };
        end(pools.remove(&oldest).expect("just found"));
    }
    let provider = Arc::new(crate::registry::ProviderState::new(pool_config(method, cluster.links)));
    *provider.replicas[0].adopt.lock().unwrap() = Some((first, at));
    let route = Arc::new(Route { provider: provider.clone(), info });
    let tasks = crate::supervise::start_provider(reg, &provider, &cluster.options);
    pools.insert(method.to_string(), Pool { route: route.clone(), tasks, used: Instant::now() });
    Ok(route)
}

/// A pool as a provider: `links` replicas, dialled (never given up on
/// while someone offers the method), replaced quickly.
fn pool_config(method: &str, links: usize) -> ProviderConfig {
    ProviderConfig {
        name: format!("nats:{method}"),
        line: 0,
        launch: Launch::Nats(Target::Method(method.to_string())),
        replicas: links,
        max_in_flight: POOL_MAX_IN_FLIGHT,
        queue: POOL_MAX_IN_FLIGHT,
        health_interval: Duration::from_secs(5),
        health_timeout: Duration::from_secs(2),
        backoff: LINK_BACKOFF,
        backoff_max: LINK_BACKOFF_MAX,
        min_uptime: Duration::from_secs(1),
        crash_limit: u32::MAX,
        stop_timeout: Duration::ZERO,
        queue_bytes: DEFAULT_QUEUE_BYTES,
        default_deadline: None,
        hung_timeout: None,
        // A link crosses NATS, never a Unix socket (spec §13).
        shm: false,
    }
}
