//! The official `nats` command line (natscli) against hubwire replicas on a
//! real `nats-server`: `nats micro ls`, `info` and `stats` list a provider
//! attached straight to NATS and a hub's offer, with the endpoints and
//! metadata of `spec/PROTOCOL.md` §13.7, and count the calls served. This
//! is what an operator who runs NATS already sees, with no hubwire tool.
//!
//! `make deps` builds the CLI into `rust/target/tools/nats` (`mk/nats.mk`);
//! `$NATS_CLI` names another binary.

mod common;
mod nats_common;

use std::path::PathBuf;
use std::process::Command;

use hubwire_tests::nats_server::{self, NatsServer};
use nats_common::{hub, wait_offered, NatsProvider};
use serde_json::Value;

/// The `nats` CLI: `$NATS_CLI`, else `nats` on PATH, else
/// `<target>/tools/nats` (beside the `debug` folder this test's `hubwire`
/// binary is in).
fn cli() -> PathBuf {
    let beside: Vec<PathBuf> =
        PathBuf::from(common::HUB).parent().and_then(|d| d.parent()).map(|t| t.join("tools").join("nats")).into_iter().collect();
    nats_server::locate("NATS_CLI", "nats", &beside)
        .unwrap_or_else(|| panic!("the nats CLI was not found (rust/target/tools/nats, $NATS_CLI or PATH): run `make deps` to build it"))
}

/// Runs `nats -s URL micro ARGS --json` and parses what it prints.
fn micro(url: &str, args: &[&str]) -> Value {
    let out =
        Command::new(cli()).args(["-s", url, "--timeout", "5s", "micro"]).args(args).arg("--json").output().expect("run the nats CLI");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "nats micro {args:?} failed: {stdout} {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("nats micro {args:?} printed no JSON ({e}): {stdout}"))
}

/// The endpoint named `name` of an INFO or STATS answer.
fn endpoint<'a>(service: &'a Value, name: &str) -> &'a Value {
    let eps = service["endpoints"].as_array().unwrap_or_else(|| panic!("no endpoints: {service}"));
    eps.iter().find(|e| e["name"] == name).unwrap_or_else(|| panic!("no endpoint {name:?}: {service}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_nats_cli_lists_and_counts_hubwire_replicas() {
    let server = NatsServer::start();
    let url = server.url();
    let _direct = NatsProvider::start(&url, "prov-cli");
    let h = hub("hub-cli", &url, "", "[[provider]]\nname = \"tp\"\nexec = [\"{provider}\"]\n");
    h.wait_ready("tp", 1).await;
    let client = h.connect().await;
    wait_offered(&client, "echo", 2).await;

    // `nats micro ls`: both replicas, under their provider names, with the
    // hubwire metadata.
    let ls = micro(&url, &["ls"]);
    let services = ls.as_array().unwrap_or_else(|| panic!("ls: {ls}"));
    for name in ["prov-cli", "hub-cli"] {
        let s = services.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{name} not listed: {ls}"));
        assert_eq!(s["metadata"]["hubwire.provider"], name, "{s}");
        assert_eq!(s["metadata"]["hubwire.protocol"], "1", "{s}");
    }

    // `nats micro info`: a method endpoint on its connect subject in the
    // queue group, with its kind.
    // (`info --json` prints {"info": INFO, "stats": STATS}.)
    let both = micro(&url, &["info", "prov-cli"]);
    let info = &both["info"];
    let echo = endpoint(info, "echo");
    assert_eq!(echo["subject"], "hubwire.m.echo", "{info}");
    assert_eq!(echo["queue_group"], "hubwire", "{info}");
    assert_eq!(echo["metadata"]["hubwire.kind"], "unary", "{info}");
    assert_eq!(endpoint(info, "-provider")["subject"], "hubwire.p.prov-2dcli", "{info}");

    // `nats micro stats`: calls made over NATS are counted on the replica
    // that served them (NATS balances the queue group, so sum both).
    for _ in 0..6 {
        let out = Command::new(common::HUB).args(["call", "--nats", &url, "echo", "--raw", "-"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let served: u64 = ["prov-cli", "hub-cli"]
        .iter()
        .map(|name| {
            let stats = micro(&url, &["stats", name]);
            let service = stats.as_array().and_then(|a| a.first()).cloned().unwrap_or(stats);
            endpoint(&service, "echo")["num_requests"].as_u64().unwrap_or_else(|| panic!("no num_requests: {service}"))
        })
        .sum();
    assert_eq!(served, 6, "the six calls are counted once each");
}
