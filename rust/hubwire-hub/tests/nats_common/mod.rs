//! Hosts for the NATS tests: hubs joined to a cluster and providers
//! attached straight to it, each a process of its own (`hubwire hub`,
//! `hubwire-test-provider --nats`), as on separate machines.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hubwire::Connection;
use hubwire_hub::discovery::{Cluster, CLUSTER_METHOD};

use crate::common::{Hub, PROVIDER};

/// Starts a hub named `name` on `urls` (comma-separated), with `[nats]
/// extra` lines and `providers` (`{provider}`: the test provider).
pub fn hub(name: &str, urls: &str, extra: &str, providers: &str) -> Hub {
    let url_list: Vec<String> = urls.split(',').map(|u| format!("{u:?}")).collect();
    let nats = format!("[nats]\nurl = [{}]\n{extra}\n\n{providers}", url_list.join(", "));
    Hub::start_with(&format!("name = {name:?}"), &nats, &[])
}

/// One replica of the test provider attached straight to NATS. Killed
/// (SIGKILL) when dropped.
pub struct NatsProvider {
    pub child: Child,
    /// Its replica id, as it printed it.
    pub id: String,
}

impl NatsProvider {
    /// Starts it as provider `name` on `url` and waits (up to 20 s) until
    /// it listens.
    pub fn start(url: &str, name: &str) -> NatsProvider {
        let mut child =
            Command::new(PROVIDER).args(["--nats", url, "--name", name]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(id) = line.strip_prefix("nats replica ") {
                    let _ = tx.send(id.to_string());
                }
            }
        });
        let id = rx.recv_timeout(Duration::from_secs(20)).expect("the NATS provider did not listen within 20 s");
        NatsProvider { child, id }
    }

    /// As a crash: SIGKILL, and reaped.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for NatsProvider {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The cluster as `conn`'s hub sees it (`hubwire.cluster`).
pub async fn cluster(conn: &Connection) -> Cluster {
    conn.call(CLUSTER_METHOD, &()).await.unwrap()
}

/// Waits (up to 20 s) until `n` replicas offering `method` answer
/// discovery through `conn`'s hub, and two discoveries in a row (each
/// waits the discovery timeout) see the same replicas. A hub whose local
/// methods change offers the new set as a new replica before it stops the
/// old one, so for a moment it answers twice; the second look is after
/// that moment.
pub async fn wait_offered(conn: &Connection, method: &str, n: usize) -> Cluster {
    let deadline = Instant::now() + Duration::from_secs(20);
    let ids = |c: &Cluster| c.replicas.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
    let mut last: Option<Vec<String>> = None;
    loop {
        let c = cluster(conn).await;
        if c.replicas.iter().filter(|r| r.methods.contains_key(method)).count() >= n {
            if last.as_ref() == Some(&ids(&c)) {
                return c;
            }
            last = Some(ids(&c));
        } else {
            last = None;
        }
        assert!(Instant::now() < deadline, "{n} replicas of {method:?} not offered (and settled) within 20 s: {c:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends SIGKILL to a hub, as a crashed host (its providers go with it:
/// PR_SET_PDEATHSIG).
pub fn kill_hub(hub: &mut Hub) {
    let _ = hub.child.kill();
    let _ = hub.child.wait();
}
