//! CPU time: of the bench process, of its peers, and of the whole machine.
//!
//! A row's CPU time per call is everything both sides burned while it was
//! measured: this process (all threads, even exited ones: `getrusage`), its
//! reaped children (processes spawned per call), and the live peer
//! processes (every thread's `/proc/<pid>/task/*/schedstat`, in ns).

use std::time::Duration;

fn rusage(who: libc::c_int) -> Duration {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time (user + system) of one live process, all its threads.
pub fn process(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    let ns: u64 = tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        .sum();
    Duration::from_nanos(ns)
}

/// CPU time of this process, its reaped children, and the live `peers`.
pub fn total(peers: &[u32]) -> Duration {
    rusage(libc::RUSAGE_SELF) + rusage(libc::RUSAGE_CHILDREN) + peers.iter().map(|&p| process(p)).sum::<Duration>()
}

/// The live processes whose parent is `pid` (a hub's providers).
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok()))
                == Some(pid)
        })
        .collect()
}

/// Busy CPU time of the whole machine so far (all CPUs), from /proc/stat.
pub fn machine_busy() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let v: Vec<u64> = stat.lines().next()?.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is in user).
    let busy: u64 = v.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, x)| x).sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_nanos(busy * 1_000_000_000 / hz))
}
