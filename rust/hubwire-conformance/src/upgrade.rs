//! The runner's side of the upgrade to shared memory (`spec/PROTOCOL.md`
//! §11.4): the `offer_upgrade` step sends UPGRADE as the dialer would —
//! with a good segment, a segment of the wrong size, a good segment with
//! blocking eventfds, or no descriptors at all — and checks the testee's
//! answer; the `accept_upgrade` step takes the testee's offer as the
//! acceptor. An offer accepted either way
//! moves the runner onto the rings with the runtime's own segment and
//! link code (`hubwire::transport::shm`), at the markers (`peer.rs`).
//!
//! A testee whose HELLO does not list `"shm"` must never be sent an
//! UPGRADE (the spec forbids it), so for such a testee the offer and its
//! check are left out and only the step's `then` happens: every runtime
//! passes the suite whether it implements the upgrade or not. Cases that
//! need the upgrade to happen say `requires: [shm]`.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use hubwire::transport::shm::link::{self, Link};
use hubwire::transport::shm::segment::{self, Segment};
use hubwire::transport::shm::Budget;
use hubwire_frame::Frame;
use serde_json::Value;

use crate::peer::{Peer, Read};

/// A sealed memfd of `file_size` bytes whose header announces rings of
/// 4096 bytes each (a segment of 12288 bytes).
fn memfd(file_size: usize) -> Result<OwnedFd, String> {
    let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // SAFETY: plain system calls on a descriptor we create and own.
    unsafe {
        let raw = libc_memfd()?;
        let fd = OwnedFd::from_raw_fd(raw);
        if libc::ftruncate(fd.as_raw_fd(), file_size as libc::off_t) < 0 {
            return Err(err("ftruncate"));
        }
        let h = segment::header(4096, 4096);
        if libc::pwrite(fd.as_raw_fd(), h.as_ptr() as *const libc::c_void, h.len(), 0) != h.len() as isize {
            return Err(err("pwrite"));
        }
        if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL) < 0 {
            return Err(err("seal"));
        }
        Ok(fd)
    }
}

/// The runtime's four eventfds with `O_NONBLOCK` cleared, as a hostile
/// peer could clear it, which an acceptor must refuse (§11.4.1: a signal
/// to one could block its thread).
fn blocking_eventfds() -> Result<[OwnedFd; 4], String> {
    let fds = link::eventfds().map_err(|e| e.to_string())?;
    for fd in &fds {
        // SAFETY: F_SETFL on a descriptor we own; no memory is passed.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, 0) } < 0 {
            return Err(format!("fcntl: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(fds)
}

unsafe fn libc_memfd() -> Result<i32, String> {
    // SAFETY: memfd_create with a static name.
    let raw = unsafe { libc::memfd_create(c"conformance".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if raw < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    Ok(raw)
}

/// The `offer_upgrade` step: `{segment: valid | wrong_size |
/// blocking_eventfds | none, expect: CODE, then: close}`. `expect` is the
/// code of the testee's UPGRADED; after a refusal the connection must go on working (a PING is
/// answered). Without `expect` (a valid segment only) the offer is sent
/// and the case's next steps take the answer among other frames.
/// `then: close` closes the connection right after the offer (a dialer
/// dying mid-upgrade) instead of waiting for the answer. A valid segment
/// is the runner's to use: on UPGRADED `ok` it moves to the rings.
pub async fn offer(peer: &mut Peer, arg: &Value, testee_lists_shm: bool, wait: Duration) -> Result<(), String> {
    let segment = arg.get("segment").and_then(Value::as_str).unwrap_or("valid");
    let close = arg.get("then").and_then(Value::as_str) == Some("close");
    let want = arg.get("expect").and_then(Value::as_str);
    if want.is_none() && !close && segment != "valid" {
        return Err("offer_upgrade needs `expect` (a code) unless the segment is valid".into());
    }
    if testee_lists_shm {
        let frame = Frame::Upgrade { mechanism: "shm".into() }.to_bytes();
        let memfd = match segment {
            "valid" => {
                let (seg, memfd) = Segment::create(segment::MIN_CAP, segment::MIN_CAP).map_err(|e| format!("segment: {e}"))?;
                Some((memfd, Some(seg)))
            }
            // A segment that passes every check, sent with eventfds that do not.
            "blocking_eventfds" => {
                Some((Segment::create(segment::MIN_CAP, segment::MIN_CAP).map_err(|e| format!("segment: {e}"))?.1, None))
            }
            "wrong_size" => Some((memfd(8192)?, None)),
            "none" => None,
            other => return Err(format!("segment {other:?}: valid, wrong_size, blocking_eventfds or none")),
        };
        match memfd {
            Some((m, seg)) if peer.passes_fds() => {
                let efds =
                    if segment == "blocking_eventfds" { blocking_eventfds()? } else { link::eventfds().map_err(|e| e.to_string())? };
                if let Some(seg) = seg {
                    let ours = efds.each_ref().map(|f| f.try_clone());
                    let ours = ours.map(|f| f.map_err(|e| format!("dup: {e}"))).into_iter().collect::<Result<Vec<_>, _>>()?;
                    let ours: [OwnedFd; 4] = ours.try_into().expect("four");
                    let link = Link::new(seg, true, ours, Budget::unlimited()).map_err(|e| e.to_string())?;
                    peer.attach(link, true)?;
                }
                let fds: Vec<_> = std::iter::once(m.as_fd()).chain(efds.iter().map(|f| f.as_fd())).collect();
                peer.send_with_fds(&frame, &fds).await?;
            }
            // Not on a Unix socket: the offer arrives without descriptors.
            _ => peer.send(&frame).await?,
        }
        if let (false, Some(want)) = (close, want) {
            expect_upgraded(peer, want, wait).await?;
            if want != "ok" {
                peer.send(&Frame::Ping { data: *b"refused!" }.to_bytes()).await?;
                match next(peer, wait).await? {
                    Frame::Pong { data } if &data == b"refused!" => {}
                    f => return Err(format!("after a refused offer the connection must go on: got {f:?} for a PING")),
                }
            }
        }
    }
    if close {
        peer.close();
    }
    Ok(())
}

/// The `accept_upgrade` step, the runner as the acceptor (client role):
/// the testee's next frame is UPGRADE `shm` with five descriptors, whose
/// segment passes the checks of §11.4.1; the runner answers UPGRADED `ok`
/// as its last frame on the socket and writes to its ring from then on.
/// For a testee that does not list `"shm"` nothing happens (it offers
/// nothing).
pub async fn accept(peer: &mut Peer, testee_lists_shm: bool, wait: Duration) -> Result<(), String> {
    if !testee_lists_shm {
        return Ok(());
    }
    match next(peer, wait).await? {
        Frame::Upgrade { mechanism } if mechanism == "shm" => {}
        f => return Err(format!("expected the testee's UPGRADE shm, got {f:?}")),
    }
    let fds: Vec<OwnedFd> = std::iter::from_fn(|| peer.take_fd()).take(6).collect();
    let Ok([memfd, d0, r0, d1, r1]) = <[OwnedFd; 5]>::try_from(fds) else {
        return Err("the testee's UPGRADE did not carry exactly five descriptors".into());
    };
    let seg = Segment::open(&memfd).map_err(|e| format!("the testee's segment is refused: {e}"))?;
    link::check_eventfds([&d0, &r0, &d1, &r1]).map_err(|m| format!("the testee's {m} is refused"))?;
    let link = Link::new(seg, false, [d0, r0, d1, r1], Budget::unlimited()).map_err(|e| e.to_string())?;
    peer.attach(link, false)?;
    peer.switch_write().await
}

async fn next(peer: &mut Peer, wait: Duration) -> Result<Frame, String> {
    loop {
        match peer.read(wait).await? {
            Read::Frame(Frame::Credit { .. }) => continue,
            Read::Frame(f) => return Ok(f),
            Read::Closed => return Err(format!("the testee closed the connection{}", peer.closed_how())),
            Read::Timeout => return Err(format!("nothing from the testee within {wait:?}")),
        }
    }
}

async fn expect_upgraded(peer: &mut Peer, code: &str, wait: Duration) -> Result<(), String> {
    match next(peer, wait).await? {
        Frame::Upgraded { code: c, .. } if c.name() == code => Ok(()),
        f => Err(format!("expected UPGRADED {code}, got {f:?}")),
    }
}
