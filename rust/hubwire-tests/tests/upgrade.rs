//! The upgrade to shared memory (`spec/PROTOCOL.md` §11.4) beyond what the
//! behaviour suite's `shm*` setups cover: calls that cross the switch,
//! refusals and the switch that turns it off. (A peer killed mid-call is
//! the behaviour suite's `peer_crash_fails_in_flight` on `shm_child`.)

use bytes::Bytes;
use hubwire::transport::{self, unix};
use hubwire::{Connection, ConnectionOptions};
use hubwire_tests::harness::TempDir;

/// A client and the behaviour provider over a Unix socket, each with its
/// options; neither waits for the upgrade.
async fn pair(client: ConnectionOptions, server: ConnectionOptions) -> (Connection, Connection, TempDir) {
    let server = server.service(hubwire_tests::provider());
    let dir = TempDir::new("upgrade");
    let path = dir.0.join("p.sock");
    let listener = unix::UnixListener::bind(&path).unwrap();
    let (c, s) = tokio::join!(async { Connection::dial(unix::connect(&path).await.unwrap(), &client).await }, async {
        Connection::start(transport::accept(&listener).await.unwrap(), &server, false).await
    });
    (c.unwrap(), s.unwrap(), dir)
}

fn client() -> ConnectionOptions {
    ConnectionOptions::new("upgrade-client").shm(true)
}

fn server() -> ConnectionOptions {
    hubwire_tests::provider_config().shm(true)
}

async fn echo_works(c: &Connection) {
    let got = c.call_raw("echo", Bytes::from_static(b"still here")).await.unwrap();
    assert_eq!(&got[..], b"still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_flight_cross_the_switch_without_loss() {
    let (c, s, _dir) = pair(client(), server()).await;
    // Started at once, before the upgrade settles: some REQUESTs leave on
    // the socket, some in the ring, and answers come back both ways.
    let calls: Vec<_> = (0..300u32)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move { (i, c.call_raw("echo", Bytes::from(i.to_le_bytes().repeat(1 + i as usize % 50))).await) })
        })
        .collect();
    for call in calls {
        let (i, r) = call.await.unwrap();
        assert_eq!(r.unwrap(), Bytes::from(i.to_le_bytes().repeat(1 + i as usize % 50)), "call {i}");
    }
    assert!(c.upgraded().await && s.upgraded().await);
    assert!(c.on_shared_memory() && s.on_shared_memory());
    assert!(c.describe().ends_with("+shm"), "{}", c.describe());
    echo_works(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_larger_than_the_ring_stream_through_it() {
    let (c, s, _dir) = pair(client().shm_ring(4096), server()).await;
    assert!(c.upgraded().await && s.upgraded().await);
    let big = Bytes::from((0..(1 << 20)).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    for _ in 0..3 {
        assert_eq!(c.call_raw("echo", big.clone()).await.unwrap(), big);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_offer_keeps_the_connection_on_the_socket() {
    let mut full = server();
    full.shm_max_connections = 0;
    let (c, s, _dir) = pair(client(), full).await;
    assert!(!c.upgraded().await, "the acceptor is over its limit: it refuses");
    assert!(!s.upgraded().await);
    assert!(!c.on_shared_memory() && !c.describe().ends_with("+shm"));
    echo_works(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switched_off_on_either_side_stays_on_the_socket() {
    for (a, b) in [(false, true), (true, false), (false, false)] {
        let (c, s, _dir) = pair(client().shm(a), server().shm(b)).await;
        assert_eq!(c.peer().upgrade.is_empty(), !b, "a side lists shm in its HELLO exactly when it is on");
        assert!(!c.upgraded().await && !s.upgraded().await, "client {a}, server {b}");
        echo_works(&c).await;
    }
}
