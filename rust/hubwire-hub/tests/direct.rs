//! The direct path through the hub (`spec/PROTOCOL.md` §14), with real
//! processes: a client that asks gets a connection straight to a spawned
//! replica and its calls are counted by the replica's reports; a client
//! that does not ask stays routed; a replica killed with -9 mid-traffic
//! loses no call that was not in flight on it; a hub that drains lets the
//! calls in flight on direct connections finish.
//!
//! Bounds on time here only catch hangs.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::Hub;
use hubwire::{Code, Connection, ConnectionOptions};
use hubwire_hub::status::ReplicaStatus;
use serde_json::json;

const ONE: &str = "[[provider]]\nname = \"test\"\nexec = [\"{provider}\"]\nrestart_backoff = \"50ms\"\n";

fn asking() -> ConnectionOptions {
    ConnectionOptions::new("direct-client").direct(true)
}

/// Calls `pid` until the client routes it over a direct connection.
async fn until_direct(c: &Connection) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.direct_routes_live() == 0 {
        assert!(Instant::now() < deadline, "no direct connection within 10 s");
        let _: u32 = c.call("pid", &()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The first replica's status once `done` says so (reports come every
/// second).
async fn replica_when(hub: &Hub, done: impl Fn(&ReplicaStatus) -> bool) -> ReplicaStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = hub.status().await.providers[0].replicas[0].clone();
        if done(&r) {
            return r;
        }
        assert!(Instant::now() < deadline, "status never got there: {r:?}\nlog:\n{}", hub.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_asks_calls_the_replica_directly_and_the_calls_are_counted() {
    let hub = Hub::start_with("http = \"127.0.0.1:0\"\n", ONE, &[]);
    hub.wait_ready("test", 1).await;
    let c = hub.connect_with(&asking()).await;
    // Both legs are on shared memory (the default): the DIRECT and the
    // ACCEPT carry their descriptors with carriers (spec §11.4.3).
    assert!(c.upgraded().await, "the client's leg moved to shared memory");
    until_direct(&c).await;
    assert!(replica_when(&hub, |r| r.shm).await.shm, "the replica's leg is on shared memory");
    let routed = hub.status().await.providers[0].replicas[0].calls;
    for i in 0..50u8 {
        assert_eq!(c.call_raw("echo", Bytes::from(vec![i; 3])).await.unwrap(), Bytes::from(vec![i; 3]));
    }
    let n: u32 = c.server_stream::<_, u32>("count", &5u32, &Default::default()).await.unwrap().collect().await.unwrap().len() as u32;
    assert_eq!(n, 5, "a stream over the direct connection");
    let r = replica_when(&hub, |r| r.direct_calls >= 51).await;
    // Only the status calls of this test (not counted: the hub's own) and
    // nothing of the 51 went through the hub.
    assert_eq!(r.calls, routed, "direct calls are not routed: {r:?}");
    assert_eq!((r.direct_errors, r.direct_open), (0, 1), "{r:?}");
    let metrics = common::http(&hub.listening("HTTP gateway"), "GET", "/metrics", "").1;
    assert!(metrics.contains(&format!("hubwire_direct_calls_total{{provider=\"test\",replica=\"0\"}} {}", r.direct_calls)), "{metrics}");
    let (code, table, _) = hub.cli(&["status"]);
    assert_eq!(code, 0);
    assert!(table.contains("DIRECT") && table.contains("open)"), "the table shows direct calls:\n{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_ask_stays_routed() {
    let hub = Hub::start(ONE);
    hub.wait_ready("test", 1).await;
    let c = hub.connect().await;
    for _ in 0..20 {
        let _: u32 = c.call("pid", &()).await.unwrap();
    }
    assert_eq!(c.direct_routes_live(), 0);
    let r = hub.status().await.providers[0].replicas[0].clone();
    assert_eq!((r.calls, r.direct_calls, r.direct_open), (20, 0, 0), "{r:?}");
}

/// Each worker loses at most its call in flight on the killed replica's
/// direct connection, and at most one more: the call it then starts
/// through the hub, which the hub may already have sent to the dead
/// replica before it noticed the death (as any routed call may). Every
/// loss is `unavailable` saying a connection was lost (closed, reset, a
/// broken pipe).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_traffic_loses_only_the_calls_in_flight_on_it() {
    let hub = Hub::start(ONE);
    hub.wait_ready("test", 1).await;
    let c = hub.connect_with(&asking()).await;
    until_direct(&c).await;
    let pid: u32 = c.call("pid", &()).await.unwrap();
    const WORKERS: usize = 4;
    let (ok, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..WORKERS {
        let (c, ok, stop) = (c.clone(), ok.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut lost = Vec::new();
            while stop.load(Ordering::Relaxed) == 0 {
                match c.call::<_, String>("sleep", &json!({"ms": 2})).await {
                    Ok(_) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => lost.push(e),
                }
            }
            lost
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = ok.load(Ordering::Relaxed);
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    // Through the restart and on: calls go through the hub, then direct again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while ok.load(Ordering::Relaxed) < before + 200 {
        assert!(Instant::now() < deadline, "calls did not resume after the kill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(1, Ordering::Relaxed);
    let mut total = 0;
    for t in tasks {
        let lost = t.await.unwrap();
        total += lost.len();
        assert!(lost.len() <= 2, "one worker lost {} calls: {lost:?}", lost.len());
        for e in &lost {
            let said = e.message();
            assert_eq!(e.code(), Code::Unavailable, "{e}");
            assert!(said.contains("connection"), "a lost connection: {e}");
        }
    }
    println!("{} calls answered, {total} lost across the kill", ok.load(Ordering::Relaxed));
    let next: u32 = c.call("pid", &()).await.unwrap();
    assert_ne!(next, pid, "answered by the new process");
    until_direct(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_hub_lets_calls_in_flight_on_direct_connections_finish() {
    let mut hub = Hub::start(ONE);
    hub.wait_ready("test", 1).await;
    let c = hub.connect_with(&asking()).await;
    until_direct(&c).await;
    let call = tokio::spawn({
        let c = c.clone();
        async move { c.call::<_, String>("sleep", &json!({"ms": 100})).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    hub.terminate(Duration::from_secs(10));
    let answer = tokio::time::timeout(Duration::from_secs(5), call).await.expect("the call hung").unwrap();
    assert_eq!(answer.unwrap(), "slept 100 ms", "the call in flight on the direct connection finished");
    let e = c.call::<_, u32>("pid", &()).await.unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "after the drain new calls fail as through the hub: {e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_client_is_not_offered_the_direct_path() {
    // A TCP client without a token is not trusted (docs/security.md).
    let hub = Hub::start_with("tcp = \"127.0.0.1:0\"\n", ONE, &[]);
    hub.wait_ready("test", 1).await;
    let addr = hub.listening("accepting clients listen=tcp:");
    let c = Connection::dial(hubwire::transport::tcp::connect(addr.as_str()).await.unwrap(), &asking()).await.unwrap();
    assert_eq!(c.peer().direct, None, "the hub's HELLO offers nothing to an untrusted client");
    for _ in 0..20 {
        let _: u32 = c.call("pid", &()).await.unwrap();
    }
    assert_eq!(c.direct_routes_live(), 0);
    let e = c.call::<_, ()>("hubwire.direct", &json!({"method": "pid"})).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "asked anyway: {e}");
    let r = hub.status().await.providers[0].replicas[0].clone();
    assert_eq!((r.calls, r.direct_calls), (20, 0), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialled_provider_is_reached_at_its_address_and_its_direct_calls_counted() {
    let dir = common::temp_dir();
    let sock = dir.join("p.sock");
    let mut remote = std::process::Command::new(common::PROVIDER)
        .args(["--direct", "--unix"])
        .arg(&sock)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let hub = Hub::start(&format!("[[provider]]\nname = \"remote\"\ndial = \"unix:{}\"\nrestart_backoff = \"10ms\"\n", sock.display()));
    hub.wait_ready("remote", 1).await;
    let c = hub.connect_with(&asking()).await;
    until_direct(&c).await;
    for i in 0..30u8 {
        assert_eq!(c.call_raw("echo", Bytes::from(vec![i])).await.unwrap(), Bytes::from(vec![i]));
    }
    let r = replica_when(&hub, |r| r.direct_calls >= 30).await;
    assert_eq!(r.direct_open, 1, "{r:?}");
    let _ = remote.kill();
    let _ = remote.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_takes_only_addresses_is_not_handed_a_descriptor() {
    // On the hub's Unix socket a spawned provider's path is a descriptor;
    // a client that says `via: ["address"]` (Node) cannot read one (§14.3).
    let hub = Hub::start(ONE);
    hub.wait_ready("test", 1).await;
    let c = hub.connect_with(&ConnectionOptions::new("node-like").advertise_direct(true)).await;
    assert!(c.peer().direct.is_some(), "the hub offers the direct path on its Unix socket");
    let e = c.call::<_, ()>("hubwire.direct", &json!({"method": "pid", "via": ["address"]})).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("descriptor"), "{e}");
    let r = hub.status().await.providers[0].replicas[0].clone();
    assert_eq!(r.direct_open, 0, "{r:?}");
}
