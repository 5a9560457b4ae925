//! Rows, their ratios to the floor and to the best peer, the targets'
//! verdicts, and the JSON results file.
//!
//! Every ratio compares wall-clock time per call (the inverse of
//! throughput): below 1 is faster than the reference, above 1 slower.

use serde::{Deserialize, Serialize};

use crate::machine::Machine;
use crate::model::{Job, Mode, Role, System, Transport};
use crate::runner::Measurement;
use crate::stats::Latency;

/// One measured (or failed) job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// scenario/system/transport/payload/encoding/mode.
    pub key: String,
    /// Scenario file stem.
    pub scenario: String,
    /// System name.
    pub system: String,
    /// hubwire, floor or peer.
    pub role: String,
    /// Transport name.
    pub transport: String,
    /// Payload name.
    pub payload: String,
    /// Payload size, raw.
    pub payload_bytes: usize,
    /// raw, msgpack, json.
    pub encoding: String,
    /// sequential, window N, N clients.
    pub mode: String,
    /// Calls in flight (pipelined).
    pub window: Option<usize>,
    /// Clients (parallel).
    pub clients: Option<usize>,
    /// Calls measured.
    pub calls: u64,
    /// Wall-clock seconds measured.
    pub elapsed_s: f64,
    /// Calls per second.
    pub calls_per_s: f64,
    /// Payload MB/s (10^6 bytes), one way.
    pub mb_per_s: f64,
    /// Wall-clock µs per call (1 / throughput).
    pub us_per_call: f64,
    /// CPU µs per call, both processes, user + system.
    pub cpu_us_per_call: f64,
    /// Per-call latency (sequential and parallel).
    pub latency: Option<Latency>,
    /// The floor row compared with.
    pub floor: Option<String>,
    /// us_per_call / the floor's.
    pub vs_floor: Option<f64>,
    /// The best peer row of the group.
    pub best_peer: Option<String>,
    /// us_per_call / the best peer's.
    pub vs_best_peer: Option<f64>,
    /// Why the job did not run, if it failed.
    pub error: Option<String>,
}

impl Row {
    /// A row from a job and its measurement (or error).
    pub fn new(job: &Job, m: Result<Measurement, String>) -> Row {
        let (window, clients) = match job.mode {
            Mode::Pipelined { window } => (Some(window), None),
            Mode::Parallel { clients } => (None, Some(clients)),
            Mode::Sequential | Mode::Connect => (None, None),
        };
        let role = match job.system.role() {
            Role::Hubwire => "hubwire",
            Role::Floor => "floor",
            Role::Peer => "peer",
        };
        let mut row = Row {
            key: job.key(),
            scenario: job.scenario.clone(),
            system: job.system.name().into(),
            role: role.into(),
            transport: job.transport.name().into(),
            payload: job.payload.name.clone(),
            payload_bytes: job.payload.len(),
            encoding: job.encoding.name().into(),
            mode: job.mode.label(),
            window,
            clients,
            calls: 0,
            elapsed_s: 0.0,
            calls_per_s: 0.0,
            mb_per_s: 0.0,
            us_per_call: 0.0,
            cpu_us_per_call: 0.0,
            latency: None,
            floor: None,
            vs_floor: None,
            best_peer: None,
            vs_best_peer: None,
            error: None,
        };
        match m {
            Ok(m) if m.calls > 0 => {
                let secs = m.elapsed.as_secs_f64();
                row.calls = m.calls;
                row.elapsed_s = secs;
                row.calls_per_s = m.calls as f64 / secs;
                row.mb_per_s = row.calls_per_s * job.payload.len() as f64 / 1e6;
                row.us_per_call = secs * 1e6 / m.calls as f64;
                row.cpu_us_per_call = m.cpu.as_secs_f64() * 1e6 / m.calls as f64;
                row.latency = m.latency;
            }
            Ok(_) => row.error = Some("no call completed".into()),
            Err(e) => row.error = Some(e),
        }
        row
    }

    /// Whether it has numbers.
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.calls > 0
    }
}

/// The floor a system is compared with: the spinning one for spinners;
/// over NATS, NATS's own request-reply (or publish loop, for a stream).
fn floor_system(system: &str, transport: &str) -> &'static str {
    match System::parse(system) {
        Some(System::HubwireServerStream) if transport == Transport::Nats.name() => System::NatsPublishLoop.name(),
        Some(_) if transport == Transport::Nats.name() => System::NatsRequestReply.name(),
        Some(s) if s.spins() => System::FloorSpin.name(),
        _ => System::FloorBlocking.name(),
    }
}

fn floor_transport(t: &str) -> &str {
    match t {
        "hub" | "hub-direct" => Transport::Hub.floor().name(),
        t => t,
    }
}

/// Fills in every row's ratios: to the floor of the same scenario, payload,
/// mode and transport (the spinning floor for spinning systems, falling
/// back to the blocking one), and to the fastest peer of the same
/// scenario, payload and mode on any transport and encoding.
pub fn compute_ratios(rows: &mut [Row]) {
    let snapshot: Vec<Row> = rows.to_vec();
    let find = |r: &Row, system: &str| {
        snapshot
            .iter()
            .find(|f| {
                f.ok()
                    && f.system == system
                    && f.scenario == r.scenario
                    && f.payload == r.payload
                    && f.mode == r.mode
                    && f.transport == floor_transport(&r.transport)
            })
            .cloned()
    };
    for r in rows.iter_mut().filter(|r| r.ok()) {
        let floor = find(r, floor_system(&r.system, &r.transport)).or_else(|| find(r, System::FloorBlocking.name()));
        if let Some(f) = floor {
            r.vs_floor = Some(r.us_per_call / f.us_per_call);
            r.floor = Some(f.key);
        }
        let best = snapshot
            .iter()
            .filter(|p| p.ok() && p.role == "peer" && p.scenario == r.scenario && p.payload == r.payload && p.mode == r.mode)
            .min_by(|a, b| a.us_per_call.total_cmp(&b.us_per_call));
        if let Some(p) = best {
            r.vs_best_peer = Some(r.us_per_call / p.us_per_call);
            r.best_peer = Some(p.key.clone());
        }
    }
}

/// One target (`targets.rs`), checked against this run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetCheck {
    /// What the target says.
    pub target: String,
    /// The figures measured, in words.
    pub measured: String,
    /// The ratio that decides it.
    pub ratio: Option<f64>,
    /// The limit for `ratio`.
    pub limit: String,
    /// Met, missed, or not measured (`None`).
    pub met: Option<bool>,
}

/// Everything a run produced.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Results {
    /// Seconds since the epoch at the start.
    pub unix_time: u64,
    /// quick, smoke or full.
    pub profile: String,
    /// Warm-up and measurement per job, seconds.
    pub warmup_s: f64,
    /// Measured part per job, seconds.
    pub measure_s: f64,
    /// The machine and its load.
    pub machine: Machine,
    /// Every job.
    pub rows: Vec<Row>,
    /// The targets (`targets.rs`), checked.
    pub targets: Vec<TargetCheck>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(system: &str, role: &str, transport: &str, us: f64) -> Row {
        Row {
            key: format!("s/{system}/{transport}"),
            scenario: "s".into(),
            system: system.into(),
            role: role.into(),
            transport: transport.into(),
            payload: "p".into(),
            payload_bytes: 16,
            encoding: "raw".into(),
            mode: "sequential".into(),
            window: None,
            clients: None,
            calls: 100,
            elapsed_s: us * 100.0 / 1e6,
            calls_per_s: 1e6 / us,
            mb_per_s: 1.0,
            us_per_call: us,
            cpu_us_per_call: us,
            latency: None,
            floor: None,
            vs_floor: None,
            best_peer: None,
            vs_best_peer: None,
            error: None,
        }
    }

    #[test]
    fn ratios_use_the_matching_floor_and_the_fastest_peer() {
        let mut rows = vec![
            row("floor-blocking", "floor", "unix", 40.0),
            row("floor-spin", "floor", "unix", 4.0),
            row("hubwire-efficient", "hubwire", "unix", 50.0),
            row("hubwire-low-latency", "hubwire", "hub", 8.0),
            row("tonic-unary", "peer", "unix", 100.0),
            row("http1", "peer", "tcp", 80.0),
        ];
        compute_ratios(&mut rows);
        assert_eq!(rows[2].vs_floor, Some(50.0 / 40.0));
        assert_eq!(rows[2].vs_best_peer, Some(50.0 / 80.0));
        // Spinning through the hub: the spinning floor of the Unix socket.
        assert_eq!(rows[3].vs_floor, Some(2.0));
        assert_eq!(rows[3].floor.as_deref(), Some("s/floor-spin/unix"));
    }
}
