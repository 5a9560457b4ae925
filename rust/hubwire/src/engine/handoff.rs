//! What the engine hands up of the direct path (`spec/PROTOCOL.md` §14):
//! a DIRECT or ACCEPT frame received, with its descriptor, and the hook it
//! goes to. Types only, so that the connection's state can hold the hook
//! (`direct.rs` does the sending and receiving).

use std::os::fd::OwnedFd;
use std::sync::Arc;

use hubwire_frame::{AcceptBody, DirectOffer};

/// The most descriptors a connection keeps received and not yet taken
/// (§14.2); one more is closed.
pub const FD_QUEUE: usize = 8;

/// A DIRECT or ACCEPT frame as received, with its descriptor.
pub enum Handoff {
    /// A direct connection offered to a client; `fd` with `via: fd`.
    Direct {
        /// The frame's body.
        offer: DirectOffer,
        /// The client's end of the socketpair, when the frame carried one.
        fd: Option<OwnedFd>,
    },
    /// A connection for a replica to serve.
    Accept {
        /// The frame's body.
        body: AcceptBody,
        /// The connection.
        fd: OwnedFd,
    },
}

/// Where a connection's DIRECT and ACCEPT frames go. Runs on the reader:
/// it must not wait (it spawns what takes time).
pub type DirectHook = Arc<dyn Fn(Handoff) + Send + Sync>;
