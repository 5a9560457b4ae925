//! Failover on a real 3-node NATS cluster, under load. Every host is a
//! process of its own: hub A (node 0) routes every call to the cluster;
//! the method `sleep` is offered by hub B and hub C (node 1, each with a
//! spawned test provider) and by providers D (node 0) and E (node 2)
//! attached straight to NATS. While 16 callers call through A, three
//! things are killed with SIGKILL, a few seconds apart: provider D, hub C
//! (its provider goes with it), and NATS node 2 (E reconnects elsewhere).
//!
//! Checked: every call ends (each has an outer deadline: none hangs),
//! with a result or `unavailable` and nothing else, and every
//! `unavailable` call was in flight when something was killed. The
//! measured times (how long the dead one's calls took to fail, how long
//! calls started after a kill took) are printed for the report; the
//! bounds asserted are generous (time bounds belong to the hardening
//! suite and the bench).

mod common;
mod nats_common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hubwire::{CallOptions, Code};
use hubwire_tests::nats_server::NatsCluster;
use nats_common::{hub, kill_hub, wait_offered, NatsProvider};
use serde::{Deserialize, Serialize};

/// Callers at once.
const CALLERS: usize = 16;
/// Every call's own deadline, and the outer one after which it counts as hung.
const DEADLINE: Duration = Duration::from_secs(5);
const HUNG: Duration = Duration::from_secs(15);
/// How long a dead peer may go unnoticed: the target of 1 s
/// (spec §13.5: 600 ms of silence, checked every 50 ms, leaves 350 ms of
/// slack for a loaded machine).
const NOTICED: Duration = Duration::from_millis(1000);

#[derive(Serialize, Deserialize)]
struct Sleep {
    ms: u64,
}

/// One call: when it started and ended (since the load began), and how.
struct Record {
    start: Duration,
    end: Duration,
    outcome: Result<(), Code>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_fail_over_when_a_provider_a_hub_and_a_nats_node_die() {
    let mut nats = NatsCluster::start(3);
    let url = |i: usize| nats.nodes[i].url();
    let tp = "[[provider]]\nname = \"tp\"\nexec = [\"{provider}\"]\n";
    let b = hub("hub-b", &url(1), "", tp);
    let mut c = hub("hub-c", &url(1), "", tp);
    b.wait_ready("tp", 1).await;
    c.wait_ready("tp", 1).await;
    let mut d = NatsProvider::start(&url(0), "prov-d");
    let _e = NatsProvider::start(&url(2), "prov-e");
    let a = hub("hub-a", &url(0), "offer = false\nlinks = 4", "");
    let client = a.connect().await;
    wait_offered(&client, "sleep", 4).await;
    // Open the pool before the load, so that it starts from four links.
    let _: String = client.call("sleep", &Sleep { ms: 1 }).await.unwrap();
    let ready = Instant::now() + Duration::from_secs(10);
    while a.status().await.providers.iter().find(|p| p.name == "nats:sleep").is_none_or(|p| p.replicas.iter().any(|r| r.state != "ready")) {
        assert!(Instant::now() < ready, "the pool of sleep did not get its 4 links");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let t0 = Instant::now();
    let stop_at = Duration::from_secs(9);
    let records = Arc::new(Mutex::new(Vec::<Record>::new()));
    let mut callers = Vec::new();
    for _ in 0..CALLERS {
        let (client, records) = (client.clone(), records.clone());
        callers.push(tokio::spawn(async move {
            let opts = CallOptions { timeout: Some(DEADLINE), codec: None };
            while t0.elapsed() < stop_at {
                let start = t0.elapsed();
                let call = client.call_with::<_, String>("sleep", &Sleep { ms: 20 }, &opts);
                let outcome = match tokio::time::timeout(HUNG, call).await {
                    Err(_) => panic!("a call started at {start:?} hung for {HUNG:?}"),
                    Ok(r) => r.map(|_| ()).map_err(|e| e.code()),
                };
                records.lock().unwrap().push(Record { start, end: t0.elapsed(), outcome });
            }
        }));
    }

    let mut kills: Vec<(&str, Duration)> = Vec::new();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    kills.push(("provider D (kill -9)", t0.elapsed()));
    d.kill();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    kills.push(("hub C (kill -9)", t0.elapsed()));
    kill_hub(&mut c);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    kills.push(("NATS node 2 (kill -9)", t0.elapsed()));
    nats.nodes[2].kill();
    for c in callers {
        tokio::time::timeout(HUNG + stop_at, c).await.expect("a caller hung").expect("a caller panicked");
    }

    let records = records.lock().unwrap();
    let failed: Vec<&Record> = records.iter().filter(|r| r.outcome.is_err()).collect();
    eprintln!("{} calls, {} ok, {} failed", records.len(), records.len() - failed.len(), failed.len());
    for r in &failed {
        assert_eq!(r.outcome, Err(Code::Unavailable), "only unavailable: a call {:?}..{:?}", r.start, r.end);
        // Sent to the dead one before it was noticed (spec §13.5: 600 ms
        // of silence, checked every 50 ms).
        let in_flight = |at: &Duration| r.start <= *at + NOTICED && *at <= r.end;
        assert!(kills.iter().any(|(_, at)| in_flight(at)), "an unavailable call {:?}..{:?} was in flight at no kill", r.start, r.end);
    }
    assert!(records.len() > CALLERS * 20, "the load ran: {} calls", records.len());
    for (what, at) in &kills {
        // The dead one's calls: failed after `at`, having started before it.
        let dead: Vec<&&Record> = failed.iter().filter(|r| r.start <= *at + NOTICED && r.end >= *at).collect();
        let fail_within = dead.iter().map(|r| r.end - *at).max();
        // Calls started in the 2 s after the kill: the slowest to succeed.
        let after: Vec<&Record> = records.iter().filter(|r| r.start >= *at && r.start < *at + Duration::from_secs(2)).collect();
        let slowest = after.iter().filter(|r| r.outcome.is_ok()).map(|r| r.end - r.start).max();
        let first_ok = records.iter().filter(|r| r.start >= *at && r.outcome.is_ok()).map(|r| r.end - *at).min();
        eprintln!(
            "{what}: {} calls failed unavailable ({} sent after the kill, before it was noticed), the last {:?} after the kill; \
             calls started in the next 2 s: {} ({} ok), slowest ok {:?}; first call after the kill answered {:?} after it",
            dead.len(),
            dead.iter().filter(|r| r.start > *at).count(),
            fail_within,
            after.len(),
            after.iter().filter(|r| r.outcome.is_ok()).count(),
            slowest,
            first_ok,
        );
        assert!(fail_within.is_none_or(|d| d < Duration::from_secs(5)), "{what}: calls in flight took {fail_within:?} to fail");
        assert!(first_ok.is_some_and(|d| d < Duration::from_secs(5)), "{what}: no new call answered within 5 s ({first_ok:?})");
    }
    drop(b);
}
