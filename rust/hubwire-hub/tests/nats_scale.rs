//! Many hubs on one NATS cluster (3 nodes), each a process: `HUBS` hubs
//! each supervising `PER_HUB` provider replicas (its own methods, named
//! `h<i>.…`, on `PER_HUB - 1` replicas, and the shared `echo`/`pid` on
//! one), and one more hub, the router, with none. Through the router:
//! every hub's methods are reached, `hubwire list` and `status` see every
//! hub, and a shared method fails over when the hub serving a link is
//! killed. The hubs' memory (RSS) and CPU per provider replica are
//! printed for `docs/scale.md`.
//!
//! `make test` runs a small version (4 hubs × 5); `make test-nats-scale`
//! the full one (20 hubs × 10 = 200 replicas): `HUBWIRE_SCALE_HUBS` and
//! `HUBWIRE_SCALE_PER_HUB` set the sizes.

mod common;
mod nats_common;

use std::time::{Duration, Instant};

use hubwire::{CallOptions, Code};
use hubwire_tests::nats_server::NatsCluster;
use nats_common::{hub, kill_hub, wait_offered};

/// How long the idle cost is measured.
const IDLE: Duration = Duration::from_secs(5);

fn size(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// (resident KiB, CPU seconds so far) of a process, from /proc.
fn usage(pid: u32) -> (u64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
    // After the command: state is field 3, utime 14 and stime 15 (1-based).
    let ticks: u64 = [11, 12].iter().filter_map(|&i| fields.get(i)?.parse::<u64>().ok()).sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (rss, ticks as f64 / hz)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_hubs_route_list_and_fail_over_on_one_cluster() {
    let (hubs, per_hub) = (size("HUBWIRE_SCALE_HUBS", 4), size("HUBWIRE_SCALE_PER_HUB", 5));
    assert!(hubs >= 3 && per_hub >= 2, "at least 3 hubs of 2 replicas");
    let nats = NatsCluster::start(3);
    let t_start = Instant::now();
    let mut serving: Vec<common::Hub> = (0..hubs)
        .map(|i| {
            let providers = format!(
                "[[provider]]\nname = \"own\"\nexec = [\"{{provider}}\", \"--prefix\", \"h{i}.\"]\nreplicas = {}\n\n\
                 [[provider]]\nname = \"shared\"\nexec = [\"{{provider}}\"]\n",
                per_hub - 1
            );
            hub(&format!("hub-{i}"), &nats.nodes[i % 3].url(), "", &providers)
        })
        .collect();
    for h in &serving {
        h.wait_ready("own", per_hub - 1).await;
        h.wait_ready("shared", 1).await;
    }
    let router = hub("router", &nats.nodes[0].url(), "offer = false\nlinks = 2", "");
    let client = router.connect().await;
    let found = wait_offered(&client, "echo", hubs).await;
    eprintln!(
        "{hubs} hubs × {per_hub} replicas = {} provider replicas up and discovered in {:.1} s",
        hubs * per_hub,
        t_start.elapsed().as_secs_f64()
    );
    assert_eq!(found.replicas.len(), hubs, "every hub is one replica in discovery");
    // Idle cost: supervision (health pings), NATS pings and heartbeats.
    let idle_from: Vec<(u64, f64)> = serving.iter().map(|h| usage(h.child.id())).collect();
    tokio::time::sleep(IDLE).await;
    let idle: Vec<(u64, f64)> = serving.iter().map(|h| usage(h.child.id())).collect();
    let idle_cpu = idle.iter().zip(&idle_from).map(|(b, a)| b.1 - a.1).sum::<f64>() / hubs as f64 / IDLE.as_secs_f64();

    // Routing: every hub's own methods, through the router.
    let t = Instant::now();
    let mut pids = std::collections::BTreeSet::new();
    for i in 0..hubs {
        let pid: u32 = tokio::time::timeout(Duration::from_secs(20), client.call(&format!("h{i}.pid"), &())).await.expect("hung").unwrap();
        pids.insert(pid);
    }
    assert_eq!(pids.len(), hubs, "each hub's own provider answered");
    eprintln!("first call to each of {hubs} hubs (opening its pool): {:.1} ms each", t.elapsed().as_secs_f64() * 1000.0 / hubs as f64);

    // list and status through the router see the whole cluster.
    let t = Instant::now();
    let (code, list, err) = router.cli(&["list"]);
    assert_eq!(code, 0, "{err}");
    let list_ms = t.elapsed().as_millis();
    let row = list.split("in the cluster").nth(1).and_then(|c| c.lines().find(|l| l.starts_with("echo "))).unwrap_or_default().to_string();
    assert!(row.contains(&format!(" {hubs} ")), "echo offered by {hubs} hubs: {row:?}\n{list}");
    let (code, status, err) = router.cli(&["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(status.lines().filter(|l| l.starts_with("hub-")).count() == hubs, "{status}");
    eprintln!("hubwire list through the router: {list_ms} ms (discovery_timeout 500 ms)");

    // Failover of a shared method: kill the hub one of its links reaches.
    let _: hubwire::Raw = client.call("echo", &hubwire::Raw(bytes::Bytes::new())).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let (victim, on_victim) = loop {
        let s = router.status().await;
        let peers: Vec<String> = s
            .providers
            .iter()
            .filter(|p| p.name == "nats:echo")
            .flat_map(|p| p.replicas.iter().filter(|r| r.state == "ready").filter_map(|r| r.peer.clone()))
            .collect();
        if let Some(p) = peers.first().filter(|_| peers.len() == 2) {
            let hub = p.split('/').next().unwrap().to_string();
            // The cluster picks each link's replica: both may be on the
            // hub we kill, and then each may fail the call sent on it
            // before its death was noticed.
            let on_victim = peers.iter().filter(|q| q.split('/').next() == Some(hub.as_str())).count();
            eprintln!("the echo pool's links: {peers:?}; killing {hub}, which {on_victim} of them reach");
            break (hub, on_victim);
        }
        assert!(Instant::now() < deadline, "the echo pool has not 2 ready links: {s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let at = victim.trim_start_matches("hub-").parse::<usize>().unwrap();
    let load = {
        let client = client.clone();
        tokio::spawn(async move {
            let opts = CallOptions { timeout: Some(Duration::from_secs(5)), codec: None };
            let (mut ok, mut unavailable) = (0, 0);
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(4) {
                let x = hubwire::Raw(bytes::Bytes::from_static(b"x"));
                let call = client.call_with::<_, hubwire::Raw>("echo", &x, &opts);
                match tokio::time::timeout(Duration::from_secs(15), call).await.expect("a call hung") {
                    Ok(_) => ok += 1,
                    Err(e) if e.code() == Code::Unavailable => unavailable += 1,
                    Err(e) => panic!("only unavailable: {e}"),
                }
            }
            (ok, unavailable)
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Usage before the kill, every serving hub.
    let mut rows: Vec<(u64, f64)> = serving.iter().map(|h| usage(h.child.id())).collect();
    let up = t_start.elapsed().as_secs_f64();
    kill_hub(&mut serving[at]);
    let (ok, unavailable) = load.await.unwrap();
    eprintln!("killed {victim} under load: {ok} calls ok, {unavailable} unavailable (at most one per link it reached)");
    assert!(ok > 10 && unavailable <= on_victim, "{ok} ok, {unavailable} unavailable, {on_victim} links on {victim}");

    let (router_rss, router_cpu) = usage(router.child.id());
    rows.sort_by_key(|r| r.0);
    let mean_rss = rows.iter().map(|r| r.0).sum::<u64>() as f64 / rows.len() as f64;
    let mean_cpu = rows.iter().map(|r| r.1).sum::<f64>() / rows.len() as f64;
    eprintln!(
        "serving hub ({per_hub} replicas each): RSS mean {:.1} MiB (max {:.1}), {:.0} KiB per replica; CPU idle {:.2} % of a core \
         ({:.3} % per replica), {:.2} s in all over its {up:.0} s (start, routing, discovery)",
        mean_rss / 1024.0,
        rows.last().unwrap().0 as f64 / 1024.0,
        mean_rss / per_hub as f64,
        idle_cpu * 100.0,
        idle_cpu * 100.0 / per_hub as f64,
        mean_cpu,
    );
    eprintln!("router hub ({hubs} remote pools of 2 links + echo): RSS {:.1} MiB, CPU {router_cpu:.2} s", router_rss as f64 / 1024.0);
}
