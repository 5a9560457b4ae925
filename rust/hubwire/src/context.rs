//! What a handler knows about the call it is serving.

use std::sync::Arc;

use hubwire_frame::{Hello, PeerInfo};
use tokio::time::Instant;

use crate::calls::CancelSignal;

/// The context of one call, handed to its handler.
#[derive(Clone)]
pub struct CallContext {
    pub(crate) method: Arc<str>,
    pub(crate) id: u32,
    pub(crate) deadline: Option<Instant>,
    pub(crate) cancel: Arc<CancelSignal>,
    pub(crate) peer: Arc<Hello>,
}

impl CallContext {
    /// The method being called.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The call id on this connection.
    pub fn call_id(&self) -> u32 {
        self.id
    }

    /// When the caller stops waiting, if it set a deadline.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Who is calling.
    pub fn peer(&self) -> &PeerInfo {
        &self.peer.peer
    }

    /// Whether the caller cancelled (or the deadline passed, or the
    /// connection died).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the call is cancelled. The handler's future is also
    /// dropped at that point; this is for work the handler runs elsewhere.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }
}
