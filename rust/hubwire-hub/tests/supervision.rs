//! The hub's acceptance cases, with real processes: a provider killed with
//! -9 mid-call, a crash loop, a pool under 64 concurrent clients, SIGTERM
//! under load, the hub itself killed, and load over a provider's limit.
//!
//! Bounds on time here only catch hangs ("at once" means well within
//! seconds); the measured figures are printed for the record.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{alive, Hub};
use hubwire::{Code, Connection};
use serde_json::json;

async fn pid_of(c: &Connection) -> u32 {
    c.call("pid", &()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_killed_mid_call_fails_the_call_at_once_and_comes_back() {
    let hub = Hub::start("[[provider]]\nname = \"test\"\nexec = [\"{provider}\"]\nrestart_backoff = \"100ms\"\n");
    hub.wait_ready("test", 1).await;
    let c = hub.connect().await;
    let pid = pid_of(&c).await;
    let long = json!({"ms": 60_000});
    let call = tokio::spawn({
        let c = c.clone();
        async move { c.call::<_, String>("sleep", &long).await }
    });
    // Let the call reach the provider.
    let deadline = Instant::now() + Duration::from_secs(10);
    while hub.status().await.providers[0].replicas[0].in_flight == 0 {
        assert!(Instant::now() < deadline, "the call never reached the provider");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let killed = Instant::now();
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let e = tokio::time::timeout(Duration::from_secs(5), call).await.expect("the call hung after its provider died").unwrap().unwrap_err();
    let took = killed.elapsed();
    println!("in-flight call failed {took:?} after kill -9");
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    assert!(e.message().contains("provider \"test\""), "says which provider: {e}");
    assert!(took < Duration::from_secs(1), "took {took:?}: not 'at once'");
    // Back within its backoff: the next call succeeds, on a new process.
    let next = tokio::time::timeout(Duration::from_secs(10), pid_of(&c)).await.expect("no replica came back");
    println!("next call answered {:?} after the kill", killed.elapsed());
    assert_ne!(next, pid, "answered by a new process");
    let s = hub.status().await;
    let r = &s.providers[0].replicas[0];
    assert_eq!((r.state.as_str(), r.restarts), ("ready", 1), "{s:?}");
    assert!(r.last_exit.as_deref().unwrap_or("").contains("SIGKILL"), "{:?}", r.last_exit);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_stops_answering_pings_is_replaced() {
    let hub = Hub::start(
        "[[provider]]\nname = \"test\"\nexec = [\"{provider}\"]\nhealth_interval = \"100ms\"\nhealth_timeout = \"200ms\"\n\
         stop_timeout = \"100ms\"\n",
    );
    hub.wait_ready("test", 1).await;
    let c = hub.connect().await;
    let frozen = pid_of(&c).await;
    // SIGSTOP: the process and its socket stay, but nothing answers.
    unsafe { libc::kill(frozen as i32, libc::SIGSTOP) };
    let deadline = Instant::now() + Duration::from_secs(20);
    let fresh = loop {
        if let Ok(Ok(p)) = tokio::time::timeout(Duration::from_millis(500), c.call::<_, u32>("pid", &())).await {
            if p != frozen {
                break p;
            }
        }
        assert!(Instant::now() < deadline, "the frozen provider was never replaced; log:\n{}", hub.log());
    };
    assert!(!alive(frozen), "the frozen process {frozen} was not killed");
    let s = hub.status().await;
    let r = &s.providers[0].replicas[0];
    assert!(r.last_exit.as_deref().unwrap_or("").contains("health ping"), "{:?}", r.last_exit);
    assert_eq!(r.pid, Some(fresh));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_dies_on_every_start_is_marked_failed_with_its_stderr() {
    let hub = Hub::start(
        "[[provider]]\nname = \"crashy\"\nexec = [\"{provider}\", \"--exit-at-once\", \"3\"]\n\
         restart_backoff = \"10ms\"\ncrash_loop_limit = 4\n",
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = hub.status().await;
        if s.providers[0].replicas[0].state == "failed" {
            break;
        }
        assert!(Instant::now() < deadline, "never marked failed: {s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // It stays failed: not restarted forever.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let s = hub.status().await;
    let r = &s.providers[0].replicas[0];
    assert_eq!((r.state.as_str(), r.restarts), ("failed", 3), "{s:?}");
    let (code, out, err) = hub.cli(&["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("failed"), "{out}");
    assert!(out.contains("crash loop: died 4 times in a row"), "{out}");
    assert!(out.contains("exit status 3"), "{out}");
    assert!(out.contains("fatal: cannot open the database (simulated by --exit-at-once 3)"), "last stderr lines: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_four_answers_64_clients_times_1000_calls_exactly_once() {
    let hub = Hub::start("[[provider]]\nname = \"pool\"\nexec = [\"{provider}\"]\nreplicas = 4\nmax_in_flight = 64\n");
    hub.wait_ready("pool", 4).await;
    let (clients, calls) = (64u64, 1000u64);
    let answered = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (conn, answered) = (hub.connect().await, answered.clone());
        tasks.push(tokio::spawn(async move {
            for call in 0..calls {
                let mine = Bytes::from(format!("client {client} call {call}"));
                let back = conn.call_raw("echo", mine.clone()).await.unwrap_or_else(|e| panic!("client {client} call {call}: {e}"));
                assert_eq!(back, mine, "a call was answered with another call's bytes");
                answered.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let started = Instant::now();
    for t in tasks {
        t.await.unwrap();
    }
    let took = started.elapsed();
    assert_eq!(answered.load(Ordering::Relaxed), clients * calls);
    let s = hub.status().await;
    let per_replica: Vec<u64> = s.providers[0].replicas.iter().map(|r| r.calls).collect();
    println!("{} calls in {took:?} ({:.0}/s); per replica {per_replica:?}", clients * calls, (clients * calls) as f64 / took.as_secs_f64());
    assert_eq!(per_replica.iter().sum::<u64>(), clients * calls, "the hub counted every call once");
    assert!(per_replica.iter().all(|&n| n > 0), "every replica took calls: {per_replica:?}");
    assert!(s.providers[0].replicas.iter().all(|r| r.errors == 0 && r.in_flight == 0), "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_answers_every_accepted_call_and_leaves_no_child() {
    let mut hub = Hub::start("[[provider]]\nname = \"test\"\nexec = [\"{provider}\"]\nreplicas = 2\n");
    let s = hub.wait_ready("test", 2).await;
    let mut pids: Vec<u32> = s.providers[0].replicas.iter().filter_map(|r| r.pid).collect();
    assert_eq!(pids.len(), 2);
    // A process a provider started stops with it (its process group).
    let grandchild: u32 = hub.connect().await.call("grandchild", &()).await.unwrap();
    assert!(alive(grandchild));
    pids.push(grandchild);
    let (ok, unavailable) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (conn, ok, unavailable) = (hub.connect().await, ok.clone(), unavailable.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                match conn.call::<_, String>("sleep", &json!({"ms": 20})).await {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(e) if e.code() == Code::Unavailable => {
                        unavailable.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Err(e) => panic!("an accepted call got neither a result nor unavailable: {e}"),
                };
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = tokio::task::spawn_blocking(move || {
        let s = hub.terminate(Duration::from_secs(30));
        (s, hub)
    });
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(30), t).await.expect("a call hung through shutdown").unwrap();
    }
    let (exit, hub) = status.await.unwrap();
    assert!(exit.success(), "the hub exited with {exit}; log:\n{}", hub.log());
    println!(
        "through SIGTERM: {} calls answered ok, {} clients refused with unavailable",
        ok.load(Ordering::Relaxed),
        unavailable.load(Ordering::Relaxed)
    );
    assert_eq!(unavailable.load(Ordering::Relaxed), 16, "every client ends with unavailable, none hangs");
    for pid in pids {
        assert!(!alive(pid), "process {pid} (a provider, or what one started) outlived the hub");
    }
    assert!(!hub.socket.exists(), "the socket file was left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_die_with_a_hub_killed_by_sigkill() {
    let mut hub = Hub::start("[[provider]]\nname = \"test\"\nexec = [\"{provider}\"]\nreplicas = 2\n");
    let s = hub.wait_ready("test", 2).await;
    let pids: Vec<u32> = s.providers[0].replicas.iter().filter_map(|r| r.pid).collect();
    hub.child.kill().unwrap();
    hub.child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|&p| alive(p)) {
        assert!(Instant::now() < deadline, "providers {pids:?} outlived a hub killed with -9");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_over_the_limit_is_refused_and_memory_stays_bounded() {
    let hub = Hub::start("[[provider]]\nname = \"test\"\nexec = [\"{provider}\"]\nmax_in_flight = 4\nqueue = 8\n");
    hub.wait_ready("test", 1).await;
    let before = hub.peak_rss_kib();
    // 8 connections × 500 calls of 64 KiB each: 250 MiB offered at once.
    let pad = "x".repeat(64 * 1024);
    let input = Arc::new(json!({"ms": 200, "pad": pad}));
    let (ok, exhausted) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let conn = hub.connect().await;
        for _ in 0..500 {
            let (conn, input, ok, exhausted) = (conn.clone(), input.clone(), ok.clone(), exhausted.clone());
            tasks.push(tokio::spawn(async move {
                match conn.call::<_, String>("sleep", &*input).await {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(e) if e.code() == Code::ResourceExhausted => {
                        assert!(e.message().contains("max_in_flight"), "{e}");
                        exhausted.fetch_add(1, Ordering::Relaxed)
                    }
                    Err(e) => panic!("neither a result nor resource_exhausted: {e}"),
                };
            }));
        }
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t).await.expect("a call hung").unwrap();
    }
    let (ok, exhausted) = (ok.load(Ordering::Relaxed), exhausted.load(Ordering::Relaxed));
    let peak = hub.peak_rss_kib();
    println!("4000 calls of 64 KiB: {ok} ok, {exhausted} resource_exhausted; hub peak RSS {before} KiB before, {peak} KiB after");
    assert_eq!(ok + exhausted, 4000, "every call answered");
    assert!(ok >= 12, "the admitted calls ({ok}) completed");
    assert!(exhausted >= 3000, "most of the excess was refused, not buffered: {exhausted}");
    assert!(peak < 200 * 1024, "the hub's peak RSS grew to {peak} KiB for 250 MiB offered");
    let s = hub.status().await;
    assert_eq!(s.providers[0].refused, exhausted, "the refusals are counted: {s:?}");
}
