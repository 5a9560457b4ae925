//! Shared memory between two processes, reached by upgrading a Unix
//! socket (`spec/PROTOCOL.md` §11.4).
//!
//! | file | what |
//! |---|---|
//! | `segment` | the sealed memfd: layout, header, checks, mapping |
//! | `link` | one side's two rings and four eventfds: copy in, copy out, park |
//! | `ladder` | [`Ladder`]: the connection's transport, on the socket until each direction switches to its ring |
//!
//! The engine's half of the upgrade (offer, answer, markers) is in
//! `engine/upgrade.rs`.

pub mod ladder;
pub mod link;
pub mod segment;

use std::sync::atomic::{AtomicUsize, Ordering};

pub use ladder::Ladder;

/// Connections of this process on shared memory now, for the cap.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// One upgraded connection's place under the process's cap (the hub's
/// `shm_max_connections`). Released on drop.
pub struct Budget(bool);

impl Budget {
    /// A place if fewer than `max` connections are upgraded now.
    pub fn take(max: usize) -> Option<Budget> {
        LIVE.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1)).ok().map(|_| Budget(true))
    }

    /// A place outside the count (tests).
    pub fn unlimited() -> Budget {
        Budget(false)
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        if self.0 {
            LIVE.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// How many connections of this process are on shared memory now.
pub fn live() -> usize {
    LIVE.load(Ordering::Acquire)
}
