//! Bytes to frames (`spec/PROTOCOL.md` §2.2).
//!
//! [`Decoder::check`] looks only at the 12-byte header: it rejects a bad
//! version, an oversized body, an unknown type or codec, or a misplaced
//! call id before the body has arrived, and otherwise says how many bytes
//! the whole frame needs. [`Decoder::decode`] then splits the frame off the
//! buffer and parses its body. The checks run in the order of the spec so
//! the same bad input always gives the same code.

use bytes::{Buf, Bytes, BytesMut};

use crate::direct::{self, DirectOffer};
use crate::frame::{Codec, FrameType, Kind, DEFAULT_MAX_FRAME, HEADER_LEN, VERSION};
use crate::{Code, Frame, FrameError, Hello, Name};

/// Turns a byte stream into frames. Holds only the limits; the caller owns
/// the buffer.
#[derive(Clone, Debug)]
pub struct Decoder {
    max_frame: u32,
    version: u8,
    /// Both peers sent `direct` (§14.1): DIRECT and ACCEPT are known types.
    direct: bool,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(DEFAULT_MAX_FRAME)
    }
}

impl Decoder {
    /// A decoder refusing bodies over `max_frame` bytes.
    pub fn new(max_frame: u32) -> Decoder {
        Decoder { max_frame, version: VERSION, direct: false }
    }

    /// The limit on body length.
    pub fn max_frame(&self) -> u32 {
        self.max_frame
    }

    /// Sets the version byte later frames must carry (after negotiation).
    /// HELLO frames must always carry version 1.
    pub fn set_version(&mut self, version: u8) {
        self.version = version;
    }

    /// Makes DIRECT and ACCEPT known types (both peers sent `direct`,
    /// §14.2); to any other decoder they are unknown.
    pub fn set_direct(&mut self, on: bool) {
        self.direct = on;
    }

    /// The cheap completeness check: `Ok(None)` if `buf` does not yet hold a
    /// whole header, `Ok(Some(n))` with the whole frame's length `n` (which
    /// may be more than `buf` holds), or the error the header alone proves.
    pub fn check(&self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let body_len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let (version, ty, codec) = (buf[4], buf[5], buf[7]);
        let call_id = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]);
        let expected = if ty == FrameType::Hello as u8 { VERSION } else { self.version };
        if version != expected {
            return Err(FrameError::new(Code::UnsupportedVersion, format!("frame version {version}, expected {expected}")));
        }
        if body_len > self.max_frame {
            return Err(FrameError::new(
                Code::TooLarge,
                format!("frame body of {body_len} bytes exceeds the limit of {} bytes", self.max_frame),
            ));
        }
        let Some(ty) = FrameType::from_u8(ty).filter(|t| self.direct || !t.needs_direct()) else {
            return Err(FrameError::protocol(format!("unknown frame type 0x{ty:02x}")));
        };
        if Codec::from_u8(codec).is_none() {
            return Err(FrameError::protocol(format!("unknown codec {codec}")));
        }
        if ty.connection_level() && call_id != 0 {
            return Err(FrameError::protocol(format!("{ty:?} frame with call id {call_id}, must be 0")));
        }
        if ty.call_level() && call_id == 0 {
            return Err(FrameError::protocol(format!("{ty:?} frame with call id 0")));
        }
        Ok(Some(HEADER_LEN + body_len as usize))
    }

    /// Splits one complete frame off the front of `buf` and parses it;
    /// `Ok(None)` when more bytes are needed. On error the buffer's content
    /// is unspecified: the connection is going away.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let Some(len) = self.check(buf)? else { return Ok(None) };
        if buf.len() < len {
            return Ok(None);
        }
        // One split per frame, header and body together (a reference count
        // taken once), then the header is stepped over in the frozen bytes,
        // which only moves a pointer: cheaper than advancing the buffer
        // past it first (`BytesMut::advance` keeps its own bookkeeping).
        let mut body = buf.split_to(len).freeze();
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&body[..HEADER_LEN]);
        body.advance(HEADER_LEN);
        parse_body(&header, body).map(Some)
    }

    /// Called at end of stream with what is left unread: an error if it is
    /// part of a frame.
    pub fn finish(&self, rest: &[u8]) -> Result<(), FrameError> {
        match self.check(rest)? {
            None if rest.is_empty() => Ok(()),
            None => Err(FrameError::protocol(format!("truncated frame header: stream ended after {} of {HEADER_LEN} bytes", rest.len()))),
            Some(n) => Err(FrameError::protocol(format!("truncated frame body: stream ended after {} of {n} bytes", rest.len()))),
        }
    }
}

fn parse_body(h: &[u8], mut body: Bytes) -> Result<Frame, FrameError> {
    // check() has validated type, codec and call id.
    let ty = FrameType::from_u8(h[5]).expect("checked");
    let (flags, codec) = (h[6], Codec::from_u8(h[7]).expect("checked"));
    let call_id = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    let exact = |body: &Bytes, n: usize| {
        if body.len() == n {
            Ok(())
        } else {
            Err(FrameError::protocol(format!("{ty:?} body must be {n} bytes, got {}", body.len())))
        }
    };
    Ok(match ty {
        FrameType::Hello => Frame::Hello(Box::new(Hello::from_json(&body)?)),
        FrameType::Request => {
            if body.len() < 5 {
                return Err(FrameError::protocol(format!("Request body of {} bytes is shorter than 5", body.len())));
            }
            let timeout_ms = body.get_u32_le();
            let mlen = body.get_u8() as usize;
            if mlen == 0 {
                return Err(FrameError::protocol("Request with an empty method name"));
            }
            if mlen > body.len() {
                return Err(FrameError::protocol(format!(
                    "Request method length {mlen} exceeds the {} bytes left in the body",
                    body.len()
                )));
            }
            let method = Name::from_utf8(body.split_to(mlen)).map_err(|_| not_utf8("method name"))?;
            let kind = Kind::from_bits(flags);
            if kind.streams_in() && !body.is_empty() {
                return Err(FrameError::protocol(format!("{} Request must have an empty payload, got {} bytes", kind.name(), body.len())));
            }
            Frame::Request { call_id, kind, codec, timeout_ms, method, payload: body }
        }
        FrameType::Response => {
            let (code, message) = status(&mut body, ty)?;
            Frame::Response { call_id, codec, code, message, payload: body }
        }
        FrameType::Goaway => {
            let (code, message) = status(&mut body, ty)?;
            if !body.is_empty() {
                return Err(FrameError::protocol(format!("Goaway has {} bytes after its message", body.len())));
            }
            Frame::Goaway { last_id: call_id, code, message }
        }
        FrameType::Upgrade => {
            let mlen = if body.is_empty() { 0 } else { body.get_u8() as usize };
            if mlen == 0 || mlen != body.len() {
                return Err(FrameError::protocol(format!("Upgrade mechanism length {mlen} with {} bytes left in the body", body.len())));
            }
            Frame::Upgrade { mechanism: utf8(&body, "mechanism")? }
        }
        FrameType::Upgraded => {
            let (code, message) = status(&mut body, ty)?;
            if !body.is_empty() {
                return Err(FrameError::protocol(format!("Upgraded has {} bytes after its message", body.len())));
            }
            Frame::Upgraded { code, message }
        }
        FrameType::Item => Frame::Item { call_id, codec, payload: body },
        FrameType::End => {
            exact(&body, 0)?;
            Frame::End { call_id }
        }
        FrameType::Cancel => {
            exact(&body, 0)?;
            Frame::Cancel { call_id }
        }
        FrameType::Credit => {
            exact(&body, 4)?;
            let credit = body.get_u32_le();
            if credit == 0 {
                return Err(FrameError::protocol("Credit of 0"));
            }
            Frame::Credit { call_id, credit }
        }
        FrameType::Direct => Frame::Direct(Box::new(direct::parse::<DirectOffer>("DIRECT", &body)?.check()?)),
        FrameType::Accept => Frame::Accept(direct::parse("ACCEPT", &body)?),
        FrameType::Ping | FrameType::Pong => {
            exact(&body, 8)?;
            let mut data = [0u8; 8];
            data.copy_from_slice(&body);
            if ty == FrameType::Ping {
                Frame::Ping { data }
            } else {
                Frame::Pong { data }
            }
        }
    })
}

/// Reads `code u8, msg_len u16, message` off the front of a body.
fn status(body: &mut Bytes, ty: FrameType) -> Result<(Code, String), FrameError> {
    if body.len() < 3 {
        return Err(FrameError::protocol(format!("{ty:?} body of {} bytes is shorter than 3", body.len())));
    }
    let raw = body.get_u8();
    let code = Code::from_u8(raw).ok_or_else(|| FrameError::protocol(format!("{ty:?} with reserved status code {raw}")))?;
    let mlen = body.get_u16_le() as usize;
    if mlen > body.len() {
        return Err(FrameError::protocol(format!("{ty:?} message length {mlen} exceeds the {} bytes left in the body", body.len())));
    }
    // An `ok` carries no message: no copy, no allocation.
    let message = if mlen == 0 { String::new() } else { utf8(&body[..mlen], "message")? };
    body.advance(mlen);
    Ok((code, message))
}

/// A UTF-8 string copied out of the frame (the slice is not split off the
/// body's `Bytes`: that would take a reference count only to drop it).
fn utf8(b: &[u8], what: &str) -> Result<String, FrameError> {
    std::str::from_utf8(b).map(str::to_owned).map_err(|_| not_utf8(what))
}

fn not_utf8(what: &str) -> FrameError {
    FrameError::protocol(format!("{what} is not valid UTF-8"))
}
