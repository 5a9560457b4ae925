//! The runner's side of the wire: a raw peer that sends exactly the bytes
//! a case says and reads back frames one by one, with no protocol logic of
//! its own beyond answering PING.

use std::future::poll_fn;
use std::io::IoSlice;
use std::time::Duration;

use bytes::BytesMut;
use hubwire::transport::DynTransport;
use hubwire_frame::{Decoder, Frame};

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

/// A raw connection to the testee.
pub struct Peer {
    t: DynTransport,
    buf: BytesMut,
    decoder: Decoder,
    eof: bool,
    /// A send gave up because the testee stopped reading for [`SEND_STALL`].
    stalled: std::sync::atomic::AtomicBool,
}

impl Peer {
    /// Wraps the runner's end of a connection.
    pub fn new(t: DynTransport) -> Peer {
        // The runner accepts any size the testee sends: checking limits is
        // the cases' business, not the reader's.
        Peer { t, buf: BytesMut::with_capacity(64 * 1024), decoder: Decoder::new(u32::MAX), eof: false, stalled: Default::default() }
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

    /// The next frame, waiting up to `wait`.
    pub async fn read(&mut self, wait: Duration) -> Result<Read, String> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(f) = self.decoder.decode(&mut self.buf).map_err(|e| format!("the testee sent a malformed frame: {e}"))? {
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
                // A reset after the testee closed counts as closed.
                Ok(Err(_)) => self.eof = true,
            }
        }
    }
}
