//! What runs where in the cluster, from NATS service discovery
//! (`spec/PROTOCOL.md` §13.7): one `$SRV.INFO` and one `$SRV.STATS`
//! request to every service, answers gathered for a short deadline
//! (`[nats] discovery_timeout`), those of our prefix kept. Served by the
//! hub as its own method `hubwire.cluster` and printed by `hubwire list`
//! and `hubwire status` (with `--nats`, without a hub).
//!
//! Bounded: at most [`MAX_ANSWERS`] answers of at most the server's
//! `max_payload` each are read per request; the rest are ignored and the
//! result says it was cut.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_nats::Client;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

/// The hub's own method returning [`Cluster`].
pub const CLUSTER_METHOD: &str = "hubwire.cluster";

/// Answers read per discovery request; more are ignored.
pub const MAX_ANSWERS: usize = 4096;

/// One replica in the cluster (a hub offering its providers, or a
/// provider attached to NATS), as it described itself.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RemoteReplica {
    /// Its provider name (a hub: the hub's name).
    pub provider: String,
    /// Its replica id (`P.r.<id>` reaches exactly it).
    pub id: String,
    /// Its implementation's version.
    pub version: String,
    /// Its methods and their kinds, by name.
    pub methods: BTreeMap<String, String>,
    /// Links opened to it (connect requests it answered), when STATS came.
    pub links: Option<u64>,
    /// Calls it has served over its links, when STATS came.
    pub calls: Option<u64>,
}

/// The cluster as discovery saw it.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Cluster {
    /// The prefix looked at.
    pub prefix: String,
    /// The replicas that answered, by provider then id.
    pub replicas: Vec<RemoteReplica>,
    /// Set when more than [`MAX_ANSWERS`] answered.
    #[serde(default)]
    pub cut: bool,
}

#[derive(Deserialize)]
struct Info {
    #[serde(default)]
    id: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    metadata: Option<HashMap<String, String>>,
    #[serde(default)]
    endpoints: Vec<EndpointInfo>,
}

#[derive(Deserialize)]
struct EndpointInfo {
    #[serde(default)]
    metadata: Option<HashMap<String, String>>,
}

#[derive(Deserialize)]
struct Stats {
    #[serde(default)]
    id: String,
    #[serde(default)]
    endpoints: Vec<EndpointStats>,
}

#[derive(Deserialize)]
struct EndpointStats {
    #[serde(default)]
    num_requests: u64,
    #[serde(default)]
    data: Option<serde_json::Value>,
}

/// Sends one request to `subject` and gathers the answers for `within`.
async fn gather(client: &Client, subject: &str, within: Duration) -> Result<(Vec<bytes::Bytes>, bool), String> {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.map_err(|e| format!("NATS subscribe: {e}"))?;
    client.publish_with_reply(subject.to_string(), inbox, bytes::Bytes::new()).await.map_err(|e| format!("NATS publish: {e}"))?;
    client.flush().await.map_err(|e| format!("NATS flush: {e}"))?;
    let until = tokio::time::Instant::now() + within;
    let mut out = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout_at(until, sub.next()).await {
        if out.len() == MAX_ANSWERS {
            let _ = sub.unsubscribe().await;
            return Ok((out, true));
        }
        out.push(m.payload);
    }
    let _ = sub.unsubscribe().await;
    Ok((out, false))
}

/// Asks the cluster who offers what under `prefix`, waiting `within` for
/// the answers to each of `$SRV.INFO` and `$SRV.STATS` (asked together).
pub async fn discover(client: &Client, prefix: &str, within: Duration) -> Result<Cluster, String> {
    let (infos, stats) = tokio::join!(gather(client, "$SRV.INFO", within), gather(client, "$SRV.STATS", within));
    let ((infos, cut_i), (stats, cut_s)) = (infos?, stats?);
    Ok(merge(prefix, &infos, &stats, cut_i || cut_s))
}

/// Joins INFO and STATS answers by replica id, keeping hubwire replicas of
/// `prefix`; anything unreadable is skipped (other services answer too).
pub fn merge(prefix: &str, infos: &[bytes::Bytes], stats: &[bytes::Bytes], cut: bool) -> Cluster {
    let mut counts: HashMap<String, (u64, u64)> = HashMap::new();
    for s in stats.iter().filter_map(|b| serde_json::from_slice::<Stats>(b).ok()) {
        let links = s.endpoints.iter().map(|e| e.num_requests).sum();
        let calls = s.endpoints.iter().filter_map(|e| e.data.as_ref()?.get("calls")?.as_u64()).sum();
        counts.insert(s.id, (links, calls));
    }
    let mut replicas = Vec::new();
    for i in infos.iter().filter_map(|b| serde_json::from_slice::<Info>(b).ok()) {
        let meta = i.metadata.unwrap_or_default();
        if meta.get("hubwire.prefix").map(String::as_str) != Some(prefix) {
            continue;
        }
        let methods = i
            .endpoints
            .iter()
            .filter_map(|e| {
                let m = e.metadata.as_ref()?;
                Some((m.get("hubwire.method")?.clone(), m.get("hubwire.kind").cloned().unwrap_or_default()))
            })
            .collect();
        let c = counts.get(&i.id);
        replicas.push(RemoteReplica {
            provider: meta.get("hubwire.provider").cloned().unwrap_or_default(),
            id: i.id,
            version: i.version,
            methods,
            links: c.map(|c| c.0),
            calls: c.map(|c| c.1),
        });
    }
    replicas.sort_by(|a, b| (&a.provider, &a.id).cmp(&(&b.provider, &b.id)));
    replicas.dedup_by(|a, b| a.id == b.id);
    Cluster { prefix: prefix.to_string(), replicas, cut }
}

/// Rows of cells as a table, columns padded, control characters of
/// peer-supplied text escaped.
fn table(head: &[&str], rows: Vec<Vec<String>>) -> String {
    let rows: Vec<Vec<String>> = std::iter::once(head.iter().map(|h| h.to_string()).collect())
        .chain(rows.into_iter().map(|r| r.iter().map(|c| crate::terminal::printable(c).into_owned()).collect()))
        .collect();
    let mut widths = vec![0; head.len()];
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in &rows {
        let line: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

impl Cluster {
    /// `hubwire list`: every method offered in the cluster, its kind, and
    /// which providers and how many replicas offer it.
    pub fn methods_table(&self) -> String {
        let mut by: BTreeMap<&str, (String, BTreeMap<&str, usize>)> = BTreeMap::new();
        for r in &self.replicas {
            for (m, kind) in &r.methods {
                let e = by.entry(m).or_insert_with(|| (kind.clone(), BTreeMap::new()));
                *e.1.entry(&r.provider).or_default() += 1;
            }
        }
        let rows = by
            .into_iter()
            .map(|(m, (kind, providers))| {
                let n: usize = providers.values().sum();
                let who: Vec<String> = providers.iter().map(|(p, k)| format!("{p} ×{k}")).collect();
                vec![m.to_string(), kind, n.to_string(), who.join(", ")]
            })
            .collect();
        self.footed(table(&["METHOD", "KIND", "REPLICAS", "WHERE (provider × replicas)"], rows))
    }

    /// `hubwire status`: every replica in the cluster, its methods, and
    /// what it has served.
    pub fn replicas_table(&self) -> String {
        let n = |v: Option<u64>| v.map_or("-".into(), |v| v.to_string());
        let rows = self
            .replicas
            .iter()
            .map(|r| vec![r.provider.clone(), r.id.clone(), r.version.clone(), r.methods.len().to_string(), n(r.links), n(r.calls)])
            .collect();
        self.footed(table(&["PROVIDER", "REPLICA ID", "VERSION", "METHODS", "LINKS", "CALLS"], rows))
    }

    fn footed(&self, mut t: String) -> String {
        if self.replicas.is_empty() {
            t.push_str(&format!("(no hubwire replica answered under prefix {:?})\n", self.prefix));
        }
        if self.cut {
            t.push_str(&format!("(more than {MAX_ANSWERS} answers: the rest were not read)\n"));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_of_our_prefix_are_joined_by_replica_id_and_others_skipped() {
        let info = |id: &str, prefix: &str| {
            bytes::Bytes::from(
                serde_json::json!({
                    "type": "io.nats.micro.v1.info_response", "name": "hub-b", "id": id, "version": "0.1.0", "description": "",
                    "metadata": {"hubwire.protocol": "1", "hubwire.provider": "hub b", "hubwire.prefix": prefix},
                    "endpoints": [
                        {"name": "echo", "subject": "hubwire.m.echo", "queue_group": "hubwire",
                         "metadata": {"hubwire.method": "echo", "hubwire.kind": "unary"}},
                        {"name": "-provider", "subject": "hubwire.p.hub_b", "queue_group": "hubwire", "metadata": {"hubwire.connect": "provider"}}
                    ]
                })
                .to_string(),
            )
        };
        let stats = bytes::Bytes::from(
            serde_json::json!({"type": "io.nats.micro.v1.stats_response", "name": "hub-b", "id": "R1",
                "endpoints": [{"name": "echo", "num_requests": 2, "data": {"calls": 40}}, {"name": "-provider", "num_requests": 1}]})
            .to_string(),
        );
        let other = bytes::Bytes::from_static(b"{\"type\":\"io.nats.micro.v1.info_response\",\"name\":\"x\",\"id\":\"X\"}");
        let c =
            merge("hubwire", &[info("R1", "hubwire"), info("R2", "other"), other, bytes::Bytes::from_static(b"not json")], &[stats], false);
        assert_eq!(c.replicas.len(), 1, "{c:?}");
        let r = &c.replicas[0];
        assert_eq!((r.provider.as_str(), r.id.as_str(), r.links, r.calls), ("hub b", "R1", Some(3), Some(40)));
        assert_eq!(r.methods.get("echo").map(String::as_str), Some("unary"));
        assert_eq!(r.methods.len(), 1, "the -provider endpoint is no method");
        let t = c.methods_table();
        assert!(t.lines().nth(1).is_some_and(|l| l.starts_with("echo") && l.contains("hub b ×1")), "{t}");
        assert!(c.replicas_table().contains("R1"), "{}", c.replicas_table());
    }
}
