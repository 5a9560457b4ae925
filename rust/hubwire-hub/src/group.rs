//! A provider's process group: the child leads its own group (see
//! `supervise::spawn`), so that what it starts can be signalled with it
//! and waited for when it stops. Linux only, as the hub is.

use std::time::{Duration, Instant};

/// Sends `sig` to every process of the group `pgid`.
pub(crate) fn signal(pgid: u32, sig: i32) {
    // SAFETY: kill(2) with a negative pid signals that group. The group id
    // stays ours while any member lives (the kernel does not reuse an id
    // that is still a group's), and ESRCH when none does is harmless.
    unsafe { libc::kill(-(pgid as i32), sig) };
}

/// Waits until no process of the group is alive, polling, for up to
/// `within`; false if some still were then.
///
/// SIGKILL is asynchronous: kill(2) returns before its target is gone, and
/// a grandchild the hub does not reap (its parent, the provider, is) may
/// still be running when the hub would exit. Zombies count as gone: they
/// run nothing, and whoever inherited them reaps them.
pub(crate) async fn wait_empty(pgid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if !has_live_member(pgid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Whether a process other than a zombie has process group `pgid`, from
/// `/proc/PID/stat`: "PID (COMM) STATE PPID PGRP ...", where COMM may hold
/// spaces and parentheses, so the fields are counted after the last ')'.
fn has_live_member(pgid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else { return false };
    dir.flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))).any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { return false };
        let Some((_, rest)) = stat.rsplit_once(')') else { return false };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let pgrp = fields.nth(1).and_then(|g| g.parse::<u32>().ok());
        pgrp == Some(pgid) && !matches!(state, "Z" | "X" | "x")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_killed_group_is_waited_for_and_a_live_one_is_reported() {
        use std::os::unix::process::CommandExt;
        // A shell that leads its own group and starts a sleeper in it.
        let mut leader = std::process::Command::new("sh").args(["-c", "sleep 30 & wait"]).process_group(0).spawn().unwrap();
        let pgid = leader.id();
        let t0 = Instant::now();
        while !has_live_member(pgid) {
            assert!(t0.elapsed() < Duration::from_secs(5), "the group never appeared in /proc");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!wait_empty(pgid, Duration::from_millis(50)).await, "a live group was reported empty");
        signal(pgid, libc::SIGKILL);
        leader.wait().unwrap();
        assert!(wait_empty(pgid, Duration::from_secs(5)).await, "the killed group still had live members");
    }
}
