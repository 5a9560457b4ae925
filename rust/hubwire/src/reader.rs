//! The one reader task of a connection: reads as many bytes as are there,
//! parses every complete frame, routes each to its call, and waits for
//! more the way the connection's [`WaitMode`](crate::WaitMode) says.

use std::future::poll_fn;
use std::io;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::BytesMut;
use hubwire_frame::{Code, Decoder, Frame, FrameError};

use crate::calls::{Event, OutSink, Served};
use crate::codec::Payload;
use crate::connection::{reserve, Inner};
use crate::wait::Spinner;
use crate::Error;

/// Runs until the connection dies.
pub(crate) async fn run(inner: Arc<Inner>, mut buf: BytesMut, decoder: Decoder) {
    let mut spinner = Spinner::new(inner.config.wait);
    let mut delivered = false;
    let reason: Result<String, FrameError> = loop {
        // Answers produced while the frames of one read are dispatched
        // (handlers that finish at once) leave in one write.
        inner.writer.cork();
        let batch = dispatch_all(&inner, &decoder, &mut buf, &mut delivered);
        inner.writer.uncork();
        if let Err(e) = batch {
            break Err(e);
        }
        if inner.state.lock().unwrap().closed.is_some() {
            return;
        }
        reserve(&decoder, &mut buf);
        match read_more(&inner, &mut buf, &mut spinner, &mut delivered).await {
            Ok(0) => {
                break match decoder.finish(&buf) {
                    Ok(()) => Ok("connection closed by peer (end of stream)".into()),
                    Err(e) => Err(e),
                }
            }
            Ok(_) => {}
            Err(e) => break Ok(format!("connection lost: read failed: {e}")),
        }
    };
    match reason {
        Ok(why) => inner.die(Error::unavailable(why)),
        Err(e) => fail_protocol(&inner, e).await,
    }
}

/// Dispatches every complete frame in `buf`.
fn dispatch_all(inner: &Arc<Inner>, decoder: &Decoder, buf: &mut BytesMut, delivered: &mut bool) -> Result<(), FrameError> {
    while let Some(frame) = decoder.decode(buf)? {
        *delivered |= dispatch(inner, frame)?;
    }
    Ok(())
}

/// Our side found the peer's bytes bad: GOAWAY with the error, then close
/// (`spec/PROTOCOL.md` §7.1).
async fn fail_protocol(inner: &Inner, e: FrameError) {
    tracing::warn!(peer = %inner.transport.describe(), "closing connection: {e}");
    let last_id = inner.state.lock().unwrap().last_peer_id;
    if inner.send(&Frame::Goaway { last_id, code: e.code, message: e.message.clone() }).is_ok() {
        let _ = tokio::time::timeout(Duration::from_millis(200), inner.writer.flushed()).await;
    }
    inner.die(Error::unavailable(format!("connection closed: sent GOAWAY {e}")));
}

/// Reads at least one byte (or end of stream), waiting as the mode says.
async fn read_more(inner: &Inner, buf: &mut BytesMut, spinner: &mut Spinner, delivered: &mut bool) -> io::Result<usize> {
    let t = &*inner.transport;
    loop {
        match t.try_read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            r => return r,
        }
        if spinner.enabled() {
            // After waking other tasks (a caller, a handler), do not spin:
            // they need this worker. Wait below until one of them sends a
            // request (the kick) or bytes arrive. Otherwise spin first.
            if !std::mem::take(delivered) {
                let got = spinner.spin(|| match t.try_read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
                    r => Some(r),
                });
                if let Some(r) = got {
                    return r;
                }
            }
        }
        let r = poll_fn(|cx| {
            if spinner.enabled() && inner.kick.poll(cx) {
                return Poll::Ready(None);
            }
            t.poll_read(cx, buf).map(Some)
        })
        .await;
        if let Some(r) = r {
            return r;
        }
    }
}

/// Routes one frame; true if that woke another task (which then needs
/// this worker more than the reader's spin does). An error is a protocol
/// error: the connection closes.
fn dispatch(inner: &Arc<Inner>, frame: Frame) -> Result<bool, FrameError> {
    match frame {
        Frame::Request { call_id, kind, codec, timeout_ms, method, payload } => {
            crate::provider::on_request(inner, call_id, kind, timeout_ms, method, Payload { codec, bytes: payload })
        }
        Frame::Ping { data } => {
            let _ = inner.send(&Frame::Pong { data });
            Ok(false)
        }
        other => route(inner, other).map(|()| true),
    }
}

/// Routes a frame that belongs to a call or waiter.
fn route(inner: &Arc<Inner>, frame: Frame) -> Result<(), FrameError> {
    match frame {
        Frame::Request { .. } | Frame::Ping { .. } => unreachable!("handled by dispatch"),
        Frame::Response { call_id, codec, code, message, payload } => {
            let call = {
                let mut st = inner.state.lock().unwrap();
                let c = st.out.remove(&call_id);
                if c.is_some() && st.draining && st.idle() {
                    inner.idle.notify_waiters();
                }
                c
            };
            if let Some(call) = call {
                let payload = Payload { codec, bytes: payload };
                call.finish(match code {
                    Code::Ok => Ok(payload),
                    Code::Failure => Err(Error::with_detail(code, message, Some(payload))),
                    _ => Err(Error::with_detail(code, message, None)),
                });
            }
            Ok(())
        }
        Frame::Item { call_id, codec, payload } => on_item(inner, call_id, Payload { codec, bytes: payload }),
        Frame::End { call_id } => {
            let mut st = inner.state.lock().unwrap();
            if let Some(s) = st.served.get_mut(&call_id) {
                if let Some(tx) = s.items.take() {
                    let _ = tx.send(Event::End(Ok(None)));
                }
            }
            Ok(())
        }
        Frame::Cancel { call_id } => {
            let s = inner.state.lock().unwrap().served.remove(&call_id);
            if let Some(s) = s {
                s.cancel();
            }
            Ok(())
        }
        Frame::Credit { call_id, credit } => {
            let st = inner.state.lock().unwrap();
            let sem = if inner.ours(call_id) {
                st.out.get(&call_id).and_then(|c| c.send_credit.clone())
            } else {
                st.served.get(&call_id).and_then(|s| s.send_credit.clone())
            };
            if let Some(sem) = sem {
                sem.add_permits(credit as usize);
            }
            Ok(())
        }
        Frame::Pong { data } => {
            let tx = inner.state.lock().unwrap().pings.remove(&u64::from_le_bytes(data));
            if let Some(tx) = tx {
                let _ = tx.send(());
            }
            Ok(())
        }
        Frame::Goaway { last_id, code, message } => on_goaway(inner, last_id, code, message),
        Frame::Hello(_) => Err(FrameError::protocol("unexpected second HELLO")),
    }
}

fn on_item(inner: &Arc<Inner>, id: u32, payload: Payload) -> Result<(), FrameError> {
    let overrun = || Error::new(Code::ResourceExhausted, format!("call {id}: ITEM beyond the flow-control credit granted"));
    if inner.ours(id) {
        let mut st = inner.state.lock().unwrap();
        let Some(call) = st.out.get(&id) else { return Ok(()) };
        let (OutSink::Stream(tx), Some(window)) = (&call.sink, &call.recv) else {
            return Err(FrameError::protocol(format!("ITEM for call {id}, which has no stream from the callee")));
        };
        if window.on_item() {
            let _ = tx.send(Event::Item(payload));
            return Ok(());
        }
        let call = st.out.remove(&id).expect("present");
        drop(st);
        call.finish(Err(overrun()));
        let _ = inner.send(&Frame::Cancel { call_id: id });
    } else {
        let mut st = inner.state.lock().unwrap();
        let Some(served) = st.served.get(&id) else { return Ok(()) };
        let Some(window) = &served.recv else {
            return Err(FrameError::protocol(format!("ITEM for call {id}, which takes no stream from the caller")));
        };
        if window.on_item() {
            if let Some(tx) = &served.items {
                let _ = tx.send(Event::Item(payload));
            }
            return Ok(());
        }
        let served: Served = st.served.remove(&id).expect("present");
        drop(st);
        served.cancel();
        inner.send_response(id, Err(overrun()), false);
    }
    Ok(())
}

fn on_goaway(inner: &Arc<Inner>, last_id: u32, code: Code, message: String) -> Result<(), FrameError> {
    if code != Code::Ok {
        inner.die(Error::unavailable(format!("connection closed: peer sent GOAWAY {code}: {message}")));
        return Ok(());
    }
    // The peer drains: calls it never saw fail now (safe to retry).
    let unseen: Vec<_> = {
        let mut st = inner.state.lock().unwrap();
        st.peer_draining = true;
        let ids: Vec<u32> = st.out.keys().copied().filter(|&id| id > last_id).collect();
        ids.into_iter().filter_map(|id| st.out.remove(&id)).collect()
    };
    for call in unseen {
        call.finish(Err(Error::unavailable("peer is draining (GOAWAY) and never saw this call; safe to retry")));
    }
    Ok(())
}
