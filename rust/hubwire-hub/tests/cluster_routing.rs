//! Routing to the cluster (`remote`), in one process: the cluster is a
//! [`LinkDialer`] over in-memory connections, each "replica" a provider
//! that can be killed (its links closed at once, as a dead process's
//! would be). What is checked: a method nobody offers fails
//! `unknown_method` at once; calls spread over a pool's links; a killed
//! replica fails only its own calls in flight (`unavailable`) while new
//! calls go to another, and its link is replaced; a method nobody offers
//! any more fails, and is asked for again on the next call; the hub's
//! count of routed calls (its spin gate) returns to zero however a call
//! ends. No timing is
//! asserted: every wait has a generous outer deadline.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hubwire::transport::{memory, DynTransport};
use hubwire::{CallOptions, Code, Connection, ConnectionOptions, Error, Provider};
use hubwire_hub::config::HubLimits;
use hubwire_hub::queue::ClientQueue;
use hubwire_hub::registry::{Phase, Registry};
use hubwire_hub::remote::{BoxFuture, Cluster, LinkDialer, Target};
use hubwire_hub::route::HubService;

/// How long any one step may take before the test fails.
const STEP: Duration = Duration::from_secs(10);

/// One replica somewhere in the cluster: its name, whether it is alive,
/// and the links it serves.
struct Replica {
    name: String,
    alive: AtomicBool,
    /// Picked, but its links fail at once (a replica that does not answer).
    broken: AtomicBool,
    links: Mutex<Vec<Connection>>,
}

/// The cluster: replicas offering `who` (answers its name) and `hold`
/// (answers only when cancelled), picked round robin among the living.
struct MemoryCluster {
    replicas: Vec<Arc<Replica>>,
    next: AtomicUsize,
    /// Times in a row each replica is picked (1: round robin), as a
    /// queue group may pick the same member twice.
    repeat: usize,
    opened: AtomicUsize,
}

impl MemoryCluster {
    fn new(names: &[&str]) -> Arc<MemoryCluster> {
        MemoryCluster::picking(names, 1)
    }

    /// A cluster that picks each replica `repeat` times in a row.
    fn picking(names: &[&str], repeat: usize) -> Arc<MemoryCluster> {
        let replicas = names
            .iter()
            .map(|n| {
                let (alive, broken) = (AtomicBool::new(true), AtomicBool::new(false));
                Arc::new(Replica { name: n.to_string(), alive, broken, links: Mutex::default() })
            })
            .collect();
        Arc::new(MemoryCluster { replicas, next: AtomicUsize::new(0), repeat, opened: AtomicUsize::new(0) })
    }

    /// As kill -9: no new links, and every link it served ends now.
    fn kill(&self, name: &str) {
        let r = self.replicas.iter().find(|r| r.name == name).unwrap();
        r.alive.store(false, Ordering::SeqCst);
        for c in r.links.lock().unwrap().drain(..) {
            c.close();
        }
    }
}

fn provider(name: &str) -> Provider {
    let me = name.to_string();
    Provider::new(name)
        .unary("who", move |_ctx, (): ()| {
            let me = me.clone();
            async move { Ok(me) }
        })
        .unary("hold", |ctx, (): ()| async move {
            ctx.cancelled().await;
            Ok(())
        })
}

impl LinkDialer for MemoryCluster {
    fn open(&self, target: &Target) -> BoxFuture<'_, io::Result<(DynTransport, String)>> {
        let target = target.clone();
        Box::pin(async move {
            let offered = matches!(&target, Target::Method(m) if m == "who" || m == "hold");
            let alive: Vec<_> = self.replicas.iter().filter(|r| r.alive.load(Ordering::SeqCst)).cloned().collect();
            if !offered || alive.is_empty() {
                return Err(io::Error::new(io::ErrorKind::NotFound, format!("no responders for {}", target.describe())));
            }
            let r = alive[self.next.fetch_add(1, Ordering::Relaxed) / self.repeat % alive.len()].clone();
            if r.broken.load(Ordering::SeqCst) {
                return Err(io::Error::new(io::ErrorKind::ConnectionRefused, format!("{} does not answer", r.name)));
            }
            let (ours, theirs) = memory::pair();
            let opts = ConnectionOptions::new(r.name.clone()).service(provider(&r.name));
            self.opened.fetch_add(1, Ordering::Relaxed);
            let name = r.name.clone();
            tokio::spawn(async move {
                if let Ok(c) = Connection::accept(theirs, &opts).await {
                    r.links.lock().unwrap().push(c);
                }
            });
            Ok((Arc::new(ours) as DynTransport, name))
        })
    }
}

/// A hub with no provider of its own that routes to `cluster` with two
/// links per method, and a client connected to it.
async fn hub(cluster: &Arc<MemoryCluster>) -> (Arc<Registry>, Connection) {
    hub_with_links(cluster, 2).await
}

/// [`hub`] with `links` links per method.
async fn hub_with_links(cluster: &Arc<MemoryCluster>, links: usize) -> (Arc<Registry>, Connection) {
    let reg = Arc::new(Registry::new(&[], 4096));
    let dialer: Arc<dyn LinkDialer> = cluster.clone();
    let _ = reg.cluster.set(Arc::new(Cluster::new(dialer, ConnectionOptions::new("hub-a"), links, 16)));
    let limits = HubLimits::default();
    let service = HubService {
        own: Arc::new(Provider::new("hub-a")),
        registry: reg.clone(),
        limits: limits.clone(),
        client: Arc::new(ClientQueue::new(0, 0)),
        direct: false,
        to_cluster: true,
    }
    .for_client();
    let pair = hubwire::testing::pair(service).await;
    // The server side must live as long as the test: leak it into a task.
    let server = pair.server;
    tokio::spawn(async move { server.closed().await });
    (reg, pair.client)
}

async fn who(c: &Connection) -> Result<String, Error> {
    tokio::time::timeout(STEP, c.call::<_, String>("who", &())).await.expect("a call hung")
}

/// The links of the method's pool (none while it has no pool).
fn links(reg: &Registry, method: &str) -> Vec<Arc<hubwire_hub::registry::Replica>> {
    let pools = reg.cluster.get().unwrap().pools();
    pools.iter().filter(|p| p.config.name == format!("nats:{method}")).flat_map(|p| p.replicas.clone()).collect()
}

/// Ready links of the method's pool.
fn ready_links(reg: &Registry, method: &str) -> usize {
    links(reg, method).iter().filter(|r| r.state.lock().unwrap().phase == Phase::Ready).count()
}

async fn until(what: &str, mut ok: impl FnMut() -> bool) {
    let give_up = tokio::time::Instant::now() + STEP;
    while !ok() {
        assert!(tokio::time::Instant::now() < give_up, "{what}: not within {STEP:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_method_nobody_offers_fails_unknown_method_and_keeps_no_link() {
    let cluster = MemoryCluster::new(&["b1"]);
    let (reg, client) = hub(&cluster).await;
    let e = tokio::time::timeout(STEP, client.call::<_, ()>("nope", &())).await.expect("hung").unwrap_err();
    assert_eq!(e.code(), Code::UnknownMethod, "{e}");
    assert!(e.message().contains("here or in the cluster"), "{e}");
    assert!(reg.cluster.get().unwrap().pools().is_empty(), "no pool is kept for a method nobody offers");
}

#[tokio::test]
async fn calls_spread_over_the_links_of_a_remote_method() {
    let cluster = MemoryCluster::new(&["b1", "b2"]);
    let (reg, client) = hub(&cluster).await;
    assert!(who(&client).await.is_ok());
    until("both links ready", || ready_links(&reg, "who") == 2).await;
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..20 {
        seen.insert(who(&client).await.unwrap());
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["b1", "b2"], "both replicas answered");
}

#[tokio::test]
async fn a_killed_replica_fails_only_its_own_calls_and_its_link_is_replaced() {
    let cluster = MemoryCluster::new(&["b1", "b2", "b3"]);
    let (reg, client) = hub(&cluster).await;
    assert!(who(&client).await.is_ok());
    until("both links ready", || ready_links(&reg, "who") == 2).await;
    // One held call per link (the least-loaded link is picked): the
    // second once the pool has both.
    let (c1, c2) = (client.clone(), client.clone());
    let h1 = tokio::spawn(async move { c1.call::<_, ()>("hold", &()).await });
    until("both hold links ready", || ready_links(&reg, "hold") == 2).await;
    let held = [h1, tokio::spawn(async move { c2.call::<_, ()>("hold", &()).await })];
    let loads = || links(&reg, "hold").iter().map(|r| r.in_flight.load(Ordering::Relaxed)).collect::<Vec<_>>();
    until("both calls in flight, one per link", || loads() == [1, 1]).await;
    let victim = links(&reg, "hold")[0].state.lock().unwrap().peer.clone().unwrap();
    let opened = cluster.opened.load(Ordering::Relaxed);
    cluster.kill(&victim);
    // New calls are answered, by the living, while the link is replaced.
    for _ in 0..10 {
        let by = who(&client).await.expect("a new call fails over");
        assert_ne!(by, victim);
    }
    let [mut h1, mut h2] = held;
    let first = tokio::time::timeout(STEP, async {
        tokio::select! {
            r = &mut h1 => (r.unwrap(), h2),
            r = &mut h2 => (r.unwrap(), h1),
        }
    });
    let (r, other) = first.await.expect("the call on the dead replica hung");
    let e = r.unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    assert!(e.message().contains("nats:hold"), "names the pool: {e}");
    assert!(!other.is_finished(), "the call on the living replica goes on");
    until("the link replaced", || cluster.opened.load(Ordering::Relaxed) > opened && ready_links(&reg, "hold") == 2).await;
}

#[tokio::test]
async fn a_method_nobody_offers_any_more_fails_then_is_asked_for_again() {
    let cluster = MemoryCluster::new(&["b1"]);
    let (reg, client) = hub(&cluster).await;
    assert_eq!(who(&client).await.unwrap(), "b1");
    cluster.kill("b1");
    // Each call ends, `unavailable` while the pool learns that nobody is
    // left, then `unknown_method` once it has been dropped.
    let give_up = tokio::time::Instant::now() + STEP;
    loop {
        let e = who(&client).await.unwrap_err();
        match e.code() {
            Code::UnknownMethod => break,
            Code::Unavailable => assert!(tokio::time::Instant::now() < give_up, "still unavailable after {STEP:?}: {e}"),
            other => panic!("unexpected {other:?}: {e}"),
        }
    }
    assert!(reg.cluster.get().unwrap().pools().is_empty(), "the pool was dropped");
}

/// The hub counts each routed call from `dispatch`'s start (the spin gate
/// of `[hub] wait = "adaptive"`): the count must come back to zero however
/// a call ends, or the gate would stay shut (or open) for good.
#[tokio::test]
async fn the_count_of_routed_calls_returns_to_zero_however_a_call_ends() {
    let cluster = MemoryCluster::new(&["r1"]);
    let (reg, client) = hub(&cluster).await;
    let idle = || reg.routed.in_flight() == 0;
    // Answered.
    assert_eq!(who(&client).await.unwrap(), "r1");
    until("an answered call leaves the count", idle).await;
    // Refused before any slot: unknown method, wrong kind.
    let e = tokio::time::timeout(STEP, client.call::<_, ()>("nope", &())).await.unwrap().unwrap_err();
    assert_eq!(e.code(), Code::UnknownMethod, "{e}");
    until("a refusal leaves the count", idle).await;
    let wrong_kind = async {
        let mut items = client.server_stream::<_, String>("who", &(), &CallOptions::default()).await?;
        items.next().await
    };
    let e = tokio::time::timeout(STEP, wrong_kind).await.unwrap().expect_err("who is unary");
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    until("a call of the wrong kind leaves the count", idle).await;
    // Cancelled by its caller while the provider holds it.
    let held = client.call::<_, ()>("hold", &());
    let cancelled = tokio::time::timeout(Duration::from_millis(300), held).await;
    assert!(cancelled.is_err(), "hold answered before it was cancelled");
    until("a cancelled call leaves the count", idle).await;
    // Failed by its replica's death.
    let c = client.clone();
    let held = tokio::spawn(async move { c.call::<_, ()>("hold", &()).await });
    // On its link, not just counted: a call killed before it was sent
    // fails `unavailable` too, and would prove less.
    let on_link = || links(&reg, "hold").iter().map(|r| r.in_flight.load(Ordering::Relaxed)).sum::<usize>() == 1;
    until("a held call is on its link", on_link).await;
    assert_eq!(reg.routed.in_flight(), 1, "a held call is counted");
    cluster.kill("r1");
    let e = tokio::time::timeout(STEP, held).await.unwrap().unwrap().unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    until("a call failed by a dead replica leaves the count", idle).await;
}

/// The pool's second link avoids the replica its first reached, even when
/// the cluster picks that replica again and the second link's supervisor
/// dials before the first link has been adopted (the supervisors start
/// together, on several workers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pools_links_reach_different_replicas_when_they_can() {
    links_spread_over(&["s1", "s2"]).await;
}

/// Twenty rounds of a fresh pool with a link per replica of `names`, on a
/// cluster that picks each replica twice in a row: every link must reach
/// a replica of its own.
async fn links_spread_over(names: &[&str]) {
    for round in 0..20 {
        let cluster = MemoryCluster::picking(names, 2);
        let (reg, client) = hub_with_links(&cluster, names.len()).await;
        assert!(who(&client).await.is_ok());
        until("every link ready", || ready_links(&reg, "who") == names.len()).await;
        let mut peers: Vec<String> = links(&reg, "who").iter().map(|r| r.state.lock().unwrap().peer.clone().unwrap()).collect();
        peers.sort();
        assert_eq!(peers, names, "round {round}: two links on one replica");
    }
}

/// Three links on three replicas: the two links the pool's supervisors
/// open themselves dial one at a time, so the second avoids the replica
/// the first reached (dialling at once, each avoided only the adopted
/// link's, and they could reach the same one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pools_links_opened_together_reach_different_replicas() {
    links_spread_over(&["s1", "s2", "s3"]).await;
}

/// A new link that reached a taken replica keeps it when its next try
/// fails: s2 is picked but never answers, and the cluster picks each
/// replica twice in a row, so the second link's tries go s1 (taken), s2
/// (failed). It used to drop the link to s1 with the failure, and every
/// later attempt went the same way: the pool never had its second link.
#[tokio::test]
async fn a_link_to_a_taken_replica_is_kept_when_the_next_try_fails() {
    let cluster = MemoryCluster::picking(&["s1", "s2"], 2);
    cluster.replicas[1].broken.store(true, Ordering::SeqCst);
    let (reg, client) = hub(&cluster).await;
    assert_eq!(who(&client).await.unwrap(), "s1");
    until("both links ready", || ready_links(&reg, "who") == 2).await;
    let peers: Vec<String> = links(&reg, "who").iter().map(|r| r.state.lock().unwrap().peer.clone().unwrap()).collect();
    assert_eq!(peers, ["s1", "s1"]);
}
