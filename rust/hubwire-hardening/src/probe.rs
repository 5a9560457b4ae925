//! Watches the hub under test from outside: its resident memory (VmRSS of
//! `/proc/<pid>/status`) and open descriptors (entries of `/proc/<pid>/fd`),
//! sampled every 20 ms on a thread of its own, so that a peak between two
//! case boundaries is not missed.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One reading of a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// Resident memory, KiB.
    pub rss_kib: u64,
    /// Open file descriptors.
    pub fds: u64,
}

/// Reads a process once; `None` once it is gone.
pub fn read(pid: u32) -> Option<Reading> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kib = status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some(Reading { rss_kib, fds })
}

/// The sampler: the pid it watches can change (a case with a hub of its
/// own watches that one), and it keeps the peak since the last `watch`.
#[derive(Clone)]
pub struct Probe {
    pid: Arc<AtomicU32>,
    peak: Arc<Mutex<Reading>>,
    last: Arc<Mutex<Reading>>,
    base: Arc<Mutex<Reading>>,
}

impl Probe {
    /// Starts sampling `pid`.
    pub fn start(pid: u32) -> Probe {
        let probe = Probe { pid: Arc::new(AtomicU32::new(pid)), peak: Arc::default(), last: Arc::default(), base: Arc::default() };
        let p = probe.clone();
        std::thread::spawn(move || {
            // Lives as long as the suite: one thread, 50 reads a second.
            loop {
                let pid = p.pid.load(Ordering::Relaxed);
                if let Some(r) = read(pid) {
                    let mut peak = p.peak.lock().unwrap();
                    // A reading of the process watched before a `watch`
                    // that happened meanwhile belongs to no window.
                    if p.pid.load(Ordering::Relaxed) == pid {
                        *p.last.lock().unwrap() = r;
                        peak.rss_kib = peak.rss_kib.max(r.rss_kib);
                        peak.fds = peak.fds.max(r.fds);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        probe
    }

    /// Watches `pid` from now on, with the peak reset to its reading now.
    pub fn watch(&self, pid: u32) -> Reading {
        // The pid first, then the reset under the lock the sampler holds
        // while it records: no reading of the old process survives it.
        self.pid.store(pid, Ordering::Relaxed);
        let now = read(pid).unwrap_or_default();
        let mut peak = self.peak.lock().unwrap();
        *peak = now;
        *self.last.lock().unwrap() = now;
        *self.base.lock().unwrap() = now;
        now
    }

    /// The reading taken by the last [`Probe::watch`]: a case's "before",
    /// of whichever hub it ended up watching.
    pub fn base(&self) -> Reading {
        *self.base.lock().unwrap()
    }

    /// The pid watched now.
    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::Relaxed)
    }

    /// The current process's reading now.
    pub fn now(&self) -> Reading {
        read(self.pid()).unwrap_or_default()
    }

    /// The peak since the last [`Probe::watch`], including now.
    pub fn peak(&self) -> Reading {
        let now = self.now();
        let peak = *self.peak.lock().unwrap();
        Reading { rss_kib: peak.rss_kib.max(now.rss_kib), fds: peak.fds.max(now.fds) }
    }

    /// The watched process now, or its last reading if it is gone (a
    /// case's own hub, stopped at the end of the case).
    pub fn last(&self) -> Reading {
        read(self.pid()).unwrap_or_else(|| *self.last.lock().unwrap())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_live_process_and_not_a_gone_one() {
        let me = read(std::process::id()).expect("our own /proc entry");
        assert!(me.rss_kib > 0 && me.fds >= 3, "{me:?}");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(read(pid), None);
    }
}
