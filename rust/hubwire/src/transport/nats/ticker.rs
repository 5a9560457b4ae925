//! Liveness for every link of the process (`spec/PROTOCOL.md` §13.5): one
//! thread wakes every [`TICK_MS`], sends a HEARTBEAT on each link that has
//! sent nothing for [`HEARTBEAT_MS`] and breaks each link that has
//! received nothing for [`DEAD_AFTER_MS`]. A thread, not a task: tests and
//! programs run several tokio runtimes, and a heartbeat needs none (it is
//! sent only if the NATS client takes it at once).
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
/// `DEAD_AFTER_MS + TICK_MS` (650 ms).
pub const TICK_MS: u64 = 50;

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
        let mut dead = Vec::new();
        for link in &links {
            if !link.is_live() {
                dead.push(Arc::as_ptr(link) as *const ());
                continue;
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
