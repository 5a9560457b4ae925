//! Who offers what: providers, their replicas, and the method table the
//! router reads on every call.
//!
//! A method belongs to the first provider that advertises it in its HELLO;
//! a second provider advertising the same name is refused (marked failed,
//! with both names in the reason), because routing a name to two different
//! programs would be a silent lottery. Routes outlive restarts: while a
//! provider is restarting its methods stay known, and calls wait for a
//! replica rather than fail with `unknown_method`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use hubwire::wait::SpinGate;
use hubwire::{Connection, MethodInfo};
use tokio::sync::{Notify, Semaphore};

use crate::config::ProviderConfig;
use crate::direct::DirectCounts;
use crate::metrics::Metrics;

/// Method names starting with this are the hub's own.
pub const RESERVED_PREFIX: &str = "hubwire.";

/// Lines of a replica's stderr kept for `hubwire status`, each at most
/// `log_line_max` bytes (cut as it is read): the tail is bounded by both.
pub const STDERR_TAIL: usize = 10;

/// Where a replica is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Spawning or dialling, then the handshake.
    Starting,
    /// Handshake done: takes calls.
    Ready,
    /// Died; waits out its backoff before starting again.
    Backoff,
    /// A dialled provider that cannot be reached: dialled again and
    /// again (with backoff), never given up on, since its process is not
    /// ours to restart.
    Unreachable,
    /// Gave up: crash loop, or a conflict. The reason says which.
    Failed(String),
    /// The hub is shutting down.
    Stopped,
}

impl Phase {
    /// One word for tables.
    pub fn word(&self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Ready => "ready",
            Phase::Backoff => "restarting",
            Phase::Unreachable => "unreachable",
            Phase::Failed(_) => "failed",
            Phase::Stopped => "stopped",
        }
    }
}

/// The mutable part of a replica.
pub struct ReplicaState {
    /// Where it is.
    pub phase: Phase,
    /// Its connection while ready.
    pub conn: Option<Connection>,
    /// Its process id, for spawned providers.
    pub pid: Option<u32>,
    /// Restarts so far.
    pub restarts: u32,
    /// How its last run ended.
    pub last_exit: Option<String>,
    /// Its last lines on stderr.
    pub stderr: VecDeque<String>,
    /// Which peer it reached while ready: the name in its HELLO, or for a
    /// link through the cluster, `provider/replica-id`.
    pub peer: Option<String>,
}

/// One process (or connection) of a provider's pool.
pub struct Replica {
    /// 0-based index in the pool.
    pub index: usize,
    /// Phase, connection, restarts.
    pub state: Mutex<ReplicaState>,
    /// Calls routed to it and not yet answered.
    pub in_flight: AtomicUsize,
    /// What it has served.
    pub metrics: Metrics,
    /// Its calls in flight, each with when the replica last moved it
    /// (started it, sent or took an item): what `hung_timeout` watches.
    pub progress: Mutex<HashMap<u64, Instant>>,
    /// Numbers the entries of `progress`.
    next_call: AtomicU64,
    /// Set when this run of the replica was found hung, and why, so that
    /// its failed calls can say so; cleared when it starts again.
    pub hung: Mutex<Option<String>>,
    /// What it served over direct connections, as it reported (`direct`).
    pub direct: DirectCounts,
    /// A connection opened for it before its supervisor started (the
    /// first link of a remote method, `remote`), taken as its first run.
    pub adopt: Mutex<Option<(Connection, String)>>,
}

impl Replica {
    fn new(index: usize) -> Replica {
        Replica {
            index,
            state: Mutex::new(ReplicaState {
                phase: Phase::Starting,
                conn: None,
                pid: None,
                restarts: 0,
                last_exit: None,
                stderr: VecDeque::new(),
                peer: None,
            }),
            in_flight: AtomicUsize::new(0),
            metrics: Metrics::default(),
            progress: Mutex::new(HashMap::new()),
            next_call: AtomicU64::new(0),
            hung: Mutex::new(None),
            direct: DirectCounts::default(),
            adopt: Mutex::new(None),
        }
    }

    /// Registers a call in flight on it; returns its key in `progress`.
    pub fn call_started(&self) -> u64 {
        let key = self.next_call.fetch_add(1, Ordering::Relaxed);
        self.progress.lock().unwrap().insert(key, Instant::now());
        key
    }

    /// The call `key` moved.
    pub fn call_moved(&self, key: u64) {
        if let Some(t) = self.progress.lock().unwrap().get_mut(&key) {
            *t = Instant::now();
        }
    }

    /// The call `key` ended.
    pub fn call_ended(&self, key: u64) {
        self.progress.lock().unwrap().remove(&key);
    }

    /// How long its longest-unmoved call has gone without moving.
    pub fn stalled_for(&self) -> Option<Duration> {
        self.progress.lock().unwrap().values().min().map(|t| t.elapsed())
    }

    /// Keeps a line of stderr for `hubwire status`.
    pub fn push_stderr(&self, line: &str) {
        let mut st = self.state.lock().unwrap();
        if st.stderr.len() == STDERR_TAIL {
            st.stderr.pop_front();
        }
        st.stderr.push_back(line.to_string());
    }
}

/// A provider: its config, its pool, and the gate that bounds its load.
pub struct ProviderState {
    /// From the config file.
    pub config: ProviderConfig,
    /// The pool.
    pub replicas: Vec<Arc<Replica>>,
    /// One permit per call allowed in flight (`max_in_flight`).
    pub gate: Arc<Semaphore>,
    /// Calls waiting for a permit (bounded by `queue`).
    pub queued: AtomicUsize,
    /// Their payload bytes (bounded by `queue_bytes`).
    pub queued_bytes: AtomicUsize,
    /// Signalled whenever a replica becomes ready or fails.
    pub changed: Notify,
    /// Set when the whole provider is refused (duplicate method).
    pub refused: Mutex<Option<String>>,
    /// Set once a replica has registered its methods.
    pub registered: AtomicBool,
    /// Calls refused before reaching a replica (full queue, no replica
    /// ready, the provider failed), by code.
    pub refusals: Metrics,
    /// Where the next pick starts, so that ties rotate over the pool.
    next: AtomicUsize,
    /// A NATS pool's links open one at a time (`supervise::link`): each
    /// then knows the replicas the others reached, and avoids them.
    pub opening: tokio::sync::Mutex<()>,
}

impl ProviderState {
    /// A provider with its pool, nothing ready.
    pub fn new(c: ProviderConfig) -> ProviderState {
        ProviderState {
            replicas: (0..c.replicas).map(|i| Arc::new(Replica::new(i))).collect(),
            gate: Arc::new(Semaphore::new(c.max_in_flight)),
            queued: AtomicUsize::new(0),
            queued_bytes: AtomicUsize::new(0),
            changed: Notify::new(),
            refused: Mutex::new(None),
            registered: AtomicBool::new(false),
            refusals: Metrics::default(),
            next: AtomicUsize::new(0),
            opening: tokio::sync::Mutex::new(()),
            config: c,
        }
    }

    /// The ready replica with the fewest calls in flight, and its connection.
    pub fn pick(&self) -> Option<(Arc<Replica>, Connection)> {
        let mut best: Option<(usize, &Arc<Replica>, Connection)> = None;
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.replicas.len();
        for r in (0..n).map(|i| &self.replicas[(start + i) % n]) {
            let load = r.in_flight.load(Ordering::Relaxed);
            if best.as_ref().is_some_and(|(l, _, _)| *l <= load) {
                continue;
            }
            let st = r.state.lock().unwrap();
            if let (Phase::Ready, Some(c)) = (&st.phase, &st.conn) {
                // A replica that sent GOAWAY finishes what it has and takes
                // nothing new.
                if !c.is_closed() && !c.is_draining() {
                    best = Some((load, r, c.clone()));
                }
            }
        }
        best.map(|(_, r, c)| (r.clone(), c))
    }

    /// Why no replica will ever be ready again, if so.
    pub fn failed(&self) -> Option<String> {
        if let Some(why) = self.refused.lock().unwrap().clone() {
            return Some(why);
        }
        let mut reasons = Vec::new();
        for r in &self.replicas {
            match &r.state.lock().unwrap().phase {
                Phase::Failed(why) => reasons.push(why.clone()),
                Phase::Stopped => reasons.push("the hub is shutting down".into()),
                _ => return None,
            }
        }
        reasons.into_iter().next()
    }
}

/// A routed method: who serves it and how it is called.
#[derive(Clone)]
pub struct Route {
    /// The provider.
    pub provider: Arc<ProviderState>,
    /// As advertised.
    pub info: MethodInfo,
}

/// Every provider and every method.
pub struct Registry {
    /// In config order.
    pub providers: Vec<Arc<ProviderState>>,
    routes: RwLock<HashMap<String, Arc<Route>>>,
    /// Method names in the order they were first registered.
    order: Mutex<Vec<String>>,
    /// Set on SIGTERM: supervisors stop restarting.
    pub stopping: AtomicBool,
    /// Signalled when `stopping` is set.
    pub stop: Notify,
    /// Signalled whenever any replica changes phase or registers.
    pub changed: Notify,
    /// When the hub started.
    pub started: Instant,
    /// `[hub] log_line_max`: the longest provider stdout/stderr line kept.
    pub log_line_max: usize,
    /// The cluster joined with `[nats]`, once connected: remote methods'
    /// pools (`remote`).
    pub cluster: std::sync::OnceLock<Arc<crate::remote::Cluster>>,
    /// The calls routed to a provider and not yet answered; with `[hub]
    /// wait = "adaptive"`, the providers' connections spin only while it
    /// says one caller is alone.
    pub routed: SpinGate,
}

impl Registry {
    /// A registry for these providers, each with its pool, nothing ready;
    /// their log lines are cut at `log_line_max` bytes.
    pub fn new(configs: &[ProviderConfig], log_line_max: usize) -> Registry {
        let providers = configs.iter().map(|c| Arc::new(ProviderState::new(c.clone()))).collect();
        Registry {
            providers,
            routes: RwLock::new(HashMap::new()),
            order: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            stop: Notify::new(),
            changed: Notify::new(),
            started: Instant::now(),
            log_line_max,
            cluster: std::sync::OnceLock::new(),
            routed: SpinGate::new(),
        }
    }

    /// The route of a method (an `Arc`: this runs on every call, and a
    /// method's schemas are not small).
    pub fn route(&self, method: &str) -> Option<Arc<Route>> {
        self.routes.read().unwrap().get(method).cloned()
    }

    /// Every routed method, in registration order.
    pub fn routes(&self) -> Vec<Arc<Route>> {
        let routes = self.routes.read().unwrap();
        self.order.lock().unwrap().iter().filter_map(|m| routes.get(m).cloned()).collect()
    }

    /// Records the methods a replica of `provider` advertised. Fails with
    /// the reason when one belongs to another provider or is reserved.
    pub fn register(&self, provider: &Arc<ProviderState>, methods: &[MethodInfo]) -> Result<(), String> {
        let mut routes = self.routes.write().unwrap();
        for m in methods {
            if m.name.starts_with(RESERVED_PREFIX) {
                return Err(format!("method {:?} uses the prefix {RESERVED_PREFIX:?}, which is reserved for the hub", m.name));
            }
            if let Some(r) = routes.get(&m.name) {
                if !Arc::ptr_eq(&r.provider, provider) {
                    return Err(format!("duplicate method {:?}: provider {:?} offers it already", m.name, r.provider.config.name));
                }
            }
        }
        let mut order = self.order.lock().unwrap();
        for m in methods {
            if routes.insert(m.name.clone(), Arc::new(Route { provider: provider.clone(), info: m.clone() })).is_none() {
                order.push(m.name.clone());
            }
        }
        provider.registered.store(true, Ordering::Release);
        Ok(())
    }

    /// Providers that may still offer methods nobody has seen yet: never
    /// registered, and not given up on.
    pub fn pending(&self) -> Vec<&str> {
        self.providers
            .iter()
            .filter(|p| !p.registered.load(Ordering::Acquire) && p.failed().is_none())
            .map(|p| p.config.name.as_str())
            .collect()
    }

    /// Completes once the hub is stopping (at once if it already is).
    pub async fn stopped(&self) {
        let notified = self.stop.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !self.is_stopping() {
            notified.await;
        }
    }

    /// Starts stopping: supervisors stop their replicas and do not restart.
    pub fn begin_stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.stop.notify_waiters();
    }

    /// Whether SIGTERM has been received.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Calls in flight across every provider.
    pub fn in_flight(&self) -> usize {
        self.providers.iter().flat_map(|p| &p.replicas).map(|r| r.in_flight.load(Ordering::Relaxed)).sum()
    }
}
