//! Raw bytes on a hub's socket: crafted frames (built with
//! `hubwire-frame`'s encoders, or by hand where they must be wrong) and a
//! reader that decodes what the hub sends back, every wait with a
//! deadline. This is how the cases speak to the hub as a broken or hostile
//! peer would, below the runtime's well-behaved client.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hubwire_frame::{Code, Codec, Decoder, Frame, Hello, Kind, PeerInfo, DEFAULT_MAX_FRAME};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

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
        Ok(Raw::over(Box::new(s)))
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

/// Our HELLO (version 1, no methods).
pub fn hello() -> Bytes {
    Frame::Hello(Box::new(Hello::new(PeerInfo { name: "hardening-raw".into(), lang: "rust".into(), version: "0".into() }))).to_bytes()
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
