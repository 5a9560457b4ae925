//! Liveness for every link of the process (`spec/PROTOCOL.md` §13.5): one
//! thread wakes every [`TICK_MS`], sends a HEARTBEAT on each link that has
//! sent nothing for [`HEARTBEAT_MS`] and breaks each link that has
//! received nothing for [`DEAD_AFTER_MS`], not counting the time this
//! process itself was stalled (a tick past [`STALL_AFTER_MS`]). A
//! thread, not a task: tests and programs run several tokio runtimes, and
//! a heartbeat needs none (it is sent only if the NATS client takes it at
//! once).
//! The cost is one pass over the live links per tick and nothing per call.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// A link sends a HEARTBEAT when it has sent nothing for this long.
pub const HEARTBEAT_MS: u64 = 200;
/// A link that has received nothing for this long is broken: two whole
/// heartbeat gaps (`HEARTBEAT_MS + TICK_MS`) and 100 ms of slack, so one
/// late heartbeat never breaks a link, and a dead peer is noticed well
/// within 1 s.
pub const DEAD_AFTER_MS: u64 = 600;
/// How often the thread looks: heartbeats go out at most
/// `HEARTBEAT_MS + TICK_MS` (250 ms) apart, silence is noticed within
/// `DEAD_AFTER_MS + TICK_MS` (650 ms) while the thread runs on time (if
/// its ticks come late, after at most six of them: each counts at least
/// `STALL_AFTER_MS` of silence).
pub const TICK_MS: u64 = 50;
/// The gap between two ticks beyond which the rest is this process's own
/// stall (the whole of it descheduled, stopped, or its machine paused):
/// two tick periods. The excess is forgiven on every link (§13.5: a side
/// whose own timer runs late SHOULD NOT count that as the peer's silence;
/// what the peer sent meanwhile still waits unread). The TypeScript SDK
/// counts it the same way.
pub const STALL_AFTER_MS: u64 = 2 * TICK_MS;

/// `last` (a link's last receipt) moved `stall` later, never past `now`
/// (nor back).
pub(super) fn forgiven(last: u64, stall: u64, now: u64) -> u64 {
    last.saturating_add(stall).min(now.max(last))
}

/// How much of the gap between two ticks was this process's own stall.
fn own_stall(gap: u64) -> u64 {
    gap.saturating_sub(STALL_AFTER_MS)
}

/// What the ticker needs of a link (implemented by the link, so that this
/// file depends on nothing of it).
pub(super) trait Watched: Send + Sync {
    /// Milliseconds on [`now_ms`]'s clock of the last message received.
    fn last_recv(&self) -> u64;
    /// … and of the last message sent.
    fn last_sent(&self) -> u64;
    /// Sends a HEARTBEAT if the client takes it now.
    fn heartbeat(&self);
    /// Breaks the link: the peer has been silent too long.
    fn mark_silent(&self);
    /// Moves the last receipt `ms` later (at most to `now`): time this
    /// process spent stalled, which is not the peer's silence.
    fn forgive(&self, ms: u64, now: u64);
    /// Whether the link still runs (the ticker forgets it otherwise).
    fn is_live(&self) -> bool;
}

type Links = Vec<Weak<dyn Watched>>;

static LINKS: Mutex<Links> = Mutex::new(Vec::new());
static EPOCH: OnceLock<Instant> = OnceLock::new();
static THREAD: OnceLock<()> = OnceLock::new();

/// Milliseconds since the first link of the process (the ticker's clock).
pub fn now_ms() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Watches `link` until it is closed or dropped.
pub(super) fn register(link: Weak<dyn Watched>) {
    LINKS.lock().unwrap().push(link);
    THREAD.get_or_init(|| {
        std::thread::Builder::new().name("hubwire-nats-ticker".into()).spawn(run).expect("spawn the NATS link ticker");
    });
}

fn run() {
    let mut last_tick = now_ms();
    loop {
        std::thread::sleep(Duration::from_millis(TICK_MS));
        // Take the links out so that no lock is held while they are
        // visited (a heartbeat locks the link).
        let links: Vec<Arc<dyn Watched>> = {
            let mut all = LINKS.lock().unwrap();
            all.retain(|w| w.strong_count() > 0);
            all.iter().filter_map(Weak::upgrade).collect()
        };
        let now = now_ms();
        let stall = own_stall(now.saturating_sub(last_tick));
        last_tick = now;
        let mut dead = Vec::new();
        for link in &links {
            if !link.is_live() {
                dead.push(Arc::as_ptr(link) as *const ());
                continue;
            }
            if stall > 0 {
                link.forgive(stall, now);
            }
            if now.saturating_sub(link.last_recv()) >= DEAD_AFTER_MS {
                link.mark_silent();
            }
            if now.saturating_sub(link.last_sent()) >= HEARTBEAT_MS {
                link.heartbeat();
            }
        }
        if !dead.is_empty() {
            LINKS.lock().unwrap().retain(|w| !dead.contains(&(w.as_ptr() as *const ())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gap_past_two_ticks_counts_as_a_stall() {
        assert_eq!(own_stall(0), 0);
        assert_eq!(own_stall(TICK_MS), 0);
        assert_eq!(own_stall(2 * TICK_MS), 0, "ordinary lateness");
        assert_eq!(own_stall(2 * TICK_MS + 40), 40);
        assert_eq!(own_stall(2 * TICK_MS + 2000), 2000, "a process stopped for 2 s");
    }

    #[test]
    fn a_stall_is_forgiven_up_to_now() {
        // Last heard at 1000, stopped from ~1050 to 2050: the silence that
        // counts is the 50 ms before the stall, not 1050.
        assert_eq!(forgiven(1000, 1000, 2050), 2000);
        assert!(2050 - forgiven(1000, 1000, 2050) < DEAD_AFTER_MS);
        // Never past now, never backwards.
        assert_eq!(forgiven(2000, 1000, 2050), 2050);
        assert_eq!(forgiven(2100, 1000, 2050), 2100);
    }
}
