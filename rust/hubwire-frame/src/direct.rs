//! The bodies of the direct path's two frames (`spec/PROTOCOL.md` §14.2):
//! DIRECT (0x0D, a hub tells a client where a direct connection to a
//! provider replica is) and ACCEPT (0x0E, a hub tells a replica to serve a
//! connection). Both are JSON objects, read like HELLO: unknown fields
//! ignored, a missing or mistyped field a `protocol_error`.

use serde::{Deserialize, Serialize};

use crate::FrameError;

/// How a DIRECT's connection is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// The frame carries a descriptor: the client's end of a socketpair.
    Fd,
    /// Dial [`DirectOffer::address`].
    Address,
}

/// The body of DIRECT (§14.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirectOffer {
    /// The provider the connection reaches.
    pub provider: String,
    /// Which of its replicas.
    pub replica: u32,
    /// Every method of that provider: route them over the connection.
    pub methods: Vec<String>,
    /// A descriptor, or an address to dial.
    pub via: Via,
    /// With `via: address`: `unix:PATH` or `tcp:HOST:PORT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// With `via: address`: the token the replica's listener requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<crate::Token>,
}

/// The body of ACCEPT (§14.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcceptBody {
    /// Who the connection is for, for logs.
    pub client: String,
}

/// Parses a DIRECT or ACCEPT body: a JSON object (read as a value first,
/// so a duplicate key keeps its last value, as in HELLO), typed.
pub(crate) fn parse<T: for<'de> Deserialize<'de>>(what: &str, body: &[u8]) -> Result<T, FrameError> {
    let bad = |e: String| FrameError::protocol(format!("invalid {what} body: {e}"));
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    if !v.is_object() {
        return Err(bad(format!("not a JSON object: {v}")));
    }
    serde_json::from_value(v).map_err(|e| bad(e.to_string()))
}

impl DirectOffer {
    pub(crate) fn check(self) -> Result<DirectOffer, FrameError> {
        if self.via == Via::Address && self.address.is_none() {
            return Err(FrameError::protocol("invalid DIRECT body: via address without an address"));
        }
        Ok(self)
    }
}
