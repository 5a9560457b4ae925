//! The upgrade to shared memory (`spec/PROTOCOL.md` §11.4.2), the
//! engine's half: who offers, how an offer is checked and answered, and
//! where each direction switches. The bytes move in `transport/shm`.
//!
//! A connection over a socket that passes descriptors, to a peer of our
//! own user or root, with the upgrade switched on, runs over a [`Ladder`]
//! and lists `shm` in its HELLO. If the peer lists it too, the dialer
//! sends UPGRADE with the segment's five descriptors; the acceptor answers
//! UPGRADED, which when `ok` is its last frame on the socket, and the
//! dialer's own UPGRADED `ok` is its last. The frames before a marker are read from the socket and the ones after from
//! the ring, so calls in flight never notice. Nothing waits for the
//! upgrade: until it is settled, frames flow on the socket.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use hubwire_frame::{Code, Frame, FrameError, Hello};
use tokio::sync::watch;

use super::options::ConnectionOptions;
use super::state::Core;
use super::upgrade_state::{Phase, Upgrade};
use crate::transport::shm::link::{self, Link};
use crate::transport::shm::release::RELEASE_TICK;
use crate::transport::shm::segment::Segment;
use crate::transport::shm::{Budget, Ladder};
use crate::transport::{DynTransport, Transport};

/// The mechanism's name in HELLO `upgrade` and in UPGRADE.
pub(crate) const SHM: &str = "shm";

/// Descriptors an offer carries: the memfd and four eventfds.
const OFFER_FDS: usize = 5;

/// Wraps `transport` in a [`Ladder`] when the upgrade is switched on and
/// descriptors can pass on it; the acceptor then keeps the descriptors of
/// an offer that may come with the dialer's first frames.
pub(crate) fn wrap(transport: DynTransport, options: &ConnectionOptions, dialer: bool) -> (DynTransport, Option<Arc<Ladder>>) {
    if !options.shm || !transport.passes_fds() || !crate::transport::shm::may_share_with(transport.peer_uid()) {
        return (transport, None);
    }
    let ladder = Arc::new(Ladder::new(transport));
    if !dialer {
        ladder.accept_fds(OFFER_FDS);
    }
    (ladder.clone(), Some(ladder))
}

/// Lists `shm` in our HELLO when we run over a ladder.
pub(crate) fn advertise(hello: &mut Hello, ladder: &Option<Arc<Ladder>>) {
    if ladder.is_some() {
        hello.upgrade.push(SHM.into());
    }
}

/// After the handshake: records the upgrade's state on `core` if both
/// sides can, and as the dialer sends the offer (in the background).
/// Otherwise the connection stays on the socket, and an acceptor keeps
/// descriptors only for the direct path's frames (`fd_queue`, §14.2; 0
/// when it takes none).
pub(crate) fn start(core: &Arc<Core>, ladder: Option<Arc<Ladder>>, options: &ConnectionOptions, fd_queue: usize) {
    let Some(ladder) = ladder else { return };
    if !core.peer.upgrade.iter().any(|m| m == SHM) {
        ladder.accept_fds(fd_queue);
        return;
    }
    let up = Upgrade {
        ladder,
        phase: Mutex::new(Phase::Idle),
        ring: options.shm_ring,
        max_connections: options.shm_max_connections,
        settled: watch::channel(None).0,
        fd_queue,
    };
    if core.upgrade.set(up).is_err() || !core.dialer {
        return;
    }
    let core = core.clone();
    tokio::spawn(async move {
        let up = core.upgrade.get().expect("set above");
        if let Err(e) = offer(&core, up).await {
            tracing::debug!(peer = %core.transport.describe(), "not offering shared memory: {e}");
            *up.phase.lock().unwrap() = Phase::Settled;
            up.settled.send_replace(Some(false));
        }
    });
}

/// The dialer's offer: makes the segment, sends UPGRADE with its
/// descriptors, and keeps the link for the answer.
async fn offer(core: &Core, up: &Upgrade) -> Result<(), String> {
    let budget = Budget::take(up.max_connections).ok_or("over the limit of upgraded connections")?;
    let (seg, memfd) = Segment::create(up.ring, up.ring).map_err(|e| format!("cannot make the segment: {e}"))?;
    let fds = link::eventfds().map_err(|e| format!("cannot make eventfds: {e}"))?;
    let link = Link::new(seg, true, fds_clone(&fds)?, budget).map_err(|e| e.to_string())?;
    // Recorded before the frame leaves: the answer may come at once.
    *up.phase.lock().unwrap() = Phase::Offered(link);
    let frame = Frame::Upgrade { mechanism: SHM.into() }.to_bytes();
    let sent: Vec<_> = std::iter::once(memfd.as_fd()).chain(fds.iter().map(|f| f.as_fd())).collect();
    core.writer.push_alone(&frame, &sent, || {}).await
    // Our copies of the descriptors close here; the peer has its own and
    // the link keeps the ones we use.
}

fn fds_clone(fds: &[OwnedFd; 4]) -> Result<[OwnedFd; 4], String> {
    let c = |f: &OwnedFd| f.try_clone().map_err(|e| format!("dup: {e}"));
    Ok([c(&fds[0])?, c(&fds[1])?, c(&fds[2])?, c(&fds[3])?])
}

/// Handles UPGRADE or UPGRADED, read by the reader. A frame out of place
/// is a protocol error (§11.4.2).
pub(crate) fn on_frame(core: &Arc<Core>, frame: Frame) -> Result<(), FrameError> {
    let ty = frame.frame_type() as u8;
    let Some(up) = core.upgrade.get() else {
        // We did not list `shm` (or the peer did not): an unknown type to us.
        return Err(FrameError::protocol(format!("unknown frame type 0x{ty:02x}")));
    };
    let mut phase = up.phase.lock().unwrap();
    match (frame, std::mem::replace(&mut *phase, Phase::Settled)) {
        (Frame::Upgrade { mechanism }, Phase::Idle) if !core.dialer => {
            let fds: Vec<OwnedFd> = std::iter::from_fn(|| up.ladder.take_fd()).take(OFFER_FDS + 1).collect();
            up.ladder.accept_fds(up.fd_queue);
            match take_offer(up, &mechanism, fds) {
                Ok(link) => {
                    up.ladder.attach(link);
                    spawn_release(&up.ladder);
                    *phase = Phase::Accepted;
                    drop(phase);
                    send_marker(core.clone(), false);
                }
                Err((code, message)) => {
                    tracing::info!(peer = %core.transport.describe(), "refused a shared-memory offer: {message}");
                    drop(phase);
                    up.settled.send_replace(Some(false));
                    let _ = core.send(&Frame::Upgraded { code, message });
                }
            }
            Ok(())
        }
        (Frame::Upgraded { code: Code::Ok, .. }, Phase::Offered(link)) => {
            up.ladder.attach(link);
            spawn_release(&up.ladder);
            up.ladder.switch_read();
            drop(phase);
            send_marker(core.clone(), true);
            Ok(())
        }
        (Frame::Upgraded { code, message }, Phase::Offered(_link)) => {
            tracing::info!(peer = %core.transport.describe(), "shared-memory offer refused ({code}): {message}");
            up.settled.send_replace(Some(false));
            Ok(())
        }
        (Frame::Upgraded { code: Code::Ok, .. }, Phase::Accepted) => {
            up.ladder.switch_read();
            drop(phase);
            up.settled.send_replace(Some(true));
            Ok(())
        }
        (frame, _) => Err(FrameError::protocol(match frame {
            Frame::Upgrade { .. } if core.dialer => "UPGRADE from the acceptor".to_string(),
            Frame::Upgrade { .. } => "a second UPGRADE".to_string(),
            _ => "an UPGRADED that answers no UPGRADE".to_string(),
        })),
    }
}

/// Gives the idle pages of the ring we write back to the system, a tick
/// after their last use (`transport/shm/release.rs`), for as long as the
/// link lives and we write it.
fn spawn_release(ladder: &Ladder) {
    let Some(link) = ladder.link() else { return };
    let link = Arc::downgrade(link);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(RELEASE_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match link.upgrade() {
                Some(l) if !l.write_closed() => {
                    l.release_idle();
                }
                _ => return,
            }
        }
    });
}

/// Checks an offer and maps it, or says why not (§11.4.2 step 2).
fn take_offer(up: &Upgrade, mechanism: &str, fds: Vec<OwnedFd>) -> Result<Link, (Code, String)> {
    if mechanism != SHM {
        return Err((Code::InvalidArgument, format!("unknown upgrade mechanism {mechanism:?}")));
    }
    let Ok([memfd, d0, r0, d1, r1]) = <[OwnedFd; OFFER_FDS]>::try_from(fds) else {
        return Err((Code::InvalidArgument, format!("an shm offer carries {OFFER_FDS} descriptors")));
    };
    let budget = Budget::take(up.max_connections)
        .ok_or_else(|| (Code::ResourceExhausted, format!("over {} upgraded connections", up.max_connections)))?;
    let seg =
        Segment::open(&memfd).map_err(|m| (if m.starts_with("cannot map") { Code::Unavailable } else { Code::InvalidArgument }, m))?;
    link::check_eventfds([&d0, &r0, &d1, &r1]).map_err(|m| (Code::InvalidArgument, m))?;
    Link::new(seg, false, [d0, r0, d1, r1], budget).map_err(|e| (Code::Unavailable, format!("cannot wait on the eventfds: {e}")))
}

/// Sends our UPGRADED `ok` as our last frame on the socket, and moves our
/// writes to the ring right after it.
fn send_marker(core: Arc<Core>, dialer: bool) {
    tokio::spawn(async move {
        let up = core.upgrade.get().expect("an upgrade in progress");
        let frame = Frame::Upgraded { code: Code::Ok, message: String::new() }.to_bytes();
        let r = core.writer.push_alone(&frame, &[], || up.ladder.switch_write()).await;
        if r.is_ok() && dialer {
            up.settled.send_replace(Some(true));
        }
    });
}

/// After the reader dispatched an UPGRADED: if that moved our reads to
/// the ring, nothing may follow it on the socket but carriers (§11.4.3):
/// a peer that writes its ring may send a frame with descriptors at once,
/// and its carrier can arrive in the same read as the marker. Their
/// descriptors are queued already; the bytes are dropped here, as the
/// ladder drops the carriers it reads later.
pub(crate) fn after_marker(core: &Core, rest: &mut BytesMut) -> Result<(), FrameError> {
    match core.upgrade.get() {
        Some(up) if up.ladder.reads_ring() && !rest.is_empty() => {
            if rest.iter().any(|&b| b != 0) {
                return Err(FrameError::protocol(format!("{} bytes on the socket after the peer's UPGRADED", rest.len())));
            }
            rest.clear();
            Ok(())
        }
        _ => Ok(()),
    }
}

impl Core {
    /// Waits until the upgrade is settled: true if the connection is on
    /// shared memory both ways, false if it stays on the socket.
    pub(crate) async fn upgraded(&self) -> bool {
        let Some(up) = self.upgrade.get() else { return false };
        let mut rx = up.settled.subscribe();
        let mut closed = self.closed.subscribe();
        loop {
            if let Some(done) = *rx.borrow_and_update() {
                return done;
            }
            if closed.borrow_and_update().is_some() {
                return false;
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return false },
                _ = closed.changed() => {}
            }
        }
    }

    /// Whether our writer waits for room in the shared ring. The reader
    /// does not spin then: on a current-thread runtime its spin would keep
    /// the writing task off the thread until the spin ran out, and the
    /// peer, waiting for our bytes, sends nothing meanwhile (the bulk row:
    /// 50 µs lost per ring's worth).
    pub(crate) fn ring_write_waits(&self) -> bool {
        self.upgrade.get().is_some_and(|u| u.ladder.write_waits())
    }

    /// Whether both directions are on shared memory now.
    pub(crate) fn on_shm(&self) -> bool {
        self.upgrade.get().is_some_and(|u| u.ladder.on_shm())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::fd::FdTransport;

    /// A socketpair's peer is its creator: this process, our own user, so a
    /// child's connection (and a test's) may upgrade.
    #[tokio::test(flavor = "current_thread")]
    async fn a_socketpair_peer_is_of_our_own_user() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let t = FdTransport::new(a, "pair".into()).unwrap();
        assert_eq!(t.peer_uid(), Some(unsafe { libc::geteuid() }));
        assert!(crate::transport::shm::may_share_with(t.peer_uid()));
        let (tcp, _l) = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            (std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap(), l)
        };
        tcp.set_nonblocking(true).unwrap();
        assert_eq!(FdTransport::new(tcp, "tcp".into()).unwrap().peer_uid(), None, "TCP says nothing of its peer");
    }
}
