//! How a connection presents itself and what limits it sets: the fields of
//! our HELLO (`spec/PROTOCOL.md` §4), how the reader waits, and the
//! [`Service`] whose methods we offer, if any.

use std::sync::Arc;
use std::time::Duration;

use hubwire_frame::{Hello, PeerInfo, Token, DEFAULT_MAX_FRAME};

use super::handoff::DirectHook;
use super::serve::Service;
use super::wait::{SpinGate, WaitMode};

/// [`ConnectionOptions::write_queue`] by default: 4 MiB.
pub const DEFAULT_WRITE_QUEUE: usize = 4 * 1024 * 1024;

/// Makes a client connection's direct routes (opaque to the engine and to
/// `connection.rs`: the API's `direct.rs` owns them) and the hook its
/// DIRECT frames go to.
pub type RouterFactory = fn(&ConnectionOptions) -> (Arc<dyn std::any::Any + Send + Sync>, DirectHook);

/// Options for opening a connection ([`Connection::dial`](crate::Connection::dial),
/// [`Connection::accept`](crate::Connection::accept)).
#[derive(Clone)]
pub struct ConnectionOptions {
    /// Our name in the peer's logs and listings.
    pub name: String,
    /// How the reader waits for bytes.
    pub wait: WaitMode,
    /// In low-latency mode, spin only while this count of calls in flight
    /// says a caller is alone ([`ConnectionOptions::spin_gate`]).
    pub(crate) spin_gate: Option<SpinGate>,
    /// The largest frame body we accept.
    pub max_frame: u32,
    /// Initial credit we grant per incoming stream.
    pub window: u32,
    /// Calls we serve at once before answering `resource_exhausted`.
    pub max_calls: u32,
    /// How long to wait for the peer's HELLO.
    pub handshake_timeout: Duration,
    /// Frame bytes queued for the peer (not yet taken by its socket) above
    /// which we stop reading its new calls and PINGs: a peer that sends
    /// but does not read is held back by its own full socket instead of
    /// growing our queue. Frames that end or feed calls already running
    /// (RESPONSE, ITEM, CREDIT, CANCEL, END) are still read, so two peers
    /// streaming to each other never wait on one another.
    pub write_queue: usize,
    /// How long the queue may stay above `write_queue` while a new call
    /// waits to be read before the connection is closed with GOAWAY
    /// `resource_exhausted`.
    pub write_stall_timeout: Duration,
    /// The service whose methods we offer, if any (a
    /// [`Provider`](crate::Provider), or the hub's registry).
    pub service: Option<Arc<dyn Service>>,
    /// As the dialer: the token sent in our HELLO (`spec/PROTOCOL.md` §4.4).
    pub token: Option<Token>,
    /// As the acceptor: the token the dialer must send; without it (or
    /// with another) it gets GOAWAY `unauthenticated` and never our HELLO.
    pub require_token: Option<Token>,
    /// The direct path through a hub (`spec/PROTOCOL.md` §14): send
    /// `direct` in our HELLO. Set with `ConnectionOptions::direct`; off
    /// by default.
    pub(crate) direct: bool,
    /// With `direct`, as a dialer: makes the client's routes (`direct.rs`)
    /// and the hook its DIRECT frames go to.
    pub(crate) router: Option<RouterFactory>,
    /// Where DIRECT and ACCEPT frames go, set by the runtime itself (the
    /// client's routes, a child provider's serving of ACCEPT).
    pub(crate) handoff: Option<DirectHook>,
    // ---- Shared memory (spec/PROTOCOL.md §11.4) ----
    /// Move a Unix-socket or child connection to shared memory when the
    /// peer can too. On by default; `HUBWIRE_SHM=0` turns the default off.
    pub shm: bool,
    /// The size of each ring of a segment we offer as the dialer: a power
    /// of two from 4 KiB to 1 GiB. A segment maps `4 KiB + 2 × shm_ring`,
    /// but only the pages a ring has used cost memory: small calls stay in
    /// its first pages, and pages past its first 256 KiB go back to the
    /// system a second or two after the bulk that used them.
    pub shm_ring: usize,
    /// How many connections of this process may be on shared memory at
    /// once (counted across all connections); beyond it, new ones stay on
    /// the socket (an acceptor refuses `resource_exhausted`).
    pub shm_max_connections: usize,
}

/// [`ConnectionOptions::shm_ring`] by default: 4 MiB. Small calls keep to
/// a ring's first pages, and bulk gives back what it used past 256 KiB a
/// second or two after it (§11.4.1); a large ring lets large frames run
/// at memory speed where 256 KiB holds them near a Unix socket's
/// (docs/hub.md, "Shared memory").
pub const DEFAULT_SHM_RING: usize = 4 << 20;
/// [`ConnectionOptions::shm_max_connections`] by default.
pub const DEFAULT_SHM_MAX_CONNECTIONS: usize = 256;

/// `HUBWIRE_SHM_RING` (bytes, rounded as [`ConnectionOptions::shm_ring`]
/// rounds them), if set and a number.
fn shm_ring_from_env() -> Option<usize> {
    let n: usize = std::env::var("HUBWIRE_SHM_RING").ok()?.parse().ok()?;
    Some(n.clamp(4096, 1 << 30).next_power_of_two())
}

impl ConnectionOptions {
    /// Defaults: efficient waiting (or `HUBWIRE_WAIT`), 16 MiB frames,
    /// window 64, 4096 calls, 10 s handshake, a 4 MiB write queue that may
    /// stay full for 30 s, no methods offered, shared memory on (or
    /// `HUBWIRE_SHM`) with 4 MiB rings and at most 256 such connections.
    pub fn new(name: impl Into<String>) -> ConnectionOptions {
        ConnectionOptions {
            name: name.into(),
            wait: WaitMode::from_env().unwrap_or_default(),
            spin_gate: None,
            max_frame: DEFAULT_MAX_FRAME,
            window: hubwire_frame::hello::DEFAULT_WINDOW,
            max_calls: hubwire_frame::hello::DEFAULT_MAX_CALLS,
            handshake_timeout: Duration::from_secs(10),
            write_queue: DEFAULT_WRITE_QUEUE,
            write_stall_timeout: Duration::from_secs(30),
            service: None,
            token: None,
            require_token: None,
            direct: false,
            router: None,
            handoff: None,
            shm: std::env::var("HUBWIRE_SHM").map_or(true, |v| v != "0"),
            shm_ring: shm_ring_from_env().unwrap_or(DEFAULT_SHM_RING),
            shm_max_connections: DEFAULT_SHM_MAX_CONNECTIONS,
        }
    }

    /// Switches the upgrade to shared memory on or off (§11.4).
    pub fn shm(mut self, on: bool) -> ConnectionOptions {
        self.shm = on;
        self
    }

    /// Sets the ring size of the segments we offer (rounded up to a power
    /// of two, 4 KiB to 1 GiB).
    pub fn shm_ring(mut self, bytes: usize) -> ConnectionOptions {
        self.shm_ring = bytes.clamp(4096, 1 << 30).next_power_of_two();
        self
    }

    /// Sets the waiting mode.
    pub fn wait(mut self, wait: WaitMode) -> ConnectionOptions {
        self.wait = wait;
        self
    }

    /// In low-latency mode, spins only while `gate` says a caller is
    /// alone (one call in flight, after calls that were alone too), and
    /// waits as efficient mode does otherwise ([`SpinGate`]). For a process that relays calls: the hub gives its
    /// connections to providers its count of routed calls, so that a
    /// caller alone gets its answer without a wake-up in the hub, and many
    /// callers do not hold each other's workers.
    pub fn spin_gate(mut self, gate: SpinGate) -> ConnectionOptions {
        self.spin_gate = Some(gate);
        self
    }

    /// Sets the frame limit.
    pub fn max_frame(mut self, n: u32) -> ConnectionOptions {
        self.max_frame = n;
        self
    }

    /// Sets the per-stream window (at least 1).
    pub fn window(mut self, n: u32) -> ConnectionOptions {
        self.window = n.max(1);
        self
    }

    /// Sets the concurrent-call limit (at least 1).
    pub fn max_calls(mut self, n: u32) -> ConnectionOptions {
        self.max_calls = n.max(1);
        self
    }

    /// Sets the write queue's cap in bytes (at least 64 KiB) and how long
    /// it may stay over it (see [`ConnectionOptions::write_queue`]).
    pub fn write_queue(mut self, bytes: usize, stall_timeout: Duration) -> ConnectionOptions {
        self.write_queue = bytes.max(64 * 1024);
        self.write_stall_timeout = stall_timeout;
        self
    }

    /// Offers `service`'s methods on the connection.
    pub fn service(mut self, service: impl Service) -> ConnectionOptions {
        self.service = Some(Arc::new(service));
        self
    }

    /// Sends `token` in our HELLO when we dial (ignored when we accept:
    /// an acceptor never sends one).
    pub fn token(mut self, token: impl Into<String>) -> ConnectionOptions {
        self.token = Some(Token(token.into()));
        self
    }

    /// Requires dialers to send `token` in their HELLO when we accept.
    pub fn require_token(mut self, token: impl Into<String>) -> ConnectionOptions {
        self.require_token = Some(Token(token.into()));
        self
    }

    /// Our HELLO. The service's methods are asked for once, here.
    pub(crate) fn hello(&self, dialer: bool) -> Hello {
        let mut h = Hello::new(PeerInfo { name: self.name.clone(), lang: "rust".into(), version: env!("CARGO_PKG_VERSION").into() });
        h.max_frame = self.max_frame;
        h.window = self.window;
        h.max_calls = self.max_calls;
        if let Some(s) = &self.service {
            h.methods = s.methods();
        }
        if dialer {
            h.token = self.token.clone();
        }
        h.direct = self.direct.then_some(1);
        h.fit();
        h
    }
}
