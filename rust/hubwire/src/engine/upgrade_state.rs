//! The state of one connection's upgrade to shared memory (§11.4), kept
//! on its `Core`; `upgrade.rs` moves it along. Apart from the logic so that
//! the connection's state does not depend on the upgrade's code.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::transport::shm::link::Link;
use crate::transport::shm::Ladder;

/// Where one connection's upgrade stands.
pub(crate) enum Phase {
    /// Both sides can; nothing offered yet.
    Idle,
    /// Dialer: UPGRADE sent, its link ready for the answer.
    Offered(Link),
    /// Acceptor: UPGRADED `ok` sent (or being sent); the dialer's marker
    /// is still to come.
    Accepted,
    /// Both directions on the ring, or refused: nothing more may come.
    Settled,
}

/// One connection's upgrade.
pub(crate) struct Upgrade {
    pub(crate) ladder: Arc<Ladder>,
    pub(crate) phase: Mutex<Phase>,
    pub(crate) ring: usize,
    pub(crate) max_connections: usize,
    /// `Some(true)` once both directions are on shared memory,
    /// `Some(false)` once the connection will stay on the socket.
    pub(crate) settled: watch::Sender<Option<bool>>,
    /// Descriptors kept once the offer's are taken: those of the direct
    /// path's frames (§14.2), which may still come, over the ring too
    /// (§11.4.3); 0 when this connection takes none.
    pub(crate) fd_queue: usize,
}
