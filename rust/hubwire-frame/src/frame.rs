//! Frames and their encoding (`spec/PROTOCOL.md` §2, §5).
//!
//! Every frame is a 12-byte little-endian header and a body:
//!
//! ```text
//! 0..4  body_len  u32   bytes after the header
//! 4     version   u8    1
//! 5     type      u8    FrameType
//! 6     flags     u8    REQUEST: bits 0-1 = Kind
//! 7     codec     u8    Codec of the payload (REQUEST, RESPONSE, ITEM)
//! 8..12 call_id   u32   0 for HELLO, PING, PONG; last id for GOAWAY
//! ```
//!
//! The `encode_*_head` functions write a header and a body's fixed fields
//! but not its payload, so a caller can send a large payload as a separate
//! buffer (one `writev`, no copy).

use bytes::{BufMut, Bytes, BytesMut};

use crate::direct::{AcceptBody, DirectOffer};
use crate::{Code, Hello, Name};

/// Length of the fixed frame header.
pub const HEADER_LEN: usize = 12;
/// The protocol version this crate speaks.
pub const VERSION: u8 = 1;
/// Default `max_frame`: the largest body a peer accepts (16 MiB).
pub const DEFAULT_MAX_FRAME: u32 = 16 * 1024 * 1024;

/// The frame type byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameType {
    /// Handshake: JSON body, first frame each way.
    Hello = 0x01,
    /// Starts a call.
    Request = 0x02,
    /// Ends a call with a status.
    Response = 0x03,
    /// One stream element.
    Item = 0x04,
    /// The caller has no more stream inputs.
    End = 0x05,
    /// The caller abandons a call.
    Cancel = 0x06,
    /// Flow-control credit.
    Credit = 0x07,
    /// Liveness / round-trip probe.
    Ping = 0x08,
    /// Answer to a PING.
    Pong = 0x09,
    /// The sender is draining or closing.
    Goaway = 0x0A,
    /// The dialer offers to move the connection (§11.4).
    Upgrade = 0x0B,
    /// The answer to an UPGRADE, and each side's last frame on the socket.
    Upgraded = 0x0C,
    /// A hub tells a client of a direct connection (§14.2).
    Direct = 0x0D,
    /// A hub hands a replica a connection to serve (§14.2).
    Accept = 0x0E,
}

impl FrameType {
    /// The frame type for a wire byte, if known.
    pub fn from_u8(b: u8) -> Option<FrameType> {
        use FrameType::*;
        Some(match b {
            0x01 => Hello,
            0x02 => Request,
            0x03 => Response,
            0x04 => Item,
            0x05 => End,
            0x06 => Cancel,
            0x07 => Credit,
            0x08 => Ping,
            0x09 => Pong,
            0x0A => Goaway,
            0x0B => Upgrade,
            0x0C => Upgraded,
            0x0D => Direct,
            0x0E => Accept,
            _ => return None,
        })
    }

    /// Whether `call_id` must be 0 (connection-level frames). GOAWAY is
    /// neither: its `call_id` is the last id seen.
    pub(crate) fn connection_level(self) -> bool {
        matches!(
            self,
            FrameType::Hello
                | FrameType::Ping
                | FrameType::Pong
                | FrameType::Upgrade
                | FrameType::Upgraded
                | FrameType::Direct
                | FrameType::Accept
        )
    }

    /// Whether the type exists only between peers that both sent `direct`
    /// in HELLO (§14.2).
    pub fn needs_direct(self) -> bool {
        matches!(self, FrameType::Direct | FrameType::Accept)
    }

    /// Whether `call_id` must be non-zero.
    pub(crate) fn call_level(self) -> bool {
        !self.connection_level() && self != FrameType::Goaway
    }
}

/// How a payload is encoded (`spec/PROTOCOL.md` §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Codec {
    /// The bytes themselves.
    Raw = 0,
    /// One MessagePack value; the default for structured data.
    Msgpack = 1,
    /// One UTF-8 JSON value.
    Json = 2,
}

impl Codec {
    /// The codec for a wire byte, if known.
    pub fn from_u8(b: u8) -> Option<Codec> {
        match b {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Msgpack),
            2 => Some(Codec::Json),
            _ => None,
        }
    }

    /// The name used in vectors and docs.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Msgpack => "msgpack",
            Codec::Json => "json",
        }
    }
}

/// The kind of a call (`spec/PROTOCOL.md` §1), in REQUEST flags bits 0–1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Kind {
    /// One input, one output.
    Unary = 0,
    /// One input, a stream of outputs.
    ServerStream = 1,
    /// A stream of inputs, one output.
    ClientStream = 2,
    /// Streams both ways.
    Bidi = 3,
}

impl Kind {
    /// The kind for the low two bits of REQUEST flags.
    pub fn from_bits(flags: u8) -> Kind {
        match flags & 0b11 {
            0 => Kind::Unary,
            1 => Kind::ServerStream,
            2 => Kind::ClientStream,
            _ => Kind::Bidi,
        }
    }

    /// The name used in HELLO and docs.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Unary => "unary",
            Kind::ServerStream => "server_stream",
            Kind::ClientStream => "client_stream",
            Kind::Bidi => "bidi",
        }
    }

    /// Whether the callee answers with ITEMs.
    pub fn streams_out(self) -> bool {
        matches!(self, Kind::ServerStream | Kind::Bidi)
    }

    /// Whether the caller sends ITEMs.
    pub fn streams_in(self) -> bool {
        matches!(self, Kind::ClientStream | Kind::Bidi)
    }
}

/// One decoded frame. Payloads are `Bytes` slices of the read buffer: no
/// copy between the socket and the handler.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// Handshake.
    Hello(Box<Hello>),
    /// Starts call `call_id`.
    Request {
        /// The new call's id.
        call_id: u32,
        /// The call kind.
        kind: Kind,
        /// The payload's codec, and the one wanted back.
        codec: Codec,
        /// Milliseconds from receipt; 0 = no deadline.
        timeout_ms: u32,
        /// The method name (1–255 bytes of UTF-8).
        method: Name,
        /// The input (empty for client_stream and bidi).
        payload: Bytes,
    },
    /// Ends call `call_id`.
    Response {
        /// The call.
        call_id: u32,
        /// The payload's codec.
        codec: Codec,
        /// The status.
        code: Code,
        /// Human-readable detail, empty on success.
        message: String,
        /// The output, or the failure value.
        payload: Bytes,
    },
    /// One stream element.
    Item {
        /// The call.
        call_id: u32,
        /// The payload's codec.
        codec: Codec,
        /// The element.
        payload: Bytes,
    },
    /// The caller's inputs are done.
    End {
        /// The call.
        call_id: u32,
    },
    /// The caller abandons the call.
    Cancel {
        /// The call.
        call_id: u32,
    },
    /// Grants `credit` more ITEMs on a call.
    Credit {
        /// The call.
        call_id: u32,
        /// How many more ITEMs (≥ 1).
        credit: u32,
    },
    /// Probe; answer with PONG and the same bytes.
    Ping {
        /// Opaque bytes.
        data: [u8; 8],
    },
    /// Answer to PING.
    Pong {
        /// The PING's bytes.
        data: [u8; 8],
    },
    /// Draining (`Code::Ok`) or closing with an error.
    Goaway {
        /// Highest call id of the receiver the sender has seen.
        last_id: u32,
        /// Why.
        code: Code,
        /// Human-readable detail.
        message: String,
    },
    /// The dialer offers to move the byte stream to `mechanism` (§11.4);
    /// its descriptors travel beside the frame, not in it.
    Upgrade {
        /// `shm`: 1–255 bytes of ASCII.
        mechanism: String,
    },
    /// Accepts (`Code::Ok`, and the sender's last frame on the socket) or
    /// refuses an UPGRADE (§11.4.2).
    Upgraded {
        /// `ok`, or why the offer was refused.
        code: Code,
        /// Human-readable detail, empty on `ok`.
        message: String,
    },
    /// A direct connection for the client (§14.3).
    Direct(Box<DirectOffer>),
    /// A connection for the replica to serve (§14.4).
    Accept(AcceptBody),
}

impl Frame {
    /// The frame's type.
    pub fn frame_type(&self) -> FrameType {
        match self {
            Frame::Hello(_) => FrameType::Hello,
            Frame::Request { .. } => FrameType::Request,
            Frame::Response { .. } => FrameType::Response,
            Frame::Item { .. } => FrameType::Item,
            Frame::End { .. } => FrameType::End,
            Frame::Cancel { .. } => FrameType::Cancel,
            Frame::Credit { .. } => FrameType::Credit,
            Frame::Ping { .. } => FrameType::Ping,
            Frame::Pong { .. } => FrameType::Pong,
            Frame::Goaway { .. } => FrameType::Goaway,
            Frame::Upgrade { .. } => FrameType::Upgrade,
            Frame::Upgraded { .. } => FrameType::Upgraded,
            Frame::Direct(_) => FrameType::Direct,
            Frame::Accept(_) => FrameType::Accept,
        }
    }

    /// Appends the whole frame to `dst`.
    pub fn encode(&self, dst: &mut BytesMut) {
        match self {
            Frame::Hello(h) => {
                let body = h.to_json();
                put_header(dst, FrameType::Hello, 0, 0, 0, body.len());
                dst.put_slice(&body);
            }
            Frame::Request { call_id, kind, codec, timeout_ms, method, payload } => {
                encode_request_head(dst, *call_id, *kind, *codec, *timeout_ms, method, payload.len());
                dst.put_slice(payload);
            }
            Frame::Response { call_id, codec, code, message, payload } => {
                encode_response_head(dst, *call_id, *codec, *code, message, payload.len());
                dst.put_slice(payload);
            }
            Frame::Item { call_id, codec, payload } => {
                encode_item_head(dst, *call_id, *codec, payload.len());
                dst.put_slice(payload);
            }
            Frame::End { call_id } => put_header(dst, FrameType::End, 0, 0, *call_id, 0),
            Frame::Cancel { call_id } => put_header(dst, FrameType::Cancel, 0, 0, *call_id, 0),
            Frame::Credit { call_id, credit } => {
                put_header(dst, FrameType::Credit, 0, 0, *call_id, 4);
                dst.put_u32_le(*credit);
            }
            Frame::Ping { data } => {
                put_header(dst, FrameType::Ping, 0, 0, 0, 8);
                dst.put_slice(data);
            }
            Frame::Pong { data } => {
                put_header(dst, FrameType::Pong, 0, 0, 0, 8);
                dst.put_slice(data);
            }
            Frame::Goaway { last_id, code, message } => {
                let message = clip_message(message);
                put_header(dst, FrameType::Goaway, 0, 0, *last_id, 3 + message.len());
                put_status(dst, *code, message);
            }
            Frame::Upgrade { mechanism } => {
                debug_assert!(!mechanism.is_empty() && mechanism.len() <= 255);
                put_header(dst, FrameType::Upgrade, 0, 0, 0, 1 + mechanism.len());
                dst.put_u8(mechanism.len() as u8);
                dst.put_slice(mechanism.as_bytes());
            }
            Frame::Upgraded { code, message } => {
                let message = clip_message(message);
                put_header(dst, FrameType::Upgraded, 0, 0, 0, 3 + message.len());
                put_status(dst, *code, message);
            }
            Frame::Direct(o) => put_json(dst, FrameType::Direct, &**o),
            Frame::Accept(a) => put_json(dst, FrameType::Accept, a),
        }
    }

    /// The whole frame as a new buffer.
    pub fn to_bytes(&self) -> Bytes {
        let mut b = BytesMut::new();
        self.encode(&mut b);
        b.freeze()
    }
}

fn put_json(dst: &mut BytesMut, ty: FrameType, body: &impl serde::Serialize) {
    let body = serde_json::to_vec(body).expect("a direct-path body always serializes");
    put_header(dst, ty, 0, 0, 0, body.len());
    dst.put_slice(&body);
}

/// Whether call id `id` was started after `last` by the same peer, in the
/// serial-number order of `spec/PROTOCOL.md` §3 (ids wrap after
/// `0xFFFFFFFF`): `(id - last) mod 2^32` is in `1..2^31`. `last` 0 means
/// "none seen", so every id is after it (GOAWAY's `call_id`, §5.10).
pub fn id_after(id: u32, last: u32) -> bool {
    last == 0 || (1..1 << 31).contains(&id.wrapping_sub(last))
}

/// Body length of a REQUEST carrying `method` and `payload_len` bytes.
pub fn request_body_len(method: &str, payload_len: usize) -> usize {
    5 + method.len() + payload_len
}

/// Body length of a RESPONSE carrying `message` and `payload_len` bytes.
pub fn response_body_len(message: &str, payload_len: usize) -> usize {
    3 + clip_message(message).len() + payload_len
}

/// Writes a REQUEST header and fixed fields; the caller appends the
/// `payload_len` payload bytes. `method` must be 1–255 bytes.
pub fn encode_request_head(dst: &mut BytesMut, call_id: u32, kind: Kind, codec: Codec, timeout_ms: u32, method: &str, payload_len: usize) {
    debug_assert!(!method.is_empty() && method.len() <= 255);
    let body = request_body_len(method, payload_len);
    // The fixed part in one copy: header, timeout_ms, the name's length.
    let mut fixed = [0u8; HEADER_LEN + 5];
    fixed[..HEADER_LEN].copy_from_slice(&header(FrameType::Request, kind as u8, codec as u8, call_id, body));
    fixed[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&timeout_ms.to_le_bytes());
    fixed[HEADER_LEN + 4] = method.len() as u8;
    dst.reserve(fixed.len() + body.min(64 * 1024));
    dst.put_slice(&fixed);
    dst.put_slice(method.as_bytes());
}

/// Writes a RESPONSE header and status; the caller appends the payload.
pub fn encode_response_head(dst: &mut BytesMut, call_id: u32, codec: Codec, code: Code, message: &str, payload_len: usize) {
    let message = clip_message(message);
    // The fixed part in one copy: header, code, the message's length.
    let body = 3 + message.len() + payload_len;
    let mut fixed = [0u8; HEADER_LEN + 3];
    fixed[..HEADER_LEN].copy_from_slice(&header(FrameType::Response, 0, codec as u8, call_id, body));
    fixed[HEADER_LEN] = code as u8;
    fixed[HEADER_LEN + 1..].copy_from_slice(&(message.len() as u16).to_le_bytes());
    dst.reserve(fixed.len() + body.min(64 * 1024));
    dst.put_slice(&fixed);
    if !message.is_empty() {
        dst.put_slice(message.as_bytes());
    }
}

/// Writes an ITEM header; the caller appends the payload.
pub fn encode_item_head(dst: &mut BytesMut, call_id: u32, codec: Codec, payload_len: usize) {
    put_header(dst, FrameType::Item, 0, codec as u8, call_id, payload_len);
}

fn put_header(dst: &mut BytesMut, ty: FrameType, flags: u8, codec: u8, call_id: u32, body_len: usize) {
    dst.reserve(HEADER_LEN + body_len.min(64 * 1024));
    dst.put_slice(&header(ty, flags, codec, call_id, body_len));
}

/// A frame header's 12 bytes (`spec/PROTOCOL.md` §3): body length (u32
/// LE), version, type, flags, codec, call id (u32 LE). Built on the stack
/// so that it is copied into the buffer once, not field by field (each
/// `put_*` checks the capacity again).
fn header(ty: FrameType, flags: u8, codec: u8, call_id: u32, body_len: usize) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..4].copy_from_slice(&(body_len as u32).to_le_bytes());
    h[4..8].copy_from_slice(&[VERSION, ty as u8, flags, codec]);
    h[8..].copy_from_slice(&call_id.to_le_bytes());
    h
}

fn put_status(dst: &mut BytesMut, code: Code, message: &str) {
    dst.put_u8(code as u8);
    dst.put_u16_le(message.len() as u16);
    dst.put_slice(message.as_bytes());
}

/// Messages are at most 65535 bytes; longer ones are cut on a char boundary.
fn clip_message(message: &str) -> &str {
    if message.len() <= u16::MAX as usize {
        return message;
    }
    let mut end = u16::MAX as usize;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}
