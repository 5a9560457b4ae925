//! The hub on shared memory (`spec/PROTOCOL.md` §11.4): both legs, to a
//! spawned provider and from a local client, move onto it when the peer
//! can; `[hub] shm = false` and a provider's `shm = false` keep the socket.
//! (kill -9 of a provider on shared memory is `supervision.rs`'s first case:
//! the provider leg is upgraded by default.)

mod common;

use common::Hub;

const PROVIDER: &str = "[[provider]]\nname = \"test\"\nexec = [\"{provider}\"]\n";

async fn echo_works(hub: &Hub) -> bool {
    let c = hub.connect().await;
    let on = c.upgraded().await;
    let got = c.call_raw("echo", bytes::Bytes::from_static(b"over the hub")).await.unwrap();
    assert_eq!(&got[..], b"over the hub");
    on
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_legs_move_to_shared_memory_by_default() {
    let hub = Hub::start(PROVIDER);
    let s = hub.wait_ready("test", 1).await;
    assert!(echo_works(&hub).await, "the local client's leg is on shared memory");
    let r = &s.providers[0].replicas[0];
    let s = if r.shm { s } else { hub.status().await };
    assert!(s.providers[0].replicas[0].shm, "the provider's leg is on shared memory: {s:?}");
    let (code, out, _) = hub.cli(&["status"]);
    assert_eq!(code, 0);
    assert!(out.contains("ready+shm"), "status says so:\n{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switched_off_for_the_hub_or_a_provider_stays_on_the_socket() {
    let hub = Hub::start_with("shm = false", PROVIDER, &[]);
    hub.wait_ready("test", 1).await;
    assert!(!echo_works(&hub).await, "[hub] shm = false: clients stay on the socket");
    assert!(!hub.status().await.providers[0].replicas[0].shm, "and so do providers");

    let hub = Hub::start(&format!("{PROVIDER}shm = false\n"));
    hub.wait_ready("test", 1).await;
    assert!(echo_works(&hub).await, "a provider's switch leaves clients alone");
    assert!(!hub.status().await.providers[0].replicas[0].shm, "provider shm = false");
}
