//! Payload codecs (`spec/PROTOCOL.md` §6): how a Rust value becomes the
//! bytes of a payload and back. [`Raw`] is the fast path, no encoding at
//! all; any serde type travels as MessagePack (the default) or JSON.

use bytes::Bytes;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::{json, Value};

pub use hubwire_frame::Codec;

use crate::one_value::check_msgpack;

/// A payload as it crosses the wire: its codec and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload {
    /// How `bytes` is encoded.
    pub codec: Codec,
    /// The encoded value.
    pub bytes: Bytes,
}

/// Raw bytes, sent as they are with codec `raw`: no serialization at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Raw(pub Bytes);

impl From<Bytes> for Raw {
    fn from(b: Bytes) -> Raw {
        Raw(b)
    }
}

impl From<Vec<u8>> for Raw {
    fn from(b: Vec<u8>) -> Raw {
        Raw(b.into())
    }
}

impl From<&'static [u8]> for Raw {
    fn from(b: &'static [u8]) -> Raw {
        Raw(Bytes::from_static(b))
    }
}

/// A value that can be a payload: every serde type, and [`Raw`].
pub trait Message: Sized + Send + 'static {
    /// Whether this type is raw bytes (any codec accepted, sent as `raw`).
    const RAW: bool;

    /// The codec to send with when the caller asked for `wanted`.
    fn codec_for(wanted: Codec) -> Codec {
        if Self::RAW {
            Codec::Raw
        } else if wanted == Codec::Raw {
            Codec::Msgpack
        } else {
            wanted
        }
    }

    /// Encodes the value with `codec`.
    fn encode(&self, codec: Codec) -> Result<Bytes, String>;

    /// Decodes a payload; the error says why it did not fit.
    fn decode(payload: Payload) -> Result<Self, String>;

    /// JSON Schema of the type, for HELLO. `{}` unless known.
    fn schema() -> Value {
        json!({})
    }

    /// The codec this value is already encoded in, if it carries one (a
    /// [`Payload`] does): it then travels with that codec whatever the
    /// stream's.
    fn codec_of(&self) -> Option<Codec> {
        None
    }
}

/// A payload passes through as it is, codec and all: for routers, which
/// move calls between connections without decoding them.
impl Message for Payload {
    const RAW: bool = false;

    fn encode(&self, _codec: Codec) -> Result<Bytes, String> {
        Ok(self.bytes.clone())
    }

    fn decode(payload: Payload) -> Result<Self, String> {
        Ok(payload)
    }

    fn codec_of(&self) -> Option<Codec> {
        Some(self.codec)
    }
}

impl Message for Raw {
    const RAW: bool = true;

    fn encode(&self, _codec: Codec) -> Result<Bytes, String> {
        Ok(self.0.clone())
    }

    fn decode(payload: Payload) -> Result<Self, String> {
        Ok(Raw(payload.bytes))
    }

    fn schema() -> Value {
        json!({"contentMediaType": "application/octet-stream"})
    }
}

impl<T: Serialize + DeserializeOwned + Send + 'static> Message for T {
    const RAW: bool = false;

    fn encode(&self, codec: Codec) -> Result<Bytes, String> {
        match codec {
            Codec::Json => serde_json::to_vec(self).map(Bytes::from).map_err(|e| e.to_string()),
            _ => rmp_serde::to_vec_named(self).map(Bytes::from).map_err(|e| e.to_string()),
        }
    }

    fn decode(payload: Payload) -> Result<Self, String> {
        match payload.codec {
            Codec::Msgpack => {
                // One value of the shared data model, whatever `T` would tolerate (§6.2).
                check_msgpack(&payload.bytes).map_err(|e| format!("msgpack: {e}"))?;
                rmp_serde::from_slice(&payload.bytes).map_err(|e| format!("msgpack: {e}"))
            }
            Codec::Json => serde_json::from_slice(&payload.bytes).map_err(|e| format!("json: {e}")),
            Codec::Raw => Err("expected structured input (msgpack or json), got raw bytes".into()),
        }
    }
}
