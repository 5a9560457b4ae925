//! The hubwire wire protocol, version 1, as a pure codec: bytes in, frames
//! out, and frames in, bytes out. No I/O, no async, no allocation beyond the
//! frames themselves. `spec/PROTOCOL.md` is the normative text; this crate is
//! its reference implementation and is tested against `spec/vectors/`.
//!
//! Modules, in the order a reader meets them on the wire:
//!
//! * [`codes`] — the status-code table of `spec/errors.md`.
//! * [`frame`] — the [`Frame`] enum, its header constants and the encoders.
//! * [`decode`] — [`Decoder`]: a cheap completeness check on the 12-byte
//!   header, then a strict parse of the body.
//! * [`hello`] — the handshake body ([`Hello`]) and version negotiation.
//! * [`name`] — [`Name`], a REQUEST's method name, shared with its frame.
//! * [`error`] — [`FrameError`], the one error type of this layer.

pub mod codes;
pub mod decode;
pub mod direct;
pub mod error;
pub mod frame;
pub mod hello;
pub mod name;

pub use codes::Code;
pub use decode::Decoder;
pub use direct::{AcceptBody, DirectOffer, Via};
pub use error::FrameError;
pub use frame::{id_after, Codec, Frame, FrameType, Kind, DEFAULT_MAX_FRAME, HEADER_LEN, VERSION};
pub use hello::{negotiate, Hello, MethodInfo, PeerInfo, Token, HELLO_LIMIT};
pub use name::Name;
