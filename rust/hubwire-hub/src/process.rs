//! What the hub does to itself as a process: raise its descriptor limit,
//! become a child subreaper, and reap and end the orphaned descendants of
//! its providers. Linux only, as the hub is.
//!
//! A provider may start processes that leave its process group (a
//! `setsid` daemon, a double fork). When their parent ends, the kernel
//! reparents them to the nearest subreaper ancestor — the hub, after
//! [`become_subreaper`] — instead of init, so the hub can still find them
//! (their parent pid is the hub's) and end them when it stops.
//!
//! Reaping: tokio waits for each provider it spawned by pid, so the hub
//! must never `waitpid(-1)` (it would steal a provider's exit status).
//! [`reaper`] instead reaps, by pid, only zombies whose parent is the hub
//! and that are not providers: the providers' pids are registered under
//! the same lock the reaper scans under, from before they can exit.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns what was
/// done, for the log.
pub fn raise_nofile() -> String {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return format!("cannot read the descriptor limit: {}", std::io::Error::last_os_error());
        }
        if r.rlim_cur >= r.rlim_max {
            return format!("descriptor limit {} (already the hard limit)", r.rlim_cur);
        }
        let old = r.rlim_cur;
        r.rlim_cur = r.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
            return format!("descriptor limit {old}: cannot raise it to {}: {}", r.rlim_max, std::io::Error::last_os_error());
        }
        format!("descriptor limit raised from {old} to {}", r.rlim_max)
    }
}

/// Makes the hub a child subreaper (`PR_SET_CHILD_SUBREAPER`): orphaned
/// descendants are reparented to it.
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The hub's own direct children that are providers (tokio reaps those).
static PROVIDERS: Mutex<Option<HashSet<u32>>> = Mutex::new(None);

/// Runs `spawn` (which forks a provider) and registers the pid it returns
/// as a provider, both under the reaper's lock, so the reaper never takes
/// a provider for an orphan.
pub fn spawn_provider<T>(spawn: impl FnOnce() -> std::io::Result<(T, Option<u32>)>) -> std::io::Result<T> {
    let mut providers = PROVIDERS.lock().unwrap();
    let (t, pid) = spawn()?;
    if let Some(pid) = pid {
        providers.get_or_insert_with(HashSet::new).insert(pid);
    }
    Ok(t)
}

/// Forgets a provider once tokio has reaped it.
pub fn provider_reaped(pid: u32) {
    if let Some(set) = PROVIDERS.lock().unwrap().as_mut() {
        set.remove(&pid);
    }
}

/// Reaps the zombies among the hub's children that are not providers;
/// returns how many.
pub fn reap_orphans() -> usize {
    let providers = PROVIDERS.lock().unwrap();
    let mut reaped = 0;
    for p in children() {
        if p.zombie && !providers.as_ref().is_some_and(|s| s.contains(&p.pid)) {
            // SAFETY: waitpid on one pid that is our child and a zombie.
            if unsafe { libc::waitpid(p.pid as i32, std::ptr::null_mut(), libc::WNOHANG) } > 0 {
                reaped += 1;
            }
        }
    }
    reaped
}

/// How often the reaper looks without a SIGCHLD: a scan reads every
/// `/proc/PID/stat`, so not often; SIGCHLD (coalesced, never lost: one
/// arrives after the last change) does the real work.
const REAP_EVERY: Duration = Duration::from_secs(10);

/// Reaps orphans whenever a child changes state (SIGCHLD), and every
/// `REAP_EVERY` (10 s), until the task is dropped.
pub async fn reaper() {
    let mut sigchld = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child()).ok();
    loop {
        match sigchld.as_mut() {
            Some(s) => {
                let _ = tokio::time::timeout(REAP_EVERY, s.recv()).await;
            }
            None => tokio::time::sleep(REAP_EVERY).await,
        }
        reap_orphans();
    }
}

/// Ends every process the hub still has beneath it once its providers are
/// stopped (orphans that left their provider's group): SIGTERM, SIGKILL
/// after `grace`, and reaps them. Returns how many there were.
pub async fn end_orphans(grace: Duration) -> usize {
    let first = descendants(std::process::id());
    if first.is_empty() {
        return 0;
    }
    signal_all(&first, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && !descendants(std::process::id()).is_empty() {
        reap_orphans();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // What is left, and what was started meanwhile, gets SIGKILL; a
    // killed process's own children are reparented to us and killed in
    // the next round.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left = descendants(std::process::id());
        reap_orphans();
        if left.is_empty() || Instant::now() > deadline {
            break;
        }
        signal_all(&left, libc::SIGKILL);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.len()
}

/// The live (not zombie) processes beneath `root`, from `/proc`.
pub fn descendants(root: u32) -> Vec<u32> {
    let all = processes();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in all.iter().filter(|p| p.ppid == parent) {
            if !p.zombie {
                out.push(p.pid);
            }
            frontier.push(p.pid);
        }
    }
    out
}

/// Sends `sig` to each pid.
pub fn signal_all(pids: &[u32], sig: i32) {
    for &pid in pids {
        // SAFETY: kill(2) on a pid read from /proc just now; if it has
        // ended meanwhile, ESRCH is harmless.
        unsafe { libc::kill(pid as i32, sig) };
    }
}

struct Proc {
    pid: u32,
    ppid: u32,
    zombie: bool,
}

fn children() -> Vec<Proc> {
    let me = std::process::id();
    processes().into_iter().filter(|p| p.ppid == me).collect()
}

/// Every process, from `/proc/PID/stat`: "PID (COMM) STATE PPID ...",
/// where COMM may hold spaces and parentheses, so the fields are counted
/// after the last ')'.
fn processes() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let mut f = stat.rsplit_once(')')?.1.split_whitespace();
        let state = f.next()?;
        let ppid = f.next()?.parse().ok()?;
        Some(Proc { pid, ppid, zombie: state == "Z" })
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_children_are_found_among_our_descendants() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let found = descendants(std::process::id()).contains(&child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(found);
    }

    #[test]
    fn the_descriptor_limit_ends_at_the_hard_limit() {
        let said = raise_nofile();
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit on a struct we own.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
        assert_eq!(r.rlim_cur, r.rlim_max, "{said}");
    }
}
