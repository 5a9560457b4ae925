//! The error type of the runtime: a status code from `spec/errors.md`, a
//! message for humans and, for `failure`, the typed value the method
//! declared.

use std::fmt;

use bytes::Bytes;
use hubwire_frame::{Codec, FrameError};

pub use hubwire_frame::Code;

use crate::codec::{Message, Payload};

/// What a call (or a connection) ended with, when it did not succeed.
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    code: Code,
    message: String,
    detail: Option<Payload>,
}

impl Error {
    /// An error with a code and a message.
    pub fn new(code: Code, message: impl Into<String>) -> Error {
        Error { code, message: message.into(), detail: None }
    }

    /// A typed failure the method declares: `value` travels to the caller,
    /// which reads it back with [`Error::failure_value`]. If `value` cannot
    /// be encoded, the result is a `defect` instead.
    pub fn failure<E: Message>(value: &E) -> Error {
        Error::failure_with(value, Codec::Msgpack)
    }

    pub(crate) fn failure_with<E: Message>(value: &E, codec: Codec) -> Error {
        let codec = E::codec_for(codec);
        match value.encode(codec) {
            Ok(bytes) => Error { code: Code::Failure, message: String::new(), detail: Some(Payload { codec, bytes }) },
            Err(e) => Error::defect(format!("failure value could not be encoded: {e}")),
        }
    }

    /// A bug in the handler.
    pub fn defect(message: impl Into<String>) -> Error {
        Error::new(Code::Defect, message)
    }

    /// Bad input.
    pub fn invalid_argument(message: impl Into<String>) -> Error {
        Error::new(Code::InvalidArgument, message)
    }

    /// The peer is gone or going.
    pub fn unavailable(message: impl Into<String>) -> Error {
        Error::new(Code::Unavailable, message)
    }

    /// The call was cancelled.
    pub fn cancelled(message: impl Into<String>) -> Error {
        Error::new(Code::Cancelled, message)
    }

    /// The status code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The failure value, decoded as `E`, if this is a `failure` that has one.
    pub fn failure_value<E: Message>(&self) -> Option<Result<E, String>> {
        match (&self.detail, self.code) {
            (Some(p), Code::Failure) => Some(E::decode(p.clone())),
            _ => None,
        }
    }

    /// The raw detail payload (the failure value as sent).
    pub fn detail(&self) -> Option<&Payload> {
        self.detail.as_ref()
    }

    pub(crate) fn with_detail(code: Code, message: String, detail: Option<Payload>) -> Error {
        Error { code, message, detail }
    }

    pub(crate) fn detail_bytes(&self) -> (Codec, Bytes) {
        match &self.detail {
            Some(p) => (p.codec, p.bytes.clone()),
            None => (Codec::Raw, Bytes::new()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{}: {}", self.code, self.message)
        }
    }
}

impl std::error::Error for Error {}

impl From<FrameError> for Error {
    fn from(e: FrameError) -> Error {
        Error::new(e.code, e.message)
    }
}
