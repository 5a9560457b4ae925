//! hubwire over NATS (`spec/PROTOCOL.md` §13): a connection is a *link*, a
//! byte stream carried by NATS messages between two subjects, so the
//! engine runs over it unchanged.
//!
//! * [`dial`]: open a link to some replica offering a method, to a
//!   provider, or to one replica; give the [`NatsLink`] to
//!   `Connection::dial`.
//! * [`NatsListener`]: a replica's side, a [`Listener`](super::Listener)
//!   that subscribes the connect subjects in the queue group `hubwire` and
//!   answers the NATS micro discovery subjects (`$SRV.*`), so
//!   `Provider::serve` serves NATS like a socket.
//! * [`wire`]: the bytes (subject tokens, the 5-byte message header,
//!   connect bodies), pure.
//! * `link` is the transport, `ticker` the heartbeats and the silence
//!   limit of every link in the process.
//!
//! The NATS client's own I/O task (spawned on the runtime it was connected
//! on) must keep running: heartbeats are handed to it, and a peer that
//! hears nothing for 600 ms breaks the link. Connect the client on a runtime
//! that is always driven (a multi-thread runtime, or one whose thread only
//! blocks in the runtime), not on a current-thread runtime that sits idle
//! outside `block_on` for long.

mod dial;
mod link;
mod listener;
mod ticker;
pub mod wire;

use std::fmt;

pub use async_nats;
pub use dial::{dial, DialOptions, LinkInfo};
use hubwire_frame::Code;
pub use link::NatsLink;
pub use listener::{CallCounts, NatsListener, Offer};
pub use ticker::{DEAD_AFTER_MS, HEARTBEAT_MS};
pub use wire::Target;

/// Messages a link holds unread before the NATS client drops the next one
/// (and the link breaks at the gap, §13.6): the client's per-subscription
/// capacity, which [`connect`] sets.
pub const LINK_PENDING: usize = 8192;

/// What the message of a dial that found nobody says (§13.2 step 5):
/// see [`NatsError::is_no_responders`].
const NO_RESPONDERS: &str = "nobody subscribes";

/// A failure to dial, listen or connect, with its status code
/// (`unavailable` for nobody there, a replica's refusal's own code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatsError {
    /// The status code.
    pub code: Code,
    /// What went wrong.
    pub message: String,
}

impl NatsError {
    /// An error with `code`.
    pub fn new(code: Code, message: impl Into<String>) -> NatsError {
        NatsError { code, message: message.into() }
    }

    /// Whether a dial failed because nobody subscribes the connect subject
    /// (NATS's no-responders answer, §13.2 step 5): a hub then answers the
    /// call `unknown_method`, not `unavailable`.
    pub fn is_no_responders(&self) -> bool {
        self.code == Code::Unavailable && self.message.contains(NO_RESPONDERS)
    }
}

impl fmt::Display for NatsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.name(), self.message)
    }
}

impl std::error::Error for NatsError {}

/// Connects to a NATS server (or a comma-separated list of a cluster's
/// nodes) with the link's bound on unread messages.
pub async fn connect(url: &str) -> Result<async_nats::Client, NatsError> {
    connect_with(url, async_nats::ConnectOptions::new()).await
}

/// Like [`connect`], with NATS's own options (credentials, TLS, name); the
/// subscription capacity is set to [`LINK_PENDING`].
pub async fn connect_with(url: &str, options: async_nats::ConnectOptions) -> Result<async_nats::Client, NatsError> {
    let addrs: Vec<async_nats::ServerAddr> = url
        .split(',')
        .map(|u| u.trim().parse())
        .collect::<Result<_, _>>()
        .map_err(|e| NatsError::new(Code::InvalidArgument, format!("NATS URL {url:?}: {e}")))?;
    options
        .subscription_capacity(LINK_PENDING)
        .connect(addrs)
        .await
        .map_err(|e| NatsError::new(Code::Unavailable, format!("connect to NATS at {url}: {e}")))
}
