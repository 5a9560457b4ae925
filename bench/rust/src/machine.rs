//! The machine a run happened on, and whether it was idle.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Facts about the machine and the software, stored with the results.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Machine {
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// CPUs this process may use.
    pub cpus: usize,
    /// Kernel release.
    pub kernel: String,
    /// `rustc --version` at build time.
    pub rustc: String,
    /// `go version`, if Go is installed.
    pub go: String,
    /// The hubwire-bench (and hubwire) version.
    pub hubwire: String,
    /// Peer library versions, from the lockfile at build time.
    pub libraries: String,
    /// The git commit of the work tree, if known.
    pub commit: String,
    /// Load average (1 min) before the run.
    pub load_before: f64,
    /// Load average (1 min) after the run.
    pub load_after: f64,
    /// CPU the rest of the machine used during the run, in % of one CPU.
    pub foreign_cpu_pct: f64,
    /// Other processes that were busy when the run started (name, % of a CPU).
    pub busy_at_start: Vec<(String, f64)>,
}

fn first_line(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_default()
}

/// The 1-minute load average.
pub fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg").ok().and_then(|s| s.split_whitespace().next()?.parse().ok()).unwrap_or(0.0)
}

impl Machine {
    /// Gathers what can be known before the run.
    pub fn probe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name").map(|r| r.trim_start_matches([' ', '\t', ':']).to_string()))
            .unwrap_or_default();
        Machine {
            cpu_model,
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string(),
            rustc: env!("BENCH_RUSTC_VERSION").to_string(),
            go: first_line("go", &["version"]),
            hubwire: env!("CARGO_PKG_VERSION").to_string(),
            libraries: env!("BENCH_LIBRARY_VERSIONS").to_string(),
            commit: first_line("git", &["rev-parse", "--short", "HEAD"]),
            load_before: load1(),
            ..Machine::default()
        }
    }
}

fn process_times() -> HashMap<u32, (String, u64)> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // Fields 14 and 15 (utime, stime) are at 11 and 12 after the name.
        let ticks = f.get(11).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0) + f.get(12).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        out.insert(pid, (name, ticks));
    }
    out
}

/// Processes other than this one that used more than 5% of a CPU over
/// `over`, busiest first.
pub fn busy_processes(over: Duration) -> Vec<(String, f64)> {
    let a = process_times();
    std::thread::sleep(over);
    let b = process_times();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let me = std::process::id();
    let mut busy: Vec<(String, f64)> = b
        .iter()
        .filter(|(pid, _)| **pid != me)
        .filter_map(|(pid, (name, t))| {
            let before = a.get(pid).map(|x| x.1).unwrap_or(0);
            let pct = t.saturating_sub(before) as f64 / hz / over.as_secs_f64() * 100.0;
            (pct > 5.0).then(|| (format!("{name} ({pid})"), (pct * 10.0).round() / 10.0))
        })
        .collect();
    busy.sort_by(|x, y| y.1.total_cmp(&x.1));
    busy
}
