//! The error type of the frame layer.

use std::fmt;

use crate::Code;

/// Why bytes could not be turned into a frame (or a frame into bytes).
///
/// The code is one of `protocol_error`, `too_large` or
/// `unsupported_version`; the message is meant for the peer (it goes into
/// the GOAWAY) and for a human reading logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameError {
    /// The status code of `spec/errors.md`.
    pub code: Code,
    /// What exactly was wrong, e.g. `unknown frame type 0x0b`.
    pub message: String,
}

impl FrameError {
    /// A `protocol_error` with a message.
    pub fn protocol(message: impl Into<String>) -> Self {
        FrameError { code: Code::ProtocolError, message: message.into() }
    }

    /// An error with any code.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        FrameError { code, message: message.into() }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for FrameError {}
