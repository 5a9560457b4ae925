//! `GET /metrics`: the registry in Prometheus text format (version 0.0.4).
//! Latency is a summary (p50, p99 from the replica histograms), because
//! the histograms' log-scale buckets are finer than anyone wants scraped.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use crate::metrics::Histogram;
use crate::registry::{Phase, Registry};

/// Renders every metric.
pub fn render(reg: &Registry) -> String {
    let mut o = String::new();
    let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, String)>| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in rows {
            let _ = writeln!(o, "{name}{{{labels}}} {value}");
        }
    };
    let per_replica = |f: &dyn Fn(&crate::registry::Replica) -> String| -> Vec<(String, String)> {
        reg.providers
            .iter()
            .flat_map(|p| p.replicas.iter().map(move |r| (format!("provider=\"{}\",replica=\"{}\"", p.config.name, r.index), f(r))))
            .collect()
    };
    family(
        "hubwire_replica_up",
        "gauge",
        "1 when the replica is ready for calls.",
        per_replica(&|r| u8::from(r.state.lock().unwrap().phase == Phase::Ready).to_string()),
    );
    family(
        "hubwire_replica_restarts_total",
        "counter",
        "Restarts of the replica.",
        per_replica(&|r| r.state.lock().unwrap().restarts.to_string()),
    );
    family(
        "hubwire_calls_in_flight",
        "gauge",
        "Calls routed to the replica and not answered yet.",
        per_replica(&|r| r.in_flight.load(Ordering::Relaxed).to_string()),
    );
    // The direct path (spec §14.5): as the replicas reported.
    family(
        "hubwire_direct_calls_total",
        "counter",
        "Calls the replica answered over direct connections, as it reported.",
        per_replica(&|r| r.direct.calls.load(Ordering::Relaxed).to_string()),
    );
    family(
        "hubwire_direct_errors_total",
        "counter",
        "Of those, answered with another code than ok.",
        per_replica(&|r| r.direct.errors.load(Ordering::Relaxed).to_string()),
    );
    let mut by_code = Vec::new();
    for p in &reg.providers {
        for r in &p.replicas {
            for (code, n) in r.metrics.by_code() {
                by_code.push((format!("provider=\"{}\",replica=\"{}\",code=\"{}\"", p.config.name, r.index, code.name()), n.to_string()));
            }
        }
    }
    family("hubwire_calls_total", "counter", "Calls answered, by status code.", by_code);
    let mut refused = Vec::new();
    for p in &reg.providers {
        for (code, n) in p.refusals.by_code() {
            refused.push((format!("provider=\"{}\",code=\"{}\"", p.config.name, code.name()), n.to_string()));
        }
    }
    family(
        "hubwire_calls_refused_total",
        "counter",
        "Calls refused before reaching a replica (queue full, none ready, provider failed), by status code.",
        refused,
    );
    family(
        "hubwire_calls_queued",
        "gauge",
        "Calls waiting for a slot under the provider's max_in_flight.",
        reg.providers.iter().map(|p| (format!("provider=\"{}\"", p.config.name), p.queued.load(Ordering::Relaxed).to_string())).collect(),
    );
    let _ = writeln!(
        o,
        "# HELP hubwire_call_duration_seconds Time from routing a call to its answer.\n# TYPE hubwire_call_duration_seconds summary"
    );
    for p in &reg.providers {
        let mut h = Histogram::default();
        let (mut count, mut sum) = (0, 0.0);
        for r in &p.replicas {
            h.merge(&r.metrics.snapshot());
            count += r.metrics.calls();
            sum += r.metrics.latency_sum().as_secs_f64();
        }
        let name = &p.config.name;
        for q in [0.5, 0.99] {
            if let Some(d) = h.quantile(q) {
                let _ = writeln!(o, "hubwire_call_duration_seconds{{provider=\"{name}\",quantile=\"{q}\"}} {}", d.as_secs_f64());
            }
        }
        let _ = writeln!(o, "hubwire_call_duration_seconds_sum{{provider=\"{name}\"}} {sum}");
        let _ = writeln!(o, "hubwire_call_duration_seconds_count{{provider=\"{name}\"}} {count}");
    }
    o
}
