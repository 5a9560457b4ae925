//! Status codes: the one table of `spec/errors.md` (and `spec/codes.json`).
//! A code is one byte on the wire, in RESPONSE and GOAWAY frames.

use std::fmt;

/// A hubwire status code. The discriminant is the byte on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Code {
    /// The call succeeded.
    Ok = 0,
    /// A typed error the method declares; the payload carries its value.
    Failure = 1,
    /// A bug or crash in the handler (a panic, an undeclared error).
    Defect = 2,
    /// No method of that name on this connection.
    UnknownMethod = 3,
    /// Input did not decode or validate, wrong call kind, or wrong codec.
    InvalidArgument = 4,
    /// The call's deadline passed.
    DeadlineExceeded = 5,
    /// The call was cancelled by the caller or aborted by the callee.
    Cancelled = 6,
    /// The peer is gone or going; retry calls it never saw.
    Unavailable = 7,
    /// A limit was hit: concurrent calls, flow-control credit.
    ResourceExhausted = 8,
    /// A frame or payload over the receiver's `max_frame`.
    TooLarge = 9,
    /// Malformed or unexpected frame, bad handshake.
    ProtocolError = 10,
    /// No common protocol version, or a frame of the wrong version.
    UnsupportedVersion = 11,
    /// The hubwire implementation itself failed on the caller's side.
    Internal = 12,
    /// The peer did not prove who it is (a missing or wrong token, a uid
    /// or certificate not allowed).
    Unauthenticated = 13,
}

impl Code {
    /// Every code, in wire order.
    pub const ALL: [Code; 14] = [
        Code::Ok,
        Code::Failure,
        Code::Defect,
        Code::UnknownMethod,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::Cancelled,
        Code::Unavailable,
        Code::ResourceExhausted,
        Code::TooLarge,
        Code::ProtocolError,
        Code::UnsupportedVersion,
        Code::Internal,
        Code::Unauthenticated,
    ];

    /// The code for a wire byte, or `None` for a reserved value (14–255).
    pub fn from_u8(b: u8) -> Option<Code> {
        Code::ALL.get(b as usize).copied()
    }

    /// The name used in APIs, logs, vectors and the conformance suite.
    pub fn name(self) -> &'static str {
        match self {
            Code::Ok => "ok",
            Code::Failure => "failure",
            Code::Defect => "defect",
            Code::UnknownMethod => "unknown_method",
            Code::InvalidArgument => "invalid_argument",
            Code::DeadlineExceeded => "deadline_exceeded",
            Code::Cancelled => "cancelled",
            Code::Unavailable => "unavailable",
            Code::ResourceExhausted => "resource_exhausted",
            Code::TooLarge => "too_large",
            Code::ProtocolError => "protocol_error",
            Code::UnsupportedVersion => "unsupported_version",
            Code::Internal => "internal",
            Code::Unauthenticated => "unauthenticated",
        }
    }

    /// The code with this name, as spelled in `spec/errors.md`.
    pub fn from_name(name: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.name() == name)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
