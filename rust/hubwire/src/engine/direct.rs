//! The engine's half of the direct path (`spec/PROTOCOL.md` §14): sending
//! DIRECT and ACCEPT with a descriptor attached to the first byte of the
//! frame, and handing the ones received, with the descriptor each takes,
//! to the API's hook (`handoff.rs`). What a client or a replica then does
//! with them (dial, serve, route) lives above the engine (`direct.rs`,
//! `direct_serve.rs`).

use std::os::fd::{AsFd, OwnedFd};

use hubwire_frame::{Frame, Via};

use super::handoff::Handoff;
use super::state::Core;
use crate::errors::Error;

impl Core {
    /// Sends DIRECT or ACCEPT, with `fd` attached to the first byte of the
    /// frame (`Writer::push_alone`). Waits for the frames queued before it
    /// to leave, so it must not run on the reader.
    pub(crate) async fn hand_over(&self, frame: &Frame, fd: Option<&OwnedFd>) -> Result<(), Error> {
        let fds: Vec<_> = fd.iter().map(|f| f.as_fd()).collect();
        self.writer.push_alone(&frame.to_bytes(), &fds, || {}).await.map_err(|r| Error::unavailable(format!("connection closed: {r}")))
    }
}

/// The reader's handling of a DIRECT or ACCEPT: takes the frame's
/// descriptor off the transport's queue and calls the hook; without a
/// hook, or without the descriptor an ACCEPT needs, the frame is dropped
/// (and its descriptor closed).
pub(crate) fn on_frame(core: &Core, frame: Frame) {
    let handoff = match frame {
        Frame::Direct(offer) => {
            let fd = if offer.via == Via::Fd { core.transport.take_fd() } else { None };
            if offer.via == Via::Fd && fd.is_none() {
                return tracing::warn!(peer = %core.transport.describe(), "DIRECT without a descriptor: ignored");
            }
            Handoff::Direct { offer: *offer, fd }
        }
        Frame::Accept(body) => match core.transport.take_fd() {
            Some(fd) => Handoff::Accept { body, fd },
            None => return tracing::warn!(peer = %core.transport.describe(), "ACCEPT without a descriptor: ignored"),
        },
        _ => unreachable!("only DIRECT and ACCEPT come here"),
    };
    match core.direct.get() {
        Some(hook) => hook(handoff),
        None => tracing::debug!(peer = %core.transport.describe(), "a direct-path frame on a connection that takes none: dropped"),
    }
}
