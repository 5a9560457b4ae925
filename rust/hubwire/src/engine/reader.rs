//! The one reader task of a connection: reads as many bytes as are there,
//! parses every complete frame, routes each to its call (a REQUEST to the
//! serving seam), and waits for more the way the connection's
//! [`WaitMode`] says.
//!
//! Two bounds on memory live here. A frame is read into a buffer of its
//! size, at most `max_frame` ([`reserve`]), whose pages become resident
//! only as its bytes arrive. And while our write queue
//! is over its cap (the peer is not reading what we send), a new call or
//! PING from the peer is held, and nothing more is read, until the queue
//! drains; if it stays over the cap for `write_stall_timeout`, the
//! connection is closed with GOAWAY `resource_exhausted`.

use std::future::poll_fn;
use std::io;
use std::sync::Arc;
use std::task::{ready, Poll};
use std::time::Duration;

use bytes::BytesMut;
use hubwire_frame::{Code, Decoder, Frame, FrameError};

use super::calls::{deliver, Event, OutSink, Served};
use super::read_state::{ItemRun, ReadState, Stop};
use super::serve::{self, Service};
use super::state::Core;
use super::wait::Spinner;
use crate::codec::Payload;
use crate::errors::Error;
use crate::transport::Transport;

pub(crate) use super::read_state::{reserve, reserve_reusing, READ_CHUNK};

/// How long a connection that sent a fatal GOAWAY goes on reading (and
/// discarding) what the peer still sends before it closes (§7.3).
pub(crate) const LINGER_TIME: Duration = Duration::from_secs(1);

/// How many bytes it reads and discards at most meanwhile.
pub(crate) const LINGER_BYTES: usize = 1 << 20;

/// How long a fatal GOAWAY may take to leave before the close goes on
/// without it.
const GOAWAY_FLUSH: Duration = Duration::from_secs(1);

/// Runs until the connection dies, then releases the transport's
/// descriptor (whether or not the application still holds the
/// `Connection`). `service` serves the peer's calls.
pub(crate) async fn run(
    core: Arc<Core>,
    service: Option<Arc<dyn Service>>,
    spinner: Spinner,
    stall: Duration,
    buf: BytesMut,
    decoder: Decoder,
) {
    let t = core.transport.clone();
    core.read.install(Some(ReadState::new(buf, decoder, spinner)));
    read_frames(&core, service, stall).await;
    core.read.install(None);
    t.release();
}

async fn read_frames(core: &Arc<Core>, service: Option<Arc<dyn Service>>, stall: Duration) {
    let mut delivered = false;
    let reason: Result<String, FrameError> = loop {
        let inside = {
            let mut g = core.read.lock();
            let st = g.as_mut().expect("the reader's state is installed");
            if st.held.is_some() {
                None
            } else {
                if let Some(stop) = st.stop.take() {
                    let r = stopped(st, stop);
                    st.ended = true;
                    break r;
                }
                // Answers produced while the frames of one read are
                // dispatched (handlers that finish at once) leave in one
                // write (`Cork`).
                match dispatch_all(core, st, Dispatcher::Reader(service.as_ref()), &mut delivered) {
                    Err(e) => {
                        st.ended = true;
                        break Err(e);
                    }
                    Ok(Some(frame)) => st.held = Some(frame),
                    Ok(None) => {}
                }
                if core.is_closed() {
                    st.ended = true;
                    return;
                }
                ready_for_more(core, st);
                // Inside a large frame, the rest comes in socket-sized
                // pieces, each worth far more than a wake-up: spinning for
                // it only takes CPU from the copies (bulk 1 MiB, issue 15).
                // Spin between frames.
                st.held.is_none().then(|| st.inside_large_frame())
            }
        };
        let Some(inside) = inside else {
            // Our queue was over its cap: the peer's new call waits here
            // (and nobody reads on), and the peer's writes stop at its full
            // socket.
            if tokio::time::timeout(stall, core.writer.ready()).await.is_err() {
                break Err(FrameError::new(
                    Code::ResourceExhausted,
                    format!("the peer has not read our last frames for {stall:?} (write queue over its cap)"),
                ));
            }
            let mut g = core.read.lock();
            let st = g.as_mut().expect("the reader's state is installed");
            let frame = st.held.take().expect("held");
            match dispatch(core, service.as_ref(), frame) {
                Ok(woke) => delivered |= woke,
                Err(e) => {
                    st.ended = true;
                    break Err(e);
                }
            }
            continue;
        };
        match read_more(core, &mut delivered, inside).await {
            Read::Bytes(Ok(n)) if n > 0 => {}
            Read::Bytes(r) => {
                let mut g = core.read.lock();
                let st = g.as_mut().expect("the reader's state is installed");
                // A bad frame a caller found meanwhile comes first.
                let stop = st.stop.take().unwrap_or(Stop::Read(r));
                let r = stopped(st, stop);
                st.ended = true;
                break r;
            }
            // A caller's read left something for us (`read_state.rs`).
            Read::News => {}
        }
    };
    // Nobody reads on: not a caller either (after a bad frame, what the
    // peer still sends is discarded while the GOAWAY leaves).
    core.read.install(None);
    match reason {
        Ok(why) => core.die(Error::unavailable(why)),
        Err(e) => fail_protocol(core, e).await,
    }
}

/// Why reading ended: `Ok` with why the connection is gone, or the
/// protocol error to close it with.
fn stopped(st: &ReadState, stop: Stop) -> Result<String, FrameError> {
    match stop {
        Stop::Read(Ok(_)) => match st.decoder.finish(&st.buf) {
            Ok(()) => Ok("connection closed by peer (end of stream)".into()),
            Err(e) => Err(e),
        },
        Stop::Read(Err(e)) => Ok(format!("connection lost: read failed: {e}")),
        Stop::Bad(e) => Err(e),
    }
}

/// After the frames of a read were dispatched: descriptors that came with
/// them and were not taken are closed (§11.4.2), and the buffer gets room
/// for the next read.
pub(super) fn ready_for_more(core: &Core, st: &mut ReadState) {
    core.transport.settle_fds(st.buf.len());
    reserve_reusing(&st.decoder, &mut st.buf, &mut st.reuse);
}

/// Who dispatches a read's frames.
pub(super) enum Dispatcher<'a> {
    /// The reader task, which serves the peer's calls with its service.
    Reader(Option<&'a Arc<dyn Service>>),
    /// A caller reading its own answer (`own_read.rs`): a REQUEST is held
    /// for the reader task, the one that serves.
    Caller,
}

/// Dispatches every complete frame in the state's buffer, up to a REQUEST
/// or PING that arrives while the write queue is over its cap, or a
/// REQUEST a caller read: that one is returned, for the reader task to
/// dispatch (once the queue drains).
pub(super) fn dispatch_all(
    core: &Arc<Core>,
    st: &mut ReadState,
    by: Dispatcher<'_>,
    delivered: &mut bool,
) -> Result<Option<Frame>, FrameError> {
    let ReadState { buf, decoder, run, .. } = st;
    let mut cork = Cork { core, on: false, requests: 0 };
    loop {
        let frame = match decoder.decode(buf) {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                // What came before the bad frame is delivered, as it would
                // have been frame by frame.
                flush(run, core)?;
                return Err(e);
            }
        };
        if let Frame::Item { call_id, codec, payload } = frame {
            if call_id != run.id {
                flush(run, core)?;
                run.id = call_id;
            }
            run.items.push(Payload { codec, bytes: payload });
            *delivered = true;
            continue;
        }
        flush(run, core)?;
        if matches!(frame, Frame::Request { .. } | Frame::Ping { .. }) && core.writer.over_cap() {
            return Ok(Some(frame));
        }
        let service = match by {
            Dispatcher::Reader(service) => service,
            Dispatcher::Caller if matches!(frame, Frame::Request { .. }) => return Ok(Some(frame)),
            Dispatcher::Caller => None,
        };
        let marker = matches!(frame, Frame::Upgraded { .. });
        cork.before(&frame);
        *delivered |= dispatch(core, service, frame)?;
        if marker {
            super::upgrade::after_marker(core, buf)?;
        }
    }
    flush(run, core)?;
    Ok(None)
}

/// Holds the writer's inline flushes back while the frames of one read are
/// dispatched, from the first frame whose dispatch may send something at
/// once (a REQUEST whose handler finishes at once, a PING), so that what
/// they send leaves in one write when it is dropped. A read that brings
/// only answers, items and credit (a caller reading its own answer) does
/// not touch the writer: two locks saved on the path of one call in
/// flight.
///
/// It also counts the REQUESTs of the read: the peer has at least that many
/// calls in flight, which sizes the writer's next batches of answers
/// ([`Core::size_batches`]).
struct Cork<'a> {
    core: &'a Core,
    on: bool,
    requests: usize,
}

impl Cork<'_> {
    fn before(&mut self, frame: &Frame) {
        self.requests += matches!(frame, Frame::Request { .. }) as usize;
        if !self.on && !matches!(frame, Frame::Response { .. } | Frame::Item { .. } | Frame::Credit { .. }) {
            self.core.writer.cork();
            self.on = true;
        }
    }
}

impl Drop for Cork<'_> {
    fn drop(&mut self) {
        if self.on {
            if self.requests > 1 {
                self.core.size_batches(self.requests);
            }
            self.core.writer.uncork();
        }
    }
}

/// Hands the run of ITEMs gathered so far (`ItemRun`) to its stream:
/// consecutive ITEMs of one call from one read go over together, one
/// look-up in the call table, one lock of the stream's inbox and at most
/// one wake-up for the run instead of one each. A frame of any other kind,
/// or an ITEM of another call, flushes it first, so frames still take
/// effect in the order they came.
fn flush(run: &mut ItemRun, core: &Arc<Core>) -> Result<(), FrameError> {
    if run.items.is_empty() {
        return Ok(());
    }
    let r = on_items(core, run.id, &mut run.items);
    run.items.clear();
    r
}

/// Our side found the peer's bytes bad: GOAWAY with the error, then close
/// (`spec/PROTOCOL.md` §7.1): the pending calls fail once the GOAWAY has
/// left, and the transport lingers (§7.3) before [`run`] releases it.
async fn fail_protocol(core: &Core, e: FrameError) {
    tracing::warn!(peer = %core.transport.describe(), "closing connection: {e}");
    let last_id = core.calls.lock().unwrap().last_peer_id;
    if core.send(&Frame::Goaway { last_id, code: e.code, message: e.message.clone() }).is_ok() {
        let _ = tokio::time::timeout(GOAWAY_FLUSH, core.writer.flushed()).await;
    }
    if core.end(Error::unavailable(format!("connection closed: sent GOAWAY {e}"))) {
        linger(&*core.transport).await;
    }
}

/// After a fatal GOAWAY has been written (§7.3): shuts down our sending
/// side only, then reads and discards what the peer still sends until end
/// of stream, an error, [`LINGER_BYTES`] or [`LINGER_TIME`], whichever
/// comes first, so that closing with unread input does not make the kernel
/// reset the connection before the peer has read the GOAWAY. The caller
/// releases the transport afterwards.
pub(crate) async fn linger(t: &dyn Transport) {
    t.shutdown_write();
    let mut sink = BytesMut::with_capacity(READ_CHUNK);
    let mut left = LINGER_BYTES;
    let _ = tokio::time::timeout(LINGER_TIME, async {
        while left > 0 {
            sink.clear();
            match poll_fn(|cx| t.poll_read(cx, &mut sink)).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

/// Reads at least one byte (or end of stream), waiting as the mode says.
///
/// In efficient mode it reads through `poll_read` alone. A `try_read`
/// first would cost a `recv` that finds nothing (the peer has not answered
/// yet) and leaves the reactor's cached readiness set, so `poll_read` would
/// then make a second one before it waits. `poll_read` itself makes none
/// after a short read, which clears the readiness (`transport/fd.rs`):
/// one `recv` per wake-up.
///
/// In low-latency mode each spin is a `recv` that returns `EAGAIN`
/// (~0.19 µs on the 2-vCPU VM of issue 15). Nothing cheaper tells a Unix
/// socket's reader that bytes came: `poll` with a zero timeout costs the
/// same (~0.18 µs), `epoll_wait` with a zero timeout on a set of its own
/// ~0.12 µs, and the runtime's readiness is only refreshed by its reactor,
/// which does not run while this task spins. A cheaper probe would not
/// shorten the spin either (it lasts until bytes come or `spin` ends);
/// it would only make more probes, so the `recv` stays: it also takes
/// the bytes in the same call.
async fn read_more(core: &Core, delivered: &mut bool, inside: bool) -> Read {
    let t = &*core.transport;
    loop {
        // After waking other tasks (a caller, a handler), do not spin: they
        // need this worker. Wait below until one of them sends a request
        // (the kick) or bytes arrive; `poll_read` reads at once what the
        // reactor already saw, and after a short read it waits without the
        // `recv` that would find nothing (one system call per wake-up, the
        // same as efficient mode). The same while our writer waits for room
        // in a shared ring, and inside a large frame (`inside`, see
        // `read_frames`). Otherwise spin first.
        if !std::mem::take(delivered) && !inside && !core.ring_write_waits() {
            let mut g = core.read.lock();
            let st = g.as_mut().expect("the reader's state is installed");
            if st.left_for_reader() {
                // Left by a caller since this task let go.
                return Read::News;
            }
            if let Some(r) = st.spin_read(t) {
                return Read::Bytes(r);
            }
        }
        // The state is let go between polls: a caller waiting alone for its
        // answer may read meanwhile (`read_state.rs`).
        let r = poll_fn(|cx| {
            let mut g = ready!(core.read.poll_lock(cx));
            let st = g.as_mut().expect("the reader's state is installed");
            if st.left_for_reader() {
                return Poll::Ready(Some(Read::News));
            }
            if st.spinner.may_spin() && core.kick.poll(cx) {
                return Poll::Ready(None);
            }
            match t.poll_read(cx, &mut st.buf) {
                Poll::Ready(r) => Poll::Ready(Some(Read::Bytes(r))),
                Poll::Pending => {
                    st.park_reader(cx);
                    Poll::Pending
                }
            }
        })
        .await;
        if let Some(r) = r {
            return r;
        }
    }
}

/// What [`read_more`] brings.
enum Read {
    /// Bytes read (`Ok(0)`: end of stream), or the read's error.
    Bytes(io::Result<usize>),
    /// A caller's read left a stop or a held frame in the state.
    News,
}

/// Routes one frame; true if that woke another task (which then needs
/// this worker more than the reader's spin does). An error is a protocol
/// error: the connection closes.
fn dispatch(core: &Arc<Core>, service: Option<&Arc<dyn Service>>, frame: Frame) -> Result<bool, FrameError> {
    match frame {
        Frame::Request { call_id, kind, codec, timeout_ms, method, payload } => {
            serve::on_request(core, service, call_id, kind, timeout_ms, method, Payload { codec, bytes: payload })
        }
        Frame::Ping { data } => {
            let _ = core.send(&Frame::Pong { data });
            Ok(false)
        }
        other => route(core, other).map(|()| true),
    }
}

/// Routes a frame that belongs to a call or waiter.
fn route(core: &Arc<Core>, frame: Frame) -> Result<(), FrameError> {
    match frame {
        Frame::Request { .. } | Frame::Ping { .. } => unreachable!("handled by dispatch"),
        Frame::Item { .. } => unreachable!("handled by dispatch_all, in runs"),
        Frame::Response { call_id, codec, code, message, payload } => {
            let payload = Payload { codec, bytes: payload };
            core.answer(
                call_id,
                match code {
                    Code::Ok => Ok(payload),
                    Code::Failure => Err(Error::with_detail(code, message, Some(payload))),
                    _ => Err(Error::with_detail(code, message, None)),
                },
            );
            Ok(())
        }
        Frame::End { call_id } => {
            let mut st = core.calls.lock().unwrap();
            if let Some(s) = st.served.get_mut(&call_id) {
                if let Some(tx) = s.items.take() {
                    let _ = tx.send(Event::End(Ok(None)));
                }
            }
            Ok(())
        }
        Frame::Cancel { call_id } => {
            let s = core.calls.lock().unwrap().served.remove(&call_id);
            if let Some(s) = s {
                s.cancel();
            }
            Ok(())
        }
        Frame::Credit { call_id, credit } => {
            let st = core.calls.lock().unwrap();
            let sem = if core.ours(call_id) {
                st.out.get(call_id).and_then(|c| c.send_credit.clone())
            } else {
                st.served.get(&call_id).and_then(|s| s.send_credit.clone())
            };
            if let Some(sem) = sem {
                // Credit saturates at 2^32 - 1 (§8): a peer that keeps granting
                // can neither wrap the count nor reach the semaphore's own
                // maximum (which panics). Sends only lower the count meanwhile.
                let room = (u32::MAX as usize).saturating_sub(sem.available_permits());
                sem.add_permits((credit as usize).min(room));
            }
            Ok(())
        }
        Frame::Pong { data } => {
            let tx = core.calls.lock().unwrap().pings.remove(&u64::from_le_bytes(data));
            if let Some(tx) = tx {
                let _ = tx.send(());
            }
            Ok(())
        }
        Frame::Goaway { last_id, code, message } => on_goaway(core, last_id, code, message),
        Frame::Hello(_) => Err(FrameError::protocol("unexpected second HELLO")),
        f @ (Frame::Direct(_) | Frame::Accept(_)) => {
            super::direct::on_frame(core, f);
            Ok(())
        }
        frame @ (Frame::Upgrade { .. } | Frame::Upgraded { .. }) => super::upgrade::on_frame(core, frame),
    }
}

/// Hands a run of ITEMs of call `id` to its stream, within the credit this
/// side granted; `items` is left empty. An ITEM beyond the credit fails
/// the call (`resource_exhausted`), after the ones within it.
fn on_items(core: &Arc<Core>, id: u32, items: &mut Vec<Payload>) -> Result<(), FrameError> {
    let overrun = || Error::new(Code::ResourceExhausted, format!("call {id}: ITEM beyond the flow-control credit granted"));
    let n = items.len() as u32;
    if core.ours(id) {
        let mut st = core.calls.lock().unwrap();
        let Some(call) = st.out.get(id) else { return Ok(()) };
        let (OutSink::Stream(tx), Some(window)) = (&call.sink, &call.recv) else {
            return Err(FrameError::protocol(format!("ITEM for call {id}, which has no stream from the callee")));
        };
        let within = window.on_items(n);
        deliver(&core.backlog, tx, items.drain(..within as usize));
        if within == n {
            return Ok(());
        }
        let call = st.out.remove(id).expect("present");
        let settled = st.settle(call, Err(overrun()));
        drop(st);
        settled.run();
        let _ = core.send(&Frame::Cancel { call_id: id });
    } else {
        let mut st = core.calls.lock().unwrap();
        let Some(served) = st.served.get(&id) else { return Ok(()) };
        let Some(window) = &served.recv else {
            return Err(FrameError::protocol(format!("ITEM for call {id}, which takes no stream from the caller")));
        };
        let within = window.on_items(n);
        if let Some(tx) = &served.items {
            deliver(&core.backlog, tx, items.drain(..within as usize));
        }
        if within == n {
            return Ok(());
        }
        let served: Served = st.served.remove(&id).expect("present");
        // Out of the table, answering until its RESPONSE is queued (a
        // drain must not close in between).
        core.answering.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        drop(st);
        served.cancel();
        core.answer_served(id, Err(overrun()), false);
    }
    Ok(())
}

fn on_goaway(core: &Arc<Core>, last_id: u32, code: Code, message: String) -> Result<(), FrameError> {
    if code != Code::Ok {
        core.die(Error::unavailable(format!("connection closed: peer sent GOAWAY {code}: {message}")));
        return Ok(());
    }
    // The peer drains: calls it never saw fail now (safe to retry).
    let unseen: Vec<_> = {
        let mut st = core.calls.lock().unwrap();
        st.peer_draining = true;
        let ids: Vec<u32> = st.out.ids().filter(|&id| hubwire_frame::id_after(id, last_id)).collect();
        let err = Error::unavailable("peer is draining (GOAWAY) and never saw this call; safe to retry");
        let calls: Vec<_> = ids.into_iter().filter_map(|id| st.out.remove(id)).collect();
        calls.into_iter().map(|c| st.settle(c, Err(err.clone()))).collect()
    };
    for settled in unseen {
        settled.run();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A REQUEST header (`spec/PROTOCOL.md` §3) announcing `body` bytes.
    fn header(body: u32) -> BytesMut {
        let mut b = BytesMut::new();
        b.extend_from_slice(&body.to_le_bytes());
        b.extend_from_slice(&[1, 0x02, 0, 0]);
        b.extend_from_slice(&1u32.to_le_bytes());
        b
    }

    #[test]
    fn a_large_frame_gets_one_buffer_of_its_size_and_keeps_it() {
        let decoder = Decoder::new(16 << 20);
        let body = (16 << 20) - 64;
        let mut buf = header(body);
        buf.extend_from_slice(&[0; 64 * 1024]);
        reserve(&decoder, &mut buf);
        assert_eq!(buf.capacity(), 12 + body as usize, "the frame's buffer is sized from its header");
        let at = buf.as_ptr();
        // Reads fill it in place: no reserve before the frame is whole
        // (the reader then splits it off) moves it.
        loop {
            let free = buf.capacity() - buf.len();
            buf.extend_from_slice(&vec![0; free.min(200 * 1024)]);
            if buf.len() == 12 + body as usize {
                break;
            }
            reserve(&decoder, &mut buf);
            assert_eq!(buf.as_ptr(), at, "moved at {}", buf.len());
        }
        assert_eq!(buf.capacity(), 12 + body as usize);
    }

    #[test]
    fn small_frames_get_a_read_chunk() {
        let decoder = Decoder::new(16 << 20);
        let mut buf = header(100);
        reserve(&decoder, &mut buf);
        assert!(buf.capacity() - buf.len() >= 4096);
    }
}
