//! A caller that reads its own answer (low-latency mode, one call in
//! flight: `hubwire/src/engine/own_read.rs`), with each side on a
//! current-thread runtime of its own thread, as two processes would be, so
//! that the caller's spin finds the answer. What must hold: no answer is
//! lost or left unseen, whatever the caller read; the reader task still
//! sees what comes after (a slow answer, the peer's close); and a caller
//! that never has to wait still yields to its runtime's other tasks.

use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use hubwire::transport::{self, unix};
use hubwire::{Connection, ConnectionOptions, WaitMode};
use hubwire_tests::harness::TempDir;

/// The behaviour provider in a thread of its own (its own current-thread
/// runtime) over a Unix socket, upgraded to shared memory if `shm`; runs
/// `client` on this thread's current-thread runtime against it. The
/// provider's thread ends when its connection closes or `stop` is sent.
fn with_peer<F, Fut>(shm: bool, client: F)
where
    F: FnOnce(Connection, mpsc::Sender<()>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    with_peer_calling(shm, 0, client)
}

/// [`with_peer`], where the provider also calls the client's `echo`
/// `calls_back` times meanwhile, one after the other, and each of those
/// calls must be answered.
fn with_peer_calling<F, Fut>(shm: bool, calls_back: u32, client: F)
where
    F: FnOnce(Connection, mpsc::Sender<()>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let dir = TempDir::new("own-read");
    let path = dir.0.join("p.sock");
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let server_path = path.clone();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let l = unix::UnixListener::bind(&server_path).unwrap();
            ready_tx.send(()).unwrap();
            let cfg = hubwire_tests::provider_config().wait(WaitMode::low_latency()).shm(shm).service(hubwire_tests::provider());
            let s = Connection::start(transport::accept(&l).await.unwrap(), &cfg, false).await.unwrap();
            let caller = s.clone();
            let back = tokio::spawn(async move {
                for i in 0..calls_back {
                    let x = Bytes::from(format!("back {i}"));
                    match caller.call_raw("echo", x.clone()).await {
                        Ok(got) if got == x => {}
                        other => return Err(format!("call back {i}: {other:?}")),
                    }
                }
                Ok(())
            });
            let stop = tokio::task::spawn_blocking(move || stop_rx.recv());
            tokio::select! {
                _ = s.closed() => {}
                _ = stop => {}
            }
            // The calls back end first (the client stays until they have).
            let r = tokio::time::timeout(Duration::from_secs(30), back).await.map_err(|_| "calls back timed out".to_string());
            s.close();
            r?.unwrap()
        })
    });
    ready_rx.recv().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let mut cfg = ConnectionOptions::new("own-read-client").wait(WaitMode::low_latency()).shm(shm);
        let served = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        if calls_back > 0 {
            let served = served.clone();
            cfg = cfg.service(hubwire::Provider::new("own-read-client").unary("echo", move |_, x: hubwire::Raw| {
                served.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                async move { Ok(x) }
            }));
        }
        let c = Connection::dial(unix::connect(&path).await.unwrap(), &cfg).await.unwrap();
        if shm {
            assert!(c.upgraded().await, "both sides offer shared memory");
        }
        let keep = c.clone();
        tokio::time::timeout(Duration::from_secs(60), async {
            client(c, stop_tx).await;
            // The provider's calls back finish on a connection still open.
            while served.load(std::sync::atomic::Ordering::Relaxed) < calls_back && !keep.is_closed() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the case timed out");
        drop(keep);
    });
    server.join().unwrap().expect("every call back answered");
}

/// Many calls one after the other: no per-call timer anywhere, so an
/// answer that reached its slot without waking its caller would hang the
/// case (the caller that yields for its runtime's budget and finds the
/// reader answered meanwhile was such a case).
async fn sequential_calls(c: Connection, stop: mpsc::Sender<()>) {
    let payload = Bytes::from_static(b"0123456789abcdef");
    for i in 0..20_000u32 {
        let got = c.call_raw("echo", payload.clone()).await.unwrap_or_else(|e| panic!("call {i}: {e}"));
        assert_eq!(got, payload, "call {i}");
    }
    stop.send(()).unwrap();
}

#[test]
fn sequential_calls_all_answer_on_a_unix_socket() {
    with_peer(false, sequential_calls);
}

#[test]
fn sequential_calls_all_answer_on_shared_memory() {
    with_peer(true, sequential_calls);
}

/// Answers that take longer than the caller's spin reach it through the
/// reader task, which the caller's reads must have left waiting for them;
/// quick ones in between are read by the caller again.
async fn slow_and_quick_answers(c: Connection, stop: mpsc::Sender<()>) {
    for i in 0..20u32 {
        let quick = c.call_raw("echo", Bytes::from(i.to_le_bytes().to_vec())).await.unwrap();
        assert_eq!(&quick[..], &i.to_le_bytes());
        let slow: u32 = c.call("delay_echo", &(i, 3u64)).await.unwrap();
        assert_eq!(slow, i);
    }
    stop.send(()).unwrap();
}

#[test]
fn slow_answers_after_own_reads_arrive_on_a_unix_socket() {
    with_peer(false, slow_and_quick_answers);
}

#[test]
fn slow_answers_after_own_reads_arrive_on_shared_memory() {
    with_peer(true, slow_and_quick_answers);
}

/// After calls whose answers the caller read, the peer closes: the reader
/// task, still waiting, sees it and the connection ends.
async fn close_after_own_reads(c: Connection, stop: mpsc::Sender<()>) {
    for _ in 0..1_000 {
        c.call_raw("echo", Bytes::from_static(b"x")).await.unwrap();
    }
    stop.send(()).unwrap();
    let why = c.closed().await;
    assert!(why.to_string().contains("closed"), "{why}");
    assert!(c.call_raw("echo", Bytes::from_static(b"x")).await.is_err());
}

#[test]
fn the_peers_close_is_seen_after_own_reads_on_a_unix_socket() {
    with_peer(false, close_after_own_reads);
}

#[test]
fn the_peers_close_is_seen_after_own_reads_on_shared_memory() {
    with_peer(true, close_after_own_reads);
}

/// A loop of calls that never waits still lets the other tasks of its
/// runtime run (it spends the runtime's budget as any ready resource
/// does): a task spawned beside it makes progress meanwhile.
async fn other_tasks_run(c: Connection, stop: mpsc::Sender<()>) {
    let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let t = ticks.clone();
    let ticker = tokio::spawn(async move {
        loop {
            t.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tokio::task::yield_now().await;
        }
    });
    for _ in 0..5_000 {
        c.call_raw("echo", Bytes::from_static(b"y")).await.unwrap();
    }
    ticker.abort();
    assert!(ticks.load(std::sync::atomic::Ordering::Relaxed) > 0, "the spawned task never ran during 5,000 calls");
    stop.send(()).unwrap();
}

#[test]
fn a_caller_that_never_waits_leaves_room_for_other_tasks() {
    with_peer(true, other_tasks_run);
}

/// The provider calls the client while the client's calls read their own
/// answers: a REQUEST a caller reads is held for the reader task, which
/// serves it (`Dispatcher::Caller`); none is lost or answered twice, and
/// the caller's own answers still arrive.
async fn calls_both_ways(c: Connection, stop: mpsc::Sender<()>) {
    let payload = Bytes::from_static(b"0123456789abcdef");
    for i in 0..10_000u32 {
        let got = c.call_raw("echo", payload.clone()).await.unwrap_or_else(|e| panic!("call {i}: {e}"));
        assert_eq!(got, payload, "call {i}");
    }
    stop.send(()).unwrap();
}

#[test]
fn calls_from_the_peer_during_own_reads_are_served_on_a_unix_socket() {
    with_peer_calling(false, 2_000, calls_both_ways);
}

#[test]
fn calls_from_the_peer_during_own_reads_are_served_on_shared_memory() {
    with_peer_calling(true, 2_000, calls_both_ways);
}
