//! A connection: one transport, one handshake, many calls.
//!
//! [`Connection::dial`] and [`Connection::accept`] exchange HELLOs
//! (`spec/PROTOCOL.md` §4), then start the connection's one reader task
//! (`reader.rs`). Frames are sent through the shared [`Writer`]. When the
//! connection dies for any reason, [`Inner::die`] fails every pending call
//! at once with `unavailable` and says why.

use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hubwire_frame::frame::{encode_item_head, encode_request_head, encode_response_head, request_body_len};
use hubwire_frame::{negotiate, Codec, Decoder, Frame, FrameError, Hello, Kind, PeerInfo, DEFAULT_MAX_FRAME};
use tokio::sync::{watch, Notify, Semaphore};

use crate::calls::State;
use crate::transport::{DynTransport, Transport};
use crate::wait::WaitMode;
use crate::writer::Writer;
use crate::{Code, Error, Provider};

/// Bytes asked of the transport per read.
pub(crate) const READ_CHUNK: usize = 64 * 1024;

/// How a connection presents itself and what limits it sets.
#[derive(Clone)]
pub struct Config {
    /// Our name in the peer's logs and listings.
    pub name: String,
    /// How the reader waits for bytes.
    pub wait: WaitMode,
    /// The largest frame body we accept.
    pub max_frame: u32,
    /// Initial credit we grant per incoming stream.
    pub window: u32,
    /// Calls we serve at once before answering `resource_exhausted`.
    pub max_calls: u32,
    /// How long to wait for the peer's HELLO.
    pub handshake_timeout: Duration,
    /// The methods we offer, if any.
    pub provider: Option<Arc<Provider>>,
}

impl Config {
    /// Defaults: efficient waiting (or `HUBWIRE_WAIT`), 16 MiB frames,
    /// window 64, 4096 calls, 10 s handshake.
    pub fn new(name: impl Into<String>) -> Config {
        Config {
            name: name.into(),
            wait: WaitMode::from_env().unwrap_or_default(),
            max_frame: DEFAULT_MAX_FRAME,
            window: hubwire_frame::hello::DEFAULT_WINDOW,
            max_calls: hubwire_frame::hello::DEFAULT_MAX_CALLS,
            handshake_timeout: Duration::from_secs(10),
            provider: None,
        }
    }

    /// Sets the waiting mode.
    pub fn wait(mut self, wait: WaitMode) -> Config {
        self.wait = wait;
        self
    }

    /// Sets the frame limit.
    pub fn max_frame(mut self, n: u32) -> Config {
        self.max_frame = n;
        self
    }

    /// Sets the per-stream window.
    pub fn window(mut self, n: u32) -> Config {
        self.window = n.max(1);
        self
    }

    /// Sets the concurrent-call limit.
    pub fn max_calls(mut self, n: u32) -> Config {
        self.max_calls = n.max(1);
        self
    }

    /// Offers `provider`'s methods on the connection.
    pub fn provider(mut self, provider: Provider) -> Config {
        self.provider = Some(Arc::new(provider));
        self
    }

    fn hello(&self) -> Hello {
        let mut h = Hello::new(PeerInfo { name: self.name.clone(), lang: "rust".into(), version: env!("CARGO_PKG_VERSION").into() });
        h.max_frame = self.max_frame;
        h.window = self.window;
        h.max_calls = self.max_calls;
        if let Some(p) = &self.provider {
            h.methods = p.method_infos();
        }
        h
    }
}

/// A live connection to a peer. Cheap to clone; the connection closes when
/// the last clone is dropped (or on [`Connection::close`]).
#[derive(Clone)]
pub struct Connection {
    pub(crate) handle: Arc<Handle>,
}

pub(crate) struct Handle {
    pub(crate) inner: Arc<Inner>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.inner.die(Error::unavailable("connection dropped by its owner"));
    }
}

/// Wakes a reader blocked in the reactor so that it spins again: sent after
/// a request in low-latency mode, because a response is now expected.
#[derive(Default)]
pub(crate) struct Kick {
    flag: std::sync::atomic::AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Kick {
    pub(crate) fn kick(&self) {
        use std::sync::atomic::Ordering::*;
        if !self.flag.swap(true, AcqRel) {
            if let Some(w) = self.waker.lock().unwrap().take() {
                w.wake();
            }
        }
    }

    /// True if kicked since the last call; otherwise registers the waker.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> bool {
        use std::sync::atomic::Ordering::*;
        if self.flag.swap(false, AcqRel) {
            return true;
        }
        *self.waker.lock().unwrap() = Some(cx.waker().clone());
        self.flag.swap(false, AcqRel)
    }
}

/// The shared core of a connection, held by its reader, its handlers and
/// every [`Connection`] clone.
pub(crate) struct Inner {
    pub(crate) transport: DynTransport,
    pub(crate) writer: Arc<Writer>,
    pub(crate) state: Mutex<State>,
    pub(crate) peer: Arc<Hello>,
    pub(crate) local: Hello,
    pub(crate) config: Config,
    pub(crate) dialer: bool,
    /// Our outgoing calls in flight, bounded by the peer's `max_calls`.
    pub(crate) gate: Arc<Semaphore>,
    pub(crate) kick: Kick,
    pub(crate) low_latency: bool,
    pub(crate) closed: watch::Sender<Option<Error>>,
    /// Signalled when a draining connection runs out of calls.
    pub(crate) idle: Notify,
}

impl Connection {
    /// Opens the connection as the dialer (odd call ids): sends our HELLO,
    /// reads the peer's, negotiates the version.
    pub async fn dial(transport: impl Transport, config: &Config) -> Result<Connection, Error> {
        Connection::start(Arc::new(transport), config, true).await
    }

    /// Opens the connection as the acceptor (even call ids).
    pub async fn accept(transport: impl Transport, config: &Config) -> Result<Connection, Error> {
        Connection::start(Arc::new(transport), config, false).await
    }

    /// [`Connection::dial`] or [`Connection::accept`] over a shared transport.
    pub async fn start(transport: DynTransport, config: &Config, dialer: bool) -> Result<Connection, Error> {
        let writer = Writer::new(transport.clone());
        let local = config.hello();
        let (peer, buf, version) = handshake(&transport, &writer, &local, config).await?;
        let mut decoder = Decoder::new(config.max_frame);
        decoder.set_version(version as u8);
        let inner = Arc::new(Inner {
            transport,
            writer,
            state: Mutex::new(State::new(dialer)),
            gate: Arc::new(Semaphore::new(peer.max_calls as usize)),
            peer: Arc::new(peer),
            local,
            low_latency: matches!(config.wait, WaitMode::LowLatency { .. }),
            config: config.clone(),
            dialer,
            kick: Kick::default(),
            closed: watch::channel(None).0,
            idle: Notify::new(),
        });
        tokio::spawn(crate::reader::run(inner.clone(), buf, decoder));
        Ok(Connection { handle: Arc::new(Handle { inner }) })
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.handle.inner
    }

    /// The peer's HELLO: its identity, limits and methods.
    pub fn peer(&self) -> &Hello {
        &self.inner().peer
    }

    /// Where the connection goes, for logs.
    pub fn describe(&self) -> String {
        self.inner().transport.describe()
    }

    /// Whether the connection has died.
    pub fn is_closed(&self) -> bool {
        // The call state, not the `closed` watch: `die` marks the state
        // first and tells watchers last, and a call refused in between must
        // not see an open connection.
        self.inner().state.lock().unwrap().closed.is_some()
    }

    /// Whether the peer has sent GOAWAY: it finishes the calls it has but
    /// takes no new ones, so new calls belong elsewhere.
    pub fn is_draining(&self) -> bool {
        self.inner().state.lock().unwrap().peer_draining
    }

    /// Waits until the connection dies; returns why.
    pub async fn closed(&self) -> Error {
        let mut rx = self.inner().closed.subscribe();
        loop {
            if let Some(e) = rx.borrow_and_update().clone() {
                return e;
            }
            if rx.changed().await.is_err() {
                return Error::unavailable("connection closed");
            }
        }
    }

    /// Round-trip time of a PING.
    pub async fn ping(&self) -> Result<Duration, Error> {
        let inner = self.inner();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let seq = {
            let mut st = inner.state.lock().unwrap();
            if let Some(e) = &st.closed {
                return Err(e.clone());
            }
            st.ping_seq += 1;
            let seq = st.ping_seq;
            st.pings.insert(seq, tx);
            seq
        };
        let start = std::time::Instant::now();
        inner.send(&Frame::Ping { data: seq.to_le_bytes() })?;
        inner.kick();
        rx.await.map_err(|_| inner.closed_error())?;
        Ok(start.elapsed())
    }

    /// Drains and closes: sends GOAWAY `ok`, refuses new calls, waits up to
    /// `grace` for calls in flight either way, then closes.
    pub async fn close(&self, grace: Duration) {
        let inner = self.inner();
        let last = {
            let mut st = inner.state.lock().unwrap();
            st.draining = true;
            st.last_peer_id
        };
        let _ = inner.send(&Frame::Goaway { last_id: last, code: Code::Ok, message: "closing".into() });
        let _ = tokio::time::timeout(grace, async {
            loop {
                let notified = inner.idle.notified();
                if inner.state.lock().unwrap().idle() {
                    return;
                }
                notified.await;
            }
        })
        .await;
        let _ = tokio::time::timeout(Duration::from_millis(100), inner.writer.flushed()).await;
        inner.die(Error::unavailable("connection closed locally"));
    }
}

/// Sends our HELLO and reads the peer's. Returns the peer's HELLO, the
/// bytes read past it, and the negotiated version.
async fn handshake(t: &DynTransport, writer: &Writer, local: &Hello, config: &Config) -> Result<(Hello, BytesMut, u32), Error> {
    let hello = Frame::Hello(Box::new(local.clone())).to_bytes();
    writer.push(|_| {}, &hello).map_err(Error::unavailable)?;
    let decoder = Decoder::new(config.max_frame);
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let first = tokio::time::timeout(config.handshake_timeout, async {
        loop {
            if let Some(f) = decoder.decode(&mut buf)? {
                return Ok(f);
            }
            reserve(&decoder, &mut buf);
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
    let refuse = |e: FrameError| async move {
        if e.code != Code::Unavailable {
            let _ = writer.push(|_| {}, &Frame::Goaway { last_id: 0, code: e.code, message: e.message.clone() }.to_bytes());
            let _ = tokio::time::timeout(Duration::from_millis(100), writer.flushed()).await;
        }
        writer.close(&e.message);
        t.shutdown();
        Error::from(e)
    };
    let frame = match first {
        Err(_) => {
            return Err(refuse(FrameError::new(
                Code::DeadlineExceeded,
                format!("no HELLO from {} within {:?}", t.describe(), config.handshake_timeout),
            ))
            .await)
        }
        Ok(Err(e)) => return Err(refuse(e).await),
        Ok(Ok(f)) => f,
    };
    match frame {
        Frame::Hello(peer) => match negotiate(&local.versions, &peer.versions) {
            Ok(v) => Ok((*peer, buf, v)),
            Err(e) => Err(refuse(e).await),
        },
        Frame::Goaway { code, message, .. } => {
            writer.close(&message);
            t.shutdown();
            Err(Error::new(code, format!("peer refused the handshake: {message}")))
        }
        other => Err(refuse(FrameError::protocol(format!("expected HELLO as the first frame, got {:?}", other.frame_type()))).await),
    }
}

/// Makes room in `buf` for the next read: at least a chunk, and the whole
/// of a frame whose header is already buffered.
pub(crate) fn reserve(decoder: &Decoder, buf: &mut BytesMut) {
    let want = match decoder.check(buf) {
        Ok(Some(n)) if n > buf.len() => (n - buf.len()).max(4096),
        _ => 4096,
    };
    if buf.capacity() - buf.len() < want {
        buf.reserve(want.max(READ_CHUNK));
    }
}

impl Inner {
    /// Whether `id` is of our parity: a call we started.
    pub(crate) fn ours(&self, id: u32) -> bool {
        (id % 2 == 1) == self.dialer
    }

    pub(crate) fn closed_error(&self) -> Error {
        self.state.lock().unwrap().closed.clone().unwrap_or_else(|| Error::unavailable("connection closed"))
    }

    fn push(&self, head: impl FnOnce(&mut BytesMut), payload: &Bytes) -> Result<(), Error> {
        self.writer.push(head, payload).map_err(|r| Error::unavailable(format!("connection closed: {r}")))
    }

    /// Sends a frame without a large payload.
    pub(crate) fn send(&self, frame: &Frame) -> Result<(), Error> {
        self.push(|b| frame.encode(b), &Bytes::new())
    }

    /// Sends a REQUEST; `soon` when other calls are in flight (see
    /// [`Writer::push_soon`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_request(
        &self,
        id: u32,
        kind: Kind,
        codec: Codec,
        timeout_ms: u32,
        method: &str,
        payload: &Bytes,
        soon: bool,
    ) -> Result<(), Error> {
        let head = |b: &mut BytesMut| encode_request_head(b, id, kind, codec, timeout_ms, method, payload.len());
        let r = if soon { self.writer.push_soon(head, payload) } else { self.writer.push(head, payload) };
        r.map_err(|r| {
            // The writer closes on a failed write before the reader sees the
            // peer go: end the connection now, so that `is_closed` and the
            // other calls agree with the error this call gets.
            let e = Error::unavailable(format!("connection closed: {r}"));
            self.die(e.clone());
            e
        })
    }

    /// Sends a RESPONSE; `soon` when other served calls are in flight.
    pub(crate) fn send_response(&self, id: u32, result: Result<Option<crate::Payload>, Error>, soon: bool) {
        let (codec, code, message, payload) = match result {
            Ok(Some(p)) => (p.codec, Code::Ok, String::new(), p.bytes),
            Ok(None) => (Codec::Raw, Code::Ok, String::new(), Bytes::new()),
            Err(e) => {
                let (codec, bytes) = e.detail_bytes();
                (codec, e.code(), e.message().to_string(), bytes)
            }
        };
        let body = hubwire_frame::frame::response_body_len(&message, payload.len());
        if body > self.peer.max_frame as usize {
            let msg = format!("response of {body} bytes exceeds the caller's max_frame of {} bytes", self.peer.max_frame);
            let _ = self.push(|b| encode_response_head(b, id, Codec::Raw, Code::TooLarge, &msg, 0), &Bytes::new());
            return;
        }
        let head = |b: &mut BytesMut| encode_response_head(b, id, codec, code, &message, payload.len());
        let _ = if soon { self.writer.push_soon(head, &payload) } else { self.writer.push(head, &payload) };
    }

    pub(crate) fn send_item(&self, id: u32, codec: Codec, payload: &Bytes) -> Result<(), Error> {
        self.push(|b| encode_item_head(b, id, codec, payload.len()), payload)
    }

    /// Checks a payload against the peer's frame limit.
    pub(crate) fn check_size(&self, body_len: usize, what: &str) -> Result<(), Error> {
        if body_len > self.peer.max_frame as usize {
            return Err(Error::new(
                Code::TooLarge,
                format!("{what} of {body_len} bytes exceeds the peer's max_frame of {} bytes", self.peer.max_frame),
            ));
        }
        Ok(())
    }

    pub(crate) fn request_size(&self, method: &str, payload: usize) -> Result<(), Error> {
        if method.is_empty() || method.len() > 255 {
            return Err(Error::invalid_argument(format!("method name must be 1-255 bytes, got {}", method.len())));
        }
        self.check_size(request_body_len(method, payload), "request")
    }

    /// In low-latency mode, makes the reader spin: an answer is expected.
    pub(crate) fn kick(&self) {
        if self.low_latency {
            self.kick.kick();
        }
    }

    /// Abandons a call we started: forgets it and sends CANCEL, if it was
    /// still pending.
    pub(crate) fn cancel_out(&self, id: u32) {
        let call = {
            let mut st = self.state.lock().unwrap();
            let c = st.out.remove(&id);
            if c.is_some() && st.draining && st.idle() {
                self.idle.notify_waiters();
            }
            c
        };
        if let Some(call) = call {
            if let Some(c) = &call.send_credit {
                c.close();
            }
            let _ = self.send(&Frame::Cancel { call_id: id });
        }
    }

    /// Ends the connection: fails every pending call with `err`, stops
    /// every handler, closes the transport. Idempotent.
    pub(crate) fn die(&self, err: Error) {
        let (out, served, pings) = {
            let mut st = self.state.lock().unwrap();
            if st.closed.is_some() {
                return;
            }
            st.closed = Some(err.clone());
            (std::mem::take(&mut st.out), std::mem::take(&mut st.served), std::mem::take(&mut st.pings))
        };
        for (_, call) in out {
            call.finish(Err(err.clone()));
        }
        for (_, s) in served {
            s.cancel();
        }
        drop(pings);
        self.gate.close();
        self.writer.close(err.message());
        self.transport.shutdown();
        self.idle.notify_waiters();
        self.closed.send_replace(Some(err));
    }
}
