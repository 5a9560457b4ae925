//! Shared memory between two processes, reached by upgrading a Unix
//! socket (`spec/PROTOCOL.md` §11.4).
//!
//! | file | what |
//! |---|---|
//! | `segment` | the sealed memfd: layout, header, checks, mapping |
//! | `link` | one side's two rings and four eventfds: copy in, copy out, park |
//! | `copy` | copying into a ring: non-temporal stores for large pieces |
//! | `release` | giving a ring's idle pages back, and who owns them meanwhile |
//! | `ladder` | [`Ladder`]: the connection's transport, on the socket until each direction switches to its ring |
//!
//! The engine's half of the upgrade (offer, answer, markers) is in
//! `engine/upgrade.rs`.

mod copy;
pub mod ladder;
pub mod link;
pub mod release;
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

/// Whether this process may share memory with the process at the other
/// end of a socket whose `SO_PEERCRED` uid is `peer_uid`
/// ([`Transport::peer_uid`](crate::transport::Transport::peer_uid)): one
/// of its own user, or root (§11.4). Whoever holds a segment's eventfds can
/// make the other side's signals block (clear `O_NONBLOCK` on them, fill
/// their counters); a process of our user could stop us by other means
/// anyway, one of another user (let in by a socket's mode) must not.
/// Unknown: no.
pub fn may_share_with(peer_uid: Option<u32>) -> bool {
    // SAFETY: geteuid cannot fail.
    same_user(peer_uid, unsafe { libc::geteuid() })
}

fn same_user(peer: Option<u32>, own: u32) -> bool {
    matches!(peer, Some(uid) if uid == own || uid == 0)
}

/// How many connections of this process are on shared memory now.
pub fn live() -> usize {
    LIVE.load(Ordering::Acquire)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory is shared with a peer of our own user or root only; an
    /// unknown peer (no `SO_PEERCRED`) gets none.
    #[test]
    fn only_a_peer_of_our_user_or_root_may_share_memory() {
        assert!(same_user(Some(1000), 1000));
        assert!(same_user(Some(0), 1000), "root could stop us anyway");
        assert!(same_user(Some(0), 0));
        assert!(!same_user(Some(1001), 1000));
        assert!(!same_user(Some(1000), 0), "root's connections stay on the socket for other users");
        assert!(!same_user(None, 1000));
    }
}
