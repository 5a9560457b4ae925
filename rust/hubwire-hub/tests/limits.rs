//! The hub's limits (`docs/hub.md#limits`), each key's effect through a
//! real hub: queued calls and bytes refused at once naming their key, the
//! default deadline, hung replicas restarted, unknown methods failing at
//! once whatever a provider's state.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::Hub;
use hubwire::{Code, Connection};
use serde_json::json;

/// One slot, so that a second call waits in the queue.
fn one_slot(extra: &str) -> String {
    format!("[[provider]]\nname = \"test\"\nexec = [\"{{provider}}\"]\nmax_in_flight = 1\n{extra}\n")
}

/// Starts a long `sleep` on the provider's one slot and waits until the
/// hub counts it in flight; the returned task holds it.
async fn occupy(hub: &Hub, c: &Connection) -> tokio::task::JoinHandle<()> {
    let c2 = c.clone();
    let task = tokio::spawn(async move {
        let _ = c2.call::<_, String>("sleep", &json!({"ms": 30_000})).await;
    });
    while hub.status().await.providers[0].replicas[0].in_flight == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_over_queue_bytes_is_refused_naming_the_key() {
    let hub = Hub::start(&one_slot("queue_bytes = \"1KiB\""));
    hub.wait_ready("test", 1).await;
    let c = hub.connect().await;
    let held = occupy(&hub, &c).await;
    let e = c.call_raw("echo", Bytes::from(vec![0u8; 2048])).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    assert!(e.message().contains("queue_bytes = 1024"), "{e}");
    held.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_over_client_queue_is_refused_naming_the_key() {
    let hub = Hub::start_with("client_queue = 0", &one_slot(""), &[]);
    hub.wait_ready("test", 1).await;
    let c = hub.connect().await;
    let held = occupy(&hub, &c).await;
    let e = c.call_raw("echo", Bytes::from_static(b"x")).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    assert!(e.message().contains("client_queue = 0"), "{e}");
    // Another connection has a queue of its own (here also 0): the bound
    // is per connection, and the provider's own queue still has room.
    let e = hub.connect().await.call_raw("echo", Bytes::from_static(b"x")).await.unwrap_err();
    assert!(e.message().contains("client_queue"), "{e}");
    held.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_without_a_deadline_gets_the_default_one() {
    let hub = Hub::start_with("default_deadline = \"200ms\"", "[[provider]]\nname = \"test\"\nexec = [\"{provider}\"]\n", &[]);
    hub.wait_ready("test", 1).await;
    let e = hub.connect().await.call::<_, String>("sleep", &json!({"ms": 30_000})).await.unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_replica_fails_its_calls_is_restarted_and_status_says_hung() {
    let hub = Hub::start(&one_slot("hung_timeout = \"300ms\"\nrestart_backoff = \"10ms\""));
    let before = hub.wait_ready("test", 1).await.providers[0].replicas[0].pid;
    let e = hub.connect().await.call::<_, String>("sleep", &json!({"ms": 30_000})).await.unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    assert!(e.message().contains("hung"), "{e}");
    let s = hub.wait_ready("test", 1).await;
    let r = &s.providers[0].replicas[0];
    assert_ne!(r.pid, before, "restarted");
    assert!(r.reason.as_deref().is_some_and(|why| why.contains("hung")), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_method_fails_at_once_while_a_provider_is_still_starting() {
    // `crashy` exits before its HELLO, again and again: it stays pending.
    let providers = "[[provider]]\nname = \"test\"\nexec = [\"{provider}\"]\n\n[[provider]]\nname = \"crashy\"\nexec = [\"false\"]\nrestart_backoff = \"10ms\"\nrestart_backoff_max = \"10ms\"\ncrash_loop_limit = 1000\n";
    let hub = Hub::start(providers);
    hub.wait_ready("test", 1).await;
    let e = hub.connect().await.call_raw("no.such.method", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::UnknownMethod, "{e}");
    assert!(e.message().contains("crashy"), "names the provider still starting: {e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_of_a_queued_stream_count_against_queue_bytes() {
    let hub = Hub::start(&one_slot("queue_bytes = \"1KiB\""));
    hub.wait_ready("test", 1).await;
    let c = hub.connect().await;
    let held = occupy(&hub, &c).await;
    let sum = c.client_stream::<i64, i64>("sum", &hubwire::CallOptions::new()).await.unwrap();
    // 9 bytes each in MessagePack: the 114th passes 1 KiB while it waits.
    let mut e = None;
    for i in 0..10_000i64 {
        if let Err(x) = sum.send(&(i + 1_000_000_000)).await {
            e = Some(x);
            break;
        }
    }
    let e = e.expect("refused");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    assert!(e.message().contains("queue_bytes = 1024"), "{e}");
    held.abort();
}
