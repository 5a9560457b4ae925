//! What the hub reports about itself: the status of every provider and
//! replica (`hubwire status`, `GET /v1/status`) and the method list
//! (`hubwire list`, `GET /v1/methods`). Both are plain serde values served
//! as the hub's own methods, `hubwire.status` and `hubwire.methods`, so any
//! client in any language can read them.
//!
//! Every text field (launch line, reasons, stderr lines, method docs) is
//! cut at [`FIELD_MAX`] bytes, ending `… [N bytes cut]`, so that what a
//! provider prints or advertises can never make the answer too large for
//! a frame.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use crate::config::Launch;
use crate::registry::{Phase, Registry};
use crate::terminal::printable;

/// The hub's own method returning [`Status`].
pub const STATUS_METHOD: &str = "hubwire.status";
/// The hub's own method returning the [`MethodRow`]s.
pub const METHODS_METHOD: &str = "hubwire.methods";

/// The longest text field in a status or method row, in bytes.
pub const FIELD_MAX: usize = 1024;

/// `s` cut at [`FIELD_MAX`] bytes (on a character boundary) with a marker
/// saying how much was cut.
pub fn cut(s: &str) -> String {
    if s.len() <= FIELD_MAX {
        return s.to_string();
    }
    let mut end = FIELD_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} bytes cut]", &s[..end], s.len() - end)
}

/// The whole hub.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Status {
    /// The hub's name.
    pub hub: String,
    /// Milliseconds since it started.
    pub uptime_ms: u64,
    /// Every provider, in config order, then the pools of remote methods
    /// (`nats:METHOD`, by name).
    pub providers: Vec<ProviderStatus>,
    /// In a NATS cluster: links from the cluster open now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links_in: Option<usize>,
    /// In a NATS cluster: calls taken over links from the cluster so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_in: Option<u64>,
}

/// One provider and its pool.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ProviderStatus {
    /// Its name.
    pub name: String,
    /// `exec …`, `unix:…` or `tcp:…`.
    pub launch: String,
    /// Calls waiting for a slot.
    pub queued: usize,
    /// Calls refused before reaching a replica (queue full, none ready).
    #[serde(default)]
    pub refused: u64,
    /// Its replicas.
    pub replicas: Vec<ReplicaStatus>,
}

/// One replica.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ReplicaStatus {
    /// Index in the pool.
    pub index: usize,
    /// Process id (spawned providers).
    pub pid: Option<u32>,
    /// `starting`, `ready`, `restarting`, `failed`, `stopped`.
    pub state: String,
    /// Why it failed.
    pub reason: Option<String>,
    /// Restarts so far.
    pub restarts: u32,
    /// Calls in flight now.
    pub in_flight: usize,
    /// Calls answered.
    pub calls: u64,
    /// Calls answered with an error.
    pub errors: u64,
    /// Median latency, µs.
    pub p50_us: Option<u64>,
    /// 99th percentile latency, µs.
    pub p99_us: Option<u64>,
    /// How its last run ended.
    pub last_exit: Option<String>,
    /// Its last stderr lines.
    pub stderr: Vec<String>,
    /// Calls it answered over direct connections (spec §14.5), as it
    /// reported them; not in `calls`.
    #[serde(default)]
    pub direct_calls: u64,
    /// Of those, answered with an error.
    #[serde(default)]
    pub direct_errors: u64,
    /// Direct connections it serves now.
    #[serde(default)]
    pub direct_open: u64,
    /// The name in its peer's HELLO while ready: for a link of a remote
    /// method (provider `nats:METHOD`), the hub or provider it reached.
    #[serde(default)]
    pub peer: Option<String>,
    /// Whether its connection is on shared memory (§11.4).
    #[serde(default)]
    pub shm: bool,
}

/// One routed method.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MethodRow {
    /// Its name.
    pub name: String,
    /// `unary`, `server_stream`, `client_stream` or `bidi`.
    pub kind: String,
    /// The provider serving it.
    pub provider: String,
    /// Its one-line description, if it has one.
    pub doc: Option<String>,
}

/// Reads the status off the registry.
pub fn status(reg: &Registry, hub: &str) -> Status {
    let pools = reg.cluster.get().map(|c| c.pools()).unwrap_or_default();
    let providers = reg
        .providers
        .iter()
        .chain(&pools)
        .map(|p| ProviderStatus {
            name: p.config.name.clone(),
            launch: cut(&match &p.config.launch {
                Launch::Exec { argv, .. } => format!("exec {}", argv.join(" ")),
                Launch::Unix(path) => format!("unix:{}", path.display()),
                Launch::Tcp(a) => format!("tcp:{a}"),
                Launch::Nats(crate::remote::Target::Method(m)) => format!("nats:method:{m}"),
                Launch::Nats(crate::remote::Target::Provider(n)) => format!("nats:{n}"),
                Launch::Nats(crate::remote::Target::Replica(id)) => format!("nats:replica:{id}"),
            }),
            queued: p.queued.load(Ordering::Relaxed),
            refused: p.refusals.calls(),
            replicas: p
                .replicas
                .iter()
                .map(|r| {
                    let st = r.state.lock().unwrap();
                    let h = r.metrics.snapshot();
                    let us = |q| h.quantile(q).map(|d: std::time::Duration| d.as_micros() as u64);
                    ReplicaStatus {
                        index: r.index,
                        pid: st.pid.filter(|_| matches!(st.phase, Phase::Ready | Phase::Starting)),
                        state: st.phase.word().into(),
                        // Why it failed, or why its last run was ended by us.
                        reason: match &st.phase {
                            Phase::Failed(why) => Some(cut(why)),
                            _ => st.last_exit.as_deref().filter(|e| e.starts_with("hung")).map(cut),
                        },
                        restarts: st.restarts,
                        in_flight: r.in_flight.load(Ordering::Relaxed),
                        calls: r.metrics.calls(),
                        errors: r.metrics.errors(),
                        p50_us: us(0.5),
                        p99_us: us(0.99),
                        last_exit: st.last_exit.as_deref().map(cut),
                        stderr: st.stderr.iter().map(|l| cut(l)).collect(),
                        direct_calls: r.direct.calls.load(Ordering::Relaxed),
                        direct_errors: r.direct.errors.load(Ordering::Relaxed),
                        // Its direct connections end with its run.
                        direct_open: if st.phase == Phase::Ready { r.direct.open.load(Ordering::Relaxed) } else { 0 },
                        peer: st.peer.as_deref().filter(|_| st.phase == Phase::Ready).map(cut),
                        shm: st.conn.as_ref().is_some_and(|c| c.on_shared_memory()),
                    }
                })
                .collect(),
        })
        .collect();
    Status { hub: hub.into(), uptime_ms: reg.started.elapsed().as_millis() as u64, providers, links_in: None, calls_in: None }
}

impl Status {
    /// What an untrusted caller sees (`docs/security.md`, "private
    /// status"): names, states, counts and latencies, but no argv or
    /// address (`launch` keeps only the word `exec`, `unix` or `tcp`), no
    /// pids and no stderr tails: an argv may hold a secret passed as a
    /// flag, a stderr line anything.
    pub fn redacted(mut self) -> Status {
        for p in &mut self.providers {
            p.launch = p.launch.split([' ', ':']).next().unwrap_or_default().to_string();
            for r in &mut p.replicas {
                r.pid = None;
                r.stderr.clear();
            }
        }
        self
    }
}

/// The routed methods, by provider in config order, then the remote
/// methods this hub has links for (provider `nats:METHOD`), by name.
pub fn methods(reg: &Registry) -> Vec<MethodRow> {
    let mut routes = reg.routes();
    let position = |name: &str| reg.providers.iter().position(|p| p.config.name == name);
    routes.sort_by_key(|r| position(&r.provider.config.name));
    routes.extend(reg.cluster.get().map(|c| c.routes()).unwrap_or_default());
    routes
        .into_iter()
        .map(|r| MethodRow {
            name: r.info.name.clone(),
            kind: r.info.kind.name().into(),
            provider: r.provider.config.name.clone(),
            doc: r.info.doc.as_deref().map(cut),
        })
        .collect()
}

/// Latency for people: `812µs`, `3.4ms`, `1.20s`.
pub fn human_us(us: Option<u64>) -> String {
    match us {
        None => "-".into(),
        Some(u) if u < 1000 => format!("{u}µs"),
        Some(u) if u < 1_000_000 => format!("{:.1}ms", u as f64 / 1000.0),
        Some(u) => format!("{:.2}s", u as f64 / 1e6),
    }
}

/// The DIRECT column: calls answered over direct connections, their
/// errors, and the connections open (`-` when there were none).
fn direct_cell(r: &ReplicaStatus) -> String {
    if r.direct_calls == 0 && r.direct_open == 0 {
        return "-".into();
    }
    format!("{} ({} err, {} open)", r.direct_calls, r.direct_errors, r.direct_open)
}

/// The status as a table, one row per replica (DIRECT: its calls over
/// direct connections; PEER: the name in its HELLO, for a link of a remote
/// method the hub or provider it reached), then the reasons and last
/// stderr lines of failed replicas; peer-supplied text is shown with its
/// control characters escaped.
pub fn table(s: &Status) -> String {
    let mut rows =
        vec![["PROVIDER", "REPLICA", "PID", "STATE", "RESTARTS", "IN FLIGHT", "CALLS", "ERRORS", "P50", "P99", "DIRECT", "PEER"]
            .map(String::from)];
    for p in &s.providers {
        for r in &p.replicas {
            rows.push([
                printable(&p.name).into_owned(),
                format!("{}/{}", r.index + 1, p.replicas.len()),
                r.pid.map_or("-".into(), |p| p.to_string()),
                // "ready+shm": the replica's connection is on shared memory.
                if r.shm { format!("{}+shm", printable(&r.state)) } else { printable(&r.state).into_owned() },
                r.restarts.to_string(),
                r.in_flight.to_string(),
                r.calls.to_string(),
                r.errors.to_string(),
                human_us(r.p50_us),
                human_us(r.p99_us),
                direct_cell(r),
                printable(r.peer.as_deref().unwrap_or("-")).into_owned(),
            ]);
        }
    }
    let mut widths = [0; 12];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let line: Vec<String> = row.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    for p in &s.providers {
        for r in p.replicas.iter().filter(|r| r.reason.is_some()) {
            let reason = printable(r.reason.as_deref().unwrap_or_default());
            let _ = writeln!(out, "\n{} replica {}: {reason}", printable(&p.name), r.index + 1);
            if !r.stderr.is_empty() {
                let _ = writeln!(out, "  last stderr lines:");
                for l in &r.stderr {
                    let _ = writeln!(out, "    {}", printable(l));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_field_is_cut_on_a_character_boundary_and_says_so() {
        assert_eq!(cut("short"), "short");
        let long = "é".repeat(FIELD_MAX);
        let c = cut(&long);
        assert!(c.len() < FIELD_MAX + 40, "{}", c.len());
        assert!(c.ends_with(&format!("… [{} bytes cut]", long.len() - FIELD_MAX)), "{c}");
    }
}
