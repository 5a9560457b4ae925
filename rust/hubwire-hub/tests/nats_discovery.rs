//! Discovery against a real `nats-server`: a hand-made NATS micro service
//! shaped as `spec/PROTOCOL.md` §13.7 says a hubwire replica is, found by
//! `discovery::discover` and by `hubwire list --nats` / `status --nats`
//! (no hub), and a service of another prefix left out.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use async_nats::service::ServiceExt;
use hubwire_hub::discovery;
use hubwire_tests::nats_server::NatsServer;

const HUB: &str = env!("CARGO_BIN_EXE_hubwire");

/// Starts a micro service posing as replica `id` of `provider` under
/// `prefix`, offering `echo`.
async fn replica(client: &async_nats::Client, provider: &str, id_hint: &str, prefix: &str) -> async_nats::service::Service {
    let meta = HashMap::from([
        ("hubwire.protocol".to_string(), "1".to_string()),
        ("hubwire.provider".to_string(), provider.to_string()),
        ("hubwire.prefix".to_string(), prefix.to_string()),
    ]);
    let svc = client.service_builder().description(id_hint).metadata(meta).start(provider.replace(' ', "_"), "0.1.0").await.unwrap();
    let em = HashMap::from([("hubwire.method".to_string(), "echo".to_string()), ("hubwire.kind".to_string(), "unary".to_string())]);
    let ep = svc.endpoint_builder().name("echo").metadata(em).queue_group("hubwire").add(format!("{prefix}.m.echo")).await.unwrap();
    // Nobody connects in this test: the endpoint only needs to exist.
    std::mem::forget(ep);
    svc
}

#[tokio::test]
async fn discovery_lists_replicas_of_our_prefix_with_their_methods() {
    let server = NatsServer::start();
    let client = async_nats::connect(server.url()).await.unwrap();
    let _a = replica(&client, "hub a", "a", "hubwire").await;
    let _b = replica(&client, "hub a", "b", "hubwire").await;
    let _other = replica(&client, "hub z", "z", "elsewhere").await;
    client.flush().await.unwrap();
    let c = discovery::discover(&client, "hubwire", Duration::from_millis(500)).await.unwrap();
    assert_eq!(c.replicas.len(), 2, "{c:?}");
    assert!(c.replicas.iter().all(|r| r.provider == "hub a" && r.methods.get("echo").map(String::as_str) == Some("unary")), "{c:?}");
    assert!(c.replicas.iter().all(|r| r.links == Some(0)), "STATS joined: {c:?}");

    // The command line, with no hub.
    let url = server.url();
    let out = tokio::task::spawn_blocking(move || {
        let run = |cmd: &str| Command::new(HUB).args([cmd, "--nats", &url, "--config", "/nonexistent"]).output().unwrap();
        (run("list"), run("status"))
    })
    .await
    .unwrap();
    let (list, status) = (String::from_utf8_lossy(&out.0.stdout).into_owned(), String::from_utf8_lossy(&out.1.stdout).into_owned());
    assert!(out.0.status.success(), "{list} {}", String::from_utf8_lossy(&out.0.stderr));
    let row = list.lines().find(|l| l.starts_with("echo")).unwrap_or_else(|| panic!("no echo row:\n{list}"));
    assert!(row.contains("unary") && row.contains("hub a ×2"), "{list}");
    assert!(!list.contains("hub z"), "another prefix is left out: {list}");
    assert!(out.1.status.success() && status.lines().filter(|l| l.starts_with("hub a")).count() == 2, "{status}");
}
