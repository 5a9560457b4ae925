//! Opening a connection (`spec/PROTOCOL.md` §4): both sides send HELLO at
//! once, read the peer's, and negotiate the version; then the connection's
//! one reader task starts. A handshake that fails for anything but a lost
//! peer is refused with GOAWAY and its code, so the peer learns why.
//!
//! An acceptor that requires a token (§4.4) reads the dialer's HELLO
//! first and sends its own only once the token matches: its HELLO lists
//! its methods, which a peer without the token must not learn.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use hubwire_frame::{negotiate, Code, Decoder, Frame, FrameError, Hello, Token, HELLO_LIMIT};

use super::options::ConnectionOptions;
use super::reader::{self, READ_CHUNK};
use super::state::Core;
use super::upgrade;
use super::wait::{Spinner, WaitMode};
use super::writer::Writer;
use crate::errors::Error;
use crate::transport::DynTransport;

/// Opens a connection over `transport`, as the dialer (odd call ids) or the
/// acceptor (even ids), and starts its reader.
pub(crate) async fn open(transport: DynTransport, options: &ConnectionOptions, dialer: bool) -> Result<Arc<Core>, Error> {
    let (transport, ladder) = upgrade::wrap(transport, options, dialer);
    let writer = Writer::new(transport.clone(), options.write_queue);
    let mut local = options.hello(dialer);
    upgrade::advertise(&mut local, &ladder);
    // Descriptors for DIRECT and ACCEPT (§14.2) are kept from the first
    // read on (one read with plain recv would lose them), only where those
    // frames are taken; the upgrade keeps this queue when it settles.
    let fd_queue = if local.direct.is_some() && options.handoff.is_some() { super::handoff::FD_QUEUE } else { 0 };
    if fd_queue > 0 {
        transport.accept_fds(fd_queue);
    }
    let gate = if dialer { None } else { options.require_token.as_ref() };
    let (peer, buf, version) = exchange(&transport, &writer, &local, options, gate).await?;
    let mut decoder = Decoder::new(options.max_frame);
    decoder.set_version(version as u8);
    decoder.set_direct(local.direct.is_some() && peer.direct.is_some());
    let low_latency = matches!(options.wait, WaitMode::LowLatency { .. });
    let core = Arc::new(Core::new(transport, writer, local, peer, dialer, low_latency, options.spin_gate.clone()));
    if let Some(hook) = &options.handoff {
        let _ = core.direct.set(hook.clone());
    }
    upgrade::start(&core, ladder, options, fd_queue);
    tokio::spawn(reader::run(
        core.clone(),
        options.service.clone(),
        Spinner::new(options.wait, options.spin_gate.clone()),
        options.write_stall_timeout,
        buf,
        decoder,
    ));
    Ok(core)
}

/// Sends our HELLO and reads the peer's — or, with a token to check
/// (`gate`), reads the peer's first and answers with ours or with GOAWAY
/// `unauthenticated`. Returns the peer's HELLO, the bytes read past it,
/// and the negotiated version.
async fn exchange(
    t: &DynTransport,
    writer: &Writer,
    local: &Hello,
    options: &ConnectionOptions,
    gate: Option<&Token>,
) -> Result<(Hello, BytesMut, u32), Error> {
    let hello = Frame::Hello(Box::new(local.clone())).to_bytes();
    if gate.is_none() {
        writer.push(|_| {}, &hello).map_err(Error::unavailable)?;
    }
    // The HELLO may be larger than our own max_frame: the peer cannot know
    // our limit before sending it (§4.1.2).
    let decoder = Decoder::new(options.max_frame.max(HELLO_LIMIT));
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let first = tokio::time::timeout(options.handshake_timeout, async {
        loop {
            if let Some(f) = decoder.decode(&mut buf)? {
                return Ok(f);
            }
            reader::reserve(&decoder, &mut buf);
            match poll_fn(|cx| t.poll_read(cx, &mut buf)).await {
                Ok(0) => {
                    decoder.finish(&buf)?;
                    return Err(FrameError::new(Code::Unavailable, "peer closed the connection before its HELLO"));
                }
                Ok(_) => {}
                Err(e) => return Err(FrameError::new(Code::Unavailable, format!("read failed during handshake: {e}"))),
            }
        }
    })
    .await;
    // A refusal lingers before it closes (§7.3), in the background: the
    // error is the caller's at once.
    let refuse = |e: FrameError| async move {
        if e.code != Code::Unavailable {
            let _ = writer.push(|_| {}, &Frame::Goaway { last_id: 0, code: e.code, message: e.message.clone() }.to_bytes());
            let _ = tokio::time::timeout(Duration::from_millis(100), writer.flushed()).await;
            writer.close(&e.message);
            let t = t.clone();
            tokio::spawn(async move {
                reader::linger(&*t).await;
                t.release();
            });
        } else {
            writer.close(&e.message);
            t.release();
        }
        Error::from(e)
    };
    let frame = match first {
        Err(_) => {
            let why = format!("no HELLO from {} within {:?}", t.describe(), options.handshake_timeout);
            return Err(refuse(FrameError::new(Code::DeadlineExceeded, why)).await);
        }
        Ok(Err(e)) => return Err(refuse(e).await),
        Ok(Ok(f)) => f,
    };
    match frame {
        Frame::Hello(peer) => {
            if let Some(want) = gate {
                if let Some(why) = token_refusal(peer.token.as_ref(), want) {
                    return Err(refuse(FrameError::new(Code::Unauthenticated, why)).await);
                }
                writer.push(|_| {}, &hello).map_err(Error::unavailable)?;
            }
            match negotiate(&local.versions, &peer.versions) {
                Ok(v) => Ok((*peer, buf, v)),
                Err(e) => Err(refuse(e).await),
            }
        }
        Frame::Goaway { code, message, .. } => {
            writer.close(&message);
            t.release();
            Err(Error::new(code, format!("peer refused the handshake: {message}")))
        }
        other => Err(refuse(FrameError::protocol(format!("expected HELLO as the first frame, got {:?}", other.frame_type()))).await),
    }
}

/// Why a dialer's token is refused, if it is: the GOAWAY message of §4.4,
/// which never echoes the token.
fn token_refusal(got: Option<&Token>, want: &Token) -> Option<&'static str> {
    match got {
        None => Some("token required"),
        Some(t) if !t.matches(want) => Some("wrong token"),
        Some(_) => None,
    }
}
