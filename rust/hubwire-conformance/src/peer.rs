//! The runner's side of the wire: a raw peer that sends exactly the bytes
//! a case says and reads back frames one by one, with no protocol logic of
//! its own beyond answering PING and, once a case has agreed an upgrade
//! to shared memory (`spec/PROTOCOL.md` §11.4), moving each direction to
//! its ring at its marker.

use std::future::poll_fn;
use std::io::IoSlice;
use std::time::Duration;

use std::sync::Arc;

use bytes::BytesMut;
use hubwire::transport::shm::link::Link;
use hubwire::transport::shm::Ladder;
use hubwire::transport::{DynTransport, Transport};
use hubwire_frame::{Code, Decoder, Frame};

/// What reading produced.
pub enum Read {
    /// A frame.
    Frame(Frame),
    /// The testee closed the connection.
    Closed,
    /// Nothing within the time given.
    Timeout,
}

/// How long a send waits for the testee to take more bytes before it gives
/// up on the rest (the testee stopped reading).
pub const SEND_STALL: Duration = Duration::from_secs(3);

/// The most descriptors the runner keeps from the testee: an offer's five
/// (§11.4.2).
const OFFER_FDS: usize = 5;

/// A raw connection to the testee.
pub struct Peer {
    /// What the runner reads and writes: the socket, or the [`Ladder`]
    /// over it when descriptors can pass (a Unix socket).
    t: DynTransport,
    /// The socket itself, to close it alone (a process killed after the
    /// switch leaves its ring open, §11.4.1 Liveness).
    socket: DynTransport,
    ladder: Option<Arc<Ladder>>,
    /// An upgrade agreed by a step: whether the runner is its dialer
    /// (it then sends its own marker on reading the testee's).
    upgrading: Option<bool>,
    buf: BytesMut,
    decoder: Decoder,
    eof: bool,
    /// The read error that ended the connection, if it was not a clean
    /// end of stream (a NATS link that broke on silence, a reset).
    read_error: Option<String>,
    /// A send gave up because the testee stopped reading for [`SEND_STALL`].
    stalled: std::sync::atomic::AtomicBool,
}

impl Peer {
    /// Wraps the runner's end of a connection.
    pub fn new(socket: DynTransport) -> Peer {
        // On a Unix socket the connection may move to shared memory; the
        // descriptors of an offer the testee sends are kept (§11.4.2).
        let ladder = socket.passes_fds().then(|| Arc::new(Ladder::new(socket.clone())));
        let t: DynTransport = match &ladder {
            Some(l) => {
                l.accept_fds(OFFER_FDS);
                l.clone()
            }
            None => socket.clone(),
        };
        // The runner accepts any size the testee sends: checking limits is
        // the cases' business, not the reader's.
        Peer {
            t,
            socket,
            ladder,
            upgrading: None,
            buf: BytesMut::with_capacity(64 * 1024),
            decoder: Decoder::new(u32::MAX),
            eof: false,
            read_error: None,
            stalled: Default::default(),
        }
    }

    /// Attaches the shared memory of an upgrade a step agreed: the runner
    /// as its `dialer` (it offered) or acceptor. Each direction moves to
    /// the ring at its marker: reads on [`Peer::read`] of the testee's
    /// UPGRADED `ok`; writes after the runner's own (sent there by a
    /// dialer, by [`Peer::switch_write`] by an acceptor).
    pub fn attach(&mut self, link: Link, dialer: bool) -> Result<(), String> {
        let ladder = self.ladder.as_ref().ok_or("no shared memory off a Unix socket")?;
        ladder.attach(link);
        self.upgrading = Some(dialer);
        Ok(())
    }

    /// Sends the runner's UPGRADED `ok`, its last frame on the socket, and
    /// moves its writes to the ring.
    pub async fn switch_write(&self) -> Result<(), String> {
        self.send(&Frame::Upgraded { code: Code::Ok, message: String::new() }.to_bytes()).await?;
        self.ladder.as_ref().ok_or("no shared memory")?.switch_write();
        Ok(())
    }

    /// Whether both directions are on shared memory.
    pub fn on_shm(&self) -> bool {
        self.ladder.as_ref().is_some_and(|l| l.on_shm())
    }

    /// The oldest descriptor the testee sent that no step took yet.
    pub fn take_fd(&self) -> Option<std::os::fd::OwnedFd> {
        self.t.take_fd()
    }

    /// Closes the socket alone, as the kernel does for a killed process:
    /// after an upgrade the runner's ring stays open, unclosed.
    pub fn close_socket(&self) {
        self.socket.shutdown();
    }

    /// After the testee's UPGRADED `ok`: its later bytes come in its ring
    /// (nothing may follow on the socket), and a dialer's own marker goes.
    async fn on_marker(&mut self) -> Result<(), String> {
        let (Some(ladder), Some(dialer)) = (&self.ladder, self.upgrading) else { return Ok(()) };
        if ladder.reads_ring() {
            return Ok(());
        }
        if !self.buf.is_empty() {
            return Err(format!("{} bytes on the socket after the testee's UPGRADED ok (spec §11.4.2)", self.buf.len()));
        }
        ladder.switch_read();
        if dialer {
            self.switch_write().await?;
        }
        Ok(())
    }

    /// Sends bytes, all of them. If the testee hangs up meanwhile (as it
    /// should after bad input), or stops reading for [`SEND_STALL`] (as it
    /// may once it has sent a fatal GOAWAY, `spec/PROTOCOL.md` §7.3, while
    /// the rest of an oversized frame is still coming), the rest is
    /// dropped: what the testee said before is still there to read, and
    /// the next expectation decides (`expect_closed: {promptly: true}`
    /// fails after a stall: since every runtime closes within a bound
    /// after a fatal GOAWAY, no case should stall; this is a safety net).
    pub async fn send(&self, bytes: &[u8]) -> Result<(), String> {
        let mut off = 0;
        while off < bytes.len() {
            let slice = [IoSlice::new(&bytes[off..])];
            match tokio::time::timeout(SEND_STALL, poll_fn(|cx| self.t.poll_write(cx, &slice))).await {
                Err(_stalled) => {
                    self.stalled.store(true, std::sync::atomic::Ordering::Relaxed);
                    return Ok(());
                }
                Ok(Ok(0)) => return Ok(()),
                Ok(Ok(n)) => off += n,
                Ok(Err(e)) if matches!(e.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset) => return Ok(()),
                Ok(Err(e)) => return Err(format!("send failed: {e}")),
            }
        }
        Ok(())
    }

    /// Sends `frame` at the start of its own write with `fds` attached to
    /// its first byte (`SCM_RIGHTS`): the upgrade's offer (spec §11.4), an
    /// ACCEPT (§14.2).
    pub async fn send_with_fds(&self, frame: &[u8], fds: &[std::os::fd::BorrowedFd<'_>]) -> Result<(), String> {
        let slice = [IoSlice::new(frame)];
        let n = tokio::time::timeout(SEND_STALL, poll_fn(|cx| self.t.poll_write_fds(cx, &slice, fds)))
            .await
            .map_err(|_| "the testee stopped reading".to_string())?
            .map_err(|e| format!("send with descriptors failed: {e}"))?;
        self.send(&frame[n..]).await
    }

    /// [`Peer::send_with_fds`] with one descriptor.
    pub async fn send_with_fd(&self, frame: &[u8], fd: std::os::fd::BorrowedFd<'_>) -> Result<(), String> {
        self.send_with_fds(frame, &[fd]).await
    }

    /// Whether descriptors can travel on this connection (a Unix socket).
    pub fn passes_fds(&self) -> bool {
        self.t.passes_fds()
    }
    /// Whether a send gave up because the testee stopped reading without
    /// closing the connection.
    pub fn stalled(&self) -> bool {
        self.stalled.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Half-closes: the testee reads end of stream.
    pub fn end_stream(&self) {
        self.t.shutdown_write();
    }

    /// Closes the connection both ways.
    pub fn close(&self) {
        self.t.shutdown();
    }

    /// How the connection ended, for a report: empty for a clean end of
    /// stream, else the read error (a broken NATS link says which side
    /// fell silent).
    pub fn closed_how(&self) -> String {
        match &self.read_error {
            None => String::new(),
            Some(e) => format!(" (the read failed: {e})"),
        }
    }

    /// The next frame, waiting up to `wait`.
    pub async fn read(&mut self, wait: Duration) -> Result<Read, String> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(f) = self.decoder.decode(&mut self.buf).map_err(|e| format!("the testee sent a malformed frame: {e}"))? {
                if matches!(f, Frame::Upgraded { code: Code::Ok, .. }) {
                    self.on_marker().await?;
                }
                return Ok(Read::Frame(f));
            }
            if self.eof {
                return match self.decoder.finish(&self.buf) {
                    Ok(()) => Ok(Read::Closed),
                    Err(e) => Err(format!("the testee closed mid-frame: {e}")),
                };
            }
            if self.buf.capacity() - self.buf.len() < 16 * 1024 {
                self.buf.reserve(64 * 1024);
            }
            let read = tokio::time::timeout_at(deadline, poll_fn(|cx| self.t.poll_read(cx, &mut self.buf))).await;
            match read {
                Err(_) => return Ok(Read::Timeout),
                Ok(Ok(0)) => self.eof = true,
                Ok(Ok(_)) => {}
                // A reset after the testee closed counts as closed; what
                // it said is kept for the report (`closed_how`).
                Ok(Err(e)) => {
                    self.eof = true;
                    self.read_error = Some(e.to_string());
                }
            }
        }
    }
}
