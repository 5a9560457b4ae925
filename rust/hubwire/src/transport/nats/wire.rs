//! The bytes of hubwire over NATS (`spec/PROTOCOL.md` §13), pure: subject
//! tokens, connect subjects, micro service names, the 5-byte link message
//! header, the sequence check and the connect bodies. No I/O;
//! `tests/nats_vectors.rs` checks it against `spec/vectors/nats.json`.

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

/// The link protocol version carried in connect bodies (`"hubwire":1`).
pub const LINK_VERSION: u32 = 1;
/// The queue group every connect subject is subscribed in (§13.1).
pub const QUEUE_GROUP: &str = "hubwire";
/// The default subject prefix (§13.1).
pub const DEFAULT_PREFIX: &str = "hubwire";
/// Bytes of the link message header: kind (1), seq (u32 LE).
pub const HEADER_LEN: usize = 5;

/// Whether `b` stays itself in a subject token (§13.1).
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The escape of a token: `-` and two lowercase hex digits.
const ESCAPE: u8 = b'-';

/// A method or provider name as one subject token: ASCII letters, digits
/// and `_` stay; every other byte of the UTF-8 (`-` included) becomes `-`
/// and two lowercase hex digits (§13.1). Tokens are also valid NATS micro
/// endpoint names (`[A-Za-z0-9_-]+`).
pub fn token(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for &b in name.as_bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("-{b:02x}"));
        }
    }
    out
}

/// The name a token encodes, or None if it is not one [`token`] makes
/// (an escape that is not `-` and two lowercase hex digits, an escaped
/// byte that needed none, or bytes that are not UTF-8).
pub fn untoken(token: &str) -> Option<String> {
    let b = token.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == ESCAPE {
            let hex = b.get(i + 1..i + 3)?;
            if hex.iter().any(|c| !matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
                return None;
            }
            let v = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            if plain(v) {
                return None;
            }
            out.push(v);
            i += 3;
        } else if plain(b[i]) {
            out.push(b[i]);
            i += 1;
        } else {
            return None;
        }
    }
    String::from_utf8(out).ok().filter(|s| !s.is_empty())
}

/// Whom a dialer wants to reach (§13.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Some replica offering this method.
    Method(String),
    /// Some replica of this provider (its HELLO `peer` name).
    Provider(String),
    /// Exactly this replica (its id from a connect reply or `$SRV`).
    Replica(String),
}

impl Target {
    /// The connect subject under `prefix`.
    pub fn subject(&self, prefix: &str) -> String {
        match self {
            Target::Method(m) => format!("{prefix}.m.{}", token(m)),
            Target::Provider(p) => format!("{prefix}.p.{}", token(p)),
            Target::Replica(id) => format!("{prefix}.r.{id}"),
        }
    }

    /// For messages: `method "x"`, `provider "x"`, `replica x`.
    pub fn describe(&self) -> String {
        match self {
            Target::Method(m) => format!("method {m:?}"),
            Target::Provider(p) => format!("provider {p:?}"),
            Target::Replica(id) => format!("replica {id}"),
        }
    }
}

/// The micro service name of a provider: every character outside
/// `[A-Za-z0-9_-]` replaced by `_` (§13.7); `hubwire` for an empty name.
pub fn service_name(provider: &str) -> String {
    if provider.is_empty() {
        return "hubwire".into();
    }
    provider.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// The kind of a link message (§13.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgKind {
    /// The next run of the byte stream.
    Data = 0,
    /// Nothing: "still here".
    Heartbeat = 1,
    /// The sender's half-close: no more DATA.
    End = 2,
    /// The sender released the link.
    Close = 3,
}

impl MsgKind {
    /// The spec's name (`data`, `heartbeat`, `end`, `close`).
    pub fn name(self) -> &'static str {
        match self {
            MsgKind::Data => "data",
            MsgKind::Heartbeat => "heartbeat",
            MsgKind::End => "end",
            MsgKind::Close => "close",
        }
    }
}

/// Writes a link message: the header, then `data` (DATA only).
pub fn encode(kind: MsgKind, seq: u32, data: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(HEADER_LEN + data.len());
    b.put_u8(kind as u8);
    b.put_u32_le(seq);
    b.put_slice(data);
    b.freeze()
}

/// Reads a link message: kind, seq and its data (a slice of `msg`), or why
/// it breaks the link (§13.4).
pub fn decode(msg: &Bytes) -> Result<(MsgKind, u32, Bytes), String> {
    if msg.len() < HEADER_LEN {
        return Err(format!("nats link: message of {} bytes, shorter than its 5-byte header", msg.len()));
    }
    let kind = match msg[0] {
        0 => MsgKind::Data,
        1 => MsgKind::Heartbeat,
        2 => MsgKind::End,
        3 => MsgKind::Close,
        k => return Err(format!("nats link: unknown message kind {k}")),
    };
    let seq = u32::from_le_bytes([msg[1], msg[2], msg[3], msg[4]]);
    let data = msg.slice(HEADER_LEN..);
    match (kind, data.is_empty()) {
        (MsgKind::Data, true) => Err("nats link: empty DATA message".into()),
        (MsgKind::Data, false) | (_, true) => Ok((kind, seq, data)),
        (k, false) => Err(format!("nats link: {} message carries {} bytes of data", k.name(), data.len())),
    }
}

/// The receiving side's sequence check: each message must carry exactly
/// the next number, modulo 2^32 (§13.4).
#[derive(Debug, Default)]
pub struct SeqCheck {
    next: u32,
}

impl SeqCheck {
    /// A check expecting `first` next (0 on a new link).
    pub fn starting_at(first: u32) -> SeqCheck {
        SeqCheck { next: first }
    }

    /// Accepts `seq` or says which message was lost.
    pub fn accept(&mut self, seq: u32) -> Result<(), String> {
        if seq != self.next {
            return Err(format!("nats link: message {} lost (got {seq})", self.next));
        }
        self.next = seq.wrapping_add(1);
        Ok(())
    }
}

/// A connect request body (§13.2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectRequest {
    /// The link protocol version, [`LINK_VERSION`].
    pub hubwire: u32,
    /// The subject the dialer receives on.
    pub link: String,
    /// The dialer's name, for logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
}

/// A refusal in a connect reply: a code name from `codes.json` and a text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The status code's name (`resource_exhausted`, …).
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// A connect reply body (§13.2): the acceptor's link subject and who it
/// is, or a refusal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectReply {
    /// The link protocol version the acceptor speaks.
    pub hubwire: u32,
    /// The subject the acceptor receives on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The replica's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// The provider's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Why the link was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Refusal>,
}

impl ConnectReply {
    /// A refusal with `code` (a name from `codes.json`).
    pub fn refuse(code: &str, message: impl Into<String>) -> ConnectReply {
        ConnectReply::refused(Refusal { code: code.into(), message: message.into() })
    }

    /// The reply carrying `refusal`.
    pub fn refused(refusal: Refusal) -> ConnectReply {
        ConnectReply { hubwire: LINK_VERSION, link: None, replica: None, provider: None, error: Some(refusal) }
    }
}

/// Reads a connect request body as an acceptor must (§13.2), or the
/// refusal to answer it with.
pub fn parse_request(body: &[u8]) -> Result<ConnectRequest, Refusal> {
    let refuse = |code: &str, message: String| Refusal { code: code.into(), message };
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| refuse("protocol_error", format!("connect request is not JSON: {e}")))?;
    let version = v.get("hubwire").and_then(|x| x.as_u64());
    if version.is_some() && version != Some(LINK_VERSION as u64) {
        return Err(refuse(
            "unsupported_version",
            format!("link protocol {} not spoken; this replica speaks {LINK_VERSION}", version.unwrap_or(0)),
        ));
    }
    serde_json::from_value(v).map_err(|e| refuse("protocol_error", format!("bad connect request: {e}")))
}
