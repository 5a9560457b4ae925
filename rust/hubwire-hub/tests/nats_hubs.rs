//! Hubs joined over a real `nats-server`, each a process of its own:
//! hub A has no provider and routes to the cluster; hub B offers its
//! spawned test provider; provider D is attached straight to NATS. A call
//! through A reaches B's or D's; a method nobody offers fails
//! `unknown_method`; `hubwire list` / `status` show the cluster and the
//! links; `hubwire call --nats` needs no hub.

mod common;
mod nats_common;

use std::time::Duration;

use hubwire::Code;
use hubwire_tests::nats_server::NatsServer;
use nats_common::{hub, wait_offered, NatsProvider};

const STEP: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_routes_to_other_hubs_and_providers_on_nats_and_shows_them() {
    let server = NatsServer::start();
    let url = server.url();
    let b = hub("hub-b", &url, "", "[[provider]]\nname = \"tp\"\nexec = [\"{provider}\"]\n");
    b.wait_ready("tp", 1).await;
    let d = NatsProvider::start(&url, "prov-d");
    let a = hub("hub-a", &url, "offer = false", "");
    let client = a.connect().await;
    wait_offered(&client, "pid", 2).await;

    // Calls through A are answered by B's provider or by D.
    let mut pids = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let pid: u32 = tokio::time::timeout(STEP, client.call("pid", &())).await.expect("a call hung").unwrap();
        pids.insert(pid);
    }
    assert!(!pids.is_empty() && pids.len() <= 2, "{pids:?}");
    let echoed: hubwire::Raw = client.call("echo", &hubwire::Raw(bytes::Bytes::from_static(b"over nats"))).await.unwrap();
    assert_eq!(&echoed.0[..], b"over nats");

    // Nobody offers it: at once, not after a timeout.
    let e = tokio::time::timeout(STEP, client.call::<_, ()>("nope", &())).await.expect("hung").unwrap_err();
    assert_eq!(e.code(), Code::UnknownMethod, "{e}");

    // A's status shows the pool of `pid` and where its links go; list
    // shows the cluster's methods.
    let s = a.status().await;
    let pool = s.providers.iter().find(|p| p.name == "nats:pid").unwrap_or_else(|| panic!("no pool: {s:?}"));
    assert!(pool.replicas.iter().any(|r| r.state == "ready" && r.peer.as_deref().is_some_and(|p| p.contains('/'))), "{pool:?}");
    assert_eq!(pool.replicas.iter().map(|r| r.calls).sum::<u64>(), 40);
    let (code, list, err) = a.cli(&["list"]);
    assert_eq!(code, 0, "{err}");
    assert!(list.contains("in the cluster"), "{list}");
    let in_cluster = list.split("in the cluster").nth(1).unwrap_or_default();
    let row = in_cluster.lines().find(|l| l.starts_with("pid ")).unwrap_or_else(|| panic!("no pid row:\n{list}"));
    assert!(row.contains("hub-b ×1") && row.contains("prov-d ×1"), "{list}");
    // A server stream of the cluster, from the command line through A
    // (its kind found by discovery: A's HELLO did not list it).
    let (code, out, err) = a.cli(&["call", "count", "3"]);
    assert_eq!((code, out.lines().collect::<Vec<_>>()), (0, vec!["0", "1", "2"]), "{err}");
    // B counted the links and calls it served.
    let sb = b.status().await;
    assert!(sb.links_in.is_some() && sb.calls_in.is_some(), "{sb:?}");

    // D supervised by a hub as one of its providers, reached by name.
    let e = hub("hub-e", &url, "offer = false", "[[provider]]\nname = \"pd\"\ndial = \"nats:prov-d\"\nreplicas = 2\n");
    let s = e.wait_ready("pd", 2).await;
    let pd = s.providers.iter().find(|p| p.name == "pd").unwrap();
    assert_eq!(pd.launch, "nats:prov-d");
    assert!(pd.replicas.iter().all(|r| r.peer.as_deref() == Some(&format!("prov-d/{}", d.id))), "{pd:?}");
    let pid: u32 = e.connect().await.call("pid", &()).await.unwrap();
    assert_eq!(pid, d.child.id(), "the call went to D");

    // No hub at all.
    let out = std::process::Command::new(common::HUB).args(["call", "--nats", &url, "echo", "--raw", "-"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = std::process::Command::new(common::HUB).args(["call", "--nats", &url, "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown_method"), "{}", String::from_utf8_lossy(&out.stderr));
}
