//! Raw bytes on a hub's socket: crafted frames (built with
//! `hubwire-frame`'s encoders, or by hand where they must be wrong) and a
//! reader that decodes what the hub sends back, every wait with a
//! deadline. This is how the cases speak to the hub as a broken or hostile
//! peer would, below the runtime's well-behaved client.

use std::io::{Read as _, Write as _};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hubwire_frame::{Code, Codec, Decoder, Frame, Hello, Kind, PeerInfo, DEFAULT_MAX_FRAME};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Something a raw peer can read and write.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A raw connection to the hub.
pub struct Raw {
    io: Box<dyn Stream>,
    buf: BytesMut,
    decoder: Decoder,
}

/// How a read ended.
#[derive(Debug)]
pub enum Read {
    /// A frame.
    Frame(Frame),
    /// The hub closed the connection (or reset it).
    Closed,
    /// Nothing within the deadline.
    Timeout,
    /// Bytes that do not decode (the reason shows in failure messages,
    /// through `Debug`).
    #[allow(dead_code)]
    Bad(String),
}

impl Raw {
    /// Connects to a Unix socket, within 5 s.
    pub async fn unix(path: &Path) -> Result<Raw, String> {
        let c = tokio::time::timeout(Duration::from_secs(5), tokio::net::UnixStream::connect(path)).await;
        let s = c.map_err(|_| "connect: no answer within 5 s".to_string())?.map_err(|e| format!("connect: {e}"))?;
        Raw::unix_socket(s.into_std().map_err(|e| e.to_string())?)
    }

    /// A connected Unix socket, read as [`UnixSocket`] does.
    fn unix_socket(s: std::os::unix::net::UnixStream) -> Result<Raw, String> {
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
        // SAFETY: the socket is owned by the `AsyncFd` from here on, and
        // closed only when it is dropped (after its registration).
        let io = unsafe { AsyncFd::register(s) }.map_err(|e| e.to_string())?;
        Ok(Raw::over(Box::new(UnixSocket(io))))
    }

    /// Connects to a Unix socket as another user (`uid`, and gid the same),
    /// so that the hub reads that uid from the socket (`SO_PEERCRED`, taken
    /// at `connect`). A forked child changes its ids and connects a socket
    /// made here, then exits; the connection it made is ours, since the
    /// two processes share the socket's open file. Needs root. `Ok(Err)`:
    /// that user's `connect` failed (the socket's or a directory's mode).
    pub async fn unix_as(path: &Path, uid: u32) -> Result<Result<Raw, std::io::Error>, String> {
        let addr = unix_addr(path)?;
        // SAFETY: a plain socket(2); its descriptor is owned at once.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(format!("socket: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: fd was just created and nothing else owns it.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut cmd = std::process::Command::new("true");
        // SAFETY: between fork and exec the closure makes only
        // async-signal-safe calls (setgroups, setgid, setuid, connect,
        // _exit) on memory prepared before the fork. The descriptor is
        // still open there (CLOEXEC acts at exec, which never comes).
        unsafe {
            cmd.pre_exec(move || libc::_exit(connect_as(fd, &addr, uid)));
        }
        let status = tokio::task::spawn_blocking(move || cmd.status()).await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
        match status.code() {
            Some(0) => {}
            Some(CHANGE_IDS_FAILED) => return Err(format!("could not become uid {uid} (setuid)")),
            Some(errno) if errno >= CONNECT_FAILED => {
                return Ok(Err(std::io::Error::from_raw_os_error(errno - CONNECT_FAILED)));
            }
            other => return Err(format!("the child connecting as uid {uid} ended with {other:?}")),
        }
        Ok(Ok(Raw::unix_socket(std::os::unix::net::UnixStream::from(sock))?))
    }

    /// Takes DIRECT and ACCEPT as known frame types (both peers sent
    /// `direct`, `spec/PROTOCOL.md` §14.1).
    pub fn decode_direct(&mut self) {
        self.decoder.set_direct(true);
    }

    /// Wraps any stream.
    pub fn over(io: Box<dyn Stream>) -> Raw {
        Raw { io, buf: BytesMut::new(), decoder: Decoder::new(DEFAULT_MAX_FRAME) }
    }

    /// Writes all of `bytes`, within `within`.
    pub async fn send(&mut self, bytes: &[u8], within: Duration) -> Result<(), String> {
        match tokio::time::timeout(within, self.io.write_all(bytes)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("write: {e}")),
            Err(_) => Err(format!("write blocked for {within:?}")),
        }
    }

    /// Sends our HELLO and reads the hub's (within 5 s).
    pub async fn handshake(&mut self) -> Result<Hello, String> {
        self.send(&hello(), Duration::from_secs(5)).await?;
        match self.next(Duration::from_secs(5)).await {
            Read::Frame(Frame::Hello(h)) => Ok(*h),
            other => Err(format!("expected the hub's HELLO, got {other:?}")),
        }
    }

    /// The next frame the hub sends, waiting at most `within`.
    pub async fn next(&mut self, within: Duration) -> Read {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(f)) => return Read::Frame(f),
                Ok(None) => {}
                Err(e) => return Read::Bad(e.to_string()),
            }
            let mut chunk = [0u8; 64 * 1024];
            match tokio::time::timeout_at(deadline, self.io.read(&mut chunk)).await {
                Err(_) => return Read::Timeout,
                Ok(Ok(0)) | Ok(Err(_)) => return Read::Closed,
                Ok(Ok(n)) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Reads until the hub closes the connection, for at most `within`;
    /// returns the GOAWAY it sent on the way, if any, and how long it took.
    /// `Err` if the connection was still open at the deadline.
    pub async fn until_closed(&mut self, within: Duration) -> Result<(Option<(Code, String)>, Duration), String> {
        let started = Instant::now();
        let mut goaway = None;
        let deadline = started + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left).await {
                Read::Frame(Frame::Goaway { code, message, .. }) => goaway = Some((code, message)),
                Read::Frame(_) => {}
                Read::Closed => return Ok((goaway, started.elapsed())),
                // Past a frame we cannot decode, only the end matters.
                Read::Bad(_) => self.buf.clear(),
                Read::Timeout => return Err(format!("still open after {within:?}")),
            }
        }
    }
}

/// A Unix socket whose readiness is cleared only when a read finds nothing.
/// tokio's `UnixStream` also clears it after a short read, taking that for
/// a drained socket; but the kernel ends a read after a message that
/// carried descriptors (a DIRECT, `spec/PROTOCOL.md` §14.2) even with more
/// bytes queued behind it, and those would then wait for the hub's next
/// write, which may never come.
struct UnixSocket(AsyncFd<std::os::unix::net::UnixStream>);

impl AsyncRead for UnixSocket {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        loop {
            let mut ready = ready!(self.0.poll_read_ready(cx))?;
            // `try_io` clears the readiness on `WouldBlock` only.
            if let Ok(r) = ready.try_io(|s| s.get_ref().read(buf.initialize_unfilled())) {
                return Poll::Ready(r.map(|n| buf.advance(n)));
            }
        }
    }
}

impl AsyncWrite for UnixSocket {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<std::io::Result<usize>> {
        loop {
            let mut ready = ready!(self.0.poll_write_ready(cx))?;
            if let Ok(r) = ready.try_io(|s| s.get_ref().write(bytes)) {
                return Poll::Ready(r);
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(self.0.get_ref().shutdown(std::net::Shutdown::Write))
    }
}

/// Exit statuses of [`connect_as`]: 0 connected; a failed `connect` is
/// `CONNECT_FAILED` + its errno.
const CHANGE_IDS_FAILED: i32 = 2;
const CONNECT_FAILED: i32 = 10;

/// `path` as a Unix socket address.
fn unix_addr(path: &Path) -> Result<libc::sockaddr_un, String> {
    // SAFETY: all zeros is a valid (empty) sockaddr_un.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_encoded_bytes();
    // One byte stays zero: the path's end.
    if bytes.len() >= addr.sun_path.len() {
        return Err(format!("socket path too long: {}", path.display()));
    }
    for (d, b) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *b as libc::c_char;
    }
    Ok(addr)
}

/// In the forked child of [`Raw::unix_as`]: become `uid`, connect `fd` to
/// `addr`. Returns the exit status.
///
/// # Safety
/// Runs between fork and exec: only async-signal-safe calls.
unsafe fn connect_as(fd: i32, addr: &libc::sockaddr_un, uid: u32) -> i32 {
    if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(uid) != 0 || libc::setuid(uid) != 0 {
        return CHANGE_IDS_FAILED;
    }
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    if libc::connect(fd, addr as *const libc::sockaddr_un as *const libc::sockaddr, len) != 0 {
        // errno is thread-local and this child has one thread.
        return CONNECT_FAILED + (*libc::__errno_location()).min(200);
    }
    0
}

/// Our HELLO (version 1, no methods), as bytes.
pub fn hello() -> Bytes {
    Frame::Hello(Box::new(our_hello())).to_bytes()
}

/// Our HELLO, for a case to add capabilities to before sending it.
pub fn our_hello() -> Hello {
    Hello::new(PeerInfo { name: "hardening-raw".into(), lang: "rust".into(), version: "0".into() })
}

/// A REQUEST frame.
pub fn request(call_id: u32, kind: Kind, codec: Codec, method: &str, payload: &[u8], timeout_ms: u32) -> Bytes {
    let f = Frame::Request { call_id, kind, codec, timeout_ms, method: method.into(), payload: Bytes::copy_from_slice(payload) };
    f.to_bytes()
}

/// A CANCEL frame.
pub fn cancel(call_id: u32) -> Bytes {
    Frame::Cancel { call_id }.to_bytes()
}

/// A frame header as bytes, exactly as given (so it can lie).
pub fn header(body_len: u32, version: u8, frame_type: u8, flags: u8, codec: u8, call_id: u32) -> [u8; 12] {
    let mut h = [0u8; 12];
    h[0..4].copy_from_slice(&body_len.to_le_bytes());
    h[4] = version;
    h[5] = frame_type;
    h[6] = flags;
    h[7] = codec;
    h[8..12].copy_from_slice(&call_id.to_le_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crafted_header_is_what_the_decoder_reads() {
        // A REQUEST announcing 100 body bytes: a 112-byte frame, read from
        // the header alone; one byte short of a header is not yet a frame.
        let h = header(100, 1, 0x02, 0, 0, 1);
        let d = Decoder::new(DEFAULT_MAX_FRAME);
        assert_eq!(d.check(&h[..11]).unwrap(), None);
        assert_eq!(d.check(&h).unwrap(), Some(112));
        // Version byte 2 on a HELLO is unsupported_version.
        assert_eq!(d.check(&header(0, 2, 0x01, 0, 0, 0)).unwrap_err().code, Code::UnsupportedVersion);
        // The same header announcing more than max_frame is refused as too_large.
        let big = header(DEFAULT_MAX_FRAME + 1, 1, 0x02, 0, 0, 1);
        assert_eq!(d.check(&big).unwrap_err().code, Code::TooLarge);
    }
}
