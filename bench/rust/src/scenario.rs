//! Scenario files (`bench/scenarios/*.toml`): what to measure, as data that
//! every language's harness can read. `payloads.toml` names the payloads;
//! every other file is one scenario, expanded here into jobs: the cross
//! product of its systems, transports, payloads, encodings and windows (or
//! client counts), less the combinations a system cannot run.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::{Encoding, Job, Mode, System, Transport};
use crate::payload::{Payload, PayloadSpec};

/// How calls are issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModeKind {
    /// One call in flight; latency percentiles.
    Sequential,
    /// A window of calls in flight on one connection; calls/s and MB/s.
    Pipelined,
    /// N clients, each with its own connection and one call in flight.
    Parallel,
    /// One call in flight, each on a new connection (connect + HELLO,
    /// the upgrade on `shm`, the call, close); latency percentiles.
    Connect,
}

/// One scenario file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// The heading of its table.
    pub title: String,
    /// How calls are issued.
    pub mode: ModeKind,
    /// Payload names from `payloads.toml`.
    pub payloads: Vec<String>,
    /// Encodings to try each payload in.
    pub encodings: Vec<Encoding>,
    /// Transports to try.
    pub transports: Vec<Transport>,
    /// Systems (hubwire, floors, peers) to measure.
    pub systems: Vec<String>,
    /// Calls in flight, for `pipelined`.
    #[serde(default)]
    pub windows: Vec<usize>,
    /// Client counts, for `parallel`.
    #[serde(default)]
    pub clients: Vec<usize>,
}

/// A scenario, loaded: its name is the file's stem.
#[derive(Debug)]
pub struct Scenario {
    /// File stem, e.g. `rtt`.
    pub name: String,
    /// The file's contents.
    pub file: ScenarioFile,
}

/// The payloads of `payloads.toml`, by name.
pub type Payloads = BTreeMap<String, Arc<Payload>>;

/// Loads `payloads.toml` and every other `*.toml` in `dir`, sorted by name.
pub fn load(dir: &Path) -> io::Result<(Vec<Scenario>, Payloads)> {
    let bad = |p: &Path, e: &dyn std::fmt::Display| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", p.display()));
    let ppath = dir.join("payloads.toml");
    let text = std::fs::read_to_string(&ppath).map_err(|e| bad(&ppath, &e))?;
    let specs: BTreeMap<String, PayloadSpec> = toml::from_str(&text).map_err(|e| bad(&ppath, &e))?;
    let payloads = specs
        .into_iter()
        .map(|(name, spec)| {
            let p = Payload::build(&name, &spec).map_err(|e| bad(&ppath, &e))?;
            Ok((name, Arc::new(p)))
        })
        .collect::<io::Result<BTreeMap<_, _>>>()?;
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.file_name().is_some_and(|n| n != "payloads.toml"))
        .collect();
    paths.sort();
    let mut scenarios = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path)?;
        let file: ScenarioFile = toml::from_str(&text).map_err(|e| bad(&path, &e))?;
        for p in &file.payloads {
            if !payloads.contains_key(p) {
                return Err(bad(&path, &format!("unknown payload {p:?}")));
            }
        }
        for s in &file.systems {
            if System::parse(s).is_none() {
                return Err(bad(&path, &format!("unknown system {s:?} (known: {})", System::names().join(", "))));
            }
        }
        let needs = match file.mode {
            ModeKind::Pipelined => file.windows.is_empty().then_some("windows"),
            ModeKind::Parallel => file.clients.is_empty().then_some("clients"),
            ModeKind::Sequential | ModeKind::Connect => None,
        };
        if let Some(key) = needs {
            return Err(bad(&path, &format!("mode {:?} needs `{key}`", file.mode)));
        }
        let name = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
        scenarios.push(Scenario { name, file });
    }
    Ok((scenarios, payloads))
}

/// Which jobs to keep: substrings each job's fields must contain (empty: all).
#[derive(Default, Clone)]
pub struct Filter {
    /// Scenario names.
    pub scenarios: Vec<String>,
    /// System names.
    pub systems: Vec<String>,
    /// Transport names.
    pub transports: Vec<String>,
    /// Payload names.
    pub payloads: Vec<String>,
}

fn keep(wanted: &[String], name: &str) -> bool {
    wanted.is_empty() || wanted.iter().any(|w| name.contains(w.as_str()))
}

/// Expands the scenarios into jobs, in file order, skipping combinations a
/// system does not run (`System::supports`) and those `filter` drops.
pub fn expand(scenarios: &[Scenario], payloads: &BTreeMap<String, Arc<Payload>>, filter: &Filter) -> Vec<Job> {
    let mut jobs = Vec::new();
    for sc in scenarios.iter().filter(|s| keep(&filter.scenarios, &s.name)) {
        let f = &sc.file;
        let modes: Vec<Mode> = match f.mode {
            ModeKind::Sequential => vec![Mode::Sequential],
            ModeKind::Connect => vec![Mode::Connect],
            ModeKind::Pipelined => f.windows.iter().map(|&window| Mode::Pipelined { window }).collect(),
            ModeKind::Parallel => f.clients.iter().map(|&clients| Mode::Parallel { clients }).collect(),
        };
        for pname in f.payloads.iter().filter(|p| keep(&filter.payloads, p)) {
            let payload = &payloads[pname];
            for &encoding in &f.encodings {
                for &mode in &modes {
                    for &transport in f.transports.iter().filter(|t| keep(&filter.transports, t.name())) {
                        for system in f.systems.iter().filter_map(|s| System::parse(s)) {
                            if keep(&filter.systems, system.name()) && system.supports(transport, encoding, mode, payload) {
                                jobs.push(Job { scenario: sc.name.clone(), system, transport, payload: payload.clone(), encoding, mode });
                            }
                        }
                    }
                }
            }
        }
    }
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped() -> (Vec<Scenario>, Payloads) {
        load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")).expect("the shipped scenarios load")
    }

    #[test]
    fn every_shipped_scenario_and_system_gives_rows() {
        let (scenarios, payloads) = shipped();
        let jobs = expand(&scenarios, &payloads, &Filter::default());
        for sc in &scenarios {
            for system in &sc.file.systems {
                assert!(jobs.iter().any(|j| j.scenario == sc.name && j.system.name() == system), "{}: {system} has no row", sc.name);
            }
        }
        let mut keys: Vec<String> = jobs.iter().map(Job::key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), jobs.len(), "row keys are unique");
    }

    #[test]
    fn filters_keep_only_matching_rows() {
        let (scenarios, payloads) = shipped();
        let filter =
            Filter { scenarios: vec!["rtt".into()], systems: vec!["floor".into()], transports: vec!["unix".into()], payloads: vec![] };
        let jobs = expand(&scenarios, &payloads, &filter);
        assert!(!jobs.is_empty());
        assert!(jobs.iter().all(|j| j.scenario.contains("rtt") && j.system.name().starts_with("floor") && j.transport == Transport::Unix));
    }
}
